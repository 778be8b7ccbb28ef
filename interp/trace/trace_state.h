// The records the tracer keeps besides its own state (interp/trace/tracer.h): call
// sites, extern calls and their meta runs, resume points, graph and autograd state
// swapped for custom Functions, and the frame being traced.
#pragma once

#include "interp/compat.h"

#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "interp/code_state.h"
#include "interp/torch/torch_ops.h"
#include "interp/trace/bytecode.h"
#include "interp/trace/value.h"

namespace fj::interp {

// Where an extern call's operand goes among its arguments: args[pos] (key null) or
// kwargs[key], and inside a list or tuple there at `item` (-1: the argument itself).
struct ExternSlot {
  int pos = -1;
  PyRef key;
  int item = -1;
};

// The tracer's state at a plan branch or after an opaque call, for tracing another
// outcome or result from there later.
struct ResumePoint {
  FrameState state;  // the root frame after the branch popped its condition
  struct Input {
    InputRef ref;
    jit::DType dtype;
    jit::SymShape sym;
    bool noncontig = false;  // eager's layout may be non-contiguous (see Tracer::noncontig_)
  };
  std::vector<Input> inputs;  // the placeholders of the segment that starts at the branch
  std::vector<std::string> symbol_sources;
  int next_identity = 0;
  std::unordered_set<int> iterated_lists;  // Tracer::iterated_lists_ then
  int num_regs = 0;
  int path_slots = 0;  // Tracer::path_slots_ then
  size_t pc[2] = {0, 0};  // instruction index where each outcome (false, true) continues;
                          // after a call, both the next instruction
};

// How a Value becomes a PlanValue (return values, call arguments, saved frame states).
struct ConvertCtx {
  std::unordered_map<jit::NodeId, int>* output_index = nullptr;  // final graph: tensors may be outputs
  std::vector<jit::NodeId>* outputs = nullptr;
  std::unordered_map<int, int> memo_of;  // Value::identity -> PlanValue::memo
  std::map<PyObject*, int> object_memo;  // a function the frame made -> PlanValue::memo
  std::map<std::pair<const void*, int>, int> cell_memo;  // a traced variable (frame, slot) -> its cell's memo
  int num_memos = 0;
  bool frame_state = false;              // a frame state: NULLs, iterators and fresh functions allowed
  int* next_reg = nullptr;               // call arguments: lists built here are also kept in registers
  std::unordered_map<int, int> list_regs;  // identity of a list or dict -> register
};

struct CallSite {
  Value callable;
  std::vector<Value> args;  // self first for a method
  PyRef kw_names;           // KW_NAMES of this call, if any
  const Instruction* ins = nullptr;
  bool can_break = false;   // an untraceable call may become a graph break
  jit::Graph::Mark before;  // the graph before the call, rolled back for a break
  std::vector<Value> orig_args;  // the arguments as called, kept where can_break
  bool no_break = false;    // a call a handler makes (call_value): never a graph break
};

struct KnownObjects {  // what known_object made, and the values they stand for
  std::unordered_map<PyObject*, Value> values;
  std::vector<PyRef> keep;
  PyRef last_key;
};

// An argument the function iterates, another argument (a count), or an item inside one.
enum class StructuralRole : uint8_t { Iterated, Argument, Item };

struct ExternCallArgs {
  std::vector<jit::NodeId> operands;
  std::vector<ExternSlot> slots;  // per operand
  PyRef args, kwargs;             // the templates: None where an operand goes
};

struct ExternResult {
  struct Tensor {
    jit::DType dtype;
    jit::Shape sizes;
    bool contiguous = true;
  };
  std::vector<Tensor> tensors;  // one per result tensor
  PyRef kind;                   // null: one tensor; else the type of the tuple of them
  bool random = false;          // draws from torch's generator
  bool needs_grad = false;      // eager's result requires grad (asked only with grad flags)
};

// The meta runs of this trace by function, constant arguments and operand sizes: the
// layers of a network ask the same ones (a run is about a millisecond).
struct MetaRun {
  PyRef fn;  // keeps the function's address from being reused while cached
  std::optional<std::string> error;
  ExternResult result;
};

// What belongs to the graph being recorded; a custom Function's backward is traced
// into a fragment of its own by swapping this out and back.
struct GraphState {
  jit::Graph graph;
  std::vector<bool> noncontig;
  size_t synced_scalars = 0;
  std::vector<InputRef> slots;
  std::vector<jit::NodeId> scalar_nodes;
  std::vector<jit::SymExpr> scalar_inputs;
  std::vector<bool> requires_grad;
  std::vector<int8_t> node_grad;
};

// A custom autograd.Function's ctx while its forward and backward are traced.
struct AutogradCtx {
  std::vector<std::pair<std::string, Value>> attrs;  // set on ctx, in order
  std::vector<Value> saved;                          // save_for_backward's arguments
  std::vector<jit::NodeId> non_differentiable;       // mark_non_differentiable's
  std::vector<bool> needs_input_grad;
  bool in_backward = false;
  const jit::Graph* forward = nullptr;               // in backward: the forward graph
  std::vector<std::pair<jit::NodeId, jit::NodeId>> captured;  // forward node -> fragment placeholder
};

// One call of a table op: its row, its arguments (one per parameter), the name its
// errors use ("sum()") and, where the row's first argument is a tensor, its node.
struct OpCall {
  const PyOp& op;
  const std::vector<Value>& a;
  std::string what;
  jit::NodeId x;
};

// Defaults of a function made in the frame that are traced values (a symbolic
// number, a tensor): its inlined calls bind these instead of the function object's.
struct MadeDefaults {
  PyRef fn;  // keeps the key's address from being reused
  Value defaults, kwdefaults;  // a Tuple and a Dict, or Null for the object's own
};

struct ContextSet {  // a ContextVar.set() of the frame, not reset yet
  PyRef var;
  Value value;
  PyRef token;
};

// The frame being traced: the root frame or an inlined callee.
struct FrameCtx {
  FrameState* fs;
  const DecodedCode* code;
  PyCodeObject* co;
  PyObject* globals;         // borrowed
  PyObject* builtins;        // borrowed
  PyObject* guard_globals;   // for guards: nullptr = the call's own globals
  PyObject* guard_builtins;  // for guards: nullptr = the call's own builtins
  int depth;                 // 0 for the root frame
  PyObject* closure = nullptr;  // borrowed: an inlined function's cells
};

}  // namespace fj::interp
