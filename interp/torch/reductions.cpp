// The reduction family of interp/torch/torch_ops.def: reductions (sum, max, var, ...)
// and the ops that decompose into them (norm, logsumexp, softmax, layer_norm, cumsum).
#include "interp/trace/tracer.h"

#include <cmath>

namespace fj::interp {

using jit::DType;
using jit::NodeId;
using jit::SymExpr;

// ---- shared by the family ----

Status Tracer::reduce_dims(const OpCall& c, size_t dim_at, size_t keep_at, std::vector<int64_t>* dims, bool* no_dim,
                           bool* keep) {
  FJ_TRY(dims_arg(c.a[dim_at], c.what + " dim", dims, no_dim));
  return bool_arg(c.a[keep_at], c.what + " keepdim", keep);
}

// sum / mean / prod(input, dim=None, keepdim=False, dtype=None)
Status Tracer::sum_mean_prod(const OpCall& c) {
  const TensorOp op = c.op.tensor_op;
  const std::vector<Value>& a = c.a;
  std::vector<int64_t> dims;
  bool no_dim = false, keep = false;
  std::optional<DType> dtype;
  FJ_TRY(reduce_dims(c, 1, 2, &dims, &no_dim, &keep));
  FJ_TRY(dtype_arg(a[3], c.what, &dtype));
  if (op == TensorOp::Prod && !no_dim && a[1].kind != ValueKind::Const) return unsupported("prod() over several dims");
  if (op == TensorOp::Prod && !no_dim && !PyLong_CheckExact(a[1].obj.get())) return unsupported("prod() over several dims");
  if (no_dim && keep && op != TensorOp::Mean) {
    // sum(x, keepdim=True) without dims: eager's overloads differ; leave it to eager.
    return unsupported(c.what + " with keepdim and no dim");
  }
  if (!no_dim && dims.empty() && op != TensorOp::Sum) return unsupported(c.what + " over an empty dim list");
  if (op == TensorOp::Mean) return push_built(graph_.mean(c.x, dims, keep, dtype), c.what);
  if (op == TensorOp::Sum && dtype) {
    // sum(dtype=) converts first, as eager does.
    auto cast = graph_.cast(c.x, *dtype);
    if (!cast) return unsupported(c.what + ": " + cast.error());
    return push_built(graph_.reduce(jit::Op::Sum, *cast, dims, keep, dtype), c.what);
  }
  return push_built(graph_.reduce(op == TensorOp::Sum ? jit::Op::Sum : jit::Op::Prod, c.x, dims, keep, dtype), c.what);
}

// amax / amin(input, dim=(), keepdim=False)
Status Tracer::amax_amin(const OpCall& c, jit::Op r) {
  std::vector<int64_t> dims;
  bool no_dim = false, keep = false;
  FJ_TRY(reduce_dims(c, 1, 2, &dims, &no_dim, &keep));
  return push_built(graph_.reduce(r, c.x, dims, keep), c.what);
}

// max / min(input), (input, other) elementwise, or (input, dim, keepdim) -> (values, indices)
Status Tracer::max_min(const OpCall& c, bool is_max) {
  const std::vector<Value>& a = c.a;
  if (is_tensor(a[1])) return call_op(is_max ? jit::Op::Maximum : jit::Op::Minimum, {a[0], a[1]});
  bool keep;
  FJ_TRY(bool_arg(a[2], c.what + " keepdim", &keep));
  const jit::Op value_op = is_max ? jit::Op::Amax : jit::Op::Amin;
  if (is_none(a[1])) {
    if (keep) return unsupported(c.what + " with keepdim and no dim (eager raises)");
    return push_built(graph_.reduce(value_op, c.x, {}, false), c.what);
  }
  int64_t d;
  FJ_TRY(int_arg(a[1], c.what + " dim", &d));
  auto values = graph_.reduce(value_op, c.x, {d}, keep);
  if (!values) return unsupported(c.what + ": " + values.error());
  auto indices = graph_.reduce(is_max ? jit::Op::ArgMax : jit::Op::ArgMin, c.x, {d}, keep);
  if (!indices) return unsupported(c.what + ": " + indices.error());
  PyObject* types = PyImport_ImportModule("torch.return_types");
  if (types == nullptr) return unsupported("cannot import torch.return_types");
  PyObject* type = PyObject_GetAttrString(types, is_max ? "max" : "min");
  Py_DECREF(types);
  if (type == nullptr) return unsupported("torch.return_types has no max/min");
  Value t = Value::sequence(ValueKind::Tuple, {Value::tensor(*values), Value::tensor(*indices)});
  t.obj = PyRef::steal(type);
  t.identity = next_identity_++;
  push(std::move(t));
  return ok();
}

// argmax / argmin / any / all(input, dim=None, keepdim=False): one dim or all of them
Status Tracer::arg_reduce(const OpCall& c, jit::Op r) {
  std::vector<int64_t> dims;
  bool no_dim = false, keep = false;
  FJ_TRY(reduce_dims(c, 1, 2, &dims, &no_dim, &keep));
  if (!no_dim && dims.size() != 1) return unsupported(c.what + " over several dims");
  if (no_dim && keep && (r == jit::Op::Any || r == jit::Op::All)) return unsupported(c.what + " with keepdim and no dim");
  if (no_dim && (r == jit::Op::ArgMax || r == jit::Op::ArgMin) && graph_.node(c.x).rank() > 1) {
    // The index into the flattened tensor: argmax of the flattened tensor (jit/
    // lowers an arg reduction over several dims to invalid IR; this avoids it).
    const jit::SymShape xs = graph_.node(c.x).sym;
    auto flat = graph_.reshape(c.x, {jit::numel(xs)});
    if (!flat) return unsupported(c.what + ": " + flat.error());
    auto i = graph_.reduce(r, *flat, {0}, false);
    if (!i || !keep) return push_built(i, c.what);
    return push_built(graph_.reshape(*i, jit::SymShape(xs.size(), SymExpr::integer(1))), c.what);
  }
  return push_built(graph_.reduce(r, c.x, dims, keep), c.what);
}

// var / std(input, dim=None, unbiased=None, keepdim=False, correction=None), and the
// (input, unbiased) overload
Status Tracer::var_std(const OpCall& c, bool is_std) {
  const std::vector<Value>& a = c.a;
  std::vector<int64_t> dims;
  bool no_dim = false, keep = false;
  double correction = 1;
  const Value* unbiased = &a[2];
  if (a[1].kind == ValueKind::Const && PyBool_Check(a[1].obj.get())) {
    // var(x, False): the (input, unbiased) overload
    if (!is_none(a[2])) return unsupported(c.what + " with these arguments");
    unbiased = &a[1];
    no_dim = true;
  } else {
    FJ_TRY(dims_arg(a[1], c.what + " dim", &dims, &no_dim));
  }
  FJ_TRY(bool_arg(a[3], c.what + " keepdim", &keep));
  if (!is_none(*unbiased)) {
    if (!is_none(a[4])) return unsupported(c.what + " with both unbiased and correction (eager raises)");
    bool u;
    FJ_TRY(bool_arg(*unbiased, c.what + " unbiased", &u));
    correction = u ? 1 : 0;
  } else if (!is_none(a[4])) {
    int64_t k;
    FJ_TRY(int_arg(a[4], c.what + " correction", &k));
    correction = static_cast<double>(k);
  }
  auto v = graph_.var(c.x, dims, correction, keep);
  if (!v) return unsupported(c.what + ": " + v.error());
  sync_scalar_inputs();
  if (!is_std) return push_built(v, c.what);
  return push_built(graph_.pointwise(jit::Op::Sqrt, {*v}), c.what);
}

// softmax / log_softmax(input, dim, dtype=None) and F's (input, dim, _stacklevel, dtype)
Status Tracer::softmax_like(const OpCall& c, bool log) {
  const std::vector<Value>& a = c.a;
  const bool f_form = c.op.params.size() == 4;  // F.softmax(input, dim, _stacklevel, dtype)
  const Value& dtype_v = a[f_form ? 3 : 2];
  if (is_none(a[1])) return unsupported(c.what + " without dim (implicit dim choice)");
  int64_t d;
  FJ_TRY(int_arg(a[1], c.what + " dim", &d));
  std::optional<DType> dtype;
  FJ_TRY(dtype_arg(dtype_v, c.what, &dtype));
  NodeId in = c.x;
  if (dtype) {
    auto cast = graph_.cast(c.x, *dtype);
    if (!cast) return unsupported(c.what + ": " + cast.error());
    in = *cast;
  }
  if (graph_.node(in).rank() == 0) return unsupported(c.what + " of a 0-d tensor");
  return push_built(graph_.softmax(in, d, log), c.what, c.x);
}

// ---- one lowering per row ----

Status Tracer::lower_sum(const OpCall& c) { return sum_mean_prod(c); }
Status Tracer::lower_mean(const OpCall& c) { return sum_mean_prod(c); }
Status Tracer::lower_prod(const OpCall& c) { return sum_mean_prod(c); }
Status Tracer::lower_amax(const OpCall& c) { return amax_amin(c, jit::Op::Amax); }
Status Tracer::lower_amin(const OpCall& c) { return amax_amin(c, jit::Op::Amin); }
Status Tracer::lower_max(const OpCall& c) { return max_min(c, true); }
Status Tracer::lower_min(const OpCall& c) { return max_min(c, false); }
Status Tracer::lower_argmax(const OpCall& c) { return arg_reduce(c, jit::Op::ArgMax); }
Status Tracer::lower_argmin(const OpCall& c) { return arg_reduce(c, jit::Op::ArgMin); }
Status Tracer::lower_any(const OpCall& c) { return arg_reduce(c, jit::Op::Any); }
Status Tracer::lower_all(const OpCall& c) { return arg_reduce(c, jit::Op::All); }
Status Tracer::lower_var(const OpCall& c) { return var_std(c, false); }
Status Tracer::lower_std(const OpCall& c) { return var_std(c, true); }
Status Tracer::lower_softmax(const OpCall& c) { return softmax_like(c, false); }
Status Tracer::lower_log_softmax(const OpCall& c) { return softmax_like(c, true); }

// cumsum(input, dim, dtype=None)
Status Tracer::lower_cumsum(const OpCall& c) {
  int64_t d;
  std::optional<DType> dtype;
  FJ_TRY(int_arg(c.a[1], c.what + " dim", &d));
  FJ_TRY(dtype_arg(c.a[2], c.what, &dtype));
  return push_built(graph_.cumsum(c.x, d, dtype), c.what);
}

// norm(input, p='fro', dim=None, keepdim=False, dtype=None) for p in 1, 2 ('fro'), inf
Status Tracer::lower_norm(const OpCall& c) {
  const std::vector<Value>& a = c.a;
  const NodeId x = c.x;
  std::vector<int64_t> dims;
  bool no_dim = false, keep = false;
  std::optional<DType> dtype;
  FJ_TRY(reduce_dims(c, 2, 3, &dims, &no_dim, &keep));
  FJ_TRY(dtype_arg(a[4], c.what, &dtype));
  if (dtype) return unsupported(c.what + " with a dtype");
  if (!jit::is_floating(graph_.node(x).dtype)) return unsupported(c.what + " of a non-floating tensor");
  PyObject* p = a[1].kind == ValueKind::Const && !is_opaque(a[1]) ? a[1].obj.get() : nullptr;
  double pv = 0;
  if (guards::str_is(p, "fro")) pv = 2;
  else if (p != nullptr && (PyLong_CheckExact(p) || PyFloat_CheckExact(p))) pv = PyFloat_AsDouble(p);
  else return unsupported(c.what + " with p=" + describe(a[1]));
  if (pv == 1) {
    auto ab = graph_.pointwise(jit::Op::Abs, {x});
    if (!ab) return unsupported(c.what + ": " + ab.error());
    return push_built(graph_.reduce(jit::Op::Sum, *ab, dims, keep), c.what);
  }
  if (pv == 2) {
    auto sq = graph_.pointwise(jit::Op::Mul, {x, x});
    if (!sq) return unsupported(c.what + ": " + sq.error());
    auto s = graph_.reduce(jit::Op::Sum, *sq, dims, keep);
    if (!s) return unsupported(c.what + ": " + s.error());
    return push_built(graph_.pointwise(jit::Op::Sqrt, {*s}), c.what);
  }
  if (std::isinf(pv) && pv > 0) {
    auto ab = graph_.pointwise(jit::Op::Abs, {x});
    if (!ab) return unsupported(c.what + ": " + ab.error());
    return push_built(graph_.reduce(jit::Op::Amax, *ab, dims, keep), c.what);
  }
  return unsupported(c.what + " with p=" + describe(a[1]) + " (not supported)");
}

// logsumexp(input, dim, keepdim=False)
Status Tracer::lower_logsumexp(const OpCall& c) {
  std::vector<int64_t> dims;
  bool no_dim = false, keep = false;
  FJ_TRY(reduce_dims(c, 1, 2, &dims, &no_dim, &keep));
  if (no_dim || dims.empty()) return unsupported(c.what + " without dims");
  if (!jit::is_floating(graph_.node(c.x).dtype)) return unsupported(c.what + " of a non-floating tensor");
  return push_built(graph_.logsumexp(c.x, dims, keep), c.what);
}

// Whether two shapes are equal, guarded; a difference ends the trace (eager raises).
Status Tracer::same_sizes(const jit::SymShape& have, const jit::SymShape& want, const std::string& what) {
  if (have.size() != want.size()) return unsupported(what + ": shapes differ (eager raises)");
  for (size_t i = 0; i < have.size(); ++i) {
    bool eq = false;
    FJ_TRY(guard_truth(jit::eq(have[i], want[i]), &eq));
    if (!eq) return unsupported(what + ": shapes differ (eager raises)");
  }
  return ok();
}

// F.layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5)
Status Tracer::lower_layer_norm(const OpCall& c) {
  const std::vector<Value>& a = c.a;
  jit::SymShape shape;
  FJ_TRY(sizes_arg(a[1], c.what + " normalized_shape", &shape, false));
  const jit::SymShape xs = graph_.node(c.x).sym;
  if (shape.empty() || shape.size() > xs.size()) return unsupported(c.what + " with a bad normalized_shape (eager raises)");
  // The trailing sizes must equal normalized_shape, and weight / bias have it.
  const jit::SymShape trailing(xs.end() - static_cast<std::ptrdiff_t>(shape.size()), xs.end());
  FJ_TRY(same_sizes(trailing, shape, c.what));
  NodeId wb[2] = {-1, -1};
  for (int k = 0; k < 2; ++k) {
    const Value& v = a[2 + static_cast<size_t>(k)];
    if (is_none(v)) continue;
    if (!is_tensor(v)) return unsupported(c.what + " weight/bias " + describe(v));
    FJ_TRY(same_sizes(graph_.node(v.node).sym, shape, c.what));
    wb[k] = v.node;
  }
  const auto eps = as_sym(a[4]);
  if (!eps || !eps->is_constant()) return unsupported(c.what + " with a non-constant eps");
  const auto ev = eps->as_value();
  return push_built(graph_.layer_norm(c.x, shape.size(), wb[0], wb[1], sym_value_to_double(*ev)), c.what);
}

}  // namespace fj::interp
