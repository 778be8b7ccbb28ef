// The kernels' thread pool (see thread_pool.h).
#include "jit/cpu/thread_pool.h"

#include <dlfcn.h>
#include <link.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "jit/log.h"
#include "jit/fork.h"

namespace fj::jit {
namespace {

// The most threads FRAMEJIT_NUM_THREADS may ask for (each one is an OS thread).
constexpr size_t kMaxThreads = 1024;

// Workers spin this long for the next job before sleeping, and a caller spins this
// long for the last tasks to finish. Waking a sleeping thread is slow here: on a
// virtual machine whose idle vCPU halted, a futex wake took 30 us at the median and
// over 1 ms one time in ten (measured on the 2-core development VM), which is as
// long as a whole chunk of a large loop.
constexpr auto kSpin = std::chrono::microseconds(1000);
// A caller that waits longer than kSpin calls its `waiting` callback this often.
constexpr auto kWaitingPoll = std::chrono::microseconds(200);

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// Spins until done() or kSpin has passed; returns done().
template <class Pred>
bool spin_until(Pred done) {
  const auto until = std::chrono::steady_clock::now() + kSpin;
  for (unsigned k = 0; !done(); ++k) {
    if ((k & 63) == 0 && std::chrono::steady_clock::now() > until) return done();
    cpu_relax();
  }
  return true;
}

// A job's tasks are claimed one at a time from `claim_`, which holds the job's
// generation (high 32 bits) and the next task index (low 32 bits); a claim is a
// compare-exchange that fails once the generation moved on, so a worker that wakes
// late never runs a task of a job that has ended (whose function may be gone). The
// caller returns when all tasks are *done*, not when every worker has woken: a
// sleeping worker never delays a job that the others finished.
class Pool final : public ThreadPool {
 public:
  explicit Pool(size_t threads) : pid_(getpid()) {
    for (size_t i = 1; i < threads; ++i) workers_.emplace_back([this] { work(); });
  }

  void run_job(size_t n, const std::function<void(size_t)>& fn, const std::function<void()>* waiting) override {
    if (n > 1) split_jobs_.fetch_add(1, std::memory_order_relaxed);
    std::unique_lock<std::mutex> job(job_mu_, std::try_to_lock);
    if (n <= 1 || workers_.empty() || !job.owns_lock() || getpid() != pid_ || n > 0xffffffffu) {
      for (size_t i = 0; i < n; ++i) fn(i);
      return;
    }
    uint32_t gen;
    {
      std::lock_guard<std::mutex> lock(mu_);
      gen = ++generation_;
      fn_ = &fn;
      n_ = n;
      done_tasks_.store(0, std::memory_order_relaxed);
      claim_.store(uint64_t{gen} << 32, std::memory_order_release);
      published_.store(gen, std::memory_order_release);
    }
    wake_.notify_all();
    run_tasks(gen, fn, n);
    auto finished = [this, n] { return done_tasks_.load(std::memory_order_acquire) == n; };
    if (!spin_until(finished)) {
      std::unique_lock<std::mutex> lock(mu_);
      if (waiting == nullptr) {
        done_.wait(lock, finished);
        return;
      }
      while (!done_.wait_for(lock, kWaitingPoll, finished)) {
        lock.unlock();
        (*waiting)();
        lock.lock();
      }
    }
  }

  size_t num_threads() const override { return workers_.size() + 1; }
  size_t split_jobs() const override { return split_jobs_.load(std::memory_order_relaxed); }

 private:
  // Runs tasks of job `gen` until none is left; false when there was none to run.
  void run_tasks(uint32_t gen, const std::function<void(size_t)>& fn, size_t n) {
    uint64_t w = claim_.load(std::memory_order_acquire);
    for (;;) {
      if (static_cast<uint32_t>(w >> 32) != gen || (w & 0xffffffffu) >= n) return;
      if (!claim_.compare_exchange_weak(w, w + 1, std::memory_order_acq_rel)) continue;
      fn(static_cast<size_t>(w & 0xffffffffu));
      if (done_tasks_.fetch_add(1, std::memory_order_acq_rel) + 1 == n) {
        std::lock_guard<std::mutex> lock(mu_);  // a caller blocked in wait() sees it
        done_.notify_one();
      }
      w = claim_.load(std::memory_order_acquire);
    }
  }

