// Graph builders beyond pointwise ops: reductions and the decompositions built on
// them, views and movement, indexing, creation, Python numbers read from tensors,
// and matmul. Each checks its operands as eager does and sets dtype and shape.
#include <algorithm>
#include <set>

#include "jit/ir/graph.h"

namespace fj::jit {
namespace {

std::string name_of(Op op) { return std::string(aten_name(op)); }

// A size equality that an op needs: nothing when provable, an Error when it is
// provably false, else an assumption for the interpreter to guard.
bool need(const SymExpr& cond, std::vector<SymExpr>* assumed) {
  if (auto c = cond.as_bool()) return *c;
  assumed->push_back(cond);
  return true;
}

}  // namespace

Expected<int64_t> Graph::norm_dim(NodeId x, int64_t dim, bool one_past) const {
  const int64_t r = std::max<int64_t>(static_cast<int64_t>(node(x).rank()) + (one_past ? 1 : 0), 1);
  if (dim < -r || dim >= r) {
    return Error{"Dimension out of range (expected to be in range of [" + std::to_string(-r) +
                 ", " + std::to_string(r - 1) + "], but got " + std::to_string(dim) + ")"};
  }
  return dim < 0 ? dim + r : dim;
}

// --- reductions --------------------------------------------------------------

Expected<NodeId> Graph::cumsum(NodeId x, int64_t dim, std::optional<DType> dtype) {
  if (is_python_scalar(node(x))) return Error{"cumsum of a Python number"};
  if (node(x).rank() == 0) return Error{"cumsum of a 0-d tensor (not supported)"};
  auto d = norm_dim(x, dim);
  if (!d) return d.take_error();
  if (dtype) {
    auto c = cast(x, *dtype);
    if (!c) return c;
    x = *c;
  }
  const Node& in = node(x);
  const DType result = (in.dtype == DType::Bool || is_integral(in.dtype)) ? DType::Int64 : in.dtype;
  Node n{Op::CumSum, result, in.sym, {x}, 0, -1};
  n.dims = {*d};
  n.keepdim = true;
  n.compute = result == DType::Float32 ? DType::Float64 : result;
  return push(std::move(n));
}

Expected<NodeId> Graph::reduce(Op op, NodeId x, std::vector<int64_t> dims, bool keepdim,
                               std::optional<DType> dtype) {
  FJ_CHECK(op_family(op) == Family::Reduction, "reduce() of a non-reduction op");
  const Node& in = node(x);
  const std::string name = name_of(op);
  if (is_python_scalar(in)) return Error{name + " of a Python number"};
  if (in.rank() == 0) {  // as a 1-element row: dim 0 and -1 name its only element
    for (int64_t d : dims) {
      if (d != 0 && d != -1) return Error{"Dimension out of range (expected to be in range of [-1, 0], but got " + std::to_string(d) + ")"};
    }
    if (dims.size() > 1) return Error{"dim 0 appears multiple times in the list of dims"};
    const NodeId row = FJ_TRY(reshape(x, {SymExpr::integer(1)}));
    return reduce(op, row, {0}, false, dtype);
  }
  const bool arg = op == Op::ArgMax || op == Op::ArgMin;
  if (arg && in.dtype == DType::Bool) return Error{name + " of a bool tensor (eager raises)"};
  if (dims.empty()) {
    for (size_t d = 0; d < in.rank(); ++d) dims.push_back(static_cast<int64_t>(d));
  } else if (arg && dims.size() != 1) {
    return Error{name + " over several dims"};
  }
  std::set<int64_t> seen;
  for (int64_t& d : dims) {
    auto n = norm_dim(x, d);
    if (!n) return n.take_error();
    d = *n;
    if (!seen.insert(d).second) {
      return Error{"dim " + std::to_string(d) + " appears multiple times in the list of dims"};
    }
  }
  std::sort(dims.begin(), dims.end());

  DType result = in.dtype, compute = in.dtype;
  switch (op) {
    case Op::Sum:
    case Op::Prod:
      result = dtype ? *dtype : (in.dtype == DType::Bool || is_integral(in.dtype)) ? DType::Int64 : in.dtype;
      // float32 accumulates in double: within eager's own rounding on long rows.
      compute = result == DType::Float32 ? DType::Float64 : result;
      if (result == DType::Bool) compute = DType::Int64;
      break;
    case Op::Amax:
    case Op::Amin:
      if (dtype) return Error{name + " with a dtype"};
      break;
    case Op::ArgMax:
    case Op::ArgMin:
      if (dtype) return Error{name + " with a dtype"};
      if (in.dtype == DType::Bool) return Error{"\"" + name + "\" not implemented for 'Bool'"};
      result = DType::Int64;
      break;
    case Op::Any:
    case Op::All:
      if (dtype) return Error{name + " with a dtype"};
      result = in.dtype == DType::UInt8 ? DType::UInt8 : DType::Bool;
      compute = DType::Bool;
      break;
    default: FJ_CHECK(false, "unhandled reduction");
  }
  const bool needs_elements = op == Op::Amax || op == Op::Amin || arg;
  SymShape sym;
  for (size_t d = 0; d < in.rank(); ++d) {
    const bool reduced = std::binary_search(dims.begin(), dims.end(), static_cast<int64_t>(d));
    if (reduced && needs_elements && is_const(in.sym[d], 0)) {
      return Error{name + ": Expected reduction dim " + std::to_string(d) + " to have non-zero size"};
    }
    if (!reduced) sym.push_back(in.sym[d]);
    else if (keepdim) sym.push_back(SymExpr::integer(1));
  }
  Node n{op, result, std::move(sym), {x}, 0, -1};
  n.compute = compute;
  n.dims = std::move(dims);
  n.keepdim = keepdim;
  return push(std::move(n));
}

namespace {

std::vector<int64_t> all_dims(size_t rank) {
  std::vector<int64_t> d(rank);
  for (size_t i = 0; i < rank; ++i) d[i] = static_cast<int64_t>(i);
  return d;
}

}  // namespace

// Normalizes `dims` (empty: all) and returns the number of elements they hold.
Expected<SymExpr> Graph::reduced_count(NodeId x, std::vector<int64_t>* dims) const {
  const SymShape& sizes = node(x).sym;
  if (dims->empty()) *dims = all_dims(sizes.size());
  SymExpr count = SymExpr::integer(1);
  for (int64_t& d : *dims) {
    auto n = norm_dim(x, d);
    if (!n) return n.take_error();
    d = *n;
    // A 0-d tensor takes dim 0 (or -1) as its one element.
    if (static_cast<size_t>(d) < sizes.size()) count = mul(count, sizes[static_cast<size_t>(d)]);
  }
  return count;
}

Expected<NodeId> Graph::mean(NodeId x, std::vector<int64_t> dims, bool keepdim,
                             std::optional<DType> dtype) {
  if (dtype) {
    auto c = cast(x, *dtype);
    if (!c) return c;
    x = *c;
  }
  const Node& in = node(x);
  if (!is_floating(in.dtype)) {
    return Error{"mean(): could not infer output dtype. Input dtype must be either a floating "
                 "point or complex dtype. Got: " + std::string(dtype_name(in.dtype))};
  }
  auto count = reduced_count(x, &dims);
  if (!count) return count.take_error();
  const DType t = in.dtype;
  auto s = reduce(Op::Sum, x, dims, keepdim, t);
  if (!s) return s;
  return pointwise(Op::Div, {*s, count->as_int() ? scalar_int(*count->as_int()) : size_scalar(*count)});
}

Expected<NodeId> Graph::var(NodeId x, std::vector<int64_t> dims, double correction, bool keepdim) {
  const Node in = node(x);  // a copy: building nodes moves the graph's storage
  if (!is_floating(in.dtype)) return Error{"var: a floating tensor is needed"};
  if (correction != static_cast<double>(static_cast<int64_t>(correction))) {
    return Error{"var: a non-integral correction (not supported)"};
  }
  auto count = reduced_count(x, &dims);
  if (!count) return count.take_error();
  auto m = mean(x, dims, true);
  if (!m) return m;
  auto diff = pointwise(Op::Sub, {x, *m});
  if (!diff) return diff;
  auto sq = pointwise(Op::Mul, {*diff, *diff});
  if (!sq) return sq;
  auto s = reduce(Op::Sum, *sq, dims, keepdim, in.dtype);
  if (!s) return s;
  const SymExpr denom = max(SymExpr::integer(0), sub(*count, SymExpr::integer(static_cast<int64_t>(correction))));
  return pointwise(Op::Div, {*s, denom.as_int() ? scalar_int(*denom.as_int()) : size_scalar(denom)});
}

Expected<NodeId> Graph::softmax(NodeId x, int64_t dim, bool log) {
  const Node in = node(x);  // a copy: building nodes moves the graph's storage
  const char* what = log ? "log_softmax" : "softmax";
  if (!is_floating(in.dtype)) {
    return Error{std::string(what) + ": not implemented for '" + std::string(dtype_name(in.dtype)) + "'"};
  }
  auto m = reduce(Op::Amax, x, {dim}, true);
  if (!m) return m;
  auto shifted = pointwise(Op::Sub, {x, *m});
  if (!shifted) return shifted;
  auto e = pointwise(Op::Exp, {*shifted});
  if (!e) return e;
  auto s = reduce(Op::Sum, *e, {dim}, true, in.dtype);
  if (!s) return s;
  if (!log) return pointwise(Op::Div, {*e, *s});
  auto ls = pointwise(Op::Log, {*s});
  if (!ls) return ls;
  return pointwise(Op::Sub, {*shifted, *ls});
}

Expected<NodeId> Graph::logsumexp(NodeId x, std::vector<int64_t> dims, bool keepdim) {
  const Node in = node(x);  // a copy: building nodes moves the graph's storage
  if (!is_floating(in.dtype)) return Error{"logsumexp: a floating tensor is needed"};
  if (dims.empty()) dims = all_dims(in.rank());
  auto m = reduce(Op::Amax, x, dims, true);
  if (!m) return m;
  // An infinite maximum is replaced by 0 so that inf - inf does not make NaN.
  auto inf = pointwise(Op::IsInf, {*m});
  if (!inf) return inf;
  auto safe = pointwise(Op::Where, {*inf, scalar(0.0), *m});
  if (!safe) return safe;
  auto shifted = pointwise(Op::Sub, {x, *safe});
  if (!shifted) return shifted;
  auto e = pointwise(Op::Exp, {*shifted});
  if (!e) return e;
  const std::vector<int64_t> reduced = node(*m).dims;
  auto s = reduce(Op::Sum, *e, reduced, keepdim, in.dtype);
  if (!s) return s;
  auto l = pointwise(Op::Log, {*s});
  if (!l) return l;
  NodeId offset = *safe;
  if (!keepdim) {
    const SymShape out = node(*s).sym;
    auto r = reshape(*safe, out);
    if (!r) return r;
    offset = *r;
  }
  return pointwise(Op::Add, {*l, offset});
}

Expected<NodeId> Graph::layer_norm(NodeId x, size_t normalized_ndim, NodeId weight, NodeId bias,
                                   double eps) {
  const Node& in = node(x);
  if (!is_floating(in.dtype)) return Error{"layer_norm: a floating tensor is needed"};
  if (normalized_ndim == 0 || normalized_ndim > in.rank()) return Error{"layer_norm: bad normalized_shape"};
  std::vector<int64_t> dims;
  for (size_t d = in.rank() - normalized_ndim; d < in.rank(); ++d) dims.push_back(static_cast<int64_t>(d));
  auto m = mean(x, dims, true);
  if (!m) return m;
  auto diff = pointwise(Op::Sub, {x, *m});
  if (!diff) return diff;
  auto sq = pointwise(Op::Mul, {*diff, *diff});
  if (!sq) return sq;
  auto v = mean(*sq, dims, true);
  if (!v) return v;
  auto ve = pointwise(Op::Add, {*v, scalar(eps)});
  if (!ve) return ve;
  auto rstd = pointwise(Op::Rsqrt, {*ve});
  if (!rstd) return rstd;
  auto y = pointwise(Op::Mul, {*diff, *rstd});
  if (!y) return y;
  if (weight >= 0) {
    y = pointwise(Op::Mul, {*y, weight});
    if (!y) return y;
  }
  if (bias >= 0) y = pointwise(Op::Add, {*y, bias});
  return y;
}

// --- views and movement ----------------------------------------------------

Expected<NodeId> Graph::permute(NodeId x, std::vector<int64_t> order) {
  const Node& in = node(x);
  if (is_python_scalar(in)) return Error{"permute of a Python number"};
  if (order.size() != in.rank()) {
    return Error{"permute(sparse_coo): number of dimensions in the tensor input does not match "
                 "the length of the desired ordering of dimensions i.e. input.dim() = " +
                 std::to_string(in.rank()) + " is not equal to len(dims) = " + std::to_string(order.size())};
  }
  std::set<int64_t> seen;
  bool identity = true;
  SymShape sym;
  for (size_t i = 0; i < order.size(); ++i) {
    auto d = norm_dim(x, order[i]);
    if (!d) return d.take_error();
    if (!seen.insert(*d).second) return Error{"permute(): duplicate dims are not allowed."};
    order[i] = *d;
    identity = identity && *d == static_cast<int64_t>(i);
    sym.push_back(in.sym[static_cast<size_t>(*d)]);
  }
  if (identity) return x;
  Node n{Op::Permute, in.dtype, std::move(sym), {x}, 0, -1};
  n.dims = std::move(order);
  return push(std::move(n));
}

Expected<NodeId> Graph::transpose(NodeId x, int64_t d0, int64_t d1) {
  auto a = norm_dim(x, d0);
  if (!a) return a.take_error();
  auto b = norm_dim(x, d1);
  if (!b) return b.take_error();
  if (node(x).rank() == 0) return x;
  std::vector<int64_t> order = all_dims(node(x).rank());
  std::swap(order[static_cast<size_t>(*a)], order[static_cast<size_t>(*b)]);
  return permute(x, std::move(order));
}

Expected<NodeId> Graph::alias(NodeId x) {
  const Node& in = node(x);
  if (is_python_scalar(in)) return Error{"alias of a Python number"};
  Node n{Op::Reshape, in.dtype, in.sym, {x}, 0, -1};
  return push(std::move(n));
}

Expected<bool> Graph::require_same_shape(const SymShape& a, const SymShape& b) {
  if (a.size() != b.size()) return Error{"shapes of different ranks cannot be the same"};
  std::vector<SymExpr> assumed;
  for (size_t d = 0; d < a.size(); ++d) {
    if (!need(eq(a[d], b[d]), &assumed)) return Error{"size " + a[d].str() + " is not " + b[d].str()};
  }
  for (SymExpr& c : assumed) assumptions_.push_back(std::move(c));
  return true;
}

Expected<NodeId> Graph::reshape(NodeId x, SymShape sizes) {
  const Node& in = node(x);
  if (is_python_scalar(in)) return Error{"view of a Python number"};
  const SymExpr total = numel(in.sym);
  int infer = -1;
  SymExpr known = SymExpr::integer(1);
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (is_const(sizes[i], -1)) {
      if (infer >= 0) return Error{"only one dimension can be inferred"};
      infer = static_cast<int>(i);
      continue;
    }
    if (sizes[i].is_constant() && *sizes[i].as_int() < 0) {
      return Error{"invalid shape dimension " + sizes[i].str()};
    }
    known = mul(known, sizes[i]);
  }
  std::vector<SymExpr> assumed;
  if (infer >= 0) {
    if (is_const(known, 0)) return Error{"cannot reshape tensor of 0 elements into a shape with -1"};
    if (!need(eq(mod(total, known), SymExpr::integer(0)), &assumed)) {
      return Error{"shape is invalid for input of size " + total.str()};
    }
    sizes[static_cast<size_t>(infer)] = floordiv(total, known);
  } else if (!need(eq(known, total), &assumed)) {
    return Error{"shape '" + known.str() + "' is invalid for input of size " + total.str()};
  }
  for (SymExpr& a : assumed) assumptions_.push_back(std::move(a));
  if (same_shape(sizes, in.sym)) return x;
  Node n{Op::Reshape, in.dtype, std::move(sizes), {x}, 0, -1};
  return push(std::move(n));
}

