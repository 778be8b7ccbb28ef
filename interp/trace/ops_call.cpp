// CALL in named steps: torch ops, Python functions (inlined), tensor methods, builtins
// (ops_builtins.cpp), math functions; what none traces runs as an opaque call.
#include "interp/trace/tracer.h"

#include <algorithm>
#include <cmath>

#include "interp/hook.h"

namespace fj::interp {
namespace {

// A function defined in the frame (MAKE_FUNCTION), or a container holding one.
bool holds_fresh(const Value& v) {
  if (v.fresh) return true;
  for (const Value& item : v.items) {
    if (holds_fresh(item)) return true;
  }
  return false;
}

}  // namespace

// (NULL_or_callable, callable_or_self, args... -- result)
Status Tracer::op_call(const Instruction& ins) {
  CallSite c = pop_call(ins);
  return dispatch_call(c);
}

// The call's steps, in order; the first that takes the call traces it.
Status Tracer::dispatch_call(CallSite& c) {
  const Instruction& ins = *c.ins;
  if (std::optional<Status> s = autograd_call(c.callable, c.args, c.kw_names.get())) return std::move(*s);
  if (is_opaque(c.callable) && c.callable.reg < 0) {
    // An object passed through unguarded (a function argument): the next call's may be
    // another, so nothing is decided from it: the call runs as it is (a graph break).
    c.can_break = !c.no_break && can_cut(ins).ok();
    c.before = graph_.mark();
    if (c.can_break) c.orig_args = c.args;
    return opaque_call(c, unsupported("call to " + describe(c.callable) + " (not supported yet)"), std::move(c.args));
  }
  if (std::optional<Status> s = call_numpy_array(c)) return std::move(*s);
  if (std::optional<Status> s = call_grad_mode(c)) return std::move(*s);
  if (std::optional<Status> s = call_partial(c)) return std::move(*s);
  if (std::optional<Status> s = call_folded(c, /*specialize=*/false)) return std::move(*s);
  if (std::optional<Status> s = call_operator(c)) return std::move(*s);
  if (std::optional<Status> s = call_sorted_min_max(c)) return std::move(*s);
  if (std::optional<Status> s = call_function_applying(c)) return std::move(*s);
  if (std::optional<Status> s = call_structural(c)) return std::move(*s);
  if (std::optional<Status> s = call_container_method(c)) return std::move(*s);
  // abs() and round() of a Python number are builtins of numbers, not torch ops.
  const bool numbers_only = pure_callable(c.callable, c.args) &&
                            std::none_of(c.args.begin(), c.args.end(), [&](const Value& a) { return is_tensor(a); });
  const PyOp* torch_op = c.callable.kind == ValueKind::Const && !is_opaque(c.callable) && !numbers_only
                             ? torch_function_op(c.callable.obj.get())
                             : nullptr;
  // einsum is handled below, where what it does not lower can become a graph break.
  const bool einsum = torch_op != nullptr && torch_op->binding == Binding::Tensor && torch_op->tensor_op == TensorOp::Einsum;
  if (torch_op != nullptr && !einsum) {
    // A case the table's lowering does not take (dropout in training) may still be an
    // extern call; the lowering's own reason stands where that fails too, and where
    // eager raises (a meta run may not: max over an empty dim).
    CallSite again = c;
    const jit::Graph::Mark before = graph_.mark();
    const size_t depth = cur_.fs->stack.size();
    Status s = call_torch_function(*torch_op, c);
    if (s.ok() || call_raised_ || committed_ || cur_.fs->stack.size() != depth) return s;
    if (const std::string& why = s.error(); why.find("eager raises") != std::string::npos ||
                                            why.find("non-zero size") != std::string::npos) {
      return s;
    }
    graph_.roll_back(before);
    std::optional<Status> e = call_extern(again);
    return e && e->ok() ? std::move(*e) : s;
  }
  if (std::optional<Status> s = call_torch_inplace(c)) return std::move(*s);
  if (std::optional<Status> s = call_override_check(c)) return std::move(*s);
  // What cannot be traced at the root frame becomes a graph break: the call runs as
  // it is, between two graph segments (see interp/trace/breaks.cpp).
  c.can_break = !c.no_break && c.callable.kind == ValueKind::Const && can_cut(ins).ok();
  c.before = graph_.mark();
  if (c.can_break) c.orig_args = c.args;
  if (einsum) {
    // Equations it does not lower, and those eager rejects, run as eager's einsum: the
    // same result, the same exception.
    Status s = c.kw_names ? unsupported("einsum() with keyword arguments (CPython raises)")
                          : call_py_op(*torch_op, c.args, nullptr);
    return s.failed() ? opaque_call(c, s.take_error(), c.orig_args) : s;
  }
  if (std::optional<Status> s = call_context_var(c)) return std::move(*s);
  if (std::optional<Status> s = call_exception_class(c)) return std::move(*s);
  if (std::optional<Status> s = call_tuple_new(c)) return std::move(*s);
  if (std::optional<Status> s = call_collection(c)) return std::move(*s);
  if (std::optional<Status> s = call_object_init(c)) return std::move(*s);
  if (c.callable.kind == ValueKind::Const && PyFunction_Check(c.callable.obj.get())) {
    if (std::optional<Status> s = call_builtin(c)) return std::move(*s);  // inspect.signature, computed
  }
  if (std::optional<Status> s = call_python_function(c)) return std::move(*s);
  if (c.callable.kind == ValueKind::TensorMethod) return call_tensor_method(c);
  if (std::optional<Status> s = call_torch_tensor(c)) return std::move(*s);
  if (std::optional<Status> s = call_extern(c)) return std::move(*s);
  if (c.kw_names) {
    if (std::optional<Status> s = call_builtin(c)) return std::move(*s);  // zip(strict=), enumerate(start=)
    if (std::optional<Status> s = call_folded(c, /*specialize=*/true)) return std::move(*s);
    return opaque_call(c, unsupported("keyword arguments in a call to " + describe(c.callable) + " (not supported yet)"),
                       std::move(c.args));
  }
  if (std::optional<Status> s = call_builtin(c)) return std::move(*s);
  if (std::optional<Status> s = call_folded(c, /*specialize=*/true)) return std::move(*s);
  return opaque_call(c, unsupported("call to " + describe(c.callable) + " (not supported yet)"), std::move(c.args));
}

// A method of a container the frame made: list.sort, a deque's, a dict's that change it.
std::optional<Status> Tracer::call_container_method(const CallSite& c) {
  if (c.callable.kind != ValueKind::TensorMethod || c.args.empty()) return std::nullopt;
  const Value& self = c.args[0];
  if (c.callable.method == "sort" && self.kind == ValueKind::List) return list_sort(c);
  if (DequeCalls::is_deque(self)) return DequeCalls::method(*this, c);
  if (self.kind == ValueKind::Dict) return dict_change_method(c.callable.method, c.args, c.kw_names.get());
  return std::nullopt;
}

// Pops CALL's operands: the callable, its arguments (self first for a method), and
// the keyword names that KW_NAMES set for this call.
CallSite Tracer::pop_call(const Instruction& ins) {
  CallSite c;
  c.ins = &ins;
  const size_t argc = static_cast<size_t>(ins.arg);
  c.kw_names = std::move(cur_.fs->kw_names);
  cur_.fs->kw_names = PyRef();
  c.args.assign(cur_.fs->stack.end() - static_cast<std::ptrdiff_t>(argc), cur_.fs->stack.end());
  cur_.fs->stack.resize(cur_.fs->stack.size() - argc);
  Value second = pop();
  Value first = pop();
  if (first.kind == ValueKind::Null && second.kind == ValueKind::TensorMethod && second.items.size() == 1) {
    c.args.insert(c.args.begin(), std::move(second.items[0]));  // a tensor method read as a value: its tensor
    second.items.clear();
    c.callable = std::move(second);
  } else if (first.kind == ValueKind::Null) {
    c.callable = std::move(second);
  } else {
    c.callable = std::move(first);
    c.args.insert(c.args.begin(), std::move(second));
  }
  return c;
}

// torch.add(x, y) & co, from the op table.
Status Tracer::call_torch_function(const PyOp& op, CallSite& c) {
  const size_t npos = c.args.size() - (c.kw_names ? static_cast<size_t>(PyTuple_GET_SIZE(c.kw_names.get())) : 0);
  if (!takes_scalar_first(c.callable.obj.get()) && (npos == 0 || !is_tensor(c.args[0]))) {
    return unsupported(op.name + "() whose first argument is not a tensor (CPython raises)");
  }
  return call_py_op(op, std::move(c.args), c.kw_names.get());
}

bool library_function(PyObject* fn, const char* module, const char* qualname) {
  if (!PyFunction_Check(fn)) return false;
  PyObject* name = PyDict_GetItemString(PyFunction_GET_GLOBALS(fn), "__name__");  // borrowed
  auto* code = reinterpret_cast<PyCodeObject*>(PyFunction_GET_CODE(fn));
  return name != nullptr && PyUnicode_Check(name) && PyUnicode_CompareWithASCIIString(name, module) == 0 &&
         PyUnicode_CompareWithASCIIString(code->co_qualname, qualname) == 0;
}

namespace {

// A function of torch's C extension (torch.from_numpy, torch.as_tensor).
bool torch_builtin(PyObject* fn) {
  if (!PyCFunction_Check(fn)) return false;
  PyObject* module = reinterpret_cast<PyCFunctionObject*>(fn)->m_module;
  return module != nullptr && PyUnicode_Check(module) && PyUnicode_CompareWithASCIIString(module, "torch") == 0;
}


// The __repr__ that a dataclass's recursion guard wraps (dataclasses._recursive_repr:
// it keys a set on id(self) and the thread, only to print "..." for a cycle, which a
// trace of the wrapped function would not reach either); else null.
PyObject* recursion_guarded_repr(PyObject* fn) {
  if (!library_function(fn, "dataclasses", "_recursive_repr.<locals>.wrapper")) return nullptr;
  PyRef wrapped = PyRef::steal(PyObject_GetAttrString(fn, "__wrapped__"));
  if (!wrapped) PyErr_Clear();
  return wrapped && PyFunction_Check(wrapped.get()) ? wrapped.get() : nullptr;  // the wrapper holds it
}

// The function that functools.lru_cache wraps, when `fn` is such a wrapper of a
// Python function; else null.
PyObject* lru_cached_target(PyObject* fn) {
  static PyObject* const wrapper = lookup_attr("functools", "_lru_cache_wrapper");
  if (wrapper == nullptr || !PyType_Check(wrapper) || Py_TYPE(fn) != reinterpret_cast<PyTypeObject*>(wrapper)) return nullptr;
  PyRef wrapped = PyRef::steal(PyObject_GetAttrString(fn, "__wrapped__"));
  if (!wrapped) PyErr_Clear();
  return wrapped && PyFunction_Check(wrapped.get()) ? wrapped.get() : nullptr;  // the wrapper holds it
}

// Objects copy.deepcopy returns as they are: numbers, strings, bytes, None, and tuples
// of them (copy's atomic types; a tuple whose items all copy to themselves).
bool deepcopy_returns_itself(PyObject* o) {
  if (o == Py_None || PyLong_CheckExact(o) || PyFloat_CheckExact(o) || PyBool_Check(o) || PyUnicode_CheckExact(o) ||
      PyBytes_CheckExact(o) || PyComplex_CheckExact(o)) {
    return true;
  }
  if (!PyTuple_CheckExact(o)) return false;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(o); ++i) {
    if (!deepcopy_returns_itself(PyTuple_GET_ITEM(o, i))) return false;
  }
  return true;
}

bool deepcopy_returns_itself(const Value& v) {
  if (v.kind == ValueKind::Sym) return !v.obj;  // a NumPy scalar is copied
  if (v.kind == ValueKind::Const) return !v.opaque && v.reg < 0 && v.obj && deepcopy_returns_itself(v.obj.get());
  if (v.kind != ValueKind::Tuple || v.obj || v.torch_size) return false;
  return std::all_of(v.items.begin(), v.items.end(), [](const Value& item) { return deepcopy_returns_itself(item); });
}

}  // namespace

