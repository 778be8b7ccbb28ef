// Each op's gradient rule: Differentiator::backprop (see jit/autodiff/autodiff.h).
#include <numbers>

#include "jit/autodiff/differentiator.h"

namespace fj::jit::autodiff_detail {
namespace {

constexpr double kInvSqrtPi = std::numbers::inv_sqrtpi;
constexpr double kSqrtHalf = std::numbers::sqrt2 / 2;

}  // namespace

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
      // A transposed product is computed as the product of the transposed operands:
      // the gradient of a transposed weight (x @ w.t()) then comes out of the matmul
      // in w's own layout, with no transposing copy after it.
      const size_t r = inverse.size();
      bool swaps_last_two = r >= 2 && inverse[r - 2] == static_cast<int64_t>(r - 1) &&
                            inverse[r - 1] == static_cast<int64_t>(r - 2);
      for (size_t i = 0; swaps_last_two && i + 2 < r; ++i) swaps_last_two = inverse[i] == static_cast<int64_t>(i);
      if (swaps_last_two) {
        FJ_AD_TRY(product, transposed_product(gy));
        if (product >= 0) {
          FJ_AD_ACC(0, Expected<NodeId>(product));
          return true;
        }
      }
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
    // --- indexing: a scatter-add written as a masked sum ---
    // grad_x[.., j, ..] = sum over the index positions k of [index[k] == j] * gy[.., k, ..]:
    // a [.., N, K, ..] comparison with positions (iota) reduced over K, one fused
    // reduction (N * K work per element: fine for embedding tables and gathers of
    // modest size; a scatter kernel would do K).
    case Op::IndexSelect: {
      if (!needs(in[0])) return true;
      const Node& xn = g_.node(in[0]);
      const size_t d = static_cast<size_t>(n.dims[0]);
      const SymExpr N = xn.sym[d];
      const SymExpr K = numel(g_.node(in[1]).sym);
      FJ_AD_VAL(idx, 1);
      FJ_AD_TRY(flat, b_.reshape(idx, {K}));
      NodeId pos = flat;
      if (n.int_value != 0) {  // negative indices count from the end
        // N as a number: a constant, or (a symbol) counted at run time as a 0-d tensor.
        NodeId count = -1;
        if (N.is_constant()) {
          count = b_.scalar_int(*N.as_int());
        } else {
          FJ_AD_TRY(ones, b_.full({N}, b_.scalar_int(1), DType::Int64));
          FJ_AD_TRY(total, b_.reduce(Op::Sum, ones, {0}, false, DType::Int64));
          count = total;
        }
        FJ_AD_TRY(neg, pw(Op::Lt, {flat, b_.scalar_int(0)}));
        FJ_AD_TRY(shifted, pw(Op::Add, {flat, count}));
        FJ_AD_TRY(w, pw(Op::Where, {neg, shifted, flat}));
        pos = w;
      }
      const size_t post = xn.rank() - d - 1;
      SymShape mask_shape(d, SymExpr::integer(1)), pos_shape(d, SymExpr::integer(1)), g_shape;
      mask_shape.push_back(N);
      mask_shape.push_back(K);
      pos_shape.push_back(SymExpr::integer(1));
      pos_shape.push_back(K);
      for (size_t q = 0; q < post; ++q) {
        mask_shape.push_back(SymExpr::integer(1));
        pos_shape.push_back(SymExpr::integer(1));
      }
      const SymShape& gys = b_.node(gy).sym;
      g_shape.assign(gys.begin(), gys.begin() + static_cast<long>(d));
      g_shape.push_back(SymExpr::integer(1));
      g_shape.push_back(K);
      g_shape.insert(g_shape.end(), gys.end() - static_cast<long>(post), gys.end());
      const NodeId io = b_.iota(mask_shape, static_cast<int64_t>(d));
      FJ_AD_TRY(pr, b_.reshape(pos, pos_shape));
      FJ_AD_TRY(hit, pw(Op::Eq, {io, pr}));
      FJ_AD_TRY(hitf, b_.cast(hit, n.dtype));
      FJ_AD_TRY(g2, b_.reshape(gy, g_shape));
      FJ_AD_TRY(prod, pw(Op::Mul, {hitf, g2}));
      FJ_AD_ACC(0, b_.reduce(Op::Sum, prod, {static_cast<int64_t>(d + 1)}, false, n.dtype));
      return true;
    }
    case Op::Gather: {
      if (!needs(in[0])) return true;
      const Node& xn = g_.node(in[0]);
      const Node& ixn = g_.node(in[1]);
      const size_t d = static_cast<size_t>(n.dims[0]);
      // An index smaller than x along other dims would leave zeros around: not yet (the
      // sizes must be equal; accumulate()'s reshape assumes so where they are symbols,
      // and the caller guards that or falls back).
      for (size_t q = 0; q < xn.rank(); ++q) {
        if (q != d && xn.sym[q].is_constant() && ixn.sym[q].is_constant() && !xn.sym[q].same(ixn.sym[q])) {
          return no_rule();
        }
      }
      FJ_AD_VAL(idx, 1);
      SymShape mask_shape = ixn.sym;
      mask_shape.insert(mask_shape.begin() + static_cast<long>(d), xn.sym[d]);
      const NodeId io = b_.iota(mask_shape, static_cast<int64_t>(d));
      FJ_AD_TRY(iu, b_.unsqueeze(idx, static_cast<int64_t>(d)));
      FJ_AD_TRY(hit, pw(Op::Eq, {io, iu}));
      FJ_AD_TRY(hitf, b_.cast(hit, n.dtype));
      FJ_AD_TRY(gu, b_.unsqueeze(gy, static_cast<int64_t>(d)));
      FJ_AD_TRY(prod, pw(Op::Mul, {hitf, gu}));
      FJ_AD_ACC(0, b_.reduce(Op::Sum, prod, {static_cast<int64_t>(d + 1)}, false, n.dtype));
      return true;
    }
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

}  // namespace fj::jit::autodiff_detail
