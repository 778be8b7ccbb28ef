// The creation family of interp/torch/torch_ops.def: torch's factories (zeros, arange,
// eye, ...), tensors shaped like another (zeros_like, ...) and the triangles (tril, triu).
#include "interp/trace/tracer.h"

#include <cmath>
#include <limits>
#include <string_view>

namespace fj::interp {

using jit::DType;
using jit::NodeId;
using jit::SymExpr;

namespace {

// A constant tuple as a tuple of constants.
Value constant_tuple_value(PyObject* t) {
  Value v = Value::sequence(ValueKind::Tuple, {});
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(t); ++i) v.items.push_back(Value::constant(PyRef::borrow(PyTuple_GET_ITEM(t, i))));
  return v;
}

constexpr size_t kFactoryOptions = 5;  // dtype, layout, device, pin_memory, requires_grad (FACTORY_OPTIONS)

}  // namespace

bool is_cpu_device(PyObject* o) {
  if (o == Py_None) return true;
  if (PyUnicode_Check(o)) return guards::str_is(o, "cpu");
  // torch.device's own getters only: an object of another type is not read.
  if (std::string_view(Py_TYPE(o)->tp_name) != "torch.device" || (Py_TYPE(o)->tp_flags & Py_TPFLAGS_HEAPTYPE)) {
    return false;
  }
  PyObject* type = PyObject_GetAttrString(o, "type");
  if (type == nullptr) {
    guards::clear_error();
    return false;
  }
  const bool cpu = guards::str_is(type, "cpu");
  Py_DECREF(type);
  PyObject* index = cpu ? PyObject_GetAttrString(o, "index") : nullptr;
  const bool no_index = index == Py_None;
  Py_XDECREF(index);
  guards::clear_error();
  return cpu && no_index;
}

namespace {

Value int_constant(long v) { return Value::constant(PyRef::steal(PyLong_FromLong(v))); }

}  // namespace

// ---- shared by the family ----

// FACTORY_OPTIONS, the last parameters of a factory: the dtype asked for (nullopt: the
// default); a layout, a device other than the CPU, pin_memory or requires_grad end the trace.
Status Tracer::factory_options(const OpCall& c, std::optional<DType>* dtype) {
  const std::vector<Value>& a = c.a;
  const size_t o = a.size() - kFactoryOptions;
  FJ_TRY(dtype_arg(a[o], c.what, dtype));
  PyObject* dev = a[o + 2].kind == ValueKind::Const && !is_opaque(a[o + 2]) ? a[o + 2].obj.get() : nullptr;
  if (!is_none(a[o + 1]) || dev == nullptr || !is_cpu_device(dev)) return unsupported(c.what + " with a layout or device");
  for (size_t k : {o + 3, o + 4}) {
    if (!(a[k].kind == ValueKind::Const && a[k].obj.get() == Py_False)) return unsupported(c.what + " with pin_memory or requires_grad");
  }
  return ok();
}

// The dtype torch.full infers from a Python number fill value.
std::optional<DType> Tracer::fill_dtype(const Value& v) const {
  if (is_number(v)) {
    const jit::ScalarKind k = graph_.node(v.node).scalar_kind;
    return k == jit::ScalarKind::Bool ? DType::Bool : k == jit::ScalarKind::Int ? DType::Int64 : DType::Float32;
  }
  if (v.kind == ValueKind::Sym) {  // torch.full((n,), np.bool_(b)) is float32 in eager, unlike True
    const bool flag = v.expr.type() == jit::SymType::Bool && !is_numpy_scalar(v);
    return flag ? DType::Bool : v.expr.type() == jit::SymType::Int ? DType::Int64 : DType::Float32;
  }
  if (v.kind == ValueKind::Const && !is_opaque(v)) {
    PyObject* o = v.obj.get();
    if (PyBool_Check(o)) return DType::Bool;
    if (PyLong_CheckExact(o)) return DType::Int64;
    if (PyFloat_CheckExact(o)) return DType::Float32;
  }
  return std::nullopt;
}

