// CpuBackend on ORC LLJIT: lower (jit/codegen/lower.cpp), optimize with the new pass
// manager, add under one ResourceTracker per graph, look up, and run the kernels.
#include "jit/cpu/cpu_backend.h"

#include <llvm/ExecutionEngine/Orc/ExecutionUtils.h>
#include <llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/CommandLine.h>
#include <llvm/Support/SmallVectorMemoryBuffer.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>

#include "jit/cpu/blas.h"
#include "jit/codegen/schedule.h"
#include "jit/log.h"
#include "jit/codegen/libm.h"
#include "jit/cpu/thread_pool.h"

namespace fj::jit {
namespace {

Error llvm_error(const std::string& what, llvm::Error err) {
  return Error{"CPU backend: " + what + ": " + llvm::toString(std::move(err))};
}

std::string module_text(const llvm::Module& m) {
  std::string text;
  llvm::raw_string_ostream os(text);
  m.print(os, nullptr);
  return text;
}

using KernelFn = void (*)(const KernelArgs* args, int64_t begin, int64_t end);

// Parallel runs: kernels whose work (elements of the largest value they touch) is at
// least kParallelMinElements are cut into contiguous chunks of their split dim, at
// least kMinChunkElements of work each, at most kChunksPerThread per thread (the
// pool hands them out one by one, so a thread that starts late or runs slowly takes
// fewer); when the split dim is the innermost one, chunk starts are multiples of
// kChunkAlign elements.
constexpr int64_t kParallelMinElements = int64_t{1} << 16;
constexpr int64_t kMinChunkElements = int64_t{1} << 15;
constexpr int64_t kChunksPerThread = 4;
// A matmul is split into tasks of at least this many multiply-adds, and of at least
// kMinGemmBlock rows (or columns) when one product is split.
constexpr int64_t kMinGemmFlops = int64_t{1} << 20;
constexpr int64_t kMinGemmBlock = 16;
constexpr int64_t kChunkAlign = 64;

struct Kernel {
  KernelFn fn;
  std::vector<SymExpr> work;  // element counts whose maximum estimates the work
};

int64_t eval_int(const SymExpr& e, const Bindings& b) {
  auto v = e.eval(b);
  FJ_CHECK(v && std::holds_alternative<int64_t>(*v), "a size has no value: " + e.str());
  return std::get<int64_t>(*v);
}

// A strided view as the matmul sees it.
struct View {
  char* data;
  std::vector<int64_t> sizes, strides;
};

// The strides of `sizes` viewing memory laid out as (old_sizes, old_strides), as
// torch's view() computes them; nullopt when no strides can (a copy is needed).
std::optional<std::vector<int64_t>> view_strides(const std::vector<int64_t>& old_sizes,
                                                 const std::vector<int64_t>& old_strides,
                                                 const std::vector<int64_t>& sizes) {
  std::vector<int64_t> out(sizes.size(), 1);
  int64_t total = 1;
  for (int64_t s : old_sizes) total *= s;
  if (total == 0 || old_sizes.empty()) {
    for (size_t d = sizes.size(); d-- > 1;) out[d - 1] = out[d] * std::max<int64_t>(sizes[d], 1);
    return out;
  }
  int64_t view_d = static_cast<int64_t>(sizes.size()) - 1;
  int64_t chunk_stride = old_strides.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t d = static_cast<int64_t>(old_sizes.size()) - 1; d >= 0; --d) {
    tensor_numel *= old_sizes[static_cast<size_t>(d)];
    // The end of a chunk of dims that are contiguous with each other.
    if (d == 0 || (old_sizes[static_cast<size_t>(d - 1)] != 1 &&
                   old_strides[static_cast<size_t>(d - 1)] != tensor_numel * chunk_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || sizes[static_cast<size_t>(view_d)] == 1)) {
        out[static_cast<size_t>(view_d)] = view_numel * chunk_stride;
        view_numel *= sizes[static_cast<size_t>(view_d)];
        --view_d;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (d > 0) {
        chunk_stride = old_strides[static_cast<size_t>(d - 1)];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return out;
}

class CpuCompiledGraph final : public CompiledGraph {
 public:
  CpuCompiledGraph(std::shared_ptr<llvm::orc::LLJIT> jit, llvm::orc::ResourceTrackerSP tracker,
                   Graph graph, Schedule schedule, std::vector<Kernel> kernels, std::string ir,
                   std::string optimized_ir, size_t num_threads)
      : jit_(std::move(jit)), tracker_(std::move(tracker)), g_(std::move(graph)),
        s_(std::move(schedule)), kernels_(std::move(kernels)), ir_(std::move(ir)),
        optimized_ir_(std::move(optimized_ir)), num_threads_(num_threads) {}

  ~CpuCompiledGraph() override {
    for (auto& [size, p] : pool_) std::free(p);
    if (!tracker_) return;
    if (llvm::Error err = tracker_->remove()) {
      log::jit().error("freeing JIT code failed: {}", llvm::toString(std::move(err)));
    }
  }

  int64_t run(const std::vector<TensorArg>& inputs, const std::vector<TensorArg>& outputs,
              const double* scalars, const Bindings* bindings) const override {
    FJ_CHECK(inputs.size() == s_.num_inputs, "wrong number of inputs");
    FJ_CHECK(g_.num_scalar_inputs() == 0 || scalars != nullptr, "the graph's scalar inputs are missing");
    FJ_CHECK(outputs.size() == s_.num_outputs, "wrong number of outputs");
    Bindings own;
    if (bindings == nullptr) bindings = &(own = bindings_from_inputs(inputs));
    const size_t num_buffers = s_.buffer_node.size();
    std::vector<char*> ptrs(num_buffers, nullptr);
    std::vector<int64_t> strides(static_cast<size_t>(s_.stride_offset.back()), 0);
    std::vector<std::pair<size_t, void*>> temps;
    for (size_t b = 0; b < num_buffers; ++b) {
      const Node& n = g_.node(s_.buffer_node[b]);
      int64_t* st = strides.data() + s_.stride_offset[b];
      if (b < s_.num_inputs + s_.num_outputs) {
        const TensorArg& t = b < s_.num_inputs ? inputs[b] : outputs[b - s_.num_inputs];
        FJ_CHECK(static_cast<size_t>(t.rank) == n.rank(), "a buffer's rank differs from its node's");
        ptrs[b] = static_cast<char*>(t.data);
        std::copy(t.strides, t.strides + t.rank, st);
        continue;
      }
      int64_t numel = 1;
      for (size_t d = n.rank(); d-- > 0;) {
        st[d] = numel;
        numel *= std::max<int64_t>(eval_int(n.sym[d], *bindings), 1);
      }
      const size_t bytes = static_cast<size_t>(numel) * dtype_size(n.dtype);
      temps.emplace_back(bytes, acquire(bytes));
      ptrs[b] = static_cast<char*>(temps.back().second);
    }
    std::vector<int64_t> dims;
    for (const SymExpr& e : s_.dim_exprs) dims.push_back(eval_int(e, *bindings));
    int64_t status = 0;
    KernelArgs args{ptrs.data(), strides.data(), dims.data(), scalars, &status};
    std::map<NodeId, View> views;  // matmul operands read in place
    for (const Step& step : s_.steps) {
      if (step.kind == Step::Kind::Matmul) {
        matmul(step.index, inputs, ptrs, strides, views, *bindings);
        continue;
      }
      const KernelSpec& spec = s_.kernels[static_cast<size_t>(step.index)];
      if (spec.view_copy_of >= 0) {
        if (auto v = resolve(spec.view_copy_of, ptrs, strides, *bindings)) {
          views.emplace(spec.view_copy_of, std::move(*v));
          continue;
        }
      }
      run_kernel(step.index, args, *bindings);
    }
    for (auto& [bytes, p] : temps) release(bytes, p);
    return status;
  }

  size_t num_kernels() const override { return kernels_.size(); }
  const std::string& ir() const override { return ir_; }
  const std::string& optimized_ir() const override { return optimized_ir_; }

 private:
  Bindings bindings_from_inputs(const std::vector<TensorArg>& inputs) const {
    Bindings b;
    for (const Node& n : g_.nodes()) {
      if (n.op != Op::Placeholder) continue;
      for (size_t d = 0; d < n.rank(); ++d) {
        const int id = n.sym[d].symbol_id();
        if (id < 0) continue;
        if (b.values.size() <= static_cast<size_t>(id)) b.values.resize(static_cast<size_t>(id) + 1, SymValue{int64_t{0}});
        b.values[static_cast<size_t>(id)] = inputs[static_cast<size_t>(n.index)].sizes[d];
      }
    }
    return b;
  }

  void run_kernel(int32_t index, const KernelArgs& args, const Bindings& b) const {
    const KernelSpec& spec = s_.kernels[static_cast<size_t>(index)];
    const Kernel& k = kernels_[static_cast<size_t>(index)];
    if (spec.split_dim < 0) {
      k.fn(&args, 0, 0);
      return;
    }
    const int64_t extent = eval_int(spec.shape[static_cast<size_t>(spec.split_dim)], b);
    int64_t work = 0;
    for (const SymExpr& e : k.work) work = std::max(work, eval_int(e, b));
    if (num_threads_ <= 1 || work < kParallelMinElements || extent < 2) {
      k.fn(&args, 0, extent);
      return;
    }
    const auto chunks = static_cast<size_t>(std::min<int64_t>(
        {static_cast<int64_t>(num_threads_) * kChunksPerThread, work / kMinChunkElements, extent}));
    const bool inner = static_cast<size_t>(spec.split_dim) + 1 == spec.shape.size();
    auto start = [&](size_t c) -> int64_t {
      if (c == 0) return 0;
      if (c == chunks) return extent;
      const int64_t s = extent * static_cast<int64_t>(c) / static_cast<int64_t>(chunks);
      return inner ? s / kChunkAlign * kChunkAlign : s;
    };
    std::vector<int64_t> status(chunks, 0);
    ThreadPool::instance().parallel_for(chunks, [&](size_t c) {
      const int64_t begin = start(c), end = start(c + 1);
      if (end <= begin) return;
      KernelArgs mine = args;
      mine.status = &status[c];
      k.fn(&mine, begin, end);
    });
    for (int64_t st : status) *args.status |= st;
  }

  // The strides of a view chain over a graph input or over a computed node's buffer
  // (one that is not a view: a view's own buffer may be a copy that was skipped),
  // when they exist.
  std::optional<View> resolve(NodeId id, const std::vector<char*>& ptrs, const std::vector<int64_t>& strides,
                              const Bindings& b) const {
    const Node& n = g_.node(id);
    if (op_family(n.op) != Family::View) {
      const int32_t buf = s_.buffer_of[static_cast<size_t>(id)];
      if (buf < 0 || is_python_scalar(n)) return std::nullopt;
      View v{ptrs[static_cast<size_t>(buf)], {}, {}};
      for (const SymExpr& e : n.sym) v.sizes.push_back(eval_int(e, b));
      const int64_t* st = strides.data() + s_.stride_offset[static_cast<size_t>(buf)];
      v.strides.assign(st, st + n.rank());
      return v;
    }
    if (n.inputs.empty()) return std::nullopt;
    auto v = resolve(n.inputs[0], ptrs, strides, b);
    if (!v) return std::nullopt;
    std::vector<int64_t> sizes;
    for (const SymExpr& e : n.sym) sizes.push_back(eval_int(e, b));
    const int64_t elem = static_cast<int64_t>(dtype_size(n.dtype));
    switch (n.op) {
      case Op::Permute: {
        View out{v->data, sizes, {}};
        for (int64_t d : n.dims) out.strides.push_back(v->strides[static_cast<size_t>(d)]);
        return out;
      }
      case Op::Expand: {
        View out{v->data, sizes, std::vector<int64_t>(sizes.size(), 0)};
        const size_t lead = sizes.size() - v->sizes.size();
        for (size_t d = 0; d < v->sizes.size(); ++d) {
          out.strides[lead + d] = v->sizes[d] == 1 && sizes[lead + d] != 1 ? 0 : v->strides[d];
        }
        return out;
      }
      case Op::Slice: {
        const size_t k = static_cast<size_t>(n.dims[0]);
        v->data += eval_int(n.args[0], b) * v->strides[k] * elem;
        v->strides[k] *= eval_int(n.args[1], b);
        v->sizes = sizes;
        return v;
      }
      case Op::Select: {
        const size_t k = static_cast<size_t>(n.dims[0]);
        v->data += eval_int(n.args[0], b) * v->strides[k] * elem;
        v->strides.erase(v->strides.begin() + static_cast<long>(k));
        v->sizes = sizes;
        return v;
      }
      case Op::Reshape: {
        auto st = view_strides(v->sizes, v->strides, sizes);
        if (!st) return std::nullopt;
        return View{v->data, sizes, std::move(*st)};
      }
      default: return std::nullopt;
    }
  }

  // The batched product of a Matmul node into its buffer (contiguous).
  void matmul(NodeId id, const std::vector<TensorArg>& inputs, const std::vector<char*>& ptrs,
              const std::vector<int64_t>& strides, const std::map<NodeId, View>& views,
              const Bindings& b) const {
    const Node& n = g_.node(id);
    auto operand = [&](NodeId in) -> View {
      auto it = views.find(in);
      if (it != views.end()) return it->second;
      const int32_t buf = s_.buffer_of[static_cast<size_t>(in)];
      if (buf < 0) {  // a view without a buffer (jit/codegen/schedule.cpp): its strides always exist
        auto v = resolve(in, ptrs, strides, b);
        FJ_CHECK(v.has_value(), "a matmul operand has no strides");
        return std::move(*v);
      }
      const Node& m = g_.node(in);
      View v{ptrs[static_cast<size_t>(buf)], {}, {}};
      for (const SymExpr& e : m.sym) v.sizes.push_back(eval_int(e, b));
      const int64_t* st = strides.data() + s_.stride_offset[static_cast<size_t>(buf)];
      v.strides.assign(st, st + m.rank());
      return v;
    };
    const View a = operand(n.inputs[0]);
    const View bm = operand(n.inputs[1]);
    const int32_t out_buf = s_.buffer_of[static_cast<size_t>(id)];
    char* c = ptrs[static_cast<size_t>(out_buf)];
    const int64_t* cst = strides.data() + s_.stride_offset[static_cast<size_t>(out_buf)];
    const size_t rank = n.rank();
    std::vector<int64_t> out_sizes;
    for (const SymExpr& e : n.sym) out_sizes.push_back(eval_int(e, b));
    const int64_t elem = static_cast<int64_t>(dtype_size(n.dtype));
    const int64_t m = out_sizes[rank - 2], ncols = out_sizes[rank - 1], k = a.sizes.back();
    FJ_CHECK(cst[rank - 1] == 1 || ncols == 1, "a matmul result with a strided last dim");
    const size_t batch_rank = rank - 2;
    int64_t batches = 1;
    for (size_t j = 0; j < batch_rank; ++j) batches *= out_sizes[j];
    if (batches == 0) return;  // an empty batch: no product to compute (and no buffer to write)
    // The product of batch item `t`'s rows [r0, r1) and columns [c0, c1).
    auto product = [&](int64_t t, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
      int64_t coff = 0, aoff = 0, boff = 0;
      const size_t ar = a.sizes.size(), br = bm.sizes.size();
      for (size_t j = batch_rank; j-- > 0;) {  // t as a batch index, last dim fastest
        const int64_t i = t % out_sizes[j];
        t /= out_sizes[j];
        coff += i * cst[j];
        const size_t aj = j + (ar - 2) - batch_rank, bj = j + (br - 2) - batch_rank;
        if (j + ar >= batch_rank + 2 && a.sizes[aj] != 1) aoff += i * a.strides[aj];
        if (j + br >= batch_rank + 2 && bm.sizes[bj] != 1) boff += i * bm.strides[bj];
      }
      const int64_t ldc = m == 1 ? std::max<int64_t>(ncols, 1) : cst[rank - 2];
      aoff += r0 * a.strides[ar - 2];
      boff += c0 * bm.strides[br - 1];
      coff = coff + r0 * ldc + c0;
      Matrix ma{a.data + aoff * elem, r1 - r0, k, a.strides[ar - 2], a.strides[ar - 1]};
      Matrix mb{bm.data + boff * elem, k, c1 - c0, bm.strides[br - 2], bm.strides[br - 1]};
      gemm(n.dtype, ma, mb, c + coff * elem, ldc);
    };
    // Tasks on the kernels' pool (OpenBLAS itself runs single-threaded): whole batch
    // items when there are enough of them, else blocks of rows (or of columns for
    // a short, wide product: each task reads all of the other operand, so the
    // smaller one is the one replicated), each at least kMinGemmFlops of work, at
    // most two per thread.
    const int64_t flops = batches * m * ncols * k;
    const int64_t want = std::clamp<int64_t>(flops / kMinGemmFlops, 1, static_cast<int64_t>(num_threads_) * 2);
    if (want <= 1 || batches >= want) {
      const int64_t tasks = want <= 1 ? 1 : batches;
      ThreadPool::instance().parallel_for(static_cast<size_t>(tasks), [&](size_t t) {
        if (tasks == 1) {
          for (int64_t i = 0; i < batches; ++i) product(i, 0, m, 0, ncols);
        } else {
          product(static_cast<int64_t>(t), 0, m, 0, ncols);
        }
      });
      return;
    }
    const int64_t per_item = (want + batches - 1) / batches;
    const bool by_rows = m >= ncols;
    const int64_t extent = by_rows ? m : ncols;
    const int64_t blocks = std::min(per_item, std::max<int64_t>(extent / kMinGemmBlock, 1));
    ThreadPool::instance().parallel_for(static_cast<size_t>(batches * blocks), [&](size_t task) {
      const int64_t t = static_cast<int64_t>(task) / blocks, blk = static_cast<int64_t>(task) % blocks;
      const int64_t lo = extent * blk / blocks, hi = extent * (blk + 1) / blocks;
      if (by_rows) product(t, lo, hi, 0, ncols);
      else product(t, 0, m, lo, hi);
    });
  }

  void* acquire(size_t bytes) const {
    {
      std::lock_guard<std::mutex> lock(pool_mu_);
      auto it = pool_.find(bytes);
      if (it != pool_.end()) {
        void* p = it->second;
        pool_.erase(it);
        return p;
      }
    }
    void* p = std::aligned_alloc(64, std::max<size_t>((bytes + 63) / 64 * 64, 64));
    FJ_CHECK(p != nullptr, "out of memory for a temporary buffer");
    return p;
  }
  void release(size_t bytes, void* p) const {
    std::lock_guard<std::mutex> lock(pool_mu_);
    pool_.emplace(bytes, p);
  }

  std::shared_ptr<llvm::orc::LLJIT> jit_;  // first member: outlives the tracker
  llvm::orc::ResourceTrackerSP tracker_;
  Graph g_;
  Schedule s_;
  std::vector<Kernel> kernels_;
  std::string ir_;
  std::string optimized_ir_;
  size_t num_threads_;  // chunks per large loop at most; 1: no threads
  // Temporary buffers kept for the next call (fresh pages are slow to touch).
  mutable std::mutex pool_mu_;
  mutable std::multimap<size_t, void*> pool_;
};

}  // namespace

std::vector<SymExpr> kernel_work(const Graph& g, const Schedule& s, const KernelSpec& spec) {
  std::vector<SymExpr> work{numel(spec.shape)};
  std::set<NodeId> seen;
  std::vector<NodeId> todo;
  for (const KernelSpec::Store& st : spec.stores) todo.push_back(st.node);
  while (!todo.empty()) {
    const NodeId id = todo.back();
    todo.pop_back();
    if (!seen.insert(id).second) continue;
    const Node& n = g.node(id);
    if (is_python_scalar(n)) continue;
    // Elements computed: the loop's, and each reduction's operand. Values that are
    // only read (an embedding table, a broadcast row) do not count.
    if (op_family(n.op) == Family::Reduction) work.push_back(numel(g.node(n.inputs[0]).sym));
    const bool stored = std::any_of(spec.stores.begin(), spec.stores.end(),
                                    [&](const KernelSpec::Store& st) { return st.node == id; });
    if (s.buffer_of[static_cast<size_t>(id)] >= 0 && !stored) continue;
    for (NodeId in : n.inputs) todo.push_back(in);
  }
  return work;
}

namespace {

class LlvmCpuBackend final : public CpuBackend {
 public:
  LlvmCpuBackend(std::shared_ptr<llvm::orc::LLJIT> jit, llvm::orc::JITTargetMachineBuilder jtmb,
                 std::unique_ptr<llvm::TargetMachine> tm, LowerOptions lower, size_t num_threads, bool gpu_math)
      : jit_(std::move(jit)), jtmb_(std::move(jtmb)), lower_(lower), num_threads_(num_threads),
        gpu_math_(gpu_math) {
    tms_.push_back(std::move(tm));
  }

  // Graphs with one structural key share their compiled code (two functions with the
  // same body, a function traced again after framejit.reset() while its old plan is
  // still referenced, one layer's code object reached from several frames). The
  // cache holds weak references: code lives as long as some plan uses it.
  Expected<std::shared_ptr<CompiledGraph>> compile(const Graph& graph) override {
    std::string key = graph.structural_key();
    {
      std::lock_guard<std::mutex> lock(cache_mu_);
      auto it = cache_.find(key);
      if (it != cache_.end()) {
        if (std::shared_ptr<CompiledGraph> hit = it->second.lock()) {
          cache_hits_.fetch_add(1, std::memory_order_relaxed);
          if (log::enabled(log::Channel::Perf)) log::jit().info("perf: {} nodes: compiled code reused", graph.size());
          return hit;
        }
      }
    }
    auto compiled = compile_new(graph);
    if (!compiled) return compiled;
    std::lock_guard<std::mutex> lock(cache_mu_);
    if (cache_.size() >= cache_sweep_at_) {
      std::erase_if(cache_, [](const auto& kv) { return kv.second.expired(); });
      cache_sweep_at_ = std::max<size_t>(64, 2 * cache_.size());
    }
    cache_[std::move(key)] = *compiled;
    return compiled;
  }

  size_t cache_hits() const override { return cache_hits_.load(std::memory_order_relaxed); }

 private:
  Expected<std::shared_ptr<CompiledGraph>> compile_new(const Graph& graph) {
    static std::atomic<uint64_t> next_graph{0};
    const std::string prefix = "fj_g" + std::to_string(next_graph.fetch_add(1));

    std::lock_guard<std::mutex> lock(mu_);
    using Clock = std::chrono::steady_clock;
    const auto t0 = Clock::now();
    auto ms_since = [](Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); };
    // Schedule and lower, each kernel into a module of its own; a reduction that
    // would be recomputed gets a buffer and the graph is lowered again.
    std::vector<NodeId> materialize;
    Schedule schedule;
    std::vector<Unit> units;
    for (;;) {
      schedule = schedule_graph(graph, prefix, materialize);
      units.clear();
      std::vector<llvm::Module*> modules;
      for (const KernelSpec& spec : schedule.kernels) {
        Unit u;
        u.ctx = std::make_unique<llvm::LLVMContext>();
        u.module = std::make_unique<llvm::Module>(spec.symbol, *u.ctx);
        modules.push_back(u.module.get());
        units.push_back(std::move(u));
      }
      NodeId again = -1;
      LowerOptions lower = lower_;
      lower.float_libm_via_double = !gpu_math_;  // the GPU's functions replace the float names
      if (lower_schedule(graph, &schedule, modules, lower, &again)) break;
      FJ_CHECK(again >= 0 && std::find(materialize.begin(), materialize.end(), again) == materialize.end(),
               "lowering asked for a node twice");
      materialize.push_back(again);
    }
    std::string ir;
    size_t ir_size = 0;
    for (Unit& u : units) {
      if (gpu_math_) {
        if (auto err = replace_libm_calls(*u.module)) return std::move(*err);
      }
      u.module->setDataLayout(jit_->getDataLayout());
      u.module->setTargetTriple(jit_->getTargetTriple().str());
      ir += module_text(*u.module);
      for (const llvm::Function& f : *u.module) u.size += f.getInstructionCount();
      ir_size += u.size;
      std::string broken;
      llvm::raw_string_ostream broken_os(broken);
      FJ_CHECK(!llvm::verifyModule(*u.module, &broken_os), "invalid kernel IR: " + broken);
    }
    if (log::enabled(log::Channel::Ir)) log::jit().info("LLVM IR of {}:\n{}", prefix, ir);
    const double lower_ms = ms_since(t0);
    const auto t1 = Clock::now();
    // Optimize and generate code on the pool, largest kernels first (they are
    // handed out in order); each task takes a target machine of its own.
    std::vector<size_t> order(units.size());
    for (size_t k = 0; k < order.size(); ++k) order[k] = k;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return units[a].size > units[b].size; });
    const bool keep_text = log::enabled(log::Channel::Ir) || !log::trace_dir().empty();
    ThreadPool::instance().parallel_for(order.size(), [&](size_t task) {
      Unit& u = units[order[task]];
      const auto start = Clock::now();
      try {
        std::unique_ptr<llvm::TargetMachine> tm = take_target_machine();
        if (!tm) {
          u.error = "creating a target machine failed";
          return;
        }
        optimize(*u.module, *tm);
        if (keep_text) u.optimized = module_text(*u.module);
        llvm::raw_svector_ostream os(u.object);
        llvm::legacy::PassManager pm;
        if (tm->addPassesToEmitFile(pm, os, nullptr, llvm::CodeGenFileType::ObjectFile)) {
          u.error = "the target cannot emit object code";
        } else {
          pm.run(*u.module);
        }
        give_back_target_machine(std::move(tm));
      } catch (const std::exception& e) {
        u.error = e.what();
      }
      u.ms = ms_since(start);
    });
    const double codegen_ms = ms_since(t1);
    std::string optimized;
    double longest_ms = 0;
    for (const Unit& u : units) {
      longest_ms = std::max(longest_ms, u.ms);
      if (!u.error.empty()) return Error{"CPU backend: compiling " + prefix + ": " + u.error};
      optimized += u.optimized;
    }
    if (log::enabled(log::Channel::Ir)) log::jit().info("optimized LLVM IR of {}:\n{}", prefix, optimized);

    llvm::orc::ResourceTrackerSP tracker = jit_->getMainJITDylib().createResourceTracker();
    for (size_t k = 0; k < units.size(); ++k) {
      auto buffer = std::make_unique<llvm::SmallVectorMemoryBuffer>(std::move(units[k].object),
                                                                     schedule.kernels[k].symbol, false);
      if (llvm::Error err = jit_->addObjectFile(tracker, std::move(buffer))) {
        if (llvm::Error rm = tracker->remove()) llvm::consumeError(std::move(rm));
        return llvm_error("adding the code of " + schedule.kernels[k].symbol, std::move(err));
      }
    }
    const auto t2 = Clock::now();
    std::vector<Kernel> kernels;
    for (const KernelSpec& spec : schedule.kernels) {
      auto addr = jit_->lookup(spec.symbol);
      if (!addr) {
        Error e = llvm_error("compiling " + spec.symbol, addr.takeError());
        if (llvm::Error rm = tracker->remove()) llvm::consumeError(std::move(rm));
        return e;
      }
      kernels.push_back(Kernel{addr->toPtr<KernelFn>(), kernel_work(graph, schedule, spec)});
    }
    if (log::enabled(log::Channel::Perf)) {
      log::jit().info("perf: {}: {} nodes, {} kernels ({} IR instructions), {} steps ({} rescheduled); "
                      "lower {:.1f} ms, optimize and machine code {:.1f} ms (longest kernel {:.1f} ms), link {:.1f} ms",
                      prefix, graph.size(), schedule.kernels.size(), ir_size, schedule.steps.size(),
                      materialize.size(), lower_ms, codegen_ms, longest_ms, ms_since(t2));
      for (size_t k = 0; k < units.size(); ++k) {
        log::jit().info("perf:   {}: {} IR instructions, {:.1f} ms", schedule.kernels[k].symbol, units[k].size,
                        units[k].ms);
      }
    }
    return std::shared_ptr<CompiledGraph>(std::make_shared<CpuCompiledGraph>(
        jit_, std::move(tracker), graph, std::move(schedule), std::move(kernels), std::move(ir),
        std::move(optimized), num_threads_));
  }

