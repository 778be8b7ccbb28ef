// Graph -> LLVM IR: one fused, runtime-shape-driven loop nest per output shape.
#include "jit/cpu_lower.h"

#include <llvm/ADT/Twine.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/MDBuilder.h>
#include <llvm/IR/Module.h>
#include <llvm/Transforms/Utils/ModuleUtils.h>

#include <functional>
#include <map>

#include "jit/cpu_math.h"

namespace fj::jit {
namespace {

using llvm::Value;

// Marks every node that the given outputs depend on.
std::vector<bool> reachable(const Graph& g, const std::vector<NodeId>& roots) {
  std::vector<bool> live(g.size(), false);
  for (NodeId r : roots) live[static_cast<size_t>(r)] = true;
  for (size_t i = g.size(); i-- > 0;) {
    if (!live[i]) continue;
    for (NodeId in : g.nodes()[i].inputs) live[static_cast<size_t>(in)] = true;
  }
  return live;
}

// tanhf for the kernels. LLVM 19's loop vectorizer cannot widen llvm.tanh nor a
// plain libm call, and one such call keeps the whole fused loop scalar. So calls to
// tanhf carry a VFABI attribute naming vector variants defined here, each calling
// tanhf lane by lane: the results stay those of libm's tanhf, and the vectorizer
// widens everything around it.
constexpr unsigned kTanhWidths[] = {4, 8, 16};

llvm::Function* tanhf_function(llvm::Module& m) {
  if (llvm::Function* f = m.getFunction("tanhf")) return f;
  llvm::LLVMContext& ctx = m.getContext();
  auto* f32 = llvm::Type::getFloatTy(ctx);
  auto* scalar = llvm::Function::Create(llvm::FunctionType::get(f32, {f32}, false),
                                        llvm::Function::ExternalLinkage, "tanhf", m);
  scalar->addFnAttr(llvm::Attribute::NoUnwind);
  scalar->addFnAttr(llvm::Attribute::WillReturn);
  scalar->setDoesNotAccessMemory();
  std::vector<llvm::GlobalValue*> variants;
  for (unsigned width : kTanhWidths) {
    auto* vec = llvm::FixedVectorType::get(f32, width);
    auto* fn = llvm::Function::Create(llvm::FunctionType::get(vec, {vec}, false),
                                      llvm::Function::InternalLinkage,
                                      "fj_tanhf_v" + llvm::Twine(width), m);
    fn->addFnAttr(llvm::Attribute::NoUnwind);
    llvm::IRBuilder<> b(llvm::BasicBlock::Create(ctx, "entry", fn));
    Value* out = llvm::PoisonValue::get(vec);
    for (unsigned lane = 0; lane < width; ++lane) {
      Value* x = b.CreateExtractElement(fn->getArg(0), lane);
      out = b.CreateInsertElement(out, b.CreateCall(scalar, {x}), lane);
    }
    b.CreateRet(out);
    variants.push_back(fn);
  }
  llvm::appendToCompilerUsed(m, variants);  // alive until the vectorizer has run
  return scalar;
}

Value* call_tanhf(llvm::IRBuilder<>& b, llvm::Module& m, Value* x) {
  llvm::CallInst* call = b.CreateCall(tanhf_function(m), {x});
  std::string names;
  for (unsigned width : kTanhWidths) {
    if (!names.empty()) names += ",";
    names += ("_ZGV_LLVM_N" + llvm::Twine(width) + "v_tanhf(fj_tanhf_v" + llvm::Twine(width) +
              ")").str();
  }
  call->addFnAttr(llvm::Attribute::get(m.getContext(), "vector-function-abi-variant", names));
  return call;
}

class KernelEmitter {
 public:
  KernelEmitter(const Graph& g, const KernelPlan& plan, llvm::Module& m,
                const LowerOptions& options)
      : g_(g), plan_(plan), options_(options), ctx_(m.getContext()), m_(m), b_(ctx_),
        rank_(plan.shape.size()), num_in_(plan.inputs.size()),
        num_buf_(plan.inputs.size() + plan.outputs.size()) {}

