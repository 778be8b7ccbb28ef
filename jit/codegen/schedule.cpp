// schedule_graph: which values live in buffers, which kernel stores each, and the
// order of kernels and matmuls; kernel_work: a kernel's work estimate (see
// jit/codegen/schedule.h).
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

// Builds a Schedule in steps: buffers for inputs, outputs and what must be
// materialized (matmul operands and results, links of long scatter chains, nodes
// the lowering asked for), stores for checks, then each store's kernel.
class Scheduler {
 public:
  Scheduler(const Graph& g, const std::string& prefix) : g_(g), prefix_(prefix), n_(g.size()) {}

  Schedule run(const std::vector<NodeId>& materialize) {
    bind_inputs();
    add_output_stores();
    forced_.insert(materialize.begin(), materialize.end());
    force_extern_operands(materialize);
    break_scatter_chains();
    add_forced_stores();
    add_check_stores();
    std::stable_sort(stores_.begin(), stores_.end(),
                     [](const KernelSpec::Store& a, const KernelSpec::Store& b) { return a.node < b.node; });
    producer_.assign(n_, -1);
    for (const KernelSpec::Store& st : stores_) place(st);
    number_strides();
    return std::move(s_);
  }

 private:
  void bind_inputs() {
    s_.buffer_of.assign(n_, -1);
    s_.num_inputs = g_.num_inputs();
    s_.num_outputs = g_.outputs().size();
    s_.buffer_node.assign(s_.num_inputs, -1);
    for (size_t id = 0; id < n_; ++id) {
      const Node& node = g_.nodes()[id];
      if (node.op != Op::Placeholder) continue;
      s_.buffer_of[id] = node.index;
      s_.buffer_node[static_cast<size_t>(node.index)] = static_cast<NodeId>(id);
    }
  }

  // Every (node, buffer) pair some kernel or matmul must write: first the outputs.
  void add_output_stores() {
    for (size_t pos = 0; pos < g_.outputs().size(); ++pos) {
      const NodeId id = g_.outputs()[pos];
      FJ_CHECK(!is_python_scalar(g_.node(id)), "a graph output is a Python number");
      const auto b = static_cast<int32_t>(s_.buffer_node.size());
      s_.buffer_node.push_back(id);
      if (s_.buffer_of[static_cast<size_t>(id)] < 0) s_.buffer_of[static_cast<size_t>(id)] = b;
      stores_.push_back({id, b});
    }
  }

  // Matmul results and operands get buffers. A view that only matmuls read may
  // skip its copy at run time (they read the input in place); one that a kernel
  // reads too, or that is an output, is always written.
  void force_extern_operands(const std::vector<NodeId>& materialize) {
    std::vector<bool> read_by_kernel(n_, false);
    for (size_t id = 0; id < n_; ++id) {
      const Node& node = g_.nodes()[id];
      if (op_family(node.op) == Family::Extern) continue;
      for (NodeId in : node.inputs) read_by_kernel[static_cast<size_t>(in)] = true;
    }
    for (NodeId id : g_.outputs()) read_by_kernel[static_cast<size_t>(id)] = true;
    for (NodeId id : materialize) read_by_kernel[static_cast<size_t>(id)] = true;
    for (size_t id = 0; id < n_; ++id) {
      const Node& node = g_.nodes()[id];
      if (op_family(node.op) != Family::Extern) continue;
      forced_.insert(static_cast<NodeId>(id));
      for (NodeId in : node.inputs) {
        if (g_.node(in).op == Op::Placeholder) continue;
        const std::optional<NodeId> base = reshaped_computed_base(g_, in);
        if (read_by_kernel[static_cast<size_t>(in)] || (!base && !is_input_view(g_, in))) {
          forced_.insert(in);  // a buffer that a kernel writes anyway
          continue;
        }
        if (base) forced_.insert(*base);
        // Without a reshape the view's strides always exist: the matmul reads it in
        // place, and it gets neither a buffer nor a kernel (nothing to compile).
        if (!has_reshape(g_, in)) continue;
        forced_.insert(in);
        view_copies_.insert(in);
      }
    }
  }

