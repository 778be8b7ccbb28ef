// Calls evaluated while tracing: a pure builtin (round, divmod, sorted, str(), int(s)),
// a function of math or operator, a method of a str, bytes, int, float or tuple, whose
// arguments are all known now runs as it is, and its result joins the trace: a
// constant, or a list, tuple or dict of values. The same evaluation serves operators
// (BINARY_OP, COMPARE_OP, CONTAINS_OP) on known values, and sets made in the frame: a
// set of known items is a real set object the trace owns (fresh), changed by its own
// methods and built anew from its items where it leaves the trace.
//
// Known: a constant (guarded where it came from), a set the frame made, a tuple, list
// or dict of known values (handed to the call as new objects, mapped back to their
// values where the result holds them), or, where `specialize`, a symbolic number (its
// value now, guarded). A call that raises raises the same exception in the trace.
#include "interp/trace/tracer.h"

#include <algorithm>
#include <cstring>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

namespace fj::interp {

PyObject* lookup_attr(const char* module, const char* name) {
  PyObject* m = PyImport_ImportModule(module);
  PyObject* f = m ? PyObject_GetAttrString(m, name) : nullptr;
  Py_XDECREF(m);
  if (f == nullptr) guards::clear_error();
  return f;
}

PyObject* operator_function(const char* name) { return lookup_attr("operator", name); }

namespace {

bool immutable_type(PyTypeObject* tp) {
  return tp == &PyUnicode_Type || tp == &PyBytes_Type || tp == &PyLong_Type || tp == &PyFloat_Type ||
         tp == &PyBool_Type || tp == &PyComplex_Type || tp == &PyTuple_Type || tp == &PyFrozenSet_Type ||
         tp == &PyRange_Type || tp == &PySlice_Type;
}

// Builtins that compute a value from their arguments and change nothing. isinstance and
// issubclass are not here: a metaclass may run Python code for them.
const std::unordered_set<PyObject*>& pure_builtins() {
  static const auto* set = [] {
    static const char* const kNames[] = {"abs", "round", "divmod", "pow", "chr", "ord", "hex", "bin", "oct",
                                         "format", "hash", "ascii", "repr", "str", "int", "float", "bool",
                                         "complex", "len", "sorted", "sum", "min", "max", "any", "all",
                                         "frozenset", "set", "tuple", "list", "dict", "slice", "bytes", "range"};
    auto* s = new std::unordered_set<PyObject*>();  // kept for the process
    PyObject* builtins = PyImport_ImportModule("builtins");
    for (const char* name : kNames) {
      if (PyObject* b = builtins ? PyObject_GetAttrString(builtins, name) : nullptr) s->insert(b);
    }
    Py_XDECREF(builtins);
    guards::clear_error();
    return s;
  }();
  return *set;
}

// operator's functions that change an argument, or call one.
bool operator_changes(const std::string& name) {
  static const std::unordered_set<std::string> kNames = {
      "setitem", "delitem", "iadd", "iand", "iconcat", "ifloordiv", "ilshift", "imod", "imul", "imatmul",
      "ior", "ipow", "irshift", "isub", "itruediv", "ixor", "call", "__setitem__", "__delitem__", "__call__"};
  return kNames.count(name) > 0 || (name.size() > 3 && name.compare(0, 3, "__i") == 0);
}

bool fresh_set(const Value& v) { return v.kind == ValueKind::Const && v.fresh && v.obj && PySet_CheckExact(v.obj.get()); }

// An exception the trace made (fresh) whose str() and repr() are BaseException's own
// (a builtin class, or a class that keeps them): CPython's C code on its known args.
bool plain_exception(const Value& v) {
  if (v.kind != ValueKind::Const || !v.fresh || !v.obj || !PyExceptionInstance_Check(v.obj.get())) return false;
  PyTypeObject* tp = Py_TYPE(v.obj.get());
  auto* base = reinterpret_cast<PyTypeObject*>(PyExc_BaseException);
  const bool own_text = !PyType_HasFeature(tp, Py_TPFLAGS_HEAPTYPE) || (tp->tp_str == base->tp_str && tp->tp_repr == base->tp_repr);
  return own_text && is_immutable_known(reinterpret_cast<PyBaseExceptionObject*>(v.obj.get())->args);
}

}  // namespace

// operator.itemgetter, attrgetter and methodcaller: classes of immutable callables.
bool is_operator_getter_class(PyObject* cls) {
  static PyObject* const kClasses[3] = {operator_function("itemgetter"), operator_function("attrgetter"),
                                        operator_function("methodcaller")};
  return cls != nullptr && (cls == kClasses[0] || cls == kClasses[1] || cls == kClasses[2]);
}

// An enum class (its metaclass enum's own EnumType) whose operations run only the enum
// module's code and C: no class of its MRO outside the enum module defines a dunder or
// _missing_ (the member lookup's fallback) of its own, except __new__ and __init__,
// which ran when the class was made. Its members are fixed singletons: ==, |, in,
// Act(value), Act[name], .value, iteration, computed now, give what they give each call.
bool is_plain_enum_class(PyObject* cls) {
  static PyObject* const meta = lookup_attr("enum", "EnumType");
  if (meta == nullptr || !PyType_Check(cls) || reinterpret_cast<PyObject*>(Py_TYPE(cls)) != meta) return false;
  static PyObject* const module_key = PyUnicode_InternFromString("__module__");
  PyObject* mro = reinterpret_cast<PyTypeObject*>(cls)->tp_mro;
  for (Py_ssize_t i = 0; mro != nullptr && i < PyTuple_GET_SIZE(mro); ++i) {
    auto* k = reinterpret_cast<PyTypeObject*>(PyTuple_GET_ITEM(mro, i));
    if (!PyType_HasFeature(k, Py_TPFLAGS_HEAPTYPE)) continue;
    PyObject* module = PyDict_GetItemWithError(k->tp_dict, module_key);
    if (module != nullptr && PyUnicode_Check(module) && PyUnicode_CompareWithASCIIString(module, "enum") == 0) continue;
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    while (PyDict_Next(k->tp_dict, &pos, &key, &value)) {
      const char* c = PyUnicode_Check(key) ? PyUnicode_AsUTF8(key) : nullptr;
      if (c == nullptr) return false;
      const std::string_view name(c);
      const bool dunder = name.size() > 4 && name.substr(0, 2) == "__" && name.substr(name.size() - 2) == "__";
      if (!dunder && name != "_missing_") continue;
      if (name == "__new__" || name == "__init__" || name == "__module__" || name == "__qualname__" || name == "__doc__" ||
          (!PyCallable_Check(value) && !PyObject_HasAttrString(value, "__get__"))) {
        continue;  // made at class creation, or plain data
      }
      if (Py_IS_TYPE(value, &PyMethodDescr_Type) || Py_IS_TYPE(value, &PyWrapperDescr_Type) || PyCFunction_Check(value)) {
        continue;  // C: a data type's own (IntEnum's int.__format__)
      }
      PyRef owner = PyRef::steal(PyObject_GetAttr(value, module_key));  // a function's module (enum's own __hash__)
      const bool enum_own = owner && PyUnicode_Check(owner.get()) && PyUnicode_CompareWithASCIIString(owner.get(), "enum") == 0;
      guards::clear_error();
      if (!enum_own) return false;
    }
  }
  return !PyErr_Occurred();
}

bool is_plain_enum_member(PyObject* o) { return is_plain_enum_class(reinterpret_cast<PyObject*>(Py_TYPE(o))); }

// A class of the builtins module (object, int, str, list): its attributes are fixed.
bool builtin_class(PyObject* o) {
  if (!PyType_Check(o) || PyType_HasFeature(reinterpret_cast<PyTypeObject*>(o), Py_TPFLAGS_HEAPTYPE)) return false;
  PyObject* b = PyEval_GetBuiltins();  // borrowed
  const char* name = reinterpret_cast<PyTypeObject*>(o)->tp_name;
  return b != nullptr && std::strchr(name, '.') == nullptr && PyDict_GetItemString(b, name) == o;
}

namespace {

// An inspect.Parameter whose default is immutable (or none), an inspect.Signature of
// such parameters, or the parameters mapping of one (a read-only view of a dict only
// the Signature holds): objects with __slots__ and no setters. Their annotations are
// not looked into. nullopt: o is none of these.
std::optional<bool> signature_known(PyObject* o) {
  static PyObject* const signature = lookup_attr("inspect", "Signature");
  static PyObject* const parameter = lookup_attr("inspect", "Parameter");
  static PyObject* const empty = parameter ? PyObject_GetAttrString(parameter, "empty") : nullptr;
  if (signature == nullptr || parameter == nullptr || empty == nullptr) return std::nullopt;
  PyObject* tp = reinterpret_cast<PyObject*>(Py_TYPE(o));
  if (tp == parameter) {
    PyRef d = PyRef::steal(PyObject_GetAttrString(o, "default"));
    if (!d) guards::clear_error();
    return d && (d.get() == empty || is_immutable_known(d.get()));
  }
  if (tp != signature && !Py_IS_TYPE(o, &PyDictProxy_Type)) return std::nullopt;
  PyRef params = tp == signature ? PyRef::steal(PyObject_GetAttrString(o, "parameters")) : PyRef::borrow(o);
  PyRef values = params ? PyRef::steal(PyObject_CallMethod(params.get(), "values", nullptr)) : PyRef();
  PyRef it = values ? PyRef::steal(PyObject_GetIter(values.get())) : PyRef();
  bool known = static_cast<bool>(it);
  while (PyObject* item = known ? PyIter_Next(it.get()) : nullptr) {
    known = reinterpret_cast<PyObject*>(Py_TYPE(item)) == parameter && signature_known(item).value_or(false);
    Py_DECREF(item);
  }
  if (PyErr_Occurred()) {
    guards::clear_error();
    known = false;
  }
  return known;
}

}  // namespace

// Objects that never change and whose operations run no user code: numbers, strings,
// bytes, None, dtypes, builtin classes, and tuples, frozensets, ranges and slices of
// them; inspect's Signature and Parameter objects of such defaults.
bool is_immutable_known(PyObject* o) {
  if (is_foldable(o) || o == Py_Ellipsis || PyBytes_CheckExact(o) || PyComplex_CheckExact(o) || PyRange_Check(o) ||
      is_numpy_metadata(o)) {
    return true;
  }
  if (is_plain_enum_member(o) || is_plain_enum_class(o)) return true;
  if (PyType_Check(o)) return PyType_HasFeature(reinterpret_cast<PyTypeObject*>(o), Py_TPFLAGS_IMMUTABLETYPE);
  if (PyTuple_CheckExact(o) || PyFrozenSet_CheckExact(o)) {
    PyRef it = PyRef::steal(PyObject_GetIter(o));
    while (PyObject* item = it ? PyIter_Next(it.get()) : nullptr) {
      const bool known = is_immutable_known(item);
      Py_DECREF(item);
      if (!known) return false;
    }
    return it && !PyErr_Occurred();
  }
  if (PySlice_Check(o)) {
    auto* s = reinterpret_cast<PySliceObject*>(o);
    return is_immutable_known(s->start) && is_immutable_known(s->stop) && is_immutable_known(s->step);
  }
  return signature_known(o).value_or(false);
}

// Whether calling fn (the value `callable`) with known arguments runs no user code and
// changes nothing but a set the frame made (`args`, self first).
bool Tracer::pure_callable(const Value& callable, const std::vector<Value>& args) const {
  if (callable.kind != ValueKind::Const || is_opaque(callable) || callable.reg >= 0) return false;
  PyObject* fn = callable.obj.get();
  if (pure_builtins().count(fn) || fn == guards::torch_refs().size_type || is_operator_getter_class(fn) ||
      is_pure_numpy_callable(fn) || is_plain_enum_class(fn)) {
    return true;
  }
  if (PyCFunction_Check(fn)) {
    PyObject* self = PyCFunction_GET_SELF(fn);
    const char* name = reinterpret_cast<PyCFunctionObject*>(fn)->m_ml->ml_name;
    if (self == nullptr || name == nullptr) return false;
    if (PyModule_Check(self)) {
      const char* module = PyModule_GetName(self);
      if (module == nullptr) {
        guards::clear_error();
        return false;
      }
      const std::string_view m(module);
      return m == "math" || m == "cmath" || ((m == "_operator" || m == "operator") && !operator_changes(name));
    }
    if (PyType_Check(self)) {  // int.from_bytes, dict.fromkeys, float.fromhex, str.maketrans
      auto* tp = reinterpret_cast<PyTypeObject*>(self);
      return immutable_type(tp) || tp == &PyDict_Type;
    }
    return immutable_type(Py_TYPE(self)) && is_immutable_known(self);
  }
  if (Py_IS_TYPE(fn, &PyMethodDescr_Type)) {  // str.split(s, ...): self is the first argument
    PyTypeObject* tp = reinterpret_cast<PyDescrObject*>(fn)->d_type;
    if (immutable_type(tp)) return true;
    return tp == &PySet_Type && !args.empty() && fresh_set(args[0]);
  }
  return false;
}

// Whether v is known now (see the file's comment).
bool Tracer::knowable(const Value& v, bool specialize) const {
  switch (v.kind) {
    case ValueKind::Const:
      return !is_opaque(v) && v.reg < 0 && v.obj &&
             (fresh_set(v) || plain_exception(v) || (!v.fresh && is_immutable_known(v.obj.get())));
    case ValueKind::Sym: {
      if (v.expr.is_constant()) return true;
      return specialize && v.expr.eval(hints_).has_value();
    }
    case ValueKind::Tuple:
      if (v.obj && !v.torch_size) return false;  // a named tuple
      [[fallthrough]];
    case ValueKind::Slice:
    case ValueKind::List:
    case ValueKind::Dict:
      if (v.kind != ValueKind::Tuple && v.obj) return false;  // a list attribute, read by path
      for (const Value& item : v.items) {
        if (!knowable(item, specialize)) return false;
      }
      return true;
    default:
      return false;
  }
}

// The Python object a knowable value stands for now; made containers are recorded in
// `made`, so that a result holding them maps back to their values.
Status Tracer::known_object(const Value& v, KnownObjects& made, PyRef* out) {
  switch (v.kind) {
    case ValueKind::Const:
      *out = v.obj;
      if (fresh_set(v)) made.values.emplace(v.obj.get(), v);
      return ok();
    case ValueKind::Sym:
      return concrete_number(v, "a value a call needs now", out);
    case ValueKind::Slice: {  // start, stop, step
      PyRef part[3];
      for (size_t i = 0; i < 3; ++i) FJ_TRY(known_object(v.items[i], made, &part[i]));
      *out = PyRef::steal(PySlice_New(part[0].get(), part[1].get(), part[2].get()));
      return ok();
    }
    default:
      break;
  }
  const auto n = static_cast<Py_ssize_t>(v.items.size());
  PyRef o = PyRef::steal(v.kind == ValueKind::Dict ? PyDict_New() : v.kind == ValueKind::List ? PyList_New(n) : PyTuple_New(n));
  if (!o) return unsupported("out of memory");
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyRef item;
    FJ_TRY(known_object(v.items[static_cast<size_t>(i)], made, &item));
    if (v.kind == ValueKind::Dict) {
      if (i % 2 == 1 && PyDict_SetItem(o.get(), PyTuple_GET_ITEM(made.last_key.get(), 0), item.get()) < 0) {
        guards::clear_error();
        return unsupported("a dict key that cannot be hashed (CPython raises)");
      }
      if (i % 2 == 0) made.last_key = PyRef::steal(PyTuple_Pack(1, item.get()));
    } else if (v.kind == ValueKind::List) {
      PyList_SET_ITEM(o.get(), i, item.release());
    } else {
      PyTuple_SET_ITEM(o.get(), i, item.release());
    }
  }
  if (v.torch_size) o = PyRef::steal(PyObject_CallOneArg(guards::torch_refs().size_type, o.get()));
  if (!o) {
    guards::clear_error();
    return unsupported("a torch.Size that cannot be made");
  }
  if (v.kind != ValueKind::Tuple) made.values.emplace(o.get(), v);
  made.keep.push_back(o);
  *out = std::move(o);
  return ok();
}

