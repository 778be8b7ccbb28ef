// The lowering driver that the CPU and NVPTX backends share: schedule a graph and
// lower it to LLVM modules (scheduling again while lowering asks for a reduction to
// be materialized), run a target's optimization pipeline on a module, generate its
// machine code, and print it. Internal to jit/ (LLVM types in the interface).
#pragma once

#include <llvm/ADT/SmallVector.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/Passes/OptimizationLevel.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/CodeGen.h>

#include <memory>
#include <string>
#include <vector>

#include "jit/codegen/schedule.h"
#include "jit/common.h"

namespace llvm {
class TargetMachine;
}

namespace fj::jit {

// A module and the context it lives in (the context outlives the module).
struct KernelModule {
  std::unique_ptr<llvm::LLVMContext> ctx;
  std::unique_ptr<llvm::Module> module;
};

// How the kernels are grouped into modules: each kernel in a module and context of
// its own, named by its symbol (so that kernels compile on several threads), or
// every kernel in one module.
enum class ModuleLayout : uint8_t { PerKernel, Single };

struct LoweredGraph {
  Schedule schedule;
  std::vector<KernelModule> modules;  // PerKernel: parallel to schedule.kernels
  size_t rescheduled = 0;             // reductions that lowering asked to materialize
};

// Schedules `graph` (kernel symbols start with `prefix`) and lowers it. A Single
// layout names its one module `module_name`.
LoweredGraph lower_graph(const Graph& graph, const std::string& prefix, const LowerOptions& options,
                         ModuleLayout layout, const std::string& module_name = "");

// A target's optimization pipeline, plugged into optimize(): the level, the
// tuning (vectorizers, interleaving), and whether the target machine adds its own
// passes (NVPTX's).
struct Pipeline {
  llvm::OptimizationLevel level = llvm::OptimizationLevel::O2;
  llvm::PipelineTuningOptions tuning;
  bool target_passes = false;
};

void optimize(llvm::Module& module, llvm::TargetMachine& tm, const Pipeline& pipeline);

// Object code (CPU) or assembly (PTX) of an optimized module, appended to `out`.
Status emit_machine_code(llvm::Module& module, llvm::TargetMachine& tm, llvm::CodeGenFileType type,
                         llvm::SmallVectorImpl<char>& out);

// The module as LLVM IR text (FRAMEJIT_LOG=ir, CompiledGraph::ir()).
std::string module_text(const llvm::Module& module);

// Aborts on IR that the verifier rejects: the lowering emitted it, not the user.
void verify_kernels(const llvm::Module& module, const char* what);

}  // namespace fj::jit
