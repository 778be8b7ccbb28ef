// SymExpr evaluation with CPython's numeric semantics, and Python's float repr.
#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>
#include <vector>

#include "jit/common.h"
#include "jit/sym/symexpr.h"

namespace fj::jit {
namespace {

using Val = std::optional<SymValue>;
using i128 = __int128;
using u128 = unsigned __int128;

constexpr double kTwo63 = 9223372036854775808.0;

bool is_float(const SymValue& v) { return v.index() == 1; }
int64_t as_i(const SymValue& v) {
  return v.index() == 0 ? std::get<0>(v) : static_cast<int64_t>(std::get<2>(v));
}
// float(x) for an int is correctly rounded, as C++'s conversion (round to nearest even).
double as_d(const SymValue& v) {
  switch (v.index()) {
    case 0: return static_cast<double>(std::get<0>(v));
    case 1: return std::get<1>(v);
    default: return std::get<2>(v) ? 1.0 : 0.0;
  }
}

enum class Ord { Less, Equal, Greater, Unordered };

// An int against a double, exactly (CPython's float_richcompare).
Ord compare_int_double(int64_t i, double d) {
  if (std::isnan(d)) return Ord::Unordered;
  if (d >= kTwo63) return Ord::Less;
  if (d < -kTwo63) return Ord::Greater;
  double t = std::trunc(d);
  auto ti = static_cast<int64_t>(t);  // exact: t is an integer in [-2**63, 2**63)
  if (i < ti) return Ord::Less;
  if (i > ti) return Ord::Greater;
  double frac = d - t;
  if (frac > 0) return Ord::Less;
  if (frac < 0) return Ord::Greater;
  return Ord::Equal;
}

Ord flip(Ord o) {
  switch (o) {
    case Ord::Less: return Ord::Greater;
    case Ord::Greater: return Ord::Less;
    case Ord::Equal:
    case Ord::Unordered: return o;
  }
  return o;
}

Ord py_compare(const SymValue& a, const SymValue& b) {
  if (!is_float(a) && !is_float(b)) {
    int64_t x = as_i(a), y = as_i(b);
    return x < y ? Ord::Less : x > y ? Ord::Greater : Ord::Equal;
  }
  if (is_float(a) && is_float(b)) {
    double x = std::get<1>(a), y = std::get<1>(b);
    if (x < y) return Ord::Less;
    if (x > y) return Ord::Greater;
    if (x == y) return Ord::Equal;
    return Ord::Unordered;
  }
  if (is_float(b)) return compare_int_double(as_i(a), std::get<1>(b));
  return flip(compare_int_double(as_i(b), std::get<1>(a)));
}

Val int_floordiv(int64_t a, int64_t b) {
  if (b == 0) return std::nullopt;
  if (a == std::numeric_limits<int64_t>::min() && b == -1) return std::nullopt;
  int64_t q = a / b;
  if (a % b != 0 && ((a < 0) != (b < 0))) q -= 1;
  return SymValue{q};
}

Val int_mod(int64_t a, int64_t b) {
  if (b == 0) return std::nullopt;
  if (b == -1) return SymValue{int64_t{0}};  // a % -1 would trap for INT64_MIN
  int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return SymValue{r};
}

Val int_pow(int64_t base, int64_t exp) {
  if (exp < 0) return std::nullopt;  // Python gives a float; this node is Int
  int64_t result = 1;
  while (exp > 0) {
    if (exp & 1) {
      if (__builtin_mul_overflow(result, base, &result)) return std::nullopt;
    }
    exp >>= 1;
    // Square only while bits remain: then base**2 divides the result, so it fits.
    if (exp > 0 && __builtin_mul_overflow(base, base, &base)) return std::nullopt;
  }
  return SymValue{result};
}

int bit_length(u128 v) {
  int n = 0;
  while (v) {
    ++n;
    v >>= 1;
  }
  return n;
}

// int / int, correctly rounded like CPython's long_true_divide.
Val int_truediv(int64_t a, int64_t b) {
  if (b == 0) return std::nullopt;
  if (a == 0) return SymValue{(b < 0) ? -0.0 : 0.0};
  bool negative = (a < 0) != (b < 0);
  u128 x = a < 0 ? -static_cast<u128>(a) : static_cast<u128>(a);
  u128 y = b < 0 ? -static_cast<u128>(b) : static_cast<u128>(b);
  // Scale so that the quotient has 55 or 56 bits, then round to 53 by hand.
  int shift = 55 + bit_length(y) - bit_length(x);
  if (shift >= 0) x <<= shift;
  else y <<= -shift;
  u128 q = x / y;
  bool sticky = (x % y) != 0;
  int extra = bit_length(q) - 53;
  u128 low = q & ((u128{1} << extra) - 1);
  u128 half = u128{1} << (extra - 1);
  q >>= extra;
  if (low > half || (low == half && (sticky || (q & 1)))) q += 1;
  double r = std::ldexp(static_cast<double>(static_cast<uint64_t>(q)), extra - shift);
  return SymValue{negative ? -r : r};
}

// CPython's float_floor_div (via _float_div_mod).
Val float_floordiv(double vx, double wx) {
  if (wx == 0.0) return std::nullopt;
  double mod = std::fmod(vx, wx);
  double div = (vx - mod) / wx;
  if (mod != 0.0) {
    if ((wx < 0) != (mod < 0)) div -= 1.0;
  }
  double floordiv;
  if (div != 0.0) {
    floordiv = std::floor(div);
    if (div - floordiv > 0.5) floordiv += 1.0;
  } else {
    floordiv = std::copysign(0.0, vx / wx);
  }
  return SymValue{floordiv};
}

// CPython's float_rem.
Val float_mod(double vx, double wx) {
  if (wx == 0.0) return std::nullopt;
  double mod = std::fmod(vx, wx);
  if (mod != 0.0) {
    if ((wx < 0) != (mod < 0)) mod += wx;
  } else {
    mod = std::copysign(0.0, wx);
  }
  return SymValue{mod};
}

bool is_odd_integer(double x) { return std::fmod(std::fabs(x), 2.0) == 1.0; }

// CPython's float_pow: its special cases, then the platform pow; nullopt where
// CPython raises (0.0 ** negative, overflow) or returns a complex (negative ** fraction).
Val float_pow(double iv, double iw) {
  if (iw == 0.0) return SymValue{1.0};
  if (std::isnan(iv)) return SymValue{iv};
  if (std::isnan(iw)) return SymValue{iv == 1.0 ? 1.0 : iw};
  if (std::isinf(iw)) {
    iv = std::fabs(iv);
    if (iv == 1.0) return SymValue{1.0};
    if ((iw > 0.0) == (iv > 1.0)) return SymValue{std::fabs(iw)};
    return SymValue{0.0};
  }
  if (std::isinf(iv)) {
    bool odd = is_odd_integer(iw);
    if (iw > 0.0) return SymValue{odd ? iv : std::fabs(iv)};
    return SymValue{odd ? std::copysign(0.0, iv) : 0.0};
  }
  if (iv == 0.0) {
    if (iw < 0.0) return std::nullopt;  // ZeroDivisionError
    return SymValue{is_odd_integer(iw) ? iv : 0.0};
  }
  bool negate = false;
  if (iv < 0.0) {
    if (iw != std::floor(iw)) return std::nullopt;  // a complex result
    iv = -iv;
    negate = is_odd_integer(iw);
  }
  if (iv == 1.0) return SymValue{negate ? -1.0 : 1.0};
  double r = std::pow(iv, iw);
  if (std::isinf(r)) return std::nullopt;  // OverflowError (underflow to 0 is fine)
  return SymValue{negate ? -r : r};
}

Val float_to_int(double d) {
  if (!std::isfinite(d)) return std::nullopt;
  double t = std::trunc(d);
  if (t >= kTwo63 || t < -kTwo63) return std::nullopt;  // beyond int64
  return SymValue{static_cast<int64_t>(t)};
}

// Sum of int128 terms whose running total overflowed in order: add them so that
// the running total stays small (take a term of the sign opposite to the total).
std::optional<i128> careful_sum(std::vector<i128> terms) {
  i128 total = 0;
  std::vector<i128> pos, neg;
  for (i128 t : terms) (t >= 0 ? pos : neg).push_back(t);
  while (!pos.empty() || !neg.empty()) {
    std::vector<i128>& from = (total >= 0 && !neg.empty()) || pos.empty() ? neg : pos;
    if (__builtin_add_overflow(total, from.back(), &total)) return std::nullopt;
    from.pop_back();
  }
  return total;
}

Val eval_node(const SymNode& n, const Bindings& b);

Val eval_expr(const SymExpr& e, const Bindings& b) { return eval_node(*e.node(), b); }

Val eval_sum(const SymNode& n, const Bindings& b) {
  i128 total = 0;
  bool overflowed = false;
  for (const SymTerm& t : n.terms) {
    i128 v = t.coeff;
    if (!t.mono.is_null()) {
      Val m = eval_expr(t.mono, b);
      if (!m) return std::nullopt;
      v *= as_i(*m);  // |coeff|, |mono| < 2**63: fits
    }
    if (!overflowed && __builtin_add_overflow(total, v, &total)) overflowed = true;
  }
  if (overflowed) {
    std::vector<i128> values;
    for (const SymTerm& t : n.terms) {
      i128 v = t.coeff;
      if (!t.mono.is_null()) v *= as_i(*eval_expr(t.mono, b));
      values.push_back(v);
    }
    auto s = careful_sum(std::move(values));
    if (!s) return std::nullopt;
    total = *s;
  }
  if (total > std::numeric_limits<int64_t>::max() || total < std::numeric_limits<int64_t>::min())
    return std::nullopt;
  return SymValue{static_cast<int64_t>(total)};
}

Val eval_product(const SymNode& n, const Bindings& b) {
  // A zero factor makes the product 0 whatever the order of multiplication.
  int64_t acc = 1;
  bool zero = false, overflowed = false;
  for (const SymExpr& f : n.args) {
    Val v = eval_expr(f, b);
    if (!v) return std::nullopt;
    int64_t x = as_i(*v);
    if (x == 0) zero = true;
    else if (!overflowed && __builtin_mul_overflow(acc, x, &acc)) overflowed = true;
  }
  if (zero) return SymValue{int64_t{0}};
  if (overflowed) return std::nullopt;
  return SymValue{acc};
}

Val eval_symbol(const SymNode& n, const Bindings& b) {
  if (n.id < 0 || static_cast<size_t>(n.id) >= b.values.size()) return std::nullopt;
  const SymValue& v = b.values[static_cast<size_t>(n.id)];
  if (v.index() != static_cast<size_t>(n.type)) return std::nullopt;
  if (n.type == SymType::Int && n.min_value && std::get<0>(v) < *n.min_value) return std::nullopt;
  return v;
}

// And, Or: Python's short circuit.
Val eval_logic(const SymNode& n, const Bindings& b) {
  Val x = eval_expr(n.args[0], b);
  if (!x) return std::nullopt;
  bool bx = std::get<2>(*x);
  if (bx == (n.op == SymOp::Or)) return SymValue{bx};
  return eval_expr(n.args[1], b);
}

Val eval_unary(const SymNode& n, const Bindings& b) {
  Val x = eval_expr(n.args[0], b);
  if (!x) return std::nullopt;
  if (n.op == SymOp::Not) return SymValue{!std::get<2>(*x)};
  if (n.op == SymOp::Neg) return SymValue{-as_d(*x)};
  if (n.op == SymOp::ToFloat) return SymValue{as_d(*x)};
  if (n.op == SymOp::ToInt) {
    if (is_float(*x)) return float_to_int(std::get<1>(*x));
    return SymValue{as_i(*x)};
  }
  FJ_CHECK(n.op == SymOp::Abs, "symexpr: not a unary op");
  if (n.type == SymType::Float) return SymValue{std::fabs(as_d(*x))};
  if (as_i(*x) == std::numeric_limits<int64_t>::min()) return std::nullopt;
  return SymValue{static_cast<int64_t>(std::abs(as_i(*x)))};
}

// Both operands, evaluated in order; nullopt when either has no value.
std::optional<std::pair<SymValue, SymValue>> eval_operands(const SymNode& n, const Bindings& b) {
  Val x = eval_expr(n.args[0], b);
  if (!x) return std::nullopt;
  Val y = eval_expr(n.args[1], b);
  if (!y) return std::nullopt;
  return std::make_pair(*x, *y);
}

// Python: max(a, b) is b only if b > a; min(a, b) is b only if b < a.
Val eval_min_max(const SymNode& n, const SymValue& x, const SymValue& y) {
  Ord o = py_compare(y, x);
  bool pick_y = n.op == SymOp::Max ? o == Ord::Greater : o == Ord::Less;
  const SymValue& r = pick_y ? y : x;
  if (r.index() != static_cast<size_t>(n.type)) return std::nullopt;  // see symexpr.h
  return r;
}

// Add, Sub, Mul (Float), TrueDiv, FloorDiv, Mod, Pow, Min, Max.
Val eval_arith(const SymNode& n, const Bindings& b) {
  auto xy = eval_operands(n, b);
  if (!xy) return std::nullopt;
  const auto& [x, y] = *xy;
  const bool ints = !is_float(x) && !is_float(y);
  if (n.op == SymOp::Add) return SymValue{as_d(x) + as_d(y)};
  if (n.op == SymOp::Sub) return SymValue{as_d(x) - as_d(y)};
  if (n.op == SymOp::Mul) return SymValue{as_d(x) * as_d(y)};
  if (n.op == SymOp::TrueDiv) {
    if (ints) return int_truediv(as_i(x), as_i(y));
    if (as_d(y) == 0.0) return std::nullopt;
    return SymValue{as_d(x) / as_d(y)};
  }
  if (n.op == SymOp::FloorDiv) return ints ? int_floordiv(as_i(x), as_i(y)) : float_floordiv(as_d(x), as_d(y));
  if (n.op == SymOp::Mod) return ints ? int_mod(as_i(x), as_i(y)) : float_mod(as_d(x), as_d(y));
  if (n.op == SymOp::Pow) {
    if (n.type == SymType::Int) return int_pow(as_i(x), as_i(y));
    return float_pow(as_d(x), as_d(y));
  }
  if (n.op == SymOp::CopySign) return SymValue{std::copysign(as_d(x), as_d(y))};
  FJ_CHECK(n.op == SymOp::Min || n.op == SymOp::Max, "symexpr: not an arithmetic op");
  return eval_min_max(n, x, y);
}

// Lt, Le, Gt, Ge, Eq, Ne: as Python compares ints and floats (exactly).
Val eval_compare(const SymNode& n, const Bindings& b) {
  auto xy = eval_operands(n, b);
  if (!xy) return std::nullopt;
  const Ord o = py_compare(xy->first, xy->second);
  if (n.op == SymOp::Lt) return SymValue{o == Ord::Less};
  if (n.op == SymOp::Le) return SymValue{o == Ord::Less || o == Ord::Equal};
  if (n.op == SymOp::Gt) return SymValue{o == Ord::Greater};
  if (n.op == SymOp::Ge) return SymValue{o == Ord::Greater || o == Ord::Equal};
  if (n.op == SymOp::Eq) return SymValue{o == Ord::Equal};
  FJ_CHECK(n.op == SymOp::Ne, "symexpr: not a comparison");
  return SymValue{o != Ord::Equal};
}

Val eval_node(const SymNode& n, const Bindings& b) {
  switch (n.op) {
    case SymOp::Const: return n.value;
    case SymOp::Symbol: return eval_symbol(n, b);
    case SymOp::Sum: return eval_sum(n, b);
    case SymOp::Product: return eval_product(n, b);
    case SymOp::And:
    case SymOp::Or: return eval_logic(n, b);
    case SymOp::Not:
    case SymOp::Neg:
    case SymOp::ToFloat:
    case SymOp::ToInt:
    case SymOp::Abs: return eval_unary(n, b);
    case SymOp::Add:
    case SymOp::Sub:
    case SymOp::Mul:
    case SymOp::TrueDiv:
    case SymOp::FloorDiv:
    case SymOp::Mod:
    case SymOp::Pow:
    case SymOp::Min:
    case SymOp::Max:
    case SymOp::CopySign: return eval_arith(n, b);
    case SymOp::Lt:
    case SymOp::Le:
    case SymOp::Gt:
    case SymOp::Ge:
    case SymOp::Eq:
    case SymOp::Ne: return eval_compare(n, b);
  }
  FJ_CHECK(false, "symexpr: unknown op");
}

}  // namespace

std::optional<SymValue> SymExpr::eval(const Bindings& b) const {
  if (is_null()) return std::nullopt;
  return eval_node(*node_, b);
}

std::string float_repr(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  std::string s(buf, r.ptr);  // shortest round-trip: [-]d[.ddd]e[+-]XX
  std::string sign;
  if (s[0] == '-') {
    sign = "-";
    s.erase(0, 1);
  }
  size_t e = s.find('e');
  int exp = std::atoi(s.c_str() + e + 1);
  std::string digits;
  for (size_t i = 0; i < e; ++i)
    if (s[i] != '.') digits += s[i];
  // Python's repr: exponent form when the decimal point is far from the digits.
  int decpt = exp + 1;
  std::string out;
  if (decpt <= -4 || decpt > 16) {
    out = digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char eb[16];
    std::snprintf(eb, sizeof eb, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    out += eb;
  } else if (decpt <= 0) {
    out = "0." + std::string(static_cast<size_t>(-decpt), '0') + digits;
  } else if (static_cast<size_t>(decpt) >= digits.size()) {
    out = digits + std::string(static_cast<size_t>(decpt) - digits.size(), '0') + ".0";
  } else {
    out = digits.substr(0, static_cast<size_t>(decpt)) + "." +
          digits.substr(static_cast<size_t>(decpt));
  }
  return sign + out;
}

}  // namespace fj::jit
