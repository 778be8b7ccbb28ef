// clone_node(): a node rebuilt in another graph through that graph's builders, one
// builder call per op that is not pointwise (a table complete over jit/ir/ops.def).
#include "jit/autodiff/differentiator.h"

#include <array>
#include <iterator>

namespace fj::jit {
namespace {

using Inputs = std::vector<NodeId>;
using Rebuild = Expected<NodeId> (*)(Graph& dst, const Node& n, const Inputs& in);

Expected<NodeId> input(Graph&, const Node&, const Inputs&) {
  FJ_CHECK(false, "clone_node of an input (the caller maps inputs)");
  return Error{"clone_node of an input"};
}

Expected<NodeId> scalar(Graph& dst, const Node& n, const Inputs&) {
  if (n.scalar_kind == ScalarKind::Int) return dst.scalar_int(n.int_value);
  return dst.scalar(n.scalar_kind == ScalarKind::Bool ? static_cast<double>(n.int_value) : n.scalar,
                    n.scalar_kind);
}

Expected<NodeId> pointwise(Graph& dst, const Node& n, const Inputs& in) { return dst.pointwise(n.op, in); }
Expected<NodeId> cast(Graph& dst, const Node& n, const Inputs& in) { return dst.cast(in[0], n.dtype); }

// Sum, Prod: the result dtype is the accumulation type asked for (or its default).
Expected<NodeId> reduce_to_dtype(Graph& dst, const Node& n, const Inputs& in) {
  return dst.reduce(n.op, in[0], n.dims, n.keepdim, n.dtype);
}
Expected<NodeId> reduce(Graph& dst, const Node& n, const Inputs& in) {
  return dst.reduce(n.op, in[0], n.dims, n.keepdim);
}
Expected<NodeId> cumsum(Graph& dst, const Node& n, const Inputs& in) {
  return dst.cumsum(in[0], n.dims[0], n.dtype);
}

Expected<NodeId> permute(Graph& dst, const Node& n, const Inputs& in) { return dst.permute(in[0], n.dims); }
Expected<NodeId> reshape(Graph& dst, const Node& n, const Inputs& in) { return dst.reshape(in[0], n.sym); }
Expected<NodeId> expand(Graph& dst, const Node& n, const Inputs& in) { return dst.expand(in[0], n.sym); }
Expected<NodeId> slice(Graph& dst, const Node& n, const Inputs& in) {
  const size_t k = static_cast<size_t>(n.dims[0]);
  return dst.slice(in[0], n.dims[0], n.args[0], n.sym[k], *n.args[1].as_int());
}
Expected<NodeId> select(Graph& dst, const Node& n, const Inputs& in) {
  return dst.select(in[0], n.dims[0], n.args[0]);
}
Expected<NodeId> flip(Graph& dst, const Node& n, const Inputs& in) { return dst.flip(in[0], n.dims); }
Expected<NodeId> cat(Graph& dst, const Node& n, const Inputs& in) { return dst.cat(in, n.dims[0]); }
Expected<NodeId> slice_scatter(Graph& dst, const Node& n, const Inputs& in) {
  return dst.slice_scatter(in[0], in[1], n.dims[0], n.args[0], *n.args[1].as_int());
}

Expected<NodeId> index_select(Graph& dst, const Node& n, const Inputs& in) {
  return dst.index_select(in[0], n.dims[0], in[1], n.int_value != 0);
}
Expected<NodeId> gather(Graph& dst, const Node& n, const Inputs& in) { return dst.gather(in[0], n.dims[0], in[1]); }

Expected<NodeId> full(Graph& dst, const Node& n, const Inputs& in) { return dst.full(n.sym, in[0], n.dtype); }
Expected<NodeId> iota(Graph& dst, const Node& n, const Inputs&) { return dst.iota(n.sym, n.dims[0]); }
Expected<NodeId> item(Graph& dst, const Node& n, const Inputs& in) { return dst.item(in[0], n.scalar_kind); }
Expected<NodeId> matmul(Graph& dst, const Node& n, const Inputs& in) { return dst.matmul(in[0], in[1]); }
Expected<NodeId> extern_call(Graph& dst, const Node& n, const Inputs& in) {
  return dst.extern_call(n.extern_fn, in, n.dtype, n.sym);
}

struct RebuildEntry {
  Op op;
  Rebuild rebuild;
};

// The builder call of every op that is not pointwise, in jit/ir/ops.def's order (a
// pointwise op is rebuilt by Graph::pointwise from its op alone): an op of another
// family added there without an entry here fails to compile (the static_assert below).
constexpr RebuildEntry kRebuild[] = {
    {Op::Placeholder, input},
    {Op::ScalarInput, input},
    {Op::Scalar, scalar},
    // arithmetic
    // math
    // activations
    // rounding
    // clamping and selection
    // comparisons, predicates, logic and bits
    {Op::Cast, cast},
    // reductions
    {Op::Sum, reduce_to_dtype},
    {Op::Prod, reduce_to_dtype},
    {Op::Amax, reduce},
    {Op::Amin, reduce},
    {Op::ArgMax, reduce},
    {Op::ArgMin, reduce},
    {Op::Any, reduce},
    {Op::All, reduce},
    {Op::CumSum, cumsum},
    // views
    {Op::Permute, permute},
    {Op::Reshape, reshape},
    {Op::Expand, expand},
    {Op::Slice, slice},
    {Op::Select, select},
    {Op::Flip, flip},
    {Op::Cat, cat},
    {Op::SliceScatter, slice_scatter},
    // indexing
    {Op::IndexSelect, index_select},
    {Op::Gather, gather},
    // creation and Python numbers
    {Op::Full, full},
    {Op::Iota, iota},
    {Op::ItemInt, item},
    {Op::ItemFloat, item},
    {Op::ItemBool, item},
    // extern
    {Op::Matmul, matmul},
    {Op::ExternCall, extern_call},
};

constexpr bool kPointwise[] = {
#define FJ_OP(name, aten, family, operands, rule) Family::family == Family::Pointwise && Op::name != Op::Cast,
#include "jit/ir/ops.def"
#undef FJ_OP
};

// The table lists exactly the ops that are not pointwise, in order.
constexpr bool covers_other_ops() {
  size_t k = 0;
  for (size_t i = 0; i < std::size(kPointwise); ++i) {
    if (kPointwise[i]) continue;
    if (k >= std::size(kRebuild) || kRebuild[k].op != static_cast<Op>(i)) return false;
    ++k;
  }
  return k == std::size(kRebuild);
}
static_assert(covers_other_ops(), "clone_node needs one entry per non-pointwise op of jit/ir/ops.def, in its order");

// Per op: its entry in kRebuild, or -1 for a pointwise op.
constexpr std::array<int16_t, std::size(kPointwise)> kRebuildIndex = [] {
  std::array<int16_t, std::size(kPointwise)> index{};
  int16_t k = 0;
  for (size_t i = 0; i < index.size(); ++i) index[i] = kPointwise[i] ? -1 : k++;
  return index;
}();

}  // namespace

Expected<NodeId> clone_node(Graph& dst, const Node& n, const std::vector<NodeId>& in) {
  const int16_t k = kRebuildIndex[static_cast<size_t>(n.op)];
  return k < 0 ? pointwise(dst, n, in) : kRebuild[k].rebuild(dst, n, in);
}

}  // namespace fj::jit
