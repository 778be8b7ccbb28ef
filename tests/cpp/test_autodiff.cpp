// Reverse-mode differentiation (jit/autodiff/autodiff.h): the joint forward and backward
// graphs are compiled with the CPU backend and their gradients compared with
// central finite differences of the forward in float64 (or with analytic values
// where the function has a kink, as amax ties).
#include "autodiff_check.h"

TEST_CASE("autodiff: tanh * mul with broadcasting and Python numbers") {
  std::mt19937 rng(1);
  Graph g;
  NodeId x = g.placeholder(DType::Float64, {3, 4});
  NodeId y = g.placeholder(DType::Float64, {4});
  NodeId t = ok(g.pointwise(Op::Tanh, {x}));
  NodeId m = ok(g.pointwise(Op::Mul, {t, y}));
  NodeId h = ok(g.pointwise(Op::Div, {x, g.scalar(2.0)}));
  NodeId s = ok(g.pointwise(Op::Sub, {m, h}));
  NodeId r = ok(g.pointwise(Op::Mul, {g.scalar(3.0), ok(g.pointwise(Op::Add, {s, g.scalar_int(1)}))}));
  NodeId sy = ok(g.pointwise(Op::Sub, {g.scalar(1.0), y}));  // Python number minus tensor
  g.set_outputs({r, sy});
  check_grads(g, {random({3, 4}, rng), random({4}, rng)}, {true, true});
  // Only x: y's grad is not returned.
  Joint j = check_grads(g, {random({3, 4}, rng), random({4}, rng)}, {true, false});
  CHECK(j.grad_inputs == std::vector<int32_t>{0});
}

TEST_CASE("autodiff: softmax and log_softmax") {
  std::mt19937 rng(2);
  Graph g;
  NodeId x = g.placeholder(DType::Float64, {3, 5});
  NodeId sm = ok(g.softmax(x, 1, false));
  NodeId lsm = ok(g.softmax(x, 0, true));
  g.set_outputs({sm, lsm});
  check_grads(g, {random({3, 5}, rng, -3, 3)}, {true});
}

TEST_CASE("autodiff: layer_norm with and without an affine transform") {
  std::mt19937 rng(3);
  Graph g;
  NodeId x = g.placeholder(DType::Float64, {4, 6});
  NodeId w = g.placeholder(DType::Float64, {6});
  NodeId b = g.placeholder(DType::Float64, {6});
  g.set_outputs({ok(g.layer_norm(x, 1, w, b, 1e-5)), ok(g.layer_norm(x, 2, -1, -1, 1e-5))});
  check_grads(g, {random({4, 6}, rng), random({6}, rng), random({6}, rng)}, {true, true, true});
}

TEST_CASE("autodiff: batched matmul sums broadcast batch dims") {
  std::mt19937 rng(4);
  Graph g;
  NodeId a = g.placeholder(DType::Float64, {2, 3, 4});
  NodeId b = g.placeholder(DType::Float64, {4, 5});
  NodeId c = g.placeholder(DType::Float64, {2, 1, 3, 4});
  NodeId d = g.placeholder(DType::Float64, {3, 4, 2});
  NodeId w = g.placeholder(DType::Float64, {5, 4});
  g.set_outputs({ok(g.matmul(a, b)), ok(g.matmul(c, d)), ok(g.linear(a, w, -1))});
  check_grads(g, {random({2, 3, 4}, rng), random({4, 5}, rng), random({2, 1, 3, 4}, rng),
                  random({3, 4, 2}, rng), random({5, 4}, rng)},
              {true, true, true, true, true});
}

