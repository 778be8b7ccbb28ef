// Vectorizable float32 math for the CPU kernels, emitted as plain LLVM IR
// (range reduction + polynomials, selects instead of branches), so that the loop
// vectorizer widens a loop with exp or tanh in it like any arithmetic.
//
// Each emitter takes a scalar float value and returns the result at the builder's
// insertion point; the loop vectorizer widens it with the rest of the loop body. The algorithms use llvm.fma and are only emitted when
// the target has FMA (the backend checks; otherwise it calls libm per lane).
// Accuracy (checked by tests/cpp/test_cpu_math.cpp against double-precision libm
// rounded to float, over dense sweeps and special values): every function within
// 2 ulp; NaN, +-inf, +-0, overflow, underflow and denormals as glibc gives them.
//
//   exp      n = round(x/ln2), r = x - n*ln2 (two-part Cody-Waite), degree-7
//            Taylor polynomial of e^r, scaled by 2^n as two exact power-of-two
//            factors (so denormal results are rounded once).
//   log      x = 2^e * m, m in [sqrt(1/2), sqrt(2)), f = m - 1, s = f/(2+f);
//            log1p(f) = f - (f^2/2 - s*(f^2/2 + R(s^2))), R from the atanh series.
//   sin/cos  n = round(x*2/pi), r = x - n*pi/2 (three-part Cody-Waite with fma),
//            Taylor polynomials of sin and cos on [-pi/4, pi/4], quadrant by n & 3.
//            |x| > 2^20, inf and NaN take glibc's sinf/cosf (a per-lane fix-up call
//            whose vector variants only leave the fast path when a lane needs it).
//   tanh     |x| < 0.625: x + x^3 P(x^2), P a near-minimax fit (Lawson-weighted
//            least squares); else 1 - 2/(e^{2|x|} + 1); sign copied from x.
//   sigmoid  t/(1+t) or 1/(1+t) with t = exp(-|x|), 1+t kept exact as a float pair
//            and one Newton step on the quotient. (Eager's 1/(1+exp(-x)) rounds to 0
//            for x < -88.7 where this gives the tiny true value; both are within the
//            end-to-end tolerance.)
#pragma once

namespace llvm {
class IRBuilderBase;
class Value;
}  // namespace llvm

namespace fj::jit::math {

llvm::Value* exp(llvm::IRBuilderBase& b, llvm::Value* x);
llvm::Value* log(llvm::IRBuilderBase& b, llvm::Value* x);
llvm::Value* sin(llvm::IRBuilderBase& b, llvm::Value* x);
llvm::Value* cos(llvm::IRBuilderBase& b, llvm::Value* x);
llvm::Value* tanh(llvm::IRBuilderBase& b, llvm::Value* x);
llvm::Value* sigmoid(llvm::IRBuilderBase& b, llvm::Value* x);

}  // namespace fj::jit::math
