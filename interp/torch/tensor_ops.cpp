// The rows of interp/torch/torch_ops.def (Binding::Tensor): the dispatch to each op's
// lowering, the argument readers the lowerings share, and item(). The lowerings are
// by family: reductions.cpp, views.cpp, creation.cpp, matmul.cpp, einsum.cpp.
#include "interp/trace/tracer.h"

#include "interp/runtime/plan.h"

#include <functional>

namespace fj::interp {

using jit::DType;
using jit::NodeId;
using jit::SymExpr;

// ---- helpers ----

void Tracer::sync_scalar_inputs() {
  const auto& exprs = graph_.scalar_input_exprs();
  for (; synced_scalars_ < graph_.size(); ++synced_scalars_) {
    const jit::Node& n = graph_.node(static_cast<NodeId>(synced_scalars_));
    // The plan being built (a branch outcome's after a branch), not always the entry's.
    if (n.op != jit::Op::ScalarInput || static_cast<size_t>(n.index) < plan_->scalar_inputs.size()) continue;
    FJ_CHECK(static_cast<size_t>(n.index) == plan_->scalar_inputs.size() && !exprs[static_cast<size_t>(n.index)].is_null(),
             "a graph scalar input without its expression");
    plan_->scalar_inputs.push_back(exprs[static_cast<size_t>(n.index)]);
    scalar_nodes_.push_back(static_cast<NodeId>(synced_scalars_));
  }
}

Status Tracer::push_built(Expected<NodeId> n, const std::string& what, NodeId layout_of) {
  if (!n) return unsupported(what + ": " + n.error());
  sync_scalar_inputs();
  if (layout_of >= 0 && may_be_noncontig(layout_of)) mark_noncontig(*n);
  push(Value::tensor(*n));
  return ok();
}

Status Tracer::specialize(const SymExpr& e, const std::string& what, int64_t* out) {
  const auto v = e.eval(hints_);
  if (!v || v->index() != 0) return unsupported(what + " has no int value here");
  *out = std::get<int64_t>(*v);
  if (!e.is_constant()) entry_->guards.add_expr(jit::eq(e, SymExpr::integer(*out)), readable(e) + " == " + std::to_string(*out));
  return ok();
}

Status Tracer::int_arg(const Value& v, const std::string& what, int64_t* out) {
  if (v.kind == ValueKind::Sym && v.expr.type() == jit::SymType::Int) return specialize(v.expr, what, out);
  if (v.kind == ValueKind::Const && !is_opaque(v) && PyLong_CheckExact(v.obj.get())) {
    int overflow = 0;
    *out = PyLong_AsLongLongAndOverflow(v.obj.get(), &overflow);
    if (overflow == 0) return ok();
  }
  return unsupported(what + " is " + describe(v) + ", not an int (not supported)");
}

Status Tracer::bool_arg(const Value& v, const std::string& what, bool* out) {
  if (v.kind == ValueKind::Const && !is_opaque(v) && PyBool_Check(v.obj.get())) {
    *out = v.obj.get() == Py_True;
    return ok();
  }
  if (v.kind == ValueKind::Sym && v.expr.type() == jit::SymType::Bool) return guard_truth(v.expr, out);
  return unsupported(what + " is " + describe(v) + ", not a bool (not supported)");
}

Status Tracer::dims_arg(const Value& v, const std::string& what, std::vector<int64_t>* out, bool* none) {
  *none = false;
  out->clear();
  if (is_none(v)) {
    *none = true;
    return ok();
  }
  std::vector<Value> items;
  if (v.kind == ValueKind::Tuple || v.kind == ValueKind::List) {
    items = v.items;
  } else if (v.kind == ValueKind::Const && !is_opaque(v) && (PyTuple_CheckExact(v.obj.get()) || PyList_CheckExact(v.obj.get()))) {
    PyObject* seq = v.obj.get();
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); ++i) {
      items.push_back(Value::constant(PyRef::borrow(PySequence_Fast_GET_ITEM(seq, i))));
    }
  } else {
    int64_t d;
    FJ_TRY(int_arg(v, what, &d));
    out->push_back(d);
    return ok();
  }
  for (const Value& i : items) {
    int64_t d;
    FJ_TRY(int_arg(i, what, &d));
    out->push_back(d);
  }
  return ok();
}

Status Tracer::dtype_arg(const Value& v, const std::string& what, std::optional<DType>* out) {
  if (is_none(v)) {
    *out = std::nullopt;
    return ok();
  }
  if (v.kind == ValueKind::Const && !is_opaque(v)) {
    if (auto d = dtype_from_torch(v.obj.get())) {
      *out = d;
      return ok();
    }
  }
  return unsupported(what + " with dtype " + describe(v) + " (not supported)");
}

Status Tracer::size_expr(const SymExpr& e, const std::string& what, SymExpr* out, bool allow_minus_one) {
  if (e.is_constant()) {
    *out = e;
    return ok();
  }
  const auto v = e.eval(hints_);
  if (!v || v->index() != 0) return unsupported(what + ": a size with no int value here");
  const int64_t n = std::get<int64_t>(*v);
  if (n < 2) {
    if (n < 0 && !(allow_minus_one && n == -1)) return unsupported(what + ": a negative size (eager raises)");
    entry_->guards.add_expr(jit::eq(e, SymExpr::integer(n)), readable(e) + " == " + std::to_string(n));
    *out = SymExpr::integer(n);
    return ok();
  }
  const SymExpr cond = jit::ge(e, SymExpr::integer(2));
  if (!cond.is_constant()) entry_->guards.add_expr(cond, readable(cond));
  *out = e;
  return ok();
}