TEST_CASE("autodiff: the gradient of a transposed operand is a product in the operand's layout") {
  // x @ w.T: w's gradient is gy.T @ x (a product shaped as w), not (x.T @ gy).T,
  // which would be copied transposed into w's layout; batched as well. The product
  // is the output itself, not a copy renaming its sizes.
  std::mt19937 rng(19);
  Graph g;
  NodeId x = g.placeholder(DType::Float64, {3, 4});
  NodeId w = g.placeholder(DType::Float64, {5, 4});
  NodeId a = g.placeholder(DType::Float64, {2, 3, 4});
  NodeId v = g.placeholder(DType::Float64, {2, 5, 4});
  NodeId y = ok(g.matmul(x, ok(g.transpose(w, 0, 1))));
  NodeId yb = ok(g.matmul(ok(g.pointwise(Op::Tanh, {a})), ok(g.transpose(v, 1, 2))));
  g.set_outputs({y, yb});
  Joint j = check_grads(g, {random({3, 4}, rng), random({5, 4}, rng), random({2, 3, 4}, rng), random({2, 5, 4}, rng)},
                        {true, true, true, true});
  REQUIRE(j.backward.outputs().size() == 4);
  CHECK(j.backward.node(j.backward.outputs()[1]).op == Op::Matmul);  // w
  CHECK(j.backward.node(j.backward.outputs()[3]).op == Op::Matmul);  // v
}

TEST_CASE("autodiff: a gradient output sized by other symbols keeps their equality as an assumption") {
  // x [s0, s1] @ w.T with w [s2, s3]: the product for w's gradient is [s2, s1]; it is
  // the output as is, and s1 == s3 stays an assumption of the backward (guarded).
  const SymExpr s0 = SymExpr::symbol(0, SymType::Int, 3), s1 = SymExpr::symbol(1, SymType::Int, 4);
  const SymExpr s2 = SymExpr::symbol(2, SymType::Int, 5), s3 = SymExpr::symbol(3, SymType::Int, 4);
  Graph g;
  NodeId x = g.placeholder(DType::Float64, {3, 4}, {s0, s1});
  NodeId w = g.placeholder(DType::Float64, {5, 4}, {s2, s3});
  g.set_outputs({ok(g.matmul(x, ok(g.transpose(w, 0, 1))))});
  std::mt19937 rng(20);
  GradOptions opt;
  opt.bindings.values = {SymValue{int64_t{3}}, SymValue{int64_t{4}}, SymValue{int64_t{5}}, SymValue{int64_t{4}}};
  Joint j = check_grads(g, {random({3, 4}, rng), random({5, 4}, rng)}, {true, true}, opt);
  const Node& gw = j.backward.node(j.backward.outputs()[1]);
  CHECK(gw.op == Op::Matmul);
  REQUIRE(gw.rank() == 2);
  CHECK(gw.sym[0].same(s2));
  bool s1_is_s3 = false;
  for (const SymExpr& e : j.backward.assumptions()) s1_is_s3 = s1_is_s3 || e.same(eq(s1, s3)) || e.same(eq(s3, s1));
  CHECK(s1_is_s3);
}

TEST_CASE("autodiff: exp and div with a broadcast divisor") {
  std::mt19937 rng(5);
  Graph g;
  NodeId x = g.placeholder(DType::Float64, {3, 4});
  NodeId y = g.placeholder(DType::Float64, {3, 1});
  NodeId e = ok(g.pointwise(Op::Exp, {x}));
  NodeId d = ok(g.pointwise(Op::Div, {e, ok(g.pointwise(Op::Add, {y, g.scalar(1.5)}))}));
  NodeId r = ok(g.pointwise(Op::Div, {g.scalar(2.0), ok(g.pointwise(Op::Add, {x, g.scalar(4.0)}))}));
  NodeId q = ok(g.pointwise(Op::Div, {x, y}));
  g.set_outputs({d, r, q});
  check_grads(g, {random({3, 4}, rng), random({3, 1}, rng, 0.5, 1.5)}, {true, true});
}

