// The lowering driver shared by the CPU and NVPTX backends (jit/codegen/driver.h).
#include "jit/codegen/driver.h"

#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>

#include <algorithm>

namespace fj::jit {
namespace {

std::vector<KernelModule> fresh_modules(const Schedule& schedule, ModuleLayout layout, const std::string& name) {
  std::vector<KernelModule> out;
  auto add = [&](const std::string& module_name) {
    KernelModule km;
    km.ctx = std::make_unique<llvm::LLVMContext>();
    km.module = std::make_unique<llvm::Module>(module_name, *km.ctx);
    out.push_back(std::move(km));
  };
  if (layout == ModuleLayout::Single) {
    add(name);
  } else {
    for (const KernelSpec& spec : schedule.kernels) add(spec.symbol);
  }
  return out;
}

}  // namespace

LoweredGraph lower_graph(const Graph& graph, const std::string& prefix, const LowerOptions& options,
                         ModuleLayout layout, const std::string& module_name) {
  // A reduction that the schedule left inline but that would be recomputed gets a
  // buffer, and the graph is scheduled and lowered again into fresh modules.
  std::vector<NodeId> materialize;
  for (;;) {
    LoweredGraph out{schedule_graph(graph, prefix, materialize), {}, materialize.size()};
    out.modules = fresh_modules(out.schedule, layout, module_name);
    std::vector<llvm::Module*> modules;
    for (KernelModule& km : out.modules) modules.push_back(km.module.get());
    const LowerOutcome lowered = lower_schedule(graph, out.schedule, modules, options);
    if (lowered.complete()) return out;
    const NodeId again = lowered.rematerialize;
    FJ_CHECK(std::find(materialize.begin(), materialize.end(), again) == materialize.end(),
             "lowering asked for a node twice");
    materialize.push_back(again);
  }
}

void optimize(llvm::Module& module, llvm::TargetMachine& tm, const Pipeline& pipeline) {
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PassBuilder pb(&tm, pipeline.tuning);
  if (pipeline.target_passes) tm.registerPassBuilderCallbacks(pb);
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  pb.buildPerModuleDefaultPipeline(pipeline.level).run(module, mam);
}

Status emit_machine_code(llvm::Module& module, llvm::TargetMachine& tm, llvm::CodeGenFileType type,
                         llvm::SmallVectorImpl<char>& out) {
  llvm::raw_svector_ostream os(out);
  llvm::legacy::PassManager pm;
  if (tm.addPassesToEmitFile(pm, os, nullptr, type)) {
    const char* what = type == llvm::CodeGenFileType::ObjectFile ? "object code" : "assembly";
    return Error{std::string("the target cannot emit ") + what + " for " + tm.getTargetCPU().str()};
  }
  pm.run(module);
  return ok();
}

std::string module_text(const llvm::Module& module) {
  std::string text;
  llvm::raw_string_ostream os(text);
  module.print(os, nullptr);
  return text;
}

void verify_kernels(const llvm::Module& module, const char* what) {
  std::string broken;
  llvm::raw_string_ostream broken_os(broken);
  FJ_CHECK(!llvm::verifyModule(module, &broken_os), std::string(what) + ": " + broken);
}

}  // namespace fj::jit
