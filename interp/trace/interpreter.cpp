// The symbolic bytecode interpreter for CPython 3.11: binding a frame's arguments,
// the step loop, the opcode dispatch table, and the end of a trace (plan, compile).
// The handlers live in interp/trace/ops_*.cpp, by opcode family (the torch ops in
// interp/torch/*.cpp); opcodes.def says which handles which opcode.
#include "interp/trace/interpreter.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cmath>
#include <cstring>
#include <functional>
#include <mutex>
#include <unordered_map>

#include "interp/runtime/resources.h"
#include "interp/trace/tracer.h"
#include "interp/trace/trace_dump.h"
#include "jit/cpu/cpu_backend.h"
#include "jit/ir/size_check.h"
#include "jit/log.h"

namespace fj::interp {

bool is_plain_scalar(PyObject* o) {
  return PyLong_CheckExact(o) || PyFloat_CheckExact(o) || PyBool_Check(o);
}

// Constants whose operations run no user code: numbers, None, strings, torch dtypes,
// devices and layouts, tuples of these.
bool is_foldable(PyObject* o) {
  if (is_plain_scalar(o) || o == Py_None || PyUnicode_CheckExact(o)) return true;
  if (is_torch_metadata_object(o)) return true;
  if (PyTuple_CheckExact(o)) {
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(o); ++i) {
      if (!is_foldable(PyTuple_GET_ITEM(o, i))) return false;
    }
    return true;
  }
  return false;
}

// Arguments guarded by identity, not value: builtins, classes and enum members (each a
// singleton of its class); `is` on them is answered while tracing.
bool guarded_by_identity(PyObject* o) {
  if (PyCFunction_Check(o) || PyType_Check(o)) return true;
  static PyObject* const meta = lookup_attr("enum", "EnumType");
  return meta != nullptr && PyObject_TypeCheck(reinterpret_cast<PyObject*>(Py_TYPE(o)), reinterpret_cast<PyTypeObject*>(meta));
}

// A torch.device or torch.dtype: immutable values that ScalarEquals compares.
bool is_torch_device_or_dtype(PyObject* o) {
  const char* type = Py_TYPE(o)->tp_name;
  return std::strcmp(type, "torch.device") == 0 || std::strcmp(type, "torch.dtype") == 0;
}

// ---- setup ----

// A tensor input of the graph: its placeholder, with sizes that are symbols (except
// 0 and 1) when the code is compiled with dynamic shapes.
Status Tracer::tensor_input(const guards::TensorMeta& meta, const std::string& source, jit::NodeId* node,
                            std::array<int, guards::kMaxRank>* dim_symbols, bool static_sizes) {
  const std::optional<jit::DType> known = dtype_from_torch(meta.dtype);
  if (!known) return unsupported("tensor " + source + " has dtype " + guards::describe_object(meta.dtype) + " (not supported yet)");
  if (!meta.is_cpu) return unsupported("tensor " + source + " is not on the CPU");
  if (meta.requires_grad) {
    // With grad mode on the plan compiles a backward too (compile_joint); the mode at
    // entry decides which, so it is guarded.
    if (grad_enabled_ && (committed_ || continuation_)) {
      return unsupported("tensor " + source + " requires grad after a graph break (not supported yet)");
    }
    autograd_ = autograd_ || grad_enabled_;
    if (!reads_requires_grad_) entry_->guards.add_grad_mode(grad_at_entry_);
    reads_requires_grad_ = true;
  }
  jit::Shape shape(meta.sizes.begin(), meta.sizes.begin() + meta.rank);
  dim_symbols->fill(-1);
  jit::SymShape sym;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (st_.dynamic && !static_sizes && shape[d] >= 2) {
      (*dim_symbols)[d] = new_symbol(jit::SymType::Int, shape[d], source + ".size()[" + std::to_string(d) + "]");
      sym.push_back(jit::SymExpr::symbol((*dim_symbols)[d], jit::SymType::Int, 2));
    } else {
      sym.push_back(jit::SymExpr::integer(shape[d]));
    }
  }
  *node = graph_.placeholder(*known, shape, std::move(sym));
  const auto index = static_cast<size_t>(graph_.node(*node).index);
  if (placeholder_requires_grad_.size() <= index) placeholder_requires_grad_.resize(index + 1, false);
  placeholder_requires_grad_[index] = meta.requires_grad;
  if (meta.requires_grad) grad_inputs_.insert(*node);
  if (meta.is_inference) inference_inputs_.insert(*node);
  input_contiguous_[*node] = guards::is_standard_contiguous(meta);
  input_names_[*node] = source;
  return ok();
}

namespace {

// An exact dict of at most 64 items whose keys are all exact str.
bool str_keyed_dict(PyObject* a) {
  if (!PyDict_CheckExact(a) || PyDict_GET_SIZE(a) > 64) return false;
  Py_ssize_t pos = 0;
  PyObject* key = nullptr;
  PyObject* item = nullptr;
  while (PyDict_Next(a, &pos, &key, &item)) {
    if (!PyUnicode_CheckExact(key)) return false;
  }
  return true;
}

}  // namespace