// A call that could not be traced (`failed` says why) runs as it is, as a plan step
// between two graph segments, where it can; else `failed` ends the trace.
Status Tracer::opaque_call(const CallSite& c, Error failed, std::vector<Value> call_args) {
  if (!c.can_break || call_raised_ || raising_) return failed;
  // A function defined in the frame cannot be an argument of a plan step (a cache
  // hit would pass the trace's object): the frame resumes in CPython before the call.
  bool fresh = c.callable.fresh;
  for (const Value& a : call_args) fresh |= holds_fresh(a);
  if (fresh) return failed;
  if (autograd_) {  // plan steps would cut the autograd graph (interp/trace/autograd_trace.cpp)
    return unsupported(failed.message + "; no graph break where tensors require grad (not supported yet)");
  }
  // A frame without tensors is Python's work, until a torch function makes one
  // (torch.from_numpy(a)); a call whose result enters a with block would only resume
  // in CPython right after it.
  const bool tensors = !placeholder_slot_.empty() || graph_.size() > 0 || !entry_->plan.steps.empty() ||
                       (c.callable.obj && torch_builtin(c.callable.obj.get()));
  const size_t next = cur_.fs->pc + 1;
  if (!tensors || (next < cur_.code->instructions.size() &&
                   cur_.code->instructions[next].opcode == op(Opcode::BEFORE_WITH))) {
    return failed;
  }
  PyObject* callable = c.callable.obj.get();
  // Building a builtin exception has no side effect: not a graph break.
  const bool pure = callable != nullptr && PyExceptionClass_Check(callable) &&
                    !(reinterpret_cast<PyTypeObject*>(callable)->tp_flags & Py_TPFLAGS_HEAPTYPE);
  // What an inlined attempt recorded (a size equality that fails, an int() check)
  // belongs to a call that now runs in CPython.
  graph_.roll_back(c.before);
  Status s = break_call(c.callable, std::move(call_args), c.kw_names.get(), pure, failed.message);
  return s.failed() && !call_raised_ && !committed_ ? Status(std::move(failed)) : s;
}

