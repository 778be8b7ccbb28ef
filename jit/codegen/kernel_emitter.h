// KernelEmitter: one kernel of a Schedule as an LLVM function (ABI and schedule in
// jit/codegen/schedule.h). Every value is computed from its definition at the index where
// it is read: views remap the index, broadcasting drops dims, reductions run their
// own loops, emitted at the outermost loop level that their index depends on
// ("hoisting"), so each reduction result is computed once and reused by the loops
// inside. Internal to jit/: the loop nest, values and indexing are here; views in
// jit/codegen/lower.cpp, reductions in jit/codegen/lower_reduce.cpp.
#pragma once

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/MDBuilder.h>
#include <llvm/IR/Module.h>

#include <functional>
#include <map>
#include <optional>
#include <set>

#include "jit/codegen/schedule.h"
#include "jit/codegen/element_emitter.h"

namespace fj::jit::lower {

using llvm::Value;

// A position along one dim, with the loop levels its value depends on (bit d:
// the loop opened at depth d; 0: loop-invariant).
struct Ix {
  Value* v;
  uint64_t mask;
};
using Index = std::vector<Ix>;

class KernelEmitter {
 public:
  KernelEmitter(const Graph& g, Schedule& s, size_t kernel, llvm::Module& m,
                const LowerOptions& options, std::vector<int>& reduction_kernel)
      : g_(g), s_(s), k_(s.kernels[kernel]), kernel_(static_cast<int>(kernel)), m_(m),
        ctx_(m.getContext()), b_(ctx_), entry_b_(ctx_), options_(options), el_(b_, m, g, options),
        reduction_kernel_(reduction_kernel) {}

  // Emits the kernel's function. Returns -1, or a reduction that must be
  // materialized instead (see rematerialize()): the module is then unusable.
  NodeId emit() {
    auto* ptr = b_.getPtrTy();
    auto* i64 = b_.getInt64Ty();
    fn_ = llvm::Function::Create(llvm::FunctionType::get(b_.getVoidTy(), {ptr, i64, i64}, false),
                                 llvm::Function::ExternalLinkage, k_.symbol, m_);
    fn_->addFnAttr(llvm::Attribute::NoUnwind);
    fn_->addParamAttr(0, llvm::Attribute::NoCapture);
    fn_->addParamAttr(0, llvm::Attribute::ReadOnly);
    llvm::BasicBlock* entry = llvm::BasicBlock::Create(ctx_, "entry", fn_);
    entry_b_.SetInsertPoint(entry);
    Value* args = fn_->getArg(0);
    begin_ = fn_->getArg(1);
    end_ = fn_->getArg(2);
    auto field = [&](unsigned k, const char* name) {
      return entry_b_.CreateLoad(ptr, entry_b_.CreateConstInBoundsGEP1_64(b_.getInt8Ty(), args, 8 * k), name);
    };
    ptrs_ = field(0, "ptrs");
    strides_ = field(1, "strides");
    dims_ = field(2, "dims");
    scalars_ = field(3, "scalars");
    status_out_ = field(4, "status");
    if (options_.target == Target::Cpu && options_.stop_checks) init_stop_checks(args);
    collect_buffers();
    make_alias_scopes();
    plan_lanes();

    auto* main = llvm::BasicBlock::Create(ctx_, "main", fn_);
    auto* done = llvm::BasicBlock::Create(ctx_, "done", fn_);
    b_.SetInsertPoint(main);
    // An empty kernel (a size 0) does nothing: the code that runs once per call reads
    // element 0 of operands, which an empty tensor does not have (its data may be null).
    // Not in a graph with checks (int() of a tensor): they run even where nothing reads
    // them, so that eager's error is not lost (e * int(x.sum()) with an empty e).
    Value* empty = nullptr;
    for (const SymExpr& e : g_.checks().empty() ? k_.shape : SymShape{}) {
      if (e.as_int() && *e.as_int() != 0) continue;
      Value* zero_size = b_.CreateICmpEQ(size_value(e), b_.getInt64(0));
      empty = empty ? b_.CreateOr(empty, zero_size) : zero_size;
    }
    if (empty != nullptr) {
      auto* work = llvm::BasicBlock::Create(ctx_, "work", fn_);
      b_.CreateCondBr(empty, done, work);
      b_.SetInsertPoint(work);
    }
    Value* contiguous = contiguous_condition();
    if (contiguous == nullptr) {
      emit_version(true);
      b_.CreateBr(done);
    } else {
      auto* contig_bb = llvm::BasicBlock::Create(ctx_, "contiguous", fn_);
      auto* strided_bb = llvm::BasicBlock::Create(ctx_, "strided", fn_);
      b_.CreateCondBr(contiguous, contig_bb, strided_bb);
      b_.SetInsertPoint(contig_bb);
      emit_version(true);
      b_.CreateBr(done);
      b_.SetInsertPoint(strided_bb);
      emit_version(false);
      b_.CreateBr(done);
    }
    b_.SetInsertPoint(done);
    if (status_ != nullptr) {  // some check ran: report what it found
      Value* st = b_.CreateLoad(i64, status_);
      auto* report = llvm::BasicBlock::Create(ctx_, "report", fn_);
      auto* ret = llvm::BasicBlock::Create(ctx_, "ret", fn_);
      b_.CreateCondBr(b_.CreateICmpNE(st, b_.getInt64(0)), report, ret);
      b_.SetInsertPoint(report);
      if (options_.target == Target::Nvptx) {  // many threads report: keep every code
        b_.CreateAtomicRMW(llvm::AtomicRMWInst::Or, status_out_, st, llvm::MaybeAlign(8),
                           llvm::AtomicOrdering::Monotonic);
      } else {
        b_.CreateStore(st, status_out_);
      }
      b_.CreateBr(ret);
      b_.SetInsertPoint(ret);
    }
    b_.CreateRetVoid();
    entry_b_.CreateBr(main);
    return rematerialize_;
  }

