// CpuBackend: a cache of compiled graphs over the compile pipeline: lower with the
// shared driver (jit/codegen/driver.h), optimize and generate object code per kernel
// on the thread pool, add it to the ORC JIT (jit/cpu/orc_jit.h), look up the
// kernels, and hand them to the kernel runtime (jit/cpu/kernel_runtime.h).
#include "jit/cpu/cpu_backend.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <unordered_map>

#include "jit/codegen/driver.h"
#include "jit/codegen/libm.h"
#include "jit/cpu/blas.h"
#include "jit/cpu/kernel_runtime.h"
#include "jit/cpu/orc_jit.h"
#include "jit/cpu/stop.h"
#include "jit/cpu/thread_pool.h"
#include "jit/fork.h"
#include "jit/log.h"

namespace fj::jit {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

// O2: the loop vectorizer and unroller run, at about half the compile time of O3's
// extra function passes for these single-loop kernels.
Pipeline cpu_pipeline() {
  Pipeline p;
  p.level = llvm::OptimizationLevel::O2;
  p.tuning.LoopVectorization = true;
  p.tuning.LoopInterleaving = true;
  p.tuning.SLPVectorization = false;
  return p;
}

// One kernel's compilation: its module (in a context of its own, so that kernels
// compile on several threads), its size, and what the compile task produced.
struct Unit {
  KernelModule km;
  size_t size = 0;  // IR instructions
  double ms = 0;    // optimization and code generation
  llvm::SmallVector<char, 0> object;
  std::string optimized;
  std::string error;
};

// Where the time of one compile went, for FRAMEJIT_LOG=perf.
struct CompileTimes {
  double lower_ms = 0, codegen_ms = 0, longest_ms = 0;
  Clock::time_point link_start;
};

class LlvmCpuBackend final : public CpuBackend {
 public:
  LlvmCpuBackend(std::unique_ptr<OrcJit> jit, LowerOptions lower, size_t num_threads, bool gpu_math)
      : jit_(std::move(jit)), lower_(lower), num_threads_(num_threads), gpu_math_(gpu_math) {}

  // Graphs with one structural key share their compiled code (two functions with the
  // same body, a function traced again after framejit.reset() while its old plan is
  // still referenced, one layer's code object reached from several frames). The
  // cache holds weak references: code lives as long as some plan uses it.
  Expected<std::shared_ptr<CompiledGraph>> compile(const Graph& graph, bool interruptible) override {
    std::string key = graph.structural_key();
    {
      std::lock_guard<ForkSafeMutex> lock(cache_mu_);
      auto it = cache_.find(key);
      if (it != cache_.end()) {
        if (std::shared_ptr<CompiledGraph> hit = it->second.lock()) {
          cache_hits_.fetch_add(1, std::memory_order_relaxed);
          if (log::enabled(log::Channel::Perf)) log::jit().info("perf: {} nodes: compiled code reused", graph.size());
          return hit;
        }
      }
    }
    auto compiled = compile_new(graph, interruptible);
    if (!compiled) return compiled;
    std::lock_guard<ForkSafeMutex> lock(cache_mu_);
    if (cache_.size() >= cache_sweep_at_) {
      std::erase_if(cache_, [](const auto& kv) { return kv.second.expired(); });
      cache_sweep_at_ = std::max<size_t>(64, 2 * cache_.size());
    }
    cache_[std::move(key)] = *compiled;
    return compiled;
  }

  size_t cache_hits() const override { return cache_hits_.load(std::memory_order_relaxed); }

 private:
  Expected<std::shared_ptr<CompiledGraph>> compile_new(const Graph& graph, bool interruptible) {
    static std::atomic<uint64_t> next_graph{0};
    const std::string prefix = "fj_g" + std::to_string(next_graph.fetch_add(1));

    std::lock_guard<ForkSafeMutex> lock(mu_);  // a fork waits for the compile to end
    // Ctrl-C: asked after lowering and before each kernel's code generation.
    StopCheck stop(interruptible ? StopCheck::Mode::PendingOnly : StopCheck::Mode::Never);
    CompileTimes times;
    const auto t0 = Clock::now();
    LowerOptions lower = lower_;
    lower.float_libm_via_double = !gpu_math_;  // the GPU's functions replace the float names
    lower.stop_checks = !gpu_math_;
    LoweredGraph lowered = lower_graph(graph, prefix, lower, ModuleLayout::PerKernel);
    std::vector<Unit> units;
    for (KernelModule& km : lowered.modules) units.push_back(Unit{std::move(km)});
    std::string ir = FJ_TRY(prepare(units));
    if (log::enabled(log::Channel::Ir)) log::jit().info("LLVM IR of {}:\n{}", prefix, ir);
    times.lower_ms = ms_since(t0);
    const auto t1 = Clock::now();
    if (stop.stop()) return Error{kCompileInterrupted};
    generate_code(units, stop);
    times.codegen_ms = ms_since(t1);
    std::string optimized;
    for (const Unit& u : units) {
      times.longest_ms = std::max(times.longest_ms, u.ms);
      if (u.error == kCompileInterrupted) return Error{kCompileInterrupted};
      if (!u.error.empty()) return Error{"CPU backend: compiling " + prefix + ": " + u.error};
      optimized += u.optimized;
    }
    if (log::enabled(log::Channel::Ir)) log::jit().info("optimized LLVM IR of {}:\n{}", prefix, optimized);

    std::vector<ObjectFile> objects;
    for (size_t k = 0; k < units.size(); ++k) {
      objects.push_back(ObjectFile{lowered.schedule.kernels[k].symbol, std::move(units[k].object)});
    }
    std::shared_ptr<JitCode> code = FJ_TRY(jit_->add(std::move(objects)));
    times.link_start = Clock::now();
    std::vector<Kernel> kernels;
    for (const KernelSpec& spec : lowered.schedule.kernels) {
      void* addr = FJ_TRY(jit_->lookup(spec.symbol));
      kernels.push_back(Kernel{reinterpret_cast<KernelFn>(addr), kernel_work(graph, lowered.schedule, spec)});
    }
    if (log::enabled(log::Channel::Perf)) log_perf(prefix, graph, lowered, units, times);
    return make_cpu_compiled_graph(std::move(code), graph, std::move(lowered.schedule), std::move(kernels),
                                   std::move(ir), std::move(optimized), num_threads_);
  }