Expected<NodeId> Graph::unsqueeze(NodeId x, int64_t dim) {
  auto d = norm_dim(x, dim, true);
  if (!d) return d.take_error();
  SymShape sizes = node(x).sym;
  sizes.insert(sizes.begin() + *d, SymExpr::integer(1));
  return reshape(x, std::move(sizes));
}

Expected<NodeId> Graph::expand(NodeId x, SymShape sizes) {
  const Node& in = node(x);
  if (is_python_scalar(in)) return Error{"expand of a Python number"};
  if (sizes.size() < in.rank()) {
    return Error{"expand: the number of sizes provided (" + std::to_string(sizes.size()) +
                 ") must be greater or equal to the number of dimensions in the tensor (" +
                 std::to_string(in.rank()) + ")"};
  }
  const size_t lead = sizes.size() - in.rank();
  std::vector<SymExpr> assumed;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (i < lead) {
      if (!sizes[i].is_constant() || *sizes[i].as_int() >= 0) continue;
      return Error{"expand: -1 is not allowed in a leading, non-existing dimension"};
    }
    const SymExpr& have = in.sym[i - lead];
    if (is_const(sizes[i], -1)) {
      sizes[i] = have;
    } else if (!is_const(have, 1) && !need(eq(have, sizes[i]), &assumed)) {
      return Error{"The expanded size of the tensor (" + sizes[i].str() +
                   ") must match the existing size (" + have.str() + ") at non-singleton dimension " +
                   std::to_string(i)};
    }
  }
  for (SymExpr& a : assumed) assumptions_.push_back(std::move(a));
  if (same_shape(sizes, in.sym)) return x;
  Node n{Op::Expand, in.dtype, std::move(sizes), {x}, 0, -1};
  return push(std::move(n));
}