Status Tracer::bind_arguments() {
  PyCodeObject* code = cur_.co;
  // The graph takes float32 as torch's default dtype (creation ops, int / int, int
  // tensors with Python floats): another default is not traced, and every entry
  // checks that it still holds.
  PyObject* dflt = guards::default_dtype();
  if (dflt != guards::torch_refs().float32) {
    return unsupported("torch.get_default_dtype() is " + (dflt ? guards::describe_object(dflt) : std::string("unreadable")) +
                       " (framejit traces under float32 only)");
  }
  entry_->guards.add_default_dtype(dflt);
  cur_.fs->locals.resize(static_cast<size_t>(code->co_nlocalsplus));
  named_params_ = code->co_argcount + code->co_kwonlyargcount;
  // Free variables: the closure's cells, read now (COPY_FREE_VARS has not run yet)
  // and guarded. Cell variables stay plain locals: no closure is ever created.
  const int first_free = code->co_nlocalsplus - code->co_nfreevars;
  for (int k = 0; k < code->co_nfreevars; ++k) {
    if (in_.closure == nullptr) return unsupported("free variables without a closure");
    PyObject* v = PyCell_GET(PyTuple_GET_ITEM(in_.closure, k));
    if (v == nullptr) continue;  // an empty cell: reading it ends the trace
    const std::string name = guards::utf8_lossy(PyTuple_GET_ITEM(code->co_localsplusnames, first_free + k));
    guards().add_closure(k, name, v);
    cur_.fs->locals[static_cast<size_t>(first_free + k)] = closure_value(name, v);
  }
  const auto& refs = guards::torch_refs();
  for (int i = 0; i < in_.num_args; ++i) {
    PyObject* a = in_.args[i];
    const std::string name = guards::utf8_lossy(PyTuple_GET_ITEM(code->co_localsplusnames, i));
    Source src;
    src.kind = Source::Kind::Arg;
    src.arg = i;
    src.name = name;
    if (i >= code->co_argcount + code->co_kwonlyargcount) {  // *args, **kwargs
      FJ_TRY(bind_star_parameter(a, src, &cur_.fs->locals[static_cast<size_t>(i)]));
      continue;
    }
    const auto& meta = in_.metas[static_cast<size_t>(i)];
    if (meta) {
      std::array<int, guards::kMaxRank> dim_symbols;
      jit::NodeId n;
      FJ_TRY(tensor_input(*meta, "L['" + name + "']", &n, &dim_symbols));
      placeholder_slot_.push_back(InputRef{InputRef::Kind::Arg, i});
      guards().add_tensor(i, name, *meta, dim_symbols, /*strides=*/!st_.dynamic);
      cur_.fs->locals[static_cast<size_t>(i)] = Value::tensor(n, src);
      if (meta->is_ndarray) {  // a NumPy array: the tensor of its memory (interp/trace/ops_arrays.cpp)
        ndarray_inputs_.insert(n);
        cur_.fs->locals[static_cast<size_t>(i)].kind = ValueKind::Array;
      }
    } else if (PyObject_TypeCheck(a, reinterpret_cast<PyTypeObject*>(refs.tensor_type))) {
      return unsupported("argument '" + name + "' is a tensor subclass or has unreadable metadata");
    } else if (PyBool_Check(a) || PyFloat_CheckExact(a) || PyLong_CheckExact(a)) {
      // Python numbers are symbols from the first call, except the ints 0 and 1 and
      // ints beyond int64 (those are constants, guarded by value).
      int overflow = 0;
      const long long iv = PyLong_CheckExact(a) ? PyLong_AsLongLongAndOverflow(a, &overflow) : 0;
      if (PyLong_CheckExact(a) && (overflow != 0 || iv == 0 || iv == 1)) {
        guards().add_scalar(i, name, a);
        cur_.fs->locals[static_cast<size_t>(i)] = Value::constant(PyRef::borrow(a), src);
        continue;
      }
      jit::SymType type = jit::SymType::Int;
      jit::SymValue hint = static_cast<int64_t>(iv);
      if (PyBool_Check(a)) {
        type = jit::SymType::Bool;
        hint = a == Py_True;
      } else if (PyFloat_CheckExact(a)) {
        type = jit::SymType::Float;
        hint = PyFloat_AS_DOUBLE(a);
      }
      const int id = new_symbol(type, hint, "L['" + name + "']");
      guards().add_symbol_arg(i, name, id, type);
      cur_.fs->locals[static_cast<size_t>(i)] = Value::sym(jit::SymExpr::symbol(id, type), src);
    } else if (std::optional<Value> v = numpy_argument(a, src, -1)) {
      cur_.fs->locals[static_cast<size_t>(i)] = std::move(*v);
    } else if ((PyList_CheckExact(a) || PyTuple_CheckExact(a)) && Py_SIZE(a) <= 16) {
      // A list or tuple of tensors: each item is a tensor input found by index (of
      // numbers: bind_number_sequence; empty: guarded so). A list is the caller's list
      // (bind_caller_list): changes of it are traced and stored back.
      std::vector<Value> items;
      guards::PathRoot root;
      root.arg = i;
      for (Py_ssize_t k = 0; k < Py_SIZE(a); ++k) {
        PyObject* t = PySequence_Fast_GET_ITEM(a, k);
        const PyRef keep = PyRef::borrow(t);  // reading its metadata may release the GIL
        guards::TensorMeta meta;
        if (Py_TYPE(t) != reinterpret_cast<PyTypeObject*>(refs.tensor_type) || !guards::read_tensor_meta(t, &meta, nullptr)) {
          guards::clear_error();
          items.clear();
          break;
        }
        Source item = src;
        item.attrs.push_back("#" + std::to_string(k));
        const std::string text = source_text(item);
        std::array<int, guards::kMaxRank> dims;
        jit::NodeId n;
        FJ_TRY(tensor_input(meta, text, &n, &dims));
        if (items.empty()) guards().add_sequence(i, "L['" + name + "']", a);
        const int slot = guards().add_path_tensor(text, root, item.attrs, meta, dims, !st_.dynamic);
        placeholder_slot_.push_back(InputRef{InputRef::Kind::Path, slot});
        items.push_back(Value::tensor(n, item));
      }
      if (items.empty()) bind_number_sequence(a, src, &items);
      if (items.empty()) bind_nested_lists(a, src, &items);
      Value v = items.empty() && Py_SIZE(a) > 0 ? Value::constant(PyRef::borrow(a), src)
                              : Value::sequence(PyList_CheckExact(a) ? ValueKind::List : ValueKind::Tuple, std::move(items));
      v.source = src;
      v.opaque = v.kind == ValueKind::Const;
      if (v.kind == ValueKind::List) bind_caller_list(a, i, name, &v);
      cur_.fs->locals[static_cast<size_t>(i)] = std::move(v);
    } else if (is_module_instance(a)) {
      // An nn.Module (a training step's `model`): guarded by class, as a module found
      // by path is, so that calling it is traced; each call's own instance is used.
      guards::PathRoot root;
      root.arg = i;
      cur_.fs->locals[static_cast<size_t>(i)] = module_by_class(a, root, src);
    } else if (str_keyed_dict(a)) {
      // A dict such as a batch {"input_ids": t, ...}: read as **kwargs is (guarded by
      // its keys in order, its tensors inputs by path). The caller owns it: a change
      // of it in the frame ends the trace (may_change_dict).
      FJ_TRY(bind_star_parameter(a, src, &cur_.fs->locals[static_cast<size_t>(i)]));
    } else if (a == Py_None || PyUnicode_CheckExact(a) || is_torch_device_or_dtype(a)) {
      // guarded by value (a device by its type and index)
      guards().add_scalar(i, name, a);
      cur_.fs->locals[static_cast<size_t>(i)] = Value::constant(PyRef::borrow(a), src);
    } else if (guarded_by_identity(a)) {
      // A builtin, a class or an enum member passed in (torch.exp, len, int, Act.RELU):
      // guarded by identity, so its calls and operators are traced.
      guards::PathRoot root;
      root.arg = i;
      guards().add_path("L['" + name + "']", root, {}, a);
      cur_.fs->locals[static_cast<size_t>(i)] = Value::constant(PyRef::borrow(a), src);
    } else {
      // Any other object: passed through unguarded; using it ends the trace.
      Value v = Value::constant(PyRef::borrow(a), src);
      v.opaque = true;
      cur_.fs->locals[static_cast<size_t>(i)] = std::move(v);
    }
  }
  return ok();
}

