// Objects of plain Python classes made in the frame: `Point(x, y)`, a dataclass, the
// small config or state object a model builds on each call.
//
// Such an object is a value (ValueKind::Object), not a Python object: `cls(...)`
// traces the class's __init__ on it, and its attributes are values of the trace
// (tensors stay graph nodes, ints stay symbolic). Only classes whose instances keep
// every attribute in their __dict__ qualify (plain_instance_class): object's own
// __new__ and __getattribute__, object's or a Python __setattr__ (traced at each store),
// no __slots__, no C base but object, no metaclass, no __del__. Whatever is read from the class (its __init__, methods,
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

#include <structmember.h>  // T_OBJECT_EX: __slots__ members (after Python.h)

#include <algorithm>
#include <functional>
#include <limits>

namespace fj::interp {
namespace {

PyObject* interned(const char* name) { return PyUnicode_InternFromString(name); }

bool same_as_object(PyTypeObject* type, PyObject* name) {
  return _PyType_Lookup(type, name) == _PyType_Lookup(&PyBaseObject_Type, name);
}

PyObject* abc_meta() {
  static PyObject* meta = [] {
    PyObject* abc = PyImport_ImportModule("abc");
    PyObject* m = abc ? PyObject_GetAttrString(abc, "ABCMeta") : nullptr;  // kept for the process
    Py_XDECREF(abc);
    guards::clear_error();
    return m;
  }();
  return meta;
}

// A class whose instances are plain: see the file comment. An abstract base class
// (abc.ABCMeta, which only adds isinstance hooks) qualifies once nothing is abstract.
bool plain_instance_class(PyObject* cls) {
  if (!PyType_Check(cls)) return false;
  PyObject* meta = reinterpret_cast<PyObject*>(Py_TYPE(cls));
  if (meta != reinterpret_cast<PyObject*>(&PyType_Type) && (meta != abc_meta() || meta == nullptr)) return false;
  auto* type = reinterpret_cast<PyTypeObject*>(cls);
  if (!(type->tp_flags & Py_TPFLAGS_HEAPTYPE) || (type->tp_flags & Py_TPFLAGS_IS_ABSTRACT) ||
      type->tp_new != PyBaseObject_Type.tp_new) {
    return false;
  }
  static PyObject* getattribute = interned("__getattribute__");
  static PyObject* setattr = interned("__setattr__");
  static PyObject* delattr = interned("__delattr__");
  static PyObject* del = interned("__del__");
  // A Python __setattr__ (a frozen dataclass's) is traced on each store; its own
  // object.__setattr__(self, ...) stores directly.
  const auto object_or_python = [&](PyObject* name) {
    return same_as_object(type, name) || PyFunction_Check(_PyType_Lookup(type, name));
  };
  if (!same_as_object(type, getattribute) || !object_or_python(setattr) || !object_or_python(delattr) ||
      _PyType_Lookup(type, del) != nullptr) {
    return false;
  }
  PyObject* mro = type->tp_mro;
  const Py_ssize_t n = mro ? PyTuple_GET_SIZE(mro) : 0;
  if (n < 2 || PyTuple_GET_ITEM(mro, n - 1) != reinterpret_cast<PyObject*>(&PyBaseObject_Type)) return false;
  // Python classes down to object (__slots__ members are attributes like any other:
  // object_slot says which names they are).
  for (Py_ssize_t i = 0; i + 1 < n; ++i) {
    auto* base = reinterpret_cast<PyTypeObject*>(PyTuple_GET_ITEM(mro, i));
    if (!(base->tp_flags & Py_TPFLAGS_HEAPTYPE) || base->tp_dict == nullptr) return false;
  }
  return true;
}

// A __slots__ member of the class: a writable member descriptor that holds an object
// (functools.partial's read-only func is not one).
bool object_slot(PyObject* descr) {
  if (descr == nullptr || !Py_IS_TYPE(descr, &PyMemberDescr_Type)) return false;
  const PyMemberDef* m = reinterpret_cast<PyMemberDescrObject*>(descr)->d_member;
  return (m->type == T_OBJECT_EX || m->type == T_OBJECT) && (m->flags & READONLY) == 0;
}

}  // namespace

// A named tuple class (collections.namedtuple, typing.NamedTuple): a tuple subclass
// with _fields whose classes below tuple add no instance storage (__slots__ = ()).
bool is_namedtuple_class(PyObject* cls) {
  if (!PyType_Check(cls) || Py_TYPE(cls) != &PyType_Type || cls == reinterpret_cast<PyObject*>(&PyTuple_Type)) return false;
  auto* type = reinterpret_cast<PyTypeObject*>(cls);
  static PyObject* fields = interned("_fields");
  static PyObject* slots = interned("__slots__");
  PyObject* f = _PyType_Lookup(type, fields);
  if (f == nullptr || !PyTuple_Check(f) || !PyType_IsSubtype(type, &PyTuple_Type)) return false;
  PyObject* mro = type->tp_mro;
  for (Py_ssize_t i = 0; mro != nullptr && i < PyTuple_GET_SIZE(mro); ++i) {
    auto* base = reinterpret_cast<PyTypeObject*>(PyTuple_GET_ITEM(mro, i));
    if (base == &PyTuple_Type) return true;
    PyObject* s = base->tp_dict ? PyDict_GetItemWithError(base->tp_dict, slots) : nullptr;
    if (s == nullptr || !PyTuple_Check(s) || PyTuple_GET_SIZE(s) != 0) {
      guards::clear_error();
      return false;
    }
  }
  return false;
}

namespace {

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

// tuple.__new__(cls, items) of a named tuple class, which its generated __new__ calls:
// the tuple value, built as cls where it leaves the trace.
std::optional<Status> Tracer::call_tuple_new(const CallSite& c) {
  static PyObject* tuple_new = PyObject_GetAttrString(reinterpret_cast<PyObject*>(&PyTuple_Type), "__new__");
  if (c.callable.kind != ValueKind::Const || c.callable.obj.get() != tuple_new || c.kw_names || c.args.size() != 2) {
    return std::nullopt;
  }
  const Value& cls = c.args[0];
  if (cls.kind != ValueKind::Const || is_opaque(cls) || !is_namedtuple_class(cls.obj.get())) return std::nullopt;
  std::vector<Value> items;
  if (star_items(c.args[1], &items).failed() || !guards().add_class_unchanged(cls.obj.get())) return std::nullopt;
  Value t = Value::sequence(ValueKind::Tuple, std::move(items));
  t.obj = cls.obj;
  push(std::move(t));
  return ok();
}

std::string Tracer::object_class_name(const Value& obj) {
  return reinterpret_cast<PyTypeObject*>(obj.obj.get())->tp_name;
}

// cls(...) of a plain class: a new object, its __init__ traced on it. nullopt: not such
// a class (or its version tag cannot be guarded).
std::optional<Status> Tracer::construct_object(const CallSite& c) {
  // A fresh class: a class statement of the frame (ops_classes.cpp).
  if (c.callable.kind != ValueKind::Const || is_opaque(c.callable) || (c.callable.fresh && !PyType_Check(c.callable.obj.get()))) {
    return std::nullopt;
  }
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

// obj.name of an object made in the frame (or of a named tuple, past its fields), as
// object.__getattribute__ finds it: a data
// descriptor of the class (a property, its getter traced), the object's own
// attribute, a function of the class (a bound method; LOAD_METHOD pushes it with
// self), a static or class method, a plain class attribute (found by the class's path),
// else the class's __getattr__ traced. A name found nowhere raises AttributeError.
Status Tracer::object_attr(const Value& obj, const std::string& name, bool method) {
  if (DequeCalls::is_deque(obj)) return DequeCalls::attr(*this, obj, name, method);
  if (is_count_object(obj)) return unsupported("attribute '" + name + "' of an itertools.count made in the frame (not supported yet)");
  auto* type = reinterpret_cast<PyTypeObject*>(obj.obj.get());
  PyRef key = PyRef::steal(PyUnicode_InternFromString(name.c_str()));
  PyObject* descr = _PyType_Lookup(type, key.get());
  const auto value = [&](Value v) {
    if (method) push(Value::null());
    push(std::move(v));
    return ok();
  };
  static PyObject* class_name = interned("__class__");
  if (obj.kind == ValueKind::Object && _PyUnicode_EQ(key.get(), class_name)) return value(obj.items[0]);
  if (is_partial_object(obj)) {  // func, args, keywords (ops_higher.cpp)
    const long at = attr_index(obj, key.get());
    if (at < 0 || method) return unsupported("attribute '" + name + "' of a functools.partial made in the frame (not supported yet)");
    return value(obj.items[static_cast<size_t>(at) + 1]);
  }
  if (descr != nullptr && Py_TYPE(descr)->tp_descr_set != nullptr && !object_slot(descr)) {
    if (!Py_IS_TYPE(descr, &PyProperty_Type)) return unsupported("attribute '" + name + "' of a " + object_class_name(obj) + " made in the frame (not supported yet)");
    PyRef fget = PyRef::steal(PyObject_GetAttrString(descr, "fget"));
    if (!fget || !PyFunction_Check(fget.get())) {
      guards::clear_error();
      return unsupported("property '" + name + "' without a Python getter");
    }
    if (method) push(Value::null());
    return inline_call(fget.get(), {obj}, nullptr);
  }
  if (const long at = obj.kind == ValueKind::Object ? attr_index(obj, key.get()) : -1; at >= 0) {
    return value(obj.items[static_cast<size_t>(at) + 1]);
  }
  if (object_slot(descr)) {  // an empty slot
    return raise_no_attribute(obj, name);
  }
  if (descr == nullptr) {
    static PyObject* getattr_name = interned("__getattr__");
    if (PyObject* ga = _PyType_Lookup(type, getattr_name); ga != nullptr) {
      if (!PyFunction_Check(ga)) return unsupported("a __getattr__ that is not a Python function");
      if (method) push(Value::null());
      return inline_call(ga, {obj, Value::constant(PyRef::steal(PyUnicode_FromString(name.c_str())))}, nullptr);
    }
    return raise_no_attribute(obj, name);
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
  // and functions); a list or dict there could change without the class: found by the
  // class's path instead (guarded as LOAD_ATTR on the class is).
  if (!is_foldable(descr) && !PyType_Check(descr) && !PyFunction_Check(descr)) {
    if (Value out; attr_of(obj.items[0], name, &out, /*past_getattribute=*/true).ok()) return value(std::move(out));
    return unsupported("class attribute '" + name + "' of " + object_class_name(obj) + ", a " + Py_TYPE(descr)->tp_name +
                       " (not supported yet)");
  }
  return value(Value::constant(PyRef::borrow(descr)));
}

// AttributeError for obj.name, as CPython's object.__getattribute__ and __setattr__
// word it, raised by the current instruction.
Status Tracer::raise_no_attribute(const Value& obj, const std::string& name) {
  const std::string text = "'" + object_class_name(obj) + "' object has no attribute '" + name + "'";
  PyRef args = PyRef::steal(Py_BuildValue("(s)", text.c_str()));
  std::optional<Value> exc = args ? make_exception(PyExc_AttributeError, args.get()) : std::nullopt;
  if (!exc) return unsupported(text);
  return raise_exception(std::move(*exc), text + " (CPython raises AttributeError)");
}

// hasattr(obj, name) / getattr(obj, name[, default]) of an object made in the frame
// with a constant name: a name the object and its class lack gives False or the
// default, or what the class's Python __getattr__ gives (traced; its AttributeError
// means False or the default); else as LOAD_ATTR.
std::optional<Status> Tracer::object_getattr(const CallSite& c, bool has) {
  const Value& obj = c.args[0];
  const Value& name_v = c.args[1];
  if (name_v.kind != ValueKind::Const || is_opaque(name_v) || !PyUnicode_CheckExact(name_v.obj.get())) return std::nullopt;
  auto* type = reinterpret_cast<PyTypeObject*>(obj.obj.get());
  static PyObject* getattr_name = interned("__getattr__");
  const bool found = attr_index(obj, name_v.obj.get()) >= 0 || _PyType_Lookup(type, name_v.obj.get()) != nullptr;
  PyObject* hook = _PyType_Lookup(type, getattr_name);
  if (!found && hook == nullptr) {
    if (!has && c.args.size() != 3) return std::nullopt;  // AttributeError, raised by LOAD_ATTR's path
    push(has ? Value::constant(PyRef::borrow(Py_False)) : c.args[2]);
    return ok();
  }
  if (!found && PyFunction_Check(hook) && (has || c.args.size() == 3)) {
    // the class's Python __getattr__ answers: an AttributeError it raises means False
    // (or the default)
    ++attribute_error_catchers_;
    Status s = inline_call(hook, {obj, name_v}, nullptr);
    --attribute_error_catchers_;
    if (s.ok() && has) {
      pop();
      push(Value::constant(PyRef::borrow(Py_True)));
    }
    if (s.ok()) return ok();
    if (!raising_attribute_error()) return s;
    raising_.reset();
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

// cls.name of a class, as type.__getattribute__ finds it in the class's MRO (not the
// metaclass's own data descriptors, such as __name__): functions, static methods,
// class methods (bound to cls), classes and immutable constants, read now and covered
// by the class's guard. nullopt: not such an attribute (the plain read is tried).
std::optional<Status> Tracer::class_attr(const Value& owner, const std::string& name, bool method) {
  if (owner.kind != ValueKind::Const || is_opaque(owner) || !PyType_Check(owner.obj.get())) return std::nullopt;
  PyObject* cls = owner.obj.get();
  auto* type = reinterpret_cast<PyTypeObject*>(cls);
  if (!(type->tp_flags & Py_TPFLAGS_HEAPTYPE)) return std::nullopt;
  PyRef key = PyRef::steal(PyUnicode_InternFromString(name.c_str()));
  PyObject* meta_descr = _PyType_Lookup(Py_TYPE(cls), key.get());
  if (meta_descr != nullptr && Py_TYPE(meta_descr)->tp_descr_set != nullptr) return std::nullopt;
  PyObject* found = _PyType_Lookup(type, key.get());
  if (found == nullptr) return std::nullopt;
  PyRef value;
  // A property read from its class is the property itself (its __get__ of no instance).
  if (PyFunction_Check(found) || PyType_Check(found) || is_foldable(found) || Py_IS_TYPE(found, &PyProperty_Type)) {
    value = PyRef::borrow(found);
  } else if (Py_IS_TYPE(found, &PyStaticMethod_Type) || Py_IS_TYPE(found, &PyClassMethod_Type)) {
    value = PyRef::steal(Py_TYPE(found)->tp_descr_get(found, nullptr, cls));
    if (!value) {
      guards::clear_error();
      return std::nullopt;
    }
  } else {
    return std::nullopt;
  }
  if (!guards().add_class_unchanged(cls)) return std::nullopt;
  Value v = Value::constant(std::move(value));
  if (PyMethod_Check(v.obj.get())) {  // a class method: bound to the class, which the trace knows
    v.fresh = true;
    v.items.push_back(owner);
  }
  if (method) push(Value::null());
  push(std::move(v));
  return ok();
}

// a == b (or a != b, `ne`) where a or b is an object made in the frame: its class's
// __eq__ (or __ne__) traced when it is Python; with object's own on both sides (the
// other side an object of the frame, None, a number, a str or a tensor), identity.
Status Tracer::object_equal(bool ne, const Value& lhs, const Value& rhs) {
  static PyObject* eq_name = interned("__eq__");
  static PyObject* ne_name = interned("__ne__");
  const auto own = [&](const Value& v, PyObject* name) -> PyObject* {
    if (v.kind != ValueKind::Object) return nullptr;
    auto* type = reinterpret_cast<PyTypeObject*>(v.obj.get());
    return same_as_object(type, name) ? nullptr : _PyType_Lookup(type, name);
  };
  const Value& first = lhs.kind == ValueKind::Object ? lhs : rhs;  // CPython asks the left operand first
  const Value& second = lhs.kind == ValueKind::Object ? rhs : lhs;
  PyObject* fn = ne ? own(first, ne_name) : nullptr;
  const bool invert = ne && fn == nullptr;  // object.__ne__ inverts __eq__
  if (fn == nullptr) fn = own(first, eq_name);
  if (fn != nullptr) {
    // A number, str or None on the left gives NotImplemented: CPython then asks the
    // object (reflected). A subclass on the right would be asked first: not followed.
    const bool plain_left = lhs.kind == ValueKind::Sym || (lhs.kind == ValueKind::Const && !is_opaque(lhs) && is_foldable(lhs.obj.get()));
    const bool subclass_right = lhs.kind == ValueKind::Object && rhs.kind == ValueKind::Object && lhs.obj.get() != rhs.obj.get() &&
                                PyType_IsSubtype(reinterpret_cast<PyTypeObject*>(rhs.obj.get()), reinterpret_cast<PyTypeObject*>(lhs.obj.get()));
    if (!PyFunction_Check(fn) || (lhs.kind != ValueKind::Object && !plain_left) || subclass_right) {
      return unsupported("comparison of " + describe(lhs) + " and " + describe(rhs) + " (not supported yet)");
    }
    FJ_TRY(inline_call(fn, {first, second}, nullptr));
    Value r = pop();
    const bool plain_second = second.kind == ValueKind::Sym ||
                              (second.kind == ValueKind::Const && !is_opaque(second) && is_foldable(second.obj.get()));
    if (r.kind == ValueKind::Const && r.obj.get() == Py_NotImplemented) {
      // Neither side knows the other: identity decides (a number, str or None never
      // answers an object of the frame).
      if (!plain_second) return unsupported("__eq__ of " + describe(first) + " returned NotImplemented (not supported yet)");
      push(Value::constant(PyRef::borrow(ne ? Py_True : Py_False)));
      return ok();
    }
    if (!invert) {
      push(std::move(r));
      return ok();
    }
    bool t = false;
    FJ_TRY(truth(r, &t));
    push(Value::constant(PyRef::borrow(t ? Py_False : Py_True)));
    return ok();
  }
  const bool plain_other = second.kind == ValueKind::Object
                               ? own(second, eq_name) == nullptr && own(second, ne_name) == nullptr
                               : is_tensor(second) || second.kind == ValueKind::Sym ||
                                     (second.kind == ValueKind::Const && !is_opaque(second) && is_foldable(second.obj.get()));
  if (!plain_other || is_tensor(second)) {  // a tensor's == would be an elementwise op
    return unsupported("comparison of " + describe(lhs) + " and " + describe(rhs) + " (not supported yet)");
  }
  const bool same = second.kind == ValueKind::Object && second.identity == first.identity;
  push(Value::constant(PyRef::borrow(same != ne ? Py_True : Py_False)));
  return ok();
}

// super().name for an object made in the frame: what the MRO of its class finds after
// `after` (covered by the class's guard): a method, a property's getter, or object's
// own __init__ (called by call_object_init).
Status Tracer::object_super_attr(const Value& obj, PyObject* after, const std::string& name, bool method) {
  PyRef key = PyRef::steal(PyUnicode_InternFromString(name.c_str()));
  PyObject* found = guards::super_lookup(reinterpret_cast<PyTypeObject*>(obj.obj.get()), after, key.get());
  static PyObject* init_name = interned("__init__");
  PyObject* object_init = _PyType_Lookup(&PyBaseObject_Type, init_name);
  if (found != nullptr && (PyFunction_Check(found) || found == object_init) && method) {
    push(Value::constant(PyRef::borrow(found)));
    push(obj);
    return ok();
  }
  if (found != nullptr && Py_IS_TYPE(found, &PyProperty_Type) && !method) {
    PyRef fget = PyRef::steal(PyObject_GetAttrString(found, "fget"));
    if (!fget || !PyFunction_Check(fget.get())) {
      guards::clear_error();
      return unsupported("super()." + name + ": a property without a Python getter");
    }
    return inline_call(fget.get(), {obj}, nullptr);
  }
  return unsupported("super()." + name + " of " + describe(obj) + " (not supported yet)");
}

// object.__init__(obj) of an object made in the frame (super().__init__() reaching
// object): nothing to do.
std::optional<Status> Tracer::call_object_init(const CallSite& c) {
  static PyObject* init_name = interned("__init__");
  PyObject* object_init = _PyType_Lookup(&PyBaseObject_Type, init_name);
  if (c.callable.kind != ValueKind::Const || c.callable.obj.get() != object_init || c.args.empty() ||
      c.args[0].kind != ValueKind::Object) {
    return std::nullopt;
  }
  if (c.args.size() != 1 || c.kw_names) return unsupported("object.__init__() with arguments (CPython raises TypeError)");
  push(Value::constant(PyRef::borrow(Py_None)));
  return ok();
}

// obj.name = value on an object made in the frame: its class's Python __setattr__ traced
// (unless `direct`: object.__setattr__ itself), a property's setter traced, else the
// attribute set (in place, keeping its position) on every copy of the object.
Status Tracer::object_store_attr(const Value& obj, const std::string& name, Value value, bool direct) {
  if (DequeCalls::is_deque(obj)) return unsupported("setting attribute '" + name + "' of a deque (CPython raises AttributeError)");
  auto* type = reinterpret_cast<PyTypeObject*>(obj.obj.get());
  PyRef key = PyRef::steal(PyUnicode_InternFromString(name.c_str()));
  static PyObject* setattr_name = interned("__setattr__");
  PyObject* own_setattr = direct ? nullptr : _PyType_Lookup(type, setattr_name);
  if (own_setattr != nullptr && PyFunction_Check(own_setattr)) {  // plain_instance_class: else object's
    FJ_TRY(inline_call(own_setattr, {obj, Value::constant(key), std::move(value)}, nullptr));
    pop();
    return ok();
  }
  PyObject* descr = _PyType_Lookup(type, key.get());
  if (descr == nullptr && type->tp_dictoffset == 0) {  // only __slots__, and not this name
    return raise_no_attribute(obj, name);
  }
  if (descr != nullptr && Py_TYPE(descr)->tp_descr_set != nullptr && !object_slot(descr)) {
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
  if (obj.identity < construct_floor_) {
    ++writes_;
    note_write(obj.identity);
  }
  for (Value* r : list_roots()) replace_object(*r, now);
  return ok();
}

}  // namespace fj::interp

namespace fj::interp {

// a op b (`name` "__add__", reflected "__radd__"; a comparison's reflection is "__gt__"
// for "__lt__") where a or b is an object made in the frame, as CPython dispatches it:
// the left operand's Python method, then, where it has none or it returns
// NotImplemented, the right one's reflected method (for numbers only when the classes
// differ). An in-place operator (`inplace` "__iadd__") tries its own method first. A
// number, str, None or tensor on either side answers NotImplemented to such an object.
// nullopt: neither operand is such an object.
std::optional<Status> Tracer::object_operator(const char* inplace, const char* name, const char* reflected,
                                              bool compare, const Value& lhs, const Value& rhs) {
  if (lhs.kind != ValueKind::Object && rhs.kind != ValueKind::Object) return std::nullopt;
  const std::string what = std::string("operator ") + name + " on " + describe(lhs) + " and " + describe(rhs);
  const auto plain = [&](const Value& v) {
    return v.kind == ValueKind::Object || is_tensor(v) || v.kind == ValueKind::Sym ||
           (v.kind == ValueKind::Const && !is_opaque(v) && v.reg < 0 && is_foldable(v.obj.get()));
  };
  if (!plain(lhs) || !plain(rhs)) return unsupported(what + " (not supported yet)");
  const auto type_of = [](const Value& v) { return reinterpret_cast<PyTypeObject*>(v.obj.get()); };
  const bool same_class = lhs.kind == rhs.kind && lhs.obj.get() == rhs.obj.get();
  if (lhs.kind == ValueKind::Object && rhs.kind == ValueKind::Object && !same_class &&
      PyType_IsSubtype(type_of(rhs), type_of(lhs))) {
    return unsupported(what + ": a subclass on the right (not supported yet)");
  }
  // The method `m` of v's class: a Python function, none (nullptr), or unsupported.
  const auto method = [&](const Value& v, const char* m, PyObject** fn) -> Status {
    *fn = nullptr;
    if (m == nullptr || v.kind != ValueKind::Object) return ok();
    PyRef key = PyRef::steal(PyUnicode_InternFromString(m));
    PyObject* found = _PyType_Lookup(type_of(v), key.get());
    if (found == nullptr || found == _PyType_Lookup(&PyBaseObject_Type, key.get())) return ok();  // object's: NotImplemented
    if (!PyFunction_Check(found)) return unsupported(what + ": " + m + " is not a Python function (not supported yet)");
    *fn = found;
    return ok();
  };
  const auto try_call = [&](PyObject* fn, const Value& a, const Value& b, bool* answered) -> Status {
    *answered = false;
    if (fn == nullptr) return ok();
    FJ_TRY(inline_call(fn, {a, b}, nullptr));
    if (top().kind == ValueKind::Const && top().obj.get() == Py_NotImplemented) {
      pop();
      return ok();
    }
    *answered = true;
    return ok();
  };
  PyObject* fn = nullptr;
  bool answered = false;
  if (inplace != nullptr) {
    FJ_TRY(method(lhs, inplace, &fn));
    FJ_TRY(try_call(fn, lhs, rhs, &answered));
    if (answered) return ok();
  }
  FJ_TRY(method(lhs, name, &fn));
  FJ_TRY(try_call(fn, lhs, rhs, &answered));
  if (answered) return ok();
  if (compare || !same_class) {
    FJ_TRY(method(rhs, reflected, &fn));
    FJ_TRY(try_call(fn, rhs, lhs, &answered));
    if (answered) return ok();
  }
  return unsupported(what + ": no method answers (CPython raises TypeError)");
}

}  // namespace fj::interp

namespace fj::interp {

// -v (`name` "__neg__") of an object made in the frame: its class's Python method.
Status Tracer::object_unary(const char* name, const Value& v) {
  PyRef key = PyRef::steal(PyUnicode_InternFromString(name));
  PyObject* fn = _PyType_Lookup(reinterpret_cast<PyTypeObject*>(v.obj.get()), key.get());
  if (fn == nullptr || !PyFunction_Check(fn)) return unsupported(std::string(name) + " of " + describe(v) + " (not supported yet)");
  return inline_call(fn, {v}, nullptr);
}

}  // namespace fj::interp

namespace fj::interp {

// The class's own Python method `name` of an object made in the frame: nullptr where
// the class has none of its own (object's), `*bad` where it is not a Python function.
PyObject* Tracer::object_dunder(const Value& v, const char* name, bool* bad) {
  PyRef key = PyRef::steal(PyUnicode_InternFromString(name));
  PyObject* found = _PyType_Lookup(reinterpret_cast<PyTypeObject*>(v.obj.get()), key.get());
  if (found == nullptr || found == _PyType_Lookup(&PyBaseObject_Type, key.get())) return nullptr;
  *bad = !PyFunction_Check(found);
  return *bad ? nullptr : found;
}

// len(obj): its class's Python __len__, traced; CPython's checks on the result (an int,
// not negative) where the trace cannot prove them end the trace.
Status Tracer::object_len(const Value& v) {
  if (DequeCalls::is_deque(v)) {
    push(Value::constant(PyRef::steal(PyLong_FromSize_t(DequeCalls::size(v)))));
    return ok();
  }
  bool bad = false;
  PyObject* fn = object_dunder(v, "__len__", &bad);
  if (fn == nullptr) return unsupported("len() of " + describe(v) + (bad ? " (not supported yet)" : " (CPython raises TypeError)"));
  FJ_TRY(inline_call(fn, {v}, nullptr));
  const Value& r = top();
  const bool int_const = r.kind == ValueKind::Const && !is_opaque(r) && PyLong_CheckExact(r.obj.get()) &&
                         PyLong_AsLongLong(r.obj.get()) >= 0 && !PyErr_Occurred();
  guards::clear_error();
  if (int_const) return ok();
  if (r.kind == ValueKind::Sym && r.expr.type() == jit::SymType::Int && !is_numpy_scalar(r)) {
    bool negative = false;
    FJ_TRY(guard_truth(jit::lt(r.expr, jit::SymExpr::integer(0)), &negative));
    if (!negative) return ok();
  }
  return unsupported("__len__ of " + describe(v) + " gave " + describe(r) + " (CPython checks it)");
}

// The truth of an object made in the frame: its class's __bool__ (a bool), else its
// __len__ (not zero), else true.
Status Tracer::object_truth(const Value& v, bool* out) {
  if (DequeCalls::is_deque(v)) {
    *out = DequeCalls::size(v) != 0;
    return ok();
  }
  bool bad = false;
  PyObject* fn = object_dunder(v, "__bool__", &bad);
  if (bad) return unsupported("truth value of " + describe(v) + " (its __bool__ is not Python; not supported yet)");
  if (fn != nullptr) {
    FJ_TRY(inline_call(fn, {v}, nullptr));
    Value r = pop();
    const bool is_bool = (r.kind == ValueKind::Const && PyBool_Check(r.obj.get())) ||
                         (r.kind == ValueKind::Sym && r.expr.type() == jit::SymType::Bool && !is_numpy_scalar(r));
    if (!is_bool) return unsupported("__bool__ of " + describe(v) + " gave " + describe(r) + " (CPython raises TypeError)");
    return truth(r, out);
  }
  PyObject* len = object_dunder(v, "__len__", &bad);
  if (bad) return unsupported("truth value of " + describe(v) + " (its __len__ is not Python; not supported yet)");
  if (len == nullptr) {
    *out = true;
    return ok();
  }
  FJ_TRY(object_len(v));
  return truth(pop(), out);
}

// str(obj) / repr(obj): its class's Python __str__ (str; object's falls to __repr__) or
// __repr__, traced; the result must be a str. nullopt: object's own repr (an address).
std::optional<Status> Tracer::object_text(const Value& v, bool is_str) {
  bool bad = false;
  PyObject* fn = is_str ? object_dunder(v, "__str__", &bad) : nullptr;
  if (fn == nullptr && !bad) fn = object_dunder(v, "__repr__", &bad);
  if (bad || fn == nullptr) return std::nullopt;
  const int writes = writes_;
  if (Status s = inline_call(fn, {v}, nullptr); s.failed()) {
    if (raising_ || writes_ != writes || call_raised_) return s;
    return std::nullopt;  // not traceable inside (reprlib's id()): the call's other steps (an opaque call)
  }
  const Value& r = top();
  if (r.kind != ValueKind::Const || is_opaque(r) || !PyUnicode_Check(r.obj.get())) {
    return unsupported(std::string(is_str ? "__str__" : "__repr__") + " of " + describe(v) + " gave " + describe(r) +
                       " (CPython checks it)");
  }
  return ok();
}

}  // namespace fj::interp
