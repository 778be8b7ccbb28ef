// The view and indexing families of interp/torch/torch_ops.def (view, permute, split,
// cat, ...; index_select, gather, embedding), Python subscripts of tensors (x[i, 1:n:2,
// None, ..., idx]) and BUILD_SLICE.
#include <algorithm>

#include "interp/trace/tracer.h"

namespace fj::interp {

using jit::NodeId;
using jit::SymExpr;

namespace {

// Sizes without the constant 1s.
jit::SymShape without_ones(const jit::SymShape& s) {
  jit::SymShape out;
  for (const SymExpr& e : s) {
    if (!jit::is_const(e, 1)) out.push_back(e);
  }
  return out;
}

// Whether `to` only splits dims of `from` (and adds or drops 1s): such a view works
// for any strides, where merging dims needs them to be contiguous.
// `equal` decides size equalities that are not structural (4*(s2//4) == s2).
template <class Equal>
bool only_splits(const jit::SymShape& from_all, const jit::SymShape& to_all, Equal&& equal) {
  const jit::SymShape from = without_ones(from_all), to = without_ones(to_all);
  size_t j = 0;
  for (const SymExpr& f : from) {
    if (j >= to.size()) return false;
    SymExpr prod = to[j++];
    while (!prod.same(f) && j < to.size() && !(jit::is_const(f, 0))) {
      if (equal(prod, f)) break;
      prod = jit::mul(prod, to[j++]);
    }
    if (!prod.same(f) && !equal(prod, f)) return false;
  }
  return j == to.size();
}

}  // namespace

// (start, stop[, step] -- slice)
Status Tracer::op_build_slice(const Instruction& ins) {
  const size_t n = static_cast<size_t>(ins.arg);
  std::vector<Value> parts(cur_.fs->stack.end() - static_cast<std::ptrdiff_t>(n), cur_.fs->stack.end());
  cur_.fs->stack.resize(cur_.fs->stack.size() - n);
  bool constant = true;
  for (const Value& p : parts) constant = constant && p.kind == ValueKind::Const && !is_opaque(p) && is_foldable(p.obj.get());
  if (constant) {
    PyObject* s = PySlice_New(parts[0].obj.get(), parts[1].obj.get(), n == 3 ? parts[2].obj.get() : nullptr);
    if (s == nullptr) return unsupported("cannot build the slice");
    push(Value::constant(PyRef::steal(s)));
    return ok();
  }
  if (n == 2) parts.push_back(Value::constant(PyRef::borrow(Py_None)));
  Value v = Value::sequence(ValueKind::Slice, std::move(parts));
  push(std::move(v));
  return ok();
}

// ---- shared by the family ----

namespace {

// A dim of a tensor of rank r as a non-negative index; out of range ends the trace
// (eager raises). A 0-d tensor takes dims -1 and 0, as eager's.
Status norm_dim(int64_t d, int64_t r, const std::string& what, int64_t* out) {
  const int64_t rr = std::max<int64_t>(r, 1);
  if (d < -rr || d >= rr) return unsupported(what + ": dim out of range (eager raises)");
  *out = d < 0 ? d + rr : d;
  return ok();
}

// Whether v is a tuple or list (of sizes or dims), not one int.
bool is_sequence(const Value& v) {
  return v.kind == ValueKind::Tuple || v.kind == ValueKind::List ||
         (v.kind == ValueKind::Const && (PyTuple_Check(v.obj.get()) || PyList_Check(v.obj.get())));
}

}  // namespace

// Equal in this call, and guarded so (a split of s2 into 4 * (s2 // 4)).
bool Tracer::equal_guarded(const SymExpr& a, const SymExpr& b) {
  const SymExpr same = jit::eq(a, b);
  if (auto c = same.as_bool()) return *c;
  const auto v = same.eval(hints_);
  if (!v || !std::holds_alternative<bool>(*v) || !std::get<bool>(*v)) return false;
  entry_->guards.add_expr(same, readable(same));
  return true;
}

// Whether the result of reshaping x to `to` is a view: the reshape only splits dims,
// or x is contiguous. Eager's x is contiguous when no op on the way made it otherwise
// and the inputs it comes from were (a pointwise op keeps its input's layout).
Status Tracer::reshape_is_view(NodeId x, const jit::SymShape& to, bool* view) {
  const jit::SymShape from = graph_.node(x).sym;
  const auto proven = [](const SymExpr& a, const SymExpr& b) { return jit::eq(a, b).as_bool().value_or(false); };
  *view = true;
  if (only_splits(from, to, proven)) return ok();  // no guard needed
  if (!may_be_noncontig(x) && guard_inputs_contiguous(x)) return ok();
  // An input of another layout: whether eager views depends on strides no guard keeps.
  for (NodeId p : input_ancestors(x)) {
    auto c = input_contiguous_.find(p);
    if (c != input_contiguous_.end() && !c->second) {
      return unsupported("reshape of a tensor computed from a non-contiguous input (eager views or copies by its "
                         "strides; not supported yet)");
    }
  }
  // A view of contiguous inputs: torch's rule on its strides.
  TensorLayout layout;
  if (eager_layout(x, "reshape", &layout).ok()) return view_exists(from, layout.strides, to, view);
  *view = only_splits(from, to, [&](const SymExpr& a, const SymExpr& b) { return equal_guarded(a, b); });
  return ok();
}

// An index into a dim of size n, as Python's: negative counts from the end; out of
// range ends the trace (eager raises). Guards keep the decision.
Status Tracer::index_in(const OpCall& c, const Value& v, const SymExpr& n, SymExpr* out) {
  const auto e = as_sym(v);
  if (!e || e->type() != jit::SymType::Int) return unsupported(c.what + " index " + describe(v));
  bool neg = false;
  FJ_TRY(guard_truth(jit::lt(*e, SymExpr::integer(0)), &neg));
  const SymExpr i = neg ? jit::add(*e, n) : *e;
  bool in = false;
  FJ_TRY(guard_truth(jit::logical_and(jit::ge(i, SymExpr::integer(0)), jit::lt(i, n)), &in));
  if (!in) return unsupported(c.what + ": index out of range (eager raises)");
  *out = i;
  return ok();
}

// The dim argument a[at] of an op that needs a dim of a tensor with at least one dim.
Status Tracer::dim_of(const OpCall& c, size_t at, int64_t* d) {
  const int64_t rank = static_cast<int64_t>(graph_.node(c.x).rank());
  FJ_TRY(int_arg(c.a[at], c.what + " dim", d));
  if (rank == 0) return unsupported(c.what + " of a 0-d tensor (eager raises)");
  return norm_dim(*d, rank, c.what, d);
}

// A tuple of views of x, one per piece of dim d: (start, length) each, as
// split/chunk/unbind make them (`select`: each piece is one index, its dim dropped).
Status Tracer::push_pieces(NodeId x, int64_t d, const std::vector<int64_t>& lengths, bool select,
                           const std::string& what) {
  std::vector<Value> out;
  int64_t start = 0;
  for (int64_t len : lengths) {
    auto p = select ? graph_.select(x, d, SymExpr::integer(start))
                    : graph_.slice(x, d, SymExpr::integer(start), SymExpr::integer(len), 1);
    if (!p) return unsupported(what + ": " + p.error());
    if (d != 0 || may_be_noncontig(x)) mark_noncontig(*p);
    mark_view(*p, x);
    out.push_back(Value::tensor(*p));
    start += len;
  }
  Value t = Value::sequence(ValueKind::Tuple, std::move(out));
  t.identity = next_identity_++;
  push(std::move(t));
  return ok();
}

// A view whose layout differs from x's unless it is x itself (permute, transpose, expand).
Status Tracer::push_strided_view(Expected<NodeId> r, const OpCall& c) {
  if (!r) return unsupported(c.what + ": " + r.error());
  if (*r != c.x) mark_noncontig(*r);
  return push_view(r, c.what, c.x);
}

// view / reshape(input, *shape): reshape copies where view would raise
Status Tracer::view_or_reshape(const OpCall& c, bool view) {
  if (c.a[1].kind == ValueKind::Const && dtype_from_torch(c.a[1].obj.get())) return unsupported(c.what + " to a dtype");
  jit::SymShape sizes;
  FJ_TRY(sizes_arg(c.a[1], c.what, &sizes, true));
  auto r = graph_.reshape(c.x, sizes);
  if (!r) return unsupported(c.what + ": " + r.error());
  bool is_view = false;
  FJ_TRY(reshape_is_view(c.x, graph_.node(*r).sym, &is_view));
  if (!is_view) {
    if (view) return unsupported("view() that merges dims of a non-contiguous tensor (eager raises)");
    return push_built(r, c.what);  // reshape copies: a contiguous result
  }
  return push_view(r, c.what, c.x);
}

// expand / expand_as / broadcast_to to these sizes
Status Tracer::expand_to(const OpCall& c, const jit::SymShape& sizes) {
  return push_strided_view(graph_.expand(c.x, sizes), c);
}

// split(input, size or sections, dim) / chunk(input, chunks, dim): views along dim
Status Tracer::split_or_chunk(const OpCall& c, bool chunk) {
  int64_t d, n;
  FJ_TRY(dim_of(c, 2, &d));
  FJ_TRY(specialize(graph_.node(c.x).sym[static_cast<size_t>(d)], c.what + " size", &n));
  std::vector<int64_t> lengths;
  const Value& arg = c.a[1];
  if (!chunk && is_numpy_scalar(arg)) return unsupported(c.what + " with a NumPy scalar size (eager raises TypeError)");
  if (!chunk && is_sequence(arg)) {
    bool none;
    FJ_TRY(dims_arg(arg, c.what + " sections", &lengths, &none));
    int64_t total = 0;
    for (int64_t l : lengths) {
      if (l < 0) return unsupported(c.what + " with a negative section (eager raises)");
      total += l;
    }
    if (total != n) return unsupported(c.what + " sections that do not add up (eager raises)");
  } else {
    int64_t k;
    FJ_TRY(int_arg(arg, c.what + " size", &k));
    if (k <= 0) return unsupported(c.what + " with a size below 1 (eager raises or returns nothing useful)");
    if (chunk) k = (n + k - 1) / k;
    if (k == 0) return unsupported(c.what + " of an empty dim");
    for (int64_t start = 0; start < n; start += k) lengths.push_back(std::min(k, n - start));
    if (lengths.empty()) lengths.push_back(0);
  }
  if (lengths.size() > 64) return unsupported(c.what + " into more than 64 pieces");
  return push_pieces(c.x, d, lengths, false, c.what);
}

// cat / stack(tensors, dim=0): stack is cat of each tensor unsqueezed at dim
Status Tracer::join(const OpCall& c, bool stack) {
  std::vector<NodeId> xs;
  FJ_TRY(tensor_list(c.a[0], c.what, &xs));
  int64_t dim;
  FJ_TRY(int_arg(c.a[1], c.what + " dim", &dim));
  if (xs.empty()) return unsupported(c.what + " of an empty list (eager raises)");
  if (stack) {
    const int64_t r = static_cast<int64_t>(graph_.node(xs[0]).rank()) + 1;
    if (dim < -r || dim >= r) return unsupported(c.what + " dim out of range (eager raises)");
    for (NodeId& x : xs) {
      if (static_cast<int64_t>(graph_.node(x).rank()) + 1 != r) return unsupported(c.what + " of tensors of different ranks");
      auto u = graph_.unsqueeze(x, dim);
      if (!u) return unsupported(c.what + ": " + u.error());
      x = *u;
    }
  }
  return push_built(graph_.cat(xs, dim), c.what);
}

// ---- one lowering per row: views and movement ----

Status Tracer::lower_view(const OpCall& c) { return view_or_reshape(c, true); }
Status Tracer::lower_reshape(const OpCall& c) { return view_or_reshape(c, false); }
Status Tracer::lower_split(const OpCall& c) { return split_or_chunk(c, false); }
Status Tracer::lower_chunk(const OpCall& c) { return split_or_chunk(c, true); }
Status Tracer::lower_cat(const OpCall& c) { return join(c, false); }
Status Tracer::lower_stack(const OpCall& c) { return join(c, true); }

// permute(input, *dims); torch.permute(x, dims) takes a sequence (only the method packs loose ints)
Status Tracer::lower_permute(const OpCall& c) {
  const Value& dv = c.a[1];
  if (c.op.varargs < 0 && (dv.kind == ValueKind::Sym || (dv.kind == ValueKind::Const && dv.obj && PyLong_Check(dv.obj.get())))) {
    return unsupported(c.what + " with an int for dims (eager raises: dims must be a tuple)");
  }
  std::vector<int64_t> dims;
  bool none;
  FJ_TRY(dims_arg(dv, c.what + " dims", &dims, &none));
  if (none) return unsupported(c.what + " without dims");
  return push_strided_view(graph_.permute(c.x, dims), c);
}

// movedim(input, source, destination): the dims in source move to destination's
// places, the others keep their order (a permute)
Status Tracer::lower_movedim(const OpCall& c) {
  const int64_t rank = static_cast<int64_t>(graph_.node(c.x).rank());
  std::vector<int64_t> src, dst;
  bool src_none, dst_none;
  FJ_TRY(dims_arg(c.a[1], c.what + " source", &src, &src_none));
  FJ_TRY(dims_arg(c.a[2], c.what + " destination", &dst, &dst_none));
  if (src_none || dst_none || src.size() != dst.size() || is_sequence(c.a[1]) != is_sequence(c.a[2])) {
    return unsupported(c.what + " with these dims (eager raises)");
  }
  if (rank == 0) return unsupported(c.what + " of a 0-d tensor (not supported)");
  std::vector<int64_t> perm(static_cast<size_t>(rank), -1);
  std::vector<bool> moved(static_cast<size_t>(rank), false);
  for (size_t i = 0; i < src.size(); ++i) {
    int64_t from, to;
    FJ_TRY(norm_dim(src[i], rank, c.what, &from));
    FJ_TRY(norm_dim(dst[i], rank, c.what, &to));
    if (moved[static_cast<size_t>(from)] || perm[static_cast<size_t>(to)] >= 0) return unsupported(c.what + " with a repeated dim (eager raises)");
    perm[static_cast<size_t>(to)] = from;
    moved[static_cast<size_t>(from)] = true;
  }
  size_t next = 0;
  for (int64_t& p : perm) {
    if (p >= 0) continue;
    while (moved[next]) ++next;
    p = static_cast<int64_t>(next++);
  }
  return push_strided_view(graph_.permute(c.x, perm), c);
}

// transpose(input, dim0, dim1)
Status Tracer::lower_transpose(const OpCall& c) {
  int64_t d0, d1;
  FJ_TRY(int_arg(c.a[1], c.what + " dim0", &d0));
  FJ_TRY(int_arg(c.a[2], c.what + " dim1", &d1));
  return push_strided_view(graph_.transpose(c.x, d0, d1), c);
}

// t(input): transpose of a matrix; a tensor of fewer dims is returned as it is
Status Tracer::lower_t(const OpCall& c) {
  const size_t rank = graph_.node(c.x).rank();
  if (rank > 2) return unsupported("t() of a tensor with more than 2 dims (eager raises)");
  if (rank < 2) return push_view(c.x, c.what, c.x);  // a view that changes nothing
  return push_strided_view(graph_.transpose(c.x, 0, 1), c);
}

Status Tracer::lower_unsqueeze(const OpCall& c) {
  int64_t d;
  FJ_TRY(int_arg(c.a[1], c.what + " dim", &d));
  return push_view(graph_.unsqueeze(c.x, d), c.what, c.x);
}

// squeeze(input, dim=None): drops the given dims (all when None) whose size is 1
Status Tracer::lower_squeeze(const OpCall& c) {
  const jit::SymShape xs = graph_.node(c.x).sym;
  const int64_t rank = static_cast<int64_t>(xs.size());
  std::vector<int64_t> dims;
  bool none;
  FJ_TRY(dims_arg(c.a[1], c.what + " dim", &dims, &none));
  std::vector<bool> drop(xs.size(), false);
  if (none) {
    for (size_t d = 0; d < xs.size(); ++d) dims.push_back(static_cast<int64_t>(d));
  }
  for (int64_t d : dims) {
    int64_t k;
    FJ_TRY(norm_dim(d, rank, c.what, &k));
    if (rank == 0) continue;
    const SymExpr& e = xs[static_cast<size_t>(k)];
    bool one = jit::is_const(e, 1);
    if (!e.is_constant() && !(e.lower_bound() && *e.lower_bound() >= 2)) {
      FJ_TRY(guard_truth(jit::eq(e, SymExpr::integer(1)), &one));
    }
    drop[static_cast<size_t>(k)] = one;
  }
  jit::SymShape kept;
  for (size_t d = 0; d < xs.size(); ++d) {
    if (!drop[d]) kept.push_back(xs[d]);
  }
  return push_view(graph_.reshape(c.x, kept), c.what, c.x);
}

Status Tracer::lower_expand(const OpCall& c) {
  jit::SymShape sizes;
  FJ_TRY(sizes_arg(c.a[1], c.what, &sizes, true));
  return expand_to(c, sizes);
}

Status Tracer::lower_expand_as(const OpCall& c) {
  if (!is_tensor(c.a[1])) return unsupported(c.what + " of " + describe(c.a[1]));
  const jit::SymShape sizes = graph_.node(c.a[1].node).sym;  // a copy: expand adds nodes
  return expand_to(c, sizes);
}

Status Tracer::lower_broadcast_to(const OpCall& c) { return lower_expand(c); }

// broadcast_tensors(*tensors): each expanded to their broadcast shape (a view; a tensor
// of that shape already is returned itself, as eager does).
Status Tracer::lower_broadcast_tensors(const OpCall& c) {
  if (c.a[0].method != "*args") return unsupported(c.what + " of one sequence (eager raises TypeError)");
  std::vector<NodeId> xs;
  FJ_TRY(tensor_list(c.a[0], c.what, &xs));
  jit::SymShape shape;
  for (NodeId x : xs) {
    std::vector<SymExpr> assumed;
    auto b = jit::broadcast_sym(shape, graph_.node(x).sym, &assumed);
    if (!b) return unsupported(c.what + ": " + b.error() + " (eager raises)");
    for (const SymExpr& e : assumed) {
      bool holds = false;
      FJ_TRY(guard_truth(e, &holds));
      if (!holds) return unsupported(c.what + " of sizes that do not broadcast (eager raises)");
    }
    shape = *b;
  }
  std::vector<Value> out;
  for (NodeId x : xs) {
    auto r = graph_.expand(x, shape);
    if (!r) return unsupported(c.what + ": " + r.error());
    if (*r != x) {
      mark_noncontig(*r);
      mark_view(*r, x);
    }
    out.push_back(Value::tensor(*r));
  }
  Value t = Value::sequence(ValueKind::Tuple, std::move(out));
  t.identity = next_identity_++;
  push(std::move(t));
  return ok();
}

// flatten(input, start_dim=0, end_dim=-1)
Status Tracer::lower_flatten(const OpCall& c) {
  const jit::SymShape xs = graph_.node(c.x).sym;
  const int64_t rank = static_cast<int64_t>(xs.size());
  int64_t s0, s1;
  FJ_TRY(int_arg(c.a[1], c.what + " start_dim", &s0));
  FJ_TRY(int_arg(c.a[2], c.what + " end_dim", &s1));
  FJ_TRY(norm_dim(s0, rank, c.what, &s0));
  FJ_TRY(norm_dim(s1, rank, c.what, &s1));
  if (s0 > s1) return unsupported(c.what + ": start_dim after end_dim (eager raises)");
  if (rank == 0) return push_built(graph_.reshape(c.x, {SymExpr::integer(1)}), c.what);
  jit::SymShape sizes(xs.begin(), xs.begin() + s0);
  SymExpr merged = SymExpr::integer(1);
  for (int64_t d = s0; d <= s1; ++d) merged = jit::mul(merged, xs[static_cast<size_t>(d)]);
  sizes.push_back(merged);
  sizes.insert(sizes.end(), xs.begin() + s1 + 1, xs.end());
  auto r = graph_.reshape(c.x, sizes);
  if (!r) return unsupported(c.what + ": " + r.error());
  bool is_view = false;
  FJ_TRY(reshape_is_view(c.x, sizes, &is_view));
  if (!is_view) return push_built(r, c.what);  // a copy
  return push_view(r, c.what, c.x);
}

// contiguous(input, memory_format=None): x itself, or a contiguous copy
Status Tracer::lower_contiguous(const OpCall& c) {
  if (!is_none(c.a[1])) return unsupported(c.what + " with a memory_format");
  if (!may_be_noncontig(c.x) && guard_inputs_contiguous(c.x)) {
    push(c.a[0]);
    return ok();
  }
  // A copy with a contiguous layout (x * 1 keeps every value, -0.0 and NaN included).
  const bool is_bool = graph_.node(c.x).dtype == jit::DType::Bool;
  const NodeId one = is_bool ? graph_.scalar(1, jit::ScalarKind::Bool) : graph_.scalar_int(1);
  return push_built(graph_.pointwise(is_bool ? jit::Op::BitwiseAnd : jit::Op::Mul, {c.x, one}), c.what);
}

// detach(input): a view of the input of its own, as eager's, recorded without grad
// so that no gradient flows through it.
Status Tracer::lower_detach(const OpCall& c) {
  auto a = graph_.alias(c.x);
  if (!a) return unsupported(c.what + ": " + a.error());
  record_without_grad(*a);
  detached_.insert(*a);
  mark_view(*a, c.x);
  if (may_be_noncontig(c.x)) mark_noncontig(*a);
  push(Value::tensor(*a));
  return ok();
}

// narrow(input, dim, start, length): a slice, start negative counting from the end
Status Tracer::lower_narrow(const OpCall& c) {
  int64_t d;
  FJ_TRY(int_arg(c.a[1], c.what + " dim", &d));
  const int64_t rank = static_cast<int64_t>(graph_.node(c.x).rank());
  FJ_TRY(norm_dim(d, rank, c.what, &d));
  if (rank == 0) return unsupported(c.what + " of a 0-d tensor (eager raises)");
  const SymExpr n = graph_.node(c.x).sym[static_cast<size_t>(d)];
  const auto st = as_sym(c.a[2]), len = as_sym(c.a[3]);
  if (!st || !len || st->type() != jit::SymType::Int || len->type() != jit::SymType::Int) {
    return unsupported(c.what + " with these bounds");
  }
  bool neg = false;
  FJ_TRY(guard_truth(jit::lt(*st, SymExpr::integer(0)), &neg));
  const SymExpr start = neg ? jit::add(*st, n) : *st;
  const SymExpr zero = SymExpr::integer(0);
  bool in = false;
  const SymExpr within = jit::logical_and(jit::logical_and(jit::ge(start, zero), jit::ge(*len, zero)), jit::le(jit::add(start, *len), n));
  FJ_TRY(guard_truth(within, &in));
  if (!in) return unsupported(c.what + " out of range (eager raises)");
  SymExpr length;
  FJ_TRY(size_expr(*len, c.what, &length, false));
  auto r = graph_.slice(c.x, d, start, length, 1);
  if (!r) return unsupported(c.what + ": " + r.error());
  if (d != 0 && *r != c.x) mark_noncontig(*r);
  return push_view(r, c.what, c.x);
}

// diagonal(input, offset=0, dim1=0, dim2=1) of a matrix whose elements are laid out
// contiguously: the flat view, sliced from the diagonal's first element with a step
// of cols + 1 (the number of columns made a constant, guarded; 2 for no columns), the
// strides eager's view has. Other dims and layouts are left to eager's diagonal.
Status Tracer::lower_diagonal(const OpCall& c) {
  int64_t offset, d1, d2;
  FJ_TRY(int_arg(c.a[1], c.what + " offset", &offset));
  FJ_TRY(int_arg(c.a[2], c.what + " dim1", &d1));
  FJ_TRY(int_arg(c.a[3], c.what + " dim2", &d2));
  const jit::SymShape& xs = graph_.node(c.x).sym;
  if (xs.size() != 2) return unsupported(c.what + " of a tensor that is not a matrix (not supported yet)");
  FJ_TRY(norm_dim(d1, 2, c.what, &d1));
  FJ_TRY(norm_dim(d2, 2, c.what, &d2));
  if (d1 != 0 || d2 != 1) return unsupported(c.what + " over dims (" + std::to_string(d1) + ", " + std::to_string(d2) + ") (not supported yet)");
  int64_t cols;
  FJ_TRY(specialize(xs[1], c.what + " of a matrix (its step)", &cols));
  const SymExpr rows = xs[0], ncols = SymExpr::integer(cols), zero = SymExpr::integer(0);
  // its length: min(rows, cols - offset) above the main diagonal, min(rows + offset, cols) below
  const SymExpr a = offset >= 0 ? rows : jit::add(rows, SymExpr::integer(offset));
  const SymExpr b = offset >= 0 ? SymExpr::integer(cols - offset) : ncols;
  bool a_less = false, empty = false;
  FJ_TRY(guard_truth(jit::lt(a, b), &a_less));
  const SymExpr n = a_less ? a : b;
  FJ_TRY(guard_truth(jit::le(n, zero), &empty));
  auto flat = graph_.reshape(c.x, {jit::mul(rows, ncols)});
  if (!flat) return unsupported(c.what + ": " + flat.error());
  bool is_view = false;
  FJ_TRY(reshape_is_view(c.x, graph_.node(*flat).sym, &is_view));
  if (!is_view) return unsupported(c.what + " of a matrix not laid out contiguously (not supported yet)");
  mark_view(*flat, c.x);
  const int64_t start = empty ? 0 : offset >= 0 ? offset : -offset * cols;
  auto r = graph_.slice(*flat, 0, SymExpr::integer(start), empty ? zero : n, std::max<int64_t>(cols, 1) + 1);
  if (!r) return unsupported(c.what + ": " + r.error());
  if (*r != *flat) mark_noncontig(*r);
  return push_view(r, c.what, *flat);
}

// select(input, dim, index)
Status Tracer::lower_select(const OpCall& c) {
  int64_t d;
  FJ_TRY(dim_of(c, 1, &d));
  const SymExpr n = graph_.node(c.x).sym[static_cast<size_t>(d)];
  SymExpr i;
  FJ_TRY(index_in(c, c.a[2], n, &i));
  auto r = graph_.select(c.x, d, i);
  if (!r) return unsupported(c.what + ": " + r.error());
  if (d != 0) mark_noncontig(*r);
  return push_view(r, c.what, c.x);
}

// unbind(input, dim=0): one select per index, at most 64
Status Tracer::lower_unbind(const OpCall& c) {
  int64_t d, n;
  FJ_TRY(dim_of(c, 1, &d));
  FJ_TRY(specialize(graph_.node(c.x).sym[static_cast<size_t>(d)], c.what + " size", &n));
  if (n > 64) return unsupported(c.what + " into more than 64 pieces");
  return push_pieces(c.x, d, std::vector<int64_t>(static_cast<size_t>(n), 1), true, c.what);
}

// flip(input, *dims): a copy
Status Tracer::lower_flip(const OpCall& c) {
  std::vector<int64_t> dims;
  bool none;
  FJ_TRY(dims_arg(c.a[1], c.what + " dims", &dims, &none));
  if (none) return unsupported(c.what + " without dims");
  return push_built(graph_.flip(c.x, dims), c.what);
}

// ---- one lowering per row: indexing ----

// index_select(input, dim, index): index 0-d or 1-d
Status Tracer::lower_index_select(const OpCall& c) {
  int64_t d;
  FJ_TRY(int_arg(c.a[1], c.what + " dim", &d));
  if (!is_tensor(c.a[2])) return unsupported(c.what + " index " + describe(c.a[2]));
  NodeId idx = c.a[2].node;
  if (graph_.node(idx).rank() > 1) return unsupported(c.what + " with an index of rank > 1 (eager raises)");
  if (graph_.node(idx).rank() == 0) {
    auto r = graph_.reshape(idx, {SymExpr::integer(1)});
    if (!r) return unsupported(c.what + ": " + r.error());
    idx = *r;
  }
  if (graph_.node(c.x).rank() == 0) return unsupported(c.what + " of a 0-d tensor");
  return push_built(graph_.index_select(c.x, d, idx), c.what);
}

// gather(input, dim, index, sparse_grad=False)
Status Tracer::lower_gather(const OpCall& c) {
  int64_t d;
  FJ_TRY(int_arg(c.a[1], c.what + " dim", &d));
  if (!is_tensor(c.a[2])) return unsupported(c.what + " index " + describe(c.a[2]));
  if (!(c.a[3].kind == ValueKind::Const && c.a[3].obj.get() == Py_False)) return unsupported(c.what + " with sparse_grad");
  return push_built(graph_.gather(c.x, d, c.a[2].node), c.what);
}

// F.embedding(input, weight, ...): rows of weight; max_norm would renormalize in place
Status Tracer::lower_embedding(const OpCall& c) {
  const Value& weight = c.a[1];
  if (!is_tensor(weight)) return unsupported(c.what + " weight " + describe(weight));
  if (!is_none(c.a[3])) return unsupported(c.what + " with max_norm (it renormalizes the weight in place)");
  if (graph_.node(weight.node).rank() != 2) return unsupported(c.what + " with a weight that is not 2-d (eager raises)");
  return push_built(graph_.index_select(weight.node, 0, c.x), c.what);
}

// x[index] of a tensor: ints, slices, None, Ellipsis, and at most one integer tensor.
Status Tracer::subscript(const Value& xv, const Value& index) {
  const std::string what = "indexing a tensor";
  std::vector<Value> items;
  if (index.kind == ValueKind::Tuple) {
    items = index.items;
  } else if (index.kind == ValueKind::Const && !is_opaque(index) && PyTuple_CheckExact(index.obj.get())) {
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(index.obj.get()); ++i) {
      items.push_back(Value::constant(PyRef::borrow(PyTuple_GET_ITEM(index.obj.get(), i))));
    }
  } else {
    items.push_back(index);
  }
  enum class K { Int, Slice, None, Ellipsis, Tensor };
  std::vector<K> kinds;
  size_t consumed = 0, ellipses = 0, tensors = 0;
  for (const Value& v : items) {
    PyObject* o = v.kind == ValueKind::Const && !is_opaque(v) ? v.obj.get() : nullptr;
    K k;
    if (o == Py_None) k = K::None;
    else if (o == Py_Ellipsis) k = K::Ellipsis;
    else if ((o != nullptr && PySlice_Check(o)) || v.kind == ValueKind::Slice) k = K::Slice;
    else if ((o != nullptr && PyLong_CheckExact(o)) || (v.kind == ValueKind::Sym && v.expr.type() == jit::SymType::Int)) k = K::Int;
    else if (is_tensor(v)) k = K::Tensor;
    else if (is_int_list(v)) k = K::Tensor;  // x[:, [0, -1]]: advanced indexing, as with a tensor of them
    else return unsupported(what + " with " + describe(v) + " (not supported)");
    if (k == K::Tensor && v.kind == ValueKind::List) {
      ++tensors;
    } else if (k == K::Tensor) {
      const jit::DType d = graph_.node(v.node).dtype;
      if (d != jit::DType::Int64 && d != jit::DType::Int32) return unsupported(what + " with a " + std::string(jit::dtype_name(d)) + " tensor (not supported)");
      ++tensors;
    }
    ellipses += k == K::Ellipsis;
    consumed += k == K::Int || k == K::Slice || k == K::Tensor;
    kinds.push_back(k);
  }
  NodeId x = xv.node;
  const size_t rank = graph_.node(x).rank();
  if (ellipses > 1) return unsupported(what + " with several ellipses (eager raises)");
  if (tensors > 1) {  // x[rows, cols]: indices broadcast together; torch's own indexing as an extern call
    static PyObject* const getitem = [] {
      PyObject* tensor = guards::torch_refs().tensor_type;
      PyObject* f = tensor ? PyObject_GetAttrString(tensor, "__getitem__") : nullptr;
      if (f == nullptr) guards::clear_error();
      return f;  // kept for the process
    }();
    if (getitem == nullptr) return unsupported(what + " with several tensors (torch.Tensor.__getitem__ not found)");
    CallSite c;
    c.callable = Value::constant(PyRef::borrow(getitem));
    c.args = {xv, Value::sequence(ValueKind::Tuple, items)};
    return extern_call(c);
  }
  if (consumed > rank) return unsupported(what + ": too many indices (eager raises)");
  bool noncontig = may_be_noncontig(x);
  int64_t d = 0;
  int64_t tensor_dim = -1;
  NodeId tensor_index = -1;
  for (size_t i = 0; i < items.size(); ++i) {
    const Value& v = items[i];
    switch (kinds[i]) {
      case K::None: {
        auto r = graph_.unsqueeze(x, d);
        if (!r) return unsupported(what + ": " + r.error());
        mark_view(*r, x);
        x = *r;
        ++d;
        break;
      }
      case K::Ellipsis:
        d += static_cast<int64_t>(rank - consumed);
        break;
      case K::Tensor:
        tensor_dim = d;
        if (v.kind == ValueKind::List) FJ_TRY(int_list_index(v, graph_.node(x).sym[static_cast<size_t>(d)], &tensor_index));
        else tensor_index = v.node;
        ++d;
        break;
      case K::Int:
        FJ_TRY(subscript_int(v, d, &x, &noncontig));
        break;
      case K::Slice:
        FJ_TRY(subscript_slice(v, d, &x, &noncontig));
        ++d;
        break;
    }
  }
  if (tensor_index >= 0) {
    auto r = graph_.index_select(x, tensor_dim, tensor_index, /*wrap_negative=*/true);
    if (!r) return unsupported(what + ": " + r.error());
    x = *r;
    noncontig = false;  // advanced indexing copies
  } else if (x == xv.node) {  // y[:], y[...]: a view of y of its own, as eager's
    auto a = graph_.alias(x);
    if (!a) return unsupported(what + ": " + a.error());
    mark_view(*a, x);
    x = *a;
  }
  if (noncontig) mark_noncontig(x);
  push(Value::tensor(x));
  sync_scalar_inputs();
  return ok();
}

