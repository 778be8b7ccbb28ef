// SymExpr: simplification (via str() and same()), Python semantics of eval()
// against tables computed by CPython, and a randomized check that simplifying
// never changes a value.
#include <doctest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>

#include "jit/sym/symexpr.h"

using namespace fj::jit;

namespace {

const SymExpr s0 = SymExpr::symbol(0, SymType::Int, 2);  // a tensor size: >= 2
const SymExpr s1 = SymExpr::symbol(1, SymType::Int, 2);
const SymExpr s2 = SymExpr::symbol(2, SymType::Int);      // any int
const SymExpr f0 = SymExpr::symbol(0, SymType::Float);
const SymExpr f1 = SymExpr::symbol(1, SymType::Float);
const SymExpr b0 = SymExpr::symbol(0, SymType::Bool);
const SymExpr b1 = SymExpr::symbol(1, SymType::Bool);

SymExpr I(int64_t v) { return SymExpr::integer(v); }
SymExpr F(double v) { return SymExpr::real(v); }
SymExpr B(bool v) { return SymExpr::boolean(v); }

// Evaluates an expression over constants only.
std::optional<SymValue> val(const SymExpr& e) { return e.eval(Bindings{}); }

std::optional<int64_t> ival(const SymExpr& e) {
  auto v = val(e);
  if (!v || v->index() != 0) return std::nullopt;
  return std::get<0>(*v);
}

bool same_double(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return std::bit_cast<uint64_t>(a) == std::bit_cast<uint64_t>(b);
}

// A Float result, bit-exact (NaN matches NaN); nullopt expected means no value.
bool float_result_is(const std::optional<SymValue>& v, std::optional<double> expected) {
  if (!expected) return !v.has_value();
  return v && v->index() == 1 && same_double(std::get<1>(*v), *expected);
}

#define NAN_ std::numeric_limits<double>::quiet_NaN()
#define INF_ std::numeric_limits<double>::infinity()

struct IntDivCase { int64_t a, b; std::optional<int64_t> q, r; };
struct IntTrueDivCase { int64_t a, b; std::optional<double> q; };
struct FloatDivCase { double a, b; std::optional<double> q, r; };
struct FloatPowCase { double a, b; std::optional<double> p; };
struct IntPowCase { int64_t a, b; std::optional<int64_t> p; };
struct CompareCase { int64_t i; double d; bool lt, eq, gt; };
struct TruncCase { double d; std::optional<int64_t> i; };
struct ReprCase { double d; const char* repr; };

#include "symexpr_python_tables.inc"

}  // namespace

TEST_SUITE_BEGIN("symexpr");

TEST_CASE("symexpr: constants, symbols and accessors") {
  CHECK(SymExpr().is_null());
  CHECK(I(3).as_int() == 3);
  CHECK_FALSE(I(3).as_float());
  CHECK(F(2.5).as_float() == 2.5);
  CHECK(B(true).as_bool() == true);
  CHECK_FALSE(B(true).as_int());
  CHECK(s0.is_symbol());
  CHECK(s0.symbol_id() == 0);
  CHECK(add(s0, I(1)).symbol_id() == -1);
  CHECK(s0.str() == "s0");
  CHECK(f1.str() == "f1");
  CHECK(b0.str() == "b0");
  CHECK(s0.type() == SymType::Int);
  CHECK(f0.type() == SymType::Float);
  CHECK(b0.type() == SymType::Bool);
  CHECK(add(mul(s1, f0), s0).symbols() == std::vector<int>{0, 1});
  CHECK(add(s2, mul(s2, s1)).symbols() == std::vector<int>{1, 2});
  CHECK(add(SymExpr(), s0).is_null());
}

TEST_CASE("symexpr: Int sums are canonical sums of monomials") {
  CHECK(add(s0, I(0)).same(s0));
  CHECK(mul(s0, I(1)).same(s0));
  CHECK(mul(s0, I(0)).as_int() == 0);
  CHECK(sub(s0, s0).as_int() == 0);
  CHECK(add(s0, s0).str() == "2*s0");
  CHECK(add(mul(I(2), s0), mul(I(3), s0)).str() == "5*s0");
  CHECK(add(mul(s0, s1), mul(s1, s0)).str() == "2*s0*s1");
  CHECK(add(mul(s0, s1), I(2)).str() == "s0*s1 + 2");
  CHECK(add(I(2), mul(s1, s0)).same(add(mul(s0, s1), I(2))));
  CHECK(sub(mul(I(2), s0), I(3)).str() == "2*s0 - 3");
  CHECK(sub(I(3), s0).str() == "-s0 + 3");
  CHECK(add(add(s1, I(1)), add(s0, I(-1))).str() == "s0 + s1");
  CHECK(mul(I(2), add(s0, I(1))).str() == "2*s0 + 2");
  CHECK(neg(sub(s0, s1)).str() == "-s0 + s1");
  CHECK(add(mul(s0, s0), s0).str() == "s0*s0 + s0");
  // Products of sums are not expanded (see symexpr.h).
  CHECK(mul(add(s0, I(1)), s1).str() == "s1*(s0 + 1)");
  CHECK(mul(mul(I(2), s0), mul(I(3), s1)).str() == "6*s0*s1");
  // Order of building does not matter.
  SymExpr x = add(add(mul(s0, s1), s2), I(5));
  SymExpr y = add(I(5), add(s2, mul(s1, s0)));
  CHECK(x.same(y));
  CHECK(x.hash() == y.hash());
  CHECK_FALSE(x.same(add(x, I(1))));
  // Bool in arithmetic acts as Int.
  CHECK(add(B(true), I(1)).as_int() == 2);
  CHECK(add(b0, I(1)).type() == SymType::Int);
  CHECK(add(b0, I(0)).type() == SymType::Int);
  CHECK(add(b0, b0).str() == "2*int(b0)");
  CHECK(neg(B(true)).as_int() == -1);
}

