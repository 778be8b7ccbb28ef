// Tensor metadata answered at trace time (.dtype, .device, .stride(), .is_contiguous(),
// ...), torch's metadata objects as constants (dtype == torch.float32), and the
// torch.overrides checks that torch.nn.functional runs before every op.
//
// Every tensor the tracer holds is a plain torch.Tensor (or Parameter) on the CPU
// with a dtype the graph knows: inputs are guarded so, and computed tensors follow
// from their node. What depends on more than that (strides, requires_grad) is
// answered only where it follows from guarded inputs; anything else ends the trace.
#include "interp/trace/tracer.h"

#include <string_view>

#include "interp/runtime/plan.h"

namespace fj::interp {

using jit::DType;
using jit::NodeId;
using jit::SymExpr;

namespace {

// A torch object kept for the process: torch.<name> (borrowed), or nullptr.
PyObject* torch_attr(const char* name) {
  PyObject* torch = PyImport_AddModule("torch");  // borrowed; torch is imported with framejit
  PyObject* v = torch ? PyObject_GetAttrString(torch, name) : nullptr;
  guards::clear_error();
  return v;  // a new reference, kept for the process by the callers' statics
}

PyObject* cpu_device() {
  static PyObject* dev = [] {
    PyObject* device_type = torch_attr("device");
    PyObject* d = device_type ? PyObject_CallFunction(device_type, "s", "cpu") : nullptr;
    Py_XDECREF(device_type);
    guards::clear_error();
    return d;
  }();
  return dev;
}

PyObject* strided_layout() {
  static PyObject* layout = torch_attr("strided");
  return layout;
}

bool exact_builtin(PyObject* o, std::string_view type_name) {
  return std::string_view(Py_TYPE(o)->tp_name) == type_name && !(Py_TYPE(o)->tp_flags & Py_TPFLAGS_HEAPTYPE);
}

Value bool_value(bool b) { return Value::constant(PyRef::borrow(b ? Py_True : Py_False)); }
Value int_value(int64_t v) { return Value::constant(PyRef::steal(PyLong_FromLongLong(v))); }

size_t element_size(DType d) {
  switch (d) {
    case DType::Bool: case DType::UInt8: return 1;
    case DType::Int32: case DType::Float32: return 4;
    case DType::Int64: case DType::Float64: return 8;
  }
  return 0;
}

// The torch.overrides checks, by object: _has_torch_function(iterable),
// _has_torch_function_unary(obj), _has_torch_function_variadic(*objs).
enum class OverrideCheck : uint8_t { Iterable, Unary, Variadic };

std::optional<OverrideCheck> override_check(PyObject* fn) {
  static PyObject* c = PyImport_ImportModule("torch._C");  // kept for the process
  if (c == nullptr) {
    guards::clear_error();
    return std::nullopt;
  }
  static PyObject* iterable = PyObject_GetAttrString(c, "_has_torch_function");
  static PyObject* unary = PyObject_GetAttrString(c, "_has_torch_function_unary");
  static PyObject* variadic = PyObject_GetAttrString(c, "_has_torch_function_variadic");
  guards::clear_error();
  if (fn == nullptr) return std::nullopt;
  if (fn == iterable) return OverrideCheck::Iterable;
  if (fn == unary) return OverrideCheck::Unary;
  if (fn == variadic) return OverrideCheck::Variadic;
  return std::nullopt;
}

// A torch.Tensor or nn.Parameter object (exactly; a constant the trace found through
// a guarded cell, global or attribute): neither defines __torch_function__ for the
// checks (Parameter's is torch's disabled one).
bool plain_tensor_object(PyObject* o) {
  auto& refs = guards::torch_refs();
  if (refs.parameter_type == nullptr) {  // as path_tensor sets it (interp/trace/ops_load_store.cpp)
    PyObject* mod = PyImport_ImportModule("torch.nn.parameter");
    refs.parameter_type = mod ? PyObject_GetAttrString(mod, "Parameter") : nullptr;  // kept for the process
    Py_XDECREF(mod);
    guards::clear_error();
  }
  return Py_TYPE(o) == reinterpret_cast<PyTypeObject*>(refs.tensor_type) ||
         (refs.parameter_type != nullptr && Py_TYPE(o) == reinterpret_cast<PyTypeObject*>(refs.parameter_type));
}

}  // namespace

bool is_torch_metadata_object(PyObject* o) {
  return exact_builtin(o, "torch.dtype") || exact_builtin(o, "torch.device") || exact_builtin(o, "torch.layout") ||
         exact_builtin(o, "torch.finfo") || exact_builtin(o, "torch.iinfo");
}

bool Tracer::is_meta_method(const std::string& name) {
  static const char* const kNames[] = {"stride", "is_contiguous", "element_size", "is_floating_point",
                                       "is_complex", "get_device", "nelement", "is_signed", "storage_offset"};
  for (const char* n : kNames) {
    if (name == n) return true;
  }
  return false;
}

// The placeholders that node n is computed from (n itself when it is one).
std::vector<NodeId> Tracer::input_ancestors(NodeId n) const {
  std::vector<NodeId> out, todo{n};
  std::vector<bool> seen(graph_.size(), false);
  while (!todo.empty()) {
    const NodeId k = todo.back();
    todo.pop_back();
    if (seen[static_cast<size_t>(k)]) continue;
    seen[static_cast<size_t>(k)] = true;
    const jit::Node& node = graph_.node(k);
    if (node.op == jit::Op::Placeholder) out.push_back(k);
    for (NodeId i : node.inputs) todo.push_back(i);
  }
  return out;
}

// Whether eager's tensor for node n has the standard contiguous strides of its sizes,
// where that follows from inputs that have them (each then guarded so). An error
// where it cannot be known.
Status Tracer::require_standard_strides(NodeId n, bool allow_view, const std::string& what) {
  if (committed_ || continuation_) return unsupported(what + " after a graph break (not supported yet)");
  if (may_be_noncontig(n)) return unsupported(what + " of a tensor that may be non-contiguous (not supported yet)");
  if (!allow_view && graph_.node(n).op != jit::Op::Placeholder && view_parent_.count(n)) {
    return unsupported(what + " of a view (not supported yet)");
  }
  std::vector<int> refs;
  for (NodeId p : input_ancestors(n)) {
    const InputRef ref = placeholder_slot_[static_cast<size_t>(graph_.node(p).index)];
    auto c = input_contiguous_.find(p);
    if (ref.kind == InputRef::Kind::Reg || c == input_contiguous_.end()) {
      return unsupported(what + " of a tensor computed from a graph break's result (not supported yet)");
    }
    if (!c->second) return unsupported(what + " of a tensor computed from a non-contiguous input (not supported yet)");
    refs.push_back(ref.kind == InputRef::Kind::Arg ? ref.index : -ref.index - 1);
  }
  for (int r : refs) entry_->guards.require_contiguous(r);
  return ok();
}

bool Tracer::guard_inputs_contiguous(NodeId n) {
  std::vector<int> refs;
  for (NodeId p : input_ancestors(n)) {
    const InputRef ref = placeholder_slot_[static_cast<size_t>(graph_.node(p).index)];
    auto c = input_contiguous_.find(p);
    if (ref.kind == InputRef::Kind::Reg || c == input_contiguous_.end()) continue;
    if (!c->second) return false;
    refs.push_back(ref.kind == InputRef::Kind::Arg ? ref.index : -ref.index - 1);
  }
  for (int r : refs) entry_->guards.require_contiguous(r);
  return true;
}

// t.<name> for a tensor t: nullopt when `name` is not a metadata attribute.
std::optional<Status> Tracer::tensor_meta_attr(const Value& t, const std::string& name) {
  const jit::Node& n = graph_.node(t.node);
  PyObject* obj = nullptr;
  if (name == "dtype") obj = torch_dtype(n.dtype);
  else if (name == "device") obj = cpu_device();
  else if (name == "layout") obj = strided_layout();
  else if (name == "is_cuda" || name == "is_meta" || name == "is_sparse" || name == "is_quantized" ||
           name == "is_mkldnn" || name == "is_nested" || name == "is_xpu" || name == "is_mps") obj = Py_False;
  else if (name == "is_cpu") obj = Py_True;
  else if (name == "itemsize") {
    FJ_TRY(require_tensor_attr(name));
    push(int_value(static_cast<int64_t>(element_size(n.dtype))));
    return ok();
  } else if (name == "nbytes") {  // numel * itemsize, symbolic with the sizes
    FJ_TRY(require_tensor_attr(name));
    SymExpr bytes = SymExpr::integer(static_cast<int64_t>(element_size(n.dtype)));
    for (size_t d = 0; d < n.rank(); ++d) bytes = jit::mul(bytes, *as_sym(dim_value(t.node, d)));
    return push_sym(bytes, "nbytes");
  } else if (name == "__class__") {  // an argument's (exactly torch.Tensor) or an op's result
    const jit::Node& root = graph_.node(t.node);
    if (root.op == jit::Op::Placeholder && placeholder_slot_[static_cast<size_t>(root.index)].kind != InputRef::Kind::Arg) {
      return unsupported("the class of a tensor found by path or returned by a call (a subclass, maybe)");
    }
    push(Value::constant(PyRef::borrow(guards::torch_refs().tensor_type)));
    return ok();
  } else if (name == "requires_grad") {
    FJ_TRY(require_tensor_attr(name));
    for (NodeId p : input_ancestors(t.node)) {
      if (placeholder_slot_[static_cast<size_t>(graph_.node(p).index)].kind == InputRef::Kind::Reg) {
        return unsupported("requires_grad of a graph break's result (not supported yet)");
      }
    }
    if (!markers_.empty()) return unsupported("requires_grad in a frame with custom autograd Functions (not supported yet)");
    // What eager's autograd records: a float tensor made, with grad mode on, from one
    // that requires grad (the mode of each node as traced; inputs' flags guarded). A
    // view made under no_grad keeps its base's flag in eager: not modelled.
    for (NodeId v = t.node; view_parent_.count(v) != 0; v = view_parent_.at(v)) {
      const auto id = static_cast<size_t>(v);
      if (detached_.count(v) == 0 && id < node_grad_.size() && node_grad_[id] == 0 && node_needs_grad(view_parent_.at(v))) {
        return unsupported("requires_grad of a view made under no_grad (not supported yet)");
      }
    }
    obj = node_needs_grad(t.node) ? Py_True : Py_False;
  } else {
    return std::nullopt;
  }
  if (obj == nullptr) return unsupported("tensor attribute '." + name + "': torch's object cannot be read");
  FJ_TRY(require_tensor_attr(name));
  push(Value::constant(PyRef::borrow(obj)));
  return ok();
}

// t.stride(), t.is_contiguous(), ... (is_meta_method): args[0] is the tensor.
Status Tracer::call_meta_method(const std::string& name, const std::vector<Value>& args, PyObject* kw_names) {
  const NodeId node = args[0].node;
  const jit::Node& n = graph_.node(node);
  const DType d = n.dtype;
  const std::string what = "." + name + "()";
  std::vector<Value> a = args;
  if (kw_names != nullptr) {  // is_contiguous(memory_format=torch.contiguous_format) is is_contiguous()
    static PyObject* const contiguous = torch_attr("contiguous_format");  // kept
    const bool plain = name == "is_contiguous" && PyTuple_GET_SIZE(kw_names) == 1 && a.size() == 2 &&
                       PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kw_names, 0), "memory_format") == 0 &&
                       a[1].kind == ValueKind::Const && a[1].obj.get() == contiguous;
    if (!plain) return unsupported("keyword arguments to " + what + " (not supported yet)");
    a.pop_back();
  }
  if (name == "stride") {
    if (args.size() > 2) return unsupported(what + " with more than one argument (CPython raises)");
    int64_t dim = -1;
    const auto rank = static_cast<int64_t>(n.rank());
    if (args.size() == 2) {
      FJ_TRY(int_arg(args[1], what + " dim", &dim));
      if (dim < -rank || dim >= rank || rank == 0) return unsupported(what + " with a dim out of range (eager raises)");
      if (dim < 0) dim += rank;
    }
    TensorLayout layout;
    FJ_TRY(eager_layout(node, what, &layout));
    std::vector<Value> strides;
    for (const SymExpr& e : layout.strides) strides.push_back(e.is_constant() ? int_value(*e.as_int()) : Value::sym(e));
    if (dim >= 0) push(strides[static_cast<size_t>(dim)]);
    else push(Value::sequence(ValueKind::Tuple, std::move(strides)));
    return ok();
  }
  if (a.size() != 1) return unsupported(what + " with arguments (not supported yet)");
  if (name == "is_contiguous" || name == "storage_offset") {
    TensorLayout layout;
    FJ_TRY(eager_layout(node, what, &layout));
    if (name == "storage_offset") {
      push(layout.offset.is_constant() ? int_value(*layout.offset.as_int()) : Value::sym(layout.offset));
      return ok();
    }
    bool contiguous = false;
    FJ_TRY(layout_is_contiguous(node, layout, &contiguous));
    push(bool_value(contiguous));
  } else if (name == "element_size") {
    push(int_value(static_cast<int64_t>(element_size(d))));
  } else if (name == "is_floating_point") {
    push(bool_value(jit::is_floating(d)));
  } else if (name == "is_complex") {
    push(bool_value(false));
  } else if (name == "is_signed") {
    push(bool_value(d != DType::Bool && d != DType::UInt8));
  } else if (name == "get_device") {
    push(int_value(-1));
  } else if (name == "nelement") {
    return call_shape_method("numel", args);
  } else {
    return unsupported("tensor " + what + " (not supported yet)");
  }
  return ok();
}

