// Builtins that call a function the frame passes them: sorted / min / max / list.sort
// with key=, map, filter, functools.reduce, itertools.accumulate, and operator's
// functions and getters (operator.add, itemgetter, attrgetter, methodcaller). Each
// call of the function is traced as CALL traces it (call_value), in the order eager
// makes them; map and filter run ahead of their consumer, as generator expressions do.
// Structural functions of itertools (chain, product, islice, ...) run on stand-ins for
// the items they never look at.
#include "interp/trace/tracer.h"

#include <algorithm>
#include <unordered_map>

namespace fj::interp {
namespace {

bool is(const Value& v, PyObject* o) { return o != nullptr && v.kind == ValueKind::Const && !is_opaque(v) && v.obj.get() == o; }

// The keyword arguments of a call, by name; positional ones stay in `pos`.
std::unordered_map<std::string, Value> keywords(const std::vector<Value>& args, PyObject* kw_names, std::vector<Value>* pos) {
  std::unordered_map<std::string, Value> kw;
  const size_t nkw = kw_names ? static_cast<size_t>(PyTuple_GET_SIZE(kw_names)) : 0;
  pos->assign(args.begin(), args.end() - static_cast<std::ptrdiff_t>(nkw));
  for (size_t k = 0; k < nkw; ++k) {
    kw[guards::utf8_lossy(PyTuple_GET_ITEM(kw_names, static_cast<Py_ssize_t>(k)))] = args[pos->size() + k];
  }
  return kw;
}

// operator.add & co: the BINARY_OP argument of each (name_of: binary_operator_name),
// or COMPARE_OP's (compare_operator_name); -1: none.
int operator_index(PyObject* fn, const char* (*name_of)(int), int count) {
  static PyObject* module = PyImport_ImportModule("_operator");  // operator's functions are _operator's
  if (fn == nullptr || !PyCFunction_Check(fn) || PyCFunction_GET_SELF(fn) != module) return -1;
  const char* name = reinterpret_cast<PyCFunctionObject*>(fn)->m_ml->ml_name;
  for (int i = 0; i < count; ++i) {
    if (std::string_view(name) == name_of(i)) return i;
  }
  return -1;
}

// itertools' functions that only move their arguments' items around.
bool is_structural(PyObject* fn) {
  static const std::vector<PyObject*> fns = [] {
    std::vector<PyObject*> v;
    for (const char* name : {"chain", "islice", "pairwise", "combinations", "combinations_with_replacement",
                             "permutations", "product", "zip_longest", "repeat"}) {
      if (PyObject* f = lookup_attr("itertools", name)) v.push_back(f);  // kept for the process
    }
    return v;
  }();
  return std::find(fns.begin(), fns.end(), fn) != fns.end();
}

}  // namespace

// callable(*args) for a builtin's handler: traced as CALL traces it, never as a graph
// break (the handler's own call could not resume in CPython); the result is pushed.
Status Tracer::call_value(const Value& callable, std::vector<Value> args) {
  CallSite c;
  c.ins = last_ins_;
  c.no_break = true;
  if (callable.kind == ValueKind::TensorMethod && callable.items.size() == 1) {  // x.sub read as a value
    args.insert(args.begin(), callable.items[0]);
    c.callable = callable;
    c.callable.items.clear();
  } else {
    c.callable = callable;
  }
  c.args = std::move(args);
  return dispatch_call(c);
}

// A call for a handler whose function must change nothing the trace holds (a dict, a
// list, an object, a set, a tensor in place): the handler took the items before the
// calls, as eager's lazy iterators (map, filter) and key functions would not. `lazy`:
// eager makes the call later, so its exception must not reach a handler of the frame now.
Status Tracer::call_unchanging(const Value& callable, std::vector<Value> args, bool lazy, const char* what) {
  const long before = changes_ + writes_;
  Status s = call_value(callable, std::move(args));
  if (s.failed() && lazy && raising_) {
    raising_.reset();
    return unsupported(std::string("an exception of the function ") + what + " runs ahead of its consumer (not supported yet)");
  }
  FJ_TRY(std::move(s));
  if (changes_ + writes_ != before) {
    return unsupported(std::string("a function that changes values, called by ") + what + " (not supported yet)");
  }
  return ok();
}

// BINARY_OP / COMPARE_OP as an instruction with this argument would run it.
Status Tracer::run_operator(Status (Tracer::*handler)(const Instruction&), int arg, const Value& a, const Value& b) {
  Instruction ins = *last_ins_;
  ins.arg = arg;
  push(a);
  push(b);
  return (this->*handler)(ins);
}

// operator.add(a, b), operator.lt(a, b), itemgetter(k)(x), attrgetter(n)(x),
// methodcaller(n, ...)(x): what the operator or the getter does, traced.
std::optional<Status> Tracer::call_operator(const CallSite& c) {
  if (c.callable.kind != ValueKind::Const || is_opaque(c.callable) || c.kw_names) return std::nullopt;
  PyObject* fn = c.callable.obj.get();
  if (int nb = operator_index(fn, binary_operator_name, 13); nb >= 0 && c.args.size() == 2) {
    return run_operator(&Tracer::op_binary_op, nb, c.args[0], c.args[1]);
  }
  if (int cmp = operator_index(fn, compare_operator_name, 6); cmp >= 0 && c.args.size() == 2) {
    return run_operator(&Tracer::op_compare_op, cmp, c.args[0], c.args[1]);
  }
  static PyObject* itemgetter = operator_function("itemgetter");
  static PyObject* methodcaller = operator_function("methodcaller");
  PyObject* tp = reinterpret_cast<PyObject*>(Py_TYPE(fn));
  if (c.args.size() != 1 || !is_operator_getter_class(tp)) return std::nullopt;
  PyRef reduced = PyRef::steal(PyObject_CallMethod(fn, "__reduce__", nullptr));
  PyObject* params = reduced && PyTuple_Check(reduced.get()) && PyTuple_GET_SIZE(reduced.get()) >= 2
                         ? PyTuple_GET_ITEM(reduced.get(), 1)
                         : nullptr;
  if (params == nullptr || !PyTuple_Check(params) || PyTuple_GET_SIZE(reduced.get()) != 2 ||
      PyTuple_GET_ITEM(reduced.get(), 0) != tp || (tp == methodcaller && PyTuple_GET_SIZE(params) == 0)) {
    guards::clear_error();
    return std::nullopt;  // methodcaller with keywords: a partial
  }
  const Value& x = c.args[0];
  if (tp == methodcaller) {  // x.name(*args), as LOAD_METHOD and CALL run it
    const std::string name = FJ_TRY(guards::utf8_of(PyTuple_GET_ITEM(params, 0)));
    FJ_TRY(load_method(x, name));
    Value self = pop();
    Value method = pop();
    std::vector<Value> args;
    if (method.kind != ValueKind::Null) args.push_back(std::move(self));
    for (Py_ssize_t i = 1; i < PyTuple_GET_SIZE(params); ++i) {
      args.push_back(Value::constant(PyRef::borrow(PyTuple_GET_ITEM(params, i))));
    }
    return call_value(method.kind != ValueKind::Null ? method : self, std::move(args));
  }
  std::vector<Value> got;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(params); ++i) {
    PyObject* p = PyTuple_GET_ITEM(params, i);
    if (tp == itemgetter) {
      push(x);
      push(Value::constant(PyRef::borrow(p)));
      FJ_TRY(op_binary_subscr(*last_ins_));
    } else {  // a dotted name: one LOAD_ATTR per step
      push(x);
      const std::string path = FJ_TRY(guards::utf8_of(p));
      for (size_t start = 0; start <= path.size();) {
        const size_t dot = std::min(path.find('.', start), path.size());
        FJ_TRY(load_attr(pop(), path.substr(start, dot - start)));
        start = dot + 1;
      }
    }
    got.push_back(pop());
  }
  if (got.size() == 1) {
    push(std::move(got[0]));
  } else {
    Value t = Value::sequence(ValueKind::Tuple, std::move(got));
    t.identity = next_identity_++;
    push(std::move(t));
  }
  return ok();
}