// A list of ints (constants or symbolic), as a tensor index: torch makes it an int64
// tensor. Empty lists and bools (a mask) are left out.
bool Tracer::is_int_list(const Value& v) {
  if (v.kind != ValueKind::List || v.obj || v.items.empty()) return false;
  return std::all_of(v.items.begin(), v.items.end(), [](const Value& i) {
    return (i.kind == ValueKind::Const && !is_opaque(i) && PyLong_CheckExact(i.obj.get())) ||
           (i.kind == ValueKind::Sym && i.expr.type() == jit::SymType::Int && !is_numpy_scalar(i));  // NumPy's: torch's own rules
  });
}

// The int64 index tensor of an int list indexing a dim of size n; each index is
// checked against n now (guarded), as eager raises IndexError for one out of range.
Status Tracer::int_list_index(const Value& list, const SymExpr& n, NodeId* out) {
  const std::string what = "indexing a tensor with a list";
  std::vector<NodeId> parts;
  for (const Value& v : list.items) {
    const auto e = as_sym(v);
    if (!e) return unsupported(what + " with " + describe(v) + " (not supported)");
    bool neg = false;
    FJ_TRY(guard_truth(jit::lt(*e, SymExpr::integer(0)), &neg));
    const SymExpr idx = neg ? jit::add(*e, n) : *e;
    bool in = false;
    FJ_TRY(guard_truth(jit::logical_and(jit::ge(idx, SymExpr::integer(0)), jit::lt(idx, n)), &in));
    if (!in) return unsupported(what + ": index out of range (eager raises)");
    auto scalar = operand(Value::sym(idx));
    if (!scalar) return unsupported(what + ": " + scalar.error());
    auto one = graph_.full({SymExpr::integer(1)}, *scalar, jit::DType::Int64);
    if (!one) return unsupported(what + ": " + one.error());
    parts.push_back(*one);
  }
  if (parts.size() == 1) {
    *out = parts[0];
    return ok();
  }
  auto c = graph_.cat(parts, 0);
  if (!c) return unsupported(what + ": " + c.error());
  *out = *c;
  return ok();
}

