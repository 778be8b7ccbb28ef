// The symbolic bytecode interpreter: traces one frame into a graph, a guard set and
// a plan, and compiles the graph.
#pragma once

#include "interp/code_state.h"

namespace fj::interp {

// Traces the frame `f` (at entry, arguments bound) with the inputs read from it.
// On success returns a ready cache entry; on failure fills `why` (reason and
// file:line) and returns nullptr: the caller runs the frame in CPython.
std::unique_ptr<CacheEntry> trace_frame(CodeState& state, compat::Frame* f,
                                        const guards::CallInputs& in, Fallback* why);

}  // namespace fj::interp