  void emit() {
    auto* ptr_ty = b_.getPtrTy();
    auto* fn_ty =
        llvm::FunctionType::get(b_.getVoidTy(), {ptr_ty, ptr_ty, ptr_ty, ptr_ty}, false);
    fn_ = llvm::Function::Create(fn_ty, llvm::Function::ExternalLinkage, plan_.symbol, m_);
    fn_->addFnAttr(llvm::Attribute::NoUnwind);
    for (unsigned a = 0; a < 4; ++a) {
      fn_->addParamAttr(a, llvm::Attribute::NoCapture);
      fn_->addParamAttr(a, llvm::Attribute::ReadOnly);
    }
    b_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", fn_));
    make_alias_scopes();
    load_arguments();

    std::vector<Value*> offsets(num_buf_, b_.getInt64(0));
    if (rank_ == 0) {
      emit_body(element_ptrs(offsets, nullptr, false));
    } else {
      contiguous_ = contiguous_condition();
      emit_level(0, offsets);
    }
    b_.CreateRetVoid();
  }

 private:
  // --- arguments and loops -------------------------------------------------

  void load_arguments() {
    auto* ptrs = fn_->getArg(0);
    auto* sizes = fn_->getArg(1);
    auto* strides = fn_->getArg(2);
    auto* scalars = fn_->getArg(3);
    ptrs->setName("ptrs");
    sizes->setName("sizes");
    strides->setName("strides");
    scalars->setName("scalars");
    // The scalar inputs this kernel reads: loaded once, (float)value as in PyTorch.
    const std::vector<bool> live = reachable(g_, plan_roots());
    for (size_t id = 0; id < g_.size(); ++id) {
      const Node& n = g_.nodes()[id];
      if (!live[id] || n.op != Op::ScalarInput) continue;
      Value* slot = b_.CreateConstInBoundsGEP1_64(b_.getDoubleTy(), scalars,
                                                  static_cast<uint64_t>(n.index));
      Value* d = b_.CreateLoad(b_.getDoubleTy(), slot, "scalar" + llvm::Twine(n.index));
      scalar_input_[n.index] = b_.CreateFPTrunc(d, b_.getFloatTy());
    }
    for (size_t k = 0; k < num_buf_; ++k) {
      Value* slot = b_.CreateConstInBoundsGEP1_64(b_.getPtrTy(), ptrs, k);
      base_.push_back(b_.CreateLoad(b_.getPtrTy(), slot, "buf" + llvm::Twine(k)));
    }
    for (size_t d = 0; d < rank_; ++d) {
      Value* slot = b_.CreateConstInBoundsGEP1_64(b_.getInt64Ty(), sizes, d);
      size_.push_back(b_.CreateLoad(b_.getInt64Ty(), slot, "n" + llvm::Twine(d)));
    }
    stride_.resize(num_buf_);
    for (size_t k = 0; k < num_buf_; ++k) {
      for (size_t d = 0; d < rank_; ++d) {
        Value* slot = b_.CreateConstInBoundsGEP1_64(b_.getInt64Ty(), strides, k * rank_ + d);
        stride_[k].push_back(b_.CreateLoad(b_.getInt64Ty(), slot,
                                           "s" + llvm::Twine(k) + "_" + llvm::Twine(d)));
      }
    }
  }

  // Whether buffer k steps by 1 (not 0) along the innermost dim in the contiguous loop.
  bool steps_in_inner(size_t k) const { return k >= num_in_ || !plan_.inner_broadcast[k]; }

  Value* contiguous_condition() {
    Value* ok = b_.CreateICmpEQ(size_.back(), b_.getInt64(1));
    Value* all = b_.getTrue();
    for (size_t k = 0; k < num_buf_; ++k) {
      const int64_t want = steps_in_inner(k) ? 1 : 0;
      all = b_.CreateAnd(all, b_.CreateICmpEQ(stride_[k].back(), b_.getInt64(want)));
    }
    return b_.CreateOr(ok, all, "contiguous");
  }