TEST_CASE("symexpr: Int constant folding only where the value exists") {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  CHECK(add(I(2), I(3)).as_int() == 5);
  CHECK(mul(I(-4), I(3)).as_int() == -12);
  CHECK(floordiv(I(7), I(-2)).as_int() == -4);
  CHECK(mod(I(7), I(-2)).as_int() == -1);
  SymExpr over = add(I(kMax), I(1));
  CHECK_FALSE(over.is_constant());
  CHECK_FALSE(val(over));
  CHECK(ival(sub(over, I(1))) == kMax);  // a value again: computed exactly
  CHECK_FALSE(val(mul(I(kMax), I(2))));
  CHECK_FALSE(val(neg(I(kMin))));
  CHECK_FALSE(val(abs(I(kMin))));
  CHECK(ival(abs(I(kMin + 1))) == kMax);
  SymExpr div0 = floordiv(I(1), I(0));
  CHECK_FALSE(div0.is_constant());
  CHECK(div0.str() == "1//0");
  CHECK_FALSE(val(div0));
  CHECK_FALSE(val(mod(I(1), I(0))));
  CHECK_FALSE(val(truediv(I(1), I(0))));
  CHECK_FALSE(val(truediv(F(1.0), F(0.0))));
  CHECK_FALSE(val(floordiv(I(kMin), I(-1))));
  CHECK(ival(mod(I(kMin), I(-1))) == 0);
  CHECK(ival(pow(I(2), I(62))) == (int64_t{1} << 62));
  CHECK_FALSE(val(pow(I(2), I(63))));
}

TEST_CASE("symexpr: int64 overflow in a symbolic expression has no value") {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  SymExpr e = mul(s2, I(2));
  CHECK(std::get<0>(*e.eval({{int64_t{0}, int64_t{0}, int64_t{kMax / 2}}})) == kMax - 1);
  CHECK_FALSE(e.eval({{int64_t{0}, int64_t{0}, int64_t{kMax / 2 + 1}}}));
  SymExpr p = mul(s0, s1);
  CHECK_FALSE(p.eval({{int64_t{1} << 32, int64_t{1} << 31}}));
  CHECK(std::get<0>(*p.eval({{int64_t{1} << 32, int64_t{1} << 30}})) == int64_t{1} << 62);
  // Terms that overflow on their own still give the exact sum when it fits.
  SymExpr d = sub(mul(I(kMax), s2), mul(I(kMax), s2));
  CHECK(d.as_int() == 0);
  SymExpr t = add(mul(I(kMax), s2), mul(I(-kMax), s1));  // kMax*(s2 - s1)
  CHECK(std::get<0>(*t.eval({{int64_t{0}, int64_t{5}, int64_t{5}}})) == 0);
  CHECK(std::get<0>(*t.eval({{int64_t{0}, int64_t{5}, int64_t{6}}})) == kMax);
  CHECK_FALSE(t.eval({{int64_t{0}, int64_t{5}, int64_t{7}}}));
  // Unbound symbols, wrong types, and values below a symbol's bound have no value.
  CHECK_FALSE(s2.eval({{int64_t{1}}}));
  CHECK_FALSE(s0.eval({{2.0}}));
  CHECK_FALSE(s0.eval({{int64_t{1}}}));
  CHECK(std::get<0>(*s0.eval({{int64_t{2}}})) == 2);
}

TEST_CASE("symexpr: floor division and modulo, all sign combinations (CPython table)") {
  for (const IntDivCase& c : kIntDiv) {
    CAPTURE(c.a);
    CAPTURE(c.b);
    Bindings b{{c.a, c.b}};
    SymExpr x = SymExpr::symbol(0, SymType::Int), y = SymExpr::symbol(1, SymType::Int);
    auto q = floordiv(x, y).eval(b);
    auto r = mod(x, y).eval(b);
    CHECK(q.has_value() == c.q.has_value());
    if (q && c.q) CHECK(std::get<0>(*q) == *c.q);
    CHECK(r.has_value() == c.r.has_value());
    if (r && c.r) CHECK(std::get<0>(*r) == *c.r);
    // Constant folding gives the same answers.
    CHECK(ival(floordiv(I(c.a), I(c.b))) == c.q);
    CHECK(ival(mod(I(c.a), I(c.b))) == c.r);
  }
  for (const FloatDivCase& c : kFloatDiv) {
    CAPTURE(c.a);
    CAPTURE(c.b);
    Bindings b{{c.a, c.b}};
    CHECK(float_result_is(floordiv(f0, f1).eval(b), c.q));
    CHECK(float_result_is(mod(f0, f1).eval(b), c.r));
    CHECK(float_result_is(val(floordiv(F(c.a), F(c.b))), c.q));
  }
}