 private:
  struct Frame {
    llvm::BasicBlock* hoist;       // code placed here runs once per iteration, before the body
    llvm::BasicBlock* body_start;
    std::map<std::pair<NodeId, std::vector<Value*>>, Value*> cache;
  };

  // --- buffers ---------------------------------------------------------------

  bool stored_here(NodeId id) const {
    for (const KernelSpec::Store& st : k_.stores) {
      if (st.node == id) return true;
    }
    return false;
  }
  bool external(int32_t buffer) const {
    return static_cast<size_t>(buffer) < s_.num_inputs + s_.num_outputs;
  }

  // Buffers read (through inline values) or written by this kernel.
  void collect_buffers() {
    std::set<NodeId> seen;
    std::vector<NodeId> work;
    for (const KernelSpec::Store& st : k_.stores) {
      if (st.buffer >= 0) touched_.insert(st.buffer);
      work.push_back(st.node);
    }
    while (!work.empty()) {
      const NodeId id = work.back();
      work.pop_back();
      if (!seen.insert(id).second) continue;
      const int32_t buf = s_.buffer_of[static_cast<size_t>(id)];
      if (buf >= 0 && (g_.node(id).op == Op::Placeholder || !stored_here(id))) {
        touched_.insert(buf);
        read_.insert(buf);
        continue;
      }
      for (NodeId in : g_.node(id).inputs) work.push_back(in);
    }
  }

  // The fast version assumes unit innermost strides for every external buffer.
  Value* contiguous_condition() {
    Value* all = nullptr;
    for (int32_t buf : touched_) {
      const Node& n = g_.node(s_.buffer_node[static_cast<size_t>(buf)]);
      if (!external(buf) || n.rank() == 0 || is_const(n.sym.back(), 1)) continue;
      Value* ok = b_.CreateICmpEQ(loaded_stride(buf, n.rank() - 1), b_.getInt64(1));
      all = all ? b_.CreateAnd(all, ok) : ok;
    }
    return all;
  }

  Value* loaded_stride(int32_t buf, size_t d) {
    auto key = std::make_pair(buf, d);
    auto it = stride_.find(key);
    if (it != stride_.end()) return it->second;
    const int64_t at = s_.stride_offset[static_cast<size_t>(buf)] + static_cast<int64_t>(d);
    Value* v = entry_b_.CreateLoad(b_.getInt64Ty(),
                                   entry_b_.CreateConstInBoundsGEP1_64(b_.getInt64Ty(), strides_, static_cast<uint64_t>(at)));
    return stride_[key] = v;
  }

