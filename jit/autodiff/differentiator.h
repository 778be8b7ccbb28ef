// The differentiator behind differentiate() (jit/autodiff/autodiff.h), shared by its
// files: jit/autodiff/autodiff.cpp (values, accumulation, custom Functions, the steps
// that build the joint pair), jit/autodiff/rules.cpp (each op's gradient rule, and the
// table of them) and jit/autodiff/clone.cpp (clone_node, a table as well).
#pragma once

#include <set>
#include <utility>
#include <vector>

#include "jit/autodiff/autodiff.h"

namespace fj::jit::autodiff_detail {

// The number of ops in jit/ir/ops.def.
using ::fj::jit::kNumOps;  // jit/ir/graph.h

// A per-op table (entries with an `op` field) lists every op of jit/ir/ops.def once,
// in its order, so that it can be indexed by op and a new op cannot be forgotten.
template <class Entry, size_t N>
constexpr bool covers_ops_in_order(const Entry (&table)[N]) {
  if (N != kNumOps) return false;
  for (size_t i = 0; i < N; ++i) {
    if (table[i].op != static_cast<Op>(i)) return false;
  }
  return true;
}

// dst's scalar inputs as the same kinds (and size expressions) as src's, in index
// order; returns them by index.
std::vector<NodeId> copy_scalar_inputs(const Graph& src, Graph& dst);
// A placeholder of dst shaped as `like`.
NodeId add_placeholder(Graph& dst, const Node& like);

struct DraftInput {
  bool saved;  // a saved forward value, else the grad of forward output `index`
  NodeId forward;  // saved: the forward node
  size_t index;    // grad: the output position
};

// The draft backward graph's outputs: one gradient per forward input that needs one.
struct DraftOutputs {
  std::vector<NodeId> ids;
  // (position in ids, forward placeholder): outputs taken from before a reshape that
  // only renamed sizes, whose equality with the input's sizes the backward assumes.
  std::vector<std::pair<size_t, NodeId>> renamed;
};

class Differentiator {
 public:
  Differentiator(const Graph& g, const std::vector<bool>& requires_grad, const DiffOptions& options)
      : g_(g), requires_grad_(requires_grad), opts_(options) {}

  Expected<Joint> run();

 private:
  friend class Backprop;  // a rule's view of this (jit/autodiff/rules.cpp)

  // --- the steps of run() ---
  void mark_needs();
  Status seed_output_grads();
  Status backprop_all();
  std::vector<bool> reached_from_outputs() const;
  Expected<DraftOutputs> draft_outputs(Joint& joint);
  std::vector<std::pair<NodeId, NodeId>> live_saved(const std::vector<bool>& live) const;
  Status build_backward(Joint& joint, const DraftOutputs& outs);

  // --- forward values in the backward graph ---
  Expected<NodeId> value(NodeId id);
  NodeId save(NodeId id);

  // --- gradient accumulation ---
  Status apply_rule(NodeId id);  // the op's rule (jit/autodiff/rules.cpp)
  // The fragment of custom Function `k`, instantiated with its outputs' gradients.
  Status backprop_custom(size_t k);
  Expected<NodeId> fragment_placeholder(const CustomGrad& c, size_t p);
  Status accumulate(NodeId x, NodeId contribution);
  Expected<NodeId> unbroadcast(NodeId c, const SymShape& target);
  // A reduction's gradient (or value) with its reduced dims restored as size 1.
  Expected<NodeId> keep_dims(NodeId v, const Node& reduction);
  Expected<NodeId> zeros(const SymShape& sym, DType dtype);
  // The transpose (last two dims) of gradient `g` when g is a matmul product (or a
  // renaming of one): the product of the transposed operands in reverse order; -1
  // when g is not a product.
  Expected<NodeId> transposed_product(NodeId g);

  Expected<NodeId> pw(Op op, const std::vector<NodeId>& in) { return b_.pointwise(op, in); }
  NodeId num(double v) { return b_.scalar(v); }
  bool needs(NodeId id) const { return needs_[static_cast<size_t>(id)]; }

  const Graph& g_;
  const std::vector<bool>& requires_grad_;
  const DiffOptions& opts_;
  std::vector<int> custom_of_;     // per forward node: the custom Function it is a result of, or -1
  Graph b_;                        // the draft backward graph
  std::vector<bool> needs_;        // per forward node: a gradient may flow into it
  std::vector<NodeId> value_;      // per forward node: its value in b_, or -1
  std::vector<NodeId> grad_;       // per forward node: its gradient in b_, or -1
  std::vector<NodeId> scalar_in_;  // b_'s scalar inputs by index
  std::set<NodeId> renames_;       // b_ reshapes that only rename sizes equal by assumption
  std::vector<DraftInput> draft_inputs_;  // by b_ placeholder index
};

}  // namespace fj::jit::autodiff_detail