// The value of a call's result r: what it was made from, a constant, a new set the
// frame owns, or a new list, tuple or dict of such values. false: none of these.
bool Tracer::known_result(PyObject* r, KnownObjects& made, Value* out) {
  if (auto it = made.values.find(r); it != made.values.end()) {
    *out = it->second;
    return true;
  }
  if (is_immutable_known(r)) {
    *out = Value::constant(PyRef::borrow(r));
    return true;
  }
  if (std::optional<Value> number = numpy_scalar_constant(r)) {
    *out = std::move(*number);
    return true;
  }
  if (PySet_CheckExact(r)) {
    PyRef it = PyRef::steal(PyObject_GetIter(r));
    while (PyObject* item = it ? PyIter_Next(it.get()) : nullptr) {
      const bool known = is_immutable_known(item);
      Py_DECREF(item);
      if (!known) return false;
    }
    *out = Value::constant(PyRef::borrow(r));
    out->fresh = true;
    out->identity = next_identity_++;
    made.values.emplace(r, *out);
    return true;
  }
  if (is_operator_getter_class(reinterpret_cast<PyObject*>(Py_TYPE(r)))) {  // immutable, called by call_operator
    *out = Value::constant(PyRef::borrow(r));
    return true;
  }
  ValueKind kind;
  const bool size = reinterpret_cast<PyObject*>(Py_TYPE(r)) == guards::torch_refs().size_type;
  if (PyList_CheckExact(r)) kind = ValueKind::List;
  else if (size) kind = ValueKind::Tuple;
  else if (PyTuple_CheckExact(r)) kind = ValueKind::Tuple;
  else if (PyDict_CheckExact(r)) kind = ValueKind::Dict;
  else return false;
  Value v = Value::sequence(kind, {});
  v.identity = next_identity_++;
  Py_ssize_t pos = 0;
  PyObject *key, *item;
  if (kind == ValueKind::Dict) {
    while (PyDict_Next(r, &pos, &key, &item)) {
      Value k, x;
      if (!is_immutable_known(key) || !known_result(item, made, &x)) return false;
      v.items.push_back(Value::constant(PyRef::borrow(key)));
      v.items.push_back(std::move(x));
    }
  } else {
    PyRef fast = PyRef::steal(PySequence_Fast(r, "a sequence"));
    for (Py_ssize_t i = 0; fast && i < PySequence_Fast_GET_SIZE(fast.get()); ++i) {
      Value x;
      if (!known_result(PySequence_Fast_GET_ITEM(fast.get(), i), made, &x)) return false;
      v.items.push_back(std::move(x));
    }
  }
  if (kind != ValueKind::Tuple) made.values.emplace(r, v);
  v.torch_size = size;
  *out = std::move(v);
  return true;
}

