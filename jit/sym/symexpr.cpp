// SymExpr nodes, the simplifying builders, canonical order and lower bounds.
#include "jit/sym/symexpr.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <functional>
#include <limits>

#include "jit/common.h"

namespace fj::jit {
namespace {

using i128 = __int128;

size_t mix(size_t h, size_t v) { return h ^ (v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2)); }

size_t value_hash(const SymValue& v) {
  switch (v.index()) {
    case 0: return std::hash<int64_t>{}(std::get<0>(v));
    case 1: return std::hash<uint64_t>{}(std::bit_cast<uint64_t>(std::get<1>(v)));
    default: return std::get<2>(v) ? 0x51u : 0x50u;
  }
}

SymExpr make(SymNode n) {
  size_t h = mix(static_cast<size_t>(n.op), static_cast<size_t>(n.type));
  if (n.op == SymOp::Const) h = mix(h, value_hash(n.value));
  if (n.op == SymOp::Symbol) {
    h = mix(h, static_cast<size_t>(n.id));
    h = mix(h, n.min_value ? static_cast<size_t>(*n.min_value) : 0x77u);
  }
  for (const SymTerm& t : n.terms) h = mix(mix(h, static_cast<size_t>(t.coeff)), t.mono.is_null() ? 1 : t.mono.hash());
  for (const SymExpr& a : n.args) h = mix(h, a.hash());
  n.hash = h;
  return SymExpr(std::make_shared<const SymNode>(std::move(n)));
}

SymExpr node(SymOp op, SymType type, std::vector<SymExpr> args) {
  SymNode n{op, type};
  n.args = std::move(args);
  return make(std::move(n));
}

bool any_null(std::initializer_list<const SymExpr*> es) {
  for (const SymExpr* e : es)
    if (e->is_null()) return true;
  return false;
}

// A node whose arguments are all constants becomes a constant, if its value exists.
SymExpr fold(SymExpr e) {
  for (const SymExpr& a : e.node()->args)
    if (!a.is_constant()) return e;
  if (auto v = e.eval(Bindings{})) return SymExpr::constant(*v);
  return e;
}

SymExpr build(SymOp op, SymType type, std::vector<SymExpr> args) {
  return fold(node(op, type, std::move(args)));
}

int type_rank(SymType t) {
  switch (t) {
    case SymType::Bool: return 0;
    case SymType::Int: return 1;
    case SymType::Float: return 2;
  }
  return 0;
}

// Bool in arithmetic acts as Int.
SymExpr as_number(const SymExpr& e) { return e.type() == SymType::Bool ? to_int(e) : e; }

bool is_float(const SymExpr& e) { return e.type() == SymType::Float; }

// The constant's numeric value as a double (Int or Float constants), for identities.
std::optional<double> numeric_constant(const SymExpr& e) {
  if (auto i = e.as_int()) return static_cast<double>(*i);
  return e.as_float();
}

// ---- Int polynomials: sums of coefficient * monomial ----

using Terms = std::vector<SymTerm>;

size_t degree(const SymExpr& mono) {
  return mono.op() == SymOp::Product ? mono.node()->args.size() : 1;
}

// Terms sorted by higher degree first, then canonical order; the constant last.
bool term_before(const SymTerm& a, const SymTerm& b) {
  if (a.mono.is_null() || b.mono.is_null()) return !a.mono.is_null() && b.mono.is_null();
  size_t da = degree(a.mono), db = degree(b.mono);
  if (da != db) return da > db;
  return compare(a.mono, b.mono) < 0;
}

bool same_mono(const SymExpr& a, const SymExpr& b) {
  if (a.is_null() || b.is_null()) return a.is_null() && b.is_null();
  return a.same(b);
}

Terms terms_of(const SymExpr& e) {
  if (auto k = e.as_int()) return *k == 0 ? Terms{} : Terms{{*k, SymExpr()}};
  if (e.op() == SymOp::Sum) return e.node()->terms;
  return Terms{{1, e}};
}

// Sort, combine like terms and drop zeros. A combination that would overflow
// int64 keeps both terms (the node is then less canonical, never wrong).
SymExpr from_terms(Terms terms) {
  std::stable_sort(terms.begin(), terms.end(), term_before);
  Terms out;
  for (SymTerm& t : terms) {
    int64_t merged;
    if (!out.empty() && same_mono(out.back().mono, t.mono) &&
        !__builtin_add_overflow(out.back().coeff, t.coeff, &merged)) {
      out.back().coeff = merged;
    } else {
      out.push_back(std::move(t));
    }
    if (out.back().coeff == 0) out.pop_back();
  }
  if (out.empty()) return SymExpr::integer(0);
  if (out.size() == 1) {
    if (out[0].mono.is_null()) return SymExpr::integer(out[0].coeff);
    if (out[0].coeff == 1) return out[0].mono;
  }
  SymNode n{SymOp::Sum, SymType::Int};
  n.terms = std::move(out);
  return make(std::move(n));
}

std::optional<Terms> scaled(Terms terms, int64_t c) {
  for (SymTerm& t : terms)
    if (__builtin_mul_overflow(t.coeff, c, &t.coeff)) return std::nullopt;
  return terms;
}

SymExpr int_add(const SymExpr& a, const SymExpr& b) {
  Terms t = terms_of(a);
  Terms tb = terms_of(b);
  t.insert(t.end(), tb.begin(), tb.end());
  return from_terms(std::move(t));
}

SymExpr int_scale(const SymExpr& a, int64_t c) {
  if (c == 0) return SymExpr::integer(0);
  if (c == 1) return a;
  if (auto t = scaled(terms_of(a), c)) return from_terms(std::move(*t));
  return from_terms({{c, a}});  // keep the sum whole rather than overflow a coefficient
}

// A single term c*m of a polynomial (c = 1, m = e when e is not a single term).
std::pair<int64_t, SymExpr> split_term(const SymExpr& e) {
  if (e.op() == SymOp::Sum && e.node()->terms.size() == 1 && !e.node()->terms[0].mono.is_null())
    return {e.node()->terms[0].coeff, e.node()->terms[0].mono};
  return {1, e};
}

std::vector<SymExpr> factors_of(const SymExpr& mono) {
  if (mono.op() == SymOp::Product) return mono.node()->args;
  return {mono};
}

SymExpr make_mono(std::vector<SymExpr> factors) {
  if (factors.size() == 1) return factors[0];
  std::stable_sort(factors.begin(), factors.end(),
                   [](const SymExpr& x, const SymExpr& y) { return compare(x, y) < 0; });
  return node(SymOp::Product, SymType::Int, std::move(factors));
}

SymExpr int_mul(const SymExpr& a, const SymExpr& b) {
  if (auto k = a.as_int()) return int_scale(b, *k);
  if (auto k = b.as_int()) return int_scale(a, *k);
  auto [ca, ma] = split_term(a);
  auto [cb, mb] = split_term(b);
  int64_t c;
  if (__builtin_mul_overflow(ca, cb, &c)) {
    c = 1;
    ma = a;
    mb = b;
  }
  std::vector<SymExpr> f = factors_of(ma);
  std::vector<SymExpr> fb = factors_of(mb);
  f.insert(f.end(), fb.begin(), fb.end());
  return from_terms({{c, make_mono(std::move(f))}});
}

// x / d as a polynomial when every term of x is a multiple of d and d is a
// nonzero constant or c * a monomial whose factors are all >= 1.
std::optional<SymExpr> exact_quotient(const SymExpr& x, const SymExpr& d) {
  auto [c, m] = split_term(d);
  std::vector<SymExpr> dfactors;
  if (auto k = d.as_int()) {
    c = *k;
    if (c == 0) return std::nullopt;
  } else {
    if (d.op() == SymOp::Sum && d.node()->terms.size() != 1) return std::nullopt;
    dfactors = factors_of(m);
    for (const SymExpr& f : dfactors) {
      auto lb = f.lower_bound();
      if (!lb || *lb < 1) return std::nullopt;
    }
  }
  Terms out;
  for (const SymTerm& t : terms_of(x)) {
    if (t.coeff % c != 0 || (t.coeff == std::numeric_limits<int64_t>::min() && c == -1))
      return std::nullopt;
    std::vector<SymExpr> rest;
    if (!t.mono.is_null()) rest = factors_of(t.mono);
    else if (!dfactors.empty()) return std::nullopt;
    for (const SymExpr& f : dfactors) {
      auto it = std::find_if(rest.begin(), rest.end(), [&](const SymExpr& r) { return r.same(f); });
      if (it == rest.end()) return std::nullopt;
      rest.erase(it);
    }
    out.push_back({t.coeff / c, rest.empty() ? SymExpr() : make_mono(std::move(rest))});
  }
  return from_terms(std::move(out));
}

// True when a <= b is proven for Int expressions (from bounds of b - a).
bool proven_le(const SymExpr& a, const SymExpr& b) {
  auto lb = sub(b, a).lower_bound();
  return lb && *lb >= 0;
}
bool proven_lt(const SymExpr& a, const SymExpr& b) {
  auto lb = sub(b, a).lower_bound();
  return lb && *lb > 0;
}

// What structure and bounds prove about two Int (or Bool) operands a and b.
struct ProvenOrder {
  bool le, ge, lt, gt;  // a <= b, a >= b, a < b, a > b
};

ProvenOrder proven_order(const SymExpr& a, const SymExpr& b, bool bools) {
  ProvenOrder o{a.same(b), a.same(b), false, false};
  if (!bools && !o.le) {
    o.lt = proven_lt(a, b);
    o.gt = proven_lt(b, a);
    o.le = o.lt || proven_le(a, b);
    o.ge = o.gt || proven_le(b, a);
  }
  return o;
}

// A comparison's value when the proven order decides it.
std::optional<bool> decided(SymOp op, const ProvenOrder& o) {
  switch (op) {
    case SymOp::Lt: if (o.lt) return true; if (o.ge) return false; break;
    case SymOp::Le: if (o.le) return true; if (o.gt) return false; break;
    case SymOp::Gt: if (o.gt) return true; if (o.le) return false; break;
    case SymOp::Ge: if (o.ge) return true; if (o.lt) return false; break;
    case SymOp::Eq: if (o.le && o.ge) return true; if (o.lt || o.gt) return false; break;
    case SymOp::Ne: if (o.le && o.ge) return false; if (o.lt || o.gt) return true; break;
    case SymOp::Const: case SymOp::Symbol: case SymOp::Sum: case SymOp::Product:
    case SymOp::Add: case SymOp::Sub: case SymOp::Mul: case SymOp::TrueDiv:
    case SymOp::FloorDiv: case SymOp::Mod: case SymOp::Pow: case SymOp::Neg:
    case SymOp::Abs: case SymOp::Min: case SymOp::Max: case SymOp::And: case SymOp::Or:
    case SymOp::Not: case SymOp::ToFloat: case SymOp::ToInt: case SymOp::CopySign:
      FJ_CHECK(false, "symexpr: not a comparison");
  }
  return std::nullopt;
}

SymExpr compare_op(SymOp op, const SymExpr& a0, const SymExpr& b0) {
  if (any_null({&a0, &b0})) return SymExpr();
  SymExpr a = a0, b = b0;
  bool bools = a.type() == SymType::Bool && b.type() == SymType::Bool;
  if (!bools) {
    a = as_number(a);
    b = as_number(b);
  }
  if (bools && (op == SymOp::Eq || op == SymOp::Ne)) {  // b == True is b, b != True is not b
    if (auto k = b.as_bool()) return *k == (op == SymOp::Eq) ? a : logical_not(a);
    if (auto k = a.as_bool()) return *k == (op == SymOp::Eq) ? b : logical_not(b);
  }
  SymExpr r = build(op, SymType::Bool, {a, b});
  if (r.is_constant() || is_float(a) || is_float(b)) return r;  // NaN: no x == x for Float
  // Ints and Bools: decide from structure and bounds where possible.
  if (std::optional<bool> known = decided(op, proven_order(a, b, bools))) return SymExpr::boolean(*known);
  return r;
}

SymExpr min_max(SymOp op, const SymExpr& a, const SymExpr& b) {
  if (any_null({&a, &b})) return SymExpr();
  SymType t = type_rank(a.type()) >= type_rank(b.type()) ? a.type() : b.type();
  if (a.type() == b.type() && !is_float(a)) {
    if (a.same(b)) return a;
    if (t == SymType::Int) {
      // min(a, b) is b only if b < a; with a <= b proven, min is a and max is b.
      if (proven_le(a, b)) return op == SymOp::Min ? a : b;
      if (proven_lt(b, a)) return op == SymOp::Min ? b : a;
    }
  }
  return build(op, t, {a, b});
}

SymExpr logic_op(SymOp op, const SymExpr& a0, const SymExpr& b0) {
  if (any_null({&a0, &b0})) return SymExpr();
  SymExpr a = to_bool(a0), b = to_bool(b0);
  bool absorbing = op == SymOp::Or;  // the value that decides: True for or, False for and
  if (auto k = a.as_bool()) return *k == absorbing ? a : b;
  if (auto k = b.as_bool()) return *k == absorbing ? b : a;  // `x and False` is False
  if (a.same(b)) return a;
  return node(op, SymType::Bool, {a, b});
}

int compare_values(const SymValue& a, const SymValue& b) {
  if (a.index() != b.index()) return a.index() < b.index() ? -1 : 1;
  switch (a.index()) {
    case 0: return std::get<0>(a) < std::get<0>(b) ? -1 : std::get<0>(a) > std::get<0>(b);
    case 1: {
      auto x = std::bit_cast<uint64_t>(std::get<1>(a)), y = std::bit_cast<uint64_t>(std::get<1>(b));
      return x < y ? -1 : x > y;
    }
    default: return static_cast<int>(std::get<2>(a)) - static_cast<int>(std::get<2>(b));
  }
}

void collect_symbols(const SymExpr& e, std::vector<int>& ids) {
  const SymNode& n = *e.node();
  if (n.op == SymOp::Symbol) ids.push_back(n.id);
  for (const SymTerm& t : n.terms)
    if (!t.mono.is_null()) collect_symbols(t.mono, ids);
  for (const SymExpr& a : n.args) collect_symbols(a, ids);
}

}  // namespace