Expected<NodeId> Graph::slice(NodeId x, int64_t dim, SymExpr start, SymExpr length, int64_t step) {
  const Node& in = node(x);
  if (is_python_scalar(in) || in.rank() == 0) return Error{"slice of a 0-d tensor"};
  if (step < 1) return Error{"slice step must be positive"};
  auto d = norm_dim(x, dim);
  if (!d) return d.take_error();
  const size_t k = static_cast<size_t>(*d);
  if (is_const(start, 0) && step == 1 && length.same(in.sym[k])) return x;
  SymShape sym = in.sym;
  sym[k] = length;
  Node n{Op::Slice, in.dtype, std::move(sym), {x}, 0, -1};
  n.dims = {*d};
  n.args = {std::move(start), SymExpr::integer(step)};
  return push(std::move(n));
}

Expected<NodeId> Graph::select(NodeId x, int64_t dim, SymExpr index) {
  const Node& in = node(x);
  if (is_python_scalar(in) || in.rank() == 0) return Error{"select() cannot be applied to a 0-dim tensor."};
  auto d = norm_dim(x, dim);
  if (!d) return d.take_error();
  SymShape sym = in.sym;
  sym.erase(sym.begin() + *d);
  Node n{Op::Select, in.dtype, std::move(sym), {x}, 0, -1};
  n.dims = {*d};
  n.args = {std::move(index)};
  return push(std::move(n));
}