  void work() {
    uint32_t seen = 0;
    for (;;) {
      auto fresh = [&] { return published_.load(std::memory_order_acquire) != seen; };
      spin_until(fresh);
      const std::function<void(size_t)>* fn;
      size_t n;
      {
        std::unique_lock<std::mutex> lock(mu_);
        wake_.wait(lock, fresh);
        seen = generation_;
        fn = fn_;
        n = n_;
      }
      run_tasks(seen, *fn, n);  // no-op when the job ended before this worker woke
    }
  }

  const pid_t pid_;
  std::vector<std::thread> workers_;
  std::mutex job_mu_;  // held by the caller for a whole job
  std::mutex mu_;      // guards generation_, fn_ and n_, and the sleeps on wake_ and done_
  std::condition_variable wake_, done_;
  uint32_t generation_ = 0;  // one more per job
  const std::function<void(size_t)>* fn_ = nullptr;
  size_t n_ = 0;
  std::atomic<uint32_t> published_{0};  // generation_, readable without mu_ (spinning)
  std::atomic<uint64_t> claim_{0};      // generation << 32 | next task index
  std::atomic<size_t> done_tasks_{0};   // tasks of the current job finished
  std::atomic<size_t> split_jobs_{0};
};

// The OpenMP runtime already in the process (PyTorch's libgomp), reached through
// the GOMP entry points that GCC's `#pragma omp parallel` compiles to. Eager torch
// ops run on its threads, which spin for milliseconds after each op: a second pool
// would find the cores busy right after an eager op (measured: a 4M-element fused
// kernel ran 2.5x slower 0.2 ms after an eager op than after one of its own) and
// would leave its own spinning threads in torch's way. Sharing the runtime, as
// Inductor's OpenMP kernels do, makes eager ops and kernels take turns on one team.
class OmpPool final : public ThreadPool {
 public:
  using ParallelFn = void (*)(void (*)(void*), void*, unsigned, unsigned);

  OmpPool(ParallelFn parallel, size_t threads) : parallel_(parallel), threads_(threads), pid_(getpid()) {}

  // The runtime's GOMP_parallel when a loaded library provides it.
  static ParallelFn find() {
    std::string path;
    dl_iterate_phdr([](dl_phdr_info* info, size_t, void* out) {
      const std::string_view name = info->dlpi_name ? info->dlpi_name : "";
      if (name.find("libgomp") == std::string_view::npos) return 0;
      *static_cast<std::string*>(out) = std::string(name);
      return 1;
    }, &path);
    if (path.empty()) return nullptr;
    void* lib = dlopen(path.c_str(), RTLD_LAZY | RTLD_NOLOAD);  // a reference, not a load
    return lib ? reinterpret_cast<ParallelFn>(dlsym(lib, "GOMP_parallel")) : nullptr;
  }

