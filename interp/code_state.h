// Per-code-object state kept in the code object's extra slot: the cache entries
// (guards + plan), counters, and the fallback record. Also the global counters,
// the config, and the explain() recorder.
#pragma once

#include "interp/compat.h"

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "guards/guards.h"
#include "guards/py_text.h"
#include "interp/runtime/plan.h"

namespace fj::interp {

struct Counters {
  long calls = 0;  // calls that reached framejit (cache lookups)
  long compiles = 0;
  long recompiles = 0;
  long cache_hits = 0;
  long graph_breaks = 0;
  long fallbacks = 0;
  long graphs = 0;
  // Run-time deopts: a plan handed the rest of its frame to CPython (an opaque call's
  // result or a guard read after it no longer matching the trace, a branch outcome or
  // a step that could not be traced, a size past int64 after a break).
  long deopts = 0;
  // Give-up states, 0 or 1 per code object (sums count code objects): compiling no new
  // entries (calls that match a cached one still run it; others run in CPython), and
  // skipped altogether (nothing ever compiled: every call runs in CPython).
  long stopped_compiling = 0;
  long skipped = 0;
  void add(const Counters& o) {
    calls += o.calls; compiles += o.compiles; recompiles += o.recompiles; cache_hits += o.cache_hits;
    graph_breaks += o.graph_breaks; fallbacks += o.fallbacks; graphs += o.graphs; deopts += o.deopts;
    stopped_compiling += o.stopped_compiling; skipped += o.skipped;
  }
};

// Why a frame ran in CPython: the reason and where (file:line).
struct Fallback {
  std::string reason;
  std::string location;
};

struct CacheEntry {
  guards::GuardSet guards;
  Plan plan;
  std::string graph_text;
  std::vector<std::string> ops;  // ATen names of the graph's compute nodes
  // The traced graph itself, for framejit.ptx (the CUDA code generator reads it).
  std::shared_ptr<const jit::Graph> graph;
  std::vector<std::string> segment_texts;  // graphs run before a break, in order
  std::string backward_text;               // the compiled backward of a joint plan, if any
  std::vector<Fallback> breaks;            // graph breaks of the plan (reason, file:line)
};

struct CodeState {
  PyCodeObject* code = nullptr;  // borrowed: this state lives in the code's extra slot
  std::vector<std::shared_ptr<CacheEntry>> entries;  // shared: a running plan keeps its entry alive
  Counters counters;
  std::vector<Fallback> fallbacks;  // most recent last, bounded
  int fallbacks_in_a_row = 0;       // identical fallbacks in a row (same reason, place and signature)
  // Giving up (record_fallback, interp/hook.cpp) is per call signature (the types of
  // the arguments, and of tensors their dtype and grad flag): calls like those that
  // fell back the same way again and again run in CPython untraced, others still
  // trace (a lambda called with ints, then with tensors). Past cache_limit, and past
  // cache_limit signatures given up, the code object as a whole stops tracing
  // (`frozen`) but keeps using its entries, and one without any is left to CPython for
  // good (`skip`).
  std::vector<uint64_t> given_up;   // signatures whose misses run in CPython untraced
  uint64_t last_signature = 0;      // of the last fallback
  bool skip = false;                // gave up: calls go straight to CPython
  bool frozen = false;              // no new entries: misses run in CPython untraced
  bool dynamic = true;              // tensor sizes are symbols (framejit.compile(dynamic=...))
  bool fullgraph = false;           // a frame that cannot be traced raises GraphBreakError
  bool warned_cache_limit = false;
  bool direct = false;              // watched without a wrapper: every call is framejit's
  bool nested = false;              // watched inside framejit's frames (watch_nested, hook.h)
  bool wrapped = false;             // framejit.compile made a wrapper of its function
  unsigned long tracing_thread = 0;  // the thread tracing this code now, 0 if none (hook.cpp)
  double compile_seconds = 0;       // time spent tracing and compiling
  std::vector<std::string> recompile_reasons;  // most recent last, bounded
  std::shared_ptr<const void> decoded;  // the decoded bytecode (interp/trace/bytecode.h), lazily
};

struct Config {
  int cache_limit = 8;     // entries per code object; past it, misses run in CPython
  int fallback_limit = 2;  // identical fallbacks in a row before a code object stops tracing
};
Config& config();

// What explain() collects from one forced trace.
struct Recorder {
  std::vector<std::string> graphs;
  std::vector<std::string> ops;
  std::vector<std::string> guards;
  std::vector<Fallback> breaks;
  std::vector<std::shared_ptr<const jit::Graph>> jit_graphs;  // framejit.ptx
};

// framejit.GraphBreakError, raised under fullgraph=True (created at module init).
PyObject* graph_break_error();

// The state of a watched code object, created on first use.
CodeState* code_state(PyCodeObject* code, bool create);
// Sums of all code objects' counters, including those already dropped.
Counters global_counters();
// Drops every cache entry and counter (framejit.reset()).
void reset_all();

}  // namespace fj::interp
