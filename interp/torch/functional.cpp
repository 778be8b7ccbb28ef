// The Functional family of interp/torch/torch_ops.def: what torch.nn.functional calls
// once its Python checks are done (torch.dropout, torch.batch_norm), built from graph
// ops in the cases that are plain arithmetic; the others end the trace.
#include "interp/trace/tracer.h"

#include "interp/runtime/plan.h"

namespace fj::interp {

using jit::DType;
using jit::NodeId;
using jit::Op;

// dropout(input, p, train): the input itself when not training (eager returns it).
Status Tracer::lower_dropout(const OpCall& c) {
  bool train = true;
  FJ_TRY(bool_arg(c.a[2], c.what + " train", &train));
  if (train) return unsupported(c.what + " in training (random; not supported yet)");
  const std::optional<jit::SymExpr> p = as_sym(c.a[1]);
  if (!p || p->type() == jit::SymType::Bool) return unsupported(c.what + " with p=" + describe(c.a[1]) + " (not supported)");
  push(c.a[0]);
  return ok();
}

// batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps,
// cudnn_enabled), not training: per channel (dim 1), as eager's CPU kernel computes it,
//   invstd = 1 / sqrt(var + eps); alpha = invstd * weight; beta = bias - mean * alpha
//   out = input * alpha + beta
Status Tracer::lower_batch_norm(const OpCall& c) {
  const std::vector<Value>& a = c.a;
  bool training = true;
  FJ_TRY(bool_arg(a[5], c.what + " training", &training));
  if (training) return unsupported(c.what + " in training (not supported yet)");
  const jit::Node& x = graph_.node(c.x);
  const DType d = x.dtype;
  if (!jit::is_floating(d)) return unsupported(c.what + " of a " + std::string(jit::dtype_name(d)) + " tensor (eager raises)");
  if (x.rank() < 2) return unsupported(c.what + " of a tensor with fewer than 2 dims (not supported)");
  const jit::SymShape channels{x.sym[1]};
  const size_t rank = x.rank();
  // weight, bias, running_mean, running_var: each [C] of the input's dtype, shaped
  // [1, C, 1, ...] to broadcast over the input.
  NodeId p[4] = {-1, -1, -1, -1};
  for (size_t k = 0; k < 4; ++k) {
    const Value& v = a[1 + k];
    if (k < 2 && is_none(v)) continue;
    if (!is_tensor(v)) return unsupported(c.what + " with " + describe(v) + " (not supported)");
    if (graph_.node(v.node).dtype != d) return unsupported(c.what + " with parameters of another dtype (not supported yet)");
    FJ_TRY(same_sizes(graph_.node(v.node).sym, channels, c.what));
    jit::SymShape to(rank, jit::SymExpr::integer(1));
    to[1] = channels[0];
    auto r = graph_.reshape(v.node, to);
    if (!r) return unsupported(c.what + ": " + r.error());
    p[k] = *r;
  }
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

}  // namespace fj::interp
