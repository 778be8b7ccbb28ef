// Guard checks: building guard sets and the fast allocation-free check; reading
// tensor metadata through torch's Python API. The text of guards and misses is in
// guards/guard_text.cpp.
#include "guards/guards.h"

#include <algorithm>
#include <cstring>
#include <unordered_map>

namespace fj::guards {
namespace {

PyObject* interned(const char* s) {
  PyObject* o = PyUnicode_InternFromString(s);
  return o;
}

bool read_int_tuple(PyObject* seq, std::array<int64_t, kMaxRank>& out, int* rank) {
  if (!PyTuple_Check(seq)) return false;
  const Py_ssize_t n = PyTuple_GET_SIZE(seq);
  if (n > kMaxRank) return false;
  for (Py_ssize_t i = 0; i < n; ++i) {
    out[static_cast<size_t>(i)] = PyLong_AsLongLong(PyTuple_GET_ITEM(seq, i));
  }
  *rank = static_cast<int>(n);
  return !PyErr_Occurred();
}

bool scalar_equal(PyObject* a, PyObject* b) noexcept {
  if (a == b) return true;
  if (Py_TYPE(a) != Py_TYPE(b)) return false;
  if (PyFloat_CheckExact(a)) {
    const double x = PyFloat_AS_DOUBLE(a), y = PyFloat_AS_DOUBLE(b);
    return std::memcmp(&x, &y, sizeof x) == 0;  // NaN equals NaN; 0.0 differs from -0.0
  }
  if (PyLong_CheckExact(a) || PyUnicode_CheckExact(a)) {
    const int r = PyObject_RichCompareBool(a, b, Py_EQ);  // exact int/str: no user code
    if (r < 0) clear_error();
    return r == 1;
  }
  return false;  // bool and None are singletons, other objects compare by identity
}

PyObject* lookup_global(const Guard& g, const CallInputs& in) noexcept {
  PyObject* globals = g.globals ? g.globals : in.globals;
  PyObject* builtins = g.builtins ? g.builtins : in.builtins;
  PyObject* v = PyDict_GetItemWithError(globals, g.name_obj);
  if (v == nullptr && !PyErr_Occurred() && PyDict_Check(builtins)) {
    v = PyDict_GetItemWithError(builtins, g.name_obj);
  }
  clear_error();
  return v;
}

}  // namespace

std::unordered_map<std::string, PyObject*>& tensor_attr_snapshot() {
  static auto* m = new std::unordered_map<std::string, PyObject*>();
  return *m;
}

PyObject* current_tensor_attr(PyObject* interned_name) {
  auto* type = reinterpret_cast<PyTypeObject*>(torch_refs().tensor_type);
  return type ? _PyType_Lookup(type, interned_name) : nullptr;
}

void snapshot_tensor_attrs(const std::vector<std::string>& names) {
  for (const std::string& n : names) {
    PyObject* key = interned(n.c_str());
    PyObject* v = current_tensor_attr(key);
    Py_DECREF(key);
    if (v != nullptr) tensor_attr_snapshot()[n] = Py_NewRef(v);
  }
}

PyObject* original_tensor_attr(const std::string& name) {
  auto it = tensor_attr_snapshot().find(name);
  return it == tensor_attr_snapshot().end() ? nullptr : it->second;
}

PyObject* g_module_getattr = nullptr;

bool generic_getattribute(PyTypeObject* tp) noexcept {
  static PyObject* s_getattribute = interned("__getattribute__");
  static PyObject* object_getattribute = _PyType_Lookup(&PyBaseObject_Type, s_getattribute);
  // A C type with the generic slot, or a class that does not override __getattribute__
  // (it may define __getattr__, which only runs for missing attributes).
  return tp->tp_getattro == PyObject_GenericGetAttr || _PyType_Lookup(tp, s_getattribute) == object_getattribute;
}

void set_module_getattr(PyObject* fn) { g_module_getattr = Py_NewRef(fn); }

ModuleCallRefs& module_call_refs() {
  static ModuleCallRefs refs;
  return refs;
}

PyObject* plain_attr(PyObject* obj, PyObject* name) noexcept {
  static PyObject* s_getattr = interned("__getattr__");
  static PyObject* module_dicts[] = {interned("_parameters"), interned("_buffers"), interned("_modules")};
  PyTypeObject* tp = Py_TYPE(obj);
  if (!generic_getattribute(tp)) return nullptr;  // may run code
  PyObject* descr = _PyType_Lookup(tp, name);
  if (descr != nullptr && Py_TYPE(descr)->tp_descr_set != nullptr) return nullptr;  // property, slot
  PyObject** dictptr = _PyObject_GetDictPtr(obj);
  PyObject* dict = dictptr != nullptr ? *dictptr : nullptr;
  if (dict != nullptr) {
    PyObject* v = PyDict_GetItemWithError(dict, name);
    if (v != nullptr) return v;
    clear_error();
  }
  if (descr != nullptr) return Py_TYPE(descr)->tp_descr_get == nullptr ? descr : nullptr;
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

// A step of an attribute path: an interned name, or for "#i" the index i of an exact
// list or tuple (an argument that is a sequence of tensors).
PyObject* path_step(const std::string& a) {
  if (!a.empty() && a[0] == '#') return PyLong_FromLong(std::stol(a.substr(1)));
  return interned(a.c_str());
}

PyObject* walk_path(const Guard& g, const CallInputs& in) noexcept {
  PyObject* v = nullptr;
  if (g.root.arg >= 0) {
    v = in.args[g.root.arg];
  } else {
    v = PyDict_GetItemWithError(g.root.globals ? g.root.globals : in.globals, g.root.global_name);
    if (v == nullptr) clear_error();
  }
  for (PyObject* attr : g.attr_objs) {
    if (v == nullptr) return nullptr;
    if (PyLong_CheckExact(attr)) {
      const Py_ssize_t i = PyLong_AsSsize_t(attr);
      if (PyList_CheckExact(v) && i < PyList_GET_SIZE(v)) v = PyList_GET_ITEM(v, i);
      else if (PyTuple_CheckExact(v) && i < PyTuple_GET_SIZE(v)) v = PyTuple_GET_ITEM(v, i);
      else return nullptr;
      continue;
    }
    v = plain_attr(v, attr);
  }
  return v;
}

TorchRefs& torch_refs() {
  static TorchRefs refs;
  return refs;
}

bool read_tensor_meta(PyObject* t, TensorMeta* out, std::string* why) {
  static PyObject* s_shape = interned("shape");
  static PyObject* s_stride = interned("stride");
  static PyObject* s_dtype = interned("dtype");
  static PyObject* s_is_cpu = interned("is_cpu");
  static PyObject* s_requires_grad = interned("requires_grad");
  static PyObject* s_is_neg = interned("is_neg");

  PyObject* shape = PyObject_GetAttr(t, s_shape);
  PyObject* strides = shape ? PyObject_CallMethodNoArgs(t, s_stride) : nullptr;
  PyObject* dtype = strides ? PyObject_GetAttr(t, s_dtype) : nullptr;
  PyObject* is_cpu = dtype ? PyObject_GetAttr(t, s_is_cpu) : nullptr;
  PyObject* rg = is_cpu ? PyObject_GetAttr(t, s_requires_grad) : nullptr;
  // A lazily negated view (x.conj().imag) reads negated values from raw memory.
  PyObject* neg = rg ? PyObject_CallMethodNoArgs(t, s_is_neg) : nullptr;
  bool ok = neg == Py_False;
  if (neg == Py_True && why) *why = "tensor with the negative bit set (a lazily negated view)";
  int rank = 0, srank = 0;
  if (ok) {
    ok = read_int_tuple(shape, out->sizes, &rank) && read_int_tuple(strides, out->strides, &srank) &&
         rank == srank;
    if (!ok && why) *why = "tensor of rank above " + std::to_string(kMaxRank);
  } else if (why && neg != Py_True) {
    *why = "cannot read tensor metadata";
  }
  if (ok) {
    out->rank = rank;
    out->dtype = dtype;  // torch dtypes live as long as torch
    out->is_cpu = is_cpu == Py_True;
    out->requires_grad = rg == Py_True;
  }
  clear_error();
  Py_XDECREF(shape);
  Py_XDECREF(strides);
  Py_XDECREF(dtype);
  Py_XDECREF(is_cpu);
  Py_XDECREF(rg);
  Py_XDECREF(neg);
  return ok;
}

namespace {

// The bytes [lo, hi) that a tensor's elements span (empty: lo == hi), from its data
// pointer and metadata; false when the pointer cannot be read.
bool byte_extent(PyObject* t, const TensorMeta& m, uintptr_t* lo, uintptr_t* hi) noexcept {
  static PyObject* s_data_ptr = interned("data_ptr");
  const TorchRefs& r = torch_refs();
  const int64_t elem = m.dtype == r.float64 || m.dtype == r.int64 ? 8 : m.dtype == r.float32 || m.dtype == r.int32 ? 4 : 1;
  PyObject* p = PyObject_CallMethodNoArgs(t, s_data_ptr);
  if (p == nullptr) {
    PyErr_Clear();
    return false;
  }
  const uintptr_t base = reinterpret_cast<uintptr_t>(PyLong_AsVoidPtr(p));
  Py_DECREF(p);
  if (PyErr_Occurred()) {
    PyErr_Clear();
    return false;
  }
  int64_t last = 0;
  for (int d = 0; d < m.rank; ++d) {
    if (m.sizes[d] == 0) {
      *lo = *hi = base;
      return true;
    }
    last += (m.sizes[d] - 1) * m.strides[d];
  }
  *lo = base;
  *hi = base + static_cast<uintptr_t>((last + 1) * elem);
  return true;
}

// No two elements at one address: ordered by stride, each dim steps past the whole
// span of the smaller ones (a sufficient test, as for dense or sliced tensors).
bool no_internal_overlap(const TensorMeta& m) noexcept {
  std::array<std::pair<int64_t, int64_t>, kMaxRank> dims{};  // (stride, size)
  int n = 0;
  for (int d = 0; d < m.rank; ++d) {
    if (m.sizes[d] == 0) return true;
    if (m.sizes[d] > 1) dims[static_cast<size_t>(n++)] = {m.strides[d], m.sizes[d]};
  }
  std::sort(dims.begin(), dims.begin() + n);
  int64_t span = 1;  // elements covered by the smaller dims
  for (int k = 0; k < n; ++k) {
    if (dims[static_cast<size_t>(k)].first < span) return false;
    span = dims[static_cast<size_t>(k)].first * (dims[static_cast<size_t>(k)].second - 1) + span;
  }
  return true;
}

}  // namespace

bool GuardSet::overlap_free(const Guard& g, const CallInputs& in, std::string* why) const noexcept {
  std::vector<std::pair<uintptr_t, uintptr_t>> ext(g.tensors.size());
  const size_t n = ext.size();
  for (size_t k = 0; k < n; ++k) {
    const int ref = g.tensors[k];
    PyObject* t = nullptr;
    const TensorMeta* m = nullptr;
    if (ref >= 0) {
      if (ref >= in.num_args || !in.metas[static_cast<size_t>(ref)]) return false;
      t = in.args[ref];
      m = &*in.metas[static_cast<size_t>(ref)];
    } else {
      const auto slot = static_cast<size_t>(-ref - 1);
      if (slot >= in.path_tensors.size() || in.path_tensors[slot] == nullptr) return false;
      t = in.path_tensors[slot];
      m = &in.path_metas[slot];
    }
    if (!byte_extent(t, *m, &ext[k].first, &ext[k].second)) {
      if (why) *why = "cannot read the data pointer of " + g.attrs[k];
      return false;
    }
    if (k < g.num_updated && !no_internal_overlap(*m)) {
      if (why) *why = g.attrs[k] + ", updated in place, has elements that share memory";
      return false;
    }
  }
  for (size_t a = 0; a < std::min(g.num_updated, n); ++a) {
    for (size_t b = 0; b < n; ++b) {
      if (a == b || (b < g.num_updated && b < a)) continue;
      const bool disjoint = ext[a].first == ext[a].second || ext[b].first == ext[b].second ||
                            ext[a].second <= ext[b].first || ext[b].second <= ext[a].first;
      if (!disjoint) {
        if (why) *why = g.attrs[a] + ", updated in place, shares memory with " + g.attrs[b];
        return false;
      }
    }
  }
  return true;
}

GuardSet::GuardSet(GuardSet&& o) noexcept
    : guards_(std::move(o.guards_)), num_symbols_(o.num_symbols_) {}

GuardSet::~GuardSet() {
  for (Guard& g : guards_) {
    Py_XDECREF(g.object);
    Py_XDECREF(g.name_obj);
    for (PyObject* a : g.attr_objs) Py_XDECREF(a);
    Py_XDECREF(g.globals);
    Py_XDECREF(g.builtins);
    Py_XDECREF(g.cell);
    Py_XDECREF(g.root.global_name);
    Py_XDECREF(g.root.globals);
  }
}

void GuardSet::add_tensor(int arg, std::string name, const TensorMeta& meta,
                          const std::array<int, kMaxRank>& dim_symbols, bool strides) {
  Guard g{GuardKind::TensorMatch};
  g.arg = arg;
  g.name = std::move(name);
  g.meta = meta;
  g.dim_symbols = dim_symbols;
  g.check_strides = strides;
  for (int s : dim_symbols) num_symbols_ = std::max(num_symbols_, s + 1);
  guards_.push_back(std::move(g));
}

void GuardSet::add_object(GuardKind kind, int arg, std::string name, PyObject* object) {
  Guard g{kind};
  g.arg = arg;
  g.name = std::move(name);
  g.object = Py_NewRef(object);
  guards_.push_back(std::move(g));
}

void GuardSet::add_scalar(int arg, std::string name, PyObject* value) {
  add_object(GuardKind::ScalarEquals, arg, std::move(name), value);
}

void GuardSet::add_cell(PyObject* cell, std::string name, PyObject* object) {
  for (const Guard& g : guards_) {
    if (g.kind == GuardKind::CellIs && g.cell == cell) return;
  }
  Guard g{GuardKind::CellIs};
  g.cell = Py_NewRef(cell);
  g.name = std::move(name);
  g.object = Py_NewRef(object);
  guards_.push_back(std::move(g));
}

namespace {
void set_path(Guard& g, const PathRoot& root, const std::vector<std::string>& attrs) {
  g.root.arg = root.arg;
  g.root.global_name = Py_XNewRef(root.global_name);
  g.root.globals = Py_XNewRef(root.globals);
  for (const std::string& a : attrs) g.attr_objs.push_back(path_step(a));
}
}  // namespace

void GuardSet::add_path(std::string name, const PathRoot& root, const std::vector<std::string>& attrs,
                        PyObject* object) {
  Guard g{GuardKind::PathIs};
  g.name = std::move(name);
  set_path(g, root, attrs);
  g.object = Py_NewRef(object);
  guards_.push_back(std::move(g));
}

void GuardSet::add_path_method(std::string name, const PathRoot& root, const std::vector<std::string>& attrs,
                               const std::string& method, PyObject* fn) {
  Guard g{GuardKind::PathMethodIs};
  g.name = std::move(name);
  set_path(g, root, attrs);
  g.name_obj = interned(method.c_str());
  g.object = Py_NewRef(fn);
  guards_.push_back(std::move(g));
}

void GuardSet::add_sequence(int arg, std::string name, PyObject* seq) {
  Guard g{GuardKind::SequenceIs};
  g.arg = arg;
  g.name = std::move(name);
  g.object = Py_NewRef(reinterpret_cast<PyObject*>(Py_TYPE(seq)));
  g.symbol = static_cast<int>(Py_SIZE(seq));
  guards_.push_back(std::move(g));
}

void GuardSet::add_dict_keys(std::string name, PyObject* dict) {
  Guard g{GuardKind::DictKeysAre};
  g.name = std::move(name);
  g.cell = Py_NewRef(dict);
  g.object = PyDict_Keys(dict);  // a list, in order
  guards_.push_back(std::move(g));
}

void GuardSet::add_dicts_empty(std::string name, const std::vector<PyObject*>& dicts) {
  Guard g{GuardKind::DictsEmpty};
  g.name = std::move(name);
  for (PyObject* d : dicts) g.attr_objs.push_back(Py_NewRef(d));
  guards_.push_back(std::move(g));
}

int GuardSet::add_path_tensor(std::string name, const PathRoot& root, const std::vector<std::string>& attrs,
                              const TensorMeta& meta, const std::array<int, kMaxRank>& dim_symbols,
                              bool strides) {
  add_tensor(-1, std::move(name), meta, dim_symbols, strides);
  Guard& g = guards_.back();
  set_path(g, root, attrs);
  g.path_index = num_path_tensors_++;
  return g.path_index;
}

void GuardSet::add_tensor_attr(const std::string& name, PyObject* object) {
  for (const Guard& g : guards_) {
    if (g.kind == GuardKind::TensorAttrIs && g.name == name) return;
  }
  Guard g{GuardKind::TensorAttrIs};
  g.name = name;
  g.name_obj = interned(name.c_str());
  g.object = Py_NewRef(object);
  guards_.push_back(std::move(g));
}

void GuardSet::add_function(PyObject* fn) {
  for (const Guard& g : guards_) {
    if (g.kind == GuardKind::FunctionUnchanged && g.object == fn) return;
  }
  auto* f = reinterpret_cast<PyFunctionObject*>(fn);
  Guard g{GuardKind::FunctionUnchanged};
  g.object = Py_NewRef(fn);
  g.name = PyUnicode_AsUTF8(f->func_qualname);
  g.attr_objs = {Py_NewRef(f->func_code), Py_XNewRef(f->func_defaults), Py_XNewRef(f->func_kwdefaults)};
  guards_.push_back(std::move(g));
}

void GuardSet::add_global(std::string name, PyObject* object, bool from_builtins, PyObject* globals,
                          PyObject* builtins) {
  for (const Guard& g : guards_) {
    if (g.kind == GuardKind::GlobalIs && g.name == name && g.globals == globals) return;
  }
  Guard g{GuardKind::GlobalIs};
  g.globals = Py_XNewRef(globals);
  g.builtins = Py_XNewRef(builtins);
  g.name_obj = interned(name.c_str());
  g.name = std::move(name);
  g.from_builtins = from_builtins;
  Py_INCREF(object);
  g.object = object;
  guards_.push_back(std::move(g));
}

void GuardSet::add_closure(int cell, std::string name, PyObject* object) {
  add_object(GuardKind::ClosureIs, cell, std::move(name), object);
}

void GuardSet::add_symbol_arg(int arg, std::string name, int symbol, jit::SymType type) {
  Guard g{GuardKind::SymbolArg};
  g.arg = arg;
  g.name = std::move(name);
  g.symbol = symbol;
  g.sym_type = type;
  num_symbols_ = std::max(num_symbols_, symbol + 1);
  guards_.push_back(std::move(g));
}

bool grad_enabled() {
  static PyObject* fn = [] {
    PyObject* torch = PyImport_ImportModule("torch");
    PyObject* f = torch ? PyObject_GetAttrString(torch, "is_grad_enabled") : nullptr;  // kept for the process
    Py_XDECREF(torch);
    if (f == nullptr) clear_error();
    return f;
  }();
  if (fn == nullptr) return false;
  PyObject* r = PyObject_CallNoArgs(fn);
  if (r == nullptr) {
    clear_error();
    return false;
  }
  const bool on = r == Py_True;
  Py_DECREF(r);
  return on;
}

void GuardSet::add_no_overlap(std::vector<int> tensors, size_t num_updated, std::vector<std::string> names) {
  Guard g{GuardKind::NoOverlap};
  g.tensors = std::move(tensors);
  g.num_updated = num_updated;
  g.attrs = std::move(names);
  guards_.push_back(std::move(g));
}

PyObject* default_dtype() noexcept {
  static PyObject* fn = [] {
    PyObject* torch = PyImport_ImportModule("torch");
    PyObject* f = torch ? PyObject_GetAttrString(torch, "get_default_dtype") : nullptr;  // kept for the process
    Py_XDECREF(torch);
    if (f == nullptr) clear_error();
    return f;
  }();
  if (fn == nullptr) return nullptr;
  PyObject* r = PyObject_CallNoArgs(fn);
  if (r == nullptr) {
    clear_error();
    return nullptr;
  }
  Py_DECREF(r);  // torch's dtypes live as long as torch
  return r;
}

void GuardSet::add_default_dtype(PyObject* dtype) {
  for (const Guard& g : guards_) {
    if (g.kind == GuardKind::DefaultDTypeIs) return;
  }
  Guard g{GuardKind::DefaultDTypeIs};
  g.object = Py_NewRef(dtype);
  guards_.push_back(std::move(g));
}

void GuardSet::add_grad_mode(bool enabled) {
  for (const Guard& g : guards_) {
    if (g.kind == GuardKind::GradModeIs) return;
  }
  Guard g{GuardKind::GradModeIs};
  g.arg = enabled ? 1 : 0;
  guards_.push_back(std::move(g));
}

void GuardSet::add_expr(jit::SymExpr expr, std::string text) {
  for (const Guard& g : guards_) {
    if (g.kind == GuardKind::ExprTrue && g.expr.same(expr)) return;
  }
  Guard g{GuardKind::ExprTrue};
  g.expr = std::move(expr);
  g.name = std::move(text);
  guards_.push_back(std::move(g));
}

void GuardSet::add_module_attr(std::string module_global, std::vector<std::string> attrs,
                               PyObject* object, PyObject* globals) {
  for (const Guard& g : guards_) {
    if (g.kind == GuardKind::ModuleAttrIs && g.name == module_global && g.attrs == attrs &&
        g.globals == globals) {
      return;
    }
  }
  Guard g{GuardKind::ModuleAttrIs};
  g.globals = Py_XNewRef(globals);
  g.name_obj = interned(module_global.c_str());
  for (const std::string& a : attrs) g.attr_objs.push_back(interned(a.c_str()));
  g.name = std::move(module_global);
  g.attrs = std::move(attrs);
  Py_INCREF(object);
  g.object = object;
  guards_.push_back(std::move(g));
}

bool bind_symbol(const Guard& g, PyObject* v, jit::Bindings& b) noexcept {
  auto& slot = b.values[static_cast<size_t>(g.symbol)];
  switch (g.sym_type) {
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

bool GuardSet::holds(const Guard& g, const CallInputs& in, jit::Bindings& b) const noexcept {
  switch (g.kind) {
    case GuardKind::TensorMatch: {
      const TensorMeta* m = nullptr;
      if (g.path_index < 0) {
        const auto& am = in.metas[static_cast<size_t>(g.arg)];
        if (!am) return false;
        m = &*am;
      } else {  // a tensor attribute: found and read now, kept for the plan
        PyObject* t = walk_path(g, in);
        if (t == nullptr || (Py_TYPE(t) != reinterpret_cast<PyTypeObject*>(torch_refs().tensor_type) &&
                             Py_TYPE(t) != reinterpret_cast<PyTypeObject*>(torch_refs().parameter_type))) {
          return false;
        }
        const auto k = static_cast<size_t>(g.path_index);
        if (!read_tensor_meta(t, &in.path_metas[k], nullptr)) return false;
        in.path_tensors[k] = t;
        m = &in.path_metas[k];
      }
      const TensorMeta& e = g.meta;
      if (m->dtype != e.dtype || m->is_cpu != e.is_cpu || m->requires_grad != e.requires_grad ||
          m->rank != e.rank) {
        return false;
      }
      for (size_t i = 0; i < static_cast<size_t>(e.rank); ++i) {
        const int sym = g.dim_symbols[i];
        if (sym >= 0) {
          if (m->sizes[i] < 2) return false;  // 0 and 1 are specialized
          b.values[static_cast<size_t>(sym)] = m->sizes[i];
        } else if (m->sizes[i] != e.sizes[i]) {
          return false;
        }
        if (g.check_strides && m->strides[i] != e.strides[i]) return false;
      }
      return true;
    }
    case GuardKind::ScalarEquals:
      return scalar_equal(in.args[g.arg], g.object);
    case GuardKind::SymbolArg:
      return bind_symbol(g, in.args[g.arg], b);
    case GuardKind::ExprTrue: {
      const auto v = g.expr.eval(b);
      return v && std::holds_alternative<bool>(*v) && std::get<bool>(*v);
    }
    case GuardKind::GradModeIs:
      return grad_enabled() == (g.arg == 1);
    case GuardKind::NoOverlap:
      return overlap_free(g, in, nullptr);
    case GuardKind::DefaultDTypeIs:
      return default_dtype() == g.object;
    case GuardKind::ClosureIs: {
      if (in.closure == nullptr || g.arg >= PyTuple_GET_SIZE(in.closure)) return false;
      PyObject* v = PyCell_GET(PyTuple_GET_ITEM(in.closure, g.arg));
      return v != nullptr && scalar_equal(v, g.object);
    }
    case GuardKind::TensorAttrIs:
      return current_tensor_attr(g.name_obj) == g.object;
    case GuardKind::PathIs: {
      PyObject* v = walk_path(g, in);
      return v != nullptr && scalar_equal(v, g.object);
    }
    case GuardKind::SequenceIs: {
      PyObject* v = in.args[g.arg];
      return v != nullptr && reinterpret_cast<PyObject*>(Py_TYPE(v)) == g.object && Py_SIZE(v) == g.symbol;
    }
    case GuardKind::DictKeysAre: {
      if (g.object == nullptr || PyDict_GET_SIZE(g.cell) != PyList_GET_SIZE(g.object)) return false;
      Py_ssize_t pos = 0, i = 0;
      PyObject* key;
      while (PyDict_Next(g.cell, &pos, &key, nullptr)) {
        if (key != PyList_GET_ITEM(g.object, i++)) return false;  // keys of _modules are interned names
      }
      return true;
    }
    case GuardKind::DictsEmpty:
      for (PyObject* d : g.attr_objs) {
        if (PyDict_GET_SIZE(d) != 0) return false;
      }
      return true;
    case GuardKind::PathMethodIs: {
      PyObject* v = walk_path(g, in);
      if (v == nullptr || _PyType_Lookup(Py_TYPE(v), g.name_obj) != g.object) return false;
      PyObject** dictptr = _PyObject_GetDictPtr(v);
      if (dictptr == nullptr || *dictptr == nullptr) return true;
      PyObject* shadow = PyDict_GetItemWithError(*dictptr, g.name_obj);
      if (shadow == nullptr) clear_error();
      return shadow == nullptr;
    }
    case GuardKind::FunctionUnchanged: {
      auto* f = reinterpret_cast<PyFunctionObject*>(g.object);
      return f->func_code == g.attr_objs[0] && f->func_defaults == g.attr_objs[1] &&
             f->func_kwdefaults == g.attr_objs[2];
    }
    case GuardKind::CellIs: {
      PyObject* v = PyCell_GET(g.cell);
      return v != nullptr && scalar_equal(v, g.object);
    }
    case GuardKind::GlobalIs: {
      PyObject* v = lookup_global(g, in);
      return v == g.object;
    }
    case GuardKind::ModuleAttrIs: {
      PyObject* v = PyDict_GetItemWithError(g.globals ? g.globals : in.globals, g.name_obj);
      for (PyObject* attr : g.attr_objs) {
        if (v == nullptr || !PyModule_Check(v)) return false;
        // A module's dict, read directly: no __getattr__ runs.
        v = PyDict_GetItemWithError(PyModule_GetDict(v), attr);
      }
      if (v == nullptr) clear_error();
      return v == g.object;
    }
  }
  return false;
}

bool GuardSet::check(const CallInputs& in, jit::Bindings* b) const noexcept {
  if (b->values.size() < static_cast<size_t>(num_symbols_)) {
    b->values.resize(static_cast<size_t>(num_symbols_));  // grows once, kept by the caller
  }
  if (in.path_tensors.size() < static_cast<size_t>(num_path_tensors_)) {
    in.path_tensors.resize(static_cast<size_t>(num_path_tensors_));
    in.path_metas.resize(static_cast<size_t>(num_path_tensors_));
  }
  for (const Guard& g : guards_) {
    if (!holds(g, in, *b)) return false;
  }
  return true;
}

}  // namespace fj::guards
