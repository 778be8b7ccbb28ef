// Plans: what a cache hit runs instead of the frame.
//
// Design: tracing a frame yields a Plan: a list of steps (plan_steps.cpp runs them)
// followed by a final graph and the frame's return value, rebuilt from graph
// outputs, arguments, registers, constants and symbolic scalars (PlanValue, a small
// tree). Scalars are SymExprs over the symbols that the entry's guards bound for
// this call. A frame traced in one piece has no steps (the common, fast case).
// Steps are what a graph break or a data-dependent branch leaves:
//   RunGraph    a graph segment; its outputs go to registers (PyRefs of this run)
//   Call        an opaque Python call (print, list.append, ...) on values built from
//               arguments and registers; its result is checked like a guard
//   CheckGuards what the trace read after an opaque call, checked at that point
//   Branch      on a one-element tensor's truth: each outcome continues in a Plan of
//               its own, traced the first time that outcome occurs
//   Deopt       the rest of the frame runs in CPython: the frame's locals and stack
//               are rebuilt from the plan's values and CPython resumes it mid-code
//   View        a register made a view of an input or of another register (a tensor
//               view live at a graph break: it stays a view of its base, as in eager)
// A failing CheckGuards also deopts, at the state saved after the call. A Call whose
// result fails its check (a tensor of other sizes, another number) goes on in the Plan
// traced for that kind of result (CallOutcomes), traced the first time one occurs, up
// to cache_limit of them; past that the rest runs in CPython (deopt). A Call inside a
// try block that raises hands the frame to CPython at its handler (PlanStep::unwind).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "guards/guards.h"
#include "interp/trace/value.h"
#include "jit/cpu/cpu_backend.h"