// ---- SymExpr ----

SymExpr::SymExpr() = default;

SymExpr SymExpr::constant(const SymValue& v) {
  SymNode n{SymOp::Const, static_cast<SymType>(v.index())};
  n.value = v;
  return make(std::move(n));
}
SymExpr SymExpr::integer(int64_t v) { return constant(SymValue{v}); }
SymExpr SymExpr::real(double v) { return constant(SymValue{v}); }
SymExpr SymExpr::boolean(bool v) { return constant(SymValue{v}); }

SymExpr SymExpr::symbol(int id, SymType type, std::optional<int64_t> min_value) {
  FJ_CHECK(id >= 0, "symexpr: negative symbol id");
  SymNode n{SymOp::Symbol, type};
  n.id = id;
  if (type == SymType::Int) n.min_value = min_value;
  return make(std::move(n));
}

SymType SymExpr::type() const {
  FJ_CHECK(node_, "symexpr: type() of a null expression");
  return node_->type;
}
SymOp SymExpr::op() const {
  FJ_CHECK(node_, "symexpr: op() of a null expression");
  return node_->op;
}
bool SymExpr::is_constant() const { return node_ && node_->op == SymOp::Const; }
std::optional<int64_t> SymExpr::as_int() const {
  if (!is_constant() || node_->type != SymType::Int) return std::nullopt;
  return std::get<0>(node_->value);
}
std::optional<double> SymExpr::as_float() const {
  if (!is_constant() || node_->type != SymType::Float) return std::nullopt;
  return std::get<1>(node_->value);
}
std::optional<bool> SymExpr::as_bool() const {
  if (!is_constant() || node_->type != SymType::Bool) return std::nullopt;
  return std::get<2>(node_->value);
}
std::optional<SymValue> SymExpr::as_value() const {
  if (!is_constant()) return std::nullopt;
  return node_->value;
}
bool SymExpr::is_symbol() const { return node_ && node_->op == SymOp::Symbol; }
int SymExpr::symbol_id() const { return is_symbol() ? node_->id : -1; }
std::optional<int64_t> SymExpr::symbol_min() const {
  return is_symbol() ? node_->min_value : std::nullopt;
}