// key(item) of each item, as Python objects compared now (symbolic numbers made
// concrete, guarded). key None: the items themselves.
Status Tracer::sort_keys(const Value* key, const std::vector<Value>& items, PyRef* keys) {
  *keys = PyRef::steal(PyList_New(0));
  KnownObjects made;
  for (const Value& item : items) {
    Value k = item;
    if (key != nullptr && !is_none(*key)) {
      FJ_TRY(call_unchanging(*key, {item}, false, "key="));
      k = pop();
    }
    if (!knowable(k, true)) return unsupported("a sort key " + describe(k) + " (not supported yet)");
    PyRef o;
    FJ_TRY(known_object(k, made, &o));
    PyList_Append(keys->get(), o.get());
  }
  return ok();
}

// The positions of the items in the order sorted(keys, reverse=) gives: Python's own
// sort, stable, with its exceptions (a str compared with an int).
Status Tracer::sorted_order(PyObject* keys, bool reverse, std::vector<size_t>* order) {
  static PyObject* sorted = lookup_attr("builtins", "sorted");
  PyRef range = PyRef::steal(PyObject_CallFunction(reinterpret_cast<PyObject*>(&PyRange_Type), "n", PyList_GET_SIZE(keys)));
  PyRef getitem = PyRef::steal(PyObject_GetAttrString(keys, "__getitem__"));
  PyRef kw = PyRef::steal(Py_BuildValue("{sOsO}", "key", getitem.get(), "reverse", reverse ? Py_True : Py_False));
  PyRef args = range ? PyRef::steal(PyTuple_Pack(1, range.get())) : PyRef();
  PyRef r = args && kw ? PyRef::steal(PyObject_Call(sorted, args.get(), kw.get())) : PyRef();
  if (!r) return raise_python_error("sorted() raised (CPython raises it)");
  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(r.get()); ++i) order->push_back(PyLong_AsSize_t(PyList_GET_ITEM(r.get(), i)));
  return ok();
}

