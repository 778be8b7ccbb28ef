// A census of the JIT resources that framejit holds: compiled graphs (each owns its
// machine code under one LLVM ResourceTracker) and cache entries (guards + plan).
// Weak references only, so counting never keeps anything alive; framejit._C exposes
// the counts so that tests can see reset() and dead code objects free them.
#pragma once

#include <cstddef>
#include <memory>

namespace fj::jit {
class CompiledGraph;
}

namespace fj::interp {

struct CacheEntry;

// Records a graph / entry just made; thread-safe (compiles may run without the GIL).
void track_graph(const std::shared_ptr<jit::CompiledGraph>& graph);
void track_entry(const std::shared_ptr<CacheEntry>& entry);

struct LiveResources {
  size_t graphs = 0;   // compiled graphs not yet freed (= live JIT resource trackers)
  size_t entries = 0;  // cache entries not yet freed (cached or still running)
  // Since the process started: compiles answered with code of an equal live graph
  // (jit::CpuBackend's structural cache) instead of new machine code.
  size_t graphs_reused = 0;
};
// Counts what is still alive, dropping the records of what was freed.
LiveResources live_resources();

}  // namespace fj::interp
