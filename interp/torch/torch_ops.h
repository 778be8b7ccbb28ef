// How Python-level operations map to graph ops: torch functions (registered from
// framejit's Python side by object), tensor method names, and operator opcodes.
#pragma once

#include "interp/compat.h"

#include <optional>
#include <string>
#include <vector>

#include "jit/ir/graph.h"
#include "jit/sym/symexpr.h"

namespace fj::interp {

// How a call's bound arguments become a graph node (see PyOp).
enum class Binding : uint8_t {
  Plain,        // the operand parameters are the op's operands, in order
  ClampBounds,  // clamp(input, min=None, max=None): a None bound drops (clamp_min / clamp_max)
  GeluApprox,   // gelu(input, approximate='none'): 'tanh' records GeluTanh
  Alpha,        // add / sub(input, other, alpha=1): other * alpha, then the op
  CastFixed,    // x.float() & co: a Cast to PyOp::dtype
  Tensor,       // a row of interp/torch/torch_ops.def: PyOp::tensor_op, lowered by
                // Tracer::call_tensor_op (interp/torch/tensor_ops.cpp)
};

// The non-pointwise ops that the tracer builds from several graph nodes or with
// arguments that are not operands (dims, sizes, dtypes): one per row of
// interp/torch/torch_ops.def, which also gives each its family, signature and lowering.
enum class TensorOp : uint8_t {
#define TORCH_OP(Enum, name, Family, First, varargs, ...) Enum,
#include "interp/torch/torch_ops.def"
};

// What kind of work a TensorOp is, and so which file lowers it.
enum class TensorFamily : uint8_t {
  Reduction,  // reductions and their decompositions (softmax, layer_norm): reductions.cpp
  View,       // views, movement and joins (view, permute, split, cat): views.cpp
  Indexing,   // index_select, gather, embedding: views.cpp
  Creation,   // factories and tensors shaped like another (zeros_like, tril): creation.cpp
  Matmul,     // extern kernels: matmul.cpp, einsum.cpp
  Convert,    // conversions and copies of a tensor, new_* factories: conversions.cpp
  Functional, // torch.nn.functional's ops built from graph ops (dropout, batch_norm): functional.cpp
  Number,     // a Python number read from a tensor (item)
};

// Whether the tracer checks that the first argument is a tensor before lowering.
enum class FirstArg : uint8_t { Tensor, Any };

TensorFamily family(TensorOp op);
FirstArg first_arg(TensorOp op);

// A parameter's default: None, a number, or a string.
struct ParamDefault {
  enum class Kind : uint8_t { Required, None, Int, Float, Bool, Str } kind = Kind::Required;
  double number = 0;
  const char* str = nullptr;
};

// A Python-level operation (a torch function, a tensor method, an operator): the
// graph op it records and its Python signature, so that calls with keyword
// arguments bind by name. The first `operands` parameters are graph operands; the
// rest are options that the Binding reads (Plain: each must equal its default,
// e.g. inplace=False, decimals=0). An unknown keyword, a missing argument or an
// option with another value ends the trace (CPython then runs the call).
struct PyOp {
  std::string name;                  // the Python-side table's name: "clamp"
  jit::Op op;
  std::vector<std::string> params;   // names in positional order, input/self first
  std::vector<ParamDefault> defaults;  // one per parameter
  size_t operands;
  Binding binding = Binding::Plain;
  jit::DType dtype = jit::DType::Float32;  // CastFixed: the target
  TensorOp tensor_op = TensorOp::Sum;      // Tensor: which op
  // Tensor: the parameter that collects the remaining positional arguments when
  // they are not one sequence (x.view(2, -1), torch.zeros(2, 3)); -1: none.
  int varargs = -1;
};

// A default as a Python object (new reference).
PyObject* default_object(const ParamDefault& d);

// The one-tensor pointwise ops that are callable by their ATen name: "exp" for
// aten.exp.default (torch.exp, Tensor.exp). The table binds each name with the
// signature (input) unless it lists the name with a signature of its own.
std::vector<std::string> unary_pointwise_names();
// The op for a name used by the Python-side table ("add", "relu", ...).
const PyOp* op_by_name(const std::string& name);
// Registers a torch callable (torch.relu, torch.nn.functional.relu, ...) as `op`.
// `tensor_first`: the callable rejects a Python number as its first argument (torch.eq(2.0, x)
// raises; operator.eq(2.0, x) and torch.pow(2, x) do not).
void register_torch_function(PyObject* fn, const PyOp* op, bool tensor_first);
bool takes_scalar_first(PyObject* fn);
// torch.no_grad and torch.enable_grad (registered at import), and their instances.
void register_grad_mode_class(PyObject* cls);
bool is_grad_mode_class(PyObject* obj);
bool is_grad_mode_manager(PyObject* obj);
void clear_torch_functions();
const PyOp* torch_function_op(PyObject* fn);
// Tensor methods with the same signature as the function (self first).
const PyOp* tensor_method_op(const std::string& name);
// BINARY_OP's argument (NB_ADD, ...) on tensors (`//`, `%`, `&`, `|`, `^` too).
std::optional<jit::Op> binary_tensor_op(int nb_op);
// The torch.Tensor dunders that BINARY_OP's argument reaches ("__add__", "__radd__").
std::vector<const char*> binary_dunders(int nb_op);
// COMPARE_OP's argument (Py_LT, ...) on tensors.
jit::Op compare_tensor_op(int cmp);
// BINARY_OP on symbolic scalars (nullopt for operators not traced symbolically).
std::optional<jit::SymExpr> binary_sym_op(int nb_op, const jit::SymExpr& a, const jit::SymExpr& b);
// COMPARE_OP on symbolic scalars.
jit::SymExpr compare_sym(int cmp, const jit::SymExpr& a, const jit::SymExpr& b);
// BINARY_OP on two Python numbers (new reference, or NULL with an error set).
PyObject* binary_number_op(int nb_op, PyObject* a, PyObject* b);

// framejit.extern's extern_reason, meta_call and vjp, and torch.from_dlpack, for
// extern calls (interp/torch/extern_ops.cpp); registered at import.
// Whether x.name(...) may run as torch.name(x, ...), an extern call.
bool extern_method(const std::string& name);
void set_extern_helpers(PyObject* reason, PyObject* meta_call, PyObject* vjp, PyObject* from_dlpack);

}  // namespace fj::interp
