// The PEP 523 hook, the per-code state in the code objects' extra slot, the
// CompiledFunction wrapper type, and the cache lookup that decides between a
// cache hit, a trace, and running the frame in CPython.
#include "interp/hook.h"

#include <structmember.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <unordered_set>

#include "interp/trace/interpreter.h"
#include "interp/runtime/resources.h"
#include "jit/fork.h"
#include "jit/log.h"

namespace fj::interp {
namespace {

Py_ssize_t g_extra_index = -1;
compat::EvalFn g_previous_eval = nullptr;  // the evaluator ours replaced
thread_local PyCodeObject* t_armed = nullptr;    // the code whose next frame is ours
thread_local Recorder* t_recorder = nullptr;     // explain(): record a forced trace
long g_direct_watched = 0;  // code objects watched without a wrapper (framejit.hook)
long g_nested_watched = 0;  // code objects watched inside framejit's frames (watch_nested)
thread_local int t_run_depth = 0;  // frames framejit runs on this thread, nested

// Every live CodeState, and the counters of those whose code objects died.
std::unordered_set<CodeState*>& live_states() {
  static auto* s = new std::unordered_set<CodeState*>();
  return *s;
}
Counters g_dropped;

void free_code_state(void* p) {
  // CPython 3.11's code_dealloc calls every registered freefunc, also for empty
  // slots: a code object whose co_extra another user (torch's Dynamo) allocated
  // reaches here with NULL in our slot.
  if (p == nullptr) return;
  auto* st = static_cast<CodeState*>(p);
  if (st->direct) --g_direct_watched;
  if (st->nested) --g_nested_watched;
  g_dropped.add(st->counters);
  live_states().erase(st);
  delete st;
}

PyObject* eval_previous(PyThreadState* ts, compat::Frame* f, int throwflag) {
  if (g_previous_eval != nullptr) return g_previous_eval(ts, f, throwflag);
  return compat::eval_default(ts, f, throwflag);
}

std::string location_of(PyCodeObject* code) {
  return guards::utf8_lossy(code->co_filename) + ":" + std::to_string(code->co_firstlineno);
}

// The give-up counters: calls like some run in CPython untraced, with (stopped
// compiling) or without (skipped) entries that other calls still use.
void set_give_up_counters(CodeState& st) {
  const bool gave_up = st.skip || st.frozen || !st.given_up.empty();
  st.counters.skipped = gave_up && st.entries.empty();
  st.counters.stopped_compiling = gave_up && !st.entries.empty();
}

// The same fallback again and again: stop tracing calls with this signature (0: every
// call). What the code compiled stays in use (calls that match an entry still hit it).
void give_up(CodeState& st, uint64_t signature) {
  // A frame watched for a caller's break (watch_nested) gives up whole: its calls then
  // cost nothing (eval_hook's skip), however many a recursion makes.
  if (signature != 0 && !st.nested && static_cast<int>(st.given_up.size()) + 1 < config().cache_limit) {
    st.given_up.push_back(signature);
  } else if (st.entries.empty()) {
    st.skip = true;
  } else {
    st.frozen = true;
  }
  set_give_up_counters(st);
  if (log::enabled(log::Channel::GraphBreaks) || log::enabled(log::Channel::Recompiles)) {
    log::interp().info("giving up on {}: {}", guards::utf8_lossy(st.code->co_qualname),
                       st.skip     ? "every call runs in CPython"
                       : st.frozen ? "no new entries; cached ones stay in use"
                                   : "calls with these argument types run in CPython");
  }
}

void record_fallback(CodeState& st, Fallback fb, uint64_t signature = 0) {
  // A frame watched only because a caller's trace broke inside it (watch_nested): its
  // running in CPython is that caller's graph break, counted there already.
  if (!st.nested) st.counters.fallbacks++;
  if (log::enabled(log::Channel::GraphBreaks)) {
    log::interp().info("fallback in {}: {} ({})", guards::utf8_lossy(st.code->co_qualname), fb.reason,
                       fb.location);
  }
  if (t_recorder != nullptr) t_recorder->breaks.push_back(fb);
  // The same fallback again and again for calls alike (pure-Python code, an
  // unsupported construct on every path): stop trying them. Fallbacks that vary with
  // the input do not count.
  const bool same = !st.fallbacks.empty() && st.fallbacks.back().reason == fb.reason &&
                    st.fallbacks.back().location == fb.location && st.last_signature == signature;
  st.fallbacks_in_a_row = same ? st.fallbacks_in_a_row + 1 : 1;
  st.last_signature = signature;
  if (st.fallbacks_in_a_row >= config().fallback_limit && t_recorder == nullptr) give_up(st, signature);
  st.fallbacks.push_back(std::move(fb));
  if (st.fallbacks.size() > 16) st.fallbacks.erase(st.fallbacks.begin());
}

// What calls alike share for give_up: the arguments' types, and each tensor's dtype,
// device kind and grad flag. Never 0 (0 stands for every call).
uint64_t call_signature(const guards::CallInputs& in) {
  uint64_t h = 0x9e3779b97f4a7c15ULL;
  auto mix = [&h](uint64_t v) { h = (h ^ v) * 0x100000001b3ULL + (h >> 29); };
  for (int i = 0; i < in.num_args; ++i) {
    PyObject* a = in.args[i];
    mix(reinterpret_cast<uintptr_t>(a == nullptr ? nullptr : Py_TYPE(a)));
    if (const auto& m = in.metas[static_cast<size_t>(i)]) {
      mix(reinterpret_cast<uintptr_t>(m->dtype) ^ (m->requires_grad ? 1 : 0) ^ (m->is_cpu ? 2 : 0));
    }
  }
  return h == 0 ? 1 : h;
}

// One trace per code object at a time. A thread that misses the cache while another
// thread traces the same code waits (GIL released, since the tracer releases it to
// compile) and then looks in the cache again, so threads racing to the same miss
// make one entry, not one each. CodeState::tracing_thread is written under both the
// GIL and g_trace_mu; waiters read it under g_trace_mu only.
jit::ForkSafeMutex& g_trace_mu = *new jit::ForkSafeMutex();   // never destroyed
auto* g_trace_cv = new std::condition_variable_any();           // remade in a fork child

bool traced_by_another_thread(const CodeState& st) {
  std::lock_guard<jit::ForkSafeMutex> lock(g_trace_mu);
  return st.tracing_thread != 0 && st.tracing_thread != PyThread_get_thread_ident();
}

// In a fork child: the threads that were tracing are gone, and so are the waiters of
// g_trace_cv (whose record in the old condition variable would block a notify).
// Their marks are cleared, so that the child traces those codes itself.
void forget_other_threads_traces() {
  g_trace_cv = new std::condition_variable_any();  // the old one is leaked
  const unsigned long self = PyThread_get_thread_ident();
  for (CodeState* st : live_states()) {
    if (st->tracing_thread != self) st->tracing_thread = 0;
  }
}
const bool g_fork_registered = (jit::on_fork_child(forget_other_threads_traces), true);

// Waits until no other thread traces `st`'s code. False with a Python error when a
// signal handler raised meanwhile (Ctrl-C while the main thread waits).
bool wait_for_other_trace(const CodeState& st) {
  for (;;) {
    bool done;
    Py_BEGIN_ALLOW_THREADS
    {  // the lock goes before the GIL comes back: the tracer takes them the other way round
      std::unique_lock<jit::ForkSafeMutex> lock(g_trace_mu);
      done = g_trace_cv->wait_for(lock, std::chrono::milliseconds(20), [&] { return st.tracing_thread == 0; });
    }
    Py_END_ALLOW_THREADS
    if (done) return true;
    if (PyErr_CheckSignals() < 0) return false;
  }
}

// Marks `st` as traced by this thread for its lifetime (nested traces of the same
// code on the same thread keep the outer mark), then wakes the waiters.
class TracingMark {
 public:
  explicit TracingMark(CodeState& st) : st_(st) {
    std::lock_guard<jit::ForkSafeMutex> lock(g_trace_mu);
    outer_ = std::exchange(st_.tracing_thread, PyThread_get_thread_ident());
  }
  ~TracingMark() {
    {
      std::lock_guard<jit::ForkSafeMutex> lock(g_trace_mu);
      st_.tracing_thread = outer_;
    }
    g_trace_cv->notify_all();
  }
  TracingMark(const TracingMark&) = delete;
  TracingMark& operator=(const TracingMark&) = delete;

