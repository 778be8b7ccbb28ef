// Symbolic values: scalars as SymExprs and graph operands, truth values, tensor
// sizes, and the operator opcodes (BINARY_OP, COMPARE_OP, unary ops; IS_OP: ops_identity.cpp).
#include "interp/trace/tracer.h"

#include <algorithm>
#include <cctype>

#include <opcode.h>

namespace fj::interp {

// ---- values ----

bool is_shape_method(const std::string& name) {
  return name == "size" || name == "dim" || name == "numel" || name == "ndimension";
}



// A Python number as a SymExpr: symbolic values as they are, plain constants folded in.
std::optional<jit::SymExpr> as_sym(const Value& v) {
  if (v.kind == ValueKind::Sym) return v.expr;
  if (v.kind != ValueKind::Const || v.opaque) return std::nullopt;
  PyObject* o = v.obj.get();
  if (PyBool_Check(o)) return jit::SymExpr::boolean(o == Py_True);
  if (PyFloat_CheckExact(o)) return jit::SymExpr::real(PyFloat_AS_DOUBLE(o));
  if (PyLong_CheckExact(o)) {
    int overflow = 0;
    const long long x = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (overflow == 0) return jit::SymExpr::integer(x);
  }
  return std::nullopt;
}

int Tracer::new_symbol(jit::SymType type, jit::SymValue hint, std::string source) {
  const int id = static_cast<int>(hints_.values.size());
  hints_.values.push_back(hint);
  symbol_sources_.push_back(std::move(source));
  return id;
}

// Pushes a symbolic result; one that has no value in the traced call (1 // 0) ends
// the trace, so that CPython raises the error.
Status Tracer::push_sym(jit::SymExpr e, const char* what, PyObject* numpy_type) {
  const auto value = e.eval(hints_);
  if (!value) return unsupported(std::string(what) + " has no value here (CPython raises)");
  if (numpy_type != nullptr) {  // of a NumPy scalar type: a tagged symbol, constant or not
    if (!e.is_constant()) plan_->must_evaluate.push_back(e);
    Value v = Value::sym(std::move(e));
    v.obj = PyRef::borrow(numpy_type);
    push(std::move(v));
  } else if (e.is_constant()) {
    push(Value::constant(PyRef::steal(sym_value_to_python(*value))));
  } else {
    // Checked at every cache hit even if nothing uses it: eager raises when it has
    // no value (10 // (n - 5) with n == 5), so such a call must not hit.
    plan_->must_evaluate.push_back(e);
    push(Value::sym(std::move(e)));
  }
  return ok();
}

// Decides a condition on symbols with the traced call's values and guards the answer.
Status Tracer::guard_truth(const jit::SymExpr& cond, bool* out) {
  const jit::SymExpr as_bool = jit::to_bool(cond);
  const auto value = as_bool.eval(hints_);
  if (!value) return unsupported("a condition with no value here (CPython raises)");
  *out = std::get<bool>(*value);
  const jit::SymExpr holds = *out ? as_bool : jit::logical_not(as_bool);
  if (!holds.is_constant()) guards().add_expr(holds, readable(holds));
  return ok();
}

// An expression with each symbol replaced by its source: "L['y'] == 2".
std::string Tracer::readable(const jit::SymExpr& e) const {
  const std::string s = e.str();
  std::string out;
  for (size_t i = 0; i < s.size();) {
    const bool starts = (s[i] == 's' || s[i] == 'f' || s[i] == 'b') && i + 1 < s.size() &&
                        std::isdigit(static_cast<unsigned char>(s[i + 1])) &&
                        (i == 0 || !std::isalnum(static_cast<unsigned char>(s[i - 1])));
    if (!starts) {
      out += s[i++];
      continue;
    }
    size_t j = i + 1;
    while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
    const size_t id = static_cast<size_t>(std::stoi(s.substr(i + 1, j - i - 1)));
    out += id < symbol_sources_.size() ? symbol_sources_[id] : s.substr(i, j - i);
    i = j;
  }
  return out;
}

// A Python number operand keeps its Python type (bool / int / float): it decides
// type promotion. Runtime values (SymExprs) take the kind of their traced value,
// which their guarded symbol types fix for every call of the entry.
Expected<jit::NodeId> Tracer::operand(const Value& v) {
  if (v.kind == ValueKind::Tensor) return v.node;
  if (is_numpy_scalar(v) && v.expr.type() == jit::SymType::Bool) {
    return operand(Value::sym(jit::to_float(v.expr)));  // torch takes np.bool_ as a float (1.0 or 0.0)
  }
  if (v.kind == ValueKind::Sym) {
    sync_scalar_inputs();  // graph builders' own scalar inputs first: indices must agree
    const auto hint = v.expr.eval(hints_);
    if (!hint) return Error{"a scalar operand with no value here (CPython raises)"};
    if (v.expr.is_constant()) {
      switch (scalar_kind_of(*hint)) {
        case jit::ScalarKind::Int: return graph_.scalar_int(std::get<int64_t>(*hint));
        case jit::ScalarKind::Bool: return graph_.scalar(std::get<bool>(*hint) ? 1 : 0, jit::ScalarKind::Bool);
        case jit::ScalarKind::Float: return graph_.scalar(std::get<double>(*hint));
      }
    }
    for (size_t k = 0; k < plan_->scalar_inputs.size(); ++k) {
      if (plan_->scalar_inputs[k].same(v.expr)) return scalar_nodes_[k];
    }
    plan_->scalar_inputs.push_back(v.expr);
    scalar_nodes_.push_back(graph_.scalar_input(scalar_kind_of(*hint)));
    return scalar_nodes_.back();
  }
  if (v.kind == ValueKind::Const && !is_opaque(v) && is_plain_scalar(v.obj.get())) {
    PyObject* o = v.obj.get();
    if (PyBool_Check(o)) return graph_.scalar(o == Py_True ? 1 : 0, jit::ScalarKind::Bool);
    if (PyLong_CheckExact(o)) {
      int overflow = 0;
      const long long i = PyLong_AsLongLongAndOverflow(o, &overflow);
      if (overflow != 0 || (i == -1 && PyErr_Occurred())) {
        guards::clear_error();
        return Error{"a Python int beyond int64 as a tensor operand"};
      }
      return graph_.scalar_int(i);
    }
    return graph_.scalar(PyFloat_AS_DOUBLE(o));
  }
  return Error{"operand " + describe(v) + " is not a tensor or a Python number"};
}

Status Tracer::call_op(jit::Op op, const std::vector<Value>& args) {
  std::vector<jit::NodeId> ids;
  for (const Value& a : args) {
    auto id = operand(a);
    if (!id) return unsupported(std::string(jit::aten_name(op)) + ": " + id.error());
    ids.push_back(*id);
  }
  auto n = graph_.pointwise(op, ids);
  if (!n) return unsupported(std::string(jit::aten_name(op)) + ": " + n.error());
  for (const Value& a : args) {  // eager's result follows a strided operand's layout
    if (a.kind == ValueKind::Tensor && may_be_noncontig(a.node)) mark_noncontig(*n);
  }
  push(Value::tensor(*n));
  return ok();
}

namespace {

bool is_const(const Value& v, PyObject** out) {
  if (v.kind != ValueKind::Const || is_opaque(v)) return false;
  *out = v.obj.get();
  return true;
}

}  // namespace

// Binds a table op's positional and keyword arguments to its parameters, defaults
// filled in: one value per parameter.
Expected<std::vector<Value>> Tracer::bind_py_op(const PyOp& op, std::vector<Value> args, PyObject* kw_names) {
  const std::string what = op.name + "()";
  const size_t nkw = kw_names ? static_cast<size_t>(PyTuple_GET_SIZE(kw_names)) : 0;
  size_t npos = args.size() - nkw;
  if (op.varargs >= 0 && npos > static_cast<size_t>(op.varargs)) {
    // x.view(2, -1) binds as x.view((2, -1)); x.view((2, -1)) and x.view(shape) stay.
    const size_t first = static_cast<size_t>(op.varargs);
    const Value& a = args[first];
    const bool one_sequence = npos == first + 1 &&
        (a.kind == ValueKind::Tuple || a.kind == ValueKind::List ||
         (a.kind == ValueKind::Const && !is_opaque(a) && (PyTuple_Check(a.obj.get()) || PyList_Check(a.obj.get()))));
    if (!one_sequence) {
      std::vector<Value> rest(args.begin() + static_cast<std::ptrdiff_t>(first),
                              args.begin() + static_cast<std::ptrdiff_t>(npos));
      args.erase(args.begin() + static_cast<std::ptrdiff_t>(first), args.begin() + static_cast<std::ptrdiff_t>(npos));
      Value collected = Value::sequence(ValueKind::Tuple, std::move(rest));
      collected.method = "*args";  // told apart from one sequence passed (broadcast_tensors)
      args.insert(args.begin() + static_cast<std::ptrdiff_t>(first), std::move(collected));
      npos = first + 1;
    }
  }
  if (npos > op.params.size()) return unsupported(what + " with too many arguments (CPython raises)");
  std::vector<std::optional<Value>> bound(op.params.size());
  for (size_t i = 0; i < npos; ++i) bound[i] = std::move(args[i]);
  for (size_t k = 0; k < nkw; ++k) {
    const std::string name = FJ_TRY(guards::utf8_of(PyTuple_GET_ITEM(kw_names, static_cast<Py_ssize_t>(k))));
    const auto it = std::find(op.params.begin(), op.params.end(), name);
    if (it == op.params.end()) return unsupported(what + " with keyword '" + name + "' (not supported)");
    const size_t slot = static_cast<size_t>(it - op.params.begin());
    if (bound[slot]) return unsupported(what + " got '" + name + "' twice (CPython raises)");
    bound[slot] = std::move(args[npos + k]);
  }
  std::vector<Value> values;
  for (size_t i = 0; i < bound.size(); ++i) {
    if (bound[i]) {
      values.push_back(std::move(*bound[i]));
      continue;
    }
    PyObject* d = default_object(op.defaults[i]);
    if (d == nullptr) return unsupported(what + " without '" + op.params[i] + "' (CPython raises)");
    values.push_back(Value::constant(PyRef::steal(d)));
  }
  return values;
}

// A call of a table op: binds its arguments, then records the node its Binding says.
Status Tracer::call_py_op(const PyOp& op, std::vector<Value> args, PyObject* kw_names) {
  const std::string what = op.name + "()";
  std::vector<Value> bound = FJ_TRY(bind_py_op(op, std::move(args), kw_names));
  // F.relu(x, inplace=True) & co: the op, then written into x as x.relu_() would be.
  bool inplace = false;
  for (size_t i = op.operands; i < bound.size(); ++i) {
    PyObject* o = nullptr;
    if (op.params[i] == "inplace" && is_const(bound[i], &o) && o == Py_True) {
      inplace = true;
      bound[i] = Value::constant(PyRef::borrow(Py_False));
    }
  }
  // Options (parameters past the operands) must equal their defaults under Plain.
  if (op.binding == Binding::Plain) {
    for (size_t i = op.operands; i < bound.size(); ++i) {
      PyObject* o = nullptr;
      PyRef d = PyRef::steal(default_object(op.defaults[i]));
      if (!is_const(bound[i], &o) || !is_foldable(o) || PyObject_RichCompareBool(o, d.get(), Py_EQ) != 1) {
        guards::clear_error();
        return unsupported(what + " with " + op.params[i] + "=" + describe(bound[i]) + " (not supported)");
      }
    }
  }
  if (op.binding == Binding::Tensor) return call_tensor_op(op, bound);
  return record_py_op(op, bound, inplace);
}

// add / sub(input, other, alpha): input op other * alpha. Eager takes an int alpha
// for integral results and no bool alpha but for bool results: it raises otherwise.
Status Tracer::add_with_alpha(const PyOp& op, std::vector<Value> operands, const Value& alpha, bool inplace) {
  const std::string what = op.name + "()";
  const size_t first_new = graph_.size();
  PyObject* o = nullptr;
  int overflow = 0;
  const bool one = is_const(alpha, &o) && PyLong_CheckExact(o) && PyLong_AsLongLongAndOverflow(o, &overflow) == 1 &&
                   overflow == 0;
  if (!one) {
    const std::optional<jit::SymExpr> a = is_tensor(alpha) || is_number(alpha) || is_numpy_scalar(alpha) ? std::nullopt : as_sym(alpha);
    // x.add(n, alpha=f) of a float tensor and Python numbers: x + n * f
    const std::optional<jit::SymExpr> b = is_tensor(operands[1]) || is_number(operands[1]) || is_numpy_scalar(operands[1])
                                              ? std::nullopt
                                              : as_sym(operands[1]);
    if (a && b && a->type() != jit::SymType::Bool && b->type() != jit::SymType::Bool && is_tensor(operands[0]) &&
        jit::is_floating(graph_.node(operands[0].node).dtype)) {
      operands[1] = Value::sym(jit::mul(*b, *a));
      if (Status s = call_op(op.op, operands); s.failed() || !inplace) return s;
      const Value result = pop();
      return finish_inplace(operands[0], result.node, first_new, {}, what);
    }
    if (!a || a->type() == jit::SymType::Bool || !is_tensor(operands[0]) || !is_tensor(operands[1])) {
      return unsupported(what + " with alpha=" + describe(alpha) + " (not supported yet)");
    }
    const jit::DType d = jit::promote_types(graph_.node(operands[0].node).dtype, graph_.node(operands[1].node).dtype);
    if (d == jit::DType::Bool) return unsupported(what + " of bool tensors with alpha= (not supported)");
    if (a->type() == jit::SymType::Float && !jit::is_floating(d)) {
      return unsupported(what + " of integral tensors with a float alpha (eager raises)");
    }
    FJ_TRY(call_op(jit::Op::Mul, {operands[1], alpha}));
    operands[1] = pop();
  }
  if (Status s = call_op(op.op, operands); s.failed() || !inplace) return s;
  const Value result = pop();
  return finish_inplace(operands[0], result.node, first_new, {operands[1]}, what);
}

// The node of a table op whose Binding is not Tensor, from its bound arguments.
Status Tracer::record_py_op(const PyOp& op, const std::vector<Value>& bound, bool inplace) {
  const std::string what = op.name + "()";
  const std::vector<Value> operands(bound.begin(), bound.begin() + static_cast<std::ptrdiff_t>(op.operands));
  switch (op.binding) {
    case Binding::Plain: {
      const size_t first_new = graph_.size();
      if (Status s = call_op(op.op, operands); s.failed() || !inplace) return s;
      const Value result = pop();
      return finish_inplace(operands[0], result.node, first_new, std::vector<Value>(operands.begin() + 1, operands.end()), what);
    }
    case Binding::ClampBounds: {
      PyObject* o = nullptr;
      const bool no_min = is_const(operands[1], &o) && o == Py_None;
      const bool no_max = is_const(operands[2], &o) && o == Py_None;
      if (no_min && no_max) return unsupported("clamp() without bounds (eager raises)");
      if (no_min) return call_op(jit::Op::ClampMax, {operands[0], operands[2]});
      if (no_max) return call_op(jit::Op::ClampMin, {operands[0], operands[1]});
      return call_op(jit::Op::Clamp, operands);
    }
    case Binding::GeluApprox: {
      PyObject* o = nullptr;
      if (!is_const(bound[1], &o) || !PyUnicode_CheckExact(o)) return unsupported("gelu() with a non-constant approximate");
      const std::string mode = FJ_TRY(guards::utf8_of(o));
      if (mode == "none") return call_op(jit::Op::Gelu, operands);
      if (mode == "tanh") return call_op(jit::Op::GeluTanh, operands);
      return unsupported("gelu(approximate='" + mode + "') (eager raises)");
    }
    case Binding::Alpha:
      return add_with_alpha(op, operands, bound[2], inplace);
    case Binding::Tensor:
      break;  // call_tensor_op
    case Binding::CastFixed: {
      const jit::DType to = op.dtype;
      if (operands[0].kind != ValueKind::Tensor) return unsupported(what + " of " + describe(operands[0]));
      auto n = graph_.cast(operands[0].node, to);
      if (!n) return unsupported(what + ": " + n.error());
      push(*n == operands[0].node ? operands[0] : Value::tensor(*n));
      return ok();
    }
  }
  return unsupported(what + ": unknown binding");
}

Status Tracer::truth(const Value& v, bool* out) {
  if (v.kind == ValueKind::Tensor) return data_truth(v, out);
  if (v.kind == ValueKind::Sym) return guard_truth(v.expr, out);
  if (v.kind == ValueKind::Tuple || v.kind == ValueKind::List || v.kind == ValueKind::Dict) {
    *out = !v.items.empty();
    return ok();
  }
  if (v.kind == ValueKind::Object) return object_truth(v, out);
  if (is_path_dict(v)) {  // `d or {}`: the dict keeps its keys (guarded), so its truth
    *out = !path_dict_keys(v).empty();
    return ok();
  }
  if (v.kind != ValueKind::Const || is_opaque(v) || !is_foldable(v.obj.get())) {
    return unsupported("truth value of " + describe(v));
  }
  const int r = PyObject_IsTrue(v.obj.get());
  if (r < 0) return unsupported("truth value raised");
  *out = r == 1;
  return ok();
}


// ---- operators ----

Status Tracer::fold_binary(int nb_op, const Value& lhs, const Value& rhs) {
  if (lhs.kind != ValueKind::Const || rhs.kind != ValueKind::Const || is_opaque(lhs) || is_opaque(rhs) ||
      !is_plain_scalar(lhs.obj.get()) || !is_plain_scalar(rhs.obj.get())) {
    return unsupported("binary operator " + std::to_string(nb_op) + " on " + describe(lhs) + " and " +
                       describe(rhs));
  }
  PyObject* r = binary_number_op(nb_op, lhs.obj.get(), rhs.obj.get());
  if (r == nullptr) {
    guards::clear_error();
    return unsupported("constant operator raised (CPython will raise it)");
  }
  push(Value::constant(PyRef::steal(r)));
  return ok();
}

// (lhs, rhs -- result)
Status Tracer::require_tensor_attr(const std::string& name) {
  PyObject* original = guards::original_tensor_attr(name);
  PyObject* key = PyUnicode_InternFromString(name.c_str());
  PyObject* now = guards::current_tensor_attr(key);
  Py_DECREF(key);
  if (original == nullptr || now != original) return unsupported("torch.Tensor." + name + " is not torch's own");
  guards().add_tensor_attr(name, original);
  return ok();
}

// a + b of tuples (or of lists, out of place): a new sequence of their items.
// nullopt: the operands are not two such sequences.
std::optional<Status> Tracer::concat_sequences(int nb_op, const Value& lhs, const Value& rhs) {
  if (nb_op == NB_MULTIPLY || nb_op == NB_INPLACE_MULTIPLY) return repeat_sequence(nb_op, lhs, rhs);
  if (nb_op != NB_ADD && nb_op != NB_INPLACE_ADD) return std::nullopt;
  const auto items_of = [](const Value& v, ValueKind* kind, std::vector<Value>* out) {
    if ((v.kind == ValueKind::Tuple || v.kind == ValueKind::List) && !v.obj) {
      *kind = v.kind;
      *out = v.items;
      return true;
    }
    if (v.kind != ValueKind::Const || is_opaque(v) || !PyTuple_CheckExact(v.obj.get()) || !is_foldable(v.obj.get())) return false;
    *kind = ValueKind::Tuple;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(v.obj.get()); ++i) {
      out->push_back(Value::constant(PyRef::borrow(PyTuple_GET_ITEM(v.obj.get(), i))));
    }
    return true;
  };
  if (nb_op == NB_INPLACE_ADD && is_traced_list(lhs)) return list_inplace_add(lhs, rhs);  // extends it in place
  ValueKind lk, rk;
  std::vector<Value> a, b;
  if (!items_of(lhs, &lk, &a) || !items_of(rhs, &rk, &b)) return std::nullopt;
  if (lk != rk) return unsupported("+ of a tuple and a list (CPython raises)");
  if (lk == ValueKind::List && nb_op == NB_INPLACE_ADD) return std::nullopt;  // += extends the list in place
  a.insert(a.end(), b.begin(), b.end());
  Value v = Value::sequence(lk, std::move(a));
  v.torch_size = lhs.torch_size;  // torch.Size + tuple is a torch.Size
  v.identity = next_identity_++;
  push(std::move(v));
  return ok();
}

