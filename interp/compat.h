// The one place that touches CPython 3.11 internals: frame layout, the PEP 523 hook,
// code-object extra slots. Every other file goes through these inline helpers.
#pragma once

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#if PY_MAJOR_VERSION != 3 || PY_MINOR_VERSION != 11
#error "framejit's frame hook and decoder are written for CPython 3.11 exactly"
#endif

#ifndef Py_BUILD_CORE
#define Py_BUILD_CORE 1
#define FJ_UNDEF_BUILD_CORE
#endif
#include <internal/pycore_code.h>
#include <internal/pycore_frame.h>
#ifdef FJ_UNDEF_BUILD_CORE
#undef Py_BUILD_CORE
#undef FJ_UNDEF_BUILD_CORE
#endif

extern "C" {
int fj_compat_signals_pending(void);  // interp/compat_signals.c
int fj_compat_is_main_thread(void);
}

namespace fj::compat {

// A signal that Python handles (SIGINT, ...) arrived and its handler has not run yet;
// readable on any thread without the GIL.
inline bool signals_pending() { return fj_compat_signals_pending() != 0; }
// The thread that runs Python's signal handlers (PyErr_CheckSignals elsewhere does nothing).
inline bool is_main_thread() { return fj_compat_is_main_thread() != 0; }

using Frame = _PyInterpreterFrame;
using EvalFn = _PyFrameEvalFunction;

inline PyCodeObject* frame_code(Frame* f) { return f->f_code; }
inline PyFunctionObject* frame_func(Frame* f) { return f->f_func; }
inline PyObject* frame_globals(Frame* f) { return f->f_globals; }
inline PyObject* frame_builtins(Frame* f) { return f->f_builtins; }
// At entry (before COPY_FREE_VARS / MAKE_CELL run) localsplus holds the bound
// arguments; later slots are NULL.
inline PyObject* frame_local(Frame* f, int i) { return f->localsplus[i]; }

inline PyObject* eval_default(PyThreadState* ts, Frame* f, int throwflag) {
  return _PyEval_EvalFrameDefault(ts, f, throwflag);
}
inline EvalFn get_eval_frame() {
  return _PyInterpreterState_GetEvalFrameFunc(PyInterpreterState_Get());
}
inline void set_eval_frame(EvalFn fn) {
  _PyInterpreterState_SetEvalFrameFunc(PyInterpreterState_Get(), fn);
}

// The layout of co_extra in 3.11 (Objects/codeobject.c keeps it private).
struct CodeExtra {
  Py_ssize_t ce_size;
  void* ce_extras[1];
};

// The code object's extra slot `index`, read without a call: this is the one check
// that every frame pays while the hook is installed.
inline void* code_extra(PyCodeObject* code, Py_ssize_t index) {
  auto* extra = static_cast<CodeExtra*>(code->co_extra);
  if (extra == nullptr || index >= extra->ce_size) return nullptr;
  return extra->ce_extras[index];
}
inline int set_code_extra(PyCodeObject* code, Py_ssize_t index, void* value) {
  return _PyCode_SetExtra(reinterpret_cast<PyObject*>(code), index, value);
}
inline Py_ssize_t request_code_extra_index(freefunc free_fn) {
  return _PyEval_RequestCodeExtraIndex(free_fn);
}

}  // namespace fj::compat