// A tensor of these sizes filled with `value`.
Status Tracer::check_fill_value(const Value& value, DType d, const std::string& what) {
  const std::optional<SymExpr> e = as_sym(value);
  if (!e || e->type() == jit::SymType::Bool) return ok();  // a bool fits every dtype
  const bool real = e->type() == jit::SymType::Float;
  // c10's rule: a float fits a floating type when in range, infinite or NaN; a number
  // fits an integer type when in its range, where an unsigned type also takes ints
  // down to -max (they wrap) but no negative float.
  auto between = [&](double lo, double hi) {
    return real ? jit::logical_and(jit::ge(*e, SymExpr::real(lo)), jit::le(*e, SymExpr::real(hi)))
                : jit::logical_and(jit::ge(*e, SymExpr::integer(static_cast<int64_t>(lo))),
                                   jit::le(*e, SymExpr::integer(static_cast<int64_t>(hi))));
  };
  SymExpr fits = SymExpr::boolean(true);
  switch (d) {
    case DType::Bool: case DType::Float64: return ok();
    case DType::Int64:
      if (!real) return ok();
      fits = between(-9223372036854775808.0, 9223372036854775807.0);
      break;
    case DType::Int32: fits = between(-2147483648.0, 2147483647.0); break;
    case DType::UInt8: fits = between(real ? 0.0 : -255.0, 255.0); break;
    case DType::Float32: {
      if (!real) return ok();
      const double inf = std::numeric_limits<double>::infinity();
      const SymExpr special = jit::logical_or(jit::logical_or(jit::eq(*e, SymExpr::real(inf)), jit::eq(*e, SymExpr::real(-inf))),
                                              jit::ne(*e, *e));
      fits = jit::logical_or(between(-std::numeric_limits<float>::max(), std::numeric_limits<float>::max()), special);
      break;
    }
  }
  bool in = false;
  FJ_TRY(guard_truth(fits, &in));
  if (!in) return unsupported(what + " with a value out of the range of " + std::string(jit::dtype_name(d)) + " (eager raises)");
  return ok();
}

Status Tracer::fill(const OpCall& c, const jit::SymShape& sizes, const Value& value, DType d) {
  FJ_TRY(check_fill_value(value, d, c.what));
  auto v = operand(value);
  if (!v) return unsupported(c.what + ": " + v.error());
  return push_built(graph_.full(sizes, *v, d), c.what);
}

// zeros / ones / empty(*size, <factory options>): empty is zeros (any value will do)
Status Tracer::fill_sized(const OpCall& c, long value) {
  std::optional<DType> dtype;
  FJ_TRY(factory_options(c, &dtype));
  jit::SymShape sizes;
  FJ_TRY(sizes_arg(c.a[0], c.what + " size", &sizes, false));
  return fill(c, sizes, int_constant(value), dtype.value_or(DType::Float32));
}

// zeros_like / ones_like / empty_like(input, <factory options>)
Status Tracer::fill_like(const OpCall& c, long value) {
  std::optional<DType> dtype;
  FJ_TRY(factory_options(c, &dtype));
  const jit::Node& in = graph_.node(c.x);
  const jit::SymShape sizes = in.sym;  // a copy: fill adds nodes
  return fill(c, sizes, int_constant(value), dtype.value_or(in.dtype));
}

// tril / triu(input, diagonal=0): where(col - row <= diagonal (>= for triu), x, 0)
Status Tracer::triangle(const OpCall& c, bool lower) {
  const NodeId x = c.x;
  const jit::SymShape xs = graph_.node(x).sym;
  if (xs.size() < 2) return unsupported(c.what + " of a tensor with fewer than 2 dims (eager raises)");
  int64_t diag;
  FJ_TRY(int_arg(c.a[1], c.what + " diagonal", &diag));
  const jit::SymShape mat(xs.end() - 2, xs.end());
  const NodeId r = graph_.iota(mat, 0);
  const NodeId col = graph_.iota(mat, 1);
  auto off = graph_.pointwise(jit::Op::Sub, {col, r});
  if (!off) return unsupported(c.what + ": " + off.error());
  auto keep = graph_.pointwise(lower ? jit::Op::Le : jit::Op::Ge, {*off, graph_.scalar_int(diag)});
  if (!keep) return unsupported(c.what + ": " + keep.error());
  const DType xd = graph_.node(x).dtype;
  const NodeId zero = xd == DType::Bool ? graph_.scalar(0, jit::ScalarKind::Bool) : graph_.scalar_int(0);
  auto w = graph_.pointwise(jit::Op::Where, {*keep, x, zero});
  if (!w) return unsupported(c.what + ": " + w.error());
  return push_built(graph_.cast(*w, xd), c.what);
}