std::optional<int64_t> SymExpr::lower_bound() const {
  if (!node_ || node_->type == SymType::Float) return std::nullopt;
  const SymNode& n = *node_;
  const std::vector<SymExpr>& a = n.args;
  auto fits = [](i128 v) -> std::optional<int64_t> {
    if (v > std::numeric_limits<int64_t>::max() || v < std::numeric_limits<int64_t>::min())
      return std::nullopt;
    return static_cast<int64_t>(v);
  };
  if (n.type == SymType::Bool) return 0;
  switch (n.op) {
    case SymOp::Const: return std::get<0>(n.value);
    case SymOp::Symbol: return n.min_value;
    case SymOp::Sum: {
      i128 total = 0;
      for (const SymTerm& t : n.terms) {
        if (t.mono.is_null()) {
          total += t.coeff;
          continue;
        }
        if (t.coeff < 0) return std::nullopt;  // would need an upper bound
        auto lb = t.mono.lower_bound();
        if (!lb) return std::nullopt;
        total += static_cast<i128>(t.coeff) * *lb;
        if (!fits(total)) return std::nullopt;
      }
      return fits(total);
    }
    case SymOp::Product: {
      i128 p = 1;
      for (const SymExpr& f : a) {
        auto lb = f.lower_bound();
        if (!lb || *lb < 0) return std::nullopt;
        p *= *lb;
        if (!fits(p)) return std::nullopt;
      }
      return fits(p);
    }
    case SymOp::Abs: {
      auto lb = a[0].lower_bound();
      return lb && *lb > 0 ? *lb : 0;
    }
    case SymOp::Max: {
      auto x = a[0].lower_bound(), y = a[1].lower_bound();
      if (x && y) return std::max(*x, *y);
      return x ? x : y;
    }
    case SymOp::Min: {
      auto x = a[0].lower_bound(), y = a[1].lower_bound();
      if (x && y) return std::min(*x, *y);
      return std::nullopt;
    }
    case SymOp::ToInt: return a[0].type() == SymType::Bool ? std::optional<int64_t>(0) : std::nullopt;
    case SymOp::FloorDiv: {
      auto x = a[0].lower_bound();
      auto c = a[1].as_int();
      if (!x || !c || *c <= 0) return std::nullopt;
      int64_t q = *x / *c;
      if (*x % *c != 0 && *x < 0) q -= 1;
      return q;
    }
    case SymOp::Mod: {
      auto c = a[1].as_int();
      if (c && *c > 0) return 0;
      return std::nullopt;
    }
    case SymOp::Pow:
    case SymOp::Add:
    case SymOp::Sub:
    case SymOp::Mul:
    case SymOp::TrueDiv:
    case SymOp::Neg:
    case SymOp::Lt:
    case SymOp::Le:
    case SymOp::Gt:
    case SymOp::Ge:
    case SymOp::Eq:
    case SymOp::Ne:
    case SymOp::And:
    case SymOp::Or:
    case SymOp::Not:
    case SymOp::ToFloat:
    case SymOp::CopySign: return std::nullopt;
  }
  return std::nullopt;
}

