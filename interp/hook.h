// The PEP 523 frame hook and framejit's entry points: CompiledFunction (the
// wrapper framejit.compile returns) and explain's forced trace.
#pragma once

#include "interp/compat.h"

#include "interp/code_state.h"

#include <vector>

namespace fj::interp {

// Registers the CompiledFunction type and the code-extra slot; call once at import.
bool init_hook(PyObject* module);
// A new CompiledFunction wrapping a Python function (new reference or NULL + error).
// `dynamic`: tensor sizes are symbols (the default) or static.
// `fullgraph`: a frame framejit cannot trace raises GraphBreakError instead of
// running in CPython.
PyObject* make_compiled_function(PyObject* fn, bool dynamic, bool fullgraph);
// Calls fn (a function or CompiledFunction) through framejit with a fresh trace that
// is recorded and not cached. Returns the call's result (new ref, or NULL + error).
PyObject* call_recorded(PyObject* fn, PyObject* args, PyObject* kwargs, Recorder* rec);
// The function a CompiledFunction wraps (borrowed), or nullptr for anything else.
PyObject* compiled_function_target(PyObject* obj);
// Watches a code object directly (no wrapper; framejit.hook): every call of it goes
// through framejit while the hook stays installed. on=false stops watching.
bool watch_code(PyCodeObject* code, bool on);
// A function that a trace could not inline whole (a graph break inside it) runs as
// an opaque call; from then on its own frames are framejit's wherever they run inside
// a frame framejit runs, so the break ends up at the top of some frame, where the plan
// resumes after it. Its state takes `caller`'s compile options.
void watch_nested(PyCodeObject* code, const CodeState& caller);
// Code objects that framejit has seen calls of, or watches directly.
std::vector<CodeState*> watched_states();
// Install / remove the hook by hand (the overhead benchmark uses this).
void set_hook_installed(bool on);
bool hook_installed();

}  // namespace fj::interp
