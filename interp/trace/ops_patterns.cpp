// Unpacking, deletion and structural pattern matching: UNPACK_EX (`a, *rest = seq`),
// DELETE_SUBSCR (`del d[k]`, `del xs[1:3]`), list slice assignment, GET_LEN and the
// MATCH_* opcodes of `match` statements, and unary + and ~ on numbers.
#include "interp/trace/tracer.h"

namespace fj::interp {
namespace {

// Builtin classes whose one positional sub-pattern matches the subject itself
// (`case int(k)`), as CPython's MATCH_CLASS.
bool matches_self(PyObject* type) {
  static PyTypeObject* const kTypes[] = {&PyBool_Type,  &PyByteArray_Type, &PyBytes_Type, &PyDict_Type,
                                         &PyFloat_Type, &PyFrozenSet_Type, &PyLong_Type,  &PyList_Type,
                                         &PySet_Type,   &PyUnicode_Type,   &PyTuple_Type};
  for (PyTypeObject* t : kTypes) {
    if (type == reinterpret_cast<PyObject*>(t)) return true;
  }
  return false;
}

}  // namespace

// (seq -- items after the star (reversed), the starred list, items before it (reversed))
Status Tracer::op_unpack_ex(const Instruction& ins) {
  const size_t before = static_cast<size_t>(ins.arg) & 0xFF, after = static_cast<size_t>(ins.arg) >> 8;
  Value seq = pop();
  std::vector<Value> items;
  FJ_TRY(star_items(seq, &items));
  const size_t n = items.size();
  if (n < before + after) return unsupported("not enough values to unpack (CPython raises ValueError)");
  for (size_t i = n; i > n - after; --i) push(items[i - 1]);
  Value rest = Value::sequence(ValueKind::List, std::vector<Value>(items.begin() + static_cast<std::ptrdiff_t>(before),
                                                                   items.end() - static_cast<std::ptrdiff_t>(after)));
  rest.identity = next_identity_++;
  push(std::move(rest));
  for (size_t i = before; i > 0; --i) push(items[i - 1]);
  return ok();
}

// The items of a list the trace built after `del list[key]` (value null) or
// `list[key] = value`: CPython's own list operation, run on the items' positions.
Status Tracer::list_items_after(const Value& list, const Value& key, const Value* value, std::vector<Value>* out) {
  if (!knowable(key, true)) return unsupported("a list index " + describe(key) + " (not supported yet)");
  KnownObjects made;
  PyRef k;
  FJ_TRY(known_object(key, made, &k));
  std::vector<Value> sources = list.items;
  const auto n = static_cast<Py_ssize_t>(sources.size());
  PyRef positions = PyRef::steal(PyList_New(n));
  for (Py_ssize_t i = 0; i < n; ++i) PyList_SET_ITEM(positions.get(), i, PyLong_FromSsize_t(i));
  int r;
  if (value != nullptr) {
    std::vector<Value> values;
    FJ_TRY(star_items(*value, &values));
    PyRef marks = PyRef::steal(PyList_New(static_cast<Py_ssize_t>(values.size())));
    for (size_t j = 0; j < values.size(); ++j) {
      PyList_SET_ITEM(marks.get(), static_cast<Py_ssize_t>(j), PyLong_FromSize_t(sources.size()));
      sources.push_back(values[j]);
    }
    r = PyObject_SetItem(positions.get(), k.get(), marks.get());
  } else {
    r = PyObject_DelItem(positions.get(), k.get());
  }
  if (r < 0) return raise_python_error("a list item that is not there (CPython raises)");
  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(positions.get()); ++i) {
    out->push_back(sources[PyLong_AsSize_t(PyList_GET_ITEM(positions.get(), i))]);
  }
  return ok();
}

