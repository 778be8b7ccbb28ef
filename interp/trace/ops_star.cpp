// Star arguments and keyword dicts: f(*args, **kwargs) (CALL_FUNCTION_EX) traced as the
// CALL it stands for, the lists, tuples and dicts that build its arguments (LIST_EXTEND,
// LIST_TO_TUPLE, DICT_MERGE, DICT_UPDATE), `key in container` (CONTAINS_OP) and the
// read-only methods of a dict the frame holds (kwargs.get(...), kwargs.items()).
#include "interp/trace/tracer.h"

#include <algorithm>

namespace fj::interp {

// The position of `key` among a Dict value's keys (items 0, 2, 4, ...), or -1.
long dict_find(const Value& dict, PyObject* key) {
  const Py_hash_t h = PyObject_Hash(key);  // as a dict: equal keys hash alike ('f8' == np.dtype('f8'))
  if (h == -1) {
    guards::clear_error();
    return -1;
  }
  for (size_t j = 0; j < dict.items.size(); j += 2) {
    PyObject* k = dict.items[j].obj.get();
    if (k != key && PyObject_Hash(k) != h) continue;
    const int eq = PyObject_RichCompareBool(k, key, Py_EQ);
    if (eq < 0) guards::clear_error();
    if (eq == 1) return static_cast<long>(j);
  }
  return -1;
}

bool plain_key(const Value& v) {
  if (v.kind != ValueKind::Const || is_opaque(v) || !is_immutable_known(v.obj.get())) return false;
  if (PyObject_Hash(v.obj.get()) != -1) return true;
  guards::clear_error();  // a slice, a tuple holding one: CPython raises TypeError
  return false;
}

namespace {

// key: value into a Dict value's items: a repeated key keeps its position and takes
// the new value.
void put_item(Value& dict, Value key, Value value) {
  const long at = dict_find(dict, key.obj.get());
  if (at >= 0) {
    dict.items[static_cast<size_t>(at) + 1] = std::move(value);
  } else {
    dict.items.push_back(std::move(key));
    dict.items.push_back(std::move(value));
  }
}

}  // namespace

// The items a star (`*x`, list(x)) unpacks, as far as the trace knows them.
Status Tracer::star_items(const Value& v, std::vector<Value>* out) {
  if (v.kind == ValueKind::Dict) {  // *d: its keys
    for (size_t j = 0; j < v.items.size(); j += 2) out->push_back(v.items[j]);
    return ok();
  }
  push(v);
  Instruction none{};
  FJ_TRY(op_get_iter(none));  // on failure it has popped the value
  Value it = pop();
  out->insert(out->end(), it.items.begin() + static_cast<std::ptrdiff_t>(it.next), it.items.end());
  it.next = it.items.size();  // an iterator of its own is used up, in every copy
  advance_everywhere(it);
  return ok();
}

// (list, ...[arg - 1], iterable -- list, ...): [a, *b]
Status Tracer::op_list_extend(const Instruction& ins) {
  Value iterable = pop();
  auto& stack = cur_.fs->stack;
  const auto depth = static_cast<size_t>(ins.arg);
  if (depth == 0 || depth > stack.size()) return unsupported("LIST_EXTEND below the value stack");
  std::vector<Value> items;
  FJ_TRY(star_items(iterable, &items));
  Value& list = stack[stack.size() - depth];
  if (list.kind != ValueKind::List || list.obj) return unsupported("LIST_EXTEND of " + describe(list));
  list.items.insert(list.items.end(), items.begin(), items.end());
  return ok();
}

// (list -- tuple)
Status Tracer::op_list_to_tuple(const Instruction&) {
  Value list = pop();
  if (list.kind != ValueKind::List || list.obj) return unsupported("LIST_TO_TUPLE of " + describe(list));
  Value tuple = Value::sequence(ValueKind::Tuple, std::move(list.items));
  tuple.identity = next_identity_++;
  push(std::move(tuple));
  return ok();
}

// (dict, ...[arg - 1], mapping -- dict, ...): {**a} (DICT_UPDATE: a later key wins) and
// f(**a) (DICT_MERGE: a repeated key raises in CPython).
Status Tracer::op_dict_merge(const Instruction& ins) {
  Value mapping = pop();
  auto& stack = cur_.fs->stack;
  const auto depth = static_cast<size_t>(ins.arg);
  if (depth == 0 || depth > stack.size()) return unsupported("DICT_MERGE below the value stack");
  Value& dict = stack[stack.size() - depth];
  if (dict.kind != ValueKind::Dict) return unsupported("a dict update of " + describe(dict));
  if (mapping.kind != ValueKind::Dict) return unsupported("** of " + describe(mapping) + " (not supported yet)");
  const bool merge = ins.opcode == op(Opcode::DICT_MERGE);
  for (size_t j = 0; j < mapping.items.size(); j += 2) {
    const Value& key = mapping.items[j];
    const long at = dict_find(dict, key.obj.get());
    if (at >= 0 && merge) return unsupported("a keyword argument given twice (CPython raises)");
    if (at >= 0) {
      dict.items[static_cast<size_t>(at) + 1] = mapping.items[j + 1];
    } else {
      dict.items.push_back(key);
      dict.items.push_back(mapping.items[j + 1]);
    }
  }
  return ok();
}

// `key in (a, b, ...)` where the key and every item are objects of the trace whose
// classes compare in C alike (enum members): answered now. nullopt otherwise.
static std::optional<bool> contains_by_c_equality(const Value& key, const Value& container) {
  if (key.kind != ValueKind::Const || is_opaque(key) || is_foldable(key.obj.get()) || !compares_in_c(key.obj.get()) ||
      (container.kind != ValueKind::Tuple && container.kind != ValueKind::List)) {
    return std::nullopt;
  }
  bool found = false;
  for (const Value& item : container.items) {
    if (item.kind != ValueKind::Const || is_opaque(item) ||
        Py_TYPE(item.obj.get())->tp_richcompare != Py_TYPE(key.obj.get())->tp_richcompare) {
      return std::nullopt;
    }
    const int eq = PyObject_RichCompareBool(item.obj.get(), key.obj.get(), Py_EQ);
    if (eq < 0) {
      guards::clear_error();
      return std::nullopt;
    }
    found |= eq == 1;
  }
  return found;
}

// (key, container -- bool): `in` (arg 0) and `not in` (arg 1) where the answer is known:
// a dict's constant keys, a sequence of constants, a constant tuple or str, a str key
// of a dict read by path (guarded).
// operator.contains's result as CONTAINS_OP's: negated for `not in`.
Status Tracer::contains_result(Status s, bool negate) {
  FJ_TRY(std::move(s));
  if (!negate) return ok();
  Value found = pop();
  push(Value::constant(PyRef::borrow(found.obj.get() == Py_True ? Py_False : Py_True)));
  return ok();
}

Status Tracer::op_contains_op(const Instruction& ins) {
  Value container = pop();
  Value key = pop();
  if (std::optional<bool> found = contains_by_c_equality(key, container)) {
    push(Value::constant(PyRef::borrow(*found != (ins.arg == 1) ? Py_True : Py_False)));
    return ok();
  }
  if (std::optional<Status> s = python_dunder(container, "__contains__", {key})) {  // its result's truth
    FJ_TRY(std::move(*s));
    bool found = false;
    FJ_TRY(truth(pop(), &found));
    push(Value::constant(PyRef::borrow(found != (ins.arg == 1) ? Py_True : Py_False)));
    return ok();
  }
  if (auto s = fold_operator("contains", container, key, /*specialize=*/false)) return contains_result(std::move(*s), ins.arg == 1);
  if (!plain_key(key)) {
    if (auto s = fold_operator("contains", container, key, /*specialize=*/true)) return contains_result(std::move(*s), ins.arg == 1);
    return unsupported("'in' with " + describe(key) + " (not supported yet)");
  }
  bool found = false;
  if (container.kind == ValueKind::Dict) {
    found = dict_find(container, key.obj.get()) >= 0;
  } else if (container.kind == ValueKind::Tuple || container.kind == ValueKind::List) {
    const bool number_key = !PyUnicode_CheckExact(key.obj.get()) && key.obj.get() != Py_None;
    for (const Value& item : container.items) {
      // A symbolic number equals no str and not None; a tensor's == is its own.
      if (item.kind == ValueKind::Sym && !number_key) continue;
      if (!plain_key(item)) return unsupported("'in' over " + describe(item) + " (not supported yet)");
      const int eq = PyObject_RichCompareBool(item.obj.get(), key.obj.get(), Py_EQ);
      if (eq < 0) guards::clear_error();
      found |= eq == 1;
    }
  } else if (std::optional<bool> has = path_dict_contains(container, key)) {
    found = *has;
  } else if (container.kind == ValueKind::Const && !is_opaque(container) && is_foldable(container.obj.get())) {
    const int r = PySequence_Contains(container.obj.get(), key.obj.get());
    if (r < 0) {
      guards::clear_error();
      return unsupported("'in' raised (CPython raises)");
    }
    found = r == 1;
  } else if (auto s = fold_operator("contains", container, key, /*specialize=*/true)) {
    return contains_result(std::move(*s), ins.arg == 1);
  } else {
    return unsupported("'in' of " + describe(container) + " (not supported yet)");
  }
  push(Value::constant(PyRef::borrow(found != (ins.arg == 1) ? Py_True : Py_False)));
  return ok();
}

// (NULL, callable, args[, kwargs] -- result): f(*args, **kwargs). The tuple's items
// become positional arguments and the dict's keys keyword names: the call is then
// traced as CALL would trace it (inlined, a torch op, a builtin, or a graph break).
Status Tracer::op_call_function_ex(const Instruction& ins) {
  Value kwargs;
  const bool has_kwargs = ins.arg & 1;
  if (has_kwargs) kwargs = pop();
  Value star = pop();
  std::vector<Value> args;
  FJ_TRY(star_items(star, &args));
  PyRef names;
  if (has_kwargs) {
    if (kwargs.kind != ValueKind::Dict) return unsupported("** of " + describe(kwargs) + " (not supported yet)");
    const size_t nkw = kwargs.items.size() / 2;
    if (nkw > 0) names = PyRef::steal(PyTuple_New(static_cast<Py_ssize_t>(nkw)));
    for (size_t k = 0; k < nkw; ++k) {
      PyObject* key = kwargs.items[2 * k].obj.get();
      if (!PyUnicode_CheckExact(key)) return unsupported("a keyword that is not a str (CPython raises)");
      PyTuple_SET_ITEM(names.get(), static_cast<Py_ssize_t>(k), Py_NewRef(key));
      args.push_back(kwargs.items[2 * k + 1]);
    }
  }
  if (cur_.fs->stack.size() < 2) return unsupported("CALL_FUNCTION_EX below the value stack");
  Instruction call = ins;
  call.arg = static_cast<int>(args.size());
  for (Value& a : args) push(std::move(a));
  cur_.fs->kw_names = names;
  return op_call(call);
}

// The frame's *args (an exact tuple) or **kwargs (an exact dict, str keys): the
// container is guarded to keep its length and keys; each item is a tensor input, or
// an object guarded as an attribute is (numbers, str and None by value, anything
// else by identity), found again by its path ("L['args'][0]", "L['kwargs']['mask']").
Status Tracer::bind_star_parameter(PyObject* a, const Source& src, Value* out) {
  constexpr Py_ssize_t kMaxStarItems = 64;
  const bool is_dict = PyDict_CheckExact(a);
  if (!is_dict && !PyTuple_CheckExact(a)) return unsupported(source_text(src) + " is not a tuple or dict");
  const Py_ssize_t n = is_dict ? PyDict_GET_SIZE(a) : PyTuple_GET_SIZE(a);
  if (n > kMaxStarItems) return unsupported(source_text(src) + " has more than 64 items (not supported yet)");
  guards().add_sequence(src.arg, source_text(src), a);
  guards::PathRoot root;
  root.arg = src.arg;
  Value v;
  v.kind = is_dict ? ValueKind::Dict : ValueKind::Tuple;
  Py_ssize_t pos = 0;
  for (Py_ssize_t k = 0; k < n; ++k) {
    PyObject* key = nullptr;
    PyObject* item = nullptr;
    Source child = src;
    if (is_dict) {
      PyDict_Next(a, &pos, &key, &item);
      if (!PyUnicode_CheckExact(key)) return unsupported("a **kwargs key that is not a str");
      child.attrs.push_back("[" + FJ_TRY(guards::utf8_of(key)));
      v.items.push_back(Value::constant(PyRef::borrow(key)));
    } else {
      item = PyTuple_GET_ITEM(a, k);
      child.attrs.push_back("#" + std::to_string(k));
    }
    Value value;
    if (std::optional<Status> s = path_tensor(item, root, child, &value)) {
      FJ_TRY(std::move(*s));
    } else {
      guards().add_path(source_text(child), root, child.attrs, item);
      value = Value::constant(PyRef::borrow(item), child);
    }
    v.items.push_back(std::move(value));
  }
  v.identity = next_identity_++;
  v.source = src;
  *out = std::move(v);
  return ok();
}

// d.get(key[, default]), d.keys(), d.values(), d.items() of a dict the frame holds.
Status Tracer::call_dict_method(const std::string& name, const std::vector<Value>& args) {
  const Value& d = args[0];
  if (d.kind == ValueKind::Const && name == "get" && (args.size() == 2 || args.size() == 3)) {
    const Value none = Value::constant(PyRef::borrow(Py_None));
    if (std::optional<Status> s = path_dict_item(d, args[1], args.size() == 3 ? &args[2] : &none)) return std::move(*s);
    return unsupported("dict.get() of " + describe(d) + " with " + describe(args[1]) + " (not supported yet)");
  }
  if (d.kind == ValueKind::Const && (name == "keys" || name == "values" || name == "items") && args.size() == 1) {
    Value traced;  // a dict found by path: its str keys and their items, each found by path
    traced.kind = ValueKind::Dict;
    for (const PyRef& key : path_dict_keys(d)) {
      if (!PyUnicode_CheckExact(key.get())) return unsupported("dict." + name + "() of a dict with a key that is not a str");
      PyObject* item = PyDict_GetItem(d.obj.get(), key.get());
      if (item == nullptr) return unsupported("dict." + name + "() of a dict that changed while read");
      Value v;
      FJ_TRY(found_at_path(d, "[" + guards::utf8_lossy(key.get()), item, &v));
      traced.items.push_back(Value::constant(key));
      traced.items.push_back(std::move(v));
    }
    return call_dict_method(name, {traced});
  }
  if (name == "get" && (args.size() == 2 || args.size() == 3)) {
    Value key;
    FJ_TRY(dict_key(args[1], "dict.get()", &key));
    const long at = dict_find(d, key.obj.get());
    push(at >= 0 ? d.items[static_cast<size_t>(at) + 1]
                 : args.size() == 3 ? args[2] : Value::constant(PyRef::borrow(Py_None)));
    return ok();
  }
  if (name == "pop" && (args.size() == 2 || args.size() == 3) && d.identity >= 0) {
    Value key;
    FJ_TRY(dict_key(args[1], "dict.pop()", &key));
    const long at = dict_find(d, key.obj.get());
    if (at < 0 && args.size() == 2) return unsupported("dict.pop() of a missing key (CPython raises KeyError)");
    Value out = at >= 0 ? d.items[static_cast<size_t>(at) + 1] : args[2];
    if (at >= 0) {
      FJ_TRY(may_change_dict(d));
      Value after = d;
      after.source = Source{};  // built from its items from now on
      after.items.erase(after.items.begin() + at, after.items.begin() + at + 2);
      replace_everywhere(after);
    }
    push(std::move(out));
    return ok();
  }
  if ((name == "keys" || name == "values" || name == "items") && args.size() == 1) {
    Value it;
    it.kind = ValueKind::Iterator;
    it.method = name;  // which view: keys() & s and co (dict_view_set_op)
    for (size_t j = 0; j < d.items.size(); j += 2) {
      if (name == "keys") it.items.push_back(d.items[j]);
      else if (name == "values") it.items.push_back(d.items[j + 1]);
      else it.items.push_back(Value::sequence(ValueKind::Tuple, {d.items[j], d.items[j + 1]}));
    }
    if (d.identity >= 0) {  // a view of the dict is live: a later change of it makes this one stale
      it.writes = static_cast<int>(write_log_.size());
      it.reads = std::make_shared<const std::vector<int>>(std::vector<int>{d.identity});
      it.dict_view = true;
    }
    push(std::move(it));
    return ok();
  }
  return unsupported("dict." + name + "() with these arguments (not supported yet)");
}

// A dict key as a constant the trace hashes: a plain one as it is, a Python number
// that is symbolic as its value now (guarded), a tuple of such keys as a tuple.
Status Tracer::dict_key(const Value& v, const std::string& what, Value* out) {
  if (plain_key(v)) {
    *out = v;
    return ok();
  }
  PyRef key;
  if (v.kind == ValueKind::Sym && !v.obj) {
    FJ_TRY(concrete_number(v, what + " key", &key));
  } else if (v.kind == ValueKind::Tuple && !v.obj && !v.torch_size) {
    key = PyRef::steal(PyTuple_New(static_cast<Py_ssize_t>(v.items.size())));
    for (size_t i = 0; key && i < v.items.size(); ++i) {
      Value item;
      FJ_TRY(dict_key(v.items[i], what, &item));
      PyTuple_SET_ITEM(key.get(), static_cast<Py_ssize_t>(i), Py_NewRef(item.obj.get()));
    }
  }
  if (!key) {
    guards::clear_error();
    return unsupported(what + " with " + describe(v));
  }
  *out = Value::constant(std::move(key));
  if (!plain_key(*out)) return unsupported(what + " with " + describe(v));
  return ok();
}

// d[key] of a dict the frame holds.
Status Tracer::dict_subscript(const Value& d, const Value& index) {
  Value key;
  FJ_TRY(dict_key(index, "dict subscript", &key));
  const long at = dict_find(d, key.obj.get());
  if (at < 0 && d.factory) return default_dict_missing(d, key);
  if (at < 0 && d.obj && d.obj.get() == counter_class()) {  // Counter's __missing__: 0, not stored
    push(Value::constant(PyRef::steal(PyLong_FromLong(0))));
    return ok();
  }
  if (at < 0) return raise_key_error(key);
  push(d.items[static_cast<size_t>(at) + 1]);
  return ok();
}

}  // namespace fj::interp

