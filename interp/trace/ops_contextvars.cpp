// contextvars.ContextVar's get, set and reset inside a trace (transformers' output
// capturing wraps each forward in `token = var.set(x); try: ... finally: var.reset(token)`).
// The trace keeps the values set in the frame itself: get() reads the latest of them,
// reset() drops it, and a set still in force where the frame would leave the trace
// (a graph break, a deopt, the return) ends the trace there, so that no compiled call
// ever changes a context variable. The token set() returns is a real Token of the
// variable, already used (made by a set and a reset at trace time, which leave the
// variable as it was): what eager's token is once reset.
#include "interp/trace/tracer.h"

#include <algorithm>
#include <cstring>

namespace fj::interp {

namespace {

bool context_var_method(PyObject* fn, const char* name) {
  if (Py_TYPE(fn) != &PyMethodDescr_Type) return false;
  auto* d = reinterpret_cast<PyMethodDescrObject*>(fn);
  return d->d_common.d_type == &PyContextVar_Type && std::strcmp(d->d_method->ml_name, name) == 0;
}

}  // namespace

std::optional<Status> Tracer::call_context_var(const CallSite& c) {
  // After a graph break (or in a continuation) nothing is kept: a set is an opaque call.
  if (opaque_context_vars_ || committed_ || continuation_) return std::nullopt;
  if (c.callable.kind != ValueKind::Const || is_opaque(c.callable) || c.args.empty()) return std::nullopt;
  PyObject* fn = c.callable.obj.get();
  const bool get = context_var_method(fn, "get"), set = context_var_method(fn, "set"), reset = context_var_method(fn, "reset");
  if (!get && !set && !reset) return std::nullopt;
  const Value& var = c.args[0];
  if (var.kind != ValueKind::Const || is_opaque(var) || !PyContextVar_CheckExact(var.obj.get()) || c.kw_names) {
    return unsupported("ContextVar." + std::string(get ? "get" : set ? "set" : "reset") + "() with these arguments (not supported yet)");
  }
  PyObject* v = var.obj.get();
  auto latest = std::find_if(context_sets_.rbegin(), context_sets_.rend(), [&](const ContextSet& s) { return s.var.get() == v; });
  if (get && c.args.size() <= 2) {
    if (latest != context_sets_.rend()) {
      push(latest->value);
      return ok();
    }
    return context_var_value(v, c.args.size() == 2 ? &c.args[1] : nullptr);
  }
  if (set && c.args.size() == 2) {
    PyRef token = PyRef::steal(PyContextVar_Set(v, Py_None));
    if (!token || PyContextVar_Reset(v, token.get()) < 0) {
      guards::clear_error();
      return unsupported("ContextVar.set() raised");
    }
    context_sets_.push_back({PyRef::borrow(v), c.args[1], token});
    context_set_seen_ = true;
    push(Value::constant(std::move(token)));
    return ok();
  }
  if (reset && c.args.size() == 2) {
    const Value& token = c.args[1];
    if (latest == context_sets_.rend() || token.kind != ValueKind::Const || token.obj.get() != latest->token.get()) {
      return unsupported("ContextVar.reset() of a token not from its latest set() in the frame (not supported yet)");
    }
    context_sets_.erase(std::next(latest).base());
    push(Value::constant(PyRef::borrow(Py_None)));
    return ok();
  }
  return unsupported("a ContextVar call with these arguments (not supported yet)");
}

// var.get([default]) of a value set outside the frame: None or a constant (guarded),
// or none (the default given).
Status Tracer::context_var_value(PyObject* var, const Value* dflt) {
  PyObject* now = nullptr;
  if (PyContextVar_Get(var, nullptr, &now) < 0) {
    guards::clear_error();
    return unsupported("ContextVar.get() raised");
  }
  PyRef held = PyRef::steal(now);
  if (now != nullptr && now != Py_None && !is_foldable(now)) {
    return unsupported("ContextVar.get() of an object set outside the frame (not supported yet)");
  }
  if (now == nullptr && dflt == nullptr) return unsupported("ContextVar.get() of a variable without a value (CPython raises LookupError)");
  PyRef name = PyRef::steal(PyObject_GetAttrString(var, "name"));
  if (!name) guards::clear_error();
  guards().add_context_var("ContextVar " + (name ? guards::utf8_lossy(name.get()) : std::string("?")), var, now);
  push(now != nullptr ? Value::constant(std::move(held)) : *dflt);
  return ok();
}

Status Tracer::no_context_set(const std::string& where) const {
  if (context_sets_.empty()) return ok();
  return unsupported("a ContextVar set in the frame is still set at " + where + " (not supported yet)");
}

}  // namespace fj::interp