// The number of elements of arange(start, end, step), guarded where it is symbolic.
Status Tracer::arange_length(const OpCall& c, const SymExpr& s0, const SymExpr& e0, const SymExpr& st, bool all_int,
                             SymExpr* length) {
  if (all_int) {
    if (!st.is_constant() || *st.as_int() == 0) return unsupported(c.what + " with a non-constant or zero step");
    const int64_t k = *st.as_int();
    const SymExpr span = k > 0 ? jit::sub(e0, s0) : jit::sub(s0, e0);
    const int64_t ak = k > 0 ? k : -k;
    bool nonneg = false;
    FJ_TRY(guard_truth(jit::ge(span, SymExpr::integer(0)), &nonneg));
    if (!nonneg) return unsupported(c.what + " with an empty or inverted range (not supported)");
    *length = jit::floordiv(jit::add(span, SymExpr::integer(ak - 1)), SymExpr::integer(ak));
    return ok();
  }
  if (!s0.is_constant() || !e0.is_constant() || !st.is_constant()) return unsupported(c.what + " with symbolic float bounds");
  const double a0 = sym_value_to_double(*s0.as_value()), a1 = sym_value_to_double(*e0.as_value()),
               k = sym_value_to_double(*st.as_value());
  if (k == 0 || !std::isfinite(a0) || !std::isfinite(a1)) return unsupported(c.what + " with a bad range (eager raises)");
  const double n = std::ceil((a1 - a0) / k);
  if (n < 0) return unsupported(c.what + " with an inverted range (eager raises)");
  *length = SymExpr::integer(static_cast<int64_t>(n));
  return ok();
}

// ---- one lowering per row ----

Status Tracer::lower_zeros(const OpCall& c) { return fill_sized(c, 0); }
Status Tracer::lower_ones(const OpCall& c) { return fill_sized(c, 1); }
Status Tracer::lower_empty(const OpCall& c) { return fill_sized(c, 0); }
Status Tracer::lower_zeros_like(const OpCall& c) { return fill_like(c, 0); }
Status Tracer::lower_ones_like(const OpCall& c) { return fill_like(c, 1); }
Status Tracer::lower_empty_like(const OpCall& c) { return fill_like(c, 0); }
Status Tracer::lower_tril(const OpCall& c) { return triangle(c, true); }
Status Tracer::lower_triu(const OpCall& c) { return triangle(c, false); }

// full(size, fill_value, <factory options>): the dtype follows the fill value's kind
Status Tracer::lower_full(const OpCall& c) {
  std::optional<DType> dtype;
  FJ_TRY(factory_options(c, &dtype));
  jit::SymShape sizes;
  FJ_TRY(sizes_arg(c.a[0], c.what + " size", &sizes, false));
  const auto d = dtype ? dtype : fill_dtype(c.a[1]);
  if (!d) return unsupported(c.what + " with fill value " + describe(c.a[1]));
  return fill(c, sizes, c.a[1], *d);
}

// full_like(input, fill_value, <factory options>)
Status Tracer::lower_full_like(const OpCall& c) {
  std::optional<DType> dtype;
  FJ_TRY(factory_options(c, &dtype));
  const jit::Node& in = graph_.node(c.x);
  const jit::SymShape sizes = in.sym;  // a copy: fill adds nodes
  return fill(c, sizes, c.a[1], dtype.value_or(in.dtype));
}

