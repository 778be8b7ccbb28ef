// The tracer: the state of one symbolic execution of a frame (and of the calls it
// inlines), shared by the opcode handlers in interp/trace/ops_*.cpp and the torch ops
// in interp/torch/*.cpp.
//
// Design: a Tracer runs the bytecode of one frame on symbolic Values (value.h),
// recording tensor work into a jit::Graph, symbolic scalars into SymExprs, and every
// assumption into the entry's GuardSet. Each handler implements one opcode family and
// returns a Status: ok() to go on, or an Error with a reason, which ends the trace
// (the frame then runs in CPython and the reason is recorded with file:line).
// An inlined call switches `cur_` to a FrameCtx of its own and back.
#pragma once

#include "interp/compat.h"

#include <array>
#include <deque>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "interp/trace/bytecode.h"
#include "interp/code_state.h"
#include "interp/trace/ops_deque.h"
#include "interp/torch/torch_ops.h"
#include "interp/trace/trace_state.h"
#include "interp/trace/trace_support.h"
#include "interp/trace/value.h"
#include "jit/autodiff/autodiff.h"

namespace fj::interp {

class Tracer {
 public:
  Tracer(CodeState& st, compat::Frame* f, const guards::CallInputs& in, const DecodedCode& code)
      : st_(st), frame_(f), in_(in), entry_(std::make_unique<CacheEntry>()),
        grad_at_entry_(guards::grad_enabled()), grad_enabled_(grad_at_entry_) {
    cur_ = FrameCtx{&root_fs_, &code, st.code, in.globals, in.builtins, nullptr, nullptr, 0};
    plan_ = &entry_->plan;
  }

  std::unique_ptr<CacheEntry> run(Fallback* why);
  // Traces a branch's outcome from its saved state, runs it on `run`, attaches it.
  PyObject* resume(BranchTargets& targets, int outcome, PlanRun& run);
  // Traces the continuation of an opaque call for this run's result, runs it, and
  // adds it to `outcomes`.
  PyObject* resume_call(const std::shared_ptr<CallOutcomes>& outcomes, int result_reg, PlanRun& run);
  bool ran_ = false;     // the trace ran the call itself (plans with steps)
  PyRef result_;         // its result when ran_ (null: a Python error is set)
  Status execute(Value* result);
  Status inline_call(PyObject* fn, std::vector<Value> args, PyObject* kw_names);
  Status check_assumptions();

 private:
  using Handler = Status (Tracer::*)(const Instruction&);
  static const std::array<Handler, 256>& handlers();

  Status bind_arguments();
  std::optional<Value> numpy_argument(PyObject* a, const Source& src, int item);
  // The frame's *args tuple or **kwargs dict: its length (keys) guarded, each item an
  // input found by its path below it (ops_star.cpp).
  Status bind_star_parameter(PyObject* a, const Source& src, Value* out);
  // static_sizes: constant sizes (guarded) even with dynamic shapes, as for parameters.
  Status tensor_input(const guards::TensorMeta& meta, const std::string& source, jit::NodeId* node,
                      std::array<int, guards::kMaxRank>* dim_symbols, bool static_sizes = false);
  // obj.name of a value the frame can find again (an argument, a global, or an
  // attribute path from one), read the plain way and guarded.
  // past_getattribute: read as object.__getattribute__ reads it (guards::object_attr),
  // whatever the class's own __getattribute__ does.
  Status attr_of(const Value& base, const std::string& name, Value* out, bool past_getattribute = false);
  static bool is_module_instance(PyObject* v);
  void found_in_path(int k, PyObject* v, const guards::TensorMeta& meta);
  // Attributes beyond the plain read (interp/trace/ops_attrs.cpp): properties,
  // __getattr__, bound methods, super(), hasattr() / getattr() with a default.
  static bool is_super(const Value& v);
  bool absent_attr(const Value& obj, const std::string& name);
  std::optional<Status> computed_attr(const Value& owner, const std::string& name);
  std::optional<Status> function_attr(const Value& owner, const std::string& name);
  std::optional<Status> descriptor_attr(const Value& owner, const std::string& name, const guards::PathRoot& root);
  // An exact dict the frame finds again by its path (a class's attribute_map, an
  // instance __dict__).
  bool is_path_dict(const Value& d, bool subclass = false) const;
  // `key in d` for such a dict and an exact str key (guarded); nullopt otherwise.
  std::optional<bool> path_dict_contains(const Value& dict, const Value& key, bool subclass = false);
  // d[key] and d.get(key[, default]) of such a dict; nullopt when d or key is not one.
  std::optional<Status> path_dict_item(const Value& d, const Value& key, const Value* get_default,
                                       bool subclass = false);
  std::vector<PyRef> path_dict_keys(const Value& d);
  // A list found by path `child` (an attribute of an object): by length, each
  // item by path (ops_lists.cpp). nullopt: not such a list, or too large.
  std::optional<Status> path_list(PyObject* v, const guards::PathRoot& root, const Source& child, Value* out);
  Status found_at_path(const Value& base, const std::string& step, PyObject* v, Value* out);
  Value module_by_class(PyObject* v, const guards::PathRoot& root, const Source& source);
  // A list attribute read by length (found_at_path) as the object itself, now guarded
  // by identity: for what changes it (its methods, a graph break).
  Value pin_path_list(const Value& list);
  Status zero_arg_super();
  Status make_super(const Value& cls, const Value& self);
  Status super_attr(const Value& sup, const std::string& name, bool method);
  bool path_root(const Value& base, guards::PathRoot* root, PyRef* holder) const;
  PyObject* module_forward(const Value& m);
  PyObject* instance_call(const Value& v);
  Status step(const Instruction& ins);
  Status finish(const Value& ret);
  Status compile();
  bool has_extern_calls() const;
  Status check_int_overflow(jit::Op op, jit::NodeId l, jit::NodeId r, jit::NodeId wrapped);
  Status check_nonzero(jit::NodeId divisor);
  Status compile_graph(std::shared_ptr<jit::CompiledGraph>* out);
  // Compiles `g` on the CPU backend with the GIL released, and counts and tracks it;
  // `what` names it in the error ("the graph", "the backward graph").
  Expected<std::shared_ptr<jit::CompiledGraph>> compile_on_cpu(const jit::Graph& g, const char* what);
  // Runs the handlers of a pending signal every 256 steps; false when one raised.
  bool signal_handlers_ok();
  Status seal_outputs(const std::vector<jit::NodeId>& outputs, std::vector<OutputSpec>* specs);