 private:
  CodeState& st_;
  unsigned long outer_;
};

// Reads the frame's arguments into CallInputs.
void gather_inputs(compat::Frame* f, guards::CallInputs* in) {
  PyCodeObject* code = compat::frame_code(f);
  in->args = &f->localsplus[0];
  // *args and **kwargs follow the named parameters (filled in before the frame runs).
  in->num_args = code->co_argcount + code->co_kwonlyargcount + ((code->co_flags & CO_VARARGS) ? 1 : 0) +
                 ((code->co_flags & CO_VARKEYWORDS) ? 1 : 0);
  in->globals = compat::frame_globals(f);
  in->builtins = compat::frame_builtins(f);
  in->closure = compat::frame_func(f)->func_closure;
  in->metas.resize(static_cast<size_t>(in->num_args));
  PyObject* tensor_type = guards::torch_refs().tensor_type;
  for (int i = 0; i < in->num_args; ++i) {
    PyObject* a = in->args[i];
    if (a != nullptr && Py_TYPE(a) == reinterpret_cast<PyTypeObject*>(tensor_type)) {
      guards::TensorMeta m;
      if (guards::read_tensor_meta(a, &m, nullptr)) in->metas[static_cast<size_t>(i)] = m;
    } else if (guards::TensorMeta m; a != nullptr && guards::read_ndarray_meta(a, &m)) {
      in->metas[static_cast<size_t>(i)] = m;  // a NumPy array: read as the tensor of its memory
    }
  }
}

// The frame run by CPython from its start: off the frame chain (CPython's evaluator
// links it itself) and back in its entry state.
PyObject* run_in_cpython(PyThreadState* ts, compat::Frame* f, int throwflag) {
  compat::unlink_frame(ts, f);
  compat::reset_to_entry(f);
  return compat::eval_default(ts, f, throwflag);
}

// A plan's result, or the frame run by CPython when the plan gave it back.
PyObject* or_eager(PyObject* result, PyThreadState* ts, compat::Frame* f, int throwflag) {
  if (result != nullptr || PyErr_Occurred()) return result;
  if (guards::restore_kept_error()) return nullptr;  // interrupted: not redone in CPython
  return run_in_cpython(ts, f, throwflag);
}

// The frame of a compiled function's call: cache hit, trace, or CPython. Follows
// CPython's evaluator convention: the frame's result, or nullptr with a Python error.
PyObject* run_frame(CodeState& st, PyThreadState* ts, compat::Frame* f, int throwflag) {
  PyCodeObject* code = compat::frame_code(f);
  if (code->co_flags & (CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR)) {
    record_fallback(st, {"generator or coroutine code", location_of(code)});
    return run_in_cpython(ts, f, throwflag);
  }
  st.counters.calls++;
  guards::CallInputs in;
  gather_inputs(f, &in);

  // Per call, not per thread: running a plan calls into torch, which may re-enter.
  jit::Bindings bindings;
  std::vector<double> scalars;
  while (t_recorder == nullptr) {
    for (size_t i = 0; i < st.entries.size(); ++i) {
      // Held while checked and run: a guard or torch may release the GIL, and another
      // thread may then run framejit.reset() or add an entry.
      const std::shared_ptr<CacheEntry> entry = st.entries[i];
      if (entry->guards.check(in, &bindings) && eval_scalars(entry->plan, bindings, &scalars) &&
          data_checks_hold(entry->plan, in, bindings)) {
        st.counters.cache_hits++;
        return or_eager(run_plan(entry->plan, in, bindings, scalars, &st, f), ts, f, throwflag);
      }
    }
    if (guards::restore_kept_error()) return nullptr;  // a guard met a KeyboardInterrupt & co
    if (st.frozen || (!st.given_up.empty() && std::find(st.given_up.begin(), st.given_up.end(),
                                                         call_signature(in)) != st.given_up.end())) {
      // gave up tracing this code, or calls like this one: a miss runs in CPython as it is
      if (!st.entries.empty()) st.counters.fallbacks++;
      return run_in_cpython(ts, f, throwflag);
    }
    if (traced_by_another_thread(st)) {  // its entry may be the one this call needs
      if (!wait_for_other_trace(st)) return nullptr;
      if (st.skip) return run_in_cpython(ts, f, throwflag);
      continue;
    }
    if (static_cast<int>(st.entries.size()) >= config().cache_limit) {
      record_fallback(st, {"cache_limit (" + std::to_string(config().cache_limit) +
                           ") reached; raise framejit.config.cache_limit", location_of(code)});
      if (!st.warned_cache_limit) {
        st.warned_cache_limit = true;
        if (PyErr_WarnFormat(PyExc_RuntimeWarning, 1,
                             "framejit: %U (%s) reached framejit.config.cache_limit (%d entries); calls "
                             "that match none of them run in CPython",
                             code->co_qualname, location_of(code).c_str(), config().cache_limit) < 0) {
          return nullptr;  // warnings configured as errors
        }
      }
      return run_in_cpython(ts, f, throwflag);
    }
    break;
  }
  // From here until the new entry is in st.entries (or the fallback is recorded),
  // other threads that miss wait. explain()'s traces are not cached: nobody waits.
  std::optional<TracingMark> tracing;
  if (t_recorder == nullptr) tracing.emplace(st);
  std::string recompile_reason;
  if (!st.entries.empty() && t_recorder == nullptr) {
    const CacheEntry& first = *st.entries.front();
    jit::Bindings b;
    recompile_reason = first.guards.check_verbose(in).value_or(
        first.guards.check(in, &b) && eval_scalars(first.plan, b, &scalars)
            ? "a tensor's value that a branch of the traced code read differs (data check)"
            : "a scalar expression of the plan has no value for these arguments");
    if (log::enabled(log::Channel::Guards) || log::enabled(log::Channel::Recompiles)) {
      log::guards().info("recompiling {} ({}): {}", guards::utf8_lossy(code->co_qualname), location_of(code),
                         recompile_reason);
    }
  }

  Fallback why;
  const auto started = std::chrono::steady_clock::now();
  TraceOutcome ran;  // a plan with steps runs while it is traced
  std::unique_ptr<CacheEntry> entry = trace_frame(st, f, in, &why, &ran);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  st.compile_seconds += seconds;
  if (log::enabled(log::Channel::Perf)) {
    log::interp().info("perf: {} ({}): trace and compile {:.1f} ms{}", guards::utf8_lossy(code->co_qualname),
                       location_of(code), seconds * 1e3, entry ? "" : " (fell back)");
  }
  if (ran.ran && !entry) return ran.result;
  if (!entry) {
    if (guards::error_must_propagate()) return nullptr;  // KeyboardInterrupt & co (Tracer::run)
    PyErr_Clear();
    if (st.fullgraph && t_recorder == nullptr) {
      PyErr_Format(graph_break_error(), "framejit.compile(fullgraph=True): cannot compile %U: %s (%s)",
                   code->co_qualname, why.reason.c_str(), why.location.c_str());
      st.counters.graph_breaks++;
      return nullptr;
    }
    record_fallback(st, std::move(why), call_signature(in));
    tracing.reset();
    return run_in_cpython(ts, f, throwflag);
  }
  st.fallbacks_in_a_row = 0;
  // A frame watched for a caller's break (watch_nested) whose trace compiled no graph
  // is Python's work (a wrapper, a check): CPython runs it from now on, untraced.
  if (st.nested && !entry->plan.graph && entry->segment_texts.empty() && t_recorder == nullptr) {
    st.skip = true;
    st.counters.skipped = 1;
    tracing.reset();
    return ran.ran ? ran.result : run_in_cpython(ts, f, throwflag);
  }
  // The trace's own guards bind this call's symbols (they hold: the trace saw it).
  if (!ran.ran && (!entry->guards.check(in, &bindings) || !eval_scalars(entry->plan, bindings, &scalars))) {
    FJ_DEBUG_CHECK(false, "a fresh trace's guards fail on the call that made it");
    record_fallback(st, {"internal error: a fresh trace does not match its own call", location_of(code)});
    tracing.reset();
    return run_in_cpython(ts, f, throwflag);
  }
  if (t_recorder != nullptr) {
    t_recorder->graphs.insert(t_recorder->graphs.end(), entry->segment_texts.begin(), entry->segment_texts.end());
    if (!entry->graph_text.empty()) t_recorder->graphs.push_back(entry->graph_text);
    if (!entry->backward_text.empty()) t_recorder->graphs.push_back(entry->backward_text);
    if (entry->graph) t_recorder->jit_graphs.push_back(entry->graph);
    t_recorder->ops.insert(t_recorder->ops.end(), entry->ops.begin(), entry->ops.end());
    t_recorder->guards = entry->guards.describe();
    t_recorder->breaks.insert(t_recorder->breaks.end(), entry->breaks.begin(), entry->breaks.end());
    return ran.ran ? ran.result : or_eager(run_plan(entry->plan, in, bindings, scalars, &st, f), ts, f, throwflag);
  }
  st.counters.compiles++;
  if (!st.entries.empty()) {
    st.counters.recompiles++;
    st.recompile_reasons.push_back(recompile_reason);
    if (st.recompile_reasons.size() > 16) st.recompile_reasons.erase(st.recompile_reasons.begin());
  }
  if (entry->plan.graph) st.counters.graphs++;
  const std::shared_ptr<CacheEntry> shared = std::move(entry);
  track_entry(shared);
  st.entries.push_back(shared);
  set_give_up_counters(st);
  tracing.reset();
  return ran.ran ? ran.result : or_eager(run_plan(shared->plan, in, bindings, scalars, &st, f), ts, f, throwflag);
}

PyObject* eval_hook(PyThreadState* ts, compat::Frame* f, int throwflag) {
  PyCodeObject* code = compat::frame_code(f);
  void* extra = compat::code_extra(code, g_extra_index);  // the one check for unwatched code
  if (extra == nullptr) return eval_previous(ts, f, throwflag);
  auto* st = static_cast<CodeState*>(extra);
  const bool armed = code == t_armed;
  if (armed) {
    t_armed = nullptr;
    // The hook has done its job: unless some code is watched directly (framejit.hook)
    // or inside framejit's frames (watch_nested), the frames this one calls get
    // CPython's own evaluator back, with its inlined Python-to-Python calls.
    if (g_direct_watched == 0 && g_nested_watched == 0) {
      compat::set_eval_frame(g_previous_eval ? g_previous_eval : _PyEval_EvalFrameDefault);
    }
  } else if (!(st->direct || (st->nested && t_run_depth > 0)) || st->skip) {
    return eval_previous(ts, f, throwflag);
  }
  if (throwflag || (code->co_flags & (CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR) && !armed)) {
    return compat::eval_default(ts, f, throwflag);  // resumed generators included
  }
  // Under sys.settrace / sys.setprofile (pdb, coverage.py) the frame runs in CPython,
  // whose events the trace function expects: not a fallback, nothing is recorded.
  if (compat::tracing_active(ts)) return compat::eval_default(ts, f, throwflag);
  // explain() records the frame it armed, not the watched frames (framejit.hook) that
  // this frame calls: those trace and cache as they always do.
  Recorder* recorder = armed ? t_recorder : std::exchange(t_recorder, nullptr);
  // While framejit runs the frame it is the thread's current one, as in CPython: the
  // code it calls sees it as the caller, and an error leaving it gets its traceback
  // entry (at the instruction that raised) unless CPython ran the frame and added it.
  compat::link_frame(ts, f);
  ++t_run_depth;
  PyObject* result = run_frame(*st, ts, f, throwflag);
  --t_run_depth;
  t_recorder = recorder;
  // A KeyboardInterrupt, SystemExit or MemoryError that framejit's own code met (and
  // set aside, guards/py_errors.h) reaches the caller, even where the frame finished.
  if (guards::error_kept()) {
    Py_XDECREF(result);
    result = nullptr;
    guards::restore_kept_error();
  }
  if (result == nullptr) compat::add_traceback_entry(ts, f);
  compat::unlink_frame(ts, f);
  return result;
}

// Runs `call` with the hook installed and `code`'s next frame armed. The hook is
// installed only from here to that frame's entry (where it removes itself), so code
// that framejit does not watch never pays for it.
template <class Call>
PyObject* call_armed(PyCodeObject* code, Call&& call) {
  const compat::EvalFn before = compat::get_eval_frame();
  if (before != eval_hook) {
    g_previous_eval = before == _PyEval_EvalFrameDefault ? nullptr : before;
    compat::set_eval_frame(eval_hook);
  }
  PyCodeObject* outer = std::exchange(t_armed, code);
  PyObject* result = call();
  t_armed = outer;
  if (before != eval_hook) compat::set_eval_frame(before);
  return result;
}

// ---- CompiledFunction ----

struct CompiledFunction {
  PyObject_HEAD
  PyObject* fn;        // the wrapped Python function
  PyObject* code;      // strong: the code object whose extra slot owns `state`
  CodeState* state;    // owned by `code`
  PyObject* dict;      // __dict__, filled by functools.update_wrapper
  PyObject* weaklist;
  vectorcallfunc vectorcall;
};

PyObject* cf_vectorcall(PyObject* self, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  auto* cf = reinterpret_cast<CompiledFunction*>(self);
  PyObject* code = PyFunction_GET_CODE(cf->fn);
  if (code != cf->code) {  // fn.__code__ was replaced: watch the new code instead
    CodeState* st = code_state(reinterpret_cast<PyCodeObject*>(code), true);
    if (st == nullptr) return nullptr;
    st->dynamic = cf->state->dynamic;
    st->fullgraph = cf->state->fullgraph;
    Py_SETREF(cf->code, Py_NewRef(code));
    cf->state = st;
  }
  if (cf->state->skip) return PyObject_Vectorcall(cf->fn, args, nargsf, kwnames);
  return call_armed(cf->state->code, [&] { return PyObject_Vectorcall(cf->fn, args, nargsf, kwnames); });
}

void cf_dealloc(PyObject* self) {
  auto* cf = reinterpret_cast<CompiledFunction*>(self);
  PyObject_GC_UnTrack(self);
  if (cf->weaklist) PyObject_ClearWeakRefs(self);
  Py_CLEAR(cf->fn);
  Py_CLEAR(cf->code);
  Py_CLEAR(cf->dict);
  PyTypeObject* type = Py_TYPE(self);
  type->tp_free(self);
  Py_DECREF(type);  // instances of heap types own a reference to their type
}

int cf_traverse(PyObject* self, visitproc visit, void* arg) {
  auto* cf = reinterpret_cast<CompiledFunction*>(self);
  Py_VISIT(cf->fn);
  Py_VISIT(cf->code);
  Py_VISIT(cf->dict);
  return 0;
}

int cf_clear(PyObject* self) {
  auto* cf = reinterpret_cast<CompiledFunction*>(self);
  Py_CLEAR(cf->fn);
  Py_CLEAR(cf->code);
  Py_CLEAR(cf->dict);
  return 0;
}

PyObject* cf_descr_get(PyObject* self, PyObject* obj, PyObject*) {
  if (obj == nullptr || obj == Py_None) return Py_NewRef(self);
  return PyMethod_New(self, obj);
}

PyObject* cf_repr(PyObject* self) {
  auto* cf = reinterpret_cast<CompiledFunction*>(self);
  return PyUnicode_FromFormat("<framejit compiled %R>", cf->fn);
}

PyMemberDef cf_members[] = {
    {"__dictoffset__", T_PYSSIZET, offsetof(CompiledFunction, dict), READONLY, nullptr},
    {"__weaklistoffset__", T_PYSSIZET, offsetof(CompiledFunction, weaklist), READONLY, nullptr},
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(CompiledFunction, vectorcall), READONLY, nullptr},
    {nullptr, 0, 0, 0, nullptr},
};

PyGetSetDef cf_getset[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, nullptr, nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr},
};

