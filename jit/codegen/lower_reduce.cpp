// Reductions of a KernelEmitter (jit/codegen/kernel_emitter.h): accumulator loops placed at
// the level of their index, a cumulative sum's running total, and reduction
// operands kept in the output row (softmax's exp).
#include "jit/codegen/kernel_emitter.h"

#include <algorithm>
#include <cmath>

namespace fj::jit::lower {

// Softmax's exp(x - max) feeds both the row sum and the output. Rather than
// computing it twice, the sum's loop also writes it into the output buffer, and
// the output loop reads it back, each element just before overwriting it. This
// applies (CPU, one store per kernel) to a reduction inside the store's pointwise
// expression whose operand is costly to compute, has the store's shape and dtype,
// and is read by the store at the store's own index; the reduced dims must be
// loops this thread runs in whole. The reduction is emitted here, before the
// store's value, so that the stash exists when that value reads the operand.
void KernelEmitter::stash_reductions(size_t store, const Index& idx) {
  const KernelSpec::Store& st = k_.stores[store];
  const Node& out = g_.node(st.node);
  if (options_.target != Target::Cpu || k_.stores.size() != 1 || !same_shape(out.sym, k_.shape)) return;
  std::set<NodeId> same_index;  // nodes the store reads at its own index
  std::vector<std::pair<NodeId, Index>> reductions;
  std::set<std::pair<NodeId, bool>> seen;
  std::function<void(NodeId, const Index&, bool)> walk = [&](NodeId id, const Index& at, bool same) {
    if (!seen.insert({id, same}).second) return;
    if (same) same_index.insert(id);
    const Node& n = g_.node(id);
    const int32_t buf = s_.buffer_of[static_cast<size_t>(id)];
    if (n.op == Op::Placeholder || (buf >= 0 && id != st.node)) return;
    if (op_family(n.op) == Family::Reduction) {
      reductions.emplace_back(id, at);
      return;
    }
    if (op_family(n.op) != Family::Pointwise) return;
    for (NodeId in : n.inputs) {
      const Node& inn = g_.node(in);
      if (is_python_scalar(inn)) continue;
      walk(in, broadcast(at, inn), same && same_shape(inn.sym, out.sym));
    }
  };
  walk(st.node, idx, true);
  for (const auto& [r_id, r_idx] : reductions) {
    const Node& r = g_.node(r_id);
    const NodeId x = r.inputs[0];
    const Node& xn = g_.node(x);
    if (r.op == Op::CumSum || !same_index.count(x) || xn.dtype != out.dtype ||
        s_.buffer_of[static_cast<size_t>(x)] >= 0 || !costly(x) ||
        std::binary_search(r.dims.begin(), r.dims.end(), static_cast<int64_t>(k_.split_dim))) {
      continue;
    }
    stash_request_ = {x, static_cast<int32_t>(store)};
    value(r_id, r_idx);
    stash_request_ = {-1, -1};
  }
}

// Whether an operand computes a transcendental function (else recomputing it is
// cheaper than a store and a load).
bool KernelEmitter::costly(NodeId id) const {
  const Node& n = g_.node(id);
  if (op_family(n.op) != Family::Pointwise) return false;
  if (op_dtype_rule(n.op) == DTypeRule::FloatMath || op_dtype_rule(n.op) == DTypeRule::FloatOnly ||
      n.op == Op::Pow || n.op == Op::PowScalar) {
    return true;
  }
  for (NodeId in : n.inputs) {
    if (s_.buffer_of[static_cast<size_t>(in)] < 0 && costly(in)) return true;
  }
  return false;
}

Value* KernelEmitter::stashed(NodeId id, const Index& idx) {
  auto it = stash_.find(id);
  if (it == stash_.end()) return nullptr;
  const Stash& st = it->second;
  for (size_t d = 0; d < idx.size(); ++d) {
    if (st.kept[d] != nullptr && st.kept[d] != idx[d].v) return nullptr;
  }
  const int32_t buf = k_.stores[static_cast<size_t>(st.store)].buffer;
  // No alias metadata: this load reads what the kernel itself stored.
  auto* l = b_.CreateLoad(el_.llvm_type(g_.node(id).dtype), address(buf, idx));
  return el_.from_storage(g_.node(id).dtype, l);
}

// Runs at the level of its index (value()). It is computed once per iteration of
// the loops it sits in only when its index depends on every one of them; at
// level 0 of a kernel split across threads each chunk would compute it; and a
// second kernel reading it would compute it again. In those cases it gets a
// buffer of its own instead.
Value* KernelEmitter::reduction(NodeId id, const Index& idx) {
  // Per lane of a tile (lower_lanes.cpp): its own rules for where it runs.
  if (lane_reductions_.count(id)) {
    int& owner = reduction_kernel_[static_cast<size_t>(id)];
    if (owner < 0 || owner == kernel_) {
      if (Value* v = lane_reduction(id, idx)) {
        owner = kernel_;
        return v;
      }
    }
  }
  const uint64_t mask = mask_of(idx);
  const size_t level = level_of(mask);
  for (size_t f = 1; f <= level; ++f) {
    if (!(mask & (uint64_t{1} << f))) return rematerialize(id);
  }
  if (level == 0 && k_.split_dim >= 0) return rematerialize(id);
  int& owner = reduction_kernel_[static_cast<size_t>(id)];
  if (owner >= 0 && owner != kernel_) return rematerialize(id);
  owner = kernel_;
  return emit_reduction(g_.node(id), idx);
}

// Whether a cumulative sum read at `idx` can carry its running total from one
// iteration to the next: its position along the scanned dim is the loop variable
// of the kernel's innermost loop, which runs that dim whole and in order.
bool KernelEmitter::running_scan(const Node& r, const Index& idx) const {
  const auto ds = static_cast<size_t>(r.dims[0]);
  size_t kd = 0;
  while (kd < loop_var_.size() && (loop_var_[kd] == nullptr || loop_var_[kd] != idx[ds].v)) ++kd;
  if (kd == loop_var_.size() || static_cast<int>(kd) == k_.split_dim) return false;
  for (size_t e = kd + 1; e < k_.shape.size(); ++e) {
    if (!is_const(k_.shape[e], 1)) return false;
  }
  for (size_t d = 0; d < idx.size(); ++d) {
    if (d != ds && idx[d].v == idx[ds].v) return false;
  }
  return true;
}

// running total = (position == 0 ? 0 : running total) + x[position], in `slot`
// (null: a new one), which lives across the iterations of the scanned loop.
Value* KernelEmitter::emit_running_scan(const Node& r, const Index& idx, Value* slot) {
  const Node& x = g_.node(r.inputs[0]);
  const DType c = r.compute;
  llvm::Type* ty = el_.reg_type(c);
  if (slot == nullptr) slot = llvm::IRBuilder<>(&fn_->getEntryBlock(), fn_->getEntryBlock().begin()).CreateAlloca(ty);
  const bool fp = is_floating(c);
  Value* zero_v = fp ? el_.fconst(ty, 0) : llvm::ConstantInt::get(ty, 0);
  Value* first = b_.CreateICmpEQ(idx[static_cast<size_t>(r.dims[0])].v, b_.getInt64(0));
  Value* before = b_.CreateSelect(first, zero_v, b_.CreateLoad(ty, slot));
  Value* v = el_.convert(value(r.inputs[0], idx), x.dtype, c);
  Value* total = fp ? b_.CreateFAdd(before, v) : b_.CreateAdd(before, v);
  b_.CreateStore(total, slot);
  return el_.convert(total, c, r.dtype);
}

// The value a reduction starts from, in its compute type's register type.
Value* KernelEmitter::reduction_identity(const Node& r) {
  const DType c = r.compute;
  llvm::Type* ty = el_.reg_type(c);
  if (c == DType::Bool) return b_.getInt1(r.op == Op::All || r.op == Op::Amin);
  const bool fp = is_floating(c);
  const unsigned bits = fp ? 0 : ty->getIntegerBitWidth();
  const bool is_unsigned = ElementEmitter::is_unsigned(c);
  switch (r.op) {
    case Op::Sum: case Op::CumSum: case Op::Any: return fp ? el_.fconst(ty, 0) : llvm::ConstantInt::get(ty, 0);
    case Op::Prod: case Op::All: return fp ? el_.fconst(ty, 1) : llvm::ConstantInt::get(ty, 1);
    case Op::Amax: case Op::ArgMax:
      return fp ? el_.fconst(ty, -INFINITY)
                : llvm::ConstantInt::get(ctx_, is_unsigned ? llvm::APInt::getMinValue(bits) : llvm::APInt::getSignedMinValue(bits));
    case Op::Amin: case Op::ArgMin:
      return fp ? el_.fconst(ty, INFINITY)
                : llvm::ConstantInt::get(ctx_, is_unsigned ? llvm::APInt::getMaxValue(bits) : llvm::APInt::getSignedMaxValue(bits));
    default: FJ_CHECK(false, "not a reduction");
  }
  return nullptr;
}

Value* KernelEmitter::emit_reduction(const Node& r, const Index& idx) {
  if (r.op == Op::CumSum && lane_scan(r, idx)) return emit_lane_scan(r, idx);
  if (r.op == Op::CumSum && running_scan(r, idx)) return emit_running_scan(r, idx);
  const NodeId x_id = r.inputs[0];
  const StashRequest stash = stash_request_.node == x_id ? stash_request_ : StashRequest{-1, -1};
  stash_request_ = {-1, -1};
  const Node& x = g_.node(x_id);
  const DType c = r.compute;
  const bool fp = is_floating(c);
  llvm::Type* ty = el_.reg_type(c);
  auto slot = [&](llvm::Type* t) {
    llvm::IRBuilder<> e(&fn_->getEntryBlock(), fn_->getEntryBlock().begin());
    return e.CreateAlloca(t);
  };
  Value* acc = slot(ty);
  Value* pos = nullptr;  // ArgMax / ArgMin: the position of the best so far
  Value* init = reduction_identity(r);
  b_.CreateStore(init, acc);
  const bool arg = r.op == Op::ArgMax || r.op == Op::ArgMin;
  if (arg) {
    pos = slot(b_.getInt64Ty());
    b_.CreateStore(b_.getInt64(0), pos);
  }
  // The operand's index: kept dims from idx, reduced dims from the loops.
  Index full(x.rank());
  std::vector<size_t> reduced;
  size_t p = 0;
  Value* scan_end = nullptr;  // CumSum: the loop runs up to the result's own position
  for (size_t d = 0; d < x.rank(); ++d) {
    const bool red = std::binary_search(r.dims.begin(), r.dims.end(), static_cast<int64_t>(d));
    if (!red) {
      full[d] = idx[p++];
      continue;
    }
    if (r.op == Op::CumSum) {
      scan_end = b_.CreateAdd(idx[p++].v, b_.getInt64(1));
      full[d] = zero();
      reduced.push_back(d);
      continue;
    }
    if (r.keepdim) ++p;
    full[d] = zero();
    if (!is_const(x.sym[d], 1)) reduced.push_back(d);
  }
  // The loops over the reduced dims: body(raw operand value, its position in them).
  auto loops = [&](bool positions, const std::function<void(Value*, Value*)>& body) {
    std::function<void(size_t, Ix)> level = [&](size_t q, Ix lin) {
      if (q == reduced.size()) return body(value(x_id, full), lin.v);
      const size_t d = reduced[q];
      emit_loop(b_.getInt64(0), scan_end != nullptr ? scan_end : size_value(x.sym[d]), [&](Ix i) {
        full[d] = i;
        level(q + 1, positions ? add(mul(lin, size_ix(x.sym[d])), i) : lin);
      }, contig_);
    };
    level(0, zero());
  };
  loops(arg, [&](Value* raw, Value* lin) {
    if (stash.store >= 0) {
      const KernelSpec::Store& st = k_.stores[static_cast<size_t>(stash.store)];
      auto* s = b_.CreateStore(el_.to_storage(x.dtype, raw), address(st.buffer, full));
      s->setMetadata(llvm::LLVMContext::MD_alias_scope, store_scope_[static_cast<size_t>(stash.store)]);
      s->setMetadata(llvm::LLVMContext::MD_noalias, store_noalias_[static_cast<size_t>(stash.store)]);
    }
    combine(r.op, fp, c, acc, pos, el_.convert(raw, x.dtype, c), lin);
  });
  if (fp && (r.op == Op::Amax || r.op == Op::Amin)) {
    // llvm.maximum orders -0.0 below 0.0, where eager's scalar loop keeps the first of
    // equal values: a zero result takes the sign of the operand's first zero. Found
    // by a second pass that runs only then, so that the common case keeps its
    // vectorized max; the least key 2 * position + (1 for +0.0) is an integer min,
    // which vectorizes too.
    auto* scan = llvm::BasicBlock::Create(ctx_, "zero.sign", fn_);
    auto* done = llvm::BasicBlock::Create(ctx_, "zero.sign.done", fn_);
    // When the reduction is a frame's hoist code, the second pass is too (emit_loop
    // hoists what its body reads into that frame's hoist block).
    size_t owner = frames_.size();  // an index: the loops below grow frames_
    for (size_t f = 0; f < frames_.size(); ++f) {
      if (frames_[f].hoist == b_.GetInsertBlock()) owner = f;
    }
    b_.CreateCondBr(b_.CreateFCmpOEQ(b_.CreateLoad(ty, acc), el_.fconst(ty, 0.0)), scan, done);
    b_.SetInsertPoint(scan);
    if (owner < frames_.size()) frames_[owner].hoist = scan;
    Value* key = slot(b_.getInt64Ty());
    b_.CreateStore(b_.getInt64(INT64_MAX), key);
    loops(true, [&](Value* raw, Value* lin) {
      Value* v = el_.convert(raw, x.dtype, c);
      llvm::Type* bits = b_.getIntNTy(ty->getPrimitiveSizeInBits());
      Value* plus = b_.CreateICmpSGE(b_.CreateBitCast(v, bits), llvm::ConstantInt::get(bits, 0));
      Value* mine = b_.CreateOr(b_.CreateShl(lin, 1), b_.CreateZExt(plus, b_.getInt64Ty()));
      mine = b_.CreateSelect(b_.CreateFCmpOEQ(v, el_.fconst(ty, 0.0)), mine, b_.getInt64(INT64_MAX));
      b_.CreateStore(b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, b_.CreateLoad(b_.getInt64Ty(), key), mine), key);
    });
    Value* plus = b_.CreateTrunc(b_.CreateLoad(b_.getInt64Ty(), key), b_.getInt1Ty());
    b_.CreateStore(b_.CreateSelect(plus, el_.fconst(ty, 0.0), el_.fconst(ty, -0.0)), acc);
    b_.CreateBr(done);
    b_.SetInsertPoint(done);
    if (owner < frames_.size()) frames_[owner].hoist = done;
  }
  if (stash.store >= 0) {
    std::vector<Value*> kept(x.rank(), nullptr);
    for (size_t d = 0; d < x.rank(); ++d) {
      if (!std::binary_search(r.dims.begin(), r.dims.end(), static_cast<int64_t>(d))) kept[d] = full[d].v;
    }
    stash_[x_id] = Stash{stash.store, std::move(kept)};
  }
  if (arg) return b_.CreateLoad(b_.getInt64Ty(), pos);
  return el_.convert(b_.CreateLoad(ty, acc), c, r.dtype);
}