// fn(*args, **kw) run now on the objects of known values. nullopt: some argument is not
// known (nothing was guarded), or the result is nothing the trace can hold.
std::optional<Status> Tracer::fold_call(PyObject* fn, const std::vector<Value>& args, PyObject* kw_names,
                                        bool specialize, const std::string& what) {
  for (const Value& a : args) {
    if (!knowable(a, specialize)) return std::nullopt;
  }
  KnownObjects made;
  const size_t nkw = kw_names ? static_cast<size_t>(PyTuple_GET_SIZE(kw_names)) : 0;
  const size_t npos = args.size() - nkw;
  PyRef pos = PyRef::steal(PyTuple_New(static_cast<Py_ssize_t>(npos)));
  PyRef kw = PyRef::steal(nkw ? PyDict_New() : nullptr);
  for (size_t i = 0; i < args.size(); ++i) {
    PyRef o;
    FJ_TRY(known_object(args[i], made, &o));
    if (i < npos) {
      PyTuple_SET_ITEM(pos.get(), static_cast<Py_ssize_t>(i), o.release());
    } else {
      PyDict_SetItem(kw.get(), PyTuple_GET_ITEM(kw_names, static_cast<Py_ssize_t>(i - npos)), o.get());
    }
  }
  // NumPy's arithmetic warns or raises as np.errstate says: only what sets no
  // floating-point flag is computed now, the rest runs as a call each time.
  const bool numpy = is_pure_numpy_callable(fn) || std::any_of(args.begin(), args.end(), is_numpy_scalar);
  PyRef r;
  {
    NumpyStrict strict(numpy);
    r = PyRef::steal(PyObject_Call(fn, pos.get(), kw.get()));
  }
  if (!r && numpy && (PyErr_ExceptionMatches(PyExc_FloatingPointError) || PyErr_ExceptionMatches(PyExc_Warning))) {
    guards::clear_error();
    return std::nullopt;
  }
  if (!r) return raise_python_error(what + " raised (CPython raises it)");
  Value out;
  if (!known_result(r.get(), made, &out)) return std::nullopt;
  push(std::move(out));
  return ok();
}

