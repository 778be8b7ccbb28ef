// collections.OrderedDict, defaultdict and Counter made in the frame: dict values
// (ValueKind::Dict) whose `obj` is the class, and for a defaultdict its
// default_factory (Value::factory). The frame builds and changes them as it does its
// dicts; what differs is here: a missing key of a defaultdict calls the factory (traced)
// and stores what it returns; OrderedDict has move_to_end and popitem(last=); copy()
// and `d | e` keep the class; a Counter counts (update, most_common, +, a missing key
// is 0, del of one is nothing); type(), isinstance and class patterns see the class; and
// where one leaves the trace the plan makes it with its class (dict_maker). Values
// that would compute with it as a plain dict (knowable, ==, repr) refuse a dict with a
// class.
#include <algorithm>
#include <iterator>

#include "interp/trace/tracer.h"

#include <utility>

#include <opcode.h>

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

PyObject* deque_class() {
  static PyObject* cls = collections_class("deque");
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
  if (std::optional<Status> s = DequeCalls::construct(*this, c)) return s;
  PyObject* cls = c.callable.obj.get();
  if (cls == nullptr || (cls != ordered_dict_class() && cls != default_dict_class() && cls != counter_class())) {
    return std::nullopt;
  }
  const size_t nkw = c.kw_names ? static_cast<size_t>(PyTuple_GET_SIZE(c.kw_names.get())) : 0;
  Value d = Value::sequence(ValueKind::Dict, {});
  d.obj = c.callable.obj;
  d.identity = next_identity_++;
  if (cls == counter_class()) {  // Counter(iterable or mapping): counted
    if (nkw != 0 || c.args.size() > 1) return unsupported("Counter() with these arguments (not supported yet)");
    push(d);
    if (c.args.size() == 1) {
      Status s = counter_add(d, c.args[0]);
      if (s.failed()) {
        pop();
        return s;
      }
    }
    return ok();
  }
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
  if (!d.obj || d.obj.get() != ordered_dict_class() || (name != "move_to_end" && name != "popitem")) return std::nullopt;
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
                     (d.obj && name == "move_to_end" && d.obj.get() == ordered_dict_class()) ||
                     (d.obj && name == "most_common" && d.obj.get() == counter_class());
  if (!known) return std::nullopt;
  Value method = Value::tensor_method(name);  // called by CALL (call_dict_method)
  PyRef key = PyRef::steal(PyUnicode_InternFromString(name.c_str()));
  auto* type = reinterpret_cast<PyTypeObject*>(d.obj ? d.obj.get() : reinterpret_cast<PyObject*>(&PyDict_Type));
  method.obj = PyRef::borrow(_PyType_Lookup(type, key.get()));
  push(std::move(method));
  push(d);
  return ok();
}

// d.keys() & s, |, -, ^ (either side) of a keys view whose keys are constants and a
// set of constants or another such view: the new set, computed now by CPython on a
// view of the same keys (a set the frame made: fresh). nullopt: not such operands.
std::optional<Status> Tracer::dict_view_set_op(int nb_op, const Value& lhs, const Value& rhs) {
  if (nb_op != NB_AND && nb_op != NB_OR && nb_op != NB_SUBTRACT && nb_op != NB_XOR) return std::nullopt;
  const auto keys_view = [&](const Value& v) {
    return v.kind == ValueKind::Iterator && v.method == "keys" && v.next == 0 && !run_ahead_stale(v) &&
           std::all_of(v.items.begin(), v.items.end(), [](const Value& k) { return plain_key(k); });
  };
  const auto as_set = [&](const Value& v) -> PyRef {
    if (keys_view(v)) {  // the keys view of a dict of the same keys in the same order
      PyRef d = PyRef::steal(PyDict_New());
      for (size_t k = 0; d && k < v.items.size(); ++k) {
        if (PyDict_SetItem(d.get(), v.items[k].obj.get(), Py_None) < 0) d = PyRef();
      }
      return d ? PyRef::steal(PyObject_CallMethod(d.get(), "keys", nullptr)) : PyRef();
    }
    const bool known_set = v.kind == ValueKind::Const && !is_opaque(v) && v.reg < 0 &&
                           (PyFrozenSet_CheckExact(v.obj.get()) || (PySet_CheckExact(v.obj.get()) && v.fresh));
    return known_set ? v.obj : PyRef();
  };
  if (!keys_view(lhs) && !keys_view(rhs)) return std::nullopt;
  const PyRef a = as_set(lhs), b = as_set(rhs);
  PyRef out = a && b ? PyRef::steal(nb_op == NB_AND ? PyNumber_And(a.get(), b.get())
                                    : nb_op == NB_OR ? PyNumber_Or(a.get(), b.get())
                                    : nb_op == NB_SUBTRACT ? PyNumber_Subtract(a.get(), b.get())
                                                          : PyNumber_Xor(a.get(), b.get()))
                     : PyRef();
  if (!out || !PySet_CheckExact(out.get())) {  // a view and a frozenset give a set, as eager's
    guards::clear_error();
    return std::nullopt;
  }
  Value v = Value::constant(std::move(out));
  v.fresh = true;  // a set the frame made
  push(std::move(v));
  return ok();
}


// ---- collections.Counter: a dict of its class whose values are counts ----

