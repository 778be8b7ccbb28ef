// Reverse-mode differentiation (jit/autodiff/autodiff.h): the joint forward and backward
// graphs are compiled with the CPU backend and their gradients compared with
// central finite differences of the forward in float64 (or with analytic values
// where the function has a kink, as amax ties).
#include <doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "jit/autodiff/autodiff.h"
#include "jit/autodiff/differentiator.h"
#include "jit/cpu/cpu_backend.h"

using namespace fj::jit;

namespace {

// A dense row-major tensor, its elements held as doubles whatever its dtype.
struct Tensor {
  DType dtype = DType::Float64;
  Shape shape;
  std::vector<double> v;
};

int64_t count(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

Tensor random(const Shape& s, std::mt19937& rng, double lo = -1.5, double hi = 1.5) {
  std::uniform_real_distribution<double> dist(lo, hi);
  Tensor t{DType::Float64, s, {}};
  for (int64_t e = 0; e < count(s); ++e) t.v.push_back(dist(rng));
  return t;
}

// Random magnitudes in [lo, hi] with random signs: away from kinks at 0.
Tensor away_from_zero(const Shape& s, std::mt19937& rng, double lo = 0.2, double hi = 1.5) {
  Tensor t = random(s, rng, lo, hi);
  std::bernoulli_distribution sign;
  for (double& x : t.v) x = sign(rng) ? x : -x;
  return t;
}

// A typed buffer for one run.
struct Buffer {
  DType dtype;
  Shape shape;
  std::vector<int64_t> strides;
  std::vector<double> storage;  // 8 bytes per element: room for every dtype

  Buffer(DType d, Shape s) : dtype(d), shape(std::move(s)), strides(shape.size(), 1) {
    for (size_t k = shape.size(); k-- > 1;) strides[k - 1] = strides[k] * shape[k];
    storage.assign(static_cast<size_t>(count(shape)) + 1, 0.0);
  }
  void set(size_t i, double x) {
    void* p = storage.data();
    switch (dtype) {
      case DType::Bool: static_cast<uint8_t*>(p)[i] = x != 0; break;
      case DType::UInt8: static_cast<uint8_t*>(p)[i] = static_cast<uint8_t>(x); break;
      case DType::Int32: static_cast<int32_t*>(p)[i] = static_cast<int32_t>(x); break;
      case DType::Int64: static_cast<int64_t*>(p)[i] = static_cast<int64_t>(x); break;
      case DType::Float32: static_cast<float*>(p)[i] = static_cast<float>(x); break;
      case DType::Float64: static_cast<double*>(p)[i] = x; break;
    }
  }
  double get(size_t i) const {
    const void* p = storage.data();
    switch (dtype) {
      case DType::Bool: return static_cast<const uint8_t*>(p)[i];
      case DType::UInt8: return static_cast<const uint8_t*>(p)[i];
      case DType::Int32: return static_cast<const int32_t*>(p)[i];
      case DType::Int64: return static_cast<double>(static_cast<const int64_t*>(p)[i]);
      case DType::Float32: return static_cast<const float*>(p)[i];
      case DType::Float64: return static_cast<const double*>(p)[i];
    }
    return 0;
  }
  TensorArg arg() {
    return TensorArg{storage.data(), shape.data(), strides.data(), static_cast<int>(shape.size())};
  }
};

CpuBackend& backend() {
  static std::unique_ptr<CpuBackend> b = [] {
    auto r = CpuBackend::create();
    REQUIRE(r);
    return std::move(*r);
  }();
  return *b;
}

std::shared_ptr<CompiledGraph> compile(const Graph& g) {
  auto c = backend().compile(g);
  REQUIRE_MESSAGE(c, (c ? "" : c.error()));
  return *c;
}

Shape eval_shape(const SymShape& sym, const Bindings& b) {
  Shape s;
  for (const SymExpr& e : sym) {
    const auto v = e.eval(b);
    REQUIRE(v.has_value());
    s.push_back(std::get<int64_t>(*v));
  }
  return s;
}

// The values of g's scalar inputs: `user` for those of scalar_input(), in order;
// size scalars evaluated with the bindings (an int64 bit pattern, as runtime.cpp).
std::vector<double> scalar_values(const Graph& g, const std::vector<double>& user, const Bindings& b) {
  std::vector<double> out;
  size_t next = 0;
  for (size_t i = 0; i < g.num_scalar_inputs(); ++i) {
    const SymExpr& e = g.scalar_input_exprs()[i];
    if (e.is_null()) {
      REQUIRE(next < user.size());
      out.push_back(user[next++]);
      continue;
    }
    const auto v = e.eval(b);
    REQUIRE(v.has_value());
    const int64_t iv = std::get<int64_t>(*v);
    double d;
    std::memcpy(&d, &iv, sizeof d);
    out.push_back(d);
  }
  return out;
}

std::vector<Tensor> run(const Graph& g, const CompiledGraph& c, const std::vector<Tensor>& inputs,
                        const std::vector<double>& user_scalars, const Bindings& b) {
  std::vector<Buffer> ins, outs;
  std::vector<TensorArg> in_args, out_args;
  ins.reserve(inputs.size());
  for (const Node& n : g.nodes()) {
    if (n.op != Op::Placeholder) continue;
    const Tensor& t = inputs.at(static_cast<size_t>(n.index));
    REQUIRE(static_cast<size_t>(n.index) == ins.size());
    ins.emplace_back(n.dtype, t.shape);
    for (size_t e = 0; e < t.v.size(); ++e) ins.back().set(e, t.v[e]);
  }
  outs.reserve(g.outputs().size());
  for (NodeId o : g.outputs()) outs.emplace_back(g.node(o).dtype, eval_shape(g.node(o).sym, b));
  for (Buffer& x : ins) in_args.push_back(x.arg());
  for (Buffer& x : outs) out_args.push_back(x.arg());
  const std::vector<double> scalars = scalar_values(g, user_scalars, b);
  REQUIRE(c.run(in_args, out_args, scalars.empty() ? nullptr : scalars.data(), &b) == 0);
  std::vector<Tensor> result;
  for (const Buffer& x : outs) {
    Tensor t{x.dtype, x.shape, {}};
    for (int64_t e = 0; e < count(x.shape); ++e) t.v.push_back(x.get(static_cast<size_t>(e)));
    result.push_back(std::move(t));
  }
  return result;
}

NodeId ok(fj::Expected<NodeId> e) {
  REQUIRE_MESSAGE(e, (e ? "" : e.error()));
  return *e;
}

Joint joint_of(const Graph& g, const std::vector<bool>& rg) {
  auto j = differentiate(g, rg);
  REQUIRE_MESSAGE(j, (j ? "" : j.error()));
  return std::move(*j);
}

// The gradients of sum_k <out_k, weight_k> with respect to grad_inputs from the
// joint pair, with seeds `weights` (one per forward output).
struct GradRun {
  Joint joint;
  std::vector<Tensor> grads;
};

GradRun backward_grads(const Graph& g, const std::vector<Tensor>& inputs, const std::vector<bool>& rg,
                       const std::vector<Tensor>& weights, const std::vector<double>& user_scalars,
                       const Bindings& b) {
  GradRun r{joint_of(g, rg), {}};
  const Joint& j = r.joint;
  CHECK(j.forward.outputs().size() == j.num_outputs + j.saved.size());
  CHECK(j.backward.num_inputs() == j.saved.size() + j.num_outputs);
  CHECK(j.backward.num_scalar_inputs() == g.num_scalar_inputs());
  auto fw = compile(j.forward);
  auto bw = compile(j.backward);
  const std::vector<Tensor> outs = run(j.forward, *fw, inputs, user_scalars, b);
  std::vector<Tensor> bw_in(outs.begin() + static_cast<long>(j.num_outputs), outs.end());
  bw_in.insert(bw_in.end(), weights.begin(), weights.end());
  r.grads = run(j.backward, *bw, bw_in, user_scalars, b);
  REQUIRE(r.grads.size() == j.grad_inputs.size());
  return r;
}

struct GradOptions {
  double h = 1e-6;
  double tol = 1e-6;
  std::vector<double> scalars;  // values of the scalar_input()s
  Bindings bindings;            // for symbolic shapes
  uint32_t seed = 11;
};

// Checks the backward's gradients against central differences of the forward, for
// the loss sum_k <out_k, w_k> with random w_k. Returns the joint pair.
Joint check_grads(const Graph& g, std::vector<Tensor> inputs, const std::vector<bool>& rg,
                  const GradOptions& opt = {}) {
  std::mt19937 rng(opt.seed);
  std::vector<Tensor> weights;
  for (NodeId o : g.outputs()) {
    Tensor w = random(eval_shape(g.node(o).sym, opt.bindings), rng);
    w.dtype = g.node(o).dtype;
    weights.push_back(std::move(w));
  }
  GradRun r = backward_grads(g, inputs, rg, weights, opt.scalars, opt.bindings);
  auto fw = compile(g);
  auto loss = [&](const std::vector<Tensor>& xs) {
    const std::vector<Tensor> outs = run(g, *fw, xs, opt.scalars, opt.bindings);
    double l = 0;
    for (size_t k = 0; k < outs.size(); ++k) {
      if (!is_floating(outs[k].dtype)) continue;
      for (size_t e = 0; e < outs[k].v.size(); ++e) l += outs[k].v[e] * weights[k].v[e];
    }
    return l;
  };
  size_t checked = 0;
  for (size_t q = 0; q < r.joint.grad_inputs.size(); ++q) {
    const size_t p = static_cast<size_t>(r.joint.grad_inputs[q]);
    const Tensor& grad = r.grads[q];
    REQUIRE(grad.v.size() == inputs[p].v.size());
    for (size_t e = 0; e < inputs[p].v.size(); ++e) {
      const double x0 = inputs[p].v[e];
      inputs[p].v[e] = x0 + opt.h;
      const double up = loss(inputs);
      inputs[p].v[e] = x0 - opt.h;
      const double down = loss(inputs);
      inputs[p].v[e] = x0;
      const double fd = (up - down) / (2 * opt.h);
      CAPTURE(p);
      CAPTURE(e);
      CAPTURE(fd);
      CAPTURE(grad.v[e]);
      CHECK(std::fabs(fd - grad.v[e]) <= opt.tol * (1 + std::fabs(fd)));
      ++checked;
    }
  }
  CHECK(checked > 0);
  return std::move(r.joint);
}

const SymExpr kS0 = SymExpr::symbol(0, SymType::Int, 2);

}  // namespace

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

TEST_CASE("autodiff: embedding gathers and sums repeated rows; ops without a rule are an error") {
  std::mt19937 rng(29);
  Graph g;
  NodeId w = g.placeholder(DType::Float64, {10, 4});
  NodeId ids = g.placeholder(DType::Int64, {2, 3});
  NodeId emb = ok(g.index_select(w, 0, ids));
  g.set_outputs({emb});
  Joint je = check_grads(g, {random({10, 4}, rng), Tensor{DType::Int64, {2, 3}, {1, 7, 1, 0, 9, 1}}}, {true, true});
  CHECK(je.grad_inputs == std::vector<int32_t>{0});  // integer indices get no gradient
  // Only the indices asked: nothing flows, and no gradient is returned.
  auto j = differentiate(g, {false, true});
  REQUIRE(j);
  CHECK(j->grad_inputs.empty());

  Graph p;
  NodeId x = p.placeholder(DType::Float64, {4, 6});
  p.set_outputs({ok(p.reduce(Op::Prod, x, {1}, false))});
  auto prod = differentiate(p, {true});
  REQUIRE_FALSE(prod);
  CHECK(prod.error() == "autodiff: no gradient rule for aten.prod.dim_int");

  Graph s;
  NodeId z = s.placeholder(DType::Float64, {4, 6});
  s.set_outputs({ok(s.slice(z, 1, SymExpr::integer(0), SymExpr::integer(3), 2))});
  auto strided = differentiate(s, {true});
  REQUIRE_FALSE(strided);
  CHECK(strided.error() == "autodiff: no gradient rule for aten.slice.Tensor");
}

TEST_CASE("autodiff: an unused input gets zeros; an output may be an input; repeated outputs add") {
  std::mt19937 rng(17);
  Graph g;
  NodeId x = g.placeholder(DType::Float64, {2, 3});
  g.placeholder(DType::Float64, {3});  // unused
  NodeId e = ok(g.pointwise(Op::Exp, {x}));
  g.set_outputs({e, x, e});
  Joint j = check_grads(g, {random({2, 3}, rng), random({3}, rng)}, {true, true});
  REQUIRE(j.grad_inputs == std::vector<int32_t>{0, 1});
  CHECK(j.saved.size() == 1);  // x, to recompute exp(x)
}

TEST_CASE("autodiff: nodes recorded under no_grad stop gradients; a custom fragment replaces the rules") {
  std::mt19937 rng(23);
  Graph g;
  NodeId x = g.placeholder(DType::Float64, {4});
  NodeId a = ok(g.pointwise(Op::Exp, {x}));
  NodeId b = ok(g.pointwise(Op::Sin, {x}));  // under no_grad: a constant for autograd
  NodeId y = ok(g.pointwise(Op::Mul, {a, b}));
  // A custom Function whose forward computed x * 3 and whose backward claims 5 * grad.
  NodeId c = ok(g.pointwise(Op::Mul, {x, g.scalar(3.0)}));
  NodeId result = ok(g.alias(c));
  NodeId out = ok(g.pointwise(Op::Add, {result, y}));
  g.set_outputs({out});
  DiffOptions opts;
  opts.no_grad.assign(g.size(), false);
  opts.no_grad[static_cast<size_t>(b)] = true;
  opts.no_grad[static_cast<size_t>(c)] = true;  // the forward ran with grad mode off
  CustomGrad custom;
  NodeId gy = custom.fragment.placeholder(DType::Float64, {4});
  custom.fragment.set_outputs({ok(custom.fragment.pointwise(Op::Mul, {gy, custom.fragment.scalar(5.0)}))});
  custom.outputs = {result};
  custom.inputs = {x};
  opts.customs.push_back(std::move(custom));
  auto j = differentiate(g, {true}, opts);
  REQUIRE_MESSAGE(j, (j ? "" : j.error()));
  REQUIRE(j->grad_inputs == std::vector<int32_t>{0});
  CHECK(j->grad_defined == std::vector<bool>{true});
  CHECK(j->output_needs_grad == std::vector<bool>{true});
  const Tensor xv = random({4}, rng), w = random({4}, rng);
  auto fw = compile(j->forward);
  auto bw = compile(j->backward);
  const Bindings none;
  const std::vector<Tensor> outs = run(j->forward, *fw, {xv}, {}, none);
  std::vector<Tensor> bw_in(outs.begin() + static_cast<long>(j->num_outputs), outs.end());
  bw_in.push_back(w);
  const std::vector<Tensor> grads = run(j->backward, *bw, bw_in, {}, none);
  for (size_t e = 0; e < 4; ++e) {
    const double expected = 5 * w.v[e] + w.v[e] * std::sin(xv.v[e]) * std::exp(xv.v[e]);
    CHECK(grads[0].v[e] == doctest::Approx(expected).epsilon(1e-12));
  }
  // Everything under no_grad: no output needs a gradient.
  opts.no_grad.assign(g.size(), true);
  opts.customs.clear();
  auto none_needed = differentiate(g, {true}, opts);
  REQUIRE(none_needed);
  CHECK(none_needed->output_needs_grad == std::vector<bool>{false});
  CHECK(none_needed->grad_defined == std::vector<bool>{false});
}

// A stand-in for dropout's noise: each run "draws" the next numbers of a counter.
class CountingDraw final : public ExternFn {
 public:
  const std::string& name() const override { return name_; }
  const std::string& key() const override { return name_; }
  std::shared_ptr<const ExternFn> vjp(size_t) const override { return nullptr; }
  bool random() const override { return true; }
  bool run(const std::vector<ExternArg>&, const ExternArg& result) const noexcept override {
    auto* out = static_cast<double*>(result.data);
    for (int64_t e = 0; e < result.sizes[0]; ++e) out[e * result.strides[0]] = static_cast<double>(++draws);
    return true;
  }
  mutable int draws = 0;