PyType_Slot cf_slots[] = {
    {Py_tp_dealloc, reinterpret_cast<void*>(cf_dealloc)},
    {Py_tp_traverse, reinterpret_cast<void*>(cf_traverse)},
    {Py_tp_clear, reinterpret_cast<void*>(cf_clear)},
    {Py_tp_descr_get, reinterpret_cast<void*>(cf_descr_get)},
    {Py_tp_call, reinterpret_cast<void*>(PyVectorcall_Call)},
    {Py_tp_repr, reinterpret_cast<void*>(cf_repr)},
    {Py_tp_members, cf_members},
    {Py_tp_getset, cf_getset},
    {0, nullptr},
};

PyType_Spec cf_spec = {
    "framejit._C.CompiledFunction",
    sizeof(CompiledFunction),
    0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_METHOD_DESCRIPTOR,
    cf_slots,
};

PyTypeObject* g_cf_type = nullptr;

}  // namespace

Config& config() {
  static Config c;
  return c;
}

CodeState* code_state(PyCodeObject* code, bool create) {
  void* extra = compat::code_extra(code, g_extra_index);
  if (extra != nullptr || !create) return static_cast<CodeState*>(extra);
  auto* st = new CodeState();
  st->code = code;
  if (compat::set_code_extra(code, g_extra_index, st) < 0) {
    delete st;
    return nullptr;
  }
  live_states().insert(st);
  return st;
}