// (container, key -- ): del d[k] of a dict, del xs[i] / xs[a:b] of a list the trace built.
Status Tracer::op_delete_subscr(const Instruction&) {
  Value key = pop();
  Value container = pop();
  if (container.kind == ValueKind::Dict && container.identity >= 0) {
    const bool missing = key.kind == ValueKind::Const && !is_opaque(key) && dict_find(container, key.obj.get()) < 0;
    if (missing && container.obj && container.obj.get() == counter_class()) return ok();  // Counter: nothing to delete
    if (missing) return raise_key_error(key);
    FJ_TRY(call_dict_method("pop", {container, key}));
    pop();
    return ok();
  }
  if (container.kind == ValueKind::List && is_traced_list(container)) {
    std::vector<Value> now;
    FJ_TRY(list_items_after(container, key, nullptr, &now));
    return set_list_items(container, std::move(now), "del of list items");
  }
  return unsupported("del of an item of " + describe(container) + " (not supported yet)");
}

// (obj -- obj, len(obj)), for a sequence pattern
Status Tracer::op_get_len(const Instruction&) {
  static PyObject* len = lookup_attr("builtins", "len");
  return call_value(Value::constant(PyRef::borrow(len)), {top()});
}

// Whether the subject's class is a collections.abc.Sequence (or Mapping) for `match`:
// its class's flag. nullopt: a value whose class the trace does not know.
std::optional<bool> Tracer::match_flag(const Value& v, unsigned long flag) {
  PyTypeObject* tp = nullptr;
  switch (v.kind) {
    case ValueKind::Tuple:
    case ValueKind::List:
      tp = v.kind == ValueKind::List ? &PyList_Type : v.obj ? reinterpret_cast<PyTypeObject*>(v.obj.get()) : &PyTuple_Type;
      break;
    case ValueKind::Dict:
      tp = v.obj ? reinterpret_cast<PyTypeObject*>(v.obj.get()) : &PyDict_Type;
      break;
    case ValueKind::Sym:
      tp = &PyLong_Type;  // int, float and bool: neither
      break;
    case ValueKind::Tensor:
      tp = reinterpret_cast<PyTypeObject*>(guards::torch_refs().tensor_type);
      break;
    case ValueKind::Object:
      tp = reinterpret_cast<PyTypeObject*>(v.items[0].obj.get());
      break;
    case ValueKind::Const:
      if (is_opaque(v) || v.reg >= 0) return std::nullopt;
      tp = Py_TYPE(v.obj.get());
      break;
    default:
      return std::nullopt;
  }
  return tp != nullptr && (PyType_GetFlags(tp) & flag) != 0;
}

// (subject -- subject, matches): MATCH_SEQUENCE and MATCH_MAPPING
Status Tracer::op_match_kind(const Instruction& ins) {
  const bool sequence = ins.opcode == op(Opcode::MATCH_SEQUENCE);
  std::optional<bool> is = match_flag(top(), sequence ? Py_TPFLAGS_SEQUENCE : Py_TPFLAGS_MAPPING);
  if (!is) return unsupported("a match on " + describe(top()) + " (not supported yet)");
  push(Value::constant(PyRef::borrow(*is ? Py_True : Py_False)));
  return ok();
}

// (subject, keys -- subject, keys, values or None): the values of a dict's keys
Status Tracer::op_match_keys(const Instruction&) {
  const Value& keys = top();
  const Value& subject = top(2);
  if (subject.kind != ValueKind::Dict || keys.kind != ValueKind::Const || !PyTuple_CheckExact(keys.obj.get())) {
    return unsupported("a mapping pattern on " + describe(subject) + " (not supported yet)");
  }
  std::vector<Value> values;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(keys.obj.get()); ++i) {
    const long at = dict_find(subject, PyTuple_GET_ITEM(keys.obj.get(), i));
    if (at < 0) {
      push(Value::constant(PyRef::borrow(Py_None)));
      return ok();
    }
    values.push_back(subject.items[static_cast<size_t>(at) + 1]);
  }
  push(Value::sequence(ValueKind::Tuple, std::move(values)));
  return ok();
}

