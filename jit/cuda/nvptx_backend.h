// The CUDA backend's code generator: a Graph lowered through the target-generic
// schedule and KernelEmitter (jit/codegen/schedule.h) to PTX via LLVM's NVPTX target. No
// GPU, driver or CUDA header is needed to emit PTX; running it is jit/cuda/cuda_driver.h.
//
// PTX ABI of each kernel (one `.entry` per KernelSpec, named spec.symbol):
//   .entry k(.param .u64 ptrs, .param .u64 strides, .param .u64 dims,
//            .param .u64 scalars, .param .u64 status, .param .u64 extent)
// The first five are the device addresses of KernelArgs' arrays (jit/codegen/schedule.h:
// buffer pointers, strides in elements, dims table, scalar inputs, the int64 status
// word, which kernels OR a KernelStatus into). Thread i of the grid runs the
// kernel body for split-dim indices i, i + gridsize, ... below `extent` (the split
// dim's size, 1 for a kernel without one): launch_config() picks grid and block.
// Matmul steps are not in the PTX (cuBLAS, at run time).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "jit/common.h"
#include "jit/codegen/schedule.h"
#include "jit/ir/graph.h"

namespace fj::jit {

struct NvptxOptions {
  std::string arch = "sm_90";  // sm_80 or sm_90 (or any sm_XX the NVPTX target knows)
};

struct PtxKernel {
  std::string entry;          // the .entry name (== the KernelSpec's symbol)
  SymExpr extent;             // split-dim size: the number of body invocations
  std::vector<SymExpr> work;  // element counts estimating its work (kernel_work)
};

struct PtxProgram {
  std::string ptx;             // one module: every kernel of the graph
  Schedule schedule;           // buffers, dims table and step order, as on the CPU
  std::vector<PtxKernel> kernels;  // parallel to schedule.kernels
  std::string ir;              // the LLVM IR as emitted (before optimization)
};

// Emits the PTX of a graph. Errors: an op the CUDA target cannot lower without
// libdevice (float64 transcendental functions, float remainder), an unknown arch.
Expected<PtxProgram> emit_ptx(const Graph& graph, const NvptxOptions& options = {});

// The grid and block sizes of a kernel launch: blocks of 256 threads for light
// per-index work, smaller blocks when each index carries a long inner loop (row
// reductions) so the rows spread over more multiprocessors; the grid covers the
// extent, capped (the entry strides over the rest).
struct LaunchConfig {
  uint32_t grid = 1;
  uint32_t block = 1;
};
LaunchConfig launch_config(int64_t extent, int64_t work);


}  // namespace fj::jit