Expected<NodeId> Graph::slice_scatter(NodeId base, NodeId src, int64_t dim, SymExpr start, int64_t step) {
  const Node& b = node(base);
  const Node& s = node(src);
  if (is_python_scalar(b) || is_python_scalar(s) || b.rank() == 0) return Error{"slice_scatter of a 0-d tensor"};
  if (b.rank() != s.rank() || b.dtype != s.dtype) return Error{"slice_scatter: the source differs in rank or dtype"};
  if (step < 1) return Error{"slice_scatter step must be positive"};
  auto d = norm_dim(base, dim);
  if (!d) return d.take_error();
  const size_t k = static_cast<size_t>(*d);
  for (size_t i = 0; i < b.rank(); ++i) {
    if (i != k && !b.sym[i].same(s.sym[i])) return Error{"slice_scatter: the source's sizes differ from the base's"};
  }
  if (is_const(s.sym[k], 0)) return base;  // an empty slice writes nothing
  Node n{Op::SliceScatter, b.dtype, b.sym, {base, src}, 0, -1};
  n.dims = {*d};
  n.args = {std::move(start), SymExpr::integer(step)};
  return push(std::move(n));
}

Expected<NodeId> Graph::flip(NodeId x, std::vector<int64_t> dims) {
  const Node& in = node(x);
  if (is_python_scalar(in)) return Error{"flip of a Python number"};
  std::set<int64_t> seen;
  for (int64_t& d : dims) {
    auto n = norm_dim(x, d);
    if (!n) return n.take_error();
    d = *n;
    if (!seen.insert(d).second) return Error{"dim " + std::to_string(d) + " appears multiple times in the list of dims"};
  }
  std::sort(dims.begin(), dims.end());
  // Flipping a size-1 dim (or a 0-d tensor) changes nothing.
  dims.erase(std::remove_if(dims.begin(), dims.end(),
                            [&](int64_t d) { return in.rank() == 0 || is_const(in.sym[static_cast<size_t>(d)], 1); }),
             dims.end());
  if (dims.empty()) return x;
  Node n{Op::Flip, in.dtype, in.sym, {x}, 0, -1};
  n.dims = std::move(dims);
  return push(std::move(n));
}

