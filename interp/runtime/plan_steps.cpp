// Running a plan's steps (plan.h): graph segments, opaque calls with their result
// checks, guards read after a call, views of registers, branches, and resuming the
// frame in CPython.
#include <cstring>

#include "interp/code_state.h"
#include "interp/trace/interpreter.h"
#include "interp/runtime/plan.h"
#include "jit/log.h"

namespace fj::interp {
namespace {

bool scalars_of(const std::vector<jit::SymExpr>& exprs, const jit::Bindings& b, std::vector<double>* out) {
  out->clear();
  for (const jit::SymExpr& e : exprs) {
    const auto v = e.eval(b);
    if (!v) return false;
    out->push_back(scalar_slot(*v));
  }
  return true;
}

// Equal and of one type, item by item in tuples: 1 == 1.0, but a trace that went on
// with an int does not hold for a float.
bool same_constant(PyObject* a, PyObject* b) {
  if (Py_TYPE(a) != Py_TYPE(b)) return false;
  if (PyTuple_CheckExact(a)) {
    if (PyTuple_GET_SIZE(a) != PyTuple_GET_SIZE(b)) return false;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(a); ++i) {
      if (!same_constant(PyTuple_GET_ITEM(a, i), PyTuple_GET_ITEM(b, i))) return false;
    }
    return true;
  }
  const int eq = PyObject_RichCompareBool(a, b, Py_EQ);  // numbers, str, dtypes: no user code
  if (eq < 0) guards::clear_error();
  return eq == 1;
}

// Does an opaque call's result still look like the one the trace continued with?
bool result_matches(const ResultCheck& c, PyObject* r) {
  switch (c.kind) {
    case ResultCheck::Kind::Any: return true;
    case ResultCheck::Kind::Is: return r == c.obj.get();
    case ResultCheck::Kind::Type: return reinterpret_cast<PyObject*>(Py_TYPE(r)) == c.obj.get();
    case ResultCheck::Kind::Never: return false;
    case ResultCheck::Kind::Equals: return same_constant(r, c.obj.get());
    case ResultCheck::Kind::Tensor: {
      if (Py_TYPE(r) != reinterpret_cast<PyTypeObject*>(guards::torch_refs().tensor_type)) return false;
      guards::TensorMeta m;
      if (!guards::read_tensor_meta(r, &m, nullptr)) {
        guards::clear_error();
        return false;
      }
      if (m.dtype != c.meta.dtype || m.is_cpu != c.meta.is_cpu || m.requires_grad != c.meta.requires_grad ||
          m.rank != c.meta.rank) {
        return false;
      }
      if (c.contiguous && !is_contiguous(m)) return false;
      return std::equal(m.sizes.begin(), m.sizes.begin() + m.rank, c.meta.sizes.begin());
    }
  }
  return false;
}

PyObject* call_step(const PlanStep& step, PlanRun& run) {
  std::vector<PyObject*> memo(static_cast<size_t>(step.num_memos), nullptr);
  const std::vector<PyRef> no_outs;
  PyRef fn = PyRef::steal(build_value(step.callable, run, no_outs, memo));
  if (!fn) return nullptr;
  PyRef args = PyRef::steal(build_value(step.args, run, no_outs, memo));
  if (!args) return nullptr;
  const Py_ssize_t n = PyTuple_GET_SIZE(args.get());
  const Py_ssize_t nkw = step.kw_names ? PyTuple_GET_SIZE(step.kw_names.get()) : 0;
  return PyObject_Vectorcall(fn.get(), &PyTuple_GET_ITEM(args.get(), 0), static_cast<size_t>(n - nkw),
                             step.kw_names.get());
}

}  // namespace

bool is_contiguous(const guards::TensorMeta& m) {
  int64_t expected = 1;
  for (int d = m.rank; d-- > 0;) {
    if (m.sizes[d] == 0) return true;
  }
  for (int d = m.rank; d-- > 0;) {
    if (m.sizes[d] == 1) continue;
    if (m.strides[d] != expected) return false;
    expected *= m.sizes[d];
  }
  return true;
}

void set_reg(PlanRun& run, int reg, PyRef value) {
  if (run.regs.size() <= static_cast<size_t>(reg)) run.regs.resize(static_cast<size_t>(reg) + 1);
  run.regs[static_cast<size_t>(reg)] = std::move(value);
}

