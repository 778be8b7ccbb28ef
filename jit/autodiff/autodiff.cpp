// differentiate(): the save-or-recompute policy, the accumulation of gradients and
// the steps that build the joint forward / backward pair (see jit/autodiff/autodiff.h);
// each op's rule is in jit/autodiff/rules.cpp.
#include "jit/autodiff/differentiator.h"

#include <algorithm>

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

// --- forward values in the backward graph ---

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
    case Family::Extern:  // a random extern call (dropout's noise) would draw again
      return memo = save(id);
    case Family::Constant:
    case Family::Pointwise:
    case Family::View:
    case Family::Creation:
    case Family::Item: {
      std::vector<NodeId> in;
      for (NodeId x : n.inputs) in.push_back(FJ_TRY(value(x)));
      return memo = FJ_TRY(clone_node(b_, n, in));
    }
  }
  return Error{"value: unknown family"};
}

NodeId Differentiator::save(NodeId id) {
  draft_inputs_.push_back(DraftInput{true, id, 0});
  return add_placeholder(b_, g_.node(id));
}

// --- gradient accumulation ---

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
  if (!leading.empty()) c = FJ_TRY(b_.reduce(Op::Sum, c, leading, false, t));
  if (!ones.empty()) c = FJ_TRY(b_.reduce(Op::Sum, c, ones, true, t));
  // Sizes equal by an assumption of the forward (s0 against s1) differ only in name:
  // after the sums, the reshape only renames them.
  const NodeId r = FJ_TRY(b_.reshape(c, target));
  if (r != c) renames_.insert(r);
  return r;
}

Expected<NodeId> Differentiator::transposed_product(NodeId g) {
  while (renames_.count(g)) g = b_.node(g).inputs[0];
  if (b_.node(g).op != Op::Matmul) return NodeId{-1};
  const NodeId a = b_.node(g).inputs[0], b = b_.node(g).inputs[1];
  const NodeId bt = FJ_TRY(b_.transpose(b, -1, -2));
  const NodeId at = FJ_TRY(b_.transpose(a, -1, -2));
  return b_.matmul(bt, at);
}

Status Differentiator::accumulate(NodeId x, NodeId contribution) {
  if (!needs(x)) return ok();
  const Node& xn = g_.node(x);
  const NodeId c = FJ_TRY(unbroadcast(contribution, xn.sym));
  const NodeId typed = FJ_TRY(b_.cast(c, xn.dtype));
  const NodeId acc = grad_[static_cast<size_t>(x)];
  grad_[static_cast<size_t>(x)] = acc < 0 ? typed : FJ_TRY(pw(Op::Add, {acc, typed}));
  return ok();
}

Expected<NodeId> Differentiator::keep_dims(NodeId v, const Node& r) {
  if (r.keepdim) return v;
  SymShape sym = g_.node(r.inputs[0]).sym;
  for (int64_t d : r.dims) sym[static_cast<size_t>(d)] = SymExpr::integer(1);
  return b_.reshape(v, sym);
}

// --- custom autograd.Functions ---

// Fragment placeholder `p` of `c`: an output's gradient (zeros where none flows), then
// the forward values it captured.
Expected<NodeId> Differentiator::fragment_placeholder(const CustomGrad& c, size_t p) {
  if (p < c.outputs.size()) {
    const NodeId out = c.outputs[p];
    const NodeId g = grad_[static_cast<size_t>(out)];
    if (g >= 0) return g;
    return zeros(g_.node(out).sym, g_.node(out).dtype);
  }
  FJ_CHECK(p - c.outputs.size() < c.captured.size(), "autodiff: a fragment placeholder without a forward value");
  return value(c.captured[p - c.outputs.size()]);
}

// The fragment's nodes are cloned into the draft: its placeholders are the outputs'
// gradients and forward values, its scalar inputs forward scalars; each of its
// outputs is a contribution to one input's gradient.
Status Differentiator::backprop_custom(size_t k) {
  const CustomGrad& c = opts_.customs[k];
  const Graph& f = c.fragment;
  std::vector<NodeId> map(f.size(), -1);
  for (size_t id = 0; id < f.size(); ++id) {
    const Node& node = f.nodes()[id];
    if (node.op == Op::Placeholder) {
      map[id] = FJ_TRY(fragment_placeholder(c, static_cast<size_t>(node.index)));
    } else if (node.op == Op::ScalarInput) {
      FJ_CHECK(static_cast<size_t>(node.index) < c.scalars.size(), "autodiff: a fragment scalar without a forward value");
      map[id] = FJ_TRY(value(c.scalars[static_cast<size_t>(node.index)]));
    } else {
      std::vector<NodeId> in;
      for (NodeId x : node.inputs) in.push_back(map[static_cast<size_t>(x)]);
      map[id] = FJ_TRY(clone_node(b_, node, in));
    }
  }
  FJ_CHECK(f.outputs().size() == c.inputs.size(), "autodiff: a fragment with a wrong number of outputs");
  for (size_t q = 0; q < c.inputs.size(); ++q) {
    FJ_TRY(accumulate(c.inputs[q], map[static_cast<size_t>(f.outputs()[q])]));
  }
  return ok();
}

