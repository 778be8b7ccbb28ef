// Guards on values: arguments and closure cells equal to what the trace saw,
// arguments bound to symbols, and facts about the symbols (expressions).
#include <cstring>

#include "guards/guard_kinds.h"

namespace fj::guards {

bool scalar_equal(PyObject* a, PyObject* b) noexcept {
  if (a == b) return true;
  if (Py_TYPE(a) != Py_TYPE(b)) return false;
  if (PyFloat_CheckExact(a)) {
    const double x = PyFloat_AS_DOUBLE(a), y = PyFloat_AS_DOUBLE(b);
    return std::memcmp(&x, &y, sizeof x) == 0;  // NaN equals NaN; 0.0 differs from -0.0
  }
  // exact int/str, or a torch.device (by its type and index): no user code
  if (PyLong_CheckExact(a) || PyUnicode_CheckExact(a) || std::strcmp(Py_TYPE(a)->tp_name, "torch.device") == 0) {
    const int r = PyObject_RichCompareBool(a, b, Py_EQ);
    if (r < 0) clear_error();
    return r == 1;
  }
  return false;  // bool, None and torch dtypes are singletons, other objects compare by identity
}

bool path_value_equal(PyObject* a, PyObject* b) noexcept {
  if (scalar_equal(a, b)) return true;
  // An exact tuple (LayerNorm's normalized_shape, a conv's stride): item by item, so that
  // two instances built alike read alike. Only up to a small size: no deep walks.
  if (!PyTuple_CheckExact(a) || !PyTuple_CheckExact(b) || PyTuple_GET_SIZE(a) != PyTuple_GET_SIZE(b) ||
      PyTuple_GET_SIZE(a) > 16) {
    return false;
  }
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(a); ++i) {
    if (!scalar_equal(PyTuple_GET_ITEM(a, i), PyTuple_GET_ITEM(b, i))) return false;
  }
  return true;
}

// ---- ScalarEquals --------------------------------------------------------------

namespace {

// Argument `arg`, or its item `item` (the argument an exact list or tuple long enough,
// as its SequenceIs guard, checked before, requires); null when it has no such item.
PyObject* arg_or_item(const CallInputs& in, int arg, int item) {
  PyObject* v = in.args[arg];
  if (item < 0) return v;
  if (!(PyList_CheckExact(v) || PyTuple_CheckExact(v)) || item >= Py_SIZE(v)) return nullptr;
  return PySequence_Fast_GET_ITEM(v, item);
}

std::string arg_text(const std::string& name, int item) {
  return "L['" + name + "']" + (item < 0 ? "" : "[" + std::to_string(item) + "]");
}

}  // namespace

bool ScalarEquals::check(const CallInputs& in, jit::Bindings&) const noexcept {
  PyObject* v = arg_or_item(in, arg, item);
  return v != nullptr && scalar_equal(v, value.get());
}

std::string ScalarEquals::failure(const CallInputs& in) const {
  PyObject* v = arg_or_item(in, arg, item);
  return arg_text(name, item) + " == " + describe_object(value.get()) + " failed: actual " +
         (v ? describe_object(v) : std::string("no such item"));
}

std::string ScalarEquals::text() const { return arg_text(name, item) + " == " + describe_object(value.get()); }

// ---- SymbolArg -----------------------------------------------------------------

namespace {

const char* symbol_kind(jit::SymType t) {
  switch (t) {
    case jit::SymType::Int: return "an int other than 0 and 1";
    case jit::SymType::Float: return "a float";
    case jit::SymType::Bool: return "a bool";
  }
  return "?";
}

}  // namespace

bool SymbolArg::check(const CallInputs& in, jit::Bindings& b) const noexcept {
  PyObject* v = arg_or_item(in, arg, item);
  if (v == nullptr) return false;
  auto& slot = b.values[static_cast<size_t>(symbol)];
  if (numpy_type) return Py_TYPE(v) == reinterpret_cast<PyTypeObject*>(numpy_type.get()) && read_numpy_scalar(v, type, &slot);
  switch (type) {
    case jit::SymType::Int: {
      if (!PyLong_CheckExact(v)) return false;
      int overflow = 0;
      const long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
      if (overflow != 0 || x == 0 || x == 1) return false;  // 0 and 1 are specialized
      slot = static_cast<int64_t>(x);
      return true;
    }
    case jit::SymType::Float:
      if (!PyFloat_CheckExact(v)) return false;
      slot = PyFloat_AS_DOUBLE(v);
      return true;
    case jit::SymType::Bool:
      if (!PyBool_Check(v)) return false;
      slot = v == Py_True;
      return true;
  }
  return false;
}

std::string SymbolArg::kind_text() const {
  if (!numpy_type) return symbol_kind(type);
  return std::string("a ") + reinterpret_cast<PyTypeObject*>(numpy_type.get())->tp_name;
}

std::string SymbolArg::failure(const CallInputs& in) const {
  PyObject* v = arg_or_item(in, arg, item);
  return arg_text(name, item) + " is not " + kind_text() + ": actual " + (v ? describe_object(v) : std::string("no such item"));
}

std::string SymbolArg::text() const {
  return arg_text(name, item) + " is " + kind_text() + " (" + jit::SymExpr::symbol(symbol, type).str() + ")";
}

// ---- ExprTrue ------------------------------------------------------------------

bool ExprTrue::check(const CallInputs&, jit::Bindings& b) const noexcept {
  const auto v = expr.eval(b);
  return v && std::holds_alternative<bool>(*v) && std::get<bool>(*v);
}

std::string ExprTrue::failure(const CallInputs&) const { return readable + " is no longer true"; }

std::string ExprTrue::text() const { return readable; }

// ---- ClosureIs -----------------------------------------------------------------

bool ClosureIs::check(const CallInputs& in, jit::Bindings&) const noexcept {
  if (in.closure == nullptr || cell >= PyTuple_GET_SIZE(in.closure)) return false;
  PyObject* v = PyCell_GET(PyTuple_GET_ITEM(in.closure, cell));
  return v != nullptr && scalar_equal(v, value.get());
}

std::string ClosureIs::failure(const CallInputs&) const {
  return "closure variable '" + name + "' is no longer " + describe_object(value.get());
}

std::string ClosureIs::text() const { return "closure variable '" + name + "' is " + describe_object(value.get()); }

// ---- CellIs --------------------------------------------------------------------

bool CellIs::check(const CallInputs&, jit::Bindings&) const noexcept {
  PyObject* v = PyCell_GET(cell.get());
  return v != nullptr && scalar_equal(v, value.get());
}

std::string CellIs::failure(const CallInputs&) const {
  return "closure variable '" + name + "' of an inlined function is no longer " + describe_object(value.get());
}

std::string CellIs::text() const {
  return "closure variable '" + name + "' (inlined) is " + describe_object(value.get());
}

}  // namespace fj::guards