Expected<NodeId> Graph::cat(const std::vector<NodeId>& xs, int64_t dim) {
  if (xs.empty()) return Error{"torch.cat(): expected a non-empty list of Tensors"};
  std::vector<OperandType> types;
  for (NodeId x : xs) {
    const Node& in = node(x);
    if (is_python_scalar(in)) return Error{"cat of a Python number"};
    if (in.rank() == 0) return Error{"zero-dimensional tensor cannot be concatenated"};
    if (in.rank() != node(xs[0]).rank()) return Error{"Tensors must have same number of dimensions"};
    types.push_back(OperandType{in.dtype, false, false});
  }
  auto d = norm_dim(xs[0], dim);
  if (!d) return d.take_error();
  const size_t k = static_cast<size_t>(*d);
  const DType t = result_type(types);
  std::vector<SymExpr> assumed;
  SymShape sym = node(xs[0]).sym;
  SymExpr total = SymExpr::integer(0);
  std::vector<NodeId> inputs;
  for (NodeId x : xs) {
    const Node& in = node(x);
    for (size_t i = 0; i < sym.size(); ++i) {
      if (i != k && !need(eq(in.sym[i], sym[i]), &assumed)) {
        return Error{"Sizes of tensors must match except in dimension " + std::to_string(k)};
      }
    }
    total = add(total, in.sym[k]);
    auto c = cast(x, t);
    if (!c) return c;
    inputs.push_back(*c);
  }
  for (SymExpr& a : assumed) assumptions_.push_back(std::move(a));
  if (inputs.size() == 1) return inputs[0];
  sym[k] = total;
  Node n{Op::Cat, t, std::move(sym), std::move(inputs), 0, -1};
  n.dims = {*d};
  return push(std::move(n));
}

