// Exceptions raised and caught inside the trace: `raise`, a callee that raises, the
// exception table's handlers (PUSH_EXC_INFO, CHECK_EXC_MATCH, POP_EXCEPT, RERAISE).
//
// An exception the trace can predict (a `raise` of a constant exception on a path its
// guards fix) is a trace-time object. When a handler of the frame, or of an inlined
// caller, takes it, the trace goes on in that handler as CPython would: the exception
// costs nothing at run time. When none does, the frame raises and CPython does it
// (op_raise_varargs). The exception object itself never leaves the trace: a value
// made while tracing cannot be returned or kept across a graph break (convert_const).
#include "interp/trace/tracer.h"

namespace fj::interp {
namespace {

const ExceptionEntry* handler_at(const DecodedCode& code, int offset) {
  for (const ExceptionEntry& e : code.exception_table) {
    if (offset >= e.start && offset < e.end) return &e;
  }
  return nullptr;
}

// A class whose instances BaseException's own C code makes and initializes: building
// one runs no user code.
bool builtin_made_exception(PyObject* cls) {
  if (!PyExceptionClass_Check(cls)) return false;
  PyObject* mro = reinterpret_cast<PyTypeObject*>(cls)->tp_mro;
  if (mro == nullptr) return false;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(mro); ++i) {
    auto* t = reinterpret_cast<PyTypeObject*>(PyTuple_GET_ITEM(mro, i));
    if (!(t->tp_flags & Py_TPFLAGS_HEAPTYPE)) continue;
    PyObject* dict = t->tp_dict;
    for (const char* name : {"__new__", "__init__", "__getattr__", "__getattribute__", "__setattr__"}) {
      if (PyDict_GetItemString(dict, name) != nullptr) return false;
    }
  }
  return Py_TYPE(cls) == &PyType_Type;
}

}  // namespace

// cls(*args) of a class builtin_made_exception accepts: the exception object, made
// now, that never leaves the trace (fresh). nullopt: building it raised.
std::optional<Value> make_exception(PyObject* cls, PyObject* args) {
  PyRef made = PyRef::steal(PyObject_Call(cls, args, nullptr));
  if (!made) {
    guards::clear_error();
    return std::nullopt;
  }
  Value exc = Value::constant(std::move(made));
  exc.fresh = true;
  return exc;
}

// Whether a traced frame would take an exception raised now. A generator expression
// is run ahead of its consumer (inline_call): an exception of a later item may never
// happen in eager (all() stops early), so none passes out of one.
bool Tracer::handler_on_stack() const {
  if (handler_at(*cur_.code, cur_.code->instructions[cur_.fs->pc].offset) != nullptr) return true;
  if (cur_.fs->yields) return false;
  for (auto c = callers_.rbegin(); c != callers_.rend(); ++c) {
    if (handler_at(*c->code, c->code->instructions[c->fs->pc].offset) != nullptr) return true;
    if (c->fs->yields) return false;
  }
  return attribute_error_catchers_ > 0;  // hasattr() around a traced __getattr__: it may catch it
}

// `exc` (an exception instance) is raised by the current instruction. A handler on
// the stack of traced frames takes it (step() unwinds to it, frame by frame); else
// the trace ends with `why`.
Status Tracer::raise_exception(Value exc, const std::string& why) {
  if (handler_on_stack()) raising_ = std::move(exc);
  else raises_uncaught_ = true;
  return unsupported(why);
}

// KeyError(key) of a constant key missing from a dict the trace knows (by its items, or
// guarded absent), raised by the current instruction.
Status Tracer::raise_key_error(const Value& key) {
  const std::string why = "a missing dict key (CPython raises KeyError)";
  PyRef args = key.kind == ValueKind::Const && key.obj ? PyRef::steal(PyTuple_Pack(1, key.obj.get())) : PyRef();
  std::optional<Value> exc = args ? make_exception(PyExc_KeyError, args.get()) : std::nullopt;
  guards::clear_error();
  return exc ? raise_exception(std::move(*exc), why) : unsupported(why);
}