  Value* stride(int32_t buf, size_t d) {
    const Node& n = g_.node(s_.buffer_node[static_cast<size_t>(buf)]);
    if (d + 1 == n.rank() && (!external(buf) || contig_)) return b_.getInt64(1);
    return loaded_stride(buf, d);
  }

  Value* base(int32_t buf) {
    auto it = base_.find(buf);
    if (it != base_.end()) return it->second;
    Value* v = entry_b_.CreateLoad(b_.getPtrTy(), entry_b_.CreateConstInBoundsGEP1_64(b_.getPtrTy(), ptrs_, static_cast<uint64_t>(buf)),
                                   "buf" + llvm::Twine(buf));
    return base_[buf] = v;
  }

  Value* address(int32_t buf, const Index& idx) {
    const Node& n = g_.node(s_.buffer_node[static_cast<size_t>(buf)]);
    FJ_CHECK(idx.size() == n.rank(), "index rank differs from the buffer's");
    Value* off = b_.getInt64(0);
    for (size_t d = 0; d < idx.size(); ++d) {
      if (is_const(n.sym[d], 1)) continue;
      off = b_.CreateAdd(off, b_.CreateMul(idx[d].v, stride(buf, d), "", false, true), "", false, true);
    }
    return b_.CreateInBoundsGEP(el_.llvm_type(n.dtype), base(buf), off);
  }

  void make_alias_scopes() {
    llvm::MDBuilder mdb(ctx_);
    llvm::MDNode* domain = mdb.createAnonymousAliasScopeDomain("fj.kernel");
    std::vector<llvm::Metadata*> scopes;
    for (size_t o = 0; o < k_.stores.size(); ++o) {
      scopes.push_back(mdb.createAnonymousAliasScope(domain, ("store" + llvm::Twine(o)).str()));
    }
    load_noalias_ = llvm::MDNode::get(ctx_, scopes);
    for (size_t o = 0; o < scopes.size(); ++o) {
      std::vector<llvm::Metadata*> others;
      for (size_t p = 0; p < scopes.size(); ++p) {
        if (p != o) others.push_back(scopes[p]);
      }
      store_scope_.push_back(llvm::MDNode::get(ctx_, {scopes[o]}));
      store_noalias_.push_back(llvm::MDNode::get(ctx_, others));
    }
  }

  // A reduction that must get a buffer of its own (reduction()): the first one is
  // what emit() reports. Emission goes on with a poison value in its place, so that
  // no error needs to unwind the recursive value(); the module is discarded.
  Value* rematerialize(NodeId id) {
    if (rematerialize_ < 0) rematerialize_ = id;
    return llvm::PoisonValue::get(el_.reg_type(g_.node(id).dtype));
  }

  // --- sizes and scalars (loaded once, in the entry block) --------------------

  Value* size_value(const SymExpr& e) {
    if (auto c = e.as_int()) return b_.getInt64(*c);
    size_t k = 0;
    while (k < s_.dim_exprs.size() && !s_.dim_exprs[k].same(e)) ++k;
    if (k == s_.dim_exprs.size()) s_.dim_exprs.push_back(e);
    auto it = dim_.find(k);
    if (it != dim_.end()) return it->second;
    Value* v = entry_b_.CreateLoad(b_.getInt64Ty(),
                                   entry_b_.CreateConstInBoundsGEP1_64(b_.getInt64Ty(), dims_, k),
                                   "dim" + llvm::Twine(k));
    return dim_[k] = v;
  }
  Ix size_ix(const SymExpr& e) { return Ix{size_value(e), 0}; }
  Ix zero() { return Ix{b_.getInt64(0), 0}; }

  Value* scalar_input(int32_t index, ScalarKind kind) {
    auto it = scalar_.find(index);
    if (it != scalar_.end()) return it->second;
    llvm::Type* ty = kind == ScalarKind::Float ? b_.getDoubleTy() : b_.getInt64Ty();
    Value* v = entry_b_.CreateLoad(ty, entry_b_.CreateConstInBoundsGEP1_64(b_.getDoubleTy(), scalars_, static_cast<uint64_t>(index)),
                                   "scalar" + llvm::Twine(index));
    return scalar_[index] = v;
  }

  // A Python-number operand's value (see ElementEmitter::operand).
  Value* number(NodeId id) {
    const Node& n = g_.node(id);
    if (n.op == Op::Scalar) return nullptr;
    if (n.op == Op::ScalarInput) return scalar_input(n.index, n.scalar_kind);
    return value(id, {});
  }