TEST_CASE("autodiff: views and transposes") {
  std::mt19937 rng(6);
  Graph g;
  NodeId x = g.placeholder(DType::Float64, {4, 6});
  NodeId w = g.placeholder(DType::Float64, {12, 1});
  NodeId v = ok(g.reshape(x, {SymExpr::integer(2), SymExpr::integer(-1)}));  // [2, 12]
  NodeId t = ok(g.transpose(v, 0, 1));                                       // [12, 2]
  NodeId m = ok(g.pointwise(Op::Mul, {t, w}));
  NodeId p = ok(g.permute(ok(g.reshape(x, {SymExpr::integer(2), SymExpr::integer(2), SymExpr::integer(6)})), {2, 0, 1}));
  NodeId row = ok(g.slice(x, 0, SymExpr::integer(1), SymExpr::integer(1), 1));  // [1, 6]
  NodeId ex = ok(g.pointwise(Op::Mul, {ok(g.expand(row, {SymExpr::integer(4), SymExpr::integer(6)})), x}));
  NodeId ex3 = ok(g.expand(w, {SymExpr::integer(3), SymExpr::integer(12), SymExpr::integer(5)}));
  g.set_outputs({m, ok(g.pointwise(Op::Sin, {p})), ex, ex3});
  check_grads(g, {random({4, 6}, rng), random({12, 1}, rng)}, {true, true});
}

TEST_CASE("autodiff: slice, select, flip and cat") {
  std::mt19937 rng(7);
  Graph g;
  NodeId x = g.placeholder(DType::Float64, {4, 6});
  NodeId y = g.placeholder(DType::Float64, {2, 6});
  NodeId sl = ok(g.slice(x, 1, SymExpr::integer(1), SymExpr::integer(3), 1));
  NodeId head = ok(g.slice(x, 0, SymExpr::integer(0), SymExpr::integer(2), 1));
  NodeId se = ok(g.select(x, 0, SymExpr::integer(2)));
  NodeId last = ok(g.select(x, 1, SymExpr::integer(5)));
  NodeId fl = ok(g.flip(x, {0, 1}));
  NodeId ca = ok(g.cat({x, y, head}, 0));
  g.set_outputs({ok(g.pointwise(Op::Exp, {sl})), se, last, fl, ok(g.pointwise(Op::Mul, {ca, ca}))});
  check_grads(g, {random({4, 6}, rng), random({2, 6}, rng)}, {true, true});
}

TEST_CASE("autodiff: sums, mean and var") {
  std::mt19937 rng(8);
  Graph g;
  NodeId x = g.placeholder(DType::Float64, {3, 4, 5});
  NodeId s0 = ok(g.reduce(Op::Sum, x, {0}, false));
  NodeId s12 = ok(g.reduce(Op::Sum, ok(g.pointwise(Op::Mul, {x, x})), {1, 2}, true));
  NodeId m = ok(g.mean(x, {}, false));
  NodeId v = ok(g.var(x, {-1}, 1, false));
  NodeId v0 = ok(g.var(x, {0, 2}, 0, true));
  g.set_outputs({s0, s12, ok(g.reshape(m, {SymExpr::integer(1)})), v, v0});
  check_grads(g, {random({3, 4, 5}, rng)}, {true});
}

TEST_CASE("autodiff: amax and amin match finite differences without ties") {
  std::mt19937 rng(9);
  Graph g;
  NodeId x = g.placeholder(DType::Float64, {4, 5});
  g.set_outputs({ok(g.reduce(Op::Amax, x, {1}, false)), ok(g.reduce(Op::Amin, x, {0, 1}, true)),
                 ok(g.reduce(Op::Amax, x, {0}, true))});
  check_grads(g, {random({4, 5}, rng)}, {true});
}

TEST_CASE("autodiff: amax ties split the gradient evenly, as eager") {
  Graph g;
  NodeId x = g.placeholder(DType::Float64, {2, 3});
  NodeId y = g.placeholder(DType::Float64, {2, 3});
  g.set_outputs({ok(g.reduce(Op::Amax, x, {1}, false)), ok(g.pointwise(Op::Maximum, {x, y})),
                 ok(g.reduce(Op::Amin, y, {}, false))});
  const Tensor xs{DType::Float64, {2, 3}, {1, 3, 3, 2, 2, 2}};
  const Tensor ys{DType::Float64, {2, 3}, {1, 0, 4, 5, 2, 1}};
  const Tensor g0{DType::Float64, {2}, {6, 3}};
  const Tensor g1{DType::Float64, {2, 3}, {2, 2, 2, 2, 2, 2}};
  const Tensor g2{DType::Float64, {}, {10}};
  GradRun r = backward_grads(g, {xs, ys}, {true, true}, {g0, g1, g2}, {}, {});
  // x: amax row 0 ties at 3 (3 each), row 1 all tie (1 each); maximum gives 2 where x
  // wins and 1 on a tie.
  CHECK(r.grads[0].v == std::vector<double>{1, 3 + 2, 3, 1, 1 + 1, 1 + 2});
  // y: maximum gives 2 where y wins and 1 on a tie; amin over all: the single 0 gets 10.
  CHECK(r.grads[1].v == std::vector<double>{1, 10, 2, 2, 1, 0});
}