// Jumps to the handler of the current instruction, as CPython's exception_unwind
// does: the stack cut to the handler's depth, the raising offset (lasti) and the
// exception pushed. false: this frame has no handler there.
bool Tracer::unwind() {
  FrameState& fs = *cur_.fs;
  const Instruction& ins = cur_.code->instructions[fs.pc];
  const ExceptionEntry* e = handler_at(*cur_.code, ins.offset);
  if (e == nullptr || fs.stack.size() < static_cast<size_t>(e->depth)) return false;
  fs.stack.resize(static_cast<size_t>(e->depth));
  fs.kw_names = PyRef();
  if (e->lasti) fs.stack.push_back(Value::constant(PyRef::steal(PyLong_FromLong(ins.offset / 2))));
  fs.stack.push_back(std::move(*raising_));
  raising_.reset();
  fs.pc = static_cast<size_t>(cur_.code->index_at(e->target));
  stack_drift_ = 0;
  return true;
}

bool Tracer::raising_attribute_error() const {
  return raising_ && PyErr_GivenExceptionMatches(raising_->obj.get(), PyExc_AttributeError);
}

// `s`, the outcome of a traced attribute lookup (a property's getter, a Python
// __getattribute__) on an instance of `tp`: an AttributeError it raises goes to the
// class's __getattr__ first (CPython's slot_tp_getattr_hook), which the trace does
// not follow from there: it ends.
Status Tracer::hook_catches(PyTypeObject* tp, Status s) {
  static PyObject* getattr_name = PyUnicode_InternFromString("__getattr__");
  if (s.failed() && raising_attribute_error() && _PyType_Lookup(tp, getattr_name) != nullptr) raising_.reset();
  return s;
}

// An exception class or instance for `raise`: a class is instantiated here when its
// construction is BaseException's own.
Expected<Value> Tracer::exception_to_raise(const Value& v) {
  if (v.kind != ValueKind::Const || is_opaque(v) || v.reg >= 0) return Error{"raise of " + describe(v)};
  PyObject* o = v.obj.get();
  if (PyExceptionInstance_Check(o)) return v;
  PyRef no_args = PyRef::steal(PyTuple_New(0));
  std::optional<Value> exc = builtin_made_exception(o) && no_args ? make_exception(o, no_args.get()) : std::nullopt;
  if (!exc) return Error{"raise of " + describe(v)};
  return std::move(*exc);
}

// (args[n] -- ): `raise`, `raise e`, `raise e from cause`. Caught in the trace, the
// handler is traced; else raising is CPython's: the frame resumes there (a Deopt
// step), so the exception, its traceback and context are eager's own.
Status Tracer::op_raise_varargs(const Instruction& ins) {
  std::optional<Value> exc;
  if (!handler_on_stack()) {
    // no traced handler: CPython raises it (below)
  } else if (ins.arg == 0 && !cur_.fs->handling.empty()) {
    exc = cur_.fs->handling.back();
  } else if (ins.arg == 1 || ins.arg == 2) {
    if (Expected<Value> e = exception_to_raise(top(static_cast<size_t>(ins.arg)))) exc = std::move(*e);
  }
  if (exc) {
    cur_.fs->stack.resize(cur_.fs->stack.size() - static_cast<size_t>(ins.arg));
    raising_ = std::move(*exc);  // step() unwinds to the handler
    return unsupported("raise");
  }
  if (cur_.depth == 0 && can_resume().ok()) {
    deopt_here_ = true;
    raise_leaves_ = !handler_on_stack();
    take_snapshot();
  }
  return unsupported("raise");
}

// (exc -- previous, exc): a handler starts; `previous` stands for the exception that
// was being handled before, which POP_EXCEPT restores.
Status Tracer::op_push_exc_info(const Instruction&) {
  Value exc = pop();
  if (exc.kind != ValueKind::Const || !PyExceptionInstance_Check(exc.obj.get())) {
    return unsupported("an exception handler for " + describe(exc));
  }
  Value previous = Value::constant(PyRef::borrow(Py_None));
  previous.opaque = true;
  push(std::move(previous));
  cur_.fs->handling.push_back(exc);
  push(std::move(exc));
  return ok();
}

