// A small persistent thread pool for the CPU kernels: parallel_for(n, fn) runs
// fn(0) .. fn(n-1) on the pool's workers and the calling thread, and returns when
// all have run. Tasks are handed out one by one (n may exceed the thread count), so
// a worker that is slow to wake leaves its share to the others. Workers spin
// briefly (1 ms) for the next job before sleeping, as OpenMP does, since waking a
// sleeping thread can cost as much as a chunk of work.
// While the calling thread waits for tasks that others still run (none is left for
// it to take), it calls `waiting` (when given) about every half millisecond: the
// kernel runtime polls for Ctrl-C there, which only the main thread may handle.
// One job at a time: a caller that finds the pool busy (another thread's job, or a
// nested call) runs its tasks itself, serially. Created on first use, never
// destroyed (its idle workers do not hold up process exit); a forked child makes a
// pool of its own on first use (jit/fork.h).
#pragma once

#include <cstddef>
#include <functional>

namespace fj::jit {

// FRAMEJIT_NUM_THREADS when set to an integer from 1 to 1024, else the hardware's
// count (any other value of it logs a warning).
size_t default_num_threads();

class ThreadPool {
 public:
  // The process's pool, default_num_threads() threads in all (the caller included).
  static ThreadPool& instance();
  virtual ~ThreadPool() = default;
  void parallel_for(size_t n, const std::function<void(size_t)>& fn,
                    const std::function<void()>* waiting = nullptr) {
    run_job(n, fn, waiting);
  }
  virtual size_t num_threads() const = 0;  // workers + the calling thread
  // parallel_for calls with n > 1 so far (for tests: was a loop split?).
  virtual size_t split_jobs() const = 0;

 protected:
  virtual void run_job(size_t n, const std::function<void(size_t)>& fn, const std::function<void()>* waiting) = 0;
};

}  // namespace fj::jit
