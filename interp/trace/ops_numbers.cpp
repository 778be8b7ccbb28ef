// Python numbers read from tensors (int(t), float(t), t.item()) and arithmetic and
// comparisons on them, computed in the graph as Python computes them.
#include "interp/trace/tracer.h"

#include <opcode.h>

#include "interp/runtime/plan.h"

namespace fj::interp {

using jit::DType;
using jit::NodeId;
using jit::SymExpr;

// ---- Python numbers read from tensors ----

namespace {

DType python_dtype(jit::ScalarKind k) {
  switch (k) {
    case jit::ScalarKind::Bool: return DType::Bool;
    case jit::ScalarKind::Int: return DType::Int64;
    case jit::ScalarKind::Float: return DType::Float64;
  }
  return DType::Float64;
}

}  // namespace

Status Tracer::to_number(const Value& v, jit::ScalarKind kind) {
  const char* names[] = {"bool()", "int()", "float()"};
  const std::string what = names[static_cast<int>(kind)];
  if (v.kind == ValueKind::Sym) {
    const SymExpr e = kind == jit::ScalarKind::Int ? jit::to_int(v.expr)
                      : kind == jit::ScalarKind::Float ? jit::to_float(v.expr)
                                                       : jit::to_bool(v.expr);
    return push_sym(e, what.c_str());
  }
  if (!is_tensor(v) && !is_number(v)) return unsupported(what + " of " + describe(v));
  NodeId x = v.node;
  if (is_number(v)) {
    if (graph_.node(x).scalar_kind == kind) {
      push(v);
      return ok();
    }
    auto t = graph_.full({}, x, python_dtype(graph_.node(x).scalar_kind));
    if (!t) return unsupported(what + ": " + t.error());
    x = *t;
  }
  auto n = graph_.item(x, kind);
  if (!n) return unsupported(what + ": " + n.error());
  push(Value::tensor(*n));
  return ok();
}

// Python's ints do not overflow; the graph's int64 + - * wrap. The same operation in
// float64 lands within 2^12 of the exact result (three roundings of at most 2^10 near
// 2^63), while a wrapped result is 2^64 off: their difference, scaled by 2^51, is then
// past the range that int() of a float accepts, and that check (evaluated whether or
// not the number is used) makes the graph leave the frame to CPython's big ints.
Status Tracer::check_int_overflow(jit::Op op, NodeId l, NodeId r, NodeId wrapped) {
  auto lf = graph_.full({}, l, DType::Float64);
  auto rf = graph_.full({}, r, DType::Float64);
  if (!lf || !rf) return unsupported("an int overflow check: bad operands");
  auto approx = graph_.pointwise(op, {*lf, *rf});
  auto exact = graph_.cast(wrapped, DType::Float64);
  if (!approx || !exact) return unsupported("an int overflow check could not be built");
  auto diff = graph_.pointwise(jit::Op::Sub, {*approx, *exact});
  auto scale = operand(Value::constant(PyRef::steal(PyFloat_FromDouble(0x1p51))));
  if (!diff || !scale) return unsupported("an int overflow check could not be built");
  auto scaled = graph_.pointwise(jit::Op::Mul, {*diff, *scale});
  if (!scaled) return unsupported("an int overflow check: " + scaled.error());
  auto check = graph_.item(*scaled, jit::ScalarKind::Int);  // a check: see Graph::checks()
  if (!check) return unsupported("an int overflow check: " + check.error());
  return ok();
}

// Python raises ZeroDivisionError for a / 0 where the graph would give inf or nan: a
// zero divisor (a float64 0-d node) makes the graph leave the frame to CPython, which
// raises. The check is int() of 2^70 where the divisor is zero, past int64's range.
Status Tracer::check_nonzero(NodeId divisor) {
  auto zero = operand(Value::constant(PyRef::steal(PyFloat_FromDouble(0.0))));
  auto scale = operand(Value::constant(PyRef::steal(PyFloat_FromDouble(0x1p70))));
  if (!zero || !scale) return unsupported("a division check could not be built");
  auto is_zero = graph_.pointwise(jit::Op::Eq, {divisor, *zero});
  auto flag = is_zero ? graph_.cast(*is_zero, DType::Float64) : is_zero;
  auto scaled = flag ? graph_.pointwise(jit::Op::Mul, {*flag, *scale}) : flag;
  if (!scaled) return unsupported("a division check: " + scaled.error());
  auto check = graph_.item(*scaled, jit::ScalarKind::Int);  // a check: see Graph::checks()
  if (!check) return unsupported("a division check: " + check.error());
  return ok();
}

Status Tracer::number_binary(int nb_op, const Value& lhs, const Value& rhs) {
  auto kind_of = [&](const Value& v) -> std::optional<jit::ScalarKind> {
    if (is_number(v)) return graph_.node(v.node).scalar_kind;
    if (v.kind == ValueKind::Sym) {
      return v.expr.type() == jit::SymType::Float ? jit::ScalarKind::Float
             : v.expr.type() == jit::SymType::Bool ? jit::ScalarKind::Bool : jit::ScalarKind::Int;
    }
    if (v.kind == ValueKind::Const && !is_opaque(v) && is_plain_scalar(v.obj.get())) {
      PyObject* o = v.obj.get();
      return PyBool_Check(o) ? jit::ScalarKind::Bool : PyFloat_CheckExact(o) ? jit::ScalarKind::Float : jit::ScalarKind::Int;
    }
    return std::nullopt;
  };
  const auto kl = kind_of(lhs), kr = kind_of(rhs);
  if (!kl || !kr) return unsupported("arithmetic on " + describe(lhs) + " and " + describe(rhs));
  const int base = nb_op >= kNbInplaceAdd ? nb_op - kNbInplaceAdd : nb_op;
  const bool any_float = *kl == jit::ScalarKind::Float || *kr == jit::ScalarKind::Float;
  jit::Op op;
  switch (base) {
    case NB_ADD: op = jit::Op::Add; break;
    case NB_SUBTRACT: op = jit::Op::Sub; break;
    case NB_MULTIPLY: op = jit::Op::Mul; break;
    case NB_TRUE_DIVIDE: op = jit::Op::Div; break;
    case NB_FLOOR_DIVIDE: op = jit::Op::FloorDiv; break;
    case NB_REMAINDER: op = jit::Op::Remainder; break;
    default: return unsupported("operator " + std::to_string(nb_op) + " on a number read from a tensor");
  }
  if (any_float && (op == jit::Op::FloorDiv || op == jit::Op::Remainder)) {
    return unsupported("float // or % on a number read from a tensor (not supported)");
  }
  const jit::ScalarKind result = any_float || op == jit::Op::Div ? jit::ScalarKind::Float : jit::ScalarKind::Int;
  auto l = operand(lhs);
  auto r = operand(rhs);
  if (!l || !r) return unsupported("arithmetic on numbers: bad operands");
  auto lt = graph_.full({}, *l, python_dtype(result));
  if (!lt) return unsupported("arithmetic on numbers: " + lt.error());
  NodeId rn = *r;
  if (result == jit::ScalarKind::Float) {  // Python divides ints exactly: both in double
    auto rt = graph_.full({}, *r, DType::Float64);
    if (!rt) return unsupported("arithmetic on numbers: " + rt.error());
    rn = *rt;
  }
  if (op == jit::Op::Div) FJ_TRY(check_nonzero(rn));
  auto n = graph_.pointwise(op, {*lt, rn});
  if (!n) return unsupported("arithmetic on numbers: " + n.error());
  if (result == jit::ScalarKind::Int && op != jit::Op::FloorDiv && op != jit::Op::Remainder) {
    FJ_TRY(check_int_overflow(op, *l, *r, *n));
  }
  auto it = graph_.item(*n, result);
  if (!it) return unsupported("arithmetic on numbers: " + it.error());
  push(Value::tensor(*it));
  return ok();
}

Status Tracer::number_compare(int cmp, const Value& lhs, const Value& rhs) {
  auto l = operand(lhs);
  auto r = operand(rhs);
  if (!l || !r) return unsupported("comparison of " + describe(lhs) + " and " + describe(rhs));
  auto lt = graph_.full({}, *l, DType::Float64);
  auto rt = graph_.full({}, *r, DType::Float64);
  if (!lt || !rt) return unsupported("comparison of numbers");
  const jit::ScalarKind kl = graph_.node(*l).scalar_kind, kr = graph_.node(*r).scalar_kind;
  if (kl != jit::ScalarKind::Float || kr != jit::ScalarKind::Float) {
    // ints compare exactly in int64
    if (kl != jit::ScalarKind::Float && kr != jit::ScalarKind::Float) {
      lt = graph_.full({}, *l, DType::Int64);
      rt = graph_.full({}, *r, DType::Int64);
      if (!lt || !rt) return unsupported("comparison of numbers");
    }
  }
  auto n = graph_.pointwise(compare_tensor_op(cmp), {*lt, *rt});
  if (!n) return unsupported("comparison of numbers: " + n.error());
  auto it = graph_.item(*n, jit::ScalarKind::Bool);
  if (!it) return unsupported("comparison of numbers: " + it.error());
  push(Value::tensor(*it));
  return ok();
}

Status Tracer::number_unary(const Value& v, jit::Op op, const std::string& what) {
  const jit::ScalarKind k = graph_.node(v.node).scalar_kind;
  const jit::ScalarKind rk = k == jit::ScalarKind::Bool ? jit::ScalarKind::Int : k;  // -True, abs(True): ints
  auto t = graph_.full({}, v.node, python_dtype(rk));
  if (!t) return unsupported(what + ": " + t.error());
  auto n = graph_.pointwise(op, {*t});
  if (!n) return unsupported(what + ": " + n.error());
  auto it = graph_.item(*n, rk);
  if (!it) return unsupported(what + ": " + it.error());
  push(Value::tensor(*it));
  return ok();
}

// `a is b` of two ints (or two bools), symbolic or constant: CPython keeps one object
// per int in [-5, 256] (and True and False are singletons), so there `is` is `==`,
// with the range and the answer guarded. Elsewhere unknown (nullopt): a big int may
// or may not be the same object.
std::optional<bool> Tracer::numbers_same(const Value& a, const Value& b) {
  const auto as_expr = [](const Value& v, PyObject** type) -> std::optional<jit::SymExpr> {
    if (v.kind == ValueKind::Sym && !is_numpy_scalar(v)) {
      *type = sym_python_type(v);
      return v.expr;
    }
    if (v.kind != ValueKind::Const || is_opaque(v) || v.reg >= 0 || !(PyLong_CheckExact(v.obj.get()) || PyBool_Check(v.obj.get()))) {
      return std::nullopt;
    }
    *type = reinterpret_cast<PyObject*>(Py_TYPE(v.obj.get()));
    int overflow = 0;
    const long long n = PyLong_AsLongLongAndOverflow(v.obj.get(), &overflow);
    if (overflow != 0 || n < -5 || n > 256) return std::nullopt;
    return PyBool_Check(v.obj.get()) ? jit::SymExpr::boolean(n != 0) : jit::SymExpr::integer(n);
  };
  PyObject *ta = nullptr, *tb = nullptr;
  const std::optional<jit::SymExpr> ea = as_expr(a, &ta), eb = as_expr(b, &tb);
  if (!ea || !eb || ta != tb || (ta != reinterpret_cast<PyObject*>(&PyLong_Type) && ta != reinterpret_cast<PyObject*>(&PyBool_Type))) {
    return std::nullopt;
  }
  std::vector<jit::SymExpr> conds;
  if (ta == reinterpret_cast<PyObject*>(&PyLong_Type)) {
    for (const jit::SymExpr& e : {*ea, *eb}) {
      conds.push_back(jit::ge(e, jit::SymExpr::integer(-5)));
      conds.push_back(jit::le(e, jit::SymExpr::integer(256)));
    }
  }
  for (const jit::SymExpr& c : conds) {
    const auto holds = c.eval(hints_);
    if (!holds || !std::holds_alternative<bool>(*holds) || !std::get<bool>(*holds)) return std::nullopt;
  }
  const jit::SymExpr same = jit::eq(*ea, *eb);
  const auto v = same.eval(hints_);
  if (!v || !std::holds_alternative<bool>(*v)) return std::nullopt;
  conds.push_back(std::get<bool>(*v) ? same : jit::logical_not(same));
  for (const jit::SymExpr& c : conds) {
    if (!c.is_constant()) guards().add_expr(c, readable(c));
  }
  return std::get<bool>(*v);
}

}  // namespace fj::interp