  // O2: the loop vectorizer and unroller run, at about half the compile time of O3's
  // extra function passes for these single-loop kernels.
  // A target machine for one compile task: from the pool, or a new one.
  std::unique_ptr<llvm::TargetMachine> take_target_machine() {
    {
      std::lock_guard<std::mutex> lock(tm_mu_);
      if (!tms_.empty()) {
        std::unique_ptr<llvm::TargetMachine> tm = std::move(tms_.back());
        tms_.pop_back();
        return tm;
      }
    }
    auto tm = jtmb_.createTargetMachine();
    if (!tm) {
      llvm::consumeError(tm.takeError());
      return nullptr;
    }
    return std::move(*tm);
  }
  void give_back_target_machine(std::unique_ptr<llvm::TargetMachine> tm) {
    std::lock_guard<std::mutex> lock(tm_mu_);
    tms_.push_back(std::move(tm));
  }

  void optimize(llvm::Module& m, llvm::TargetMachine& tm) {
    llvm::LoopAnalysisManager lam;
    llvm::FunctionAnalysisManager fam;
    llvm::CGSCCAnalysisManager cgam;
    llvm::ModuleAnalysisManager mam;
    llvm::PipelineTuningOptions pto;
    pto.LoopVectorization = true;
    pto.LoopInterleaving = true;
    pto.SLPVectorization = false;
    llvm::PassBuilder pb(&tm, pto);
    pb.registerModuleAnalyses(mam);
    pb.registerCGSCCAnalyses(cgam);
    pb.registerFunctionAnalyses(fam);
    pb.registerLoopAnalyses(lam);
    pb.crossRegisterProxies(lam, fam, cgam, mam);
    pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O2).run(m, mam);
  }