TEST_CASE("symexpr: int / int is correctly rounded (CPython table)") {
  for (const IntTrueDivCase& c : kIntTrueDiv) {
    CAPTURE(c.a);
    CAPTURE(c.b);
    SymExpr x = SymExpr::symbol(0, SymType::Int), y = SymExpr::symbol(1, SymType::Int);
    SymExpr e = truediv(x, y);
    CHECK(e.type() == SymType::Float);
    CHECK(float_result_is(e.eval({{c.a, c.b}}), c.q));
  }
}

TEST_CASE("symexpr: pow (CPython tables)") {
  SymExpr x = SymExpr::symbol(0, SymType::Int), y = SymExpr::symbol(1, SymType::Int);
  for (const IntPowCase& c : kIntPow) {
    CAPTURE(c.a);
    CAPTURE(c.b);
    auto v = pow(x, y).eval({{c.a, c.b}});
    CHECK(v.has_value() == c.p.has_value());
    if (v && c.p) CHECK(std::get<0>(*v) == *c.p);
    SymExpr k = pow(x, I(c.b));  // constant exponent
    CHECK(k.type() == SymType::Int);
    auto kv = k.eval({{c.a}});
    CHECK(kv.has_value() == c.p.has_value());
    if (kv && c.p) CHECK(std::get<0>(*kv) == *c.p);
  }
  for (const IntTrueDivCase& c : kIntNegPow) {
    CAPTURE(c.a);
    CAPTURE(c.b);
    SymExpr k = pow(x, I(c.b));  // a negative constant exponent: a float, as in Python
    CHECK(k.type() == SymType::Float);
    CHECK(float_result_is(k.eval({{c.a}}), c.q));
    CHECK_FALSE(pow(x, y).eval({{c.a, c.b}}));  // Int-typed node: no value
  }
  for (const FloatPowCase& c : kFloatPow) {
    CAPTURE(c.a);
    CAPTURE(c.b);
    CHECK(float_result_is(pow(f0, f1).eval({{c.a, c.b}}), c.p));
    CHECK(float_result_is(val(pow(F(c.a), F(c.b))), c.p));
  }
  CHECK(pow(s0, I(0)).as_int() == 1);
  CHECK(pow(s0, I(1)).same(s0));
  CHECK(pow(s0, I(2)).str() == "s0**2");
  CHECK(pow(I(2), I(-1)).as_float() == 0.5);
  CHECK(pow(I(2), I(10)).as_int() == 1024);
}

TEST_CASE("symexpr: int/float comparisons are exact (CPython table)") {
  SymExpr x = SymExpr::symbol(0, SymType::Int);
  for (const CompareCase& c : kCompare) {
    CAPTURE(c.i);
    CAPTURE(c.d);
    Bindings b{{c.i, c.d}};
    auto as_bool = [&](const SymExpr& e) { return std::get<2>(*e.eval(b)); };
    CHECK(as_bool(lt(x, f1)) == c.lt);
    CHECK(as_bool(eq(x, f1)) == c.eq);
    CHECK(as_bool(gt(x, f1)) == c.gt);
    CHECK(as_bool(ne(x, f1)) == !c.eq);
    CHECK(as_bool(le(x, f1)) == (c.lt || c.eq));
    CHECK(as_bool(ge(f1, x)) == (c.lt || c.eq));
    CHECK(as_bool(gt(f1, x)) == c.lt);
  }
}

TEST_CASE("symexpr: int() truncates toward zero (CPython table), float() and bool()") {
  for (const TruncCase& c : kTrunc) {
    CAPTURE(c.d);
    auto v = to_int(f0).eval({{c.d}});
    CHECK(v.has_value() == c.i.has_value());
    if (v && c.i) CHECK(std::get<0>(*v) == *c.i);
  }
  CHECK(to_int(F(-2.5)).as_int() == -2);
  CHECK(to_int(s0).same(s0));
  CHECK(to_int(B(true)).as_int() == 1);
  CHECK(to_float(I(3)).as_float() == 3.0);
  CHECK(to_float(s0).str() == "float(s0)");
  CHECK(to_float(f0).same(f0));
  CHECK(float_result_is(to_float(s2).eval({{0, 0, (int64_t{1} << 53) + 1}}),
                        9007199254740992.0));
  CHECK(to_bool(s2).str() == "s2 != 0");
  CHECK(to_bool(s0).as_bool() == true);  // s0 >= 2
  CHECK(to_bool(I(0)).as_bool() == false);
  CHECK(to_bool(F(NAN_)).as_bool() == true);
  CHECK(to_bool(F(-0.0)).as_bool() == false);
  CHECK(to_bool(b0).same(b0));
}

