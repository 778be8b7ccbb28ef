// Handlers that make constants from constants: f-strings (FORMAT_VALUE, BUILD_STRING)
// of constant pieces, and `import name` of a module already imported (IMPORT_NAME).
#include "interp/trace/tracer.h"

namespace fj::interp {
namespace {

// An exact int, float, bool, str or None: formatting it runs no user code.
bool formats_in_c(PyObject* o) { return is_plain_scalar(o) || o == Py_None || PyUnicode_CheckExact(o); }

// The builtin __import__ of the builtins module (not a replacement of it).
bool is_builtin_import(PyObject* fn) {
  if (fn == nullptr || !PyCFunction_Check(fn)) return false;
  PyObject* self = PyCFunction_GET_SELF(fn);
  const char* name = reinterpret_cast<PyCFunctionObject*>(fn)->m_ml->ml_name;
  return self != nullptr && PyModule_Check(self) && name != nullptr && std::string_view(name) == "__import__" &&
         std::string_view(PyModule_GetName(self) ? PyModule_GetName(self) : "") == "builtins";
}

}  // namespace

// (value[, spec] -- str): f"{value}" or f"{value!r:spec}" of a constant.
Status Tracer::op_format_value(const Instruction& ins) {
  Value spec;
  if (ins.arg & 0x04) spec = pop();
  Value v = pop();
  if (v.kind != ValueKind::Const || is_opaque(v) || !formats_in_c(v.obj.get())) {
    return unsupported("an f-string of " + describe(v) + " (not supported yet)");
  }
  if ((ins.arg & 0x04) && (spec.kind != ValueKind::Const || is_opaque(spec) || !PyUnicode_CheckExact(spec.obj.get()))) {
    return unsupported("an f-string format spec that is not a constant str");
  }
  PyRef value = v.obj;
  switch (ins.arg & 0x03) {
    case 0: break;
    case 1: value = PyRef::steal(PyObject_Str(value.get())); break;
    case 2: value = PyRef::steal(PyObject_Repr(value.get())); break;
    case 3: value = PyRef::steal(PyObject_ASCII(value.get())); break;
  }
  PyRef out = value ? PyRef::steal(PyObject_Format(value.get(), spec.obj.get())) : PyRef();
  if (!out) {
    guards::clear_error();
    return unsupported("an f-string whose formatting raises (CPython raises)");
  }
  push(Value::constant(std::move(out)));
  return ok();
}

// (pieces[arg] -- str): the f-string's constant pieces joined.
Status Tracer::op_build_string(const Instruction& ins) {
  const auto n = static_cast<size_t>(ins.arg);
  auto& stack = cur_.fs->stack;
  if (n > stack.size()) return unsupported("BUILD_STRING below the value stack");
  PyRef pieces = PyRef::steal(PyTuple_New(static_cast<Py_ssize_t>(n)));
  for (size_t k = 0; k < n; ++k) {
    const Value& p = stack[stack.size() - n + k];
    if (p.kind != ValueKind::Const || is_opaque(p) || !PyUnicode_CheckExact(p.obj.get())) {
      return unsupported("an f-string piece that is " + describe(p));
    }
    PyTuple_SET_ITEM(pieces.get(), static_cast<Py_ssize_t>(k), Py_NewRef(p.obj.get()));
  }
  PyRef empty = PyRef::steal(PyUnicode_FromString(""));
  PyRef joined = PyRef::steal(empty ? PyUnicode_Join(empty.get(), pieces.get()) : nullptr);
  if (!joined) {
    guards::clear_error();
    return unsupported("cannot join an f-string");
  }
  stack.resize(stack.size() - n);
  push(Value::constant(std::move(joined)));
  return ok();
}

// (level, fromlist -- module): `import name` (no dots, absolute) of a module that
// sys.modules holds, with the builtins' own __import__: CPython then only binds that
// module. It is read as a global of sys.modules, so its attributes are guarded as a
// global module's are, and it is guarded to stay sys.modules[name].
Status Tracer::op_import_name(const Instruction& ins) {
  Value fromlist = pop();
  Value level = pop();
  PyObject* name = PyTuple_GET_ITEM(cur_.co->co_names, ins.arg);
  const std::string n = guards::utf8_lossy(name);
  if (level.kind != ValueKind::Const || level.obj.get() == nullptr || !PyLong_CheckExact(level.obj.get()) ||
      PyLong_AsLong(level.obj.get()) != 0 || fromlist.kind != ValueKind::Const || fromlist.obj.get() != Py_None ||
      n.find('.') != std::string::npos) {
    guards::clear_error();
    return unsupported("an import other than `import module` (not supported yet)");
  }
  PyObject* import_fn = PyDict_Check(cur_.builtins) ? PyDict_GetItemString(cur_.builtins, "__import__") : nullptr;
  if (!is_builtin_import(import_fn)) return unsupported("an import with a replaced __import__ (not supported yet)");
  PyObject* modules = PyImport_GetModuleDict();
  PyObject* m = modules != nullptr ? PyDict_GetItemWithError(modules, name) : nullptr;
  if (m == nullptr || !PyModule_Check(m)) {
    guards::clear_error();
    return unsupported("import of '" + n + "', not imported yet (not supported yet)");
  }
  // __import__ is looked up in the frame's builtins only; a global of that name makes
  // the guard fail (a retrace), never a wrong answer.
  guards().add_global("__import__", import_fn, /*from_builtins=*/true, cur_.guard_globals, cur_.guard_builtins);
  guards().add_global(n, m, /*from_builtins=*/false, modules);
  Source src;
  src.kind = Source::Kind::Global;
  src.name = n;
  src.globals = modules;  // sys.modules lives as long as the interpreter
  push(Value::constant(PyRef::borrow(m), src));
  return ok();
}

}  // namespace fj::interp