// A CheckGuards step's guards hold. Block guard sets bind no symbols (see
// Tracer::guards()): `b` is only read.
static bool block_guards_hold(const PlanStep& step, PlanRun& run) {
  return step.guards->check(run.in, const_cast<jit::Bindings*>(&run.b));
}

bool run_step(const PlanStep& step, PlanRun& run, const DeoptState** deopt) {
  switch (step.kind) {
    case PlanStep::Kind::RunGraph: {
      std::vector<double> scalars;
      if (!scalars_of(step.seg.scalar_inputs, run.b, &scalars)) {
        PyErr_SetString(PyExc_RuntimeError, "framejit: a segment's scalar input has no value (internal error)");
        return false;
      }
      std::vector<PyRef> outs;
      const GraphRun status = run_graph(*step.seg.graph, step.seg.args, step.seg.outputs, scalars, run, &outs);
      if (status == GraphRun::RunInCPython) *deopt = step.deopt.get();  // null before any opaque call: CPython from the start
      if (status != GraphRun::Ok) return false;
      for (size_t k = 0; k < outs.size(); ++k) set_reg(run, step.seg.out_regs[k], std::move(outs[k]));
      return true;
    }
    case PlanStep::Kind::Call: {
      if (step.offset >= 0 && run.frame != nullptr) compat::set_instruction(run.frame, step.offset);
      PyObject* r = call_step(step, run);
      if (r == nullptr) return false;  // raised: the frame raises it, as eager's would
      set_reg(run, step.result_reg, PyRef::steal(r));
      if (!result_matches(step.check, r)) {
        if (log::enabled(log::Channel::GraphBreaks)) {
          log::interp().info("plan: an opaque call's result differs from the traced one");
        }
        *deopt = step.deopt.get();
        return false;
      }
      return true;
    }
    case PlanStep::Kind::CheckGuards: {
      if (!block_guards_hold(step, run)) {
        if (log::enabled(log::Channel::Guards)) {
          log::guards().info("plan: a value read after a graph break changed ({})",
                             step.guards->check_verbose(run.in).value_or("?"));
        }
        *deopt = step.deopt.get();
        return false;
      }
      return true;
    }
    case PlanStep::Kind::View: {  // built from registers and inputs only: no graph outputs
      std::vector<PyObject*> memo;
      const std::vector<PyRef> no_outs;
      PyObject* v = build_view(step.view, run, no_outs, memo);
      if (v == nullptr) return false;
      set_reg(run, step.result_reg, PyRef::steal(v));
      return true;
    }
    case PlanStep::Kind::Branch:
    case PlanStep::Kind::Deopt:
      break;
  }
  PyErr_SetString(PyExc_RuntimeError, "framejit: run_step on a branch or deopt step (internal error)");
  return false;
}

int data_check_truth(const Segment& seg, const guards::CallInputs& in, const jit::Bindings& b) {
  PlanRun run{in, b};
  std::vector<double> scalars;
  std::vector<PyRef> outs;
  if (!scalars_of(seg.scalar_inputs, b, &scalars) ||
      run_graph(*seg.graph, seg.args, seg.outputs, scalars, run, &outs) != GraphRun::Ok || outs.size() != 1) {
    guards::clear_error();
    return -1;
  }
  const int truth = PyObject_IsTrue(outs[0].get());
  if (truth < 0) guards::clear_error();
  return truth;
}

bool data_checks_hold(const Plan& plan, const guards::CallInputs& in, const jit::Bindings& b) {
  for (const DataCheck& c : plan.data_checks) {
    if (data_check_truth(c.seg, in, b) != static_cast<int>(c.truth)) return false;
  }
  return true;
}

PyObject* run_tail(const Plan& plan, PlanRun& run) {
  std::vector<double> scalars;
  if (!eval_scalars(plan, run.b, &scalars)) {
    PyErr_SetString(PyExc_RuntimeError, "framejit: a plan's scalar has no value (internal error)");
    return nullptr;
  }
  std::vector<PyRef> outs;
  const GraphRun status =
      plan.graph ? run_graph(*plan.graph, plan.graph_args, plan.outputs, scalars, run, &outs) : GraphRun::Ok;
  if (status == GraphRun::RunInCPython && plan.tail_deopt) return resume_in_cpython(*plan.tail_deopt, run);
  if (status != GraphRun::Ok) return nullptr;  // RunInCPython before any opaque call: CPython runs the frame
  if (!plan.writes.empty() && !write_back(plan.writes, outs, run)) return nullptr;
  std::vector<PyObject*> memo(static_cast<size_t>(plan.num_memos), nullptr);
  return build_value(plan.ret, run, outs, memo);
}

