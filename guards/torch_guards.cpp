// Guards on torch's global state: grad mode, torch function modes, the default dtype,
// and torch.Tensor's methods and operators (which user code may monkeypatch).
#include "guards/guard_kinds.h"

namespace fj::guards {

// ---- GradModeIs ----------------------------------------------------------------

bool GradModeIs::check(const CallInputs&, jit::Bindings&) const noexcept { return grad_enabled() == enabled; }

std::string GradModeIs::failure(const CallInputs&) const {
  return std::string("torch.is_grad_enabled() is no longer ") + (enabled ? "True" : "False");
}

std::string GradModeIs::text() const {
  return std::string("torch.is_grad_enabled() == ") + (enabled ? "True" : "False");
}

// ---- NoFunctionMode ------------------------------------------------------------

bool NoFunctionMode::check(const CallInputs&, jit::Bindings&) const noexcept { return !torch_function_mode_enabled(); }

std::string NoFunctionMode::failure(const CallInputs&) const { return "a torch function mode is now on"; }

std::string NoFunctionMode::text() const { return "no torch function mode is on"; }

// ---- DefaultDTypeIs ------------------------------------------------------------

bool DefaultDTypeIs::check(const CallInputs&, jit::Bindings&) const noexcept { return default_dtype() == dtype.get(); }

std::string DefaultDTypeIs::failure(const CallInputs&) const {
  PyObject* now = default_dtype();
  return "torch.get_default_dtype() is no longer " + describe_object(dtype.get()) + ": actual " +
         (now ? describe_object(now) : std::string("<unreadable>"));
}

std::string DefaultDTypeIs::text() const { return "torch.get_default_dtype() is " + describe_object(dtype.get()); }

// ---- TorchFlagIs ---------------------------------------------------------------

bool TorchFlagIs::check(const CallInputs&, jit::Bindings&) const noexcept {
  PyObject* now = PyObject_CallNoArgs(fn.get());
  if (now == nullptr) {
    clear_error();
    return false;
  }
  Py_DECREF(now);
  return now == (value ? Py_True : Py_False);
}

std::string TorchFlagIs::failure(const CallInputs&) const {
  return name + "() is no longer " + (value ? "True" : "False");
}

std::string TorchFlagIs::text() const { return name + "() is " + (value ? "True" : "False"); }

// ---- ContextVarIs ---------------------------------------------------------------

namespace {

// The variable's value in the current context (a new reference), or null: none.
PyObject* context_value(PyObject* var) {
  PyObject* v = nullptr;
  if (PyContextVar_Get(var, nullptr, &v) < 0) clear_error();
  return v;
}

bool same_value(PyObject* a, PyObject* b) {
  if (a == b) return true;
  if (a == nullptr || b == nullptr || Py_TYPE(a) != Py_TYPE(b)) return false;
  const int eq = PyObject_RichCompareBool(a, b, Py_EQ);  // foldable constants only: no user code
  if (eq < 0) clear_error();
  return eq == 1;
}

}  // namespace

bool ContextVarIs::check(const CallInputs&, jit::Bindings&) const noexcept {
  PyObject* now = context_value(var.get());
  const bool same = same_value(now, value.get());
  Py_XDECREF(now);
  return same;
}

std::string ContextVarIs::failure(const CallInputs&) const {
  PyObject* now = context_value(var.get());
  std::string out = name + " no longer " + (value ? "has the value " + describe_object(value.get()) : "has no value") +
                    ": actual " + (now ? describe_object(now) : std::string("none"));
  Py_XDECREF(now);
  return out;
}

std::string ContextVarIs::text() const {
  return name + (value ? " has the value " + describe_object(value.get()) : " has no value");
}

// ---- TensorAttrIs --------------------------------------------------------------

bool TensorAttrIs::check(const CallInputs&, jit::Bindings&) const noexcept {
  return current_tensor_attr(key.get()) == object.get();
}

// A null object: the class has no such attribute.
std::string TensorAttrIs::failure(const CallInputs&) const {
  return "torch.Tensor." + name + (object ? " was replaced" : " was added");
}

std::string TensorAttrIs::text() const {
  return object ? "torch.Tensor." + name + " is torch's own" : "torch.Tensor has no attribute " + name;
}

}  // namespace fj::guards