// [x] * n, n * (a, b), lst *= n of a tuple or list the trace holds (not a constant
// one: fold_operator's) and an int, with n's value now (guarded): the items again n
// times, a new sequence (lst *= n: the same list, changed). nullopt: not such operands.
std::optional<Status> Tracer::repeat_sequence(int nb_op, const Value& lhs, const Value& rhs) {
  const auto seq = [](const Value& v) { return (v.kind == ValueKind::Tuple || v.kind == ValueKind::List) && !v.obj; };
  const auto count = [](const Value& v) {
    return (v.kind == ValueKind::Sym && v.expr.type() == jit::SymType::Int && !is_numpy_scalar(v)) ||
           (v.kind == ValueKind::Const && !is_opaque(v) && PyLong_CheckExact(v.obj.get()));
  };
  const bool left = seq(lhs) && count(rhs);
  if (!left && !(nb_op == NB_MULTIPLY && seq(rhs) && count(lhs))) return std::nullopt;
  const Value& s = left ? lhs : rhs;
  const Value& c = left ? rhs : lhs;
  int64_t n = 0;
  if (c.kind == ValueKind::Sym) {
    FJ_TRY(specialize(c.expr, "a sequence repeated a symbolic number of times", &n));
  } else {
    int overflow = 0;
    n = PyLong_AsLongLongAndOverflow(c.obj.get(), &overflow);
    if (overflow != 0) return unsupported("a sequence repeated a huge number of times (CPython raises)");
  }
  n = std::max<int64_t>(n, 0);
  if (!s.items.empty() && static_cast<size_t>(n) > kMaxUnroll / s.items.size()) {
    return unsupported("a sequence repeated to more than " + std::to_string(kMaxUnroll) + " items");
  }
  std::vector<Value> items;
  for (int64_t k = 0; k < n; ++k) items.insert(items.end(), s.items.begin(), s.items.end());
  if (nb_op == NB_INPLACE_MULTIPLY && s.kind == ValueKind::List) {
    if (!is_traced_list(s)) return unsupported("*= of " + describe(s) + " (not supported yet)");
    FJ_TRY(set_list_items(s, items, "*="));
    Value now = s;
    now.items = std::move(items);
    push(std::move(now));
    return ok();
  }
  Value v = Value::sequence(s.kind, std::move(items));
  v.torch_size = s.torch_size;  // torch.Size * n is a torch.Size
  v.identity = next_identity_++;
  push(std::move(v));
  return ok();
}