// A Python function, a bound method or a framejit-compiled function, and an
// nn.Module without hooks (its forward): the body is traced into the same graph.
// nullopt: the callable is none of these.
std::optional<Status> Tracer::call_python_function(CallSite& c) {
  if (c.callable.kind == ValueKind::Object) {  // an object made in the frame, called: its class's __call__
    static PyObject* call_name = PyUnicode_InternFromString("__call__");
    PyObject* call = _PyType_Lookup(reinterpret_cast<PyTypeObject*>(c.callable.obj.get()), call_name);
    if (call == nullptr || !PyFunction_Check(call)) return unsupported("call of " + describe(c.callable) + " (not supported yet)");
    c.args.insert(c.args.begin(), c.callable);
    return inline_call(call, std::move(c.args), c.kw_names.get());
  }
  if (c.callable.kind != ValueKind::Const || is_opaque(c.callable)) return std::nullopt;
  PyObject* target = c.callable.obj.get();
  if (PyObject* fn = compiled_function_target(target)) target = fn;
  // copy.deepcopy(x) of what it returns as it is (its memo, keyed on id(x), stays unseen).
  if (library_function(target, "copy", "deepcopy") && c.args.size() == 1 && !c.kw_names &&
      deepcopy_returns_itself(c.args[0])) {
    push(c.args[0]);
    return ok();
  }
  // functools.lru_cache / cache: the function it wraps is traced, for arguments that
  // are numbers, strings and tuples of them (what eager's cache would key on by value)
  // and a result of the same kind (eager hands out the cached object itself). The
  // cache is neither read nor filled.
  const bool cached = lru_cached_target(target) != nullptr;
  if (cached) {
    for (const Value& a : c.args) {
      if (!knowable(a, /*specialize=*/true)) {
        return opaque_call(c, unsupported("an lru_cache function called with " + describe(a) + " (not supported yet)"),
                           std::move(c.args));
      }
    }
    target = lru_cached_target(target);
  }
  if (PyMethod_Check(target) && PyFunction_Check(PyMethod_GET_FUNCTION(target))) {
    Value self = Value::constant(PyRef::borrow(PyMethod_GET_SELF(target)));
    self.opaque = true;
    // A method the trace bound (Tracer::computed_attr) knows its self's source.
    if (c.callable.fresh && c.callable.items.size() == 1) self = c.callable.items[0];
    c.args.insert(c.args.begin(), std::move(self));
    target = PyMethod_GET_FUNCTION(target);
  } else if (PyFunction_Check(target) && c.callable.fresh && c.callable.items.size() == 1) {
    c.args.insert(c.args.begin(), c.callable.items[0]);  // a method of an object made in the frame (object_attr)
  }
  const int writes_before = writes_;
  if (std::optional<Status> s = construct_object(c)) {
    if (s->failed() && (raising_ || writes_ != writes_before)) return s;  // its writes were traced
    return s->failed() && !call_raised_ ? opaque_call(c, s->take_error(), c.orig_args) : std::move(*s);
  }
  PyRef new_fn;  // a class called: its Python __new__
  if (!PyFunction_Check(target)) {
    if (!is_grad_mode_class(target)) new_fn = class_new_function(target);  // with torch.no_grad() is call_grad_mode's
    target = new_fn ? new_fn.get() : module_forward(c.callable);
    if (target == nullptr && !new_fn) target = instance_call(c.callable);
    if (target == nullptr) return std::nullopt;
    c.args.insert(c.args.begin(), c.callable);
  }
  if (std::optional<Status> s = module_generator(target, c.args, c.kw_names.get())) return std::move(*s);
  const int writes = writes_;
  Status s = inline_call(target, std::move(c.args), c.kw_names.get());
  if (s.ok() && cached && !knowable(top(), /*specialize=*/true)) {
    const Value r = pop();
    s = unsupported("an lru_cache function's result " + describe(r) + " (eager returns its cached object)");
  }
  if (s.ok() && new_fn && needs_own_init(c.callable.obj.get(), top())) {
    pop();
    s = unsupported("construction of a " + describe(c.callable) + " object (not supported yet)");
  }
  if (s.failed() && raising_) return s;  // a handler of a caller takes it
  // A call from the frame's top that could not be inlined whole runs in CPython:
  // its own frames are then framejit's (hook.h), with the break nearer their top.
  if (s.failed() && cur_.depth == 0 && !call_raised_) {
    watch_nested(reinterpret_cast<PyCodeObject*>(PyFunction_GET_CODE(target)), st_);
  }
  // A callee that wrote tensors in place before failing: its writes were traced,
  // so the call cannot run again as an opaque step.
  if (s.failed() && writes_ != writes) return s;
  return s.failed() ? opaque_call(c, s.take_error(), c.orig_args) : s;
}