  // Emits `for (i = 0; i < n; ++i) body(i)`; leaves the builder after the loop.
  // `scalar` marks the loop as not to be vectorized.
  void emit_loop(Value* n, const std::string& name, const std::function<void(Value*)>& body,
                 bool scalar = false) {
    llvm::BasicBlock* pre = b_.GetInsertBlock();
    auto* header = llvm::BasicBlock::Create(ctx_, llvm::Twine(name) + ".header", fn_);
    auto* body_bb = llvm::BasicBlock::Create(ctx_, llvm::Twine(name) + ".body", fn_);
    auto* exit = llvm::BasicBlock::Create(ctx_, llvm::Twine(name) + ".exit", fn_);
    b_.CreateBr(header);
    b_.SetInsertPoint(header);
    llvm::PHINode* i = b_.CreatePHI(b_.getInt64Ty(), 2, name);
    i->addIncoming(b_.getInt64(0), pre);
    b_.CreateCondBr(b_.CreateICmpSLT(i, n), body_bb, exit);
    b_.SetInsertPoint(body_bb);
    body(i);
    Value* next = b_.CreateAdd(i, b_.getInt64(1), llvm::Twine(name) + ".next", true, true);
    i->addIncoming(next, b_.GetInsertBlock());
    llvm::BranchInst* back = b_.CreateBr(header);
    if (scalar) back->setMetadata(llvm::LLVMContext::MD_loop, no_vectorize_loop_id());
    b_.SetInsertPoint(exit);
  }

  // Loop over dim d; offsets are each buffer's element offset from the outer dims.
  void emit_level(size_t d, const std::vector<Value*>& offsets) {
    const std::string name = ("i" + llvm::Twine(d)).str();
    if (d + 1 < rank_) {
      emit_loop(size_[d], name, [&](Value* i) {
        std::vector<Value*> inner(num_buf_);
        for (size_t k = 0; k < num_buf_; ++k) {
          inner[k] = b_.CreateAdd(offsets[k], b_.CreateMul(i, stride_[k][d], "", false, true),
                                  "", false, true);
        }
        emit_level(d + 1, inner);
      });
      return;
    }
    auto* contig_bb = llvm::BasicBlock::Create(ctx_, "contiguous", fn_);
    auto* strided_bb = llvm::BasicBlock::Create(ctx_, "strided", fn_);
    auto* join = llvm::BasicBlock::Create(ctx_, "inner.done", fn_);
    b_.CreateCondBr(contiguous_, contig_bb, strided_bb);

    b_.SetInsertPoint(contig_bb);
    std::vector<Value*> rows(num_buf_);
    for (size_t k = 0; k < num_buf_; ++k) {
      rows[k] = b_.CreateInBoundsGEP(elem_type(k), base_[k], offsets[k], "row" + llvm::Twine(k));
    }
    emit_loop(size_[d], (llvm::Twine(name) + ".c").str(), [&](Value* i) {
      std::vector<Value*> ptrs(num_buf_);
      for (size_t k = 0; k < num_buf_; ++k) {
        ptrs[k] = steps_in_inner(k) ? b_.CreateInBoundsGEP(elem_type(k), rows[k], i) : rows[k];
      }
      emit_body(ptrs);
    });
    b_.CreateBr(join);

    // Vectorizing this loop would only duplicate the contiguous one (it would
    // version on unit strides), at the cost of compile time.
    b_.SetInsertPoint(strided_bb);
    emit_loop(size_[d], (llvm::Twine(name) + ".s").str(), [&](Value* i) {
      emit_body(element_ptrs(offsets, i, true));
    }, /*scalar=*/true);
    b_.CreateBr(join);
    b_.SetInsertPoint(join);
  }

  // A distinct loop id: !{self, !{"llvm.loop.vectorize.enable", false}}.
  llvm::MDNode* no_vectorize_loop_id() {
    llvm::Metadata* off[] = {llvm::MDString::get(ctx_, "llvm.loop.vectorize.enable"),
                             llvm::ConstantAsMetadata::get(b_.getFalse())};
    llvm::Metadata* ops[] = {nullptr, llvm::MDNode::get(ctx_, off)};
    llvm::MDNode* id = llvm::MDNode::getDistinct(ctx_, ops);
    id->replaceOperandWith(0, id);
    return id;
  }

