// IMPORT_NAME and IMPORT_FROM of modules that are already imported: `import torch`
// inside a function. Importing a module that sys.modules already holds runs no code
// and yields sys.modules' entry, so the trace reads that entry (guarded, as a global
// of the dict sys.modules) and goes on with a constant module. A module not yet
// imported (or a replaced __import__, a relative import) ends the trace: the import
// runs in CPython, with whatever code it runs.
#include <cstring>

#include "interp/trace/tracer.h"

namespace fj::interp {
namespace {

// builtins.__import__ itself (CPython's import statement then takes its fast path).
bool is_builtin_import(PyObject* f) {
  if (f == nullptr || !PyCFunction_Check(f)) return false;
  PyObject* self = PyCFunction_GET_SELF(f);
  const PyMethodDef* def = reinterpret_cast<PyCFunctionObject*>(f)->m_ml;
  return self != nullptr && PyModule_Check(self) && std::strcmp(PyModule_GetName(self), "builtins") == 0 &&
         std::strcmp(def->ml_name, "__import__") == 0;
}

// A module of sys.modules being initialized: importing it waits for its import lock.
bool initializing(PyObject* mod) {
  PyObject* spec = PyObject_GetAttrString(mod, "__spec__");
  if (spec == nullptr) {
    PyErr_Clear();
    return false;
  }
  PyObject* flag = PyObject_GetAttrString(spec, "_initializing");
  Py_DECREF(spec);
  if (flag == nullptr) {
    PyErr_Clear();
    return false;
  }
  const int on = PyObject_IsTrue(flag);
  Py_DECREF(flag);
  if (on < 0) PyErr_Clear();
  return on != 0;
}

}  // namespace

// (level, fromlist -- module)
Status Tracer::op_import_name(const Instruction& ins) {
  PyObject* name_obj = PyTuple_GET_ITEM(cur_.co->co_names, ins.arg);
  const std::string name = FJ_TRY(guards::utf8_of(name_obj));
  Value fromlist = pop();
  Value level = pop();
  const std::string what = "import of '" + name + "'";
  if (level.kind != ValueKind::Const || is_opaque(level) || !PyLong_CheckExact(level.obj.get()) ||
      PyLong_AsLong(level.obj.get()) != 0) {
    guards::clear_error();
    return unsupported("relative " + what + " (not supported yet)");
  }
  PyObject* from = fromlist.kind == ValueKind::Const && !is_opaque(fromlist) ? fromlist.obj.get() : nullptr;
  if (from == nullptr || (from != Py_None && !PyTuple_CheckExact(from))) {
    return unsupported(what + " with a computed from-list (not supported yet)");
  }
  // CPython calls the frame's builtins' __import__; only the builtin one is known.
  PyObject* import_fn = PyDict_Check(cur_.builtins) ? PyDict_GetItemString(cur_.builtins, "__import__") : nullptr;
  if (!is_builtin_import(import_fn) || PyDict_GetItemString(cur_.globals, "__import__") != nullptr) {
    return unsupported(what + " with a replaced __import__ (not supported)");
  }
  PyObject* modules = PyImport_GetModuleDict();  // borrowed, lives as long as the interpreter
  PyObject* mod = PyDict_GetItemWithError(modules, name_obj);
  if (mod == nullptr || mod == Py_None || initializing(mod)) {
    guards::clear_error();
    return unsupported(what + ", not imported yet (importing runs its code)");
  }
  const bool has_from = from != Py_None && PyTuple_GET_SIZE(from) > 0;
  // A package's from-list names that are not attributes yet are submodules to import.
  if (has_from && PyObject_HasAttrString(mod, "__path__")) {
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(from); ++i) {
      PyObject* item = PyTuple_GET_ITEM(from, i);
      if (!PyUnicode_Check(item) || PyUnicode_CompareWithASCIIString(item, "*") == 0 ||
          !PyObject_HasAttr(mod, item)) {
        return unsupported(what + " whose from-list imports a submodule (importing runs its code)");
      }
    }
  }
  guards().add_global("__import__", import_fn, /*from_builtins=*/true, cur_.guard_globals, cur_.guard_builtins);
  // `import a.b` without a from-list yields the top package `a` (imported with it).
  std::string key = name;
  if (!has_from && name.find('.') != std::string::npos) {
    guards().add_global(name, mod, false, modules, modules);
    key = name.substr(0, name.find('.'));
    mod = PyDict_GetItemString(modules, key.c_str());
    if (mod == nullptr || mod == Py_None || initializing(mod)) {
      return unsupported(what + ": its top package is not imported yet");
    }
  }
  // The module is found again as sys.modules[key]: attribute reads below it are
  // guarded by that path (module_attr).
  guards().add_global(key, mod, false, modules, modules);
  Source src;
  src.kind = Source::Kind::Global;
  src.name = key;
  src.globals = modules;
  push(Value::constant(PyRef::borrow(mod), src));
  return ok();
}

// (module -- module, attribute)
Status Tracer::op_import_from(const Instruction& ins) {
  const std::string name = FJ_TRY(guards::utf8_of(PyTuple_GET_ITEM(cur_.co->co_names, ins.arg)));
  Value out;
  FJ_TRY(module_attr_of(top(), name, &out));
  push(std::move(out));
  return ok();
}

}  // namespace fj::interp