// A list or tuple argument of Python numbers, None and str (`ws=[0.5, 1.5]`,
// `ks=(1, 2, 3)`): guarded by its type and length, each number a symbol read from its
// item as number arguments are (0, 1, None and str by value). Leaves *items empty when
// an item is anything else.
void Tracer::bind_number_sequence(PyObject* seq, const Source& src, std::vector<Value>* items) {
  const int arg = src.arg;
  for (Py_ssize_t k = 0; k < Py_SIZE(seq); ++k) {
    PyObject* x = PySequence_Fast_GET_ITEM(seq, k);
    const bool number = PyBool_Check(x) || PyFloat_CheckExact(x) || PyLong_CheckExact(x) || guards::numpy_scalar_kind(Py_TYPE(x));
    if (!number && x != Py_None && !PyUnicode_CheckExact(x)) {
      items->clear();
      return;
    }
    items->push_back(Value{});
  }
  guards().add_sequence(arg, "L['" + src.name + "']", seq);
  for (Py_ssize_t k = 0; k < Py_SIZE(seq); ++k) {
    PyObject* x = PySequence_Fast_GET_ITEM(seq, k);
    Source item = src;
    item.attrs.push_back("#" + std::to_string(k));
    int overflow = 0;
    const long long iv = PyLong_CheckExact(x) ? PyLong_AsLongLongAndOverflow(x, &overflow) : 2;
    Value& v = (*items)[static_cast<size_t>(k)];
    if (std::optional<Value> n = numpy_argument(x, item, static_cast<int>(k))) {
      v = std::move(*n);
      continue;
    }
    if (x == Py_None || PyUnicode_CheckExact(x) || overflow != 0 || iv == 0 || iv == 1) {
      guards().add_scalar(arg, src.name, x, static_cast<int>(k));
      v = Value::constant(PyRef::borrow(x), item);
      continue;
    }
    const jit::SymType type = PyBool_Check(x) ? jit::SymType::Bool : PyFloat_CheckExact(x) ? jit::SymType::Float : jit::SymType::Int;
    const jit::SymValue hint = type == jit::SymType::Bool    ? jit::SymValue{x == Py_True}
                               : type == jit::SymType::Float ? jit::SymValue{PyFloat_AS_DOUBLE(x)}
                                                             : jit::SymValue{static_cast<int64_t>(iv)};
    const int id = new_symbol(type, hint, "L['" + src.name + "'][" + std::to_string(k) + "]");
    guards().add_symbol_arg(arg, src.name, id, type, static_cast<int>(k));
    v = Value::sym(jit::SymExpr::symbol(id, type), item);
  }
}