 private:
  std::string name_ = "counting_draw";
};

TEST_CASE("autodiff: a random extern node is saved, never drawn again in the backward") {
  std::mt19937 rng(31);
  Graph g;
  NodeId x = g.placeholder(DType::Float64, {4});
  auto draw = std::make_shared<CountingDraw>();
  NodeId noise = ok(g.extern_call(draw, {}, DType::Float64, {SymExpr::integer(4)}));
  NodeId y = ok(g.pointwise(Op::Mul, {ok(g.pointwise(Op::Exp, {x})), noise}));
  g.set_outputs({y});
  DiffOptions opts;
  opts.no_grad.assign(g.size(), false);
  opts.no_grad[static_cast<size_t>(noise)] = true;  // as the tracer records random draws
  auto j = differentiate(g, {true}, opts);
  REQUIRE_MESSAGE(j, (j ? "" : j.error()));
  CHECK(std::find(j->saved.begin(), j->saved.end(), noise) != j->saved.end());
  for (const Node& n : j->backward.nodes()) CHECK(n.op != Op::ExternCall);
  const Tensor xv = random({4}, rng), w = random({4}, rng);
  auto fw = compile(j->forward);
  auto bw = compile(j->backward);
  const Bindings none;
  const std::vector<Tensor> outs = run(j->forward, *fw, {xv}, {}, none);
  CHECK(draw->draws == 4);
  std::vector<Tensor> bw_in(outs.begin() + static_cast<long>(j->num_outputs), outs.end());
  bw_in.push_back(w);
  const std::vector<Tensor> grads = run(j->backward, *bw, bw_in, {}, none);
  CHECK(draw->draws == 4);  // the backward read the saved noise
  for (size_t e = 0; e < 4; ++e) {
    CHECK(grads[0].v[e] == doctest::Approx(w.v[e] * std::exp(xv.v[e]) * static_cast<double>(e + 1)).epsilon(1e-12));
  }
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

TEST_CASE("autodiff: clone_node rebuilds every op as its builder made it") {
  Graph g;
  const NodeId x = g.placeholder(DType::Float64, {3, 4});
  const NodeId b = g.placeholder(DType::Bool, {3, 4});
  const NodeId i = g.placeholder(DType::Int64, {3, 4});
  const NodeId idx = g.placeholder(DType::Int64, {2});
  const NodeId one = g.placeholder(DType::Float64, {1});
  const NodeId s = g.scalar_input();
  const NodeId two = g.scalar(2.0), three = g.scalar_int(3), yes = g.scalar(1, ScalarKind::Bool);
  // Every pointwise op whose operands are all tensors, on the first of float64, int64
  // and bool that it accepts (so a new pointwise op is covered without a line here).
  for (size_t k = 0; k < autodiff_detail::kNumOps; ++k) {
    const Op op = static_cast<Op>(k);
    const std::string_view kinds = op_operands(op);
    if (op_family(op) != Family::Pointwise || op == Op::Cast || kinds.find('S') != kinds.npos) continue;
    if (kinds.size() > 2) continue;  // where, masked_fill: below, with operands of their own
    bool built = false;
    for (NodeId v : {x, i, b}) {
      if (!built) built = static_cast<bool>(g.pointwise(op, std::vector<NodeId>(kinds.size(), v)));
    }
    CAPTURE(op_name(op));
    CHECK(built);
  }
  ok(g.pointwise(Op::PowScalar, {x, s}));
  ok(g.pointwise(Op::Softplus, {x, two, g.scalar(20.0)}));
  ok(g.pointwise(Op::Clamp, {x, g.scalar(-1.0), two}));
  ok(g.pointwise(Op::ClampMin, {x, three}));
  ok(g.pointwise(Op::ClampMax, {x, yes}));
  ok(g.pointwise(Op::Where, {b, x, two}));
  ok(g.pointwise(Op::MaskedFill, {x, b, two}));
  ok(g.cast(x, DType::Float32));
  for (Op op : {Op::Sum, Op::Prod, Op::Amax, Op::Amin, Op::ArgMax, Op::ArgMin}) ok(g.reduce(op, x, {1}, false));
  ok(g.reduce(Op::Sum, i, {0}, true, DType::Float64));
  ok(g.reduce(Op::Any, b, {0, 1}, false));
  ok(g.reduce(Op::All, b, {1}, true));
  ok(g.cumsum(x, 1));
  ok(g.permute(x, {1, 0}));
  ok(g.reshape(x, {SymExpr::integer(12)}));
  ok(g.expand(one, {SymExpr::integer(5), SymExpr::integer(1)}));
  ok(g.slice(x, 1, SymExpr::integer(1), SymExpr::integer(2), 1));
  ok(g.select(x, 0, SymExpr::integer(2)));
  ok(g.flip(x, {0, 1}));
  ok(g.cat({x, x}, 0));
  ok(g.slice_scatter(x, ok(g.slice(x, 1, SymExpr::integer(0), SymExpr::integer(2), 2)), 1, SymExpr::integer(0), 2));
  ok(g.index_select(x, 0, idx, true));
  ok(g.gather(x, 1, i));
  const NodeId filled = ok(g.full({SymExpr::integer(3)}, s, DType::Float64));
  ok(g.iota({SymExpr::integer(3), SymExpr::integer(4)}, 1));
  ok(g.item(one, ScalarKind::Int));
  ok(g.item(one, ScalarKind::Bool));
  const NodeId f = ok(g.item(one, ScalarKind::Float));
  ok(g.pointwise(Op::Mul, {filled, f}));
  ok(g.matmul(x, ok(g.permute(x, {1, 0}))));
  ok(g.extern_call(nullptr, {x}, DType::Float64, SymShape(g.node(x).sym)));
  g.set_outputs({filled});

  std::vector<bool> seen(autodiff_detail::kNumOps, false);
  Graph h;
  std::vector<NodeId> map;
  for (const Node& n : g.nodes()) {
    seen[static_cast<size_t>(n.op)] = true;
    if (n.op == Op::Placeholder) {
      map.push_back(h.placeholder(n.dtype, *concrete(n.sym)));
    } else if (n.op == Op::ScalarInput) {
      map.push_back(h.scalar_input(n.scalar_kind));
    } else {
      std::vector<NodeId> in;
      for (NodeId q : n.inputs) in.push_back(map[static_cast<size_t>(q)]);
      map.push_back(ok(clone_node(h, n, in)));
    }
  }
  h.set_outputs({map[static_cast<size_t>(filled)]});
  CHECK(h.str() == g.str());
  CHECK(h.structural_key() == g.structural_key());
  for (size_t k = 0; k < seen.size(); ++k) {
    CAPTURE(op_name(static_cast<Op>(k)));
    CHECK(seen[k]);  // every op of jit/ir/ops.def is built above
  }
}
