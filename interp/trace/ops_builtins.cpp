// CALL of a Python builtin (len, isinstance, sum, range, zip, enumerate, int, float,
// bool): one small handler per builtin, found in a table keyed by the builtin object.
#include "interp/trace/tracer.h"

#include <algorithm>
#include <limits>
#include <unordered_map>

namespace fj::interp {

// The handlers. Each returns nullopt when it does not trace these arguments: the call
// then runs as it is (an opaque call, see Tracer::opaque_call). A friend of Tracer.
struct BuiltinCalls {
  using Handler = std::optional<Status> (*)(Tracer& t, const CallSite& c);

  // The builtin objects and their handlers, read from the builtins module once.
  static const std::unordered_map<PyObject*, Handler>& table();

  static std::optional<Status> len(Tracer& t, const CallSite& c);
  static std::optional<Status> isinstance(Tracer& t, const CallSite& c);
  static std::optional<Status> issubclass(Tracer& t, const CallSite& c);
  static std::optional<Status> type_of(Tracer& t, const CallSite& c);
  static std::optional<Status> sum(Tracer& t, const CallSite& c);
  static std::optional<Status> range(Tracer& t, const CallSite& c);
  static std::optional<Status> zip_or_enumerate(Tracer& t, const CallSite& c);
  static Status count_items(Tracer& t, const Value& count, size_t n, std::vector<Value>* out);
  static PyRef strict_zip_error(const std::vector<std::vector<Value>>& columns, size_t n);
  static std::optional<Status> number_type(Tracer& t, const CallSite& c);
  static std::optional<Status> super(Tracer& t, const CallSite& c);
  static std::optional<Status> hasattr(Tracer& t, const CallSite& c) { return t.call_getattr(c, true); }
  static std::optional<Status> getattr(Tracer& t, const CallSite& c) { return t.call_getattr(c, false); }
  static std::optional<Status> list_or_tuple(Tracer& t, const CallSite& c);
  static std::optional<Status> torch_flag(Tracer& t, const CallSite& c);
  static std::optional<Status> log_once(Tracer& t, const CallSite& c);
  static std::optional<Status> str_or_repr(Tracer& t, const CallSite& c);
  static std::optional<Status> dict_get(Tracer& t, const CallSite& c);
  static std::optional<Status> callable(Tracer& t, const CallSite& c);
  static std::optional<Status> all_or_any(Tracer& t, const CallSite& c);
  static std::optional<Status> min_or_max(Tracer& t, const CallSite& c);
  static std::optional<Status> reversed(Tracer& t, const CallSite& c);
  static std::optional<Status> abs(Tracer& t, const CallSite& c);
  static std::optional<Status> dict(Tracer& t, const CallSite& c);
  static std::optional<Status> setattr_on(Tracer& t, const CallSite& c, bool direct);
  static std::optional<Status> setattr(Tracer& t, const CallSite& c) { return setattr_on(t, c, false); }
  static std::optional<Status> iter_of(Tracer& t, const CallSite& c);
  static std::optional<Status> next_of(Tracer& t, const CallSite& c);
  static std::optional<Status> torch_state(Tracer& t, const CallSite& c);
  static std::optional<Status> torch_meta(Tracer& t, const CallSite& c);
  static std::optional<Status> signature(Tracer& t, const CallSite& c);
};

namespace {

// torch._C's readers of global flags that the trace reads as constants, guarded.
constexpr const char* kTorchFlags[] = {"_get_deterministic_algorithms", "_get_deterministic_algorithms_warn_only"};

}  // namespace

const std::unordered_map<PyObject*, BuiltinCalls::Handler>& BuiltinCalls::table() {
  static const auto* table = [] {
    static const std::pair<const char*, Handler> kHandlers[] = {
        {"len", len},         {"isinstance", isinstance}, {"issubclass", issubclass}, {"sum", sum},
        {"range", range},     {"zip", zip_or_enumerate},  {"enumerate", zip_or_enumerate},
        {"int", number_type}, {"float", number_type},     {"bool", number_type},
        {"super", super},     {"hasattr", hasattr},       {"getattr", getattr},
        {"list", list_or_tuple}, {"tuple", list_or_tuple},
        {"str", str_or_repr}, {"repr", str_or_repr},     {"callable", callable},
        {"all", all_or_any},  {"any", all_or_any},     {"type", type_of},
        {"min", min_or_max},  {"max", min_or_max},     {"reversed", reversed},
        {"abs", abs},         {"dict", dict},        {"setattr", setattr},
        {"iter", iter_of},    {"next", next_of},
        {"__build_class__", [](Tracer& t, const CallSite& c) { return t.call_build_class(c); }},
    };
    // torch's readers of its global state, and its functions that read a tensor's metadata
    static const std::pair<const char*, Handler> kTorch[] = {
        {"is_grad_enabled", torch_state}, {"get_default_dtype", torch_state}, {"is_floating_point", torch_meta},
        {"is_complex", torch_meta},       {"is_signed", torch_meta},          {"numel", torch_meta}};
    auto* t = new std::unordered_map<PyObject*, Handler>();  // kept for the process
    PyObject* builtins = PyImport_ImportModule("builtins");
    for (const auto& [name, handler] : kHandlers) {
      PyObject* b = builtins ? PyObject_GetAttrString(builtins, name) : nullptr;
      if (b != nullptr) (*t)[b] = handler;  // the reference is kept with the table
    }
    Py_XDECREF(builtins);
    PyObject* torch_c = PyImport_ImportModule("torch._C");
    for (const char* name : kTorchFlags) {
      PyObject* f = torch_c ? PyObject_GetAttrString(torch_c, name) : nullptr;
      if (f != nullptr) (*t)[f] = torch_flag;  // the reference is kept with the table
    }
    // torch._C._log_api_usage_once(key): logs a key the first time only, so calling it
    // while tracing is what eager's first call does, and later calls do nothing.
    if (PyObject* f = torch_c ? PyObject_GetAttrString(torch_c, "_log_api_usage_once") : nullptr) (*t)[f] = log_once;
    Py_XDECREF(torch_c);
    PyObject* torch = PyImport_ImportModule("torch");
    for (const auto& [name, handler] : kTorch) {
      PyObject* f = torch ? PyObject_GetAttrString(torch, name) : nullptr;
      if (f != nullptr) (*t)[f] = handler;  // the reference is kept with the table
    }
    Py_XDECREF(torch);
    guards::clear_error();
    // object.__getattribute__ (super().__getattribute__ in a class's own one).
    PyObject* name = PyUnicode_InternFromString("__getattribute__");
    if (PyObject* ga = name ? _PyType_Lookup(&PyBaseObject_Type, name) : nullptr) {
      (*t)[Py_NewRef(ga)] = [](Tracer& tr, const CallSite& c) { return tr.call_object_getattribute(c); };
    }
    Py_XDECREF(name);
    // object.__setattr__(obj, "name", value) (a frozen dataclass's __init__): the store
    // itself, past the class's own __setattr__.
    name = PyUnicode_InternFromString("__setattr__");
    if (PyObject* sa = name ? _PyType_Lookup(&PyBaseObject_Type, name) : nullptr) {
      (*t)[Py_NewRef(sa)] = [](Tracer& tr, const CallSite& c) { return BuiltinCalls::setattr_on(tr, c, /*direct=*/true); };
    }
    Py_XDECREF(name);
    if (PyObject* f = lookup_attr("inspect", "signature")) (*t)[f] = signature;  // kept with the table
    // dict.get, unbound (super().get in a dict subclass).
    name = PyUnicode_InternFromString("get");
    if (PyObject* get = name ? _PyType_Lookup(&PyDict_Type, name) : nullptr) (*t)[Py_NewRef(get)] = dict_get;
    Py_XDECREF(name);
    guards::clear_error();
    return t;
  }();
  return *table;
}

void init_builtin_calls() { BuiltinCalls::table(); }

std::optional<Status> Tracer::call_builtin(const CallSite& c) {
  if (c.callable.kind != ValueKind::Const) return std::nullopt;
  const auto& table = BuiltinCalls::table();
  const auto it = table.find(c.callable.obj.get());
  if (it == table.end()) return std::nullopt;
  // Keyword arguments: zip's strict= and enumerate's start= only.
  PyObject* zip = reinterpret_cast<PyObject*>(&PyZip_Type);
  PyObject* enumerate = reinterpret_cast<PyObject*>(&PyEnum_Type);
  PyObject* dict = reinterpret_cast<PyObject*>(&PyDict_Type);
  if (c.kw_names && c.callable.obj.get() != zip && c.callable.obj.get() != enumerate && c.callable.obj.get() != dict) {
    return std::nullopt;
  }
  return it->second(*this, c);
}

std::optional<Status> BuiltinCalls::log_once(Tracer& t, const CallSite& c) {
  if (c.args.size() != 1 || c.kw_names || c.args[0].kind != ValueKind::Const || is_opaque(c.args[0]) ||
      !PyUnicode_CheckExact(c.args[0].obj.get())) {
    return std::nullopt;
  }
  PyRef r = PyRef::steal(PyObject_CallOneArg(c.callable.obj.get(), c.args[0].obj.get()));
  if (!r) {
    guards::clear_error();
    return std::nullopt;
  }
  t.push(Value::constant(std::move(r)));
  return ok();
}

// torch._C._get_deterministic_algorithms() & co: the flag's value now, guarded.
std::optional<Status> BuiltinCalls::torch_flag(Tracer& t, const CallSite& c) {
  if (!c.args.empty() || c.kw_names) return std::nullopt;
  PyObject* fn = c.callable.obj.get();
  PyRef value = PyRef::steal(PyObject_CallNoArgs(fn));
  if (!value || !PyBool_Check(value.get())) {
    guards::clear_error();
    return std::nullopt;
  }
  PyRef name = PyRef::steal(PyObject_GetAttrString(fn, "__name__"));
  if (!name) guards::clear_error();
  t.guards().add_torch_flag("torch._C." + (name ? guards::utf8_lossy(name.get()) : std::string("?")), fn,
                            value.get() == Py_True);
  t.push(Value::constant(std::move(value)));
  return ok();
}

// len(x) of a tensor (its first size), a tuple, list or dict, a constant tuple or string.
std::optional<Status> BuiltinCalls::len(Tracer& t, const CallSite& c) {
  if (c.args.size() != 1) return std::nullopt;
  const Value& a = c.args[0];
  if (a.kind == ValueKind::Tensor && !t.graph_.node(a.node).sym.empty()) {
    t.push(t.dim_value(a.node, 0));
    return ok();
  }
  if (a.kind == ValueKind::Tuple || a.kind == ValueKind::List) {
    t.push(Value::constant(PyRef::steal(PyLong_FromSize_t(a.items.size()))));
    return ok();
  }
  if (a.kind == ValueKind::Dict) {  // items are key, value, key, value, ...
    t.push(Value::constant(PyRef::steal(PyLong_FromSize_t(a.items.size() / 2))));
    return ok();
  }
  if (a.kind == ValueKind::Const && !is_opaque(a) && (PyTuple_CheckExact(a.obj.get()) || PyUnicode_CheckExact(a.obj.get()))) {
    t.push(Value::constant(PyRef::steal(PyLong_FromSsize_t(PyObject_Length(a.obj.get())))));  // a constant's own
    return ok();
  }
  if (a.kind == ValueKind::Object) return t.object_len(a);
  if (t.is_path_dict(a)) {  // a dict found by path: its keys are guarded
    t.push(Value::constant(PyRef::steal(PyLong_FromSize_t(t.path_dict_keys(a).size()))));
    return ok();
  }
  return unsupported("len() of " + t.describe(a));
}

namespace {

// isinstance's second argument as a Python object: a class, or a tuple of classes
// the frame built; null when it is neither.
PyRef classes_of(const Value& arg) {
  if (arg.kind == ValueKind::Const && !is_opaque(arg)) return arg.obj;
  if (arg.kind != ValueKind::Tuple || arg.obj || arg.torch_size) return PyRef();
  PyRef classes = PyRef::steal(PyTuple_New(static_cast<Py_ssize_t>(arg.items.size())));
  for (size_t k = 0; classes && k < arg.items.size(); ++k) {
    const Value& c = arg.items[k];
    if (c.kind != ValueKind::Const || is_opaque(c) || !PyType_Check(c.obj.get())) return PyRef();
    PyTuple_SET_ITEM(classes.get(), static_cast<Py_ssize_t>(k), Py_NewRef(c.obj.get()));
  }
  return classes;
}

// The type of `v` as far as the trace knows it (borrowed), or nullptr. A tensor other
// than an argument or an op's result may be of a subclass (a Parameter): it is
// answered only for classes that are not strict subclasses of Tensor.
PyObject* known_type(const Value& v, PyObject* cls, bool tensor_value, bool computed) {
  PyObject* tensor = guards::torch_refs().tensor_type;
  if (tensor_value && ((v.source.kind == Source::Kind::Arg && v.source.attrs.empty()) || computed)) {
    return tensor;  // an argument (subclasses are not traced), or made by an op from those and parameters
  }
  if (tensor_value) {
    const int sub = PyType_Check(cls) ? PyObject_IsSubclass(cls, tensor) : -1;
    if (sub < 0) guards::clear_error();
    return sub == 0 || cls == tensor ? tensor : nullptr;
  }
  if (v.kind == ValueKind::Tuple) {
    return v.torch_size ? guards::torch_refs().size_type : v.obj ? v.obj.get() : reinterpret_cast<PyObject*>(&PyTuple_Type);
  }
  if (v.kind == ValueKind::List) return reinterpret_cast<PyObject*>(&PyList_Type);
  if (v.kind == ValueKind::Dict && v.identity >= 0) return v.obj ? v.obj.get() : reinterpret_cast<PyObject*>(&PyDict_Type);
  if (v.kind == ValueKind::Object) return v.obj.get();  // its class (guarded unchanged)
  if (v.kind == ValueKind::Sym) return sym_python_type(v);
  if (v.kind == ValueKind::Const && !is_opaque(v)) return reinterpret_cast<PyObject*>(Py_TYPE(v.obj.get()));
  return nullptr;
}

}  // namespace

// isinstance(v, cls) where v's type is known while tracing.
std::optional<Status> BuiltinCalls::isinstance(Tracer& t, const CallSite& c) {
  if (c.args.size() != 2) return std::nullopt;
  const PyRef classes = classes_of(c.args[1]);
  if (!classes) return std::nullopt;
  const bool tensor = t.is_tensor(c.args[0]);
  const bool computed = tensor && t.graph_.node(c.args[0].node).op != jit::Op::Placeholder;
  PyObject* type = known_type(c.args[0], classes.get(), tensor, computed);
  if (type == nullptr && is_opaque(c.args[0])) type = t.opaque_type(c.args[0]);
  if (type == nullptr) return std::nullopt;
  const int r = PyObject_IsSubclass(type, classes.get());
  if (r < 0) {
    guards::clear_error();
    return unsupported("isinstance() with " + t.describe(c.args[1]) + " (CPython raises)");
  }
  t.push(Value::constant(PyRef::borrow(r ? Py_True : Py_False)));
  return ok();
}

// issubclass(cls, classes) of a class the trace knows (guarded by identity): answered
// now, as isinstance is.
std::optional<Status> BuiltinCalls::issubclass(Tracer& t, const CallSite& c) {
  if (c.args.size() != 2 || c.kw_names) return std::nullopt;
  const Value& cls = c.args[0];
  if (cls.kind != ValueKind::Const || is_opaque(cls) || cls.reg >= 0 || cls.path_slot >= 0 || !PyType_Check(cls.obj.get())) {
    return std::nullopt;
  }
  const PyRef classes = classes_of(c.args[1]);
  if (!classes) return std::nullopt;
  const int r = PyObject_IsSubclass(cls.obj.get(), classes.get());
  if (r < 0) {
    guards::clear_error();
    return unsupported("issubclass() with " + t.describe(c.args[1]) + " (CPython raises)");
  }
  t.push(Value::constant(PyRef::borrow(r ? Py_True : Py_False)));
  return ok();
}

// min(a, b, ...) / max(...) or of one iterable, of Python numbers (no key=): ints as a
// symbolic min/max; otherwise item by item as CPython compares them (`item < best`
// replaces best, so ties keep the first and the chosen item keeps its type), each
// comparison guarded.
std::optional<Status> BuiltinCalls::min_or_max(Tracer& t, const CallSite& c) {
  if (c.kw_names || c.args.empty()) return std::nullopt;
  const bool is_max = c.callable.obj.get() == PyDict_GetItemString(PyEval_GetBuiltins(), "max");
  std::vector<Value> items;
  std::optional<Value> it;  // one iterable: its iterator, used up once the items are known to do
  if (c.args.size() > 1) {
    items = c.args;
  } else {
    t.push(c.args[0]);
    if (t.op_get_iter(*c.ins).failed()) return std::nullopt;
    it = t.pop();
    items.assign(it->items.begin() + static_cast<std::ptrdiff_t>(it->next), it->items.end());
  }
  if (items.empty()) return std::nullopt;  // ValueError: CPython raises it
  bool ints = true;
  for (const Value& v : items) {
    const std::optional<jit::SymExpr> e = t.is_tensor(v) ? std::nullopt : as_sym(v);
    if (!e || e->type() == jit::SymType::Bool || is_numpy_scalar(v)) return std::nullopt;  // NumPy compares its own way
    ints &= e->type() == jit::SymType::Int;
  }
  if (it) {
    it->next = it->items.size();
    t.advance_everywhere(*it);
  }
  if (ints) {
    jit::SymExpr r = *as_sym(items[0]);
    for (size_t k = 1; k < items.size(); ++k) r = is_max ? jit::max(r, *as_sym(items[k])) : jit::min(r, *as_sym(items[k]));
    return t.push_sym(r, is_max ? "max()" : "min()");
  }
  size_t best = 0;
  for (size_t k = 1; k < items.size(); ++k) {
    const jit::SymExpr a = *as_sym(items[k]), b = *as_sym(items[best]);
    bool better = false;
    FJ_TRY(t.guard_truth(is_max ? jit::gt(a, b) : jit::lt(a, b), &better));
    if (better) best = k;
  }
  t.push(items[best]);
  return ok();
}

// reversed(seq) of a tuple or list the trace holds (or of a constant one): an iterator
// over its items, last first. A list a live iterator reads may not change
// (iterated_lists_), as for zip.
std::optional<Status> BuiltinCalls::reversed(Tracer& t, const CallSite& c) {
  if (c.kw_names || c.args.size() != 1) return std::nullopt;
  const Value& seq = c.args[0];
  std::vector<Value> items;
  if ((seq.kind == ValueKind::Tuple || seq.kind == ValueKind::List) && !seq.obj) {
    items.assign(seq.items.rbegin(), seq.items.rend());
    if (seq.kind == ValueKind::List && seq.identity >= 0) t.iterated_lists_.insert(seq.identity);
  } else if (seq.kind == ValueKind::Const && !is_opaque(seq) &&
             (PyRange_Check(seq.obj.get()) || (PyTuple_CheckExact(seq.obj.get()) && is_foldable(seq.obj.get())))) {
    PyRef it = PyRef::steal(PyObject_CallOneArg(reinterpret_cast<PyObject*>(&PyReversed_Type), seq.obj.get()));
    PyRef list = it ? PyRef::steal(PySequence_List(it.get())) : PyRef();
    if (!list) {
      guards::clear_error();
      return std::nullopt;
    }
    for (Py_ssize_t k = 0; k < PyList_GET_SIZE(list.get()); ++k) {
      items.push_back(Value::constant(PyRef::borrow(PyList_GET_ITEM(list.get(), k))));
    }
  } else {
    return std::nullopt;
  }
  Value it;
  it.kind = ValueKind::Iterator;
  it.identity = t.own_iterator_id();
  it.items = std::move(items);
  it.fresh = seq.kind == ValueKind::List;  // CPython's would read the list as it changes: never handed over
  t.push(std::move(it));
  return ok();
}

// type(v) where v's class is known while tracing: an object made in the frame, a
// container, a number, a constant, a tensor argument or an op's result (a tensor found
// by path may be a Parameter: not answered).
std::optional<Status> BuiltinCalls::type_of(Tracer& t, const CallSite& c) {
  if (c.args.size() != 1) return std::nullopt;
  const Value& v = c.args[0];
  if (t.is_number(v)) {  // x.sum().item(): its Python type
    const jit::ScalarKind k = t.graph_.node(v.node).scalar_kind;
    t.push(Value::constant(PyRef::borrow(reinterpret_cast<PyObject*>(k == jit::ScalarKind::Int    ? &PyLong_Type
                                                                    : k == jit::ScalarKind::Float ? &PyFloat_Type
                                                                                                  : &PyBool_Type))));
    return ok();
  }
  if (v.kind == ValueKind::Dict) {
    t.push(Value::constant(v.obj ? v.obj : PyRef::borrow(reinterpret_cast<PyObject*>(&PyDict_Type))));
    return ok();
  }
  const bool tensor = t.is_tensor(v);
  const bool computed = tensor && t.graph_.node(v.node).op != jit::Op::Placeholder;
  if (tensor && !computed && (v.source.kind != Source::Kind::Arg || !v.source.attrs.empty())) return std::nullopt;
  PyObject* type = known_type(v, guards::torch_refs().tensor_type, tensor, computed);
  if (type == nullptr) return std::nullopt;
  t.push(Value::constant(PyRef::borrow(type)));
  return ok();
}

// sum(items[, start]): start + items[0] + items[1] + ..., each + as BINARY_OP.
std::optional<Status> BuiltinCalls::sum(Tracer& t, const CallSite& c) {
  if (c.args.empty() || c.args.size() > 2) return std::nullopt;
  t.push(c.args[0]);
  FJ_TRY(t.op_get_iter(*c.ins));
  Value it = t.pop();
  Value acc = c.args.size() == 2 ? c.args[1] : Value::constant(PyRef::steal(PyLong_FromLong(0)));
  Instruction add = *c.ins;
  add.arg = 0;  // NB_ADD
  for (size_t k = static_cast<size_t>(it.next); k < it.items.size(); ++k) {
    t.push(std::move(acc));
    t.push(it.items[k]);
    FJ_TRY(t.op_binary_op(add));
    acc = t.pop();
  }
  it.next = it.items.size();  // used up
  t.advance_everywhere(it);
  t.push(std::move(acc));
  return ok();
}

// all(xs) / any(xs): each item's truth as `if` takes it, up to the first that decides.
std::optional<Status> BuiltinCalls::all_or_any(Tracer& t, const CallSite& c) {
  if (c.args.size() != 1 || c.kw_names) return std::nullopt;
  const bool is_all = c.callable.obj.get() == PyDict_GetItemString(PyEval_GetBuiltins(), "all");
  t.push(c.args[0]);
  FJ_TRY(t.op_get_iter(*c.ins));
  Value it = t.pop();
  bool answer = is_all;
  size_t k = static_cast<size_t>(it.next);
  for (; k < it.items.size() && answer == is_all; ++k) {
    bool item = false;
    FJ_TRY(t.truth(it.items[k], &item));
    answer = item;
  }
  it.next = k;  // taken up to the item that decided
  t.advance_everywhere(it);
  t.push(Value::constant(PyRef::borrow(answer ? Py_True : Py_False)));
  return ok();
}

// range(...) of ints: symbolic bounds are fixed to their traced values (guarded),
// since a loop over the range is unrolled.
std::optional<Status> BuiltinCalls::range(Tracer& t, const CallSite& c) {
  const std::vector<Value>& args = c.args;
  if (args.empty() || args.size() > 3) return unsupported("range() with these arguments (CPython raises)");
  PyObject* tuple = PyTuple_New(static_cast<Py_ssize_t>(args.size()));
  PyRef holder = PyRef::steal(tuple);
  for (size_t i = 0; i < args.size(); ++i) {
    const Value& a = args[i];
    PyObject* v = nullptr;
    if (a.kind == ValueKind::Sym && a.expr.type() == jit::SymType::Int) {
      const auto hint = a.expr.eval(t.hints_);
      if (!hint) return unsupported("range() bound with no value");
      const int64_t n = std::get<int64_t>(*hint);
      t.guards().add_expr(jit::eq(a.expr, jit::SymExpr::integer(n)), t.readable(a.expr) + " == " + std::to_string(n));
      v = PyLong_FromLongLong(n);
    } else if (a.kind == ValueKind::Const && !is_opaque(a) && PyLong_CheckExact(a.obj.get())) {
      v = Py_NewRef(a.obj.get());
    } else {
      return unsupported("range() of " + t.describe(a));
    }
    PyTuple_SET_ITEM(tuple, static_cast<Py_ssize_t>(i), v);
  }
  PyObject* r = PyObject_Call(reinterpret_cast<PyObject*>(&PyRange_Type), tuple, nullptr);
  if (r == nullptr) {
    guards::clear_error();
    return unsupported("range() raised (CPython raises)");
  }
  t.push(Value::constant(PyRef::steal(r)));
  return ok();
}

// zip(a, b, ...) and enumerate(a[, start]) over what a for loop can iterate: an
// iterator of tuples, built now (loops are unrolled). What cannot be iterated here
// is left to an opaque call (a graph break).
std::optional<Status> BuiltinCalls::zip_or_enumerate(Tracer& t, const CallSite& c) {
  const bool is_zip = c.callable.obj.get() == reinterpret_cast<PyObject*>(&PyZip_Type);
  const size_t nkw = c.kw_names ? static_cast<size_t>(PyTuple_GET_SIZE(c.kw_names.get())) : 0;
  const size_t npos = c.args.size() - nkw;
  bool strict = false;
  std::optional<Value> start_arg;
  if (!is_zip && npos == 2) start_arg = c.args[1];
  for (size_t k = 0; k < nkw; ++k) {
    const std::string key = guards::utf8_lossy(PyTuple_GET_ITEM(c.kw_names.get(), static_cast<Py_ssize_t>(k)));
    const Value& v = c.args[npos + k];
    if (is_zip && key == "strict" && v.kind == ValueKind::Const && !is_opaque(v) && PyBool_Check(v.obj.get())) {
      strict = v.obj.get() == Py_True;
    } else if (!is_zip && key == "start" && !start_arg) {
      start_arg = v;
    } else {
      return std::nullopt;
    }
  }
  if (npos == 0 || (!is_zip && npos > 2)) return std::nullopt;
  int64_t start = 0;
  if (start_arg && t.int_arg(*start_arg, "enumerate() start", &start).failed()) return std::nullopt;
  std::vector<std::vector<Value>> columns;
  int ahead = -1;
  std::vector<int> reads;
  bool reads_any = false;
  std::vector<size_t> counts;  // the columns of itertools.count objects: endless
  for (size_t k = 0; k < (is_zip ? npos : 1); ++k) {
    if (is_zip && is_count_object(c.args[k])) {
      if (strict || t.object_held(c.args[k])) return std::nullopt;  // eager advances the one the frame holds
      counts.push_back(k);
      columns.emplace_back();
      continue;
    }
    t.push(c.args[k]);
    if (t.op_get_iter(*c.ins).failed()) return std::nullopt;  // it popped the value: the stack is as before
    Value it = t.pop();
    if (t.iterator_held(it)) return std::nullopt;  // eager takes its items one by one, later
    if (it.identity >= 0) t.iterated_lists_.insert(it.identity);  // zip reads it lazily: later changes are unseen
    columns.emplace_back(it.items.begin() + static_cast<std::ptrdiff_t>(it.next), it.items.end());
    if (it.writes >= 0) {  // a generator run ahead: so is the zip, reading what it reads
      ahead = ahead < 0 ? it.writes : std::min(ahead, it.writes);
      reads_any |= !it.reads;
      if (it.reads) reads.insert(reads.end(), it.reads->begin(), it.reads->end());
    }
  }
  if (counts.size() == columns.size()) return std::nullopt;  // endless
  size_t n = std::numeric_limits<size_t>::max();
  for (size_t k = 0; k < columns.size(); ++k) {
    if (std::find(counts.begin(), counts.end(), k) == counts.end()) n = std::min(n, columns[k].size());
  }
  for (size_t k : counts) FJ_TRY(count_items(t, c.args[k], n, &columns[k]));
  Value it;
  if (strict) it.obj = strict_zip_error(columns, n);  // raised where the loop ends (FOR_ITER)
  it.kind = ValueKind::Iterator;
  it.identity = t.own_iterator_id();
  it.writes = ahead;
  if (!reads_any) it.reads = std::make_shared<const std::vector<int>>(std::move(reads));
  for (size_t i = 0; i < n; ++i) {
    std::vector<Value> row;
    if (!is_zip) row.push_back(Value::constant(PyRef::steal(PyLong_FromLongLong(start + static_cast<int64_t>(i)))));
    for (const auto& column : columns) row.push_back(column[i]);
    Value tuple = Value::sequence(ValueKind::Tuple, std::move(row));
    tuple.identity = t.next_identity_++;
    it.items.push_back(std::move(tuple));
  }
  t.push(std::move(it));
  return ok();
}

// zip(strict=True)'s ValueError after its n rows, where its columns' lengths differ
// (CPython's zip_next: the first column that ends early, or the first after an ended
// first one that has more); null where they do not.
PyRef BuiltinCalls::strict_zip_error(const std::vector<std::vector<Value>>& columns, size_t n) {
  size_t at = 0;
  while (at < columns.size() && columns[at].size() != n) ++at;
  bool longer = false;
  if (at == 0) {
    at = 1;
    while (at < columns.size() && columns[at].size() == n) ++at;
    if (at == columns.size()) return PyRef();
    longer = true;
  }
  const std::string range = at == 1 ? " 1" : "s 1-" + std::to_string(at);
  const std::string text = "zip() argument " + std::to_string(at + 1) + (longer ? " is longer" : " is shorter") + " than argument" + range;
  PyRef args = PyRef::steal(Py_BuildValue("(s)", text.c_str()));
  std::optional<Value> exc = args ? make_exception(PyExc_ValueError, args.get()) : std::nullopt;
  guards::clear_error();
  return exc ? exc->obj : PyRef();
}

// The first n numbers of an itertools.count object: start + i * step.
Status BuiltinCalls::count_items(Tracer& t, const Value& count, size_t n, std::vector<Value>* out) {
  const jit::SymExpr start = *as_sym(count.items[2]), step = *as_sym(count.items[4]);
  for (size_t i = 0; i < n; ++i) {
    const jit::SymExpr e = jit::add(start, jit::mul(jit::SymExpr::integer(static_cast<int64_t>(i)), step));
    if (std::optional<int64_t> k = e.as_int()) {
      out->push_back(Value::constant(PyRef::steal(PyLong_FromLongLong(*k))));
    } else if (e.is_constant() || !e.eval(t.hints_)) {
      return unsupported("itertools.count() past the int64 range (not supported yet)");
    } else {
      out->push_back(Value::sym(e));
    }
  }
  return ok();
}

// int(x), float(x), bool(x): of a constant, folded (float("-inf"), int(2.5)); of a
// tensor or a symbolic number, a number read from it (a graph Item node).
std::optional<Status> BuiltinCalls::number_type(Tracer& t, const CallSite& c) {
  if (c.args.size() != 1) return std::nullopt;
  PyObject* type = c.callable.obj.get();
  const Value& a = c.args[0];
  if (a.kind == ValueKind::Const && !is_opaque(a) && (is_plain_scalar(a.obj.get()) || PyUnicode_CheckExact(a.obj.get()))) {
    PyObject* r = PyObject_CallOneArg(type, a.obj.get());
    if (r == nullptr) {
      guards::clear_error();
      return unsupported("a constant conversion raised (CPython raises)");
    }
    t.push(Value::constant(PyRef::steal(r)));
    return ok();
  }
  if (type == reinterpret_cast<PyObject*>(&PyBool_Type) &&
      (a.kind == ValueKind::Tuple || a.kind == ValueKind::List || a.kind == ValueKind::Dict || a.kind == ValueKind::Object)) {
    bool truth = false;  // bool(d): its truth, as `if d:` takes it
    FJ_TRY(t.truth(a, &truth));
    t.push(Value::constant(PyRef::borrow(truth ? Py_True : Py_False)));
    return ok();
  }
  if (a.kind != ValueKind::Sym && !t.is_tensor(a) && !t.is_number(a)) return std::nullopt;
  const bool to_int = type == reinterpret_cast<PyObject*>(&PyLong_Type);
  const bool to_float = type == reinterpret_cast<PyObject*>(&PyFloat_Type);
  if (t.is_tensor(a)) FJ_TRY(t.require_tensor_attr(to_int ? "__int__" : to_float ? "__float__" : "__bool__"));
  return t.to_number(a, to_int ? jit::ScalarKind::Int : to_float ? jit::ScalarKind::Float : jit::ScalarKind::Bool);
}

// str(x) and repr(x) of a constant whose text runs no user code: a foldable constant,
// a class whose metaclass is type (its text is "<class 'module.qualname'>"; the
// class is the object the trace guarded), or an exception of a builtin class that
// the trace made (its text is that of its constant arguments).
std::optional<Status> BuiltinCalls::str_or_repr(Tracer& t, const CallSite& c) {
  if (c.args.size() != 1 || c.kw_names) return std::nullopt;
  const Value& a = c.args[0];
  if (a.kind == ValueKind::Object) return t.object_text(a, c.callable.obj.get() == reinterpret_cast<PyObject*>(&PyUnicode_Type));
  if (a.kind != ValueKind::Const || is_opaque(a)) return std::nullopt;
  PyObject* o = a.obj.get();
  const bool made_exception = a.fresh && PyExceptionInstance_Check(o) && !(Py_TYPE(o)->tp_flags & Py_TPFLAGS_HEAPTYPE);
  if (!is_foldable(o) && !(PyType_Check(o) && Py_IS_TYPE(o, &PyType_Type)) && !made_exception) return std::nullopt;
  const bool is_str = c.callable.obj.get() == reinterpret_cast<PyObject*>(&PyUnicode_Type);
  PyObject* r = is_str ? PyObject_Str(o) : PyObject_Repr(o);
  if (r == nullptr) {
    guards::clear_error();
    return std::nullopt;
  }
  t.push(Value::constant(PyRef::steal(r)));
  return ok();
}

// callable(x): a class decides (tp_call), and the trace knows each value's class: a
// guarded constant's, a function made in the frame, a tensor, a number, a container.
std::optional<Status> BuiltinCalls::callable(Tracer& t, const CallSite& c) {
  if (c.args.size() != 1 || c.kw_names) return std::nullopt;
  const Value& a = c.args[0];
  bool answer = false;
  if (is_opaque(a)) {  // its class, guarded
    PyObject* type = t.opaque_type(a);
    if (type == nullptr) return std::nullopt;
    answer = reinterpret_cast<PyTypeObject*>(type)->tp_call != nullptr;
  } else if (a.kind == ValueKind::Const) {
    answer = PyCallable_Check(a.obj.get()) != 0;
  } else if (a.kind == ValueKind::TensorMethod) {
    answer = true;
  } else if (a.kind == ValueKind::Object) {  // its class decides (guarded unchanged)
    answer = reinterpret_cast<PyTypeObject*>(a.obj.get())->tp_call != nullptr;
  } else if (a.kind == ValueKind::Null || a.kind == ValueKind::GradModeExit) {
    return std::nullopt;
  }
  t.push(Value::constant(PyRef::borrow(answer ? Py_True : Py_False)));
  return ok();
}

// dict.get(d, key[, default]): of a dict the frame builds, its item; of a dict or a
// subclass of dict found by path, the item in its own storage (no __getitem__ or
// __missing__ runs), guarded by path.
std::optional<Status> BuiltinCalls::dict_get(Tracer& t, const CallSite& c) {
  if (c.args.size() != 2 && c.args.size() != 3) return std::nullopt;
  const Value& d = c.args[0];
  if (d.kind == ValueKind::Dict) return t.call_dict_method("get", c.args);
  if (!t.is_path_dict(d, /*subclass=*/true)) return std::nullopt;
  const Value none = Value::constant(PyRef::borrow(Py_None));
  return t.path_dict_item(d, c.args[1], c.args.size() == 3 ? &c.args[2] : &none, !PyDict_CheckExact(d.obj.get()));
}

// super() without arguments, in a method (Tracer::zero_arg_super), and super(cls, self).
std::optional<Status> BuiltinCalls::super(Tracer& t, const CallSite& c) {
  if (c.args.size() == 2) return t.make_super(c.args[0], c.args[1]);
  if (!c.args.empty()) return std::nullopt;
  return t.zero_arg_super();
}

// list(x) and tuple(x) of what a for loop can iterate: a new list or tuple of its
// items (a tuple of a tuple is itself).
std::optional<Status> BuiltinCalls::list_or_tuple(Tracer& t, const CallSite& c) {
  const bool is_list = c.callable.obj.get() == reinterpret_cast<PyObject*>(&PyList_Type);
  if (c.args.size() > 1) return std::nullopt;
  std::vector<Value> items;
  if (c.args.size() == 1) {
    if (!is_list && c.args[0].kind == ValueKind::Tuple && !c.args[0].obj && !c.args[0].torch_size) {
      t.push(c.args[0]);
      return ok();
    }
    if (t.star_items(c.args[0], &items).failed()) return std::nullopt;  // the stack is as before
  }
  Value v = Value::sequence(is_list ? ValueKind::List : ValueKind::Tuple, std::move(items));
  v.identity = t.next_identity_++;
  t.push(std::move(v));
  return ok();
}

// abs(n) of a symbolic number stays symbolic.
std::optional<Status> BuiltinCalls::abs(Tracer& t, const CallSite& c) {
  if (c.args.size() == 1 && t.is_number(c.args[0])) return t.number_unary(c.args[0], jit::Op::Abs, "abs()");
  if (c.args.size() != 1 || c.args[0].kind != ValueKind::Sym || is_numpy_scalar(c.args[0])) return std::nullopt;
  return t.push_sym(jit::abs(c.args[0].expr), "abs()");
}

// dict(), dict(mapping), dict(pairs), dict(..., k=v): a new dict the frame owns, filled
// as dict.update fills it.
std::optional<Status> BuiltinCalls::dict(Tracer& t, const CallSite& c) {
  Value d = Value::sequence(ValueKind::Dict, {});
  d.identity = t.next_identity_++;
  t.push(d);
  std::vector<Value> args = c.args;
  args.insert(args.begin(), t.top());
  std::optional<Status> s = t.dict_change_method("update", args, c.kw_names.get());
  if (!s || s->failed()) {  // not such arguments: the call's other steps decide
    t.pop();
    return std::nullopt;
  }
  t.pop();  // update's None; the dict stays
  return ok();
}

// setattr(obj, "name", value) of an object made in the frame: as STORE_ATTR (`direct`:
// object.__setattr__, past the class's own).
std::optional<Status> BuiltinCalls::setattr_on(Tracer& t, const CallSite& c, bool direct) {
  if (c.args.size() != 3 || c.kw_names || c.args[0].kind != ValueKind::Object || c.args[1].kind != ValueKind::Const ||
      !PyUnicode_CheckExact(c.args[1].obj.get())) {
    return std::nullopt;
  }
  FJ_TRY(t.object_store_attr(c.args[0], guards::utf8_lossy(c.args[1].obj.get()), c.args[2], direct));
  t.push(Value::constant(PyRef::borrow(Py_None)));
  return ok();
}

}  // namespace fj::interp