Expected<NodeId> Graph::index_select(NodeId x, int64_t dim, NodeId index, bool wrap_negative) {
  const Node& in = node(x);
  const Node& idx = node(index);
  if (is_python_scalar(in) || is_python_scalar(idx)) return Error{"index_select of a Python number"};
  if (idx.dtype != DType::Int64 && idx.dtype != DType::Int32) {
    return Error{"index_select(): Expected dtype int32 or int64 for index"};
  }
  if (in.rank() == 0) return Error{"index_select of a 0-d tensor (not supported)"};
  auto d = norm_dim(x, dim);
  if (!d) return d.take_error();
  const size_t k = static_cast<size_t>(*d);
  if (is_const(in.sym[k], 0)) return Error{"index_select from an empty dim"};
  SymShape sym(in.sym.begin(), in.sym.begin() + *d);
  sym.insert(sym.end(), idx.sym.begin(), idx.sym.end());
  sym.insert(sym.end(), in.sym.begin() + *d + 1, in.sym.end());
  Node n{Op::IndexSelect, in.dtype, std::move(sym), {x, index}, 0, -1};
  n.dims = {*d};
  n.int_value = wrap_negative ? 1 : 0;
  return push(std::move(n));
}

Expected<NodeId> Graph::gather(NodeId x, int64_t dim, NodeId index) {
  const Node& in = node(x);
  const Node& idx = node(index);
  if (is_python_scalar(in) || is_python_scalar(idx)) return Error{"gather of a Python number"};
  if (idx.dtype != DType::Int64) return Error{"gather(): Expected dtype int64 for index"};
  if (in.rank() != idx.rank() || in.rank() == 0) {
    return Error{"Index tensor must have the same number of dimensions as input tensor"};
  }
  auto d = norm_dim(x, dim);
  if (!d) return d.take_error();
  std::vector<SymExpr> assumed;
  for (size_t i = 0; i < in.rank(); ++i) {
    if (static_cast<int64_t>(i) != *d && !need(le(idx.sym[i], in.sym[i]), &assumed)) {
      return Error{"Size does not match at dimension " + std::to_string(i)};
    }
  }
  for (SymExpr& a : assumed) assumptions_.push_back(std::move(a));
  Node n{Op::Gather, in.dtype, idx.sym, {x, index}, 0, -1};
  n.dims = {*d};
  return push(std::move(n));
}

