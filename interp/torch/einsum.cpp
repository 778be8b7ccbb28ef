// torch.einsum of one or two operands, lowered to ops the graph has: permute and
// reshape to line the labels up, sum for labels that only one operand has, mul for
// products without a contraction, and one (batched) matmul for a contraction.
// What is not lowered here (a label repeated within an operand, three or more
// operands, the sublist format, a malformed equation, sizes that do not broadcast)
// ends this op's trace; the caller then runs eager's einsum as a graph break, so
// eager's result and eager's exceptions are what the user sees.
#include "interp/trace/tracer.h"

#include <algorithm>
#include <array>
#include <optional>
#include <string_view>

namespace fj::interp {

using jit::DType;
using jit::NodeId;
using jit::SymExpr;

namespace {

// Labels are ids: 'A'..'Z' are 0..25 and 'a'..'z' 26..51 (so implicit outputs sort
// upper case first, as eager does); the dims an ellipsis covers are kEllipsis + j,
// right-aligned across operands (the last ellipsis dim of every operand is the same
// label), which is how they broadcast.
constexpr int kEllipsis = 52;

int letter_id(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  return -1;
}

struct Equation {
  std::vector<std::vector<int>> inputs;  // per operand: one label per dim
  std::vector<int> output;               // the result's labels, in order
};

// One side's subscripts: letter ids and -1 where "..." stands. Spaces are skipped.
// Returns an error (eager raises one too, or the form is not lowered), or "".
std::string parse_terms(std::string_view s, size_t operands, std::vector<std::vector<int>>* out) {
  out->assign(1, {});
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == ' ') continue;
    if (c == ',') {
      out->emplace_back();
      if (out->size() > operands) return "fewer operands than the equation names";
      continue;
    }
    if (c == '.') {
      if (s.substr(i, 3) != "...") return "a '.' outside an ellipsis";
      if (std::count(out->back().begin(), out->back().end(), -1) != 0) return "two ellipses in one term";
      out->back().push_back(-1);
      i += 2;
      continue;
    }
    const int id = letter_id(c);
    if (id < 0) return std::string("the subscript '") + c + "' (not a letter)";
    out->back().push_back(id);
  }
  return "";
}

// The equation for operands of these ranks, or an error ("" on success).
std::string parse_equation(const std::string& eq, const std::vector<size_t>& ranks, Equation* out) {
  const size_t arrow = eq.find("->");
  const std::string_view all(eq);
  std::vector<std::vector<int>> terms;
  if (std::string e = parse_terms(all.substr(0, arrow), ranks.size(), &terms); !e.empty()) return e;
  if (terms.size() != ranks.size()) return "more operands than the equation names";
  // Ellipsis widths: the dims an operand has beyond its letters.
  size_t width = 0;
  bool any_ellipsis = false;
  std::vector<size_t> widths(ranks.size(), 0);
  for (size_t k = 0; k < terms.size(); ++k) {
    const bool ell = std::count(terms[k].begin(), terms[k].end(), -1) != 0;
    const size_t letters = terms[k].size() - (ell ? 1 : 0);
    if (ell ? letters > ranks[k] : letters != ranks[k]) return "subscripts do not match the operand's dims";
    if (ell) widths[k] = ranks[k] - letters;
    any_ellipsis = any_ellipsis || ell;
    width = std::max(width, widths[k]);
  }
  std::array<int, kEllipsis> count{};
  out->inputs.clear();
  for (size_t k = 0; k < terms.size(); ++k) {
    std::vector<int> labels;
    for (int t : terms[k]) {
      if (t == -1) {
        for (size_t j = 0; j < widths[k]; ++j) labels.push_back(kEllipsis + static_cast<int>(width - widths[k] + j));
        continue;
      }
      if (std::count(labels.begin(), labels.end(), t) != 0) return "a subscript repeated within one operand (a diagonal; not lowered)";
      ++count[static_cast<size_t>(t)];
      labels.push_back(t);
    }
    out->inputs.push_back(std::move(labels));
  }
  out->output.clear();
  if (arrow == std::string::npos) {
    // Implicit output: the ellipsis dims, then the letters used once, sorted.
    for (size_t j = 0; j < width; ++j) out->output.push_back(kEllipsis + static_cast<int>(j));
    for (int id = 0; id < kEllipsis; ++id) {
      if (count[static_cast<size_t>(id)] == 1) out->output.push_back(id);
    }
    return "";
  }
  std::vector<std::vector<int>> rhs;
  if (std::string e = parse_terms(all.substr(arrow + 2), 1, &rhs); !e.empty()) return "output: " + e;
  for (int t : rhs[0]) {
    if (t == -1) {
      if (!any_ellipsis) return "an ellipsis in the output only";
      for (size_t j = 0; j < width; ++j) out->output.push_back(kEllipsis + static_cast<int>(j));
      continue;
    }
    if (count[static_cast<size_t>(t)] == 0) return "an output subscript that no operand has";
    if (std::count(out->output.begin(), out->output.end(), t) != 0) return "an output subscript repeated";
    out->output.push_back(t);
  }
  return "";
}