Counters global_counters() {
  Counters c = g_dropped;
  for (CodeState* st : live_states()) c.add(st->counters);
  return c;
}

void reset_all() {
  g_dropped = Counters{};
  for (CodeState* st : live_states()) {
    st->entries.clear();
    st->counters = Counters{};
    st->fallbacks.clear();
    st->fallbacks_in_a_row = 0;
    st->skip = false;
    st->frozen = false;
    st->given_up.clear();
    st->warned_cache_limit = false;
    st->recompile_reasons.clear();
    st->compile_seconds = 0;
  }
}

bool init_hook(PyObject* module) {
  g_extra_index = compat::request_code_extra_index(free_code_state);
  if (g_extra_index < 0) return false;
  g_cf_type = reinterpret_cast<PyTypeObject*>(PyType_FromSpec(&cf_spec));
  if (g_cf_type == nullptr) return false;
  if (graph_break_error() == nullptr) return false;
  init_builtin_calls();
  install_stop_poll();
  return PyModule_AddObjectRef(module, "CompiledFunction", reinterpret_cast<PyObject*>(g_cf_type)) == 0 &&
         PyModule_AddObjectRef(module, "GraphBreakError", graph_break_error()) == 0;
}

PyObject* graph_break_error() {
  static PyObject* type = PyErr_NewExceptionWithDoc(
      "framejit.GraphBreakError",
      "framejit.compile(fullgraph=True) met code it cannot compile; the message names the reason and line.",
      PyExc_RuntimeError, nullptr);
  return type;
}