Status Tracer::sizes_arg(const Value& v, const std::string& what, jit::SymShape* out, bool allow_minus_one) {
  std::vector<Value> items;
  if (v.kind == ValueKind::Tuple || v.kind == ValueKind::List) {
    items = v.items;
  } else if (v.kind == ValueKind::Const && !is_opaque(v) && (PyTuple_Check(v.obj.get()) || PyList_CheckExact(v.obj.get()))) {
    PyObject* seq = v.obj.get();
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); ++i) {
      items.push_back(Value::constant(PyRef::borrow(PySequence_Fast_GET_ITEM(seq, i))));
    }
  } else {
    items.push_back(v);  // a single size: torch.zeros(n) after varargs packing, expand(x, n)
  }
  out->clear();
  for (const Value& i : items) {
    const bool is_int = (i.kind == ValueKind::Sym && i.expr.type() == jit::SymType::Int) ||
                        (i.kind == ValueKind::Const && !is_opaque(i) && PyLong_CheckExact(i.obj.get()));
    const auto e = is_int ? as_sym(i) : std::nullopt;
    if (!e) return unsupported(what + " with size " + describe(i) + " (not supported)");
    SymExpr s;
    FJ_TRY(size_expr(*e, what, &s, allow_minus_one));
    out->push_back(s);
  }
  return ok();
}

Status Tracer::tensor_list(const Value& v, const std::string& what, std::vector<NodeId>* out) {
  if (v.kind != ValueKind::Tuple && v.kind != ValueKind::List) return unsupported(what + " of " + describe(v));
  for (const Value& i : v.items) {
    if (!is_tensor(i)) return unsupported(what + " of " + describe(i));
    out->push_back(i.node);
  }
  return ok();
}

Status Tracer::call_tensor_op(const PyOp& op, const std::vector<Value>& a) {
  using Lowering = Status (Tracer::*)(const OpCall&);
  static constexpr Lowering kLowering[] = {
#define TORCH_OP(Enum, name, Family, First, varargs, ...) &Tracer::lower_##name,
#include "interp/torch/torch_ops.def"
  };
  OpCall c{op, a, op.name + "()", -1};
  if (first_arg(op.tensor_op) == FirstArg::Tensor) {
    if (a.empty() || !is_tensor(a[0])) {
      return unsupported(c.what + " whose first argument is " + (a.empty() ? "missing" : describe(a[0])));
    }
    c.x = a[0].node;
  }
  return (this->*kLowering[static_cast<size_t>(op.tensor_op)])(c);
}

// ---- the Number family ----

// item(input): a Python number of the tensor's kind
// tolist(input): nested lists of its elements as Python numbers, each read from the
// graph as item() is; the sizes are the trace's (guarded), up to 4096 elements.
Status Tracer::lower_tolist(const OpCall& c) {
  const jit::Node& x = graph_.node(c.x);
  const DType d = x.dtype;
  const jit::ScalarKind kind = jit::is_floating(d) ? jit::ScalarKind::Float : d == DType::Bool ? jit::ScalarKind::Bool
                                                                                               : jit::ScalarKind::Int;
  std::vector<int64_t> sizes;
  int64_t numel = 1;
  for (const jit::SymExpr& e : jit::SymShape(x.sym)) {
    PyRef n;
    FJ_TRY(concrete_number(Value::sym(e), c.what + " size", &n));
    sizes.push_back(PyLong_AsLongLong(n.get()));
    numel *= sizes.back();
    if (numel > 4096) return unsupported(c.what + " of more than 4096 elements (not supported yet)");
  }
  std::function<Status(NodeId, size_t, Value*)> build = [&](NodeId t, size_t dim, Value* out) -> Status {
    if (dim == sizes.size()) {
      FJ_TRY(to_number(Value::tensor(t), kind));
      *out = pop();
      return ok();
    }
    std::vector<Value> items(static_cast<size_t>(sizes[dim]));
    for (int64_t i = 0; i < sizes[dim]; ++i) {
      auto row = graph_.select(t, 0, jit::SymExpr::integer(i));
      if (!row) return unsupported(c.what + ": " + row.error());
      FJ_TRY(build(*row, dim + 1, &items[static_cast<size_t>(i)]));
    }
    *out = Value::sequence(ValueKind::List, std::move(items));
    out->identity = next_identity_++;
    return ok();
  };
  Value out;
  FJ_TRY(build(c.x, 0, &out));
  push(std::move(out));
  return ok();
}

Status Tracer::lower_item(const OpCall& c) {
  const DType d = graph_.node(c.x).dtype;
  return to_number(c.a[0], jit::is_floating(d) ? jit::ScalarKind::Float
                           : d == DType::Bool  ? jit::ScalarKind::Bool
                                               : jit::ScalarKind::Int);
}

}  // namespace fj::interp