// The torch.overrides checks (torch._C._has_torch_function*): False when no argument
// can define __torch_function__ (tensors the trace holds are plain, numbers, None,
// strings, torch dtypes and devices, sequences of these) and no torch function mode
// is on. nullopt: the call
// is not such a check.
std::optional<Status> Tracer::call_override_check(const CallSite& c) {
  if (c.callable.kind != ValueKind::Const || is_opaque(c.callable)) return std::nullopt;
  // torch.device / finfo / iinfo: pure constructors of immutable objects.
  static PyObject* const kMakers[] = {torch_attr("device"), torch_attr("finfo"), torch_attr("iinfo")};  // kept
  for (PyObject* maker : kMakers) {
    if (maker != nullptr && c.callable.obj.get() == maker) return call_torch_constructor(c);
  }
  static PyObject* is_tracing = [] {
    PyObject* m = PyImport_ImportModule("torch._C");
    PyObject* f = m ? PyObject_GetAttrString(m, "_is_tracing") : nullptr;
    Py_XDECREF(m);
    guards::clear_error();
    return f;  // kept for the process
  }();
  if (is_tracing != nullptr && c.callable.obj.get() == is_tracing && c.args.empty() && !c.kw_names) {
    // torch.jit.is_tracing(): False as eager answers outside torch.jit.trace; a frame
    // traced by torch.jit.trace is left to CPython.
    PyObject* r = PyObject_CallNoArgs(is_tracing);
    const bool off = r == Py_False;
    Py_XDECREF(r);
    guards::clear_error();
    if (!off) return unsupported("torch.jit.is_tracing() inside torch.jit.trace (not supported)");
    push(bool_value(false));
    return ok();
  }
  const std::optional<OverrideCheck> check = override_check(c.callable.obj.get());
  if (!check) return std::nullopt;
  const std::string what = "torch.overrides check " + describe(c.callable);
  if (c.kw_names) return unsupported(what + " with keyword arguments (CPython raises)");
  if ((*check == OverrideCheck::Iterable || *check == OverrideCheck::Unary) && c.args.size() != 1) {
    return unsupported(what + " with " + std::to_string(c.args.size()) + " arguments (CPython raises)");
  }
  std::vector<const Value*> objs;
  if (*check == OverrideCheck::Iterable) {
    const Value& seq = c.args[0];
    if (seq.kind != ValueKind::Tuple && seq.kind != ValueKind::List) return unsupported(what + " of " + describe(seq));
    for (const Value& v : seq.items) objs.push_back(&v);
  } else {
    for (const Value& v : c.args) objs.push_back(&v);
  }
  for (const Value* v : objs) {
    const bool plain = v->kind == ValueKind::Tensor || v->kind == ValueKind::Sym || v->kind == ValueKind::Tuple ||
                       v->kind == ValueKind::List || v->kind == ValueKind::Dict ||
                       (v->kind == ValueKind::Const && !is_opaque(*v) &&
                        (is_foldable(v->obj.get()) || plain_tensor_object(v->obj.get())));
    if (!plain) return unsupported(what + " of " + describe(*v) + " (not supported yet)");
  }
  if (guards::torch_function_mode_enabled()) return unsupported(what + " under a torch function mode (not supported yet)");
  guards().add_no_function_mode();
  push(bool_value(false));
  return ok();
}

