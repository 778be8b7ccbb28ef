// nn.Module's structure generators (parameters(), named_parameters(), buffers(),
// named_buffers(), children(), named_children(), modules(), named_modules()) called in
// a traced frame: they depend only on the module tree, so each is run now (torch's
// own code, on the real module) and becomes an iterator over its items, each found
// again by its attribute path from the module (guarded as any attribute read is),
// with the keys of every visited module's parameter, buffer and submodule dicts
// guarded so that a changed structure retraces.
#include "interp/trace/tracer.h"

#include <cstring>

namespace fj::interp {
namespace {

struct GeneratorKind {
  const char* name;
  const char* named;  // the named_ variant that yields (name, item); itself when named
  bool named_items;   // the caller sees (name, item) pairs
};

constexpr GeneratorKind kGenerators[] = {
    {"parameters", "named_parameters", false}, {"named_parameters", "named_parameters", true},
    {"buffers", "named_buffers", false},       {"named_buffers", "named_buffers", true},
    {"children", "named_children", false},     {"named_children", "named_children", true},
    {"modules", "named_modules", false},       {"named_modules", "named_modules", true},
};

// nn.Module (borrowed, kept for the process), or nullptr.
PyObject* module_class() {
  static PyObject* cls = [] {
    PyObject* mod = PyImport_ImportModule("torch.nn.modules.module");
    PyObject* c = mod ? PyObject_GetAttrString(mod, "Module") : nullptr;
    Py_XDECREF(mod);
    guards::clear_error();
    return c;
  }();
  return cls;
}

// Which generator `fn` is: nn.Module's own function of that name; nullptr otherwise.
const GeneratorKind* generator_kind(PyObject* fn) {
  PyObject* module = module_class();
  if (module == nullptr || !PyFunction_Check(fn)) return nullptr;
  for (const GeneratorKind& k : kGenerators) {
    PyRef key = PyRef::steal(PyUnicode_InternFromString(k.name));
    if (_PyType_Lookup(reinterpret_cast<PyTypeObject*>(module), key.get()) == fn) return &k;
  }
  return nullptr;
}

}  // namespace

// Guards the keys of the parameter, buffer and submodule dicts of `m` and of every
// module below it, each read as `text` + its path.
Status Tracer::guard_module_tree(PyObject* m, const std::string& text, int depth) {
  if (depth > kMaxInlineDepth * 4) return unsupported("a module tree too deep to guard");
  PyObject** dictptr = _PyObject_GetDictPtr(m);
  if (dictptr == nullptr || *dictptr == nullptr) return unsupported("a module without an instance dict");
  for (const char* field : {"_parameters", "_buffers", "_modules"}) {
    PyObject* d = PyDict_GetItemString(*dictptr, field);
    if (d == nullptr || !PyDict_CheckExact(d)) return unsupported(text + " has no plain " + field);
    guards().add_dict_keys(text + "." + field, d);
  }
  PyObject* modules = PyDict_GetItemString(*dictptr, "_modules");
  Py_ssize_t pos = 0;
  PyObject *key, *sub;
  while (PyDict_Next(modules, &pos, &key, &sub)) {
    if (sub == Py_None) continue;
    if (!PyUnicode_Check(key)) return unsupported("a submodule name that is not a str");
    FJ_TRY(guard_module_tree(sub, text + "." + guards::utf8_lossy(key), depth + 1));
  }
  return ok();
}

// m.parameters() & co of a module the frame can find again: an iterator over the
// items the generator yields now. nullopt: `fn` is not one of these generators.
std::optional<Status> Tracer::module_generator(PyObject* fn, const std::vector<Value>& args, PyObject* kw_names) {
  const GeneratorKind* kind = generator_kind(fn);
  if (kind == nullptr || args.empty()) return std::nullopt;
  const Value& self = args[0];
  guards::PathRoot root;
  PyRef holder;
  if (self.kind != ValueKind::Const || !path_root(self, &root, &holder) ||
      PyObject_IsInstance(self.obj.get(), module_class()) != 1) {
    guards::clear_error();
    return std::nullopt;
  }
  // The arguments (recurse=, prefix=, remove_duplicate=) are constants.
  const size_t nkw = kw_names ? static_cast<size_t>(PyTuple_GET_SIZE(kw_names)) : 0;
  const size_t npos = args.size() - nkw;
  PyRef pos_args = PyRef::steal(PyTuple_New(static_cast<Py_ssize_t>(npos - 1)));
  PyRef kwargs = PyRef::steal(PyDict_New());
  std::string prefix;
  for (size_t i = 1; i < args.size(); ++i) {
    const Value& a = args[i];
    if (a.kind != ValueKind::Const || is_opaque(a) || !is_foldable(a.obj.get())) {
      return unsupported(std::string(kind->name) + "() with " + describe(a) + " (not supported yet)");
    }
    if (i < npos) {
      PyTuple_SET_ITEM(pos_args.get(), static_cast<Py_ssize_t>(i - 1), Py_NewRef(a.obj.get()));
    } else {
      PyDict_SetItem(kwargs.get(), PyTuple_GET_ITEM(kw_names, static_cast<Py_ssize_t>(i - npos)), a.obj.get());
    }
    if (PyUnicode_CheckExact(a.obj.get())) prefix = guards::utf8_lossy(a.obj.get());  // named_*'s prefix
  }
  // The unnamed generator's items, and the named one's names for their paths.
  PyRef method = PyRef::steal(PyObject_GetAttrString(self.obj.get(), kind->name));
  PyRef gen = method ? PyRef::steal(PyObject_Call(method.get(), pos_args.get(), kwargs.get())) : PyRef();
  PyRef items = gen ? PyRef::steal(PySequence_List(gen.get())) : PyRef();
  PyRef named_method = PyRef::steal(PyObject_GetAttrString(self.obj.get(), kind->named));
  PyRef named_gen;
  if (named_method && kind->named_items) {
    named_gen = PyRef::steal(PyObject_Call(named_method.get(), pos_args.get(), kwargs.get()));
  } else if (named_method) {  // parameters(recurse) -> named_parameters(recurse=recurse)
    PyRef named_kwargs = PyRef::steal(PyDict_Copy(kwargs.get()));
    if (npos > 1 && named_kwargs) PyDict_SetItemString(named_kwargs.get(), "recurse", PyTuple_GET_ITEM(pos_args.get(), 0));
    PyRef empty = PyRef::steal(PyTuple_New(0));
    named_gen = PyRef::steal(named_kwargs ? PyObject_Call(named_method.get(), empty.get(), named_kwargs.get()) : nullptr);
  }
  PyRef named = named_gen ? PyRef::steal(PySequence_List(named_gen.get())) : PyRef();
  if (!items || !named || PyList_GET_SIZE(items.get()) != PyList_GET_SIZE(named.get())) {
    guards::clear_error();
    return unsupported(std::string(kind->name) + "() raised or has arguments it does not take (CPython raises)");
  }
  FJ_TRY(guard_module_tree(self.obj.get(), source_text(self.source), 0));
  Value it;
  it.kind = ValueKind::Iterator;
  it.identity = own_iterator_id();
  for (Py_ssize_t k = 0; k < PyList_GET_SIZE(named.get()); ++k) {
    PyObject* pair = PyList_GET_ITEM(named.get(), k);
    if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2 || !PyUnicode_Check(PyTuple_GET_ITEM(pair, 0))) {
      return unsupported(std::string(kind->named) + "() yielded something other than (name, item)");
    }
    std::string path = guards::utf8_lossy(PyTuple_GET_ITEM(pair, 0));
    if (!prefix.empty()) {  // the names start with the prefix: the path is below it
      if (path.compare(0, prefix.size(), prefix) != 0) return unsupported("a name outside the prefix");
      path = path.size() == prefix.size() ? "" : path.substr(prefix.size() + 1);
    }
    Value item = self;
    size_t start = 0;
    while (!path.empty() && start <= path.size()) {
      const size_t dot = path.find('.', start);
      const std::string step = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
      Value next;
      FJ_TRY(attr_of(item, step, &next));
      item = std::move(next);
      if (dot == std::string::npos) break;
      start = dot + 1;
    }
    if (item.kind == ValueKind::Const && item.obj.get() != PyTuple_GET_ITEM(pair, 1)) {
      return unsupported(std::string(kind->name) + "() yielded an object its path does not reach");
    }
    if (kind->named_items) {
      Value tuple = Value::sequence(ValueKind::Tuple, {Value::constant(PyRef::borrow(PyTuple_GET_ITEM(pair, 0))), std::move(item)});
      tuple.identity = next_identity_++;
      it.items.push_back(std::move(tuple));
    } else {
      it.items.push_back(std::move(item));
    }
  }
  push(std::move(it));
  return ok();
}

}  // namespace fj::interp
