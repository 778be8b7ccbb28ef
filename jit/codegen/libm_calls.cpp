// Replacing libm calls and intrinsics that need libm with framejit's libm-free
// float32 functions (jit/codegen/libm.h), in a module of any target: NVPTX has no
// libm, and the CPU backend does it on request so tests can measure their accuracy.
#include "jit/codegen/libm.h"
#include "jit/codegen/math.h"

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/IntrinsicsNVPTX.h>
#include <llvm/IR/Module.h>

#include <functional>
#include <string>
#include <vector>

namespace fj::jit {
namespace {
// Intrinsics that NVPTX lowers to libm calls (which PTX cannot resolve).
bool needs_libm(llvm::Intrinsic::ID id) {
  switch (id) {
    case llvm::Intrinsic::exp: case llvm::Intrinsic::exp2: case llvm::Intrinsic::exp10:
    case llvm::Intrinsic::log: case llvm::Intrinsic::log2: case llvm::Intrinsic::log10:
    case llvm::Intrinsic::sin: case llvm::Intrinsic::cos: case llvm::Intrinsic::tan:
    case llvm::Intrinsic::pow: case llvm::Intrinsic::powi:
      return true;
    default:
      return false;
  }
}

// The float32 replacement of a call, or null when there is none.
using Replacement = std::function<llvm::Value*(llvm::IRBuilderBase&, llvm::CallInst*)>;

Replacement replacement_for(llvm::CallInst* call) {
  llvm::Function* f = call->getCalledFunction();
  if (f == nullptr || !call->getType()->isFloatTy()) return nullptr;
  auto arg = [](llvm::CallInst* c, unsigned k) { return c->getArgOperand(k); };
  switch (f->getIntrinsicID()) {
    case llvm::Intrinsic::exp: return [=](auto& b, auto* c) { return math::exp(b, arg(c, 0)); };
    case llvm::Intrinsic::log: return [=](auto& b, auto* c) { return math::log(b, arg(c, 0)); };
    case llvm::Intrinsic::sin: return [=](auto& b, auto* c) { return math::sin(b, arg(c, 0)); };
    case llvm::Intrinsic::cos: return [=](auto& b, auto* c) { return math::cos(b, arg(c, 0)); };
    case llvm::Intrinsic::pow:
      return [=](auto& b, auto* c) { return math::pow(b, arg(c, 0), arg(c, 1)); };
    case llvm::Intrinsic::not_intrinsic: break;
    default: return nullptr;
  }
  const llvm::StringRef name = f->getName();
  if (name == "tanhf") return [=](auto& b, auto* c) { return math::tanh(b, arg(c, 0)); };
  if (name == "erff") return [=](auto& b, auto* c) { return math::erf(b, arg(c, 0)); };
  if (name == "expm1f") return [=](auto& b, auto* c) { return math::expm1(b, arg(c, 0)); };
  if (name == "log1pf") return [=](auto& b, auto* c) { return math::log1p(b, arg(c, 0)); };
  if (name == "sinf" || name == "cosf") {
    const bool is_cos = name == "cosf";
    return [=](auto& b, auto* c) {
      return b.CreateCall(math::trig_large(*c->getModule(), is_cos), {arg(c, 0)});
    };
  }
  return nullptr;
}

// What a call that stays would need, for the error message.
std::string describe(llvm::CallInst* call) {
  llvm::Function* f = call->getCalledFunction();
  std::string type;
  llvm::raw_string_ostream os(type);
  call->getType()->print(os);
  return (f ? f->getName().str() : std::string("an indirect call")) + " (" + type + ")";
}

}  // namespace

Status replace_libm_calls(llvm::Module& m) {
  // The vector variants kept for the CPU's loop vectorizer go first (they call libm
  // lane by lane); nothing vectorizes for NVPTX.
  if (llvm::GlobalVariable* used = m.getGlobalVariable("llvm.compiler.used")) used->eraseFromParent();
  for (llvm::Function& f : llvm::make_early_inc_range(m.functions())) {
    if (f.hasLocalLinkage() && f.use_empty()) f.eraseFromParent();
  }
  for (bool changed = true; changed;) {
    changed = false;
    std::vector<llvm::CallInst*> calls;
    for (llvm::Function& f : m.functions()) {
      for (llvm::BasicBlock& bb : f) {
        for (llvm::Instruction& inst : bb) {
          if (auto* call = llvm::dyn_cast<llvm::CallInst>(&inst)) {
          call->removeFnAttr("vector-function-abi-variant");  // the variants are gone
          calls.push_back(call);
        }
        }
      }
    }
    for (llvm::CallInst* call : calls) {
      Replacement r = replacement_for(call);
      if (!r) continue;
      llvm::IRBuilder<> b(call);
      llvm::Value* v = r(b, call);
      call->replaceAllUsesWith(v);
      call->eraseFromParent();
      changed = true;
    }
  }
  // jit/codegen/math.h keeps its sin/cos fix-up out of line for the vectorizer: inline it.
  for (llvm::Function& f : m.functions()) {
    if (f.getName().starts_with("fj_") && f.getName().ends_with("_fixup")) {
      f.removeFnAttr(llvm::Attribute::NoInline);
      f.addFnAttr(llvm::Attribute::AlwaysInline);
    }
  }
  for (llvm::Function& f : llvm::make_early_inc_range(m.functions())) {
    if (f.isDeclaration() && f.use_empty()) f.eraseFromParent();
  }
  for (llvm::Function& f : m.functions()) {
    for (llvm::BasicBlock& bb : f) {
      for (llvm::Instruction& inst : bb) {
        auto* call = llvm::dyn_cast<llvm::CallInst>(&inst);
        if (call != nullptr) {
          llvm::Function* callee = call->getCalledFunction();
          if (callee == nullptr || (callee->isDeclaration() && !callee->isIntrinsic()) ||
              needs_libm(callee->getIntrinsicID())) {
            return Error{"the CUDA backend has no libm-free version of " + describe(call) +
                         " (float64 transcendental functions are not supported on CUDA yet)"};
          }
        }
        if (inst.getOpcode() == llvm::Instruction::FRem) {
          return Error{"the CUDA backend has no exact fmod yet (float remainder / floor_divide)"};
        }
      }
    }
  }
  return ok();
}

}  // namespace fj::jit
