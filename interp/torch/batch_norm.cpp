// torch.batch_norm in training, from graph primitives: batch statistics per channel,
// the normalized output, and the running statistics written back in place (the eval
// case is in functional.cpp; both share batch_norm_params).
//
// Over every dim but the channel dim 1, with n elements per channel:
//   mean = sum(x) / n;  d = x - mean;  s = sum(d * d)
//   out = d * rsqrt(s / n + eps) (* weight) (+ bias)
//   running_mean <- running_mean + momentum * (mean - running_mean)
//   running_var  <- running_var + momentum * (s / (n - 1) - running_var)
// The output differentiates through the rules of these ops. The running statistics are
// recorded with grad mode off (eager's kernel updates them outside autograd), so they
// never require grad and the joint plan writes them back after its forward.
#include "interp/trace/tracer.h"

namespace fj::interp {

using jit::DType;
using jit::NodeId;
using jit::Op;

// The weight, bias, running_mean and running_var arguments of batch_norm (c.a[1..4]),
// each [C] of the input's dtype, reshaped to [1, C, 1, ...] to broadcast over the
// input; -1 for one that is None (the running statistics only in training, where both
// must be None or neither, as eager checks).
Status Tracer::batch_norm_params(const OpCall& c, bool training, NodeId p[4]) {
  const std::vector<Value>& a = c.a;
  const jit::Node& x = graph_.node(c.x);
  const DType d = x.dtype;
  if (!jit::is_floating(d)) return unsupported(c.what + " of a " + std::string(jit::dtype_name(d)) + " tensor (eager raises)");
  if (x.rank() < 2) return unsupported(c.what + " of a tensor with fewer than 2 dims (not supported)");
  if (training && is_none(a[3]) != is_none(a[4])) {
    return unsupported(c.what + " with one running statistic None (eager raises)");
  }
  const jit::SymShape channels{x.sym[1]};
  const size_t rank = x.rank();
  for (size_t k = 0; k < 4; ++k) {
    const Value& v = a[1 + k];
    if ((k < 2 || training) && is_none(v)) continue;
    if (!is_tensor(v)) return unsupported(c.what + " with " + describe(v) + " (not supported)");
    if (graph_.node(v.node).dtype != d) return unsupported(c.what + " with parameters of another dtype (not supported yet)");
    FJ_TRY(same_sizes(graph_.node(v.node).sym, channels, c.what));
    jit::SymShape to(rank, jit::SymExpr::integer(1));
    to[1] = channels[0];
    auto r = graph_.reshape(v.node, to);
    if (!r) return unsupported(c.what + ": " + r.error());
    p[k] = *r;
  }
  return ok();
}

// batch_norm(input, weight, bias, running_mean, running_var, True, momentum, eps, _) with
// p from batch_norm_params.
Status Tracer::batch_norm_train(const OpCall& c, const NodeId p[4]) {
  const std::vector<Value>& a = c.a;
  const jit::Node x = graph_.node(c.x);  // a copy: building nodes moves the graph's storage
  const std::optional<jit::SymExpr> eps = as_sym(a[7]);
  if (!eps || !eps->is_constant() || eps->type() == jit::SymType::Bool) return unsupported(c.what + " with a non-constant eps");
  const double e = sym_value_to_double(*eps->as_value());
  std::vector<int64_t> dims{0};
  jit::SymExpr n = x.sym[0];
  for (size_t k = 2; k < x.rank(); ++k) {
    dims.push_back(static_cast<int64_t>(k));
    n = jit::mul(n, x.sym[k]);
  }
  auto scalar_of = [&](const jit::SymExpr& v) { return v.as_int() ? graph_.scalar_int(*v.as_int()) : graph_.size_scalar(v); };
  const NodeId count = scalar_of(n);
  auto check = [&](Expected<NodeId> r, NodeId* out) -> Status {
    if (!r) return unsupported(c.what + ": " + r.error());
    *out = *r;
    return ok();
  };
  // As eager's CPU kernel: the statistics in double (float inputs), then the output as
  // x * alpha + beta with alpha = invstd * weight and beta = bias - mean * alpha in the
  // input's dtype. A channel of few values is ill-conditioned (a batch of two at 1x1:
  // x - mean is all cancellation), so its rounding must be eager's.
  const jit::DType acc = x.dtype == jit::DType::Float32 ? jit::DType::Float64 : x.dtype;
  NodeId xa = c.x, sum, mean, diff, sq, ssq, var, invstd, mean_x, alpha, beta, y;
  if (acc != x.dtype) FJ_TRY(check(graph_.cast(c.x, acc), &xa));
  FJ_TRY(check(graph_.reduce(Op::Sum, xa, dims, true, acc), &sum));
  FJ_TRY(check(graph_.pointwise(Op::Div, {sum, count}), &mean));
  FJ_TRY(check(graph_.pointwise(Op::Sub, {xa, mean}), &diff));
  FJ_TRY(check(graph_.pointwise(Op::Mul, {diff, diff}), &sq));
  FJ_TRY(check(graph_.reduce(Op::Sum, sq, dims, true, acc), &ssq));
  FJ_TRY(check(graph_.pointwise(Op::Div, {ssq, count}), &var));
  FJ_TRY(check(graph_.pointwise(Op::Add, {var, graph_.scalar(e)}), &invstd));
  FJ_TRY(check(graph_.pointwise(Op::Rsqrt, {invstd}), &invstd));
  mean_x = mean;
  alpha = invstd;
  if (acc != x.dtype) {
    FJ_TRY(check(graph_.cast(mean, x.dtype), &mean_x));
    FJ_TRY(check(graph_.cast(invstd, x.dtype), &alpha));
  }
  if (p[0] >= 0) FJ_TRY(check(graph_.pointwise(Op::Mul, {alpha, p[0]}), &alpha));
  FJ_TRY(check(graph_.pointwise(Op::Mul, {mean_x, alpha}), &beta));
  FJ_TRY(check(graph_.pointwise(Op::Neg, {beta}), &beta));
  if (p[1] >= 0) FJ_TRY(check(graph_.pointwise(Op::Add, {beta, p[1]}), &beta));
  FJ_TRY(check(graph_.pointwise(Op::Mul, {c.x, alpha}), &y));
  FJ_TRY(check(graph_.pointwise(Op::Add, {y, beta}), &y));
  if (p[2] >= 0) {
    FJ_TRY(check_writable(a[3], c.what));
    FJ_TRY(check_writable(a[4], c.what));
    const size_t first = graph_.size();
    auto momentum = operand(a[6]);
    if (!momentum || graph_.node(*momentum).rank() != 0) return unsupported(c.what + " with momentum " + describe(a[6]));
    NodeId unbiased;
    FJ_TRY(check(graph_.pointwise(Op::Div, {ssq, scalar_of(jit::sub(n, jit::SymExpr::integer(1)))}), &unbiased));
    NodeId updated[2];
    const NodeId batch[2] = {mean, unbiased};
    for (size_t k = 0; k < 2; ++k) {
      NodeId step;
      FJ_TRY(check(graph_.pointwise(Op::Sub, {batch[k], p[2 + k]}), &step));
      FJ_TRY(check(graph_.pointwise(Op::Mul, {step, *momentum}), &step));
      FJ_TRY(check(graph_.pointwise(Op::Add, {p[2 + k], step}), &step));
      if (graph_.node(step).dtype != graph_.node(p[2 + k]).dtype) {
        FJ_TRY(check(graph_.cast(step, graph_.node(p[2 + k]).dtype), &step));
      }
      FJ_TRY(check(graph_.reshape(step, {x.sym[1]}), &updated[k]));
    }
    // Outside autograd, as eager's kernel updates them.
    if (node_grad_.size() < graph_.size()) node_grad_.resize(graph_.size(), -1);
    for (size_t i = first; i < graph_.size(); ++i) node_grad_[i] = 0;
    for (size_t k = 0; k < 2; ++k) {
      NodeId now;
      FJ_TRY(write_to(a[3 + k], updated[k], c.what, &now));
    }
  }
  return push_built(y, c.what);
}

}  // namespace fj::interp