// A bool argument known now.
Status Tracer::known_bool(const Value* v, bool* out) {
  *out = false;
  if (v == nullptr) return ok();
  KnownObjects made;
  PyRef o;
  if (!knowable(*v, true)) return unsupported("a flag " + describe(*v) + " (not supported yet)");
  FJ_TRY(known_object(*v, made, &o));
  const int t = PyObject_IsTrue(o.get());
  if (t < 0) return raise_python_error("truth of a flag raised");
  *out = t == 1;
  return ok();
}

// sorted(it, key=, reverse=), min / max (it or several arguments, key=, default=).
std::optional<Status> Tracer::call_sorted_min_max(const CallSite& c) {
  static PyObject* sorted = lookup_attr("builtins", "sorted");
  static PyObject* min = lookup_attr("builtins", "min");
  static PyObject* max = lookup_attr("builtins", "max");
  const bool is_sorted = is(c.callable, sorted);
  if (!is_sorted && !is(c.callable, min) && !is(c.callable, max)) return std::nullopt;
  std::vector<Value> pos;
  auto kw = keywords(c.args, c.kw_names.get(), &pos);
  const Value* key = kw.count("key") ? &kw["key"] : nullptr;
  const Value* reverse_arg = kw.count("reverse") ? &kw["reverse"] : nullptr;
  const Value* dflt = kw.count("default") ? &kw["default"] : nullptr;
  if (pos.empty() || kw.size() != static_cast<size_t>((key != nullptr) + (reverse_arg != nullptr) + (dflt != nullptr)) ||
      (is_sorted && (pos.size() != 1 || dflt != nullptr)) || (!is_sorted && reverse_arg != nullptr) ||
      (dflt != nullptr && pos.size() != 1)) {  // min(a, b, default=) raises TypeError in eager
    return std::nullopt;
  }
  if (key == nullptr && !is_sorted) return std::nullopt;  // min_or_max and the fold take those
  std::vector<Value> items;
  if (pos.size() == 1) {
    if (star_items(pos[0], &items).failed()) return std::nullopt;
  } else {
    items = pos;
  }
  bool reverse = false;
  FJ_TRY(known_bool(reverse_arg, &reverse));
  PyRef keys;
  FJ_TRY(sort_keys(key, items, &keys));
  if (!is_sorted && items.empty()) {
    if (dflt != nullptr) {
      push(*dflt);
      return ok();
    }
    PyRef r = PyRef::steal(PyObject_CallOneArg(c.callable.obj.get(), keys.get()));  // eager's ValueError
    if (r) return unsupported("min() or max() of nothing did not raise");
    return raise_python_error("min() or max() of nothing (CPython raises)");
  }
  if (!is_sorted) {  // CPython's scan: an item replaces the best when its key compares < (min) or > (max)
    const int op = is(c.callable, max) ? Py_GT : Py_LT;
    size_t best = 0;
    for (size_t i = 1; i < items.size(); ++i) {
      const int better = PyObject_RichCompareBool(PyList_GET_ITEM(keys.get(), static_cast<Py_ssize_t>(i)),
                                                  PyList_GET_ITEM(keys.get(), static_cast<Py_ssize_t>(best)), op);
      if (better < 0) return raise_python_error("min() or max() raised (CPython raises it)");
      if (better == 1) best = i;
    }
    push(items[best]);
    return ok();
  }
  std::vector<size_t> order;
  FJ_TRY(sorted_order(keys.get(), reverse, &order));
  Value out = Value::sequence(ValueKind::List, {});
  for (size_t i : order) out.items.push_back(items[i]);
  out.identity = next_identity_++;
  push(std::move(out));
  return ok();
}