  // ---- plan steps: graph breaks, branches, deopt (interp/trace/breaks.cpp) ----
  // The guards of what is read now: the entry's, or after an opaque call the set that
  // the plan checks at that point.
  guards::GuardSet& guards() { return committed_ ? *block_guards_ : entry_->guards; }
  std::shared_ptr<guards::GuardSet> new_block_guards();
  int path_slots_ = 0;  // path slots used by the plan's guard sets so far (new_block_guards)
  // Whether the root state could be handed to CPython here; the Error says why not.
  // at_call: a graph break's call would come here (it stores the changed argument lists).
  Status can_resume(bool at_call = false) const;
  Status can_cut(const Instruction& ins) const;  // ... and a plan step could start here
  bool in_try_block(const Instruction& ins) const;
  Status convert(const Value& v, PlanValue* out, ConvertCtx& ctx);
  Status convert_tensor(const Value& v, PlanValue* out, ConvertCtx& ctx);
  Status convert_const(const Value& v, PlanValue* out, const ConvertCtx& ctx);
  Status convert_set(const Value& v, PlanValue* out, ConvertCtx& ctx);
  Status convert_function(const Value& v, PlanValue* out, ConvertCtx& ctx);
  Status convert_container(const Value& v, PlanValue* out, ConvertCtx& ctx);
  Status cut(std::vector<Value*> extra);
  Status break_call(Value callable, std::vector<Value> args, PyObject* kw_names, bool pure, const std::string& why_not_traced);
  void call_result(int reg, ResultCheck* check, Value* out);
  // The exact class of an opaque object, known from now on through a guard: an
  // argument's class at its path, an opaque call's result by its step's check (a
  // list or dict the plan built is one). nullptr when it cannot be known.
  PyObject* opaque_type(const Value& v);
  std::optional<bool> singleton_test(const Value& a, const Value& b);
  std::optional<bool> paths_same(const Value& a, const Value& b);
  static bool is_traced_tensor_method(const std::string& name);
  Status concrete_number(const Value& a, const std::string& what, PyRef* out);
  void bind_number_sequence(PyObject* seq, const Source& src, std::vector<Value>* items);
  void bind_nested_lists(PyObject* seq, const Source& src, std::vector<Value>* items);
  std::optional<Status> python_dunder(const Value& obj, const char* dunder, std::vector<Value> args);
  std::optional<Status> opaque_attr(const Value& owner, const std::string& name, bool method);
  Status branch_on(Value cond, const Instruction& ins, bool jump_if);
  bool can_branch_plan() const;
  Status data_truth(const Value& cond, bool* out);
  std::shared_ptr<ResumePoint> resume_point(size_t num_inputs, size_t pc,
                                            std::optional<size_t> pc_true = std::nullopt) const;
  PyObject* trace_from(const ResumePoint& rp, size_t pc, PlanRun& run, const std::function<void()>& enter,
                       std::shared_ptr<Plan>* traced);
  Status flush_block_guards();
  Status save_state(const FrameState& fs, size_t pc, const std::string& reason, std::shared_ptr<DeoptState>* out);
  bool end_with_deopt(const Status& why);
  bool deopt_after_last_call(const Status& why);
  bool hand_to_cpython(const DeoptState& state, bool raising = false);
  bool deopt_step(const std::shared_ptr<DeoptState>& d, const std::string& reason, const Instruction* at = nullptr,
                  bool raise_exit = false);
  Status end_with_unwind(PlanStep step, const std::string& what);
  // The root state before the current instruction, kept to resume CPython there.
  void take_snapshot() {
    snapshot_ = *cur_.fs;
    snapshot_mark_ = graph_.mark();
  }
  // Size equalities recorded since `since` that are false for this call: eager raises
  // at the op that needed them, so the trace stops there (not at its end, where after
  // a graph break the frame could no longer resume at that op).
  Status check_new_assumptions(const jit::Graph::Mark& since);
  Status check_new_sizes(size_t first) const;
  void run_final();
  int new_reg() { return num_regs_++; }

  Value pop() {
    Value v = std::move(cur_.fs->stack.back());
    cur_.fs->stack.pop_back();
    return v;
  }
  void push(Value v) { cur_.fs->stack.push_back(std::move(v)); }
  Value& top(size_t i = 1) { return cur_.fs->stack[cur_.fs->stack.size() - i]; }
  Status jump_to(int offset);
  Expected<jit::NodeId> operand(const Value& v);
  // Symbolic scalars
  int new_symbol(jit::SymType type, jit::SymValue hint, std::string source);
  Status push_sym(jit::SymExpr e, const char* what, PyObject* numpy_type = nullptr);
  Status numpy_operator(int arg, bool compare, const Value& lhs, const Value& rhs);
  Status guard_truth(const jit::SymExpr& cond, bool* out);
  std::string readable(const jit::SymExpr& e) const;
  Status call_op(jit::Op op, const std::vector<Value>& args);
  // The trace records torch.Tensor's `name` by meaning: it must be torch's own (not
  // monkeypatched), now and at every cache hit.
  Status require_tensor_attr(const std::string& name);
  Status call_py_op(const PyOp& op, std::vector<Value> args, PyObject* kw_names);
  Expected<std::vector<Value>> bind_py_op(const PyOp& op, std::vector<Value> args, PyObject* kw_names);
  Status record_py_op(const PyOp& op, const std::vector<Value>& bound, bool inplace);
  Status add_with_alpha(const PyOp& op, std::vector<Value> operands, const Value& alpha, bool inplace);
  Value dim_value(jit::NodeId node, size_t d);
  Value shape_tuple(jit::NodeId node);
  Status call_shape_method(const std::string& name, const std::vector<Value>& args);
  Status fold_binary(int nb_op, const Value& lhs, const Value& rhs);
  std::optional<Status> concat_sequences(int nb_op, const Value& lhs, const Value& rhs);
  Status truth(const Value& v, bool* out);
  std::string describe(const Value& v) const;
  std::string location(const Instruction& ins) const;