// torch.device("cpu"), torch.finfo(torch.float32) & co, of constants: made now (pure
// constructors of immutable objects).
Status Tracer::call_torch_constructor(const CallSite& c) {
  const size_t nkw = c.kw_names ? static_cast<size_t>(PyTuple_GET_SIZE(c.kw_names.get())) : 0;
  const size_t npos = c.args.size() - nkw;
  PyRef args = PyRef::steal(PyTuple_New(static_cast<Py_ssize_t>(npos)));
  PyRef kwargs = PyRef::steal(PyDict_New());
  for (size_t i = 0; i < c.args.size(); ++i) {
    const Value& v = c.args[i];
    PyObject* o = v.kind == ValueKind::Const && !is_opaque(v) ? v.obj.get() : nullptr;
    if (o == nullptr || !(PyUnicode_CheckExact(o) || PyLong_CheckExact(o) || o == Py_None || is_torch_metadata_object(o))) {
      return unsupported(describe(c.callable) + " of " + describe(v) + " (not supported yet)");
    }
    if (i < npos) PyTuple_SET_ITEM(args.get(), static_cast<Py_ssize_t>(i), Py_NewRef(o));
    else PyDict_SetItem(kwargs.get(), PyTuple_GET_ITEM(c.kw_names.get(), static_cast<Py_ssize_t>(i - npos)), o);
  }
  PyObject* dev = PyObject_Call(c.callable.obj.get(), args.get(), kwargs.get());
  if (dev == nullptr) {
    guards::clear_error();
    return unsupported(describe(c.callable) + " raised (CPython raises)");
  }
  push(Value::constant(PyRef::steal(dev)));
  return ok();
}

