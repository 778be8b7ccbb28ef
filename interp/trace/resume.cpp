// The end of a trace that has run plan steps, and tracing on from a saved state:
// after an opaque call the frame cannot start over, so what cannot be traced hands
// the frame to CPython mid-code (a Deopt step, or the handler of a call that raised);
// a branch's other outcome and an opaque call's new kind of result are traced later,
// on the cache hit that first meets them, from the state saved there (ResumePoint).
#include <algorithm>
#include <functional>

#include "interp/trace/interpreter.h"
#include "interp/trace/tracer.h"
#include "jit/log.h"

namespace fj::interp {

// The tracer's state now, with the first `num_inputs` placeholders, to trace from
// later, at `pc` (or at pc_true for a branch's true outcome).
std::shared_ptr<ResumePoint> Tracer::resume_point(size_t num_inputs, size_t pc, std::optional<size_t> pc_true) const {
  auto rp = std::make_shared<ResumePoint>();
  rp->state = root_fs_;
  for (size_t i = 0; i < num_inputs; ++i) {
    const jit::Node& p = graph_.node(static_cast<jit::NodeId>(i));
    rp->inputs.push_back({placeholder_slot_[i], p.dtype, p.sym, may_be_noncontig(static_cast<jit::NodeId>(i))});
  }
  rp->symbol_sources = symbol_sources_;
  rp->next_identity = next_identity_;
  rp->iterated_lists = iterated_lists_;
  rp->num_regs = num_regs_;
  rp->path_slots = std::max(path_slots_, entry_->guards.num_path_slots());
  rp->pc[0] = pc;
  rp->pc[1] = pc_true.value_or(pc);
  return rp;
}

// The break's call raised into a handler of the frame while tracing: CPython runs the
// frame on from the handler, and the plan ends at this call. At a cache hit the call
// raising again unwinds the same way; a call that returns has no traced continuation
// yet: its check passes no result (Never), so the first one traces it (CallOutcomes).
Status Tracer::end_with_unwind(PlanStep step, const std::string& what) {
  step.check.kind = ResultCheck::Kind::Never;
  step.outcomes = std::make_shared<CallOutcomes>();
  step.outcomes->resume = resume_point(placeholder_slot_.size(), root_fs_.pc + 1);
  Value result = Value::constant(PyRef::borrow(Py_None));  // whatever a later call returns
  result.opaque = true;
  result.reg = step.result_reg;
  push(std::move(result));
  Status saved = save_state(root_fs_, root_fs_.pc + 1, "after the " + what, &step.deopt);
  pop();
  FJ_TRY(std::move(saved));
  const std::shared_ptr<DeoptState> unwind = step.unwind;
  plan_->steps.push_back(std::move(step));
  st_.counters.graph_breaks++;
  entry_->breaks.push_back({what + " (graph break: it raised into the frame's handler)",
                            location(cur_.code->instructions[root_fs_.pc])});
  handed_over_ = true;
  hand_to_cpython(*unwind, /*raising=*/true);
  return ok();
}

// ---- the end of a trace that has run steps ----

// CPython runs the rest of the frame from `state` now; its result is the call's.
bool Tracer::hand_to_cpython(const DeoptState& state, bool raising) {
  ran_ = true;
  result_ = PyRef::steal(resume_in_cpython(state, *run_, raising));
  return true;
}

// After an opaque call the frame cannot start over in CPython: it resumes there, at
// the root instruction that could not be traced, with the state from before it.
bool Tracer::end_with_deopt(const Status& why) {
  if (handed_over_) return true;  // CPython ran the rest of the frame (break_call, end_with_unwind)
  if (guards::error_kept()) return false;  // an interrupt: the frame stops here, as in eager
  if (resume_at_ && committed_) {  // a segment failed: CPython redoes it from the last call on
    return hand_to_cpython(*resume_at_);
  }
  if (!context_sets_.empty()) return deopt_after_last_call(why);  // the set has not happened in CPython
  if (!(committed_ || deopt_here_) || call_raised_ || !snapshot_) return false;
  if (cur_.depth != 0) return false;
  root_fs_ = std::move(*snapshot_);
  snapshot_.reset();
  // What the graph recorded from there on (a size equality that fails, a check of
  // int()) belongs to ops that CPython runs now, not to this segment.
  graph_.roll_back(snapshot_mark_);
  if (can_resume().failed()) return deopt_after_last_call(why);
  if (cut({}).failed()) {
    // The segment itself failed (an int() of NaN before this instruction): CPython
    // redoes it from the last opaque call on, and raises as eager does.
    if (!resume_at_ || !committed_) return false;
    return hand_to_cpython(*resume_at_);
  }
  std::shared_ptr<DeoptState> d;
  const bool raise_exit = deopt_here_ && raise_leaves_;
  const std::string reason =
      raise_exit ? "the frame raises" : why.error() + " (the rest of the frame runs in CPython)";
  if (save_state(root_fs_, root_fs_.pc, reason, &d).failed()) return false;
  return deopt_step(d, reason, nullptr, raise_exit);
}

// The plan ends with a Deopt step at `d` (a graph break, counted), run now; with
// `raise_exit`, at a raise that leaves the frame (DeoptState::raise_exit: no break).
bool Tracer::deopt_step(const std::shared_ptr<DeoptState>& d, const std::string& reason, const Instruction* at,
                        bool raise_exit) {
  PlanStep step;
  step.kind = PlanStep::Kind::Deopt;
  step.deopt = d;
  plan_->steps.push_back(std::move(step));
  if (raise_exit) {
    d->raise_exit = true;
    return hand_to_cpython(*d);
  }
  st_.counters.graph_breaks++;
  entry_->breaks.push_back({reason, location(at != nullptr ? *at : cur_.code->instructions[root_fs_.pc])});
  return hand_to_cpython(*d);
}

// The state before the failing instruction cannot be handed to CPython (a closure
// over the frame's cells is alive): the plan hands CPython the state saved after the
// last opaque call instead, and CPython redoes what was traced since (none of it ran).
bool Tracer::deopt_after_last_call(const Status& why) {
  // A segment that ran since (at a branch) may have written its inputs: not redone.
  if (!committed_ || !after_call_ || segment_since_call_) return false;
  return deopt_step(after_call_, why.error() + " (the frame runs in CPython from its last graph break on)");
}

void Tracer::run_final() {
  plan_->tail_deopt = committed_ ? after_call_ : nullptr;
  ran_ = true;
  result_ = PyRef::steal(run_tail(*plan_, *run_));
  // Nothing without an error: a kernel's index error before any opaque call ran. The
  // caller runs the plan again, which leaves the frame to CPython (eager raises).
  if (!result_ && !PyErr_Occurred()) ran_ = false;
}

// Traces on from a saved state, on a cache hit's call: `enter` completes the state
// (a call's new result); the plan traced is run now and, when whole, kept in *traced.
PyObject* Tracer::trace_from(const ResumePoint& rp, size_t pc, PlanRun& run, const std::function<void()>& enter,
                             std::shared_ptr<Plan>* traced) {
  continuation_ = true;
  committed_ = true;  // whatever happened before the branch or call, it happened
  run_ = &run;
  hints_ = run.b;
  symbol_sources_ = rp.symbol_sources;
  next_identity_ = rp.next_identity;
  iterated_lists_ = rp.iterated_lists;
  num_regs_ = rp.num_regs;
  path_slots_ = rp.path_slots;
  root_fs_ = rp.state;
  root_fs_.pc = pc;
  // The saved state holds the objects of the call that traced it; this call's
  // arguments and modules (guarded by class) may be other objects of the same kind.
  // The rest is traced with this call's own, so that what it reads (and guards) is
  // what this call sees.
  std::vector<Value*> roots = state_roots(root_fs_);
  walk_values(roots, [&](Value& v) {
    if (v.kind != ValueKind::Const || v.reg >= 0) return;
    const auto slot = static_cast<size_t>(v.path_slot);
    if (v.path_slot >= 0 && slot < in_.path_tensors.size() && in_.path_tensors[slot]) {
      v.obj = PyRef::borrow(in_.path_tensors[slot].get());
    } else if (v.path_slot < 0 && v.source.kind == Source::Kind::Arg && v.source.arg >= 0 && v.source.attrs.empty() &&
               v.source.arg < in_.num_args) {
      v.obj = PyRef::borrow(in_.args[v.source.arg]);
    }
  });
  for (const ResumePoint::Input& in : rp.inputs) {
    jit::Shape shape;
    for (const jit::SymExpr& e : in.sym) {
      const auto v = e.eval(hints_);
      shape.push_back(v && v->index() == 0 ? std::get<int64_t>(*v) : 0);
    }
    const jit::NodeId p = graph_.placeholder(in.dtype, shape, in.sym);
    if (in.noncontig) mark_noncontig(p);
    placeholder_slot_.push_back(in.ref);
  }
  enter();
  auto plan = std::make_shared<Plan>();
  plan_ = plan.get();
  block_guards_ = new_block_guards();
  continuation_plan_ = plan_;
  Status s = save_state(root_fs_, root_fs_.pc, "a new continuation", &after_call_);
  const std::shared_ptr<DeoptState> start = after_call_;
  snapshot_ = root_fs_;
  snapshot_mark_ = graph_.mark();
  Value ret;
  if (s.ok()) s = execute(&ret);
  if (s.ok()) s = finish(ret);
  if (s.ok()) s = compile();
  if (s.ok()) s = flush_block_guards();
  bool complete = s.ok();
  if (s.ok()) {
    run_final();
  } else if (end_with_deopt(s)) {
    complete = true;
  } else if (!call_raised_ && start && !PyErr_Occurred() &&
             std::none_of(plan->steps.begin(), plan->steps.end(), [](const PlanStep& st) {
               return st.kind == PlanStep::Kind::Call || st.kind == PlanStep::Kind::RunGraph;
             })) {
    hand_to_cpython(*start);  // nothing of the continuation ran: CPython runs all of it
  } else if (!call_raised_) {
    if (!PyErr_Occurred()) {
      PyErr_Format(PyExc_RuntimeError, "framejit: cannot continue %U after a graph break: %s",
                   st_.code->co_qualname, s.error().c_str());
    }
    result_ = PyRef();
  }
  if (complete && !resume_at_) *traced = plan;
  st_.counters.graphs += graphs_compiled_;
  return result_.release();
}

PyObject* Tracer::resume(BranchTargets& targets, int outcome, PlanRun& run) {
  std::shared_ptr<Plan> traced;
  PyObject* r = trace_from(*targets.resume, targets.resume->pc[outcome], run, [] {}, &traced);
  if (traced && !targets.next[outcome]) targets.next[outcome] = traced;
  return r;
}

PyObject* Tracer::resume_call(const std::shared_ptr<CallOutcomes>& outcomes, int result_reg, PlanRun& run) {
  ResultCheck check;
  std::shared_ptr<Plan> traced;
  outcomes->traced++;
  resumed_reg_ = result_reg;
  resumed_check_ = &check;
  resumed_outcomes_ = outcomes;
  PyObject* r = trace_from(*outcomes->resume, outcomes->resume->pc[0], run, [&] {
    Value result;
    call_result(result_reg, &check, &result);
    push(std::move(result));
  }, &traced);
  if (traced) {
    outcomes->seen.push_back({std::move(check), traced});
    st_.counters.recompiles++;
    if (log::enabled(log::Channel::Recompiles)) {
      log::interp().info("recompile: {} goes on after a graph break with a new kind of result or new values read after it ({} traced)",
                         guards::utf8_lossy(st_.code->co_qualname), outcomes->traced + 1);
    }
  }
  return r;
}

PyObject* trace_branch_outcome(BranchTargets& targets, int outcome, PlanRun& run) {
  Expected<const DecodedCode*> code = run.st ? decoded_code(run.st->code) : Error{""};
  if (code.failed()) {
    PyErr_Format(PyExc_RuntimeError, "framejit: cannot trace a branch outcome: %s", code.error().c_str());
    return nullptr;
  }
  Tracer tracer(*run.st, run.frame, run.in, **code);
  return tracer.resume(targets, outcome, run);
}

PyObject* trace_call_outcome(const std::shared_ptr<CallOutcomes>& outcomes, int result_reg, PlanRun& run) {
  Expected<const DecodedCode*> code = decoded_code(run.st->code);
  if (code.failed()) {
    PyErr_Format(PyExc_RuntimeError, "framejit: cannot trace after a graph break: %s", code.error().c_str());
    return nullptr;
  }
  Tracer tracer(*run.st, run.frame, run.in, **code);
  return tracer.resume_call(outcomes, result_reg, run);
}

}  // namespace fj::interp
