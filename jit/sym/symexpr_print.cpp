// SymExpr's printer: readable Python with minimal parentheses ("s0*s1 + 2").
#include <cmath>
#include <string>

#include "jit/sym/symexpr.h"

namespace fj::jit {
namespace {

std::vector<SymExpr> factors_of(const SymExpr& mono) {
  if (mono.op() == SymOp::Product) return mono.node()->args;
  return {mono};
}

enum Prec : int { kOr = 1, kAnd = 2, kNot = 3, kCmp = 4, kAdd = 10, kMul = 11, kUnary = 12,
                  kPow = 13, kAtom = 14 };

int prec(const SymExpr& e) {
  const SymNode& n = *e.node();
  switch (n.op) {
    case SymOp::Const:
      if (auto i = e.as_int()) return *i < 0 ? kUnary : kAtom;
      if (auto d = e.as_float()) return std::signbit(*d) && !std::isnan(*d) ? kUnary : kAtom;
      return kAtom;
    case SymOp::Symbol: return kAtom;
    case SymOp::Sum:
      if (n.terms.size() > 1) return kAdd;
      if (n.terms[0].mono.is_null()) return n.terms[0].coeff < 0 ? kUnary : kAtom;
      return n.terms[0].coeff == -1 ? kUnary : kMul;
    case SymOp::Product: return kMul;
    case SymOp::Add:
    case SymOp::Sub: return kAdd;
    case SymOp::Mul:
    case SymOp::TrueDiv:
    case SymOp::FloorDiv:
    case SymOp::Mod: return kMul;
    case SymOp::Neg: return kUnary;
    case SymOp::Pow: return kPow;
    case SymOp::Abs:
    case SymOp::Min:
    case SymOp::Max:
    case SymOp::ToFloat:
    case SymOp::ToInt:
    case SymOp::CopySign: return kAtom;
    case SymOp::Lt:
    case SymOp::Le:
    case SymOp::Gt:
    case SymOp::Ge:
    case SymOp::Eq:
    case SymOp::Ne: return kCmp;
    case SymOp::And: return kAnd;
    case SymOp::Or: return kOr;
    case SymOp::Not: return kNot;
  }
  return kAtom;
}

const char* op_text(SymOp op) {
  switch (op) {
    case SymOp::Add: return " + ";
    case SymOp::Sub: return " - ";
    case SymOp::Mul: return "*";
    case SymOp::TrueDiv: return "/";
    case SymOp::FloorDiv: return "//";
    case SymOp::Mod: return "%";
    case SymOp::Pow: return "**";
    case SymOp::Lt: return " < ";
    case SymOp::Le: return " <= ";
    case SymOp::Gt: return " > ";
    case SymOp::Ge: return " >= ";
    case SymOp::Eq: return " == ";
    case SymOp::Ne: return " != ";
    case SymOp::And: return " and ";
    case SymOp::Or: return " or ";
    case SymOp::Abs: return "abs";
    case SymOp::Min: return "min";
    case SymOp::Max: return "max";
    case SymOp::ToFloat: return "float";
    case SymOp::ToInt: return "int";
    case SymOp::CopySign: return "copysign";
    case SymOp::Const:
    case SymOp::Symbol:
    case SymOp::Sum:
    case SymOp::Product:
    case SymOp::Neg:
    case SymOp::Not: return "";
  }
  return "";
}

std::string magnitude(int64_t c) {  // |c| without overflow for INT64_MIN
  uint64_t m = c < 0 ? 0 - static_cast<uint64_t>(c) : static_cast<uint64_t>(c);
  return std::to_string(m);
}

void print(const SymExpr& e, std::string& out);

void print_parens(const SymExpr& e, bool parens, std::string& out) {
  if (parens) out += '(';
  print(e, out);
  if (parens) out += ')';
}

// A monomial after a coefficient or a minus sign: every factor is a right operand of *.
void print_mono_after_op(const SymExpr& m, std::string& out) {
  std::vector<SymExpr> fs = factors_of(m);
  for (size_t i = 0; i < fs.size(); ++i) {
    if (i) out += '*';
    print_parens(fs[i], prec(fs[i]) <= kMul, out);
  }
}

void print_sum(const SymNode& n, std::string& out) {
  for (size_t i = 0; i < n.terms.size(); ++i) {
    const SymTerm& t = n.terms[i];
    if (i == 0) {
      if (t.mono.is_null()) {
        out += std::to_string(t.coeff);
      } else if (t.coeff == 1) {
        print_parens(t.mono, prec(t.mono) < kMul, out);
      } else if (t.coeff == -1) {
        out += '-';
        if (t.mono.op() == SymOp::Product) print_mono_after_op(t.mono, out);
        else print_parens(t.mono, prec(t.mono) < kUnary, out);
      } else {
        out += std::to_string(t.coeff) + "*";
        print_mono_after_op(t.mono, out);
      }
      continue;
    }
    out += t.coeff < 0 ? " - " : " + ";
    if (t.mono.is_null()) {
      out += magnitude(t.coeff);
    } else if (t.coeff == 1 || t.coeff == -1) {
      print_parens(t.mono, prec(t.mono) <= kAdd, out);
    } else {
      out += magnitude(t.coeff) + "*";
      print_mono_after_op(t.mono, out);
    }
  }
}

void print(const SymExpr& e, std::string& out) {
  const SymNode& n = *e.node();
  const std::vector<SymExpr>& a = n.args;
  int p = prec(e);
  switch (n.op) {
    case SymOp::Const:
      switch (n.value.index()) {
        case 0: out += std::to_string(std::get<0>(n.value)); break;
        case 1: out += float_repr(std::get<1>(n.value)); break;
        default: out += std::get<2>(n.value) ? "True" : "False"; break;
      }
      return;
    case SymOp::Symbol:
      out += n.type == SymType::Int ? 's' : n.type == SymType::Float ? 'f' : 'b';
      out += std::to_string(n.id);
      return;
    case SymOp::Sum: print_sum(n, out); return;
    case SymOp::Product:
      for (size_t i = 0; i < a.size(); ++i) {
        if (i) out += '*';
        print_parens(a[i], i ? prec(a[i]) <= kMul : prec(a[i]) < kMul, out);
      }
      return;
    case SymOp::Add:
    case SymOp::Sub:
    case SymOp::Mul:
    case SymOp::TrueDiv:
    case SymOp::FloorDiv:
    case SymOp::Mod:
    case SymOp::And:
    case SymOp::Or:  // left-associative
      print_parens(a[0], prec(a[0]) < p, out);
      out += op_text(n.op);
      print_parens(a[1], prec(a[1]) <= p, out);
      return;
    case SymOp::Pow:  // right-associative; the exponent may be a unary minus
      print_parens(a[0], prec(a[0]) <= kPow, out);
      out += "**";
      print_parens(a[1], prec(a[1]) < kUnary, out);
      return;
    case SymOp::Lt:
    case SymOp::Le:
    case SymOp::Gt:
    case SymOp::Ge:
    case SymOp::Eq:
    case SymOp::Ne:  // parenthesized operands: Python chains comparisons
      print_parens(a[0], prec(a[0]) <= kCmp, out);
      out += op_text(n.op);
      print_parens(a[1], prec(a[1]) <= kCmp, out);
      return;
    case SymOp::Neg:
      out += '-';
      print_parens(a[0], prec(a[0]) < kUnary, out);
      return;
    case SymOp::Not:
      out += "not ";
      print_parens(a[0], prec(a[0]) < kNot, out);
      return;
    case SymOp::Abs:
    case SymOp::Min:
    case SymOp::Max:
    case SymOp::ToFloat:
    case SymOp::ToInt:
    case SymOp::CopySign:
      out += op_text(n.op);
      out += '(';
      for (size_t i = 0; i < a.size(); ++i) {
        if (i) out += ", ";
        print(a[i], out);
      }
      out += ')';
      return;
  }
}

}  // namespace

std::string SymExpr::str() const {
  if (!node_) return "<null>";
  std::string out;
  print(*this, out);
  return out;
}

}  // namespace fj::jit
