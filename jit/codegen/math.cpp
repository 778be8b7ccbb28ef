// Vectorizable float32 exp, log, sin, cos, tanh and sigmoid as LLVM IR (see
// jit/codegen/math.h for the algorithms and the accuracy contract).
#include "jit/codegen/math.h"

#include <llvm/ADT/Twine.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/Module.h>
#include <llvm/Transforms/Utils/ModuleUtils.h>

#include <initializer_list>
#include <limits>
#include <string>
#include <vector>

namespace fj::jit::math {
namespace {

using llvm::Value;

// Constants. Splits of ln2 and pi/2 into floats (hi + lo [+ lo2]) were computed
// exactly from the decimal expansions; the polynomial coefficients are Taylor's
// except for tanh's fit.
constexpr float kRoundMagic = 0x1.8p23f;  // adding it rounds |v| < 2^22 to an integer
constexpr float kLog2e = 0x1.715476p+0f;
constexpr float kLn2Hi = 0x1.62e430p-1f;
constexpr float kLn2Lo = -0x1.05c610p-29f;
constexpr float kTwoOverPi = 0x1.45f306p-1f;
constexpr float kPio2Hi = 0x1.921fb6p+0f;
constexpr float kPio2Mid = -0x1.777a5cp-25f;
constexpr float kPio2Lo = -0x1.ee59dap-50f;
// Beyond this |x| the float Cody-Waite reduction loses accuracy: glibc takes over.
constexpr float kTrigFastLimit = 0x1p20f;
constexpr unsigned kFixupWidths[] = {4, 8, 16};

// Typed helpers over a float or <N x float> type and its i32 counterpart.
class Emit {
 public:
  Emit(llvm::IRBuilderBase& b, llvm::Type* type)
      : b(b), f(type), i(type->getWithNewType(b.getInt32Ty())) {}

  Value* c(double v) const { return llvm::ConstantFP::get(f, v); }
  Value* ci(int64_t v) const { return llvm::ConstantInt::get(i, static_cast<uint64_t>(v), true); }
  Value* fma(Value* x, Value* y, Value* z) const {
    return b.CreateIntrinsic(llvm::Intrinsic::fma, {f}, {x, y, z});
  }
  // c[0] + z*(c[1] + z*(c[2] + ...)), by Horner with fma.
  Value* poly(Value* z, std::initializer_list<double> coeffs) const {
    const std::vector<double> cs(coeffs);
    Value* acc = c(cs.back());
    for (size_t k = cs.size() - 1; k-- > 0;) acc = fma(acc, z, c(cs[k]));
    return acc;
  }
  Value* bits(Value* x) const { return b.CreateBitCast(x, i); }
  Value* from_bits(Value* x) const { return b.CreateBitCast(x, f); }
  Value* fabs(Value* x) const { return b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x); }
  Value* is_nan(Value* x) const { return b.CreateFCmpUNO(x, x); }
  // Rounds v (|v| < 2^22) to the nearest integer n: returns {n as float, n as i32}.
  std::pair<Value*, Value*> round_to_int(Value* t_plus_magic) const {
    Value* n = b.CreateFSub(t_plus_magic, c(kRoundMagic));
    Value* ni = b.CreateSub(bits(t_plus_magic), bits(c(kRoundMagic)));
    return {n, ni};
  }