TEST_CASE("autodiff: unary math and activations") {
  struct Unary {
    Op op;
    bool positive;  // the domain is x > 0
  };
  const Unary ops[] = {{Op::Neg, false}, {Op::Exp, false}, {Op::Log, true}, {Op::Sqrt, true},
                       {Op::Rsqrt, true}, {Op::Reciprocal, false}, {Op::Sin, false}, {Op::Cos, false},
                       {Op::Tanh, false}, {Op::Sigmoid, false}, {Op::Relu, false}, {Op::Gelu, false},
                       {Op::GeluTanh, false}, {Op::Silu, false}, {Op::Erf, false}, {Op::Abs, false},
                       {Op::Expm1, false}, {Op::Log1p, true}};
  for (const Unary& u : ops) {
    CAPTURE(op_name(u.op));
    std::mt19937 rng(10);
    Graph g;
    NodeId x = g.placeholder(DType::Float64, {3, 5});
    g.set_outputs({ok(g.pointwise(u.op, {x}))});
    check_grads(g, {u.positive ? random({3, 5}, rng, 0.3, 2.0) : away_from_zero({3, 5}, rng)}, {true});
  }
}

TEST_CASE("autodiff: softplus, pow with number exponents, rounding has no gradient") {
  std::mt19937 rng(11);
  Graph g;
  NodeId x = g.placeholder(DType::Float64, {4, 5});
  NodeId p = g.placeholder(DType::Float64, {4, 5});  // positive, for fractional powers
  NodeId sp = ok(g.pointwise(Op::Softplus, {x, g.scalar(2.0), g.scalar_int(1)}));  // linear where 2x > 1
  NodeId p3 = ok(g.pointwise(Op::PowScalar, {x, g.scalar_int(3)}));
  NodeId p1 = ok(g.pointwise(Op::PowScalar, {x, g.scalar_int(1)}));
  NodeId p0 = ok(g.pointwise(Op::PowScalar, {x, g.scalar(0.0)}));
  NodeId pf = ok(g.pointwise(Op::PowScalar, {p, g.scalar(-1.5)}));
  NodeId pt = ok(g.pointwise(Op::Pow, {p, x}));          // tensor exponent
  NodeId ps = ok(g.pointwise(Op::Pow, {g.scalar(2.0), x}));  // number base
  NodeId fl = ok(g.pointwise(Op::Mul, {ok(g.pointwise(Op::Floor, {x})), x}));
  g.set_outputs({sp, p3, p1, p0, pf, pt, ps, fl});
  Tensor xs = away_from_zero({4, 5}, rng, 0.1, 1.5);
  for (double& v : xs.v) {
    if (std::fabs(v - 0.5) < 0.05) v += 0.1;  // the softplus threshold
    if (std::fabs(v - std::round(v)) < 0.05) v += 0.1;  // floor's jumps
  }
  check_grads(g, {xs, random({4, 5}, rng, 0.5, 2.0)}, {true, true});
}