PyObject* make_compiled_function(PyObject* fn, bool dynamic, bool fullgraph) {
  if (!PyFunction_Check(fn)) {
    PyErr_Format(PyExc_TypeError, "framejit.compile expects a Python function, got %.200s",
                 Py_TYPE(fn)->tp_name);
    return nullptr;
  }
  auto* code = reinterpret_cast<PyCodeObject*>(PyFunction_GET_CODE(fn));
  CodeState* st = code_state(code, true);
  if (st == nullptr) return nullptr;
  st->dynamic = dynamic;
  st->fullgraph = fullgraph;
  st->wrapped = true;
  if (st->nested) {  // compiled by the user now: its calls are theirs
    st->nested = false;
    --g_nested_watched;
  }
  auto* cf = PyObject_GC_New(CompiledFunction, g_cf_type);
  if (cf == nullptr) return nullptr;
  cf->fn = Py_NewRef(fn);
  cf->code = Py_NewRef(reinterpret_cast<PyObject*>(code));
  cf->state = st;
  cf->dict = nullptr;
  cf->weaklist = nullptr;
  cf->vectorcall = cf_vectorcall;
  PyObject_GC_Track(cf);
  return reinterpret_cast<PyObject*>(cf);
}

PyObject* call_recorded(PyObject* fn, PyObject* args, PyObject* kwargs, Recorder* rec) {
  if (g_cf_type != nullptr && Py_IS_TYPE(fn, g_cf_type)) fn = reinterpret_cast<CompiledFunction*>(fn)->fn;
  if (!PyFunction_Check(fn)) {
    PyErr_Format(PyExc_TypeError, "framejit.explain expects a function, got %.200s", Py_TYPE(fn)->tp_name);
    return nullptr;
  }
  auto* code = reinterpret_cast<PyCodeObject*>(PyFunction_GET_CODE(fn));
  if (code_state(code, true) == nullptr) return nullptr;
  Recorder* outer = std::exchange(t_recorder, rec);
  PyObject* result = call_armed(code, [&] { return PyObject_Call(fn, args, kwargs); });
  t_recorder = outer;
  return result;
}

