// Plans: what a cache hit runs instead of the frame.
//
// Design: tracing a frame yields a Plan. In this version a plan has one step, "run
// the compiled graph on these arguments", followed by the frame's return value
// rebuilt from graph outputs, arguments and constants (PlanValue, a small tree).
// Graph breaks and data-dependent branches will become further steps.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "guards/guards.h"
#include "interp/value.h"
#include "jit/cpu_backend.h"

namespace fj::interp {

struct PlanValue {
  enum class Kind : uint8_t { GraphOutput, Arg, Const, Tuple, List } kind = Kind::Const;
  int index = -1;               // GraphOutput: output position; Arg: argument slot
  PyRef obj;                    // Const
  std::vector<PlanValue> items; // Tuple, List
};

struct OutputSpec {
  jit::DType dtype;
  jit::Shape shape;
  std::vector<int64_t> strides;  // contiguous
  PyRef empty_args;  // ((sizes...),): the positional arguments of torch.empty
};

struct Plan {
  std::shared_ptr<jit::CompiledGraph> graph;  // null when there is no graph to run
  std::vector<int> graph_args;                // argument slot of each placeholder
  std::vector<OutputSpec> outputs;
  PlanValue ret;
};

// Runs a plan on a call's inputs; a new reference, or nullptr with a Python error.
PyObject* run_plan(const Plan& plan, const guards::CallInputs& in);

}  // namespace fj::interp
