// Ctrl-C during a compiled call: the kernel runtime's stop poll (jit/cpu/cpu_backend.h)
// runs Python's signal handlers between pieces of a long loop, as eager's long ops
// are interrupted at op boundaries.
#include "interp/compat.h"
#include "interp/runtime/plan.h"
#include "jit/codegen/schedule.h"

namespace fj::interp {
namespace {

// A signal waits for its Python handler and this is the thread that runs handlers:
// run them (with the GIL, taken back if the run released it). True when one raised
// (KeyboardInterrupt): the error stays set on this thread for run_graph to return.
// A handler that returns normally lets the run go on where it was.
bool poll_signals() {
  if (!compat::signals_pending() || !compat::is_main_thread()) return false;
  const PyGILState_STATE gil = PyGILState_Ensure();
  const bool raised = PyErr_CheckSignals() < 0;
  PyGILState_Release(gil);
  return raised;
}

}  // namespace

void install_stop_poll() { jit::set_stop_poll(&poll_signals); }

bool interrupted(int64_t status) { return (status & jit::kInterrupted) != 0; }

}  // namespace fj::interp