// x.method(...): in-place methods, methods from the op table, and size methods.
Status Tracer::call_tensor_method(CallSite& c) {
  const std::string& method = c.callable.method;
  if (method == "numpy" && !c.args.empty() && is_tensor(c.args[0])) return tensor_numpy(c);
  if (!c.args.empty() && c.args[0].kind == ValueKind::Array) {  // a NumPy method: CPython's call
    Value bound = Value::tensor_method(method);
    bound.items.push_back(c.args[0]);
    CallSite call = c;
    call.callable = std::move(bound);
    call.args.erase(call.args.begin());
    call.can_break = !c.no_break && can_cut(*c.ins).ok();
    if (call.can_break) call.orig_args = call.args;
    return opaque_call(call, unsupported("NumPy array method ." + method + "() (not supported yet)"), call.args);
  }
  if (!c.args.empty() && (c.args[0].kind == ValueKind::Dict || is_path_dict(c.args[0]))) {
    if (c.kw_names) return unsupported("keyword arguments to dict." + method + "()");
    return call_dict_method(method, c.args);
  }
  if (!c.args.empty() && c.args[0].kind == ValueKind::List) {
    if (c.kw_names) return unsupported("keyword arguments to list." + method + "() (CPython raises)");
    return call_list_method(method, c.args);
  }
  if (!c.args.empty() && c.args[0].kind == ValueKind::Tuple && (method == "index" || method == "count") &&
      c.args.size() == 2 && !c.kw_names) {
    return list_find(method, c.args[0].items, c.args[1]);
  }
  if (c.args.size() == 1 && c.args[0].kind == ValueKind::Tuple && c.args[0].torch_size && method == "numel" && !c.kw_names) {
    jit::SymExpr n = jit::SymExpr::constant(int64_t{1});
    for (const Value& d : c.args[0].items) {
      const std::optional<jit::SymExpr> e = as_sym(d);
      if (!e || e->type() != jit::SymType::Int) return unsupported("torch.Size.numel() of " + describe(c.args[0]));
      n = jit::mul(n, *e);
    }
    return push_sym(n, "torch.Size.numel()");
  }
  if (!c.args.empty() && is_number(c.args[0])) return unsupported("method ." + method + "() of a Python number");
  FJ_TRY(require_tensor_attr(method));
  if (is_inplace_method(method)) return call_inplace_method(method, std::move(c.args), c.kw_names.get());
  if (const PyOp* op = tensor_method_op(method)) return call_py_op(*op, std::move(c.args), c.kw_names.get());
  if (is_meta_method(method)) return call_meta_method(method, c.args, c.kw_names.get());
  if (!is_shape_method(method)) {
    if (std::optional<Status> s = call_extern_method(c)) return std::move(*s);
  }
  if (c.kw_names) return unsupported("keyword arguments to ." + method + "()");
  return call_shape_method(method, c.args);
}

