// Non-pointwise tensor ops from the op table (Binding::Tensor): argument readers,
// reductions and their decompositions, creation and matmul. Views and indexing are
// in interp/torch/views.cpp, Python numbers read from tensors in interp/trace/ops_numbers.cpp.
#include "interp/trace/tracer.h"

#include <opcode.h>

#include <cmath>

#include "interp/runtime/plan.h"

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
  using T = TensorOp;
  const std::string what = op.name + "()";
  switch (op.tensor_op) {
    case T::Zeros: case T::Ones: case T::Full: case T::Empty: case T::Arange: case T::Linspace: case T::Eye:
      return creation_op(op, a);
    default: break;
  }
  if (op.tensor_op == T::Einsum) return einsum_op(a);
  if (a.empty() || !is_tensor(a[0])) {
    if (op.tensor_op == T::Cat || op.tensor_op == T::Stack) return view_op(op, a);
    return unsupported(what + " whose first argument is " + (a.empty() ? "missing" : describe(a[0])));
  }
  switch (op.tensor_op) {
    case T::Sum: case T::Mean: case T::Prod: case T::Amax: case T::Amin: case T::Max: case T::Min:
    case T::ArgMax: case T::ArgMin: case T::Var: case T::Std: case T::Norm: case T::LogSumExp: case T::Any:
    case T::All: case T::Softmax: case T::LogSoftmax: case T::LayerNorm: case T::CumSum:
      return reduction_op(op, a);
    case T::ZerosLike: case T::OnesLike: case T::FullLike: case T::EmptyLike: case T::Tril: case T::Triu:
      return creation_op(op, a);
    case T::Matmul: case T::Mm: case T::Bmm: case T::Addmm: case T::Linear:
      return matmul_op(op.tensor_op, a);
    case T::Item: {
      const DType d = graph_.node(a[0].node).dtype;
      return to_number(a[0], jit::is_floating(d) ? jit::ScalarKind::Float
                             : d == DType::Bool  ? jit::ScalarKind::Bool
                                                 : jit::ScalarKind::Int);
    }
    default:
      return view_op(op, a);
  }
}

// ---- reductions ----