  // ---- handlers, one per opcode family; each starts with its stack effect. The
  // dispatch table comes from the handler column of opcodes.def (scripts/gen_opcodes.py).
  Status op_unsupported(const Instruction&);
  Status op_nop(const Instruction&);
  Status op_load_fast(const Instruction&);
  Status op_store_fast(const Instruction&);
  Status op_load_deref(const Instruction&);
  Status op_load_closure(const Instruction&);
  Status op_store_deref(const Instruction&);
  Status op_load_const(const Instruction&);
  Status op_load_global(const Instruction&);
  Status op_store_global(const Instruction&);
  Status op_load_attr(const Instruction&);
  Status op_load_method(const Instruction&);
  Status load_attr(Value owner, const std::string& name);
  bool unbound_tensor_method(const Value& owner, const std::string& name, bool method);
  Status load_method(Value owner, const std::string& name);
  Status op_push_null(const Instruction&);
  Status op_make_function(const Instruction&);
  Status op_kw_names(const Instruction&);
  Status op_call(const Instruction&);
  Status op_import_name(const Instruction&);  // ops_import.cpp
  Status op_load_build_class(const Instruction&);  // ops_classes.cpp
  Status op_import_from(const Instruction&);

  // ---- CALL, in steps (interp/trace/ops_call.cpp, builtins: ops_builtins.cpp) ----
  Status dispatch_call(CallSite& c);
  std::optional<Status> call_partial(const CallSite& c);
  // ---- builtins that call functions (ops_higher.cpp) ----
  Status call_value(const Value& callable, std::vector<Value> args);
  Status call_unchanging(const Value& callable, std::vector<Value> args, bool lazy, const char* what);
  Status run_operator(Status (Tracer::*handler)(const Instruction&), int arg, const Value& a, const Value& b);
  std::optional<Status> call_operator(const CallSite& c);
  Status sort_keys(const Value* key, const std::vector<Value>& items, PyRef* keys);
  Status sorted_order(PyObject* keys, bool reverse, std::vector<size_t>* order);
  Status known_bool(const Value* v, bool* out);
  std::optional<Status> call_sorted_min_max(const CallSite& c);
  Status list_sort(const CallSite& c);
  std::optional<Status> call_container_method(const CallSite& c);
  std::optional<Status> count_object(const CallSite& c);
  std::optional<Status> call_function_applying(const CallSite& c);

