// FRAMEJIT_TRACE_DIR: one folder per trace with the bytecode trace, the graph, the
// plan, the guards, the LLVM IR before and after optimization, and the outcome.
#pragma once

#include "interp/compat.h"

#include <string>

#include "interp/code_state.h"

namespace fj::interp {

// `entry` is null when the trace ended in a fallback, whose reason is in `why`.
void write_trace_dump(PyCodeObject* code, const std::string& bytecode, const CacheEntry* entry,
                      const Fallback& why);
// A readable form of a plan (for dumps).
std::string describe_plan(const Plan& plan);

}  // namespace fj::interp