// x[..., i, ...] at dim d: a select, i negative counting from the end.
Status Tracer::subscript_int(const Value& v, int64_t d, NodeId* x, bool* noncontig) {
  const std::string what = "indexing a tensor";
  const SymExpr n = graph_.node(*x).sym[static_cast<size_t>(d)];
  const auto e = as_sym(v);
  bool neg = false;
  FJ_TRY(guard_truth(jit::lt(*e, SymExpr::integer(0)), &neg));
  const SymExpr idx = neg ? jit::add(*e, n) : *e;
  bool in = false;
  FJ_TRY(guard_truth(jit::logical_and(jit::ge(idx, SymExpr::integer(0)), jit::lt(idx, n)), &in));
  if (!in) return unsupported(what + ": index out of range (eager raises)");
  auto r = graph_.select(*x, d, idx);
  if (!r) return unsupported(what + ": " + r.error());
  *noncontig = *noncontig || d != 0;
  mark_view(*r, *x);
  *x = *r;
  return ok();
}

// A slice bound as Python clamps it: negative counts from the end, then into [0, n].
Status Tracer::slice_bound(const Value& b, const SymExpr& n, const SymExpr& dflt, SymExpr* out) {
  if (is_none(b)) {
    *out = dflt;
    return ok();
  }
  const auto e = as_sym(b);
  if (!e || e->type() != jit::SymType::Int) return unsupported("indexing a tensor with slice bound " + describe(b));
  bool neg = false;
  FJ_TRY(guard_truth(jit::lt(*e, SymExpr::integer(0)), &neg));
  if (neg) {
    const SymExpr w = jit::add(*e, n);
    bool pos = false;
    FJ_TRY(guard_truth(jit::ge(w, SymExpr::integer(0)), &pos));
    *out = pos ? w : SymExpr::integer(0);
  } else {
    bool within = false;
    FJ_TRY(guard_truth(jit::le(*e, n), &within));
    *out = within ? *e : n;
  }
  return ok();
}