  void flag(Value* cond, KernelStatus code) {
    if (status_ == nullptr) {
      llvm::IRBuilder<> e(&fn_->getEntryBlock(), fn_->getEntryBlock().begin());
      status_ = e.CreateAlloca(b_.getInt64Ty(), nullptr, "status.acc");
      e.CreateStore(b_.getInt64(0), status_);
    }
    Value* acc = b_.CreateLoad(b_.getInt64Ty(), status_);
    b_.CreateStore(b_.CreateOr(acc, b_.CreateSelect(cond, b_.getInt64(code), b_.getInt64(0))), status_);
  }

  // --- index arithmetic -------------------------------------------------------

  // Index arithmetic is placed at the loop level of its operands, like every value.
  Ix arith(llvm::Instruction::BinaryOps op, Ix a, Ix b) {
    const uint64_t m = a.mask | b.mask;
    return Ix{at(m, [&] { return b_.CreateBinOp(op, a.v, b.v); }), m};
  }
  Ix add(Ix a, Ix b) { return arith(llvm::Instruction::Add, a, b); }
  Ix sub(Ix a, Ix b) { return arith(llvm::Instruction::Sub, a, b); }
  Ix mul(Ix a, Ix b) { return arith(llvm::Instruction::Mul, a, b); }
  Ix div(Ix a, Ix b) { return arith(llvm::Instruction::UDiv, a, b); }
  Ix rem(Ix a, Ix b) { return arith(llvm::Instruction::URem, a, b); }

  // The operand's index for a result index: dims align from the right and the
  // operand's size-1 dims read position 0.
  Index broadcast(const Index& idx, const Node& in) {
    const size_t lead = idx.size() - in.rank();
    Index out(in.rank());
    for (size_t j = 0; j < in.rank(); ++j) out[j] = is_const(in.sym[j], 1) ? zero() : idx[lead + j];
    return out;
  }

  // --- frames and loops -------------------------------------------------------

  void open_frame() {
    llvm::BasicBlock* hoist = b_.GetInsertBlock();
    auto* body = llvm::BasicBlock::Create(ctx_, "body", fn_);
    frames_.push_back(Frame{hoist, body, {}});
    b_.SetInsertPoint(body);
  }
  void close_frame() {
    Frame& f = frames_.back();
    llvm::IRBuilder<> t(f.hoist);
    t.CreateBr(f.body_start);
    frames_.pop_back();
  }
  uint64_t depth_bit() const { return uint64_t{1} << frames_.size(); }

  // for (i = lo; i < hi; ++i) body(i), with the body in a new frame; in blocks with
  // stop checks between them when it is an innermost loop of a CPU kernel.
  void emit_loop(Value* lo, Value* hi, const std::function<void(Ix)>& body, bool vectorize) {
    FJ_CHECK(frames_.size() < 63, "loops nested too deeply");
    llvm::BasicBlock* pre = b_.GetInsertBlock();
    auto* header = llvm::BasicBlock::Create(ctx_, "loop", fn_);
    auto* first = llvm::BasicBlock::Create(ctx_, "loop.hoist", fn_);
    auto* exit = llvm::BasicBlock::Create(ctx_, "loop.exit", fn_);
    // A loop emitted into a frame's hoist block (a reduction placed by hoisted()):
    // values of that frame's level that the body reads are hoisted into that block
    // while the body is emitted, so it branches to the header only afterwards, from
    // wherever that frame's hoist code then ends.
    size_t owner = frames_.size();
    for (size_t f = 0; f < frames_.size(); ++f) {
      if (frames_[f].hoist == pre) owner = f;
    }
    llvm::BranchInst* enter = owner == frames_.size() ? b_.CreateBr(header) : nullptr;
    b_.SetInsertPoint(header);
    llvm::PHINode* i = b_.CreatePHI(b_.getInt64Ty(), 2, "i");
    Loop loop{header, exit, i, llvm::cast<llvm::ICmpInst>(b_.CreateICmpSLT(i, hi)), lo, hi};
    b_.CreateCondBr(loop.cond, first, exit);
    b_.SetInsertPoint(first);
    const uint64_t bit = depth_bit();
    const size_t loops_before = ++loops_emitted_;
    open_frame();
    body(Ix{i, bit});
    Value* next = b_.CreateAdd(i, b_.getInt64(1), "i.next", true, true);
    i->addIncoming(next, b_.GetInsertBlock());
    llvm::BranchInst* back = b_.CreateBr(header);
    if (!vectorize) back->setMetadata(llvm::LLVMContext::MD_loop, strided_loop_id());
    close_frame();
    if (owner < frames_.size()) {
      pre = frames_[owner].hoist;
      enter = llvm::IRBuilder<>(pre).CreateBr(header);
      frames_[owner].hoist = exit;
    }
    loop.pre = pre;
    // An innermost loop (none was emitted in its body) counts toward the next stop
    // check; one of a few iterations known here is left as it is and does not count
    // as a loop (the loop around it counts instead: a row of 3 would pay per row).
    const auto* clo = llvm::dyn_cast<llvm::ConstantInt>(lo);
    const auto* chi = llvm::dyn_cast<llvm::ConstantInt>(hi);
    if (clo != nullptr && chi != nullptr && chi->getSExtValue() - clo->getSExtValue() <= kShortLoop &&
        loops_emitted_ == loops_before) {
      loops_emitted_ = loops_before - 1;
      i->addIncoming(lo, pre);
    } else if (budget_ != nullptr && loops_emitted_ == loops_before) {
      enter->setSuccessor(0, check_stop_in_blocks(loop));
    } else {
      i->addIncoming(lo, pre);
    }
    b_.SetInsertPoint(exit);
  }

