// Element-wise LLVM IR for one graph node: dtype conversions as torch converts,
// Python number operands, and every pointwise op of jit/ir/ops.def. Shared by the
// kernel emitters of each target (jit/codegen/lower.cpp); internal to jit/.
#pragma once

#include <llvm/ADT/Twine.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/Module.h>
#include <llvm/Transforms/Utils/ModuleUtils.h>

#include <cmath>
#include <vector>

#include "jit/codegen/math.h"

#include "jit/codegen/schedule.h"
#include "jit/ir/graph.h"
#include "jit/codegen/libm.h"

namespace fj::jit {


// tanhf for the kernels. LLVM 19's loop vectorizer cannot widen llvm.tanh nor a
// plain libm call, and one such call keeps the whole fused loop scalar. So calls to
// tanhf carry a VFABI attribute naming vector variants defined here, each calling
// tanhf lane by lane: the results stay those of libm's tanhf, and the vectorizer
// widens everything around it.
inline constexpr unsigned kTanhWidths[] = {4, 8, 16};

inline llvm::Function* tanhf_function(llvm::Module& m) {
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
    llvm::Value* out = llvm::PoisonValue::get(vec);
    for (unsigned lane = 0; lane < width; ++lane) {
      llvm::Value* x = b.CreateExtractElement(fn->getArg(0), lane);
      out = b.CreateInsertElement(out, b.CreateCall(scalar, {x}), lane);
    }
    b.CreateRet(out);
    variants.push_back(fn);
  }
  llvm::appendToCompilerUsed(m, variants);  // alive until the vectorizer has run
  return scalar;
}