// lst.sort(key=, reverse=) of a list the frame built.
Status Tracer::list_sort(const CallSite& c) {
  std::vector<Value> pos;
  auto kw = keywords(c.args, c.kw_names.get(), &pos);
  if (pos.size() != 1) return unsupported("list.sort() with positional arguments (CPython raises)");
  const Value* key = kw.count("key") ? &kw["key"] : nullptr;
  bool reverse = false;
  FJ_TRY(known_bool(kw.count("reverse") ? &kw["reverse"] : nullptr, &reverse));
  const std::vector<Value> items = pos[0].items;
  PyRef keys;
  FJ_TRY(sort_keys(key, items, &keys));
  std::vector<size_t> order;
  FJ_TRY(sorted_order(keys.get(), reverse, &order));
  std::vector<Value> now;
  for (size_t i : order) now.push_back(items[i]);
  FJ_TRY(set_list_items(pos[0], std::move(now), "list.sort()"));
  push(Value::constant(PyRef::borrow(Py_None)));
  return ok();
}

// map(f, *its), filter(f, it), functools.reduce(f, it[, initial]),
// itertools.accumulate(it[, f], initial=).
std::optional<Status> Tracer::call_function_applying(const CallSite& c) {
  static PyObject* map = lookup_attr("builtins", "map");
  static PyObject* filter = lookup_attr("builtins", "filter");
  static PyObject* reduce = lookup_attr("functools", "reduce");
  static PyObject* accumulate = lookup_attr("itertools", "accumulate");
  const bool is_map = is(c.callable, map), is_filter = is(c.callable, filter), is_reduce = is(c.callable, reduce),
             is_acc = is(c.callable, accumulate);
  if (!is_map && !is_filter && !is_reduce && !is_acc) return std::nullopt;
  std::vector<Value> pos;
  auto kw = keywords(c.args, c.kw_names.get(), &pos);
  if ((!is_acc && !kw.empty()) || (is_acc && (kw.size() > 1 || (kw.size() == 1 && !kw.count("initial"))))) return std::nullopt;
  if (pos.size() < (is_acc ? 1u : 2u) || (is_filter && pos.size() != 2) || (is_reduce && pos.size() > 3) ||
      (is_acc && pos.size() > 2)) {
    return std::nullopt;
  }
  const Value fn = is_acc ? (pos.size() == 2 ? pos[1] : Value::null()) : pos[0];
  std::vector<std::vector<Value>> its;
  for (size_t i = is_acc ? 0 : 1; i < (is_acc ? 1 : is_reduce ? 2 : pos.size()); ++i) {
    its.emplace_back();
    if ((!is_reduce && iterator_held(pos[i])) || star_items(pos[i], &its.back()).failed()) return std::nullopt;
  }
  const int writes_before = writes_;
  std::vector<Value> out;
  if (is_map) {
    size_t n = its[0].size();
    for (const auto& it : its) n = std::min(n, it.size());
    for (size_t k = 0; k < n; ++k) {
      std::vector<Value> args;
      for (const auto& it : its) args.push_back(it[k]);
      FJ_TRY(call_unchanging(fn, std::move(args), true, "map()"));
      out.push_back(pop());
    }
  } else if (is_filter) {
    for (const Value& item : its[0]) {
      Value keep = item;
      if (!is_none(fn)) {
        FJ_TRY(call_unchanging(fn, {item}, true, "filter()"));
        keep = pop();
      }
      bool t = false;
      FJ_TRY(truth(keep, &t));
      if (t) out.push_back(item);
    }
  } else {
    const Value* initial = is_reduce ? (pos.size() == 3 ? &pos[2] : nullptr) : (kw.count("initial") ? &kw["initial"] : nullptr);
    if (initial != nullptr && is_none(*initial) && is_acc) initial = nullptr;
    std::vector<Value> items = its[0];
    if (initial != nullptr) items.insert(items.begin(), *initial);
    if (items.empty() && is_reduce) {
      return unsupported("reduce() of an empty sequence with no initial value (CPython raises)");
    }
    for (size_t k = 0; k < items.size(); ++k) {
      if (k == 0) {
        out.push_back(items[0]);
        continue;
      }
      if (fn.kind == ValueKind::Null) FJ_TRY(run_operator(&Tracer::op_binary_op, 0, out.back(), items[k]));
      else FJ_TRY(call_unchanging(fn, {out.back(), items[k]}, is_acc, is_acc ? "itertools.accumulate()" : "functools.reduce()"));
      out.push_back(pop());
    }
    if (is_reduce) {
      push(out.back());
      return ok();
    }
  }
  // map and filter run ahead of their consumer, as generator expressions do: not where
  // the function writes tensors in place, and not past a write of the consumer (FOR_ITER).
  if (writes_ != writes_before) return unsupported("map() or filter() of a function that writes tensors in place (not supported yet)");
  Value it;
  it.kind = ValueKind::Iterator;
  it.items = std::move(out);
  it.writes = static_cast<int>(write_log_.size());  // reads: anything
  it.identity = own_iterator_id();
  push(std::move(it));
  return ok();
}