Status Tracer::reduction_op(const PyOp& op, const std::vector<Value>& a) {
  using T = TensorOp;
  const std::string what = op.name + "()";
  const NodeId x = a[0].node;
  std::vector<int64_t> dims;
  bool no_dim = false;
  auto keepdim_at = [&](size_t i, bool* k) { return bool_arg(a[i], what + " keepdim", k); };
  switch (op.tensor_op) {
    case T::Sum: case T::Mean: case T::Prod: {
      bool keep;
      std::optional<DType> dtype;
      FJ_TRY(dims_arg(a[1], what + " dim", &dims, &no_dim));
      FJ_TRY(keepdim_at(2, &keep));
      FJ_TRY(dtype_arg(a[3], what, &dtype));
      if (op.tensor_op == T::Prod && !no_dim && a[1].kind != ValueKind::Const) return unsupported("prod() over several dims");
      if (op.tensor_op == T::Prod && !no_dim && !PyLong_CheckExact(a[1].obj.get())) return unsupported("prod() over several dims");
      if (no_dim && keep && op.tensor_op != T::Mean) {
        // sum(x, keepdim=True) without dims: eager's overloads differ; leave it to eager.
        return unsupported(what + " with keepdim and no dim");
      }
      if (!no_dim && dims.empty() && op.tensor_op != T::Sum) return unsupported(what + " over an empty dim list");
      if (op.tensor_op == T::Mean) return push_built(graph_.mean(x, dims, keep, dtype), what);
      if (op.tensor_op == T::Sum && dtype) {
        // sum(dtype=) converts first, as eager does.
        auto c = graph_.cast(x, *dtype);
        if (!c) return unsupported(what + ": " + c.error());
        return push_built(graph_.reduce(jit::Op::Sum, *c, dims, keep, dtype), what);
      }
      return push_built(graph_.reduce(op.tensor_op == T::Sum ? jit::Op::Sum : jit::Op::Prod, x, dims, keep, dtype), what);
    }
    case T::CumSum: {
      int64_t d;
      std::optional<DType> dtype;
      FJ_TRY(int_arg(a[1], what + " dim", &d));
      FJ_TRY(dtype_arg(a[2], what, &dtype));
      return push_built(graph_.cumsum(x, d, dtype), what);
    }
    case T::Amax: case T::Amin: {
      bool keep;
      if (!is_none(a[1])) {
        FJ_TRY(dims_arg(a[1], what + " dim", &dims, &no_dim));
      }
      FJ_TRY(keepdim_at(2, &keep));
      return push_built(graph_.reduce(op.tensor_op == T::Amax ? jit::Op::Amax : jit::Op::Amin, x, dims, keep), what);
    }
    case T::Max: case T::Min: {
      const bool is_max = op.tensor_op == T::Max;
      if (is_tensor(a[1])) return call_op(is_max ? jit::Op::Maximum : jit::Op::Minimum, {a[0], a[1]});
      bool keep;
      FJ_TRY(keepdim_at(2, &keep));
      if (is_none(a[1])) {
        if (keep) return unsupported(what + " with keepdim and no dim (eager raises)");
        return push_built(graph_.reduce(is_max ? jit::Op::Amax : jit::Op::Amin, x, {}, false), what);
      }
      int64_t d;
      FJ_TRY(int_arg(a[1], what + " dim", &d));
      auto values = graph_.reduce(is_max ? jit::Op::Amax : jit::Op::Amin, x, {d}, keep);
      if (!values) return unsupported(what + ": " + values.error());
      auto indices = graph_.reduce(is_max ? jit::Op::ArgMax : jit::Op::ArgMin, x, {d}, keep);
      if (!indices) return unsupported(what + ": " + indices.error());
      PyObject* types = PyImport_ImportModule("torch.return_types");
      if (types == nullptr) return unsupported("cannot import torch.return_types");
      PyObject* type = PyObject_GetAttrString(types, is_max ? "max" : "min");
      Py_DECREF(types);
      if (type == nullptr) return unsupported("torch.return_types has no max/min");
      Value t = Value::sequence(ValueKind::Tuple, {Value::tensor(*values), Value::tensor(*indices)});
      t.obj = PyRef::steal(type);
      t.identity = next_identity_++;
      push(std::move(t));
      return ok();
    }
    case T::ArgMax: case T::ArgMin: case T::Any: case T::All: {
      bool keep;
      FJ_TRY(dims_arg(a[1], what + " dim", &dims, &no_dim));
      FJ_TRY(keepdim_at(2, &keep));
      const jit::Op r = op.tensor_op == T::ArgMax ? jit::Op::ArgMax
                        : op.tensor_op == T::ArgMin ? jit::Op::ArgMin
                        : op.tensor_op == T::Any    ? jit::Op::Any
                                                    : jit::Op::All;
      if (!no_dim && dims.size() != 1) return unsupported(what + " over several dims");
      if (no_dim && keep && (r == jit::Op::Any || r == jit::Op::All)) return unsupported(what + " with keepdim and no dim");
      if (no_dim && (r == jit::Op::ArgMax || r == jit::Op::ArgMin) && graph_.node(x).rank() > 1) {
        // The index into the flattened tensor: argmax of the flattened tensor (jit/
        // lowers an arg reduction over several dims to invalid IR; this avoids it).
        const jit::SymShape xs = graph_.node(x).sym;
        auto flat = graph_.reshape(x, {jit::numel(xs)});
        if (!flat) return unsupported(what + ": " + flat.error());
        auto i = graph_.reduce(r, *flat, {0}, false);
        if (!i || !keep) return push_built(i, what);
        return push_built(graph_.reshape(*i, jit::SymShape(xs.size(), SymExpr::integer(1))), what);
      }
      return push_built(graph_.reduce(r, x, dims, keep), what);
    }
    case T::Var: case T::Std: {
      bool keep;
      double correction = 1;
      const Value* unbiased = &a[2];
      if (a[1].kind == ValueKind::Const && PyBool_Check(a[1].obj.get())) {
        // var(x, False): the (input, unbiased) overload
        if (!is_none(a[2])) return unsupported(what + " with these arguments");
        unbiased = &a[1];
        no_dim = true;
      } else {
        FJ_TRY(dims_arg(a[1], what + " dim", &dims, &no_dim));
      }
      FJ_TRY(keepdim_at(3, &keep));
      if (!is_none(*unbiased)) {
        if (!is_none(a[4])) return unsupported(what + " with both unbiased and correction (eager raises)");
        bool u;
        FJ_TRY(bool_arg(*unbiased, what + " unbiased", &u));
        correction = u ? 1 : 0;
      } else if (!is_none(a[4])) {
        int64_t c;
        FJ_TRY(int_arg(a[4], what + " correction", &c));
        correction = static_cast<double>(c);
      }
      auto v = graph_.var(x, dims, correction, keep);
      if (!v) return unsupported(what + ": " + v.error());
      sync_scalar_inputs();
      if (op.tensor_op == T::Var) return push_built(v, what);
      return push_built(graph_.pointwise(jit::Op::Sqrt, {*v}), what);
    }
    case T::Norm: {
      bool keep;
      std::optional<DType> dtype;
      FJ_TRY(dims_arg(a[2], what + " dim", &dims, &no_dim));
      FJ_TRY(keepdim_at(3, &keep));
      FJ_TRY(dtype_arg(a[4], what, &dtype));
      if (dtype) return unsupported(what + " with a dtype");
      if (!jit::is_floating(graph_.node(x).dtype)) return unsupported(what + " of a non-floating tensor");
      PyObject* p = a[1].kind == ValueKind::Const && !is_opaque(a[1]) ? a[1].obj.get() : nullptr;
      double pv = 0;
      if (p != nullptr && PyUnicode_Check(p) && std::string(PyUnicode_AsUTF8(p)) == "fro") pv = 2;
      else if (p != nullptr && (PyLong_CheckExact(p) || PyFloat_CheckExact(p))) pv = PyFloat_AsDouble(p);
      else return unsupported(what + " with p=" + describe(a[1]));
      if (pv == 1) {
        auto ab = graph_.pointwise(jit::Op::Abs, {x});
        if (!ab) return unsupported(what + ": " + ab.error());
        return push_built(graph_.reduce(jit::Op::Sum, *ab, dims, keep), what);
      }
      if (pv == 2) {
        auto sq = graph_.pointwise(jit::Op::Mul, {x, x});
        if (!sq) return unsupported(what + ": " + sq.error());
        auto s = graph_.reduce(jit::Op::Sum, *sq, dims, keep);
        if (!s) return unsupported(what + ": " + s.error());
        return push_built(graph_.pointwise(jit::Op::Sqrt, {*s}), what);
      }
      if (std::isinf(pv) && pv > 0) {
        auto ab = graph_.pointwise(jit::Op::Abs, {x});
        if (!ab) return unsupported(what + ": " + ab.error());
        return push_built(graph_.reduce(jit::Op::Amax, *ab, dims, keep), what);
      }
      return unsupported(what + " with p=" + describe(a[1]) + " (not supported)");
    }
    case T::LogSumExp: {
      bool keep;
      FJ_TRY(dims_arg(a[1], what + " dim", &dims, &no_dim));
      FJ_TRY(keepdim_at(2, &keep));
      if (no_dim || dims.empty()) return unsupported(what + " without dims");
      if (!jit::is_floating(graph_.node(x).dtype)) return unsupported(what + " of a non-floating tensor");
      return push_built(graph_.logsumexp(x, dims, keep), what);
    }
    case T::Softmax: case T::LogSoftmax: {
      const bool f_form = op.params.size() == 4;  // F.softmax(input, dim, _stacklevel, dtype)
      const Value& dtype_v = a[f_form ? 3 : 2];
      if (is_none(a[1])) return unsupported(what + " without dim (implicit dim choice)");
      int64_t d;
      FJ_TRY(int_arg(a[1], what + " dim", &d));
      std::optional<DType> dtype;
      FJ_TRY(dtype_arg(dtype_v, what, &dtype));
      NodeId in = x;
      if (dtype) {
        auto c = graph_.cast(x, *dtype);
        if (!c) return unsupported(what + ": " + c.error());
        in = *c;
      }
      if (graph_.node(in).rank() == 0) return unsupported(what + " of a 0-d tensor");
      return push_built(graph_.softmax(in, d, op.tensor_op == T::LogSoftmax), what, x);
    }
    case T::LayerNorm: {
      jit::SymShape shape;
      FJ_TRY(sizes_arg(a[1], what + " normalized_shape", &shape, false));
      const jit::SymShape xs = graph_.node(x).sym;
      if (shape.empty() || shape.size() > xs.size()) return unsupported(what + " with a bad normalized_shape (eager raises)");
      // The trailing sizes must equal normalized_shape, and weight / bias have it.
      auto same_sizes = [&](const jit::SymShape& have, const jit::SymShape& want) -> Status {
        if (have.size() != want.size()) return unsupported(what + ": shapes differ (eager raises)");
        for (size_t i = 0; i < have.size(); ++i) {
          bool eq = false;
          FJ_TRY(guard_truth(jit::eq(have[i], want[i]), &eq));
          if (!eq) return unsupported(what + ": shapes differ (eager raises)");
        }
        return ok();
      };
      FJ_TRY(same_sizes(jit::SymShape(xs.end() - static_cast<std::ptrdiff_t>(shape.size()), xs.end()), shape));
      NodeId wb[2] = {-1, -1};
      for (int k = 0; k < 2; ++k) {
        const Value& v = a[2 + static_cast<size_t>(k)];
        if (is_none(v)) continue;
        if (!is_tensor(v)) return unsupported(what + " weight/bias " + describe(v));
        FJ_TRY(same_sizes(graph_.node(v.node).sym, shape));
        wb[k] = v.node;
      }
      const auto eps = as_sym(a[4]);
      if (!eps || !eps->is_constant()) return unsupported(what + " with a non-constant eps");
      const auto ev = eps->as_value();
      return push_built(graph_.layer_norm(x, shape.size(), wb[0], wb[1], sym_value_to_double(*ev)), what);
    }
    default: break;
  }
  return unsupported(what + ": not a reduction");
}

