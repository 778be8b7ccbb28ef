// Grad mode as the frame sets it: `with torch.no_grad():` / enable_grad() /
// set_grad_enabled(flag) blocks and functions decorated with them, traced in that
// mode (each recorded node carries the mode it was recorded in).
#include "interp/trace/tracer.h"

namespace fj::interp {

// `with torch.no_grad():` and co: creating the manager, and its __exit__.
// nullopt: the call is neither.
std::optional<Status> Tracer::call_grad_mode(const CallSite& c) {
  if (c.callable.kind == ValueKind::GradModeExit) {  // __exit__(None, None, None) of a with block
    leave_grad_block();
    push(Value::constant(PyRef::borrow(Py_None)));
    return ok();
  }
  if (c.callable.kind != ValueKind::Const || is_opaque(c.callable)) return std::nullopt;
  PyObject* fn = c.callable.obj.get();
  // @torch.no_grad() / @torch.enable_grad() on a function without a closure: torch's
  // wrapper, made now (decorating only wraps); calls of it are traced (grad_decorated).
  if (is_grad_mode_manager(fn) && c.args.size() == 1 && !c.kw_names && c.args[0].kind == ValueKind::Const &&
      !is_opaque(c.args[0]) && PyFunction_Check(c.args[0].obj.get()) &&
      PyFunction_GET_CLOSURE(c.args[0].obj.get()) == nullptr) {
    PyRef wrapper = PyRef::steal(PyObject_CallOneArg(fn, c.args[0].obj.get()));
    if (!wrapper) {
      guards::clear_error();
      return std::nullopt;
    }
    Value v = Value::constant(std::move(wrapper));
    v.fresh = true;  // made in the frame: it must not leave it
    push(std::move(v));
    return ok();
  }
  // `with torch.set_grad_enabled(mode):` is `with torch.no_grad()` or `torch.enable_grad()`
  // (the mode guarded); called alone it would change the mode for the caller: not here.
  static PyObject* const set_mode = lookup_attr("torch", "set_grad_enabled");
  const size_t next = cur_.fs->pc + 1;
  if (fn == set_mode && c.args.size() == 1 && !c.kw_names && next < cur_.code->instructions.size() &&
      cur_.code->instructions[next].opcode == op(Opcode::BEFORE_WITH)) {
    const Value& m = c.args[0];  // a bool (torch refuses anything else)
    const bool is_bool = (m.kind == ValueKind::Const && !is_opaque(m) && PyBool_Check(m.obj.get())) ||
                         (m.kind == ValueKind::Sym && !is_numpy_scalar(m) && m.expr.type() == jit::SymType::Bool);
    bool mode = false;
    if (!is_bool || known_bool(&m, &mode).failed()) return std::nullopt;
    PyObject* cls = lookup_attr("torch", mode ? "enable_grad" : "no_grad");
    PyRef mgr = cls ? PyRef::steal(PyObject_CallNoArgs(cls)) : PyRef();
    if (!mgr) {
      guards::clear_error();
      return std::nullopt;
    }
    push(Value::constant(std::move(mgr)));
    return ok();
  }
  if (!c.args.empty() || !is_grad_mode_class(fn)) return std::nullopt;
  PyObject* mgr = PyObject_CallNoArgs(c.callable.obj.get());  // torch.no_grad(): no side effect
  if (mgr == nullptr) {
    guards::clear_error();
    return unsupported("creating " + describe(c.callable) + " raised");
  }
  push(Value::constant(PyRef::steal(mgr)));
  return ok();
}

// A call of torch's wrapper of a function decorated with a grad-mode manager
// (torch.utils._contextlib.context_decorator): the function, traced in that mode, as
// the wrapper's with block runs it. nullopt: fn is not such a wrapper.
std::optional<Status> Tracer::grad_decorated(PyObject* fn, std::vector<Value>& args, PyObject* kw_names) {
  if (!library_function(fn, "torch.utils._contextlib", "context_decorator.<locals>.decorate_context")) return std::nullopt;
  auto* code = reinterpret_cast<PyCodeObject*>(PyFunction_GET_CODE(fn));
  PyObject* cells = PyFunction_GET_CLOSURE(fn);
  if (cells == nullptr) return std::nullopt;
  PyObject* factory = nullptr;
  PyObject* inner = nullptr;
  const PyRef names = PyRef::steal(PyCode_GetFreevars(code));
  if (!names) {
    guards::clear_error();
    return std::nullopt;
  }
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(names.get()) && i < PyTuple_GET_SIZE(cells); ++i) {
    PyObject* name = PyTuple_GET_ITEM(names.get(), i);
    PyObject* content = PyCell_GET(PyTuple_GET_ITEM(cells, i));
    if (PyUnicode_CompareWithASCIIString(name, "ctx_factory") == 0) factory = content;
    if (PyUnicode_CompareWithASCIIString(name, "func") == 0) inner = content;
  }
  if (factory == nullptr || inner == nullptr || !PyFunction_Check(inner)) return std::nullopt;
  PyRef ctx = PyRef::steal(PyObject_CallNoArgs(factory));  // clone() of the manager: a new one, nothing else
  if (!ctx || !is_grad_mode_manager(ctx.get())) {
    guards::clear_error();
    return std::nullopt;
  }
  enter_grad_block(ctx.get());
  Status s = inline_call(inner, std::move(args), kw_names);
  leave_grad_block();  // the wrapper's with block ends, however the call does
  return s;
}

// The start of a block of a grad-mode manager `mgr` (torch.no_grad(), enable_grad()):
// its mode from here on; leave_grad_block() restores the one outside.
void Tracer::enter_grad_block(PyObject* mgr) {
  const bool enables = std::string_view(Py_TYPE(mgr)->tp_name).find("enable_grad") != std::string_view::npos;
  grad_outer_.push_back(grad_enabled_);
  grad_enabled_ = enables;
  note_write(-1);  // a generator run ahead saw the mode outside
  autograd_ = autograd_ || (enables && reads_requires_grad_);  // tensors read before may need grads now
}

// The end of a `with torch.no_grad():` block (its __exit__): the mode outside again.
void Tracer::leave_grad_block() {
  if (grad_outer_.empty()) return;
  grad_enabled_ = grad_outer_.back();
  grad_outer_.pop_back();
  note_write(-1);  // a generator run ahead saw the mode of the block
}

}  // namespace fj::interp