// An argument of a structural call: a known scalar as itself (a symbolic number made
// concrete, guarded), a container as a list of its items, and anything else as a stand-in
// (a new object the function never looks into) that maps back to the value.
Status Tracer::structural_object(const Value& v, StructuralRole role, KnownObjects& made, PyRef* out) {
  const bool iterated = role == StructuralRole::Iterated;
  if (v.kind == ValueKind::Const && knowable(v, false)) return known_object(v, made, out);
  if (role == StructuralRole::Argument && v.kind == ValueKind::Sym) return known_object(v, made, out);  // a count
  if (v.kind == ValueKind::Tuple || v.kind == ValueKind::List || v.kind == ValueKind::Iterator || v.kind == ValueKind::Dict) {
    if (iterator_held(v)) return unsupported("itertools over an iterator the frame holds (not supported yet)");
    std::vector<Value> items;
    if (star_items(v, &items).failed()) return unsupported("the items of " + describe(v));
    PyRef list = PyRef::steal(PyList_New(0));
    for (const Value& item : items) {
      PyRef o;
      FJ_TRY(structural_object(item, StructuralRole::Item, made, &o));
      PyList_Append(list.get(), o.get());
    }
    if (v.kind == ValueKind::Tuple) list = PyRef::steal(PyList_AsTuple(list.get()));
    if (v.kind == ValueKind::List) made.values.emplace(list.get(), v);
    made.keep.push_back(list);
    *out = std::move(list);
    return ok();
  }
  if (iterated) return unsupported("itertools over " + describe(v) + " (not supported yet)");
  PyRef stand_in = PyRef::steal(PyObject_CallNoArgs(reinterpret_cast<PyObject*>(&PyBaseObject_Type)));
  made.values.emplace(stand_in.get(), v);
  made.keep.push_back(stand_in);
  *out = std::move(stand_in);
  return ok();
}

// itertools.count(start=0, step=1) of ints: an object of the trace (items: the class,
// then "start", "step" and their values), endless, so never iterated here: zip() takes
// as many of its numbers as its other arguments have items (ops_builtins.cpp), where
// nothing else holds it; any other use of it ends the trace.
namespace {
PyObject* count_class() {
  static PyObject* count = lookup_attr("itertools", "count");  // kept for the process
  return count;
}
}  // namespace

bool is_count_object(const Value& v) {
  return v.kind == ValueKind::Object && count_class() != nullptr && v.obj.get() == count_class() && v.items.size() == 5;
}

