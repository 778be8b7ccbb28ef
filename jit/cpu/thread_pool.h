// A small persistent thread pool for the CPU kernels: parallel_for(n, fn) runs
// fn(0) .. fn(n-1) on the pool's workers and the calling thread, and returns when
// all have run. Tasks are handed out one by one (n may exceed the thread count), so
// a worker that is slow to wake leaves its share to the others. Workers spin
// briefly (1 ms) for the next job before sleeping, as OpenMP does, since waking a
// sleeping thread can cost as much as a chunk of work.
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
  virtual void parallel_for(size_t n, const std::function<void(size_t)>& fn) = 0;
  virtual size_t num_threads() const = 0;  // workers + the calling thread
  // parallel_for calls with n > 1 so far (for tests: was a loop split?).
  virtual size_t split_jobs() const = 0;
};

}  // namespace fj::jit
