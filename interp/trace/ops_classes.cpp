// Class statements in a traced frame (`class Scaler: ...` inside a function).
// LOAD_BUILD_CLASS pushes builtins.__build_class__; its CALL runs the class body now,
// while tracing, when the body only binds names (functions, constants, property /
// staticmethod / classmethod, annotations) and no base runs code when subclassed
// (its metaclass is type, no __init_subclass__). Eager runs the same body at the
// same point on every call, and such a body has no effect but the new class. The
// class is a value made while tracing (fresh): calls and attributes of it are traced
// as of any known class, and it must not escape the frame, since eager makes a new
// one on every call (convert_const refuses it, and so objects of it).
#include <unordered_set>

#include "interp/trace/tracer.h"

namespace fj::interp {
namespace {

PyObject* build_class_builtin() {
  static PyObject* bc = [] {
    PyObject* builtins = PyImport_ImportModule("builtins");
    PyObject* f = builtins ? PyObject_GetAttrString(builtins, "__build_class__") : nullptr;  // kept
    Py_XDECREF(builtins);
    guards::clear_error();
    return f;
  }();
  return bc;
}

// What a value on the class body's stack is, for the calls the body makes.
enum class Slot : uint8_t { Other, Null, Builtin };  // Builtin: a class of the builtins (property...)

}  // namespace

// ( -- __build_class__): read from the frame's builtins (guarded, as a global).
Status Tracer::op_load_build_class(const Instruction&) {
  PyObject* v = PyDict_Check(cur_.builtins) ? PyDict_GetItemString(cur_.builtins, "__build_class__") : nullptr;
  if (v == nullptr || v != build_class_builtin()) return unsupported("a class statement with a replaced __build_class__");
  guards().add_global("__build_class__", v, /*from_builtins=*/true, cur_.guard_globals, cur_.guard_builtins);
  push(Value::constant(PyRef::borrow(v)));
  return ok();
}

// Whether a class body only binds names: each instruction is one of a few, each name
// it reads is the body's own, __name__, or a global or builtin class or module
// (guarded), and each call is of a builtin class (a decorator such as property).
Status Tracer::plain_class_body(PyCodeObject* body) {
  if (body->co_nfreevars != 0) return unsupported("a class body that reads the function's variables");
  const Expected<DecodedCode> decoded = decode(body);
  if (!decoded) return unsupported("a class body that cannot be decoded");
  std::unordered_set<std::string> bound{"__name__", "__annotations__"};
  std::vector<Slot> stack;
  auto pop = [&](size_t n) {
    if (stack.size() < n) return false;
    stack.resize(stack.size() - n);
    return true;
  };
  const std::string not_plain = "a class body that does more than bind names (not supported yet)";
  for (const Instruction& ins : decoded->instructions) {
    switch (static_cast<Opcode>(ins.opcode)) {
      case Opcode::MAKE_CELL: case Opcode::RESUME: case Opcode::NOP: case Opcode::SETUP_ANNOTATIONS:
      case Opcode::PRECALL:
        break;
      case Opcode::LOAD_CONST: case Opcode::LOAD_CLOSURE:
        stack.push_back(Slot::Other);
        break;
      case Opcode::PUSH_NULL:
        stack.push_back(Slot::Null);
        break;
      case Opcode::COPY:
        if (ins.arg != 1 || stack.empty()) return unsupported(not_plain);
        stack.push_back(stack.back());
        break;
      case Opcode::POP_TOP: case Opcode::STORE_NAME: case Opcode::RETURN_VALUE:
        if (!pop(1)) return unsupported(not_plain);
        if (ins.opcode == op(Opcode::STORE_NAME)) {
          bound.insert(FJ_TRY(guards::utf8_of(PyTuple_GET_ITEM(body->co_names, ins.arg))));
        }
        break;
      case Opcode::STORE_SUBSCR:  // __annotations__[name] = type
        if (!pop(3)) return unsupported(not_plain);
        break;
      case Opcode::BUILD_TUPLE:
        if (!pop(static_cast<size_t>(ins.arg))) return unsupported(not_plain);
        stack.push_back(Slot::Other);
        break;
      case Opcode::MAKE_FUNCTION:
        if (!pop(1 + static_cast<size_t>(__builtin_popcount(static_cast<unsigned>(ins.arg) & 0x0f)))) return unsupported(not_plain);
        stack.push_back(Slot::Other);
        break;
      case Opcode::CALL: {  // (NULL or callable, callable or self, args -- result)
        if (!pop(static_cast<size_t>(ins.arg)) || stack.size() < 2) return unsupported(not_plain);
        const Slot fn = stack[stack.size() - 2] == Slot::Null ? stack.back() : stack[stack.size() - 2];
        if (fn != Slot::Builtin) return unsupported("a class body that calls a function (not supported yet)");
        pop(2);
        stack.push_back(Slot::Other);
        break;
      }
      case Opcode::LOAD_NAME: {
        PyObject* name = PyTuple_GET_ITEM(body->co_names, ins.arg);
        const std::string n = FJ_TRY(guards::utf8_of(name));
        if (bound.count(n)) {
          stack.push_back(Slot::Other);
          break;
        }
        bool from_builtins = false;
        PyObject* v = PyDict_GetItemWithError(cur_.globals, name);
        if (v == nullptr && !PyErr_Occurred() && PyDict_Check(cur_.builtins)) {
          v = PyDict_GetItemWithError(cur_.builtins, name);
          from_builtins = true;
        }
        guards::clear_error();
        if (v == nullptr || !(PyType_Check(v) || PyModule_Check(v))) {
          return unsupported("a class body that reads '" + n + "' (not supported yet)");
        }
        guards().add_global(n, v, from_builtins, cur_.guard_globals, cur_.guard_builtins);
        stack.push_back(from_builtins && PyType_Check(v) ? Slot::Builtin : Slot::Other);
        break;
      }
      default:
        return unsupported("a class body with " + std::string(opcode_name(ins.opcode)) + " (not supported yet)");
    }
  }
  return ok();
}

// __build_class__(body, name, *bases) of a plain body and plain bases: the class, made now.
std::optional<Status> Tracer::call_build_class(const CallSite& c) {
  if (c.kw_names || c.args.size() < 2) return unsupported("a class statement with keywords (a metaclass; not supported yet)");
  const Value& body = c.args[0];
  const Value& name = c.args[1];
  if (body.kind != ValueKind::Const || !body.fresh || !PyFunction_Check(body.obj.get()) ||
      name.kind != ValueKind::Const || !PyUnicode_Check(name.obj.get())) {
    return unsupported("a call of __build_class__ that is not a class statement");
  }
  PyRef args = PyRef::steal(PyTuple_New(static_cast<Py_ssize_t>(c.args.size())));
  if (!args) {
    guards::clear_error();
    return unsupported("cannot build the class");
  }
  for (size_t i = 0; i < c.args.size(); ++i) {
    const Value& a = c.args[i];
    if (i >= 2) {
      auto* base = reinterpret_cast<PyTypeObject*>(a.obj.get());
      if (a.kind != ValueKind::Const || is_opaque(a) || a.fresh || a.reg >= 0 || !PyType_Check(a.obj.get()) ||
          Py_TYPE(a.obj.get()) != &PyType_Type) {
        return unsupported("a class statement with base " + describe(a) + " (not supported yet)");
      }
      PyObject* mro = base->tp_mro;
      for (Py_ssize_t k = 0; mro != nullptr && k < PyTuple_GET_SIZE(mro); ++k) {
        auto* t = reinterpret_cast<PyTypeObject*>(PyTuple_GET_ITEM(mro, k));
        if (t != &PyBaseObject_Type && PyDict_GetItemString(t->tp_dict, "__init_subclass__") != nullptr) {
          return unsupported("a class statement whose base runs __init_subclass__ (not supported yet)");
        }
      }
    }
    PyTuple_SET_ITEM(args.get(), static_cast<Py_ssize_t>(i), Py_NewRef(a.obj.get()));
  }
  const PyObject* fn = body.obj.get();
  FJ_TRY(plain_class_body(reinterpret_cast<PyCodeObject*>(PyFunction_GET_CODE(fn))));
  PyRef cls = PyRef::steal(PyObject_Call(build_class_builtin(), args.get(), nullptr));
  if (!cls) {
    guards::clear_error();
    return unsupported("the class statement raised (CPython raises)");
  }
  Value v = Value::constant(std::move(cls));
  v.fresh = true;  // made while tracing: it must not escape the frame
  push(std::move(v));
  return ok();
}

}  // namespace fj::interp
