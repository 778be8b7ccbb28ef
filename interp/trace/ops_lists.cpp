// Mutation of lists the trace built itself (BUILD_LIST, list(...), slices): append,
// extend, insert, pop, clear, reverse, `+=` and `lst[i] = v`, modelled on the
// symbolic value.
//
// A Value is copied wherever the frame holds it (a local, the stack, a tuple's item,
// an inlined callee's argument); the copies of one list object share its `identity`.
// A mutation therefore rewrites the items of every copy in the traced state (every
// frame's locals, stack and return value, and what a custom Function's ctx holds), so
// that each alias sees it as CPython's one object would. A list that has escaped to
// code the trace does not see (an opaque call's argument, breaks.cpp) is an opaque
// object from then on and never reaches here; a list of the caller (an argument) is
// modelled alike and given its new items by the plan (below). A mutation counts as a write (writes_): an inlined call that mutated
// a list cannot be re-run as an opaque step, and a generator expression run ahead of
// it would have read stale items.
#include "interp/trace/tracer.h"

#include <algorithm>
#include <functional>
#include <unordered_set>

namespace fj::interp {
namespace {

bool holds_identity(const Value& v, int identity) {
  if (v.kind == ValueKind::List && v.identity == identity) return true;
  return std::any_of(v.items.begin(), v.items.end(), [&](const Value& i) { return holds_identity(i, identity); });
}

void walk_all(Value& v, const std::function<void(Value&)>& fn) {
  fn(v);
  for (Value& item : v.items) walk_all(item, fn);
}

}  // namespace

bool Tracer::is_traced_list(const Value& v) const {
  if (v.kind != ValueKind::List || v.obj || v.identity < 0) return false;
  if (v.source.kind == Source::Kind::None) return true;
  return std::any_of(caller_lists_.begin(), caller_lists_.end(), [&](const CallerList& c) { return c.identity == v.identity; }) &&
         v.source.kind == Source::Kind::Arg && v.source.attrs.empty();
}

// A list attribute (a config's layer_types, a cache's layers): by length, each item by
// path, so that another list of the same length serves; the plan
// passes this call's own list object on.
std::optional<Status> Tracer::path_list(PyObject* v, const guards::PathRoot& root, const Source& child, Value* out) {
  if (!PyList_CheckExact(v) || PyList_GET_SIZE(v) > kMaxPathListItems || committed_ ||
      path_list_items_ + PyList_GET_SIZE(v) > kMaxPathListTotal || path_list_depth_ >= kMaxPathListDepth) {
    return std::nullopt;
  }
  const PyRef keep = PyRef::borrow(v);
  const int slot = guards().add_path_sequence(source_text(child), root, child.attrs, v);
  found_in_path(slot, v, guards::TensorMeta{});
  Value list = Value::sequence(ValueKind::List, {});
  list.source = child;
  list.path_slot = slot;
  list.obj = keep;
  const Value base = Value::constant(keep, child);
  path_list_items_ += PyList_GET_SIZE(v);
  ++path_list_depth_;  // a list that holds itself (or lists nested deep) ends in identity guards
  Status s = ok();
  for (Py_ssize_t k = 0; s.ok() && k < PyList_GET_SIZE(v); ++k) {
    Value item;
    s = found_at_path(base, "#" + std::to_string(k), PyList_GET_ITEM(v, k), &item);
    list.items.push_back(std::move(item));
  }
  --path_list_depth_;
  FJ_TRY(std::move(s));
  *out = std::move(list);
  return ok();
}

// ---- the caller's lists ----
//
// A list argument (`out.append(y)`, `vals[0] = v`) is modelled as a list the frame
// built, with an identity of its own; two arguments that are one list share it, and
// whether they are is guarded. The caller's object itself gets the new items when the
// plan returns, or when a graph break's call starts (that call, and CPython after it,
// see the list as eager's frame left it): `arg[:] = items`, a PlanValue::Kind::Stores.
// A branch, a deopt or an exception in between would leave it unchanged: can_resume
// refuses them while a change waits.

Tracer::CallerList* Tracer::caller_list(const Value& v) {
  if (v.kind != ValueKind::List || v.source.kind != Source::Kind::Arg || !v.source.attrs.empty()) return nullptr;
  for (CallerList& c : caller_lists_) {
    if (c.identity == v.identity) return &c;
  }
  return nullptr;
}

bool Tracer::caller_lists_changed() const {
  return std::any_of(caller_lists_.begin(), caller_lists_.end(), [](const CallerList& c) { return c.changed; });
}

void Tracer::bind_caller_list(PyObject* list, int arg, const std::string& name, Value* v) {
  guards::PathRoot root;
  root.arg = arg;
  int identity = -1;
  for (const CallerList& c : caller_lists_) {
    PyObject* other = in_.args[c.arg];
    guards::PathRoot other_root;
    other_root.arg = c.arg;
    const bool same = other == list;
    guards().add_paths_same("L['" + name + "'] is L[" + std::to_string(c.arg) + "]", root, {}, other_root, {}, same);
    if (same) identity = c.identity;
  }
  if (identity < 0) identity = next_identity_++;
  v->identity = identity;
  caller_lists_.push_back(CallerList{identity, arg, false, *v});
}

// A list or tuple argument of lists of numbers, strings or None ([[1, 2], [3, 4]]):
// each inner list is read by path, as a list attribute is (guarded by length, its
// items by value; changing it pins it), and guarded to be no list argument. Nothing
// is bound (items empty) where the argument is not such a sequence.
void Tracer::bind_nested_lists(PyObject* seq, const Source& src, std::vector<Value>* items) {
  const auto plain = [](PyObject* x) {
    return x == Py_None || PyBool_Check(x) || PyLong_CheckExact(x) || PyFloat_CheckExact(x) || PyUnicode_CheckExact(x);
  };
  for (Py_ssize_t k = 0; k < Py_SIZE(seq); ++k) {
    PyObject* row = PySequence_Fast_GET_ITEM(seq, k);
    if (!PyList_CheckExact(row) || PyList_GET_SIZE(row) > 16) return;
    for (Py_ssize_t j = 0; j < PyList_GET_SIZE(row); ++j) {
      if (!plain(PyList_GET_ITEM(row, j))) return;
    }
    for (int j = 0; j < in_.num_args; ++j) {
      if (in_.args[j] == row) return;
    }
  }
  guards().add_sequence(src.arg, "L['" + src.name + "']", seq);
  const Value base = Value::constant(PyRef::borrow(seq), src);
  guards::PathRoot root;
  root.arg = src.arg;
  for (Py_ssize_t k = 0; k < Py_SIZE(seq); ++k) {
    Value row;
    if (found_at_path(base, "#" + std::to_string(k), PySequence_Fast_GET_ITEM(seq, k), &row).failed() ||
        row.kind != ValueKind::List) {
      items->clear();
      return;
    }
    for (int j = 0; j < in_.num_args; ++j) {
      if (j == src.arg || !PyList_CheckExact(in_.args[j])) continue;
      guards::PathRoot other;
      other.arg = j;
      guards().add_paths_same(source_text(row.source) + " is L[" + std::to_string(j) + "]", root, row.source.attrs,
                              other, {}, false);
    }
    items->push_back(std::move(row));
  }
}

// v, found at a path: an argument list is traced (its changes wait for the return), so
// the same list found there too would be read stale. Guarded to stay another object;
// the trace ends where it is one now.
Status Tracer::not_a_caller_list(PyObject* v, const guards::PathRoot& root, const std::vector<std::string>& attrs,
                                 const std::string& text) {
  if (!PyList_CheckExact(v)) return ok();
  for (const CallerList& c : caller_lists_) {
    const std::string arg = "L[" + std::to_string(c.arg) + "]";
    if (v == in_.args[c.arg]) return unsupported("the list argument " + arg + " found again at " + text + " (not supported yet)");
    guards::PathRoot arg_root;
    arg_root.arg = c.arg;
    guards().add_paths_same(text + " is " + arg, root, attrs, arg_root, {}, false);
  }
  return ok();
}

// The stores that give each changed caller list its items, around *value (the frame's
// result, or a break's arguments): built first, then stored.
Status Tracer::store_caller_lists(PlanValue* value, ConvertCtx& ctx) {
  PlanValue stores;
  stores.kind = PlanValue::Kind::Stores;
  stores.items.push_back(std::move(*value));
  static PyObject* all = PySlice_New(nullptr, nullptr, nullptr);
  std::unordered_set<int> done;
  for (CallerList& c : caller_lists_) {
    if (!c.changed || !done.insert(c.identity).second) continue;
    PlanValue target, key, items;
    target.kind = PlanValue::Kind::Arg;
    target.index = c.arg;
    key.obj = PyRef::borrow(all);
    FJ_TRY(convert(Value::sequence(ValueKind::List, c.now.items), &items, ctx));
    stores.items.insert(stores.items.end(), {std::move(target), std::move(key), std::move(items)});
  }
  for (CallerList& c : caller_lists_) c.changed = false;
  *value = std::move(stores);
  return ok();
}

// Every root of the traced state that may hold a copy of a list or a tensor value.
std::vector<Value*> Tracer::list_roots() {
  std::vector<Value*> roots;
  std::vector<FrameState*> frames{&root_fs_};
  frames.insert(frames.end(), inlined_frames_.begin(), inlined_frames_.end());
  for (FrameState* fs : frames) {
    for (Value& v : fs->locals) roots.push_back(&v);
    for (Value& v : fs->stack) roots.push_back(&v);
    if (fs->ret) roots.push_back(&*fs->ret);
    if (fs->yields) {
      for (Value& v : *fs->yields) roots.push_back(&v);
    }
  }
  for (CallerList& c : caller_lists_) roots.push_back(&c.now);  // what the caller's list will hold
  for (AutogradCtx& ctx : ctxs_) {
    for (auto& attr : ctx.attrs) roots.push_back(&attr.second);
    for (Value& v : ctx.saved) roots.push_back(&v);
  }
  return roots;
}

Status Tracer::set_list_items(const Value& list, std::vector<Value> items, const std::string& what) {
  if (!is_traced_list(list)) return unsupported(what + " of " + describe(list) + " (not supported yet)");
  for (const Value& item : items) {
    if (holds_identity(item, list.identity)) return unsupported(what + ": a list that holds itself (not supported)");
  }
  std::vector<Value*> roots = list_roots();
  if (iterated_lists_.count(list.identity) != 0) {
    // zip() and enumerate() took the list's items when called; CPython's read the
    // list at each step: with such an iterator live, its items could be stale.
    bool live_iterator = false;
    for (Value* r : roots) {
      walk_all(*r, [&](Value& v) { live_iterator |= v.kind == ValueKind::Iterator && v.identity != list.identity; });
    }
    if (live_iterator) return unsupported(what + " of a list while a loop may iterate over it (not supported yet)");
  }
  for (Value* r : roots) {
    walk_all(*r, [&](Value& v) {
      // A loop over the list reads it by position, as CPython's list iterator does.
      if ((v.kind == ValueKind::List || v.kind == ValueKind::Iterator) && v.identity == list.identity) v.items = items;
    });
  }
  for (CallerList& c : caller_lists_) c.changed |= c.identity == list.identity;
  ++writes_;
  ++changes_;
  note_write(list.identity);
  return ok();
}

// lst.append(x) & co of a list the trace built: args[0] is the list.
Status Tracer::call_list_method(const std::string& name, const std::vector<Value>& args) {
  const Value& list = args[0];
  const std::string what = "list." + name + "()";
  std::vector<Value> items = list.items;
  const int64_t n = static_cast<int64_t>(items.size());
  Value result = Value::constant(PyRef::borrow(Py_None));
  if ((name == "index" || name == "count") && args.size() == 2) return list_find(name, items, args[1]);
  if (name == "append" && args.size() == 2) {
    items.push_back(args[1]);
  } else if (name == "extend" && args.size() == 2) {
    std::vector<Value> more;
    FJ_TRY(star_items(args[1], &more));
    items.insert(items.end(), more.begin(), more.end());
  } else if (name == "insert" && args.size() == 3) {
    int64_t at;
    FJ_TRY(int_arg(args[1], what + " index", &at));
    if (at < 0) at = std::max<int64_t>(at + n, 0);
    at = std::min(at, n);
    items.insert(items.begin() + at, args[2]);
  } else if (name == "pop" && args.size() <= 2) {
    int64_t at = -1;
    if (args.size() == 2) FJ_TRY(int_arg(args[1], what + " index", &at));
    if (n == 0) return unsupported("pop from empty list (CPython raises)");
    if (at < 0) at += n;
    if (at < 0 || at >= n) return unsupported("pop index out of range (CPython raises)");
    result = items[static_cast<size_t>(at)];
    items.erase(items.begin() + at);
  } else if (name == "clear" && args.size() == 1) {
    items.clear();
  } else if (name == "reverse" && args.size() == 1) {
    std::reverse(items.begin(), items.end());
  } else if (name == "copy" && args.size() == 1) {
    Value copy = Value::sequence(ValueKind::List, std::move(items));
    copy.identity = next_identity_++;
    push(std::move(copy));
    return ok();
  } else {
    return unsupported(what + " with these arguments (not supported yet)");
  }
  FJ_TRY(set_list_items(list, std::move(items), what));
  push(std::move(result));
  return ok();
}

// lst.index(x) / lst.count(x) where x and the items compared are constants whose ==
// runs no user code (the first match ends index's search, as CPython's).
Status Tracer::list_find(const std::string& name, const std::vector<Value>& items, const Value& x) {
  const auto plain = [](const Value& v) {
    return v.kind == ValueKind::Const && !is_opaque(v) && v.reg < 0 && is_foldable(v.obj.get());
  };
  // Python ints and floats, symbolic or not: compared as == does, each answer guarded.
  const auto number = [&](const Value& v) {
    if (is_tensor(v) || is_number(v) || is_numpy_scalar(v)) return false;
    const std::optional<jit::SymExpr> e = as_sym(v);
    return e && e->type() != jit::SymType::Bool && (v.kind == ValueKind::Sym || !PyBool_Check(v.obj.get()));
  };
  if (number(x) && std::all_of(items.begin(), items.end(), number)) {
    long found = -1, count = 0;
    for (size_t k = 0; k < items.size() && !(name == "index" && found >= 0); ++k) {
      bool eq = false;
      FJ_TRY(guard_truth(jit::eq(*as_sym(items[k]), *as_sym(x)), &eq));
      if (eq && found < 0) found = static_cast<long>(k);
      count += eq;
    }
    if (name == "index" && found < 0) return unsupported("index() of a missing item (CPython raises ValueError)");
    push(Value::constant(PyRef::steal(PyLong_FromLong(name == "index" ? found : count))));
    return ok();
  }
  if (!plain(x)) return unsupported("list." + name + "() of " + describe(x) + " (not supported yet)");
  long found = -1, count = 0;
  for (size_t k = 0; k < items.size() && !(name == "index" && found >= 0); ++k) {
    if (!plain(items[k])) return unsupported("list." + name + "() over " + describe(items[k]) + " (not supported yet)");
    const int eq = PyObject_RichCompareBool(items[k].obj.get(), x.obj.get(), Py_EQ);
    if (eq < 0) {
      guards::clear_error();
      return unsupported("list." + name + "(): == raised");
    }
    if (eq == 1 && found < 0) found = static_cast<long>(k);
    count += eq;
  }
  if (name == "index" && found < 0) return unsupported("list.index() of a missing item (CPython raises ValueError)");
  push(Value::constant(PyRef::steal(PyLong_FromLong(name == "index" ? found : count))));
  return ok();
}

// lst += iterable: extends the list in place; the result is the list itself.
Status Tracer::list_inplace_add(const Value& list, const Value& rhs) {
  std::vector<Value> more;
  FJ_TRY(star_items(rhs, &more));
  std::vector<Value> items = list.items;
  items.insert(items.end(), more.begin(), more.end());
  FJ_TRY(set_list_items(list, items, "list +="));
  Value now = list;
  now.items = std::move(items);
  push(std::move(now));
  return ok();
}

// lst[i] = value, an int index.
Status Tracer::list_setitem(const Value& list, const Value& index, const Value& value) {
  if (index.kind == ValueKind::Const && !is_opaque(index) && PySlice_Check(index.obj.get())) {
    std::vector<Value> items;  // CPython's slice assignment, run on the items' positions
    FJ_TRY(list_items_after(list, index, &value, &items));
    return set_list_items(list, std::move(items), "slice assignment to a list");
  }
  int64_t at;
  FJ_TRY(int_arg(index, "a list index", &at));
  std::vector<Value> items = list.items;
  const int64_t n = static_cast<int64_t>(items.size());
  if (at < 0) at += n;
  if (at < 0 || at >= n) return unsupported("list assignment index out of range (CPython raises)");
  items[static_cast<size_t>(at)] = value;
  return set_list_items(list, std::move(items), "list item assignment");
}

}  // namespace fj::interp
