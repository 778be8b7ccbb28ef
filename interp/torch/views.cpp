// Views and movement from the op table (view, permute, split, cat, ...), indexing
// ops (index_select, gather, embedding), Python subscripts of tensors (x[i, 1:n:2,
// None, ..., idx]) and BUILD_SLICE.
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

Status Tracer::view_op(const PyOp& op, const std::vector<Value>& a) {
  using T = TensorOp;
  const std::string what = op.name + "()";
  if (op.tensor_op == T::Cat || op.tensor_op == T::Stack) {
    std::vector<NodeId> xs;
    FJ_TRY(tensor_list(a[0], what, &xs));
    int64_t dim;
    FJ_TRY(int_arg(a[1], what + " dim", &dim));
    if (xs.empty()) return unsupported(what + " of an empty list (eager raises)");
    if (op.tensor_op == T::Stack) {
      const int64_t r = static_cast<int64_t>(graph_.node(xs[0]).rank()) + 1;
      if (dim < -r || dim >= r) return unsupported(what + " dim out of range (eager raises)");
      for (NodeId& x : xs) {
        if (static_cast<int64_t>(graph_.node(x).rank()) + 1 != r) return unsupported(what + " of tensors of different ranks");
        auto u = graph_.unsqueeze(x, dim);
        if (!u) return unsupported(what + ": " + u.error());
        x = *u;
      }
    }
    return push_built(graph_.cat(xs, dim), what);
  }
  const NodeId x = a[0].node;
  const jit::SymShape xs = graph_.node(x).sym;
  // Equal in this call, and guarded so (a split of s2 into 4 * (s2 // 4)).
  auto split_equal = [&](const SymExpr& a, const SymExpr& b) {
    const SymExpr same = jit::eq(a, b);
    if (auto c = same.as_bool()) return *c;
    const auto v = same.eval(hints_);
    if (!v || !std::holds_alternative<bool>(*v) || !std::get<bool>(*v)) return false;
    entry_->guards.add_expr(same, readable(same));
    return true;
  };
  const int64_t rank = static_cast<int64_t>(xs.size());
  auto norm = [&](int64_t d, int64_t r, int64_t* out) -> Status {
    const int64_t rr = std::max<int64_t>(r, 1);
    if (d < -rr || d >= rr) return unsupported(what + ": dim out of range (eager raises)");
    *out = d < 0 ? d + rr : d;
    return ok();
  };
  // An index into a dim of size n, as Python's: negative counts from the end; out of
  // range ends the trace (eager raises). Guards keep the decision.
  auto index_in = [&](const Value& v, const SymExpr& n, SymExpr* out) -> Status {
    const auto e = as_sym(v);
    if (!e || e->type() != jit::SymType::Int) return unsupported(what + " index " + describe(v));
    bool neg = false;
    FJ_TRY(guard_truth(jit::lt(*e, SymExpr::integer(0)), &neg));
    const SymExpr i = neg ? jit::add(*e, n) : *e;
    bool in = false;
    FJ_TRY(guard_truth(jit::logical_and(jit::ge(i, SymExpr::integer(0)), jit::lt(i, n)), &in));
    if (!in) return unsupported(what + ": index out of range (eager raises)");
    *out = i;
    return ok();
  };
  // Pieces of dim d: (start, length) each, as split/chunk/unbind make them.
  auto pieces = [&](int64_t d, const std::vector<int64_t>& lengths) -> Status {
    std::vector<Value> out;
    int64_t start = 0;
    for (int64_t len : lengths) {
      auto p = graph_.slice(x, d, SymExpr::integer(start), SymExpr::integer(len), 1);
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
  };
  switch (op.tensor_op) {
    case T::View: case T::Reshape: {
      if (a[1].kind == ValueKind::Const && dtype_from_torch(a[1].obj.get())) return unsupported(what + " to a dtype");
      jit::SymShape sizes;
      FJ_TRY(sizes_arg(a[1], what, &sizes, true));
      auto r = graph_.reshape(x, sizes);
      if (!r) return unsupported(what + ": " + r.error());
      if (may_be_noncontig(x) && !only_splits(xs, graph_.node(*r).sym, split_equal)) {
        if (op.tensor_op == T::View) return unsupported("view() that merges dims of a non-contiguous tensor (eager raises)");
        return push_built(r, what);  // reshape copies: a contiguous result
      }
      return push_view(r, what, x);
    }
    case T::Permute: {
      // torch.permute(x, dims) takes a sequence (only the method packs loose ints).
      if (op.varargs < 0 && (a[1].kind == ValueKind::Sym ||
                             (a[1].kind == ValueKind::Const && a[1].obj && PyLong_Check(a[1].obj.get())))) {
        return unsupported(what + " with an int for dims (eager raises: dims must be a tuple)");
      }
      std::vector<int64_t> dims;
      bool none;
      FJ_TRY(dims_arg(a[1], what + " dims", &dims, &none));
      if (none) return unsupported(what + " without dims");
      auto r = graph_.permute(x, dims);
      if (!r) return unsupported(what + ": " + r.error());
      if (*r != x) mark_noncontig(*r);
      return push_view(r, what, x);
    }
    case T::Transpose: case T::T: {
      int64_t d0 = 0, d1 = 1;
      if (op.tensor_op == T::T) {
        if (rank > 2) return unsupported("t() of a tensor with more than 2 dims (eager raises)");
        if (rank < 2) {
          push(a[0]);
          return ok();
        }
      } else {
        FJ_TRY(int_arg(a[1], what + " dim0", &d0));
        FJ_TRY(int_arg(a[2], what + " dim1", &d1));
      }
      auto r = graph_.transpose(x, d0, d1);
      if (!r) return unsupported(what + ": " + r.error());
      if (*r != x) mark_noncontig(*r);
      return push_view(r, what, x);
    }
    case T::Unsqueeze: {
      int64_t d;
      FJ_TRY(int_arg(a[1], what + " dim", &d));
      return push_view(graph_.unsqueeze(x, d), what, x);
    }
    case T::Squeeze: {
      std::vector<int64_t> dims;
      bool none;
      FJ_TRY(dims_arg(a[1], what + " dim", &dims, &none));
      std::vector<bool> drop(xs.size(), false);
      if (none) {
        for (size_t d = 0; d < xs.size(); ++d) dims.push_back(static_cast<int64_t>(d));
      }
      for (int64_t d : dims) {
        int64_t k;
        FJ_TRY(norm(d, rank, &k));
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
      return push_view(graph_.reshape(x, kept), what, x);
    }
    case T::Expand: case T::ExpandAs: case T::BroadcastTo: {
      jit::SymShape sizes;
      if (op.tensor_op == T::ExpandAs) {
        if (!is_tensor(a[1])) return unsupported(what + " of " + describe(a[1]));
        sizes = graph_.node(a[1].node).sym;
      } else {
        FJ_TRY(sizes_arg(a[1], what, &sizes, true));
      }
      auto r = graph_.expand(x, sizes);
      if (!r) return unsupported(what + ": " + r.error());
      if (*r != x) mark_noncontig(*r);
      return push_view(r, what, x);
    }
    case T::Flatten: {
      int64_t s0, s1;
      FJ_TRY(int_arg(a[1], what + " start_dim", &s0));
      FJ_TRY(int_arg(a[2], what + " end_dim", &s1));
      FJ_TRY(norm(s0, rank, &s0));
      FJ_TRY(norm(s1, rank, &s1));
      if (s0 > s1) return unsupported(what + ": start_dim after end_dim (eager raises)");
      if (rank == 0) return push_built(graph_.reshape(x, {SymExpr::integer(1)}), what);
      jit::SymShape sizes(xs.begin(), xs.begin() + s0);
      SymExpr merged = SymExpr::integer(1);
      for (int64_t d = s0; d <= s1; ++d) merged = jit::mul(merged, xs[static_cast<size_t>(d)]);
      sizes.push_back(merged);
      sizes.insert(sizes.end(), xs.begin() + s1 + 1, xs.end());
      auto r = graph_.reshape(x, sizes);
      if (!r) return unsupported(what + ": " + r.error());
      if (may_be_noncontig(x) && !only_splits(xs, sizes, split_equal)) return push_built(r, what);  // a copy
      return push_view(r, what, x);
    }
    case T::Contiguous: {
      if (!is_none(a[1])) return unsupported(what + " with a memory_format");
      if (!may_be_noncontig(x)) {
        push(a[0]);
        return ok();
      }
      // A copy with a contiguous layout (x * 1 keeps every value, -0.0 and NaN included).
      const bool is_bool = graph_.node(x).dtype == jit::DType::Bool;
      const NodeId one = is_bool ? graph_.scalar(1, jit::ScalarKind::Bool) : graph_.scalar_int(1);
      return push_built(graph_.pointwise(is_bool ? jit::Op::BitwiseAnd : jit::Op::Mul, {x, one}), what);
    }
    case T::Narrow: {
      int64_t d;
      FJ_TRY(int_arg(a[1], what + " dim", &d));
      FJ_TRY(norm(d, rank, &d));
      if (rank == 0) return unsupported(what + " of a 0-d tensor (eager raises)");
      const SymExpr n = xs[static_cast<size_t>(d)];
      const auto st = as_sym(a[2]), len = as_sym(a[3]);
      if (!st || !len || st->type() != jit::SymType::Int || len->type() != jit::SymType::Int) {
        return unsupported(what + " with these bounds");
      }
      bool neg = false;
      FJ_TRY(guard_truth(jit::lt(*st, SymExpr::integer(0)), &neg));
      const SymExpr start = neg ? jit::add(*st, n) : *st;
      bool in = false;
      FJ_TRY(guard_truth(jit::logical_and(jit::logical_and(jit::ge(start, SymExpr::integer(0)), jit::ge(*len, SymExpr::integer(0))),
                                          jit::le(jit::add(start, *len), n)), &in));
      if (!in) return unsupported(what + " out of range (eager raises)");
      SymExpr length;
      FJ_TRY(size_expr(*len, what, &length, false));
      auto r = graph_.slice(x, d, start, length, 1);
      if (!r) return unsupported(what + ": " + r.error());
      if (d != 0 && *r != x) mark_noncontig(*r);
      return push_view(r, what, x);
    }
    case T::Select: {
      int64_t d;
      FJ_TRY(int_arg(a[1], what + " dim", &d));
      if (rank == 0) return unsupported(what + " of a 0-d tensor (eager raises)");
      FJ_TRY(norm(d, rank, &d));
      SymExpr i;
      FJ_TRY(index_in(a[2], xs[static_cast<size_t>(d)], &i));
      auto r = graph_.select(x, d, i);
      if (!r) return unsupported(what + ": " + r.error());
      if (d != 0) mark_noncontig(*r);
      return push_view(r, what, x);
    }
    case T::Unbind: {
      int64_t d, n;
      FJ_TRY(int_arg(a[1], what + " dim", &d));
      if (rank == 0) return unsupported(what + " of a 0-d tensor (eager raises)");
      FJ_TRY(norm(d, rank, &d));
      FJ_TRY(specialize(xs[static_cast<size_t>(d)], what + " size", &n));
      if (n > 64) return unsupported(what + " into more than 64 pieces");
      std::vector<Value> out;
      for (int64_t i = 0; i < n; ++i) {
        auto r = graph_.select(x, d, SymExpr::integer(i));
        if (!r) return unsupported(what + ": " + r.error());
        if (d != 0 || may_be_noncontig(x)) mark_noncontig(*r);
        mark_view(*r, x);
        out.push_back(Value::tensor(*r));
      }
      Value t = Value::sequence(ValueKind::Tuple, std::move(out));
      t.identity = next_identity_++;
      push(std::move(t));
      return ok();
    }
    case T::Split: case T::Chunk: {
      int64_t d, n;
      FJ_TRY(int_arg(a[2], what + " dim", &d));
      if (rank == 0) return unsupported(what + " of a 0-d tensor (eager raises)");
      FJ_TRY(norm(d, rank, &d));
      FJ_TRY(specialize(xs[static_cast<size_t>(d)], what + " size", &n));
      std::vector<int64_t> lengths;
      const Value& arg = a[1];
      if (op.tensor_op == T::Split && (arg.kind == ValueKind::Tuple || arg.kind == ValueKind::List ||
                                       (arg.kind == ValueKind::Const && (PyTuple_Check(arg.obj.get()) || PyList_Check(arg.obj.get()))))) {
        bool none;
        FJ_TRY(dims_arg(arg, what + " sections", &lengths, &none));
        int64_t total = 0;
        for (int64_t l : lengths) {
          if (l < 0) return unsupported(what + " with a negative section (eager raises)");
          total += l;
        }
        if (total != n) return unsupported(what + " sections that do not add up (eager raises)");
      } else {
        int64_t k;
        FJ_TRY(int_arg(arg, what + " size", &k));
        if (k <= 0) return unsupported(what + " with a size below 1 (eager raises or returns nothing useful)");
        if (op.tensor_op == T::Chunk) k = (n + k - 1) / k;
        if (k == 0) return unsupported(what + " of an empty dim");
        for (int64_t start = 0; start < n; start += k) lengths.push_back(std::min(k, n - start));
        if (lengths.empty()) lengths.push_back(0);
      }
      if (lengths.size() > 64) return unsupported(what + " into more than 64 pieces");
      return pieces(d, lengths);
    }
    case T::Flip: {
      std::vector<int64_t> dims;
      bool none;
      FJ_TRY(dims_arg(a[1], what + " dims", &dims, &none));
      if (none) return unsupported(what + " without dims");
      return push_built(graph_.flip(x, dims), what);
    }
    case T::IndexSelect: {
      int64_t d;
      FJ_TRY(int_arg(a[1], what + " dim", &d));
      if (!is_tensor(a[2])) return unsupported(what + " index " + describe(a[2]));
      NodeId idx = a[2].node;
      if (graph_.node(idx).rank() > 1) return unsupported(what + " with an index of rank > 1 (eager raises)");
      if (graph_.node(idx).rank() == 0) {
        auto r = graph_.reshape(idx, {SymExpr::integer(1)});
        if (!r) return unsupported(what + ": " + r.error());
        idx = *r;
      }
      if (rank == 0) return unsupported(what + " of a 0-d tensor");
      return push_built(graph_.index_select(x, d, idx), what);
    }
    case T::Gather: {
      int64_t d;
      FJ_TRY(int_arg(a[1], what + " dim", &d));
      if (!is_tensor(a[2])) return unsupported(what + " index " + describe(a[2]));
      if (!(a[3].kind == ValueKind::Const && a[3].obj.get() == Py_False)) return unsupported(what + " with sparse_grad");
      return push_built(graph_.gather(x, d, a[2].node), what);
    }
    case T::Embedding: {
      if (!is_tensor(a[1])) return unsupported(what + " weight " + describe(a[1]));
      if (!is_none(a[3])) return unsupported(what + " with max_norm (it renormalizes the weight in place)");
      if (graph_.node(a[1].node).rank() != 2) return unsupported(what + " with a weight that is not 2-d (eager raises)");
      return push_built(graph_.index_select(a[1].node, 0, x), what);
    }
    default: break;
  }
  return unsupported(what + ": not a view op");
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
    else return unsupported(what + " with " + describe(v) + " (not supported)");
    if (k == K::Tensor) {
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
  if (ellipses > 1 || tensors > 1) return unsupported(what + " with several ellipses or tensors (not supported)");
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
        tensor_index = v.node;
        ++d;
        break;
      case K::Int: {
        const SymExpr n = graph_.node(x).sym[static_cast<size_t>(d)];
        const auto e = as_sym(v);
        bool neg = false;
        FJ_TRY(guard_truth(jit::lt(*e, SymExpr::integer(0)), &neg));
        const SymExpr idx = neg ? jit::add(*e, n) : *e;
        bool in = false;
        FJ_TRY(guard_truth(jit::logical_and(jit::ge(idx, SymExpr::integer(0)), jit::lt(idx, n)), &in));
        if (!in) return unsupported(what + ": index out of range (eager raises)");
        auto r = graph_.select(x, d, idx);
        if (!r) return unsupported(what + ": " + r.error());
        noncontig = noncontig || d != 0;
        mark_view(*r, x);
        x = *r;
        break;
      }
      case K::Slice: {
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
        const SymExpr n = graph_.node(x).sym[static_cast<size_t>(d)];
        // A bound as Python clamps it: negative counts from the end, then into [0, n].
        auto bound = [&](const Value& b, const SymExpr& dflt, SymExpr* out) -> Status {
          if (is_none(b)) {
            *out = dflt;
            return ok();
          }
          const auto e = as_sym(b);
          if (!e || e->type() != jit::SymType::Int) return unsupported(what + " with slice bound " + describe(b));
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
        };
        SymExpr start, stop;
        FJ_TRY(bound(parts[0], SymExpr::integer(0), &start));
        FJ_TRY(bound(parts[1], n, &stop));
        bool nonempty = false;
        FJ_TRY(guard_truth(jit::gt(stop, start), &nonempty));
        SymExpr length = SymExpr::integer(0);
        if (nonempty) {
          length = jit::floordiv(jit::add(jit::sub(stop, start), SymExpr::integer(step - 1)), SymExpr::integer(step));
          FJ_TRY(size_expr(length, what, &length, false));
        }
        auto r = graph_.slice(x, d, start, length, step);
        if (!r) return unsupported(what + ": " + r.error());
        noncontig = noncontig || (*r != x && (d != 0 || step != 1));
        mark_view(*r, x);
        x = *r;
        ++d;
        break;
      }
    }
  }
  if (tensor_index >= 0) {
    auto r = graph_.index_select(x, tensor_dim, tensor_index, /*wrap_negative=*/true);
    if (!r) return unsupported(what + ": " + r.error());
    x = *r;
    noncontig = false;  // advanced indexing copies
  }
  if (noncontig) mark_noncontig(x);
  push(Value::tensor(x));
  sync_scalar_inputs();
  return ok();
}

}  // namespace fj::interp
