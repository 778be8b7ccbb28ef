// collections.deque made in the frame: an object of the trace (ValueKind::Object of
// class deque) whose items are the class, then "maxlen" and its value (None or an
// int), then "" and the deque's items as a list of the trace's own (an identity of
// its own: its changes reach every copy as a list's do, Tracer::set_list_items).
// Its methods, len(), truth, q[i], q[i] = v and iteration are traced on that list,
// maxlen dropping items from the other end as CPython does. What CPython would raise
// for (an empty pop, an index out of range), a change while a loop iterates it, and
// a deque returned or live at a graph break end the trace (not supported yet).
#include "interp/trace/ops_deque.h"

#include <algorithm>

#include "interp/trace/tracer.h"

namespace fj::interp {
namespace {

constexpr size_t kMaxlen = 2;  // items[kMaxlen]: None or the maxlen
constexpr size_t kItems = 4;   // items[kItems]: the list of its items

Value name_value(const char* n) { return Value::constant(PyRef::steal(PyUnicode_InternFromString(n))); }

// The maxlen of q, or -1 for none.
int64_t maxlen_of(const Value& q) {
  const Value& m = q.items[kMaxlen];
  return m.obj.get() == Py_None ? -1 : PyLong_AsLongLong(m.obj.get());
}

// items after appending x on the right (or left), maxlen dropping from the other end.
void push_item(std::vector<Value>& items, Value x, bool left, int64_t maxlen) {
  if (maxlen == 0) return;
  if (left) items.insert(items.begin(), std::move(x)); else items.push_back(std::move(x));
  if (maxlen > 0 && items.size() > static_cast<size_t>(maxlen)) {
    if (left) items.pop_back(); else items.erase(items.begin());
  }
}

bool is_method(const std::string& name) {
  static const char* const kNames[] = {"append", "appendleft", "pop", "popleft", "extend", "extendleft", "rotate",
                                       "clear", "copy", "reverse", "insert", "count", "index"};
  return std::any_of(std::begin(kNames), std::end(kNames), [&](const char* n) { return name == n; });
}

}  // namespace

bool DequeCalls::is_deque(const Value& v) {
  return v.kind == ValueKind::Object && deque_class() != nullptr && v.obj.get() == deque_class() && v.items.size() == kItems + 1;
}

size_t DequeCalls::size(const Value& q) { return q.items[kItems].items.size(); }

std::optional<Status> DequeCalls::construct(Tracer& t, const CallSite& c) {
  if (c.callable.kind != ValueKind::Const || deque_class() == nullptr || c.callable.obj.get() != deque_class()) return std::nullopt;
  const size_t nkw = c.kw_names ? static_cast<size_t>(PyTuple_GET_SIZE(c.kw_names.get())) : 0;
  const size_t npos = c.args.size() - nkw;
  const Value* iterable = npos > 0 ? &c.args[0] : nullptr;
  const Value* maxlen = npos > 1 ? &c.args[1] : nullptr;
  if (npos > 2) return unsupported("deque() with more than 2 arguments (CPython raises)");
  for (size_t k = 0; k < nkw; ++k) {
    const std::string key = guards::utf8_lossy(PyTuple_GET_ITEM(c.kw_names.get(), static_cast<Py_ssize_t>(k)));
    const Value** slot = key == "iterable" && !iterable ? &iterable : key == "maxlen" && !maxlen ? &maxlen : nullptr;
    if (slot == nullptr) return unsupported("deque() with keyword '" + key + "' (CPython raises)");
    *slot = &c.args[npos + k];
  }
  int64_t bound = -1;
  if (maxlen != nullptr && !(maxlen->kind == ValueKind::Const && maxlen->obj.get() == Py_None)) {
    FJ_TRY(t.int_arg(*maxlen, "deque() maxlen", &bound));
    if (bound < 0) return unsupported("deque() maxlen below 0 (CPython raises)");
  }
  std::vector<Value> given, items;
  if (iterable != nullptr) FJ_TRY(t.star_items(*iterable, &given));
  for (Value& x : given) push_item(items, std::move(x), /*left=*/false, bound);
  Value list = Value::sequence(ValueKind::List, std::move(items));
  list.identity = t.next_identity_++;
  Value q = Value::sequence(ValueKind::Object, {c.callable, name_value("maxlen"),
                                                Value::constant(PyRef::steal(bound < 0 ? Py_NewRef(Py_None) : PyLong_FromLongLong(bound))),
                                                name_value(""), std::move(list)});
  q.obj = c.callable.obj;
  q.identity = t.next_identity_++;
  t.push(std::move(q));
  return ok();
}

Status DequeCalls::attr(Tracer& t, const Value& q, const std::string& name, bool method) {
  if (name == "maxlen" || name == "__class__") {
    if (method) t.push(Value::null());
    t.push(q.items[name == "maxlen" ? kMaxlen : 0]);
    return ok();
  }
  if (!method || !is_method(name)) return unsupported("attribute '" + name + "' of a deque made in the frame (not supported yet)");
  t.push(Value::tensor_method(name));
  t.push(q);
  return ok();
}

Status DequeCalls::method(Tracer& t, const CallSite& c) {
  const std::string& name = c.callable.method;
  if (c.kw_names) return unsupported("deque." + name + "() with keyword arguments (not supported yet)");
  const Value& q = c.args[0];
  const Value& list = q.items[kItems];
  const int64_t maxlen = maxlen_of(q);
  const std::string what = "deque." + name + "()";
  std::vector<Value> items = list.items;
  const auto n = static_cast<int64_t>(items.size());
  const size_t argc = c.args.size() - 1;
  Value result = Value::constant(PyRef::borrow(Py_None));
  if ((name == "count" || name == "index") && argc == 1) return t.list_find(name, items, c.args[1]);
  if ((name == "append" || name == "appendleft") && argc == 1) {
    push_item(items, c.args[1], name == "appendleft", maxlen);
  } else if ((name == "extend" || name == "extendleft") && argc == 1) {
    std::vector<Value> more;
    FJ_TRY(t.star_items(c.args[1], &more));
    for (Value& x : more) push_item(items, std::move(x), name == "extendleft", maxlen);
  } else if ((name == "pop" || name == "popleft") && argc == 0) {
    if (n == 0) return unsupported("pop from an empty deque (CPython raises IndexError)");
    result = name == "pop" ? items.back() : items.front();
    if (name == "pop") items.pop_back(); else items.erase(items.begin());
  } else if (name == "rotate" && argc <= 1) {
    int64_t k = 1;
    if (argc == 1) FJ_TRY(t.int_arg(c.args[1], what, &k));
    if (n > 0) std::rotate(items.begin(), items.end() - ((k % n) + n) % n, items.end());
  } else if (name == "insert" && argc == 2) {
    if (maxlen >= 0 && n >= maxlen) return unsupported("insert into a full deque (CPython raises IndexError)");
    int64_t at;
    FJ_TRY(t.int_arg(c.args[1], what + " index", &at));
    at = at < 0 ? std::max<int64_t>(at + n, 0) : std::min(at, n);
    items.insert(items.begin() + at, c.args[2]);
  } else if (name == "clear" && argc == 0) {
    items.clear();
  } else if (name == "reverse" && argc == 0) {
    std::reverse(items.begin(), items.end());
  } else if (name == "copy" && argc == 0) {
    Value copy = q;
    copy.items[kItems].identity = t.next_identity_++;
    copy.identity = t.next_identity_++;
    t.push(std::move(copy));
    return ok();
  } else {
    return unsupported(what + " with these arguments (not supported yet)");
  }
  FJ_TRY(t.set_list_items(list, std::move(items), what));
  t.push(std::move(result));
  return ok();
}

// The position q[index] names; where CPython raises IndexError, the trace ends.
Status DequeCalls::position(Tracer& t, const Value& q, const Value& index, size_t* out) {
  int64_t i;
  FJ_TRY(t.int_arg(index, "a deque index", &i));
  const auto n = static_cast<int64_t>(size(q));
  if (i < 0) i += n;
  if (i < 0 || i >= n) return unsupported("deque index out of range (CPython raises IndexError)");
  *out = static_cast<size_t>(i);
  return ok();
}

Status DequeCalls::subscript(Tracer& t, const Value& q, const Value& index) {
  size_t at;
  FJ_TRY(position(t, q, index, &at));
  t.push(q.items[kItems].items[at]);
  return ok();
}

Status DequeCalls::store_subscript(Tracer& t, const Value& q, const Value& index, const Value& value) {
  size_t at;
  FJ_TRY(position(t, q, index, &at));
  std::vector<Value> items = q.items[kItems].items;
  items[at] = value;
  return t.set_list_items(q.items[kItems], std::move(items), "deque item assignment");
}

// iter(q): its items now; a change of q while the iterator lives ends the trace
// (CPython raises RuntimeError at the next step).
Status DequeCalls::iterate(Tracer& t, const Value& q) {
  Value it = Value::sequence(ValueKind::Iterator, q.items[kItems].items);
  it.identity = t.own_iterator_id();
  t.iterated_lists_.insert(q.items[kItems].identity);
  t.push(std::move(it));
  return ok();
}

}  // namespace fj::interp