bool SymExpr::same(const SymExpr& o) const {
  if (node_ == o.node_) return true;
  if (!node_ || !o.node_ || node_->hash != o.node_->hash) return false;
  return compare(*this, o) == 0;
}

size_t SymExpr::hash() const { return node_ ? node_->hash : 0; }

std::vector<int> SymExpr::symbols() const {
  std::vector<int> ids;
  if (node_) collect_symbols(*this, ids);
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

int compare(const SymExpr& a, const SymExpr& b) {
  if (a.node() == b.node()) return 0;
  if (a.is_null() || b.is_null()) return a.is_null() ? -1 : 1;
  const SymNode& x = *a.node();
  const SymNode& y = *b.node();
  if (x.op != y.op) return x.op < y.op ? -1 : 1;
  if (x.type != y.type) return x.type < y.type ? -1 : 1;
  if (x.op == SymOp::Const) return compare_values(x.value, y.value);
  if (x.op == SymOp::Symbol) {
    if (x.id != y.id) return x.id < y.id ? -1 : 1;
    if (x.min_value != y.min_value) return x.min_value < y.min_value ? -1 : 1;
    return 0;
  }
  for (size_t i = 0; i < std::min(x.terms.size(), y.terms.size()); ++i) {
    if (int c = compare(x.terms[i].mono, y.terms[i].mono)) return c;
    if (x.terms[i].coeff != y.terms[i].coeff) return x.terms[i].coeff < y.terms[i].coeff ? -1 : 1;
  }
  if (x.terms.size() != y.terms.size()) return x.terms.size() < y.terms.size() ? -1 : 1;
  for (size_t i = 0; i < std::min(x.args.size(), y.args.size()); ++i)
    if (int c = compare(x.args[i], y.args[i])) return c;
  if (x.args.size() != y.args.size()) return x.args.size() < y.args.size() ? -1 : 1;
  return 0;
}

// ---- builders ----

SymExpr add(const SymExpr& a0, const SymExpr& b0) {
  if (any_null({&a0, &b0})) return SymExpr();
  SymExpr a = as_number(a0), b = as_number(b0);
  if (!is_float(a) && !is_float(b)) return int_add(a, b);
  return build(SymOp::Add, SymType::Float, {a, b});  // x + 0.0 is not x for x = -0.0
}

SymExpr sub(const SymExpr& a0, const SymExpr& b0) {
  if (any_null({&a0, &b0})) return SymExpr();
  SymExpr a = as_number(a0), b = as_number(b0);
  if (!is_float(a) && !is_float(b)) return int_add(a, neg(b));
  // x - 0.0 is x exactly, -0.0 included.
  if (is_float(a) && b.is_constant() && numeric_constant(b) == 0.0 &&
      !std::signbit(*numeric_constant(b)))
    return a;
  return build(SymOp::Sub, SymType::Float, {a, b});
}

SymExpr mul(const SymExpr& a0, const SymExpr& b0) {
  if (any_null({&a0, &b0})) return SymExpr();
  SymExpr a = as_number(a0), b = as_number(b0);
  if (!is_float(a) && !is_float(b)) return int_mul(a, b);
  // x*1.0 is x exactly; x*0.0 is not 0.0 (inf, nan, negative x).
  if (numeric_constant(b) == 1.0) return to_float(a);
  if (numeric_constant(a) == 1.0) return to_float(b);
  return build(SymOp::Mul, SymType::Float, {a, b});
}

SymExpr truediv(const SymExpr& a0, const SymExpr& b0) {
  if (any_null({&a0, &b0})) return SymExpr();
  SymExpr a = as_number(a0), b = as_number(b0);
  if (numeric_constant(b) == 1.0 && (is_float(a) || is_float(b))) return to_float(a);
  return build(SymOp::TrueDiv, SymType::Float, {a, b});
}

SymExpr floordiv(const SymExpr& a0, const SymExpr& b0) {
  if (any_null({&a0, &b0})) return SymExpr();
  SymExpr a = as_number(a0), b = as_number(b0);
  if (is_float(a) || is_float(b)) return build(SymOp::FloorDiv, SymType::Float, {a, b});
  if (b.as_int() == 1) return a;
  if (!a.is_constant())
    if (auto q = exact_quotient(a, b)) return *q;
  return build(SymOp::FloorDiv, SymType::Int, {a, b});
}

SymExpr mod(const SymExpr& a0, const SymExpr& b0) {
  if (any_null({&a0, &b0})) return SymExpr();
  SymExpr a = as_number(a0), b = as_number(b0);
  if (is_float(a) || is_float(b)) return build(SymOp::Mod, SymType::Float, {a, b});
  if (b.as_int() == 1 || b.as_int() == -1) return SymExpr::integer(0);
  if (!a.is_constant() && exact_quotient(a, b)) return SymExpr::integer(0);
  return build(SymOp::Mod, SymType::Int, {a, b});
}

SymExpr pow(const SymExpr& a0, const SymExpr& b0) {
  if (any_null({&a0, &b0})) return SymExpr();
  SymExpr a = as_number(a0), b = as_number(b0);
  if (is_float(a) || is_float(b)) return build(SymOp::Pow, SymType::Float, {a, b});
  if (auto k = b.as_int()) {
    if (*k < 0) return build(SymOp::Pow, SymType::Float, {a, b});  // 2 ** -1 == 0.5
    if (*k == 0) return SymExpr::integer(1);                         // even 0 ** 0
    if (*k == 1) return a;
  }
  return build(SymOp::Pow, SymType::Int, {a, b});
}

SymExpr neg(const SymExpr& a0) {
  if (a0.is_null()) return SymExpr();
  SymExpr a = as_number(a0);
  if (!is_float(a)) return int_scale(a, -1);
  if (a.op() == SymOp::Neg) return a.node()->args[0];
  return build(SymOp::Neg, SymType::Float, {a});
}

SymExpr abs(const SymExpr& a0) {
  if (a0.is_null()) return SymExpr();
  SymExpr a = as_number(a0);
  if (a.op() == SymOp::Abs) return a;
  if (!is_float(a)) {
    auto lb = a.lower_bound();
    if (lb && *lb >= 0) return a;
  }
  return build(SymOp::Abs, a.type(), {a});
}

SymExpr min(const SymExpr& a, const SymExpr& b) { return min_max(SymOp::Min, a, b); }
SymExpr max(const SymExpr& a, const SymExpr& b) { return min_max(SymOp::Max, a, b); }

SymExpr copysign(const SymExpr& a, const SymExpr& b) {
  if (any_null({&a, &b})) return SymExpr();
  return build(SymOp::CopySign, SymType::Float, {to_float(a), to_float(b)});
}

SymExpr lt(const SymExpr& a, const SymExpr& b) { return compare_op(SymOp::Lt, a, b); }
SymExpr le(const SymExpr& a, const SymExpr& b) { return compare_op(SymOp::Le, a, b); }
SymExpr gt(const SymExpr& a, const SymExpr& b) { return compare_op(SymOp::Gt, a, b); }
SymExpr ge(const SymExpr& a, const SymExpr& b) { return compare_op(SymOp::Ge, a, b); }
SymExpr eq(const SymExpr& a, const SymExpr& b) { return compare_op(SymOp::Eq, a, b); }
SymExpr ne(const SymExpr& a, const SymExpr& b) { return compare_op(SymOp::Ne, a, b); }

SymExpr logical_and(const SymExpr& a, const SymExpr& b) { return logic_op(SymOp::And, a, b); }
SymExpr logical_or(const SymExpr& a, const SymExpr& b) { return logic_op(SymOp::Or, a, b); }

SymExpr logical_not(const SymExpr& a0) {
  if (a0.is_null()) return SymExpr();
  SymExpr a = to_bool(a0);
  if (auto k = a.as_bool()) return SymExpr::boolean(!*k);
  if (a.op() == SymOp::Not) return a.node()->args[0];
  // not (x < y) is x >= y, unless a float operand may be NaN.
  const std::vector<SymExpr>& args = a.node()->args;
  auto flipped = [&]() -> std::optional<SymOp> {
    switch (a.op()) {
      case SymOp::Lt: return SymOp::Ge;
      case SymOp::Le: return SymOp::Gt;
      case SymOp::Gt: return SymOp::Le;
      case SymOp::Ge: return SymOp::Lt;
      case SymOp::Eq: return SymOp::Ne;
      case SymOp::Ne: return SymOp::Eq;
      case SymOp::Const: case SymOp::Symbol: case SymOp::Sum: case SymOp::Product:
      case SymOp::Add: case SymOp::Sub: case SymOp::Mul: case SymOp::TrueDiv:
      case SymOp::FloorDiv: case SymOp::Mod: case SymOp::Pow: case SymOp::Neg:
      case SymOp::Abs: case SymOp::Min: case SymOp::Max: case SymOp::And: case SymOp::Or:
      case SymOp::Not: case SymOp::ToFloat: case SymOp::ToInt: case SymOp::CopySign: return std::nullopt;
    }
    return std::nullopt;
  }();
  if (flipped && !is_float(args[0]) && !is_float(args[1]))
    return node(*flipped, SymType::Bool, args);
  return node(SymOp::Not, SymType::Bool, {a});
}

SymExpr to_float(const SymExpr& a) {
  if (a.is_null()) return SymExpr();
  if (is_float(a)) return a;
  return build(SymOp::ToFloat, SymType::Float, {a});
}

SymExpr to_int(const SymExpr& a) {
  if (a.is_null()) return SymExpr();
  if (a.type() == SymType::Int) return a;
  return build(SymOp::ToInt, SymType::Int, {a});
}

SymExpr to_bool(const SymExpr& a) {
  if (a.is_null()) return SymExpr();
  if (a.type() == SymType::Bool) return a;
  return ne(a, SymExpr::integer(0));
}

}  // namespace fj::jit
