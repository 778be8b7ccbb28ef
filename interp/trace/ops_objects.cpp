// Objects of plain Python classes made in the frame: `Point(x, y)`, a dataclass, the
// small config or state object a model builds on each call.
//
// Such an object is a value (ValueKind::Object), not a Python object: `cls(...)`
// traces the class's __init__ on it, and its attributes are values of the trace
// (tensors stay graph nodes, ints stay symbolic). Only classes whose instances keep
// every attribute in their __dict__ qualify (plain_instance_class): object's own
// __new__, __getattribute__ and __setattr__, no __slots__, no C base but object, no
// metaclass, no __del__. Whatever is read from the class (its __init__, methods,
// properties, class attributes) is covered by one guard: the class and its bases are
// not modified since (ClassUnchanged, CPython's type version tag).
//
// The copies of one object share its `identity`; an attribute store rewrites every
// copy in the traced state, as for lists the trace built (ops_lists.cpp). The object
// is built for real only where it leaves the trace (returned, or live at a point
// where CPython takes the frame over): object.__new__(cls) and its attributes in the
// order the trace stored them (PlanValue::Kind::Object). An object passed to a call
// the trace cannot follow makes the frame resume in CPython before that call.
#include "interp/trace/tracer.h"

#include <algorithm>
#include <functional>
#include <limits>

