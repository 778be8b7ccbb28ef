// Strides and storage offsets as eager has them (.stride(), .is_contiguous(),
// .storage_offset()): a tensor with the standard layout of its sizes (an input guarded
// contiguous, or computed from such) followed through the views made of it. Each
// value is symbolic in the sizes, so a new size recompiles nothing.
#include "interp/trace/tracer.h"

namespace fj::interp {

using jit::NodeId;
using jit::SymExpr;

namespace {

bool is_one(const SymExpr& e) { return e.is_constant() && e.as_int() && *e.as_int() == 1; }

// The contiguous strides of `sizes` (a dim of size 0 or 1 takes the product after it,
// as torch's do).
std::vector<SymExpr> standard_strides(const jit::SymShape& sizes) {
  std::vector<SymExpr> out(sizes.size());
  SymExpr step = SymExpr::integer(1);
  for (size_t k = sizes.size(); k-- > 0;) {
    out[k] = step;
    const bool at_most_one = sizes[k].is_constant() && sizes[k].as_int() && *sizes[k].as_int() <= 1;
    if (!at_most_one) step = jit::mul(step, sizes[k]);
  }
  return out;
}

bool same_exprs(const std::vector<SymExpr>& a, const std::vector<SymExpr>& b) {
  if (a.size() != b.size()) return false;
  for (size_t k = 0; k < a.size(); ++k) {
    if (!a[k].same(b[k])) return false;
  }
  return true;
}

}  // namespace

Status Tracer::eager_layout(NodeId n, const std::string& what, TensorLayout* out) {
  const jit::Node& node = graph_.node(n);
  auto parent = view_parent_.find(n);
  if (parent == view_parent_.end() || node.op == jit::Op::Placeholder) {
    FJ_TRY(require_standard_strides(n, /*allow_view=*/true, what));
    out->strides = standard_strides(node.sym);
    out->offset = SymExpr::integer(0);
    return ok();
  }
  FJ_TRY(eager_layout(parent->second, what, out));
  const jit::Node& base = graph_.node(parent->second);
  std::vector<SymExpr>& s = out->strides;
  switch (node.op) {
    case jit::Op::Permute: {
      std::vector<SymExpr> t;
      for (int64_t d : node.dims) t.push_back(s[static_cast<size_t>(d)]);
      s = std::move(t);
      return ok();
    }
    case jit::Op::Slice: {  // args: start, step
      const auto d = static_cast<size_t>(node.dims[0]);
      out->offset = jit::add(out->offset, jit::mul(node.args[0], s[d]));
      s[d] = jit::mul(s[d], node.args[1]);
      return ok();
    }
    case jit::Op::Select: {  // args: the index, counted from 0
      const auto d = static_cast<size_t>(node.dims[0]);
      out->offset = jit::add(out->offset, jit::mul(node.args[0], s[d]));
      s.erase(s.begin() + static_cast<std::ptrdiff_t>(d));
      return ok();
    }
    case jit::Op::Expand: {  // new leading dims and widened size-1 dims step 0
      const size_t lead = node.rank() - base.rank();
      std::vector<SymExpr> t(lead, SymExpr::integer(0));
      for (size_t k = 0; k < base.rank(); ++k) {
        t.push_back(is_one(base.sym[k]) && !is_one(node.sym[lead + k]) ? SymExpr::integer(0) : s[k]);
      }
      s = std::move(t);
      return ok();
    }
    case jit::Op::Reshape:  // a view of the same sizes keeps the strides; a contiguous base takes the new sizes'
      if (same_exprs(node.sym, base.sym)) return ok();
      if (same_exprs(s, standard_strides(base.sym))) {
        s = standard_strides(node.sym);
        return ok();
      }
      return unsupported(what + " of a reshaped non-contiguous view (not supported yet)");
    default:
      return unsupported(what + " of a view made by " + std::string(jit::op_name(node.op)) + " (not supported yet)");
  }
}

// torch's rule: every dim of size other than 1 steps by the product of the sizes after
// it (an empty tensor is contiguous). Sizes are symbols: what it needs is guarded.
Status Tracer::layout_is_contiguous(NodeId n, const TensorLayout& layout, bool* out) {
  const jit::SymShape sizes = graph_.node(n).sym;
  for (const SymExpr& e : sizes) {
    if (e.is_constant() && e.as_int() && *e.as_int() == 0) {
      *out = true;
      return ok();
    }
  }
  SymExpr expected = SymExpr::integer(1);
  for (size_t k = sizes.size(); k-- > 0;) {
    if (is_one(sizes[k])) continue;
    bool equal = layout.strides[k].same(expected);
    if (!equal) FJ_TRY(guard_truth(jit::eq(layout.strides[k], expected), &equal));
    if (!equal) {
      *out = false;
      return ok();
    }
    expected = jit::mul(expected, sizes[k]);
  }
  *out = true;
  return ok();
}

// torch's rule for view(): walking from the last dim, each run of x's dims that are
// contiguous with each other must be covered exactly by a run of new dims. Every
// comparison of sizes is a guard, as eager's decision depends on them.
Status Tracer::view_exists(const jit::SymShape& from, const std::vector<SymExpr>& strides, const jit::SymShape& to,
                           bool* out) {
  const auto holds = [&](const SymExpr& cond, bool* b) {
    if (auto known = cond.as_bool()) {
      *b = *known;
      return ok();
    }
    return guard_truth(cond, b);
  };
  for (const SymExpr& e : from) {
    if (e.is_constant() && e.as_int() && *e.as_int() == 0) {
      *out = true;  // an empty tensor views as any shape of its numel
      return ok();
    }
  }
  *out = false;
  auto view_d = static_cast<int64_t>(to.size()) - 1;
  SymExpr chunk_stride = strides.empty() ? SymExpr::integer(1) : strides.back();
  SymExpr tensor_numel = SymExpr::integer(1), view_numel = SymExpr::integer(1);
  for (auto d = static_cast<int64_t>(from.size()) - 1; d >= 0; --d) {
    tensor_numel = jit::mul(tensor_numel, from[static_cast<size_t>(d)]);
    bool chunk_ends = d == 0;
    if (!chunk_ends) {
      const auto p = static_cast<size_t>(d - 1);
      FJ_TRY(holds(jit::logical_and(jit::ne(from[p], SymExpr::integer(1)),
                                    jit::ne(strides[p], jit::mul(tensor_numel, chunk_stride))), &chunk_ends));
    }
    if (!chunk_ends) continue;
    while (view_d >= 0) {
      bool more = false;
      FJ_TRY(holds(jit::logical_or(jit::lt(view_numel, tensor_numel),
                                   jit::eq(to[static_cast<size_t>(view_d)], SymExpr::integer(1))), &more));
      if (!more) break;
      view_numel = jit::mul(view_numel, to[static_cast<size_t>(view_d)]);
      --view_d;
    }
    bool covered = false;
    FJ_TRY(holds(jit::eq(view_numel, tensor_numel), &covered));
    if (!covered) return ok();
    if (d > 0) {
      chunk_stride = strides[static_cast<size_t>(d - 1)];
      tensor_numel = SymExpr::integer(1);
      view_numel = SymExpr::integer(1);
    }
  }
  *out = view_d == -1;
  return ok();
}

}  // namespace fj::interp