  // base + offset (+ i * innermost stride when `with_inner`).
  std::vector<Value*> element_ptrs(const std::vector<Value*>& offsets, Value* i, bool with_inner) {
    std::vector<Value*> ptrs(num_buf_);
    for (size_t k = 0; k < num_buf_; ++k) {
      Value* off = offsets[k];
      if (with_inner) {
        off = b_.CreateAdd(off, b_.CreateMul(i, stride_[k].back(), "", false, true), "", false,
                           true);
      }
      ptrs[k] = b_.CreateInBoundsGEP(elem_type(k), base_[k], off);
    }
    return ptrs;
  }

  llvm::Type* llvm_type(DType d) {
    switch (d) {
      case DType::Bool: return b_.getInt8Ty();
      case DType::Float32: return b_.getFloatTy();
    }
    FJ_CHECK(false, "unknown dtype");
  }

  DType buffer_dtype(size_t k) const {
    if (k < num_in_) return placeholder_dtype(plan_.inputs[k]);
    return g_.node(g_.outputs()[plan_.outputs[k - num_in_]]).dtype;
  }
  DType placeholder_dtype(int32_t index) const {
    for (const Node& n : g_.nodes()) {
      if (n.op == Op::Placeholder && n.index == index) return n.dtype;
    }
    FJ_CHECK(false, ("no placeholder with index " + llvm::Twine(index)).str());
  }
  llvm::Type* elem_type(size_t k) { return llvm_type(buffer_dtype(k)); }

  // --- alias scopes: outputs overlap neither inputs nor each other ------------

