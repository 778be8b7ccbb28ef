// float32 math for the NVPTX kernels that the CPU path takes from libm (erff,
// expm1f, log1pf, powf, and sinf/cosf beyond |x| = 2^20), as plain LLVM IR: the
// GPU has no libm and framejit links no libdevice. exp, log, sin, cos, tanh and
// sigmoid come from jit/codegen/math.h, which already emits plain IR.
//
//   erf    |x| < 1: x P(x^2), P a relative-error fit (Lawson-weighted least
//          squares, degree 7); 1 <= |x| < 3.92: 1 - exp(Q(|x|)), Q a fit of
//          log(erfc) (degree 11); beyond: 1. Sign copied from x. Within ~3 ulp.
//   expm1  |x| < 1: Taylor polynomial of degree 11; else exp(x) - 1.
//   log1p  u = 1 + x; x where u == 1, else log(u) * x / (u - 1) (the rounding of
//          u cancels in the quotient).
//   pow    exp(y log|x|) in double (log by the atanh series, exp by Taylor with
//          a two-part ln2), rounded once to float; the IEEE special cases (zero,
//          infinite and negative bases, integer and odd exponents) as C's powf.
//   sin/cos of |x| > 2^20, inf, NaN: Payne-Hanek reduction with 96 bits of 2/pi
//          chosen by the exponent (integer arithmetic in i64), then the
//          jit/codegen/math.h polynomials on the reduced argument.
// Accuracy is tested on the CPU (these are plain IR): tests/cpp/test_nvptx.cpp.
#pragma once

#include "jit/common.h"

namespace llvm {
class Function;
class IRBuilderBase;
class Module;
class Value;
}  // namespace llvm

namespace fj::jit::math {

llvm::Value* erf(llvm::IRBuilderBase& b, llvm::Value* x);
// float32 erf evaluated in double with the structure of erf() above but fits good
// to 3e-13, then rounded once to float: correctly rounded except where the true
// value lies within ~1e-13 of a rounding boundary, like glibc's double erf rounded
// to float, and vectorizable (the CPU's float32 erf and gelu use it).
llvm::Value* erf_via_double(llvm::IRBuilderBase& b, llvm::Value* x);
llvm::Value* expm1(llvm::IRBuilderBase& b, llvm::Value* x);
llvm::Value* log1p(llvm::IRBuilderBase& b, llvm::Value* x);
llvm::Value* pow(llvm::IRBuilderBase& b, llvm::Value* x, llvm::Value* y);
// float f(float x): sin or cos for any x (meant for |x| > 2^20, inf and NaN);
// defined once per module, internal.
llvm::Function* trig_large(llvm::Module& m, bool is_cos);

}  // namespace fj::jit::math

namespace fj::jit {

// The libm-free float32 functions of jit/codegen/libm.h put in place of libm calls
// and of intrinsics NVPTX cannot lower, in a module of any target (the CPU backend
// does it on request, so tests can measure their accuracy). Returns an error naming
// what has no libm-free version (float64 erf, ...); the module is then unusable.
Status replace_libm_calls(llvm::Module& module);

}  // namespace fj::jit
