// Attributes that run Python or depend on what is absent: properties, __getattr__ and
// __getattribute__ of user classes (inlined), methods read as values (bound methods),
// zero-argument super() in a method, hasattr() and getattr() with a default. Each
// answer is guarded at the object's path (guards::PathMethodIs).
#include <algorithm>

#include "interp/trace/tracer.h"

namespace fj::interp {
namespace {

PyRef interned_name(const std::string& name) { return PyRef::steal(PyUnicode_InternFromString(name.c_str())); }

// object.__getattribute__ (a slot wrapper), looked up once.
PyObject* object_getattribute() {
  static PyObject* fn = _PyType_Lookup(&PyBaseObject_Type, interned_name("__getattribute__").get());
  return fn;
}

}  // namespace

bool Tracer::is_super(const Value& v) {
  return v.kind == ValueKind::Const && v.obj && Py_IS_TYPE(v.obj.get(), &PySuper_Type) && v.items.size() == 2;
}

// obj has no attribute `name` by the plain lookup and no __getattr__ would make one
// (none on its type, or nn.Module's, which the plain lookup covers); guarded.
bool Tracer::absent_attr(const Value& obj, const std::string& name) {
  guards::PathRoot root;
  PyRef holder;
  if (obj.kind != ValueKind::Const || !path_root(obj, &root, &holder)) return false;
  PyObject* o = obj.obj.get();
  PyRef key = interned_name(name);
  PyRef getattr_name = interned_name("__getattr__");
  if (!guards::attr_missing(o, key.get())) return false;
  PyObject* getattr = _PyType_Lookup(Py_TYPE(o), getattr_name.get());
  const std::string text = source_text(obj.source);
  if (getattr == nullptr) {
    if (!guards::attr_missing(o, getattr_name.get())) return false;
    guards().add_path_missing(text, root, obj.source.attrs, "__getattr__");
  } else if (getattr == guards::module_getattr()) {
    guards().add_path_method(text, root, obj.source.attrs, "__getattr__", getattr);
  } else {
    return false;
  }
  guards().add_path_missing(text, root, obj.source.attrs, name);
  return true;
}

// owner.name where the plain lookup did not answer: a property of the class (its
// getter inlined), a function of the class (a bound method), the class's __getattr__
// (inlined) when the plain lookup finds nothing, or the class's own __getattribute__
// when that is a Python function (inlined like any helper: attribute aliasing such as
// transformers' PretrainedConfig). Pushes the value; nullopt when none applies.
std::optional<Status> Tracer::computed_attr(const Value& owner, const std::string& name) {
  guards::PathRoot root;
  PyRef holder;
  if (owner.kind != ValueKind::Const || owner.fresh || !path_root(owner, &root, &holder)) return std::nullopt;
  PyObject* obj = owner.obj.get();
  PyTypeObject* tp = Py_TYPE(obj);
  if (PyType_Check(obj) || PyModule_Check(obj)) return std::nullopt;
  const std::string text = source_text(owner.source);
  if (!guards::generic_getattribute(tp)) {
    // A class statement's __getattribute__ makes tp_getattro call it (and __getattr__
    // only when it raises AttributeError, which ends the trace).
    PyRef ga_name = interned_name("__getattribute__");
    PyObject* ga = _PyType_Lookup(tp, ga_name.get());
    if (ga == nullptr || !PyFunction_Check(ga) || !(tp->tp_flags & Py_TPFLAGS_HEAPTYPE)) return std::nullopt;
    guards().add_path_method(text, root, owner.source.attrs, "__getattribute__", ga);
    return hook_catches(tp, inline_call(ga, {owner, Value::constant(PyRef::steal(PyUnicode_FromString(name.c_str())))}, nullptr));
  }
  if (std::optional<Status> s = descriptor_attr(owner, name, root)) return hook_catches(tp, std::move(*s));
  PyRef key = interned_name(name);
  if (_PyType_Lookup(tp, key.get()) != nullptr) return std::nullopt;
  PyRef getattr_name = interned_name("__getattr__");
  PyObject* getattr = _PyType_Lookup(tp, getattr_name.get());
  if (getattr == nullptr || !PyFunction_Check(getattr) || getattr == guards::module_getattr() ||
      !guards::attr_missing(obj, key.get())) {
    return std::nullopt;
  }
  guards().add_path_missing(text, root, owner.source.attrs, name);
  guards().add_path_method(text, root, owner.source.attrs, "__getattr__", getattr);
  return inline_call(getattr, {owner, Value::constant(PyRef::steal(PyUnicode_FromString(name.c_str())))}, nullptr);
}

// owner.name found on the class as a property (its getter inlined) or a function not
// shadowed by the instance dict (a bound method), as object.__getattribute__ finds
// them; guarded at owner's path. nullopt: the class holds neither under that name.
std::optional<Status> Tracer::descriptor_attr(const Value& owner, const std::string& name, const guards::PathRoot& root) {
  PyObject* obj = owner.obj.get();
  PyRef key = interned_name(name);
  PyObject* descr = _PyType_Lookup(Py_TYPE(obj), key.get());
  const std::string text = source_text(owner.source);
  if (descr != nullptr && Py_IS_TYPE(descr, &PyProperty_Type)) {
    PyRef fget = PyRef::steal(PyObject_GetAttrString(descr, "fget"));
    if (!fget || !PyFunction_Check(fget.get())) {
      guards::clear_error();
      return unsupported("property '" + name + "' without a Python getter");
    }
    guards().add_path_method(text, root, owner.source.attrs, name, descr);
    return inline_call(fget.get(), {owner}, nullptr);
  }
  if (descr != nullptr && PyFunction_Check(descr)) {
    PyObject** dictptr = _PyObject_GetDictPtr(obj);
    if (dictptr != nullptr && *dictptr != nullptr && PyDict_GetItemWithError(*dictptr, key.get()) != nullptr) {
      return std::nullopt;
    }
    guards::clear_error();
    guards().add_path_method(text, root, owner.source.attrs, name, descr);
    PyObject* bound = PyMethod_New(descr, obj);
    if (bound == nullptr) {
      guards::clear_error();
      return unsupported("cannot bind the method " + name);
    }
    Value v = Value::constant(PyRef::steal(bound));
    v.fresh = true;         // bound to the traced object: it must not escape the frame
    v.items.push_back(owner);  // self, with its source (call_python_function)
    push(std::move(v));
    return ok();
  }
  return std::nullopt;
}

// object.__getattribute__(obj, name) with a constant name (what super().__getattribute__
// calls inside a class's own __getattribute__): the instance dict or a plain class
// attribute, read past the class's __getattribute__ and guarded so (a "!name" path
// step), or a property or method of the class. nullopt: not answered here.
std::optional<Status> Tracer::call_object_getattribute(const CallSite& c) {
  if (c.args.size() != 2 || c.kw_names) return std::nullopt;
  const Value& obj = c.args[0];
  const Value& name_v = c.args[1];
  if (name_v.kind != ValueKind::Const || is_opaque(name_v) || !PyUnicode_CheckExact(name_v.obj.get())) return std::nullopt;
  guards::PathRoot root;
  PyRef holder;
  if (obj.kind != ValueKind::Const || obj.fresh || is_super(obj) || !path_root(obj, &root, &holder) ||
      PyType_Check(obj.obj.get()) || PyModule_Check(obj.obj.get())) {
    return std::nullopt;
  }
  const std::string name = guards::utf8_lossy(name_v.obj.get());
  Value out;
  Status plain = attr_of(obj, name, &out, /*past_getattribute=*/true);
  if (plain.ok()) {
    push(std::move(out));
    return ok();
  }
  if (std::optional<Status> s = descriptor_attr(obj, name, root)) return s;
  PyRef key = interned_name(name);
  if (_PyType_Lookup(Py_TYPE(obj.obj.get()), key.get()) == nullptr && guards::object_attr(obj.obj.get(), key.get()) == nullptr) {
    guards().add_path_missing(source_text(obj.source), root, obj.source.attrs, name, /*past_getattribute=*/true);
    attribute_error_proved_ = true;  // eager raises AttributeError here (call_getattr)
  }
  return plain;
}

// `key in d` (an exact str key) where d is an exact dict the frame finds again by its
// path: answered now, guarded to keep that answer. With `subclass`, d may be a subclass
// of dict read by its own storage (dict.get(d, key), super().get(key) in a subclass).
bool Tracer::is_path_dict(const Value& d, bool subclass) const {
  guards::PathRoot root;
  PyRef holder;
  return d.kind == ValueKind::Const && !is_opaque(d) &&
         (subclass ? PyDict_Check(d.obj.get()) : PyDict_CheckExact(d.obj.get())) && path_root(d, &root, &holder);
}

std::optional<bool> Tracer::path_dict_contains(const Value& dict, const Value& key, bool subclass) {
  guards::PathRoot root;
  PyRef holder;
  if (!is_path_dict(dict, subclass) || !path_root(dict, &root, &holder) || key.kind != ValueKind::Const || is_opaque(key) ||
      !PyUnicode_CheckExact(key.obj.get())) {
    return std::nullopt;
  }
  const int r = PyDict_Contains(dict.obj.get(), key.obj.get());
  if (r < 0) {
    guards::clear_error();
    return std::nullopt;
  }
  guards().add_path_dict_has(source_text(dict.source), root, dict.source.attrs, key.obj.get(), r == 1, subclass);
  return r == 1;
}

// super() in a method: the class in its __class__ cell and its first argument. Its
// attributes are found when read (super_attr).
Status Tracer::zero_arg_super() {
  PyCodeObject* co = cur_.co;
  const int first_free = co->co_nlocalsplus - co->co_nfreevars;
  int at = -1;
  for (int k = first_free; k < co->co_nlocalsplus; ++k) {
    if (_PyUnicode_EqualToASCIIString(PyTuple_GET_ITEM(co->co_localsplusnames, k), "__class__")) at = k;
  }
  if (at < 0 || co->co_argcount == 0) return unsupported("super() outside a method (CPython raises)");
  return make_super(cur_.fs->locals[static_cast<size_t>(at)], cur_.fs->locals[0]);
}

// super(cls, self): also the explicit form, super(Net, self).__init__().
Status Tracer::make_super(const Value& cls, const Value& self) {
  if (cls.kind != ValueKind::Const || is_opaque(cls) || !PyType_Check(cls.obj.get())) {
    return unsupported("super() whose class is " + describe(cls) + " (not supported yet)");
  }
  guards::PathRoot root;
  PyRef holder;
  // An object made in the frame: super(cls, its class) stands for it (its attributes
  // are found by object_super_attr).
  if (self.kind != ValueKind::Object &&
      (self.kind != ValueKind::Const || PyType_Check(self.obj.get()) || !path_root(self, &root, &holder))) {
    return unsupported("super() of " + describe(self) + " (not supported yet)");
  }
  PyObject* sup = PyObject_CallFunctionObjArgs(reinterpret_cast<PyObject*>(&PySuper_Type), cls.obj.get(), self.obj.get(), nullptr);
  if (sup == nullptr) {
    guards::clear_error();
    return unsupported("super() raised (CPython raises)");
  }
  Value v = Value::constant(PyRef::steal(sup));
  v.fresh = true;  // made while tracing: it must not escape the frame
  v.items = {self, cls};
  push(std::move(v));
  return ok();
}

// super().name: a function found after the method's class in the MRO of the object's
// type. LOAD_METHOD pushes (function, self); a property's getter is inlined.
Status Tracer::super_attr(const Value& sup, const std::string& name, bool method) {
  const Value& self = sup.items[0];
  PyObject* cls = sup.items[1].obj.get();
  if (self.kind == ValueKind::Object) return object_super_attr(self, cls, name, method);
  PyRef key = interned_name(name);
  PyObject* found = guards::super_lookup(Py_TYPE(self.obj.get()), cls, key.get());
  guards::PathRoot root;
  PyRef holder;
  if (found == nullptr || !path_root(self, &root, &holder)) return unsupported("super()." + name + " (not supported yet)");
  const std::string text = source_text(self.source);
  if ((PyFunction_Check(found) || found == object_getattribute()) && method) {
    guards().add_path_super_method(text, root, self.source.attrs, cls, name, found);
    push(Value::constant(PyRef::borrow(found)));
    push(self);
    return ok();
  }
  if (Py_IS_TYPE(found, &PyProperty_Type) && !method) {
    PyRef fget = PyRef::steal(PyObject_GetAttrString(found, "fget"));
    if (!fget || !PyFunction_Check(fget.get())) {
      guards::clear_error();
      return unsupported("super()." + name + ": a property without a Python getter");
    }
    guards().add_path_super_method(text, root, self.source.attrs, cls, name, found);
    return inline_call(fget.get(), {self}, nullptr);
  }
  if (Py_IS_TYPE(found, &PyMethodDescr_Type) && method) {
    // A C method of a base type (dict.get in a dict subclass): called with the object
    // as its first argument, as an unbound method is (BuiltinCalls answers dict.get).
    guards().add_path_super_method(text, root, self.source.attrs, cls, name, found);
    push(Value::constant(PyRef::borrow(found)));
    push(self);
    return ok();
  }
  return unsupported("super()." + name + " is " + std::string(Py_TYPE(found)->tp_name) + " (not supported yet)");
}

// hasattr(obj, name) and getattr(obj, name[, default]) with a constant name: what the
// attribute read finds (guarded as LOAD_ATTR guards it), or, where the object
// certainly has no such attribute, False or the default (guarded absent). nullopt:
// not answered here (the call runs as it is).
std::optional<Status> Tracer::call_getattr(const CallSite& c, bool has) {
  if (c.args.size() < 2 || c.args.size() > (has ? 2u : 3u)) return std::nullopt;
  const Value& obj = c.args[0];
  const Value& name_v = c.args[1];
  if (name_v.kind != ValueKind::Const || is_opaque(name_v) || !PyUnicode_CheckExact(name_v.obj.get())) return std::nullopt;
  const std::string name = guards::utf8_lossy(name_v.obj.get());
  if (obj.kind == ValueKind::Object) return object_getattr(c, has);
  const bool computed = is_tensor(obj) && graph_.node(obj.node).op != jit::Op::Placeholder;
  const bool argument = is_tensor(obj) && !computed && obj.source.kind == Source::Kind::Arg && obj.source.arg >= 0 &&
                        obj.source.arg < in_.num_args && obj.source.attrs.empty();
  if (computed || argument) {
    // An op's result: a plain torch.Tensor with nothing in its own __dict__. A name
    // its class lacks (guarded, with no __getattr__) is missing. An argument may have
    // attributes of its own: that it lacks this one is guarded too.
    PyRef key = interned_name(name);
    PyRef getattr_name = interned_name("__getattr__");
    if (guards::current_tensor_attr(getattr_name.get()) != nullptr) return std::nullopt;
    if (guards::current_tensor_attr(key.get()) != nullptr) {  // getattr(x, "double"): as LOAD_ATTR reads it
      if (has) return std::nullopt;
      return load_attr(obj, name);
    }
    if (argument && !guards::attr_missing(in_.args[obj.source.arg], key.get())) return std::nullopt;
    if (!has && c.args.size() != 3) return unsupported("getattr() of a missing tensor attribute (CPython raises AttributeError)");
    guards().add_tensor_attr(name, nullptr);
    guards().add_tensor_attr("__getattr__", nullptr);
    if (argument) {
      guards::PathRoot root;
      root.arg = obj.source.arg;
      guards().add_path_missing(source_text(obj.source), root, {}, name);
    }
    push(has ? Value::constant(PyRef::borrow(Py_False)) : c.args[2]);
    return ok();
  }
  if (obj.kind != ValueKind::Const || obj.fresh || is_super(obj)) return std::nullopt;
  if (Value out; PyModule_Check(obj.obj.get()) && module_attr_of(obj, name, &out).ok()) {  // as LOAD_ATTR
    push(has ? Value::constant(PyRef::borrow(Py_True)) : std::move(out));
    return ok();
  }
  if (absent_attr(obj, name)) {
    if (has) push(Value::constant(PyRef::borrow(Py_False)));
    else if (c.args.size() == 3) push(c.args[2]);
    else return unsupported("getattr() of a missing attribute (CPython raises AttributeError)");
    return ok();
  }
  if (std::optional<Status> s = class_getattr(obj, name, has)) return s;
  Value out;
  if (attr_of(obj, name, &out).ok()) {
    push(has ? Value::constant(PyRef::borrow(Py_True)) : std::move(out));
    return ok();
  }
  if (has) return std::nullopt;  // a property's getter may raise: hasattr would say False
  attribute_error_proved_ = false;
  const Plan* plan = plan_;
  const size_t steps = plan_->steps.size();
  const int writes = writes_;
  std::optional<Status> s = computed_attr(obj, name);
  if (s && s->failed() && c.args.size() == 3 && raising_attribute_error()) {
    raising_.reset();  // getattr's default, before any handler of a traced frame
    push(c.args[2]);
    return ok();
  }
  PyRef getattr_name = interned_name("__getattr__");
  if (s && s->failed() && std::exchange(attribute_error_proved_, false) && c.args.size() == 3 && !call_raised_ &&
      plan == plan_ && steps == plan_->steps.size() && writes == writes_ &&
      _PyType_Lookup(Py_TYPE(obj.obj.get()), getattr_name.get()) == nullptr) {
    // The class's own __getattribute__ reached object's for a name it lacks and let
    // the AttributeError out (no __getattr__ to catch it): getattr's default.
    graph_.roll_back(c.before);
    push(c.args[2]);
    return ok();
  }
  // An inlined getter or __getattribute__ that cannot be traced (one that raises
  // AttributeError for getattr's default, say): the call runs as it is, where it can.
  if (s && s->failed() && !call_raised_ && !committed_) return opaque_call(c, s->take_error(), c.orig_args);
  return s;
}

}  // namespace fj::interp