  // One kernel's compilation: its own context and module (so that kernels compile
  // on several threads), its size, and what the compile task produced.
  struct Unit {
    std::unique_ptr<llvm::LLVMContext> ctx;  // first member: outlives the module
    std::unique_ptr<llvm::Module> module;
    size_t size = 0;  // IR instructions
    double ms = 0;    // optimization and code generation
    llvm::SmallVector<char, 0> object;
    std::string optimized;
    std::string error;
  };

  std::shared_ptr<llvm::orc::LLJIT> jit_;
  llvm::orc::JITTargetMachineBuilder jtmb_;
  std::mutex tm_mu_;  // guards tms_
  std::vector<std::unique_ptr<llvm::TargetMachine>> tms_;  // idle ones, for compile tasks
  const LowerOptions lower_;
  const size_t num_threads_;
  const bool gpu_math_;
  std::mutex mu_;
  std::mutex cache_mu_;  // guards cache_ and cache_sweep_at_
  std::unordered_map<std::string, std::weak_ptr<CompiledGraph>> cache_;
  size_t cache_sweep_at_ = 64;
  std::atomic<size_t> cache_hits_{0};
};

}  // namespace

Expected<std::unique_ptr<CpuBackend>> CpuBackend::create(const CpuOptions& options) {
  static std::once_flag init;
  std::call_once(init, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    // Two code-size options, measured on chains, softmax, layer_norm, cumsum and
    // column sums. Loop strength reduction took a third of code generation and made
    // no kernel faster (their unit-stride address arithmetic is cheap as it is). A
    // vectorized epilogue emits each loop body a third time, for a remainder of at
    // most 63 elements: without it a 30-op chain compiles 20 % faster, and runs
    // within noise of it (also at 1000 elements).
    const char* argv[] = {"framejit", "-disable-lsr", "-enable-epilogue-vectorization=false"};
    llvm::cl::ParseCommandLineOptions(3, argv, "", &llvm::nulls());
  });
  blas_single_threaded();
  auto jtmb = llvm::orc::JITTargetMachineBuilder::detectHost();
  if (!jtmb) return llvm_error("detecting the host CPU", jtmb.takeError());
  // Eager semantics: no FP contraction (x*y+1 stays two roundings).
  jtmb->getOptions().AllowFPOpFusion = llvm::FPOpFusion::Strict;
  jtmb->setCodeGenOptLevel(llvm::CodeGenOptLevel::Default);
  LowerOptions lower;
  lower.gelu_inf_is_nan = options.gelu_inf_is_nan;
  for (const std::string& feature : jtmb->getFeatures().getFeatures()) {
    if (feature == "+fma") lower.vector_math = options.vector_math;
  }
  auto tm = jtmb->createTargetMachine();
  if (!tm) return llvm_error("creating the target machine", tm.takeError());

  auto jit = llvm::orc::LLJITBuilder().setJITTargetMachineBuilder(*jtmb).create();
  if (!jit) return llvm_error("creating LLJIT", jit.takeError());
  auto libs = llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(
      (*jit)->getDataLayout().getGlobalPrefix());
  if (!libs) return llvm_error("opening the process's symbols", libs.takeError());
  (*jit)->getMainJITDylib().addGenerator(std::move(*libs));
  std::shared_ptr<llvm::orc::LLJIT> shared(std::move(*jit));
  return std::unique_ptr<CpuBackend>(
      new LlvmCpuBackend(std::move(shared), *jtmb, std::move(*tm), lower,
                         options.num_threads > 0 ? options.num_threads : default_num_threads(),
                         options.gpu_math));
}

}  // namespace fj::jit