TEST_CASE("symexpr: float arithmetic keeps the tree and exact identities only") {
  CHECK(mul(f0, F(0.5)).str() == "f0*0.5");
  CHECK(mul(f0, F(1.0)).same(f0));
  CHECK(mul(F(1.0), f0).same(f0));
  CHECK(mul(s0, F(1.0)).str() == "float(s0)");
  CHECK(add(f0, F(0.0)).str() == "f0 + 0.0");      // -0.0 + 0.0 is 0.0
  CHECK(sub(f0, F(0.0)).same(f0));                  // exact, -0.0 included
  CHECK(mul(f0, F(0.0)).str() == "f0*0.0");        // inf*0.0 is nan
  CHECK(mul(f0, I(0)).str() == "f0*0");
  CHECK(sub(f0, f0).str() == "f0 - f0");            // nan/inf
  CHECK(add(add(f0, f1), f0).str() == "f0 + f1 + f0");
  CHECK(add(f0, add(f1, f0)).str() == "f0 + (f1 + f0)");
  CHECK(add(F(0.1), F(0.2)).as_float() == 0.1 + 0.2);
  CHECK(add(s0, F(0.5)).type() == SymType::Float);
  CHECK(add(s0, F(0.5)).str() == "s0 + 0.5");
  CHECK(truediv(s0, I(2)).str() == "s0/2");
  CHECK(truediv(s0, I(2)).type() == SymType::Float);
  CHECK(neg(neg(f0)).same(f0));
  CHECK(neg(f0).str() == "-f0");
  CHECK(floordiv(f0, I(2)).type() == SymType::Float);
  CHECK(add(B(true), F(0.5)).as_float() == 1.5);
  // Mixed int + float converts the int first, as Python does.
  SymExpr m = add(s2, F(0.5));
  CHECK(float_result_is(m.eval({{0, 0, (int64_t{1} << 53) + 1}}), 9007199254740992.0));
}

TEST_CASE("symexpr: exact division by positive factors") {
  CHECK(floordiv(mul(s0, s1), s1).same(s0));
  CHECK(floordiv(mul(s1, s0), s0).same(s1));
  CHECK(floordiv(mul(I(6), mul(s0, s1)), mul(I(3), s0)).str() == "2*s1");
  CHECK(floordiv(add(mul(I(2), s0), I(4)), I(2)).str() == "s0 + 2");
  CHECK(floordiv(add(mul(s0, s1), mul(I(3), s1)), s1).str() == "s0 + 3");
  CHECK(mod(mul(s0, s1), s1).as_int() == 0);
  CHECK(floordiv(s0, I(1)).same(s0));
  CHECK(mod(s0, I(1)).as_int() == 0);
  CHECK(floordiv(s0, I(2)).str() == "s0//2");
  CHECK(floordiv(add(s0, I(1)), I(2)).str() == "(s0 + 1)//2");
  // s2 may be 0 or negative: (s0*s2)//s2 is not simplified.
  CHECK(floordiv(mul(s0, s2), s2).str() == "s0*s2//s2");
  CHECK(floordiv(add(s0, I(1)), s0).str() == "(s0 + 1)//s0");
  // A negative constant divisor is exact too.
  CHECK(floordiv(mul(I(-4), s2), I(-2)).str() == "2*s2");
}

TEST_CASE("symexpr: comparisons, bounds and logic") {
  CHECK(lt(s0, mul(I(2), s1)).str() == "s0 < 2*s1");
  CHECK(eq(s0, I(3)).str() == "s0 == 3");
  CHECK(lt(I(2), I(3)).as_bool() == true);
  CHECK(ge(F(NAN_), F(NAN_)).as_bool() == false);
  CHECK(eq(s2, s2).as_bool() == true);
  CHECK(eq(f0, f0).str() == "f0 == f0");  // nan
  // Tensor sizes are >= 2.
  CHECK(gt(s0, I(1)).as_bool() == true);
  CHECK(ge(s0, I(2)).as_bool() == true);
  CHECK(eq(s0, I(1)).as_bool() == false);
  CHECK(lt(s0, I(2)).as_bool() == false);
  CHECK(lt(s0, I(3)).str() == "s0 < 3");
  CHECK(lt(s0, add(s0, s1)).as_bool() == true);
  CHECK(eq(s2, I(1)).str() == "s2 == 1");
  CHECK(lt(s0, add(s0, s2)).str() == "s0 < s0 + s2");
  CHECK(max(s0, I(1)).same(s0));
  CHECK(max(s0, I(4)).str() == "max(s0, 4)");
  CHECK(min(s0, add(s0, s1)).same(s0));
  CHECK(min(s0, mul(s0, s1)).str() == "min(s0, s0*s1)");  // s0*s1 - s0 needs an upper bound
  CHECK(abs(s0).same(s0));
  CHECK(abs(s2).str() == "abs(s2)");
  SymExpr g = logical_and(b0, eq(s0, I(3)));
  CHECK(g.str() == "b0 and s0 == 3");
  CHECK(logical_not(b0).str() == "not b0");
  CHECK(logical_not(logical_not(b0)).same(b0));
  CHECK(logical_not(lt(s0, s1)).str() == "s0 >= s1");
  CHECK(logical_not(lt(f0, f1)).str() == "not f0 < f1");  // nan
  CHECK(logical_and(B(true), b0).same(b0));
  CHECK(logical_and(b0, B(false)).as_bool() == false);
  CHECK(logical_or(b0, B(true)).as_bool() == true);
  CHECK(logical_or(logical_and(b0, b1), logical_not(b1)).str() == "b0 and b1 or not b1");
  CHECK(logical_and(logical_or(b0, b1), b1).str() == "(b0 or b1) and b1");
  // and/or short-circuit like Python: the right side is not evaluated.
  SymExpr risky = eq(floordiv(I(1), s2), I(0));
  CHECK(std::get<2>(*logical_and(b0, risky).eval({{false, int64_t{0}, int64_t{0}}})) == false);
  CHECK_FALSE(logical_and(b0, risky).eval({{true, int64_t{0}, int64_t{0}}}));
  CHECK(std::get<2>(*logical_or(b0, risky).eval({{true, int64_t{0}, int64_t{0}}})) == true);
  // True == 1 and 1 == 1.0, as in Python.
  CHECK(eq(B(true), I(1)).as_bool() == true);
  CHECK(eq(I(1), F(1.0)).as_bool() == true);
  CHECK(eq(b0, B(true)).same(b0));
  CHECK(ne(B(true), b0).str() == "not b0");
  CHECK(eq(b0, B(false)).str() == "not b0");
  CHECK(eq(b0, b1).str() == "b0 == b1");
  CHECK(lt(b0, b1).eval({{false, true}}) == std::optional<SymValue>(true));
}

