// schedule_graph: which values live in buffers, which kernel stores each, and the
// order of kernels and matmuls (see jit/codegen/schedule.h).
#include <algorithm>
#include <optional>
#include <set>

#include "jit/codegen/schedule.h"

namespace fj::jit {
namespace {

// A chain of views ending at a graph input: a matmul can read it in place when its
// strides can be computed at run time.
bool is_input_view(const Graph& g, NodeId id) {
  for (;;) {
    const Node& n = g.node(id);
    if (n.op == Op::Placeholder) return true;
    if (n.op != Op::Permute && n.op != Op::Reshape && n.op != Op::Expand && n.op != Op::Slice &&
        n.op != Op::Select) {
      return false;
    }
    id = n.inputs[0];
  }
}

// The node under a chain of permutes and reshapes, when that node is computed (not
// an input, not a view): a matmul reads such a view in place from the node's buffer
// (a transposed activation in a backward graph), instead of a kernel writing the
// view transposed. Only views that keep every element: materializing the node
// costs what the copy of the view would.
std::optional<NodeId> reshaped_computed_base(const Graph& g, NodeId id) {
  if (g.node(id).op != Op::Permute && g.node(id).op != Op::Reshape) return std::nullopt;
  while (g.node(id).op == Op::Permute || g.node(id).op == Op::Reshape) id = g.node(id).inputs[0];
  const Op op = g.node(id).op;
  if (op == Op::Placeholder || op_family(op) == Family::View || is_python_scalar(g.node(id))) return std::nullopt;
  return id;
}

bool has_reshape(const Graph& g, NodeId id) {
  for (; op_family(g.node(id).op) == Family::View && !g.node(id).inputs.empty(); id = g.node(id).inputs[0]) {
    if (g.node(id).op == Op::Reshape) return true;
  }
  return false;
}

}  // namespace

Schedule schedule_graph(const Graph& g, const std::string& prefix,
                        const std::vector<NodeId>& materialize) {
  Schedule s;
  const size_t n = g.size();
  s.buffer_of.assign(n, -1);
  s.num_inputs = g.num_inputs();
  s.num_outputs = g.outputs().size();
  s.buffer_node.assign(s.num_inputs, -1);
  for (size_t id = 0; id < n; ++id) {
    const Node& node = g.nodes()[id];
    if (node.op != Op::Placeholder) continue;
    s.buffer_of[id] = node.index;
    s.buffer_node[static_cast<size_t>(node.index)] = static_cast<NodeId>(id);
  }
  // Every (node, buffer) pair some kernel or matmul must write.
  std::vector<KernelSpec::Store> stores;
  for (size_t pos = 0; pos < g.outputs().size(); ++pos) {
    const NodeId id = g.outputs()[pos];
    FJ_CHECK(!is_python_scalar(g.node(id)), "a graph output is a Python number");
    const auto b = static_cast<int32_t>(s.buffer_node.size());
    s.buffer_node.push_back(id);
    if (s.buffer_of[static_cast<size_t>(id)] < 0) s.buffer_of[static_cast<size_t>(id)] = b;
    stores.push_back({id, b});
  }
  std::set<NodeId> forced(materialize.begin(), materialize.end());
  std::set<NodeId> view_copies;
  // A view that only matmuls read may skip its copy at run time (they read the input
  // in place); one that a kernel reads too, or that is an output, is always written.
  std::vector<bool> read_by_kernel(n, false);
  for (size_t id = 0; id < n; ++id) {
    const Node& node = g.nodes()[id];
    if (op_family(node.op) == Family::Extern) continue;
    for (NodeId in : node.inputs) read_by_kernel[static_cast<size_t>(in)] = true;
  }
  for (NodeId id : g.outputs()) read_by_kernel[static_cast<size_t>(id)] = true;
  for (NodeId id : materialize) read_by_kernel[static_cast<size_t>(id)] = true;
  for (size_t id = 0; id < n; ++id) {
    const Node& node = g.nodes()[id];
    if (op_family(node.op) != Family::Extern) continue;
    forced.insert(static_cast<NodeId>(id));
    for (NodeId in : node.inputs) {
      if (g.node(in).op == Op::Placeholder) continue;
      const std::optional<NodeId> base = reshaped_computed_base(g, in);
      if (read_by_kernel[static_cast<size_t>(in)] || (!base && !is_input_view(g, in))) {
        forced.insert(in);  // a buffer that a kernel writes anyway
        continue;
      }
      if (base) forced.insert(*base);
      // Without a reshape the view's strides always exist: the matmul reads it in
      // place, and it gets neither a buffer nor a kernel (nothing to compile).
      if (!has_reshape(g, in)) continue;
      forced.insert(in);
      view_copies.insert(in);
    }
  }
  // A slice_scatter reads its base and its source at different positions, and the
  // source is often computed from the same base (x[i] *= w[i] in a loop): a chain of
  // them inline would evaluate early links once per path, doubling at each link.
  // Past kMaxScatterPaths paths a link is stored in a buffer instead.
  constexpr int64_t kMaxScatterPaths = 16;
  std::vector<int64_t> paths(n, 1);
  for (size_t id = 0; id < n; ++id) {
    const Node& node = g.nodes()[id];
    if (s.buffer_of[id] >= 0 || forced.count(static_cast<NodeId>(id))) continue;  // read from memory
    int64_t p = 1;
    if (node.op == Op::SliceScatter) {
      p = paths[static_cast<size_t>(node.inputs[0])] + paths[static_cast<size_t>(node.inputs[1])];
      if (p > kMaxScatterPaths) {
        forced.insert(static_cast<NodeId>(id));
        p = 1;
      }
    } else {
      for (NodeId in : node.inputs) p = std::max(p, paths[static_cast<size_t>(in)]);
    }
    paths[id] = p;
  }
  for (NodeId id : forced) {
    if (s.buffer_of[static_cast<size_t>(id)] >= 0) continue;
    const auto b = static_cast<int32_t>(s.buffer_node.size());
    s.buffer_node.push_back(id);
    s.buffer_of[static_cast<size_t>(id)] = b;
    stores.push_back({id, b});
  }
  // Checks (int() of a float) that no store reads: evaluated by a store without a
  // buffer (-1), so that a NaN still fails the run as it fails eager.
  if (!g.checks().empty()) {
    std::vector<bool> read(n, false);
    for (const KernelSpec::Store& st : stores) read[static_cast<size_t>(st.node)] = true;
    for (size_t id = n; id-- > 0;) {
      if (!read[id]) continue;
      for (NodeId in : g.nodes()[id].inputs) read[static_cast<size_t>(in)] = true;
    }
    for (NodeId id : g.checks()) {
      if (!read[static_cast<size_t>(id)]) stores.push_back({id, -1});
      read[static_cast<size_t>(id)] = true;
    }
  }
  std::stable_sort(stores.begin(), stores.end(),
                   [](const KernelSpec::Store& a, const KernelSpec::Store& b) { return a.node < b.node; });

  // The step that writes each materialized node, and the kernel placement: a store
  // joins an existing kernel of the same shape that runs after everything it reads.
  std::vector<int> producer(n, -1);
  auto latest_dep = [&](NodeId root) {
    int latest = -1;
    std::vector<NodeId> work(g.node(root).inputs.begin(), g.node(root).inputs.end());
    std::set<NodeId> seen;
    while (!work.empty()) {
      const NodeId id = work.back();
      work.pop_back();
      if (!seen.insert(id).second) continue;
      if (s.buffer_of[static_cast<size_t>(id)] >= 0) {
        latest = std::max(latest, producer[static_cast<size_t>(id)]);
        continue;
      }
      for (NodeId in : g.node(id).inputs) work.push_back(in);
    }
    return latest;
  };
  for (const KernelSpec::Store& st : stores) {
    const Node& node = g.node(st.node);
    int step = -1;
    if (op_family(node.op) == Family::Extern && s.buffer_of[static_cast<size_t>(st.node)] == st.buffer) {
      step = static_cast<int>(s.steps.size());
      s.steps.push_back(Step{Step::Kind::Matmul, st.node});
    } else {
      // A view copy may be skipped at run time (the matmul reads the input in place):
      // a graph output must be written whatever happens, so it gets a plain kernel.
      const bool output = st.buffer >= static_cast<int32_t>(s.num_inputs) &&
                          st.buffer < static_cast<int32_t>(s.num_inputs + s.num_outputs);
      const bool copy = !output && view_copies.count(st.node) != 0;
      const int after = op_family(node.op) == Family::Extern ? producer[static_cast<size_t>(st.node)]
                                                             : latest_dep(st.node);
      for (size_t k = static_cast<size_t>(after + 1); !copy && k < s.steps.size(); ++k) {
        const Step& cand = s.steps[k];
        if (cand.kind != Step::Kind::Kernel) continue;
        KernelSpec& spec = s.kernels[static_cast<size_t>(cand.index)];
        if (spec.view_copy_of >= 0 || !same_shape(spec.shape, node.sym)) continue;
        spec.stores.push_back(st);
        step = static_cast<int>(k);
        break;
      }
      if (step < 0) {
        KernelSpec spec;
        spec.symbol = prefix + "_k" + std::to_string(s.kernels.size());
        spec.shape = node.sym;
        for (size_t d = 0; d < spec.shape.size(); ++d) {
          if (!is_const(spec.shape[d], 1)) {
            spec.split_dim = static_cast<int>(d);
            break;
          }
        }
        spec.stores.push_back(st);
        if (copy) spec.view_copy_of = st.node;
        step = static_cast<int>(s.steps.size());
        s.steps.push_back(Step{Step::Kind::Kernel, static_cast<int32_t>(s.kernels.size())});
        s.kernels.push_back(std::move(spec));
      }
    }
    if (producer[static_cast<size_t>(st.node)] < 0) producer[static_cast<size_t>(st.node)] = step;
  }
  int64_t offset = 0;
  for (NodeId id : s.buffer_node) {
    s.stride_offset.push_back(offset);
    offset += static_cast<int64_t>(g.node(id).rank());
  }
  s.stride_offset.push_back(offset);  // the total
  return s;
}

}  // namespace fj::jit
