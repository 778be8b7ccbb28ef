// The registered stop poll and StopCheck (jit/cpu/stop.h).
#include "jit/cpu/stop.h"

namespace fj::jit {
namespace {

std::atomic<StopPoll> g_stop_poll{nullptr}, g_stop_pending{nullptr};

}  // namespace

void set_stop_poll(StopPoll poll, StopPoll pending) {
  g_stop_pending.store(pending, std::memory_order_relaxed);
  g_stop_poll.store(poll, std::memory_order_relaxed);
}

namespace {

StopPoll registered(StopCheck::Mode mode) {
  switch (mode) {
    case StopCheck::Mode::RunHandlers: return g_stop_poll.load(std::memory_order_relaxed);
    case StopCheck::Mode::PendingOnly: return g_stop_pending.load(std::memory_order_relaxed);
    case StopCheck::Mode::Never: return nullptr;
  }
  return nullptr;
}

}  // namespace

StopCheck::StopCheck(Mode mode) : poll_(registered(mode)) {}

bool StopCheck::stop() {
  if (stopped()) return true;
  if (poll_ == nullptr || !poll_()) return false;
  stopped_.store(true, std::memory_order_relaxed);
  return true;
}

int32_t StopCheck::from_kernel(void* self) { return static_cast<StopCheck*>(self)->stop() ? 1 : 0; }

}  // namespace fj::jit
