// The Functional family of interp/torch/torch_ops.def: what torch.nn.functional calls
// once its Python checks are done (torch.dropout, torch.batch_norm), built from graph
// ops in the cases that are plain arithmetic; the others end the trace.
#include "interp/trace/tracer.h"

#include "interp/runtime/plan.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace fj::interp {

using jit::DType;
using jit::NodeId;
using jit::Op;

// dropout(input, p, train): the input itself when not training (eager returns it).
Status Tracer::lower_dropout(const OpCall& c) { return dropout(c, false); }

// feature_dropout(input, p, train) (what F.dropout1d/2d/3d call): one draw per channel.
Status Tracer::lower_feature_dropout(const OpCall& c) { return dropout(c, true); }

// dropout_ and feature_dropout_: ATen's in-place _dropout_impl multiplies the input in
// place (input.mul_(noise)), and returns the input untouched where the out-of-place
// one returns it.
Status Tracer::lower_dropout_(const OpCall& c) { return dropout_inplace(c, false); }
Status Tracer::lower_feature_dropout_(const OpCall& c) { return dropout_inplace(c, true); }

Status Tracer::dropout_inplace(const OpCall& c, bool feature) {
  const size_t first_new = graph_.size();
  FJ_TRY(dropout(c, feature));
  Value result = pop();
  if (result.node == c.x) {
    push(c.a[0]);
    return ok();
  }
  return finish_inplace(c.a[0], result.node, first_new, {}, c.what);
}

// Both dropouts as ATen's _dropout_impl computes them: the input itself when not
// training, when p == 0 or when it has no elements; input * a 0-d zero when p == 1
// (NaN stays NaN); else input * noise, the noise drawn at run time by torch as eager
// draws it (Tracer::dropout_noise), so a seed gives eager's masks and values. The
// noise carries no gradient: the product differentiates as any product.
Status Tracer::dropout(const OpCall& c, bool feature) {
  bool train = true;
  FJ_TRY(bool_arg(c.a[2], c.what + " train", &train));
  const std::optional<jit::SymExpr> ps = as_sym(c.a[1]);
  if (!ps || ps->type() == jit::SymType::Bool) return unsupported(c.what + " with p=" + describe(c.a[1]) + " (not supported)");
  if (!train) {
    push(c.a[0]);
    return ok();
  }
  const auto value = ps->eval(hints_);
  if (!value) return unsupported(c.what + " with p=" + describe(c.a[1]) + " (no value here)");
  const double p = sym_value_to_double(*value);
  if (!ps->is_constant()) {  // the draws depend on p's value: guarded
    bool same = false;
    FJ_TRY(guard_truth(jit::eq(*ps, jit::SymExpr::real(p)), &same));
    if (!same) return unsupported(c.what + " with p=" + describe(c.a[1]) + " (not supported)");
  }
  if (!(p >= 0 && p <= 1)) return unsupported(c.what + " with p outside [0, 1] (eager raises)");
  const jit::Node x = graph_.node(c.x);  // a copy: building nodes moves the graph's storage
  if (feature && x.rank() < 2) return unsupported(c.what + " of a tensor with fewer than 2 dims (eager raises)");
  const bool empty = std::any_of(x.sym.begin(), x.sym.end(), [](const jit::SymExpr& d) { return jit::is_const(d, 0); });
  if (p == 0 || empty) {
    push(c.a[0]);
    return ok();
  }
  if (!jit::is_floating(x.dtype)) return unsupported(c.what + " in training of a " + std::string(jit::dtype_name(x.dtype)) + " tensor (not supported)");
  NodeId by = -1;
  if (p == 1) {
    Expected<NodeId> zero = graph_.full({}, graph_.scalar(0.0), x.dtype);
    if (!zero) return unsupported(c.what + ": " + zero.error());
    by = *zero;
  } else {
    // The noise follows eager's draw order only where eager's noise is contiguous:
    // empty_like keeps a non-contiguous input's strides (new_empty for feature
    // dropout is always contiguous).
    if (!feature && (may_be_noncontig(c.x) || !guard_inputs_contiguous(c.x))) {
      return unsupported(c.what + " in training of a tensor that may be non-contiguous (not supported yet)");
    }
    jit::SymShape sizes = x.sym;
    if (feature) std::fill(sizes.begin() + 2, sizes.end(), jit::SymExpr::integer(1));
    Expected<NodeId> noise = dropout_noise(sizes, x.dtype, p);
    if (!noise) return unsupported(c.what + ": " + noise.error());
    by = *noise;
  }
  return push_built(graph_.pointwise(Op::Mul, {c.x, by}), c.what, c.x);
}

// batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps,
// cudnn_enabled), not training: per channel (dim 1), as eager's CPU kernel computes it,
//   invstd = 1 / sqrt(var + eps); alpha = invstd * weight; beta = bias - mean * alpha
//   out = input * alpha + beta
Status Tracer::lower_batch_norm(const OpCall& c) {
  const std::vector<Value>& a = c.a;
  bool training = true;
  FJ_TRY(bool_arg(a[5], c.what + " training", &training));
  NodeId p[4] = {-1, -1, -1, -1};  // weight, bias, running_mean, running_var as [1, C, 1, ...]
  FJ_TRY(batch_norm_params(c, training, p));
  if (training) return batch_norm_train(c, p);  // batch_norm.cpp
  const std::optional<jit::SymExpr> eps = as_sym(a[7]);
  if (!eps || !eps->is_constant() || eps->type() == jit::SymType::Bool) return unsupported(c.what + " with a non-constant eps");
  const double e = sym_value_to_double(*eps->as_value());
  auto step = [&](Op op, std::vector<NodeId> in, NodeId* out) -> Status {
    auto n = graph_.pointwise(op, in);
    if (!n) return unsupported(c.what + ": " + n.error());
    *out = *n;
    return ok();
  };
  NodeId t, invstd, alpha, beta, y;
  FJ_TRY(step(Op::Add, {p[3], graph_.scalar(e)}, &t));
  FJ_TRY(step(Op::Sqrt, {t}, &t));
  FJ_TRY(step(Op::Reciprocal, {t}, &invstd));
  alpha = invstd;
  if (p[0] >= 0) FJ_TRY(step(Op::Mul, {invstd, p[0]}, &alpha));
  FJ_TRY(step(Op::Mul, {p[2], alpha}, &t));
  if (p[1] >= 0) FJ_TRY(step(Op::Sub, {p[1], t}, &beta));
  else FJ_TRY(step(Op::Neg, {t}, &beta));
  FJ_TRY(step(Op::Mul, {c.x, alpha}, &y));
  return push_built(graph_.pointwise(Op::Add, {y, beta}), c.what);
}

// lerp(input, end, weight) of a Python number weight, by eager's formula: which half
// of the line the weight is on is guarded (|w| < 0.5: input + w * (end - input), else
// end - (end - input) * (1 - w)). A tensor weight is another op (not lowered).
Status Tracer::lower_lerp(const OpCall& c) {
  const std::optional<jit::SymExpr> w = as_sym(c.a[2]);
  if (!is_tensor(c.a[1]) || is_tensor(c.a[2]) || !w || w->type() == jit::SymType::Bool) {
    return unsupported(c.what + " with a tensor weight or end (not supported yet)");
  }
  const jit::Node& x = graph_.node(c.x);
  if (!jit::is_floating(x.dtype) || graph_.node(c.a[1].node).dtype != x.dtype) {
    return unsupported(c.what + " of tensors of other dtypes (eager raises)");
  }
  bool low = false;
  const jit::SymExpr half = jit::SymExpr::real(0.5);
  FJ_TRY(guard_truth(jit::logical_and(jit::lt(*w, half), jit::lt(jit::neg(half), *w)), &low));
  auto weight = operand(c.a[2]);
  if (!weight) return unsupported(c.what + ": " + weight.error());
  auto step = [&](Op op, std::vector<NodeId> in, NodeId* out) -> Status {
    auto n = graph_.pointwise(op, in);
    if (!n) return unsupported(c.what + ": " + n.error());
    *out = *n;
    return ok();
  };
  NodeId diff, t;
  FJ_TRY(step(Op::Sub, {c.a[1].node, c.x}, &diff));
  if (low) {
    FJ_TRY(step(Op::Mul, {diff, *weight}, &t));
    return push_built(graph_.pointwise(Op::Add, {c.x, t}), c.what);
  }
  auto rest = operand(Value::sym(jit::sub(jit::SymExpr::real(1.0), *w)));
  if (!rest) return unsupported(c.what + ": " + rest.error());
  FJ_TRY(step(Op::Mul, {diff, *rest}, &t));
  return push_built(graph_.pointwise(Op::Sub, {c.a[1].node, t}), c.what);
}

}  // namespace fj::interp