// a op b with an object made in the frame on either side: its class's Python methods
// (object_operator), named after operator's functions ("iadd": __iadd__, then __add__).
std::optional<Status> Tracer::object_binary(int nb_op, const Value& lhs, const Value& rhs) {
  if (lhs.kind != ValueKind::Object && rhs.kind != ValueKind::Object) return std::nullopt;
  std::string op = binary_operator_name(nb_op);
  if (op.empty()) return unsupported("binary operator " + std::to_string(nb_op) + " on " + describe(lhs));
  if (op.back() == '_') op.pop_back();  // and_, or_
  std::string inplace;
  if (nb_op >= kNbInplaceAdd) {
    inplace = "__" + op + "__";
    op = op.substr(1);
  }
  const std::string name = "__" + op + "__", reflected = "__r" + op + "__";
  return object_operator(inplace.empty() ? nullptr : inplace.c_str(), name.c_str(), reflected.c_str(), false, lhs, rhs);
}

Status Tracer::op_binary_op(const Instruction& ins) {
  Value rhs = pop();
  Value lhs = pop();
  if (std::optional<Status> s = object_binary(ins.arg, lhs, rhs)) return std::move(*s);
  if (std::optional<Status> s = array_binary(ins.arg, lhs, rhs)) return std::move(*s);
  if (std::optional<Status> s = dict_view_set_op(ins.arg, lhs, rhs)) return std::move(*s);
  if (std::optional<Status> s = counter_sum(ins.arg, lhs, rhs)) return std::move(*s);
  if ((is_numpy_scalar(lhs) || is_numpy_scalar(rhs)) && !is_tensor(lhs) && !is_tensor(rhs)) {
    return numpy_operator(ins.arg, /*compare=*/false, lhs, rhs);
  }
  if (std::optional<Status> s = concat_sequences(ins.arg, lhs, rhs)) return std::move(*s);
  if (lhs.kind == ValueKind::Dict && rhs.kind == ValueKind::Dict && (ins.arg == NB_OR || ins.arg == NB_INPLACE_OR) &&
      (!rhs.obj || rhs.obj.get() == lhs.obj.get()) && (!lhs.obj || lhs.obj.get() != counter_class())) {
    // d | e: a copy of d updated with e; d |= e: d itself, updated (on the stack meanwhile)
    Value target = lhs;
    if (ins.arg == NB_OR) {
      target.identity = next_identity_++;
      target.source = Source{};
    }
    push(std::move(target));
    std::optional<Status> s = dict_change_method("update", {top(), rhs}, nullptr);
    if (!s) return unsupported("| of dicts of unknown identity (not supported yet)");
    FJ_TRY(std::move(*s));
    pop();  // update's None
    return ok();
  }
  if (!is_tensor(lhs) && !is_tensor(rhs) && (is_number(lhs) || is_number(rhs))) return number_binary(ins.arg, lhs, rhs);
  if (lhs.kind == ValueKind::Tensor || rhs.kind == ValueKind::Tensor) {
    int nb = ins.arg;
    if (nb >= kNbInplaceAdd) {
      if (is_tensor(lhs)) return inplace_binary(nb, lhs, rhs);
      nb -= kNbInplaceAdd;  // a number has no in-place operator: Python computes lhs op rhs
    }
    if (nb == NB_MATRIX_MULTIPLY) {
      FJ_TRY(require_tensor_attr("__matmul__"));
      FJ_TRY(require_tensor_attr("__rmatmul__"));
      return matmul_values(lhs, rhs);
    }
    for (const char* dunder : binary_dunders(nb)) {
      FJ_TRY(require_tensor_attr(dunder));
    }
    if (auto op = binary_tensor_op(nb)) return call_op(*op, {lhs, rhs});
    return unsupported("binary operator " + std::to_string(nb) + " on tensors (not supported yet)");
  }
  if (lhs.kind == ValueKind::Sym || rhs.kind == ValueKind::Sym) {
    const auto a = as_sym(lhs), b = as_sym(rhs);
    if (!a || !b) {  // "-" * n: with the number's value now, guarded
      if (auto s = fold_operator(binary_operator_name(ins.arg), lhs, rhs, /*specialize=*/true)) return std::move(*s);
      return unsupported("binary operator on " + describe(lhs) + " and " + describe(rhs));
    }
    const auto e = binary_sym_op(ins.arg, *a, *b);
    if (e && e->eval(hints_)) return push_sym(*e, "a scalar expression");
    // n & 3, n << k, and what has no int64 value (n * n past it, 7 % 0): with the
    // numbers' values now, guarded, as Python computes it (or raises)
    if (auto s = fold_operator(binary_operator_name(ins.arg), lhs, rhs, /*specialize=*/true)) return std::move(*s);
    if (e) return push_sym(*e, "a scalar expression");
    return unsupported("binary operator " + std::to_string(ins.arg) + " on symbolic scalars (not supported yet)");
  }
  if (auto s = fold_operator(binary_operator_name(ins.arg), lhs, rhs, /*specialize=*/false)) return std::move(*s);
  if (auto s = fold_operator(binary_operator_name(ins.arg), lhs, rhs, /*specialize=*/true)) return std::move(*s);
  return fold_binary(ins.arg, lhs, rhs);
}