  // The stop checks of a CPU kernel (KernelArgs::stop), in jit/codegen/lower_stop.cpp.
  struct Loop {
    llvm::BasicBlock* header;  // i = phi; cond = i < hi; br cond, body, exit
    llvm::BasicBlock* exit;
    llvm::PHINode* i;
    llvm::ICmpInst* cond;
    Value *lo, *hi;
    llvm::BasicBlock* pre = nullptr;  // enters the header
  };
  static constexpr int64_t kShortLoop = 16;
  void init_stop_checks(Value* args);
  llvm::BasicBlock* check_stop_in_blocks(const Loop& loop);
  std::vector<llvm::BasicBlock*> count_and_check(llvm::IRBuilder<>& t, Value* n, llvm::BasicBlock* then);

  // Strided loops are neither vectorized nor unrolled: they run scalar, rarely,
  // and unrolling them only costs compile time. (Outer loops stay unrollable: the
  // unrolled row loop of a softmax runs about 1.5x faster.)
  llvm::MDNode* strided_loop_id() {
    llvm::Metadata* off[] = {llvm::MDString::get(ctx_, "llvm.loop.vectorize.enable"),
                             llvm::ConstantAsMetadata::get(b_.getFalse())};
    llvm::Metadata* ops[] = {nullptr, llvm::MDNode::get(ctx_, off),
                             llvm::MDNode::get(ctx_, {llvm::MDString::get(ctx_, "llvm.loop.unroll.disable")})};
    llvm::MDNode* id = llvm::MDNode::getDistinct(ctx_, ops);
    id->replaceOperandWith(0, id);
    return id;
  }

  // The innermost open loop level whose bit is in `mask` (0: none).
  size_t level_of(uint64_t mask) const {
    size_t level = 0;
    for (size_t f = 1; f < frames_.size(); ++f) {
      if (mask & (uint64_t{1} << f)) level = f;
    }
    return level;
  }
  Value* at(uint64_t mask, const std::function<Value*()>& fn) { return hoisted(level_of(mask), fn); }

  // Runs `fn` with the builder at the end of frame `level`'s hoist block and the
  // frames inside it out of sight; what fn emits runs once per iteration of that
  // frame, before its body.
  Value* hoisted(size_t level, const std::function<Value*()>& fn) {
    // Every value of a level goes to that level's hoist code, also when the builder
    // is in the level's body: hoisted code of the same level emitted later (a
    // reduction) may read it, and the hoist code runs before the body.
    const bool at_tail = b_.GetInsertBlock() == frames_[level].hoist;
    llvm::IRBuilderBase::InsertPoint ip = b_.saveIP();
    std::vector<Frame> inner(std::make_move_iterator(frames_.begin() + static_cast<long>(level) + 1),
                             std::make_move_iterator(frames_.end()));
    frames_.resize(level + 1);
    b_.SetInsertPoint(frames_[level].hoist);
    Value* v = fn();
    frames_[level].hoist = b_.GetInsertBlock();
    for (Frame& f : inner) frames_.push_back(std::move(f));
    // Already emitting this level's hoist code: go on from its new end (a loop
    // emitted by fn ended the block we were in).
    if (!at_tail) b_.restoreIP(ip);
    return v;
  }