// A symbolic Python number made concrete (its value in this call, guarded to keep it):
// what cannot stay symbolic, such as a math function's argument or an f-string's value.
// A float zero also has its sign guarded: == does not tell -0.0 from 0.0.
Status Tracer::concrete_number(const Value& a, const std::string& what, PyRef* out) {
  const auto v = a.expr.eval(hints_);
  if (!v) return unsupported(what + " of a value that does not exist");
  *out = PyRef::steal(sym_value_to_python(*v));
  if (*out && a.obj) *out = PyRef::steal(PyObject_CallOneArg(a.obj.get(), out->get()));  // np.float64(2.5)
  if (!*out) {
    guards::clear_error();
    return unsupported(what + ": its NumPy scalar could not be made");
  }
  if (a.expr.is_constant()) return ok();
  entry_->guards.add_expr(jit::eq(a.expr, jit::SymExpr::constant(*v)), readable(a.expr) + " == " + jit::SymExpr::constant(*v).str());
  if (std::holds_alternative<double>(*v) && std::get<double>(*v) == 0.0) {
    // -0.0 == 0.0: the zero's sign is guarded on its own.
    const jit::SymExpr sign = jit::copysign(jit::SymExpr::real(1.0), a.expr);
    const double now = std::signbit(std::get<double>(*v)) ? -1.0 : 1.0;
    entry_->guards.add_expr(jit::eq(sign, jit::SymExpr::real(now)), "copysign(1.0, " + readable(a.expr) + ") == " + jit::SymExpr::real(now).str());
  }
  return ok();
}

// The forward of an nn.Module called as m(...), when the call would reach it
// directly (no hooks anywhere, forward and __call__ not overridden), with guards
// that keep it so; nullptr otherwise.
PyObject* Tracer::module_forward(const Value& m) {
  const auto& refs = guards::module_call_refs();
  PyObject* obj = m.obj.get();
  PyTypeObject* tp = Py_TYPE(obj);
  PyRef call_name = PyRef::steal(PyUnicode_InternFromString("__call__"));
  PyRef fwd_name = PyRef::steal(PyUnicode_InternFromString("forward"));
  if (refs.call == nullptr || _PyType_Lookup(tp, call_name.get()) != refs.call) return nullptr;
  PyObject* forward = _PyType_Lookup(tp, fwd_name.get());
  PyObject** dictptr = _PyObject_GetDictPtr(obj);
  if (forward == nullptr || !PyFunction_Check(forward) || dictptr == nullptr || *dictptr == nullptr) return nullptr;
  if (PyDict_GetItemWithError(*dictptr, fwd_name.get()) != nullptr) return nullptr;  // forward set on the instance
  const std::vector<std::string> hook_names = {"_forward_hooks", "_forward_pre_hooks", "_backward_hooks",
                                               "_backward_pre_hooks"};
  std::vector<PyObject*> hooks = refs.global_hooks;
  for (const std::string& name : hook_names) {
    PyObject* d = PyDict_GetItemString(*dictptr, name.c_str());
    if (d == nullptr || !PyDict_Check(d)) return nullptr;
    hooks.push_back(d);
  }
  guards::clear_error();
  for (PyObject* d : hooks) {
    if (!PyDict_Check(d) || PyDict_GET_SIZE(d) != 0) return nullptr;
  }
  guards::PathRoot root;
  PyRef holder;
  if (!path_root(m, &root, &holder)) return nullptr;
  const std::string text = source_text(m.source);
  // The global hook dicts by identity; the module's own by path (whichever instance).
  guards().add_dicts_empty("torch.nn.modules.module (global hooks)", refs.global_hooks);
  guards().add_path_hooks_empty(text, root, m.source.attrs, hook_names);
  guards().add_path_method(text, root, m.source.attrs, "__call__", refs.call);
  guards().add_path_method(text, root, m.source.attrs, "forward", forward);
  return forward;
}