// The Python exception set now, raised by the current instruction in the trace.
Status Tracer::raise_python_error(const std::string& why) {
  if (guards::error_must_propagate() || guards::error_kept()) {  // Ctrl-C, out of memory: the caller's
    guards::clear_error();
    return unsupported(why);
  }
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  PyErr_NormalizeException(&type, &value, &tb);
  PyRef exc = PyRef::steal(value);
  Py_XDECREF(type);
  Py_XDECREF(tb);
  if (!exc || !PyExceptionInstance_Check(exc.get())) return unsupported(why);
  Value v = Value::constant(std::move(exc));
  v.fresh = true;
  return raise_exception(std::move(v), why);
}

// CALL of a pure callable: with known arguments as they are, else (at the end of the
// call's steps) with symbolic numbers made concrete.
std::optional<Status> Tracer::call_folded(const CallSite& c, bool specialize) {
  if (!pure_callable(c.callable, c.args)) return std::nullopt;
  if (!c.args.empty() && fresh_set(c.args[0])) {  // a set method may change the set
    ++changes_;
    note_write(-1);
  }
  // torch.Size([n, m]) of symbolic sizes: a torch.Size of them, still symbolic
  if (c.callable.obj.get() == guards::torch_refs().size_type && c.args.size() == 1 && !c.kw_names &&
      (c.args[0].kind == ValueKind::List || (c.args[0].kind == ValueKind::Tuple && !c.args[0].obj))) {
    const bool ints = std::all_of(c.args[0].items.begin(), c.args[0].items.end(), [](const Value& v) {
      return (v.kind == ValueKind::Sym && v.expr.type() == jit::SymType::Int && !is_numpy_scalar(v)) ||
             (v.kind == ValueKind::Const && !is_opaque(v) && PyLong_CheckExact(v.obj.get()));
    });
    if (ints) {
      Value size = Value::sequence(ValueKind::Tuple, c.args[0].items);
      size.torch_size = true;
      size.identity = next_identity_++;
      push(std::move(size));
      return ok();
    }
  }
  return fold_call(c.callable.obj.get(), c.args, c.kw_names.get(), specialize, describe(c.callable));
}