  // Readies each kernel's module for the host (or, for tests, for the GPU's math)
  // and checks it: the IR text of them all, as emitted.
  Expected<std::string> prepare(std::vector<Unit>& units) {
    std::string ir;
    for (Unit& u : units) {
      llvm::Module& m = *u.km.module;
      if (gpu_math_) FJ_TRY(replace_libm_calls(m));
      m.setDataLayout(jit_->data_layout());
      m.setTargetTriple(jit_->triple().str());
      ir += module_text(m);
      for (const llvm::Function& f : m) u.size += f.getInstructionCount();
      verify_kernels(m, "invalid kernel IR");
    }
    return ir;
  }

  // Optimizes and generates code on the pool, largest kernels first (they are
  // handed out in order); each task takes a target machine of its own. A task that
  // finds `stop` set skips its kernel, and this thread asks it while it waits.
  void generate_code(std::vector<Unit>& units, StopCheck& stop) {
    std::vector<size_t> order(units.size());
    for (size_t k = 0; k < order.size(); ++k) order[k] = k;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return units[a].size > units[b].size; });
    const bool keep_text = log::enabled(log::Channel::Ir) || !log::trace_dir().empty();
    const std::function<void()> waiting = [&stop] { stop.stop(); };
    ThreadPool::instance().parallel_for(order.size(), [&](size_t task) {
      Unit& u = units[order[task]];
      if (stop.stop()) {
        u.error = kCompileInterrupted;
        return;
      }
      const auto start = Clock::now();
      try {
        compile_unit(u, keep_text);
      } catch (const std::exception& e) {
        u.error = e.what();
      }
      u.ms = ms_since(start);
    }, stop.active() ? &waiting : nullptr);
  }

  void compile_unit(Unit& u, bool keep_text) {
    auto tm = jit_->take_target_machine();
    if (!tm) {
      u.error = tm.error();
      return;
    }
    optimize(*u.km.module, **tm, cpu_pipeline());
    if (keep_text) u.optimized = module_text(*u.km.module);
    Status emitted = emit_machine_code(*u.km.module, **tm, llvm::CodeGenFileType::ObjectFile, u.object);
    if (emitted.failed()) u.error = emitted.error();
    jit_->give_back(tm.take());
  }

  void log_perf(const std::string& prefix, const Graph& graph, const LoweredGraph& lowered,
                const std::vector<Unit>& units, const CompileTimes& times) const {
    size_t ir_size = 0;
    for (const Unit& u : units) ir_size += u.size;
    log::jit().info("perf: {}: {} nodes, {} kernels ({} IR instructions), {} steps ({} rescheduled); "
                    "lower {:.1f} ms, optimize and machine code {:.1f} ms (longest kernel {:.1f} ms), link {:.1f} ms",
                    prefix, graph.size(), lowered.schedule.kernels.size(), ir_size, lowered.schedule.steps.size(),
                    lowered.rescheduled, times.lower_ms, times.codegen_ms, times.longest_ms,
                    ms_since(times.link_start));
    for (size_t k = 0; k < units.size(); ++k) {
      log::jit().info("perf:   {}: {} IR instructions, {:.1f} ms", lowered.schedule.kernels[k].symbol,
                      units[k].size, units[k].ms);
    }
  }

  std::unique_ptr<OrcJit> jit_;
  const LowerOptions lower_;
  const size_t num_threads_;
  const bool gpu_math_;
  ForkSafeMutex mu_{ForkRank::Compile};
  ForkSafeMutex cache_mu_;  // guards cache_ and cache_sweep_at_
  std::unordered_map<std::string, std::weak_ptr<CompiledGraph>> cache_;
  size_t cache_sweep_at_ = 64;
  std::atomic<size_t> cache_hits_{0};
};

}  // namespace

Expected<std::unique_ptr<CpuBackend>> CpuBackend::create(const CpuOptions& options) {
  blas_single_threaded();
  std::unique_ptr<OrcJit> jit = FJ_TRY(OrcJit::create());
  LowerOptions lower;
  lower.gelu_inf_is_nan = options.gelu_inf_is_nan;
  if (jit->host_has_fma()) lower.vector_math = options.vector_math;
  return std::unique_ptr<CpuBackend>(new LlvmCpuBackend(
      std::move(jit), lower, options.num_threads > 0 ? options.num_threads : default_num_threads(),
      options.gpu_math));
}

}  // namespace fj::jit
