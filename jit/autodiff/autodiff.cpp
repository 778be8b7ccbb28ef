// differentiate(): the save-or-recompute policy that builds the joint forward /
// backward pair (see jit/autodiff/autodiff.h).
#include "jit/autodiff/differentiator.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <optional>

namespace fj::jit {
namespace autodiff_detail {


std::vector<NodeId> copy_scalar_inputs(const Graph& src, Graph& dst) {
  std::vector<ScalarKind> kinds(src.num_scalar_inputs(), ScalarKind::Float);
  for (const Node& n : src.nodes()) {
    if (n.op == Op::ScalarInput) kinds[static_cast<size_t>(n.index)] = n.scalar_kind;
  }
  std::vector<NodeId> ids;
  for (size_t i = 0; i < kinds.size(); ++i) {
    const SymExpr& e = src.scalar_input_exprs()[i];
    ids.push_back(e.is_null() ? dst.scalar_input(kinds[i]) : dst.size_scalar(e));
  }
  return ids;
}

NodeId add_placeholder(Graph& dst, const Node& like) {
  const Shape traced = concrete(like.sym).value_or(Shape(like.rank(), 0));
  return dst.placeholder(like.dtype, traced, like.sym);
}

// What a placeholder of the draft backward graph stands for.

Expected<NodeId> Differentiator::value(NodeId id) {
  NodeId& memo = value_[static_cast<size_t>(id)];
  if (memo >= 0) return memo;
  const Node& n = g_.node(id);
  switch (op_family(n.op)) {
    case Family::Input:
      if (n.op == Op::ScalarInput) return memo = scalar_in_[static_cast<size_t>(n.index)];
      return memo = save(id);
    case Family::Reduction:
    case Family::Index:
    case Family::Extern:
      return memo = save(id);
    case Family::Constant:
    case Family::Pointwise:
    case Family::View:
    case Family::Creation:
    case Family::Item: {
      std::vector<NodeId> in;
      for (NodeId x : n.inputs) {
        auto v = value(x);
        if (!v) return v;
        in.push_back(*v);
      }
      auto c = clone_node(b_, n, in);
      if (!c) return c;
      return value_[static_cast<size_t>(id)] = *c;
    }
  }
  return Error{"value: unknown family"};
}

NodeId Differentiator::save(NodeId id) {
  draft_inputs_.push_back(DraftInput{true, id, 0});
  return add_placeholder(b_, g_.node(id));
}

Expected<NodeId> Differentiator::zeros(const SymShape& sym, DType dtype) {
  return b_.full(sym, num(0.0), dtype);
}

Expected<NodeId> Differentiator::unbroadcast(NodeId c, const SymShape& target) {
  const SymShape have = b_.node(c).sym;
  FJ_CHECK(have.size() >= target.size(), "a gradient of lower rank than its operand");
  const size_t lead = have.size() - target.size();
  // Two sums (the added leading dims dropped, the expanded size-1 dims kept) give
  // the target's shape without a reshape of a reduction.
  std::vector<int64_t> leading, ones;
  for (size_t d = 0; d < have.size(); ++d) {
    if (d < lead) leading.push_back(static_cast<int64_t>(d));
    else if (is_const(target[d - lead], 1) && !is_const(have[d], 1)) ones.push_back(static_cast<int64_t>(d - lead));
  }
  const DType t = b_.node(c).dtype;
  if (!leading.empty()) {
    FJ_AD_TRY(s, b_.reduce(Op::Sum, c, leading, false, t));
    c = s;
  }
  if (!ones.empty()) {
    FJ_AD_TRY(s, b_.reduce(Op::Sum, c, ones, true, t));
    c = s;
  }
  // Sizes equal by an assumption of the forward (s0 against s1) differ only in name:
  // after the sums, the reshape only renames them.
  FJ_AD_TRY(r, b_.reshape(c, target));
  if (r != c) renames_.insert(r);
  return r;
}

Expected<NodeId> Differentiator::transposed_product(NodeId g) {
  while (renames_.count(g)) g = b_.node(g).inputs[0];
  if (b_.node(g).op != Op::Matmul) return NodeId{-1};
  const NodeId a = b_.node(g).inputs[0], b = b_.node(g).inputs[1];
  FJ_AD_TRY(bt, b_.transpose(b, -1, -2));
  FJ_AD_TRY(at, b_.transpose(a, -1, -2));
  return b_.matmul(bt, at);
}

Expected<bool> Differentiator::accumulate(NodeId x, NodeId contribution) {
  if (!needs(x)) return true;
  const Node& xn = g_.node(x);
  FJ_AD_TRY(c, unbroadcast(contribution, xn.sym));
  FJ_AD_TRY(typed, b_.cast(c, xn.dtype));
  NodeId& acc = grad_[static_cast<size_t>(x)];
  if (acc < 0) {
    acc = typed;
  } else {
    FJ_AD_TRY(sum, pw(Op::Add, {acc, typed}));
    grad_[static_cast<size_t>(x)] = sum;
  }
  return true;
}

Expected<NodeId> Differentiator::keep_dims(NodeId v, const Node& r) {
  if (r.keepdim) return v;
  SymShape sym = g_.node(r.inputs[0]).sym;
  for (int64_t d : r.dims) sym[static_cast<size_t>(d)] = SymExpr::integer(1);
  return b_.reshape(v, sym);
}

// The fragment's nodes are cloned into the draft: its placeholders are the outputs'
// gradients (zeros where none flows) and forward values, its scalar inputs forward
// scalars; each of its outputs is a contribution to one input's gradient.
Expected<bool> Differentiator::backprop_custom(size_t k) {
  const CustomGrad& c = opts_.customs[k];
  const Graph& f = c.fragment;
  std::vector<NodeId> map(f.size(), -1);
  for (size_t id = 0; id < f.size(); ++id) {
    const Node& node = f.nodes()[id];
    if (node.op == Op::Placeholder) {
      const auto p = static_cast<size_t>(node.index);
      if (p < c.outputs.size()) {
        const NodeId out = c.outputs[p];
        const NodeId g = grad_[static_cast<size_t>(out)];
        if (g >= 0) {
          map[id] = g;
        } else {
          FJ_AD_TRY(z, zeros(g_.node(out).sym, g_.node(out).dtype));
          map[id] = z;
        }
      } else {
        FJ_CHECK(p - c.outputs.size() < c.captured.size(), "autodiff: a fragment placeholder without a forward value");
        FJ_AD_TRY(v, value(c.captured[p - c.outputs.size()]));
        map[id] = v;
      }
      continue;
    }
    if (node.op == Op::ScalarInput) {
      FJ_CHECK(static_cast<size_t>(node.index) < c.scalars.size(), "autodiff: a fragment scalar without a forward value");
      FJ_AD_TRY(v, value(c.scalars[static_cast<size_t>(node.index)]));
      map[id] = v;
      continue;
    }
    std::vector<NodeId> in;
    for (NodeId x : node.inputs) in.push_back(map[static_cast<size_t>(x)]);
    FJ_AD_TRY(v, clone_node(b_, node, in));
    map[id] = v;
  }
  FJ_CHECK(f.outputs().size() == c.inputs.size(), "autodiff: a fragment with a wrong number of outputs");
  for (size_t q = 0; q < c.inputs.size(); ++q) {
    auto r = accumulate(c.inputs[q], map[static_cast<size_t>(f.outputs()[q])]);
    if (!r) return r;
  }
  return true;
}

Expected<Joint> Differentiator::run() {
  const size_t n = g_.size();
  needs_.assign(n, false);
  value_.assign(n, -1);
  grad_.assign(n, -1);
  custom_of_.assign(n, -1);
  for (size_t k = 0; k < opts_.customs.size(); ++k) {
    for (NodeId o : opts_.customs[k].outputs) custom_of_[static_cast<size_t>(o)] = static_cast<int>(k);
  }
  auto no_grad = [&](size_t id) { return id < opts_.no_grad.size() && opts_.no_grad[id]; };
  for (size_t id = 0; id < n; ++id) {
    const Node& node = g_.nodes()[id];
    if (is_python_scalar(node) || !is_floating(node.dtype)) continue;
    if (node.op == Op::Placeholder) {
      const size_t p = static_cast<size_t>(node.index);
      needs_[id] = p < requires_grad_.size() && requires_grad_[p];
      continue;
    }
    if (no_grad(id)) continue;
    // A custom Function's result depends on its inputs, not on what its forward
    // computed (that ran with grad mode off).
    const std::vector<NodeId>& from = custom_of_[id] >= 0 ? opts_.customs[static_cast<size_t>(custom_of_[id])].inputs
                                                          : node.inputs;
    for (NodeId x : from) needs_[id] = needs_[id] || needs_[static_cast<size_t>(x)];
  }

  // The draft: scalar inputs first (same indices), one grad placeholder per output;
  // saved values become placeholders as rules ask for them.
  scalar_in_ = copy_scalar_inputs(g_, b_);
  const std::vector<NodeId>& outs = g_.outputs();
  for (size_t k = 0; k < outs.size(); ++k) {
    draft_inputs_.push_back(DraftInput{false, outs[k], k});
    const NodeId ph = add_placeholder(b_, g_.node(outs[k]));
    if (!needs(outs[k])) continue;
    NodeId& acc = grad_[static_cast<size_t>(outs[k])];
    if (acc < 0) {
      acc = ph;
    } else {
      FJ_AD_TRY(s, pw(Op::Add, {acc, ph}));
      grad_[static_cast<size_t>(outs[k])] = s;
    }
  }
  // A custom Function's fragment runs once, at its first result (the last one the
  // reverse walk reaches: every consumer of any of its results comes later).
  std::vector<NodeId> custom_first(opts_.customs.size(), -1);
  for (size_t k = 0; k < opts_.customs.size(); ++k) {
    for (NodeId o : opts_.customs[k].outputs) {
      if (custom_first[k] < 0 || o < custom_first[k]) custom_first[k] = o;
    }
  }
  std::vector<bool> custom_reached(opts_.customs.size(), false);
  for (size_t id = n; id-- > 0;) {
    const int k = custom_of_[id];
    if (k >= 0) {
      const auto ku = static_cast<size_t>(k);
      custom_reached[ku] = custom_reached[ku] || (needs_[id] && grad_[id] >= 0);
      if (custom_first[ku] != static_cast<NodeId>(id) || !custom_reached[ku]) continue;
      auto r = backprop_custom(ku);
      if (!r) return r.take_error();
      continue;
    }
    if (!needs_[id] || grad_[id] < 0) continue;
    auto r = backprop(static_cast<NodeId>(id));
    if (!r) return r.take_error();
  }

  Joint joint;
  joint.num_outputs = outs.size();
  for (NodeId o : outs) joint.output_needs_grad.push_back(needs(o));
  std::vector<NodeId> draft_outs;
  std::vector<std::pair<size_t, NodeId>> renamed_outs;  // (position, forward placeholder)
  // What the outputs' autograd graph reaches (through every op that needs a gradient,
  // also those whose gradient is zero, as eager's graph does).
  std::vector<bool> reached(n, false);
  for (NodeId o : outs) reached[static_cast<size_t>(o)] = needs(o);
  for (size_t id = n; id-- > 0;) {
    if (!reached[id]) continue;
    const int k = custom_of_[id];
    for (NodeId x : k >= 0 ? opts_.customs[static_cast<size_t>(k)].inputs : g_.nodes()[id].inputs) {
      if (needs(x)) reached[static_cast<size_t>(x)] = true;
    }
  }
  for (size_t id = 0; id < n; ++id) {
    const Node& node = g_.nodes()[id];
    if (node.op != Op::Placeholder || !needs_[id]) continue;
    joint.grad_inputs.push_back(node.index);
    joint.grad_defined.push_back(reached[id]);
    if (grad_[id] >= 0) {
      // An output that renames sizes would be a copy of its operand (16 MB for a
      // linear weight's gradient product): the operand is the output, and the
      // equality of its sizes with the input's becomes an assumption below.
      NodeId o = grad_[id];
      while (renames_.count(o)) o = b_.node(o).inputs[0];
      draft_outs.push_back(o);
      if (o != grad_[id]) renamed_outs.emplace_back(draft_outs.size() - 1, static_cast<NodeId>(id));
    } else {
      FJ_AD_TRY(z, zeros(node.sym, node.dtype));
      draft_outs.push_back(z);
    }
  }

  // Keep what the outputs read; the live saved values are the saved tensors.
  std::vector<bool> live(b_.size(), false);
  for (NodeId o : draft_outs) live[static_cast<size_t>(o)] = true;
  for (size_t id = b_.size(); id-- > 0;) {
    if (!live[id]) continue;
    for (NodeId x : b_.nodes()[id].inputs) live[static_cast<size_t>(x)] = true;
  }
  std::vector<std::pair<NodeId, NodeId>> saved;  // (forward node, draft placeholder)
  for (size_t id = 0; id < b_.size(); ++id) {
    const Node& node = b_.nodes()[id];
    if (node.op != Op::Placeholder || !live[id]) continue;
    const DraftInput& d = draft_inputs_[static_cast<size_t>(node.index)];
    if (d.saved) saved.emplace_back(d.forward, static_cast<NodeId>(id));
  }
  std::sort(saved.begin(), saved.end());

  // The backward graph: saved placeholders, grad placeholders, scalar inputs, then
  // the live draft nodes in order.
  Graph& bw = joint.backward;
  std::vector<NodeId> map(b_.size(), -1);
  for (const auto& [fwd, draft] : saved) {
    map[static_cast<size_t>(draft)] = add_placeholder(bw, g_.node(fwd));
    joint.saved.push_back(fwd);
  }
  std::vector<NodeId> grad_ph;
  for (NodeId o : outs) grad_ph.push_back(add_placeholder(bw, g_.node(o)));
  const std::vector<NodeId> scalars = copy_scalar_inputs(g_, bw);
  for (size_t id = 0; id < b_.size(); ++id) {
    const Node& node = b_.nodes()[id];
    if (node.op == Op::ScalarInput) {
      map[id] = scalars[static_cast<size_t>(node.index)];
      continue;
    }
    if (node.op == Op::Placeholder) {
      const DraftInput& d = draft_inputs_[static_cast<size_t>(node.index)];
      if (!d.saved) map[id] = grad_ph[d.index];
      continue;
    }
    if (!live[id]) continue;
    std::vector<NodeId> in;
    for (NodeId x : node.inputs) {
      FJ_CHECK(map[static_cast<size_t>(x)] >= 0, "autodiff: a live node reads an unmapped one");
      in.push_back(map[static_cast<size_t>(x)]);
    }
    FJ_AD_TRY(c, clone_node(bw, node, in));
    map[id] = c;
  }
  std::vector<NodeId> bw_outs;
  for (NodeId o : draft_outs) bw_outs.push_back(map[static_cast<size_t>(o)]);
  for (const auto& [k, x] : renamed_outs) {
    auto same = bw.require_same_shape(bw.node(bw_outs[k]).sym, g_.node(x).sym);
    if (!same) return same.take_error();
  }
  bw.set_outputs(std::move(bw_outs));

  joint.forward = g_;
  std::vector<NodeId> fw_outs = outs;
  for (NodeId s : joint.saved) fw_outs.push_back(s);
  joint.forward.set_outputs(std::move(fw_outs));
  return joint;
}

}  // namespace autodiff_detail

Expected<Joint> differentiate(const Graph& g, const std::vector<bool>& requires_grad,
                              const DiffOptions& options) {
  return autodiff_detail::Differentiator(g, requires_grad, options).run();
}

#undef FJ_AD_TRY

}  // namespace fj::jit
