// Ctrl-C during a compiled call or a compile: the kernel runtime's stop poll
// (jit/cpu/cpu_backend.h) runs Python's signal handlers between pieces of a long loop,
// as eager's long ops are interrupted at op boundaries; a compile only asks whether
// one is pending (the tracer runs them: interp/trace/interpreter.cpp).
#include "interp/compat.h"
#include "interp/runtime/plan.h"
#include "jit/codegen/schedule.h"

namespace fj::interp {
namespace {

// A signal waits for its Python handler and this is the thread that runs handlers
// (an atomic read and a thread id: no GIL, no lock).
bool handler_pending() { return compat::signals_pending() && compat::is_main_thread(); }

// Runs the pending handlers (with the GIL, taken back if the run released it). True
// when one raised (KeyboardInterrupt): the error stays set on this thread for
// run_graph to return. A handler that returns normally lets the run go on.
bool poll_signals() {
  if (!handler_pending()) return false;
  const PyGILState_STATE gil = PyGILState_Ensure();
  const bool raised = compat::run_signal_handlers() < 0;
  PyGILState_Release(gil);
  return raised;
}

}  // namespace

void install_stop_poll() { jit::set_stop_poll(&poll_signals, &handler_pending); }

bool interrupted(int64_t status) { return (status & jit::kInterrupted) != 0; }
bool extern_failed(int64_t status) { return (status & jit::kExternFailed) != 0; }

}  // namespace fj::interp