TEST_CASE("symexpr: min and max return an operand, as Python does") {
  CHECK(max(I(2), F(1.0)).type() == SymType::Float);
  CHECK_FALSE(val(max(I(2), F(1.0))));  // Python gives the int 2: no Float value
  CHECK(max(I(1), F(2.0)).as_float() == 2.0);
  CHECK(std::isnan(*max(F(NAN_), F(1.0)).as_float()));  // 1.0 > nan is False
  CHECK(max(F(1.0), F(NAN_)).as_float() == 1.0);
  CHECK(min(F(0.0), F(-0.0)).as_float() == 0.0);
  CHECK_FALSE(std::signbit(*min(F(0.0), F(-0.0)).as_float()));
  CHECK(std::signbit(*min(F(-0.0), F(0.0)).as_float()));
  CHECK(min(s2, I(4)).str() == "min(s2, 4)");
  CHECK(std::get<0>(*min(s2, I(4)).eval({{0, 0, int64_t{-7}}})) == -7);
  CHECK(max(B(true), B(false)).as_bool() == true);
}

TEST_CASE("symexpr: copysign tells -0.0 from 0.0, as math.copysign does") {
  CHECK(copysign(F(1.0), F(-0.0)).as_float() == -1.0);
  CHECK(copysign(F(1.0), F(0.0)).as_float() == 1.0);
  CHECK(copysign(I(3), F(-2.5)).as_float() == -3.0);  // an int magnitude becomes a float
  CHECK(copysign(F(1.0), F(NAN_)).as_float() == 1.0);  // NAN_'s sign bit is clear
  const SymExpr sign = copysign(F(1.0), f0);
  CHECK(sign.str() == "copysign(1.0, f0)");
  CHECK(sign.type() == SymType::Float);
  CHECK(std::get<1>(*sign.eval({{-0.0}})) == -1.0);
  CHECK(std::get<1>(*sign.eval({{0.0}})) == 1.0);
  // the guard that pins a float zero's sign fails for the other zero
  const SymExpr guard = eq(sign, F(-1.0));
  CHECK(std::get<2>(*guard.eval({{-0.0}})));
  CHECK_FALSE(std::get<2>(*guard.eval({{0.0}})));
}

TEST_CASE("symexpr: printing follows Python precedence") {
  CHECK(mul(add(s0, I(1)), add(s1, I(2))).str() == "(s0 + 1)*(s1 + 2)");
  CHECK(mul(I(2), floordiv(s0, I(3))).str() == "2*(s0//3)");
  CHECK(neg(floordiv(s2, I(3))).str() == "-(s2//3)");
  CHECK(floordiv(neg(s2), I(3)).str() == "-s2//3");
  CHECK(sub(s1, floordiv(s0, I(2))).str() == "s1 - s0//2");
  CHECK(sub(I(0), floordiv(s0, I(2))).str() == "-(s0//2)");
  CHECK(pow(neg(s2), I(2)).str() == "(-s2)**2");
  CHECK(neg(pow(f0, F(2.0))).str() == "-f0**2.0");
  CHECK(pow(pow(f0, f1), f0).str() == "(f0**f1)**f0");
  CHECK(pow(f0, pow(f1, f0)).str() == "f0**f1**f0");
  CHECK(sub(f0, sub(f1, f0)).str() == "f0 - (f1 - f0)");
  CHECK(truediv(f0, mul(f1, f0)).str() == "f0/(f1*f0)");
  CHECK(lt(lt(s0, s1), b0).str() == "(s0 < s1) < b0");
  CHECK(mul(F(-1.5), f0).str() == "-1.5*f0");
  CHECK(pow(F(-2.0), f0).str() == "(-2.0)**f0");
  CHECK(mod(s2, I(-3)).str() == "s2%-3");
  CHECK(mod(add(s2, I(1)), I(4)).str() == "(s2 + 1)%4");
  for (const ReprCase& c : kRepr) {
    CAPTURE(c.repr);
    CHECK(float_repr(c.d) == c.repr);
  }
}