std::optional<Status> Tracer::count_object(const CallSite& c) {
  if (count_class() == nullptr || c.callable.obj.get() != count_class()) return std::nullopt;
  const size_t nkw = c.kw_names ? static_cast<size_t>(PyTuple_GET_SIZE(c.kw_names.get())) : 0;
  const size_t npos = c.args.size() - nkw;
  Value start = Value::constant(PyRef::steal(PyLong_FromLong(0))), step = Value::constant(PyRef::steal(PyLong_FromLong(1)));
  for (size_t k = 0; k < c.args.size(); ++k) {
    const std::string key = k < npos ? (k == 0 ? "start" : k == 1 ? "step" : "")
                                     : guards::utf8_lossy(PyTuple_GET_ITEM(c.kw_names.get(), static_cast<Py_ssize_t>(k - npos)));
    if (key != "start" && key != "step") return unsupported("itertools.count() with these arguments (CPython raises)");
    const std::optional<jit::SymExpr> e = as_sym(c.args[k]);
    if (!e || e->type() != jit::SymType::Int || is_numpy_scalar(c.args[k]) ||
        (c.args[k].kind == ValueKind::Const && PyBool_Check(c.args[k].obj.get()))) {
      return unsupported("itertools.count() of " + describe(c.args[k]) + " (not supported yet)");
    }
    (key == "start" ? start : step) = c.args[k];
  }
  auto name = [](const char* n) { return Value::constant(PyRef::steal(PyUnicode_InternFromString(n))); };
  Value out = Value::sequence(ValueKind::Object, {c.callable, name("start"), start, name("step"), step});
  out.obj = c.callable.obj;
  out.identity = next_identity_++;
  push(std::move(out));
  return ok();
}

// CALL of a structural itertools function: its iterator's items, now.
std::optional<Status> Tracer::call_structural(const CallSite& c) {
  if (c.callable.kind != ValueKind::Const || is_opaque(c.callable)) return std::nullopt;
  if (std::optional<Status> s = count_object(c)) return s;
  if (!is_structural(c.callable.obj.get())) return std::nullopt;
  KnownObjects made;
  const size_t nkw = c.kw_names ? static_cast<size_t>(PyTuple_GET_SIZE(c.kw_names.get())) : 0;
  const size_t npos = c.args.size() - nkw;
  PyRef pos = PyRef::steal(PyTuple_New(static_cast<Py_ssize_t>(npos)));
  PyRef kw = PyRef::steal(nkw ? PyDict_New() : nullptr);
  static PyObject* repeat = lookup_attr("itertools", "repeat");
  static PyObject* chain = lookup_attr("itertools", "chain");
  static PyObject* product = lookup_attr("itertools", "product");
  static PyObject* zip_longest = lookup_attr("itertools", "zip_longest");
  PyObject* fn = c.callable.obj.get();
  for (size_t i = 0; i < c.args.size(); ++i) {
    PyRef o;
    // which arguments it iterates: the first (not repeat's object), and all of chain's,
    // product's and zip_longest's positional ones; the others are counts or objects
    const bool iterated = i < npos && (i == 0 ? fn != repeat : (fn == chain || fn == product || fn == zip_longest));
    const StructuralRole role = iterated ? StructuralRole::Iterated : StructuralRole::Argument;
    if (structural_object(c.args[i], role, made, &o).failed()) return std::nullopt;
    if (i < npos) PyTuple_SET_ITEM(pos.get(), static_cast<Py_ssize_t>(i), o.release());
    else PyDict_SetItem(kw.get(), PyTuple_GET_ITEM(c.kw_names.get(), static_cast<Py_ssize_t>(i - npos)), o.get());
  }
  PyRef it = PyRef::steal(PyObject_Call(c.callable.obj.get(), pos.get(), kw.get()));
  if (!it) return raise_python_error(describe(c.callable) + " raised (CPython raises it)");
  Value out;
  out.kind = ValueKind::Iterator;
  out.identity = own_iterator_id();
  // Run ahead of its consumer (itertools reads lazily): stale after a change of what
  // its arguments hold (Value::reads).
  out.writes = static_cast<int>(write_log_.size());
  std::vector<Value> read_args = c.args;
  std::vector<Value*> read_roots;
  for (Value& a : read_args) read_roots.push_back(&a);
  out.reads = identities_in(std::move(read_roots));
  while (PyObject* item = PyIter_Next(it.get())) {
    Value v;
    const bool known = known_result(item, made, &v);
    Py_DECREF(item);
    if (!known) return unsupported("an item of " + describe(c.callable) + " the trace cannot hold");
    if (out.items.size() >= kMaxUnroll) return unsupported("an iterator of more than " + std::to_string(kMaxUnroll) + " items");
    out.items.push_back(std::move(v));
  }
  if (PyErr_Occurred()) return raise_python_error(describe(c.callable) + " raised (CPython raises it)");
  push(std::move(out));
  return ok();
}