  // --- the loop nest ------------------------------------------------------------

  void emit_version(bool contiguous) {
    contig_ = contiguous;
    frames_.clear();
    stash_.clear();
    tile_.reset();
    lanes_.clear();
    loop_var_.assign(k_.shape.size(), nullptr);
    open_frame();  // depth 0: code that runs once per call of the kernel
    Index idx(k_.shape.size());
    emit_level(0, idx);
    close_frame();
  }

  void emit_level(size_t d, Index& idx) {
    if (d == k_.shape.size()) {
      for (size_t o = 0; o < k_.stores.size(); ++o) {
        const KernelSpec::Store& st = k_.stores[o];
        const Node& n = g_.node(st.node);
        stash_reductions(o, idx);
        Value* v = value(st.node, idx);
        if (st.buffer < 0) continue;  // a check: evaluating it reports what it found
        auto* store = b_.CreateStore(el_.to_storage(n.dtype, v), address(st.buffer, idx));
        store->setMetadata(llvm::LLVMContext::MD_alias_scope, store_scope_[o]);
        store->setMetadata(llvm::LLVMContext::MD_noalias, store_noalias_[o]);
      }
      return;
    }
    if (is_const(k_.shape[d], 1)) {
      idx[d] = zero();
      emit_level(d + 1, idx);
      return;
    }
    // The tiled nest (lower_lanes.cpp): for reductions only where the buffers'
    // innermost strides are 1 (else the lanes would read across rows).
    if (tile_dim_ >= 0 && (contig_ || scan_dim_ >= 0)) {
      if (!tile_ && static_cast<int>(d) == (scan_dim_ >= 0 ? scan_dim_ : tile_dim_)) return emit_tile_loop(d, idx);
      if (tile_ && static_cast<int>(d) == tile_dim_) return emit_lane_loop(d, idx);
    }
    const bool split = static_cast<int>(d) == k_.split_dim;
    Value* lo = split ? begin_ : b_.getInt64(0);
    Value* hi = split ? end_ : size_value(k_.shape[d]);
    emit_loop(lo, hi, [&](Ix i) {
      idx[d] = i;
      loop_var_[d] = i.v;
      emit_level(d + 1, idx);
    }, contig_);
  }

  // --- values -------------------------------------------------------------------

  // A node's value at an index, computed once per iteration of the loops that the
  // index depends on, and there: loop-invariant code motion by construction.
  Value* value(NodeId id, const Index& idx) {
    std::vector<Value*> key_idx;
    for (const Ix& i : idx) key_idx.push_back(i.v);
    auto key = std::make_pair(id, std::move(key_idx));
    for (size_t f = frames_.size(); f-- > 0;) {
      auto it = frames_[f].cache.find(key);
      if (it != frames_[f].cache.end()) return it->second;
    }
    const size_t level = level_of(mask_of(idx));
    Value* v = hoisted(level, [&] { return compute(id, idx); });
    frames_[level].cache[key] = v;
    return v;
  }

  Value* load(int32_t buf, const Index& idx) {
    const Node& n = g_.node(s_.buffer_node[static_cast<size_t>(buf)]);
    auto* l = b_.CreateLoad(el_.llvm_type(n.dtype), address(buf, idx));
    l->setMetadata(llvm::LLVMContext::MD_noalias, load_noalias_);
    return el_.from_storage(n.dtype, l);
  }