// (value -- result)
Status Tracer::op_unary_negative(const Instruction&) {
  Value v = pop();
  if (v.kind == ValueKind::Object) return object_unary("__neg__", v);
  if (is_number(v)) return number_unary(v, jit::Op::Neg, "negation");
  if (v.kind == ValueKind::Tensor) {
    FJ_TRY(require_tensor_attr("__neg__"));
    return call_op(jit::Op::Neg, {v});
  }
  if (is_numpy_scalar(v)) {  // NumPy's, on the value now
    static PyObject* neg = operator_function("neg");
    if (auto s = fold_call(neg, {v}, nullptr, /*specialize=*/true, "-")) return std::move(*s);
    return unsupported("unary minus of a NumPy scalar (not supported yet)");
  }
  if (v.kind == ValueKind::Sym) return push_sym(jit::neg(v.expr), "a negation");
  if (v.kind == ValueKind::Const && !is_opaque(v) && is_plain_scalar(v.obj.get())) {
    push(Value::constant(PyRef::steal(PyNumber_Negative(v.obj.get()))));
    return ok();
  }
  return unsupported("unary minus of " + describe(v));
}

// (value -- result)
Status Tracer::op_unary_not(const Instruction&) {
  Value v = pop();
  if (v.kind == ValueKind::Sym) return push_sym(jit::logical_not(jit::to_bool(v.expr)), "a negation");
  bool t = false;
  FJ_TRY(truth(v, &t));
  push(Value::constant(PyRef::borrow(t ? Py_False : Py_True)));
  return ok();
}

