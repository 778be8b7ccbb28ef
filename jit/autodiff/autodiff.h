// Reverse-mode differentiation of a Graph: a joint forward / backward pair.
//
// Design: differentiate() walks the forward graph in reverse topological order and
// accumulates, per node, the sum of the gradient contributions of its consumers
// (an operand that was broadcast gets its contribution summed over the broadcast
// dims and reshaped to its own shape). Each op's rule is written with Graph's
// builders into the backward graph, so the backward is an ordinary Graph that any
// backend compiles. A rule that needs a forward value gets it one of two ways:
//  - recomputed: pointwise, view, creation and item nodes are cloned into the
//    backward graph from their (recomputed or saved) operands, which is cheaper
//    than storing every intermediate (a fused backward kernel recomputes them for
//    free);
//  - saved: placeholders and the expensive families (reductions, indexing,
//    matmul) become extra outputs of the forward graph and placeholders of the
//    backward graph.
// Only values some live rule reads are saved. Python numbers (constants and
// scalar inputs) are never saved: the backward graph has the forward's scalar
// inputs at the same indices (a size_scalar keeps its expression), and the caller
// passes the forward's values again. Symbolic shapes stay symbolic; the backward's
// shapes use the forward's symbols, so its caller passes the forward's Bindings
// (a symbol may appear in no backward placeholder, e.g. the reduced dim of a sum).
// An op without a rule on a path that needs a gradient is an Error, and the caller
// falls back to eager autograd.
// Two inputs besides the graph shape the result (DiffOptions): nodes recorded
// where grad mode was off carry no gradient (as eager's results there), and custom
// autograd.Functions bring their own backward as a graph fragment (CustomGrad),
// instantiated in place of the rules of the ops their forward recorded.
#pragma once

#include <cstdint>
#include <vector>

#include "jit/common.h"
#include "jit/ir/graph.h"

namespace fj::jit {

// A custom autograd.Function's backward, traced as a graph of its own and wired to
// the forward graph. Its forward's tensor outputs are `outputs`: nodes that stand
// for the Function's results (the interpreter makes each one a distinct node), whose
// gradients come from the fragment instead of their own op's rule.
struct CustomGrad {
  // Placeholders: the gradient of each of `outputs` (in order), then one per
  // `captured` entry. Scalar inputs: one per `scalars` entry. Outputs: one gradient
  // per `inputs` entry, with that node's shape.
  Graph fragment;
  std::vector<NodeId> outputs;   // forward nodes: the Function's results
  std::vector<NodeId> inputs;    // forward nodes: the input each fragment output is the grad of
  std::vector<NodeId> captured;  // forward nodes the fragment reads (saved tensors, ctx attributes)
  std::vector<NodeId> scalars;   // forward nodes (ScalarInput or Scalar) of its scalar inputs
};

struct DiffOptions {
  // Per forward node (missing entries: false): recorded under no_grad, so no gradient
  // flows into it or through it. Placeholders ignore it (requires_grad decides).
  std::vector<bool> no_grad;
  std::vector<CustomGrad> customs;
};

struct Joint {
  // The input graph with extra outputs appended: the values the backward reads
  // (saved tensors), in backward placeholder order. A saved value may be a forward
  // placeholder (the caller can keep the input tensor instead of a copy) or a node
  // that is also one of the original outputs.
  Graph forward;
  // Placeholders: the saved values (in order), then one gradient per original
  // forward output (those of non-floating outputs are never read). Scalar inputs:
  // the forward's, at the same indices. Outputs: one gradient per grad_inputs entry,
  // each with its placeholder's dtype and shape (zeros where the outputs do not
  // depend on it).
  Graph backward;
  size_t num_outputs = 0;            // the original forward outputs
  std::vector<int32_t> grad_inputs;  // placeholder indices whose grads backward returns
  // For each saved value (forward.outputs()[num_outputs + k]): the forward node.
  std::vector<NodeId> saved;
  // Per original output: a gradient flows from it to some input (else the output is
  // not differentiable: non-floating, or independent of every input that needs one).
  std::vector<bool> output_needs_grad;
  // Per grad_inputs entry: some output's autograd graph reaches the input (else eager
  // leaves its .grad None; the backward's output is zeros).
  std::vector<bool> grad_defined;
};

// requires_grad: per forward placeholder index (missing entries: false). Integer and
// bool placeholders never get a gradient, whatever they say.
Expected<Joint> differentiate(const Graph& g, const std::vector<bool>& requires_grad,
                              const DiffOptions& options = {});

// A copy of node `n` of some graph into `dst` with new operands `inputs` (ids in
// dst), built through dst's builders (so dst's shapes and checks stay its own).
// Placeholders and scalar inputs have no copy here: the caller maps them.
Expected<NodeId> clone_node(Graph& dst, const Node& n, const std::vector<NodeId>& inputs);

}  // namespace fj::jit
