// Python errors that framejit meets while it guards, traces or runs a frame.
//
// Most of them mean "framejit cannot do this here": the code that meets one clears
// it and falls back (the frame runs in CPython, which raises again where eager
// would). KeyboardInterrupt, SystemExit and MemoryError are different: they come
// from outside the code being traced (a signal handler, the process ending, the
// allocator) and must reach the caller. clear_error() therefore sets those aside,
// per thread, instead of dropping them; the frame hook gives the kept error back
// (restore_kept_error) before it decides what to do with the call.
#pragma once

#define PY_SSIZE_T_CLEAN
#include <Python.h>

namespace fj::guards {

// The current Python error must reach the caller (KeyboardInterrupt, SystemExit,
// another BaseException that is not an Exception, or MemoryError).
bool error_must_propagate() noexcept;
// Clears the current Python error, if any; one that must propagate is kept aside
// (the first one, when several come before it is given back).
void clear_error() noexcept;
// True when an error was kept aside on this thread (and not given back yet).
bool error_kept() noexcept;
// Makes the kept error the current Python error again; false when none is kept.
bool restore_kept_error() noexcept;

}  // namespace fj::guards
