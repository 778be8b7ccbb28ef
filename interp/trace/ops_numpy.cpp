// NumPy at the edges of a traced frame. A NumPy scalar argument (np.float64(2.5)) is
// a symbol as a Python number of its kind is, tagged with its NumPy type (Value::obj):
// torch takes it as it takes a Python number, so tensor ops trace as usual and a new
// value does not recompile. Python operators on it follow NumPy: comparisons stay
// symbolic, arithmetic NumPy computes on the values now (guarded), with its warnings
// and np.errstate. Calls of NumPy's math on known values (np.sqrt(n), np.isclose, np.finfo,
// np.dtype) run while tracing; their scalars come back tagged.
#include "interp/trace/tracer.h"

#include <opcode.h>

#include <cstring>
#include <unordered_map>
#include <unordered_set>

#include "interp/torch/torch_ops.h"

namespace fj::interp {

// numpy.<name> (borrowed, kept for the process); a tagged value means numpy is imported.
PyObject* numpy_attr(const char* name) {
  static auto* cache = new std::unordered_map<std::string, PyObject*>();  // kept for the process
  auto [it, fresh] = cache->emplace(name, nullptr);
  if (fresh) it->second = lookup_attr("numpy", name);
  return it->second;
}

namespace {

// An int constant that a double holds exactly.
bool small_int_constant(const Value& v) {
  if (v.kind != ValueKind::Const || is_opaque(v) || !PyLong_CheckExact(v.obj.get())) return false;
  int overflow = 0;
  const long long x = PyLong_AsLongLongAndOverflow(v.obj.get(), &overflow);
  return overflow == 0 && x >= -(1LL << 53) && x <= (1LL << 53);
}

// Operands that NumPy takes as float64 exactly as Python would: Python floats, np.float64,
// and ints a double holds.
bool float64_operand(const Value& v) {
  if (v.kind == ValueKind::Sym) return v.obj ? v.obj.get() == numpy_attr("float64") : v.expr.type() == jit::SymType::Float;
  return (v.kind == ValueKind::Const && !is_opaque(v) && PyFloat_CheckExact(v.obj.get())) || small_int_constant(v);
}

// Operands that NumPy compares as int64 exactly as Python would.
bool int64_operand(const Value& v) {
  if (v.kind == ValueKind::Sym) return v.obj ? v.obj.get() == numpy_attr("int64") : v.expr.type() == jit::SymType::Int;
  if (v.kind != ValueKind::Const || is_opaque(v) || !PyLong_CheckExact(v.obj.get())) return false;
  int overflow = 0;
  PyLong_AsLongLongAndOverflow(v.obj.get(), &overflow);
  return overflow == 0;
}

jit::SymExpr raw_sym(const Value& v) { return *as_sym(v); }

}  // namespace

// BINARY_OP and COMPARE_OP on a NumPy scalar and a Python number or NumPy scalar
// (no tensor): comparisons of float64 operands, and of int64 ones, stay symbolic, their
// result an np.bool_; arithmetic NumPy computes on the values now (guarded), since its
// overflow and invalid results warn or raise as np.errstate says.
Status Tracer::numpy_operator(int arg, bool compare, const Value& lhs, const Value& rhs) {
  const bool floats = float64_operand(lhs) && float64_operand(rhs);
  const bool ints = int64_operand(lhs) && int64_operand(rhs);
  if (compare && (floats || ints)) {
    return push_sym(compare_sym(arg, raw_sym(lhs), raw_sym(rhs)), "a comparison", numpy_attr("bool_"));
  }
  const char* name = compare ? compare_operator_name(arg) : binary_operator_name(arg);
  if (auto s = fold_operator(name, lhs, rhs, /*specialize=*/true)) return std::move(*s);
  return unsupported(std::string(compare ? "comparison" : "operator") + " of " + describe(lhs) + " and " + describe(rhs) +
                     " (not supported yet)");
}

std::optional<Value> numpy_scalar_constant(PyObject* r) {
  const std::optional<jit::SymType> kind = guards::numpy_scalar_kind(Py_TYPE(r));
  jit::SymValue value;
  if (!kind || !guards::read_numpy_scalar(r, *kind, &value)) return std::nullopt;
  Value v = Value::sym(jit::SymExpr::constant(value));
  v.obj = PyRef::borrow(reinterpret_cast<PyObject*>(Py_TYPE(r)));
  return v;
}

// The graph dtype of a NumPy scalar type, as torch.tensor() of such a scalar makes it.
std::optional<jit::DType> numpy_dtype(PyObject* type) {
  static const auto* kTypes = [] {
    auto* m = new std::unordered_map<PyObject*, jit::DType>();  // kept for the process
    const std::pair<const char*, jit::DType> names[] = {
        {"float64", jit::DType::Float64}, {"float32", jit::DType::Float32}, {"int64", jit::DType::Int64},
        {"int32", jit::DType::Int32},     {"uint8", jit::DType::UInt8},     {"bool_", jit::DType::Bool}};
    for (const auto& [name, d] : names) {
      if (PyObject* t = numpy_attr(name)) m->emplace(t, d);
    }
    return m;
  }();
  auto it = kTypes->find(type);
  return it == kTypes->end() ? std::nullopt : std::optional<jit::DType>(it->second);
}

NumpyStrict::NumpyStrict(bool on) {
  PyObject* seterr = on ? numpy_attr("seterr") : nullptr;
  if (seterr == nullptr) return;
  PyRef kw = PyRef::steal(Py_BuildValue("{s:s}", "all", "raise"));
  PyRef none = PyRef::steal(PyTuple_New(0));
  old_ = kw && none ? PyRef::steal(PyObject_Call(seterr, none.get(), kw.get())) : PyRef();
  if (!old_) guards::clear_error();
  // Python warnings (np.mean([]): "Mean of empty slice") raise too: shown now, they
  // would be shown again by the call that runs each time.
  static PyObject* catch_warnings = lookup_attr("warnings", "catch_warnings");
  static PyObject* simplefilter = lookup_attr("warnings", "simplefilter");
  if (catch_warnings == nullptr || simplefilter == nullptr) return;
  warnings_ = PyRef::steal(PyObject_CallNoArgs(catch_warnings));
  PyRef entered = warnings_ ? PyRef::steal(PyObject_CallMethod(warnings_.get(), "__enter__", nullptr)) : PyRef();
  PyRef filtered = entered ? PyRef::steal(PyObject_CallFunction(simplefilter, "s", "error")) : PyRef();
  if (!entered) warnings_ = PyRef();
  if (!filtered) guards::clear_error();
}

NumpyStrict::~NumpyStrict() {
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);  // the computation's own error stays
  if (warnings_) {
    PyRef r = PyRef::steal(PyObject_CallMethod(warnings_.get(), "__exit__", "OOO", Py_None, Py_None, Py_None));
    if (!r) guards::clear_error();
  }
  if (old_) {
    PyRef none = PyRef::steal(PyTuple_New(0));
    PyRef r = none ? PyRef::steal(PyObject_Call(numpy_attr("seterr"), none.get(), old_.get())) : PyRef();
    if (!r) guards::clear_error();
  }
  PyErr_Restore(type, value, tb);
}