// A callable object of a plain class (not a class, not an nn.Module): its class's
// Python __call__, guarded as the method of the object at its path. nullptr: none.
PyObject* Tracer::instance_call(const Value& v) {
  PyObject* obj = v.obj.get();
  if (PyType_Check(obj)) return nullptr;
  static PyObject* call_name = PyUnicode_InternFromString("__call__");
  PyObject* call = _PyType_Lookup(Py_TYPE(obj), call_name);
  if (call == nullptr || !PyFunction_Check(call) || call == guards::module_call_refs().call) return nullptr;
  guards::PathRoot root;
  PyRef holder;
  if (!path_root(v, &root, &holder)) return nullptr;
  guards().add_path_method(source_text(v.source), root, v.source.attrs, "__call__", call);
  return call;
}

// ---- inlining ----




Expected<const DecodedCode*> decoded_code(PyCodeObject* co) {
  CodeState* cs = code_state(co, true);
  if (cs == nullptr) {
    guards::clear_error();
    return Error{"cannot attach framejit state to the code object"};
  }
  if (!cs->decoded) {
    auto decoded = decode(co);
    if (!decoded) return Error{"cannot decode the bytecode: " + decoded.error()};
    cs->decoded = std::make_shared<const DecodedCode>(std::move(*decoded));
  }
  return static_cast<const DecodedCode*>(cs->decoded.get());
}

// Cells of the returning frame fs's locals: a function that outlives the frame
// (returned, stored) still reads and writes them, in returned_cells_ (one slot per
// local, as CPython has one cell per variable).
void Tracer::keep_returned_cells(FrameState& fs) {
  std::unordered_map<int, int> moved;
  for (auto& [cell, at] : traced_cells_) {
    if (at.first != &fs) continue;
    auto [it, fresh] = moved.emplace(at.second, static_cast<int>(returned_cells_.locals.size()));
    if (fresh) returned_cells_.locals.push_back(fs.locals[static_cast<size_t>(at.second)]);
    at = {&returned_cells_, it->second};
  }
}