// A BINARY_OP, COMPARE_OP or CONTAINS_OP on known values, as operator's function
// `name` computes it. An in-place operator changes only a set the frame made.
std::optional<Status> Tracer::fold_operator(const char* name, const Value& lhs, const Value& rhs, bool specialize) {
  // (a list or dict value is handed over as a new object: a change to it would be lost)
  if (operator_changes(name) && (lhs.kind == ValueKind::List || lhs.kind == ValueKind::Dict)) return std::nullopt;
  if (operator_changes(name) && fresh_set(lhs)) {
    ++changes_;
    note_write(-1);
  }
  static std::unordered_map<std::string, PyObject*> fns;  // operator's functions, kept for the process
  auto it = fns.find(name);
  if (it == fns.end()) it = fns.emplace(name, operator_function(name)).first;
  if (it->second == nullptr) return std::nullopt;
  return fold_call(it->second, {lhs, rhs}, nullptr, specialize, std::string("operator.") + name);
}

// operator's function for BINARY_OP's argument and COMPARE_OP's.
const char* binary_operator_name(int nb_op) {
  static const char* const kNames[] = {"add", "and_", "floordiv", "lshift", "matmul", "mul", "mod", "or_", "pow",
                                       "rshift", "sub", "truediv", "xor", "iadd", "iand", "ifloordiv", "ilshift",
                                       "imatmul", "imul", "imod", "ior", "ipow", "irshift", "isub", "itruediv", "ixor"};
  return nb_op >= 0 && nb_op < 26 ? kNames[nb_op] : "";
}