  friend struct BuiltinCalls;  // one handler per builtin, keyed by the builtin object
  friend struct DequeCalls;    // collections.deque made in the frame (ops_deque.cpp)
  CallSite pop_call(const Instruction& ins);
  std::optional<Status> call_getattr(const CallSite& c, bool has);
  std::optional<Status> class_getattr(const Value& cls, const std::string& name, bool has);
  // ---- calls and operators evaluated now on known values (ops_fold.cpp) ----
  bool pure_callable(const Value& callable, const std::vector<Value>& args) const;
  bool knowable(const Value& v, bool specialize) const;
  Status known_object(const Value& v, KnownObjects& made, PyRef* out);
  bool known_result(PyObject* r, KnownObjects& made, Value* out);
  std::optional<Status> fold_call(PyObject* fn, const std::vector<Value>& args, PyObject* kw_names, bool specialize,
                                  const std::string& what);
  Status raise_python_error(const std::string& why);
  std::optional<Status> call_folded(const CallSite& c, bool specialize);
  Status structural_object(const Value& v, StructuralRole role, KnownObjects& made, PyRef* out);  // ops_higher.cpp
  std::optional<Status> call_structural(const CallSite& c);
  std::optional<Status> fold_operator(const char* name, const Value& lhs, const Value& rhs, bool specialize);
  std::optional<Status> known_attr(const Value& owner, const std::string& name, bool method);
  Status op_build_set(const Instruction&);
  Status op_set_add(const Instruction&);
  Status op_set_update(const Instruction&);
  Status set_add(size_t depth);
  Status contains_result(Status s, bool negate);
  // ---- unpacking, deletion, pattern matching (ops_patterns.cpp) ----
  Status op_unpack_ex(const Instruction&);
  Status list_items_after(const Value& list, const Value& key, const Value* value, std::vector<Value>* out);
  Status op_delete_subscr(const Instruction&);
  Status op_get_len(const Instruction&);
  std::optional<bool> match_flag(const Value& v, unsigned long flag);
  Status op_match_kind(const Instruction&);
  Status op_match_keys(const Instruction&);
  Status op_match_class(const Instruction&);
  Status op_unary_positive(const Instruction&);
  // ContextVar.get / set / reset (ops_contextvars.cpp); no_context_set: ok when no value
  // set in the frame is still in force (`where`: what would see it).
  std::optional<Status> call_context_var(const CallSite& c);
  std::optional<Status> call_exception_class(const CallSite& c);  // ops_except.cpp
  Status no_context_set(const std::string& where) const;
  Status context_var_value(PyObject* var, const Value* dflt);
  // object.__getattribute__(obj, name), as super().__getattribute__(name) calls it.
  std::optional<Status> call_object_getattribute(const CallSite& c);
  // ops_classes.cpp: a class statement's __build_class__ call, run now for a plain body
  std::optional<Status> call_build_class(const CallSite& c);
  // ops_collections.cpp: OrderedDict and defaultdict made in the frame
  std::optional<Status> call_collection(const CallSite& c);
  Status default_dict_missing(const Value& d, const Value& key);
  std::optional<Status> ordered_dict_method(const std::string& name, const std::vector<Value>& args, PyObject* kw_names);
  Status dict_maker(const Value& d, PyRef* out);
  std::optional<Status> dict_method(const Value& d, const std::string& name);
  std::optional<Status> dict_view_set_op(int nb_op, const Value& lhs, const Value& rhs);
  Status counter_add(const Value& c, const Value& source);
  std::optional<Status> counter_method(const std::string& name, const std::vector<Value>& args, PyObject* kw_names);
  std::optional<Status> counter_sum(int nb_op, const Value& a, const Value& b);
  std::optional<Status> fresh_class_attr(const Value& owner, const std::string& name);  // ops_attrs.cpp
  Status plain_class_body(PyCodeObject* body);
  // m.parameters() & co, run now into an iterator of guarded items (module_iter.cpp).
  std::optional<Status> module_generator(PyObject* fn, const std::vector<Value>& args, PyObject* kw_names);
  Status guard_module_tree(PyObject* m, const std::string& text, int depth);
  Status call_torch_function(const PyOp& op, CallSite& c);
  Status opaque_call(const CallSite& c, Error failed, std::vector<Value> call_args);
  // Each step's nullopt: the callable is not of its kind, the next step decides.
  std::optional<Status> call_python_function(CallSite& c);
  Status call_tensor_method(CallSite& c);
  std::optional<Status> call_grad_mode(const CallSite& c);
  std::optional<Status> grad_decorated(PyObject* fn, std::vector<Value>& args, PyObject* kw_names);
  std::optional<Status> call_builtin(const CallSite& c);
  // ---- extern calls (interp/torch/extern_ops.cpp) ----
  // A torch function jit/ does not lower, as one ExternCall node; nullopt when the
  // callable is not such a function.
  std::optional<Status> call_extern(const CallSite& c);
  // x.name(...) as torch.name(x, ...) where that is a torch function that can be one.
  std::optional<Status> call_extern_method(const CallSite& c);
  Status extern_call(const CallSite& c);
  Status extern_arg(const Value& v, ExternSlot where, ExternCallArgs& call, PyRef* out);
  // grad: per operand, whether its meta tensor requires grad (empty: none does).
  Status extern_meta(PyObject* fn, const ExternCallArgs& call, const jit::Bindings& b, ExternResult* out,
                     const std::vector<bool>& grad = {});
  Status extern_meta_sized(PyObject* fn, const ExternCallArgs& call, const std::vector<std::vector<int64_t>>& sizes,
                           ExternResult* out, const std::vector<bool>& grad = {});
  Status extern_meta_run(PyObject* fn, const ExternCallArgs& call, const std::vector<std::vector<int64_t>>& sizes,
                         ExternResult* out, const std::vector<bool>& grad);
  std::unordered_map<std::string, MetaRun> meta_runs_;
  Status extern_random_ok(PyObject* fn, const std::string& name, const ExternCallArgs& call);
  // Dropout's noise in training: an extern node that draws it at run time as eager does.
  Expected<jit::NodeId> dropout_noise(const jit::SymShape& sizes, jit::DType dtype, double p);
  // The result's sizes as expressions of the operands' (interp/torch/extern_sizes.cpp).
  Status extern_sizes(PyObject* fn, const ExternCallArgs& call, const ExternResult& r, std::vector<jit::SymShape>* out);
  void extern_floor_sizes(PyObject* fn, const ExternCallArgs& call, const ExternResult& r,
                          std::vector<jit::SymShape>* out, std::vector<std::vector<bool>>* learned);
  bool extern_sizes_follow(PyObject* fn, const ExternCallArgs& call, const std::vector<jit::SymShape>& sym,
                           const jit::Bindings& b, bool* raised);

