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
int fj_compat_run_signal_handlers(void);
}

namespace fj::compat {

// A signal that Python handles (SIGINT, ...) arrived and its handler has not run yet;
// readable on any thread without the GIL.
inline bool signals_pending() { return fj_compat_signals_pending() != 0; }
// The thread that runs Python's signal handlers (PyErr_CheckSignals elsewhere does nothing).
inline bool is_main_thread() { return fj_compat_is_main_thread() != 0; }
// PyErr_CheckSignals that also clears signals_pending() (which PyErr_CheckSignals
// leaves set for the eval loop to clear): -1 when a handler raised. With the GIL,
// on the main thread.
inline int run_signal_handlers() { return fj_compat_run_signal_handlers(); }

using Frame = _PyInterpreterFrame;
using EvalFn = _PyFrameEvalFunction;

inline PyCodeObject* frame_code(Frame* f) { return f->f_code; }
inline PyFunctionObject* frame_func(Frame* f) { return f->f_func; }
inline PyObject* frame_globals(Frame* f) { return f->f_globals; }
inline PyObject* frame_builtins(Frame* f) { return f->f_builtins; }
// At entry (before COPY_FREE_VARS / MAKE_CELL run) localsplus holds the bound
// arguments; later slots are NULL.
inline PyObject* frame_local(Frame* f, int i) { return f->localsplus[i]; }
// Local i of `co` is a cell variable (a closure of the code reads it; MAKE_CELL makes
// its cell), as opposed to a plain local or a free variable.
inline bool is_cell_var(PyCodeObject* co, int i) {
  const _PyLocals_Kind k = _PyLocals_GetKind(co->co_localspluskinds, i);
  return (k & CO_FAST_CELL) != 0 && (k & CO_FAST_FREE) == 0;
}

inline PyObject* eval_default(PyThreadState* ts, Frame* f, int throwflag) {
  return _PyEval_EvalFrameDefault(ts, f, throwflag);
}
inline EvalFn get_eval_frame() {
  return _PyInterpreterState_GetEvalFrameFunc(PyInterpreterState_Get());
}
inline void set_eval_frame(EvalFn fn) {
  _PyInterpreterState_SetEvalFrameFunc(PyInterpreterState_Get(), fn);
}

// ---- the thread's frame chain ----
// CPython links a frame into tstate->cframe->current_frame only inside its own
// evaluator; a frame that framejit runs itself (a plan, a trace) is otherwise
// invisible: sys._getframe(), warnings and inspect in the code it calls would see
// its caller, and no traceback entry would name it. link_frame() puts the frame on
// the chain as CPython would, at its first traceable instruction; set_instruction()
// moves it to the instruction being run, so its line number is that instruction's.

// A trace or profile function is set on this thread (sys.settrace, sys.setprofile:
// pdb, coverage.py): its events come only from frames that CPython evaluates.
inline bool tracing_active(PyThreadState* ts) {
  return ts->c_tracefunc != nullptr || ts->c_profilefunc != nullptr;
}

// 3.11's COPY_FREE_VARS (opcode.h's macros would clash with interp/trace/opcodes.def).
constexpr int kCopyFreeVars = 149;

// A debugger set a trace function on this frame itself (pdb.set_trace() / breakpoint()
// marks every frame on the chain) while a trace function is set: from here on the
// frame's line events are expected, which only CPython's evaluator gives.
inline bool frame_traced(PyThreadState* ts, Frame* f) {
  return ts->c_tracefunc != nullptr && f->frame_obj != nullptr && f->frame_obj->f_trace != nullptr;
}

inline _Py_CODEUNIT* entry_instr(Frame* f) { return _PyCode_CODE(f->f_code) - 1; }

// The instruction at byte offset `offset` is the frame's current one.
inline void set_instruction(Frame* f, int offset) { f->prev_instr = _PyCode_CODE(f->f_code) + offset / 2; }

inline bool frame_linked(PyThreadState* ts, Frame* f) { return ts->cframe->current_frame == f; }

// Links `f` (at entry: prev_instr before the first instruction) as the thread's
// current frame. A linked frame counts as started, so its prologue's effect on the
// locals is made too: COPY_FREE_VARS's cells (frame.f_locals reads them), not
// MAKE_CELL's (CPython reads a cell variable that is not yet a cell as a plain value).
inline void link_frame(PyThreadState* ts, Frame* f) {
  Frame* outer = ts->cframe->current_frame;
  PyCodeObject* co = f->f_code;
  if (f->prev_instr == entry_instr(f)) {
    if (co->co_nfreevars > 0 && _Py_OPCODE(_PyCode_CODE(co)[0]) == kCopyFreeVars) {
      PyObject* closure = f->f_func->func_closure;
      const int first = co->co_nlocalsplus - co->co_nfreevars;
      for (int k = 0; k < co->co_nfreevars; ++k) {
        Py_XSETREF(f->localsplus[first + k], closure ? Py_XNewRef(PyTuple_GET_ITEM(closure, k)) : nullptr);
      }
    }
    f->prev_instr = _PyCode_CODE(co) + co->_co_firsttraceable;
  }
  f->previous = outer;
  ts->cframe->current_frame = f;
}

// Takes a linked `f` off the chain (CPython's evaluator links it again when it runs it).
inline void unlink_frame(PyThreadState* ts, Frame* f) {
  if (ts->cframe->current_frame == f) ts->cframe->current_frame = f->previous;
}

// Puts a linked frame back in its entry state, for CPython to run it from the start.
inline void reset_to_entry(Frame* f) {
  if (f->prev_instr == entry_instr(f)) return;
  PyCodeObject* co = f->f_code;
  if (co->co_nfreevars > 0 && _Py_OPCODE(_PyCode_CODE(co)[0]) == kCopyFreeVars) {
    for (int k = co->co_nlocalsplus - co->co_nfreevars; k < co->co_nlocalsplus; ++k) Py_CLEAR(f->localsplus[k]);
  }
  f->prev_instr = entry_instr(f);
}

// Adds a traceback entry for the linked frame `f` (at its current instruction) to the
// pending exception, unless its traceback already starts at `f` (CPython ran it).
inline void add_traceback_entry(PyThreadState* ts, Frame* f) {
  if (!frame_linked(ts, f) || !PyErr_Occurred()) return;
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  const bool present = tb != nullptr && f->frame_obj != nullptr &&
                       reinterpret_cast<PyTracebackObject*>(tb)->tb_frame == f->frame_obj;
  PyErr_Restore(type, value, tb);
  if (present) return;
  PyFrameObject* fo = PyThreadState_GetFrame(ts);  // f's, created if need be
  if (fo == nullptr) return;
  PyTraceBack_Here(fo);
  Py_DECREF(fo);
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
