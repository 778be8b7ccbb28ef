// The element emitters of the pointwise ops, one per op of jit/ir/ops.def, and the
// table ElementEmitter::emit_node dispatches through (jit/codegen/element_emitter.h).
// Eager's NaN and signed-zero behaviour is noted with the ops where it matters.
#include <cmath>
#include <iterator>

#include "jit/codegen/element_emitter.h"

namespace fj::jit {

using llvm::Value;

// No emitter for a pointwise op: instantiating this fails to compile.
template <Op op>
inline constexpr bool kHasEmitter = false;

template <Op op>
Value* ElementEmitter::emit(const Operands&) {
  static_assert(kHasEmitter<op>, "a pointwise op of jit/ir/ops.def has no element emitter");
  return nullptr;
}

Value* ElementEmitter::max(const Operands& x, Value* p, Value* q) {
  if (x.fp) return b_.CreateBinaryIntrinsic(llvm::Intrinsic::maximum, p, q);
  return b_.CreateBinaryIntrinsic(x.un ? llvm::Intrinsic::umax : llvm::Intrinsic::smax, p, q);
}
Value* ElementEmitter::min(const Operands& x, Value* p, Value* q) {
  if (x.fp) return b_.CreateBinaryIntrinsic(llvm::Intrinsic::minimum, p, q);
  return b_.CreateBinaryIntrinsic(x.un ? llvm::Intrinsic::umin : llvm::Intrinsic::smin, p, q);
}

// --- arithmetic -------------------------------------------------------------------

template <>
Value* ElementEmitter::emit<Op::Add>(const Operands& x) {
  return x.fp ? b_.CreateFAdd(x[0], x[1]) : x.c == DType::Bool ? b_.CreateOr(x[0], x[1]) : b_.CreateAdd(x[0], x[1]);
}
template <>
Value* ElementEmitter::emit<Op::Sub>(const Operands& x) {
  return x.fp ? b_.CreateFSub(x[0], x[1]) : b_.CreateSub(x[0], x[1]);
}
template <>
Value* ElementEmitter::emit<Op::Mul>(const Operands& x) {
  return x.fp ? b_.CreateFMul(x[0], x[1]) : x.c == DType::Bool ? b_.CreateAnd(x[0], x[1]) : b_.CreateMul(x[0], x[1]);
}
template <>
Value* ElementEmitter::emit<Op::Div>(const Operands& x) {
  return b_.CreateFDiv(x[0], x[1]);
}
template <>
Value* ElementEmitter::emit<Op::FloorDiv>(const Operands& x) {
  return x.fp ? float_floor_div(x[0], x[1]) : int_div(x.n, x[0], /*floor=*/true);
}
template <>
Value* ElementEmitter::emit<Op::Remainder>(const Operands& x) {
  return x.fp ? float_remainder(x[0], x[1]) : int_div(x.n, x[0], /*floor=*/false);
}
template <>
Value* ElementEmitter::emit<Op::Neg>(const Operands& x) {
  return x.fp ? b_.CreateFNeg(x[0]) : b_.CreateNeg(x[0]);
}
template <>
Value* ElementEmitter::emit<Op::Abs>(const Operands& x) {
  if (x.fp) return unary(llvm::Intrinsic::fabs, x[0]);
  return x.un ? x[0] : b_.CreateBinaryIntrinsic(llvm::Intrinsic::abs, x[0], b_.getFalse());
}
template <>
Value* ElementEmitter::emit<Op::Sign>(const Operands& x) {
  if (x.fp) {  // NaN and -0.0 give +0.0, as (0 < x) - (x < 0) in eager
    return b_.CreateSelect(b_.CreateFCmpOGT(x[0], zero(x)), one(x),
                           b_.CreateSelect(b_.CreateFCmpOLT(x[0], zero(x)), fconst(x.ty, -1), zero(x)));
  }
  if (x.c == DType::Bool) return x[0];
  Value* z = llvm::ConstantInt::get(x[0]->getType(), 0);
  Value* pos = b_.CreateZExt(x.un ? b_.CreateICmpNE(x[0], z) : b_.CreateICmpSGT(x[0], z), x[0]->getType());
  if (x.un) return pos;
  return b_.CreateSub(pos, b_.CreateZExt(b_.CreateICmpSLT(x[0], z), x[0]->getType()));
}
// Floats: NaN if either is NaN, else the first operand unless the second is
// strictly greater (maximum) / smaller (minimum), as eager's scalar loop (every
// tensor under 16 elements, and the tail of longer ones). Eager's vector loop
// keeps the second operand on a signed-zero tie instead: position-dependent in
// eager itself, so framejit cannot match both.
template <>
Value* ElementEmitter::emit<Op::Maximum>(const Operands& x) {
  if (x.c == DType::Bool) return b_.CreateOr(x[0], x[1]);
  if (!x.fp) return max(x, x[0], x[1]);
  return b_.CreateSelect(b_.CreateFCmpUNO(x[0], x[1]), fconst(x.ty, NAN),
                         b_.CreateSelect(b_.CreateFCmpOGT(x[1], x[0]), x[1], x[0]));
}
template <>
Value* ElementEmitter::emit<Op::Minimum>(const Operands& x) {
  if (x.c == DType::Bool) return b_.CreateAnd(x[0], x[1]);
  if (!x.fp) return min(x, x[0], x[1]);
  return b_.CreateSelect(b_.CreateFCmpUNO(x[0], x[1]), fconst(x.ty, NAN),
                         b_.CreateSelect(b_.CreateFCmpOLT(x[1], x[0]), x[1], x[0]));
}
template <>
Value* ElementEmitter::emit<Op::PowScalar>(const Operands& x) {
  return x.fp ? emit_pow(x.n, x[0], x[1]) : int_pow(x.n, x[0]);
}
template <>
Value* ElementEmitter::emit<Op::Pow>(const Operands& x) {
  return b_.CreateBinaryIntrinsic(llvm::Intrinsic::pow, x[0], x[1]);
}

// --- math on floating values ------------------------------------------------------

template <>
Value* ElementEmitter::emit<Op::Exp>(const Operands& x) {
  return exp_of(x[0]);
}
template <>
Value* ElementEmitter::emit<Op::Log>(const Operands& x) {
  return vec_math(x[0]) ? math::log(b_, x[0]) : unary(llvm::Intrinsic::log, x[0]);
}
template <>
Value* ElementEmitter::emit<Op::Sqrt>(const Operands& x) {
  return unary(llvm::Intrinsic::sqrt, x[0]);
}
template <>
Value* ElementEmitter::emit<Op::Sin>(const Operands& x) {
  return vec_math(x[0]) ? math::sin(b_, x[0]) : unary(llvm::Intrinsic::sin, x[0]);
}
template <>
Value* ElementEmitter::emit<Op::Cos>(const Operands& x) {
  return vec_math(x[0]) ? math::cos(b_, x[0]) : unary(llvm::Intrinsic::cos, x[0]);
}
template <>
Value* ElementEmitter::emit<Op::Tanh>(const Operands& x) {
  return tanh_of(x[0]);
}
template <>
Value* ElementEmitter::emit<Op::Sigmoid>(const Operands& x) {
  if (vec_math(x[0])) return math::sigmoid(b_, x[0]);
  return b_.CreateFDiv(one(x), b_.CreateFAdd(one(x), exp_of(b_.CreateFNeg(x[0]))));
}
template <>
Value* ElementEmitter::emit<Op::Erf>(const Operands& x) {
  return erf_of(x[0]);
}
template <>
Value* ElementEmitter::emit<Op::Expm1>(const Operands& x) {
  return rounded_libm("expm1f", "expm1", x[0]);
}
template <>
Value* ElementEmitter::emit<Op::Log1p>(const Operands& x) {
  return rounded_libm("log1pf", "log1p", x[0]);
}
template <>
Value* ElementEmitter::emit<Op::Log2>(const Operands& x) {
  return unary(llvm::Intrinsic::log2, x[0]);
}
template <>
Value* ElementEmitter::emit<Op::Rsqrt>(const Operands& x) {
  return b_.CreateFDiv(one(x), unary(llvm::Intrinsic::sqrt, x[0]));
}
template <>
Value* ElementEmitter::emit<Op::Reciprocal>(const Operands& x) {
  return b_.CreateFDiv(one(x), x[0]);
}

// --- activations ------------------------------------------------------------------

template <>
Value* ElementEmitter::emit<Op::Relu>(const Operands& x) {
  // x < 0 is false for NaN and for -0.0, which pass through as in eager.
  if (x.fp) return b_.CreateSelect(b_.CreateFCmpOLT(x[0], zero(x)), zero(x), x[0]);
  return x.un ? x[0] : max(x, x[0], llvm::ConstantInt::get(x[0]->getType(), 0));
}
template <>
Value* ElementEmitter::emit<Op::Gelu>(const Operands& x) {  // x * 0.5 * (1 + erf(x * sqrt(1/2)))
  Value* e = erf_of(b_.CreateFMul(x[0], fconst(x.ty, M_SQRT1_2)));
  Value* g = b_.CreateFMul(b_.CreateFMul(x[0], fconst(x.ty, 0.5)), b_.CreateFAdd(one(x), e));
  if (x.c == DType::Float64 || !options_.gelu_inf_is_nan) return g;
  // Eager's float32 gelu(+inf) on AVX-512: NaN (its vectorized erf) except in a
  // tensor of one element (inf). Sizes 1 are static, so the node's shape says which.
  bool single = true;
  for (const SymExpr& d : x.n.sym) single = single && is_const(d, 1);
  if (single) return g;
  return b_.CreateSelect(b_.CreateFCmpOEQ(x[0], fconst(x.ty, INFINITY)), fconst(x.ty, NAN), g);
}
template <>
Value* ElementEmitter::emit<Op::GeluTanh>(const Operands& x) {
  // 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))
  Value* cube = b_.CreateFMul(b_.CreateFMul(x[0], x[0]), x[0]);
  Value* inner = b_.CreateFMul(fconst(x.ty, M_SQRT2 * M_2_SQRTPI * 0.5),
                               b_.CreateFAdd(x[0], b_.CreateFMul(fconst(x.ty, 0.044715), cube)));
  return b_.CreateFMul(b_.CreateFMul(fconst(x.ty, 0.5), x[0]), b_.CreateFAdd(one(x), tanh_of(inner)));
}
template <>
Value* ElementEmitter::emit<Op::Silu>(const Operands& x) {
  return b_.CreateFDiv(x[0], b_.CreateFAdd(one(x), exp_of(b_.CreateFNeg(x[0]))));
}
template <>
Value* ElementEmitter::emit<Op::Softplus>(const Operands& x) {
  // x * beta > threshold ? x : log1p(exp(x * beta)) / beta
  Value* xb = b_.CreateFMul(x[0], x[1]);
  Value* soft = b_.CreateFDiv(libm("log1pf", "log1p", exp_of(xb)), x[1]);
  return b_.CreateSelect(b_.CreateFCmpOGT(xb, x[2]), x[0], soft);
}

// --- rounding (integers: the identity) -----------------------------------------------

template <>
Value* ElementEmitter::emit<Op::Floor>(const Operands& x) {
  return x.fp ? unary(llvm::Intrinsic::floor, x[0]) : x[0];
}
template <>
Value* ElementEmitter::emit<Op::Ceil>(const Operands& x) {
  return x.fp ? unary(llvm::Intrinsic::ceil, x[0]) : x[0];
}
template <>
Value* ElementEmitter::emit<Op::Round>(const Operands& x) {
  return x.fp ? unary(llvm::Intrinsic::roundeven, x[0]) : x[0];
}
template <>
Value* ElementEmitter::emit<Op::Trunc>(const Operands& x) {
  return x.fp ? unary(llvm::Intrinsic::trunc, x[0]) : x[0];
}

// --- clamping and selection ----------------------------------------------------------

// NaN in x or in a bound gives NaN, as eager's vectorized clamp.
// Floats: x moves only when strictly beyond a bound (a tie keeps x's sign);
// a NaN bound gives NaN.
template <>
Value* ElementEmitter::emit<Op::Clamp>(const Operands& x) {
  return x.fp ? clamp_max(clamp_min(x[0], x[1]), x[2]) : min(x, max(x, x[0], x[1]), x[2]);
}
template <>
Value* ElementEmitter::emit<Op::ClampMin>(const Operands& x) {
  return x.fp ? clamp_min(x[0], x[1]) : max(x, x[0], x[1]);
}
template <>
Value* ElementEmitter::emit<Op::ClampMax>(const Operands& x) {
  return x.fp ? clamp_max(x[0], x[1]) : min(x, x[0], x[1]);
}
template <>
Value* ElementEmitter::emit<Op::Where>(const Operands& x) {
  return b_.CreateSelect(x[0], x[1], x[2]);
}
template <>
Value* ElementEmitter::emit<Op::MaskedFill>(const Operands& x) {
  return b_.CreateSelect(x[1], x[2], x[0]);
}
template <>
Value* ElementEmitter::emit<Op::NanToNum>(const Operands& x) {
  if (!x.fp) return x[0];
  const double big = x.c == DType::Float32 ? 3.4028234663852886e38 : 1.7976931348623157e308;
  Value* inf = fconst(x.ty, INFINITY);
  Value* v = b_.CreateSelect(b_.CreateFCmpOEQ(x[0], inf), fconst(x.ty, big), x[0]);
  v = b_.CreateSelect(b_.CreateFCmpOEQ(x[0], b_.CreateFNeg(inf)), fconst(x.ty, -big), v);
  return b_.CreateSelect(b_.CreateFCmpUNO(x[0], x[0]), zero(x), v);
}

// --- comparisons and predicates ------------------------------------------------------

template <>
Value* ElementEmitter::emit<Op::Eq>(const Operands& x) {
  return x.fp ? b_.CreateFCmpOEQ(x[0], x[1]) : b_.CreateICmpEQ(x[0], x[1]);
}
template <>
Value* ElementEmitter::emit<Op::Ne>(const Operands& x) {
  return x.fp ? b_.CreateFCmpUNE(x[0], x[1]) : b_.CreateICmpNE(x[0], x[1]);
}
template <>
Value* ElementEmitter::emit<Op::Lt>(const Operands& x) {
  return x.fp ? b_.CreateFCmpOLT(x[0], x[1]) : x.un ? b_.CreateICmpULT(x[0], x[1]) : b_.CreateICmpSLT(x[0], x[1]);
}
template <>
Value* ElementEmitter::emit<Op::Le>(const Operands& x) {
  return x.fp ? b_.CreateFCmpOLE(x[0], x[1]) : x.un ? b_.CreateICmpULE(x[0], x[1]) : b_.CreateICmpSLE(x[0], x[1]);
}
template <>
Value* ElementEmitter::emit<Op::Gt>(const Operands& x) {
  return x.fp ? b_.CreateFCmpOGT(x[0], x[1]) : x.un ? b_.CreateICmpUGT(x[0], x[1]) : b_.CreateICmpSGT(x[0], x[1]);
}
template <>
Value* ElementEmitter::emit<Op::Ge>(const Operands& x) {
  return x.fp ? b_.CreateFCmpOGE(x[0], x[1]) : x.un ? b_.CreateICmpUGE(x[0], x[1]) : b_.CreateICmpSGE(x[0], x[1]);
}
template <>
Value* ElementEmitter::emit<Op::IsNan>(const Operands& x) {
  return x.fp ? b_.CreateFCmpUNO(x[0], x[0]) : b_.getFalse();
}
template <>
Value* ElementEmitter::emit<Op::IsInf>(const Operands& x) {
  return x.fp ? b_.CreateFCmpOEQ(unary(llvm::Intrinsic::fabs, x[0]), fconst(x.ty, INFINITY)) : b_.getFalse();
}
template <>
Value* ElementEmitter::emit<Op::LogicalAnd>(const Operands& x) {
  return b_.CreateAnd(x[0], x[1]);
}
template <>
Value* ElementEmitter::emit<Op::LogicalOr>(const Operands& x) {
  return b_.CreateOr(x[0], x[1]);
}
template <>
Value* ElementEmitter::emit<Op::LogicalXor>(const Operands& x) {
  return b_.CreateXor(x[0], x[1]);
}
template <>
Value* ElementEmitter::emit<Op::LogicalNot>(const Operands& x) {
  return b_.CreateNot(x[0]);
}

// --- bits (integers and bools) -------------------------------------------------------

template <>
Value* ElementEmitter::emit<Op::BitwiseAnd>(const Operands& x) {
  return b_.CreateAnd(x[0], x[1]);
}
template <>
Value* ElementEmitter::emit<Op::BitwiseOr>(const Operands& x) {
  return b_.CreateOr(x[0], x[1]);
}
template <>
Value* ElementEmitter::emit<Op::BitwiseXor>(const Operands& x) {
  return b_.CreateXor(x[0], x[1]);
}
template <>
Value* ElementEmitter::emit<Op::BitwiseNot>(const Operands& x) {
  return b_.CreateNot(x[0]);
}

template <>
Value* ElementEmitter::emit<Op::Cast>(const Operands& x) {
  return x[0];  // operand() converted it to the target
}

// --- the table -----------------------------------------------------------------------

Value* ElementEmitter::not_pointwise(const Operands& x) {
  FJ_CHECK(false, "emit_node of a non-pointwise op: " + std::string(op_name(x.n.op)));
  return nullptr;
}

// Each use converts a Python number constant itself (operand()).
Value* ElementEmitter::number_constant(const Operands&) { return nullptr; }

Value* ElementEmitter::emit_node(const Node& n, const std::vector<Value*>& a) {
  // Placeholders and scalar inputs are read by the kernel emitter; other families
  // index their operands and are emitted there too.
#define FJ_EMITTER_Input(name) &ElementEmitter::not_pointwise
#define FJ_EMITTER_Constant(name) &ElementEmitter::number_constant
#define FJ_EMITTER_Pointwise(name) &ElementEmitter::emit<Op::name>
#define FJ_EMITTER_Reduction(name) &ElementEmitter::not_pointwise
#define FJ_EMITTER_View(name) &ElementEmitter::not_pointwise
#define FJ_EMITTER_Index(name) &ElementEmitter::not_pointwise
#define FJ_EMITTER_Creation(name) &ElementEmitter::not_pointwise
#define FJ_EMITTER_Item(name) &ElementEmitter::not_pointwise
#define FJ_EMITTER_Extern(name) &ElementEmitter::not_pointwise
  static constexpr OpEmitter kEmitters[] = {
#define FJ_OP(name, aten, family, operands, rule) FJ_EMITTER_##family(name),
#include "jit/ir/ops.def"
#undef FJ_OP
  };
#undef FJ_EMITTER_Input
#undef FJ_EMITTER_Constant
#undef FJ_EMITTER_Pointwise
#undef FJ_EMITTER_Reduction
#undef FJ_EMITTER_View
#undef FJ_EMITTER_Index
#undef FJ_EMITTER_Creation
#undef FJ_EMITTER_Item
#undef FJ_EMITTER_Extern
  const size_t op = static_cast<size_t>(n.op);
  FJ_CHECK(op < std::size(kEmitters), "unknown op");
  const DType c = n.compute;
  const bool fp = is_floating(c);
  const Operands x{n, a, c, fp, is_unsigned(c), fp || n.op == Op::Cast ? reg_type(c) : nullptr};
  return (this->*kEmitters[op])(x);
}

// --- helpers -------------------------------------------------------------------------

Value* ElementEmitter::clamp_min(Value* x, Value* lo) {
  Value* v = b_.CreateSelect(b_.CreateFCmpOLT(x, lo), lo, x);
  return b_.CreateSelect(b_.CreateFCmpUNO(lo, lo), lo, v);
}
Value* ElementEmitter::clamp_max(Value* x, Value* hi) {
  Value* v = b_.CreateSelect(b_.CreateFCmpOGT(x, hi), hi, x);
  return b_.CreateSelect(b_.CreateFCmpUNO(hi, hi), hi, v);
}

// torch's div_floor_floating: fmod-based, exact where a / b rounds up to an integer.
Value* ElementEmitter::float_floor_div(Value* a, Value* b) {
  llvm::Type* ty = a->getType();
  Value* zero = fconst(ty, 0);
  Value* one = fconst(ty, 1);
  Value* basic = b_.CreateFDiv(a, b);
  Value* mod = b_.CreateFRem(a, b);
  Value* div = b_.CreateFDiv(b_.CreateFSub(a, mod), b);
  Value* fix = b_.CreateAnd(b_.CreateFCmpUNE(mod, zero),
                            b_.CreateXor(b_.CreateFCmpOLT(b, zero), b_.CreateFCmpOLT(mod, zero)));
  div = b_.CreateSelect(fix, b_.CreateFSub(div, one), div);
  Value* fl = unary(llvm::Intrinsic::floor, div);
  fl = b_.CreateSelect(b_.CreateFCmpOGT(b_.CreateFSub(div, fl), fconst(ty, 0.5)), b_.CreateFAdd(fl, one), fl);
  fl = b_.CreateSelect(b_.CreateFCmpOEQ(div, zero),
                       b_.CreateBinaryIntrinsic(llvm::Intrinsic::copysign, zero, basic), fl);
  return b_.CreateSelect(b_.CreateFCmpOEQ(b, zero), basic, fl);
}

// torch's remainder on floats: fmod, moved to the divisor's sign.
Value* ElementEmitter::float_remainder(Value* a, Value* b) {
  Value* zero = fconst(a->getType(), 0);
  Value* mod = b_.CreateFRem(a, b);
  Value* fix = b_.CreateAnd(b_.CreateFCmpUNE(mod, zero),
                            b_.CreateXor(b_.CreateFCmpOLT(b, zero), b_.CreateFCmpOLT(mod, zero)));
  return b_.CreateSelect(fix, b_.CreateFAdd(mod, b), mod);
}

// Integer floor division / remainder by the node's constant divisor (the graph
// admits only a nonzero constant that fits the type), as torch's div_floor_integer
// and remainder: floor toward -inf, remainder with the divisor's sign;
// INT_MIN // -1 wraps to INT_MIN and INT_MIN % -1 is 0 (no trap).
Value* ElementEmitter::int_div(const Node& n, Value* a, bool floor) {
  const Node& d = g_.node(n.inputs[1]);
  FJ_CHECK(d.op == Op::Scalar && d.scalar_kind != ScalarKind::Float, "integer division needs a constant int divisor");
  const DType c = n.compute;
  Value* dv = scalar_constant(d, c);
  if (c == DType::UInt8) return floor ? b_.CreateUDiv(a, dv) : b_.CreateURem(a, dv);
  const int64_t dval = llvm::cast<llvm::ConstantInt>(dv)->getSExtValue();
  Value* zero = llvm::ConstantInt::get(a->getType(), 0);
  if (dval == -1) return floor ? b_.CreateNeg(a) : zero;
  Value* q = b_.CreateSDiv(a, dv);
  Value* r = b_.CreateSRem(a, dv);
  Value* r_nonzero = b_.CreateICmpNE(r, zero);
  if (floor) {
    Value* differ = b_.CreateICmpNE(b_.CreateICmpSLT(a, zero), b_.getInt1(dval < 0));
    return b_.CreateSub(q, b_.CreateZExt(b_.CreateAnd(r_nonzero, differ), a->getType()));
  }
  Value* differ = b_.CreateICmpNE(b_.CreateICmpSLT(r, zero), b_.getInt1(dval < 0));
  return b_.CreateSelect(b_.CreateAnd(r_nonzero, differ), b_.CreateAdd(r, dv), r);
}

// x ** e for an integer x and a constant e >= 0 (graph-checked): square and
// multiply, wrapping as torch's powi loop does.
Value* ElementEmitter::int_pow(const Node& n, Value* x) {
  const Node& e = g_.node(n.inputs[1]);
  FJ_CHECK(e.op == Op::Scalar && e.scalar_kind != ScalarKind::Float && e.int_value >= 0,
           "integer pow needs a constant exponent >= 0");
  uint64_t k = static_cast<uint64_t>(e.int_value);
  Value* result = nullptr;
  Value* base = x;
  while (k != 0) {
    if (k & 1) result = result ? b_.CreateMul(result, base) : base;
    k >>= 1;
    if (k != 0) base = b_.CreateMul(base, base);
  }
  return result ? result : llvm::ConstantInt::get(x->getType(), 1);
}

// The exponents that eager PyTorch special-cases, then pow. A runtime exponent
// (ScalarInput, or a number read from a tensor) always takes pow: the special cases
// need a constant. The exponent comes as float64 (Operands): pow on float32 data
// takes it rounded to float32, and where that rounding may change it, the sign is
// set from the float64 exponent as eager's scalar loop does (std::pow(float, double)):
// (-2) ** (2**24 + 1) is -inf, (-2) ** (2**24 + 0.5) is NaN.
Value* ElementEmitter::emit_pow(const Node& n, Value* x, Value* exponent) {
  const Node& e = g_.node(n.inputs[1]);
  llvm::Type* ty = x->getType();
  const bool constant = e.op == Op::Scalar;
  const double p = e.scalar;
  if (constant) {
    if (p == 2) return b_.CreateFMul(x, x);
    if (p == 3) return b_.CreateFMul(b_.CreateFMul(x, x), x);
    if (p == 0.5) return unary(llvm::Intrinsic::sqrt, x);
    if (p == -1) return b_.CreateFDiv(fconst(ty, 1), x);
    if (p == -2) return b_.CreateFDiv(fconst(ty, 1), b_.CreateFMul(x, x));
    if (p == -0.5) return b_.CreateFDiv(fconst(ty, 1), unary(llvm::Intrinsic::sqrt, x));
    if (p == 1) return x;
    if (p == 0) return fconst(ty, 1);
  }
  if (exponent->getType() == ty) {
    Value* r = b_.CreateBinaryIntrinsic(llvm::Intrinsic::pow, x, exponent);
    return constant ? r : runtime_special_pow(x, exponent, r);
  }
  Value* r = b_.CreateBinaryIntrinsic(llvm::Intrinsic::pow, x, b_.CreateFPTrunc(exponent, ty));
  if (constant && static_cast<double>(static_cast<float>(p)) == p) return r;
  r = exponent_sign(x, exponent, r);
  return constant ? r : runtime_special_pow(x, exponent, r);
}

// Eager checks a runtime exponent for the values it special-cases too (sqrt, rsqrt,
// reciprocal, products), whose signed zeros and infinities differ from pow's
// ((-0.) ** 0.5 is -0., (-inf) ** 0.5 NaN): r where y is none of them.
Value* ElementEmitter::runtime_special_pow(Value* x, Value* y, Value* r) {
  llvm::Type* ty = x->getType();
  auto is = [&](double p) { return b_.CreateFCmpOEQ(y, fconst(y->getType(), p)); };
  Value* one = fconst(ty, 1);
  Value* sq = b_.CreateFMul(x, x);
  Value* root = unary(llvm::Intrinsic::sqrt, x);
  r = b_.CreateSelect(is(2), sq, r);
  r = b_.CreateSelect(is(3), b_.CreateFMul(sq, x), r);
  r = b_.CreateSelect(is(-2), b_.CreateFDiv(one, sq), r);
  r = b_.CreateSelect(is(0.5), root, r);
  r = b_.CreateSelect(is(-0.5), b_.CreateFDiv(one, root), r);
  return b_.CreateSelect(is(-1), b_.CreateFDiv(one, x), r);
}

// pow(x, y) for x with its sign bit set, y the float64 exponent and r = pow(x, y
// rounded): -|r| where y is an odd integer, |r| where y is another integer, NaN
// where y is not an integer and x is finite and below zero.
Value* ElementEmitter::exponent_sign(Value* x, Value* y, Value* r) {
  llvm::Type* ty = x->getType();
  llvm::Type* f64 = y->getType();
  Value* y_int = b_.CreateFCmpOEQ(unary(llvm::Intrinsic::trunc, y), y);
  Value* small = b_.CreateFCmpOLT(unary(llvm::Intrinsic::fabs, y), fconst(f64, 0x1p53));
  Value* yi = b_.CreateFPToSI(b_.CreateSelect(small, y, fconst(f64, 0)), b_.getInt64Ty());
  Value* odd = b_.CreateAnd(b_.CreateAnd(y_int, small), b_.CreateTrunc(yi, b_.getInt1Ty()));
  Value* mag = unary(llvm::Intrinsic::fabs, r);
  Value* fixed = b_.CreateSelect(odd, b_.CreateFNeg(mag), mag);
  Value* finite_neg = b_.CreateAnd(b_.CreateFCmpOLT(x, fconst(ty, 0)), b_.CreateFCmpONE(x, fconst(ty, -INFINITY)));
  fixed = b_.CreateSelect(b_.CreateAnd(finite_neg, b_.CreateNot(y_int)), fconst(ty, NAN), fixed);
  Value* sign = b_.CreateICmpSLT(b_.CreateBitCast(x, b_.getIntNTy(ty->getPrimitiveSizeInBits())),
                                 llvm::ConstantInt::get(b_.getIntNTy(ty->getPrimitiveSizeInBits()), 0));
  Value* nan = b_.CreateFCmpUNO(x, x);
  return b_.CreateSelect(b_.CreateAnd(sign, b_.CreateNot(nan)), fixed, r);
}

}  // namespace fj::jit