PyObject* compiled_function_target(PyObject* obj) {
  if (g_cf_type == nullptr || !Py_IS_TYPE(obj, g_cf_type)) return nullptr;
  return reinterpret_cast<CompiledFunction*>(obj)->fn;
}

bool watch_code(PyCodeObject* code, bool on) {
  CodeState* st = code_state(code, on);
  if (st == nullptr) return !on;
  if (st->direct == on) return true;
  st->direct = on;
  g_direct_watched += on ? 1 : -1;
  if (on && compat::get_eval_frame() != eval_hook) set_hook_installed(true);
  if (!on && g_direct_watched == 0) set_hook_installed(false);
  return true;
}

void watch_nested(PyCodeObject* code, const CodeState& caller) {
  // Code whose calls framejit runs already (a compiled or watched function's, the
  // caller's own) keeps its state; a generator's frames resume in CPython.
  if (code->co_flags & (CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR)) return;
  CodeState* st = code_state(code, true);  // an inlined function's may hold its decoded bytecode
  if (st == nullptr) {
    PyErr_Clear();
    return;
  }
  if (st == &caller || st->nested || st->direct || st->wrapped || st->counters.calls > 0) return;
  st->dynamic = caller.dynamic;
  st->fullgraph = caller.fullgraph;
  st->nested = true;
  ++g_nested_watched;
  set_hook_installed(true);  // for this call's plan too; call_armed restores the evaluator
}

std::vector<CodeState*> watched_states() {
  std::vector<CodeState*> out;
  for (CodeState* st : live_states()) {
    if (st->counters.calls > 0 || st->direct || st->nested) out.push_back(st);
  }
  return out;
}

void set_hook_installed(bool on) {
  if (on && compat::get_eval_frame() != eval_hook) {
    const compat::EvalFn before = compat::get_eval_frame();
    g_previous_eval = before == _PyEval_EvalFrameDefault ? nullptr : before;
    compat::set_eval_frame(eval_hook);
  } else if (!on && compat::get_eval_frame() == eval_hook) {
    compat::set_eval_frame(g_previous_eval ? g_previous_eval : _PyEval_EvalFrameDefault);
  }
}

bool hook_installed() { return compat::get_eval_frame() == eval_hook; }

}  // namespace fj::interp