// ---- creation ----

namespace {

bool device_ok(PyObject* o) {
  if (o == Py_None) return true;
  if (PyUnicode_Check(o)) return std::string(PyUnicode_AsUTF8(o)) == "cpu";
  PyObject* type = PyObject_GetAttrString(o, "type");
  if (type == nullptr) {
    guards::clear_error();
    return false;
  }
  const bool cpu = PyUnicode_Check(type) && std::string(PyUnicode_AsUTF8(type)) == "cpu" &&
                   std::string(Py_TYPE(o)->tp_name) == "torch.device";
  Py_DECREF(type);
  PyObject* index = cpu ? PyObject_GetAttrString(o, "index") : nullptr;
  const bool no_index = index == Py_None;
  Py_XDECREF(index);
  guards::clear_error();
  return cpu && no_index;
}

}  // namespace

Status Tracer::creation_op(const PyOp& op, const std::vector<Value>& a) {
  using T = TensorOp;
  const std::string what = op.name + "()";
  const size_t nopts = 5;  // dtype, layout, device, pin_memory, requires_grad (factories)
  const bool factory = op.params.size() >= nopts && op.params[op.params.size() - nopts] == "dtype";
  std::optional<DType> dtype;
  if (factory) {
    const size_t o = a.size() - nopts;
    FJ_TRY(dtype_arg(a[o], what, &dtype));
    PyObject* dev = a[o + 2].kind == ValueKind::Const && !is_opaque(a[o + 2]) ? a[o + 2].obj.get() : nullptr;
    if (!is_none(a[o + 1]) || dev == nullptr || !device_ok(dev)) return unsupported(what + " with a layout or device");
    for (size_t k : {o + 3, o + 4}) {
      if (!(a[k].kind == ValueKind::Const && a[k].obj.get() == Py_False)) return unsupported(what + " with pin_memory or requires_grad");
    }
  }
  auto fill = [&](const jit::SymShape& sizes, const Value& value, DType d) -> Status {
    auto v = operand(value);
    if (!v) return unsupported(what + ": " + v.error());
    return push_built(graph_.full(sizes, *v, d), what);
  };
  // Python number kind -> the dtype torch.full infers from it.
  auto fill_dtype = [&](const Value& v) -> std::optional<DType> {
    if (is_number(v)) {
      const jit::ScalarKind k = graph_.node(v.node).scalar_kind;
      return k == jit::ScalarKind::Bool ? DType::Bool : k == jit::ScalarKind::Int ? DType::Int64 : DType::Float32;
    }
    if (v.kind == ValueKind::Sym) {
      return v.expr.type() == jit::SymType::Bool ? DType::Bool : v.expr.type() == jit::SymType::Int ? DType::Int64 : DType::Float32;
    }
    if (v.kind == ValueKind::Const && !is_opaque(v)) {
      PyObject* o = v.obj.get();
      if (PyBool_Check(o)) return DType::Bool;
      if (PyLong_CheckExact(o)) return DType::Int64;
      if (PyFloat_CheckExact(o)) return DType::Float32;
    }
    return std::nullopt;
  };
  switch (op.tensor_op) {
    case T::Zeros: case T::Ones: case T::Empty: case T::Full: {
      jit::SymShape sizes;
      FJ_TRY(sizes_arg(a[0], what + " size", &sizes, false));
      if (op.tensor_op == T::Full) {
        const auto d = dtype ? dtype : fill_dtype(a[1]);
        if (!d) return unsupported(what + " with fill value " + describe(a[1]));
        return fill(sizes, a[1], *d);
      }
      const Value one = Value::constant(PyRef::steal(PyLong_FromLong(op.tensor_op == T::Ones ? 1 : 0)));
      return fill(sizes, one, dtype.value_or(DType::Float32));
    }
    case T::ZerosLike: case T::OnesLike: case T::EmptyLike: case T::FullLike: {
      const jit::Node& in = graph_.node(a[0].node);
      const jit::SymShape sizes = in.sym;
      const DType d = dtype.value_or(in.dtype);
      if (op.tensor_op == T::FullLike) return fill(sizes, a[1], d);
      const Value one = Value::constant(PyRef::steal(PyLong_FromLong(op.tensor_op == T::OnesLike ? 1 : 0)));
      return fill(sizes, one, d);
    }
    case T::Arange: {
      // arange(end), arange(start, end), arange(start, end, step)
      Value start = a[0], end = a[1], step = a[2];
      if (is_none(end)) {
        end = start;
        start = Value::constant(PyRef::steal(PyLong_FromLong(0)));
      }
      const auto s0 = as_sym(start), e0 = as_sym(end), st = as_sym(step);
      if (!s0 || !e0 || !st) return unsupported(what + " with these bounds");
      const bool all_int = s0->type() == jit::SymType::Int && e0->type() == jit::SymType::Int && st->type() == jit::SymType::Int;
      SymExpr length;
      if (all_int) {
        if (!st->is_constant() || *st->as_int() == 0) return unsupported(what + " with a non-constant or zero step");
        const int64_t k = *st->as_int();
        const SymExpr span = k > 0 ? jit::sub(*e0, *s0) : jit::sub(*s0, *e0);
        const int64_t ak = k > 0 ? k : -k;
        bool nonneg = false;
        FJ_TRY(guard_truth(jit::ge(span, SymExpr::integer(0)), &nonneg));
        if (!nonneg) return unsupported(what + " with an empty or inverted range (not supported)");
        length = jit::floordiv(jit::add(span, SymExpr::integer(ak - 1)), SymExpr::integer(ak));
      } else {
        if (!s0->is_constant() || !e0->is_constant() || !st->is_constant()) return unsupported(what + " with symbolic float bounds");
        const double a0 = sym_value_to_double(*s0->as_value()), a1 = sym_value_to_double(*e0->as_value()),
                     k = sym_value_to_double(*st->as_value());
        if (k == 0 || !std::isfinite(a0) || !std::isfinite(a1)) return unsupported(what + " with a bad range (eager raises)");
        const double n = std::ceil((a1 - a0) / k);
        if (n < 0) return unsupported(what + " with an inverted range (eager raises)");
        length = SymExpr::integer(static_cast<int64_t>(n));
      }
      SymExpr size;
      FJ_TRY(size_expr(length, what, &size, false));
      const DType d = dtype.value_or(all_int ? DType::Int64 : DType::Float32);
      NodeId pos = graph_.iota({size}, 0);
      // start + i * step, in double for floating results (as eager's kernel).
      if (!all_int || jit::is_floating(d)) {
        auto c = graph_.cast(pos, DType::Float64);
        if (!c) return unsupported(what + ": " + c.error());
        pos = *c;
      }
      auto stv = operand(step), sv = operand(start);
      if (!stv || !sv) return unsupported(what + ": bad operands");
      auto m = graph_.pointwise(jit::Op::Mul, {pos, *stv});
      if (!m) return unsupported(what + ": " + m.error());
      auto r = graph_.pointwise(jit::Op::Add, {*m, *sv});
      if (!r) return unsupported(what + ": " + r.error());
      return push_built(graph_.cast(*r, d), what);
    }
    case T::Linspace: {
      const auto s0 = as_sym(a[0]), e0 = as_sym(a[1]), n0 = as_sym(a[2]);
      if (!s0 || !e0 || !n0 || n0->type() != jit::SymType::Int) return unsupported(what + " with these arguments");
      SymExpr steps;
      FJ_TRY(size_expr(*n0, what, &steps, false));
      const DType d = dtype.value_or(DType::Float32);
      if (!jit::is_floating(d)) return unsupported(what + " with an integer dtype");
      NodeId pos = graph_.iota({steps}, 0);
      auto pf = graph_.cast(pos, DType::Float64);
      if (!pf) return unsupported(what + ": " + pf.error());
      // start + i * (end - start) / (steps - 1); steps == 1 gives start.
      auto sv = operand(a[0]), ev = operand(a[1]);
      if (!sv || !ev) return unsupported(what + ": bad operands");
      auto sf = graph_.full({}, *sv, DType::Float64);
      if (!sf) return unsupported(what + ": " + sf.error());
      auto span = graph_.pointwise(jit::Op::Sub, {*ev, *sf});
      if (!span) return unsupported(what + ": " + span.error());
      auto denom = operand(Value::sym(jit::max(jit::sub(steps, SymExpr::integer(1)), SymExpr::integer(1))));
      if (!denom) return unsupported(what + ": " + denom.error());
      auto stepv = graph_.pointwise(jit::Op::Div, {*span, *denom});
      if (!stepv) return unsupported(what + ": " + stepv.error());
      auto m = graph_.pointwise(jit::Op::Mul, {*pf, *stepv});
      if (!m) return unsupported(what + ": " + m.error());
      auto r = graph_.pointwise(jit::Op::Add, {*m, *sf});
      if (!r) return unsupported(what + ": " + r.error());
      return push_built(graph_.cast(*r, d), what);
    }
    case T::Eye: {
      jit::SymShape sizes;
      FJ_TRY(sizes_arg(is_none(a[1]) ? Value::sequence(ValueKind::Tuple, {a[0], a[0]})
                                     : Value::sequence(ValueKind::Tuple, {a[0], a[1]}),
                       what, &sizes, false));
      const NodeId r = graph_.iota(sizes, 0);
      const NodeId c = graph_.iota(sizes, 1);
      auto e = graph_.pointwise(jit::Op::Eq, {r, c});
      if (!e) return unsupported(what + ": " + e.error());
      return push_built(graph_.cast(*e, dtype.value_or(DType::Float32)), what);
    }
    case T::Tril: case T::Triu: {
      const NodeId x = a[0].node;
      const jit::SymShape xs = graph_.node(x).sym;
      if (xs.size() < 2) return unsupported(what + " of a tensor with fewer than 2 dims (eager raises)");
      int64_t diag;
      FJ_TRY(int_arg(a[1], what + " diagonal", &diag));
      const jit::SymShape mat(xs.end() - 2, xs.end());
      const NodeId r = graph_.iota(mat, 0);
      const NodeId c = graph_.iota(mat, 1);
      auto off = graph_.pointwise(jit::Op::Sub, {c, r});
      if (!off) return unsupported(what + ": " + off.error());
      auto keep = graph_.pointwise(op.tensor_op == T::Tril ? jit::Op::Le : jit::Op::Ge, {*off, graph_.scalar_int(diag)});
      if (!keep) return unsupported(what + ": " + keep.error());
      const DType xd = graph_.node(x).dtype;
      const NodeId zero = xd == DType::Bool ? graph_.scalar(0, jit::ScalarKind::Bool) : graph_.scalar_int(0);
      auto w = graph_.pointwise(jit::Op::Where, {*keep, x, zero});
      if (!w) return unsupported(what + ": " + w.error());
      return push_built(graph_.cast(*w, xd), what);
    }
    default: break;
  }
  return unsupported(what + ": not a creation op");
}

