// Keeping framejit's state whole across fork(): a fork copies only the forking
// thread, so a lock that another thread held at that moment stays held in the child
// for good, and state that thread was changing is left half-changed.
//
// Two tools, one pthread_atfork registration:
//  - ForkSafeMutex: a std::mutex that fork takes before it copies the process (so it
//    waits for the holder to finish: a compile in flight ends first) and releases in
//    both processes after. For locks whose holders never wait for the GIL: the
//    forking thread (os.fork) holds it while it waits. A ForkSafeMutex is made and
//    destroyed while the thread holds no other one (checked): fork holds the
//    registry's lock while it waits for them.
//  - on_fork_child(fn): fn runs in the child right after fork, before any other code,
//    to drop what the child cannot keep (the parent's worker threads, condition
//    variables that other threads waited on, another thread's in-flight bookkeeping).
#pragma once

#include <mutex>

namespace fj::jit {

// The order in which fork takes the locks: outer ones (held while inner ones are
// taken) first.
enum class ForkRank {
  Compile,  // a backend's compile lock, held for a whole compile
  Inner,    // everything taken while a compile lock may be held, and leaves
};

class ForkSafeMutex {
 public:
  explicit ForkSafeMutex(ForkRank rank = ForkRank::Inner);
  ~ForkSafeMutex();
  ForkSafeMutex(const ForkSafeMutex&) = delete;
  ForkSafeMutex& operator=(const ForkSafeMutex&) = delete;

  void lock();
  void unlock();
  bool try_lock();
  ForkRank rank() const { return rank_; }

 private:
  std::mutex mu_;
  const ForkRank rank_;
};

// Runs `fn` in every child forked from now on (in the order registered). `fn` runs
// alone in the child: it must not take locks that other threads could have held.
void on_fork_child(void (*fn)());

}  // namespace fj::jit