// NumPy callables that compute a value from known numbers and change nothing: NumPy's
// own ufuncs (np.sqrt, np.maximum; not np.frompyfunc's, which call Python), the NumPy
// scalar types, np.dtype, np.finfo and np.iinfo, and a few array functions on scalars
// and lists of numbers.
bool is_pure_numpy_callable(PyObject* fn) {
  // Asked of every call of known values: numpy is looked into only once imported.
  static const std::unordered_set<PyObject*>* pure = nullptr;
  if (pure == nullptr) {
    if (PyDict_GetItemString(PyImport_GetModuleDict(), "numpy") == nullptr) return false;
    auto* set = new std::unordered_set<PyObject*>();  // kept for the process
    for (const char* name : {"dtype", "finfo", "iinfo", "float64", "float32", "float16", "int64", "int32", "int16",
                             "int8", "uint8", "bool_", "isclose", "allclose", "clip", "sum", "mean", "prod", "round",
                             "isfinite", "isnan", "isinf"}) {
      if (PyObject* f = numpy_attr(name)) set->insert(f);
    }
    pure = set;
  }
  if (pure->count(fn) != 0) return true;
  PyObject* ufunc = numpy_attr("ufunc");
  if (ufunc == nullptr || Py_TYPE(fn) != reinterpret_cast<PyTypeObject*>(ufunc)) return false;
  PyRef name = PyRef::steal(PyObject_GetAttrString(fn, "__name__"));
  const char* text = name && PyUnicode_Check(name.get()) ? PyUnicode_AsUTF8(name.get()) : nullptr;
  guards::clear_error();
  return text != nullptr && numpy_attr(text) == fn;
}

// NumPy objects that never change and whose reads run no user code: dtypes, and the
// finfo / iinfo records (their plain attributes).
bool is_numpy_metadata(PyObject* o) {
  if (std::strncmp(Py_TYPE(o)->tp_name, "numpy.", 6) != 0 && std::strcmp(Py_TYPE(o)->tp_name, "finfo") != 0 &&
      std::strcmp(Py_TYPE(o)->tp_name, "iinfo") != 0) {
    return false;
  }
  PyObject* dtype = numpy_attr("dtype");
  PyObject* finfo = numpy_attr("finfo");
  PyObject* iinfo = numpy_attr("iinfo");
  PyTypeObject* tp = Py_TYPE(o);
  return (dtype != nullptr && PyObject_TypeCheck(o, reinterpret_cast<PyTypeObject*>(dtype))) ||
         (finfo != nullptr && tp == reinterpret_cast<PyTypeObject*>(finfo)) ||
         (iinfo != nullptr && tp == reinterpret_cast<PyTypeObject*>(iinfo));
}

}  // namespace fj::interp