namespace {

// A count the trace knows: a Python int constant.
std::optional<long long> known_count(const Value& v) {
  if (v.kind != ValueKind::Const || v.opaque || !PyLong_CheckExact(v.obj.get())) return std::nullopt;
  int overflow = 0;
  const long long n = PyLong_AsLongLongAndOverflow(v.obj.get(), &overflow);
  if (overflow != 0) return std::nullopt;
  return n;
}

Value count_value(long long n) { return Value::constant(PyRef::steal(PyLong_FromLongLong(n))); }

}  // namespace

PyObject* counter_class() {
  static PyObject* cls = collections_class("Counter");
  return cls;
}

// Counter.update(source): each item of an iterable counted once, or each count of a
// mapping (a dict the frame holds) added, as Counter's own update does. Counts must be
// int constants; keys are made constants as dict keys are (dict_key).
Status Tracer::counter_add(const Value& c, const Value& source) {
  std::vector<Value> pairs;  // key, count, ...
  if (source.kind == ValueKind::Dict) {
    pairs = source.items;
  } else {
    std::vector<Value> items;
    FJ_TRY(star_items(source, &items));
    for (const Value& item : items) pairs.insert(pairs.end(), {item, count_value(1)});
  }
  Value now = dict_now(c);
  for (size_t j = 0; j + 1 < pairs.size(); j += 2) {
    Value key;
    FJ_TRY(dict_key(pairs[j], "Counter()", &key));
    const long at = dict_find(now, key.obj.get());
    const std::optional<long long> add = known_count(pairs[j + 1]);
    const std::optional<long long> had = at >= 0 ? known_count(now.items[static_cast<size_t>(at) + 1]) : 0LL;
    if (!add || !had) return unsupported("a Counter with counts that are not int constants (not supported yet)");
    FJ_TRY(dict_store(now, key, count_value(*had + *add)));
    now = dict_now(c);
  }
  return ok();
}

// Counter's methods that differ from dict's: update(iterable or mapping),
// most_common([n]). nullopt: not one of these.
std::optional<Status> Tracer::counter_method(const std::string& name, const std::vector<Value>& args, PyObject* kw_names) {
  const Value& c = args[0];
  if (!c.obj || c.obj.get() != counter_class()) return std::nullopt;
  if (kw_names != nullptr) return unsupported("keyword arguments to Counter." + name + "() (not supported yet)");
  if (name == "update" && args.size() <= 2) {
    if (args.size() == 2) FJ_TRY(counter_add(c, args[1]));
    push(Value::constant(PyRef::borrow(Py_None)));
    return ok();
  }
  if (name != "most_common" || args.size() > 2) {
    // what dict's own methods do alike (get, keys, pop, copy...); others are not traced
    return name == "update" ? std::optional<Status>(unsupported("Counter.update() with these arguments")) : std::nullopt;
  }
  std::vector<std::pair<long long, size_t>> order;  // (count, position): a stable sort, largest first
  for (size_t j = 0; j + 1 < c.items.size(); j += 2) {
    const std::optional<long long> n = known_count(c.items[j + 1]);
    if (!n) return unsupported("most_common() of counts that are not int constants (not supported yet)");
    order.emplace_back(*n, j);
  }
  std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  size_t keep = order.size();
  if (args.size() == 2 && !is_none(args[1])) {
    const std::optional<long long> n = known_count(args[1]);
    if (!n) return unsupported("most_common() of " + describe(args[1]) + " (not supported yet)");
    keep = *n < 0 ? 0 : std::min(keep, static_cast<size_t>(*n));
  }
  Value out = Value::sequence(ValueKind::List, {});
  out.identity = next_identity_++;
  for (size_t k = 0; k < keep; ++k) {
    Value pair = Value::sequence(ValueKind::Tuple, {c.items[order[k].second], c.items[order[k].second + 1]});
    pair.identity = next_identity_++;
    out.items.push_back(std::move(pair));
  }
  push(std::move(out));
  return ok();
}

// a + b of two Counters: the positive sums, in a's order then b's new keys.
std::optional<Status> Tracer::counter_sum(int nb_op, const Value& a, const Value& b) {
  if (nb_op != NB_ADD || a.kind != ValueKind::Dict || b.kind != ValueKind::Dict || !a.obj || !b.obj ||
      a.obj.get() != counter_class() || b.obj.get() != counter_class()) {
    return std::nullopt;
  }
  Value out = Value::sequence(ValueKind::Dict, {});
  out.obj = a.obj;
  out.identity = next_identity_++;
  const auto add_pair = [&](const Value& key, long long n) {
    if (n > 0) out.items.insert(out.items.end(), {key, count_value(n)});
  };
  for (size_t j = 0; j + 1 < a.items.size(); j += 2) {
    const long at = dict_find(b, a.items[j].obj.get());
    const std::optional<long long> x = known_count(a.items[j + 1]);
    const std::optional<long long> y = at >= 0 ? known_count(b.items[static_cast<size_t>(at) + 1]) : 0LL;
    if (!x || !y) return unsupported("+ of Counters with counts that are not int constants (not supported yet)");
    add_pair(a.items[j], *x + *y);
  }
  for (size_t j = 0; j + 1 < b.items.size(); j += 2) {
    if (dict_find(a, b.items[j].obj.get()) >= 0) continue;
    const std::optional<long long> y = known_count(b.items[j + 1]);
    if (!y) return unsupported("+ of Counters with counts that are not int constants (not supported yet)");
    add_pair(b.items[j], *y);
  }
  push(std::move(out));
  return ok();
}

}  // namespace fj::interp
