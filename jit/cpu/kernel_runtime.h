// The CPU kernel runtime: a CompiledGraph (jit/cpu/cpu_backend.h) that runs its
// schedule's steps with the kernels' entry points: temporary buffers from a pool
// (fresh pages are slow to touch), large loops cut into chunks on the thread pool,
// matmuls through BLAS. Internal to jit/cpu; no LLVM type here.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "jit/codegen/schedule.h"
#include "jit/cpu/cpu_backend.h"

namespace fj::jit {

// A kernel's entry point (ABI in jit/codegen/schedule.h).
using KernelFn = void (*)(const KernelArgs* args, int64_t begin, int64_t end);

struct Kernel {
  KernelFn fn;
  std::vector<SymExpr> work;  // element counts whose maximum estimates the work
};

// The graph's compiled code: kernels parallel to schedule.kernels; `code` keeps
// their machine code loaded while the result lives; num_threads: chunks per large
// loop at most (1: no threads).
std::shared_ptr<CompiledGraph> make_cpu_compiled_graph(std::shared_ptr<const void> code, Graph graph,
                                                       Schedule schedule, std::vector<Kernel> kernels,
                                                       std::string ir, std::string optimized_ir,
                                                       size_t num_threads);

}  // namespace fj::jit