// ---- randomized: simplification never changes a value ----

namespace {

// An unsimplified expression tree evaluated directly with Python semantics,
// written independently of symexpr_eval.cpp (int128 arithmetic, plain formulas).
struct Ref {
  enum Kind { Leaf, Add, Sub, Mul, TrueDiv, FloorDiv, Mod, Pow, Neg, Abs, Min, Max, Lt, Le, Eq,
              Ne, And, Or, Not, ToFloat, ToInt, ToBool };
  Kind kind = Leaf;
  SymValue leaf{int64_t{0}};
  int sym = -1;  // a leaf symbol's id, or -1 for a constant
  std::vector<Ref> kids;
};

using OptV = std::optional<SymValue>;
using i128 = __int128;

bool isf(const SymValue& v) { return v.index() == 1; }
i128 ri(const SymValue& v) {
  return v.index() == 0 ? std::get<0>(v) : static_cast<i128>(std::get<2>(v));
}
double rd(const SymValue& v) {
  return v.index() == 1 ? std::get<1>(v) : static_cast<double>(static_cast<int64_t>(ri(v)));
}
OptV int_result(i128 v) {
  if (v > std::numeric_limits<int64_t>::max() || v < std::numeric_limits<int64_t>::min())
    return std::nullopt;
  return SymValue{static_cast<int64_t>(v)};
}
// -1, 0, 1, or 2 for unordered; exact for int/float via long double when the int
// has at most 64 bits (x86 long double has a 64-bit mantissa).
int rcmp(const SymValue& a, const SymValue& b) {
  if (!isf(a) && !isf(b)) return ri(a) < ri(b) ? -1 : ri(a) > ri(b);
  long double x = isf(a) ? std::get<1>(a) : static_cast<long double>(ri(a));
  long double y = isf(b) ? std::get<1>(b) : static_cast<long double>(ri(b));
  if (x < y) return -1;
  if (x > y) return 1;
  if (x == y) return 0;
  return 2;
}
OptV rfloat_divmod(double a, double b, bool want_div) {
  if (b == 0.0) return std::nullopt;
  double m = std::fmod(a, b);
  double d = (a - m) / b;
  if (m != 0.0) {
    if ((b < 0) != (m < 0)) {
      m += b;
      d -= 1.0;
    }
  } else {
    m = std::copysign(0.0, b);
  }
  if (!want_div) return SymValue{m};
  double f;
  if (d != 0.0) {
    f = std::floor(d);
    if (d - f > 0.5) f += 1.0;
  } else {
    f = std::copysign(0.0, a / b);
  }
  return SymValue{f};
}

OptV ref_truediv(const SymValue& x, const SymValue& y, bool fl) {
  if (rd(y) == 0.0) return std::nullopt;
  if (!fl && (std::abs(static_cast<double>(ri(x))) > 9007199254740992.0 ||
              std::abs(static_cast<double>(ri(y))) > 9007199254740992.0))
    return std::nullopt;  // outside what this reference rounds exactly: skip
  return SymValue{rd(x) / rd(y)};
}

OptV ref_divmod(const SymValue& x, const SymValue& y, bool fl, bool floordiv) {
  if (fl) return rfloat_divmod(rd(x), rd(y), floordiv);
  i128 p = ri(x), q = ri(y);
  if (q == 0) return std::nullopt;
  i128 d = p / q, m = p % q;
  if (m != 0 && ((m < 0) != (q < 0))) {
    d -= 1;
    m += q;
  }
  return int_result(floordiv ? d : m);
}

OptV ref_int_pow(i128 p, i128 q) {
  // int ** negative int is a float in Python, but an Int node with a symbolic
  // exponent has no value then (the tables test negative constant exponents).
  if (q < 0) return std::nullopt;
  if (q == 0) return SymValue{int64_t{1}};
  if (p == 0 || p == 1) return SymValue{static_cast<int64_t>(p)};
  if (p == -1) return SymValue{int64_t{q % 2 ? -1 : 1}};
  i128 acc = 1;
  for (i128 i = 0; i < q; ++i) {
    acc *= p;  // |p| >= 2: leaves int64 within 64 steps
    if (!int_result(acc)) return std::nullopt;
  }
  return int_result(acc);
}

OptV ref_pow(const SymValue& x, const SymValue& y, bool fl) {
  if (!fl) return ref_int_pow(ri(x), ri(y));
  double p = rd(x), q = rd(y);
  if (p == 0.0 && q < 0) return std::nullopt;
  if (p < 0 && q != std::floor(q) && std::isfinite(q)) return std::nullopt;
  double v = std::pow(p, q);
  if (std::isinf(v) && std::isfinite(p) && std::isfinite(q)) return std::nullopt;
  return SymValue{v};
}

// Python returns an operand; a static type holds it only when it is the wider
// one (symexpr.h), so a narrower winner is "no value" here as well.
OptV ref_min_max(const SymValue& x, const SymValue& y, bool is_min) {
  auto rank = [](const SymValue& v) { return v.index() == 2 ? 0 : v.index() == 0 ? 1 : 2; };
  bool pick_y = rcmp(y, x) == (is_min ? -1 : 1);
  const SymValue& w = pick_y ? y : x;
  if (rank(w) < std::max(rank(x), rank(y))) return std::nullopt;
  return w;
}

OptV ref_to_int(const SymValue& x) {
  if (!isf(x)) return int_result(ri(x));
  if (!std::isfinite(rd(x)) || std::fabs(rd(x)) >= 9.3e18) return std::nullopt;
  return int_result(static_cast<i128>(std::trunc(rd(x))));
}

OptV ref_eval(const Ref& r, const Bindings& b) {
  if (r.kind == Ref::Leaf) {
    if (r.sym < 0) return r.leaf;
    return b.values[static_cast<size_t>(r.sym)];
  }
  if (r.kind == Ref::And || r.kind == Ref::Or) {
    OptV x = ref_eval(r.kids[0], b);
    if (!x) return std::nullopt;
    bool bx = std::get<2>(*x);
    if (bx == (r.kind == Ref::Or)) return x;
    return ref_eval(r.kids[1], b);
  }
  OptV x = ref_eval(r.kids[0], b);
  if (!x) return std::nullopt;
  OptV y;
  if (r.kids.size() > 1) {
    y = ref_eval(r.kids[1], b);
    if (!y) return std::nullopt;
  }
  bool fl = isf(*x) || (y && isf(*y));
  switch (r.kind) {
    case Ref::Add: if (fl) return SymValue{rd(*x) + rd(*y)}; return int_result(ri(*x) + ri(*y));
    case Ref::Sub: if (fl) return SymValue{rd(*x) - rd(*y)}; return int_result(ri(*x) - ri(*y));
    case Ref::Mul: if (fl) return SymValue{rd(*x) * rd(*y)}; return int_result(ri(*x) * ri(*y));
    case Ref::TrueDiv: return ref_truediv(*x, *y, fl);
    case Ref::FloorDiv:
    case Ref::Mod: return ref_divmod(*x, *y, fl, r.kind == Ref::FloorDiv);
    case Ref::Pow: return ref_pow(*x, *y, fl);
    case Ref::Neg: if (isf(*x)) return SymValue{-rd(*x)}; return int_result(-ri(*x));
    case Ref::Abs:
      if (isf(*x)) return SymValue{std::fabs(rd(*x))};
      return int_result(ri(*x) < 0 ? -ri(*x) : ri(*x));
    case Ref::Min:
    case Ref::Max: return ref_min_max(*x, *y, r.kind == Ref::Min);
    case Ref::Lt: return SymValue{rcmp(*x, *y) == -1};
    case Ref::Le: return SymValue{rcmp(*x, *y) == -1 || rcmp(*x, *y) == 0};
    case Ref::Eq: return SymValue{rcmp(*x, *y) == 0};
    case Ref::Ne: return SymValue{rcmp(*x, *y) != 0};
    case Ref::Not: return SymValue{!std::get<2>(*x)};
    case Ref::ToFloat: return SymValue{rd(*x)};
    case Ref::ToInt: return ref_to_int(*x);
    case Ref::ToBool:
      if (isf(*x)) return SymValue{rd(*x) != 0.0};
      return SymValue{ri(*x) != 0};
    case Ref::Leaf:
    case Ref::And:
    case Ref::Or: break;
  }
  return std::nullopt;
}

struct Gen {
  std::mt19937_64 rng;
  explicit Gen(uint64_t seed) : rng(seed) {}
  int pick(int n) { return static_cast<int>(rng() % static_cast<uint64_t>(n)); }