void KernelEmitter::combine(Op op, bool fp, DType c, Value* acc, Value* pos, Value* v, Value* lin, bool keep_ties) {
  llvm::Type* ty = el_.reg_type(c);
  Value* a = b_.CreateLoad(ty, acc);
  const bool un = ElementEmitter::is_unsigned(c);
  llvm::IRBuilderBase::FastMathFlagGuard guard(b_);
  llvm::FastMathFlags fmf;
  fmf.setAllowReassoc();
  Value* out = nullptr;
  switch (op) {
    case Op::CumSum:  // in order, as eager's sequential kernel
      out = fp ? b_.CreateFAdd(a, v) : b_.CreateAdd(a, v);
      break;
    case Op::Sum:
      if (fp) b_.setFastMathFlags(fmf);
      out = fp ? b_.CreateFAdd(a, v) : b_.CreateAdd(a, v);
      break;
    case Op::Prod:
      if (fp) b_.setFastMathFlags(fmf);
      out = fp ? b_.CreateFMul(a, v) : c == DType::Bool ? b_.CreateAnd(a, v) : b_.CreateMul(a, v);
      break;
    case Op::Amax:
    case Op::Amin: {
      const bool max = op == Op::Amax;
      if (c == DType::Bool) {
        out = max ? b_.CreateOr(a, v) : b_.CreateAnd(a, v);
      } else if (fp && keep_ties) {  // the first of equal values (-0.0, 0.0) and the first NaN stay
        Value* better = max ? b_.CreateFCmpOGT(v, a) : b_.CreateFCmpOLT(v, a);
        better = b_.CreateOr(better, b_.CreateAnd(b_.CreateFCmpUNO(v, v), b_.CreateFCmpORD(a, a)));
        out = b_.CreateSelect(better, v, a);
      } else {
        const auto id = fp ? (max ? llvm::Intrinsic::maximum : llvm::Intrinsic::minimum)
                           : max ? (un ? llvm::Intrinsic::umax : llvm::Intrinsic::smax)
                                 : (un ? llvm::Intrinsic::umin : llvm::Intrinsic::smin);
        out = b_.CreateBinaryIntrinsic(id, a, v);
      }
      break;
    }
    case Op::Any: out = b_.CreateOr(a, v); break;
    case Op::All: out = b_.CreateAnd(a, v); break;
    case Op::ArgMax:
    case Op::ArgMin: {
      // The first best element; the first NaN once there is one (as eager).
      const bool max = op == Op::ArgMax;
      Value* better = fp ? (max ? b_.CreateFCmpOGT(v, a) : b_.CreateFCmpOLT(v, a))
                         : max ? (un ? b_.CreateICmpUGT(v, a) : b_.CreateICmpSGT(v, a))
                               : (un ? b_.CreateICmpULT(v, a) : b_.CreateICmpSLT(v, a));
      if (fp) better = b_.CreateOr(better, b_.CreateAnd(b_.CreateFCmpUNO(v, v), b_.CreateFCmpORD(a, a)));
      out = b_.CreateSelect(better, v, a);
      b_.CreateStore(b_.CreateSelect(better, lin, b_.CreateLoad(b_.getInt64Ty(), pos)), pos);
      break;
    }
    default: FJ_CHECK(false, "not a reduction");
  }
  b_.CreateStore(out, acc);
}

}  // namespace fj::jit::lower