  void make_alias_scopes() {
    llvm::MDBuilder mdb(ctx_);
    llvm::MDNode* domain = mdb.createAnonymousAliasScopeDomain("fj.kernel");
    std::vector<llvm::Metadata*> scopes;
    for (size_t o = 0; o < plan_.outputs.size(); ++o) {
      scopes.push_back(mdb.createAnonymousAliasScope(domain, ("out" + llvm::Twine(o)).str()));
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

  // --- the element body -----------------------------------------------------

  std::vector<NodeId> plan_roots() const {
    std::vector<NodeId> roots;
    for (size_t pos : plan_.outputs) roots.push_back(g_.outputs()[pos]);
    return roots;
  }

  void emit_body(const std::vector<Value*>& ptrs) {
    const std::vector<bool> live = reachable(g_, plan_roots());
    std::map<int32_t, size_t> slot_of;  // placeholder index -> buffer
    for (size_t k = 0; k < num_in_; ++k) slot_of[plan_.inputs[k]] = k;

    std::vector<Value*> v(g_.size(), nullptr);
    for (size_t id = 0; id < g_.size(); ++id) {
      if (!live[id]) continue;
      const Node& n = g_.nodes()[id];
      if (n.op == Op::Placeholder) {
        const size_t k = slot_of.at(n.index);
        auto* load = b_.CreateLoad(llvm_type(n.dtype), ptrs[k]);
        load->setMetadata(llvm::LLVMContext::MD_noalias, load_noalias_);
        v[id] = from_storage(n.dtype, load);
      } else {
        std::vector<Value*> args;
        for (NodeId in : n.inputs) args.push_back(v[static_cast<size_t>(in)]);
        v[id] = emit_node(n, args);
      }
    }
    for (size_t o = 0; o < plan_.outputs.size(); ++o) {
      const NodeId id = g_.outputs()[plan_.outputs[o]];
      const Node& n = g_.node(id);
      auto* store = b_.CreateStore(to_storage(n.dtype, v[static_cast<size_t>(id)]),
                                   ptrs[num_in_ + o]);
      store->setMetadata(llvm::LLVMContext::MD_alias_scope, store_scope_[o]);
      store->setMetadata(llvm::LLVMContext::MD_noalias, store_noalias_[o]);
    }
  }

  // Bool is i8 0/1 in memory and i1 in registers.
  Value* from_storage(DType d, Value* x) {
    switch (d) {
      case DType::Bool: return b_.CreateICmpNE(x, b_.getInt8(0));
      case DType::Float32: return x;
    }
    FJ_CHECK(false, "unknown dtype");
  }
  Value* to_storage(DType d, Value* x) {
    switch (d) {
      case DType::Bool: return b_.CreateZExt(x, b_.getInt8Ty());
      case DType::Float32: return x;
    }
    FJ_CHECK(false, "unknown dtype");
  }

  Value* f32(double x) { return llvm::ConstantFP::get(b_.getFloatTy(), static_cast<float>(x)); }
  Value* unary(llvm::Intrinsic::ID id, Value* x) {
    return b_.CreateUnaryIntrinsic(id, x);
  }

  Value* emit_node(const Node& n, const std::vector<Value*>& a) {
    switch (n.op) {
      case Op::Placeholder: FJ_CHECK(false, "placeholder handled by the caller");
      case Op::Scalar: return f32(n.scalar);
      case Op::ScalarInput: return scalar_input_.at(n.index);
      case Op::Add: return b_.CreateFAdd(a[0], a[1]);
      case Op::Sub: return b_.CreateFSub(a[0], a[1]);
      case Op::Mul: return b_.CreateFMul(a[0], a[1]);
      case Op::Div: return b_.CreateFDiv(a[0], a[1]);
      case Op::Neg: return b_.CreateFNeg(a[0]);
      case Op::Abs: return unary(llvm::Intrinsic::fabs, a[0]);
      case Op::Exp:
        return options_.vector_math ? math::exp(b_, a[0]) : unary(llvm::Intrinsic::exp, a[0]);
      case Op::Log:
        return options_.vector_math ? math::log(b_, a[0]) : unary(llvm::Intrinsic::log, a[0]);
      case Op::Sqrt: return unary(llvm::Intrinsic::sqrt, a[0]);
      case Op::Sin:
        return options_.vector_math ? math::sin(b_, a[0]) : unary(llvm::Intrinsic::sin, a[0]);
      case Op::Cos:
        return options_.vector_math ? math::cos(b_, a[0]) : unary(llvm::Intrinsic::cos, a[0]);
      case Op::Tanh:
        return options_.vector_math ? math::tanh(b_, a[0]) : call_tanhf(b_, m_, a[0]);
      case Op::Sigmoid:
        if (options_.vector_math) return math::sigmoid(b_, a[0]);
        return b_.CreateFDiv(f32(1), b_.CreateFAdd(f32(1), unary(llvm::Intrinsic::exp,
                                                                 b_.CreateFNeg(a[0]))));
      case Op::Relu:
        // x <= 0 is false for NaN, so NaN passes through as in eager.
        return b_.CreateSelect(b_.CreateFCmpOLE(a[0], f32(0)), f32(0), a[0]);
      case Op::Maximum: return b_.CreateBinaryIntrinsic(llvm::Intrinsic::maximum, a[0], a[1]);
      case Op::Minimum: return b_.CreateBinaryIntrinsic(llvm::Intrinsic::minimum, a[0], a[1]);
      case Op::Where: return b_.CreateSelect(a[0], a[1], a[2]);
      case Op::PowScalar: return emit_pow(n, a[0]);
      case Op::Eq: return b_.CreateFCmpOEQ(a[0], a[1]);
      case Op::Ne: return b_.CreateFCmpUNE(a[0], a[1]);
      case Op::Lt: return b_.CreateFCmpOLT(a[0], a[1]);
      case Op::Le: return b_.CreateFCmpOLE(a[0], a[1]);
      case Op::Gt: return b_.CreateFCmpOGT(a[0], a[1]);
      case Op::Ge: return b_.CreateFCmpOGE(a[0], a[1]);
    }
    FJ_CHECK(false, "unknown op");
  }

  // The exponents that eager PyTorch special-cases, then powf. A runtime exponent
  // (ScalarInput) always takes powf: the special cases need a constant.
  Value* emit_pow(const Node& n, Value* x) {
    const Node& e = g_.node(n.inputs[1]);
    if (e.op == Op::ScalarInput) {
      return b_.CreateBinaryIntrinsic(llvm::Intrinsic::pow, x, scalar_input_.at(e.index));
    }
    FJ_CHECK(e.op == Op::Scalar, "pow exponent must be a Scalar or ScalarInput node");
    const double p = e.scalar;
    if (p == 2) return b_.CreateFMul(x, x);
    if (p == 3) return b_.CreateFMul(b_.CreateFMul(x, x), x);
    if (p == 0.5) return unary(llvm::Intrinsic::sqrt, x);
    if (p == -1) return b_.CreateFDiv(f32(1), x);
    if (p == -2) return b_.CreateFDiv(f32(1), b_.CreateFMul(x, x));
    if (p == -0.5) return b_.CreateFDiv(f32(1), unary(llvm::Intrinsic::sqrt, x));
    if (p == 1) return x;
    if (p == 0) return f32(1);
    return b_.CreateBinaryIntrinsic(llvm::Intrinsic::pow, x, f32(p));
  }

  const Graph& g_;
  const KernelPlan& plan_;
  const LowerOptions& options_;
  llvm::LLVMContext& ctx_;
  llvm::Module& m_;
  llvm::IRBuilder<> b_;
  const size_t rank_, num_in_, num_buf_;
  llvm::Function* fn_ = nullptr;
  std::vector<Value*> base_, size_;
  std::vector<std::vector<Value*>> stride_;
  Value* contiguous_ = nullptr;
  std::map<int32_t, Value*> scalar_input_;  // ScalarInput index -> float, in the entry block
  llvm::MDNode* load_noalias_ = nullptr;
  std::vector<llvm::MDNode*> store_scope_, store_noalias_;
};

}  // namespace

std::vector<KernelPlan> plan_kernels(const Graph& graph, const std::string& symbol_prefix) {
  std::vector<KernelPlan> plans;
  const auto& outs = graph.outputs();
  for (size_t pos = 0; pos < outs.size(); ++pos) {
    const Node& n = graph.node(outs[pos]);
    FJ_CHECK(op_family(n.op) == Family::Pointwise,
             ("graph output %" + llvm::Twine(outs[pos]) + " is a placeholder or scalar").str());
    KernelPlan* plan = nullptr;
    for (KernelPlan& p : plans) {
      if (p.shape.size() == n.shape.size() && same_shape(graph.node(graph.outputs()[p.outputs.front()]).sym, n.sym)) plan = &p;
    }
    if (!plan) {
      plans.push_back(KernelPlan{(symbol_prefix + "_k" + llvm::Twine(plans.size())).str(), n.shape,
                                 {}, {}, {}});
      plan = &plans.back();
    }
    plan->outputs.push_back(pos);
  }
  for (KernelPlan& p : plans) {
    std::vector<NodeId> roots;
    for (size_t pos : p.outputs) roots.push_back(outs[pos]);
    const std::vector<bool> live = reachable(graph, roots);
    for (size_t id = 0; id < graph.size(); ++id) {
      const Node& n = graph.nodes()[id];
      if (!live[id] || n.op != Op::Placeholder) continue;
      p.inputs.push_back(n.index);
      // Broadcast in the last dim (dims align from the right): a 0-d input, or a
      // size-1 last dim against a wider loop.
      const bool bcast = !p.shape.empty() &&
                         (n.shape.empty() || (n.shape.back() == 1 && p.shape.back() != 1));
      p.inner_broadcast.push_back(bcast);
    }
  }
  return plans;
}

std::unique_ptr<llvm::Module> lower_kernels(const Graph& graph,
                                            const std::vector<KernelPlan>& plans,
                                            llvm::LLVMContext& ctx,
                                            const LowerOptions& options) {
  auto module = std::make_unique<llvm::Module>("framejit", ctx);
  for (const KernelPlan& plan : plans) KernelEmitter(graph, plan, *module, options).emit();
  return module;
}

}  // namespace fj::jit
