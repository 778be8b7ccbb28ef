// Plans: what a cache hit runs instead of the frame.
//
// Design: tracing a frame yields a Plan. In this version a plan has one step, "run
// the compiled graph on these arguments and scalars", followed by the frame's
// return value rebuilt from graph outputs, arguments, constants and symbolic
// scalars (PlanValue, a small tree). Scalars are SymExprs over the symbols that the
// entry's guards bound for this call.
// Graph breaks and data-dependent branches will become further steps.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "guards/guards.h"
#include "interp/value.h"
#include "jit/cpu_backend.h"

namespace fj::interp {

struct PlanValue {
  enum class Kind : uint8_t { GraphOutput, Arg, PathTensor, Const, Tuple, List, Size, Sym, Repeat, Item } kind = Kind::Const;
  int index = -1;               // GraphOutput, Item (a 0-d output as a Python number): output position; Arg: argument slot; PathTensor: its slot;
                                // Repeat: the memo of a tuple or list built earlier in the same value
  int memo = -1;                // Tuple, List: where the built object is remembered for Repeat
  PyRef obj;                    // Const; Tuple: when set, the type built from the tuple
                                // (torch.return_types.max)
  std::vector<PlanValue> items; // Tuple, List, Size (a torch.Size)
  jit::SymExpr expr;            // Sym: a Python int, float or bool computed from symbols
};

struct OutputSpec {
  jit::DType dtype = jit::DType::Float32;
  jit::SymShape sym;               // sizes, evaluated at each call when not static
  bool is_static = false;          // then shape, strides and empty_args are precomputed:
  jit::Shape shape;
  std::vector<int64_t> strides;    // contiguous
  PyRef empty_args;                // ((sizes...),): the positional arguments of torch.empty
};

std::vector<int64_t> contiguous_strides(const jit::Shape& shape);
PyRef empty_args_for(const jit::Shape& shape);

struct Plan {
  std::shared_ptr<jit::CompiledGraph> graph;  // null when there is no graph to run
  std::vector<int> graph_args;                // argument slot of each placeholder; -1-k: path tensor k
  std::vector<jit::SymExpr> scalar_inputs;    // value of each scalar_input node
  std::vector<jit::SymExpr> must_evaluate;    // other expressions the plan computes (results, sizes)
  int num_memos = 0;                          // tuples and lists returned more than once
  std::vector<OutputSpec> outputs;
  PlanValue ret;
};

// Evaluates the plan's scalar inputs for these bindings; false when one of them or
// of the plan's other expressions has no value (a division by zero, an overflow):
// the call then runs in CPython, which raises or computes with big ints.
bool eval_scalars(const Plan& plan, const jit::Bindings& b, std::vector<double>* out);
// Runs a plan on a call's inputs; a new reference, or nullptr with a Python error,
// or nullptr without one when the frame must run in CPython instead (a kernel found
// an index out of range: eager raises the error).
PyObject* run_plan(const Plan& plan, const guards::CallInputs& in, const jit::Bindings& b,
                   const std::vector<double>& scalars);
double sym_value_to_double(const jit::SymValue& v);
// A graph scalar input's slot (jit/cpu_lower.h): a double for a float, the int64 bit
// pattern for an int or bool; scalar_kind_of says which kind the node must have.
double scalar_slot(const jit::SymValue& v);
jit::ScalarKind scalar_kind_of(const jit::SymValue& v);
// torch.float32 & co for a DType (borrowed), and back.
PyObject* torch_dtype(jit::DType d);
std::optional<jit::DType> dtype_from_torch(PyObject* dtype);
// A SymValue as a Python int, float or bool (new reference).
PyObject* sym_value_to_python(const jit::SymValue& v);

}  // namespace fj::interp
