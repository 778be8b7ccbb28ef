// StopCheck: whether a long run or compile must end early (Ctrl-C), asked between
// pieces of work by the kernel runtime, by the generated loops (through
// KernelArgs::stop, jit/codegen/schedule.h) and by the compiler between kernels.
// It wraps the embedder's stop poll (set_stop_poll, jit/cpu/cpu_backend.h), which
// runs Python's signal handlers on the thread that may run them, or only its
// `pending` test (a compile, which must not wait for the GIL), and remembers that it
// said stop: from then on every thread working on the same run stops at its next
// check, without asking again. Internal to jit/cpu.
#pragma once

#include <atomic>
#include <cstdint>

#include "jit/cpu/cpu_backend.h"

namespace fj::jit {

class StopCheck {
 public:
  enum class Mode : uint8_t { RunHandlers, PendingOnly, Never };
  // With the functions registered now (none: never stops).
  explicit StopCheck(Mode mode = Mode::RunHandlers);
  StopCheck(const StopCheck&) = delete;
  StopCheck& operator=(const StopCheck&) = delete;

  bool active() const { return poll_ != nullptr; }
  // True once the work must end: the poll returned true (PendingOnly: a signal is
  // pending) here or on another thread. Any thread may call it; the poll may block
  // briefly (it takes the GIL to run a handler) and is cheap when nothing is pending.
  bool stop();
  bool stopped() const { return stopped_.load(std::memory_order_relaxed); }

  // The KernelArgs::stop callback: `self` is a StopCheck; nonzero: end the kernel.
  static int32_t from_kernel(void* self);

 private:
  const StopPoll poll_;
  std::atomic<bool> stopped_{false};
};

}  // namespace fj::jit
