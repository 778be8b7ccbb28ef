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