bool has(const std::vector<int>& v, int x) { return std::find(v.begin(), v.end(), x) != v.end(); }

size_t index_of(const std::vector<int>& v, int x) {
  return static_cast<size_t>(std::find(v.begin(), v.end(), x) - v.begin());
}

// An operand while the einsum is built: its node and the label of each dim.
struct EinsumTerm {
  NodeId node;
  std::vector<int> labels;
};

// t with its dims in `order`'s order, a size-1 dim where t lacks a label.
Expected<NodeId> arrange(jit::Graph& g, const EinsumTerm& t, const std::vector<int>& order) {
  // Present labels in `order`'s order, then a size-1 dim for each absent one.
  std::vector<int64_t> perm;
  for (int l : order) {
    if (has(t.labels, l)) perm.push_back(static_cast<int64_t>(index_of(t.labels, l)));
  }
  auto p = g.permute(t.node, perm);
  if (!p) return p;
  if (perm.size() == order.size()) return p;
  const jit::SymShape ps = g.node(*p).sym;
  jit::SymShape sizes;
  size_t next = 0;
  for (int l : order) sizes.push_back(has(t.labels, l) ? ps[next++] : SymExpr::integer(1));
  return g.reshape(*p, sizes);
}

const SymExpr& size_of(const jit::Graph& g, const EinsumTerm& t, int l) { return g.node(t.node).sym[index_of(t.labels, l)]; }

// With two operands, a label of size 1 in one operand broadcasts: that operand drops the dim.
Status drop_broadcast_ones(jit::Graph& g, std::vector<EinsumTerm>* terms) {
  if (terms->size() != 2) return ok();
  for (int l : std::vector<int>((*terms)[0].labels)) {
    if (!has((*terms)[1].labels, l)) continue;
    EinsumTerm& t = jit::is_const(size_of(g, (*terms)[0], l), 1) ? (*terms)[0] : (*terms)[1];
    if (!jit::is_const(size_of(g, t, l), 1)) continue;
    std::vector<int> keep;
    jit::SymShape sizes;
    for (size_t d = 0; d < t.labels.size(); ++d) {
      if (t.labels[d] == l) continue;
      keep.push_back(t.labels[d]);
      sizes.push_back(g.node(t.node).sym[d]);
    }
    auto r = g.reshape(t.node, sizes);
    if (!r) return r.take_error();
    t = EinsumTerm{*r, keep};
  }
  return ok();
}

// Labels that only one operand has and the output drops are summed first.
Status sum_lone_labels(jit::Graph& g, const std::vector<int>& output, std::vector<EinsumTerm>* terms) {
  for (size_t k = 0; k < terms->size(); ++k) {
    EinsumTerm& t = (*terms)[k];
    const EinsumTerm* other = terms->size() == 2 ? &(*terms)[1 - k] : nullptr;
    std::vector<int64_t> dims;
    std::vector<int> keep;
    for (size_t d = 0; d < t.labels.size(); ++d) {
      const int l = t.labels[d];
      if (!has(output, l) && (other == nullptr || !has(other->labels, l))) dims.push_back(static_cast<int64_t>(d));
      else keep.push_back(l);
    }
    if (dims.empty()) continue;
    auto r = g.reduce(jit::Op::Sum, t.node, dims, false);
    if (!r) return r.take_error();
    t = EinsumTerm{*r, keep};
  }
  return ok();
}

// How the labels of a product x * y split: in both and kept (batch), in one and kept
// (left, right), in both and summed (contracted).
struct Contraction {
  std::vector<int> batch, left, right, contracted;
  std::vector<int> labels() const {  // the result's: batch, left, right
    std::vector<int> out = batch;
    out.insert(out.end(), left.begin(), left.end());
    out.insert(out.end(), right.begin(), right.end());
    return out;
  }
};