  // ---- tensor metadata and torch.overrides checks (interp/torch/tensor_meta.cpp) ----
 public:
  static bool is_meta_method(const std::string& name);  // stride, is_contiguous, element_size, ...
 private:
  std::optional<Status> tensor_meta_attr(const Value& t, const std::string& name);
  Status call_meta_method(const std::string& name, const std::vector<Value>& args, PyObject* kw_names);
  // The torch.overrides checks, torch.jit.is_tracing(), torch.device(...) and
  // torch.finfo(...) of constants; nullopt: none of these.
  std::optional<Status> call_override_check(const CallSite& c);
  Status call_torch_constructor(const CallSite& c);
  std::optional<Status> call_torch_tensor(const CallSite& c);  // creation.cpp
  Status tensor_data_dtype(const Value& v, std::optional<jit::DType>* out);
  Expected<jit::NodeId> tensor_data(const Value& v, jit::DType d, const std::string& what);
  std::optional<Status> metadata_object_attr(const Value& owner, const std::string& name);
  std::vector<jit::NodeId> input_ancestors(jit::NodeId n) const;
  Status require_standard_strides(jit::NodeId n, bool allow_view, const std::string& what);
  // NumPy arrays made in the frame (ops_arrays.cpp)
  std::optional<Status> call_numpy_array(CallSite& c);
  Status tensor_numpy(const CallSite& c);
  Status array_attr(const Value& a, const std::string& name, bool method);
  std::optional<Status> array_binary(int nb, const Value& lhs, const Value& rhs);
  std::optional<Status> array_store_subscr(const Value& target, const Value& key, const Value& value);
  // Eager's strides and storage offset of node n (interp/torch/strides.cpp): from a
  // tensor of the standard layout through the views made of it; an error where not known.
  struct TensorLayout {
    std::vector<jit::SymExpr> strides;
    jit::SymExpr offset;
  };
  Status eager_layout(jit::NodeId n, const std::string& what, TensorLayout* out);
  Status layout_is_contiguous(jit::NodeId n, const TensorLayout& layout, bool* out);
  Status view_exists(const jit::SymShape& from, const std::vector<jit::SymExpr>& strides, const jit::SymShape& to,
                     bool* out);
  // Whether the arguments and attribute tensors that n is computed from had the
  // standard contiguous strides (each then guarded so); graph breaks' results are
  // checked by their own step.
  bool guard_inputs_contiguous(jit::NodeId n);
  // Placeholders of inputs: whether the input had the standard contiguous strides.
  std::unordered_map<jit::NodeId, bool> input_contiguous_;
  Status op_binary_op(const Instruction&);
  Status op_unary_negative(const Instruction&);
  Status op_unary_not(const Instruction&);
  Status op_unary_invert(const Instruction&);
  Status op_compare_op(const Instruction&);
  Status op_is_op(const Instruction&);
  Status op_format_value(const Instruction&);
  Status op_build_string(const Instruction&);
  Status op_build_seq(const Instruction&);
  Status op_list_append(const Instruction&);
  Status op_unpack_sequence(const Instruction&);
  Status op_binary_subscr(const Instruction&);
  std::optional<Status> subscript_constants(const Value& seq, const Value& index);
  Status op_pop_top(const Instruction&);
  Status op_copy(const Instruction&);
  Status op_swap(const Instruction&);
  Status op_jump(const Instruction&);
  Status op_pop_jump_if(const Instruction&);
  Status op_jump_if_or_pop(const Instruction&);
  Status op_return_value(const Instruction&);
  Status op_return_generator(const Instruction&);
  Status op_yield_value(const Instruction&);
  Status op_raise_varargs(const Instruction&);  // ops_except.cpp
  Status op_with_except_start(const Instruction&);  // ops_except.cpp
  void enter_grad_block(PyObject* mgr);  // ops_call.cpp
  void leave_grad_block();
  Status op_push_exc_info(const Instruction&);
  Status op_pop_except(const Instruction&);
  Status op_check_exc_match(const Instruction&);
  Status op_reraise(const Instruction&);
  Status op_load_assertion_error(const Instruction&);
  Status op_delete_fast(const Instruction&);
  // Exceptions raised and caught in the trace (ops_except.cpp).
  bool handler_on_stack() const;
  Status raise_exception(Value exc, const std::string& why);
  bool unwind();
  Expected<Value> exception_to_raise(const Value& v);
  bool raising_attribute_error() const;
  int attribute_error_catchers_ = 0;  // hasattr/getattr calls tracing a __getattr__ (handler_on_stack)
  Status raise_key_error(const Value& key);
  Status hook_catches(PyTypeObject* tp, Status s);
  Status op_build_map(const Instruction&);
  Status op_list_extend(const Instruction&);
  Status op_list_to_tuple(const Instruction&);
  Status op_dict_merge(const Instruction&);
  Status op_contains_op(const Instruction&);
  Status op_call_function_ex(const Instruction&);
  // The items `*v` unpacks (ops_star.cpp); a dict the frame holds: its methods, d[key].
  Status star_items(const Value& v, std::vector<Value>* out);
  Status call_dict_method(const std::string& name, const std::vector<Value>& args);
  std::optional<Status> dict_change_method(const std::string& name, const std::vector<Value>& args, PyObject* kw_names);
  Value dict_now(const Value& d);
  // Lists the trace built, and the caller's lists (arguments), mutated on their
  // symbolic value (ops_lists.cpp).
  bool is_traced_list(const Value& v) const;
  // Argument lists, by identity: each one's argument slot, and whether the frame changed
  // it (the plan then gives it its new items as it returns: `arg[:] = items`).
  struct CallerList {
    int identity;
    int arg;
    bool changed = false;
    Value now;  // a copy of it (in list_roots: changes reach it)
  };
  std::vector<CallerList> caller_lists_;
  CallerList* caller_list(const Value& v);
  bool caller_lists_changed() const;
  Status not_a_caller_list(PyObject* v, const guards::PathRoot& root, const std::vector<std::string>& attrs,
                           const std::string& text);
  void bind_caller_list(PyObject* list, int arg, const std::string& name, Value* v);
  Status store_caller_lists(PlanValue* stores, ConvertCtx& ctx);
  std::vector<Value*> list_roots();
  // Every copy of `list` in the traced state gets `items`.
  Status set_list_items(const Value& list, std::vector<Value> items, const std::string& what);
  Status call_list_method(const std::string& name, const std::vector<Value>& args);
  Status list_find(const std::string& name, const std::vector<Value>& items, const Value& x);
  std::optional<Status> list_method(const Value& owner, const std::string& name);
  Status list_inplace_add(const Value& list, const Value& rhs);
  Status list_setitem(const Value& list, const Value& index, const Value& value);
  std::unordered_set<int> iterated_lists_;  // identities of lists a loop (or zip, ...) iterated
  void replace_everywhere(const Value& now);
  // Objects of plain classes made in the frame (ops_objects.cpp).
  static std::string object_class_name(const Value& obj);
  std::optional<Status> construct_object(const CallSite& c);
  std::optional<Status> call_tuple_new(const CallSite& c);
  Status object_attr(const Value& obj, const std::string& name, bool method);
  Status object_store_attr(const Value& obj, const std::string& name, Value value, bool direct = false);
  std::optional<Status> object_getattr(const CallSite& c, bool has);
  Status object_equal(bool ne, const Value& lhs, const Value& rhs);
  std::optional<Status> object_operator(const char* inplace, const char* name, const char* reflected, bool compare,
                                        const Value& lhs, const Value& rhs);
  Status sequence_order(int cmp, const Value& lhs, const Value& rhs);
  std::optional<Status> object_binary(int nb_op, const Value& lhs, const Value& rhs);
  std::optional<Status> repeat_sequence(int nb_op, const Value& lhs, const Value& rhs);
  Status object_unary(const char* name, const Value& v);
  PyObject* object_dunder(const Value& v, const char* name, bool* bad);
  Status object_len(const Value& v);
  Status object_truth(const Value& v, bool* out);
  std::optional<Status> object_text(const Value& v, bool is_str);
  Status sequence_equal(const Instruction& ins, const Value& lhs, const Value& rhs);
  std::optional<Status> class_attr(const Value& owner, const std::string& name, bool method);
  Status object_super_attr(const Value& obj, PyObject* after, const std::string& name, bool method);
  std::optional<Status> call_object_init(const CallSite& c);
  int construct_floor_ = std::numeric_limits<int>::max();  // objects from this identity on are being constructed
  Status dict_store(const Value& d, const Value& key, Value value);
  Status may_change_dict(const Value& d) const;
  Status dict_subscript(const Value& d, const Value& key);
  Status dict_key(const Value& v, const std::string& what, Value* out);
  Status op_get_iter(const Instruction&);
  Status container_items(const Value& seq, std::vector<Value>* items);
  Status op_before_with(const Instruction&);
  Status enter_object(const Value& mgr);
  Status op_for_iter(const Instruction&);

