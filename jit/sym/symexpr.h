// Symbolic scalars: Python int, float and bool values kept as expressions.
//
// Design: a SymExpr is a cheap handle to an immutable, shared node (op, type,
// payload, arguments); no class per op. Builders simplify as they build, so an
// expression is always in canonical form and same() is structural equality:
//  - Int additions, subtractions, negations and multiplications are kept as a
//    sum of monomials (Sum of coefficient * Product of factors, plus a constant),
//    terms and factors sorted, like terms combined: s0*s1 + s1*s0 is 2*s0*s1.
//    Products of sums are not expanded: (s0 + 1)*s1 stays a product, because
//    expanding can overflow int64 where Python's own order of evaluation does not.
//  - Float expressions keep the tree as written (float arithmetic does not
//    reassociate); only exact identities and constant folding are applied.
//  - A constant is folded only when its value exists: 1//0 stays a node whose
//    eval() is nullopt.
// eval() follows CPython exactly (floor division and modulo signs, int/float
// comparisons, correctly rounded int/int true division, float pow's special
// cases) and returns nullopt wherever CPython raises or an int leaves int64; the
// caller then runs the frame in CPython, which raises its own error.
// Two things Python has that a static type cannot hold: min/max of operands of
// different types return one operand unchanged (max(2, 1.0) is the int 2); the
// node takes the wider type and eval() is nullopt when the narrower operand wins.
// An Int symbol may carry a lower bound (tensor sizes are >= 2); the simplifier
// relies on it, and eval() is nullopt for a binding below it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace fj::jit {

enum class SymType : uint8_t { Int, Float, Bool };
using SymValue = std::variant<int64_t, double, bool>;  // index order matters: Int, Float, Bool

// Values bound to symbols at one call, indexed by symbol id.
struct Bindings {
  std::vector<SymValue> values;
};

enum class SymOp : uint8_t {
  Const,
  Symbol,
  Sum,       // Int: sum of coefficient * monomial terms (a null monomial is the constant 1)
  Product,   // Int monomial: >= 2 factors, sorted; its coefficient lives in the Sum above it
  Add,       // Float only (binary, as written); Int arithmetic is Sum/Product
  Sub,
  Mul,
  TrueDiv,   // always Float
  FloorDiv,  // Int or Float
  Mod,
  Pow,
  Neg,       // Float only; Int negation is a Sum
  Abs,
  Min,
  Max,
  Lt,
  Le,
  Gt,
  Ge,
  Eq,
  Ne,
  And,
  Or,
  Not,
  ToFloat,
  ToInt,
  CopySign,  // Float: the magnitude of the first operand with the sign of the second
};

struct SymNode;

class SymExpr {
 public:
  SymExpr();  // null handle
  static SymExpr integer(int64_t v);
  static SymExpr real(double v);
  static SymExpr boolean(bool v);
  static SymExpr constant(const SymValue& v);
  // A symbol: printed s<id> for Int, f<id> for Float, b<id> for Bool. `min_value` is
  // a known lower bound for Int symbols (tensor sizes are symbols >= 2 since 0 and 1
  // are specialized); used by the simplifier (e.g. (a*b)//b == a when b >= 1).
  static SymExpr symbol(int id, SymType type, std::optional<int64_t> min_value = std::nullopt);

  bool is_null() const { return node_ == nullptr; }
  SymType type() const;
  SymOp op() const;
  bool is_constant() const;
  std::optional<int64_t> as_int() const;   // constant Int only
  std::optional<double> as_float() const;  // constant Float only
  std::optional<bool> as_bool() const;     // constant Bool only
  std::optional<SymValue> as_value() const;  // any constant
  bool is_symbol() const;
  int symbol_id() const;  // -1 if not a symbol
  std::optional<int64_t> symbol_min() const;  // a symbol's lower bound
  // A proven lower bound of an Int expression (from constants and symbols' bounds).
  std::optional<int64_t> lower_bound() const;

