// Graph IR: the text printer, broadcasting, and the dtype rules of pointwise().
#include <doctest.h>
#include <cmath>

#include "jit/ir/graph.h"

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
}

TEST_CASE("cone: only what the outputs need, with every input kept in its position") {
  Graph g;
  const NodeId x = g.placeholder(DType::Float32, {4});
  const NodeId y = g.placeholder(DType::Float32, {4});
  const NodeId s = g.scalar_input();
  const NodeId unused = *g.pointwise(Op::Mul, {y, s});
  const NodeId cond = *g.pointwise(Op::Gt, {x, g.scalar(0.5)});
  g.set_outputs({unused, cond});
  const Graph c = g.cone({cond});
  CHECK(c.str() ==
        "%0 = placeholder[0] f32[4]\n"
        "%1 = placeholder[1] f32[4]\n"
        "%2 = scalar_input[0]\n"
        "%3 = scalar 0.5\n"
        "%4 = aten.gt.Tensor(%0, %3) bool[4]\n"
        "return (%4)\n");
  CHECK(c.num_inputs() == 2);
  CHECK(c.num_scalar_inputs() == 1);
  CHECK(g.outputs().size() == 2);  // the graph itself is unchanged
}

TEST_CASE("structural_key tells graphs apart by every field a kernel depends on") {
  auto build = [](double c, bool keepdim, bool wrap) {
    Graph g;
    const NodeId x = g.placeholder(DType::Float32, {4, 8});
    const NodeId i = g.placeholder(DType::Int64, {3});
    const NodeId y = *g.pointwise(Op::Mul, {x, g.scalar(c)});
    const NodeId s = *g.reduce(Op::Sum, y, {1}, keepdim);
    const NodeId r = *g.index_select(s, 0, i, wrap);
    g.set_outputs({r});
    return g;
  };
  const std::string key = build(1.5, false, false).structural_key();
  CHECK(build(1.5, false, false).structural_key() == key);
  CHECK(build(std::nextafter(1.5, 2.0), false, false).structural_key() != key);
  CHECK(build(1.5, true, false).structural_key() != key);
  CHECK(build(1.5, false, true).structural_key() != key);
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
  CHECK(concrete(g.node(*ab).sym) == Shape{4, 5});
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
    CHECK(concrete(g.node(*lt).sym) == Shape{2, 3});
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
  CHECK(g.node(n).sym.empty());
  CHECK(g.node(k).index == 1);
  CHECK_FALSE(g.pointwise(Op::Neg, {n}));  // scalars only
  auto pw = g.pointwise(Op::PowScalar, {x, y});  // a tensor exponent: aten.pow.Tensor_Tensor
  REQUIRE(pw);
  CHECK(g.node(*pw).op == Op::Pow);
}

namespace {

OperandType dim(DType d) { return OperandType{d, false, false}; }
OperandType zero_dim(DType d) { return OperandType{d, false, true}; }
OperandType weak(ScalarKind k) { return OperandType{scalar_kind_dtype(k), true, true}; }

}  // namespace

TEST_CASE("promotion: promote_types is PyTorch's table for the six dtypes") {
  using D = DType;
  // rows/columns: bool, u8, i32, i64, f32, f64 (torch.promote_types)
  const D all[] = {D::Bool, D::UInt8, D::Int32, D::Int64, D::Float32, D::Float64};
  const D want[6][6] = {
      {D::Bool, D::UInt8, D::Int32, D::Int64, D::Float32, D::Float64},
      {D::UInt8, D::UInt8, D::Int32, D::Int64, D::Float32, D::Float64},
      {D::Int32, D::Int32, D::Int32, D::Int64, D::Float32, D::Float64},
      {D::Int64, D::Int64, D::Int64, D::Int64, D::Float32, D::Float64},
      {D::Float32, D::Float32, D::Float32, D::Float32, D::Float32, D::Float64},
      {D::Float64, D::Float64, D::Float64, D::Float64, D::Float64, D::Float64},
  };
  for (int i = 0; i < 6; ++i) {
    for (int j = 0; j < 6; ++j) {
      CAPTURE(i);
      CAPTURE(j);
      CHECK(promote_types(all[i], all[j]) == want[i][j]);
    }
  }
}

