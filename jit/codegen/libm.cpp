// libm-free float32 erf, expm1, log1p, pow and large-argument sin/cos for the
// NVPTX kernels (algorithms in jit/codegen/libm.h).
#include "jit/codegen/libm.h"

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/Module.h>

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <vector>

#include "jit/codegen/math.h"

namespace fj::jit::math {
namespace {

using llvm::Value;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// erf(x)/x as a polynomial in x^2 on [0, 1].
constexpr double kErfSmall[] = {0x1.20dd750400df4p+0,  -0x1.8127465ff2914p-2, 0x1.ce2f07a245e76p-4,
                                -0x1.b829a85b6f550p-6, 0x1.5628f4d353490p-8,  -0x1.bcbee23dabe80p-11,
                                0x1.d8280e5242c00p-14, -0x1.43872c9aa2000p-17};
// log(erfc(x)) as a polynomial in x on [1, 3.92].
constexpr double kErfLarge[] = {0x1.20a35fc2f1769p-14, -0x1.20fba449c63cep+0, -0x1.453e8ae913e1ap-1,
                                -0x1.aee0753d86484p-4, 0x1.66ba3e58b0975p-6,  -0x1.f3d6c23b447e1p-10,
                                -0x1.55dc5a8e4fad8p-11, 0x1.5e15d6f1c5b50p-12, -0x1.4391fc0df2100p-14,
                                0x1.642fd21aba000p-17, -0x1.c185391f80000p-21, 0x1.f7b3bdc000000p-26};
// For erf_via_double: erf(x)/x as a polynomial in x^2 on [0, 1] (relative error
// 2e-14; the constant term is 2/sqrt(pi) itself, so tiny x round as x * 2/sqrt(pi)),
// and log(erfc(a)) on [1, 3.92] as a polynomial in t = (2a - 4.92) / 2.92,
// t in [-1, 1] (absolute error 3e-13); both Chebyshev least-squares fits in double.
constexpr double kErfSmallD[] = {0x1.20dd750429b6dp+0, -0x1.812746b025930p-2, 0x1.ce2f219708671p-4, -0x1.b82ce13e7eb0dp-6, 0x1.565b9dd6264fbp-8, -0x1.c02834bfdfb5bp-11, 0x1.f93ec8ff7190ap-14, -0x1.f0590311ff8fbp-17, 0x1.9a7d6b4c78a58p-20, -0x1.c045ec1880cefp-24};
constexpr double kErfLargeD[] = {-0x1.e607a923c8140p+2, -0x1.ed1a86a874c8bp+2, -0x1.012cdcae64dc8p+1, -0x1.1dd47770ed35bp-5, 0x1.4f3a8d91872e0p-7, -0x1.7e752db7c71fap-9, 0x1.99b36ce0d0136p-11, -0x1.8b57ca459fe1cp-13, 0x1.3be35a4943dd9p-15, -0x1.2de4353131778p-18, -0x1.a21f1a971b8eap-21, 0x1.a7d9f57896bdbp-21, -0x1.9532a8255958ap-22, 0x1.408bc261218b2p-23, -0x1.223ddb094e47fp-25};
// 2/pi, 32 bits a word from the binary point on (224 bits).
constexpr uint32_t kTwoOverPiBits[] = {0xa2f9836e, 0x4e441529, 0xfc2757d1, 0xf534ddc0,
                                       0xdb629599, 0x3c439041, 0xfe5163ab};
constexpr double kLn2Hi = 0x1.62e42fefa39efp-1;
constexpr double kLn2Lo = 0x1.abc9e3b39803fp-56;
constexpr double kPio2Over2p64 = 0x1.921fb54442d18p-64;

// Helpers over one scalar type (float or double).
struct Emit {
  llvm::IRBuilderBase& b;
  llvm::Type* t;
  Value* c(double v) const { return llvm::ConstantFP::get(t, v); }
  Value* fma(Value* x, Value* y, Value* z) const {
    return b.CreateIntrinsic(llvm::Intrinsic::fma, {t}, {x, y, z});
  }
  template <class Coeffs>
  Value* poly(Value* z, const Coeffs& cs) const {  // cs[0] + z*(cs[1] + ...)
    const std::vector<double> v(std::begin(cs), std::end(cs));
    Value* acc = c(v.back());
    for (size_t k = v.size() - 1; k-- > 0;) acc = fma(acc, z, c(v[k]));
    return acc;
  }
  Value* poly(Value* z, std::initializer_list<double> cs) const { return poly<std::initializer_list<double>>(z, cs); }
  Value* fabs(Value* x) const { return b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x); }
  Value* is_nan(Value* x) const { return b.CreateFCmpUNO(x, x); }
};

// 1/k! for k = 0..n.
std::vector<double> taylor_exp(int n) {
  std::vector<double> c(static_cast<size_t>(n) + 1, 1.0);
  for (int k = 1; k <= n; ++k) c[static_cast<size_t>(k)] = c[static_cast<size_t>(k) - 1] / k;
  return c;
}

// log(x) in double for a positive finite double x (the caller handles 0, inf, NaN).
Value* log_double(const Emit& e, Value* x) {
  auto& b = e.b;
  auto* i64 = b.getInt64Ty();
  Value* bits = b.CreateBitCast(x, i64);
  // x = 2^k m, m in [sqrt(1/2), sqrt(2)): 0x3fe6a09e667f3bcd is sqrt(1/2)'s bits.
  Value* k = b.CreateAShr(b.CreateSub(bits, b.getInt64(0x3fe6a09e667f3bcdLL)), b.getInt64(52));
  Value* m = b.CreateBitCast(b.CreateSub(bits, b.CreateShl(k, b.getInt64(52))), e.t);
  Value* f = b.CreateFSub(m, e.c(1.0));
  Value* s = b.CreateFDiv(f, b.CreateFAdd(f, e.c(2.0)));
  Value* z = b.CreateFMul(s, s);
  // log(m) = 2 atanh(s) = 2s (1 + z/3 + z^2/5 + ...), |s| <= 0.172: 12 terms.
  std::vector<double> series;
  for (int j = 0; j < 12; ++j) series.push_back(1.0 / (2 * j + 1));
  Value* lm = b.CreateFMul(b.CreateFAdd(s, s), e.poly(z, series));
  Value* kf = b.CreateSIToFP(k, e.t);
  return e.fma(kf, e.c(kLn2Hi), e.fma(kf, e.c(kLn2Lo), lm));
}

// e^t in double, for the float result of pow: t is clamped to [-200, 200] (float
// underflows / overflows well inside); NaN stays NaN.
Value* exp_double(const Emit& e, Value* t) {
  auto& b = e.b;
  Value* nan = e.is_nan(t);
  Value* tc = b.CreateSelect(nan, e.c(0.0), b.CreateMinNum(b.CreateMaxNum(t, e.c(-200.0)), e.c(200.0)));
  Value* n = b.CreateUnaryIntrinsic(llvm::Intrinsic::rint, b.CreateFMul(tc, e.c(1.4426950408889634)));
  Value* r = e.fma(b.CreateFNeg(n), e.c(kLn2Hi), tc);
  r = e.fma(b.CreateFNeg(n), e.c(kLn2Lo), r);  // |r| <= 0.35: degree 13 suffices
  Value* p = e.poly(r, taylor_exp(13));
  Value* ni = b.CreateFPToSI(n, b.getInt64Ty());
  Value* scale = b.CreateBitCast(b.CreateShl(b.CreateAdd(ni, b.getInt64(1023)), b.getInt64(52)), e.t);
  return b.CreateSelect(nan, t, b.CreateFMul(p, scale));
}

}  // namespace

