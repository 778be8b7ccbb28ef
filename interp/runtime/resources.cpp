// The census of live compiled graphs and cache entries (interp/runtime/resources.h).
#include "interp/runtime/resources.h"

#include <algorithm>
#include <mutex>
#include <vector>

#include "interp/code_state.h"
#include "jit/cpu/cpu_backend.h"
#include "jit/fork.h"

namespace fj::interp {
namespace {

jit::ForkSafeMutex& g_mu = *new jit::ForkSafeMutex();  // never destroyed
std::vector<std::weak_ptr<jit::CompiledGraph>> g_graphs;
std::vector<std::weak_ptr<CacheEntry>> g_entries;
size_t g_graphs_reused = 0;

// Drops expired records once the list has doubled since the last sweep, so that
// tracking stays amortized O(1) however many compiles a process makes.
template <class T>
void add(std::vector<std::weak_ptr<T>>& list, const std::shared_ptr<T>& p, size_t* high_water) {
  if (list.size() >= *high_water) {
    std::erase_if(list, [](const std::weak_ptr<T>& w) { return w.expired(); });
    *high_water = std::max<size_t>(64, 2 * list.size());
  }
  list.push_back(p);
}

template <class T>
size_t count_live(std::vector<std::weak_ptr<T>>& list) {
  std::erase_if(list, [](const std::weak_ptr<T>& w) { return w.expired(); });
  return list.size();
}

}  // namespace

void track_graph(const std::shared_ptr<jit::CompiledGraph>& graph) {
  static size_t high_water = 64;
  if (!graph) return;
  std::lock_guard<jit::ForkSafeMutex> lock(g_mu);
  // The backend returns the same code for equal graphs: count it once.
  for (const std::weak_ptr<jit::CompiledGraph>& w : g_graphs) {
    if (!w.owner_before(graph) && !graph.owner_before(w)) {
      g_graphs_reused++;
      return;
    }
  }
  add(g_graphs, graph, &high_water);
}

void track_entry(const std::shared_ptr<CacheEntry>& entry) {
  static size_t high_water = 64;
  if (!entry) return;
  std::lock_guard<jit::ForkSafeMutex> lock(g_mu);
  add(g_entries, entry, &high_water);
}

LiveResources live_resources() {
  std::lock_guard<jit::ForkSafeMutex> lock(g_mu);
  return LiveResources{count_live(g_graphs), count_live(g_entries), g_graphs_reused};
}

}  // namespace fj::interp
