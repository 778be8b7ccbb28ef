// CpuBackend on ORC LLJIT: lower (cpu_lower.cpp), optimize with the new pass
// manager, add under one ResourceTracker per graph, look up, and run the kernels.
#include "jit/cpu_backend.h"

#include <llvm/ExecutionEngine/Orc/ExecutionUtils.h>
#include <llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/ExecutionEngine/Orc/ThreadSafeModule.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>

#include <algorithm>
#include <atomic>
#include <mutex>

#include "jit/cpu_lower.h"
#include "jit/log.h"
#include "jit/thread_pool.h"

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

using KernelFn = void (*)(char* const* ptrs, const int64_t* sizes, const int64_t* strides,
                          const double* scalars);

struct Kernel {
  KernelFn fn;
  size_t rank;
  std::vector<int32_t> inputs;   // placeholder indices
  std::vector<size_t> outputs;   // positions among the graph's outputs
  std::vector<size_t> elem_size; // per buffer (inputs, then outputs), in bytes
};

// Parallel runs: loops of at least kParallelMinElements are cut into contiguous
// chunks of their outermost dim of extent > 1, at least kMinChunkElements each,
// at most one per thread; when that dim is the innermost one, chunk starts are
// multiples of kChunkAlign elements (whole cache lines for contiguous buffers).
constexpr int64_t kParallelMinElements = int64_t{1} << 16;
constexpr int64_t kMinChunkElements = int64_t{1} << 15;
constexpr int64_t kChunkAlign = 64;

// Calls k.fn over the loop, split into chunks when it is large: each chunk is the
// same kernel on base pointers advanced to the chunk's start along the split dim,
// with that dim's size set to the chunk's length (the kernel ABI is unchanged).
void run_kernel(const Kernel& k, char* const* ptrs, const int64_t* sizes, const int64_t* strides,
                const double* scalars, size_t num_threads) {
  int64_t numel = 1;
  for (size_t d = 0; d < k.rank; ++d) numel *= sizes[d];
  size_t split = k.rank;
  for (size_t d = 0; d < k.rank; ++d) {
    if (sizes[d] > 1) {
      split = d;
      break;
    }
  }
  if (num_threads <= 1 || numel < kParallelMinElements || split == k.rank) {
    k.fn(ptrs, sizes, strides, scalars);
    return;
  }
  const int64_t extent = sizes[split];
  const auto chunks = static_cast<size_t>(std::min<int64_t>(
      {static_cast<int64_t>(num_threads), numel / kMinChunkElements, extent}));
  const bool inner = split + 1 == k.rank;
  auto start = [&](size_t c) -> int64_t {
    if (c == 0) return 0;
    if (c == chunks) return extent;
    const int64_t s = extent * static_cast<int64_t>(c) / static_cast<int64_t>(chunks);
    return inner ? s / kChunkAlign * kChunkAlign : s;
  };
  const size_t num_buf = k.elem_size.size();
  ThreadPool::instance().parallel_for(chunks, [&](size_t c) {
    const int64_t begin = start(c), end = start(c + 1);
    if (end <= begin) return;
    std::vector<int64_t> chunk_sizes(sizes, sizes + k.rank);
    chunk_sizes[split] = end - begin;
    std::vector<char*> chunk_ptrs(num_buf);
    for (size_t b = 0; b < num_buf; ++b) {
      const int64_t offset = begin * strides[b * k.rank + split];
      chunk_ptrs[b] = ptrs[b] + offset * static_cast<int64_t>(k.elem_size[b]);
    }
    k.fn(chunk_ptrs.data(), chunk_sizes.data(), strides, scalars);
  });
}

// Strides of `t` broadcast to `sizes` (dims align from the right; a missing or
// size-1 dim gets stride 0).
void broadcast_strides(const TensorArg& t, const int64_t* sizes, size_t rank, int64_t* out) {
  FJ_CHECK(static_cast<size_t>(t.rank) <= rank, "input has more dims than the loop");
  const size_t lead = rank - static_cast<size_t>(t.rank);
  for (size_t d = 0; d < rank; ++d) {
    if (d < lead) {
      out[d] = 0;
      continue;
    }
    const int64_t size = t.sizes[d - lead];
    FJ_CHECK(size == 1 || size == sizes[d], "input does not broadcast to the loop shape");
    out[d] = size == 1 ? 0 : t.strides[d - lead];
  }
}