  // ---- autograd (interp/trace/autograd_trace.cpp) ----
  // Records the grad mode of the nodes a step recorded (those its inner steps have
  // not already recorded).
  void note_grad_mode(size_t first_node);
  // Node n carries no gradient whatever the grad mode (random draws).
  void record_without_grad(jit::NodeId n);
  // Whether eager's result for this node would require grad (placeholders' flags,
  // grad mode per node, custom Functions).
  bool node_needs_grad(jit::NodeId n) const;
  // The graph reads tensors that require grad with grad mode on: differentiate it and
  // compile forward and backward; *joint is false when no output needs a gradient.
  Status compile_joint(bool* joint);
  // Whether the joint plan may write its in-place updates of inputs back after its
  // forward (autograd_trace.cpp).
  Status check_joint_writes(const jit::Joint& j);
  // Attribute and method reads that autograd handles (a custom Function's ctx,
  // Function.apply); nullopt when `owner` is none of those.
  std::optional<Status> autograd_attr(const Value& owner, const std::string& name, bool method);
  // MyFunction.apply(...) and ctx.<method>(...); nullopt when `callable` is neither.
  std::optional<Status> autograd_call(const Value& callable, std::vector<Value>& args, PyObject* kw_names);
  Status store_ctx_attr(const std::string& name, const Value& owner, Value value);
  Status apply_function(PyObject* cls, std::vector<Value> args);
  Status trace_custom_backward(const Value& ctx_value, PyObject* backward, const std::vector<jit::NodeId>& markers,
                               const Value& result, const std::vector<Value>& args);
  Status ctx_method(size_t ctx, const std::string& name, std::vector<Value>& args);
  Status to_fragment(size_t ctx, const Value& v, Value* out);

  void swap_graph_state(GraphState& other);

  std::deque<AutogradCtx> ctxs_;  // a deque: references stay valid while nested Functions add theirs
  std::vector<jit::CustomGrad> customs_;
  std::vector<bool> placeholder_requires_grad_;  // per placeholder of graph_
  std::vector<int8_t> node_grad_;                // per node of graph_: grad mode when recorded (-1 unknown)
  std::vector<std::pair<jit::NodeId, size_t>> markers_;  // custom Function results -> customs_ index
  bool autograd_ = false;  // a tensor that requires grad was read with grad mode on

  // ---- the torch ops of interp/torch/torch_ops.def: their lowerings and what they
  // share (declared in interp/torch/lowerings.inc, defined in interp/torch/*.cpp) ----
#include "interp/torch/lowerings.inc"

  // ---- in-place ops, functionalized (interp/torch/inplace.cpp) ----
  // An in-place op records its out-of-place op; the storage it writes then holds a
  // new value (a new base node), and every live value that aliases that storage (its
  // base and each view of it) is rebound to a node derived again from the new base. A
  // write through a view reaches the base through the inverse of each view step
  // (slice_scatter for slices and selects, permute back, reshape back). Inputs
  // written to become extra graph outputs that the plan copies into them (WriteBack).
 public:
  // x.add_(y) & co: true when `name` is an in-place method the tracer records.
  static bool is_inplace_method(const std::string& name);
  Status call_inplace_method(const std::string& name, std::vector<Value> args, PyObject* kw_names);
  // torch.relu_(x) & co: torch's function of an in-place method, traced as x.relu_().
  std::optional<Status> call_torch_inplace(CallSite& c);
  // `lhs op= rhs` (BINARY_OP with an in-place argument) where lhs is a tensor.
  Status inplace_binary(int nb_op, const Value& lhs, const Value& rhs);
  Status op_store_subscr(const Instruction&);
  Status op_map_add(const Instruction&);
  Status op_store_attr(const Instruction&);
  // x[index] = value of a tensor x.
  Status setitem(const Value& x, const Value& index, const Value& value);
  // Records that `view` is an eager view of `of` (nothing when they are one node).
  void mark_view(jit::NodeId view, jit::NodeId of) {
    if (view != of) view_parent_[view] = of;
  }
  // push_built for a view op's result (marked as a view of `of`).
  Status push_view(Expected<jit::NodeId> n, const std::string& what, jit::NodeId of);
  // The storage a tensor node belongs to: the first base node of that storage.
  jit::NodeId storage_of(jit::NodeId n) const;
  bool disjoint_views(jit::NodeId a, jit::NodeId b) const;
  std::optional<bool> tensors_same(const Value& a, const Value& b) const;
  int writes_ = 0;  // in-place writes so far: a failed inlined call that wrote cannot become a break

