// The CPU kernel runtime: CompiledGraph::run over a schedule's steps: temporary
// buffers from a pool, kernels cut into chunks on the thread pool, matmuls as BLAS
// tasks reading views in place (jit/cpu/kernel_runtime.h). No LLVM here.
#include "jit/cpu/kernel_runtime.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <map>
#include <mutex>
#include <optional>

#include "jit/cpu/blas.h"
#include "jit/cpu/stop.h"
#include "jit/cpu/thread_pool.h"
#include "jit/ir/size_check.h"
#include "jit/fork.h"

namespace fj::jit {
namespace {

// Guards every compiled graph's pool of temporary buffers: one lock for all of them
// (held for a map lookup), which a fork takes while no thread is halfway through a
// pool (kernels run without the GIL, so a call may be in flight on another thread).
// Made at load time, never destroyed (kernels may still run while statics go).
ForkSafeMutex& g_buffer_pool_mu = *new ForkSafeMutex();

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
// Loops of more work than this run in rounds of about kRoundTime seconds, with the
// stop poll between rounds (Ctrl-C is seen well within 100 ms); the kernels also
// ask it themselves (KernelArgs::stop), which bounds a round of a single index.
constexpr int64_t kPollElements = int64_t{1} << 20;
constexpr double kRoundTime = 0.01;
// With a stop poll, a product of more multiply-adds than this runs as panels of the
// output's rows of about kGemmPanelFlops each, full K and full width (each element's
// sum is the one a single call computes), the poll asked before each panel.
constexpr int64_t kGemmPanelFlops = int64_t{1} << 28;
// Panels have at least this many rows: each call packs all of the right operand, so
// thin panels cost time (OpenBLAS, 1536^3 float64 on one thread: 64-row panels took
// about 1.1x one call's time, 32-row ones 1.6x, 128x128 tiles 1.7x). Where that
// is the whole output (a short, wide product), panels of columns, at least
// kMinGemmPanelCols wide.
constexpr int64_t kMinGemmPanelRows = 128;
constexpr int64_t kMinGemmPanelCols = 256;

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
  CpuCompiledGraph(std::shared_ptr<const void> code, Graph graph, Schedule schedule, std::vector<Kernel> kernels,
                   std::string ir, std::string optimized_ir, size_t num_threads)
      : code_(std::move(code)), g_(std::move(graph)), s_(std::move(schedule)), kernels_(std::move(kernels)),
        ir_(std::move(ir)), optimized_ir_(std::move(optimized_ir)), num_threads_(num_threads), sizes_(g_) {}

  ~CpuCompiledGraph() override {
    for (auto& [size, p] : pool_) std::free(p);
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
    StopCheck stop;
    KernelArgs args{ptrs.data(), strides.data(), dims.data(), scalars, &status,
                    stop.active() ? &StopCheck::from_kernel : nullptr, &stop};
    std::map<NodeId, View> views;  // matmul operands read in place
    for (size_t i = 0; i < s_.steps.size() && !(status & kInterrupted); ++i) {
      if (i > 0 && stop.stop()) {  // between steps too (many kernels)
        status |= kInterrupted;
        break;
      }
      const Step& step = s_.steps[i];
      if (step.kind == Step::Kind::Extern) {
        if (g_.node(step.index).op == Op::ExternCall) {
          if (!call_extern(step.index, ptrs, strides, views, *bindings)) status |= kExternFailed;
        } else if (!matmul(step.index, inputs, ptrs, strides, views, *bindings, stop)) {
          status |= kInterrupted;
        }
        continue;
      }
      const KernelSpec& spec = s_.kernels[static_cast<size_t>(step.index)];
      if (spec.view_copy_of >= 0) {
        if (auto v = resolve(spec.view_copy_of, ptrs, strides, *bindings)) {
          views.emplace(spec.view_copy_of, std::move(*v));
          continue;
        }
      }
      run_kernel(step.index, args, *bindings, stop);
    }
    for (auto& [bytes, p] : temps) release(bytes, p);
    // A handler raised (its error is set) also where the work had ended meanwhile.
    if (stop.stopped()) status |= kInterrupted;
    return status;
  }