namespace fj::interp {
namespace {

PyObject* interned(const char* name) { return PyUnicode_InternFromString(name); }

bool same_as_object(PyTypeObject* type, PyObject* name) {
  return _PyType_Lookup(type, name) == _PyType_Lookup(&PyBaseObject_Type, name);
}

// A class whose instances are plain: see the file comment.
bool plain_instance_class(PyObject* cls) {
  if (!PyType_Check(cls) || Py_TYPE(cls) != &PyType_Type) return false;
  auto* type = reinterpret_cast<PyTypeObject*>(cls);
  if (!(type->tp_flags & Py_TPFLAGS_HEAPTYPE) || type->tp_new != PyBaseObject_Type.tp_new) return false;
  static PyObject* getattribute = interned("__getattribute__");
  static PyObject* setattr = interned("__setattr__");
  static PyObject* delattr = interned("__delattr__");
  static PyObject* del = interned("__del__");
  static PyObject* slots = interned("__slots__");
  if (!same_as_object(type, getattribute) || !same_as_object(type, setattr) || !same_as_object(type, delattr) ||
      _PyType_Lookup(type, del) != nullptr) {
    return false;
  }
  PyObject* mro = type->tp_mro;
  const Py_ssize_t n = mro ? PyTuple_GET_SIZE(mro) : 0;
  if (n < 2 || PyTuple_GET_ITEM(mro, n - 1) != reinterpret_cast<PyObject*>(&PyBaseObject_Type)) return false;
  for (Py_ssize_t i = 0; i + 1 < n; ++i) {
    auto* base = reinterpret_cast<PyTypeObject*>(PyTuple_GET_ITEM(mro, i));
    if (!(base->tp_flags & Py_TPFLAGS_HEAPTYPE) || base->tp_dict == nullptr) return false;
    if (PyDict_GetItemWithError(base->tp_dict, slots) != nullptr) return false;
    if (PyErr_Occurred()) {
      guards::clear_error();
      return false;
    }
  }
  return true;
}

// Where attribute `name` is among the object's (key, value) pairs: the key's index, or -1.
long attr_index(const Value& obj, PyObject* name) {
  for (size_t i = 1; i + 1 < obj.items.size(); i += 2) {
    if (_PyUnicode_EQ(obj.items[i].obj.get(), name)) return static_cast<long>(i);
  }
  return -1;
}

bool holds_object(const Value& v, int identity) {
  if (v.kind == ValueKind::Object && v.identity == identity) return true;
  return std::any_of(v.items.begin(), v.items.end(), [&](const Value& i) { return holds_object(i, identity); });
}

void replace_object(Value& v, const Value& now) {
  if (v.kind == ValueKind::Object && v.identity == now.identity) {
    v = now;
    return;
  }
  for (Value& item : v.items) replace_object(item, now);
}

}  // namespace

std::string Tracer::object_class_name(const Value& obj) {
  return reinterpret_cast<PyTypeObject*>(obj.obj.get())->tp_name;
}

// cls(...) of a plain class: a new object, its __init__ traced on it. nullopt: not such
// a class (or its version tag cannot be guarded).
std::optional<Status> Tracer::construct_object(const CallSite& c) {
  if (c.callable.kind != ValueKind::Const || is_opaque(c.callable) || c.callable.fresh) return std::nullopt;
  PyObject* cls = c.callable.obj.get();
  // torch.no_grad() & co are call_grad_mode's.
  if (!plain_instance_class(cls) || is_grad_mode_class(cls) || !guards().add_class_unchanged(cls)) return std::nullopt;
  auto* type = reinterpret_cast<PyTypeObject*>(cls);
  Value self;
  self.kind = ValueKind::Object;
  self.obj = c.callable.obj;
  self.identity = next_identity_++;
  self.items.push_back(c.callable);
  static PyObject* init_name = interned("__init__");
  PyObject* init = _PyType_Lookup(type, init_name);
  if (same_as_object(type, init_name)) {
    if (!c.args.empty()) return unsupported(std::string(type->tp_name) + "() takes no arguments (CPython raises)");
    push(std::move(self));
    return ok();
  }
  if (init == nullptr || !PyFunction_Check(init)) {
    return unsupported("construction of a " + std::string(type->tp_name) + " whose __init__ is not a Python function");
  }
  // The caller holds the object while __init__ runs: its stores reach this copy.
  push(self);
  std::vector<Value> args = c.args;
  args.insert(args.begin(), self);
  // Stores to the object under construction (or to one it makes) are not writes a
  // caller could see if __init__ fails: the call can still run as it is.
  const int floor = std::exchange(construct_floor_, std::min(construct_floor_, self.identity));
  Status s = inline_call(init, std::move(args), c.kw_names.get());
  construct_floor_ = floor;
  if (s.failed()) {
    pop();
    return s;
  }
  const Value ret = pop();
  if (ret.kind != ValueKind::Const || ret.obj.get() != Py_None) {
    pop();
    return unsupported("__init__() of " + std::string(type->tp_name) + " returns a value (CPython raises TypeError)");
  }
  return ok();
}

// obj.name of an object made in the frame, as object.__getattribute__ finds it: a data
// descriptor of the class (a property, its getter traced), the object's own
// attribute, a function of the class (a bound method; LOAD_METHOD pushes it with
// self), a static or class method, a plain class attribute (found by the class's path),
// else the class's __getattr__ traced. A name found nowhere raises AttributeError.
Status Tracer::object_attr(const Value& obj, const std::string& name, bool method) {
  auto* type = reinterpret_cast<PyTypeObject*>(obj.obj.get());
  PyRef key = PyRef::steal(PyUnicode_InternFromString(name.c_str()));
  PyObject* descr = _PyType_Lookup(type, key.get());
  const auto value = [&](Value v) {
    if (method) push(Value::null());
    push(std::move(v));
    return ok();
  };
  if (descr != nullptr && Py_TYPE(descr)->tp_descr_set != nullptr) {
    if (!Py_IS_TYPE(descr, &PyProperty_Type)) return unsupported("attribute '" + name + "' of a " + object_class_name(obj) + " made in the frame (not supported yet)");
    PyRef fget = PyRef::steal(PyObject_GetAttrString(descr, "fget"));
    if (!fget || !PyFunction_Check(fget.get())) {
      guards::clear_error();
      return unsupported("property '" + name + "' without a Python getter");
    }
    if (method) push(Value::null());
    return inline_call(fget.get(), {obj}, nullptr);
  }
  if (const long at = attr_index(obj, key.get()); at >= 0) return value(obj.items[static_cast<size_t>(at) + 1]);
  if (descr == nullptr) {
    static PyObject* getattr_name = interned("__getattr__");
    if (PyObject* ga = _PyType_Lookup(type, getattr_name); ga != nullptr) {
      if (!PyFunction_Check(ga)) return unsupported("a __getattr__ that is not a Python function");
      if (method) push(Value::null());
      return inline_call(ga, {obj, Value::constant(PyRef::steal(PyUnicode_FromString(name.c_str())))}, nullptr);
    }
    const std::string text = "'" + object_class_name(obj) + "' object has no attribute '" + name + "'";
    PyRef args = PyRef::steal(Py_BuildValue("(s)", text.c_str()));
    std::optional<Value> exc = args ? make_exception(PyExc_AttributeError, args.get()) : std::nullopt;
    if (!exc) return unsupported(text);
    return raise_exception(std::move(*exc), text + " (CPython raises AttributeError)");
  }
  if (PyFunction_Check(descr)) {
    if (method) {
      push(Value::constant(PyRef::borrow(descr)));
      push(obj);
      return ok();
    }
    Value bound = Value::constant(PyRef::borrow(descr));
    bound.fresh = true;  // bound to the object: called in the frame, never kept
    bound.items.push_back(obj);
    push(std::move(bound));
    return ok();
  }
  if (Py_IS_TYPE(descr, &PyStaticMethod_Type) || Py_IS_TYPE(descr, &PyClassMethod_Type)) {
    PyRef got = PyRef::steal(Py_TYPE(descr)->tp_descr_get(descr, nullptr, obj.obj.get()));
    if (!got) {
      guards::clear_error();
      return unsupported("method '" + name + "' of " + object_class_name(obj));
    }
    return value(Value::constant(std::move(got)));
  }
  if (Py_TYPE(descr)->tp_descr_get != nullptr) {
    return unsupported("attribute '" + name + "' of a " + object_class_name(obj) + " made in the frame: a descriptor (not supported yet)");
  }
  // A plain class attribute, fixed by the class's guard: immutable values (and classes
  // and functions) only, as a list or dict there could change without the class.
  if (!is_foldable(descr) && !PyType_Check(descr) && !PyFunction_Check(descr)) {
    return unsupported("class attribute '" + name + "' of " + object_class_name(obj) + ", a " + Py_TYPE(descr)->tp_name +
                       " (not supported yet)");
  }
  return value(Value::constant(PyRef::borrow(descr)));
}

// hasattr(obj, name) / getattr(obj, name[, default]) of an object made in the frame
// with a constant name: a name the object and its class lack, with no __getattr__ to
// make one, gives False or the default; else as LOAD_ATTR.
std::optional<Status> Tracer::object_getattr(const CallSite& c, bool has) {
  const Value& obj = c.args[0];
  const Value& name_v = c.args[1];
  if (name_v.kind != ValueKind::Const || is_opaque(name_v) || !PyUnicode_CheckExact(name_v.obj.get())) return std::nullopt;
  auto* type = reinterpret_cast<PyTypeObject*>(obj.obj.get());
  static PyObject* getattr_name = interned("__getattr__");
  const bool found = attr_index(obj, name_v.obj.get()) >= 0 || _PyType_Lookup(type, name_v.obj.get()) != nullptr;
  if (!found && _PyType_Lookup(type, getattr_name) == nullptr) {
    if (!has && c.args.size() != 3) return std::nullopt;  // AttributeError, raised by LOAD_ATTR's path
    push(has ? Value::constant(PyRef::borrow(Py_False)) : c.args[2]);
    return ok();
  }
  if (has && found && PyUnicode_CheckExact(name_v.obj.get())) {
    PyObject* descr = _PyType_Lookup(type, name_v.obj.get());
    if (descr == nullptr || !Py_IS_TYPE(descr, &PyProperty_Type)) {  // a getter could raise: hasattr says False
      push(Value::constant(PyRef::borrow(Py_True)));
      return ok();
    }
  }
  if (has) return std::nullopt;
  return object_attr(obj, guards::utf8_lossy(name_v.obj.get()), /*method=*/false);
}

// obj.name = value on an object made in the frame: a property's setter traced, else the
// attribute set (in place, keeping its position) on every copy of the object.
Status Tracer::object_store_attr(const Value& obj, const std::string& name, Value value) {
  auto* type = reinterpret_cast<PyTypeObject*>(obj.obj.get());
  PyRef key = PyRef::steal(PyUnicode_InternFromString(name.c_str()));
  PyObject* descr = _PyType_Lookup(type, key.get());
  if (descr != nullptr && Py_TYPE(descr)->tp_descr_set != nullptr) {
    PyRef fset = Py_IS_TYPE(descr, &PyProperty_Type) ? PyRef::steal(PyObject_GetAttrString(descr, "fset")) : PyRef();
    guards::clear_error();
    if (!fset || !PyFunction_Check(fset.get())) {
      return unsupported("assignment to attribute '" + name + "' of a " + object_class_name(obj) + ": a descriptor (not supported yet)");
    }
    FJ_TRY(inline_call(fset.get(), {obj, std::move(value)}, nullptr));
    pop();
    return ok();
  }
  if (holds_object(value, obj.identity)) return unsupported("an object that holds itself (not supported yet)");
  Value now = obj;
  if (const long at = attr_index(obj, key.get()); at >= 0) {
    now.items[static_cast<size_t>(at) + 1] = std::move(value);
  } else {
    now.items.push_back(Value::constant(std::move(key)));
    now.items.push_back(std::move(value));
  }
  if (obj.identity < construct_floor_) ++writes_;
  for (Value* r : list_roots()) replace_object(*r, now);
  return ok();
}

}  // namespace fj::interp