// (previous -- ): the handler ends.
Status Tracer::op_pop_except(const Instruction&) {
  if (cur_.fs->handling.empty()) return unsupported("POP_EXCEPT outside a traced handler");
  pop();
  cur_.fs->handling.pop_back();
  return ok();
}

// (exc, type -- exc, matches): `except type:`; the type is a guarded constant.
Status Tracer::op_check_exc_match(const Instruction&) {
  const Value type = pop();
  const Value& exc = top();
  PyRef built;  // except (TypeError, IndexError): a tuple the frame built of known classes
  if (type.kind == ValueKind::Tuple) {
    built = PyRef::steal(PyTuple_New(static_cast<Py_ssize_t>(type.items.size())));
    for (size_t i = 0; built && i < type.items.size(); ++i) {
      const Value& item = type.items[i];
      if (item.kind != ValueKind::Const || is_opaque(item) || item.reg >= 0) return unsupported("except " + describe(type));
      PyTuple_SET_ITEM(built.get(), static_cast<Py_ssize_t>(i), Py_NewRef(item.obj.get()));
    }
    if (!built) {
      guards::clear_error();
      return unsupported("except " + describe(type));
    }
  } else if (type.kind != ValueKind::Const || is_opaque(type) || type.reg >= 0) {
    return unsupported("except " + describe(type));
  }
  PyObject* t = built ? built.get() : type.obj.get();
  bool classes = PyExceptionClass_Check(t);
  if (PyTuple_Check(t)) {
    classes = true;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(t); ++i) classes &= PyExceptionClass_Check(PyTuple_GET_ITEM(t, i)) != 0;
  }
  if (!classes) return unsupported("except " + describe(type) + " (CPython raises)");
  const bool matches = PyErr_GivenExceptionMatches(exc.obj.get(), t) != 0;
  push(Value::constant(PyRef::borrow(matches ? Py_True : Py_False)));
  return ok();
}

// ([lasti], exc -- ): the handler did not take the exception, or a cleanup ran.
Status Tracer::op_reraise(const Instruction&) {
  Value exc = pop();
  if (exc.kind != ValueKind::Const || !PyExceptionInstance_Check(exc.obj.get())) return unsupported("RERAISE");
  return raise_exception(std::move(exc), "an exception raised again after its handler");
}

// (exit, lasti, previous, exc -- exit, lasti, previous, exc, result): an exception
// leaves a with block, whose __exit__(type, exc, traceback) runs. That of torch.no_grad()
// and co restores the grad mode and returns None: the exception goes on (RERAISE).
Status Tracer::op_with_except_start(const Instruction&) {
  const auto& stack = cur_.fs->stack;
  if (stack.size() < 4) return unsupported("WITH_EXCEPT_START below the value stack");
  const Value& exit = stack[stack.size() - 4];
  if (exit.kind == ValueKind::Const && exit.fresh && exit.items.size() == 1 && PyFunction_Check(exit.obj.get())) {
    // The Python __exit__ of an object made in the frame (enter_object), traced with
    // the exception; the traceback it would get is not the trace's to give: any use
    // of it ends the trace.
    const Value exc = stack.back();
    if (exc.kind != ValueKind::Const || !exc.obj || !PyExceptionInstance_Check(exc.obj.get())) {
      return unsupported("an exception leaving a with block (not supported yet)");
    }
    Value tb = Value::constant(PyRef::borrow(Py_None));
    tb.opaque = true;
    const Value type = Value::constant(PyRef::borrow(reinterpret_cast<PyObject*>(Py_TYPE(exc.obj.get()))));
    return inline_call(exit.obj.get(), {exit.items[0], type, exc, tb}, nullptr);
  }
  if (exit.kind != ValueKind::GradModeExit) {
    return unsupported("an exception leaving a with block on " + describe(exit) + " (not supported yet)");
  }
  leave_grad_block();
  push(Value::constant(PyRef::borrow(Py_None)));
  return ok();
}

// ( -- AssertionError): a failing `assert`.
Status Tracer::op_load_assertion_error(const Instruction&) {
  push(Value::constant(PyRef::borrow(PyExc_AssertionError)));
  return ok();
}