TEST_CASE("autodiff: where, masked_fill, clamp, maximum and minimum") {
  std::mt19937 rng(12);
  Graph g;
  NodeId x = g.placeholder(DType::Float64, {3, 4});
  NodeId y = g.placeholder(DType::Float64, {4});
  NodeId mask = g.placeholder(DType::Bool, {3, 4});
  NodeId pos = ok(g.pointwise(Op::Gt, {x, g.scalar(0.0)}));
  NodeId w = ok(g.pointwise(Op::Where, {pos, ok(g.pointwise(Op::Mul, {x, y})), y}));
  NodeId w2 = ok(g.pointwise(Op::Where, {pos, g.scalar(1.0), x}));
  NodeId mf = ok(g.pointwise(Op::MaskedFill, {x, mask, g.scalar(0.5)}));
  NodeId c = ok(g.pointwise(Op::Clamp, {x, g.scalar(-0.5), g.scalar(0.5)}));
  NodeId cmin = ok(g.pointwise(Op::ClampMin, {x, g.scalar(-0.2)}));
  NodeId cmax = ok(g.pointwise(Op::ClampMax, {x, g.scalar(0.3)}));
  NodeId mx = ok(g.pointwise(Op::Maximum, {x, y}));
  NodeId mn = ok(g.pointwise(Op::Minimum, {y, x}));
  g.set_outputs({w, w2, mf, c, cmin, cmax, mx, mn});
  Tensor xs = away_from_zero({3, 4}, rng, 0.05, 1.0);
  for (double& v : xs.v) {
    for (double b : {-0.5, 0.5, -0.2, 0.3}) {
      if (std::fabs(v - b) < 0.02) v += 0.05;
    }
  }
  Tensor m{DType::Bool, {3, 4}, {1, 0, 0, 1, 0, 1, 1, 0, 0, 0, 1, 1}};
  Joint j = check_grads(g, {xs, random({4}, rng), m}, {true, true, true});
  CHECK(j.grad_inputs == std::vector<int32_t>{0, 1});  // the bool mask has none
}

TEST_CASE("autodiff: casts between float dtypes") {
  std::mt19937 rng(13);
  Graph g;
  NodeId x = g.placeholder(DType::Float64, {3, 4});
  NodeId f = ok(g.cast(x, DType::Float32));
  NodeId e = ok(g.pointwise(Op::Exp, {f}));
  NodeId s = ok(g.reduce(Op::Sum, e, {1}, false, DType::Float64));
  NodeId back = ok(g.pointwise(Op::Mul, {ok(g.cast(e, DType::Float64)), x}));
  g.set_outputs({s, back});
  GradOptions opt;
  opt.h = 1e-3;  // float32 inside: differences of rounded values
  opt.tol = 1e-4;
  Joint j = check_grads(g, {random({3, 4}, rng)}, {true}, opt);
  CHECK(j.backward.node(j.backward.outputs()[0]).dtype == DType::Float64);
}

TEST_CASE("autodiff: scalar inputs stay runtime inputs of the backward") {
  Graph g;
  NodeId x = g.placeholder(DType::Float64, {3, 4});
  NodeId s = g.scalar_input(ScalarKind::Float);
  NodeId e = g.scalar_input(ScalarKind::Float);
  NodeId y = ok(g.pointwise(Op::Mul, {x, s}));
  NodeId p = ok(g.pointwise(Op::PowScalar, {ok(g.pointwise(Op::Exp, {x})), e}));
  NodeId c = ok(g.pointwise(Op::Clamp, {x, s, g.scalar(10.0)}));
  g.set_outputs({ok(g.pointwise(Op::Add, {y, p})), c});
  for (double sv : {0.7, -0.3}) {
    for (double ev : {2.5, 0.0, -1.0}) {
      CAPTURE(sv);
      CAPTURE(ev);
      std::mt19937 rng(14);
      GradOptions opt;
      opt.scalars = {sv, ev};
      Tensor xs = random({3, 4}, rng);
      for (double& v : xs.v) {
        if (std::fabs(v - sv) < 0.02) v += 0.05;
      }
      Joint j = check_grads(g, {xs}, {true}, opt);
      CHECK(j.backward.num_scalar_inputs() == 2);
      for (const Node& n : j.backward.nodes()) {
        CHECK_FALSE((n.op == Op::Scalar && (n.scalar == sv || (ev != 0 && n.scalar == ev))));
      }
    }
  }
}