// A NumPy scalar argument, or item `item` of the argument `src` names (np.float64(2.5)):
// a symbol as a Python number of its kind is, whose Python type stays NumPy's (guarded
// exactly); ints 0 and 1 are constants. nullopt: not a NumPy scalar a symbol holds.
std::optional<Value> Tracer::numpy_argument(PyObject* a, const Source& src, int item) {
  jit::SymValue hint;
  const std::optional<jit::SymType> kind = guards::numpy_scalar_kind(Py_TYPE(a));
  if (!kind || !guards::read_numpy_scalar(a, *kind, &hint)) return std::nullopt;
  const int id = new_symbol(*kind, hint, "L['" + src.name + "']" + (item < 0 ? "" : "[" + std::to_string(item) + "]"));
  guards().add_symbol_arg(src.arg, src.name, id, *kind, item, reinterpret_cast<PyObject*>(Py_TYPE(a)));
  Value v = Value::sym(jit::SymExpr::symbol(id, *kind), src);
  if (*kind == jit::SymType::Int && (std::get<int64_t>(hint) == 0 || std::get<int64_t>(hint) == 1)) {
    const jit::SymExpr value = jit::SymExpr::constant(hint);
    guards().add_expr(jit::eq(v.expr, value), readable(v.expr) + " == " + value.str());
    v.expr = value;
  }
  v.obj = PyRef::borrow(reinterpret_cast<PyObject*>(Py_TYPE(a)));
  return v;
}

// Why a trace stops when a KeyboardInterrupt (SystemExit, MemoryError) was set aside
// by guards::clear_error(): the error is given back to the caller, not a fallback.
constexpr const char* kInterrupted = "interrupted (KeyboardInterrupt, SystemExit or MemoryError while tracing)";

// Ctrl-C during a long trace: every 256 instructions, the handlers of a pending
// signal run (as CPython runs them between instructions); false when one raised,
// its error set aside for the caller (guards/py_errors.h).
bool Tracer::signal_handlers_ok() {
  if ((steps_ & 255) != 0 || !compat::signals_pending() || !compat::is_main_thread() ||
      compat::run_signal_handlers() == 0) {
    return true;
  }
  guards::clear_error();
  return false;
}

// Runs the current frame until its RETURN_VALUE.
Status Tracer::execute(Value* result) {
  while (true) {
    if (cur_.fs->pc >= cur_.code->instructions.size()) return unsupported("ran past the end of the bytecode");
    if (++steps_ > kMaxSteps) return unsupported("trace longer than " + std::to_string(kMaxSteps) + " instructions");
    if (guards::error_kept() || !signal_handlers_ok()) return unsupported(kInterrupted);
    last_ins_ = &cur_.code->instructions[cur_.fs->pc];
    last_co_ = cur_.co;
    // After an opaque call, a root instruction that cannot be traced runs in CPython
    // from the state before it (not inside KW_NAMES..CALL or after EXTENDED_ARG).
    if (committed_ && cur_.depth == 0 && !cur_.fs->kw_names &&
        (cur_.fs->pc == 0 || cur_.code->instructions[cur_.fs->pc - 1].opcode != op(Opcode::EXTENDED_ARG))) {
      take_snapshot();
      // An opaque call started a debugger on this frame (breakpoint()): CPython runs
      // the rest, from here, and gives the debugger its line events.
      if (frame_ != nullptr && compat::frame_traced(PyThreadState_Get(), frame_)) {
        return unsupported("a debugger traces this frame (breakpoint())");
      }
    }
    // Before any graph break, the state before a root instruction is kept: where eager
    // raises there and nothing of the frame takes the exception, the plan hands that
    // state to CPython, which runs the instruction and raises (DeoptState::raise_exit).
    std::optional<FrameState> before;
    const jit::Graph::Mark mark = graph_.mark();
    const int writes = writes_, inlines = inlines_;
    if (!committed_ && cur_.depth == 0 && !cur_.fs->kw_names && !snapshot_) before = *cur_.fs;
    raises_uncaught_ = false;
    Status s = step(*last_ins_);
    if (s.failed()) {
      if (before && raises_uncaught_ && writes_ == writes && inlines_ == inlines && !call_raised_ && cur_.depth == 0 &&
          can_resume().ok()) {
        snapshot_ = std::move(*before);
        snapshot_mark_ = mark;
        deopt_here_ = true;
        raise_leaves_ = true;
      }
      return s;
    }
    if (cur_.fs->ret) {
      *result = std::move(*cur_.fs->ret);
      return ok();
    }
  }
}

