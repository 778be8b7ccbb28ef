// Schedule -> LLVM IR (jit/codegen/schedule.h): a KernelEmitter per kernel
// (jit/codegen/kernel_emitter.h); views' index remapping is defined here.
#include "jit/codegen/schedule.h"

#include "jit/codegen/kernel_emitter.h"

namespace fj::jit {
namespace lower {

Value* KernelEmitter::view(const Node& n, const Index& idx) {
  const NodeId in_id = n.inputs.empty() ? -1 : n.inputs[0];
  const Node& in = g_.node(in_id);
  Index in_idx;
  switch (n.op) {
    case Op::Permute:
      in_idx.resize(in.rank());
      for (size_t d = 0; d < idx.size(); ++d) in_idx[static_cast<size_t>(n.dims[d])] = idx[d];
      break;
    case Op::Expand: in_idx = broadcast(idx, in); break;
    case Op::Slice: {
      in_idx = idx;
      const size_t k = static_cast<size_t>(n.dims[0]);
      in_idx[k] = add(size_ix(n.args[0]), mul(idx[k], size_ix(n.args[1])));
      break;
    }
    case Op::Select:
      in_idx = idx;
      in_idx.insert(in_idx.begin() + n.dims[0], size_ix(n.args[0]));
      break;
    case Op::Flip:
      in_idx = idx;
      for (int64_t d : n.dims) {
        const size_t k = static_cast<size_t>(d);
        in_idx[k] = sub(sub(size_ix(in.sym[k]), Ix{b_.getInt64(1), 0}), idx[k]);
      }
      break;
    case Op::Reshape: in_idx = reshape_index(in.sym, n.sym, idx); break;
    case Op::Cat: return cat(n, idx);
    case Op::SliceScatter: return slice_scatter(n, idx);
    default: FJ_CHECK(false, "not a view op");
  }
  return value(in_id, in_idx);
}

Ix KernelEmitter::product(const SymShape& sizes, size_t from, size_t to) {
  SymExpr p = SymExpr::integer(1);
  for (size_t i = from; i < to; ++i) p = fj::jit::mul(p, sizes[i]);
  return size_ix(p);
}

// The operand index of a reshape: dims are grouped where the element counts of
// leading dims provably agree; within a group the result index is linearized
// and unraveled over the operand's dims (one operand dim: affine, no division).
Index KernelEmitter::reshape_index(const SymShape& in, const SymShape& out, const Index& idx) {
  Index in_idx(in.size(), zero());
  size_t i = 0, j = 0;
  while (i < in.size() || j < out.size()) {
    if (j < out.size() && is_const(out[j], 1)) { ++j; continue; }
    if (i < in.size() && is_const(in[i], 1)) { ++i; continue; }
    size_t a = in.size(), b = out.size();
    if (i < in.size() && j < out.size()) {
      size_t best = in.size() + out.size() + 1;
      for (size_t ai = i + 1; ai <= in.size(); ++ai) {
        for (size_t bj = j + 1; bj <= out.size(); ++bj) {
          SymExpr pi = SymExpr::integer(1), po = SymExpr::integer(1);
          for (size_t t = i; t < ai; ++t) pi = fj::jit::mul(pi, in[t]);
          for (size_t t = j; t < bj; ++t) po = fj::jit::mul(po, out[t]);
          if (pi.same(po) && ai + bj < best) {
            best = ai + bj;
            a = ai;
            b = bj;
          }
        }
      }
    }
    Ix lin = zero();
    for (size_t q = j; q < b; ++q) {
      if (is_const(out[q], 1)) continue;
      lin = add(lin, mul(idx[q], product(out, q + 1, b)));
    }
    for (size_t p = i; p < a; ++p) {
      if (is_const(in[p], 1)) continue;
      Ix v = lin;
      if (p + 1 < a) v = div(v, product(in, p + 1, a));
      if (p > i) v = rem(v, size_ix(in[p]));
      in_idx[p] = v;
    }
    i = a;
    j = b;
  }
  return in_idx;
}

Value* KernelEmitter::cat(const Node& n, const Index& idx) {
  const size_t k = static_cast<size_t>(n.dims[0]);
  std::vector<std::pair<Ix, Value*>> parts;  // (offset, value)
  SymExpr offset = SymExpr::integer(0);
  for (NodeId in_id : n.inputs) {
    const Node& in = g_.node(in_id);
    const SymExpr size = in.sym[k];
    if (is_const(size, 0)) continue;
    Index in_idx = idx;
    Ix local = sub(idx[k], size_ix(offset));
    Value* clamped = at(local.mask, [&] {
      Value* c = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smax, local.v, b_.getInt64(0));
      return b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, c, b_.CreateSub(size_value(size), b_.getInt64(1)));
    });
    in_idx[k] = Ix{clamped, local.mask};
    parts.emplace_back(size_ix(offset), value(in_id, in_idx));
    offset = fj::jit::add(offset, size);
  }
  // Every part is empty along k: so is the result, whose loop never runs this code.
  if (parts.empty()) return llvm::Constant::getNullValue(el_.reg_type(n.dtype));
  Value* v = parts.back().second;
  for (size_t p = parts.size() - 1; p-- > 0;) {
    v = b_.CreateSelect(b_.CreateICmpSLT(idx[k].v, parts[p + 1].first.v), parts[p].second, v);
  }
  return v;
}

