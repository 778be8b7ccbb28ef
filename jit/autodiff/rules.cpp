// Each op's gradient rule, and the table that gives every op of jit/ir/ops.def one
// (tinygrad's gradient table is the model). A rule maps its node's gradient `gy`
// through the op's derivative and adds the result to its operands' gradients; ops
// that eager gives no gradient (piecewise constant, non-floating results) say so in
// the table, and an op that has no rule here makes differentiate() an Error.
#include <algorithm>
#include <numbers>

#include "jit/autodiff/differentiator.h"

namespace fj::jit::autodiff_detail {

// What one op's gradient rule works with: forward node `n`, the gradient `gy` that
// flows into it, and the draft backward `graph` to build in. Operands are named by
// their position k in n.inputs.
class Backprop {
 public:
  Backprop(Differentiator& d, NodeId id)
      : id(id), n(d.g_.node(id)), gy(d.grad_[static_cast<size_t>(id)]), graph(d.b_), d_(d) {}

  const NodeId id;  // the forward node
  const Node& n;    // its forward graph's, which does not change while rules run
  const NodeId gy;  // its gradient, a node of `graph`
  Graph& graph;

  const Node& operand(size_t k) const { return d_.g_.node(n.inputs[k]); }
  // A gradient flows into operand k.
  bool needs(size_t k) const { return d_.needs(n.inputs[k]); }
  // Operand k's value in `graph` (recomputed or saved).
  Expected<NodeId> x(size_t k) { return d_.value(n.inputs[k]); }
  // The node's own value in `graph`.
  Expected<NodeId> y() { return d_.value(id); }
  // Adds contribution `c` (an Error passes through) to operand k's gradient.
  Status acc(size_t k, Expected<NodeId> c) {
    const NodeId v = FJ_TRY(c);
    return d_.accumulate(n.inputs[k], v);
  }
  Expected<NodeId> pw(Op op, const std::vector<NodeId>& in) { return d_.pw(op, in); }
  NodeId num(double v) { return d_.num(v); }
  Expected<NodeId> keep_dims(NodeId v) { return d_.keep_dims(v, n); }
  Expected<NodeId> zeros(const SymShape& sym, DType dtype) { return d_.zeros(sym, dtype); }
  Expected<NodeId> transposed_product(NodeId g) { return d_.transposed_product(g); }
  Status no_rule() const { return Error{"autodiff: no gradient rule for " + std::string(aten_name(n.op))}; }