// --- creation and Python numbers --------------------------------------------

Expected<NodeId> Graph::full(SymShape sizes, NodeId value, DType dtype) {
  if (!is_python_scalar(node(value))) return Error{"full: the fill value must be a Python number"};
  for (const SymExpr& s : sizes) {
    if (s.is_constant() && *s.as_int() < 0) return Error{"Trying to create tensor with negative dimension"};
  }
  Node n{Op::Full, dtype, std::move(sizes), {value}, 0, -1};
  n.compute = dtype;
  return push(std::move(n));
}

NodeId Graph::iota(SymShape sizes, int64_t dim) {
  FJ_CHECK(dim >= 0 && static_cast<size_t>(dim) < sizes.size(), "iota: dim out of range");
  Node n{Op::Iota, DType::Int64, std::move(sizes), {}, 0, -1};
  n.dims = {dim};
  return push(std::move(n));
}

Expected<NodeId> Graph::item(NodeId x, ScalarKind kind) {
  const Node& in = node(x);
  if (is_python_scalar(in)) return Error{"item of a Python number"};
  if (!is_const(numel(in.sym), 1)) return Error{"a Tensor with more than one element (or a symbolic size) cannot be converted to Scalar"};
  const Op op = kind == ScalarKind::Int ? Op::ItemInt : kind == ScalarKind::Float ? Op::ItemFloat : Op::ItemBool;
  const bool can_fail = kind == ScalarKind::Int && is_floating(in.dtype);
  Node n{op, scalar_kind_dtype(kind), {}, {x}, 0, -1};
  n.scalar_kind = kind;
  n.compute = in.dtype;
  const NodeId id = push(std::move(n));
  if (can_fail) checks_.push_back(id);  // NaN and infinities raise in eager, used or not
  return id;
}