 private:
  // dst's elements become `value` (dst's shape and dtype, a node no other value holds);
  // *now: dst's node afterwards.
  Status write_to(const Value& dst, jit::NodeId value, const std::string& what, jit::NodeId* now);
  // Whether write_to may write dst's storage at all (checked before the first of
  // several writes that one op makes, so that none is left half done).
  Status check_writable(const Value& dst, const std::string& what);
  // An in-place op's out-of-place `result` checked and cast as eager's in-place op does,
  // then written to dst; pushes dst (eager returns self).
  Status finish_inplace(const Value& dst, jit::NodeId result, size_t first_new, const std::vector<Value>& operands,
                        const std::string& what);
  Expected<jit::NodeId> replay_view(jit::NodeId view, jit::NodeId parent);
  Expected<jit::NodeId> fresh_copy(jit::NodeId x);
  // Finish: the inputs the frame wrote become outputs and the plan's WriteBacks.
  Status seal_writes(ConvertCtx& ctx);
  // A returned tensor that is a view (of an input, or of a tensor the graph computes):
  // built at run time from its base (PlanValue::View), so that it aliases it as eager's
  // does; a computed base becomes an output of the final graph. False: not such a view.
  bool aliasing_view(jit::NodeId n, ConvertCtx& ctx, PlanValue* out);
  bool view_base(jit::NodeId base, ConvertCtx& ctx, PlanValue* out);
  // Cut (breaks.cpp): each view live at a break becomes a register taken from its base's
  // at run time (a View step; `views` from aliasing_view, GraphOutput bases meaning
  // the segment's outputs, in `out_regs`); *reg_of gets each view's register.
  Status view_steps(std::vector<std::pair<jit::NodeId, PlanValue>> views, const std::vector<int>& out_regs,
                    std::unordered_map<jit::NodeId, int>* reg_of);
  // Cut: what in-place ops need to know of the old segment, for the new one.
  Status cut_storages(const std::vector<jit::NodeId>& live, const std::unordered_map<jit::NodeId, jit::NodeId>& remap);
  std::unordered_map<jit::NodeId, jit::NodeId> view_parent_;  // eager view -> the node it views
  std::unordered_map<jit::NodeId, jit::NodeId> storage_key_;  // a new base version -> its storage
  std::unordered_map<jit::NodeId, jit::NodeId> storage_now_;  // storage -> its base node now
  std::unordered_set<jit::NodeId> alias_lost_;  // storages whose views became registers at a cut
  std::unordered_set<jit::NodeId> grad_inputs_;  // placeholders of inputs that require grad
  std::unordered_set<jit::NodeId> detached_;     // detach()'s results (a returned one is detached again)
  std::unordered_set<jit::NodeId> ndarray_inputs_;  // placeholders of NumPy array arguments
  std::unordered_set<jit::NodeId> inference_inputs_;  // placeholders of inference tensors (never written here)
  // Locals of inlined frames that returned while functions made there read them (a
  // closure its maker returned): they live on here (see traced_cells_).
  FrameState returned_cells_;
  void keep_returned_cells(FrameState& fs);
  Status ran_ahead(std::vector<Value> items, size_t since, std::shared_ptr<const std::vector<int>> reads);
  // Globals the frame assigned (STORE_GLOBAL): each value in global_writes_.locals,
  // its (globals dict, name) in global_names_. Reads in the trace see them; the plan
  // stores them as it returns (PlanValue::Kind::Stores), and no break or branch may
  // come before (can_resume).
  FrameState global_writes_;
  std::vector<std::pair<PyObject*, PyRef>> global_names_;
  Value* global_written(PyObject* globals, PyObject* name);
  Status module_attr_of(const Value& base, const std::string& name, Value* out);
  // The frames whose values the trace holds besides the root's: returned_cells_ and
  // global_writes_ first, then those of inlined calls, innermost last.
  std::vector<FrameState*> inlined_frames_{&returned_cells_, &global_writes_};
  // Cells made by LOAD_CLOSURE for a function defined in the frame (a comprehension,
  // a lambda): each stands for a local of a traced frame, read when the function's
  // inlined call binds its free variables. When that frame returns, the local moves
  // to returned_cells_.
  std::unordered_map<PyObject*, std::pair<FrameState*, int>> traced_cells_;
  std::vector<PyRef> cell_objects_;
  std::unordered_map<PyObject*, MadeDefaults> made_defaults_;
  // A cell standing for a traced local, or a function made in the frame over such
  // cells or with traced defaults: CPython could not run it.
  bool has_traced_cells(PyObject* obj) const;
  PyObject* traced_cell(int arg) const;
  // nullopt when v is no tensor.
  std::optional<Status> path_tensor(PyObject* v, const guards::PathRoot& root, const Source& child, Value* out,
                                    bool module_attr = false);
  Value closure_value(const std::string& name, PyObject* v);
  std::unordered_map<jit::NodeId, std::string> input_names_;  // placeholder -> its source, for guards
  // Tensor attributes read in this segment, by source: a second read of `self.w` is
  // the same tensor (and sees what the frame wrote to it).
  std::unordered_map<std::string, jit::NodeId> path_inputs_;

  // Nodes whose eager result may be non-contiguous (transposed, expanded, sliced with
  // a step, or computed from such): .view() that merges their dims raises in eager,
  // so it ends the trace. Inputs are taken as contiguous (their strides are not
  // guarded under dynamic shapes).
  std::vector<bool> noncontig_;
  size_t synced_scalars_ = 0;
  bool may_be_noncontig(jit::NodeId n) const {
    return static_cast<size_t>(n) < noncontig_.size() && noncontig_[static_cast<size_t>(n)];
  }
  void mark_noncontig(jit::NodeId n) {
    if (noncontig_.size() <= static_cast<size_t>(n)) noncontig_.resize(static_cast<size_t>(n) + 1, false);
    noncontig_[static_cast<size_t>(n)] = true;
  }