  // A slice_scatter reads its base and its source at different positions, and the
  // source is often computed from the same base (x[i] *= w[i] in a loop): a chain of
  // them inline would evaluate early links once per path, doubling at each link.
  // Past kMaxScatterPaths paths a link is stored in a buffer instead.
  void break_scatter_chains() {
    constexpr int64_t kMaxScatterPaths = 16;
    std::vector<int64_t> paths(n_, 1);
    for (size_t id = 0; id < n_; ++id) {
      const Node& node = g_.nodes()[id];
      if (s_.buffer_of[id] >= 0 || forced_.count(static_cast<NodeId>(id))) continue;  // read from memory
      int64_t p = 1;
      if (node.op == Op::SliceScatter) {
        p = paths[static_cast<size_t>(node.inputs[0])] + paths[static_cast<size_t>(node.inputs[1])];
        if (p > kMaxScatterPaths) {
          forced_.insert(static_cast<NodeId>(id));
          p = 1;
        }
      } else {
        for (NodeId in : node.inputs) p = std::max(p, paths[static_cast<size_t>(in)]);
      }
      paths[id] = p;
    }
  }

  void add_forced_stores() {
    for (NodeId id : forced_) {
      if (s_.buffer_of[static_cast<size_t>(id)] >= 0) continue;
      const auto b = static_cast<int32_t>(s_.buffer_node.size());
      s_.buffer_node.push_back(id);
      s_.buffer_of[static_cast<size_t>(id)] = b;
      stores_.push_back({id, b});
    }
  }

  // Checks (int() of a float) that no store reads: evaluated by a store without a
  // buffer (-1), so that a NaN still fails the run as it fails eager.
  void add_check_stores() {
    if (g_.checks().empty()) return;
    std::vector<bool> read(n_, false);
    for (const KernelSpec::Store& st : stores_) read[static_cast<size_t>(st.node)] = true;
    for (size_t id = n_; id-- > 0;) {
      if (!read[id]) continue;
      for (NodeId in : g_.nodes()[id].inputs) read[static_cast<size_t>(in)] = true;
    }
    for (NodeId id : g_.checks()) {
      if (!read[static_cast<size_t>(id)]) stores_.push_back({id, -1});
      read[static_cast<size_t>(id)] = true;
    }
  }

  // The latest step that writes a buffer `root` reads (through inline values).
  int latest_dep(NodeId root) const {
    int latest = -1;
    std::vector<NodeId> work(g_.node(root).inputs.begin(), g_.node(root).inputs.end());
    std::set<NodeId> seen;
    while (!work.empty()) {
      const NodeId id = work.back();
      work.pop_back();
      if (!seen.insert(id).second) continue;
      if (s_.buffer_of[static_cast<size_t>(id)] >= 0) {
        latest = std::max(latest, producer_[static_cast<size_t>(id)]);
        continue;
      }
      for (NodeId in : g_.node(id).inputs) work.push_back(in);
    }
    return latest;
  }

  // The step that writes a store: its matmul, or a kernel. A store joins an
  // existing kernel of the same shape that runs after everything it reads.
  void place(const KernelSpec::Store& st) {
    const Node& node = g_.node(st.node);
    int step = -1;
    if (op_family(node.op) == Family::Extern && s_.buffer_of[static_cast<size_t>(st.node)] == st.buffer) {
      step = static_cast<int>(s_.steps.size());
      s_.steps.push_back(Step{Step::Kind::Extern, st.node});
    } else {
      // A view copy may be skipped at run time (the matmul reads the input in place):
      // a graph output must be written whatever happens, so it gets a plain kernel.
      const bool output = st.buffer >= static_cast<int32_t>(s_.num_inputs) &&
                          st.buffer < static_cast<int32_t>(s_.num_inputs + s_.num_outputs);
      const bool copy = !output && view_copies_.count(st.node) != 0;
      const int after = op_family(node.op) == Family::Extern ? producer_[static_cast<size_t>(st.node)]
                                                             : latest_dep(st.node);
      if (!copy) step = join_kernel(st, after);
      if (step < 0) step = new_kernel(st, copy);
    }
    if (producer_[static_cast<size_t>(st.node)] < 0) producer_[static_cast<size_t>(st.node)] = step;
  }