const char* compare_operator_name(int cmp) {
  static const char* const kNames[] = {"lt", "le", "eq", "ne", "gt", "ge"};
  return cmp >= 0 && cmp < 6 ? kNames[cmp] : "";
}

// x.name of a known value: a method (LOAD_METHOD: its class's descriptor and x as self,
// so that a set the frame made stays one object) or an attribute that is itself known.
// A symbolic number's methods too (n.bit_length()): called with its value, guarded.
std::optional<Status> Tracer::known_attr(const Value& owner, const std::string& name, bool method) {
  const bool names_class = name == "__name__" || name == "__qualname__" || name == "__module__";
  PyTypeObject* tp = nullptr;
  if (owner.kind == ValueKind::Sym) {
    if (is_numpy_scalar(owner)) return std::nullopt;
    tp = reinterpret_cast<PyTypeObject*>(sym_python_type(owner));
  } else if (knowable(owner, false) && owner.kind == ValueKind::Const) {
    tp = Py_TYPE(owner.obj.get());
  } else if (names_class && !method && owner.kind == ValueKind::Const && !is_opaque(owner) && owner.reg < 0 &&
             PyType_Check(owner.obj.get()) && guards().add_class_unchanged(owner.obj.get())) {
    tp = Py_TYPE(owner.obj.get());  // a class's names: kept by its version tag
  } else {
    return std::nullopt;
  }
  if (name.size() > 4 && name.compare(0, 2, "__") == 0 && !(names_class && PyType_Check(owner.obj.get()))) {
    if (owner.kind == ValueKind::Const && builtin_class(owner.obj.get())) {
      // object.__setattr__, int.__add__: a builtin class's own slots never change
      PyRef slot = PyRef::steal(PyObject_GetAttrString(owner.obj.get(), name.c_str()));
      if (!slot) {
        guards::clear_error();
        return std::nullopt;
      }
      if (method) push(Value::null());
      push(Value::constant(std::move(slot)));
      return ok();
    }
    return std::nullopt;  // dunders: the usual steps
  }
  if (plain_exception(owner) && name != "args") return std::nullopt;  // a class's own attributes may run code
  PyRef key = PyRef::steal(PyUnicode_FromString(name.c_str()));
  PyObject* descr = key ? _PyType_Lookup(tp, key.get()) : nullptr;
  if (method && descr != nullptr && Py_IS_TYPE(descr, &PyMethodDescr_Type)) {
    push(Value::constant(PyRef::borrow(descr)));
    push(owner);
    return ok();
  }
  if (owner.kind == ValueKind::Sym) return std::nullopt;
  PyRef v = PyRef::steal(PyObject_GetAttr(owner.obj.get(), key.get()));
  if (!v) {
    if (PyErr_ExceptionMatches(PyExc_AttributeError)) return raise_python_error("a missing attribute (CPython raises)");
    guards::clear_error();
    return std::nullopt;
  }
  // int.from_bytes, str.upper read from a builtin class: called by CALL (pure_callable)
  // ("{}x{}".format read as a value, for a call with *args: a builtin method of the known value)
  const bool callable = (method && (PyCFunction_Check(v.get()) || Py_IS_TYPE(v.get(), &PyMethodDescr_Type))) ||
                        (PyCFunction_Check(v.get()) && PyCFunction_GET_SELF(v.get()) == owner.obj.get());
  std::optional<Value> number = callable ? std::nullopt : numpy_scalar_constant(v.get());  // np.finfo(t).eps
  if (!callable && !number && !is_immutable_known(v.get())) return std::nullopt;
  if (method) push(Value::null());
  push(number ? std::move(*number) : Value::constant(std::move(v)));
  return ok();
}