// The base's element, or the source's where idx[dim] falls on the slice
// start, start + step, ... (both are read; the position in the source is clamped
// into range so that the read is valid either way).
Value* KernelEmitter::slice_scatter(const Node& n, const Index& idx) {
  const size_t k = static_cast<size_t>(n.dims[0]);
  const SymExpr& len = g_.node(n.inputs[1]).sym[k];
  const int64_t step = *n.args[1].as_int();
  const Ix rel = sub(idx[k], size_ix(n.args[0]));
  if (auto* c = llvm::dyn_cast<llvm::ConstantInt>(rel.v)) {
    // A position known here (a row written by an unrolled loop, read by the next
    // row's update): only the side it falls on is emitted, so that chains of
    // scatters stay linear in size.
    const int64_t r = c->getSExtValue();
    const auto known_len = len.as_int();
    const bool outside = r < 0 || r % step != 0 || (known_len && r >= *known_len * step);
    if (outside) return value(n.inputs[0], idx);
    if (known_len) {
      Index src_idx = idx;
      src_idx[k] = Ix{b_.getInt64(r / step), 0};
      return value(n.inputs[1], src_idx);
    }
  }
  Value* pos = at(rel.mask, [&] {
    Value* q = step == 1 ? rel.v : b_.CreateSDiv(rel.v, b_.getInt64(step));
    q = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smax, q, b_.getInt64(0));
    return b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, q, b_.CreateSub(size_value(len), b_.getInt64(1)));
  });
  Value* inside = at(rel.mask, [&] {
    Value* end = b_.CreateMul(size_value(len), b_.getInt64(step));
    Value* c = b_.CreateAnd(b_.CreateICmpSGE(rel.v, b_.getInt64(0)), b_.CreateICmpSLT(rel.v, end));
    if (step != 1) c = b_.CreateAnd(c, b_.CreateICmpEQ(b_.CreateSRem(rel.v, b_.getInt64(step)), b_.getInt64(0)));
    return c;
  });
  Index src_idx = idx;
  src_idx[k] = Ix{pos, rel.mask};
  Value* from_src = value(n.inputs[1], src_idx);
  Value* from_base = value(n.inputs[0], idx);
  return b_.CreateSelect(inside, from_src, from_base);
}

}  // namespace lower

LowerOutcome lower_schedule(const Graph& graph, Schedule& schedule, const std::vector<llvm::Module*>& modules,
                            const LowerOptions& options) {
  FJ_CHECK(modules.size() == 1 || modules.size() == schedule.kernels.size(),
           "lower_schedule: one module, or one per kernel");
  schedule.dim_exprs.clear();
  std::vector<int> reduction_kernel(graph.size(), -1);
  for (size_t k = 0; k < schedule.kernels.size(); ++k) {
    llvm::Module& m = *modules[modules.size() == 1 ? 0 : k];
    const NodeId again = lower::KernelEmitter(graph, schedule, k, m, options, reduction_kernel).emit();
    if (again >= 0) return LowerOutcome{again};
  }
  return LowerOutcome{};
}

}  // namespace fj::jit