  bool sizes_fit(const Bindings& bindings) const override { return sizes_.fit(bindings); }
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

  void run_kernel(int32_t index, const KernelArgs& args, const Bindings& b, StopCheck& stop) const {
    const KernelSpec& spec = s_.kernels[static_cast<size_t>(index)];
    const Kernel& k = kernels_[static_cast<size_t>(index)];
    if (spec.split_dim < 0) {
      k.fn(&args, 0, 0);
      return;
    }
    const int64_t extent = eval_int(spec.shape[static_cast<size_t>(spec.split_dim)], b);
    int64_t work = 0;
    for (const SymExpr& e : k.work) work = std::max(work, eval_int(e, b));
    const bool parallel = num_threads_ > 1 && work >= kParallelMinElements && extent >= 2;
    // Chunks for the threads: at most kChunksPerThread each, kMinChunkElements of work.
    int64_t per_round = 1;
    if (parallel) {
      per_round = std::min({static_cast<int64_t>(num_threads_) * kChunksPerThread, work / kMinChunkElements, extent});
    }
    if (!stop.active() || work <= kPollElements) {
      if (per_round <= 1) {
        k.fn(&args, 0, extent);
      } else {
        run_round(k, args, 0, extent, per_round, extent, spec, stop);
      }
      return;
    }
    // Interruptible: rounds of `per_round` chunks over the next `rows` of the split
    // dim, the stop poll between rounds; `rows` starts small (kMinChunkElements of
    // work per chunk) and adapts so that a round takes about kRoundTime, whatever an
    // element costs (one add or forty sines).
    const double per_row = static_cast<double>(work) / static_cast<double>(extent);
    double rows = std::max(1.0, static_cast<double>(kMinChunkElements) / per_row) * static_cast<double>(per_round);
    for (int64_t pos = 0; pos < extent;) {
      const int64_t take = std::min(extent - pos, std::max<int64_t>(static_cast<int64_t>(rows), 1));
      const auto t0 = std::chrono::steady_clock::now();
      const int64_t end = run_round(k, args, pos, pos + take, per_round, extent, spec, stop);
      pos = end;
      if (*args.status & kInterrupted) return;  // a chunk's own stop check ended it
      if (pos < extent && stop.stop()) {
        *args.status |= kInterrupted;
        return;
      }
      const double spent = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      rows = std::clamp(rows * kRoundTime / std::max(spent, 1e-6), 1.0, 2.0 * rows);
    }
  }