// ---- matmul ----

Status Tracer::matmul_values(const Value& av, const Value& bv) {
  if (!is_tensor(av) || !is_tensor(bv)) return unsupported("matmul of " + describe(av) + " and " + describe(bv));
  NodeId a = av.node, b = bv.node;
  const size_t ra = graph_.node(a).rank(), rb = graph_.node(b).rank();
  if (ra == 0 || rb == 0) return unsupported("matmul of a 0-d tensor (eager raises)");
  // 1-d operands as torch.matmul treats them: [k] @ [..., k, n] is [1, k] @ ... with the
  // 1 dropped after; [..., m, k] @ [k] is ... @ [k, 1] with the 1 dropped.
  if (ra == 1) {
    auto u = graph_.unsqueeze(a, 0);
    if (!u) return unsupported("matmul: " + u.error());
    a = *u;
  }
  if (rb == 1) {
    auto u = graph_.unsqueeze(b, 1);
    if (!u) return unsupported("matmul: " + u.error());
    b = *u;
  }
  auto m = graph_.matmul(a, b);
  if (!m) return unsupported("matmul: " + m.error());
  NodeId r = *m;
  if (ra == 1 || rb == 1) {
    jit::SymShape s = graph_.node(r).sym;
    if (rb == 1) s.erase(s.end() - 1);
    if (ra == 1) s.erase(s.end() - 1 - (rb == 1 ? 0 : 1));
    return push_built(graph_.reshape(r, s), "matmul()");
  }
  return push_built(r, "matmul()");
}