// x[..., start:stop:step, ...] at dim d: a strided slice (a positive step).
Status Tracer::subscript_slice(const Value& v, int64_t d, NodeId* x, bool* noncontig) {
  const std::string what = "indexing a tensor";
  Value parts[3];
  if (v.kind == ValueKind::Slice) {
    for (int k = 0; k < 3; ++k) parts[k] = v.items[static_cast<size_t>(k)];
  } else {
    auto* sl = reinterpret_cast<PySliceObject*>(v.obj.get());
    parts[0] = Value::constant(PyRef::borrow(sl->start));
    parts[1] = Value::constant(PyRef::borrow(sl->stop));
    parts[2] = Value::constant(PyRef::borrow(sl->step));
  }
  int64_t step = 1;
  if (!is_none(parts[2])) {
    FJ_TRY(int_arg(parts[2], what + " step", &step));
    if (step <= 0) return unsupported(what + " with a step below 1 (eager raises)");
  }
  const SymExpr n = graph_.node(*x).sym[static_cast<size_t>(d)];
  SymExpr start, stop;
  FJ_TRY(slice_bound(parts[0], n, SymExpr::integer(0), &start));
  FJ_TRY(slice_bound(parts[1], n, n, &stop));
  bool nonempty = false;
  FJ_TRY(guard_truth(jit::gt(stop, start), &nonempty));
  SymExpr length = SymExpr::integer(0);
  if (nonempty) {
    length = jit::floordiv(jit::add(jit::sub(stop, start), SymExpr::integer(step - 1)), SymExpr::integer(step));
    FJ_TRY(size_expr(length, what, &length, false));
  }
  auto r = graph_.slice(*x, d, start, length, step);
  if (!r) return unsupported(what + ": " + r.error());
  *noncontig = *noncontig || (*r != *x && (d != 0 || step != 1));
  mark_view(*r, *x);
  *x = *r;
  return ok();
}

}  // namespace fj::interp