namespace fj::interp {

// scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
// is_causal=False, scale=None, enable_gqa=False), as eager's CPU kernel computes it:
//   s = (q @ k^T) * scale (+ a float mask; a bool mask or is_causal: -inf where masked)
//   out = softmax(s, -1) @ v, with rows where everything is masked giving 0 (as eager)
// scale defaults to 1 / sqrt(E) (E, the head size, is specialized). dropout_p > 0 and
// what eager rejects or broadcasts otherwise end the trace.
Status Tracer::lower_scaled_dot_product_attention(const OpCall& c) {
  const std::vector<Value>& a = c.a;
  for (size_t k = 1; k < 3; ++k) {
    if (!is_tensor(a[k])) return unsupported(c.what + " with " + describe(a[k]) + " (not supported)");
  }
  const NodeId q = c.x, k = a[1].node, v = a[2].node;
  const jit::Node& qn = graph_.node(q);
  const DType d = qn.dtype;
  const size_t rank = qn.rank();
  if (!jit::is_floating(d) || graph_.node(k).dtype != d || graph_.node(v).dtype != d) {
    return unsupported(c.what + " with these dtypes (eager raises)");
  }
  if (rank < 2 || graph_.node(k).rank() != rank || graph_.node(v).rank() != rank) {
    return unsupported(c.what + " with operands of different ranks (not supported yet)");
  }
  const jit::SymShape qs = qn.sym, ks = graph_.node(k).sym, vs = graph_.node(v).sym;
  const jit::SymShape qlead(qs.begin(), qs.end() - 1), klead(ks.begin(), ks.end() - 1);
  FJ_TRY(same_sizes(jit::SymShape(qs.begin(), qs.end() - 2), jit::SymShape(ks.begin(), ks.end() - 2), c.what));
  FJ_TRY(same_sizes(klead, jit::SymShape(vs.begin(), vs.end() - 1), c.what));
  FJ_TRY(same_sizes({qs.back()}, {ks.back()}, c.what));
  double dropout = 1;
  const std::optional<jit::SymExpr> dp = as_sym(a[4]);
  if (dp && dp->is_constant()) dropout = sym_value_to_double(*dp->as_value());
  if (dropout != 0) return unsupported(c.what + " with dropout_p=" + describe(a[4]) + " (random; not supported yet)");
  bool causal = false, gqa = false;
  FJ_TRY(bool_arg(a[5], c.what + " is_causal", &causal));
  FJ_TRY(bool_arg(a[7], c.what + " enable_gqa", &gqa));
  if (gqa) return unsupported(c.what + " with enable_gqa=True (not supported yet)");
  const bool masked = !is_none(a[3]);
  if (causal && masked) return unsupported(c.what + " with attn_mask and is_causal (eager raises)");

  auto check = [&](Expected<NodeId> n, NodeId* out) -> Status {
    if (!n) return unsupported(c.what + ": " + n.error());
    *out = *n;
    return ok();
  };
  NodeId kt, s, scale;
  if (is_none(a[6])) {
    int64_t e = 0;
    FJ_TRY(specialize(qs.back(), c.what + " head size", &e));
    scale = graph_.scalar(1.0 / std::sqrt(static_cast<double>(e)));
  } else {
    const std::optional<jit::SymExpr> sc = as_sym(a[6]);
    if (!sc || sc->type() == jit::SymType::Bool) return unsupported(c.what + " with scale=" + describe(a[6]));
    FJ_TRY(check(operand(a[6]), &scale));
  }
  FJ_TRY(check(graph_.transpose(k, static_cast<int64_t>(rank) - 2, static_cast<int64_t>(rank) - 1), &kt));
  FJ_TRY(check(graph_.matmul(q, kt), &s));
  FJ_TRY(check(graph_.pointwise(jit::Op::Mul, {s, scale}), &s));
  const jit::SymShape scores = graph_.node(s).sym;
  const NodeId minus_inf = graph_.scalar(-std::numeric_limits<double>::infinity());
  if (causal) {  // top-left aligned: query i sees keys 0..i
    const jit::SymShape ls{qs[rank - 2], ks[rank - 2]};
    NodeId keep;
    FJ_TRY(check(graph_.pointwise(jit::Op::Le, {graph_.iota(ls, 1), graph_.iota(ls, 0)}), &keep));
    FJ_TRY(check(graph_.pointwise(jit::Op::Where, {keep, s, minus_inf}), &s));
  } else if (masked) {
    const Value& m = a[3];
    if (!is_tensor(m)) return unsupported(c.what + " with attn_mask " + describe(m));
    const DType md = graph_.node(m.node).dtype;
    if (graph_.node(m.node).rank() > rank) return unsupported(c.what + " with an attn_mask of higher rank (not supported)");
    if (md == DType::Bool) FJ_TRY(check(graph_.pointwise(jit::Op::Where, {m.node, s, minus_inf}), &s));
    else if (md == d) FJ_TRY(check(graph_.pointwise(jit::Op::Add, {s, m.node}), &s));
    else return unsupported(c.what + " with an attn_mask of dtype " + std::string(jit::dtype_name(md)) + " (not supported)");
    FJ_TRY(same_sizes(graph_.node(s).sym, scores, c.what + " attn_mask"));
  }
  NodeId p;
  FJ_TRY(check(graph_.softmax(s, -1, false), &p));
  if (masked) {  // a row masked everywhere: 0, not softmax's NaN
    NodeId row_max, dead;
    FJ_TRY(check(graph_.reduce(jit::Op::Amax, s, {-1}, true), &row_max));
    FJ_TRY(check(graph_.pointwise(jit::Op::Eq, {row_max, minus_inf}), &dead));
    FJ_TRY(check(graph_.pointwise(jit::Op::Where, {dead, graph_.scalar(0.0), p}), &p));
  }
  return push_built(graph_.matmul(p, v), c.what);
}

}  // namespace fj::interp

