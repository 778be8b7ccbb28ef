// Reading Python and torch state without running user code: tensor metadata, plain
// attribute reads, torch.Tensor's attributes, grad mode and the default dtype, and
// the torch objects registered at import. Shared by the guards and interp/.
#include <cstring>
#include <unordered_map>

#include "guards/guard_kinds.h"
#include "guards/py_text.h"

#include <structmember.h>  // T_OBJECT_EX: __slots__ members (after Python.h)

namespace fj::guards {
namespace {

bool read_int_tuple(PyObject* seq, std::array<int64_t, kMaxRank>& out, int* rank) {
  if (!PyTuple_Check(seq)) return false;
  const Py_ssize_t n = PyTuple_GET_SIZE(seq);
  if (n > kMaxRank) return false;
  for (Py_ssize_t i = 0; i < n; ++i) out[static_cast<size_t>(i)] = PyLong_AsLongLong(PyTuple_GET_ITEM(seq, i));
  *rank = static_cast<int>(n);
  return !PyErr_Occurred();
}

// torch.<name>, looked up once and kept for the process (null when it cannot be).
PyObject* torch_function(const char* name) {
  PyRef torch = PyRef::steal(PyImport_ImportModule("torch"));
  PyObject* f = torch ? PyObject_GetAttrString(torch.get(), name) : nullptr;
  if (f == nullptr) clear_error();
  return f;
}

// The process's map of torch.Tensor attributes as they were at import (never freed:
// its references outlive Python's finalization).
std::unordered_map<std::string, PyObject*>& tensor_attr_snapshot() {
  static auto* m = new std::unordered_map<std::string, PyObject*>();
  return *m;
}

PyObject* g_module_getattr = nullptr;  // nn.Module.__getattr__, kept for the process

}  // namespace

TorchRefs& torch_refs() {
  static TorchRefs refs;
  return refs;
}

ModuleCallRefs& module_call_refs() {
  static ModuleCallRefs refs;
  return refs;
}

Expected<TensorMeta> tensor_meta(PyObject* t) {
  static PyObject* s_shape = interned("shape").release();  // names kept for the process
  static PyObject* s_stride = interned("stride").release();
  static PyObject* s_dtype = interned("dtype").release();
  static PyObject* s_is_cpu = interned("is_cpu").release();
  static PyObject* s_requires_grad = interned("requires_grad").release();
  static PyObject* s_is_neg = interned("is_neg").release();
  static PyObject* s_layout = interned("layout").release();
  static PyObject* s_is_inference = interned("is_inference").release();
  static PyObject* strided = torch_function("strided");  // torch.strided, kept for the process

  const PyRef shape = PyRef::steal(PyObject_GetAttr(t, s_shape));
  const PyRef strides = PyRef::steal(shape ? PyObject_CallMethodNoArgs(t, s_stride) : nullptr);
  const PyRef dtype = PyRef::steal(strides ? PyObject_GetAttr(t, s_dtype) : nullptr);
  const PyRef is_cpu = PyRef::steal(dtype ? PyObject_GetAttr(t, s_is_cpu) : nullptr);
  const PyRef rg = PyRef::steal(is_cpu ? PyObject_GetAttr(t, s_requires_grad) : nullptr);
  // A lazily negated view (x.conj().imag) reads negated values from raw memory.
  const PyRef neg = PyRef::steal(rg ? PyObject_CallMethodNoArgs(t, s_is_neg) : nullptr);
  // Only dense tensors in memory are compiled: a sparse, a mkldnn tensor, ... has other
  // layouts (and some of them strides that mean nothing); eager handles it.
  const PyRef layout = PyRef::steal(neg ? PyObject_GetAttr(t, s_layout) : nullptr);
  const PyRef inference = PyRef::steal(layout ? PyObject_CallMethodNoArgs(t, s_is_inference) : nullptr);
  TensorMeta m;
  int srank = 0;
  const bool read = neg.get() == Py_False && read_int_tuple(shape.get(), m.sizes, &m.rank) &&
                    read_int_tuple(strides.get(), m.strides, &srank) && m.rank == srank;
  clear_error();
  if (neg.get() == Py_True) return Error{"tensor with the negative bit set (a lazily negated view)"};
  if (neg.get() != Py_False || !inference) return Error{"cannot read tensor metadata"};
  if (strided == nullptr || layout.get() != strided) return Error{"tensor with layout " + describe_object(layout.get()) + " (not strided)"};
  if (!read) return Error{"tensor of rank above " + std::to_string(kMaxRank)};
  m.dtype = dtype.get();  // torch dtypes live as long as torch
  m.is_cpu = is_cpu.get() == Py_True;
  m.requires_grad = rg.get() == Py_True;
  m.is_inference = inference.get() == Py_True;
  return m;
}

bool grad_enabled() {
  static PyObject* fn = torch_function("is_grad_enabled");
  if (fn == nullptr) return false;
  const PyRef r = PyRef::steal(PyObject_CallNoArgs(fn));
  if (!r) clear_error();
  return r.get() == Py_True;
}

bool torch_function_mode_enabled() noexcept {
  static PyObject* fn = [] {
    PyRef c = PyRef::steal(PyImport_ImportModule("torch._C"));
    PyObject* f = c ? PyObject_GetAttrString(c.get(), "_is_torch_function_mode_enabled") : nullptr;
    if (f == nullptr) clear_error();
    return f;  // kept for the process
  }();
  if (fn == nullptr) return true;
  const PyRef r = PyRef::steal(PyObject_CallNoArgs(fn));
  if (!r) clear_error();
  return r.get() != Py_False;
}

PyObject* default_dtype() noexcept {
  static PyObject* fn = torch_function("get_default_dtype");
  if (fn == nullptr) return nullptr;
  const PyRef r = PyRef::steal(PyObject_CallNoArgs(fn));
  if (!r) clear_error();
  return r.get();  // borrowed past the release: torch's dtypes live as long as torch
}

std::optional<jit::SymType> numpy_scalar_kind(PyTypeObject* type) noexcept {
  if (std::strncmp(type->tp_name, "numpy.", 6) != 0) return std::nullopt;
  const PyRef np = PyRef::steal(PyImport_GetModule(interned("numpy").get()));
  if (!np) return clear_error(), std::nullopt;
  static const std::pair<const char*, jit::SymType> kinds[] = {
      {"float64", jit::SymType::Float}, {"float32", jit::SymType::Float}, {"float16", jit::SymType::Float},
      {"int64", jit::SymType::Int},     {"int32", jit::SymType::Int},     {"int16", jit::SymType::Int},
      {"int8", jit::SymType::Int},      {"uint32", jit::SymType::Int},    {"uint16", jit::SymType::Int},
      {"uint8", jit::SymType::Int},     {"bool_", jit::SymType::Bool}};
  for (const auto& [name, kind] : kinds) {
    const PyRef t = PyRef::steal(PyObject_GetAttrString(np.get(), name));
    if (!t) clear_error();
    if (t.get() == reinterpret_cast<PyObject*>(type)) return kind;
  }
  return std::nullopt;
}

bool read_ndarray_meta(PyObject* a, TensorMeta* out, void** data) noexcept {
  if (std::strcmp(Py_TYPE(a)->tp_name, "numpy.ndarray") != 0) return false;
  const PyRef np = PyRef::steal(PyImport_GetModule(interned("numpy").get()));
  const PyRef type = np ? PyRef::steal(PyObject_GetAttrString(np.get(), "ndarray")) : PyRef();
  if (!type || Py_TYPE(a) != reinterpret_cast<PyTypeObject*>(type.get())) return clear_error(), false;
  Py_buffer view;
  if (PyObject_GetBuffer(a, &view, PyBUF_RECORDS) != 0) return clear_error(), false;  // read-only, or no buffer
  std::string format = view.format != nullptr ? view.format : "B";
  if (!format.empty() && (format[0] == '=' || format[0] == '<' || format[0] == '@')) format.erase(0, 1);
  const TorchRefs& refs = torch_refs();
  PyObject* dtype = format == "f" && view.itemsize == 4                      ? refs.float32
                    : format == "d" && view.itemsize == 8                    ? refs.float64
                    : (format == "l" || format == "q") && view.itemsize == 8 ? refs.int64
                    : format == "i" && view.itemsize == 4                    ? refs.int32
                    : format == "?" && view.itemsize == 1                    ? refs.bool_
                                                                             : nullptr;
  bool ok = dtype != nullptr && view.ndim <= kMaxRank;
  if (ok) {
    out->dtype = dtype;
    out->is_cpu = true;
    out->requires_grad = false;
    out->is_inference = false;
    out->is_ndarray = true;
    out->rank = view.ndim;
    for (int d = 0; d < view.ndim; ++d) {
      out->sizes[static_cast<size_t>(d)] = view.shape[d];
      ok = ok && view.strides[d] % view.itemsize == 0;
      out->strides[static_cast<size_t>(d)] = view.strides[d] / view.itemsize;
    }
    if (data != nullptr) *data = view.buf;
  }
  PyBuffer_Release(&view);
  return ok;
}

bool read_numpy_scalar(PyObject* v, jit::SymType kind, jit::SymValue* out) noexcept {
  if (kind == jit::SymType::Float) {
    const double x = PyFloat_AsDouble(v);
    if (x == -1.0 && PyErr_Occurred()) return clear_error(), false;
    *out = x;
    return true;
  }
  if (kind == jit::SymType::Bool) {
    const int t = PyObject_IsTrue(v);
    if (t < 0) return clear_error(), false;
    *out = t == 1;
    return true;
  }
  int overflow = 0;
  const long long x = PyLong_AsLongLongAndOverflow(v, &overflow);  // through __index__
  if (x == -1 && PyErr_Occurred()) return clear_error(), false;
  *out = static_cast<int64_t>(x);
  return overflow == 0;
}

PyObject* current_tensor_attr(PyObject* interned_name) {
  auto* type = reinterpret_cast<PyTypeObject*>(torch_refs().tensor_type);
  return type ? _PyType_Lookup(type, interned_name) : nullptr;
}

void snapshot_tensor_attrs(const std::vector<std::string>& names) {
  for (const std::string& n : names) {
    PyObject* v = current_tensor_attr(interned(n.c_str()).get());
    if (v != nullptr) tensor_attr_snapshot()[n] = Py_NewRef(v);
  }
}

PyObject* original_tensor_attr(const std::string& name) {
  auto it = tensor_attr_snapshot().find(name);
  return it == tensor_attr_snapshot().end() ? nullptr : it->second;
}

bool generic_getattribute(PyTypeObject* tp) noexcept {
  static PyObject* s_getattribute = interned("__getattribute__").release();
  static PyObject* object_getattribute = _PyType_Lookup(&PyBaseObject_Type, s_getattribute);
  // A C type with the generic slot, or a class that does not override __getattribute__
  // (it may define __getattr__, which only runs for missing attributes).
  return tp->tp_getattro == PyObject_GenericGetAttr || _PyType_Lookup(tp, s_getattribute) == object_getattribute;
}

void set_module_getattr(PyObject* fn) { g_module_getattr = Py_NewRef(fn); }

namespace {
// The getter of the `__dict__` descriptor that `type` gives a class statement's
// instances (CPython's subtype_dict), found on a probe class once; nullptr if unknown.
getter instance_dict_getter() noexcept {
  static getter g = [] {
    getter found = nullptr;
    PyRef probe = PyRef::steal(PyObject_CallFunction(reinterpret_cast<PyObject*>(&PyType_Type), "s()N", "_fj_probe",
                                                     PyDict_New()));  // N: the call takes the dict
    PyObject* d = probe ? _PyType_Lookup(reinterpret_cast<PyTypeObject*>(probe.get()), interned("__dict__").get()) : nullptr;
    if (d != nullptr && Py_IS_TYPE(d, &PyGetSetDescr_Type)) found = reinterpret_cast<PyGetSetDescrObject*>(d)->d_getset->get;
    clear_error();
    return found;
  }();
  return g;
}

// What object.__getattribute__ finds without running code: an instance-dict entry, a
// class attribute that is no descriptor, the instance dict itself as `__dict__`, or
// the object's type as `__class__`. *found_descr: the class had `name` (so no
// __getattr__ would run).
PyObject* generic_plain_attr(PyObject* obj, PyObject* name, bool* found_descr, PyObject** dict_out) noexcept {
  PyTypeObject* tp = Py_TYPE(obj);
  PyObject* descr = _PyType_Lookup(tp, name);
  *found_descr = descr != nullptr;
  if (descr != nullptr && Py_IS_TYPE(descr, &PyGetSetDescr_Type) && instance_dict_getter() != nullptr &&
      reinterpret_cast<PyGetSetDescrObject*>(descr)->d_getset->get == instance_dict_getter()) {
    PyObject** dictptr = _PyObject_GetDictPtr(obj);  // obj.__dict__: the instance dict itself
    return dictptr != nullptr ? *dictptr : nullptr;
  }
  static PyObject* object_class = _PyType_Lookup(&PyBaseObject_Type, interned("__class__").get());
  if (descr != nullptr && descr == object_class) return reinterpret_cast<PyObject*>(tp);  // obj.__class__
  if (descr != nullptr && Py_IS_TYPE(descr, &PyMemberDescr_Type)) {  // a __slots__ member, read in place
    const PyMemberDef* m = reinterpret_cast<PyMemberDescrObject*>(descr)->d_member;
    if (m->type != T_OBJECT_EX && m->type != T_OBJECT) return nullptr;
    PyObject* v = *reinterpret_cast<PyObject**>(reinterpret_cast<char*>(obj) + m->offset);
    return v != nullptr ? v : m->type == T_OBJECT ? Py_None : nullptr;
  }
  if (descr != nullptr && Py_TYPE(descr)->tp_descr_set != nullptr) return nullptr;  // property
  PyObject** dictptr = _PyObject_GetDictPtr(obj);
  PyObject* dict = dictptr != nullptr ? *dictptr : nullptr;
  *dict_out = dict;
  if (dict != nullptr) {
    PyObject* v = PyDict_GetItemWithError(dict, name);
    if (v != nullptr) return v;
    clear_error();
  }
  if (descr != nullptr) return Py_TYPE(descr)->tp_descr_get == nullptr ? descr : nullptr;
  return nullptr;
}
}  // namespace

PyObject* object_attr(PyObject* obj, PyObject* name) noexcept {
  if (PyType_Check(obj)) {
    // A class statement's class whose metaclass keeps type's own __getattribute__ (a
    // __getattr__ of the metaclass runs only for what that does not find): its
    // __name__ and __qualname__ (two fields of the type), and plain class attributes.
    static PyObject* s_getattribute = interned("__getattribute__").release();
    auto* tp = reinterpret_cast<PyTypeObject*>(obj);
    PyTypeObject* meta = Py_TYPE(obj);
    if (!(tp->tp_flags & Py_TPFLAGS_HEAPTYPE) ||
        _PyType_Lookup(meta, s_getattribute) != _PyType_Lookup(&PyType_Type, s_getattribute)) {
      return nullptr;
    }
    PyObject* meta_attr = _PyType_Lookup(meta, name);
    auto* ht = reinterpret_cast<PyHeapTypeObject*>(obj);
    if (_PyUnicode_EqualToASCIIString(name, "__name__") || _PyUnicode_EqualToASCIIString(name, "__qualname__")) {
      if (meta_attr != _PyType_Lookup(&PyType_Type, name)) return nullptr;
      return _PyUnicode_EqualToASCIIString(name, "__name__") ? ht->ht_name : ht->ht_qualname;
    }
    if (meta_attr != nullptr) return nullptr;
    PyObject* v = _PyType_Lookup(tp, name);
    return v != nullptr && Py_TYPE(v)->tp_descr_get == nullptr ? v : nullptr;
  }
  if (PyModule_Check(obj)) return nullptr;  // its own getattro
  bool found_descr = false;
  PyObject* dict = nullptr;
  return generic_plain_attr(obj, name, &found_descr, &dict);
}

PyObject* plain_attr(PyObject* obj, PyObject* name) noexcept {
  static PyObject* s_getattr = interned("__getattr__").release();
  static PyObject* module_dicts[] = {interned("_parameters").release(), interned("_buffers").release(),
                                     interned("_modules").release()};
  PyTypeObject* tp = Py_TYPE(obj);
  if (!generic_getattribute(tp)) return nullptr;  // may run code
  bool found_descr = false;
  PyObject* dict = nullptr;
  if (PyObject* v = generic_plain_attr(obj, name, &found_descr, &dict)) return v;
  if (found_descr) return nullptr;
  // Not found the normal way: nn.Module.__getattr__ looks in these dicts.
  if (dict == nullptr || g_module_getattr == nullptr || _PyType_Lookup(tp, s_getattr) != g_module_getattr) {
    return nullptr;
  }
  for (PyObject* key : module_dicts) {
    PyObject* d = PyDict_GetItemWithError(dict, key);
    if (d == nullptr || !PyDict_Check(d)) continue;
    PyObject* v = PyDict_GetItemWithError(d, name);
    if (v != nullptr) return v;
  }
  clear_error();
  return nullptr;
}

bool attr_missing(PyObject* obj, PyObject* name) noexcept {
  PyTypeObject* tp = Py_TYPE(obj);
  if (!generic_getattribute(tp) || _PyType_Lookup(tp, name) != nullptr) return false;
  return plain_attr(obj, name) == nullptr;
}

PyObject* module_getattr() noexcept { return g_module_getattr; }

PyObject* super_lookup(PyTypeObject* tp, PyObject* after, PyObject* name) noexcept {
  PyObject* mro = tp->tp_mro;
  if (mro == nullptr || !PyTuple_Check(mro)) return nullptr;
  const Py_ssize_t n = PyTuple_GET_SIZE(mro);
  Py_ssize_t i = 0;
  while (i < n && PyTuple_GET_ITEM(mro, i) != after) ++i;
  for (++i; i < n; ++i) {
    PyObject* dict = reinterpret_cast<PyTypeObject*>(PyTuple_GET_ITEM(mro, i))->tp_dict;
    if (dict == nullptr) continue;
    PyObject* v = PyDict_GetItemWithError(dict, name);
    if (v != nullptr) return v;
    clear_error();
  }
  return nullptr;
}

}  // namespace fj::guards