Contraction split_labels(const EinsumTerm& x, const EinsumTerm& y, const std::vector<int>& output) {
  Contraction k;
  for (int l : output) {
    const bool in_x = has(x.labels, l), in_y = has(y.labels, l);
    (in_x && in_y ? k.batch : in_x ? k.left : k.right).push_back(l);
  }
  for (int l : x.labels) {
    if (has(y.labels, l) && !has(output, l)) k.contracted.push_back(l);
  }
  return k;
}

// An elementwise product over the union of the labels, summed over the contracted
// ones (integers: exact in any order, as eager's bmm).
Expected<EinsumTerm> multiply_and_sum(jit::Graph& g, const EinsumTerm& x, const EinsumTerm& y, const Contraction& k) {
  const std::vector<int> labels = k.labels();
  std::vector<int> all = labels;
  all.insert(all.end(), k.contracted.begin(), k.contracted.end());
  const NodeId px = FJ_TRY(arrange(g, x, all));
  const NodeId py = FJ_TRY(arrange(g, y, all));
  NodeId m = FJ_TRY(g.pointwise(jit::Op::Mul, {px, py}));
  if (!k.contracted.empty()) {
    std::vector<int64_t> dims;
    for (size_t i = labels.size(); i < all.size(); ++i) dims.push_back(static_cast<int64_t>(i));
    m = FJ_TRY(g.reduce(jit::Op::Sum, m, dims, false));
  }
  return EinsumTerm{m, labels};
}

// t as [batch, rows, cols] with rows and cols each flattened to one dim.
Expected<NodeId> flatten_for_matmul(jit::Graph& g, const EinsumTerm& t, const std::vector<int>& batch,
                                    const std::vector<int>& rows, const std::vector<int>& cols) {
  std::vector<int> order = batch;
  order.insert(order.end(), rows.begin(), rows.end());
  order.insert(order.end(), cols.begin(), cols.end());
  const NodeId p = FJ_TRY(arrange(g, t, order));
  jit::SymShape sizes, r, c;
  for (int l : batch) sizes.push_back(size_of(g, t, l));
  for (int l : rows) r.push_back(size_of(g, t, l));
  for (int l : cols) c.push_back(size_of(g, t, l));
  sizes.push_back(jit::numel(r));
  sizes.push_back(jit::numel(c));
  return g.reshape(p, sizes);
}

// [batch, left, k] @ [batch, k, right]: one (batched) matmul, reshaped back.
Expected<EinsumTerm> contract_by_matmul(jit::Graph& g, const EinsumTerm& x, const EinsumTerm& y, const Contraction& k) {
  const NodeId fx = FJ_TRY(flatten_for_matmul(g, x, k.batch, k.left, k.contracted));
  const NodeId fy = FJ_TRY(flatten_for_matmul(g, y, k.batch, k.contracted, k.right));
  const NodeId m = FJ_TRY(g.matmul(fx, fy));
  const jit::SymShape ms = g.node(m).sym;
  jit::SymShape sizes(ms.begin(), ms.begin() + static_cast<std::ptrdiff_t>(k.batch.size()));
  for (int l : k.left) sizes.push_back(size_of(g, x, l));
  for (int l : k.right) sizes.push_back(size_of(g, y, l));
  const NodeId r = FJ_TRY(g.reshape(m, sizes));
  return EinsumTerm{r, k.labels()};
}

// The result in the output's order.
Expected<NodeId> to_output_order(jit::Graph& g, const EinsumTerm& result, const std::vector<int>& output) {
  std::vector<int64_t> perm;
  for (int l : output) {
    if (!has(result.labels, l)) return Error{"an output label was lost (not lowered)"};
    perm.push_back(static_cast<int64_t>(index_of(result.labels, l)));
  }
  if (perm.size() != result.labels.size()) return Error{"labels left over (not lowered)"};
  return g.permute(result.node, perm);
}

}  // namespace

