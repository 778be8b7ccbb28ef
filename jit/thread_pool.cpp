// The kernels' thread pool (see thread_pool.h).
#include "jit/thread_pool.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace fj::jit {
namespace {

// Workers spin this long for the next job before sleeping, and a caller spins this
// long for its workers to finish: a sleeping thread takes tens of microseconds or
// more to wake (on a busy machine), which is as long as a whole chunk of a loop.
constexpr auto kSpin = std::chrono::microseconds(200);

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

class Pool final : public ThreadPool {
 public:
  explicit Pool(size_t threads) : pid_(getpid()) {
    for (size_t i = 1; i < threads; ++i) workers_.emplace_back([this] { work(); });
  }

  void parallel_for(size_t n, const std::function<void(size_t)>& fn) override {
    if (n > 1) split_jobs_.fetch_add(1, std::memory_order_relaxed);
    std::unique_lock<std::mutex> job(job_mu_, std::try_to_lock);
    if (n <= 1 || workers_.empty() || !job.owns_lock() || getpid() != pid_) {
      for (size_t i = 0; i < n; ++i) fn(i);
      return;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      fn_ = &fn;
      n_ = n;
      next_.store(0);
      busy_.store(workers_.size());
      generation_.fetch_add(1, std::memory_order_release);
    }
    wake_.notify_all();
    run_tasks(fn, n);
    auto finished = [this] { return busy_.load(std::memory_order_acquire) == 0; };
    if (!spin_until(finished)) {
      std::unique_lock<std::mutex> lock(mu_);
      done_.wait(lock, finished);
    }
  }

  size_t num_threads() const override { return workers_.size() + 1; }
  size_t split_jobs() const override { return split_jobs_.load(std::memory_order_relaxed); }

 private:
  void run_tasks(const std::function<void(size_t)>& fn, size_t n) {
    for (size_t i = next_.fetch_add(1); i < n; i = next_.fetch_add(1)) fn(i);
  }

  void work() {
    uint64_t seen = 0;
    for (;;) {
      const std::function<void(size_t)>* fn;
      size_t n;
      auto fresh = [&] { return generation_.load(std::memory_order_acquire) != seen; };
      spin_until(fresh);
      {
        std::unique_lock<std::mutex> lock(mu_);
        wake_.wait(lock, fresh);
        seen = generation_.load();
        fn = fn_;
        n = n_;
      }
      run_tasks(*fn, n);
      if (busy_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        std::lock_guard<std::mutex> lock(mu_);  // a caller blocked in wait() sees it
        done_.notify_one();
      }
    }
  }

  const pid_t pid_;
  std::vector<std::thread> workers_;
  std::mutex job_mu_;  // held by the caller for a whole job
  std::mutex mu_;      // guards fn_ and n_, and the sleeps on wake_ and done_
  std::condition_variable wake_, done_;
  const std::function<void(size_t)>* fn_ = nullptr;
  size_t n_ = 0;
  std::atomic<size_t> next_{0};
  std::atomic<size_t> busy_{0};  // workers not yet done with the current job
  std::atomic<uint64_t> generation_{0};  // one more per job
  std::atomic<size_t> split_jobs_{0};
};

}  // namespace

size_t default_num_threads() {
  if (const char* env = std::getenv("FRAMEJIT_NUM_THREADS")) {
    char* end = nullptr;
    const long v = std::strtol(env, &end, 10);
    if (end != env && *end == '\0' && v > 0) return static_cast<size_t>(v);
  }
  const unsigned hw = std::thread::hardware_concurrency();
  return hw == 0 ? 1 : hw;
}

ThreadPool& ThreadPool::instance() {
  static ThreadPool* pool = new Pool(default_num_threads());
  return *pool;
}

}  // namespace fj::jit