// arange(end), arange(start, end), arange(start, end, step): start + i * step
Status Tracer::lower_arange(const OpCall& c) {
  std::optional<DType> dtype;
  FJ_TRY(factory_options(c, &dtype));
  Value start = c.a[0], end = c.a[1], step = c.a[2];
  if (is_none(end)) {
    end = start;
    start = int_constant(0);
  }
  const auto s0 = as_sym(start), e0 = as_sym(end), st = as_sym(step);
  if (!s0 || !e0 || !st) return unsupported(c.what + " with these bounds");
  const bool all_int = s0->type() == jit::SymType::Int && e0->type() == jit::SymType::Int && st->type() == jit::SymType::Int;
  SymExpr length, size;
  FJ_TRY(arange_length(c, *s0, *e0, *st, all_int, &length));
  FJ_TRY(size_expr(length, c.what, &size, false));
  const DType d = dtype.value_or(all_int ? DType::Int64 : DType::Float32);
  NodeId pos = graph_.iota({size}, 0);
  // start + i * step, in double for floating results (as eager's kernel).
  if (!all_int || jit::is_floating(d)) {
    auto cast = graph_.cast(pos, DType::Float64);
    if (!cast) return unsupported(c.what + ": " + cast.error());
    pos = *cast;
  }
  auto stv = operand(step), sv = operand(start);
  if (!stv || !sv) return unsupported(c.what + ": bad operands");
  auto m = graph_.pointwise(jit::Op::Mul, {pos, *stv});
  if (!m) return unsupported(c.what + ": " + m.error());
  auto r = graph_.pointwise(jit::Op::Add, {*m, *sv});
  if (!r) return unsupported(c.what + ": " + r.error());
  return push_built(graph_.cast(*r, d), c.what);
}

// linspace(start, end, steps): start + i * (end - start) / (steps - 1); steps == 1 gives start
Status Tracer::lower_linspace(const OpCall& c) {
  const std::vector<Value>& a = c.a;
  std::optional<DType> dtype;
  FJ_TRY(factory_options(c, &dtype));
  const auto s0 = as_sym(a[0]), e0 = as_sym(a[1]), n0 = as_sym(a[2]);
  if (!s0 || !e0 || !n0 || n0->type() != jit::SymType::Int) return unsupported(c.what + " with these arguments");
  SymExpr steps;
  FJ_TRY(size_expr(*n0, c.what, &steps, false));
  const DType d = dtype.value_or(DType::Float32);
  if (!jit::is_floating(d)) return unsupported(c.what + " with an integer dtype");
  NodeId pos = graph_.iota({steps}, 0);
  auto pf = graph_.cast(pos, DType::Float64);
  if (!pf) return unsupported(c.what + ": " + pf.error());
  auto sv = operand(a[0]), ev = operand(a[1]);
  if (!sv || !ev) return unsupported(c.what + ": bad operands");
  auto sf = graph_.full({}, *sv, DType::Float64);
  if (!sf) return unsupported(c.what + ": " + sf.error());
  auto span = graph_.pointwise(jit::Op::Sub, {*ev, *sf});
  if (!span) return unsupported(c.what + ": " + span.error());
  auto denom = operand(Value::sym(jit::max(jit::sub(steps, SymExpr::integer(1)), SymExpr::integer(1))));
  if (!denom) return unsupported(c.what + ": " + denom.error());
  auto stepv = graph_.pointwise(jit::Op::Div, {*span, *denom});
  if (!stepv) return unsupported(c.what + ": " + stepv.error());
  auto m = graph_.pointwise(jit::Op::Mul, {*pf, *stepv});
  if (!m) return unsupported(c.what + ": " + m.error());
  auto r = graph_.pointwise(jit::Op::Add, {*m, *sf});
  if (!r) return unsupported(c.what + ": " + r.error());
  return push_built(graph_.cast(*r, d), c.what);
}

// eye(n, m=None): row index == column index
Status Tracer::lower_eye(const OpCall& c) {
  std::optional<DType> dtype;
  FJ_TRY(factory_options(c, &dtype));
  const Value& cols = is_none(c.a[1]) ? c.a[0] : c.a[1];
  jit::SymShape sizes;
  FJ_TRY(sizes_arg(Value::sequence(ValueKind::Tuple, {c.a[0], cols}), c.what, &sizes, false));
  const NodeId r = graph_.iota(sizes, 0);
  const NodeId col = graph_.iota(sizes, 1);
  auto e = graph_.pointwise(jit::Op::Eq, {r, col});
  if (!e) return unsupported(c.what + ": " + e.error());
  return push_built(graph_.cast(*e, dtype.value_or(DType::Float32)), c.what);
}