  llvm::IRBuilderBase& b;
  llvm::Type* f;
  llvm::Type* i;
};

Value* exp_impl(const Emit& e, Value* x) {
  auto& b = e.b;
  // Below -104 the result is under half the smallest denormal (0), above 89 it is
  // inf: clamping keeps n in [-150, 128]. NaN is restored at the end.
  Value* xc = b.CreateMinNum(b.CreateMaxNum(x, e.c(-104.0)), e.c(89.0));
  auto [n, ni] = e.round_to_int(e.fma(xc, e.c(kLog2e), e.c(kRoundMagic)));
  Value* r = e.fma(n, e.c(-kLn2Hi), xc);  // exact
  r = e.fma(n, e.c(-kLn2Lo), r);
  // e^r = 1 + r + r^2 (1/2 + r/6 + ... + r^5/5040), |r| <= 0.35.
  Value* q = e.poly(r, {1.0 / 2, 1.0 / 6, 1.0 / 24, 1.0 / 120, 1.0 / 720, 1.0 / 5040});
  Value* p = b.CreateFAdd(e.fma(b.CreateFMul(r, r), q, r), e.c(1.0));
  // 2^n = 2^h * 2^(n-h), both normal for n in [-150, 128]; the second product is
  // the only inexact one, so a denormal result is rounded once.
  Value* h = b.CreateAShr(ni, e.ci(1));
  Value* s1 = e.from_bits(b.CreateShl(b.CreateAdd(h, e.ci(127)), e.ci(23)));
  Value* s2 = e.from_bits(b.CreateShl(b.CreateAdd(b.CreateSub(ni, h), e.ci(127)), e.ci(23)));
  Value* out = b.CreateFMul(b.CreateFMul(p, s1), s2);
  return b.CreateSelect(e.is_nan(x), x, out);
}

Value* log_impl(const Emit& e, Value* x) {
  auto& b = e.b;
  // Denormals: scale into the normal range first.
  Value* denormal = b.CreateFCmpOLT(x, e.c(0x1p-126));
  Value* xs = b.CreateSelect(denormal, b.CreateFMul(x, e.c(0x1p23)), x);
  Value* ib = e.bits(xs);
  // x = 2^k * m with m in [sqrt(1/2), sqrt(2)): 0x3f3504f3 is sqrt(1/2)'s bits.
  Value* k = b.CreateAShr(b.CreateSub(ib, e.ci(0x3f3504f3)), e.ci(23));
  Value* m = e.from_bits(b.CreateSub(ib, b.CreateShl(k, e.ci(23))));
  Value* kf = b.CreateFAdd(b.CreateSIToFP(k, e.f), b.CreateSelect(denormal, e.c(-23.0), e.c(0.0)));
  Value* f = b.CreateFSub(m, e.c(1.0));  // exact
  Value* s = b.CreateFDiv(f, b.CreateFAdd(f, e.c(2.0)));
  Value* z = b.CreateFMul(s, s);
  // log1p(f) = 2 atanh(s) = 2s + s R(z); 2s = f - s f, s f = hfsq (1 - s).
  Value* R = b.CreateFMul(z, e.poly(z, {2.0 / 3, 2.0 / 5, 2.0 / 7, 2.0 / 9}));
  Value* hfsq = b.CreateFMul(e.c(0.5), b.CreateFMul(f, f));
  Value* log1p = b.CreateFSub(f, e.fma(b.CreateFNeg(s), b.CreateFAdd(hfsq, R), hfsq));
  Value* out = e.fma(kf, e.c(kLn2Hi), e.fma(kf, e.c(kLn2Lo), log1p));
  const double inf = std::numeric_limits<double>::infinity();
  out = b.CreateSelect(b.CreateFCmpOEQ(x, e.c(inf)), e.c(inf), out);
  out = b.CreateSelect(b.CreateFCmpOEQ(x, e.c(0.0)), e.c(-inf), out);
  out = b.CreateSelect(b.CreateFCmpOLT(x, e.c(0.0)),
                       e.c(std::numeric_limits<double>::quiet_NaN()), out);
  return b.CreateSelect(e.is_nan(x), x, out);
}

// The scalar libm function `name` (sinf, cosf), declared as not touching memory
// (errno is not observed), as LLVM's own llvm.sin is.
llvm::Function* libm(llvm::Module& m, const std::string& name) {
  if (llvm::Function* f = m.getFunction(name)) return f;
  auto* f32 = llvm::Type::getFloatTy(m.getContext());
  auto* fn = llvm::Function::Create(llvm::FunctionType::get(f32, {f32}, false),
                                    llvm::Function::ExternalLinkage, name, m);
  fn->addFnAttr(llvm::Attribute::NoUnwind);
  fn->addFnAttr(llvm::Attribute::WillReturn);
  fn->setDoesNotAccessMemory();
  return fn;
}

// fj_<name>_fixup(x, fast) = |x| <= kTrigFastLimit ? fast : name(x), with vector
// variants (VFABI) that test all lanes at once and only then call libm per lane.
// Kept out of line (noinline) until the vectorizer has picked the variant.
llvm::Function* fixup_function(llvm::Module& m, const std::string& name) {
  const std::string scalar_name = "fj_" + name + "_fixup";
  if (llvm::Function* f = m.getFunction(scalar_name)) return f;
  llvm::LLVMContext& ctx = m.getContext();
  llvm::Function* slow = libm(m, name);
  auto make = [&](llvm::Type* t, const std::string& fn_name) {
    auto* fn = llvm::Function::Create(llvm::FunctionType::get(t, {t, t}, false),
                                      llvm::Function::InternalLinkage, fn_name, m);
    fn->addFnAttr(llvm::Attribute::NoUnwind);
    fn->addFnAttr(llvm::Attribute::WillReturn);
    fn->addFnAttr(llvm::Attribute::NoInline);
    fn->setDoesNotAccessMemory();
    llvm::IRBuilder<> b(llvm::BasicBlock::Create(ctx, "entry", fn));
    Emit e(b, t);
    Value* x = fn->getArg(0);
    Value* fast = fn->getArg(1);
    Value* ok = b.CreateFCmpOLE(e.fabs(x), e.c(kTrigFastLimit));
    Value* all_ok = t->isVectorTy() ? b.CreateAndReduce(ok) : ok;
    auto* fast_bb = llvm::BasicBlock::Create(ctx, "fast", fn);
    auto* slow_bb = llvm::BasicBlock::Create(ctx, "slow", fn);
    b.CreateCondBr(all_ok, fast_bb, slow_bb);
    b.SetInsertPoint(fast_bb);
    b.CreateRet(fast);
    b.SetInsertPoint(slow_bb);
    if (auto* vt = llvm::dyn_cast<llvm::FixedVectorType>(t)) {
      Value* out = fast;
      for (unsigned lane = 0; lane < vt->getNumElements(); ++lane) {
        Value* libm_lane = b.CreateCall(slow, {b.CreateExtractElement(x, lane)});
        Value* pick = b.CreateSelect(b.CreateExtractElement(ok, lane),
                                     b.CreateExtractElement(fast, lane), libm_lane);
        out = b.CreateInsertElement(out, pick, lane);
      }
      b.CreateRet(out);
    } else {
      b.CreateRet(b.CreateCall(slow, {x}));
    }
    return fn;
  };
  llvm::Function* scalar = make(llvm::Type::getFloatTy(ctx), scalar_name);
  std::vector<llvm::GlobalValue*> variants;
  for (unsigned width : kFixupWidths) {
    variants.push_back(make(llvm::FixedVectorType::get(llvm::Type::getFloatTy(ctx), width),
                            scalar_name + "_v" + std::to_string(width)));
  }
  llvm::appendToCompilerUsed(m, variants);  // alive until the vectorizer has run
  return scalar;
}

Value* call_fixup(llvm::IRBuilderBase& b, const std::string& name, Value* x, Value* fast) {
  llvm::Module& m = *b.GetInsertBlock()->getModule();
  llvm::Function* fn = fixup_function(m, name);
  llvm::CallInst* call = b.CreateCall(fn, {x, fast});
  std::string names;
  for (unsigned width : kFixupWidths) {
    if (!names.empty()) names += ",";
    names += "_ZGV_LLVM_N" + std::to_string(width) + "vv_" + fn->getName().str() + "(" +
             fn->getName().str() + "_v" + std::to_string(width) + ")";
  }
  call->addFnAttr(llvm::Attribute::get(m.getContext(), "vector-function-abi-variant", names));
  return call;
}

Value* sincos_impl(const Emit& e, Value* x, bool is_cos) {
  auto& b = e.b;
  auto [n, q] = e.round_to_int(e.fma(x, e.c(kTwoOverPi), e.c(kRoundMagic)));
  Value* r = e.fma(n, e.c(-kPio2Hi), x);
  r = e.fma(n, e.c(-kPio2Mid), r);
  r = e.fma(n, e.c(-kPio2Lo), r);
  Value* z = b.CreateFMul(r, r);
  Value* sin_r = e.fma(b.CreateFMul(r, z),
                       e.poly(z, {-1.0 / 6, 1.0 / 120, -1.0 / 5040, 1.0 / 362880}), r);
  Value* cos_r = e.fma(z, e.poly(z, {-1.0 / 2, 1.0 / 24, -1.0 / 720, 1.0 / 40320,
                                     -1.0 / 3628800}), e.c(1.0));
  // Quadrant k: sin(x) = [S, C, -S, -C][k & 3]; cos(x) = sin(x + pi/2).
  Value* k = is_cos ? b.CreateAdd(q, e.ci(1)) : q;
  Value* swap = b.CreateICmpNE(b.CreateAnd(k, e.ci(1)), e.ci(0));
  Value* v = b.CreateSelect(swap, cos_r, sin_r);
  Value* sign = b.CreateShl(b.CreateAnd(k, e.ci(2)), e.ci(30));
  v = e.from_bits(b.CreateXor(e.bits(v), sign));
  if (!is_cos) v = b.CreateSelect(b.CreateFCmpOEQ(x, e.c(0.0)), x, v);  // sin(-0) = -0
  return call_fixup(b, is_cos ? "cosf" : "sinf", x, v);
}

Value* tanh_impl(const Emit& e, Value* x) {
  auto& b = e.b;
  Value* a = e.fabs(x);
  Value* z = b.CreateFMul(a, a);
  Value* p = e.poly(z, {-0x1.555554p-2, 0x1.111066p-3, -0x1.b9ee90p-5, 0x1.638b5ap-6,
                        -0x1.0bf502p-7, 0x1.18e1eep-9});
  Value* small = e.fma(b.CreateFMul(a, z), p, a);
  // 1 - 2/(e^{2a} + 1): e^{2a} = inf for large a gives exactly 1.
  Value* e2a = exp_impl(e, b.CreateFAdd(a, a));
  Value* large = b.CreateFSub(e.c(1.0), b.CreateFDiv(e.c(2.0), b.CreateFAdd(e2a, e.c(1.0))));
  Value* out = b.CreateSelect(b.CreateFCmpOLT(a, e.c(0.625)), small, large);
  return b.CreateBinaryIntrinsic(llvm::Intrinsic::copysign, out, x);  // NaN stays NaN
}

}  // namespace