// (value -- result)
Status Tracer::op_unary_invert(const Instruction&) {
  Value v = pop();
  if (v.kind == ValueKind::Tensor) {
    FJ_TRY(require_tensor_attr("__invert__"));
    return call_op(jit::Op::BitwiseNot, {v});
  }
  if (v.kind == ValueKind::Sym && v.expr.type() != jit::SymType::Float && !is_numpy_scalar(v)) {  // ~n == -n - 1 (a bool as its int)
    const jit::SymExpr n = v.expr.type() == jit::SymType::Bool ? jit::to_int(v.expr) : v.expr;
    return push_sym(jit::sub(jit::neg(n), jit::SymExpr::integer(1)), "~");
  }
  return unsupported("~ of " + describe(v) + " (not supported yet)");
}

// (lhs, rhs -- result)
// The object's class compares as object, str or int do, in C.
bool compares_in_c(PyObject* o) {
  richcmpfunc f = Py_TYPE(o)->tp_richcompare;
  return f == PyBaseObject_Type.tp_richcompare || f == PyUnicode_Type.tp_richcompare || f == PyLong_Type.tp_richcompare;
}

// a == b (or !=) of two tuples or two lists the trace holds, as CPython compares them:
// lengths, then item by item (the same object is equal; else the items' own ==, whose
// truth decides) until one differs.
Status Tracer::sequence_equal(const Instruction& ins, const Value& lhs, const Value& rhs) {
  bool same = lhs.items.size() == rhs.items.size();
  for (size_t i = 0; same && i < lhs.items.size(); ++i) {
    const Value& a = lhs.items[i];
    const Value& b = rhs.items[i];
    if (a.kind == ValueKind::Tensor && b.kind == ValueKind::Tensor && a.node == b.node) continue;
    if (a.kind == ValueKind::Object && b.kind == ValueKind::Object && a.identity == b.identity) continue;
    Instruction eq = ins;
    eq.arg = Py_EQ;
    push(a);
    push(b);
    FJ_TRY(op_compare_op(eq));
    FJ_TRY(truth(pop(), &same));
  }
  push(Value::constant(PyRef::borrow(same != (ins.arg == Py_NE) ? Py_True : Py_False)));
  return ok();
}

