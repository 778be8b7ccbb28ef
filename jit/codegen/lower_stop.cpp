// Stop checks in a CPU kernel's loops (KernelArgs::stop, jit/codegen/schedule.h), so
// that Ctrl-C ends a long kernel whatever its loop nest: a 0-d sum of 1e9
// elements, a few very wide rows. Every innermost loop runs in blocks of at most
// kStopCheckElements iterations and subtracts each block's length from a budget
// that the whole kernel shares; when the budget is spent, the kernel calls
// args->stop and ends if it answers nonzero. A loop of a few iterations costs a
// subtraction and a compare per run; a long one, a call per block. A reduction
// still combines its elements in order: its accumulator carries from block to
// block (the vectorizer's partial sums restart per block, which changes nothing
// for integers, min and max, and only shortens the float sums' chains).
#include "jit/codegen/kernel_emitter.h"

#include <algorithm>
#include <vector>

namespace fj::jit::lower {

// Reads KernelArgs::stop and stop_ctx; the budget starts full, or past any count
// when stop is null (the kernel then never calls it).
void KernelEmitter::init_stop_checks(Value* args) {
  auto* ptr = b_.getPtrTy();
  auto field = [&](unsigned k, const char* name) {
    return entry_b_.CreateLoad(ptr, entry_b_.CreateConstInBoundsGEP1_64(b_.getInt8Ty(), args, 8 * k), name);
  };
  stop_fn_ = field(5, "stop");
  stop_ctx_ = field(6, "stop.ctx");
  budget_ = llvm::IRBuilder<>(&fn_->getEntryBlock(), fn_->getEntryBlock().begin())
                .CreateAlloca(b_.getInt64Ty(), nullptr, "stop.budget");
  Value* none = entry_b_.CreateICmpEQ(stop_fn_, llvm::ConstantPointerNull::get(ptr));
  entry_b_.CreateStore(entry_b_.CreateSelect(none, b_.getInt64(INT64_MAX), b_.getInt64(kStopCheckElements)), budget_);
}

// Turns `loop` (emitted whole, its phi still without the entering edge) into
//   for (blk = lo; blk < hi; blk = bend) {
//     bend = blk + min(hi - blk, kStopCheckElements);
//     for (i = blk; i < bend; ++i) body(i);
//     count(bend - blk);
//   }
// or, when its bounds are constants at most kStopCheckElements apart (the vectorizer
// then still sees its trip count), into the loop followed by count(hi - lo).
// Returns the block that the code before the loop must branch to.
llvm::BasicBlock* KernelEmitter::check_stop_in_blocks(const Loop& loop) {
  auto* header_br = llvm::cast<llvm::BranchInst>(loop.header->getTerminator());
  auto* lo = llvm::dyn_cast<llvm::ConstantInt>(loop.lo);
  auto* hi = llvm::dyn_cast<llvm::ConstantInt>(loop.hi);
  if (lo != nullptr && hi != nullptr && hi->getSExtValue() - lo->getSExtValue() <= kStopCheckElements) {
    auto* after = llvm::BasicBlock::Create(ctx_, "loop.count", fn_);
    loop.i->addIncoming(loop.lo, loop.pre);
    header_br->setSuccessor(1, after);
    llvm::IRBuilder<> t(after);
    count_and_check(t, t.getInt64(std::max<int64_t>(hi->getSExtValue() - lo->getSExtValue(), 0)), loop.exit);
    return loop.header;
  }
  auto* i64 = b_.getInt64Ty();
  auto* outer = llvm::BasicBlock::Create(ctx_, "blocks", fn_);
  auto* block = llvm::BasicBlock::Create(ctx_, "block", fn_);
  auto* next = llvm::BasicBlock::Create(ctx_, "block.end", fn_);
  llvm::IRBuilder<> t(outer);
  llvm::PHINode* blk = t.CreatePHI(i64, 3, "blk");
  blk->addIncoming(loop.lo, loop.pre);
  t.CreateCondBr(t.CreateICmpSLT(blk, loop.hi), block, loop.exit);
  t.SetInsertPoint(block);
  Value* len = t.CreateBinaryIntrinsic(llvm::Intrinsic::smin, t.CreateSub(loop.hi, blk), t.getInt64(kStopCheckElements));
  Value* bend = t.CreateAdd(blk, len, "bend", true, true);
  t.CreateBr(loop.header);
  // The inner loop: from blk to bend, then to the count.
  loop.i->addIncoming(blk, block);
  loop.cond->setOperand(1, bend);
  header_br->setSuccessor(1, next);
  t.SetInsertPoint(next);
  for (llvm::BasicBlock* from : count_and_check(t, len, outer)) blk->addIncoming(bend, from);
  return outer;
}

// Emits at t: budget -= n; when it is spent, budget = kStopCheckElements and the
// kernel ends if stop(ctx) answers nonzero; then on to `then`. Returns the blocks
// that branch to `then`.
std::vector<llvm::BasicBlock*> KernelEmitter::count_and_check(llvm::IRBuilder<>& t, Value* n, llvm::BasicBlock* then) {
  auto* i64 = b_.getInt64Ty();
  auto* poll = llvm::BasicBlock::Create(ctx_, "stop.check", fn_);
  Value* left = t.CreateSub(t.CreateLoad(i64, budget_), n);
  t.CreateStore(left, budget_);
  llvm::MDBuilder mdb(ctx_);
  llvm::BasicBlock* counted = t.GetInsertBlock();
  t.CreateCondBr(t.CreateICmpSLE(left, t.getInt64(0)), poll, then, mdb.createBranchWeights(1, 1 << 12));
  t.SetInsertPoint(poll);
  t.CreateStore(t.getInt64(kStopCheckElements), budget_);
  auto* fn_ty = llvm::FunctionType::get(b_.getInt32Ty(), {b_.getPtrTy()}, false);
  llvm::CallInst* stop = t.CreateCall(fn_ty, stop_fn_, {stop_ctx_});
  stop->addFnAttr(llvm::Attribute::NoUnwind);
  if (interrupted_ == nullptr) {
    // *status |= kInterrupted; return (the chunk's status: no other thread writes it).
    interrupted_ = llvm::BasicBlock::Create(ctx_, "interrupted", fn_);
    llvm::IRBuilder<> r(interrupted_);
    Value* st = r.CreateLoad(i64, status_out_);
    r.CreateStore(r.CreateOr(st, r.getInt64(kInterrupted)), status_out_);
    r.CreateRetVoid();
  }
  t.CreateCondBr(t.CreateICmpNE(stop, t.getInt32(0)), interrupted_, then, mdb.createBranchWeights(1, 1 << 12));
  return {counted, poll};
}

}  // namespace fj::jit::lower
