// differentiate(): the gradient rules of each op and the save-or-recompute policy
// that builds the joint forward / backward pair (see jit/autodiff.h).
#include "jit/autodiff.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <optional>

namespace fj::jit {

// Assigns the value of an Expected<NodeId> expression to `lhs`, or returns its Error.
#define FJ_AD_TRY(lhs, expr)                          \
  NodeId lhs;                                         \
  do {                                                \
    auto lhs##_or = (expr);                           \
    if (!lhs##_or) return lhs##_or.take_error();      \
    lhs = *lhs##_or;                                  \
  } while (0)

Expected<NodeId> clone_node(Graph& dst, const Node& n, const std::vector<NodeId>& in) {
  switch (n.op) {
    case Op::Placeholder:
    case Op::ScalarInput:
      FJ_CHECK(false, "clone_node of an input (the caller maps inputs)");
      return Error{"clone_node of an input"};
    case Op::Scalar:
      if (n.scalar_kind == ScalarKind::Int) return dst.scalar_int(n.int_value);
      return dst.scalar(n.scalar_kind == ScalarKind::Bool ? static_cast<double>(n.int_value) : n.scalar,
                        n.scalar_kind);
    case Op::Cast:
      return dst.cast(in[0], n.dtype);
    case Op::Add: case Op::Sub: case Op::Mul: case Op::Div: case Op::FloorDiv:
    case Op::Remainder: case Op::Neg: case Op::Abs: case Op::Sign: case Op::Maximum:
    case Op::Minimum: case Op::PowScalar: case Op::Pow: case Op::Exp: case Op::Log:
    case Op::Sqrt: case Op::Sin: case Op::Cos: case Op::Tanh: case Op::Sigmoid: case Op::Erf:
    case Op::Expm1: case Op::Log1p: case Op::Rsqrt: case Op::Reciprocal: case Op::Relu:
    case Op::Gelu: case Op::GeluTanh: case Op::Silu: case Op::Softplus: case Op::Floor:
    case Op::Ceil: case Op::Round: case Op::Trunc: case Op::Clamp: case Op::ClampMin:
    case Op::ClampMax: case Op::Where: case Op::MaskedFill: case Op::NanToNum: case Op::Eq:
    case Op::Ne: case Op::Lt: case Op::Le: case Op::Gt: case Op::Ge: case Op::IsNan:
    case Op::IsInf: case Op::LogicalAnd: case Op::LogicalOr: case Op::LogicalXor:
    case Op::LogicalNot: case Op::BitwiseAnd: case Op::BitwiseOr: case Op::BitwiseXor:
    case Op::BitwiseNot:
      return dst.pointwise(n.op, in);
    case Op::CumSum: return dst.cumsum(in[0], n.dims[0], n.dtype);
    case Op::Sum: case Op::Prod:
      // The result dtype is the accumulation type asked for (or its default).
      return dst.reduce(n.op, in[0], n.dims, n.keepdim, n.dtype);
    case Op::Amax: case Op::Amin: case Op::ArgMax: case Op::ArgMin: case Op::Any: case Op::All:
      return dst.reduce(n.op, in[0], n.dims, n.keepdim);
    case Op::Permute: return dst.permute(in[0], n.dims);
    case Op::Reshape: return dst.reshape(in[0], n.sym);
    case Op::Expand: return dst.expand(in[0], n.sym);
    case Op::Slice: {
      const size_t k = static_cast<size_t>(n.dims[0]);
      return dst.slice(in[0], n.dims[0], n.args[0], n.sym[k], *n.args[1].as_int());
    }
    case Op::Select: return dst.select(in[0], n.dims[0], n.args[0]);
    case Op::Flip: return dst.flip(in[0], n.dims);
    case Op::Cat: return dst.cat(in, n.dims[0]);
    case Op::SliceScatter: return dst.slice_scatter(in[0], in[1], n.dims[0], n.args[0], *n.args[1].as_int());
    case Op::IndexSelect: return dst.index_select(in[0], n.dims[0], in[1], n.int_value != 0);
    case Op::Gather: return dst.gather(in[0], n.dims[0], in[1]);
    case Op::Full: return dst.full(n.sym, in[0], n.dtype);
    case Op::Iota: return dst.iota(n.sym, n.dims[0]);
    case Op::ItemInt: case Op::ItemFloat: case Op::ItemBool: return dst.item(in[0], n.scalar_kind);
    case Op::Matmul: return dst.matmul(in[0], in[1]);
  }
  return Error{"clone_node: unknown op"};
}

namespace {

constexpr double kInvSqrtPi = std::numbers::inv_sqrtpi;
constexpr double kSqrtHalf = std::numbers::sqrt2 / 2;

// Creates dst's scalar inputs as the same kinds (and size expressions) as src's, in
// index order; returns them by index.
std::vector<NodeId> copy_scalar_inputs(const Graph& src, Graph& dst) {
  std::vector<ScalarKind> kinds(src.num_scalar_inputs(), ScalarKind::Float);
  for (const Node& n : src.nodes()) {
    if (n.op == Op::ScalarInput) kinds[static_cast<size_t>(n.index)] = n.scalar_kind;
  }
  std::vector<NodeId> ids;
  for (size_t i = 0; i < kinds.size(); ++i) {
    const SymExpr& e = src.scalar_input_exprs()[i];
    ids.push_back(e.is_null() ? dst.scalar_input(kinds[i]) : dst.size_scalar(e));
  }
  return ids;
}

NodeId add_placeholder(Graph& dst, const Node& like) {
  const Shape traced = concrete(like.sym).value_or(Shape(like.rank(), 0));
  return dst.placeholder(like.dtype, traced, like.sym);
}

// What a placeholder of the draft backward graph stands for.
struct DraftInput {
  bool saved;  // a saved forward value, else the grad of forward output `index`
  NodeId forward;  // saved: the forward node
  size_t index;    // grad: the output position
};

class Differentiator {
 public:
  Differentiator(const Graph& g, const std::vector<bool>& requires_grad)
      : g_(g), requires_grad_(requires_grad) {}

  Expected<Joint> run();

 private:
  // --- forward values in the backward graph ---
  Expected<NodeId> value(NodeId id);
  NodeId save(NodeId id);

  // --- gradient accumulation ---
  Expected<bool> backprop(NodeId id);
  Expected<bool> accumulate(NodeId x, NodeId contribution);
  Expected<NodeId> unbroadcast(NodeId c, const SymShape& target);
  // A reduction's gradient (or value) with its reduced dims restored as size 1.
  Expected<NodeId> keep_dims(NodeId v, const Node& reduction);
  Expected<NodeId> zeros(const SymShape& sym, DType dtype);

  Expected<NodeId> pw(Op op, const std::vector<NodeId>& in) { return b_.pointwise(op, in); }
  NodeId num(double v) { return b_.scalar(v); }
  bool needs(NodeId id) const { return needs_[static_cast<size_t>(id)]; }

  const Graph& g_;
  const std::vector<bool>& requires_grad_;
  Graph b_;                        // the draft backward graph
  std::vector<bool> needs_;        // per forward node: a gradient may flow into it
  std::vector<NodeId> value_;      // per forward node: its value in b_, or -1
  std::vector<NodeId> grad_;       // per forward node: its gradient in b_, or -1
  std::vector<NodeId> scalar_in_;  // b_'s scalar inputs by index
  std::vector<DraftInput> draft_inputs_;  // by b_ placeholder index
};

Expected<NodeId> Differentiator::value(NodeId id) {
  NodeId& memo = value_[static_cast<size_t>(id)];
  if (memo >= 0) return memo;
  const Node& n = g_.node(id);
  switch (op_family(n.op)) {
    case Family::Input:
      if (n.op == Op::ScalarInput) return memo = scalar_in_[static_cast<size_t>(n.index)];
      return memo = save(id);
    case Family::Reduction:
    case Family::Index:
    case Family::Extern:
      return memo = save(id);
    case Family::Constant:
    case Family::Pointwise:
    case Family::View:
    case Family::Creation:
    case Family::Item: {
      std::vector<NodeId> in;
      for (NodeId x : n.inputs) {
        auto v = value(x);
        if (!v) return v;
        in.push_back(*v);
      }
      auto c = clone_node(b_, n, in);
      if (!c) return c;
      return value_[static_cast<size_t>(id)] = *c;
    }
  }
  return Error{"value: unknown family"};
}

NodeId Differentiator::save(NodeId id) {
  draft_inputs_.push_back(DraftInput{true, id, 0});
  return add_placeholder(b_, g_.node(id));
}

Expected<NodeId> Differentiator::zeros(const SymShape& sym, DType dtype) {
  return b_.full(sym, num(0.0), dtype);
}

Expected<NodeId> Differentiator::unbroadcast(NodeId c, const SymShape& target) {
  const SymShape have = b_.node(c).sym;
  FJ_CHECK(have.size() >= target.size(), "a gradient of lower rank than its operand");
  const size_t lead = have.size() - target.size();
  // Two sums (the added leading dims dropped, the expanded size-1 dims kept) give
  // the target's shape without a reshape of a reduction.
  std::vector<int64_t> leading, ones;
  for (size_t d = 0; d < have.size(); ++d) {
    if (d < lead) leading.push_back(static_cast<int64_t>(d));
    else if (is_const(target[d - lead], 1) && !is_const(have[d], 1)) ones.push_back(static_cast<int64_t>(d - lead));
  }
  const DType t = b_.node(c).dtype;
  if (!leading.empty()) {
    FJ_AD_TRY(s, b_.reduce(Op::Sum, c, leading, false, t));
    c = s;
  }
  if (!ones.empty()) {
    FJ_AD_TRY(s, b_.reduce(Op::Sum, c, ones, true, t));
    c = s;
  }
  // Sizes equal by an assumption of the forward (s0 against s1) differ only in name.
  return b_.reshape(c, target);
}

Expected<bool> Differentiator::accumulate(NodeId x, NodeId contribution) {
  if (!needs(x)) return true;
  const Node& xn = g_.node(x);
  FJ_AD_TRY(c, unbroadcast(contribution, xn.sym));
  FJ_AD_TRY(typed, b_.cast(c, xn.dtype));
  NodeId& acc = grad_[static_cast<size_t>(x)];
  if (acc < 0) {
    acc = typed;
  } else {
    FJ_AD_TRY(sum, pw(Op::Add, {acc, typed}));
    grad_[static_cast<size_t>(x)] = sum;
  }
  return true;
}

Expected<NodeId> Differentiator::keep_dims(NodeId v, const Node& r) {
  if (r.keepdim) return v;
  SymShape sym = g_.node(r.inputs[0]).sym;
  for (int64_t d : r.dims) sym[static_cast<size_t>(d)] = SymExpr::integer(1);
  return b_.reshape(v, sym);
}

Expected<bool> Differentiator::backprop(NodeId id) {
  const Node n = g_.node(id);  // a copy: rules build nodes
  const NodeId gy = grad_[static_cast<size_t>(id)];
  const std::vector<NodeId>& in = n.inputs;
  auto operand = [&](size_t k) { return value(in[k]); };
  auto no_rule = [&]() -> Expected<bool> {
    return Error{"autodiff: no gradient rule for " + std::string(aten_name(n.op))};
  };
#define FJ_AD_VAL(lhs, k) FJ_AD_TRY(lhs, operand(k))
#define FJ_AD_ACC(k, expr)                        \
  do {                                            \
    FJ_AD_TRY(contribution_, expr);               \
    auto r_ = accumulate(in[k], contribution_);   \
    if (!r_) return r_;                           \
  } while (0)

  switch (n.op) {
    case Op::Placeholder: case Op::ScalarInput: case Op::Scalar:
      return true;
    // --- arithmetic ---
    case Op::Add:
      if (needs(in[0])) FJ_AD_ACC(0, Expected<NodeId>(gy));
      if (needs(in[1])) FJ_AD_ACC(1, Expected<NodeId>(gy));
      return true;
    case Op::Sub:
      if (needs(in[0])) FJ_AD_ACC(0, Expected<NodeId>(gy));
      if (needs(in[1])) FJ_AD_ACC(1, pw(Op::Neg, {gy}));
      return true;
    case Op::Mul: {
      if (needs(in[0])) {
        FJ_AD_VAL(b, 1);
        FJ_AD_ACC(0, pw(Op::Mul, {gy, b}));
      }
      if (needs(in[1])) {
        FJ_AD_VAL(a, 0);
        FJ_AD_ACC(1, pw(Op::Mul, {gy, a}));
      }
      return true;
    }
    case Op::Div: {
      FJ_AD_VAL(b, 1);
      if (needs(in[0])) FJ_AD_ACC(0, pw(Op::Div, {gy, b}));
      if (needs(in[1])) {
        // As eager: -grad * a / (b * b).
        FJ_AD_VAL(a, 0);
        FJ_AD_TRY(bb, pw(Op::Mul, {b, b}));
        FJ_AD_TRY(ng, pw(Op::Neg, {gy}));
        FJ_AD_TRY(nga, pw(Op::Mul, {ng, a}));
        FJ_AD_ACC(1, pw(Op::Div, {nga, bb}));
      }
      return true;
    }
    case Op::Remainder: {
      if (needs(in[0])) FJ_AD_ACC(0, Expected<NodeId>(gy));
      if (needs(in[1])) {
        // d/db (a - floor(a / b) * b) = -floor(a / b)
        FJ_AD_VAL(a, 0);
        FJ_AD_VAL(b, 1);
        FJ_AD_TRY(q, pw(Op::Div, {a, b}));
        FJ_AD_TRY(fq, pw(Op::Floor, {q}));
        FJ_AD_TRY(ng, pw(Op::Neg, {gy}));
        FJ_AD_ACC(1, pw(Op::Mul, {ng, fq}));
      }
      return true;
    }
    case Op::Neg:
      FJ_AD_ACC(0, pw(Op::Neg, {gy}));
      return true;
    case Op::Abs: {
      FJ_AD_VAL(x, 0);
      FJ_AD_TRY(s, pw(Op::Sign, {x}));
      FJ_AD_ACC(0, pw(Op::Mul, {gy, s}));
      return true;
    }
    case Op::Maximum:
    case Op::Minimum: {
      // As eager: ties split the gradient in halves; a NaN passes it to both.
      FJ_AD_VAL(a, 0);
      FJ_AD_VAL(b, 1);
      FJ_AD_TRY(tie, pw(Op::Eq, {a, b}));
      FJ_AD_TRY(half, pw(Op::Div, {gy, num(2.0)}));
      FJ_AD_TRY(h, pw(Op::Where, {tie, half, gy}));
      const bool max = n.op == Op::Maximum;
      if (needs(in[0])) {
        FJ_AD_TRY(lose, pw(max ? Op::Lt : Op::Gt, {a, b}));
        FJ_AD_ACC(0, pw(Op::Where, {lose, num(0.0), h}));
      }
      if (needs(in[1])) {
        FJ_AD_TRY(lose, pw(max ? Op::Gt : Op::Lt, {a, b}));
        FJ_AD_ACC(1, pw(Op::Where, {lose, num(0.0), h}));
      }
      return true;
    }
    case Op::PowScalar: {
      const Node& e = g_.node(in[1]);
      FJ_AD_VAL(x, 0);
      if (e.op == Op::Scalar) {
        const double c = e.scalar_kind == ScalarKind::Float ? e.scalar : static_cast<double>(e.int_value);
        if (c == 0) return true;  // eager: zeros
        NodeId dydx = -1;
        if (c == 1) {
          dydx = -1;
        } else {
          const NodeId em1 = e.scalar_kind == ScalarKind::Float ? b_.scalar(c - 1) : b_.scalar_int(e.int_value - 1);
          FJ_AD_TRY(p, pw(Op::PowScalar, {x, em1}));
          FJ_AD_TRY(cp, pw(Op::Mul, {p, num(c)}));
          dydx = cp;
        }
        FJ_AD_ACC(0, dydx < 0 ? Expected<NodeId>(gy) : pw(Op::Mul, {gy, dydx}));
        return true;
      }
      // A runtime exponent c: grad * c * x^(c - 1), zeros where c == 0 (as eager).
      FJ_AD_VAL(cs, 1);
      FJ_AD_TRY(ct, b_.full({}, cs, n.dtype));
      FJ_AD_TRY(cm1, pw(Op::Sub, {ct, num(1.0)}));
      FJ_AD_TRY(p, pw(Op::Pow, {x, cm1}));
      FJ_AD_TRY(cp, pw(Op::Mul, {p, ct}));
      FJ_AD_TRY(gp, pw(Op::Mul, {gy, cp}));
      FJ_AD_TRY(zero, pw(Op::Eq, {ct, num(0.0)}));
      FJ_AD_ACC(0, pw(Op::Where, {zero, num(0.0), gp}));
      return true;
    }
    case Op::Pow: {
      FJ_AD_VAL(a, 0);
      FJ_AD_VAL(b, 1);
      if (needs(in[0])) {
        FJ_AD_TRY(bm1, pw(Op::Sub, {b, num(1.0)}));
        FJ_AD_TRY(p, pw(Op::Pow, {a, bm1}));
        FJ_AD_TRY(bp, pw(Op::Mul, {p, b}));
        FJ_AD_TRY(gp, pw(Op::Mul, {gy, bp}));
        FJ_AD_TRY(zero, pw(Op::Eq, {b, num(0.0)}));
        FJ_AD_ACC(0, pw(Op::Where, {zero, num(0.0), gp}));
      }
      if (needs(in[1])) {
        // grad * y * log(a), zeros where a == 0 and b >= 0 (as eager).
        NodeId base = a;
        if (is_python_scalar(b_.node(a))) {
          FJ_AD_TRY(t, b_.full({}, a, n.dtype));
          base = t;
        }
        FJ_AD_TRY(yv, value(id));
        FJ_AD_TRY(la, pw(Op::Log, {base}));
        FJ_AD_TRY(yl, pw(Op::Mul, {yv, la}));
        FJ_AD_TRY(gyl, pw(Op::Mul, {gy, yl}));
        FJ_AD_TRY(az, pw(Op::Eq, {base, num(0.0)}));
        FJ_AD_TRY(bn, pw(Op::Ge, {b, num(0.0)}));
        FJ_AD_TRY(cond, pw(Op::LogicalAnd, {az, bn}));
        FJ_AD_ACC(1, pw(Op::Where, {cond, num(0.0), gyl}));
      }
      return true;
    }
    // --- math ---
    case Op::Exp: {
      FJ_AD_TRY(y, value(id));
      FJ_AD_ACC(0, pw(Op::Mul, {gy, y}));
      return true;
    }
    case Op::Expm1: {
      FJ_AD_TRY(y, value(id));
      FJ_AD_TRY(y1, pw(Op::Add, {y, num(1.0)}));
      FJ_AD_ACC(0, pw(Op::Mul, {gy, y1}));
      return true;
    }
    case Op::Log: {
      FJ_AD_VAL(x, 0);
      FJ_AD_ACC(0, pw(Op::Div, {gy, x}));
      return true;
    }
    case Op::Log1p: {
      FJ_AD_VAL(x, 0);
      FJ_AD_TRY(x1, pw(Op::Add, {x, num(1.0)}));
      FJ_AD_ACC(0, pw(Op::Div, {gy, x1}));
      return true;
    }
    case Op::Sqrt: {
      FJ_AD_TRY(y, value(id));
      FJ_AD_TRY(y2, pw(Op::Mul, {y, num(2.0)}));
      FJ_AD_ACC(0, pw(Op::Div, {gy, y2}));
      return true;
    }
    case Op::Rsqrt: {
      // -0.5 * grad * y^3
      FJ_AD_TRY(y, value(id));
      FJ_AD_TRY(y2, pw(Op::Mul, {y, y}));
      FJ_AD_TRY(y3, pw(Op::Mul, {y2, y}));
      FJ_AD_TRY(g2, pw(Op::Mul, {gy, num(-0.5)}));
      FJ_AD_ACC(0, pw(Op::Mul, {g2, y3}));
      return true;
    }
    case Op::Reciprocal: {
      FJ_AD_TRY(y, value(id));
      FJ_AD_TRY(y2, pw(Op::Mul, {y, y}));
      FJ_AD_TRY(ng, pw(Op::Neg, {gy}));
      FJ_AD_ACC(0, pw(Op::Mul, {ng, y2}));
      return true;
    }
    case Op::Sin: {
      FJ_AD_VAL(x, 0);
      FJ_AD_TRY(c, pw(Op::Cos, {x}));
      FJ_AD_ACC(0, pw(Op::Mul, {gy, c}));
      return true;
    }
    case Op::Cos: {
      FJ_AD_VAL(x, 0);
      FJ_AD_TRY(s, pw(Op::Sin, {x}));
      FJ_AD_TRY(ns, pw(Op::Neg, {s}));
      FJ_AD_ACC(0, pw(Op::Mul, {gy, ns}));
      return true;
    }
    case Op::Tanh: {
      FJ_AD_TRY(y, value(id));
      FJ_AD_TRY(y2, pw(Op::Mul, {y, y}));
      FJ_AD_TRY(d, pw(Op::Sub, {num(1.0), y2}));
      FJ_AD_ACC(0, pw(Op::Mul, {gy, d}));
      return true;
    }
    case Op::Sigmoid: {
      FJ_AD_TRY(y, value(id));
      FJ_AD_TRY(om, pw(Op::Sub, {num(1.0), y}));
      FJ_AD_TRY(d, pw(Op::Mul, {y, om}));
      FJ_AD_ACC(0, pw(Op::Mul, {gy, d}));
      return true;
    }
    case Op::Erf: {
      // 2/sqrt(pi) * exp(-x^2)
      FJ_AD_VAL(x, 0);
      FJ_AD_TRY(x2, pw(Op::Mul, {x, x}));
      FJ_AD_TRY(nx2, pw(Op::Neg, {x2}));
      FJ_AD_TRY(e, pw(Op::Exp, {nx2}));
      FJ_AD_TRY(d, pw(Op::Mul, {e, num(2.0 * kInvSqrtPi)}));
      FJ_AD_ACC(0, pw(Op::Mul, {gy, d}));
      return true;
    }
    // --- activations ---
    case Op::Relu: {
      // Eager's threshold_backward: the gradient where the result is > 0.
      FJ_AD_VAL(x, 0);
      FJ_AD_TRY(pos, pw(Op::Gt, {x, num(0.0)}));
      FJ_AD_ACC(0, pw(Op::Where, {pos, gy, num(0.0)}));
      return true;
    }
    case Op::Gelu: {
      // cdf(x) + x * pdf(x)
      FJ_AD_VAL(x, 0);
      FJ_AD_TRY(xs, pw(Op::Mul, {x, num(kSqrtHalf)}));
      FJ_AD_TRY(erf, pw(Op::Erf, {xs}));
      FJ_AD_TRY(e1, pw(Op::Add, {erf, num(1.0)}));
      FJ_AD_TRY(cdf, pw(Op::Mul, {e1, num(0.5)}));
      FJ_AD_TRY(x2, pw(Op::Mul, {x, x}));
      FJ_AD_TRY(h, pw(Op::Mul, {x2, num(-0.5)}));
      FJ_AD_TRY(ex, pw(Op::Exp, {h}));
      FJ_AD_TRY(pdf, pw(Op::Mul, {ex, num(kInvSqrtPi * kSqrtHalf)}));
      FJ_AD_TRY(xp, pw(Op::Mul, {x, pdf}));
      FJ_AD_TRY(d, pw(Op::Add, {cdf, xp}));
      FJ_AD_ACC(0, pw(Op::Mul, {gy, d}));
      return true;
    }
    case Op::GeluTanh: {
      // y = 0.5 x (1 + t), t = tanh(k (x + c x^3)):
      // dy/dx = 0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3 c x^2)
      const double k = std::numbers::sqrt2 * kInvSqrtPi, c = 0.044715;
      FJ_AD_VAL(x, 0);
      FJ_AD_TRY(x2, pw(Op::Mul, {x, x}));
      FJ_AD_TRY(x3, pw(Op::Mul, {x2, x}));
      FJ_AD_TRY(cx3, pw(Op::Mul, {x3, num(c)}));
      FJ_AD_TRY(u0, pw(Op::Add, {x, cx3}));
      FJ_AD_TRY(u, pw(Op::Mul, {u0, num(k)}));
      FJ_AD_TRY(t, pw(Op::Tanh, {u}));
      FJ_AD_TRY(t1, pw(Op::Add, {t, num(1.0)}));
      FJ_AD_TRY(left, pw(Op::Mul, {t1, num(0.5)}));
      FJ_AD_TRY(t2, pw(Op::Mul, {t, t}));
      FJ_AD_TRY(sech2, pw(Op::Sub, {num(1.0), t2}));
      FJ_AD_TRY(q0, pw(Op::Mul, {x2, num(3.0 * c)}));
      FJ_AD_TRY(q1, pw(Op::Add, {q0, num(1.0)}));
      FJ_AD_TRY(du, pw(Op::Mul, {q1, num(k)}));
      FJ_AD_TRY(r0, pw(Op::Mul, {sech2, du}));
      FJ_AD_TRY(hx, pw(Op::Mul, {x, num(0.5)}));
      FJ_AD_TRY(right, pw(Op::Mul, {hx, r0}));
      FJ_AD_TRY(d, pw(Op::Add, {left, right}));
      FJ_AD_ACC(0, pw(Op::Mul, {gy, d}));
      return true;
    }
    case Op::Silu: {
      // s (1 + x (1 - s)), s = sigmoid(x)
      FJ_AD_VAL(x, 0);
      FJ_AD_TRY(s, pw(Op::Sigmoid, {x}));
      FJ_AD_TRY(om, pw(Op::Sub, {num(1.0), s}));
      FJ_AD_TRY(xom, pw(Op::Mul, {x, om}));
      FJ_AD_TRY(p1, pw(Op::Add, {xom, num(1.0)}));
      FJ_AD_TRY(d, pw(Op::Mul, {s, p1}));
      FJ_AD_ACC(0, pw(Op::Mul, {gy, d}));
      return true;
    }
    case Op::Softplus: {
      // The gradient itself above the threshold, else sigmoid(beta x).
      FJ_AD_VAL(x, 0);
      FJ_AD_VAL(beta, 1);
      FJ_AD_VAL(threshold, 2);
      FJ_AD_TRY(z, pw(Op::Mul, {x, beta}));
      FJ_AD_TRY(s, pw(Op::Sigmoid, {z}));
      FJ_AD_TRY(gs, pw(Op::Mul, {gy, s}));
      FJ_AD_TRY(linear, pw(Op::Gt, {z, threshold}));
      FJ_AD_ACC(0, pw(Op::Where, {linear, gy, gs}));
      return true;
    }
    // --- clamping and selection ---
    case Op::Clamp:
    case Op::ClampMin:
    case Op::ClampMax: {
      // As eager: the gradient where lo <= x <= hi (NaN: none).
      FJ_AD_VAL(x, 0);
      NodeId mask = -1;
      if (n.op != Op::ClampMax) {
        FJ_AD_VAL(lo, 1);
        FJ_AD_TRY(ge, pw(Op::Ge, {x, lo}));
        mask = ge;
      }
      if (n.op != Op::ClampMin) {
        FJ_AD_VAL(hi, n.op == Op::Clamp ? 2 : 1);
        FJ_AD_TRY(le, pw(Op::Le, {x, hi}));
        if (mask < 0) {
          mask = le;
        } else {
          FJ_AD_TRY(both, pw(Op::LogicalAnd, {mask, le}));
          mask = both;
        }
      }
      FJ_AD_ACC(0, pw(Op::Where, {mask, gy, num(0.0)}));
      return true;
    }
    case Op::Where: {
      FJ_AD_VAL(cond, 0);
      if (needs(in[1])) FJ_AD_ACC(1, pw(Op::Where, {cond, gy, num(0.0)}));
      if (needs(in[2])) FJ_AD_ACC(2, pw(Op::Where, {cond, num(0.0), gy}));
      return true;
    }
    case Op::MaskedFill: {
      FJ_AD_VAL(mask, 1);
      FJ_AD_ACC(0, pw(Op::Where, {mask, num(0.0), gy}));
      return true;
    }
    case Op::NanToNum: {
      FJ_AD_VAL(x, 0);
      FJ_AD_TRY(nan, pw(Op::IsNan, {x}));
      FJ_AD_TRY(inf, pw(Op::IsInf, {x}));
      FJ_AD_TRY(bad, pw(Op::LogicalOr, {nan, inf}));
      FJ_AD_ACC(0, pw(Op::Where, {bad, num(0.0), gy}));
      return true;
    }
    case Op::Cast:
      // accumulate() casts the gradient back to the operand's type.
      FJ_AD_ACC(0, Expected<NodeId>(gy));
      return true;
    // Piecewise constant (zero gradient, as eager) or non-floating results.
    case Op::FloorDiv: case Op::Sign: case Op::Floor: case Op::Ceil: case Op::Round:
    case Op::Trunc: case Op::Eq: case Op::Ne: case Op::Lt: case Op::Le: case Op::Gt:
    case Op::Ge: case Op::IsNan: case Op::IsInf: case Op::LogicalAnd: case Op::LogicalOr:
    case Op::LogicalXor: case Op::LogicalNot: case Op::BitwiseAnd: case Op::BitwiseOr:
    case Op::BitwiseXor: case Op::BitwiseNot:
      return true;
    // --- reductions ---
    case Op::CumSum: {
      // Each input element reaches every later output: the reversed cumsum of gy.
      FJ_AD_TRY(rev, b_.flip(gy, n.dims));
      FJ_AD_TRY(acc, b_.cumsum(rev, n.dims[0]));
      FJ_AD_ACC(0, b_.flip(acc, n.dims));
      return true;
    }
    case Op::Sum: {
      FJ_AD_TRY(gk, keep_dims(gy, n));
      FJ_AD_ACC(0, b_.expand(gk, g_.node(in[0]).sym));
      return true;
    }
    case Op::Amax:
    case Op::Amin: {
      // As eager: the gradient split evenly among the elements equal to the result.
      const Node& xn = g_.node(in[0]);
      FJ_AD_VAL(x, 0);
      FJ_AD_TRY(y, value(id));
      FJ_AD_TRY(yk, keep_dims(y, n));
      FJ_AD_TRY(gk, keep_dims(gy, n));
      FJ_AD_TRY(hit, pw(Op::Eq, {x, yk}));
      FJ_AD_TRY(hitf, b_.cast(hit, xn.dtype));
      FJ_AD_TRY(count, b_.reduce(Op::Sum, hitf, n.dims, true, xn.dtype));
      FJ_AD_TRY(share, pw(Op::Div, {gk, count}));
      FJ_AD_ACC(0, pw(Op::Mul, {share, hitf}));
      return true;
    }
    case Op::ArgMax: case Op::ArgMin: case Op::Any: case Op::All:
      return true;
    case Op::Prod:
      return no_rule();
    // --- views ---
    case Op::Permute: {
      std::vector<int64_t> inverse(n.dims.size());
      for (size_t i = 0; i < n.dims.size(); ++i) inverse[static_cast<size_t>(n.dims[i])] = static_cast<int64_t>(i);
      FJ_AD_ACC(0, b_.permute(gy, inverse));
      return true;
    }
    case Op::Reshape:
      FJ_AD_ACC(0, b_.reshape(gy, g_.node(in[0]).sym));
      return true;
    case Op::Expand:
      // accumulate() sums over the expanded dims.
      FJ_AD_ACC(0, Expected<NodeId>(gy));
      return true;
    case Op::Slice:
    case Op::Select: {
      // The gradient with zeros around it along the dim.
      if (n.op == Op::Slice && !is_const(n.args[1], 1)) return no_rule();
      const SymShape xs = g_.node(in[0]).sym;
      const int64_t dim = n.dims[0];
      const size_t k = static_cast<size_t>(dim);
      NodeId middle = gy;
      SymExpr len = SymExpr::integer(1);
      if (n.op == Op::Select) {
        FJ_AD_TRY(u, b_.unsqueeze(gy, dim));
        middle = u;
      } else {
        len = n.sym[k];
      }
      const SymExpr& start = n.args[0];
      const SymExpr after = sub(sub(xs[k], start), len);
      std::vector<NodeId> parts;
      for (const SymExpr* size : {&start, static_cast<const SymExpr*>(nullptr), &after}) {
        if (size == nullptr) {
          parts.push_back(middle);
          continue;
        }
        if (is_const(*size, 0)) continue;
        SymShape zs = xs;
        zs[k] = *size;
        FJ_AD_TRY(z, zeros(zs, n.dtype));
        parts.push_back(z);
      }
      FJ_AD_ACC(0, b_.cat(parts, dim));
      return true;
    }
    case Op::Flip:
      FJ_AD_ACC(0, b_.flip(gy, n.dims));
      return true;
    case Op::SliceScatter: {
      // The base's gradient is gy with zeros on the slice; the source's is gy's slice.
      const size_t k = static_cast<size_t>(n.dims[0]);
      const SymShape ss = g_.node(in[1]).sym;
      const int64_t step = *n.args[1].as_int();
      if (needs(in[0])) {
        FJ_AD_TRY(z, zeros(ss, n.dtype));
        FJ_AD_ACC(0, b_.slice_scatter(gy, z, n.dims[0], n.args[0], step));
      }
      if (needs(in[1])) FJ_AD_ACC(1, b_.slice(gy, n.dims[0], n.args[0], ss[k], step));
      return true;
    }
    case Op::Cat: {
      SymExpr offset = SymExpr::integer(0);
      for (size_t q = 0; q < in.size(); ++q) {
        const SymExpr len = g_.node(in[q]).sym[static_cast<size_t>(n.dims[0])];
        if (needs(in[q])) FJ_AD_ACC(q, b_.slice(gy, n.dims[0], offset, len, 1));
        offset = add(offset, len);
      }
      return true;
    }
    // --- indexing: a scatter-add is needed (stage 2) ---
    case Op::IndexSelect:
    case Op::Gather:
      if (needs(in[0])) return no_rule();
      return true;
    case Op::Full: case Op::Iota:
    case Op::ItemInt: case Op::ItemFloat: case Op::ItemBool:
      return true;
    // --- matmul: [..., m, k] @ [..., k, n]; broadcast batch dims are summed ---
    case Op::Matmul: {
      FJ_AD_VAL(a, 0);
      FJ_AD_VAL(b, 1);
      if (needs(in[0])) {
        FJ_AD_TRY(bt, b_.transpose(b, -1, -2));
        FJ_AD_ACC(0, b_.matmul(gy, bt));
      }
      if (needs(in[1])) {
        FJ_AD_TRY(at, b_.transpose(a, -1, -2));
        FJ_AD_ACC(1, b_.matmul(at, gy));
      }
      return true;
    }
  }
#undef FJ_AD_VAL
#undef FJ_AD_ACC
  return no_rule();
}

Expected<Joint> Differentiator::run() {
  const size_t n = g_.size();
  needs_.assign(n, false);
  value_.assign(n, -1);
  grad_.assign(n, -1);
  for (size_t id = 0; id < n; ++id) {
    const Node& node = g_.nodes()[id];
    if (is_python_scalar(node) || !is_floating(node.dtype)) continue;
    if (node.op == Op::Placeholder) {
      const size_t p = static_cast<size_t>(node.index);
      needs_[id] = p < requires_grad_.size() && requires_grad_[p];
      continue;
    }
    for (NodeId x : node.inputs) needs_[id] = needs_[id] || needs_[static_cast<size_t>(x)];
  }

  // The draft: scalar inputs first (same indices), one grad placeholder per output;
  // saved values become placeholders as rules ask for them.
  scalar_in_ = copy_scalar_inputs(g_, b_);
  const std::vector<NodeId>& outs = g_.outputs();
  for (size_t k = 0; k < outs.size(); ++k) {
    draft_inputs_.push_back(DraftInput{false, outs[k], k});
    const NodeId ph = add_placeholder(b_, g_.node(outs[k]));
    if (!needs(outs[k])) continue;
    NodeId& acc = grad_[static_cast<size_t>(outs[k])];
    if (acc < 0) {
      acc = ph;
    } else {
      FJ_AD_TRY(s, pw(Op::Add, {acc, ph}));
      grad_[static_cast<size_t>(outs[k])] = s;
    }
  }
  for (size_t id = n; id-- > 0;) {
    if (!needs_[id] || grad_[id] < 0) continue;
    auto r = backprop(static_cast<NodeId>(id));
    if (!r) return r.take_error();
  }

  Joint joint;
  joint.num_outputs = outs.size();
  std::vector<NodeId> draft_outs;
  for (size_t id = 0; id < n; ++id) {
    const Node& node = g_.nodes()[id];
    if (node.op != Op::Placeholder || !needs_[id]) continue;
    joint.grad_inputs.push_back(node.index);
    if (grad_[id] >= 0) {
      draft_outs.push_back(grad_[id]);
    } else {
      FJ_AD_TRY(z, zeros(node.sym, node.dtype));
      draft_outs.push_back(z);
    }
  }

  // Keep what the outputs read; the live saved values are the saved tensors.
  std::vector<bool> live(b_.size(), false);
  for (NodeId o : draft_outs) live[static_cast<size_t>(o)] = true;
  for (size_t id = b_.size(); id-- > 0;) {
    if (!live[id]) continue;
    for (NodeId x : b_.nodes()[id].inputs) live[static_cast<size_t>(x)] = true;
  }
  std::vector<std::pair<NodeId, NodeId>> saved;  // (forward node, draft placeholder)
  for (size_t id = 0; id < b_.size(); ++id) {
    const Node& node = b_.nodes()[id];
    if (node.op != Op::Placeholder || !live[id]) continue;
    const DraftInput& d = draft_inputs_[static_cast<size_t>(node.index)];
    if (d.saved) saved.emplace_back(d.forward, static_cast<NodeId>(id));
  }
  std::sort(saved.begin(), saved.end());

  // The backward graph: saved placeholders, grad placeholders, scalar inputs, then
  // the live draft nodes in order.
  Graph& bw = joint.backward;
  std::vector<NodeId> map(b_.size(), -1);
  for (const auto& [fwd, draft] : saved) {
    map[static_cast<size_t>(draft)] = add_placeholder(bw, g_.node(fwd));
    joint.saved.push_back(fwd);
  }
  std::vector<NodeId> grad_ph;
  for (NodeId o : outs) grad_ph.push_back(add_placeholder(bw, g_.node(o)));
  const std::vector<NodeId> scalars = copy_scalar_inputs(g_, bw);
  for (size_t id = 0; id < b_.size(); ++id) {
    const Node& node = b_.nodes()[id];
    if (node.op == Op::ScalarInput) {
      map[id] = scalars[static_cast<size_t>(node.index)];
      continue;
    }
    if (node.op == Op::Placeholder) {
      const DraftInput& d = draft_inputs_[static_cast<size_t>(node.index)];
      if (!d.saved) map[id] = grad_ph[d.index];
      continue;
    }
    if (!live[id]) continue;
    std::vector<NodeId> in;
    for (NodeId x : node.inputs) {
      FJ_CHECK(map[static_cast<size_t>(x)] >= 0, "autodiff: a live node reads an unmapped one");
      in.push_back(map[static_cast<size_t>(x)]);
    }
    FJ_AD_TRY(c, clone_node(bw, node, in));
    map[id] = c;
  }
  std::vector<NodeId> bw_outs;
  for (NodeId o : draft_outs) bw_outs.push_back(map[static_cast<size_t>(o)]);
  bw.set_outputs(std::move(bw_outs));

  joint.forward = g_;
  std::vector<NodeId> fw_outs = outs;
  for (NodeId s : joint.saved) fw_outs.push_back(s);
  joint.forward.set_outputs(std::move(fw_outs));
  return joint;
}

}  // namespace

Expected<Joint> differentiate(const Graph& g, const std::vector<bool>& requires_grad) {
  return Differentiator(g, requires_grad).run();
}

#undef FJ_AD_TRY

}  // namespace fj::jit