namespace fj::interp {

namespace {
void replace_in(Value& v, const Value& now) {
  if (v.identity == now.identity && v.kind == now.kind) {
    v = now;
    return;
  }
  for (Value& item : v.items) replace_in(item, now);
}
}  // namespace

// The frame's own **kwargs dict is that object until it changes; an opaque call before
// the change may have kept it, and would miss the change: the trace stops there. A
// dict passed as a named parameter is the caller's: a change of it is not traced.
Status Tracer::may_change_dict(const Value& d) const {
  if (d.source.kind == Source::Kind::Arg && d.source.arg < named_params_ && d.source.attrs.empty()) {
    return unsupported("a change of a dict argument (the caller's dict; not supported yet)");
  }
  if (d.source.kind == Source::Kind::Arg && (committed_ || plan_ != &entry_->plan || !plan_->steps.empty())) {
    return unsupported("a change of **kwargs after a graph break (not supported yet)");
  }
  const auto iterated = [&](const FrameState& fs) {
    return std::any_of(fs.stack.begin(), fs.stack.end(),
                       [&](const Value& v) { return v.kind == ValueKind::Iterator && v.identity == d.identity; });
  };
  bool looped = d.identity >= 0 && iterated(root_fs_);
  for (const FrameState* fs : inlined_frames_) looped |= d.identity >= 0 && iterated(*fs);
  if (looped) return unsupported("a change of a dict while a loop iterates over it (not supported yet)");
  return ok();
}

// (dict, ...[arg - 1], key, value -- dict, ...): a dict comprehension's dict, which
// lives only on the value stack, so it is updated in place (a later key wins).
Status Tracer::op_map_add(const Instruction& ins) {
  auto& stack = cur_.fs->stack;
  const auto depth = static_cast<size_t>(ins.arg);
  if (depth == 0 || depth + 1 >= stack.size()) return unsupported("MAP_ADD below the value stack");
  Value& dict = stack[stack.size() - 2 - depth];
  if (dict.kind != ValueKind::Dict || dict.obj) return unsupported("MAP_ADD to " + describe(dict));
  const Value& key = stack[stack.size() - 2];
  if (!plain_key(key)) return unsupported("a dict key " + describe(key) + " (not supported yet)");
  Value value = pop();
  Value k = pop();
  put_item(dict, std::move(k), std::move(value));
  return ok();
}

// The keys of a dict found by path (is_path_dict), in order: what it keeps (guarded).
// Held: reading an item's tensor may release the GIL, and another thread change the dict.
std::vector<PyRef> Tracer::path_dict_keys(const Value& d) {
  guards().add_dict_keys(source_text(d.source), d.obj.get());
  std::vector<PyRef> keys;
  Py_ssize_t pos = 0;
  PyObject* key = nullptr;
  while (PyDict_Next(d.obj.get(), &pos, &key, nullptr)) keys.push_back(PyRef::borrow(key));
  return keys;
}

// d[key] = value of a dict the frame built: every copy of it sees the new item.
Status Tracer::dict_store(const Value& d, const Value& index, Value value) {
  Value key;
  FJ_TRY(dict_key(index, "dict item assignment", &key));
  if (d.identity < 0) return unsupported("item assignment to a dict of unknown identity (not supported yet)");
  FJ_TRY(may_change_dict(d));
  Value after = d;
  after.source = Source{};  // built from its items from now on
  put_item(after, key, std::move(value));
  replace_everywhere(after);
  return ok();
}

// An iterator the frame made advanced: every copy of it (list_roots) is at its position.
void Tracer::advance_everywhere(const Value& it) {
  if (it.kind != ValueKind::Iterator || it.identity > -2) return;
  note_write(it.identity);  // see inline_call: a generator that takes items of an iterator held elsewhere
  std::vector<Value*> roots = list_roots();
  walk_values(roots, [&](Value& v) {
    if (v.kind == ValueKind::Iterator && v.identity == it.identity) v.next = it.next;
  });
}

// Whether the frame holds object v (an object of the trace), in a local or a container.
bool Tracer::object_held(const Value& v) {
  std::vector<Value*> roots = list_roots();
  bool held = false;
  walk_values(roots, [&](Value& w) { held |= w.kind == v.kind && w.identity == v.identity; });
  return held;
}

bool Tracer::iterator_held(const Value& v) {
  return v.kind == ValueKind::Iterator && v.identity <= -2 && object_held(v);
}

// A dict or list the frame built changed (dict.pop, d[k] = v): every copy of it, in each
// traced frame, an argument list or an autograd ctx (list_roots) and inside other
// containers, becomes `now` (same identity).
void Tracer::replace_everywhere(const Value& now) {
  ++changes_;
  note_write(now.identity);
  for (Value* v : list_roots()) replace_in(*v, now);
}

// d.copy(), d.update(other, **kw), d.setdefault(k[, v]), d.popitem(), d.clear() and
// d | e, d |= e of dicts the frame built. nullopt: not one of these.
std::optional<Status> Tracer::dict_change_method(const std::string& name, const std::vector<Value>& args,
                                                 PyObject* kw_names) {
  const size_t nkw = kw_names ? static_cast<size_t>(PyTuple_GET_SIZE(kw_names)) : 0;
  const size_t npos = args.size() - nkw;
  if (args.empty() || args[0].kind != ValueKind::Dict || args[0].identity < 0) return std::nullopt;
  if (std::optional<Status> s = ordered_dict_method(name, args, kw_names)) return s;
  if (std::optional<Status> s = counter_method(name, args, kw_names)) return s;
  Value d = args[0];
  if (name == "copy" && args.size() == 1) {
    Value copy = Value::sequence(ValueKind::Dict, d.items);
    copy.obj = d.obj;  // of d's class, with its factory
    copy.factory = d.factory;
    copy.identity = next_identity_++;
    push(std::move(copy));
    return ok();
  }
  if (name == "update" && npos <= 2) {
    std::vector<Value> pairs;  // key, value, key, value, ...
    if (npos == 2 && args[1].kind == ValueKind::Dict) {
      pairs = args[1].items;
    } else if (npos == 2) {
      std::vector<Value> items;
      FJ_TRY(star_items(args[1], &items));
      for (const Value& kv : items) {
        std::vector<Value> two;  // a (key, value) pair
        if (kv.kind == ValueKind::Const && !is_opaque(kv) && PyTuple_CheckExact(kv.obj.get()) && PyTuple_GET_SIZE(kv.obj.get()) == 2) {
          two = {Value::constant(PyRef::borrow(PyTuple_GET_ITEM(kv.obj.get(), 0))),
                 Value::constant(PyRef::borrow(PyTuple_GET_ITEM(kv.obj.get(), 1)))};
        } else if ((kv.kind == ValueKind::Tuple || kv.kind == ValueKind::List) && kv.items.size() == 2) {
          two = kv.items;
        } else {
          return unsupported("dict.update() with " + describe(kv) + " (not supported yet)");
        }
        pairs.insert(pairs.end(), two.begin(), two.end());
      }
    }
    for (size_t k = 0; k < nkw; ++k) {
      pairs.push_back(Value::constant(PyRef::borrow(PyTuple_GET_ITEM(kw_names, static_cast<Py_ssize_t>(k)))));
      pairs.push_back(args[npos + k]);
    }
    for (size_t j = 0; j + 1 < pairs.size(); j += 2) {
      FJ_TRY(dict_store(d, pairs[j], pairs[j + 1]));
      d = dict_now(d);
    }
    push(Value::constant(PyRef::borrow(Py_None)));
    return ok();
  }
  if (nkw != 0) return std::nullopt;
  if (name == "setdefault" && (args.size() == 2 || args.size() == 3)) {
    Value key;
    FJ_TRY(dict_key(args[1], "dict.setdefault()", &key));
    const long at = dict_find(d, key.obj.get());
    if (at >= 0) {
      push(d.items[static_cast<size_t>(at) + 1]);
      return ok();
    }
    const Value v = args.size() == 3 ? args[2] : Value::constant(PyRef::borrow(Py_None));
    FJ_TRY(dict_store(d, key, v));
    push(v);
    return ok();
  }
  if (name == "popitem" && args.size() == 1) {
    if (d.items.empty()) return unsupported("popitem() of an empty dict (CPython raises KeyError)");
    Value key = d.items[d.items.size() - 2];
    FJ_TRY(call_dict_method("pop", {d, key}));
    Value pair = Value::sequence(ValueKind::Tuple, {key, pop()});
    pair.identity = next_identity_++;
    push(std::move(pair));
    return ok();
  }
  if (name == "clear" && args.size() == 1) {
    FJ_TRY(may_change_dict(d));
    Value after = d;
    after.source = Source{};
    after.items.clear();
    replace_everywhere(after);
    push(Value::constant(PyRef::borrow(Py_None)));
    return ok();
  }
  return std::nullopt;
}

// The dict value with d's identity as the frame holds it now (after a change).
Value Tracer::dict_now(const Value& d) {
  Value found = d;
  std::vector<Value*> roots = list_roots();
  walk_values(roots, [&](Value& v) {
    if (v.kind == ValueKind::Dict && v.identity == d.identity) found = v;
  });
  return found;
}

}  // namespace fj::interp