// a < b (<=, >, >=) of two tuples or two lists, as CPython orders them: the first
// items that differ (==, whose truth is guarded) decide; all equal, the lengths do. A
// named tuple whose class orders as tuple does too.
Status Tracer::sequence_order(int cmp, const Value& lhs, const Value& rhs) {
  const auto tuple_order = [](const Value& v) {
    return !v.obj || (Py_TYPE(v.obj.get()) == &PyType_Type &&
                      reinterpret_cast<PyTypeObject*>(v.obj.get())->tp_richcompare == PyTuple_Type.tp_richcompare);
  };
  if (!tuple_order(lhs) || !tuple_order(rhs)) return unsupported("comparison of " + describe(lhs) + " and " + describe(rhs));
  const size_t n = std::min(lhs.items.size(), rhs.items.size());
  for (size_t i = 0; i < n; ++i) {
    const Value& a = lhs.items[i];
    const Value& b = rhs.items[i];
    if (a.kind == ValueKind::Tensor || b.kind == ValueKind::Tensor) {
      return unsupported("ordering of sequences that hold tensors (not supported yet)");
    }
    Instruction op{};
    op.arg = Py_EQ;
    push(a);
    push(b);
    FJ_TRY(op_compare_op(op));
    bool equal = false;
    FJ_TRY(truth(pop(), &equal));
    if (equal) continue;
    op.arg = cmp;
    push(a);
    push(b);
    return op_compare_op(op);
  }
  const size_t l = lhs.items.size(), r = rhs.items.size();
  const bool result = cmp == Py_LT ? l < r : cmp == Py_LE ? l <= r : cmp == Py_GT ? l > r : l >= r;
  push(Value::constant(PyRef::borrow(result ? Py_True : Py_False)));
  return ok();
}