// torch.tensor(data, dtype=, device=, requires_grad=False) of Python numbers, or nested
// lists and tuples of them: each number a 0-d tensor, stacked; the dtype as eager infers
// it (bool, then int64, then the default float) unless given. nullopt: not torch.tensor.
std::optional<Status> Tracer::call_torch_tensor(const CallSite& c) {
  static PyObject* fn = lookup_attr("torch", "tensor");
  if (fn == nullptr || c.callable.kind != ValueKind::Const || c.callable.obj.get() != fn) return std::nullopt;
  // What it does not build here runs as an opaque call (eager's own result or error).
  const std::string what = "torch.tensor()";
  const size_t nkw = c.kw_names ? static_cast<size_t>(PyTuple_GET_SIZE(c.kw_names.get())) : 0;
  if (c.args.size() - nkw != 1) return std::nullopt;
  std::optional<DType> dtype;
  for (size_t k = 0; k < nkw; ++k) {
    const std::string name = guards::utf8_lossy(PyTuple_GET_ITEM(c.kw_names.get(), static_cast<Py_ssize_t>(k)));
    const Value& v = c.args[1 + k];
    const bool cpu = is_none(v) || (v.kind == ValueKind::Const && !is_opaque(v) && is_cpu_device(v.obj.get()));
    const bool ok_kw = name == "dtype"           ? dtype_arg(v, what, &dtype).ok()
                       : name == "device"        ? cpu
                       : name == "requires_grad" ? v.kind == ValueKind::Const && v.obj.get() == Py_False
                                                 : false;
    if (!ok_kw) return std::nullopt;
  }
  std::optional<DType> inferred;
  if (is_numpy_scalar(c.args[0])) {
    inferred = numpy_dtype(c.args[0].obj.get());  // torch.tensor(np.float64(x)) keeps NumPy's dtype
  } else if (tensor_data_dtype(c.args[0], &inferred).failed()) {
    return std::nullopt;
  }
  if (!inferred) return std::nullopt;
  Expected<jit::NodeId> t = tensor_data(c.args[0], dtype ? *dtype : *inferred, what);
  if (!t) return std::nullopt;
  return push_built(std::move(t), what);
}

// The dtype eager gives torch.tensor(data): the widest of its numbers' (bool < int64 < float).
Status Tracer::tensor_data_dtype(const Value& v, std::optional<DType>* out) {
  if (v.kind == ValueKind::Const && !is_opaque(v) && PyTuple_CheckExact(v.obj.get())) {
    return tensor_data_dtype(constant_tuple_value(v.obj.get()), out);
  }
  if (v.kind == ValueKind::List || (v.kind == ValueKind::Tuple && !v.obj)) {
    for (const Value& item : v.items) FJ_TRY(tensor_data_dtype(item, out));
    return ok();
  }
  const std::optional<DType> d = is_tensor(v) || is_numpy_scalar(v) ? std::nullopt : fill_dtype(v);
  if (!d) return unsupported("torch.tensor() of " + describe(v) + " (not supported yet)");
  auto rank = [](DType t) { return t == DType::Bool ? 0 : t == DType::Int64 ? 1 : 2; };
  if (!*out || rank(*d) > rank(**out)) *out = d;
  return ok();
}

// The tensor of `data` (numbers, lists, tuples) in dtype d.
Expected<jit::NodeId> Tracer::tensor_data(const Value& v, DType d, const std::string& what) {
  if (v.kind == ValueKind::Const && !is_opaque(v) && PyTuple_CheckExact(v.obj.get())) {
    return tensor_data(constant_tuple_value(v.obj.get()), d, what);
  }
  if (v.kind != ValueKind::List && v.kind != ValueKind::Tuple) {
    if (Status s = check_fill_value(v, d, what); s.failed()) return Error{s.error()};
    Expected<jit::NodeId> n = operand(v);
    if (!n) return n;
    return graph_.full({}, *n, d);
  }
  if (v.items.empty()) return Error{what + " with an empty list inside (not supported yet)"};
  std::vector<jit::NodeId> rows;
  jit::SymShape first;
  for (const Value& item : v.items) {
    Expected<jit::NodeId> row = tensor_data(item, d, what);
    if (!row) return row;
    const jit::SymShape now = graph_.node(*row).sym;
    if (rows.empty()) first = now;
    bool same = first.size() == now.size();
    for (size_t k = 0; same && k < now.size(); ++k) same = first[k].same(now[k]);
    if (!same) return Error{what + " of lists of different lengths (eager raises ValueError)"};
    Expected<jit::NodeId> u = graph_.unsqueeze(*row, 0);
    if (!u) return u;
    rows.push_back(*u);
  }
  return graph_.cat(rows, 0);
}

}  // namespace fj::interp