Value* erf(llvm::IRBuilderBase& b, Value* x) {
  const Emit e{b, x->getType()};
  Value* a = e.fabs(x);
  Value* small = b.CreateFMul(a, e.poly(b.CreateFMul(a, a), kErfSmall));
  Value* large = b.CreateFSub(e.c(1.0), math::exp(b, e.poly(a, kErfLarge)));
  Value* r = b.CreateSelect(b.CreateFCmpOLT(a, e.c(1.0)), small, large);  // NaN: large, NaN
  r = b.CreateSelect(b.CreateFCmpOGE(a, e.c(3.92)), e.c(1.0), r);
  return b.CreateBinaryIntrinsic(llvm::Intrinsic::copysign, r, x);
}

Value* erf_via_double(llvm::IRBuilderBase& b, Value* x) {
  const Emit e{b, b.getDoubleTy()};
  Value* xd = b.CreateFPExt(x, b.getDoubleTy());
  Value* a = e.fabs(xd);
  Value* small = b.CreateFMul(a, e.poly(b.CreateFMul(a, a), kErfSmallD));
  Value* t = e.fma(a, e.c(2.0 / 2.92), e.c(-4.92 / 2.92));
  Value* large = b.CreateFSub(e.c(1.0), exp_double(e, e.poly(t, kErfLargeD)));
  Value* r = b.CreateSelect(b.CreateFCmpOLT(a, e.c(1.0)), small, large);  // NaN: large, NaN
  r = b.CreateSelect(b.CreateFCmpOGE(a, e.c(3.92)), e.c(1.0), r);  // erf rounds to 1 there
  return b.CreateFPTrunc(b.CreateBinaryIntrinsic(llvm::Intrinsic::copysign, r, xd), x->getType());
}