namespace fj::interp {

// d[key] (get_default null) or d.get(key[, default]) of a dict read by path, with an
// exact str key: the item found again by the step "[key" at each call, or, where the key
// is absent (guarded so), the default (d[key] raises KeyError, which a handler of the
// trace may take).
std::optional<Status> Tracer::path_dict_item(const Value& d, const Value& key, const Value* get_default,
                                             bool subclass) {
  std::optional<bool> has = path_dict_contains(d, key, subclass);
  if (!has) return std::nullopt;
  if (!*has) {
    if (get_default == nullptr) return raise_key_error(key);
    push(*get_default);
    return ok();
  }
  PyObject* v = PyDict_GetItemWithError(d.obj.get(), key.obj.get());
  if (v == nullptr) {
    guards::clear_error();
    return unsupported("a dict item that cannot be read");
  }
  Value out;
  FJ_TRY(found_at_path(d, (subclass ? "{" : "[") + guards::utf8_lossy(key.obj.get()), v, &out));
  push(std::move(out));
  return ok();
}

}  // namespace fj::interp

namespace fj::interp {

// f.__code__, __name__, __qualname__, __doc__, __module__, __defaults__, __kwdefaults__
// of a function the trace holds (guarded to keep them, FunctionUnchanged), a property's
// fget, fset and fdel (read-only), the co_* fields of a code object (immutable) where they are
// constants, and a class's __name__, __qualname__ and plain class attributes (guarded by
// path, see guards::object_attr).
// nullopt: not one of these.
std::optional<Status> Tracer::function_attr(const Value& owner, const std::string& name) {
  if (owner.kind != ValueKind::Const || is_opaque(owner)) return std::nullopt;
  PyObject* o = owner.obj.get();
  if (owner.fresh && PyType_Check(o)) return fresh_class_attr(owner, name);
  if (PyFunction_Check(o)) {
    // A function the frame made (MAKE_FUNCTION) has these as it was made, unless its
    // defaults are traced values (made_defaults_).
    if (owner.fresh && made_defaults_.count(o)) return std::nullopt;
    auto* f = reinterpret_cast<PyFunctionObject*>(o);
    PyObject* v = name == "__code__"         ? f->func_code
                  : name == "__name__"       ? f->func_name
                  : name == "__qualname__"   ? f->func_qualname
                  : name == "__doc__"        ? f->func_doc
                  : name == "__module__"     ? f->func_module
                  : name == "__defaults__"   ? (f->func_defaults ? f->func_defaults : Py_None)
                  : name == "__kwdefaults__" ? (f->func_kwdefaults ? f->func_kwdefaults : Py_None)
                                             : nullptr;
    if (v == nullptr) return std::nullopt;
    if (!owner.fresh) guards().add_function(o);
    push(Value::constant(PyRef::borrow(v)));
    return ok();
  }
  if (owner.fresh) return std::nullopt;
  if (Py_IS_TYPE(o, &PyProperty_Type) && (name == "fget" || name == "fset" || name == "fdel")) {
    PyRef v = PyRef::steal(PyObject_GetAttrString(o, name.c_str()));  // read-only: fixed with the property
    if (!v) {
      guards::clear_error();
      return std::nullopt;
    }
    push(Value::constant(std::move(v)));
    return ok();
  }
  if (PyType_Check(o)) {
    Value out;
    if (attr_of(owner, name, &out, /*past_getattribute=*/true).failed()) return std::nullopt;
    push(std::move(out));
    return ok();
  }
  if (PyCode_Check(o) && name.rfind("co_", 0) == 0) {
    PyRef v = PyRef::steal(PyObject_GetAttrString(o, name.c_str()));
    if (!v || !is_foldable(v.get())) {
      guards::clear_error();
      return std::nullopt;
    }
    push(Value::constant(std::move(v)));
    return ok();
  }
  return std::nullopt;
}

}  // namespace fj::interp