// dev.type, dev.index, dtype.is_floating_point, finfo.min, ... of a torch
// metadata object (immutable; where it came from is guarded already): read from the
// object (C getters, no user code). nullopt: owner is no such object.
std::optional<Status> Tracer::metadata_object_attr(const Value& owner, const std::string& name) {
  if (owner.kind != ValueKind::Const || is_opaque(owner) || !is_torch_metadata_object(owner.obj.get())) return std::nullopt;
  static const char* const kNames[] = {"type", "index", "is_floating_point", "is_complex", "is_signed", "itemsize",
                                       "min", "max", "eps", "tiny", "bits", "resolution", "smallest_normal", "dtype"};
  bool known = false;
  for (const char* n : kNames) known = known || name == n;
  if (!known) return unsupported("attribute '" + name + "' of " + describe(owner) + " (not supported yet)");
  PyObject* v = PyObject_GetAttrString(owner.obj.get(), name.c_str());
  if (v == nullptr) {
    guards::clear_error();
    return unsupported("attribute '" + name + "' of " + describe(owner) + " raised (CPython raises)");
  }
  push(Value::constant(PyRef::steal(v)));
  return ok();
}

}  // namespace fj::interp

namespace fj::interp {

// torch._VF.<op>: the module's __getattr__ reads torch._C._VariableFunctions, whose
// functions are fixed builtins. torch.backends.cudnn.enabled: a property of the
// module's class, read now; it only matters on CUDA, so it is passed on opaque (any
// use but handing it to an op ends the trace).
PyObject* torch_module_fallback_attr(PyObject* module, const std::string& name, bool* opaque) {
  static PyObject* vf = PyImport_ImportModule("torch._VF");  // kept for the process
  static PyObject* cudnn = PyImport_ImportModule("torch.backends.cudnn");
  guards::clear_error();
  *opaque = false;
  PyObject* v = nullptr;
  if (module == vf && vf != nullptr) {
    PyObject* c = PyImport_AddModule("torch._C");
    PyObject* fns = c ? PyObject_GetAttrString(c, "_VariableFunctions") : nullptr;
    v = fns ? PyObject_GetAttrString(fns, name.c_str()) : nullptr;
    Py_XDECREF(fns);
    if (v != nullptr && !PyCFunction_Check(v)) Py_CLEAR(v);
  } else if (module == cudnn && cudnn != nullptr && name == "enabled") {
    v = PyObject_GetAttrString(module, "enabled");
    *opaque = true;
  }
  guards::clear_error();
  return v;
}

}  // namespace fj::interp
