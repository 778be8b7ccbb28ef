// Graph IR: the text printer, broadcasting, and the dtype rules of pointwise().
#include <doctest.h>

#include "jit/graph.h"

using namespace fj::jit;

TEST_CASE("graph printer: a small graph") {
  Graph g;
  NodeId x = g.placeholder(DType::Float32, {4, 8});
  NodeId y = g.placeholder(DType::Float32, {8});
  NodeId one = g.scalar(1.5);
  auto m = g.pointwise(Op::Mul, {x, y});
  REQUIRE(m);
  auto a = g.pointwise(Op::Add, {*m, one});
  REQUIRE(a);
  auto c = g.pointwise(Op::Gt, {*a, y});
  REQUIRE(c);
  g.set_outputs({*a, *c});
  CHECK(g.str() ==
        "%0 = placeholder[0] f32[4, 8]\n"
        "%1 = placeholder[1] f32[8]\n"
        "%2 = scalar 1.5\n"
        "%3 = aten.mul.Tensor(%0, %1) f32[4, 8]\n"
        "%4 = aten.add.Tensor(%3, %2) f32[4, 8]\n"
        "%5 = aten.gt.Tensor(%4, %1) bool[4, 8]\n"
        "return (%4, %5)\n");
  CHECK(g.num_inputs() == 2);
  CHECK(g.structural_key() == g.str());
}

TEST_CASE("broadcast_shapes follows PyTorch's right-aligned rules") {
  auto s = broadcast_shapes({4, 1}, {1, 5});
  REQUIRE(s);
  CHECK(*s == Shape{4, 5});
  s = broadcast_shapes({3, 1, 7}, {6, 1});
  REQUIRE(s);
  CHECK(*s == Shape{3, 6, 7});
  s = broadcast_shapes({}, {2, 3});
  REQUIRE(s);
  CHECK(*s == Shape{2, 3});
  s = broadcast_shapes({0, 3}, {1, 3});
  REQUIRE(s);
  CHECK(*s == Shape{0, 3});

  auto bad = broadcast_shapes({4, 3}, {4, 5});
  REQUIRE_FALSE(bad);
  CHECK(bad.error() ==
        "The size of tensor a (3) must match the size of tensor b (5) at non-singleton "
        "dimension 1");
}

TEST_CASE("pointwise: shapes broadcast, mismatches are errors") {
  Graph g;
  NodeId a = g.placeholder(DType::Float32, {4, 1});
  NodeId b = g.placeholder(DType::Float32, {1, 5});
  NodeId c = g.placeholder(DType::Float32, {3});
  auto ab = g.pointwise(Op::Add, {a, b});
  REQUIRE(ab);
  CHECK(g.node(*ab).shape == Shape{4, 5});
  CHECK(g.node(*ab).dtype == DType::Float32);
  auto bad = g.pointwise(Op::Add, {*ab, c});
  REQUIRE_FALSE(bad);
  CHECK(bad.error().find("must match") != std::string::npos);
}

TEST_CASE("pointwise: dtype rules") {
  Graph g;
  NodeId x = g.placeholder(DType::Float32, {2, 3});
  NodeId m = g.placeholder(DType::Bool, {2, 3});
  NodeId s = g.scalar(2.0);

  SUBCASE("math on a bool tensor computes in float32; neg of bool is an error") {
    auto e = g.pointwise(Op::Exp, {m});
    REQUIRE(e);
    CHECK(g.node(*e).dtype == DType::Float32);
    auto n = g.pointwise(Op::Neg, {m});
    REQUIRE_FALSE(n);
    CHECK(n.error() == "aten.neg.default: on bool (eager raises)");
    auto add = g.pointwise(Op::Add, {x, m});
    REQUIRE(add);
    CHECK(g.node(*add).dtype == DType::Float32);
  }
  SUBCASE("comparisons give bool") {
    auto lt = g.pointwise(Op::Lt, {x, s});
    REQUIRE(lt);
    CHECK(g.node(*lt).dtype == DType::Bool);
    CHECK(g.node(*lt).shape == Shape{2, 3});
  }
  SUBCASE("where needs a bool condition") {
    auto ok = g.pointwise(Op::Where, {m, x, s});
    REQUIRE(ok);
    CHECK(g.node(*ok).dtype == DType::Float32);
    auto bad = g.pointwise(Op::Where, {x, x, x});
    REQUIRE_FALSE(bad);
    CHECK(bad.error() == "aten.where.self: the condition is a f32 tensor (eager raises)");
    CHECK_FALSE(g.pointwise(Op::Where, {s, x, x}));
  }
  SUBCASE("arity and scalar-only operands are errors; a tensor exponent is Pow") {
    CHECK_FALSE(g.pointwise(Op::Add, {x}));
    CHECK_FALSE(g.pointwise(Op::Add, {s, s}));
    auto p = g.pointwise(Op::PowScalar, {x, x});
    REQUIRE(p);
    CHECK(g.node(*p).op == Op::Pow);
    CHECK(g.pointwise(Op::PowScalar, {x, s}));
  }
}

TEST_CASE("graph: scalar inputs print, count apart from placeholders, act as scalars") {
  Graph g;
  NodeId x = g.placeholder(DType::Float32, {4});
  NodeId n = g.scalar_input();
  NodeId y = g.placeholder(DType::Float32, {4});
  NodeId k = g.scalar_input();
  auto m = g.pointwise(Op::Mul, {x, n});
  REQUIRE(m);
  auto p = g.pointwise(Op::PowScalar, {y, k});
  REQUIRE(p);
  auto lt = g.pointwise(Op::Lt, {n, *p});
  REQUIRE(lt);
  g.set_outputs({*m, *lt});
  CHECK(g.str() ==
        "%0 = placeholder[0] f32[4]\n"
        "%1 = scalar_input[0]\n"
        "%2 = placeholder[1] f32[4]\n"
        "%3 = scalar_input[1]\n"
        "%4 = aten.mul.Tensor(%0, %1) f32[4]\n"
        "%5 = aten.pow.Tensor_Scalar(%2, %3) f32[4]\n"
        "%6 = aten.lt.Tensor(%1, %5) bool[4]\n"
        "return (%4, %6)\n");
  CHECK(g.num_inputs() == 2);
  CHECK(g.num_scalar_inputs() == 2);
  CHECK(op_family(Op::ScalarInput) == Family::Input);
  CHECK(g.node(n).shape.empty());
  CHECK(g.node(k).index == 1);
  CHECK_FALSE(g.pointwise(Op::Neg, {n}));  // scalars only
  auto pw = g.pointwise(Op::PowScalar, {x, y});  // a tensor exponent: aten.pow.Tensor_Tensor
  REQUIRE(pw);
  CHECK(g.node(*pw).op == Op::Pow);
}