// --- the steps of run() ---

// Which forward nodes a gradient may flow into, and which are custom Functions' results.
void Differentiator::mark_needs() {
  const size_t n = g_.size();
  needs_.assign(n, false);
  custom_of_.assign(n, -1);
  for (size_t k = 0; k < opts_.customs.size(); ++k) {
    for (NodeId o : opts_.customs[k].outputs) custom_of_[static_cast<size_t>(o)] = static_cast<int>(k);
  }
  for (size_t id = 0; id < n; ++id) {
    const Node& node = g_.nodes()[id];
    if (is_python_scalar(node) || !is_floating(node.dtype)) continue;
    if (node.op == Op::Placeholder) {
      const size_t p = static_cast<size_t>(node.index);
      needs_[id] = p < requires_grad_.size() && requires_grad_[p];
      continue;
    }
    if (id < opts_.no_grad.size() && opts_.no_grad[id]) continue;
    // A custom Function's result depends on its inputs, not on what its forward
    // computed (that ran with grad mode off).
    const std::vector<NodeId>& from = custom_of_[id] >= 0 ? opts_.customs[static_cast<size_t>(custom_of_[id])].inputs
                                                          : node.inputs;
    for (NodeId x : from) needs_[id] = needs_[id] || needs_[static_cast<size_t>(x)];
  }
}

// The draft's inputs: the forward's scalar inputs first (same indices), then one
// gradient placeholder per output (saved values become placeholders as rules ask for
// them); an output's gradient starts as its placeholder (repeated outputs add).
Status Differentiator::seed_output_grads() {
  value_.assign(g_.size(), -1);
  grad_.assign(g_.size(), -1);
  scalar_in_ = copy_scalar_inputs(g_, b_);
  const std::vector<NodeId>& outs = g_.outputs();
  for (size_t k = 0; k < outs.size(); ++k) {
    draft_inputs_.push_back(DraftInput{false, outs[k], k});
    const NodeId ph = add_placeholder(b_, g_.node(outs[k]));
    if (!needs(outs[k])) continue;
    const NodeId acc = grad_[static_cast<size_t>(outs[k])];
    grad_[static_cast<size_t>(outs[k])] = acc < 0 ? ph : FJ_TRY(pw(Op::Add, {acc, ph}));
  }
  return ok();
}

// The reverse walk: every node that needs a gradient and received one passes it to its
// operands by its op's rule, or, for a custom Function, by its fragment.
Status Differentiator::backprop_all() {
  // A custom Function's fragment runs once, at its first result (the last one the
  // reverse walk reaches: every consumer of any of its results comes later).
  std::vector<NodeId> custom_first(opts_.customs.size(), -1);
  for (size_t k = 0; k < opts_.customs.size(); ++k) {
    for (NodeId o : opts_.customs[k].outputs) {
      if (custom_first[k] < 0 || o < custom_first[k]) custom_first[k] = o;
    }
  }
  std::vector<bool> custom_reached(opts_.customs.size(), false);
  for (size_t id = g_.size(); id-- > 0;) {
    const bool has_grad = needs_[id] && grad_[id] >= 0;
    if (custom_of_[id] < 0) {
      if (has_grad) FJ_TRY(apply_rule(static_cast<NodeId>(id)));
      continue;
    }
    const auto k = static_cast<size_t>(custom_of_[id]);
    custom_reached[k] = custom_reached[k] || has_grad;
    if (custom_first[k] == static_cast<NodeId>(id) && custom_reached[k]) FJ_TRY(backprop_custom(k));
  }
  return ok();
}

// Per forward node: the outputs' autograd graph reaches it (through every op that
// needs a gradient, also those whose gradient is zero, as eager's graph does).
std::vector<bool> Differentiator::reached_from_outputs() const {
  std::vector<bool> reached(g_.size(), false);
  for (NodeId o : g_.outputs()) reached[static_cast<size_t>(o)] = needs(o);
  for (size_t id = g_.size(); id-- > 0;) {
    if (!reached[id]) continue;
    const int k = custom_of_[id];
    for (NodeId x : k >= 0 ? opts_.customs[static_cast<size_t>(k)].inputs : g_.nodes()[id].inputs) {
      if (needs(x)) reached[static_cast<size_t>(x)] = true;
    }
  }
  return reached;
}