// The equation and the operand tensors of einsum(equation, *operands).
Status Tracer::einsum_operands(const OpCall& c, std::string* equation, std::vector<NodeId>* nodes) {
  const std::vector<Value>& a = c.a;
  if (a[0].kind != ValueKind::Const || is_opaque(a[0]) || !PyUnicode_CheckExact(a[0].obj.get())) {
    return unsupported(c.what + " whose first argument is " + describe(a[0]) + " (the sublist form is not lowered)");
  }
  *equation = FJ_TRY(guards::utf8_of(a[0].obj.get()));
  FJ_TRY(tensor_list(a[1], c.what + " operands", nodes));
  if (nodes->empty() || nodes->size() > 2) return unsupported(c.what + " of " + std::to_string(nodes->size()) + " operands (not lowered)");
  return ok();
}

// Whether the operands are lowered: one dtype that the lowering handles; sizes per
// label equal, or 1 (broadcast), guarded. A size-0 dim is left to eager.
Status Tracer::einsum_check(const std::vector<NodeId>& nodes, const std::vector<std::vector<int>>& labels) {
  const std::string what = "einsum()";
  const DType dtype = graph_.node(nodes[0]).dtype;
  for (NodeId n : nodes) {
    if (graph_.node(n).dtype != dtype) return unsupported(what + " of mixed dtypes (eager raises)");
  }
  if (dtype != DType::Float32 && dtype != DType::Float64 && dtype != DType::Int64) {
    return unsupported(what + " of " + std::string(jit::dtype_name(dtype)) + " tensors (not lowered)");
  }
  std::array<std::optional<SymExpr>, kEllipsis + 64> seen;
  for (size_t k = 0; k < nodes.size(); ++k) {
    const jit::SymShape& s = graph_.node(nodes[k]).sym;
    for (size_t d = 0; d < s.size(); ++d) {
      if (jit::is_const(s[d], 0)) return unsupported(what + " with a size-0 dim (not lowered)");
      const size_t l = static_cast<size_t>(labels[k][d]);
      if (l >= seen.size()) return unsupported(what + " with too many ellipsis dims");
      if (!seen[l] || jit::is_const(*seen[l], 1)) {
        seen[l] = s[d];
        continue;
      }
      if (jit::is_const(s[d], 1)) continue;
      bool same = false;
      FJ_TRY(guard_truth(jit::eq(*seen[l], s[d]), &same));
      if (!same) return unsupported(what + ": sizes that do not broadcast (eager raises)");
    }
  }
  return ok();
}

// einsum(equation, *operands) of one or two operands.
Status Tracer::lower_einsum(const OpCall& c) {
  std::string text;
  std::vector<NodeId> nodes;
  FJ_TRY(einsum_operands(c, &text, &nodes));
  std::vector<size_t> ranks;
  for (NodeId n : nodes) ranks.push_back(graph_.node(n).rank());
  Equation eq;
  if (std::string e = parse_equation(text, ranks, &eq); !e.empty()) return unsupported(c.what + ": " + e);
  FJ_TRY(einsum_check(nodes, eq.inputs));
  std::vector<EinsumTerm> terms;
  for (size_t k = 0; k < nodes.size(); ++k) terms.push_back(EinsumTerm{nodes[k], eq.inputs[k]});
  Status built = drop_broadcast_ones(graph_, &terms);
  if (built.ok()) built = sum_lone_labels(graph_, eq.output, &terms);
  if (built.failed()) return unsupported(c.what + ": " + built.error());
  Expected<EinsumTerm> result = terms[0];
  if (terms.size() == 2) {
    const Contraction k = split_labels(terms[0], terms[1], eq.output);
    const bool by_matmul = !k.contracted.empty() && jit::is_floating(graph_.node(nodes[0]).dtype);
    result = by_matmul ? contract_by_matmul(graph_, terms[0], terms[1], k) : multiply_and_sum(graph_, terms[0], terms[1], k);
    if (!result) return unsupported(c.what + ": " + result.error());
  }
  // One operand and only a permute left: eager returns a view.
  const bool view_of_input = terms.size() == 1 && result->node == nodes[0];
  auto out = to_output_order(graph_, *result, eq.output);
  if (!out) return unsupported(c.what + ": " + out.error());
  if (view_of_input) {
    if (*out != nodes[0]) mark_noncontig(*out);
    return push_view(out, c.what, nodes[0]);
  }
  // Eager's layout is not followed dim for dim: a reordered result is taken as
  // non-contiguous (a later .view() that would need it ends the trace).
  if (*out != result->node) mark_noncontig(*out);
  return push_built(out, c.what);
}

}  // namespace fj::interp
