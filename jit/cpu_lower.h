// Lowering of a Graph to LLVM IR for the CPU backend: kernel planning (one fused
// loop nest per distinct output shape) and IR emission. Internal to jit/cpu_*.cpp.
//
// Kernel ABI (one function per KernelPlan, named plan.symbol):
//   void kernel(char* const* ptrs, const int64_t* sizes, const int64_t* strides,
//               const double* scalars)
//   ptrs    = [the plan's inputs (placeholders, in plan.inputs order)...,
//              the plan's outputs (in plan.outputs order)...]
//   sizes   = the loop's sizes, rank = plan.shape.size() (fixed at compile time;
//             the sizes themselves are read at run time; a size 0 runs nothing)
//   strides = strides[buffer * rank + dim], in elements; 0 for a broadcast dim.
//   scalars = the graph's scalar inputs by ScalarInput index (all of them, not only
//             this kernel's), read once before the loops: for a ScalarInput of kind
//             Float the double itself; for kinds Int and Bool the 8 bytes hold an
//             int64 (its bit pattern, memcpy'd; bool as 0/1), so that every int64
//             Python int arrives exactly. Each use converts it to its op's type.
// Element types: Bool is one byte 0/1, UInt8 / Int32 / Int64 / Float32 / Float64 as
// in C; integer arithmetic wraps, and nothing in a kernel can trap (the graph admits
// only integer divisions by nonzero constants).
// The innermost loop has two versions: a "contiguous" one, taken when every
// buffer's innermost stride is what plan.inner_broadcast predicts (0 for inputs
// that broadcast in the last dim, 1 for all others) or the innermost size is 1,
// which the loop vectorizer widens; and a general strided one for anything else.
// Outputs must not overlap inputs or each other (alias-scope metadata says so).
// Threads do not change the ABI: CompiledGraph::run calls the kernel once per chunk
// of the outermost dim of extent > 1, with every ptrs[k] advanced by
// begin * strides[k * rank + dim] elements and sizes[dim] = end - begin.
// No LLVM header here: only forward declarations.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "jit/graph.h"

namespace llvm {
class LLVMContext;
class Module;
}  // namespace llvm

namespace fj::jit {

struct KernelPlan {
  std::string symbol;
  Shape shape;                       // the loop's shape (the outputs' shape)
  std::vector<int32_t> inputs;       // placeholder indices read by this kernel
  std::vector<bool> inner_broadcast; // per input: expected innermost stride 0
  std::vector<size_t> outputs;       // positions in graph.outputs()
};

struct LowerOptions {
  // Inline, vectorizable exp/log/sin/cos/tanh/sigmoid (jit/cpu_math.h; needs FMA).
  // false: libm per lane (llvm.exp etc., tanhf), bit-identical to glibc.
  bool vector_math = false;
};

// Groups the graph's outputs by shape (in order of first appearance).
std::vector<KernelPlan> plan_kernels(const Graph& graph, const std::string& symbol_prefix);

// Emits one function per plan into a new module of `ctx`.
std::unique_ptr<llvm::Module> lower_kernels(const Graph& graph,
                                            const std::vector<KernelPlan>& plans,
                                            llvm::LLVMContext& ctx,
                                            const LowerOptions& options);

}  // namespace fj::jit