TEST_CASE("autodiff: symbolic shapes stay symbolic") {
  Graph g;
  NodeId x = g.placeholder(DType::Float64, {3, 4}, {kS0, SymExpr::integer(4)});
  NodeId w = g.placeholder(DType::Float64, {4});
  NodeId sm = ok(g.softmax(x, 0, false));
  NodeId mean = ok(g.mean(x, {0}, false));  // divides by a size scalar s0
  NodeId head = ok(g.slice(x, 0, SymExpr::integer(1), sub(kS0, SymExpr::integer(1)), 1));
  NodeId out = ok(g.pointwise(Op::Mul, {sm, w}));
  g.set_outputs({out, ok(g.pointwise(Op::Mul, {mean, w})), ok(g.pointwise(Op::Exp, {head}))});
  for (int64_t n : {3, 6}) {
    CAPTURE(n);
    std::mt19937 rng(15);
    GradOptions opt;
    opt.bindings.values = {SymValue{n}};
    Joint j = check_grads(g, {random({n, 4}, rng), random({4}, rng)}, {true, true}, opt);
    CHECK(j.backward.num_scalar_inputs() == g.num_scalar_inputs());
    const Node& gx = j.backward.node(j.backward.outputs()[0]);
    CHECK(gx.sym[0].same(kS0));
  }
}

TEST_CASE("autodiff: an MLP block saves no more than eager autograd") {
  // y = x + linear2(gelu(linear1(layer_norm(x)))). Eager saves x, ln weight and bias,
  // mean, rstd, the layer_norm output, w1, linear1's output, gelu's output, w2 (10).
  std::mt19937 rng(16);
  Graph g;
  NodeId x = g.placeholder(DType::Float64, {6, 8});
  NodeId lw = g.placeholder(DType::Float64, {8});
  NodeId lb = g.placeholder(DType::Float64, {8});
  NodeId w1 = g.placeholder(DType::Float64, {16, 8});
  NodeId b1 = g.placeholder(DType::Float64, {16});
  NodeId w2 = g.placeholder(DType::Float64, {8, 16});
  NodeId b2 = g.placeholder(DType::Float64, {8});
  NodeId ln = ok(g.layer_norm(x, 1, lw, lb, 1e-5));
  NodeId h = ok(g.pointwise(Op::Gelu, {ok(g.linear(ln, w1, b1))}));
  NodeId y = ok(g.pointwise(Op::Add, {x, ok(g.linear(h, w2, b2))}));
  g.set_outputs({y});
  Joint j = check_grads(g, {random({6, 8}, rng), random({8}, rng), random({8}, rng), random({16, 8}, rng),
                            random({16}, rng), random({8, 16}, rng), random({8}, rng)},
                        std::vector<bool>(7, true));
  size_t inputs = 0, computed = 0;
  for (NodeId s : j.saved) (j.forward.node(s).op == Op::Placeholder ? inputs : computed)++;
  MESSAGE("MLP block: " << j.saved.size() << " saved tensors (" << inputs << " inputs, " << computed
                        << " computed: the two layer_norm sums and linear1's product)");
  CHECK(j.saved.size() <= 10);
  CHECK(computed == 3);
  // b2 is never read by the backward.
  for (NodeId s : j.saved) CHECK(s != b2);
}

TEST_CASE("autodiff: slice_scatter and cumsum") {
  std::mt19937 rng(9);
  Graph g;
  NodeId x = g.placeholder(DType::Float64, {5, 4});
  NodeId y = g.placeholder(DType::Float64, {2, 4});
  NodeId w = ok(g.slice_scatter(ok(g.pointwise(Op::Exp, {x})), ok(g.pointwise(Op::Mul, {y, y})), 0,
                                SymExpr::integer(1), 2));  // exp(x) with rows 1 and 3 from y * y
  NodeId c = ok(g.cumsum(ok(g.pointwise(Op::Mul, {x, x})), 1));
  g.set_outputs({w, c});
  check_grads(g, {random({5, 4}, rng), random({2, 4}, rng)}, {true, true});
}