Value* expm1(llvm::IRBuilderBase& b, Value* x) {
  const Emit e{b, x->getType()};
  std::vector<double> c = taylor_exp(11);  // x (1 + x/2 + x^2/6 + ...)
  c.erase(c.begin());
  Value* small = b.CreateFMul(x, e.poly(x, c));
  Value* large = b.CreateFSub(math::exp(b, x), e.c(1.0));
  return b.CreateSelect(b.CreateFCmpOLT(e.fabs(x), e.c(1.0)), small, large);
}

Value* log1p(llvm::IRBuilderBase& b, Value* x) {
  const Emit e{b, x->getType()};
  Value* u = b.CreateFAdd(e.c(1.0), x);
  Value* q = b.CreateFMul(math::log(b, u), b.CreateFDiv(x, b.CreateFSub(u, e.c(1.0))));
  Value* r = b.CreateSelect(b.CreateFCmpOEQ(u, e.c(1.0)), x, q);
  return b.CreateSelect(b.CreateFCmpOEQ(x, e.c(kInf)), x, r);
}

Value* pow(llvm::IRBuilderBase& b, Value* x, Value* y) {
  const Emit f{b, x->getType()};
  const Emit d{b, b.getDoubleTy()};
  Value* ax = b.CreateFPExt(f.fabs(x), d.t);
  Value* yd = b.CreateFPExt(y, d.t);
  // log|x|: 0 -> -inf, inf -> inf, NaN -> NaN.
  Value* lx = log_double(d, b.CreateSelect(b.CreateFCmpOGT(ax, d.c(0.0)), ax, d.c(1.0)));
  lx = b.CreateSelect(b.CreateFCmpOEQ(ax, d.c(0.0)), d.c(-kInf), lx);
  lx = b.CreateSelect(b.CreateFCmpOEQ(ax, d.c(kInf)), d.c(kInf), lx);
  lx = b.CreateSelect(d.is_nan(ax), ax, lx);
  Value* mag = b.CreateFPTrunc(exp_double(d, b.CreateFMul(yd, lx)), f.t);
  // The exponent's integer-ness: infinities count as even integers.
  Value* y_int = b.CreateFCmpOEQ(b.CreateUnaryIntrinsic(llvm::Intrinsic::trunc, y), y);
  Value* small_y = b.CreateFCmpOLT(f.fabs(y), f.c(0x1p24));
  Value* yi = b.CreateFPToSI(b.CreateSelect(small_y, y, f.c(0.0)), b.getInt32Ty());
  Value* y_odd = b.CreateAnd(b.CreateAnd(y_int, small_y), b.CreateTrunc(yi, b.getInt1Ty()));
  Value* x_neg = b.CreateICmpSLT(b.CreateBitCast(x, b.getInt32Ty()), b.getInt32(0));  // -0 too
  Value* r = b.CreateSelect(b.CreateAnd(x_neg, y_odd), b.CreateFNeg(mag), mag);
  // A negative finite base and a finite non-integer exponent: NaN.
  Value* x_fin_neg = b.CreateAnd(b.CreateFCmpOLT(x, f.c(0.0)), b.CreateFCmpONE(x, f.c(-kInf)));
  Value* y_fin_frac = b.CreateAnd(b.CreateNot(y_int), b.CreateFCmpONE(f.fabs(y), f.c(kInf)));
  r = b.CreateSelect(b.CreateAnd(x_fin_neg, y_fin_frac), f.c(kNaN), r);
  // (-1) ** +-inf, 1 ** anything, anything ** 0: 1.
  Value* one = b.CreateOr(b.CreateAnd(b.CreateFCmpOEQ(x, f.c(-1.0)), b.CreateFCmpOEQ(f.fabs(y), f.c(kInf))),
                          b.CreateOr(b.CreateFCmpOEQ(x, f.c(1.0)), b.CreateFCmpOEQ(y, f.c(0.0))));
  return b.CreateSelect(one, f.c(1.0), r);
}

