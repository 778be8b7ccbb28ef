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
    // A pow exponent stays float64 on float32 data: 2**24 + 1 is odd, its float32 is not.
    const bool exponent = n.op == Op::PowScalar && k == 1 && is_floating(n.compute);
    const DType to = mask ? DType::Bool : exponent ? DType::Float64 : n.compute;
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

  // A pointwise node's element from its operands (each in the type operand() gave
  // it): one emitter per op (jit/codegen/element_ops.cpp), found in a table built
  // from jit/ir/ops.def, so that a pointwise op without an emitter fails to compile.
  Value* emit_node(const Node& n, const std::vector<Value*>& a);

 private:
  // What every op's emitter reads: the node, its operands, and its compute type.
  struct Operands {
    const Node& n;
    const std::vector<Value*>& a;
    DType c;         // n.compute
    bool fp, un;     // c is floating; c is unsigned (bool, uint8)
    llvm::Type* ty;  // c's register type for floats and casts, else null
    Value* operator[](size_t k) const { return a[k]; }
  };
  using OpEmitter = Value* (ElementEmitter::*)(const Operands&);
  template <Op op>
  Value* emit(const Operands& x);
  Value* not_pointwise(const Operands& x);
  Value* number_constant(const Operands& x);
  Value* one(const Operands& x) { return fconst(x.ty, 1); }
  Value* zero(const Operands& x) { return fconst(x.ty, 0); }
  Value* max(const Operands& x, Value* p, Value* q);
  Value* min(const Operands& x, Value* p, Value* q);
  Value* clamp_min(Value* x, Value* lo);
  Value* clamp_max(Value* x, Value* hi);
  Value* float_floor_div(Value* a, Value* b);
  Value* float_remainder(Value* a, Value* b);
  Value* int_div(const Node& n, Value* a, bool floor);
  Value* int_pow(const Node& n, Value* x);
  Value* emit_pow(const Node& n, Value* x, Value* exponent);
  Value* exponent_sign(Value* x, Value* y, Value* r);
  Value* runtime_special_pow(Value* x, Value* y, Value* r);

  const Graph& g_;
  const LowerOptions& options_;
  llvm::LLVMContext& ctx_;
  llvm::Module& m_;
  llvm::IRBuilder<>& b_;
};

}  // namespace fj::jit
