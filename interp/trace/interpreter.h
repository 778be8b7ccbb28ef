// The symbolic bytecode interpreter: traces one frame into a graph, a guard set and
// a plan, and compiles the graph.
#pragma once

#include "interp/code_state.h"

namespace fj::interp {

// Traces the frame `f` (at entry, arguments bound) with the inputs read from it.
// On success returns a ready cache entry; on failure fills `why` (reason and
// file:line) and returns nullptr: the caller runs the frame in CPython.
// A trace that met a graph break has already run the call (its steps run while they
// are traced, so side effects happen once and in order): `out->ran` is then set and
// `out->result` is the call's result (nullptr with a Python error when it raised).
struct TraceOutcome {
  bool ran = false;
  PyObject* result = nullptr;  // new reference
};
std::unique_ptr<CacheEntry> trace_frame(CodeState& state, compat::Frame* f,
                                        const guards::CallInputs& in, Fallback* why,
                                        TraceOutcome* out);
// A branch's outcome met for the first time on a cache hit: traces it from the
// state saved at the branch, attaches it, and runs it (interp/trace/breaks.cpp).
PyObject* trace_branch_outcome(BranchTargets& targets, int outcome, PlanRun& run);
// An opaque call's result that no continuation accepts: traces one for it from the
// state saved after the call (its result in register `result_reg`), attaches it, and
// runs it (interp/trace/breaks.cpp).
PyObject* trace_call_outcome(const std::shared_ptr<CallOutcomes>& outcomes, int result_reg, PlanRun& run);
// Reads the builtins that traced calls dispatch on (interp/trace/ops_builtins.cpp);
// once, at import.
void init_builtin_calls();
// The process's CPU backend (created on first use), or why there is none.
Expected<jit::CpuBackend*> cpu_backend();

}  // namespace fj::interp