  // Symbols: s0 (Int, >= 2), s1 (Int), f2 (Float).
  std::pair<SymExpr, Ref> leaf() {
    Ref r;
    switch (pick(9)) {
      case 0: case 1: r.sym = 0; return {SymExpr::symbol(0, SymType::Int, 2), r};
      case 2: case 3: r.sym = 1; return {SymExpr::symbol(1, SymType::Int), r};
      case 4: r.sym = 2; return {SymExpr::symbol(2, SymType::Float), r};
      case 5: {
        static const int64_t ks[] = {0, 1, 2, 3, -1, -2, 5, std::numeric_limits<int64_t>::max(),
                                     int64_t{1} << 62, std::numeric_limits<int64_t>::min()};
        r.leaf = ks[pick(10)];
        return {SymExpr::integer(std::get<0>(r.leaf)), r};
      }
      case 6: {
        static const double ds[] = {0.5, -0.0, 0.0, 2.0, 1.0, -3.25, 1e308, INF_, NAN_};
        r.leaf = ds[pick(9)];
        return {SymExpr::real(std::get<1>(r.leaf)), r};
      }
      case 7: r.leaf = bool(pick(2)); return {SymExpr::boolean(std::get<2>(r.leaf)), r};
      default: r.leaf = int64_t{pick(7) - 3}; return {SymExpr::integer(std::get<0>(r.leaf)), r};
    }
  }

