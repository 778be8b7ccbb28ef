// Branches on a tensor's value where the plan cannot branch itself: data checks (see
// DataCheck in interp/runtime/plan.h). The plan's own branches (a cut, a Branch step)
// are in breaks.cpp.
#include <string>

#include "interp/trace/tracer.h"

namespace fj::interp {

jit::DType item_dtype(jit::ScalarKind k);  // breaks.cpp

// Whether a branch on a tensor's truth can be a Branch step of the plan (the graph
// cut there, each outcome continuing in a plan of its own): in the frame itself, where
// a cut is possible. Elsewhere the branch is a data check (data_truth).
bool Tracer::can_branch_plan() const {
  return cur_.depth == 0 && !autograd_ && context_sets_.empty() && can_resume().ok();
}

// The most compute nodes a data check's condition may need: it runs at each lookup of
// the entry, beside the graph that may compute the same values again.
constexpr size_t kMaxDataCheckNodes = 32;
// The most data checks of one entry: each is a graph run at every lookup, and a loop
// whose condition reads tensor values (`while (x > 1).any():`) would otherwise make an
// entry per trip count.
constexpr size_t kMaxDataChecks = 4;

// The truth of a one-element tensor of the first segment, computed now by a graph of
// its own (the condition's cone, on the entry's inputs), which becomes a data check of
// the entry: a call for which it differs traces anew and takes the other way. The
// trace goes on in one graph, at any depth and under autograd.
Status Tracer::data_truth(const Value& cond, bool* out) {
  const std::string what = "a branch on a tensor's value (data-dependent control flow)";
  if (continuation_ || committed_ || plan_ != &entry_->plan || !plan_->steps.empty()) {
    return unsupported(what + " after a graph break (not supported yet)");
  }
  for (const InputRef& r : placeholder_slot_) {
    if (r.kind == InputRef::Kind::Reg) return unsupported(what + " after a graph break (not supported yet)");
  }
  if (plan_->data_checks.size() >= kMaxDataChecks) {
    return unsupported(what + ": more than " + std::to_string(kMaxDataChecks) + " in one trace (not supported yet)");
  }
  const jit::Node& n = graph_.node(cond.node);
  const std::optional<jit::Shape> shape = jit::concrete(n.sym);
  int64_t numel = 1;
  for (int64_t d : shape.value_or(jit::Shape{2})) numel *= d;
  if (numel != 1) return unsupported(what + " that may hold more than one element");
  // The condition's own graph: small and free of random draws (a second draw would
  // move the generator).
  jit::Graph g = graph_.cone({cond.node});
  size_t compute = 0;
  for (const jit::Node& m : g.nodes()) {
    const jit::Family f = jit::op_family(m.op);
    if (f == jit::Family::Input || f == jit::Family::Constant) continue;
    if (m.extern_fn && m.extern_fn->random()) {
      return unsupported(what + " computed from random draws (" + m.extern_fn->name() + ")");
    }
    if (++compute > kMaxDataCheckNodes) return unsupported(what + " computed by more than " +
                                                            std::to_string(kMaxDataCheckNodes) + " ops (not supported yet)");
  }
  // Its output: `cond != 0`, a tensor the graph computes (the condition may be an input
  // itself, or a number read from a tensor), with the condition's truth.
  jit::NodeId value = g.outputs()[0];
  if (jit::is_python_scalar(g.node(value))) {
    auto t = g.full({}, value, item_dtype(g.node(value).scalar_kind));
    if (!t) return unsupported(what + ": " + t.error());
    value = *t;
  }
  auto truth_node = g.pointwise(jit::Op::Ne, {value, g.scalar_int(0)});
  if (!truth_node) return unsupported(what + ": " + truth_node.error());
  g.set_outputs({*truth_node});
  DataCheck check;
  check.seg.graph = FJ_TRY(compile_on_cpu(g, "a branch condition"));
  graphs_compiled_--;  // a check, not a graph of the frame's work (stats count those)
  check.seg.args = placeholder_slot_;
  check.seg.scalar_inputs = plan_->scalar_inputs;
  check.seg.outputs.push_back(output_spec(g.node(*truth_node)));
  jit::Bindings b;  // fills in_.path_tensors (the guards hold: the trace just read them)
  if (!entry_->guards.check(in_, &b)) return unsupported("internal error: the entry's guards fail at a data check");
  const int truth = data_check_truth(check.seg, in_, b);
  if (truth < 0) return unsupported(what + ": its condition could not be computed (eager raises)");
  check.truth = truth == 1;
  plan_->data_checks.push_back(std::move(check));
  *out = truth == 1;
  return ok();
}

}  // namespace fj::interp
