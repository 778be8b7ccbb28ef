// Scheduling and lowering of a Graph to LLVM IR kernels. Internal to jit/.
//
// Schedule (target-generic): the graph's values are either *materialized* in a
// buffer (graph inputs, graph outputs, matmul operands and results, reductions
// that cannot be fused where they are used) or recomputed inline, element by
// element, wherever they are read. Each materialized node is stored by one kernel:
// a loop nest over its shape, in which every value is computed from its
// definition at the index where it is needed (views remap the index, reductions
// run an inner loop, placed at the outermost loop level their index depends on, so
// that softmax's row maxima and sums are computed once per row next to the loop
// that uses them). Steps run in order: kernels and extern matmuls.
//
// Kernel ABI (one function per KernelSpec, named spec.symbol):
//   void kernel(const KernelArgs* args, int64_t begin, int64_t end)
// The loop over dim `spec.split_dim` runs over [begin, end) (the caller splits it
// across threads); every other dim over its whole size. With split_dim == -1 the
// kernel ignores begin and end.
// Buffers are numbered: graph inputs (placeholders, by index), graph outputs (by
// position), then temporaries. args->ptrs[b] is buffer b's data; its strides (in
// elements, one per dim of the buffer's node) are at args->strides +
// Schedule::stride_offset[b]. args->dims holds the values of Schedule::dim_exprs
// (sizes and view offsets that are symbolic), args->scalars the graph's scalar
// inputs (see CompiledGraph::run), and *args->status is set to a nonzero
// KernelStatus when an index is out of range or an int() conversion has no value.
// CPU kernels call args->stop(args->stop_ctx) (when not null) after every
// kStopCheckElements or so iterations of their innermost loops, whatever the loop
// nest (a 0-d sum, a few wide rows); a nonzero answer ends the kernel at once with
// kInterrupted or'ed into *args->status, its stores left unfinished.
// Element types: Bool is one byte 0/1; integer arithmetic wraps, nothing traps.
// Stores never overlap any buffer that the same kernel reads (alias scopes).
// No LLVM header here: only forward declarations.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "jit/ir/graph.h"

namespace llvm {
class LLVMContext;
class Module;
}  // namespace llvm

namespace fj::jit {

struct KernelArgs {
  char* const* ptrs;
  const int64_t* strides;
  const int64_t* dims;
  const double* scalars;
  int64_t* status;
  int32_t (*stop)(void* ctx);  // CPU only; null: never stop
  void* stop_ctx;
};

// The innermost loops' iterations between two calls of KernelArgs::stop (at most:
// a loop of more runs in blocks of this many; shorter loops add up their counts).
constexpr int64_t kStopCheckElements = int64_t{1} << 16;

// kInterrupted and kExternFailed are set by the CPU runtime or a kernel, not by
// generated index code: the stop poll ended the run (jit/cpu/cpu_backend.h,
// set_stop_poll; between pieces of work or in a kernel through KernelArgs::stop), or
// an ExternFn failed (jit/ir/extern_fn.h).
enum KernelStatus : int64_t { kOk = 0, kIndexOutOfRange = 1, kNoIntValue = 2, kInterrupted = 4, kExternFailed = 8 };

struct KernelSpec {
  std::string symbol;
  SymShape shape;              // the loop's shape
  int split_dim = -1;          // the dim threads split (its loop runs [begin, end))
  struct Store {
    NodeId node;
    int32_t buffer;  // -1: evaluated for its checks only (Graph::checks), not stored
  };
  std::vector<Store> stores;
  // A copy of a matmul operand that is a view of a graph input (or a permute or
  // reshape of a computed node's buffer): skipped when the view's strides can be
  // computed at run time (the matmul then reads the input or buffer in place).
  NodeId view_copy_of = -1;
};

struct Step {
  enum class Kind : uint8_t { Kernel, Extern } kind;
  int32_t index;  // Kernel: position in Schedule::kernels; Extern: the node (Matmul, ExternCall)
};

struct Schedule {
  std::vector<KernelSpec> kernels;
  std::vector<Step> steps;
  std::vector<int32_t> buffer_of;       // per node: its buffer, or -1 (computed inline)
  std::vector<NodeId> buffer_node;      // per buffer: the node it holds (inputs: placeholder)
  std::vector<int64_t> stride_offset;   // per buffer: first stride in KernelArgs::strides
  size_t num_inputs = 0, num_outputs = 0;
  std::vector<SymExpr> dim_exprs;       // KernelArgs::dims, filled while lowering
};

// The target the kernels are emitted for: the CPU (ORC LLJIT) or NVPTX, where
// each kernel becomes an internal body that a PTX entry calls once per index of
// the split dim (jit/cuda/nvptx_backend.cpp), so the status report must be atomic.
enum class Target : uint8_t { Cpu, Nvptx };

struct LowerOptions {
  Target target = Target::Cpu;
  // Inline, vectorizable exp/log/sin/cos/tanh/sigmoid (jit/codegen/math.h; needs FMA).
  // false: libm per lane (llvm.exp etc., tanhf), bit-identical to glibc.
  bool vector_math = false;
  // float32 erf/expm1/log1p as glibc's double functions rounded to float (close to
  // correctly rounded, so closer to eager's); false: the float names (erff, ...),
  // which the NVPTX path and its host tests replace with framejit's own.
  bool float_libm_via_double = true;
  // CPU: reductions and cumulative sums over an outer dim run with the innermost
  // loop inside theirs, per tile of lanes (jit/codegen/lower_lanes.cpp); false: one
  // loop per result element.
  bool lane_loops = true;
  // CPU: the innermost loops call KernelArgs::stop now and then (false: never, as
  // the GPU-math host tests need: their modules must hold no indirect call).
  bool stop_checks = true;
  // Eager's float32 gelu(+inf) is NaN in a tensor of more than one element when
  // torch runs its AVX-512 kernels (their vectorized erf), inf otherwise.
  bool gelu_inf_is_nan = false;
};

// The schedule of a graph; `materialize` forces more nodes into buffers.
Schedule schedule_graph(const Graph& graph, const std::string& symbol_prefix,
                        const std::vector<NodeId>& materialize = {});

// What lower_schedule did: every kernel emitted, or found a reduction that the
// schedule left inline but that would be recomputed (read at an index that varies
// in an inner loop, or by two kernels): schedule again with it materialized, into
// fresh modules (lower_graph in jit/codegen/driver.h does).
struct [[nodiscard]] LowerOutcome {
  NodeId rematerialize = -1;
  bool complete() const { return rematerialize < 0; }
};

// Emits one function per kernel of the schedule, all into modules[0] or kernel k
// into modules[k] (one module per kernel, each in its own context: the CPU backend
// optimizes and compiles them on several threads), and fills schedule.dim_exprs.
LowerOutcome lower_schedule(const Graph& graph, Schedule& schedule, const std::vector<llvm::Module*>& modules,
                            const LowerOptions& options);

// The element counts that estimate a kernel's work: its loop and every value it
// reads or reduces (the CPU backend splits by it, the CUDA backend sizes blocks).
std::vector<SymExpr> kernel_work(const Graph& graph, const Schedule& schedule, const KernelSpec& spec);

}  // namespace fj::jit