DType placeholder_dtype(const Graph& g, int32_t index) {
  for (const Node& n : g.nodes()) {
    if (n.op == Op::Placeholder && n.index == index) return n.dtype;
  }
  FJ_CHECK(false, "no placeholder with index " + std::to_string(index));
}

class CpuCompiledGraph final : public CompiledGraph {
 public:
  CpuCompiledGraph(std::shared_ptr<llvm::orc::LLJIT> jit, llvm::orc::ResourceTrackerSP tracker,
                   std::vector<Kernel> kernels, size_t num_inputs, size_t num_scalars,
                   size_t num_outputs, std::string ir, std::string optimized_ir, size_t num_threads)
      : jit_(std::move(jit)), tracker_(std::move(tracker)), kernels_(std::move(kernels)),
        num_inputs_(num_inputs), num_scalars_(num_scalars), num_outputs_(num_outputs),
        ir_(std::move(ir)), optimized_ir_(std::move(optimized_ir)), num_threads_(num_threads) {}

  ~CpuCompiledGraph() override {
    if (!tracker_) return;
    if (llvm::Error err = tracker_->remove()) {
      log::jit().error("freeing JIT code failed: {}", llvm::toString(std::move(err)));
    }
  }

  void run(const std::vector<TensorArg>& inputs, const std::vector<TensorArg>& outputs,
           const double* scalars) const override {
    FJ_CHECK(inputs.size() == num_inputs_, "wrong number of inputs");
    FJ_CHECK(num_scalars_ == 0 || scalars != nullptr, "the graph's scalar inputs are missing");
    FJ_CHECK(outputs.size() == num_outputs_, "wrong number of outputs");
    std::vector<char*> ptrs;
    std::vector<int64_t> strides;
    for (const Kernel& k : kernels_) {
      const TensorArg& first = outputs[k.outputs[0]];
      FJ_CHECK(static_cast<size_t>(first.rank) == k.rank, "output rank differs from the graph's");
      const int64_t* sizes = first.sizes;
      ptrs.clear();
      strides.assign((k.inputs.size() + k.outputs.size()) * k.rank, 0);
      int64_t* s = strides.data();
      for (int32_t in : k.inputs) {
        const TensorArg& t = inputs[static_cast<size_t>(in)];
        ptrs.push_back(static_cast<char*>(t.data));
        broadcast_strides(t, sizes, k.rank, s);
        s += k.rank;
      }
      for (size_t pos : k.outputs) {
        const TensorArg& t = outputs[pos];
        FJ_CHECK(static_cast<size_t>(t.rank) == k.rank, "output rank differs from the graph's");
        for (size_t d = 0; d < k.rank; ++d) {
          FJ_CHECK(t.sizes[d] == sizes[d], "outputs of one kernel differ in shape");
          s[d] = t.strides[d];
        }
        ptrs.push_back(static_cast<char*>(t.data));
        s += k.rank;
      }
      run_kernel(k, ptrs.data(), sizes, strides.data(), scalars, num_threads_);
    }
  }

  size_t num_kernels() const override { return kernels_.size(); }
  const std::string& ir() const override { return ir_; }
  const std::string& optimized_ir() const override { return optimized_ir_; }

 private:
  std::shared_ptr<llvm::orc::LLJIT> jit_;  // first member: outlives the tracker
  llvm::orc::ResourceTrackerSP tracker_;
  std::vector<Kernel> kernels_;
  size_t num_inputs_, num_scalars_, num_outputs_;
  std::string ir_;
  std::string optimized_ir_;
  size_t num_threads_;  // chunks per large loop at most; 1: no threads
};

class LlvmCpuBackend final : public CpuBackend {
 public:
  LlvmCpuBackend(std::shared_ptr<llvm::orc::LLJIT> jit, std::unique_ptr<llvm::TargetMachine> tm,
                 LowerOptions lower, size_t num_threads)
      : jit_(std::move(jit)), tm_(std::move(tm)), lower_(lower), num_threads_(num_threads) {}

