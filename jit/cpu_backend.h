// The CPU backend: lowers a Graph to fused loops in LLVM IR and compiles them with
// ORC LLJIT. Three verbs, as in LLVM's ORC examples: create, compile (add + lookup),
// and run the result. No LLVM type appears in this header.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "jit/common.h"
#include "jit/graph.h"

namespace fj::jit {

// A strided view of a buffer as the kernels see it: sizes and strides in elements.
struct TensorArg {
  void* data = nullptr;
  const int64_t* sizes = nullptr;
  const int64_t* strides = nullptr;
  int rank = 0;
};

// A compiled graph: one fused loop nest per distinct output shape (all outputs of
// one shape are computed by one loop). Owns its JIT code (one ResourceTracker);
// the code is freed when the last reference goes.
class CompiledGraph {
 public:
  virtual ~CompiledGraph() = default;
  // inputs: one per placeholder, in placeholder order; outputs: one per graph
  // output, preallocated (contiguous) with the output node's shape and dtype.
  // Inputs with fewer dims or size-1 dims broadcast against each loop's shape.
  // Outputs must not overlap the inputs or each other (the kernels assume so).
  // A loop of at least 64K elements is split into contiguous chunks of its
  // outermost dim of extent > 1, run on the process's thread pool (jit/thread_pool.h).
  // scalars: the values of the graph's scalar inputs (Graph::scalar_input), by
  // index, as Python gives them (C doubles); each kernel rounds them to float32 as
  // PyTorch does ((float)value). May be null when the graph has no scalar inputs.
  virtual void run(const std::vector<TensorArg>& inputs, const std::vector<TensorArg>& outputs,
                   const double* scalars = nullptr) const = 0;
  virtual size_t num_kernels() const = 0;
  // The LLVM IR as emitted (before optimization), for FRAMEJIT_LOG=ir and tests.
  virtual const std::string& ir() const = 0;
  // After optimization; empty unless FRAMEJIT_LOG=ir or FRAMEJIT_TRACE_DIR is set.
  virtual const std::string& optimized_ir() const = 0;
};

struct CpuOptions {
  // Inline vectorizable exp/log/sin/cos/tanh/sigmoid (within 2 ulp; jit/cpu_math.h)
  // where the host has FMA; false (or no FMA): glibc's functions, lane by lane.
  bool vector_math = true;
  // Chunks (threads) per large loop at most; 0: FRAMEJIT_NUM_THREADS or the
  // hardware's thread count; 1: every loop runs on the calling thread. Loops of at
  // least 64K elements are split (see CompiledGraph::run).
  size_t num_threads = 0;
};

class CpuBackend {
 public:
  static Expected<std::unique_ptr<CpuBackend>> create(const CpuOptions& options = {});
  virtual ~CpuBackend() = default;
  virtual Expected<std::shared_ptr<CompiledGraph>> compile(const Graph& graph) = 0;
};

}  // namespace fj::jit