// Whether the guards a continuation checks first (what it read right after the call)
// hold now.
static bool first_guards_hold(const Plan& plan, PlanRun& run) {
  for (const PlanStep& step : plan.steps) {
    if (step.kind == PlanStep::Kind::View) continue;
    if (step.kind != PlanStep::Kind::CheckGuards) return true;
    if (!block_guards_hold(step, run)) return false;
  }
  return true;
}

// A call's result (in `reg`) failed the traced check, or what the trace read right
// after it changed: the rest goes on in the continuation traced for such a result and
// such reads, traced now if there is none and room for one.
static PyObject* run_call_outcome(std::shared_ptr<CallOutcomes> outcomes, int reg, const DeoptState& deopt,
                                  PlanRun& run) {
  PyObject* r = run.regs[static_cast<size_t>(reg)].get();
  for (size_t k = 0; k < outcomes->seen.size(); ++k) {
    const std::shared_ptr<Plan> next = outcomes->seen[k].next;
    if (!result_matches(outcomes->seen[k].check, r) || !first_guards_hold(*next, run)) continue;
    return run_steps(*next, run);
  }
  if (outcomes->resume && run.st != nullptr && outcomes->traced + 1 < config().cache_limit) {
    return trace_call_outcome(outcomes, reg, run);
  }
  return resume_in_cpython(deopt, run);
}

PyObject* run_steps(const Plan& plan, PlanRun& run) {
  for (const PlanStep& step : plan.steps) {
    switch (step.kind) {
      case PlanStep::Kind::RunGraph:
      case PlanStep::Kind::Call:
      case PlanStep::Kind::CheckGuards:
      case PlanStep::Kind::View: {
        const DeoptState* deopt = nullptr;
        if (!run_step(step, run, &deopt)) {
          if (deopt == nullptr && step.unwind) return resume_in_cpython(*step.unwind, run, /*raising=*/true);
          // Held here: another thread (while a compile lets go of the GIL) may add outcomes.
          if (deopt != nullptr && step.outcomes) return run_call_outcome(step.outcomes, step.result_reg, *deopt, run);
          if (auto outcomes = step.retrace.lock(); deopt != nullptr && outcomes) {
            return run_call_outcome(outcomes, step.result_reg, *deopt, run);
          }
          return deopt ? resume_in_cpython(*deopt, run) : nullptr;
        }
        // The call started a debugger on this frame (breakpoint()): the rest runs in
        // CPython, which gives the debugger its line events.
        if (step.kind == PlanStep::Kind::Call && step.deopt && run.frame != nullptr &&
            compat::frame_traced(PyThreadState_Get(), run.frame)) {
          return resume_in_cpython(*step.deopt, run);
        }
        break;
      }
      case PlanStep::Kind::Deopt:
        return resume_in_cpython(*step.deopt, run);
      case PlanStep::Kind::Branch: {
        std::vector<PyObject*> memo;
        const std::vector<PyRef> no_outs;
        PyRef cond = PyRef::steal(build_value(step.cond, run, no_outs, memo));
        if (!cond) return nullptr;
        const int truth = PyObject_IsTrue(cond.get());
        if (truth < 0) return nullptr;
        BranchTargets& targets = *step.branch;
        const std::shared_ptr<Plan> next = targets.next[truth];
        if (!next) return trace_branch_outcome(targets, truth, run);
        std::vector<double> scalars;
        if (!eval_scalars(*next, run.b, &scalars)) {  // eager raises somewhere in this outcome
          DeoptState at = *step.deopt;
          at.offset = targets.offset[truth];
          return resume_in_cpython(at, run);
        }
        return run_steps(*next, run);
      }
    }
  }
  return run_tail(plan, run);
}

