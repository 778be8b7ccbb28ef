// The matmul family of interp/torch/torch_ops.def: matmul, mm, bmm, addmm and linear,
// each one extern matmul node (einsum is in interp/torch/einsum.cpp).
#include "interp/trace/tracer.h"

namespace fj::interp {

using jit::NodeId;

// ---- shared by the family ----

Status Tracer::matmul_values(const Value& av, const Value& bv) {
  if (!is_tensor(av) || !is_tensor(bv)) return unsupported("matmul of " + describe(av) + " and " + describe(bv));
  NodeId a = av.node, b = bv.node;
  const size_t ra = graph_.node(a).rank(), rb = graph_.node(b).rank();
  if (ra == 0 || rb == 0) return unsupported("matmul of a 0-d tensor (eager raises)");
  // 1-d operands as torch.matmul treats them: [k] @ [..., k, n] is [1, k] @ ... with the
  // 1 dropped after; [..., m, k] @ [k] is ... @ [k, 1] with the 1 dropped.
  if (ra == 1) {
    auto u = graph_.unsqueeze(a, 0);
    if (!u) return unsupported("matmul: " + u.error());
    a = *u;
  }
  if (rb == 1) {
    auto u = graph_.unsqueeze(b, 1);
    if (!u) return unsupported("matmul: " + u.error());
    b = *u;
  }
  auto m = graph_.matmul(a, b);
  if (!m) return unsupported("matmul: " + m.error());
  NodeId r = *m;
  if (ra == 1 || rb == 1) {
    jit::SymShape s = graph_.node(r).sym;
    if (rb == 1) s.erase(s.end() - 1);
    if (ra == 1) s.erase(s.end() - 1 - (rb == 1 ? 0 : 1));
    return push_built(graph_.reshape(r, s), "matmul()");
  }
  return push_built(r, "matmul()");
}

// The operands after the first (which the table has checked) are tensors of `rank`
// (0: any rank).
Status Tracer::matmul_operands(const OpCall& c, size_t count, size_t rank) {
  for (size_t i = 1; i < count; ++i) {
    if (!is_tensor(c.a[i])) return unsupported("matmul operand " + describe(c.a[i]));
  }
  for (size_t i = 0; i < count && rank != 0; ++i) {
    if (graph_.node(c.a[i].node).rank() != rank) {
      return unsupported(c.what + " of operands that are not " + std::to_string(rank) + "-d (eager raises)");
    }
  }
  return ok();
}

// ---- one lowering per row ----

Status Tracer::lower_matmul(const OpCall& c) {
  FJ_TRY(matmul_operands(c, 2, 0));
  return matmul_values(c.a[0], c.a[1]);
}

Status Tracer::lower_mm(const OpCall& c) {
  FJ_TRY(matmul_operands(c, 2, 2));
  return matmul_values(c.a[0], c.a[1]);
}

Status Tracer::lower_bmm(const OpCall& c) {
  FJ_TRY(matmul_operands(c, 2, 3));
  // bmm does not broadcast batches: they must be equal.
  bool eq = false;
  FJ_TRY(guard_truth(jit::eq(graph_.node(c.a[0].node).sym[0], graph_.node(c.a[1].node).sym[0]), &eq));
  if (!eq) return unsupported("bmm() of different batch sizes (eager raises)");
  return matmul_values(c.a[0], c.a[1]);
}

// addmm(input, mat1, mat2, beta=1, alpha=1): beta * input + alpha * (mat1 @ mat2)
Status Tracer::lower_addmm(const OpCall& c) {
  const std::vector<Value>& a = c.a;
  FJ_TRY(matmul_operands(c, 3, 0));
  if (graph_.node(a[1].node).rank() != 2 || graph_.node(a[2].node).rank() != 2) return unsupported("addmm() of operands that are not 2-d");
  FJ_TRY(matmul_values(a[1], a[2]));
  Value prod = pop();
  const auto beta = as_sym(a[3]), alpha = as_sym(a[4]);
  if (!beta || !alpha || !beta->is_constant() || !alpha->is_constant()) return unsupported("addmm() with symbolic beta/alpha");
  const double bv = sym_value_to_double(*beta->as_value()), av = sym_value_to_double(*alpha->as_value());
  NodeId p = prod.node;
  if (av != 1) {
    auto m = graph_.pointwise(jit::Op::Mul, {p, graph_.scalar(av)});
    if (!m) return unsupported("addmm(): " + m.error());
    p = *m;
  }
  if (bv == 0) return unsupported("addmm() with beta=0");
  NodeId in = a[0].node;
  if (bv != 1) {
    auto m = graph_.pointwise(jit::Op::Mul, {in, graph_.scalar(bv)});
    if (!m) return unsupported("addmm(): " + m.error());
    in = *m;
  }
  // the result has the product's shape: input broadcasts to it
  const jit::SymShape ps = graph_.node(p).sym;
  auto e = graph_.expand(in, ps);
  if (!e) return unsupported("addmm(): " + e.error());
  return push_built(graph_.pointwise(jit::Op::Add, {*e, p}), "addmm()");
}

// F.linear(input, weight, bias=None): input @ weight.T + bias, one extern node
Status Tracer::lower_linear(const OpCall& c) {
  const std::vector<Value>& a = c.a;
  FJ_TRY(matmul_operands(c, 2, 0));
  const size_t r0 = graph_.node(a[0].node).rank(), r1 = graph_.node(a[1].node).rank();
  NodeId bias = -1;
  if (!is_none(a[2])) {
    if (!is_tensor(a[2])) return unsupported("linear() bias " + describe(a[2]));
    bias = a[2].node;
    if (graph_.node(bias).rank() > 1) return unsupported("linear() with a bias of rank > 1");
  }
  const NodeId w = a[1].node;
  if (r1 != 2 && r1 != 1) return unsupported("linear() with a weight of rank " + std::to_string(r1));
  if (r1 == 1 || r0 == 0) return unsupported("linear() with 1-d weight or 0-d input");
  if (graph_.node(a[0].node).dtype != graph_.node(w).dtype) return unsupported("linear() of mixed dtypes (eager raises)");
  if (bias >= 0 && graph_.node(bias).dtype != graph_.node(w).dtype) return unsupported("linear() of mixed dtypes (eager raises)");
  if (bias >= 0 && graph_.node(bias).rank() == 1) {
    bool eq = false;
    FJ_TRY(guard_truth(jit::eq(graph_.node(bias).sym[0], graph_.node(w).sym[0]), &eq));
    if (!eq && !is_const(graph_.node(bias).sym[0], 1)) return unsupported("linear() bias size mismatch (eager raises)");
  }
  return push_built(graph_.linear(a[0].node, w, bias), "linear()");
}

}  // namespace fj::interp