TEST_CASE("promotion: result_type with Python numbers and 0-d tensors") {
  using D = DType;
  using K = ScalarKind;
  // a Python number only lifts the category
  CHECK(result_type({dim(D::Int32), weak(K::Float)}) == D::Float32);
  CHECK(result_type({dim(D::Int32), weak(K::Int)}) == D::Int32);
  CHECK(result_type({dim(D::UInt8), weak(K::Int)}) == D::UInt8);
  CHECK(result_type({dim(D::Bool), weak(K::Int)}) == D::Int64);
  CHECK(result_type({dim(D::Bool), weak(K::Bool)}) == D::Bool);
  CHECK(result_type({dim(D::Bool), weak(K::Float)}) == D::Float32);
  CHECK(result_type({dim(D::Float32), weak(K::Int)}) == D::Float32);
  CHECK(result_type({dim(D::Float64), weak(K::Float)}) == D::Float64);
  // a 0-d tensor loses to a dimensioned one of the same category, lifts otherwise
  CHECK(result_type({dim(D::Float32), zero_dim(D::Float64)}) == D::Float32);
  CHECK(result_type({dim(D::Int32), zero_dim(D::Int64)}) == D::Int32);
  CHECK(result_type({dim(D::Int32), zero_dim(D::Float64)}) == D::Float64);
  CHECK(result_type({dim(D::Bool), zero_dim(D::UInt8)}) == D::UInt8);
  CHECK(result_type({zero_dim(D::Int32), weak(K::Float)}) == D::Float32);
  CHECK(result_type({zero_dim(D::Float64), weak(K::Float)}) == D::Float64);
  CHECK(result_type({zero_dim(D::Int32), zero_dim(D::Int64)}) == D::Int64);
}

TEST_CASE("promotion: each rule's result and computation types, and rejections") {
  using D = DType;
  using K = ScalarKind;
  auto types = [](Op op, std::vector<OperandType> in) {
    auto t = infer_types(op, in);
    REQUIRE_MESSAGE(t, (t ? "" : t.error()));
    return std::pair{t->result, t->compute};
  };
  auto rejects = [](Op op, std::vector<OperandType> in) { return !infer_types(op, in); };
  CHECK(types(Op::Div, {dim(D::Int64), dim(D::Int32)}) == std::pair{D::Float32, D::Float32});
  CHECK(types(Op::Div, {dim(D::Float64), weak(K::Int)}) == std::pair{D::Float64, D::Float64});
  CHECK(types(Op::Exp, {dim(D::Bool)}) == std::pair{D::Float32, D::Float32});
  CHECK(types(Op::Lt, {dim(D::UInt8), weak(K::Float)}) == std::pair{D::Bool, D::Float32});
  CHECK(types(Op::Eq, {dim(D::Int32), dim(D::Int64)}) == std::pair{D::Bool, D::Int64});
  CHECK(types(Op::Add, {dim(D::Bool), dim(D::Bool)}) == std::pair{D::Bool, D::Bool});
  CHECK(types(Op::LogicalAnd, {dim(D::Float32), dim(D::Int32)}) == std::pair{D::Bool, D::Bool});
  CHECK(types(Op::IsNan, {dim(D::Int32)}) == std::pair{D::Bool, D::Int32});
  CHECK(types(Op::Floor, {dim(D::Int64)}) == std::pair{D::Int64, D::Int64});
  CHECK(types(Op::Sign, {dim(D::Bool)}) == std::pair{D::Bool, D::Bool});
  CHECK(types(Op::Clamp, {dim(D::Int32), weak(K::Float), weak(K::Float)}) ==
        std::pair{D::Float32, D::Float32});
  CHECK(types(Op::Clamp, {dim(D::Bool), weak(K::Int), weak(K::Int)}) == std::pair{D::Int64, D::Int64});
  CHECK(types(Op::MaskedFill, {dim(D::Int32), dim(D::Bool), weak(K::Float)}) ==
        std::pair{D::Int32, D::Int32});
  CHECK(types(Op::Where, {dim(D::Bool), dim(D::UInt8), weak(K::Int)}) == std::pair{D::UInt8, D::UInt8});
  CHECK(types(Op::FloorDiv, {dim(D::Bool), weak(K::Int)}) == std::pair{D::Int64, D::Int64});
  CHECK(types(Op::BitwiseAnd, {dim(D::Bool), weak(K::Bool)}) == std::pair{D::Bool, D::Bool});
  CHECK(types(Op::BitwiseAnd, {dim(D::Bool), weak(K::Int)}) == std::pair{D::Int64, D::Int64});
  // what eager rejects
  CHECK(rejects(Op::Sub, {dim(D::Bool), dim(D::Bool)}));
  CHECK(rejects(Op::Sub, {dim(D::Float32), weak(K::Bool)}));
  CHECK(rejects(Op::Neg, {dim(D::Bool)}));
  CHECK(rejects(Op::Abs, {dim(D::Bool)}));
  CHECK(rejects(Op::Floor, {dim(D::Bool)}));
  CHECK(rejects(Op::FloorDiv, {dim(D::Bool), dim(D::Bool)}));
  CHECK(rejects(Op::BitwiseXor, {dim(D::Int32), weak(K::Float)}));
  CHECK(rejects(Op::BitwiseNot, {dim(D::Float64)}));
  CHECK(rejects(Op::Gelu, {dim(D::Int64)}));
  CHECK(rejects(Op::Where, {dim(D::UInt8), dim(D::Float32), dim(D::Float32)}));
  CHECK(rejects(Op::MaskedFill, {dim(D::Float32), dim(D::Int64), weak(K::Float)}));
}