  void run_job(size_t n, const std::function<void(size_t)>& fn, const std::function<void()>* waiting) override {
    if (n > 1) split_jobs_.fetch_add(1, std::memory_order_relaxed);
    // One job at a time (concurrent callers would oversubscribe the cores); a forked
    // child does not use the parent's runtime.
    std::unique_lock<std::mutex> job(job_mu_, std::try_to_lock);
    if (n <= 1 || threads_ <= 1 || !job.owns_lock() || getpid() != pid_) {
      for (size_t i = 0; i < n; ++i) fn(i);
      return;
    }
    struct Job {
      const std::function<void(size_t)>* fn;
      size_t n;
      const std::function<void()>* waiting;
      std::thread::id caller;
      std::atomic<size_t> next{0}, done{0};
    } j{&fn, n, waiting, std::this_thread::get_id()};
    // Every thread of the team takes tasks until none is left; GOMP_parallel
    // returns when all of them have. The caller (the team's master) with a
    // `waiting` callback waits for the others here rather than in the runtime's
    // barrier, calling it meanwhile.
    parallel_([](void* p) {
      Job& job = *static_cast<Job*>(p);
      for (size_t i = job.next.fetch_add(1); i < job.n; i = job.next.fetch_add(1)) {
        (*job.fn)(i);
        job.done.fetch_add(1, std::memory_order_acq_rel);
      }
      if (job.waiting == nullptr || std::this_thread::get_id() != job.caller) return;
      auto finished = [&job] { return job.done.load(std::memory_order_acquire) == job.n; };
      if (spin_until(finished)) return;
      while (!finished()) {
        (*job.waiting)();
        std::this_thread::sleep_for(kWaitingPoll);
      }
    }, &j, static_cast<unsigned>(std::min(threads_, n)), 0);
  }

  size_t num_threads() const override { return threads_; }
  size_t split_jobs() const override { return split_jobs_.load(std::memory_order_relaxed); }

 private:
  const ParallelFn parallel_;
  const size_t threads_;
  const pid_t pid_;
  std::mutex job_mu_;
  std::atomic<size_t> split_jobs_{0};
};

}  // namespace

size_t default_num_threads() {
  const unsigned hw = std::thread::hardware_concurrency();
  const size_t fallback = hw == 0 ? 1 : hw;
  const char* env = std::getenv("FRAMEJIT_NUM_THREADS");
  if (env == nullptr || *env == '\0') return fallback;
  // A count from 1 to kMaxThreads; anything else (a negative number, a word, 1e6, 20
  // digits) gets a warning and the default, once per process.
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(env, &end, 10);
  if (end != env && *end == '\0' && errno == 0 && v > 0 && v <= static_cast<long long>(kMaxThreads)) {
    return static_cast<size_t>(v);
  }
  static std::once_flag warned;
  std::call_once(warned, [&] {
    log::jit().warn("FRAMEJIT_NUM_THREADS={:.40} is not a thread count from 1 to {}; using {} threads", env,
                    kMaxThreads, fallback);
  });
  return fallback;
}

namespace {

// The process's pool, made on first use; a forked child drops its parent's (whose
// workers did not come along, and whose locks they may have held) and makes its own.
std::atomic<ThreadPool*> g_pool{nullptr};
bool g_forked = false;  // this process is a fork child: do not use the OpenMP runtime
ForkSafeMutex& g_pool_mu = *new ForkSafeMutex();  // guards making the pool

void forget_parent_pool() {
  g_pool.store(nullptr, std::memory_order_relaxed);  // leaked: its threads are gone
  g_forked = true;
}

// The process's OpenMP runtime when one is loaded (a Python process that imported
// torch), else framejit's own workers (FRAMEJIT_OPENMP=0 forces those). A forked
// child uses its own workers: an OpenMP runtime's team does not survive a fork
// (GNU OpenMP's threads are gone in the child, and its state still names them).
ThreadPool* make_pool() {
  const char* env = std::getenv("FRAMEJIT_OPENMP");
  const bool allowed = !g_forked && (env == nullptr || std::string_view(env) != "0");
  if (OmpPool::ParallelFn parallel = allowed ? OmpPool::find() : nullptr) {
    return new OmpPool(parallel, default_num_threads());
  }
  return new Pool(default_num_threads());
}

const bool g_registered = (on_fork_child(forget_parent_pool), true);

}  // namespace

ThreadPool& ThreadPool::instance() {
  if (ThreadPool* pool = g_pool.load(std::memory_order_acquire)) return *pool;
  std::lock_guard<ForkSafeMutex> lock(g_pool_mu);
  ThreadPool* pool = g_pool.load(std::memory_order_relaxed);
  if (pool == nullptr) {
    pool = make_pool();
    g_pool.store(pool, std::memory_order_release);
  }
  return *pool;
}

}  // namespace fj::jit