std::unique_ptr<CacheEntry> Tracer::run(Fallback* why) {
  own_run_ = std::unique_ptr<PlanRun>(new PlanRun{in_, hints_, {}, &st_, frame_});
  run_ = own_run_.get();
  Value ret;
  Status s = bind_arguments();
  if (s.ok()) s = execute(&ret);
  if (s.ok()) s = finish(ret);
  if (s.ok()) s = compile();
  if (s.ok() && guards::error_kept()) s = unsupported(kInterrupted);
  const bool has_steps = !entry_->plan.steps.empty();
  if (s.ok() && has_steps) s = flush_block_guards();
  if (s.ok() && has_steps) run_final();  // the steps so far ran while tracing: run the rest
  if (s.failed() && end_with_deopt(s)) s = ok();
  if (s.ok() || committed_) st_.counters.graphs += graphs_compiled_ - (entry_->plan.graph ? 1 : 0);  // the hook counts that one
  if (s.failed()) {
    why->reason = s.error();
    why->location = last_ins_ ? location(*last_ins_) : location(cur_.code->instructions.front());
    if (steps_ > kMaxSteps) {  // the frame as a whole is too long: where it starts, the same each time
      why->location = guards::utf8_lossy(st_.code->co_filename) + ":" + std::to_string(st_.code->co_firstlineno);
    }
    if (guards::restore_kept_error()) {  // KeyboardInterrupt, SystemExit, MemoryError: the caller's
      ran_ = committed_ || call_raised_;
      return nullptr;
    }
    if (committed_ || call_raised_) {  // side effects happened: the call cannot start over
      ran_ = true;
      if (!call_raised_ && !PyErr_Occurred()) {
        PyErr_Format(PyExc_RuntimeError, "framejit: cannot continue %U after a graph break: %s (%s)",
                     st_.code->co_qualname, why->reason.c_str(), why->location.c_str());
      }
      return nullptr;
    }
    guards::clear_error();
    return nullptr;
  }
  return std::move(entry_);
}

Status Tracer::step(const Instruction& ins) {
  const Handler h = handlers()[static_cast<size_t>(ins.opcode)];
  const size_t pc = cur_.fs->pc;
  const size_t depth = cur_.fs->stack.size();
  const size_t nodes_before = graph_.size();
  const jit::Graph::Mark mark = graph_.mark();
  Status s = (this->*h)(ins);
  // An exception a handler of this frame takes: the trace goes on there.
  const bool unwound = s.failed() && raising_ && unwind();
  if (unwound) {
    s = ok();
  } else if (s.ok()) {
    raising_.reset();  // what raised was handled on the way (getattr's default)
  }
  if (s.ok()) s = check_new_assumptions(mark);
  if (s.ok()) s = check_new_sizes(nodes_before);
  if (s.failed()) return s;
  note_grad_mode(nodes_before);
  const bool jumped = cur_.fs->pc != pc;
  if (!jumped) cur_.fs->pc = pc + 1;  // handlers that jump set pc themselves
  // A handler whose stack effect differs from CPython's would make the trace drift
  // silently: compare with CPython's own table after every instruction.
  if (ins.opcode != op(Opcode::RETURN_VALUE) && !unwound) {
    const int want = PyCompile_OpcodeStackEffectWithJump(ins.opcode, ins.has_arg() ? ins.arg : 0, jumped ? 1 : 0);
    const long got = static_cast<long>(cur_.fs->stack.size()) - static_cast<long>(depth);
    // CPython books a call's effect partly on PRECALL (-argc) and partly on CALL;
    // framejit does it all on CALL, so the two are compared together.
    stack_drift_ += got - want;
    if (stack_drift_ != 0 && ins.opcode != op(Opcode::PRECALL)) {
      log::interp().error("stack effect of {} is {} in framejit but {} in CPython", opcode_name(ins.opcode),
                          got, want);
      FJ_DEBUG_CHECK(false, "stack effect mismatch");
      return unsupported("internal error: stack effect mismatch at " + std::string(opcode_name(ins.opcode)));
    }
  }
  if (trace_log_ != nullptr) {
    std::string stack;
    for (const Value& v : cur_.fs->stack) stack += (stack.empty() ? "" : ", ") + describe(v);
    *trace_log_ += std::string(static_cast<size_t>(2 * cur_.depth), ' ') + std::to_string(ins.offset) + " " +
                   std::string(opcode_name(ins.opcode)) + " " + std::to_string(ins.arg) + "  (" +
                   location(ins) + ")  stack: [" + stack + "]\n";
  }
  if (log::enabled(log::Channel::Bytecode)) {
    std::string stack;
    for (const Value& v : cur_.fs->stack) stack += (stack.empty() ? "" : ", ") + describe(v);
    log::interp().info("{:>{}} {:<24} {:<5} line {:<4} stack: [{}]", ins.offset, 4 + 2 * cur_.depth,
                       opcode_name(ins.opcode), ins.arg, ins.line, stack);
  }
  return ok();
}