namespace fj::interp {

// iter(x) of what a for loop iterates (not a dict): an iterator of its own, itself for
// an iterator. A list it reads may not change while it lives (iterated_lists_), and it
// is never handed over to CPython (whose iterator would read the list as it changes).
std::optional<Status> BuiltinCalls::iter_of(Tracer& t, const CallSite& c) {
  if (c.args.size() != 1 || c.args[0].kind == ValueKind::Dict || t.is_path_dict(c.args[0])) return std::nullopt;
  t.push(c.args[0]);
  if (t.op_get_iter(*c.ins).failed()) return std::nullopt;
  Value it = t.pop();
  if (it.obj) return unsupported("iter() of a set the frame changes (not supported yet)");
  if (it.identity > -2) {
    if (it.identity >= 0) t.iterated_lists_.insert(it.identity);
    it.fresh = c.args[0].kind == ValueKind::List;
    it.identity = t.own_iterator_id();
    it.source = Source{};
  }
  t.push(std::move(it));
  return ok();
}

// next(it) / next(it, default) of an iterator of its own: its next item (every copy
// of it advances), else the default, else StopIteration.
std::optional<Status> BuiltinCalls::next_of(Tracer& t, const CallSite& c) {
  if (c.args.empty() || c.args.size() > 2) return std::nullopt;
  Value it = c.args[0];
  if (it.kind != ValueKind::Iterator || it.identity > -2 || it.obj) return std::nullopt;
  if (t.run_ahead_stale(it)) {
    return unsupported("next() of a generator expression after a write it may read (not supported yet)");
  }
  if (it.next < it.items.size()) {
    Value item = it.items[it.next++];
    t.advance_everywhere(it);
    t.push(std::move(item));
    return ok();
  }
  if (c.args.size() == 2) {
    t.push(c.args[1]);
    return ok();
  }
  PyErr_SetNone(PyExc_StopIteration);
  return t.raise_python_error("next() of an exhausted iterator (CPython raises StopIteration)");
}

// torch.is_grad_enabled(): the mode where the call is (the entry's mode guarded);
// torch.get_default_dtype(): float32, which every entry checks.
std::optional<Status> BuiltinCalls::torch_state(Tracer& t, const CallSite& c) {
  if (!c.args.empty() || c.kw_names) return std::nullopt;
  static PyObject* default_dtype = lookup_attr("torch", "get_default_dtype");
  if (c.callable.obj.get() == default_dtype) {
    t.push(Value::constant(PyRef::borrow(guards::torch_refs().float32)));
    return ok();
  }
  t.guards().add_grad_mode(t.grad_at_entry_);
  t.push(Value::constant(PyRef::borrow(t.grad_enabled_ ? Py_True : Py_False)));
  return ok();
}

// inspect.signature(f) of a Python function the trace guards (found as a global or an
// attribute, its code and defaults kept by FunctionUnchanged) or of a method the trace
// bound to a traced object (descriptor_attr guards its function at the object's path):
// computed now, an immutable known value (transformers' apply_chunking_to_forward reads
// len(inspect.signature(fn).parameters) in every layer). A function with __wrapped__
// or __signature__ set, or one an argument passed unguarded, runs the usual way.
std::optional<Status> BuiltinCalls::signature(Tracer& t, const CallSite& c) {
  if (c.args.size() != 1 || c.kw_names) return std::nullopt;
  const Value& f = c.args[0];
  if (f.kind != ValueKind::Const || !f.obj || is_opaque(f) || f.reg >= 0) return std::nullopt;
  PyObject* o = f.obj.get();
  const bool bound = PyMethod_Check(o);
  PyObject* fn = bound ? PyMethod_GET_FUNCTION(o) : o;
  if (!PyFunction_Check(fn) || f.fresh != bound || (bound && f.items.size() != 1)) return std::nullopt;
  if (PyObject* attrs = reinterpret_cast<PyFunctionObject*>(fn)->func_dict) {
    if (PyDict_GetItemString(attrs, "__wrapped__") != nullptr || PyDict_GetItemString(attrs, "__signature__") != nullptr) {
      return std::nullopt;
    }
  }
  PyRef sig = PyRef::steal(PyObject_CallOneArg(c.callable.obj.get(), o));
  if (!sig || !is_immutable_known(sig.get())) {
    guards::clear_error();
    return std::nullopt;
  }
  t.guards().add_function(fn);
  t.push(Value::constant(std::move(sig)));
  return ok();
}

// torch.is_floating_point(x), torch.numel(x) & co of a tensor: as its own method.
std::optional<Status> BuiltinCalls::torch_meta(Tracer& t, const CallSite& c) {
  if (c.args.size() != 1 || c.kw_names || !t.is_tensor(c.args[0])) return std::nullopt;
  if (!PyCFunction_Check(c.callable.obj.get())) return std::nullopt;
  const char* name = reinterpret_cast<PyCFunctionObject*>(c.callable.obj.get())->m_ml->ml_name;
  if (Tracer::is_meta_method(name)) return t.call_meta_method(name, c.args, nullptr);
  return t.call_shape_method(name, c.args);
}

}  // namespace fj::interp
