// Keeping KeyboardInterrupt, SystemExit and MemoryError from being cleared into a
// fallback (see py_errors.h).
#include "guards/py_errors.h"

namespace fj::guards {
namespace {

// Plain pointers, not PyRefs: PyErr_Fetch / PyErr_Restore hand the references over
// explicitly, and a thread_local destructor would run at thread exit without the GIL.
struct KeptError {
  PyObject* type = nullptr;
  PyObject* value = nullptr;
  PyObject* traceback = nullptr;
};
thread_local KeptError t_kept;

}  // namespace

bool error_must_propagate() noexcept {
  PyObject* type = PyErr_Occurred();
  if (type == nullptr) return false;
  return !PyErr_GivenExceptionMatches(type, PyExc_Exception) || PyErr_GivenExceptionMatches(type, PyExc_MemoryError);
}

void clear_error() noexcept {
  if (PyErr_Occurred() == nullptr) return;
  if (!error_must_propagate() || t_kept.type != nullptr) {
    PyErr_Clear();
    return;
  }
  PyErr_Fetch(&t_kept.type, &t_kept.value, &t_kept.traceback);
}

bool error_kept() noexcept { return t_kept.type != nullptr; }

bool restore_kept_error() noexcept {
  if (t_kept.type == nullptr) return false;
  PyErr_Restore(t_kept.type, t_kept.value, t_kept.traceback);  // steals the three references
  t_kept = KeptError{};
  return true;
}

}  // namespace fj::guards
