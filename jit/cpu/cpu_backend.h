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
#include "jit/ir/graph.h"

namespace fj::jit {

// A strided view of a buffer as the kernels see it: sizes and strides in elements.
struct TensorArg {
  void* data = nullptr;
  const int64_t* sizes = nullptr;
  const int64_t* strides = nullptr;
  int rank = 0;
};

// A compiled graph: a few fused loop nests and extern matmuls (jit/codegen/schedule.h).
// Owns its JIT code (one ResourceTracker); the code is freed when the last
// reference goes.
class CompiledGraph {
 public:
  virtual ~CompiledGraph() = default;
  // inputs: one per placeholder, in placeholder order, with the placeholder's rank
  // and sizes; outputs: one per graph output, preallocated with the output node's
  // shape and dtype (any strides). Outputs must not overlap the inputs or each
  // other. Large loops are split into chunks run on the process's thread pool
  // (jit/cpu/thread_pool.h). scalars: the values of the graph's scalar inputs
  // (Graph::scalar_input), by index: a double for kind Float, the int64 bit pattern
  // (memcpy'd into the double's 8 bytes) for kinds Int and Bool; may be null when the
  // graph has none. bindings: the values of the size symbols the graph's shapes use;
  // when null they are read from the inputs' sizes (every symbol must then be an
  // input's size). Returns 0, or a KernelStatus when an index was out of range or an
  // int() had no value: the outputs are then meaningless and the caller must
  // compute the result another way (eager raises the error); or kInterrupted when the
  // stop poll ended the run (see set_stop_poll).
  // The caller checks sizes_fit() first (before it allocates the outputs).
  virtual int64_t run(const std::vector<TensorArg>& inputs, const std::vector<TensorArg>& outputs,
                      const double* scalars = nullptr, const Bindings* bindings = nullptr) const = 0;
  // Whether every size, stride and byte count of the graph's values fits in int64 for
  // these bindings (jit/ir/size_check.h); false: the graph must not run (eager raises).
  virtual bool sizes_fit(const Bindings& bindings) const = 0;
  virtual size_t num_kernels() const = 0;
  // The LLVM IR as emitted (before optimization), for FRAMEJIT_LOG=ir and tests.
  virtual const std::string& ir() const = 0;
  // After optimization; empty unless FRAMEJIT_LOG=ir or FRAMEJIT_TRACE_DIR is set.
  virtual const std::string& optimized_ir() const = 0;
};

// Ending a long run or compile early (Ctrl-C). The embedder (interp/, which knows
// Python) registers two functions: `pending` says, cheaply and taking no lock,
// whether a signal waits for a handler that this thread may run; `poll` runs the
// handlers (it may block: it takes the GIL) and returns true when one raised.
// A run asks `poll` between pieces of work (rounds of about 10 ms of a large
// loop, steps, panels of a large matmul) and inside the kernels every 64K or so
// iterations (KernelArgs::stop), on the calling thread (other threads of the pool
// only see that it said stop); true ends the run: run() returns kInterrupted
// (jit/codegen/schedule.h), the outputs meaningless. A compile asks `pending`
// between kernels (it holds a lock that a fork takes, so it never waits for the
// GIL) and gives up with kCompileInterrupted: the caller runs the handlers and
// compiles again if none raised. Null (the default): no polling.
using StopPoll = bool (*)();
void set_stop_poll(StopPoll poll, StopPoll pending);
// The Error message of a compile that a pending signal ended.
inline constexpr const char* kCompileInterrupted = "the compile was interrupted: a signal waits for its handler";

struct CpuOptions {
  // Inline vectorizable exp/log/sin/cos/tanh/sigmoid (within 2 ulp; jit/codegen/math.h)
  // where the host has FMA; false (or no FMA): glibc's functions, lane by lane.
  bool vector_math = true;
  // Chunks (threads) per large loop at most; 0: FRAMEJIT_NUM_THREADS or the
  // hardware's thread count; 1: every loop runs on the calling thread. Loops of at
  // least 64K elements are split (see CompiledGraph::run).
  size_t num_threads = 0;
  // Tests only: the CUDA target's libm-free float32 erf/expm1/log1p/pow/sin/cos
  // (jit/codegen/libm.h) instead of libm, to measure their accuracy on the host.
  bool gpu_math = false;
  // Eager's float32 gelu(+inf) is NaN (torch's AVX-512 kernels) rather than inf:
  // set from torch's CPU capability by interp/, which knows torch.
  bool gelu_inf_is_nan = false;
};

class CpuBackend {
 public:
  static Expected<std::unique_ptr<CpuBackend>> create(const CpuOptions& options = {});
  virtual ~CpuBackend() = default;
  // Graphs with equal Graph::structural_key() share one CompiledGraph while any
  // caller holds it. Fails with kCompileInterrupted when a signal came meanwhile
  // (interruptible: else it goes on to the end).
  virtual Expected<std::shared_ptr<CompiledGraph>> compile(const Graph& graph, bool interruptible = true) = 0;
  // How many compile() calls returned code compiled for an earlier equal graph.
  virtual size_t cache_hits() const = 0;
};

}  // namespace fj::jit