  // Python semantics, evaluated with these bindings: nullopt when the value does not
  // exist (division or modulo by zero, int64 overflow anywhere, negative int power,
  // an unbound symbol, a binding of the wrong type or below the symbol's bound).
  // Allocates nothing except in one rare case (a sum whose terms exceed 2**127).
  std::optional<SymValue> eval(const Bindings& b) const;

  std::string str() const;  // "s0*s1 + 2", "f0*0.5", "s0 < 2*s1"; "<null>" for null
  bool same(const SymExpr& o) const;  // structural equality of canonical forms
  size_t hash() const;
  std::vector<int> symbols() const;  // symbol ids used, ascending, no duplicates

  const SymNode* node() const { return node_.get(); }
  explicit SymExpr(std::shared_ptr<const SymNode> n) : node_(std::move(n)) {}

 private:
  std::shared_ptr<const SymNode> node_;
};

// One term of an Int Sum: coeff * mono, or the constant coeff when mono is null.
struct SymTerm {
  int64_t coeff;
  SymExpr mono;
};

struct SymNode {
  SymOp op;
  SymType type;
  SymValue value{int64_t{0}};            // Const
  int id = -1;                           // Symbol
  std::optional<int64_t> min_value;      // Symbol
  std::vector<SymTerm> terms;            // Sum
  std::vector<SymExpr> args;             // everything else
  size_t hash = 0;
};

// Total order on canonical forms (used to sort terms and factors); 0 iff same().
int compare(const SymExpr& a, const SymExpr& b);

// Builders (simplify as they build). Type rules are Python's: int op int -> Int
// (truediv -> Float), anything op Float -> Float, Bool in arithmetic acts as Int.
// A null operand gives a null result.
SymExpr add(const SymExpr& a, const SymExpr& b);
SymExpr sub(const SymExpr& a, const SymExpr& b);
SymExpr mul(const SymExpr& a, const SymExpr& b);
SymExpr truediv(const SymExpr& a, const SymExpr& b);   // always Float
SymExpr floordiv(const SymExpr& a, const SymExpr& b);  // floor (toward -inf); Float if either is
SymExpr mod(const SymExpr& a, const SymExpr& b);       // result has the divisor's sign
// Int ** Int -> Int unless the exponent is a negative constant (then Float, as
// Python); eval is nullopt when a non-constant exponent is negative at run time.
SymExpr pow(const SymExpr& a, const SymExpr& b);
SymExpr neg(const SymExpr& a);
SymExpr abs(const SymExpr& a);
SymExpr min(const SymExpr& a, const SymExpr& b);
SymExpr max(const SymExpr& a, const SymExpr& b);
SymExpr copysign(const SymExpr& a, const SymExpr& b);  // math.copysign: Float
SymExpr lt(const SymExpr& a, const SymExpr& b);  // Bool results
SymExpr le(const SymExpr& a, const SymExpr& b);
SymExpr gt(const SymExpr& a, const SymExpr& b);
SymExpr ge(const SymExpr& a, const SymExpr& b);
SymExpr eq(const SymExpr& a, const SymExpr& b);
SymExpr ne(const SymExpr& a, const SymExpr& b);
// Bool of Bools (other operands go through to_bool). Short-circuit like Python:
// `False and x` is False even where x has no value.
SymExpr logical_and(const SymExpr& a, const SymExpr& b);
SymExpr logical_or(const SymExpr& a, const SymExpr& b);
SymExpr logical_not(const SymExpr& a);
SymExpr to_float(const SymExpr& a);  // float(x)
SymExpr to_int(const SymExpr& a);    // int(x): truncation toward zero for Float
SymExpr to_bool(const SymExpr& a);   // bool(x): x != 0

// Python's repr of a float: the shortest string that round-trips ("0.1", "1e-05").
std::string float_repr(double v);

}  // namespace fj::jit