// --- matmul ------------------------------------------------------------------

Expected<NodeId> Graph::matmul(NodeId a, NodeId b) {
  const Node& x = node(a);
  const Node& y = node(b);
  if (is_python_scalar(x) || is_python_scalar(y) || x.rank() < 2 || y.rank() < 2) {
    return Error{"matmul of operands with fewer than 2 dims (the caller reshapes them)"};
  }
  if (x.dtype != y.dtype) {
    return Error{"expected m1 and m2 to have the same dtype, but got: " + std::string(dtype_name(x.dtype)) +
                 " != " + std::string(dtype_name(y.dtype))};
  }
  if (!is_floating(x.dtype)) return Error{"matmul of integer tensors (not supported)"};
  std::vector<SymExpr> assumed;
  const SymExpr& k1 = x.sym[x.rank() - 1];
  const SymExpr& k2 = y.sym[y.rank() - 2];
  if (!need(eq(k1, k2), &assumed)) {
    return Error{"mat1 and mat2 shapes cannot be multiplied (" + x.sym[x.rank() - 2].str() + "x" +
                 k1.str() + " and " + k2.str() + "x" + y.sym[y.rank() - 1].str() + ")"};
  }
  auto batch = broadcast_sym(SymShape(x.sym.begin(), x.sym.end() - 2),
                             SymShape(y.sym.begin(), y.sym.end() - 2), &assumed);
  if (!batch) return batch.take_error();
  for (SymExpr& c : assumed) assumptions_.push_back(std::move(c));
  SymShape sym = std::move(*batch);
  sym.push_back(x.sym[x.rank() - 2]);
  sym.push_back(y.sym[y.rank() - 1]);
  Node n{Op::Matmul, x.dtype, std::move(sym), {a, b}, 0, -1};
  n.compute = x.dtype;
  return push(std::move(n));
}

Expected<NodeId> Graph::linear(NodeId x, NodeId w, NodeId bias) {
  const Node in = node(x);  // a copy: building nodes moves the graph's storage
  if (is_python_scalar(in) || in.rank() == 0 || node(w).rank() != 2) return Error{"linear: unsupported ranks"};
  auto wt = transpose(w, 0, 1);
  if (!wt) return wt;
  // Rows of every leading dim go through one 2-d product.
  const SymShape lead(in.sym.begin(), in.sym.end() - 1);
  auto flat = reshape(x, {numel(lead), in.sym.back()});
  if (!flat) return flat;
  auto y = matmul(*flat, *wt);
  if (!y) return y;
  SymShape out = lead;
  const SymExpr cols = node(*y).sym.back();
  out.push_back(cols);
  y = reshape(*y, out);
  if (!y) return y;
  if (bias >= 0) y = pointwise(Op::Add, {*y, bias});
  return y;
}

Expected<NodeId> Graph::extern_call(std::shared_ptr<const ExternFn> fn, std::vector<NodeId> operands, DType dtype,
                                    SymShape sizes) {
  for (NodeId in : operands) {
    if (is_python_scalar(node(in))) return Error{fn->name() + ": a Python number operand (not supported yet)"};
  }
  Node n{Op::ExternCall, dtype, std::move(sizes), std::move(operands), 0, -1};
  n.compute = dtype;
  n.extern_fn = std::move(fn);
  return push(std::move(n));
}

}  // namespace fj::jit
