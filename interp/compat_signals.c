/* compat.h's reads of CPython 3.11's runtime state that only C can include
 * (pycore_runtime.h needs C11 atomics): whether a signal waits for its Python
 * handler, and whether this is the thread that runs the handlers. */
#define PY_SSIZE_T_CLEAN
#define Py_BUILD_CORE 1
#include <Python.h>
#include <internal/pycore_runtime.h>

int fj_compat_signals_pending(void) {
  /* Set by the C-level handler (any thread), cleared once the main thread ran the
   * Python handlers: an atomic read, without the GIL. */
  return _Py_atomic_load_relaxed(&_PyRuntime.ceval.signals_pending);
}

int fj_compat_is_main_thread(void) { return PyThread_get_thread_ident() == _PyRuntime.main_thread; }

int fj_compat_run_signal_handlers(void) {
  /* As the eval loop's handle_signals(): the pending flag is cleared first (a signal
   * that comes meanwhile sets it again), then the handlers run; when one raised, the
   * flag is set again for the others (the eval breaker is still set: nothing clears
   * it but the eval loop). PyErr_CheckSignals alone would leave the flag set, and
   * every later poll would take the GIL for nothing. */
  _Py_atomic_store_relaxed(&_PyRuntime.ceval.signals_pending, 0);
  if (PyErr_CheckSignals() < 0) {
    _Py_atomic_store_relaxed(&_PyRuntime.ceval.signals_pending, 1);
    return -1;
  }
  return 0;
}