  std::pair<SymExpr, Ref> expr(int depth) {
    if (depth == 0 || pick(4) == 0) return leaf();
    using K = Ref::Kind;
    static const K kinds[] = {K::Add, K::Add, K::Sub, K::Sub, K::Mul, K::Mul, K::TrueDiv,
                              K::FloorDiv, K::Mod, K::Pow, K::Neg, K::Abs, K::Min, K::Max,
                              K::Lt, K::Le, K::Eq, K::Ne, K::And, K::Or, K::Not, K::ToFloat,
                              K::ToInt, K::ToBool};
    K k = kinds[pick(static_cast<int>(std::size(kinds)))];
    Ref r;
    r.kind = k;
    auto [a, ra] = expr(depth - 1);
    r.kids.push_back(ra);
    bool unary = k == K::Neg || k == K::Abs || k == K::Not || k == K::ToFloat ||
                 k == K::ToInt || k == K::ToBool;
    if (unary) {
      if (k == K::Not) {  // Bool of Bools: convert first, as the builder does
        Ref rb;
        rb.kind = K::ToBool;
        rb.kids = {r.kids[0]};
        r.kids[0] = rb;
      }
      switch (k) {
        case K::Neg: return {neg(a), r};
        case K::Abs: return {abs(a), r};
        case K::Not: return {logical_not(a), r};
        case K::ToFloat: return {to_float(a), r};
        case K::ToInt: return {to_int(a), r};
        default: return {to_bool(a), r};
      }
    }
    std::pair<SymExpr, Ref> bb = expr(depth - 1);
    if (k == K::Pow && pick(2)) {  // mostly small constant exponents
      Ref e;
      e.leaf = int64_t{pick(5) - 1};
      bb = {SymExpr::integer(std::get<0>(e.leaf)), e};
    }
    SymExpr b = bb.first;
    r.kids.push_back(bb.second);
    if (k == K::And || k == K::Or) {
      for (Ref& kid : r.kids) {
        Ref rb;
        rb.kind = K::ToBool;
        rb.kids = {kid};
        kid = rb;
      }
    }
    switch (k) {
      case K::Add: return {add(a, b), r};
      case K::Sub: return {sub(a, b), r};
      case K::Mul: return {mul(a, b), r};
      case K::TrueDiv: return {truediv(a, b), r};
      case K::FloorDiv: return {floordiv(a, b), r};
      case K::Mod: return {mod(a, b), r};
      case K::Pow: return {pow(a, b), r};
      case K::Min: return {min(a, b), r};
      case K::Max: return {max(a, b), r};
      case K::Lt: return {lt(a, b), r};
      case K::Le: return {le(a, b), r};
      case K::Eq: return {eq(a, b), r};
      case K::Ne: return {ne(a, b), r};
      case K::And: return {logical_and(a, b), r};
      default: return {logical_or(a, b), r};
    }
  }
};

// Same type and value; floats bit-exact (NaN matches NaN).
bool same_value(const SymValue& got, const SymValue& want) {
  if (got.index() != want.index()) return false;
  if (got.index() == 1) return same_double(std::get<1>(got), std::get<1>(want));
  return got == want;
}

}  // namespace

TEST_CASE("symexpr: randomized, simplification never changes a value") {
  const int64_t s0s[] = {2, 3, 7, 100, int64_t{1} << 31, int64_t{1} << 62,
                         std::numeric_limits<int64_t>::max()};
  const int64_t s1s[] = {-5, -2, -1, 0, 1, 2, 3, 6, int64_t{1} << 33,
                         std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()};
  const double f2s[] = {0.5, -0.0, 0.0, 3.0, -2.5, 1e300, INF_, NAN_, 7.0};
  Gen gen(12345);
  int compared = 0, with_value = 0;
  for (int iter = 0; iter < 4000; ++iter) {
    auto [e, r] = gen.expr(5);
    REQUIRE_FALSE(e.is_null());
    std::string text = e.str();
    CAPTURE(text);
    for (int t = 0; t < 6; ++t) {
      Bindings b{{s0s[gen.pick(7)], s1s[gen.pick(11)], f2s[gen.pick(9)]}};
      OptV want = ref_eval(r, b);
      OptV got = e.eval(b);
      ++compared;
      if (!want) continue;  // the simplified form may have a value or not
      ++with_value;
      CAPTURE(std::get<0>(b.values[0]));
      CAPTURE(std::get<0>(b.values[1]));
      CAPTURE(std::get<1>(b.values[2]));
      REQUIRE(got.has_value());
      // Python types: the result type is static, so the value's type must match it
      // (a Bool leaf stays Bool; everything else as the reference says).
      CHECK(got->index() == static_cast<size_t>(e.type()));
      CHECK(same_value(*got, *want));
    }
  }
  CHECK(with_value > compared / 4);  // the test exercises values, not only failures
}

TEST_CASE("symexpr: same() and hash() agree on rebuilt random trees") {
  Gen g1(99), g2(99);
  for (int i = 0; i < 500; ++i) {
    SymExpr a = g1.expr(4).first;
    SymExpr b = g2.expr(4).first;
    REQUIRE(a.same(b));
    CHECK(a.hash() == b.hash());
    CHECK(a.str() == b.str());
    CHECK(compare(a, b) == 0);
  }
}

TEST_SUITE_END();