namespace fj::interp {

// An attribute of a class the frame defined (ops_classes.cpp), from its own namespace
// (a constant, a function, a property or static method, whose __get__ is C code) or
// one of type's names (__doc__, __name__...): read now, unguarded, since nothing outside
// the frame can reach the class to change it. What is not a constant was made by the
// class statement, anew at each eager call: it must not escape the frame either (fresh).
std::optional<Status> Tracer::fresh_class_attr(const Value& owner, const std::string& name) {
  PyObject* cls = owner.obj.get();
  PyRef key = PyRef::steal(PyUnicode_InternFromString(name.c_str()));
  PyObject* own = key ? PyDict_GetItemWithError(reinterpret_cast<PyTypeObject*>(cls)->tp_dict, key.get()) : nullptr;
  const bool builtin_get = own != nullptr && (Py_TYPE(own)->tp_descr_get == nullptr || PyFunction_Check(own) ||
                                              Py_IS_TYPE(own, &PyProperty_Type) || Py_IS_TYPE(own, &PyStaticMethod_Type));
  const bool type_name = own == nullptr && (name == "__doc__" || name == "__name__" || name == "__qualname__" || name == "__module__");
  PyRef v = builtin_get || type_name ? PyRef::steal(PyObject_GetAttr(cls, key.get())) : PyRef();
  if (!v) {
    guards::clear_error();
    return std::nullopt;
  }
  Value out = Value::constant(v);
  out.fresh = !is_foldable(v.get());
  push(std::move(out));
  return ok();
}

}  // namespace fj::interp

namespace fj::interp {

// getattr(cls, name) / hasattr(cls, name) of a class the trace knows, whose metaclass is
// type: whether the class (its MRO) or type has the name is kept by the class's
// version tag (guarded), and the value is read as LOAD_ATTR reads it. nullopt: not
// such a class.
std::optional<Status> Tracer::class_getattr(const Value& cls, const std::string& name, bool has) {
  PyObject* o = cls.obj.get();
  if (!PyType_Check(o) || Py_TYPE(o) != &PyType_Type || cls.reg >= 0 || cls.path_slot >= 0) return std::nullopt;
  PyRef key = interned_name(name);
  const bool found = _PyType_Lookup(reinterpret_cast<PyTypeObject*>(o), key.get()) != nullptr ||
                     _PyType_Lookup(&PyType_Type, key.get()) != nullptr;
  if (!found || has) {
    if (!has || !guards().add_class_unchanged(o)) return std::nullopt;  // a missing one raises: getattr's own steps
    push(Value::constant(PyRef::borrow(found ? Py_True : Py_False)));
    return ok();
  }
  return load_attr(cls, name);
}

}  // namespace fj::interp