std::string Tracer::describe(const Value& v) const {
  switch (v.kind) {
    case ValueKind::Null: return "NULL";
    case ValueKind::Tensor: {
      const jit::Node& n = graph_.node(v.node);
      std::string s = "%" + std::to_string(v.node) + ":" + std::string(jit::dtype_name(n.dtype)) + "[";
      for (size_t i = 0; i < n.rank(); ++i) s += (i ? ", " : "") + n.sym[i].str();
      return s + "]";
    }
    case ValueKind::Const: return guards::describe_object(v.obj.get());
    case ValueKind::Sym: return v.expr.str();
    case ValueKind::Tuple:
    case ValueKind::List: {
      std::string s = v.kind == ValueKind::Tuple ? "(" : "[";
      for (size_t i = 0; i < v.items.size(); ++i) s += (i ? ", " : "") + describe(v.items[i]);
      return s + (v.kind == ValueKind::Tuple ? ")" : "]");
    }
    case ValueKind::Dict: {
      std::string s = "{";
      for (size_t i = 0; i + 1 < v.items.size(); i += 2) {
        s += (i ? ", " : "") + describe(v.items[i]) + ": " + describe(v.items[i + 1]);
      }
      return s + "}";
    }
    case ValueKind::Object: return "a " + object_class_name(v) + " object made in the frame";
    case ValueKind::Array: return "a NumPy array of " + describe(Value::tensor(v.node));
    case ValueKind::TensorMethod: return "Tensor." + v.method;
    case ValueKind::GradModeExit: return "<grad mode __exit__>";
    case ValueKind::Slice: return "<slice>";
    case ValueKind::Iterator: return "<iterator at " + std::to_string(v.next) + " of " + std::to_string(v.items.size()) + ">";
  }
  return "?";
}

std::string Tracer::location(const Instruction& ins) const {
  PyCodeObject* co = last_co_ ? last_co_ : cur_.co;
  return guards::utf8_lossy(co->co_filename) + ":" +
         std::to_string(ins.line >= 0 ? ins.line : co->co_firstlineno);
}

Status Tracer::jump_to(int offset) {
  const int idx = cur_.code->index_at(offset);
  if (idx < 0) return unsupported("jump to an unknown offset " + std::to_string(offset));
  cur_.fs->pc = static_cast<size_t>(idx);
  return ok();
}


// The dispatch table, from opcodes.def's handler column: Tracer::op_<family> per
// opcode; opcodes no family traces, and numbers 3.11 does not use, reach op_unsupported.
const std::array<Tracer::Handler, 256>& Tracer::handlers() {
  static constexpr std::array<Handler, 256> kTable = [] {
    std::array<Handler, 256> t{};
    t.fill(&Tracer::op_unsupported);
#define FJ_OPCODE(name, number, caches, flags, handler) t[number] = &Tracer::op_##handler;
#include "interp/trace/opcodes.def"
    return t;
  }();
  return kTable;
}

// (--): an opcode the tracer does not handle ends the trace, named.
Status Tracer::op_unsupported(const Instruction& ins) {
  return unsupported("opcode " + std::string(opcode_name(ins.opcode)) + " (not supported yet)");
}


// ---- the end of a trace: plan and compile ----

Status Tracer::finish(const Value& ret) {
  FJ_TRY(no_context_set("the return"));
  std::unordered_map<jit::NodeId, int> output_index;
  std::vector<jit::NodeId> outputs;
  ConvertCtx ctx;
  ctx.output_index = &output_index;
  ctx.outputs = &outputs;
  FJ_TRY(convert(ret, &plan_->ret, ctx));
  if (caller_lists_changed()) FJ_TRY(store_caller_lists(&plan_->ret, ctx));
  if (!global_names_.empty()) {
    PlanValue stores;
    stores.kind = PlanValue::Kind::Stores;
    stores.items.push_back(std::move(plan_->ret));
    for (size_t i = 0; i < global_names_.size(); ++i) {
      PlanValue dict, name, value;
      dict.obj = PyRef::borrow(global_names_[i].first);
      name.obj = global_names_[i].second;
      FJ_TRY(convert(global_writes_.locals[i], &value, ctx));
      stores.items.insert(stores.items.end(), {std::move(dict), std::move(name), std::move(value)});
    }
    plan_->ret = std::move(stores);
  }
  plan_->num_memos = ctx.num_memos;
  FJ_TRY(seal_writes(ctx));
  // A frame without tensor arguments and without tensor results is Python's work.
  if (outputs.empty() && placeholder_slot_.empty() && entry_->plan.steps.empty() && !continuation_) {
    return unsupported("no tensor work in this frame");
  }
  graph_.set_outputs(outputs);
  plan_->graph_args = placeholder_slot_;
  FJ_TRY(check_assumptions());  // also for ops whose results are unused
  return seal_outputs(outputs, &plan_->outputs);
}

// Size equalities the graph relies on (broadcasting s0 against s1, a view's element
// count), whether or not the ops that needed them are live: false in this call means
// eager raises, so the graph must not run; true, they are guarded for the calls that
// reuse the trace.
Status Tracer::check_assumptions() {
  for (const jit::SymExpr& a : graph_.assumptions()) {
    const auto v = a.eval(hints_);
    if (!v || !std::holds_alternative<bool>(*v) || !std::get<bool>(*v)) {
      return unsupported("sizes that do not fit: " + readable(a) + " is false here (eager raises)");
    }
    guards().add_expr(a, readable(a));
  }
  return ok();
}

Status Tracer::check_new_assumptions(const jit::Graph::Mark& since) {
  const std::vector<jit::SymExpr>& all = graph_.assumptions();
  for (size_t i = since.assumptions; i < all.size(); ++i) {
    const auto v = all[i].eval(hints_);
    if (v && std::holds_alternative<bool>(*v) && !std::get<bool>(*v)) {
      entry_->guards.add_expr(jit::logical_not(all[i]), "not " + readable(all[i]));  // this call's case
      raises_uncaught_ = !handler_on_stack();
      return unsupported("sizes that do not fit: " + readable(all[i]) + " is false here (eager raises)");
    }
  }
  return ok();
}