// ( -- ): `del x`.
Status Tracer::op_delete_fast(const Instruction& ins) {
  Value& v = cur_.fs->locals[static_cast<size_t>(ins.arg)];
  if (v.kind == ValueKind::Null) return unsupported("del of an unbound local variable (CPython raises)");
  v = Value::null();
  return ok();
}

// ExcClass(args...) where the class's construction is BaseException's own and the
// arguments are constants: the exception object is made now (it is for `raise`, or a
// value that stays in the frame). At the root frame outside a try block, a pure
// opaque call makes it at run time instead, so that an uncaught raise can resume
// CPython with it. nullopt: not such a call.
std::optional<Status> Tracer::call_exception_class(const CallSite& c) {
  if (c.callable.kind != ValueKind::Const || is_opaque(c.callable) || !builtin_made_exception(c.callable.obj.get())) {
    return std::nullopt;
  }
  // `raise E(...)` that no handler of the frame takes: made by the plan (an opaque
  // step), so that the raise can leave the frame from CPython (DeoptState::raise_exit).
  const size_t next = cur_.fs->pc + 1;
  const bool raised_out = cur_.depth == 0 && !in_try_block(*c.ins) && next < cur_.code->instructions.size() &&
                          cur_.code->instructions[next].opcode == op(Opcode::RAISE_VARARGS);
  if (c.kw_names || raised_out) return std::nullopt;
  PyRef args = PyRef::steal(PyTuple_New(static_cast<Py_ssize_t>(c.args.size())));
  for (size_t i = 0; i < c.args.size(); ++i) {
    const Value& a = c.args[i];
    PyRef o;  // a symbolic number: its value now, guarded (KeyError(n))
    if (a.kind == ValueKind::Sym) {
      if (!knowable(a, /*specialize=*/true) || concrete_number(a, "an exception's argument", &o).failed()) return std::nullopt;
    } else if (a.kind != ValueKind::Const || is_opaque(a) || a.reg >= 0 || !is_foldable(a.obj.get())) {
      return std::nullopt;
    } else {
      o = a.obj;
    }
    PyTuple_SET_ITEM(args.get(), static_cast<Py_ssize_t>(i), o.release());
  }
  std::optional<Value> exc = make_exception(c.callable.obj.get(), args.get());
  if (!exc) return std::nullopt;
  push(std::move(*exc));
  return ok();
}

// The function of a class's Python __new__, when calling the class runs only that and
// object's own __init__ (no metaclass __call__): cls(...) is __new__(cls, ...)
// traced, and an instance it returns needs no __init__ (needs_own_init). Null: not
// such a class.
PyRef class_new_function(PyObject* cls) {
  if (!PyType_Check(cls) || Py_TYPE(cls) != &PyType_Type) return PyRef();
  auto* type = reinterpret_cast<PyTypeObject*>(cls);
  if (!(type->tp_flags & Py_TPFLAGS_HEAPTYPE)) return PyRef();
  static PyObject* new_name = PyUnicode_InternFromString("__new__");
  PyObject* sm = _PyType_Lookup(type, new_name);
  if (sm == nullptr || !Py_IS_TYPE(sm, &PyStaticMethod_Type)) return PyRef();
  PyRef fn = PyRef::steal(Py_TYPE(sm)->tp_descr_get(sm, nullptr, cls));
  if (!fn || !PyFunction_Check(fn.get())) {
    guards::clear_error();
    return PyRef();
  }
  return fn;
}

// Whether `made`, what cls.__new__ returned, would go on to an __init__ of cls's own.
bool needs_own_init(PyObject* cls, const Value& made) {
  auto* type = reinterpret_cast<PyTypeObject*>(cls);
  static PyObject* init_name = PyUnicode_InternFromString("__init__");
  const bool instance = made.kind != ValueKind::Const || is_opaque(made) || PyObject_TypeCheck(made.obj.get(), type);
  return instance && _PyType_Lookup(type, init_name) != _PyType_Lookup(&PyBaseObject_Type, init_name);
}

}  // namespace fj::interp