// functools.partial(f, *args, **kw) made in the frame: an object of the trace (f, its
// arguments as a tuple, its keywords as a dict, read as p.func, p.args, p.keywords);
// calling it calls f with its arguments first and the call's keywords over its own.
namespace {
PyObject* functools_partial() {
  static PyObject* partial = lookup_attr("functools", "partial");
  return partial;
}
}  // namespace

bool is_partial_object(const Value& v) {
  return v.kind == ValueKind::Object && functools_partial() != nullptr && v.obj.get() == functools_partial();
}

std::optional<Status> Tracer::call_partial(const CallSite& c) {
  PyObject* partial = functools_partial();
  if (partial == nullptr) return std::nullopt;
  const size_t nkw = c.kw_names ? static_cast<size_t>(PyTuple_GET_SIZE(c.kw_names.get())) : 0;
  const size_t npos = c.args.size() - nkw;
  auto name = [](const char* n) { return Value::constant(PyRef::steal(PyUnicode_InternFromString(n))); };
  if (c.callable.kind == ValueKind::Const && c.callable.obj.get() == partial) {
    if (npos == 0) return std::nullopt;  // CPython raises
    Value kw = Value::sequence(ValueKind::Dict, {});
    kw.identity = next_identity_++;
    for (size_t k = 0; k < nkw; ++k) {
      kw.items.push_back(Value::constant(PyRef::borrow(PyTuple_GET_ITEM(c.kw_names.get(), static_cast<Py_ssize_t>(k)))));
      kw.items.push_back(c.args[npos + k]);
    }
    Value p = Value::sequence(ValueKind::Object, {c.callable, name("func"), c.args[0], name("args"),
                                                  Value::sequence(ValueKind::Tuple, {c.args.begin() + 1, c.args.begin() + static_cast<std::ptrdiff_t>(npos)}),
                                                  name("keywords"), std::move(kw)});
    p.obj = c.callable.obj;
    p.identity = next_identity_++;
    push(std::move(p));
    return ok();
  }
  if (!is_partial_object(c.callable) || c.callable.items.size() < 7) return std::nullopt;
  const Value& args = c.callable.items[4];
  const Value& kw = c.callable.items[6];
  if (args.kind != ValueKind::Tuple || kw.kind != ValueKind::Dict) return std::nullopt;
  CallSite inner = c;
  inner.callable = c.callable.items[2];
  inner.args.assign(args.items.begin(), args.items.end());
  inner.args.insert(inner.args.end(), c.args.begin(), c.args.begin() + static_cast<std::ptrdiff_t>(npos));
  Value merged = kw;  // {**p.keywords, **call's}
  for (size_t k = 0; k < nkw; ++k) {
    PyObject* key = PyTuple_GET_ITEM(c.kw_names.get(), static_cast<Py_ssize_t>(k));
    if (const long at = dict_find(merged, key); at >= 0) {
      merged.items[static_cast<size_t>(at) + 1] = c.args[npos + k];
    } else {
      merged.items.push_back(Value::constant(PyRef::borrow(key)));
      merged.items.push_back(c.args[npos + k]);
    }
  }
  const auto n = static_cast<Py_ssize_t>(merged.items.size() / 2);
  inner.kw_names = n > 0 ? PyRef::steal(PyTuple_New(n)) : PyRef();
  for (Py_ssize_t k = 0; k < n; ++k) {
    if (!merged.items[static_cast<size_t>(2 * k)].obj) return unsupported("a functools.partial with keywords the trace does not know");
    PyTuple_SET_ITEM(inner.kw_names.get(), k, Py_NewRef(merged.items[static_cast<size_t>(2 * k)].obj.get()));
    inner.args.push_back(merged.items[static_cast<size_t>(2 * k + 1)]);
  }
  return dispatch_call(inner);
}

}  // namespace fj::interp