Value* exp(llvm::IRBuilderBase& b, Value* x) { return exp_impl(Emit(b, x->getType()), x); }
Value* log(llvm::IRBuilderBase& b, Value* x) { return log_impl(Emit(b, x->getType()), x); }
Value* sin(llvm::IRBuilderBase& b, Value* x) { return sincos_impl(Emit(b, x->getType()), x, false); }
Value* cos(llvm::IRBuilderBase& b, Value* x) { return sincos_impl(Emit(b, x->getType()), x, true); }
Value* tanh(llvm::IRBuilderBase& b, Value* x) { return tanh_impl(Emit(b, x->getType()), x); }

// sigmoid(x) = num / (1 + t), t = e^{-|x|} in (0, 1], num = 1 (x >= 0) or t (x < 0).
// 1 + t is carried as d + d_lo (Fast2Sum: exact) and the quotient gets one Newton
// step, so the error is exp's (damped) plus one rounding. Unlike the plain formula
// 1/(1 + exp(-x)) (eager's), large negative x gives the tiny true value, not 0.
Value* sigmoid(llvm::IRBuilderBase& b, Value* x) {
  const Emit e(b, x->getType());
  Value* t = exp_impl(e, b.CreateFNeg(e.fabs(x)));
  Value* num = b.CreateSelect(b.CreateFCmpOLT(x, e.c(0.0)), t, e.c(1.0));
  Value* d = b.CreateFAdd(e.c(1.0), t);
  Value* d_lo = b.CreateFSub(t, b.CreateFSub(d, e.c(1.0)));
  Value* rcp = b.CreateFDiv(e.c(1.0), d);
  Value* q = b.CreateFMul(num, rcp);
  Value* residual = b.CreateFSub(e.fma(b.CreateFNeg(q), d, num), b.CreateFMul(q, d_lo));
  return e.fma(residual, rcp, q);  // NaN: t is NaN
}

}  // namespace fj::jit::math