  Value* compute(NodeId id, const Index& idx) {
    const Node& n = g_.node(id);
    const int32_t buf = s_.buffer_of[static_cast<size_t>(id)];
    if (n.op == Op::Placeholder || (buf >= 0 && !stored_here(id))) return load(buf, idx);
    if (Value* v = stashed(id, idx)) return v;
    switch (op_family(n.op)) {
      case Family::Input:
      case Family::Constant:
        FJ_CHECK(false, "a Python number read as a tensor");
      case Family::Pointwise: {
        std::vector<Value*> args;
        for (size_t k = 0; k < n.inputs.size(); ++k) {
          const NodeId in = n.inputs[k];
          const Node& inn = g_.node(in);
          Value* v = is_python_scalar(inn) ? number(in) : value(in, broadcast(idx, inn));
          args.push_back(el_.operand(n, k, v));
        }
        return el_.emit_node(n, args);
      }
      case Family::Reduction: return reduction(id, idx);
      case Family::View: return view(n, idx);
      case Family::Index: return index(n, idx);
      case Family::Creation:
        if (n.op == Op::Iota) return idx[static_cast<size_t>(n.dims[0])].v;
        return el_.operand(n, 0, number(n.inputs[0]));
      case Family::Item: return item(n);
      case Family::Extern: FJ_CHECK(false, "a matmul result that is not materialized");
    }
    FJ_CHECK(false, "unknown family");
  }

  Value* item(const Node& n) {
    const Node& x = g_.node(n.inputs[0]);
    Value* v = value(n.inputs[0], Index(x.rank(), zero()));
    switch (n.op) {
      case Op::ItemFloat: return el_.convert(v, x.dtype, DType::Float64);
      case Op::ItemBool: return b_.CreateZExt(el_.convert(v, x.dtype, DType::Bool), b_.getInt64Ty());
      case Op::ItemInt:
        if (is_floating(x.dtype)) {
          // Python's int() of a float: NaN and infinities raise, big values are big
          // ints; both leave the graph (the caller runs the frame eagerly).
          const double lim = 0x1p63;
          Value* ok = b_.CreateAnd(b_.CreateFCmpOGE(v, el_.fconst(v->getType(), -lim)),
                                   b_.CreateFCmpOLT(v, el_.fconst(v->getType(), lim)));
          flag(b_.CreateNot(ok), kNoIntValue);
        }
        return el_.convert(v, x.dtype, DType::Int64);
      default: FJ_CHECK(false, "not an item op");
    }
  }

  // --- views ----------------------------------------------------------------------
  Value* view(const Node& n, const Index& idx);
  Ix product(const SymShape& sizes, size_t from, size_t to);
  Index reshape_index(const SymShape& in, const SymShape& out, const Index& idx);
  Value* cat(const Node& n, const Index& idx);
  Value* slice_scatter(const Node& n, const Index& idx);

  // --- indexing with tensors ----------------------------------------------------

  // An index value read from a tensor, checked against `size` (and wrapped when
  // negative indices count from the end): out of range reports and reads 0.
  Ix checked(Value* j, DType dtype, const SymExpr& size, bool wrap, uint64_t mask) {
    if (dtype != DType::Int64) j = el_.convert(j, dtype, DType::Int64);
    Value* n = size_value(size);
    if (wrap) j = b_.CreateSelect(b_.CreateICmpSLT(j, b_.getInt64(0)), b_.CreateAdd(j, n), j);
    Value* bad = b_.CreateICmpUGE(j, n);
    flag(bad, kIndexOutOfRange);
    return Ix{b_.CreateSelect(bad, b_.getInt64(0), j), mask};
  }

  static uint64_t mask_of(const Index& idx) {
    uint64_t m = 0;
    for (const Ix& i : idx) m |= i.mask;
    return m;
  }

  Value* index(const Node& n, const Index& idx) {
    const Node& x = g_.node(n.inputs[0]);
    const Node& ix = g_.node(n.inputs[1]);
    const size_t k = static_cast<size_t>(n.dims[0]);
    Index in_idx;
    if (n.op == Op::IndexSelect) {
      Index sub_idx(idx.begin() + static_cast<long>(k), idx.begin() + static_cast<long>(k + ix.rank()));
      Ix j = checked(value(n.inputs[1], sub_idx), ix.dtype, x.sym[k], n.int_value != 0, mask_of(idx));
      in_idx.assign(idx.begin(), idx.begin() + static_cast<long>(k));
      in_idx.push_back(j);
      in_idx.insert(in_idx.end(), idx.begin() + static_cast<long>(k + ix.rank()), idx.end());
    } else {
      in_idx = idx;
      in_idx[k] = checked(value(n.inputs[1], idx), ix.dtype, x.sym[k], false, mask_of(idx));
    }
    return value(n.inputs[0], in_idx);
  }