// One gradient per forward placeholder that needs one (zeros where none flows), in
// placeholder order; fills joint's grad_inputs and grad_defined.
Expected<DraftOutputs> Differentiator::draft_outputs(Joint& joint) {
  const std::vector<bool> reached = reached_from_outputs();
  DraftOutputs outs;
  for (size_t id = 0; id < g_.size(); ++id) {
    const Node& node = g_.nodes()[id];
    if (node.op != Op::Placeholder || !needs_[id]) continue;
    joint.grad_inputs.push_back(node.index);
    joint.grad_defined.push_back(reached[id]);
    if (grad_[id] < 0) {
      outs.ids.push_back(FJ_TRY(zeros(node.sym, node.dtype)));
      continue;
    }
    // An output that renames sizes would be a copy of its operand (16 MB for a
    // linear weight's gradient product): the operand is the output, and the
    // equality of its sizes with the input's becomes an assumption of the backward.
    NodeId o = grad_[id];
    while (renames_.count(o)) o = b_.node(o).inputs[0];
    outs.ids.push_back(o);
    if (o != grad_[id]) outs.renamed.emplace_back(outs.ids.size() - 1, static_cast<NodeId>(id));
  }
  return outs;
}

namespace {

// Per node of `g`: some of `outs` reads it.
std::vector<bool> live_nodes(const Graph& g, const std::vector<NodeId>& outs) {
  std::vector<bool> live(g.size(), false);
  for (NodeId o : outs) live[static_cast<size_t>(o)] = true;
  for (size_t id = g.size(); id-- > 0;) {
    if (!live[id]) continue;
    for (NodeId x : g.nodes()[id].inputs) live[static_cast<size_t>(x)] = true;
  }
  return live;
}

}  // namespace

// The saved values the live draft reads: (forward node, draft placeholder), by
// forward node.
std::vector<std::pair<NodeId, NodeId>> Differentiator::live_saved(const std::vector<bool>& live) const {
  std::vector<std::pair<NodeId, NodeId>> saved;
  for (size_t id = 0; id < b_.size(); ++id) {
    const Node& node = b_.nodes()[id];
    if (node.op != Op::Placeholder || !live[id]) continue;
    const DraftInput& d = draft_inputs_[static_cast<size_t>(node.index)];
    if (d.saved) saved.emplace_back(d.forward, static_cast<NodeId>(id));
  }
  std::sort(saved.begin(), saved.end());
  return saved;
}

// The backward graph: the live saved values' placeholders, the outputs' gradient
// placeholders, the scalar inputs, then the live draft nodes in order; fills joint's
// backward and saved.
Status Differentiator::build_backward(Joint& joint, const DraftOutputs& outs) {
  const std::vector<bool> live = live_nodes(b_, outs.ids);
  Graph& bw = joint.backward;
  std::vector<NodeId> map(b_.size(), -1);
  for (const auto& [fwd, draft] : live_saved(live)) {
    map[static_cast<size_t>(draft)] = add_placeholder(bw, g_.node(fwd));
    joint.saved.push_back(fwd);
  }
  std::vector<NodeId> grad_ph;
  for (NodeId o : g_.outputs()) grad_ph.push_back(add_placeholder(bw, g_.node(o)));
  const std::vector<NodeId> scalars = copy_scalar_inputs(g_, bw);
  for (size_t id = 0; id < b_.size(); ++id) {
    const Node& node = b_.nodes()[id];
    if (node.op == Op::ScalarInput) {
      map[id] = scalars[static_cast<size_t>(node.index)];
    } else if (node.op == Op::Placeholder) {
      const DraftInput& d = draft_inputs_[static_cast<size_t>(node.index)];
      if (!d.saved) map[id] = grad_ph[d.index];
    } else if (live[id]) {
      std::vector<NodeId> in;
      for (NodeId x : node.inputs) {
        FJ_CHECK(map[static_cast<size_t>(x)] >= 0, "autodiff: a live node reads an unmapped one");
        in.push_back(map[static_cast<size_t>(x)]);
      }
      map[id] = FJ_TRY(clone_node(bw, node, in));
    }
  }
  std::vector<NodeId> bw_outs;
  for (NodeId o : outs.ids) bw_outs.push_back(map[static_cast<size_t>(o)]);
  for (const auto& [k, x] : outs.renamed) FJ_TRY(bw.require_same_shape(bw.node(bw_outs[k]).sym, g_.node(x).sym));
  bw.set_outputs(std::move(bw_outs));
  return ok();
}

Expected<Joint> Differentiator::run() {
  mark_needs();
  FJ_TRY(seed_output_grads());
  FJ_TRY(backprop_all());
  Joint joint;
  joint.num_outputs = g_.outputs().size();
  for (NodeId o : g_.outputs()) joint.output_needs_grad.push_back(needs(o));
  const DraftOutputs outs = FJ_TRY(draft_outputs(joint));
  FJ_TRY(build_backward(joint, outs));
  // The forward returns the saved values after its own outputs.
  joint.forward = g_;
  std::vector<NodeId> fw_outs = g_.outputs();
  for (NodeId s : joint.saved) fw_outs.push_back(s);
  joint.forward.set_outputs(std::move(fw_outs));
  return joint;
}

}  // namespace autodiff_detail

Expected<Joint> differentiate(const Graph& g, const std::vector<bool>& requires_grad,
                              const DiffOptions& options) {
  return autodiff_detail::Differentiator(g, requires_grad, options).run();
}

}  // namespace fj::jit