inline llvm::Value* call_tanhf(llvm::IRBuilder<>& b, llvm::Module& m, llvm::Value* x) {
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


class ElementEmitter {
 public:
  ElementEmitter(llvm::IRBuilder<>& b, llvm::Module& m, const Graph& g, const LowerOptions& options)
      : g_(g), options_(options), ctx_(m.getContext()), m_(m), b_(b) {}

  // The type of a dtype in memory (Bool: i8 0/1) and in registers (Bool: i1).
  using Value = llvm::Value;
  llvm::Type* llvm_type(DType d) {
    switch (d) {
      case DType::Bool: return b_.getInt8Ty();
      case DType::UInt8: return b_.getInt8Ty();
      case DType::Int32: return b_.getInt32Ty();
      case DType::Int64: return b_.getInt64Ty();
      case DType::Float32: return b_.getFloatTy();
      case DType::Float64: return b_.getDoubleTy();
    }
    FJ_CHECK(false, "unknown dtype");
  }
  // The type of a value in registers: as in memory, except Bool (i1).
  llvm::Type* reg_type(DType d) { return d == DType::Bool ? b_.getInt1Ty() : llvm_type(d); }
  Value* from_storage(DType d, Value* x) {
    return d == DType::Bool ? b_.CreateICmpNE(x, b_.getInt8(0)) : x;
  }
  Value* to_storage(DType d, Value* x) {
    return d == DType::Bool ? b_.CreateZExt(x, b_.getInt8Ty()) : x;
  }

  static bool is_unsigned(DType d) { return d == DType::Bool || d == DType::UInt8; }

  Value* fconst(llvm::Type* ty, double v) { return llvm::ConstantFP::get(ty, v); }
  Value* iconst(DType d, int64_t v) {
    const unsigned bits = reg_type(d)->getIntegerBitWidth();
    return llvm::ConstantInt::get(ctx_, llvm::APInt(64, static_cast<uint64_t>(v)).trunc(bits));
  }
  Value* unary(llvm::Intrinsic::ID id, Value* x) { return b_.CreateUnaryIntrinsic(id, x); }

  // A Python number constant in the type `to`, converted as eager converts it: an
  // int wraps into a narrower integer type (the graph rejected it where eager checks
  // the range); a float truncates toward zero into an integer type (masked_fill).
  Value* scalar_constant(const Node& s, DType to) {
    const bool is_int = s.scalar_kind != ScalarKind::Float;
    switch (to) {
      case DType::Bool: return b_.getInt1(is_int ? s.int_value != 0 : s.scalar != 0);
      case DType::Float32:
        return fconst(b_.getFloatTy(), is_int ? static_cast<double>(static_cast<float>(s.int_value))
                                              : static_cast<double>(static_cast<float>(s.scalar)));
      case DType::Float64:
        return fconst(b_.getDoubleTy(), is_int ? static_cast<double>(s.int_value) : s.scalar);
      case DType::UInt8:
      case DType::Int32:
      case DType::Int64: {
        const double t = std::isfinite(s.scalar) ? std::trunc(s.scalar) : 0.0;
        return iconst(to, is_int ? s.int_value : static_cast<int64_t>(t));
      }
    }
    FJ_CHECK(false, "unknown dtype");
  }

  // Operand k of node n in the type it is used in: where's condition and
  // masked_fill's mask stay bool, every other operand converts to n.compute.
  Value* operand(const Node& n, size_t k, Value* v) {
    const bool mask = (n.op == Op::Where && k == 0) || (n.op == Op::MaskedFill && k == 1);
    const DType to = mask ? DType::Bool : n.compute;
    const Node& in = g_.node(n.inputs[k]);
    if (in.op == Op::Scalar) return scalar_constant(in, to);
    if (in.op == Op::ScalarInput || op_family(in.op) == Family::Item) {
      return convert(v, in.scalar_kind == ScalarKind::Float ? DType::Float64 : DType::Int64, to);
    }
    return convert(v, in.dtype, to);
  }

  // A value of type `from` as type `to`, as torch converts (static_cast semantics;
  // float -> integer as this machine's eager kernels give it, see float_to_int).
  Value* convert(Value* x, DType from, DType to) {
    if (from == to) return x;
    llvm::Type* ty = reg_type(to);
    if (to == DType::Bool) {
      if (is_floating(from)) return b_.CreateFCmpUNE(x, fconst(x->getType(), 0));  // NaN -> true
      return b_.CreateICmpNE(x, llvm::ConstantInt::get(x->getType(), 0));
    }
    if (is_floating(to)) {
      if (is_floating(from)) return from == DType::Float32 ? b_.CreateFPExt(x, ty) : b_.CreateFPTrunc(x, ty);
      return is_unsigned(from) ? b_.CreateUIToFP(x, ty) : b_.CreateSIToFP(x, ty);
    }
    if (is_floating(from)) return float_to_int(x, to);
    const unsigned have = x->getType()->getIntegerBitWidth(), want = ty->getIntegerBitWidth();
    if (have < want) return is_unsigned(from) ? b_.CreateZExt(x, ty) : b_.CreateSExt(x, ty);
    if (have > want) return b_.CreateTrunc(x, ty);
    return x;
  }

  // Float -> int32 / int64 as x86's cvtt* instructions (which eager's kernels use on
  // this machine): truncation toward zero, and the "integer indefinite" value
  // INT_MIN for NaN and out-of-range values (where LLVM's fptosi would be poison).
  // Float -> uint8 goes through int64 and wraps, as eager does.
  Value* float_to_int(Value* x, DType to) {
    if (to == DType::UInt8) return b_.CreateTrunc(float_to_int(x, DType::Int64), b_.getInt8Ty());
    const unsigned bits = to == DType::Int32 ? 32 : 64;
    const double lim = std::ldexp(1.0, static_cast<int>(bits) - 1);
    Value* in_range = b_.CreateAnd(b_.CreateFCmpOGE(x, fconst(x->getType(), -lim)),
                                   b_.CreateFCmpOLT(x, fconst(x->getType(), lim)));
    llvm::Type* ty = reg_type(to);
    return b_.CreateSelect(in_range, b_.CreateFPToSI(x, ty),
                           llvm::ConstantInt::get(ctx_, llvm::APInt::getSignedMinValue(bits)));
  }

  // A libm function of one argument: `f32` for float, `f64` for double.
  Value* libm(const char* f32, const char* f64, Value* x) {
    llvm::Type* ty = x->getType();
    llvm::FunctionCallee fn =
        m_.getOrInsertFunction(ty->isFloatTy() ? f32 : f64, llvm::FunctionType::get(ty, {ty}, false));
    if (auto* f = llvm::dyn_cast<llvm::Function>(fn.getCallee())) {
      f->addFnAttr(llvm::Attribute::NoUnwind);
      f->addFnAttr(llvm::Attribute::WillReturn);
      f->setDoesNotAccessMemory();
    }
    return b_.CreateCall(fn, {x});
  }

  // float32 on the CPU: the double function rounded to float (correctly rounded but
  // for rare double roundings), so that results agree with eager's wherever eager's
  // own are correctly rounded; glibc's float versions are off by up to an ulp, which
  // ill-conditioned code (1 + erf(x) near -1) magnifies. NVPTX keeps the float names
  // (replaced by framejit's own functions there).
  Value* rounded_libm(const char* f32, const char* f64, Value* x) {
    if (!x->getType()->isFloatTy() || options_.target != Target::Cpu || !options_.float_libm_via_double) {
      return libm(f32, f64, x);
    }
    return b_.CreateFPTrunc(libm(f32, f64, b_.CreateFPExt(x, b_.getDoubleTy())), b_.getFloatTy());
  }

  bool vec_math(Value* x) const { return options_.vector_math && x->getType()->isFloatTy(); }
  // float32 erf on the CPU: evaluated in double and rounded once (vectorizable, as
  // close to correctly rounded as glibc's double erf); else as rounded_libm.
  Value* erf_of(Value* x) {
    if (vec_math(x) && options_.target == Target::Cpu && options_.float_libm_via_double) {
      return math::erf_via_double(b_, x);
    }
    return rounded_libm("erff", "erf", x);
  }
  Value* exp_of(Value* x) { return vec_math(x) ? math::exp(b_, x) : unary(llvm::Intrinsic::exp, x); }
  Value* tanh_of(Value* x) {
    if (vec_math(x)) return math::tanh(b_, x);
    return x->getType()->isFloatTy() ? call_tanhf(b_, m_, x) : libm("tanhf", "tanh", x);
  }

  Value* emit_node(const Node& n, const std::vector<Value*>& a) {
    const DType c = n.compute;
    const bool fp = is_floating(c), un = is_unsigned(c);
    llvm::Type* ty = fp || n.op == Op::Cast ? reg_type(c) : nullptr;
    auto one = [&] { return fconst(ty, 1); };
    auto zero = [&] { return fconst(ty, 0); };
    auto max = [&](Value* x, Value* y) {
      if (fp) return b_.CreateBinaryIntrinsic(llvm::Intrinsic::maximum, x, y);
      return b_.CreateBinaryIntrinsic(un ? llvm::Intrinsic::umax : llvm::Intrinsic::smax, x, y);
    };
    auto min = [&](Value* x, Value* y) {
      if (fp) return b_.CreateBinaryIntrinsic(llvm::Intrinsic::minimum, x, y);
      return b_.CreateBinaryIntrinsic(un ? llvm::Intrinsic::umin : llvm::Intrinsic::smin, x, y);
    };
    switch (n.op) {
      case Op::Placeholder: FJ_CHECK(false, "placeholder handled by the caller");
      case Op::Scalar: return nullptr;  // each use converts the constant (operand())
      case Op::ScalarInput: FJ_CHECK(false, "scalar input handled by the caller");
      case Op::Add:
        return fp ? b_.CreateFAdd(a[0], a[1]) : c == DType::Bool ? b_.CreateOr(a[0], a[1]) : b_.CreateAdd(a[0], a[1]);
      case Op::Sub: return fp ? b_.CreateFSub(a[0], a[1]) : b_.CreateSub(a[0], a[1]);
      case Op::Mul:
        return fp ? b_.CreateFMul(a[0], a[1]) : c == DType::Bool ? b_.CreateAnd(a[0], a[1]) : b_.CreateMul(a[0], a[1]);
      case Op::Div: return b_.CreateFDiv(a[0], a[1]);
      case Op::FloorDiv: return fp ? float_floor_div(a[0], a[1]) : int_div(n, a[0], /*floor=*/true);
      case Op::Remainder: return fp ? float_remainder(a[0], a[1]) : int_div(n, a[0], /*floor=*/false);
      case Op::Neg: return fp ? b_.CreateFNeg(a[0]) : b_.CreateNeg(a[0]);
      case Op::Abs:
        if (fp) return unary(llvm::Intrinsic::fabs, a[0]);
        return un ? a[0] : b_.CreateBinaryIntrinsic(llvm::Intrinsic::abs, a[0], b_.getFalse());
      case Op::Sign:
        if (fp) {  // NaN and -0.0 give +0.0, as (0 < x) - (x < 0) in eager
          return b_.CreateSelect(b_.CreateFCmpOGT(a[0], zero()), one(),
                                 b_.CreateSelect(b_.CreateFCmpOLT(a[0], zero()), fconst(ty, -1), zero()));
        }
        if (c == DType::Bool) return a[0];
        {
          Value* z = llvm::ConstantInt::get(a[0]->getType(), 0);
          Value* pos = b_.CreateZExt(un ? b_.CreateICmpNE(a[0], z) : b_.CreateICmpSGT(a[0], z), a[0]->getType());
          if (un) return pos;
          return b_.CreateSub(pos, b_.CreateZExt(b_.CreateICmpSLT(a[0], z), a[0]->getType()));
        }
      // Floats: NaN if either is NaN, else the first operand unless the second is
      // strictly greater (maximum) / smaller (minimum), as eager's scalar loop (every
      // tensor under 16 elements, and the tail of longer ones). Eager's vector loop
      // keeps the second operand on a signed-zero tie instead: position-dependent in
      // eager itself, so framejit cannot match both.
      case Op::Maximum:
        if (c == DType::Bool) return b_.CreateOr(a[0], a[1]);
        if (!fp) return max(a[0], a[1]);
        return b_.CreateSelect(b_.CreateFCmpUNO(a[0], a[1]), fconst(ty, NAN),
                               b_.CreateSelect(b_.CreateFCmpOGT(a[1], a[0]), a[1], a[0]));
      case Op::Minimum:
        if (c == DType::Bool) return b_.CreateAnd(a[0], a[1]);
        if (!fp) return min(a[0], a[1]);
        return b_.CreateSelect(b_.CreateFCmpUNO(a[0], a[1]), fconst(ty, NAN),
                               b_.CreateSelect(b_.CreateFCmpOLT(a[1], a[0]), a[1], a[0]));
      case Op::PowScalar: return fp ? emit_pow(n, a[0], a[1]) : int_pow(n, a[0]);
      case Op::Pow: return b_.CreateBinaryIntrinsic(llvm::Intrinsic::pow, a[0], a[1]);
      case Op::Exp: return exp_of(a[0]);
      case Op::Log: return vec_math(a[0]) ? math::log(b_, a[0]) : unary(llvm::Intrinsic::log, a[0]);
      case Op::Sqrt: return unary(llvm::Intrinsic::sqrt, a[0]);
      case Op::Sin: return vec_math(a[0]) ? math::sin(b_, a[0]) : unary(llvm::Intrinsic::sin, a[0]);
      case Op::Cos: return vec_math(a[0]) ? math::cos(b_, a[0]) : unary(llvm::Intrinsic::cos, a[0]);
      case Op::Tanh: return tanh_of(a[0]);
      case Op::Sigmoid:
        if (vec_math(a[0])) return math::sigmoid(b_, a[0]);
        return b_.CreateFDiv(one(), b_.CreateFAdd(one(), exp_of(b_.CreateFNeg(a[0]))));
      case Op::Erf: return erf_of(a[0]);
      case Op::Expm1: return rounded_libm("expm1f", "expm1", a[0]);
      case Op::Log1p: return rounded_libm("log1pf", "log1p", a[0]);
      case Op::Rsqrt: return b_.CreateFDiv(one(), unary(llvm::Intrinsic::sqrt, a[0]));
      case Op::Reciprocal: return b_.CreateFDiv(one(), a[0]);
      case Op::Relu:
        // x < 0 is false for NaN and for -0.0, which pass through as in eager.
        if (fp) return b_.CreateSelect(b_.CreateFCmpOLT(a[0], zero()), zero(), a[0]);
        return un ? a[0] : max(a[0], llvm::ConstantInt::get(a[0]->getType(), 0));
      case Op::Gelu: {  // x * 0.5 * (1 + erf(x * sqrt(1/2)))
        Value* e = erf_of(b_.CreateFMul(a[0], fconst(ty, M_SQRT1_2)));
        Value* g = b_.CreateFMul(b_.CreateFMul(a[0], fconst(ty, 0.5)), b_.CreateFAdd(one(), e));
        if (c == DType::Float64 || !options_.gelu_inf_is_nan) return g;
        // Eager's float32 gelu(+inf) on AVX-512: NaN (its vectorized erf) except in a
        // tensor of one element (inf). Sizes 1 are static, so the node's shape says which.
        bool one = true;
        for (const SymExpr& d : n.sym) one = one && is_const(d, 1);
        if (one) return g;
        return b_.CreateSelect(b_.CreateFCmpOEQ(a[0], fconst(ty, INFINITY)), fconst(ty, NAN), g);
      }
      case Op::GeluTanh: {  // 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))
        Value* cube = b_.CreateFMul(b_.CreateFMul(a[0], a[0]), a[0]);
        Value* inner = b_.CreateFMul(fconst(ty, M_SQRT2 * M_2_SQRTPI * 0.5),
                                     b_.CreateFAdd(a[0], b_.CreateFMul(fconst(ty, 0.044715), cube)));
        return b_.CreateFMul(b_.CreateFMul(fconst(ty, 0.5), a[0]), b_.CreateFAdd(one(), tanh_of(inner)));
      }
      case Op::Silu: return b_.CreateFDiv(a[0], b_.CreateFAdd(one(), exp_of(b_.CreateFNeg(a[0]))));
      case Op::Softplus: {  // x * beta > threshold ? x : log1p(exp(x * beta)) / beta
        Value* xb = b_.CreateFMul(a[0], a[1]);
        Value* soft = b_.CreateFDiv(libm("log1pf", "log1p", exp_of(xb)), a[1]);
        return b_.CreateSelect(b_.CreateFCmpOGT(xb, a[2]), a[0], soft);
      }
      case Op::Floor: return fp ? unary(llvm::Intrinsic::floor, a[0]) : a[0];
      case Op::Ceil: return fp ? unary(llvm::Intrinsic::ceil, a[0]) : a[0];
      case Op::Round: return fp ? unary(llvm::Intrinsic::roundeven, a[0]) : a[0];
      case Op::Trunc: return fp ? unary(llvm::Intrinsic::trunc, a[0]) : a[0];
      // NaN in x or in a bound gives NaN, as eager's vectorized clamp.
      // Floats: x moves only when strictly beyond a bound (a tie keeps x's sign);
      // a NaN bound gives NaN.
      case Op::Clamp: return fp ? clamp_max(clamp_min(a[0], a[1]), a[2]) : min(max(a[0], a[1]), a[2]);
      case Op::ClampMin: return fp ? clamp_min(a[0], a[1]) : max(a[0], a[1]);
      case Op::ClampMax: return fp ? clamp_max(a[0], a[1]) : min(a[0], a[1]);
      case Op::Where: return b_.CreateSelect(a[0], a[1], a[2]);
      case Op::MaskedFill: return b_.CreateSelect(a[1], a[2], a[0]);
      case Op::NanToNum: {
        if (!fp) return a[0];
        const double big = c == DType::Float32 ? 3.4028234663852886e38 : 1.7976931348623157e308;
        Value* inf = fconst(ty, INFINITY);
        Value* v = b_.CreateSelect(b_.CreateFCmpOEQ(a[0], inf), fconst(ty, big), a[0]);
        v = b_.CreateSelect(b_.CreateFCmpOEQ(a[0], b_.CreateFNeg(inf)), fconst(ty, -big), v);
        return b_.CreateSelect(b_.CreateFCmpUNO(a[0], a[0]), zero(), v);
      }
      case Op::Eq: return fp ? b_.CreateFCmpOEQ(a[0], a[1]) : b_.CreateICmpEQ(a[0], a[1]);
      case Op::Ne: return fp ? b_.CreateFCmpUNE(a[0], a[1]) : b_.CreateICmpNE(a[0], a[1]);
      case Op::Lt:
        return fp ? b_.CreateFCmpOLT(a[0], a[1]) : un ? b_.CreateICmpULT(a[0], a[1]) : b_.CreateICmpSLT(a[0], a[1]);
      case Op::Le:
        return fp ? b_.CreateFCmpOLE(a[0], a[1]) : un ? b_.CreateICmpULE(a[0], a[1]) : b_.CreateICmpSLE(a[0], a[1]);
      case Op::Gt:
        return fp ? b_.CreateFCmpOGT(a[0], a[1]) : un ? b_.CreateICmpUGT(a[0], a[1]) : b_.CreateICmpSGT(a[0], a[1]);
      case Op::Ge:
        return fp ? b_.CreateFCmpOGE(a[0], a[1]) : un ? b_.CreateICmpUGE(a[0], a[1]) : b_.CreateICmpSGE(a[0], a[1]);
      case Op::IsNan: return fp ? b_.CreateFCmpUNO(a[0], a[0]) : b_.getFalse();
      case Op::IsInf:
        return fp ? b_.CreateFCmpOEQ(unary(llvm::Intrinsic::fabs, a[0]), fconst(ty, INFINITY)) : b_.getFalse();
      case Op::LogicalAnd: case Op::BitwiseAnd: return b_.CreateAnd(a[0], a[1]);
      case Op::LogicalOr: case Op::BitwiseOr: return b_.CreateOr(a[0], a[1]);
      case Op::LogicalXor: case Op::BitwiseXor: return b_.CreateXor(a[0], a[1]);
      case Op::LogicalNot: case Op::BitwiseNot: return b_.CreateNot(a[0]);
      case Op::Cast: return a[0];  // operand() converted it to the target
      case Op::Sum: case Op::Prod: case Op::Amax: case Op::Amin: case Op::ArgMax:
      case Op::ArgMin: case Op::Any: case Op::All: case Op::CumSum: case Op::Permute: case Op::Reshape:
      case Op::Expand: case Op::Slice: case Op::Select: case Op::Flip: case Op::Cat: case Op::SliceScatter:
      case Op::IndexSelect: case Op::Gather: case Op::Full: case Op::Iota: case Op::ItemInt:
      case Op::ItemFloat: case Op::ItemBool: case Op::Matmul:
        FJ_CHECK(false, "emit_node of a non-pointwise op");
    }
    FJ_CHECK(false, "unknown op");
  }

  Value* clamp_min(Value* x, Value* lo) {
    Value* v = b_.CreateSelect(b_.CreateFCmpOLT(x, lo), lo, x);
    return b_.CreateSelect(b_.CreateFCmpUNO(lo, lo), lo, v);
  }
  Value* clamp_max(Value* x, Value* hi) {
    Value* v = b_.CreateSelect(b_.CreateFCmpOGT(x, hi), hi, x);
    return b_.CreateSelect(b_.CreateFCmpUNO(hi, hi), hi, v);
  }

  // torch's div_floor_floating: fmod-based, exact where a / b rounds up to an integer.
  Value* float_floor_div(Value* a, Value* b) {
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
  Value* float_remainder(Value* a, Value* b) {
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
  Value* int_div(const Node& n, Value* a, bool floor) {
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
  Value* int_pow(const Node& n, Value* x) {
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
  // need a constant.
  Value* emit_pow(const Node& n, Value* x, Value* exponent) {
    const Node& e = g_.node(n.inputs[1]);
    if (e.op != Op::Scalar) return b_.CreateBinaryIntrinsic(llvm::Intrinsic::pow, x, exponent);
    llvm::Type* ty = x->getType();
    const double p = e.scalar;
    if (p == 2) return b_.CreateFMul(x, x);
    if (p == 3) return b_.CreateFMul(b_.CreateFMul(x, x), x);
    if (p == 0.5) return unary(llvm::Intrinsic::sqrt, x);
    if (p == -1) return b_.CreateFDiv(fconst(ty, 1), x);
    if (p == -2) return b_.CreateFDiv(fconst(ty, 1), b_.CreateFMul(x, x));
    if (p == -0.5) return b_.CreateFDiv(fconst(ty, 1), unary(llvm::Intrinsic::sqrt, x));
    if (p == 1) return x;
    if (p == 0) return fconst(ty, 1);
    return b_.CreateBinaryIntrinsic(llvm::Intrinsic::pow, x, exponent);
  }

 private:
  const Graph& g_;
  const LowerOptions& options_;
  llvm::LLVMContext& ctx_;
  llvm::Module& m_;
  llvm::IRBuilder<>& b_;
};

}  // namespace fj::jit