  Expected<std::shared_ptr<CompiledGraph>> compile(const Graph& graph) override {
    static std::atomic<uint64_t> next_graph{0};
    const std::string prefix = "fj_g" + std::to_string(next_graph.fetch_add(1));
    std::vector<KernelPlan> plans = plan_kernels(graph, prefix);

    std::lock_guard<std::mutex> lock(mu_);
    auto ctx = std::make_unique<llvm::LLVMContext>();
    std::unique_ptr<llvm::Module> module = lower_kernels(graph, plans, *ctx, lower_);
    module->setDataLayout(jit_->getDataLayout());
    module->setTargetTriple(jit_->getTargetTriple().str());
    std::string ir = module_text(*module);
    if (log::enabled(log::Channel::Ir)) log::jit().info("LLVM IR of {}:\n{}", prefix, ir);
    std::string broken;
    llvm::raw_string_ostream broken_os(broken);
    FJ_CHECK(!llvm::verifyModule(*module, &broken_os), "invalid kernel IR: " + broken);
    optimize(*module);
    std::string optimized;
    if (log::enabled(log::Channel::Ir) || !log::trace_dir().empty()) optimized = module_text(*module);
    if (log::enabled(log::Channel::Ir)) log::jit().info("optimized LLVM IR of {}:\n{}", prefix, optimized);

    llvm::orc::ResourceTrackerSP tracker = jit_->getMainJITDylib().createResourceTracker();
    llvm::orc::ThreadSafeModule tsm(std::move(module), std::move(ctx));
    if (llvm::Error err = jit_->addIRModule(tracker, std::move(tsm))) {
      return llvm_error("adding module " + prefix, std::move(err));
    }
    std::vector<Kernel> kernels;
    for (const KernelPlan& p : plans) {
      auto addr = jit_->lookup(p.symbol);
      if (!addr) {
        Error e = llvm_error("compiling " + p.symbol, addr.takeError());
        if (llvm::Error rm = tracker->remove()) llvm::consumeError(std::move(rm));
        return e;
      }
      std::vector<size_t> elem_size;
      for (int32_t in : p.inputs) elem_size.push_back(dtype_size(placeholder_dtype(graph, in)));
      for (size_t pos : p.outputs) elem_size.push_back(dtype_size(graph.node(graph.outputs()[pos]).dtype));
      kernels.push_back(Kernel{addr->toPtr<KernelFn>(), p.shape.size(), p.inputs, p.outputs,
                               std::move(elem_size)});
    }
    return std::shared_ptr<CompiledGraph>(std::make_shared<CpuCompiledGraph>(
        jit_, std::move(tracker), std::move(kernels), graph.num_inputs(),
        graph.num_scalar_inputs(), graph.outputs().size(), std::move(ir), std::move(optimized), num_threads_));
  }

 private:
  // O2: the loop vectorizer and unroller run, at about half the compile time of O3's
  // extra function passes for these single-loop kernels.
  void optimize(llvm::Module& m) {
    llvm::LoopAnalysisManager lam;
    llvm::FunctionAnalysisManager fam;
    llvm::CGSCCAnalysisManager cgam;
    llvm::ModuleAnalysisManager mam;
    llvm::PipelineTuningOptions pto;
    pto.LoopVectorization = true;
    pto.LoopInterleaving = true;
    pto.SLPVectorization = false;
    llvm::PassBuilder pb(tm_.get(), pto);
    pb.registerModuleAnalyses(mam);
    pb.registerCGSCCAnalyses(cgam);
    pb.registerFunctionAnalyses(fam);
    pb.registerLoopAnalyses(lam);
    pb.crossRegisterProxies(lam, fam, cgam, mam);
    pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O2).run(m, mam);
  }

  std::shared_ptr<llvm::orc::LLJIT> jit_;
  std::unique_ptr<llvm::TargetMachine> tm_;  // for the optimizer's cost model
  const LowerOptions lower_;
  const size_t num_threads_;
  std::mutex mu_;
};

}  // namespace

Expected<std::unique_ptr<CpuBackend>> CpuBackend::create(const CpuOptions& options) {
  static std::once_flag init;
  std::call_once(init, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
  });
  auto jtmb = llvm::orc::JITTargetMachineBuilder::detectHost();
  if (!jtmb) return llvm_error("detecting the host CPU", jtmb.takeError());
  // Eager semantics: no FP contraction (x*y+1 stays two roundings).
  jtmb->getOptions().AllowFPOpFusion = llvm::FPOpFusion::Strict;
  jtmb->setCodeGenOptLevel(llvm::CodeGenOptLevel::Default);
  LowerOptions lower;
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
      new LlvmCpuBackend(std::move(shared), std::move(*tm), lower,
                         options.num_threads > 0 ? options.num_threads : default_num_threads()));
}

}  // namespace fj::jit