 private:
  Differentiator& d_;
};

namespace {

constexpr double kInvSqrtPi = std::numbers::inv_sqrtpi;
constexpr double kSqrtHalf = std::numbers::sqrt2 / 2;

// The chain rule of a unary op: gy * dy/dx into its operand.
Status chain(Backprop& r, Expected<NodeId> dydx) {
  const NodeId d = FJ_TRY(dydx);
  return r.acc(0, r.pw(Op::Mul, {r.gy, d}));
}

// --- no gradient ---

// Inputs and constants: the walk ends at them.
Status leaf(Backprop&) { return ok(); }
// Piecewise constant (zero gradient, as eager) or a non-floating result.
Status no_gradient(Backprop&) { return ok(); }
// Not differentiable here: the caller falls back to eager autograd.
Status no_rule(Backprop& r) { return r.no_rule(); }

// --- arithmetic ---

Status add_grad(Backprop& r) {
  if (r.needs(0)) FJ_TRY(r.acc(0, r.gy));
  if (r.needs(1)) FJ_TRY(r.acc(1, r.gy));
  return ok();
}

Status sub_grad(Backprop& r) {
  if (r.needs(0)) FJ_TRY(r.acc(0, r.gy));
  if (r.needs(1)) FJ_TRY(r.acc(1, r.pw(Op::Neg, {r.gy})));
  return ok();
}

Status mul_grad(Backprop& r) {
  if (r.needs(0)) {
    const NodeId b = FJ_TRY(r.x(1));
    FJ_TRY(r.acc(0, r.pw(Op::Mul, {r.gy, b})));
  }
  if (r.needs(1)) {
    const NodeId a = FJ_TRY(r.x(0));
    FJ_TRY(r.acc(1, r.pw(Op::Mul, {r.gy, a})));
  }
  return ok();
}

Status div_grad(Backprop& r) {
  const NodeId b = FJ_TRY(r.x(1));
  if (r.needs(0)) FJ_TRY(r.acc(0, r.pw(Op::Div, {r.gy, b})));
  if (r.needs(1)) {
    // As eager: -grad * a / (b * b).
    const NodeId a = FJ_TRY(r.x(0));
    const NodeId bb = FJ_TRY(r.pw(Op::Mul, {b, b}));
    const NodeId ng = FJ_TRY(r.pw(Op::Neg, {r.gy}));
    const NodeId nga = FJ_TRY(r.pw(Op::Mul, {ng, a}));
    FJ_TRY(r.acc(1, r.pw(Op::Div, {nga, bb})));
  }
  return ok();
}

Status remainder_grad(Backprop& r) {
  if (r.needs(0)) FJ_TRY(r.acc(0, r.gy));
  if (r.needs(1)) {
    // d/db (a - floor(a / b) * b) = -floor(a / b)
    const NodeId a = FJ_TRY(r.x(0));
    const NodeId b = FJ_TRY(r.x(1));
    const NodeId q = FJ_TRY(r.pw(Op::Div, {a, b}));
    const NodeId fq = FJ_TRY(r.pw(Op::Floor, {q}));
    const NodeId ng = FJ_TRY(r.pw(Op::Neg, {r.gy}));
    FJ_TRY(r.acc(1, r.pw(Op::Mul, {ng, fq})));
  }
  return ok();
}

Status neg_grad(Backprop& r) { return r.acc(0, r.pw(Op::Neg, {r.gy})); }

Status abs_grad(Backprop& r) {
  const NodeId x = FJ_TRY(r.x(0));
  return chain(r, r.pw(Op::Sign, {x}));
}

// Maximum, Minimum. As eager: ties split the gradient in halves; a NaN passes it to both.
Status max_min_grad(Backprop& r) {
  const NodeId a = FJ_TRY(r.x(0));
  const NodeId b = FJ_TRY(r.x(1));
  const NodeId tie = FJ_TRY(r.pw(Op::Eq, {a, b}));
  const NodeId half = FJ_TRY(r.pw(Op::Div, {r.gy, r.num(2.0)}));
  const NodeId h = FJ_TRY(r.pw(Op::Where, {tie, half, r.gy}));
  const bool max = r.n.op == Op::Maximum;
  if (r.needs(0)) {
    const NodeId lose = FJ_TRY(r.pw(max ? Op::Lt : Op::Gt, {a, b}));
    FJ_TRY(r.acc(0, r.pw(Op::Where, {lose, r.num(0.0), h})));
  }
  if (r.needs(1)) {
    const NodeId lose = FJ_TRY(r.pw(max ? Op::Gt : Op::Lt, {a, b}));
    FJ_TRY(r.acc(1, r.pw(Op::Where, {lose, r.num(0.0), h})));
  }
  return ok();
}

// x^c into x: grad * c * x^(c - 1), zeros where c == 0 (as eager). `c` is a tensor.
Status power_rule(Backprop& r, NodeId x, NodeId c) {
  const NodeId cm1 = FJ_TRY(r.pw(Op::Sub, {c, r.num(1.0)}));
  const NodeId p = FJ_TRY(r.pw(Op::Pow, {x, cm1}));
  const NodeId cp = FJ_TRY(r.pw(Op::Mul, {p, c}));
  const NodeId gp = FJ_TRY(r.pw(Op::Mul, {r.gy, cp}));
  const NodeId zero = FJ_TRY(r.pw(Op::Eq, {c, r.num(0.0)}));
  return r.acc(0, r.pw(Op::Where, {zero, r.num(0.0), gp}));
}

Status pow_scalar_grad(Backprop& r) {
  const Node& e = r.operand(1);
  const NodeId x = FJ_TRY(r.x(0));
  if (e.op != Op::Scalar) {
    // A runtime exponent: as a 0-d tensor.
    const NodeId cs = FJ_TRY(r.x(1));
    const NodeId ct = FJ_TRY(r.graph.full({}, cs, r.n.dtype));
    return power_rule(r, x, ct);
  }
  const bool is_float = e.scalar_kind == ScalarKind::Float;
  const double c = is_float ? e.scalar : static_cast<double>(e.int_value);
  if (c == 0) return ok();  // eager: zeros
  if (c == 1) return r.acc(0, r.gy);
  const NodeId em1 = is_float ? r.graph.scalar(c - 1) : r.graph.scalar_int(e.int_value - 1);
  const NodeId p = FJ_TRY(r.pw(Op::PowScalar, {x, em1}));
  return chain(r, r.pw(Op::Mul, {p, r.num(c)}));
}

// a^b into b: grad * y * log(a), zeros where a == 0 and b >= 0 (as eager).
Status exponent_rule(Backprop& r, NodeId a, NodeId b) {
  NodeId base = a;
  if (is_python_scalar(r.graph.node(a))) base = FJ_TRY(r.graph.full({}, a, r.n.dtype));
  const NodeId y = FJ_TRY(r.y());
  const NodeId la = FJ_TRY(r.pw(Op::Log, {base}));
  const NodeId yl = FJ_TRY(r.pw(Op::Mul, {y, la}));
  const NodeId gyl = FJ_TRY(r.pw(Op::Mul, {r.gy, yl}));
  const NodeId az = FJ_TRY(r.pw(Op::Eq, {base, r.num(0.0)}));
  const NodeId bn = FJ_TRY(r.pw(Op::Ge, {b, r.num(0.0)}));
  const NodeId cond = FJ_TRY(r.pw(Op::LogicalAnd, {az, bn}));
  return r.acc(1, r.pw(Op::Where, {cond, r.num(0.0), gyl}));
}

Status pow_grad(Backprop& r) {
  const NodeId a = FJ_TRY(r.x(0));
  const NodeId b = FJ_TRY(r.x(1));
  if (r.needs(0)) FJ_TRY(power_rule(r, a, b));
  if (r.needs(1)) FJ_TRY(exponent_rule(r, a, b));
  return ok();
}

// --- math ---

Status exp_grad(Backprop& r) { return chain(r, r.y()); }

Status expm1_grad(Backprop& r) {
  const NodeId y = FJ_TRY(r.y());
  return chain(r, r.pw(Op::Add, {y, r.num(1.0)}));
}

Status log_grad(Backprop& r) {
  const NodeId x = FJ_TRY(r.x(0));
  return r.acc(0, r.pw(Op::Div, {r.gy, x}));
}

Status log1p_grad(Backprop& r) {
  const NodeId x = FJ_TRY(r.x(0));
  const NodeId x1 = FJ_TRY(r.pw(Op::Add, {x, r.num(1.0)}));
  return r.acc(0, r.pw(Op::Div, {r.gy, x1}));
}

Status log2_grad(Backprop& r) {  // gy / (x ln 2)
  const NodeId x = FJ_TRY(r.x(0));
  const NodeId x_ln2 = FJ_TRY(r.pw(Op::Mul, {x, r.num(std::numbers::ln2)}));
  return r.acc(0, r.pw(Op::Div, {r.gy, x_ln2}));
}

Status sqrt_grad(Backprop& r) {
  const NodeId y = FJ_TRY(r.y());
  const NodeId y2 = FJ_TRY(r.pw(Op::Mul, {y, r.num(2.0)}));
  return r.acc(0, r.pw(Op::Div, {r.gy, y2}));
}

Status rsqrt_grad(Backprop& r) {
  // -0.5 * grad * y^3
  const NodeId y = FJ_TRY(r.y());
  const NodeId y2 = FJ_TRY(r.pw(Op::Mul, {y, y}));
  const NodeId y3 = FJ_TRY(r.pw(Op::Mul, {y2, y}));
  const NodeId g2 = FJ_TRY(r.pw(Op::Mul, {r.gy, r.num(-0.5)}));
  return r.acc(0, r.pw(Op::Mul, {g2, y3}));
}

Status reciprocal_grad(Backprop& r) {
  const NodeId y = FJ_TRY(r.y());
  const NodeId y2 = FJ_TRY(r.pw(Op::Mul, {y, y}));
  const NodeId ng = FJ_TRY(r.pw(Op::Neg, {r.gy}));
  return r.acc(0, r.pw(Op::Mul, {ng, y2}));
}

Status sin_grad(Backprop& r) {
  const NodeId x = FJ_TRY(r.x(0));
  return chain(r, r.pw(Op::Cos, {x}));
}

Status cos_grad(Backprop& r) {
  const NodeId x = FJ_TRY(r.x(0));
  const NodeId s = FJ_TRY(r.pw(Op::Sin, {x}));
  return chain(r, r.pw(Op::Neg, {s}));
}

Status tanh_grad(Backprop& r) {
  const NodeId y = FJ_TRY(r.y());
  const NodeId y2 = FJ_TRY(r.pw(Op::Mul, {y, y}));
  return chain(r, r.pw(Op::Sub, {r.num(1.0), y2}));
}

Status sigmoid_grad(Backprop& r) {
  const NodeId y = FJ_TRY(r.y());
  const NodeId om = FJ_TRY(r.pw(Op::Sub, {r.num(1.0), y}));
  return chain(r, r.pw(Op::Mul, {y, om}));
}

Status erf_grad(Backprop& r) {
  // 2/sqrt(pi) * exp(-x^2)
  const NodeId x = FJ_TRY(r.x(0));
  const NodeId x2 = FJ_TRY(r.pw(Op::Mul, {x, x}));
  const NodeId nx2 = FJ_TRY(r.pw(Op::Neg, {x2}));
  const NodeId e = FJ_TRY(r.pw(Op::Exp, {nx2}));
  return chain(r, r.pw(Op::Mul, {e, r.num(2.0 * kInvSqrtPi)}));
}

// --- activations ---

Status relu_grad(Backprop& r) {
  // Eager's threshold_backward: the gradient where the result is > 0.
  const NodeId x = FJ_TRY(r.x(0));
  const NodeId pos = FJ_TRY(r.pw(Op::Gt, {x, r.num(0.0)}));
  return r.acc(0, r.pw(Op::Where, {pos, r.gy, r.num(0.0)}));
}

Status gelu_grad(Backprop& r) {
  // cdf(x) + x * pdf(x)
  const NodeId x = FJ_TRY(r.x(0));
  const NodeId xs = FJ_TRY(r.pw(Op::Mul, {x, r.num(kSqrtHalf)}));
  const NodeId erf = FJ_TRY(r.pw(Op::Erf, {xs}));
  const NodeId e1 = FJ_TRY(r.pw(Op::Add, {erf, r.num(1.0)}));
  const NodeId cdf = FJ_TRY(r.pw(Op::Mul, {e1, r.num(0.5)}));
  const NodeId x2 = FJ_TRY(r.pw(Op::Mul, {x, x}));
  const NodeId h = FJ_TRY(r.pw(Op::Mul, {x2, r.num(-0.5)}));
  const NodeId ex = FJ_TRY(r.pw(Op::Exp, {h}));
  const NodeId pdf = FJ_TRY(r.pw(Op::Mul, {ex, r.num(kInvSqrtPi * kSqrtHalf)}));
  const NodeId xp = FJ_TRY(r.pw(Op::Mul, {x, pdf}));
  return chain(r, r.pw(Op::Add, {cdf, xp}));
}

Status gelu_tanh_grad(Backprop& r) {
  // y = 0.5 x (1 + t), t = tanh(k (x + c x^3)):
  // dy/dx = 0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3 c x^2)
  const double k = std::numbers::sqrt2 * kInvSqrtPi, c = 0.044715;
  const NodeId x = FJ_TRY(r.x(0));
  const NodeId x2 = FJ_TRY(r.pw(Op::Mul, {x, x}));
  const NodeId x3 = FJ_TRY(r.pw(Op::Mul, {x2, x}));
  const NodeId cx3 = FJ_TRY(r.pw(Op::Mul, {x3, r.num(c)}));
  const NodeId u0 = FJ_TRY(r.pw(Op::Add, {x, cx3}));
  const NodeId u = FJ_TRY(r.pw(Op::Mul, {u0, r.num(k)}));
  const NodeId t = FJ_TRY(r.pw(Op::Tanh, {u}));
  const NodeId t1 = FJ_TRY(r.pw(Op::Add, {t, r.num(1.0)}));
  const NodeId left = FJ_TRY(r.pw(Op::Mul, {t1, r.num(0.5)}));
  const NodeId t2 = FJ_TRY(r.pw(Op::Mul, {t, t}));
  const NodeId sech2 = FJ_TRY(r.pw(Op::Sub, {r.num(1.0), t2}));
  const NodeId q0 = FJ_TRY(r.pw(Op::Mul, {x2, r.num(3.0 * c)}));
  const NodeId q1 = FJ_TRY(r.pw(Op::Add, {q0, r.num(1.0)}));
  const NodeId du = FJ_TRY(r.pw(Op::Mul, {q1, r.num(k)}));
  const NodeId r0 = FJ_TRY(r.pw(Op::Mul, {sech2, du}));
  const NodeId hx = FJ_TRY(r.pw(Op::Mul, {x, r.num(0.5)}));
  const NodeId right = FJ_TRY(r.pw(Op::Mul, {hx, r0}));
  return chain(r, r.pw(Op::Add, {left, right}));
}

Status silu_grad(Backprop& r) {
  // s (1 + x (1 - s)), s = sigmoid(x)
  const NodeId x = FJ_TRY(r.x(0));
  const NodeId s = FJ_TRY(r.pw(Op::Sigmoid, {x}));
  const NodeId om = FJ_TRY(r.pw(Op::Sub, {r.num(1.0), s}));
  const NodeId xom = FJ_TRY(r.pw(Op::Mul, {x, om}));
  const NodeId p1 = FJ_TRY(r.pw(Op::Add, {xom, r.num(1.0)}));
  return chain(r, r.pw(Op::Mul, {s, p1}));
}

Status softplus_grad(Backprop& r) {
  // The gradient itself above the threshold, else sigmoid(beta x).
  const NodeId x = FJ_TRY(r.x(0));
  const NodeId beta = FJ_TRY(r.x(1));
  const NodeId threshold = FJ_TRY(r.x(2));
  const NodeId z = FJ_TRY(r.pw(Op::Mul, {x, beta}));
  const NodeId s = FJ_TRY(r.pw(Op::Sigmoid, {z}));
  const NodeId gs = FJ_TRY(r.pw(Op::Mul, {r.gy, s}));
  const NodeId linear = FJ_TRY(r.pw(Op::Gt, {z, threshold}));
  return r.acc(0, r.pw(Op::Where, {linear, r.gy, gs}));
}

// --- clamping and selection ---

// Clamp, ClampMin, ClampMax. As eager: the gradient where lo <= x <= hi (NaN: none).
Status clamp_grad(Backprop& r) {
  const Op op = r.n.op;
  const NodeId x = FJ_TRY(r.x(0));
  NodeId mask = -1;
  if (op != Op::ClampMax) {
    const NodeId lo = FJ_TRY(r.x(1));
    mask = FJ_TRY(r.pw(Op::Ge, {x, lo}));
  }
  if (op != Op::ClampMin) {
    const NodeId hi = FJ_TRY(r.x(op == Op::Clamp ? 2 : 1));
    const NodeId le = FJ_TRY(r.pw(Op::Le, {x, hi}));
    if (mask < 0) {
      mask = le;
    } else {
      mask = FJ_TRY(r.pw(Op::LogicalAnd, {mask, le}));
    }
  }
  return r.acc(0, r.pw(Op::Where, {mask, r.gy, r.num(0.0)}));
}

Status where_grad(Backprop& r) {
  const NodeId cond = FJ_TRY(r.x(0));
  if (r.needs(1)) FJ_TRY(r.acc(1, r.pw(Op::Where, {cond, r.gy, r.num(0.0)})));
  if (r.needs(2)) FJ_TRY(r.acc(2, r.pw(Op::Where, {cond, r.num(0.0), r.gy})));
  return ok();
}

Status masked_fill_grad(Backprop& r) {
  const NodeId mask = FJ_TRY(r.x(1));
  return r.acc(0, r.pw(Op::Where, {mask, r.num(0.0), r.gy}));
}

Status nan_to_num_grad(Backprop& r) {
  const NodeId x = FJ_TRY(r.x(0));
  const NodeId nan = FJ_TRY(r.pw(Op::IsNan, {x}));
  const NodeId inf = FJ_TRY(r.pw(Op::IsInf, {x}));
  const NodeId bad = FJ_TRY(r.pw(Op::LogicalOr, {nan, inf}));
  return r.acc(0, r.pw(Op::Where, {bad, r.num(0.0), r.gy}));
}

// Cast: accumulate() casts the gradient back to the operand's type.
// Expand: accumulate() sums over the expanded dims.
Status identity_grad(Backprop& r) { return r.acc(0, r.gy); }

// --- reductions ---

Status sum_grad(Backprop& r) {
  const NodeId gk = FJ_TRY(r.keep_dims(r.gy));
  return r.acc(0, r.graph.expand(gk, r.operand(0).sym));
}

// Amax, Amin. As eager: the gradient split evenly among the elements equal to the result.
Status amax_amin_grad(Backprop& r) {
  const DType t = r.operand(0).dtype;
  const NodeId x = FJ_TRY(r.x(0));
  const NodeId y = FJ_TRY(r.y());
  const NodeId yk = FJ_TRY(r.keep_dims(y));
  const NodeId gk = FJ_TRY(r.keep_dims(r.gy));
  const NodeId hit = FJ_TRY(r.pw(Op::Eq, {x, yk}));
  const NodeId hitf = FJ_TRY(r.graph.cast(hit, t));
  const NodeId count = FJ_TRY(r.graph.reduce(Op::Sum, hitf, r.n.dims, true, t));
  const NodeId share = FJ_TRY(r.pw(Op::Div, {gk, count}));
  return r.acc(0, r.pw(Op::Mul, {share, hitf}));
}

Status cumsum_grad(Backprop& r) {
  // Each input element reaches every later output: the reversed cumsum of gy.
  const NodeId rev = FJ_TRY(r.graph.flip(r.gy, r.n.dims));
  const NodeId acc = FJ_TRY(r.graph.cumsum(rev, r.n.dims[0]));
  return r.acc(0, r.graph.flip(acc, r.n.dims));
}

// --- views ---

// A permutation that swaps the last two dims and keeps the others.
bool swaps_last_two(const std::vector<int64_t>& order) {
  const size_t r = order.size();
  if (r < 2) return false;
  for (size_t i = 0; i + 2 < r; ++i) {
    if (order[i] != static_cast<int64_t>(i)) return false;
  }
  return order[r - 2] == static_cast<int64_t>(r - 1) && order[r - 1] == static_cast<int64_t>(r - 2);
}

Status permute_grad(Backprop& r) {
  std::vector<int64_t> inverse(r.n.dims.size());
  for (size_t i = 0; i < r.n.dims.size(); ++i) inverse[static_cast<size_t>(r.n.dims[i])] = static_cast<int64_t>(i);
  // A transposed product is computed as the product of the transposed operands:
  // the gradient of a transposed weight (x @ w.t()) then comes out of the matmul
  // in w's own layout, with no transposing copy after it.
  if (swaps_last_two(inverse)) {
    const NodeId product = FJ_TRY(r.transposed_product(r.gy));
    if (product >= 0) return r.acc(0, product);
  }
  return r.acc(0, r.graph.permute(r.gy, inverse));
}

Status reshape_grad(Backprop& r) { return r.acc(0, r.graph.reshape(r.gy, r.operand(0).sym)); }

// Slice (step 1), Select: the gradient with zeros around it along the dim.
Status slice_select_grad(Backprop& r) {
  const Node& n = r.n;
  if (n.op == Op::Slice && !is_const(n.args[1], 1)) return r.no_rule();
  const SymShape xs = r.operand(0).sym;
  const int64_t dim = n.dims[0];
  const size_t k = static_cast<size_t>(dim);
  NodeId middle = r.gy;
  SymExpr len = SymExpr::integer(1);
  if (n.op == Op::Select) {
    middle = FJ_TRY(r.graph.unsqueeze(r.gy, dim));
  } else {
    len = n.sym[k];
  }
  const SymExpr& before = n.args[0];
  const SymExpr after = sub(sub(xs[k], before), len);
  std::vector<NodeId> parts;
  for (const SymExpr* size : {&before, static_cast<const SymExpr*>(nullptr), &after}) {
    if (size == nullptr) {
      parts.push_back(middle);
    } else if (!is_const(*size, 0)) {
      SymShape zs = xs;
      zs[k] = *size;
      parts.push_back(FJ_TRY(r.zeros(zs, n.dtype)));
    }
  }
  return r.acc(0, r.graph.cat(parts, dim));
}

Status flip_grad(Backprop& r) { return r.acc(0, r.graph.flip(r.gy, r.n.dims)); }

Status cat_grad(Backprop& r) {
  const int64_t dim = r.n.dims[0];
  SymExpr offset = SymExpr::integer(0);
  for (size_t q = 0; q < r.n.inputs.size(); ++q) {
    const SymExpr len = r.operand(q).sym[static_cast<size_t>(dim)];
    if (r.needs(q)) FJ_TRY(r.acc(q, r.graph.slice(r.gy, dim, offset, len, 1)));
    offset = add(offset, len);
  }
  return ok();
}

Status slice_scatter_grad(Backprop& r) {
  // The base's gradient is gy with zeros on the slice; the source's is gy's slice.
  const Node& n = r.n;
  const size_t k = static_cast<size_t>(n.dims[0]);
  const SymShape ss = r.operand(1).sym;
  const int64_t step = *n.args[1].as_int();
  if (r.needs(0)) {
    const NodeId z = FJ_TRY(r.zeros(ss, n.dtype));
    FJ_TRY(r.acc(0, r.graph.slice_scatter(r.gy, z, n.dims[0], n.args[0], step)));
  }
  if (r.needs(1)) FJ_TRY(r.acc(1, r.graph.slice(r.gy, n.dims[0], n.args[0], ss[k], step)));
  return ok();
}

// --- indexing: a scatter-add written as a masked sum ---
// grad_x[.., j, ..] = sum over the index positions k of [index[k] == j] * gy[.., k, ..]:
// a [.., N, K, ..] comparison with positions (iota) reduced over K, one fused
// reduction (N * K work per element: fine for embedding tables and gathers of
// modest size; a scatter kernel would do K).

// The masked sum itself: `hit` [.., N, K, ..] (as the gradient's dtype) times `g`
// [.., 1, K, ..], reduced over the index positions (dim d + 1) into operand 0.
Status sum_over_positions(Backprop& r, NodeId hit, NodeId g, size_t d) {
  const NodeId prod = FJ_TRY(r.pw(Op::Mul, {hit, g}));
  return r.acc(0, r.graph.reduce(Op::Sum, prod, {static_cast<int64_t>(d + 1)}, false, r.n.dtype));
}

// index_select's flattened index, negative entries counted from the end of a dim of
// size N where the node says so.
Expected<NodeId> index_positions(Backprop& r, NodeId index, const SymExpr& N, const SymExpr& K) {
  const NodeId flat = FJ_TRY(r.graph.reshape(index, {K}));
  if (r.n.int_value == 0) return flat;
  // N as a number: a constant, or (a symbol) counted at run time as a 0-d tensor.
  NodeId count = -1;
  if (N.is_constant()) {
    count = r.graph.scalar_int(*N.as_int());
  } else {
    const NodeId ones = FJ_TRY(r.graph.full({N}, r.graph.scalar_int(1), DType::Int64));
    count = FJ_TRY(r.graph.reduce(Op::Sum, ones, {0}, false, DType::Int64));
  }
  const NodeId neg = FJ_TRY(r.pw(Op::Lt, {flat, r.graph.scalar_int(0)}));
  const NodeId shifted = FJ_TRY(r.pw(Op::Add, {flat, count}));
  return r.pw(Op::Where, {neg, shifted, flat});
}

// grad_x = hit @ gy, where hit[n, k] = [index[k] == n] is [N, K] and gy is seen as
// [.., K, P] (P: the dims after d): a matmul, whose operands are materialized. As a
// fused masked sum, gy (an embedding's: LayerNorm's backward, with its row sums) was
// recomputed for each of the N rows.
Status index_select_grad(Backprop& r) {
  if (!r.needs(0)) return ok();
  const size_t d = static_cast<size_t>(r.n.dims[0]);
  const SymShape& xs = r.operand(0).sym;
  const SymExpr N = xs[d];
  const SymExpr K = numel(r.operand(1).sym);
  const NodeId index = FJ_TRY(r.x(1));
  const NodeId pos = FJ_TRY(index_positions(r, index, N, K));
  const NodeId io = r.graph.iota({N, K}, 0);
  const NodeId pr = FJ_TRY(r.graph.reshape(pos, {SymExpr::integer(1), K}));
  const NodeId hit = FJ_TRY(r.pw(Op::Eq, {io, pr}));
  const NodeId hitf = FJ_TRY(r.graph.cast(hit, r.n.dtype));
  SymShape g_shape(xs.begin(), xs.begin() + static_cast<long>(d));
  g_shape.push_back(K);
  g_shape.push_back(numel(SymShape(xs.begin() + static_cast<long>(d) + 1, xs.end())));
  const NodeId g = FJ_TRY(r.graph.reshape(r.gy, g_shape));
  const NodeId prod = FJ_TRY(r.graph.matmul(hitf, g));
  return r.acc(0, r.graph.reshape(prod, xs));
}

Status gather_grad(Backprop& r) {
  if (!r.needs(0)) return ok();
  const Node& xn = r.operand(0);
  const Node& ixn = r.operand(1);
  const size_t d = static_cast<size_t>(r.n.dims[0]);
  // An index smaller than x along other dims would leave zeros around: not yet (the
  // sizes must be equal; accumulate()'s reshape assumes so where they are symbols,
  // and the caller guards that or falls back).
  for (size_t q = 0; q < xn.rank(); ++q) {
    if (q != d && xn.sym[q].is_constant() && ixn.sym[q].is_constant() && !xn.sym[q].same(ixn.sym[q])) {
      return r.no_rule();
    }
  }
  const NodeId index = FJ_TRY(r.x(1));
  SymShape mask_shape = ixn.sym;
  mask_shape.insert(mask_shape.begin() + static_cast<long>(d), xn.sym[d]);
  const NodeId io = r.graph.iota(mask_shape, static_cast<int64_t>(d));
  const NodeId iu = FJ_TRY(r.graph.unsqueeze(index, static_cast<int64_t>(d)));
  const NodeId hit = FJ_TRY(r.pw(Op::Eq, {io, iu}));
  const NodeId hitf = FJ_TRY(r.graph.cast(hit, r.n.dtype));
  const NodeId g = FJ_TRY(r.graph.unsqueeze(r.gy, static_cast<int64_t>(d)));
  return sum_over_positions(r, hitf, g, d);
}

// --- matmul: [..., m, k] @ [..., k, n]; broadcast batch dims are summed ---

Status matmul_grad(Backprop& r) {
  const NodeId a = FJ_TRY(r.x(0));
  const NodeId b = FJ_TRY(r.x(1));
  if (r.needs(0)) {
    const NodeId bt = FJ_TRY(r.graph.transpose(b, -1, -2));
    FJ_TRY(r.acc(0, r.graph.matmul(r.gy, bt)));
  }
  if (r.needs(1)) {
    const NodeId at = FJ_TRY(r.graph.transpose(a, -1, -2));
    FJ_TRY(r.acc(1, r.graph.matmul(at, r.gy)));
  }
  return ok();
}

// An extern call: the gradients of its operands are one more extern call (the
// embedder's vjp) of the operands and gy, for all operands of one dtype at once; its
// flat result is sliced back into each operand's gradient.
Status extern_grads(Backprop& r, const std::vector<NodeId>& in, const std::vector<size_t>& ks) {
  std::shared_ptr<const ExternFn> vjp = r.n.extern_fn->vjp(ks);
  if (!vjp) return Error{"autodiff: no gradient for operand " + std::to_string(ks[0]) + " of " + r.n.extern_fn->name()};
  const DType dtype = r.operand(ks[0]).dtype;
  if (ks.size() == 1) return r.acc(ks[0], r.graph.extern_call(std::move(vjp), in, dtype, r.operand(ks[0]).sym));
  SymExpr total = SymExpr::integer(0);
  for (size_t k : ks) total = add(total, numel(r.operand(k).sym));
  const NodeId flat = FJ_TRY(r.graph.extern_call(std::move(vjp), in, dtype, {total}));
  SymExpr offset = SymExpr::integer(0);
  for (size_t k : ks) {
    const SymExpr count = numel(r.operand(k).sym);
    const NodeId part = FJ_TRY(r.graph.slice(flat, 0, offset, count, 1));
    FJ_TRY(r.acc(k, r.graph.reshape(part, r.operand(k).sym)));
    offset = add(offset, count);
  }
  return ok();
}

Status extern_grad(Backprop& r) {
  std::vector<NodeId> in;
  for (size_t k = 0; k < r.n.inputs.size(); ++k) in.push_back(FJ_TRY(r.x(k)));
  in.push_back(r.gy);
  std::vector<std::vector<size_t>> by_dtype;  // the operands that need a gradient, by dtype
  for (size_t k = 0; k < r.n.inputs.size(); ++k) {
    if (!r.needs(k)) continue;
    auto same = std::find_if(by_dtype.begin(), by_dtype.end(),
                             [&](const auto& ks) { return r.operand(ks[0]).dtype == r.operand(k).dtype; });
    if (same == by_dtype.end()) by_dtype.push_back({k});
    else same->push_back(k);
  }
  for (const std::vector<size_t>& ks : by_dtype) FJ_TRY(extern_grads(r, in, ks));
  return ok();
}

// --- the table ---

using GradRule = Status (*)(Backprop&);
struct GradEntry {
  Op op;
  GradRule rule;
};

// Every op of jit/ir/ops.def, in its order, with its rule: an op added there without
// an entry here fails to compile (the static_assert below).
constexpr GradEntry kGradRules[] = {
    {Op::Placeholder, leaf},
    {Op::ScalarInput, leaf},
    {Op::Scalar, leaf},
    // arithmetic
    {Op::Add, add_grad},
    {Op::Sub, sub_grad},
    {Op::Mul, mul_grad},
    {Op::Div, div_grad},
    {Op::FloorDiv, no_gradient},
    {Op::Remainder, remainder_grad},
    {Op::Neg, neg_grad},
    {Op::Abs, abs_grad},
    {Op::Sign, no_gradient},
    {Op::Maximum, max_min_grad},
    {Op::Minimum, max_min_grad},
    {Op::PowScalar, pow_scalar_grad},
    {Op::Pow, pow_grad},
    // math
    {Op::Exp, exp_grad},
    {Op::Log, log_grad},
    {Op::Sqrt, sqrt_grad},
    {Op::Sin, sin_grad},
    {Op::Cos, cos_grad},
    {Op::Tanh, tanh_grad},
    {Op::Sigmoid, sigmoid_grad},
    {Op::Erf, erf_grad},
    {Op::Expm1, expm1_grad},
    {Op::Log1p, log1p_grad},
    {Op::Log2, log2_grad},
    {Op::Rsqrt, rsqrt_grad},
    {Op::Reciprocal, reciprocal_grad},
    // activations
    {Op::Relu, relu_grad},
    {Op::Gelu, gelu_grad},
    {Op::GeluTanh, gelu_tanh_grad},
    {Op::Silu, silu_grad},
    {Op::Softplus, softplus_grad},
    // rounding
    {Op::Floor, no_gradient},
    {Op::Ceil, no_gradient},
    {Op::Round, no_gradient},
    {Op::Trunc, no_gradient},
    // clamping and selection
    {Op::Clamp, clamp_grad},
    {Op::ClampMin, clamp_grad},
    {Op::ClampMax, clamp_grad},
    {Op::Where, where_grad},
    {Op::MaskedFill, masked_fill_grad},
    {Op::NanToNum, nan_to_num_grad},
    // comparisons, predicates, logic and bits: bool or integer results
    {Op::Eq, no_gradient},
    {Op::Ne, no_gradient},
    {Op::Lt, no_gradient},
    {Op::Le, no_gradient},
    {Op::Gt, no_gradient},
    {Op::Ge, no_gradient},
    {Op::IsNan, no_gradient},
    {Op::IsInf, no_gradient},
    {Op::LogicalAnd, no_gradient},
    {Op::LogicalOr, no_gradient},
    {Op::LogicalXor, no_gradient},
    {Op::LogicalNot, no_gradient},
    {Op::BitwiseAnd, no_gradient},
    {Op::BitwiseOr, no_gradient},
    {Op::BitwiseXor, no_gradient},
    {Op::BitwiseNot, no_gradient},
    {Op::Cast, identity_grad},
    // reductions
    {Op::Sum, sum_grad},
    {Op::Prod, no_rule},
    {Op::Amax, amax_amin_grad},
    {Op::Amin, amax_amin_grad},
    {Op::ArgMax, no_gradient},
    {Op::ArgMin, no_gradient},
    {Op::Any, no_gradient},
    {Op::All, no_gradient},
    {Op::CumSum, cumsum_grad},
    // views
    {Op::Permute, permute_grad},
    {Op::Reshape, reshape_grad},
    {Op::Expand, identity_grad},
    {Op::Slice, slice_select_grad},
    {Op::Select, slice_select_grad},
    {Op::Flip, flip_grad},
    {Op::Cat, cat_grad},
    {Op::SliceScatter, slice_scatter_grad},
    // indexing
    {Op::IndexSelect, index_select_grad},
    {Op::Gather, gather_grad},
    // creation and Python numbers
    {Op::Full, no_gradient},
    {Op::Iota, no_gradient},
    {Op::ItemInt, no_gradient},
    {Op::ItemFloat, no_gradient},
    {Op::ItemBool, no_gradient},
    // extern
    {Op::Matmul, matmul_grad},
    {Op::ExternCall, extern_grad},
};

static_assert(covers_ops_in_order(kGradRules),
              "the gradient table needs one entry per op of jit/ir/ops.def, in its order");

}  // namespace

Status Differentiator::apply_rule(NodeId id) {
  Backprop r(*this, id);
  return kGradRules[static_cast<size_t>(r.n.op)].rule(r);
}

}  // namespace fj::jit::autodiff_detail