  // Runs rows [begin, end) of a kernel's split dim as `chunks` chunks on the pool
  // (one: on this thread); chunk bounds on an innermost split dim are multiples of
  // kChunkAlign, so the round may end short of `end`: returns where it ended. This
  // thread, once it has no chunk left to run, polls for Ctrl-C while the others
  // finish theirs (their kernels then stop at their next check).
  int64_t run_round(const Kernel& k, const KernelArgs& args, int64_t begin, int64_t end, int64_t chunks,
                    int64_t extent, const KernelSpec& spec, StopCheck& stop) const {
    const bool inner = static_cast<size_t>(spec.split_dim) + 1 == spec.shape.size();
    auto bound = [&](int64_t c) -> int64_t {
      if (c >= chunks && end == extent) return extent;
      const int64_t s = begin + static_cast<int64_t>(static_cast<__int128>(end - begin) * c / chunks);
      return inner && s != extent ? s / kChunkAlign * kChunkAlign : s;
    };
    const int64_t until = bound(chunks);
    if (until <= begin) {  // a round shorter than one aligned step: run to the next one
      const int64_t next = std::min(extent, (begin / kChunkAlign + 1) * kChunkAlign);
      k.fn(&args, begin, next);
      return next;
    }
    if (chunks <= 1) {
      k.fn(&args, begin, until);
      return until;
    }
    std::vector<int64_t> status(static_cast<size_t>(chunks), 0);
    const std::function<void()> waiting = [&stop] { stop.stop(); };
    ThreadPool::instance().parallel_for(static_cast<size_t>(chunks), [&](size_t c) {
      const int64_t lo = std::max(begin, bound(static_cast<int64_t>(c))), hi = bound(static_cast<int64_t>(c) + 1);
      if (hi <= lo) return;
      KernelArgs mine = args;
      mine.status = &status[c];
      k.fn(&mine, lo, hi);
    }, stop.active() ? &waiting : nullptr);
    for (int64_t st : status) *args.status |= st;
    return until;
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

  // An operand of a Matmul or ExternCall node: read in place (a view of an input, see
  // jit/codegen/schedule.cpp), or its buffer.
  View operand(NodeId in, const std::vector<char*>& ptrs, const std::vector<int64_t>& strides,
               const std::map<NodeId, View>& views, const Bindings& b) const {
    auto it = views.find(in);
    if (it != views.end()) return it->second;
    const int32_t buf = s_.buffer_of[static_cast<size_t>(in)];
    if (buf < 0) {  // a view without a buffer (jit/codegen/schedule.cpp): its strides always exist
      auto v = resolve(in, ptrs, strides, b);
      FJ_CHECK(v.has_value(), "an extern operand has no strides");
      return std::move(*v);
    }
    const Node& m = g_.node(in);
    View v{ptrs[static_cast<size_t>(buf)], {}, {}};
    for (const SymExpr& e : m.sym) v.sizes.push_back(eval_int(e, b));
    const int64_t* st = strides.data() + s_.stride_offset[static_cast<size_t>(buf)];
    v.strides.assign(st, st + m.rank());
    return v;
  }

  // An ExternCall node into its buffer: false when its fn failed.
  bool call_extern(NodeId id, const std::vector<char*>& ptrs, const std::vector<int64_t>& strides,
                   const std::map<NodeId, View>& views, const Bindings& b) const {
    const Node& n = g_.node(id);
    std::vector<View> in;
    in.reserve(n.inputs.size());
    std::vector<ExternArg> args;
    for (NodeId x : n.inputs) {
      in.push_back(operand(x, ptrs, strides, views, b));
      const View& v = in.back();
      args.push_back(ExternArg{v.data, g_.node(x).dtype, static_cast<int>(v.sizes.size()), v.sizes.data(),
                               v.strides.data()});
    }
    const View out = operand(id, ptrs, strides, views, b);
    const ExternArg result{out.data, n.dtype, static_cast<int>(out.sizes.size()), out.sizes.data(),
                           out.strides.data()};
    return n.extern_fn->run(args, result);
  }

  // The batched product of a Matmul node into its buffer (contiguous); false when
  // the stop check ended it.
  bool matmul(NodeId id, const std::vector<TensorArg>& inputs, const std::vector<char*>& ptrs,
              const std::vector<int64_t>& strides, const std::map<NodeId, View>& views,
              const Bindings& b, StopCheck& stop) const {
    const Node& n = g_.node(id);
    const View a = operand(n.inputs[0], ptrs, strides, views, b);
    const View bm = operand(n.inputs[1], ptrs, strides, views, b);
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
    if (batches == 0) return true;  // an empty batch: no product to compute (and no buffer to write)
    // Eager folds a batch over a 2-d second operand into one gemm of batches * m rows;
    // other batched products are bmm, whose k = 1 products sum from a zero as ours.
    const bool folded = batch_rank == 0 || bm.sizes.size() == 2;
    const bool outer = k == 1 && folded && batches * m >= 2 && ncols >= 2;
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
      gemm(n.dtype, ma, mb, c + coff * elem, ldc, outer);
    };
    // Tasks on the kernels' pool (OpenBLAS itself runs single-threaded): panels of a
    // long product when Ctrl-C is polled (gemm_panel), else whole batch items when
    // there are enough of them, else blocks of rows (or of columns for a short, wide
    // product: each task reads all of the other operand, so the smaller one is the
    // one replicated), each at least kMinGemmFlops of work, at most two per thread.
    // The stop check runs before each task, and on this thread while it waits.
    const std::function<void()> waiting = [&stop] { stop.stop(); };
    const std::function<void()>* poll = stop.active() ? &waiting : nullptr;
    auto tasks_of = [&](int64_t count, const std::function<void(int64_t)>& task) {
      ThreadPool::instance().parallel_for(static_cast<size_t>(count), [&](size_t t) {
        if (!stop.stop()) task(static_cast<int64_t>(t));
      }, poll);
      return !stop.stopped();
    };
    const int64_t flops = batches * m * ncols * k;
    if (stop.active() && m * ncols * k > kGemmPanelFlops) {
      const auto [rows, cols] = gemm_panel(m, ncols, k);
      const int64_t row_tiles = (m + rows - 1) / rows, col_tiles = (ncols + cols - 1) / cols;
      return tasks_of(batches * row_tiles * col_tiles, [&](int64_t task) {
        const int64_t t = task / (row_tiles * col_tiles), r = task / col_tiles % row_tiles, c = task % col_tiles;
        product(t, r * rows, std::min(m, (r + 1) * rows), c * cols, std::min(ncols, (c + 1) * cols));
      });
    }
    const int64_t want = std::clamp<int64_t>(flops / kMinGemmFlops, 1, static_cast<int64_t>(num_threads_) * 2);
    if (want <= 1 || batches >= want) {
      const int64_t tasks = want <= 1 ? 1 : batches;
      return tasks_of(tasks, [&](int64_t t) {
        if (tasks == 1) {
          for (int64_t i = 0; i < batches; ++i) product(i, 0, m, 0, ncols);
        } else {
          product(t, 0, m, 0, ncols);
        }
      });
    }
    const int64_t per_item = (want + batches - 1) / batches;
    const bool by_rows = m >= ncols;
    const int64_t extent = by_rows ? m : ncols;
    const int64_t blocks = std::min(per_item, std::max<int64_t>(extent / kMinGemmBlock, 1));
    return tasks_of(batches * blocks, [&](int64_t task) {
      const int64_t t = task / blocks, blk = task % blocks;
      const int64_t lo = extent * blk / blocks, hi = extent * (blk + 1) / blocks;
      if (by_rows) product(t, lo, hi, 0, ncols);
      else product(t, 0, m, lo, hi);
    });
  }