// The shapes of the nodes added since `first`, at this call's sizes: one whose element
// count, strides or bytes pass int64 (jit/ir/size_check.h) ends the trace, and eager
// raises its own error in CPython. Later calls are checked by the plan (run_graph).
Status Tracer::check_new_sizes(size_t first) const {
  for (size_t id = first; id < graph_.size(); ++id) {
    const jit::Node& n = graph_.node(static_cast<jit::NodeId>(id));
    if (!jit::sizes_fit(n.sym, jit::dtype_size(n.dtype), hints_)) {
      std::string sizes;
      for (const jit::SymExpr& e : n.sym) {
        const auto v = e.eval(hints_);
        if (!sizes.empty()) sizes += ", ";
        sizes += v && v->index() == 0 ? std::to_string(std::get<int64_t>(*v)) : e.str();
      }
      return unsupported("a tensor of sizes [" + sizes + "] past int64 (eager raises)");
    }
  }
  return ok();
}

// Output specs of the current graph, and the guards its building relied on.
Status Tracer::seal_outputs(const std::vector<jit::NodeId>& outputs, std::vector<OutputSpec>* specs) {
  for (jit::NodeId id : outputs) {
    const jit::Node& n = graph_.node(id);
    for (const jit::SymExpr& e : n.sym) {
      if (!e.is_constant()) plan_->must_evaluate.push_back(e);
    }
    specs->push_back(output_spec(n));
  }
  // Runtime numbers whose conversion eager checks (clamp bounds, where values):
  // guarded into the range that converts; outside it eager raises, so fall back.
  for (const jit::Graph::ScalarRange& r : graph_.scalar_ranges()) {
    const jit::SymExpr& e = plan_->scalar_inputs[static_cast<size_t>(r.index)];
    const bool is_int = graph_.node(scalar_nodes_[static_cast<size_t>(r.index)]).scalar_kind == jit::ScalarKind::Int;
    auto bound = [&](double v) { return is_int ? jit::SymExpr::integer(static_cast<int64_t>(v)) : jit::SymExpr::real(v); };
    std::vector<jit::SymExpr> conds = {jit::ge(e, bound(r.lo)), jit::le(e, bound(r.hi))};
    if (!is_int) {  // a float into float32: infinities and NaN convert too, as constants do (scalar_converts)
      const jit::SymExpr not_finite = jit::logical_or(jit::eq(jit::abs(e), jit::SymExpr::real(HUGE_VAL)), jit::ne(e, e));
      conds = {jit::logical_or(jit::logical_and(conds[0], conds[1]), not_finite)};
    }
    for (const jit::SymExpr& cond : conds) {
      const auto holds = cond.eval(hints_);
      if (!holds || holds->index() != 2 || !std::get<bool>(*holds)) return unsupported("a scalar operand out of the range eager converts (eager raises)");
      if (!cond.is_constant()) guards().add_expr(cond, readable(cond));
    }
  }
  return ok();
}

// torch's CPU kernels are AVX-512 ones ("AVX512"; "AVX2", "DEFAULT" otherwise):
// eager's float32 gelu(+inf) then gives NaN (see jit::CpuOptions).
bool torch_runs_avx512() {
  PyObject* mod = PyImport_ImportModule("torch.backends.cpu");
  PyObject* cap = mod ? PyObject_CallMethod(mod, "get_cpu_capability", nullptr) : nullptr;
  bool avx512 = cap && PyUnicode_Check(cap) && PyUnicode_CompareWithASCIIString(cap, "AVX512") == 0;
  if (!cap) PyErr_Clear();  // no such torch function: not AVX-512
  Py_XDECREF(cap);
  Py_XDECREF(mod);
  return avx512;
}

// Made on first use, with the GIL held throughout: the question to torch comes
// first, outside the lock and any static's initializer, since Python code may let
// other threads run, and one of them may fork (a child would find that lock taken
// for good). Held only by the GIL holder, the lock is free whenever a fork happens.
Expected<jit::CpuBackend*> cpu_backend() {
  static std::mutex mu;
  static std::atomic<jit::CpuBackend*> made{nullptr};
  static std::string failure;
  if (jit::CpuBackend* b = made.load(std::memory_order_acquire)) return b;
  const bool avx512 = torch_runs_avx512();
  std::lock_guard<std::mutex> lock(mu);
  if (made.load(std::memory_order_relaxed) == nullptr && failure.empty()) {
    jit::CpuOptions options;
    options.gelu_inf_is_nan = avx512;
    auto b = jit::CpuBackend::create(options);
    if (b) made.store(b->release(), std::memory_order_release);  // never destroyed: threads may compile during exit
    else failure = b.error();
  }
  if (jit::CpuBackend* b = made.load(std::memory_order_relaxed)) return b;
  return Error{failure};
}