// Traces a call of the Python function `fn` in a frame of its own, binding
// arguments as CPython does (positional, keyword, defaults, *args).
Status Tracer::inline_call(PyObject* fn, std::vector<Value> args, PyObject* kw_names) {
  ++inlines_;
  if (PyObject* inner = recursion_guarded_repr(fn)) fn = inner;
  if (std::optional<Status> s = grad_decorated(fn, args, kw_names)) return std::move(*s);
  auto* func = reinterpret_cast<PyFunctionObject*>(fn);
  auto* co = reinterpret_cast<PyCodeObject*>(func->func_code);
  const std::string qualname = guards::utf8_lossy(co->co_qualname);
  if (cur_.depth >= kMaxInlineDepth) {
    return unsupported("calls nested deeper than " + std::to_string(kMaxInlineDepth) + " (at " + qualname + ")");
  }
  // A generator (a generator expression, a generator function's call) is run to its end
  // here: its items become an iterator. Its body interleaves with the consumer in
  // eager, so one that writes (a tensor in place, a list, an attribute, a variable
  // closures read) is not run early, nor one with a try or with block (its cleanup
  // and its context belong between the items), and the consumer may not write while
  // items remain (Value::writes).
  const bool generator = (co->co_flags & CO_GENERATOR) != 0;
  if (co->co_flags & (CO_COROUTINE | CO_ASYNC_GENERATOR | CO_ITERABLE_COROUTINE)) {
    return unsupported("call of the coroutine " + qualname);
  }
  guards().add_function(fn);
  const DecodedCode* decoded = FJ_TRY(decoded_code(co));
  if (generator && !decoded->exception_table.empty()) {
    return unsupported("call of the generator " + qualname + ", which has a try or with block (not supported yet)");
  }

  FrameState fs;
  fs.locals.resize(static_cast<size_t>(co->co_nlocalsplus));
  if (generator) fs.yields.emplace();
  const size_t nkw = kw_names ? static_cast<size_t>(PyTuple_GET_SIZE(kw_names)) : 0;
  const size_t npos = args.size() - nkw;
  const size_t argcount = static_cast<size_t>(co->co_argcount);
  const size_t nparams = argcount + static_cast<size_t>(co->co_kwonlyargcount);
  const bool varargs = co->co_flags & CO_VARARGS;
  const bool varkw = co->co_flags & CO_VARKEYWORDS;
  Value extra;  // **kwargs: the keywords no parameter takes
  extra.kind = ValueKind::Dict;
  const std::string bad = "arguments that do not match " + qualname + "'s parameters (CPython raises)";
  if (npos > argcount && !varargs) return unsupported(bad);
  std::vector<bool> set(nparams, false);
  for (size_t i = 0; i < std::min(npos, argcount); ++i) {
    fs.locals[i] = std::move(args[i]);
    set[i] = true;
  }
  if (varargs) {
    std::vector<Value> rest;
    for (size_t i = argcount; i < npos; ++i) rest.push_back(std::move(args[i]));
    fs.locals[nparams] = Value::sequence(ValueKind::Tuple, std::move(rest));
  }
  for (size_t k = 0; k < nkw; ++k) {
    PyObject* name = PyTuple_GET_ITEM(kw_names, static_cast<Py_ssize_t>(k));
    size_t j = static_cast<size_t>(co->co_posonlyargcount);
    while (j < nparams && PyUnicode_Compare(PyTuple_GET_ITEM(co->co_localsplusnames, j), name) != 0) ++j;
    if (j == nparams && varkw) {
      extra.items.push_back(Value::constant(PyRef::borrow(name)));
      extra.items.push_back(std::move(args[npos + k]));
      continue;
    }
    if (j == nparams || set[j]) return unsupported(bad);
    fs.locals[j] = std::move(args[npos + k]);
    set[j] = true;
  }
  if (varkw) {
    extra.identity = next_identity_++;
    fs.locals[nparams + (varargs ? 1 : 0)] = std::move(extra);
  }
  PyObject* defaults = func->func_defaults;
  const auto made = made_defaults_.find(fn);  // traced defaults of a function made in the frame
  const Value* made_pos = made != made_defaults_.end() && made->second.defaults.kind == ValueKind::Tuple ? &made->second.defaults : nullptr;
  const Value* made_kw = made != made_defaults_.end() && made->second.kwdefaults.kind == ValueKind::Dict ? &made->second.kwdefaults : nullptr;
  const size_t ndef = made_pos ? made_pos->items.size() : defaults ? static_cast<size_t>(PyTuple_GET_SIZE(defaults)) : 0;
  for (size_t j = 0; j < nparams; ++j) {
    if (set[j]) continue;
    PyObject* d = nullptr;
    PyObject* name = PyTuple_GET_ITEM(co->co_localsplusnames, j);
    if (j < argcount && j + ndef >= argcount && made_pos) {
      fs.locals[j] = made_pos->items[j + ndef - argcount];
      continue;
    } else if (j < argcount && j + ndef >= argcount) {
      d = PyTuple_GET_ITEM(defaults, static_cast<Py_ssize_t>(j + ndef - argcount));
    } else if (j >= argcount && made_kw) {
      const long at = dict_find(*made_kw, name);
      if (at < 0) return unsupported(bad);
      fs.locals[j] = made_kw->items[static_cast<size_t>(at) + 1];
      continue;
    } else if (j >= argcount && func->func_kwdefaults != nullptr) {
      d = PyDict_GetItemWithError(func->func_kwdefaults, name);
    }
    if (d == nullptr) return unsupported(bad);
    Value v = Value::constant(PyRef::borrow(d));
    v.opaque = !is_immutable_known(d);  // a mutable default is used as-is, never looked into
    v.pinned = v.opaque;         // (a sentinel default: `flag is _MISSING` compares it)
    fs.locals[j] = std::move(v);
  }
  // Free variables: each closure cell's content, guarded by the cell itself.
  const int first_free = co->co_nlocalsplus - co->co_nfreevars;
  for (int k = 0; k < co->co_nfreevars; ++k) {
    PyObject* cell = PyTuple_GET_ITEM(func->func_closure, k);
    if (auto t = traced_cells_.find(cell); t != traced_cells_.end()) {  // a local of a traced frame
      fs.locals[static_cast<size_t>(first_free + k)] = t->second.first->locals[static_cast<size_t>(t->second.second)];
      continue;
    }
    PyObject* v = PyCell_GET(cell);
    if (v == nullptr) continue;
    const std::string name = guards::utf8_lossy(PyTuple_GET_ITEM(co->co_localsplusnames, first_free + k));
    guards().add_cell(cell, name, v);
    fs.locals[static_cast<size_t>(first_free + k)] = closure_value(name, v);
  }

  const FrameCtx caller = cur_;
  const long caller_drift = std::exchange(stack_drift_, 0);  // the caller is between PRECALL and CALL
  const bool same_globals = func->func_globals == in_.globals;
  cur_ = FrameCtx{&fs, decoded, co, func->func_globals, func->func_builtins,
                  same_globals ? nullptr : func->func_globals, same_globals ? nullptr : func->func_builtins,
                  caller.depth + 1, func->func_closure};
  Value ret;
  // A generator reads what its arguments and free variables hold (Value::reads).
  std::shared_ptr<const std::vector<int>> reads = generator ? identities_in(state_roots(fs)) : nullptr;
  const size_t log_before = write_log_.size();
  inlined_frames_.push_back(&fs);
  callers_.push_back(caller);
  Status s = execute(&ret);
  callers_.pop_back();
  inlined_frames_.pop_back();
  if (s.failed() && attribute_error_proved_ && fs.pc < decoded->instructions.size()) {
    // A handler of this frame around the failing instruction would see the error.
    const int at = decoded->instructions[fs.pc].offset;
    for (const ExceptionEntry& e : decoded->exception_table) {
      if (at >= e.start && at < e.end) attribute_error_proved_ = false;
    }
  }
  keep_returned_cells(fs);
  cur_ = caller;
  stack_drift_ = caller_drift;
  if (s.failed()) return s;
  if (generator) return ran_ahead(std::move(*fs.yields), log_before, reads);
  push(std::move(ret));
  return ok();
}

