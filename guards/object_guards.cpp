// Guards on objects the trace read by identity: globals and builtins, attributes of
// modules, attribute paths below arguments and globals, the methods those reach,
// inlined functions, and the dicts an nn.Module call depends on. An nn.Module below an
// argument or a global is guarded by its class (PathModule), not its identity.
#include "guards/guard_kinds.h"

namespace fj::guards {

// ---- Path ----------------------------------------------------------------------

Path::Path(const PathRoot& root, const std::vector<std::string>& attrs)
    : arg(root.arg), global_name(PyRef::borrow(root.global_name)), globals(PyRef::borrow(root.globals)),
      object(PyRef::borrow(root.object)) {
  for (const std::string& a : attrs) {
    if (!a.empty() && a[0] == '#') steps.push_back({PyRef(), std::stol(a.substr(1))});
    else if (!a.empty() && (a[0] == '[' || a[0] == '{')) {
      steps.push_back({PyRef(), -1, PyRef::steal(PyUnicode_FromString(a.c_str() + 1)), a[0] == '{'});
    }
    else if (!a.empty() && a[0] == '!') steps.push_back({interned(a.c_str() + 1), -1, PyRef(), true});
    else steps.push_back({interned(a.c_str())});
  }
}

PyObject* Path::walk(const CallInputs& in) const noexcept {
  PyObject* v = nullptr;
  if (arg >= 0) {
    v = in.args[arg];
  } else if (object) {
    v = object.get();
  } else {
    v = PyDict_GetItemWithError(globals ? globals.get() : in.globals, global_name.get());
    if (v == nullptr) clear_error();
  }
  for (const Step& s : steps) {
    if (v == nullptr) return nullptr;
    if (s.name) {
      v = s.generic ? object_attr(v, s.name.get()) : plain_attr(v, s.name.get());
    } else if (s.key) {
      if (s.generic ? !PyDict_Check(v) : !PyDict_CheckExact(v)) return nullptr;
      v = PyDict_GetItemWithError(v, s.key.get());  // the dict's own storage: no __getitem__ runs
      if (v == nullptr) clear_error();
    } else if (PyList_CheckExact(v) && s.index < PyList_GET_SIZE(v)) {
      v = PyList_GET_ITEM(v, s.index);
    } else if (PyTuple_CheckExact(v) && s.index < PyTuple_GET_SIZE(v)) {
      v = PyTuple_GET_ITEM(v, s.index);
    } else {
      return nullptr;
    }
  }
  return v;
}

// ---- GlobalIs ------------------------------------------------------------------

bool GlobalIs::check(const CallInputs& in, jit::Bindings&) const noexcept {
  PyObject* dict = globals ? globals.get() : in.globals;
  PyObject* fallback = builtins ? builtins.get() : in.builtins;
  PyObject* v = PyDict_GetItemWithError(dict, key.get());
  if (v == nullptr && !PyErr_Occurred() && PyDict_Check(fallback)) v = PyDict_GetItemWithError(fallback, key.get());
  clear_error();
  return v == object.get();
}

std::string GlobalIs::failure(const CallInputs&) const {
  return std::string(from_builtins ? "builtin '" : "global '") + name + "' is no longer the object the trace read";
}

std::string GlobalIs::text() const {
  return std::string(from_builtins ? "builtin '" : "global '") + name + "' is " + describe_object(object.get());
}

// ---- ModuleAttrIs --------------------------------------------------------------

bool ModuleAttrIs::check(const CallInputs& in, jit::Bindings&) const noexcept {
  PyObject* v = PyDict_GetItemWithError(globals ? globals.get() : in.globals, key.get());
  for (const PyRef& step : steps) {
    if (v == nullptr || !PyModule_Check(v)) {
      clear_error();
      return false;
    }
    v = PyDict_GetItemWithError(PyModule_GetDict(v), step.get());  // the dict itself: no __getattr__ runs
  }
  clear_error();
  return v == object.get();
}

namespace {
std::string dotted(const std::string& name, const std::vector<std::string>& attrs) {
  std::string s = name;
  for (const std::string& a : attrs) s += "." + a;
  return s;
}
}  // namespace

std::string ModuleAttrIs::failure(const CallInputs&) const {
  return "'" + dotted(name, attrs) + "' is no longer the object the trace read";
}

std::string ModuleAttrIs::text() const { return "'" + dotted(name, attrs) + "' is " + describe_object(object.get()); }

// ---- PathIs --------------------------------------------------------------------

bool PathIs::check(const CallInputs& in, jit::Bindings&) const noexcept {
  PyObject* v = path.walk(in);
  return v != nullptr && path_value_equal(v, object.get());
}

std::string PathIs::failure(const CallInputs&) const { return name + " is no longer " + describe_object(object.get()); }

std::string PathIs::text() const { return name + " is " + describe_object(object.get()); }

// ---- PathsSame -----------------------------------------------------------------

bool PathsSame::check(const CallInputs& in, jit::Bindings&) const noexcept {
  PyObject* x = a.walk(in);
  PyObject* y = b.walk(in);
  return x != nullptr && y != nullptr && (x == y) == same;
}

std::string PathsSame::failure(const CallInputs&) const { return name + " is " + (same ? "no longer" : "now") + " true"; }

std::string PathsSame::text() const { return name + (same ? "" : " is false"); }

// ---- PathDictHas ---------------------------------------------------------------

bool PathDictHas::check(const CallInputs& in, jit::Bindings&) const noexcept {
  PyObject* v = path.walk(in);
  if (v == nullptr || (subclass ? !PyDict_Check(v) : !PyDict_CheckExact(v))) return false;
  const int r = PyDict_Contains(v, key.get());
  if (r < 0) clear_error();
  return r == (contains ? 1 : 0);
}

std::string PathDictHas::failure(const CallInputs& in) const {
  PyObject* v = path.walk(in);
  if (v == nullptr || (subclass ? !PyDict_Check(v) : !PyDict_CheckExact(v))) return name + " is gone or no longer a dict";
  return name + (contains ? " no longer has the key " : " has the key ") + describe_object(key.get()) + " now";
}

std::string PathDictHas::text() const {
  return name + (contains ? " has the key " : " has no key ") + describe_object(key.get());
}

// ---- PathMethodIs --------------------------------------------------------------

bool PathMethodIs::check(const CallInputs& in, jit::Bindings&) const noexcept {
  PyObject* v = path.walk(in);
  if (v == nullptr) return false;
  if (!fn && past_getattribute) {
    return !PyType_Check(v) && !PyModule_Check(v) && _PyType_Lookup(Py_TYPE(v), method.get()) == nullptr && object_attr(v, method.get()) == nullptr;
  }
  if (!fn) return attr_missing(v, method.get());
  if (after) return super_lookup(Py_TYPE(v), after.get(), method.get()) == fn.get();
  if (_PyType_Lookup(Py_TYPE(v), method.get()) != fn.get()) return false;
  PyObject** dictptr = _PyObject_GetDictPtr(v);
  if (dictptr == nullptr || *dictptr == nullptr) return true;
  PyObject* shadow = PyDict_GetItemWithError(*dictptr, method.get());
  if (shadow == nullptr) clear_error();
  return shadow == nullptr;
}

std::string PathMethodIs::failure(const CallInputs&) const {
  if (!fn) return name + " has an attribute '" + utf8_lossy(method.get()) + "' now";
  return name + (after ? " (through super())" : "") + " no longer calls " + describe_object(fn.get());
}

std::string PathMethodIs::text() const {
  if (!fn) return name + " has no attribute '" + utf8_lossy(method.get()) + "'";
  return name + (after ? " (through super())" : "") + " calls " + describe_object(fn.get());
}

// ---- FunctionUnchanged ---------------------------------------------------------

bool FunctionUnchanged::check(const CallInputs&, jit::Bindings&) const noexcept {
  auto* f = reinterpret_cast<PyFunctionObject*>(fn.get());
  return f->func_code == code.get() && f->func_defaults == defaults.get() && f->func_kwdefaults == kwdefaults.get() &&
         f->func_name == fname.get() && f->func_qualname == qualname.get() && f->func_doc == doc.get() &&
         f->func_module == module.get();
}

std::string FunctionUnchanged::failure(const CallInputs&) const {
  return "the __code__, __defaults__, __kwdefaults__, __name__, __qualname__, __doc__ or __module__ of function " + name + " changed";
}

std::string FunctionUnchanged::text() const {
  return "function " + name + " keeps its __code__, __defaults__, __kwdefaults__, names, __doc__ and __module__";
}

// ---- ClassUnchanged ------------------------------------------------------------

bool ClassUnchanged::check(const CallInputs&, jit::Bindings&) const noexcept {
  return reinterpret_cast<PyTypeObject*>(cls.get())->tp_version_tag == tag;
}

std::string ClassUnchanged::failure(const CallInputs&) const { return "class " + name + " (or a base) was modified"; }

std::string ClassUnchanged::text() const { return "class " + name + " and its bases are unchanged"; }

// ---- DictsEmpty ----------------------------------------------------------------

bool DictsEmpty::check(const CallInputs&, jit::Bindings&) const noexcept {
  for (const PyRef& d : dicts) {
    if (PyDict_GET_SIZE(d.get()) != 0) return false;
  }
  return true;
}

std::string DictsEmpty::failure(const CallInputs&) const { return name + " now has hooks"; }

std::string DictsEmpty::text() const { return name + " has no hooks"; }

// ---- PathModule ----------------------------------------------------------------

bool PathModule::check(const CallInputs& in, jit::Bindings&) const noexcept {
  PyObject* v = path.walk(in);
  if (v == nullptr || reinterpret_cast<PyObject*>(Py_TYPE(v)) != type.get()) return false;
  if (length >= 0 && Py_SIZE(v) != length) return false;
  if (slot >= 0) in.path_tensors[static_cast<size_t>(slot)] = PyRef::borrow(v);  // this call's instance, for the plan
  return true;
}

std::string PathModule::failure(const CallInputs& in) const {
  PyObject* v = path.walk(in);
  if (v == nullptr) return name + " is gone (or no longer a plain attribute)";
  if (reinterpret_cast<PyObject*>(Py_TYPE(v)) == type.get() && length >= 0) {
    return name + " no longer has " + std::to_string(length) + " items (it has " + std::to_string(Py_SIZE(v)) + ")";
  }
  return name + " is no longer a " + describe_object(type.get()) + " (a " + Py_TYPE(v)->tp_name + ")";
}

std::string PathModule::text() const {
  if (length >= 0) return name + " is a list of " + std::to_string(length) + " items";
  return name + " is an instance of " + describe_object(type.get());
}

// ---- PathHooksEmpty ------------------------------------------------------------

namespace {
// The instance dict's entry `key` of `obj` (borrowed), or nullptr.
PyObject* instance_entry(PyObject* obj, PyObject* key) noexcept {
  PyObject** dictptr = obj != nullptr ? _PyObject_GetDictPtr(obj) : nullptr;
  if (dictptr == nullptr || *dictptr == nullptr) return nullptr;
  PyObject* v = PyDict_GetItemWithError(*dictptr, key);
  if (v == nullptr) clear_error();
  return v;
}
}  // namespace

bool PathHooksEmpty::check(const CallInputs& in, jit::Bindings&) const noexcept {
  PyObject* m = path.walk(in);
  for (const PyRef& k : keys) {
    PyObject* d = instance_entry(m, k.get());
    if (d == nullptr || !PyDict_Check(d) || PyDict_GET_SIZE(d) != 0) return false;
  }
  return true;
}

std::string PathHooksEmpty::failure(const CallInputs&) const { return name + " now has hooks"; }

std::string PathHooksEmpty::text() const { return name + " has no hooks"; }

// ---- DictKeysAre ---------------------------------------------------------------

bool DictKeysAre::check(const CallInputs& in, jit::Bindings&) const noexcept {
  static PyObject* s_modules = interned("_modules").release();
  PyObject* dict = this->dict ? this->dict.get() : instance_entry(path.walk(in), s_modules);
  if (!keys || dict == nullptr || !PyDict_CheckExact(dict) || PyDict_GET_SIZE(dict) != PyList_GET_SIZE(keys.get())) {
    return false;
  }
  Py_ssize_t pos = 0, i = 0;
  PyObject* key;
  while (PyDict_Next(dict, &pos, &key, nullptr)) {
    if (!scalar_equal(key, PyList_GET_ITEM(keys.get(), i++))) return false;  // an exact str: by value
  }
  return true;
}

std::string DictKeysAre::failure(const CallInputs&) const { return name + " has other submodules now"; }

std::string DictKeysAre::text() const { return name + " keeps its submodules " + describe_object(keys.get()); }

}  // namespace fj::guards
