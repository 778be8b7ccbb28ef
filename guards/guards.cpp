// GuardSet: building a cache entry's list of guards (add_*, which skip a guard the
// set already has), checking it on every call, and saying what it checks or why it
// missed. What each kind checks is in guards/guard_kinds.h.
#include <algorithm>

#include "guards/guard_kinds.h"

namespace fj::guards {

GuardSet::GuardSet() = default;
GuardSet::GuardSet(GuardSet&&) noexcept = default;
GuardSet::~GuardSet() = default;

size_t GuardSet::size() const { return guards_.size(); }

// ---- checking ------------------------------------------------------------------

void GuardSet::prepare(const CallInputs& in, jit::Bindings* b) const {
  if (b->values.size() < static_cast<size_t>(num_symbols_)) {
    b->values.resize(static_cast<size_t>(num_symbols_));  // grows once, kept by the caller
  }
  if (in.path_tensors.size() < static_cast<size_t>(num_path_tensors_)) {
    in.path_tensors.resize(static_cast<size_t>(num_path_tensors_));
    in.path_metas.resize(static_cast<size_t>(num_path_tensors_));
  }
}

bool GuardSet::check(const CallInputs& in, jit::Bindings* b) const noexcept {
  prepare(in, b);
  for (const Guard& g : guards_) {
    if (!std::visit([&](const auto& kind) { return kind.check(in, *b); }, g.kind)) return false;
  }
  return true;
}

std::optional<std::string> GuardSet::check_verbose(const CallInputs& in) const {
  jit::Bindings b;
  prepare(in, &b);
  for (const Guard& g : guards_) {
    const bool holds = std::visit([&](const auto& kind) { return kind.check(in, b); }, g.kind);
    if (!holds) return std::visit([&](const auto& kind) { return kind.failure(in); }, g.kind);
  }
  return std::nullopt;
}

std::vector<std::string> GuardSet::describe() const {
  std::vector<std::string> out;
  for (const Guard& g : guards_) out.push_back(std::visit([](const auto& kind) { return kind.text(); }, g.kind));
  return out;
}

// ---- building ------------------------------------------------------------------

// True when the set has a guard of this kind for which same(guard) holds.
template <class Kind, class Same>
bool GuardSet::has(Same same) const {
  return std::any_of(guards_.begin(), guards_.end(), [&](const Guard& g) {
    const Kind* k = std::get_if<Kind>(&g.kind);
    return k != nullptr && same(*k);
  });
}

void GuardSet::add_tensor(int arg, std::string name, const TensorMeta& meta,
                          const std::array<int, kMaxRank>& dim_symbols, bool strides) {
  for (int s : dim_symbols) num_symbols_ = std::max(num_symbols_, s + 1);
  guards_.push_back({ArgTensor{arg, std::move(name), TensorSpec{meta, dim_symbols, strides}}});
}

void GuardSet::require_contiguous(int ref) {
  for (Guard& g : guards_) {
    if (auto* a = std::get_if<ArgTensor>(&g.kind); a != nullptr && ref >= 0 && a->arg == ref) a->spec.contiguous = true;
    if (auto* p = std::get_if<PathTensor>(&g.kind); p != nullptr && ref < 0 && p->slot == -ref - 1) p->spec.contiguous = true;
  }
}

int GuardSet::add_path_tensor(std::string name, const PathRoot& root, const std::vector<std::string>& attrs,
                              const TensorMeta& meta, const std::array<int, kMaxRank>& dim_symbols,
                              bool strides) {
  for (int s : dim_symbols) num_symbols_ = std::max(num_symbols_, s + 1);
  const int slot = num_path_tensors_++;
  guards_.push_back({PathTensor{std::move(name), Path(root, attrs), slot, TensorSpec{meta, dim_symbols, strides}}});
  return slot;
}

void GuardSet::add_no_overlap(std::vector<int> tensors, size_t num_updated, std::vector<std::string> names) {
  guards_.push_back({NoOverlap{std::move(tensors), num_updated, std::move(names)}});
}

void GuardSet::add_sequence(int arg, std::string name, PyObject* seq) {
  PyObject* type = reinterpret_cast<PyObject*>(Py_TYPE(seq));
  if (PyDict_CheckExact(seq)) {
    PyObject* keys = PyDict_Keys(seq);
    PyRef tuple = PyRef::steal(keys ? PyList_AsTuple(keys) : nullptr);
    Py_XDECREF(keys);
    clear_error();
    // Without its keys (no memory) the guard never holds.
    guards_.push_back({SequenceIs{arg, std::move(name), PyRef::borrow(type), tuple ? PyDict_GET_SIZE(seq) : -1,
                                  tuple ? std::move(tuple) : PyRef::steal(PyTuple_New(0))}});
    return;
  }
  guards_.push_back({SequenceIs{arg, std::move(name), PyRef::borrow(type), Py_SIZE(seq)}});
}

void GuardSet::add_scalar(int arg, std::string name, PyObject* value, int item) {
  guards_.push_back({ScalarEquals{arg, std::move(name), PyRef::borrow(value), item}});
}

void GuardSet::add_symbol_arg(int arg, std::string name, int symbol, jit::SymType type, int item, PyObject* numpy_type) {
  num_symbols_ = std::max(num_symbols_, symbol + 1);
  guards_.push_back({SymbolArg{arg, std::move(name), symbol, type, item, PyRef::borrow(numpy_type)}});
}

void GuardSet::add_expr(jit::SymExpr expr, std::string text) {
  if (has<ExprTrue>([&](const ExprTrue& g) { return g.expr.same(expr); })) return;
  guards_.push_back({ExprTrue{std::move(expr), std::move(text)}});
}

void GuardSet::add_closure(int cell, std::string name, PyObject* object) {
  guards_.push_back({ClosureIs{cell, std::move(name), PyRef::borrow(object)}});
}

void GuardSet::add_cell(PyObject* cell, std::string name, PyObject* object) {
  if (has<CellIs>([&](const CellIs& g) { return g.cell.get() == cell; })) return;
  guards_.push_back({CellIs{PyRef::borrow(cell), std::move(name), PyRef::borrow(object)}});
}

void GuardSet::add_global(std::string name, PyObject* object, bool from_builtins, PyObject* globals,
                          PyObject* builtins) {
  if (has<GlobalIs>([&](const GlobalIs& g) { return g.name == name && g.globals.get() == globals; })) return;
  PyRef key = interned(name.c_str());
  guards_.push_back({GlobalIs{std::move(name), std::move(key), from_builtins, PyRef::borrow(globals), PyRef::borrow(builtins),
                              PyRef::borrow(object)}});
}

void GuardSet::add_module_attr(std::string module_global, std::vector<std::string> attrs, PyObject* object,
                               PyObject* globals) {
  if (has<ModuleAttrIs>([&](const ModuleAttrIs& g) {
        return g.name == module_global && g.attrs == attrs && g.globals.get() == globals;
      })) {
    return;
  }
  ModuleAttrIs g{std::move(module_global), std::move(attrs)};
  g.key = interned(g.name.c_str());
  for (const std::string& a : g.attrs) g.steps.push_back(interned(a.c_str()));
  g.globals = PyRef::borrow(globals);
  g.object = PyRef::borrow(object);
  guards_.push_back({std::move(g)});
}

void GuardSet::add_path(std::string name, const PathRoot& root, const std::vector<std::string>& attrs,
                        PyObject* object) {
  guards_.push_back({PathIs{std::move(name), Path(root, attrs), PyRef::borrow(object)}});
}

void GuardSet::add_path_dict_has(std::string name, const PathRoot& root, const std::vector<std::string>& attrs,
                                 PyObject* key, bool contains, bool subclass) {
  guards_.push_back({PathDictHas{std::move(name), Path(root, attrs), PyRef::borrow(key), contains, subclass}});
}

void GuardSet::add_path_method(std::string name, const PathRoot& root, const std::vector<std::string>& attrs,
                               const std::string& method, PyObject* fn) {
  guards_.push_back({PathMethodIs{std::move(name), Path(root, attrs), interned(method.c_str()), PyRef::borrow(fn), PyRef()}});
}

void GuardSet::add_path_super_method(std::string name, const PathRoot& root, const std::vector<std::string>& attrs,
                                     PyObject* after, const std::string& method, PyObject* fn) {
  guards_.push_back({PathMethodIs{std::move(name), Path(root, attrs), interned(method.c_str()), PyRef::borrow(fn),
                                  PyRef::borrow(after)}});
}

void GuardSet::add_path_missing(std::string name, const PathRoot& root, const std::vector<std::string>& attrs,
                                const std::string& attr, bool past_getattribute) {
  guards_.push_back({PathMethodIs{std::move(name), Path(root, attrs), interned(attr.c_str()), PyRef(), PyRef(),
                                  past_getattribute}});
}

bool GuardSet::add_class_unchanged(PyObject* cls) {
  if (has<ClassUnchanged>([&](const ClassUnchanged& g) { return g.cls.get() == cls; })) return true;
  auto* type = reinterpret_cast<PyTypeObject*>(cls);
  static PyObject* probe = PyUnicode_InternFromString("__init__");
  (void)_PyType_Lookup(type, probe);  // a lookup gives the class a version tag where it has none
  if (type->tp_version_tag == 0) return false;
  std::string name = (type->tp_flags & Py_TPFLAGS_HEAPTYPE)
                         ? utf8_lossy(reinterpret_cast<PyHeapTypeObject*>(type)->ht_qualname)
                         : std::string(type->tp_name);
  guards_.push_back({ClassUnchanged{std::move(name), PyRef::borrow(cls), type->tp_version_tag}});
  return true;
}

void GuardSet::add_function(PyObject* fn) {
  if (has<FunctionUnchanged>([&](const FunctionUnchanged& g) { return g.fn.get() == fn; })) return;
  auto* f = reinterpret_cast<PyFunctionObject*>(fn);
  guards_.push_back({FunctionUnchanged{utf8_lossy(f->func_qualname), PyRef::borrow(fn), PyRef::borrow(f->func_code),
                                       PyRef::borrow(f->func_defaults), PyRef::borrow(f->func_kwdefaults),
                                       PyRef::borrow(f->func_name), PyRef::borrow(f->func_qualname),
                                       PyRef::borrow(f->func_doc), PyRef::borrow(f->func_module)}});
}

void GuardSet::add_dicts_empty(std::string name, const std::vector<PyObject*>& dicts) {
  if (has<DictsEmpty>([&](const DictsEmpty& g) { return g.name == name; })) return;
  DictsEmpty g{std::move(name)};
  for (PyObject* d : dicts) g.dicts.push_back(PyRef::borrow(d));
  guards_.push_back({std::move(g)});
}

void GuardSet::add_dict_keys(std::string name, const PathRoot& root, const std::vector<std::string>& attrs,
                             PyObject* modules) {
  guards_.push_back({DictKeysAre{std::move(name), Path(root, attrs), PyRef::steal(PyDict_Keys(modules))}});  // a list, in order
}

void GuardSet::add_dict_keys(std::string name, PyObject* dict) {
  DictKeysAre g{std::move(name), Path(PathRoot{}, {}), PyRef::steal(PyDict_Keys(dict)), PyRef::borrow(dict)};  // keys: a list, in order
  guards_.push_back({std::move(g)});
}

void GuardSet::add_path_hooks_empty(std::string name, const PathRoot& root, const std::vector<std::string>& attrs,
                                    const std::vector<std::string>& keys) {
  PathHooksEmpty g{std::move(name), Path(root, attrs)};
  for (const std::string& k : keys) g.keys.push_back(interned(k.c_str()));
  guards_.push_back({std::move(g)});
}

void GuardSet::add_paths_same(std::string name, const PathRoot& root_a, const std::vector<std::string>& attrs_a,
                              const PathRoot& root_b, const std::vector<std::string>& attrs_b, bool same) {
  guards_.push_back({PathsSame{std::move(name), Path(root_a, attrs_a), Path(root_b, attrs_b), same}});
}

void GuardSet::add_path_type(std::string name, const PathRoot& root, const std::vector<std::string>& attrs,
                             PyObject* type) {
  if (has<PathModule>([&](const PathModule& g) { return g.slot < 0 && g.name == name; })) return;
  guards_.push_back({PathModule{std::move(name), Path(root, attrs), -1, PyRef::borrow(type)}});
}

int GuardSet::add_path_sequence(std::string name, const PathRoot& root, const std::vector<std::string>& attrs,
                                PyObject* list) {
  const int slot = num_path_tensors_++;
  guards_.push_back({PathModule{std::move(name), Path(root, attrs), slot,
                                PyRef::borrow(reinterpret_cast<PyObject*>(Py_TYPE(list))), Py_SIZE(list)}});
  return slot;
}

int GuardSet::add_path_module(std::string name, const PathRoot& root, const std::vector<std::string>& attrs,
                              PyObject* module) {
  const int slot = num_path_tensors_++;
  guards_.push_back({PathModule{std::move(name), Path(root, attrs), slot,
                                PyRef::borrow(reinterpret_cast<PyObject*>(Py_TYPE(module)))}});
  return slot;
}

void GuardSet::add_grad_mode(bool enabled) {
  if (has<GradModeIs>([](const GradModeIs&) { return true; })) return;
  guards_.push_back({GradModeIs{enabled}});
}

void GuardSet::add_no_function_mode() {
  if (has<NoFunctionMode>([](const NoFunctionMode&) { return true; })) return;
  guards_.push_back({NoFunctionMode{}});
}

void GuardSet::add_default_dtype(PyObject* dtype) {
  if (has<DefaultDTypeIs>([](const DefaultDTypeIs&) { return true; })) return;
  guards_.push_back({DefaultDTypeIs{PyRef::borrow(dtype)}});
}

void GuardSet::add_torch_flag(const std::string& name, PyObject* fn, bool value) {
  if (has<TorchFlagIs>([&](const TorchFlagIs& g) { return g.fn.get() == fn; })) return;
  guards_.push_back({TorchFlagIs{name, PyRef::borrow(fn), value}});
}

void GuardSet::add_context_var(std::string name, PyObject* var, PyObject* value) {
  if (has<ContextVarIs>([&](const ContextVarIs& g) { return g.var.get() == var; })) return;
  guards_.push_back({ContextVarIs{std::move(name), PyRef::borrow(var), value ? PyRef::borrow(value) : PyRef()}});
}

void GuardSet::add_tensor_attr(const std::string& name, PyObject* object) {
  if (has<TensorAttrIs>([&](const TensorAttrIs& g) { return g.name == name; })) return;
  guards_.push_back({TensorAttrIs{name, interned(name.c_str()), PyRef::borrow(object)}});
}

}  // namespace fj::guards
