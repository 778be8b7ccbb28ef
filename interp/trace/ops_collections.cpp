// collections.OrderedDict and collections.defaultdict made in the frame: dict values
// (ValueKind::Dict) whose `obj` is the class, and for a defaultdict its
// default_factory (Value::factory). The frame builds and changes them as it does its
// dicts; what differs is here: a missing key of a defaultdict calls the factory (traced)
// and stores what it returns; OrderedDict has move_to_end and popitem(last=); copy()
// and `d | e` keep the class; type(), isinstance and class patterns see the class; and
// where one leaves the trace the plan makes it with its class (dict_maker). Values
// that would compute with it as a plain dict (knowable, ==, repr) refuse a dict with a
// class.
#include <algorithm>
#include <iterator>

#include "interp/trace/tracer.h"

namespace fj::interp {
namespace {

PyObject* collections_class(const char* name) {
  PyObject* mod = PyImport_ImportModule("collections");
  PyObject* cls = mod ? PyObject_GetAttrString(mod, name) : nullptr;  // kept for the process
  Py_XDECREF(mod);
  if (cls == nullptr) guards::clear_error();
  return cls;
}

}  // namespace

PyObject* ordered_dict_class() {
  static PyObject* cls = collections_class("OrderedDict");
  return cls;
}

PyObject* default_dict_class() {
  static PyObject* cls = collections_class("defaultdict");
  return cls;
}

// OrderedDict(...) / defaultdict(factory, ...): a new dict of that class, filled as
// dict.update fills one. nullopt: not one of these classes.
std::optional<Status> Tracer::call_collection(const CallSite& c) {
  if (c.callable.kind != ValueKind::Const || is_opaque(c.callable)) return std::nullopt;
  PyObject* cls = c.callable.obj.get();
  if (cls == nullptr || (cls != ordered_dict_class() && cls != default_dict_class())) return std::nullopt;
  const size_t nkw = c.kw_names ? static_cast<size_t>(PyTuple_GET_SIZE(c.kw_names.get())) : 0;
  Value d = Value::sequence(ValueKind::Dict, {});
  d.obj = c.callable.obj;
  d.identity = next_identity_++;
  std::vector<Value> args = c.args;
  if (cls == default_dict_class() && c.args.size() > nkw) {  // the factory: positional only
    const Value& f = c.args[0];
    const bool known = f.kind == ValueKind::Const && !is_opaque(f) && f.reg < 0;
    if (!known || (!is_none(f) && !PyCallable_Check(f.obj.get()))) {
      return unsupported("a defaultdict whose default_factory is " + describe(f) + " (not supported yet)");
    }
    if (!is_none(f)) d.factory = std::make_shared<const Value>(f);
    args.erase(args.begin());
  }
  push(d);
  args.insert(args.begin(), top());
  std::optional<Status> s = dict_change_method("update", args, c.kw_names.get());
  if (!s || s->failed()) {
    pop();
    return s ? std::move(*s) : unsupported("construction of " + describe(c.callable) + " with these arguments (not supported yet)");
  }
  pop();  // update's None; the dict stays
  return ok();
}

// d[key] of a defaultdict without the key: factory() (traced), stored and pushed.
Status Tracer::default_dict_missing(const Value& d, const Value& key) {
  FJ_TRY(call_value(*d.factory, {}));
  const Value made = top();
  return dict_store(dict_now(d), key, made);
}

// OrderedDict's own methods: move_to_end(key, last=True), popitem(last=True).
// nullopt: not one of these.
std::optional<Status> Tracer::ordered_dict_method(const std::string& name, const std::vector<Value>& args,
                                                  PyObject* kw_names) {
  const Value& d = args[0];
  if (d.obj.get() != ordered_dict_class() || (name != "move_to_end" && name != "popitem")) return std::nullopt;
  const size_t nkw = kw_names ? static_cast<size_t>(PyTuple_GET_SIZE(kw_names)) : 0;
  const size_t npos = args.size() - nkw;
  const size_t nkey = name == "move_to_end" ? 1 : 0;
  if (npos < 1 + nkey || npos > 2 + nkey || nkw > 1 || (nkw == 1 && npos != 1 + nkey) ||
      (nkw == 1 && PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kw_names, 0), "last") != 0)) {
    return unsupported("OrderedDict." + name + "() with these arguments (CPython raises TypeError)");
  }
  bool last = true;
  if (args.size() > 1 + nkey) FJ_TRY(truth(args.back(), &last));
  if (d.items.empty() && name == "popitem") return unsupported("popitem() of an empty OrderedDict (CPython raises KeyError)");
  Value key;
  long at = last ? static_cast<long>(d.items.size()) - 2 : 0;
  if (nkey == 1) {
    FJ_TRY(dict_key(args[1], "OrderedDict.move_to_end()", &key));
    at = dict_find(d, key.obj.get());
    if (at < 0) return raise_key_error(key);
  }
  FJ_TRY(may_change_dict(d));
  Value after = d;
  after.source = Source{};  // built from its items from now on
  const auto first = after.items.begin() + at;
  std::vector<Value> pair(first, first + 2);
  after.items.erase(first, first + 2);
  if (nkey == 1) {
    after.items.insert(last ? after.items.end() : after.items.begin(), pair.begin(), pair.end());
  }
  replace_everywhere(after);
  if (nkey == 1) {
    push(Value::constant(PyRef::borrow(Py_None)));
  } else {
    Value out = Value::sequence(ValueKind::Tuple, std::move(pair));
    push(std::move(out));
  }
  return ok();
}