// (subject, type, names -- attributes or None): `case Cls(a, b, k=c)`; isinstance, then
// the positional sub-patterns' attributes (__match_args__) and the named ones.
Status Tracer::op_match_class(const Instruction& ins) {
  static PyObject* isinstance = lookup_attr("builtins", "isinstance");
  Value names = pop();
  Value type = pop();
  Value subject = pop();
  if (type.kind != ValueKind::Const || is_opaque(type) || !PyType_Check(type.obj.get()) ||
      names.kind != ValueKind::Const || !PyTuple_CheckExact(names.obj.get())) {
    return unsupported("a class pattern of " + describe(type) + " (not supported yet)");
  }
  FJ_TRY(call_value(Value::constant(PyRef::borrow(isinstance)), {subject, type}));
  bool is = false;
  FJ_TRY(truth(pop(), &is));
  if (!is) {
    push(Value::constant(PyRef::borrow(Py_None)));
    return ok();
  }
  PyObject* cls = type.obj.get();
  std::vector<std::string> attrs;
  const auto npos = static_cast<Py_ssize_t>(ins.arg);
  std::vector<Value> got;
  if (npos > 0) {
    if (!PyType_HasFeature(reinterpret_cast<PyTypeObject*>(cls), Py_TPFLAGS_IMMUTABLETYPE) && !guards().add_class_unchanged(cls)) {
      return unsupported("a class pattern of a class the trace cannot guard");
    }
    PyRef match_args = PyRef::steal(PyObject_GetAttrString(cls, "__match_args__"));
    if (!match_args) {
      guards::clear_error();
      if (!matches_self(cls) || npos != 1) return unsupported("a class pattern with positional parts (CPython raises TypeError)");
      got.push_back(subject);
    } else if (!PyTuple_CheckExact(match_args.get()) || PyTuple_GET_SIZE(match_args.get()) < npos) {
      return unsupported("a class pattern with more positional parts than __match_args__ (CPython raises TypeError)");
    } else {
      for (Py_ssize_t i = 0; i < npos; ++i) attrs.push_back(FJ_TRY(guards::utf8_of(PyTuple_GET_ITEM(match_args.get(), i))));
    }
  }
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(names.obj.get()); ++i) {
    attrs.push_back(FJ_TRY(guards::utf8_of(PyTuple_GET_ITEM(names.obj.get(), i))));
  }
  static PyObject* hasattr = lookup_attr("builtins", "hasattr");
  for (const std::string& name : attrs) {
    // a missing attribute is no match (CPython's MATCH_CLASS), not an AttributeError
    FJ_TRY(call_value(Value::constant(PyRef::borrow(hasattr)), {subject, Value::constant(PyRef::steal(PyUnicode_FromString(name.c_str())))}));
    bool has = false;
    FJ_TRY(truth(pop(), &has));
    if (!has) {
      push(Value::constant(PyRef::borrow(Py_None)));
      return ok();
    }
    FJ_TRY(load_attr(subject, name));
    got.push_back(pop());
  }
  push(Value::sequence(ValueKind::Tuple, std::move(got)));
  return ok();
}

// (value -- +value): a number (a bool becomes its int), or the tensor itself (as torch's
// positive() returns it).
Status Tracer::op_unary_positive(const Instruction&) {
  Value v = pop();
  if (v.kind == ValueKind::Tensor && !is_number(v)) {
    FJ_TRY(require_tensor_attr("__pos__"));
    if (graph_.node(v.node).dtype == jit::DType::Bool) return unsupported("+ of a bool tensor (eager raises)");
    push(std::move(v));
    return ok();
  }
  if (v.kind == ValueKind::Sym && !is_numpy_scalar(v)) {
    return push_sym(v.expr.type() == jit::SymType::Bool ? jit::to_int(v.expr) : v.expr, "a unary +");
  }
  static PyObject* pos = PyObject_GetAttrString(PyImport_ImportModule("operator"), "pos");
  if (std::optional<Status> s = fold_call(pos, {v}, nullptr, true, "+")) return std::move(*s);
  return unsupported("+ of " + describe(v) + " (not supported yet)");
}

}  // namespace fj::interp
