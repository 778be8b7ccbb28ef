// emit_ptx: lower with the shared driver (jit/codegen/driver.h, Target::Nvptx),
// replace libm, wrap each kernel body in a PTX entry, optimize with the NVPTX
// TargetMachine's pipeline and print PTX (jit/cuda/nvptx_backend.h).
#include "jit/cuda/nvptx_backend.h"

#include <llvm/ADT/SmallString.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/IntrinsicsNVPTX.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/MC/MCSubtargetInfo.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Target/TargetMachine.h>

#include <algorithm>
#include <memory>
#include <mutex>

#include "jit/codegen/driver.h"
#include "jit/codegen/libm.h"
#include "jit/log.h"

extern "C" {
void LLVMInitializeNVPTXTargetInfo();
void LLVMInitializeNVPTXTarget();
void LLVMInitializeNVPTXTargetMC();
void LLVMInitializeNVPTXAsmPrinter();
}

namespace fj::jit {
namespace {

constexpr const char* kTriple = "nvptx64-nvidia-cuda";

// Turns kernel `symbol` into an internal, always-inlined body and adds the PTX entry
// that calls it once per split-dim index (ABI in nvptx_backend.h).
void add_entry(llvm::Module& m, const std::string& symbol) {
  llvm::LLVMContext& ctx = m.getContext();
  llvm::Function* body = m.getFunction(symbol);
  FJ_CHECK(body != nullptr, "a kernel without its function: " + symbol);
  body->setName(symbol + "_body");
  body->setLinkage(llvm::GlobalValue::InternalLinkage);
  body->addFnAttr(llvm::Attribute::AlwaysInline);
  auto* ptr = llvm::PointerType::get(ctx, 0);
  auto* i64 = llvm::Type::getInt64Ty(ctx);
  auto* fn_ty = llvm::FunctionType::get(llvm::Type::getVoidTy(ctx), {ptr, ptr, ptr, ptr, ptr, i64}, false);
  auto* entry = llvm::Function::Create(fn_ty, llvm::GlobalValue::ExternalLinkage, symbol, m);
  entry->setCallingConv(llvm::CallingConv::PTX_Kernel);
  entry->addFnAttr(llvm::Attribute::NoUnwind);
  for (unsigned k = 0; k < 5; ++k) entry->addParamAttr(k, llvm::Attribute::NoAlias);
  const char* names[] = {"ptrs", "strides", "dims", "scalars", "status", "extent"};
  for (unsigned k = 0; k < 6; ++k) entry->getArg(k)->setName(names[k]);
  llvm::IRBuilder<> b(llvm::BasicBlock::Create(ctx, "entry", entry));
  // KernelArgs on the stack (SROA dissolves it once the body is inlined).
  auto* args_ty = llvm::StructType::get(ctx, {ptr, ptr, ptr, ptr, ptr});
  llvm::Value* args = b.CreateAlloca(args_ty, nullptr, "args");
  for (unsigned k = 0; k < 5; ++k) b.CreateStore(entry->getArg(k), b.CreateStructGEP(args_ty, args, k));
  auto sreg = [&](llvm::Intrinsic::ID id) {
    return b.CreateZExt(b.CreateIntrinsic(id, {}, {}), i64);
  };
  llvm::Value* tid = sreg(llvm::Intrinsic::nvvm_read_ptx_sreg_tid_x);
  llvm::Value* ntid = sreg(llvm::Intrinsic::nvvm_read_ptx_sreg_ntid_x);
  llvm::Value* ctaid = sreg(llvm::Intrinsic::nvvm_read_ptx_sreg_ctaid_x);
  llvm::Value* nctaid = sreg(llvm::Intrinsic::nvvm_read_ptx_sreg_nctaid_x);
  llvm::Value* first = b.CreateAdd(b.CreateMul(ctaid, ntid), tid, "first");
  llvm::Value* step = b.CreateMul(nctaid, ntid, "step");
  llvm::Value* extent = entry->getArg(5);
  // for (i = first; i < extent; i += step) body(&args, i, i + 1)
  llvm::BasicBlock* pre = b.GetInsertBlock();
  auto* loop = llvm::BasicBlock::Create(ctx, "loop", entry);
  auto* run = llvm::BasicBlock::Create(ctx, "run", entry);
  auto* done = llvm::BasicBlock::Create(ctx, "done", entry);
  b.CreateBr(loop);
  b.SetInsertPoint(loop);
  llvm::PHINode* i = b.CreatePHI(i64, 2, "i");
  i->addIncoming(first, pre);
  b.CreateCondBr(b.CreateICmpSLT(i, extent), run, done);
  b.SetInsertPoint(run);
  llvm::Value* next = b.CreateAdd(i, b.getInt64(1), "", true, true);
  b.CreateCall(body, {args, i, next});
  i->addIncoming(b.CreateAdd(i, step, "", true, true), run);
  b.CreateBr(loop);
  b.SetInsertPoint(done);
  b.CreateRetVoid();
}

Expected<std::unique_ptr<llvm::TargetMachine>> target_machine(const std::string& arch) {
  static std::once_flag init;
  std::call_once(init, [] {
    LLVMInitializeNVPTXTargetInfo();
    LLVMInitializeNVPTXTarget();
    LLVMInitializeNVPTXTargetMC();
    LLVMInitializeNVPTXAsmPrinter();
  });
  if (arch.size() < 4 || arch.compare(0, 3, "sm_") != 0 ||
      !std::all_of(arch.begin() + 3, arch.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return Error{"unknown CUDA architecture '" + arch + "' (expected sm_80, sm_90, ...)"};
  }
  std::string error;
  const llvm::Target* target = llvm::TargetRegistry::lookupTarget(kTriple, error);
  if (target == nullptr) return Error{"the NVPTX target is unavailable: " + error};
  llvm::TargetOptions opts;
  opts.AllowFPOpFusion = llvm::FPOpFusion::Strict;  // eager semantics: no fma contraction
  // PTX ISA 7.8 is the first with sm_90; ptxas of CUDA 12+ reads it for sm_80 too.
  std::unique_ptr<llvm::TargetMachine> tm(target->createTargetMachine(
      kTriple, arch, "+ptx78", opts, std::nullopt, std::nullopt, llvm::CodeGenOptLevel::Aggressive));
  if (!tm) return Error{"cannot create the NVPTX target machine for " + arch};
  if (!tm->getMCSubtargetInfo()->isCPUStringValid(arch)) {
    return Error{"the NVPTX target does not know the architecture '" + arch + "'"};
  }
  return tm;
}

// O3 with the NVPTX target's own passes; no loop vectorizer (one thread per index:
// nothing to widen).
Pipeline nvptx_pipeline() {
  Pipeline p;
  p.level = llvm::OptimizationLevel::O3;
  p.tuning.LoopVectorization = false;
  p.tuning.SLPVectorization = false;
  p.target_passes = true;
  return p;
}

}  // namespace

Expected<PtxProgram> emit_ptx(const Graph& graph, const NvptxOptions& options) {
  std::unique_ptr<llvm::TargetMachine> tm = FJ_TRY(target_machine(options.arch));
  LowerOptions lower;
  lower.target = Target::Nvptx;
  lower.vector_math = true;  // plain-IR exp/log/sin/cos/tanh/sigmoid (llvm.fma is native)
  LoweredGraph lowered = lower_graph(graph, "fj_cuda", lower, ModuleLayout::Single, "framejit");
  PtxProgram out;
  out.schedule = std::move(lowered.schedule);
  llvm::Module& module = *lowered.modules[0].module;
  module.setTargetTriple(kTriple);
  module.setDataLayout(tm->createDataLayout());
  FJ_TRY(replace_libm_calls(module));
  for (const KernelSpec& spec : out.schedule.kernels) {
    add_entry(module, spec.symbol);
    PtxKernel k;
    k.entry = spec.symbol;
    k.extent = spec.split_dim >= 0 ? spec.shape[static_cast<size_t>(spec.split_dim)] : SymExpr::integer(1);
    k.work = kernel_work(graph, out.schedule, spec);
    out.kernels.push_back(std::move(k));
  }
  out.ir = module_text(module);
  if (log::enabled(log::Channel::Ir)) log::jit().info("LLVM IR for NVPTX:\n{}", out.ir);
  verify_kernels(module, "invalid NVPTX kernel IR");
  optimize(module, *tm, nvptx_pipeline());
  llvm::SmallString<0> ptx;
  if (emit_machine_code(module, *tm, llvm::CodeGenFileType::AssemblyFile, ptx).failed()) {
    return Error{"the NVPTX target cannot emit PTX for " + options.arch};
  }
  out.ptx = ptx.str().str();
  if (log::enabled(log::Channel::Ptx)) log::jit().info("PTX ({}):\n{}", options.arch, out.ptx);
  return out;
}

LaunchConfig launch_config(int64_t extent, int64_t work) {
  extent = std::max<int64_t>(extent, 1);
  const int64_t per_index = std::max<int64_t>(work / extent, 1);
  int64_t block = per_index <= 64 ? 256 : per_index <= 4096 ? 128 : 64;
  // A small extent: one block of just enough warps.
  block = std::min<int64_t>(block, (extent + 31) / 32 * 32);
  const int64_t max_grid = int64_t{1} << 20;  // the entry strides over the rest
  const int64_t grid = std::min<int64_t>((extent + block - 1) / block, max_grid);
  return LaunchConfig{static_cast<uint32_t>(grid), static_cast<uint32_t>(block)};
}

}  // namespace fj::jit