  // --- reduction operands kept in the output ---------------------------------------
  void stash_reductions(size_t store, const Index& idx);
  bool costly(NodeId id) const;
  Value* stashed(NodeId id, const Index& idx);

  // --- reductions -----------------------------------------------------------------
  Value* reduction(NodeId id, const Index& idx);
  bool running_scan(const Node& r, const Index& idx) const;
  Value* emit_running_scan(const Node& r, const Index& idx, Value* slot = nullptr);
  Value* reduction_identity(const Node& r);
  Value* emit_reduction(const Node& r, const Index& idx);
  // acc = acc (op) v. A float Amax / Amin uses llvm.maximum / minimum (a zero result
  // gets its sign afterwards), or with keep_ties a compare-and-select that keeps the
  // first of equal values, as eager's scalar loop: vectorized across lanes it costs
  // the same, but across the reduced elements it would not vectorize.
  void combine(Op op, bool fp, DType c, Value* acc, Value* pos, Value* v, Value* lin, bool keep_ties = false);

  // --- tiles of the innermost loop for reductions over outer dims --------------------
  static constexpr int64_t kLaneTile = 256;
  struct Tile {
    size_t level;          // the tile loop's frame
    Value *begin, *end;    // the tile's positions along tile_dim_ (its hoist code)
    std::map<std::pair<NodeId, std::vector<Value*>>, Value*> accs;  // lane reductions' slots
  };
  void plan_lanes();
  void emit_tile_loop(size_t d, Index& idx);
  void emit_lane_loop(size_t d, Index& idx);
  uint64_t outer_bits() const;
  Value* lane_reduction(NodeId id, const Index& idx);
  bool lane_scan(const Node& r, const Index& idx) const;
  Value* emit_lane_scan(const Node& r, const Index& idx);

  const Graph& g_;
  Schedule& s_;
  const KernelSpec& k_;
  const int kernel_;
  llvm::Module& m_;
  llvm::LLVMContext& ctx_;
  llvm::IRBuilder<> b_;
  llvm::IRBuilder<> entry_b_;  // appends to the entry block (loads of arguments)
  const LowerOptions& options_;
  ElementEmitter el_;
  std::vector<int>& reduction_kernel_;
  llvm::Function* fn_ = nullptr;
  NodeId rematerialize_ = -1;
  Value *begin_ = nullptr, *end_ = nullptr, *ptrs_ = nullptr, *strides_ = nullptr, *dims_ = nullptr,
        *scalars_ = nullptr, *status_out_ = nullptr, *status_ = nullptr;
  bool contig_ = true;
  std::set<int32_t> touched_, read_;
  std::map<std::pair<int32_t, size_t>, Value*> stride_;
  std::map<int32_t, Value*> base_;
  std::map<size_t, Value*> dim_;
  std::map<int32_t, Value*> scalar_;
  std::vector<Frame> frames_;
  std::vector<Value*> loop_var_;  // by kernel dim: its loop's variable (nullptr: no loop)
  // Reduction operands kept in a store's buffer (stash_reductions): by operand, the
  // store and the operand's index along the kept dims (nullptr: a reduced dim).
  struct Stash {
    int32_t store;
    std::vector<Value*> kept;
  };
  std::map<NodeId, Stash> stash_;
  struct StashRequest {
    NodeId node;
    int32_t store;
  };
  StashRequest stash_request_{-1, -1};
  int tile_dim_ = -1;   // the kernel dim cut into tiles (-1: none)
  int scan_dim_ = -1;   // the kernel dim a cumulative sum scans per lane (tile loop outside it)
  std::set<NodeId> lane_reductions_;
  std::optional<Tile> tile_;  // the tile loop being emitted
  std::set<Value*> lanes_;    // loop variables that run over the open tile's positions
  // Stop checks (CPU): KernelArgs::stop and its context, the innermost iterations
  // left before the next check (an i64 slot; null: no checks), the block that ends
  // an interrupted kernel, and how many loops were emitted so far.
  Value *stop_fn_ = nullptr, *stop_ctx_ = nullptr, *budget_ = nullptr;
  llvm::BasicBlock* interrupted_ = nullptr;
  size_t loops_emitted_ = 0;
  llvm::MDNode* load_noalias_ = nullptr;
  std::vector<llvm::MDNode*> store_scope_, store_noalias_;
};


}  // namespace fj::jit::lower