// BUILD_SET (items -- set), SET_ADD (set, ...[arg-1], item -- set, ...), SET_UPDATE
// (set, ...[arg-1], iterable -- set, ...): sets of known items the frame owns.
Status Tracer::op_build_set(const Instruction& ins) {
  const auto n = static_cast<size_t>(ins.arg);
  std::vector<Value> items(cur_.fs->stack.end() - static_cast<std::ptrdiff_t>(n), cur_.fs->stack.end());
  cur_.fs->stack.resize(cur_.fs->stack.size() - n);
  PyRef set = PyRef::steal(PySet_New(nullptr));
  Value v = Value::constant(set);
  v.fresh = true;
  v.identity = next_identity_++;
  push(v);
  for (Value& item : items) {
    push(std::move(item));
    FJ_TRY(set_add(1));
  }
  return ok();
}

Status Tracer::set_add(size_t depth) {
  ++changes_;
  Value item = pop();
  if (depth == 0 || depth > cur_.fs->stack.size()) return unsupported("SET_ADD below the value stack");
  Value set = cur_.fs->stack[cur_.fs->stack.size() - depth];
  note_write(set.identity >= 0 ? set.identity : -1);  // a set with an identity: what reads it lists it
  if (!fresh_set(set)) return unsupported("SET_ADD to " + describe(set));
  static PyObject* add = PyObject_GetAttrString(reinterpret_cast<PyObject*>(&PySet_Type), "add");
  std::optional<Status> s = fold_call(add, {set, item}, nullptr, true, "set.add()");
  if (!s) return unsupported("a set item " + describe(item) + " (not supported yet)");
  FJ_TRY(std::move(*s));
  pop();  // None
  return ok();
}

Status Tracer::op_set_add(const Instruction& ins) { return set_add(static_cast<size_t>(ins.arg)); }

Status Tracer::op_set_update(const Instruction& ins) {
  Value iterable = pop();
  std::vector<Value> items;
  FJ_TRY(star_items(iterable, &items));
  const auto depth = static_cast<size_t>(ins.arg);
  for (Value& item : items) {
    push(std::move(item));
    FJ_TRY(set_add(depth));
  }
  return ok();
}

}  // namespace fj::interp