// What makes an empty dict of d's class where the plan builds d (PlanValue::Dict's
// obj): the class, or functools.partial(defaultdict, factory). Null for a plain dict.
Status Tracer::dict_maker(const Value& d, PyRef* out) {
  if (!d.obj) return ok();
  if (d.obj.get() != default_dict_class() || !d.factory) {
    *out = d.obj;
    return ok();
  }
  const Value& f = *d.factory;
  if (f.fresh) return unsupported("a defaultdict whose default_factory the frame made, returned or live at a graph break");
  static PyObject* partial = [] {
    PyObject* mod = PyImport_ImportModule("functools");
    PyObject* p = mod ? PyObject_GetAttrString(mod, "partial") : nullptr;  // kept for the process
    Py_XDECREF(mod);
    return p;
  }();
  *out = partial ? PyRef::steal(PyObject_CallFunctionObjArgs(partial, d.obj.get(), f.obj.get(), nullptr)) : PyRef();
  if (!*out) {
    guards::clear_error();
    return unsupported("cannot make the defaultdict's maker");
  }
  return ok();
}

// d.name of a dict the frame holds, for a method of dict (or of its class) that
// call_dict_method answers: (method, d), as LOAD_METHOD pushes them. nullopt: not one.
std::optional<Status> Tracer::dict_method(const Value& d, const std::string& name) {
  if (d.kind != ValueKind::Dict) return std::nullopt;
  static const char* const kNames[] = {"get", "keys", "values", "items", "pop", "copy", "update", "setdefault", "popitem", "clear"};
  const bool known = std::any_of(std::begin(kNames), std::end(kNames), [&](const char* n) { return name == n; }) ||
                     (name == "move_to_end" && d.obj.get() == ordered_dict_class());
  if (!known) return std::nullopt;
  Value method = Value::tensor_method(name);  // called by CALL (call_dict_method)
  PyRef key = PyRef::steal(PyUnicode_InternFromString(name.c_str()));
  auto* type = reinterpret_cast<PyTypeObject*>(d.obj ? d.obj.get() : reinterpret_cast<PyObject*>(&PyDict_Type));
  method.obj = PyRef::borrow(_PyType_Lookup(type, key.get()));
  push(std::move(method));
  push(d);
  return ok();
}

}  // namespace fj::interp