  // The panel (rows, cols) of an m x n output, k deep, of about kGemmPanelFlops
  // multiply-adds: whole rows, at least kMinGemmPanelRows of them; a short output
  // (no more rows than that) is cut into columns instead.
  static std::pair<int64_t, int64_t> gemm_panel(int64_t m, int64_t n, int64_t k) {
    if (m <= kMinGemmPanelRows) return {m, std::min(n, std::max(kMinGemmPanelCols, kGemmPanelFlops / (k * m)))};
    return {std::min(m, std::max(kMinGemmPanelRows, kGemmPanelFlops / (k * n))), n};
  }

  void* acquire(size_t bytes) const {
    {
      std::lock_guard<ForkSafeMutex> lock(g_buffer_pool_mu);
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
    std::lock_guard<ForkSafeMutex> lock(g_buffer_pool_mu);
    pool_.emplace(bytes, p);
  }

  std::shared_ptr<const void> code_;  // keeps the kernels' machine code loaded
  Graph g_;
  Schedule s_;
  std::vector<Kernel> kernels_;
  std::string ir_;
  std::string optimized_ir_;
  size_t num_threads_;  // chunks per large loop at most; 1: no threads
  SizeChecks sizes_;    // the shapes sizes_fit() checks
  // Temporary buffers kept for the next call (fresh pages are slow to touch);
  // guarded by g_buffer_pool_mu.
  mutable std::multimap<size_t, void*> pool_;
};

}  // namespace

std::shared_ptr<CompiledGraph> make_cpu_compiled_graph(std::shared_ptr<const void> code, Graph graph,
                                                       Schedule schedule, std::vector<Kernel> kernels,
                                                       std::string ir, std::string optimized_ir,
                                                       size_t num_threads) {
  return std::make_shared<CpuCompiledGraph>(std::move(code), std::move(graph), std::move(schedule),
                                            std::move(kernels), std::move(ir), std::move(optimized_ir),
                                            num_threads);
}

}  // namespace fj::jit