  // The first kernel after step `after` with the store's shape takes it: its step, or -1.
  int join_kernel(const KernelSpec::Store& st, int after) {
    for (size_t k = static_cast<size_t>(after + 1); k < s_.steps.size(); ++k) {
      const Step& cand = s_.steps[k];
      if (cand.kind != Step::Kind::Kernel) continue;
      KernelSpec& spec = s_.kernels[static_cast<size_t>(cand.index)];
      if (spec.view_copy_of >= 0 || !same_shape(spec.shape, g_.node(st.node).sym)) continue;
      spec.stores.push_back(st);
      return static_cast<int>(k);
    }
    return -1;
  }

  // A new kernel over the store's shape, split across threads along its first dim
  // that is not 1: its step.
  int new_kernel(const KernelSpec::Store& st, bool copy) {
    KernelSpec spec;
    spec.symbol = prefix_ + "_k" + std::to_string(s_.kernels.size());
    spec.shape = g_.node(st.node).sym;
    for (size_t d = 0; d < spec.shape.size(); ++d) {
      if (!is_const(spec.shape[d], 1)) {
        spec.split_dim = static_cast<int>(d);
        break;
      }
    }
    spec.stores.push_back(st);
    if (copy) spec.view_copy_of = st.node;
    const int step = static_cast<int>(s_.steps.size());
    s_.steps.push_back(Step{Step::Kind::Kernel, static_cast<int32_t>(s_.kernels.size())});
    s_.kernels.push_back(std::move(spec));
    return step;
  }

  void number_strides() {
    int64_t offset = 0;
    for (NodeId id : s_.buffer_node) {
      s_.stride_offset.push_back(offset);
      offset += static_cast<int64_t>(g_.node(id).rank());
    }
    s_.stride_offset.push_back(offset);  // the total
  }

  const Graph& g_;
  const std::string& prefix_;
  const size_t n_;
  Schedule s_;
  std::vector<KernelSpec::Store> stores_;
  std::set<NodeId> forced_;       // nodes that get a buffer
  std::set<NodeId> view_copies_;  // matmul operands whose copy may be skipped
  std::vector<int> producer_;     // per node: the step that writes it (-1: none yet)
};

}  // namespace

Schedule schedule_graph(const Graph& g, const std::string& prefix, const std::vector<NodeId>& materialize) {
  return Scheduler(g, prefix).run(materialize);
}

std::vector<SymExpr> kernel_work(const Graph& g, const Schedule& s, const KernelSpec& spec) {
  std::vector<SymExpr> work{numel(spec.shape)};
  std::set<NodeId> seen;
  std::vector<NodeId> todo;
  for (const KernelSpec::Store& st : spec.stores) todo.push_back(st.node);
  while (!todo.empty()) {
    const NodeId id = todo.back();
    todo.pop_back();
    if (!seen.insert(id).second) continue;
    const Node& n = g.node(id);
    if (is_python_scalar(n)) continue;
    // Elements computed: the loop's, and each reduction's operand. Values that are
    // only read (an embedding table, a broadcast row) do not count.
    if (op_family(n.op) == Family::Reduction) work.push_back(numel(g.node(n.inputs[0]).sym));
    const bool stored = std::any_of(spec.stores.begin(), spec.stores.end(),
                                    [&](const KernelSpec::Store& st) { return st.node == id; });
    if (s.buffer_of[static_cast<size_t>(id)] >= 0 && !stored) continue;
    for (NodeId in : n.inputs) todo.push_back(in);
  }
  return work;
}

}  // namespace fj::jit