TEST_CASE("pointwise: integer division and power need a safe constant") {
  Graph g;
  NodeId i = g.placeholder(DType::Int32, {4});
  NodeId j = g.placeholder(DType::Int32, {4});
  CHECK(g.pointwise(Op::FloorDiv, {i, g.scalar_int(3)}));
  CHECK(g.pointwise(Op::Remainder, {i, g.scalar_int(-1)}));
  CHECK_FALSE(g.pointwise(Op::FloorDiv, {i, g.scalar_int(0)}));             // eager raises
  CHECK_FALSE(g.pointwise(Op::FloorDiv, {i, j}));                           // a zero would raise
  CHECK_FALSE(g.pointwise(Op::Remainder, {i, g.scalar_input(ScalarKind::Int)}));
  CHECK_FALSE(g.pointwise(Op::FloorDiv, {i, g.scalar_int(int64_t{1} << 40)}));  // beyond i32
  CHECK(g.pointwise(Op::FloorDiv, {i, g.scalar(2.5)}));                     // float: f32
  CHECK(g.pointwise(Op::PowScalar, {i, g.scalar_int(3)}));
  CHECK_FALSE(g.pointwise(Op::PowScalar, {i, g.scalar_int(-1)}));           // eager raises
  CHECK_FALSE(g.pointwise(Op::PowScalar, {i, j}));                          // integer Pow
  // checked conversions: where / clamp / masked_fill values must fit
  NodeId u = g.placeholder(DType::UInt8, {4});
  NodeId m = g.placeholder(DType::Bool, {4});
  CHECK(g.pointwise(Op::MaskedFill, {u, m, g.scalar_int(-255)}));  // wraps, as c10 allows
  CHECK_FALSE(g.pointwise(Op::MaskedFill, {u, m, g.scalar_int(256)}));
  CHECK_FALSE(g.pointwise(Op::MaskedFill, {u, m, g.scalar(-0.5)}));
  CHECK(g.scalar_ranges().empty());
  CHECK(g.pointwise(Op::ClampMin, {i, g.scalar_input(ScalarKind::Int)}));
  REQUIRE(g.scalar_ranges().size() == 1);
  CHECK(g.scalar_ranges()[0].lo == -2147483648.0);
  CHECK(g.scalar_ranges()[0].hi == 2147483647.0);
}

TEST_CASE("graph: scalars print their Python type; casts are nodes unless a no-op") {
  Graph g;
  NodeId x = g.placeholder(DType::Int64, {2});
  NodeId t = g.scalar(1, ScalarKind::Bool);
  NodeId k = g.scalar_int((int64_t{1} << 60) + 1);
  NodeId n = g.scalar_input(ScalarKind::Int);
  auto a = g.pointwise(Op::BitwiseAnd, {x, t});
  REQUIRE(a);
  auto b = g.pointwise(Op::Add, {*a, k});
  REQUIRE(b);
  auto c = g.pointwise(Op::Mul, {*b, n});
  REQUIRE(c);
  auto f = g.cast(*c, DType::Float64);
  REQUIRE(f);
  auto same = g.cast(x, DType::Int64);
  REQUIRE(same);
  CHECK(*same == x);
  g.set_outputs({*f});
  CHECK(g.str() ==
        "%0 = placeholder[0] i64[2]\n"
        "%1 = scalar True\n"
        "%2 = scalar 1152921504606846977\n"
        "%3 = scalar_input[0] int\n"
        "%4 = aten.bitwise_and.Tensor(%0, %1) i64[2]\n"
        "%5 = aten.add.Tensor(%4, %2) i64[2]\n"
        "%6 = aten.mul.Tensor(%5, %3) i64[2]\n"
        "%7 = aten._to_copy.default(%6) f64[2]\n"
        "return (%7)\n");
}