// Compiles the current graph (its outputs set); the op list and counters follow.
Status Tracer::compile_graph(std::shared_ptr<jit::CompiledGraph>* out) {
  // The ops that the outputs need, in order (for explain and the op list).
  std::vector<bool> live(graph_.size(), false);
  for (jit::NodeId id : graph_.outputs()) live[static_cast<size_t>(id)] = true;
  for (jit::NodeId id : graph_.checks()) live[static_cast<size_t>(id)] = true;
  for (size_t i = graph_.size(); i-- > 0;) {
    if (!live[i]) continue;
    for (jit::NodeId in : graph_.node(static_cast<jit::NodeId>(i)).inputs) live[static_cast<size_t>(in)] = true;
  }
  for (size_t i = 0; i < graph_.size(); ++i) {
    const jit::Node& n = graph_.node(static_cast<jit::NodeId>(i));
    const jit::Family f = jit::op_family(n.op);
    if (live[i] && f != jit::Family::Input && f != jit::Family::Constant) entry_->ops.emplace_back(jit::aten_name(n.op));
  }
  if (log::enabled(log::Channel::Graph)) {
    log::interp().info("graph of {}:\n{}", guards::utf8_lossy(st_.code->co_qualname), graph_.str());
  }
  FJ_TRY(check_assumptions());
  // An opaque call of the plan may have changed torch's default dtype since the entry.
  if (guards::default_dtype() != guards::torch_refs().float32) {
    return unsupported("torch.get_default_dtype() changed during the trace (framejit traces under float32 only)");
  }
  guards().add_default_dtype(guards::torch_refs().float32);
  *out = FJ_TRY(compile_on_cpu(graph_, "the graph"));
  return ok();
}

namespace {

Expected<std::shared_ptr<jit::CompiledGraph>> compile_without_gil(jit::CpuBackend& backend, const jit::Graph& g,
                                                                  bool interruptible) {
  PyThreadState* saved = PyEval_SaveThread();
  auto compiled = backend.compile(g, interruptible);
  PyEval_RestoreThread(saved);
  return compiled;
}

}  // namespace

Expected<std::shared_ptr<jit::CompiledGraph>> Tracer::compile_on_cpu(const jit::Graph& g, const char* what) {
  Expected<jit::CpuBackend*> backend = cpu_backend();
  if (backend.failed()) return unsupported("the CPU backend is unavailable: " + backend.error());
  // LLVM needs no Python: other threads run meanwhile (a thread that misses the cache
  // of this same code waits for this trace; interp/hook.cpp). A signal that came
  // meanwhile ends the compile early: its handlers run here, and the compile starts
  // again unless one raised (KeyboardInterrupt, given to the caller). Handlers that
  // return and come often (a sampling profiler's timer) would restart it forever:
  // the third start goes on to the end whatever comes.
  auto compiled = compile_without_gil(**backend, g, true);
  for (int starts = 1; !compiled && compiled.error() == jit::kCompileInterrupted; ++starts) {
    if (compat::run_signal_handlers() < 0) {
      guards::clear_error();
      return unsupported(kInterrupted);
    }
    compiled = compile_without_gil(**backend, g, starts < 2);
  }
  if (!compiled) return unsupported(std::string("compiling ") + what + " failed: " + compiled.error());
  track_graph(*compiled);
  graphs_compiled_++;
  return compiled;
}

// Whether the graph calls torch ops (extern nodes): they run even when nothing reads
// their results, as eager's calls do: a random op moves the generator on, and a call
// may raise where its meta run did not (torch.matmul of bool and int64).
bool Tracer::has_extern_calls() const {
  return std::any_of(graph_.nodes().begin(), graph_.nodes().end(), [](const jit::Node& n) { return n.extern_fn != nullptr; });
}

Status Tracer::compile() {
  // Without outputs and checks the plan only rebuilds the return value, unless the
  // graph calls torch ops that nothing reads (see has_extern_calls).
  if (graph_.outputs().empty() && graph_.checks().empty() && !has_extern_calls()) return ok();
  entry_->graph_text = graph_.str();
  entry_->graph = std::make_shared<const jit::Graph>(graph_);  // the final segment's, for framejit.ptx
  if (autograd_) {
    bool joint = false;
    FJ_TRY(compile_joint(&joint));
    if (joint) return ok();
  }
  return compile_graph(&plan_->graph);
}

std::unique_ptr<CacheEntry> trace_frame(CodeState& state, compat::Frame* f, const guards::CallInputs& in,
                                        Fallback* why, TraceOutcome* out) {
  Expected<const DecodedCode*> code = decoded_code(state.code);
  if (code.failed()) {
    *why = Fallback{code.error(), guards::utf8_lossy(state.code->co_filename)};
    return nullptr;
  }
  // A ContextVar set that something outside the trace would see (a graph break, the
  // return) ends the trace before anything ran: traced again with ContextVar calls as
  // opaque calls (graph breaks).
  for (bool opaque_context_vars : {false, true}) {
    Tracer tracer(state, f, in, **code);
    tracer.opaque_context_vars_ = opaque_context_vars;
    std::string trace;
    if (!log::trace_dir().empty()) tracer.trace_log_ = &trace;
    std::unique_ptr<CacheEntry> entry = tracer.run(why);
    if (!log::trace_dir().empty()) write_trace_dump(state.code, trace, entry.get(), *why);
    if (!entry && !tracer.ran_ && tracer.context_set_seen_ && !opaque_context_vars && !PyErr_Occurred()) continue;
    out->ran = tracer.ran_;
    out->result = tracer.result_.release();
    return entry;
  }
  return nullptr;
}

}  // namespace fj::interp