PyObject* resume_in_cpython(const DeoptState& state, PlanRun& run, bool raising) {
  compat::Frame* f = run.frame;
  if (f == nullptr) {
    if (!raising) PyErr_SetString(PyExc_RuntimeError, "framejit: cannot resume a frame in CPython here (internal error)");
    return nullptr;
  }
  PyCodeObject* co = compat::frame_code(f);
  const int n = co->co_nlocalsplus;
  if (state.locals.size() > static_cast<size_t>(n) || state.stack.size() > static_cast<size_t>(co->co_stacksize)) {
    if (!raising) PyErr_SetString(PyExc_RuntimeError, "framejit: a saved frame state does not fit its frame (internal error)");
    return nullptr;
  }
  // The exception being raised is set aside while the frame is rebuilt (that runs
  // Python code), and set again for CPython to unwind.
  PyObject *exc_type = nullptr, *exc_value = nullptr, *exc_tb = nullptr;
  if (raising) PyErr_Fetch(&exc_type, &exc_value, &exc_tb);
  std::vector<PyObject*> memo(static_cast<size_t>(state.num_memos), nullptr);
  const std::vector<PyRef> no_outs;
  std::vector<PyObject*> locals(static_cast<size_t>(n), nullptr);
  std::vector<PyObject*> stack;
  auto release = [&] {
    for (PyObject* o : locals) Py_XDECREF(o);
    for (PyObject* o : stack) Py_XDECREF(o);
    Py_XDECREF(exc_type);
    Py_XDECREF(exc_value);
    Py_XDECREF(exc_tb);
    return nullptr;
  };
  // Everything is built before the frame changes: arguments are read from it.
  for (size_t i = 0; i < state.locals.size(); ++i) {
    if (state.locals[i].kind == PlanValue::Kind::Null) continue;
    locals[i] = build_value(state.locals[i], run, no_outs, memo);
    if (locals[i] == nullptr) return release();
  }
  // Cell variables hold cells (MAKE_CELL has run by now): new ones, since no closure
  // the traced part made can outlive it (Tracer::can_resume).
  for (int i = 0; i < n - co->co_nfreevars; ++i) {
    if (!compat::is_cell_var(co, i)) continue;
    PyObject* cell = PyCell_New(locals[static_cast<size_t>(i)]);
    if (cell == nullptr) return release();
    Py_XSETREF(locals[static_cast<size_t>(i)], cell);
  }
  // Free variables hold the closure's cells (COPY_FREE_VARS has run by now).
  PyObject* closure = compat::frame_func(f)->func_closure;
  for (int k = 0; k < co->co_nfreevars; ++k) {
    PyObject*& slot = locals[static_cast<size_t>(n - co->co_nfreevars + k)];
    Py_XDECREF(slot);
    slot = closure ? Py_NewRef(PyTuple_GET_ITEM(closure, k)) : nullptr;
  }
  for (const PlanValue& v : state.stack) {
    stack.push_back(v.kind == PlanValue::Kind::Null ? nullptr : build_value(v, run, no_outs, memo));
    if (v.kind != PlanValue::Kind::Null && stack.back() == nullptr) return release();
  }
  if (run.st != nullptr && !raising && !state.raise_exit) run.st->counters.deopts++;
  if (log::enabled(log::Channel::GraphBreaks) || log::enabled(log::Channel::Recompiles)) {
    log::interp().info("{}: resuming {} in CPython at offset {}: {}", raising ? "exception" : state.raise_exit ? "raise" : "deopt",
                       guards::utf8_lossy(co->co_qualname), state.offset, state.reason);
  }
  for (int i = 0; i < n; ++i) Py_XSETREF(f->localsplus[i], locals[static_cast<size_t>(i)]);
  for (size_t j = 0; j < stack.size(); ++j) f->localsplus[n + static_cast<int>(j)] = stack[j];
  f->stacktop = n + static_cast<int>(stack.size());
  PyThreadState* ts = PyThreadState_Get();
  compat::unlink_frame(ts, f);  // CPython's evaluator links it itself
  if (raising) {
    // CPython unwinds from the instruction at prev_instr, as for generator.throw():
    // to the frame's handler for it, which sees the exception as eager's would.
    f->prev_instr = _PyCode_CODE(co) + state.offset / 2;
    PyErr_Restore(exc_type, exc_value, exc_tb);
    return compat::eval_default(ts, f, 1);
  }
  // CPython continues after prev_instr, as when it resumes a generator.
  f->prev_instr = _PyCode_CODE(co) + state.offset / 2 - 1;
  return compat::eval_default(ts, f, 0);
}

}  // namespace fj::interp