Status Tracer::op_compare_op(const Instruction& ins) {
  Value rhs = pop();
  Value lhs = pop();
  if ((lhs.kind == ValueKind::Object || rhs.kind == ValueKind::Object) && ins.arg != Py_EQ && ins.arg != Py_NE) {
    static const char* const kCompare[] = {"__lt__", "__le__", "__eq__", "__ne__", "__gt__", "__ge__"};
    static const char* const kReflected[] = {"__gt__", "__ge__", "__eq__", "__ne__", "__lt__", "__le__"};
    return *object_operator(nullptr, kCompare[ins.arg], kReflected[ins.arg], true, lhs, rhs);
  }
  if ((is_numpy_scalar(lhs) || is_numpy_scalar(rhs)) && !is_tensor(lhs) && !is_tensor(rhs)) {
    return numpy_operator(ins.arg, /*compare=*/true, lhs, rhs);
  }
  if (!is_tensor(lhs) && !is_tensor(rhs) && (is_number(lhs) || is_number(rhs))) return number_compare(ins.arg, lhs, rhs);
  if (lhs.kind == ValueKind::Tensor || rhs.kind == ValueKind::Tensor) {
    static const char* const kCompare[] = {"__lt__", "__le__", "__eq__", "__ne__", "__gt__", "__ge__"};
    static const char* const kReflected[] = {"__gt__", "__ge__", "__eq__", "__ne__", "__lt__", "__le__"};
    FJ_TRY(require_tensor_attr(kCompare[ins.arg]));
    FJ_TRY(require_tensor_attr(kReflected[ins.arg]));
    return call_op(compare_tensor_op(ins.arg), {lhs, rhs});
  }
  if (lhs.kind == ValueKind::Sym || rhs.kind == ValueKind::Sym) {
    const auto a = as_sym(lhs), b = as_sym(rhs);
    if (!a || !b) {
      if (auto s = fold_operator(compare_operator_name(ins.arg), lhs, rhs, /*specialize=*/true)) return std::move(*s);
      return unsupported("comparison of " + describe(lhs) + " and " + describe(rhs));
    }
    return push_sym(compare_sym(ins.arg, *a, *b), "a comparison");
  }
  if (lhs.kind == rhs.kind && (lhs.kind == ValueKind::Tuple || lhs.kind == ValueKind::List) && lhs.obj.get() == rhs.obj.get() &&
      (ins.arg == Py_EQ || ins.arg == Py_NE)) {
    return sequence_equal(ins, lhs, rhs);
  }
  if ((lhs.kind == ValueKind::Object || rhs.kind == ValueKind::Object) && (ins.arg == Py_EQ || ins.arg == Py_NE)) {
    return object_equal(ins.arg == Py_NE, lhs, rhs);
  }
  if (lhs.kind == rhs.kind && (lhs.kind == ValueKind::Tuple || lhs.kind == ValueKind::List) && ins.arg != Py_EQ &&
      ins.arg != Py_NE && !lhs.torch_size && !rhs.torch_size) {
    return sequence_order(ins.arg, lhs, rhs);
  }
  const bool consts = lhs.kind == ValueKind::Const && rhs.kind == ValueKind::Const && !is_opaque(lhs) && !is_opaque(rhs);
  if (consts && (ins.arg == Py_EQ || ins.arg == Py_NE) && compares_in_c(lhs.obj.get()) &&
      Py_TYPE(lhs.obj.get())->tp_richcompare == Py_TYPE(rhs.obj.get())->tp_richcompare) {
    // Objects (of the trace, guarded) whose classes compare as object, str or int do
    // (an enum member, a str enum's member): == runs no Python code.
    PyObject* r = PyObject_RichCompare(lhs.obj.get(), rhs.obj.get(), ins.arg);
    if (r == nullptr) {
      guards::clear_error();
      return unsupported("comparison raised (CPython raises)");
    }
    push(Value::constant(PyRef::steal(r)));
    return ok();
  }
  if (auto s = fold_operator(compare_operator_name(ins.arg), lhs, rhs, /*specialize=*/false)) return std::move(*s);
  if (auto s = fold_operator(compare_operator_name(ins.arg), lhs, rhs, /*specialize=*/true)) return std::move(*s);
  if (!consts || !is_foldable(lhs.obj.get()) || !is_foldable(rhs.obj.get())) {
    return unsupported("comparison of " + describe(lhs) + " and " + describe(rhs));
  }
  PyObject* r = PyObject_RichCompare(lhs.obj.get(), rhs.obj.get(), ins.arg);
  if (r == nullptr) return unsupported("constant comparison raised (CPython will raise it)");
  push(Value::constant(PyRef::steal(r)));
  return ok();
}

}  // namespace fj::interp