namespace fj::interp {

// nll_loss_nd(input, target, weight, reduction, ignore_index) and
// cross_entropy_loss(..., label_smoothing) (what F.nll_loss / F.cross_entropy call),
// for input [N, C], class indices target [N] (int64), no weight, no smoothing:
//   loss[i] = -lp[i, target[i]] (0 where target[i] == ignore_index), lp = input or
//   log_softmax(input, 1); reduction 0: loss, 1: sum(loss) / #not ignored, 2: sum.
// A target out of range makes the graph's gather report it, and eager raises.
Status Tracer::nll_loss(const OpCall& c, bool log_softmax) {
  const std::vector<Value>& a = c.a;
  if (!is_tensor(a[1])) return unsupported(c.what + " with target " + describe(a[1]));
  const jit::Node& x = graph_.node(c.x);
  const jit::Node& t = graph_.node(a[1].node);
  if (!jit::is_floating(x.dtype) || x.rank() != 2 || t.rank() != 1 || t.dtype != DType::Int64) {
    return unsupported(c.what + " with these shapes or dtypes (not supported yet)");
  }
  FJ_TRY(same_sizes({t.sym[0]}, {x.sym[0]}, c.what));
  if (!is_none(a[2])) return unsupported(c.what + " with a class weight (not supported yet)");
  int64_t reduction = 0, ignore = 0;
  FJ_TRY(int_arg(a[3], c.what + " reduction", &reduction));
  FJ_TRY(int_arg(a[4], c.what + " ignore_index", &ignore));
  if (reduction < 0 || reduction > 2) return unsupported(c.what + " with reduction " + std::to_string(reduction) + " (eager raises)");
  if (log_softmax) {
    const std::optional<jit::SymExpr> ls = as_sym(a[5]);
    if (!ls || !ls->is_constant() || sym_value_to_double(*ls->as_value()) != 0) {
      return unsupported(c.what + " with label_smoothing (not supported yet)");
    }
  }
  auto check = [&](Expected<NodeId> n, NodeId* out) -> Status {
    if (!n) return unsupported(c.what + ": " + n.error());
    *out = *n;
    return ok();
  };
  const jit::SymShape n_shape{x.sym[0]};
  const DType dtype = x.dtype;  // x and t refer into the graph, which grows below
  NodeId lp = c.x, valid, index, picked, loss;
  if (log_softmax) FJ_TRY(check(graph_.softmax(c.x, 1, true), &lp));
  const NodeId target = a[1].node;
  FJ_TRY(check(graph_.pointwise(Op::Ne, {target, graph_.scalar_int(ignore)}), &valid));
  FJ_TRY(check(graph_.pointwise(Op::Where, {valid, target, graph_.scalar_int(0)}), &index));
  FJ_TRY(check(graph_.unsqueeze(index, 1), &index));
  FJ_TRY(check(graph_.gather(lp, 1, index), &picked));
  FJ_TRY(check(graph_.reshape(picked, n_shape), &picked));
  FJ_TRY(check(graph_.pointwise(Op::Neg, {picked}), &loss));
  FJ_TRY(check(graph_.pointwise(Op::Where, {valid, loss, graph_.scalar(0.0)}), &loss));
  if (reduction == 0) return push_built(loss, c.what);
  NodeId total;
  FJ_TRY(check(graph_.reduce(Op::Sum, loss, {}, false), &total));
  if (reduction == 2) return push_built(total, c.what);
  NodeId count;
  FJ_TRY(check(graph_.cast(valid, dtype), &count));
  FJ_TRY(check(graph_.reduce(Op::Sum, count, {}, false), &count));
  return push_built(graph_.pointwise(Op::Div, {total, count}), c.what);
}

Status Tracer::lower_nll_loss_nd(const OpCall& c) { return nll_loss(c, false); }
Status Tracer::lower_cross_entropy_loss(const OpCall& c) { return nll_loss(c, true); }

}  // namespace fj::interp
