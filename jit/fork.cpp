// ForkSafeMutex and the fork-child hooks (jit/fork.h): one pthread_atfork
// registration takes every registered lock before a fork, in rank order, and
// releases them in both processes after it.
#include "jit/fork.h"

#include "jit/common.h"

#include <pthread.h>

#include <set>
#include <utility>
#include <vector>

namespace fj::jit {
namespace {

// The registry. Leaked on purpose: locks with static lifetime unregister during exit,
// and a fork may come after other statics are gone.
struct Registry {
  std::mutex mu;  // guards locks and children; taken first by prepare
  std::set<std::pair<ForkRank, ForkSafeMutex*>> locks;  // in the order fork takes them
  std::vector<void (*)()> children;
};

thread_local int t_held = 0;  // ForkSafeMutexes this thread holds

Registry& registry();

void prepare() {
  Registry& r = registry();
  r.mu.lock();
  for (const auto& [rank, mu] : r.locks) mu->lock();
}

void release() {
  Registry& r = registry();
  for (auto it = r.locks.rbegin(); it != r.locks.rend(); ++it) it->second->unlock();
  r.mu.unlock();
}

// In the child the forking thread is the only one, and it took every lock in
// prepare(): releasing them is valid (they are plain mutexes) and leaves them as a
// fresh process would have them.
void child() {
  release();
  for (void (*fn)() : registry().children) fn();
}

Registry& registry() {
  static Registry* r = [] {
    auto* made = new Registry();
    pthread_atfork(prepare, release, child);
    return made;
  }();
  return *r;
}

}  // namespace

ForkSafeMutex::ForkSafeMutex(ForkRank rank) : rank_(rank) {
  FJ_CHECK(t_held == 0, "a ForkSafeMutex made while this thread holds one (fork could deadlock)");
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.locks.emplace(rank_, this);
}

ForkSafeMutex::~ForkSafeMutex() {
  FJ_CHECK(t_held == 0, "a ForkSafeMutex destroyed while this thread holds one (fork could deadlock)");
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.locks.erase({rank_, this});
}

void on_fork_child(void (*fn)()) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.children.push_back(fn);
}

void ForkSafeMutex::lock() {
  mu_.lock();
  t_held++;
}

void ForkSafeMutex::unlock() {
  t_held--;
  mu_.unlock();
}

bool ForkSafeMutex::try_lock() {
  if (!mu_.try_lock()) return false;
  t_held++;
  return true;
}

}  // namespace fj::jit