Status Tracer::matmul_op(TensorOp op, const std::vector<Value>& a) {
  using T = TensorOp;
  for (size_t i = 0; i < (op == T::Addmm ? 3u : 2u); ++i) {
    if (!is_tensor(a[i]) && !(op == T::Linear && i == 2)) return unsupported("matmul operand " + describe(a[i]));
  }
  const size_t r0 = graph_.node(a[0].node).rank(), r1 = graph_.node(a[1].node).rank();
  switch (op) {
    case T::Matmul: return matmul_values(a[0], a[1]);
    case T::Mm:
      if (r0 != 2 || r1 != 2) return unsupported("mm() of operands that are not 2-d (eager raises)");
      return matmul_values(a[0], a[1]);
    case T::Bmm:
      if (r0 != 3 || r1 != 3) return unsupported("bmm() of operands that are not 3-d (eager raises)");
      {
        // bmm does not broadcast batches: they must be equal.
        bool eq = false;
        FJ_TRY(guard_truth(jit::eq(graph_.node(a[0].node).sym[0], graph_.node(a[1].node).sym[0]), &eq));
        if (!eq) return unsupported("bmm() of different batch sizes (eager raises)");
      }
      return matmul_values(a[0], a[1]);
    case T::Addmm: {
      if (graph_.node(a[1].node).rank() != 2 || graph_.node(a[2].node).rank() != 2) return unsupported("addmm() of operands that are not 2-d");
      FJ_TRY(matmul_values(a[1], a[2]));
      Value prod = pop();
      const auto beta = as_sym(a[3]), alpha = as_sym(a[4]);
      if (!beta || !alpha || !beta->is_constant() || !alpha->is_constant()) return unsupported("addmm() with symbolic beta/alpha");
      const double bv = sym_value_to_double(*beta->as_value()), av = sym_value_to_double(*alpha->as_value());
      NodeId p = prod.node;
      if (av != 1) {
        auto m = graph_.pointwise(jit::Op::Mul, {p, graph_.scalar(av)});
        if (!m) return unsupported("addmm(): " + m.error());
        p = *m;
      }
      if (bv == 0) return unsupported("addmm() with beta=0");
      NodeId in = a[0].node;
      if (bv != 1) {
        auto m = graph_.pointwise(jit::Op::Mul, {in, graph_.scalar(bv)});
        if (!m) return unsupported("addmm(): " + m.error());
        in = *m;
      }
      // the result has the product's shape: input broadcasts to it
      const jit::SymShape ps = graph_.node(p).sym;
      auto e = graph_.expand(in, ps);
      if (!e) return unsupported("addmm(): " + e.error());
      return push_built(graph_.pointwise(jit::Op::Add, {*e, p}), "addmm()");
    }
    case T::Linear: {
      NodeId bias = -1;
      if (!is_none(a[2])) {
        if (!is_tensor(a[2])) return unsupported("linear() bias " + describe(a[2]));
        bias = a[2].node;
        if (graph_.node(bias).rank() > 1) return unsupported("linear() with a bias of rank > 1");
      }
      const NodeId w = a[1].node;
      if (r1 != 2 && r1 != 1) return unsupported("linear() with a weight of rank " + std::to_string(r1));
      if (r1 == 1 || r0 == 0) return unsupported("linear() with 1-d weight or 0-d input");
      if (graph_.node(a[0].node).dtype != graph_.node(w).dtype) return unsupported("linear() of mixed dtypes (eager raises)");
      if (bias >= 0 && graph_.node(bias).dtype != graph_.node(w).dtype) return unsupported("linear() of mixed dtypes (eager raises)");
      if (bias >= 0 && graph_.node(bias).rank() == 1) {
        bool eq = false;
        FJ_TRY(guard_truth(jit::eq(graph_.node(bias).sym[0], graph_.node(w).sym[0]), &eq));
        if (!eq && !is_const(graph_.node(bias).sym[0], 1)) return unsupported("linear() bias size mismatch (eager raises)");
      }
      return push_built(graph_.linear(a[0].node, w, bias), "linear()");
    }
    default: break;
  }
  return unsupported("not a matmul op");
}

}  // namespace fj::interp