llvm::Function* trig_large(llvm::Module& m, bool is_cos) {
  const char* name = is_cos ? "fj_nvptx_cos_large" : "fj_nvptx_sin_large";
  if (llvm::Function* fn = m.getFunction(name)) return fn;
  llvm::LLVMContext& ctx = m.getContext();
  auto* f32 = llvm::Type::getFloatTy(ctx);
  auto* fn = llvm::Function::Create(llvm::FunctionType::get(f32, {f32}, false),
                                    llvm::Function::InternalLinkage, name, m);
  fn->addFnAttr(llvm::Attribute::NoUnwind);
  fn->setDoesNotAccessMemory();
  llvm::IRBuilder<> b(llvm::BasicBlock::Create(ctx, "entry", fn));
  const Emit f{b, f32};
  auto* i64 = b.getInt64Ty();
  Value* x = fn->getArg(0);
  // |x| = M 2^e, M < 2^24 an integer (x normal: |x| > 2^20 here).
  Value* bits = b.CreateZExt(b.CreateBitCast(x, b.getInt32Ty()), i64);
  Value* e = b.CreateSub(b.CreateAnd(b.CreateLShr(bits, b.getInt64(23)), b.getInt64(0xff)), b.getInt64(150));
  Value* mant = b.CreateOr(b.CreateAnd(bits, b.getInt64(0x7fffff)), b.getInt64(0x800000));
  // |x| * 2/pi mod 4 needs the bits b_k of 2/pi for k in [e - 1, e + 95) (earlier ones
  // add multiples of 4; later ones less than 2^-70). With one zero word in front of
  // the table they start at bit o = e + 30 (0-based); e >= -3 here, e <= 104.
  Value* o = b.CreateAdd(e, b.getInt64(30));
  o = b.CreateSelect(b.CreateICmpSLT(o, b.getInt64(0)), b.getInt64(0), o);
  Value* w = b.CreateLShr(o, b.getInt64(5));
  Value* sh = b.CreateAnd(o, b.getInt64(31));
  auto word = [&](int k) {  // table word w + k (selects: no memory, no address space)
    Value* v = b.getInt64(0);
    for (int j = 0; j < 8; ++j) {
      const uint64_t tw = j == 0 ? 0 : kTwoOverPiBits[j - 1];
      if (j - k < 0) continue;
      v = b.CreateSelect(b.CreateICmpEQ(w, b.getInt64(j - k)), b.getInt64(tw), v);
    }
    return v;
  };
  Value* t0 = word(0);
  Value* t1 = word(1);
  Value* t2 = word(2);
  Value* t3 = word(3);
  Value* mask32 = b.getInt64(0xffffffff);
  Value* rsh = b.CreateSub(b.getInt64(32), sh);  // 32 when sh == 0: the term is 0
  auto window = [&](Value* hi, Value* lo) {
    return b.CreateAnd(b.CreateOr(b.CreateShl(hi, sh), b.CreateLShr(lo, rsh)), mask32);
  };
  Value* w0 = window(t0, t1);
  Value* w1 = window(t1, t2);
  Value* w2 = window(t2, t3);
  // M * (w0 w1 w2) mod 2^96 as hi32:lo64.
  Value* p0 = b.CreateMul(mant, w0);
  Value* p1 = b.CreateMul(mant, w1);
  Value* p2 = b.CreateMul(mant, w2);
  Value* p1_lo = b.CreateShl(p1, b.getInt64(32));
  Value* lo = b.CreateAdd(p2, p1_lo);
  Value* carry = b.CreateZExt(b.CreateICmpULT(lo, p2), i64);
  Value* hi = b.CreateAnd(b.CreateAdd(b.CreateAdd(p0, b.CreateLShr(p1, b.getInt64(32))), carry), mask32);
  // Quadrant: the top two bits; the fraction: the next 64 bits, read as signed so
  // that a fraction >= 1/2 becomes fraction - 1 with the quadrant rounded up.
  Value* q = b.CreateLShr(hi, b.getInt64(30));
  Value* frac = b.CreateOr(b.CreateShl(b.CreateAnd(hi, b.getInt64(0x3fffffff)), b.getInt64(34)),
                           b.CreateLShr(lo, b.getInt64(30)));
  q = b.CreateAdd(q, b.CreateLShr(frac, b.getInt64(63)));
  Value* r = b.CreateFPTrunc(b.CreateFMul(b.CreateSIToFP(frac, b.getDoubleTy()),
                                          llvm::ConstantFP::get(b.getDoubleTy(), kPio2Over2p64)),
                             f32);
  // The polynomials of jit/codegen/math.h on |r| <= pi/4 (their large-argument fix-up
  // call is dropped: it returns its fast value there).
  auto reduced = [&](bool cos) {
    Value* v = cos ? math::cos(b, r) : math::sin(b, r);
    if (auto* call = llvm::dyn_cast<llvm::CallInst>(v)) {
      Value* fast = call->getArgOperand(1);
      call->eraseFromParent();
      return fast;
    }
    return v;
  };
  Value* s = reduced(false);
  Value* c = reduced(true);
  // sin(|x|) = [S, C, -S, -C][q & 3]; cos(|x|) = sin(|x| + pi/2); sin is odd.
  Value* k = is_cos ? b.CreateAdd(q, b.getInt64(1)) : q;
  Value* v = b.CreateSelect(b.CreateICmpNE(b.CreateAnd(k, b.getInt64(1)), b.getInt64(0)), c, s);
  Value* neg = b.CreateICmpNE(b.CreateAnd(k, b.getInt64(2)), b.getInt64(0));
  if (!is_cos) neg = b.CreateXor(neg, b.CreateFCmpOLT(x, f.c(0.0)));
  v = b.CreateSelect(neg, b.CreateFNeg(v), v);
  // inf and NaN: NaN.
  Value* finite = b.CreateFCmpOLT(f.fabs(x), f.c(kInf));
  b.CreateRet(b.CreateSelect(finite, v, b.CreateFSub(x, x)));
  return fn;
}

}  // namespace fj::jit::math
