// NumPy arrays made in the frame: np.arange / zeros / ones / asarray / array of
// numbers, and tensor.numpy(). A Value of kind Array holds the tensor node with the
// array's elements; the array and the tensors it meets share memory as in eager
// (torch.from_numpy, torch.as_tensor and tensor.numpy() are the same node, returned
// arrays are made with .numpy() of the tensor the plan computes). What NumPy does with
// them is traced only where torch computes NumPy's result, dtype included: the
// attributes that describe them, + - * with an array of the same dtype or a Python
// number of its kind, and item assignment. Anything else ends the trace.
#include "interp/trace/tracer.h"

#include <opcode.h>

#include <cstring>

#include "interp/trace/trace_support.h"

namespace fj::interp {

using jit::DType;

namespace {

const char* numpy_type_name(DType d) {
  switch (d) {
    case DType::Bool: return "bool_";
    case DType::UInt8: return "uint8";
    case DType::Int32: return "int32";
    case DType::Int64: return "int64";
    case DType::Float32: return "float32";
    case DType::Float64: return "float64";
  }
  return nullptr;
}

// The graph dtype a NumPy dtype argument names (np.float32, np.dtype("int64")).
std::optional<DType> dtype_of_numpy(const Value& v) {
  if (v.kind != ValueKind::Const || !v.obj) return std::nullopt;
  PyObject* o = v.obj.get();
  if (PyObject* dtype = numpy_attr("dtype"); dtype != nullptr && PyObject_TypeCheck(o, reinterpret_cast<PyTypeObject*>(dtype))) {
    PyRef type = PyRef::steal(PyObject_GetAttrString(o, "type"));
    guards::clear_error();
    return type ? numpy_dtype(type.get()) : std::nullopt;
  }
  return numpy_dtype(o);
}

Value as_array(Value v) {
  v.kind = ValueKind::Array;
  return v;
}

Value int_constant(int64_t i) { return Value::constant(PyRef::steal(PyLong_FromLongLong(i))); }

Value as_tensor(Value v) {
  v.kind = ValueKind::Tensor;
  return v;
}

}  // namespace

// np.<maker>(...) of numbers (as torch's maker of the same dtype), and the torch
// functions that take an array: torch.from_numpy / as_tensor (the same memory) and
// torch.tensor (a copy). nullopt: none of these.
std::optional<Status> Tracer::call_numpy_array(CallSite& c) {
  if (c.callable.kind != ValueKind::Const || is_opaque(c.callable) || !c.callable.obj) return std::nullopt;
  PyObject* fn = c.callable.obj.get();
  const size_t nkw = c.kw_names ? static_cast<size_t>(PyTuple_GET_SIZE(c.kw_names.get())) : 0;
  const size_t npos = c.args.size() - nkw;
  if (npos == 1 && c.args[0].kind == ValueKind::Array) {
    static PyObject* const from_numpy = lookup_attr("torch", "from_numpy");
    static PyObject* const as_tensor_fn = lookup_attr("torch", "as_tensor");
    static PyObject* const tensor_fn = lookup_attr("torch", "tensor");
    if (nkw != 0) return std::nullopt;  // a call of CPython's (a graph break where one can be)
    if (fn == from_numpy || fn == as_tensor_fn || fn == numpy_attr("asarray")) {
      push(fn == numpy_attr("asarray") ? c.args[0] : as_tensor(c.args[0]));
      return ok();
    }
    if (fn == tensor_fn) return push_built(fresh_copy(c.args[0].node), "torch.tensor() of a NumPy array");
    return std::nullopt;
  }
  static const char* const kMakers[][2] = {
      {"arange", "arange"}, {"zeros", "zeros"}, {"ones", "ones"}, {"asarray", "tensor"}, {"array", "tensor"}};
  const char* torch_name = nullptr;
  for (const auto& [np_name, t_name] : kMakers) {
    if (numpy_attr(np_name) == fn && fn != nullptr) torch_name = t_name;
  }
  if (torch_name == nullptr || npos != 1) return std::nullopt;
  std::optional<DType> dtype;
  for (size_t k = 0; k < nkw; ++k) {
    const std::string name = guards::utf8_lossy(PyTuple_GET_ITEM(c.kw_names.get(), static_cast<Py_ssize_t>(k)));
    if (name != "dtype" || !(dtype = dtype_of_numpy(c.args[npos + k]))) return std::nullopt;
  }
  if (!dtype) {  // NumPy's own: float64 for zeros/ones and Python floats, int64 for ints
    if (std::strcmp(torch_name, "tensor") == 0) {
      std::optional<DType> inferred;
      if (tensor_data_dtype(c.args[0], &inferred).failed() || !inferred) return std::nullopt;
      dtype = *inferred == DType::Float32 ? DType::Float64 : *inferred;
    } else if (std::strcmp(torch_name, "arange") == 0) {
      const auto n = as_sym(c.args[0]);
      if (!n || n->type() != jit::SymType::Int) return std::nullopt;
      dtype = DType::Int64;
    } else {
      dtype = DType::Float64;
    }
  }
  CallSite t = c;
  t.callable = Value::constant(PyRef::borrow(lookup_attr("torch", torch_name)));
  t.args.resize(npos);
  t.args.push_back(Value::constant(PyRef::borrow(torch_dtype(*dtype))));
  t.kw_names = PyRef::steal(Py_BuildValue("(s)", "dtype"));
  t.no_break = true;
  t.can_break = false;
  FJ_TRY(dispatch_call(t));
  if (top().kind != ValueKind::Tensor) return unsupported("np." + std::string(torch_name) + "() (not supported yet)");
  top() = as_array(top());
  return ok();
}

// tensor.numpy(): the same memory, as an array (eager refuses a tensor that requires grad).
Status Tracer::tensor_numpy(const CallSite& c) {
  if (c.args.size() != 1 || c.kw_names) return unsupported(".numpy() with arguments (not supported yet)");
  if (grad_enabled_ && node_needs_grad(c.args[0].node)) return unsupported(".numpy() of a tensor that requires grad (eager raises)");
  push(as_array(c.args[0]));
  return ok();
}

// a.shape, a.ndim, a.size, a.dtype, a.itemsize of an array.
Status Tracer::array_attr(const Value& a, const std::string& name, bool method) {
  const jit::Node& n = graph_.node(a.node);
  if (method) {  // NumPy's own method, bound to the array: its call runs in CPython (a graph break)
    Value bound = Value::tensor_method(name);
    bound.items.push_back(a);
    push(Value::null());
    push(std::move(bound));
    return ok();
  }
  if (name == "shape") {
    std::vector<Value> dims;
    for (const jit::SymExpr& e : n.sym) dims.push_back(e.is_constant() ? int_constant(*e.as_int()) : Value::sym(e));
    Value shape = Value::sequence(ValueKind::Tuple, std::move(dims));
    shape.identity = next_identity_++;
    push(std::move(shape));
    return ok();
  }
  if (name == "ndim") {
    push(int_constant(static_cast<int64_t>(n.rank())));
    return ok();
  }
  if (name == "size") {
    jit::SymExpr numel = jit::SymExpr::integer(1);
    for (const jit::SymExpr& e : n.sym) numel = jit::mul(numel, e);
    return numel.is_constant() ? (push(int_constant(*numel.as_int())), ok()) : push_sym(numel, "an array's size");
  }
  if (name == "dtype") {
    PyObject* type = numpy_attr(numpy_type_name(n.dtype));
    PyRef d = type ? PyRef::steal(PyObject_CallFunctionObjArgs(numpy_attr("dtype"), type, nullptr)) : PyRef();
    guards::clear_error();
    if (!d) return unsupported("the dtype of a NumPy array: NumPy's object cannot be made");
    push(Value::constant(std::move(d)));
    return ok();
  }
  return unsupported("NumPy array attribute ." + name + " (not supported yet)");
}

// a + b, a - b, a * b where torch's result is NumPy's: arrays of one dtype, or an array
// and a Python number of its kind (an int for an int array, fitting int32; any number
// for a float array). nullopt: no array among the operands.
std::optional<Status> Tracer::array_binary(int nb, const Value& lhs, const Value& rhs) {
  if (lhs.kind != ValueKind::Array && rhs.kind != ValueKind::Array) return std::nullopt;
  const int op = nb >= kNbInplaceAdd ? nb - kNbInplaceAdd : nb;
  if (nb >= kNbInplaceAdd || (op != NB_ADD && op != NB_SUBTRACT && op != NB_MULTIPLY)) {
    return unsupported("binary operator " + std::to_string(nb) + " on a NumPy array (not supported yet)");
  }
  const Value& a = lhs.kind == ValueKind::Array ? lhs : rhs;
  const Value& other = lhs.kind == ValueKind::Array ? rhs : lhs;
  const DType d = graph_.node(a.node).dtype;
  bool same = false;
  if (other.kind == ValueKind::Array) {
    same = graph_.node(other.node).dtype == d && d != DType::Bool;
  } else if (other.kind == ValueKind::Const && !is_opaque(other) && PyLong_CheckExact(other.obj.get())) {
    const long long i = PyLong_AsLongLong(other.obj.get());
    guards::clear_error();
    same = d != DType::Bool && i >= -(1LL << 31) && i < (1LL << 31);
  } else if (jit::is_floating(d)) {
    same = (other.kind == ValueKind::Const && !is_opaque(other) && PyFloat_CheckExact(other.obj.get())) ||
           (other.kind == ValueKind::Sym && !is_numpy_scalar(other) && other.expr.type() != jit::SymType::Bool);
  }
  if (!same) return unsupported("a NumPy array with " + describe(other) + " (NumPy's dtype rules; not supported yet)");
  const Value l = lhs.kind == ValueKind::Array ? as_tensor(lhs) : lhs;
  const Value r = rhs.kind == ValueKind::Array ? as_tensor(rhs) : rhs;
  FJ_TRY(call_op(*binary_tensor_op(op), {l, r}));
  top() = as_array(top());
  return ok();
}

// a[i] = v of an array: the tensor's item assignment (the same memory).
std::optional<Status> Tracer::array_store_subscr(const Value& target, const Value& key, const Value& value) {
  if (target.kind != ValueKind::Array) return std::nullopt;
  // A Python int into an int or float array, a float into a float array.
  const DType d = graph_.node(target.node).dtype;
  const bool is_int = (value.kind == ValueKind::Const && !is_opaque(value) && PyLong_CheckExact(value.obj.get())) ||
                      (value.kind == ValueKind::Sym && !is_numpy_scalar(value) && value.expr.type() == jit::SymType::Int);
  const bool is_float = (value.kind == ValueKind::Const && !is_opaque(value) && PyFloat_CheckExact(value.obj.get())) ||
                        (value.kind == ValueKind::Sym && !is_numpy_scalar(value) && value.expr.type() == jit::SymType::Float);
  bool fits = is_float || jit::is_floating(d);  // an int must fit the dtype (NumPy raises, torch wraps)
  if (!fits && value.kind == ValueKind::Const) {
    int overflow = 0;
    const long long i = PyLong_AsLongLongAndOverflow(value.obj.get(), &overflow);
    fits = overflow == 0 && (d == DType::Int64 || (d == DType::Int32 && i >= INT32_MIN && i <= INT32_MAX) ||
                             (d == DType::UInt8 && i >= 0 && i <= 255));
  } else if (!fits) {
    fits = d == DType::Int64;
  }
  if (d == DType::Bool || !(is_int || (is_float && jit::is_floating(d))) || !fits) {
    return unsupported("item assignment of " + describe(value) + " to a NumPy array (not supported yet)");
  }
  FJ_TRY(require_tensor_attr("__setitem__"));
  return setitem(as_tensor(target), key, value);
}

}  // namespace fj::interp