  CodeState& st_;
  compat::Frame* frame_;
  const guards::CallInputs& in_;
  std::unique_ptr<CacheEntry> entry_;
  jit::Graph graph_;
  FrameState root_fs_;
  FrameCtx cur_;
  const Instruction* last_ins_ = nullptr;  // for the location of a failure
  PyCodeObject* last_co_ = nullptr;
  int steps_ = 0;
  int next_identity_ = 0;  // for tuples and lists the frame builds
  long changes_ = 0;       // changes of dicts, lists, objects and sets the trace holds (call_unchanging)
  // Every change of what the trace holds, in order: the identity of the list, dict or
  // object changed, or -1 (a tensor written in place, a set, a variable closures read, a
  // global). An iterator run ahead of its consumer (Value::writes: a position here) is
  // stale after a change it may read.
  std::vector<int> write_log_;
  void note_write(int identity) { write_log_.push_back(identity); }
  bool run_ahead_stale(const Value& it) const;
  std::shared_ptr<const std::vector<int>> identities_in(std::vector<Value*> roots) const;
  // An iterator of its own (a generator expression, map, zip, enumerate, reversed,
  // itertools): its copies share an identity below -1 (not a list's), so that a loop or
  // a call that takes items from one copy advances them all (advance_everywhere).
  int own_iterator_id() { return -2 - next_identity_++; }
  void advance_everywhere(const Value& it);
  // Whether the frame still holds (a copy of) v, an iterator of its own: then a handler
  // that consumes it lazily in eager (zip, map, islice) cannot take its items ahead.
  bool object_held(const Value& v);
  bool iterator_held(const Value& v);
  std::vector<ContextSet> context_sets_;
  int named_params_ = 0;    // the root frame's positional and keyword-only parameters
  // Grad mode as traced: torch's at entry, changed by `with torch.no_grad()` /
  // `torch.enable_grad()` blocks. Without autograd, a tensor that requires grad is
  // read only where grad mode is off (its results then require no grad); the entry's
  // mode is then guarded.
  const bool grad_at_entry_;
  bool grad_enabled_;
  std::vector<bool> grad_outer_;  // the mode outside each open with block
  bool reads_requires_grad_ = false;
  Plan* plan_ = nullptr;   // the plan being built: the entry's, or a branch outcome's
  std::unique_ptr<PlanRun> own_run_;
  PlanRun* run_ = nullptr;  // runs each step as it is traced
  bool committed_ = false;  // an opaque call ran: from here the trace can only end by deopt
  bool continuation_ = false;  // tracing a branch outcome on a cache hit
  bool deopt_here_ = false;    // the failing instruction is meant to run in CPython (raise)
  bool raise_leaves_ = false;  // ... and it raises out of the frame: no handler of the frame takes it
  // The current instruction raises in eager (its cause guarded) and no handler of the
  // frame takes it: before any graph break, the plan ends there in CPython (execute).
  bool raises_uncaught_ = false;
  int inlines_ = 0;  // inline_call()s so far
  bool call_raised_ = false;   // an opaque call raised while tracing: the frame raises it
  // The trace stopped at object.__getattribute__(obj, name) of a name obj certainly
  // lacks (guarded), in frames without a handler around it: eager raises
  // AttributeError there, which getattr(obj, name, default) turns into its default.
  bool attribute_error_proved_ = false;
  // An exception raised in the trace that a handler of a traced frame takes: step()
  // unwinds to it, through the inlined calls that do not take it (ops_except.cpp).
  std::optional<Value> raising_;
  std::vector<FrameCtx> callers_;  // the frames that inlined calls return to, innermost last
  Py_ssize_t path_list_items_ = 0;  // items of list attributes read by length (found_at_path)
  int path_list_depth_ = 0;         // lists being read inside one another now
  std::shared_ptr<guards::GuardSet> block_guards_;
  std::shared_ptr<DeoptState> after_call_;  // where a failing block check resumes
  bool segment_since_call_ = false;         // a RunGraph step ran after after_call_'s point
  bool handed_over_ = false;  // the plan ended where CPython took the frame over (see break_call)
  // The check of each opaque call's result, by its register: its step's (plan, index),
  // or for the call a continuation starts after, the check being traced.
  std::unordered_map<int, std::pair<Plan*, size_t>> call_steps_;
  int resumed_reg_ = -1;
  ResultCheck* resumed_check_ = nullptr;
  std::shared_ptr<CallOutcomes> resumed_outcomes_;  // resume_call's
  const Plan* continuation_plan_ = nullptr;         // trace_from's
  std::shared_ptr<DeoptState> resume_at_;   // a segment failed while tracing: resume here
  std::optional<FrameState> snapshot_;      // the root state before the current root instruction
  jit::Graph::Mark snapshot_mark_;          // the graph's assumptions and checks then
  int num_regs_ = 0;
  int graphs_compiled_ = 0;  // segments and branch outcomes' graphs, for stats

 public:
  std::string* trace_log_ = nullptr;  // FRAMEJIT_TRACE_DIR: each instruction traced
  bool opaque_context_vars_ = false;  // ContextVar calls are opaque calls (trace_frame's second try)
  bool context_set_seen_ = false;     // a ContextVar was set in the trace
  std::vector<InputRef> placeholder_slot_;  // source of each placeholder of the current graph
  std::vector<jit::NodeId> scalar_nodes_;  // the scalar_input node of each plan scalar
  jit::Bindings hints_;                    // each symbol's value in the traced call
  std::vector<std::string> symbol_sources_;  // each symbol's source, "L['n']"
  long stack_drift_ = 0;  // framejit's stack depth minus CPython's, see step()
};


}  // namespace fj::interp