namespace fj::interp {

struct CodeState;

struct PlanValue {
  enum class Kind : uint8_t { GraphOutput, Arg, PathTensor, Const, Tuple, List, Size, Sym, Repeat, Item, Reg, Null, Dict, Iter, View, Object, Method, Stores, Function, Cell } kind = Kind::Const;
  // Stores: items[0] built; then (target, key, value) triples in items[1...], stored in
  // order as `target[key] = value`: the frame's global assignments (globals dict, name,
  // value: STORE_GLOBAL) and the new items of argument lists it changed (the list,
  // slice(None), a List), as the frame returns or as a graph break's call starts.
  // Function: a function the frame made, made anew from obj (the traced one: its code,
  // globals, constant defaults, annotations): items[0] its defaults and items[1] its
  // keyword defaults where traced (else Null), then one Cell per free variable (a new
  // cell holding items[0], empty where that is Null).
  // View: a view of an input, made from it at run time so that it aliases it as eager's
  // does: items[0] the input, then one Tuple per step: ("permute", dims),
  // ("reshape" | "expand", size...), ("select", dim, index), ("slice", dim, start, length, step).
  int index = -1;               // GraphOutput, Item (a 0-d output as a Python number): output position;
                                // Arg: argument slot; PathTensor: its slot;
                                // Repeat: the memo of a tuple or list built earlier in the same value;
                                // Reg: the register; Iter: when >= 0, the iterator is of the
                                // list items[0], advanced this many items
  int memo = -1;                // Tuple, List, Dict, Object, Function, Cell: where the built object is remembered for Repeat
  int reg = -1;                 // List, Dict or Object passed to an opaque call: the built object is also kept here;
                                // Item: the 0-d tensor is in this register (not a graph output)
  PyRef obj;                    // Const; Tuple: when set, the type built from the tuple; Dict: when set,
                                // what makes an empty one of its class (OrderedDict); Sym: the
                                // NumPy scalar type the number is made as, when set; Method:
                                // the name of items[0]'s method, read as a value
                                // (torch.return_types.max)
  std::vector<PlanValue> items; // Tuple, List, Size (a torch.Size), Iter (the items still to come),
                                // Dict (key, value, key, value, ...), Object (name, value, ...;
                                // obj is its class: object.__new__(obj), then each attribute set)
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
// The spec of a graph output computed by node `n` (its shape precomputed where static).
OutputSpec output_spec(const jit::Node& n);

// Where a graph input comes from: an argument slot, a path tensor (CallInputs), or a
// register of the running plan.
struct InputRef {
  enum class Kind : uint8_t { Arg, Path, Reg } kind = Kind::Arg;
  int index = -1;
};

// A graph input that the frame updated in place: once the graph has run, its output
// `output` (the input's new value) is copied into the input tensor itself.
struct WriteBack {
  int output = -1;
  InputRef target;
};

// A graph run in the middle of a plan (RunGraph): its outputs go to registers.
struct Segment {
  std::shared_ptr<jit::CompiledGraph> graph;
  std::vector<InputRef> args;              // one per placeholder
  std::vector<jit::SymExpr> scalar_inputs;
  std::vector<OutputSpec> outputs;
  std::vector<int> out_regs;               // one per output
};

// A frame state to resume in CPython: the instruction and each local and stack slot.
struct DeoptState {
  int offset = 0;                          // byte offset of the next instruction
  std::vector<PlanValue> locals;           // Null for unbound
  std::vector<PlanValue> stack;
  int num_memos = 0;
  std::string reason;                      // why the rest runs in CPython (logs)
  // The instruction is a raise that leaves the frame (no handler of the frame takes it):
  // CPython runs that one instruction and unwinds out, so the frame ends there as a
  // return would; not a graph break, not counted as a deopt.
  bool raise_exit = false;
};

// What an opaque call's result must be for the trace after it to hold.
struct ResultCheck {
  enum class Kind : uint8_t { Any, Is, Equals, Tensor, Type, Never } kind = Kind::Any;
  PyRef obj;                               // Is: this object; Equals: equal to it, same type;
                                           // Type: of exactly this class (an opaque result whose
                                           // class the trace asked: isinstance, `is None`);
                                           // Never: the call raised while tracing (no result
                                           // has a traced continuation yet)
  guards::TensorMeta meta;                 // Tensor: dtype, rank, sizes (strides are free, but:)
  bool contiguous = false;                 // Tensor: the traced result was contiguous, and the trace
                                           // took views of it as of one (x.view(-1)): so must this be
};

// Whether a tensor's layout is contiguous as torch says it (size-1 dims and empty
// tensors count as contiguous).
bool is_contiguous(const guards::TensorMeta& m);

struct Plan;
struct ResumePoint;  // the tracer's saved state at a branch (tracer.h)

// The truth of a one-element tensor that a branch of the trace took where the plan
// could not branch itself (inside an inlined call, or in a frame whose graph cannot be
// cut): an entry serves only calls for which the condition's own graph, run on the
// entry's inputs, gives the same truth. Tracing anew then takes the other way.
struct DataCheck {
  Segment seg;  // one output: the condition
  bool truth = false;
};

// The two continuations of a branch, filled in as outcomes occur.
struct BranchTargets {
  std::shared_ptr<Plan> next[2];           // [false, true]
  int offset[2] = {0, 0};                  // where each outcome continues (for deopt)
  std::shared_ptr<const ResumePoint> resume;
};

// The continuations of an opaque call for results its check rejects: each traced the
// first time a result that none of them accepts occurs.
struct CallOutcomes {
  struct Outcome {
    ResultCheck check;
    std::shared_ptr<Plan> next;
  };
  std::vector<Outcome> seen;
  int traced = 0;                             // continuations traced, kept or not
  std::shared_ptr<const ResumePoint> resume;  // the state after the call, its result popped
};

struct PlanStep {
  enum class Kind : uint8_t { RunGraph, Call, CheckGuards, Branch, Deopt, View } kind = Kind::RunGraph;
  Segment seg;                             // RunGraph
  PlanValue callable;                      // Call
  PlanValue args;                          // Call: a Tuple
  PyRef kw_names;                          // Call: names of the last arguments, or null
  int result_reg = -1;                     // Call, View; CheckGuards with `retrace`
  PlanValue view;                          // View: a PlanValue::View of an argument, path tensor or register
  int offset = -1;                         // Call: the CALL instruction's byte offset (the frame's
                                           // current instruction while it runs: line numbers)
  ResultCheck check;                       // Call
  std::shared_ptr<guards::GuardSet> guards;  // CheckGuards
  std::shared_ptr<DeoptState> deopt;       // Call / CheckGuards failing; Deopt; Branch (its state)
  int num_memos = 0;                       // Call: tuples and lists its arguments repeat
  PlanValue cond;                          // Branch: a one-element tensor
  std::shared_ptr<BranchTargets> branch;   // Branch
  std::shared_ptr<CallOutcomes> outcomes;  // Call: continuations for other results
  std::weak_ptr<CallOutcomes> retrace;     // CheckGuards of the reads right after a call (result_reg):
                                           // when they fail, that call's other continuations are
                                           // tried, or one is traced for this call
  std::shared_ptr<DeoptState> unwind;      // Call inside a try block: the frame at the call, where
                                           // CPython takes over an exception the call raises
};

// The autograd half of a plan whose graph reads tensors that require grad (with grad
// mode on): the compiled graph is the forward of a joint pair (jit/autodiff/autodiff.h) and
// runs inside a torch.autograd.Function (py/framejit/autograd.py), whose backward
// runs `backward` with the forward call's scalars and symbol values
// (interp/runtime/autograd_runtime.cpp).
struct JointPlan {
  std::shared_ptr<jit::CompiledGraph> forward;   // = Plan::graph
  std::shared_ptr<jit::CompiledGraph> backward;
  size_t num_outputs = 0;          // the frame's outputs; forward outputs past them are saved values
  std::vector<OutputSpec> forward_outputs;  // all of the forward's outputs
  // Each backward placeholder before the output gradients: a forward input, a
  // forward output (the frame's or a saved one), by index.
  struct Saved {
    bool input;
    int index;
  };
  std::vector<Saved> saved;
  std::vector<bool> differentiable;  // per frame output; else marked non-differentiable
  size_t num_inputs = 0;             // the forward's inputs (= Plan::graph_args)
  std::vector<int32_t> grad_inputs;  // the forward input of each backward output
  std::vector<bool> grad_defined;    // per backward output: else None (eager's autograd never reaches it)
  std::vector<OutputSpec> grads;     // the backward's outputs
  bool enable_grad = false;          // grad mode is off at entry (on in a with block)
};

struct Plan {
  std::vector<PlanStep> steps;                // run first; a Branch or Deopt step ends the plan
  std::shared_ptr<jit::CompiledGraph> graph;  // null when there is no graph to run
  std::vector<InputRef> graph_args;           // source of each placeholder
  std::vector<jit::SymExpr> scalar_inputs;    // value of each scalar_input node
  std::vector<jit::SymExpr> must_evaluate;    // other expressions the plan computes (results, sizes)
  int num_memos = 0;                          // tuples and lists returned more than once
  std::vector<OutputSpec> outputs;
  PlanValue ret;
  std::shared_ptr<DeoptState> tail_deopt;     // the final graph failing after an opaque call
  std::shared_ptr<const JointPlan> joint;     // set when the graph's results need autograd
  std::vector<WriteBack> writes;              // inputs updated in place, written after the graph
  std::vector<DataCheck> data_checks;         // checked with the entry's guards, before any step
};

// Evaluates the plan's scalar inputs for these bindings; false when one of them or
// of the plan's other expressions has no value (a division by zero, an overflow):
// the call then runs in CPython, which raises or computes with big ints.
bool eval_scalars(const Plan& plan, const jit::Bindings& b, std::vector<double>* out);
// What a running plan holds: the call's inputs and symbol values, the registers, and
// the frame (to resume it in CPython or to trace a branch's new outcome).
struct PlanRun {
  const guards::CallInputs& in;
  const jit::Bindings& b;
  std::vector<PyRef> regs;
  CodeState* st = nullptr;
  compat::Frame* frame = nullptr;
  bool extern_failed = false;  // a graph's extern call raised or gave other sizes than traced
};

// The truth of a data check's condition for this call: 0 or 1, or -1 when its graph
// could not run (the error is cleared; KeyboardInterrupt & co are kept aside).
int data_check_truth(const Segment& seg, const guards::CallInputs& in, const jit::Bindings& b);
// Whether every data check of the plan gives its traced truth for this call.
bool data_checks_hold(const Plan& plan, const guards::CallInputs& in, const jit::Bindings& b);
// Runs a plan on a call's inputs; a new reference, or nullptr with a Python error,
// or nullptr without one when the frame must run in CPython instead (a kernel found
// an index out of range: eager raises the error; only before any opaque call ran).
// `st` and `frame` serve plans with steps (deopt, tracing a branch's new outcome).
PyObject* run_plan(const Plan& plan, const guards::CallInputs& in, const jit::Bindings& b,
                   const std::vector<double>& scalars, CodeState* st = nullptr,
                   compat::Frame* frame = nullptr);
// The functions below run Python code and follow CPython's convention: a new
// reference (or true), or nullptr (false) with a Python error set, unless said otherwise.
// plan_steps.cpp: runs the plan's steps and then its final graph and return value.
PyObject* run_steps(const Plan& plan, PlanRun& run);
// Register `reg` of the running plan holds `value` from now on.
void set_reg(PlanRun& run, int reg, PyRef value);
// Runs one step (not Branch or Deopt); false with a Python error set, or with
// *deopt set when a check failed and the rest must run in CPython.
bool run_step(const PlanStep& step, PlanRun& run, const DeoptState** deopt);
// Runs the final graph and builds the return value (scalars evaluated here); nullptr
// without an error when the frame must run in CPython (as run_plan).
PyObject* run_tail(const Plan& plan, PlanRun& run);
// Rebuilds the frame from `state` and lets CPython run the rest of it; `raising`: with
// the Python error set now raised by the instruction at state.offset (its handler runs).
PyObject* resume_in_cpython(const DeoptState& state, PlanRun& run, bool raising = false);
// A PlanValue::View: the steps applied to the input (a new reference, or nullptr with an error).
PyObject* build_view(const PlanValue& v, PlanRun& run, const std::vector<PyRef>& outs, std::vector<PyObject*>& memo);
// t itself, or for a NumPy array argument the tensor of its memory (torch.from_numpy).
PyRef as_torch_tensor(PyObject* t);
// Builds a plan value (tensors and objects from arguments and registers).
PyObject* build_value(const PlanValue& v, PlanRun& run, const std::vector<PyRef>& outs,
                      std::vector<PyObject*>& memo);
// How a graph run ended.
enum class GraphRun {
  Ok,
  PythonError,  // a Python error is set
  // A kernel found an index out of range (or an int() without a value), or a size of
  // this call passes int64 (checked before anything is allocated); no Python error
  // is set: the frame runs in CPython, which raises eager's own error.
  RunInCPython,
};
// Runs a graph on inputs from arguments, path tensors and registers; outputs new tensors.
GraphRun run_graph(const jit::CompiledGraph& g, const std::vector<InputRef>& args,
               const std::vector<OutputSpec>& outputs, const std::vector<double>& scalars, PlanRun& run,
               std::vector<PyRef>* outs);
// A tensor's data pointer (tensor.data_ptr()); nullptr with a Python error set when it
// cannot be read (a real null pointer, of an empty tensor, leaves no error).
void* data_ptr(PyObject* tensor);

// interp/runtime/interrupt.cpp: registers the kernel runtime's stop poll, which runs
// Python's signal handlers between pieces of a long loop (once, when the module loads).
void install_stop_poll();
// A CompiledGraph::run status of a run that a signal handler ended: its Python error
// (KeyboardInterrupt) is set once the GIL is back.
bool interrupted(int64_t status);
bool extern_failed(int64_t status);

// interp/runtime/autograd_runtime.cpp: a plan with a JointPlan, run through the autograd
// Function so that its outputs carry the compiled backward (same contract as run_plan).
PyObject* run_joint_plan(const Plan& plan, PlanRun& run, const std::vector<double>& scalars);
// Copies the new values of inputs updated in place into them (WriteBack), in order;
// false with a Python error set.
bool write_back(const std::vector<WriteBack>& writes, const std::vector<PyRef>& outs, PlanRun& run);
double sym_value_to_double(const jit::SymValue& v);
// A graph scalar input's slot (jit/codegen/schedule.h): a double for a float, the int64 bit
// pattern for an int or bool; scalar_kind_of says which kind the node must have.
double scalar_slot(const jit::SymValue& v);
jit::ScalarKind scalar_kind_of(const jit::SymValue& v);
// torch.float32 & co for a DType (borrowed), and back.
PyObject* torch_dtype(jit::DType d);
std::optional<jit::DType> dtype_from_torch(PyObject* dtype);
// A SymValue as a Python int, float or bool (new reference).
PyObject* sym_value_to_python(const jit::SymValue& v);

}  // namespace fj::interp