// A generator run to its end (inline_call): the iterator of what it yielded, unless it
// changed something since the write_log_ position `since`. It reads `reads` (what its
// arguments and free variables held), what it yields, and the globals the frame assigned.
Status Tracer::ran_ahead(std::vector<Value> items, size_t since, std::shared_ptr<const std::vector<int>> reads) {
  for (size_t k = since; k < write_log_.size(); ++k) {
    // Items it took from an iterator the frame still holds: eager takes them later.
    Value taken;
    taken.kind = ValueKind::Iterator;
    taken.identity = write_log_[k];
    if (taken.identity > -2 || iterator_held(taken)) {
      return unsupported("a generator that writes (a tensor in place, a list, an attribute, an iterator the frame "
                         "holds; not supported yet)");
    }
  }
  Value it;
  it.kind = ValueKind::Iterator;
  it.items = std::move(items);
  it.writes = static_cast<int>(write_log_.size());
  std::vector<Value*> more;
  for (Value& v : it.items) more.push_back(&v);
  for (Value& v : global_writes_.locals) more.push_back(&v);
  const std::shared_ptr<const std::vector<int>> seen = identities_in(std::move(more));
  if (reads && seen) {
    std::vector<int> all = *reads;
    all.insert(all.end(), seen->begin(), seen->end());
    it.reads = std::make_shared<const std::vector<int>>(std::move(all));
  }  // else null: it reads anything
  it.identity = own_iterator_id();
  push(std::move(it));
  return ok();
}

// ---- tensor sizes ----

// Size `d` of a tensor value, as a Python int value.
Value Tracer::dim_value(jit::NodeId node, size_t d) {
  const jit::SymExpr& s = graph_.node(node).sym[d];
  if (s.is_constant()) return Value::constant(PyRef::steal(PyLong_FromLongLong(*s.as_int())));
  return Value::sym(s);
}

Value Tracer::shape_tuple(jit::NodeId node) {
  std::vector<Value> dims;
  for (size_t d = 0; d < graph_.node(node).rank(); ++d) dims.push_back(dim_value(node, d));
  Value size = Value::sequence(ValueKind::Tuple, std::move(dims));
  size.torch_size = true;
  return size;
}

// x.size(), x.size(d), x.dim(), x.numel()
Status Tracer::call_shape_method(const std::string& name, const std::vector<Value>& args) {
  const jit::NodeId node = args[0].node;
  const size_t rank = graph_.node(node).rank();
  if ((name == "dim" || name == "ndimension") && args.size() == 1) {
    push(Value::constant(PyRef::steal(PyLong_FromSize_t(rank))));
    return ok();
  }
  if (name == "numel" && args.size() == 1) {
    jit::SymExpr n = jit::SymExpr::integer(1);
    for (size_t d = 0; d < rank; ++d) n = jit::mul(n, *as_sym(dim_value(node, d)));
    return push_sym(n, "numel()");
  }
  if (name == "size" && args.size() == 1) {
    push(shape_tuple(node));
    return ok();
  }
  if (name == "size" && args.size() == 2) {
    const Value& i = args[1];
    if (i.kind != ValueKind::Const || !PyLong_CheckExact(i.obj.get())) {
      return unsupported("size() with a non-constant dimension");
    }
    long d = PyLong_AsLong(i.obj.get());
    if (d < 0) d += static_cast<long>(rank);
    if (d < 0 || d >= static_cast<long>(rank)) return unsupported("size() dimension out of range (CPython raises)");
    push(dim_value(node, static_cast<size_t>(d)));
    return ok();
  }
  return unsupported("tensor ." + name + "() with these arguments");
}

}  // namespace fj::interp
