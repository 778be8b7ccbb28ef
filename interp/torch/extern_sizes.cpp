// The sizes of an extern call's result as expressions of its operands' sizes, learned
// from runs on meta tensors (Tracer::extern_meta): a size equal to an operand's, one
// that follows an operand's size through a floor (a convolution's or a pooling's
// output side), or a constant; symbols whose effect cannot be told are fixed (guarded).
#include "interp/trace/tracer.h"

#include <algorithm>
#include <numeric>
#include <optional>

namespace fj::interp {
namespace {

using jit::SymExpr;

int64_t floor_div(int64_t n, int64_t d) {
  const int64_t q = n / d;
  return (n % d != 0 && (n < 0) != (d < 0)) ? q - 1 : q;
}

// out = (m * v + a) // b + c, with 0 <= a < b and m, b coprime.
struct FloorFit {
  int64_t m, a, b, c;
  int64_t at(int64_t v) const { return floor_div(m * v + a, b) + c; }
};

// Up to these: a stride of 8, an upsampling by 8. The samples cover a whole period.
constexpr int64_t kMaxDiv = 8, kMaxMul = 8;

// The first (smallest b, then m, then a) fit of y[i] = g(v0 + i), if any.
std::optional<FloorFit> fit_floor(int64_t v0, const std::vector<int64_t>& y) {
  for (int64_t b = 1; b <= kMaxDiv; ++b) {
    for (int64_t m = 1; m <= kMaxMul; ++m) {
      if (std::gcd(m, b) != 1) continue;
      for (int64_t a = 0; a < b; ++a) {
        FloorFit f{m, a, b, 0};
        f.c = y[0] - f.at(v0);
        bool fits = true;
        for (size_t i = 1; fits && i < y.size(); ++i) fits = f.at(v0 + static_cast<int64_t>(i)) == y[i];
        if (fits) return f;
      }
    }
  }
  return std::nullopt;
}

}  // namespace

// The result's sizes as expressions: each size equal to a symbolic size of an operand
// is taken as that size (the same dim of the first operand first), the others as
// constants. Then the symbols are checked in groups of equal value (sizes that an op
// needs equal, such as attention's sequence lengths, are separate symbols with one
// value): with the group's value changed, the meta run must give the sizes these
// expressions give, else the group is fixed to its value (guarded) and a call with
// other sizes traces again. A symbol of a group that passes is also changed alone:
// where the run then raises, eager raises too (and so does the extern call, which
// sends the frame to CPython); where its sizes differ, the symbol is fixed.
Status Tracer::extern_sizes(PyObject* fn, const ExternCallArgs& call, const ExternResult& r,
                            std::vector<jit::SymShape>* out) {
  auto value = [&](const SymExpr& e) -> std::optional<int64_t> {
    const auto v = e.eval(hints_);
    if (!v || v->index() != 0) return std::nullopt;
    return std::get<int64_t>(*v);
  };
  out->clear();
  const jit::SymShape& first = graph_.node(call.operands[0]).sym;
  for (const ExternResult::Tensor& t : r.tensors) {
    jit::SymShape& sym = out->emplace_back();
    for (size_t d = 0; d < t.sizes.size(); ++d) {
      const int64_t v = t.sizes[d];
      SymExpr e = SymExpr::integer(v);
      if (d < first.size() && !first[d].is_constant() && value(first[d]) == v) e = first[d];
      for (jit::NodeId n : call.operands) {
        for (const SymExpr& dim : graph_.node(n).sym) {
          if (e.is_constant() && !dim.is_constant() && value(dim) == v) e = dim;
        }
      }
      sym.push_back(std::move(e));
    }
  }
  std::vector<int> symbols;
  for (jit::NodeId n : call.operands) {
    for (const SymExpr& d : graph_.node(n).sym) {
      for (int s : d.symbols()) {
        if (hints_.values[static_cast<size_t>(s)].index() == 0 &&
            std::find(symbols.begin(), symbols.end(), s) == symbols.end()) {
          symbols.push_back(s);
        }
      }
    }
  }
  auto hint = [&](int s) { return std::get<int64_t>(hints_.values[static_cast<size_t>(s)]); };
  // Symbols of equal value (a batch of 8 and 8 channels): which one a result size
  // follows is learned by moving each of them alone.
  std::vector<std::vector<bool>> learned;
  for (const jit::SymShape& sh : *out) learned.emplace_back(sh.size(), false);
  extern_floor_sizes(fn, call, r, out, &learned);
  for (int s : symbols) {
    bool shared = false;
    for (int o : symbols) shared = shared || (o != s && hint(o) == hint(s));
    if (!shared) continue;
    jit::Bindings one = hints_;
    one.values[static_cast<size_t>(s)] = hint(s) + 1;
    ExternResult moved;
    if (extern_meta(fn, call, one, &moved).failed() || moved.tensors.size() != r.tensors.size()) continue;
    for (size_t k = 0; k < r.tensors.size(); ++k) {
      if (moved.tensors[k].sizes.size() != r.tensors[k].sizes.size()) continue;
      for (size_t d = 0; d < r.tensors[k].sizes.size(); ++d) {
        if (!learned[k][d] && r.tensors[k].sizes[d] == hint(s) && moved.tensors[k].sizes[d] == hint(s) + 1) {
          (*out)[k][d] = SymExpr::symbol(s, jit::SymType::Int, 2);
          learned[k][d] = true;
        }
      }
    }
  }
  std::vector<bool> done(symbols.size(), false);
  std::vector<int> fixed;
  for (size_t i = 0; i < symbols.size(); ++i) {
    if (done[i]) continue;
    std::vector<int> group;
    for (size_t j = i; j < symbols.size(); ++j) {
      if (!done[j] && hint(symbols[j]) == hint(symbols[i])) {
        group.push_back(symbols[j]);
        done[j] = true;
      }
    }
    jit::Bindings b = hints_;
    for (int s : group) b.values[static_cast<size_t>(s)] = hint(s) + 1;
    bool raised = false;
    if (!extern_sizes_follow(fn, call, *out, b, &raised)) {
      fixed.insert(fixed.end(), group.begin(), group.end());
      continue;
    }
    for (size_t k = 0; group.size() > 1 && k < group.size(); ++k) {
      jit::Bindings one = hints_;
      one.values[static_cast<size_t>(group[k])] = hint(group[k]) + 1;
      if (!extern_sizes_follow(fn, call, *out, one, &raised) && !raised) fixed.push_back(group[k]);
    }
  }
  for (int s : fixed) {
    int64_t v = 0;
    FJ_TRY(specialize(SymExpr::symbol(s, jit::SymType::Int, 2), "a size that an extern call's result depends on", &v));
  }
  return ok();
}

// Whether the meta run with the symbols bound as in `b` gives the sizes that `sym`
// takes under `b`; *raised: the meta run failed (eager would raise for such sizes).
bool Tracer::extern_sizes_follow(PyObject* fn, const ExternCallArgs& call, const std::vector<jit::SymShape>& sym,
                                 const jit::Bindings& b, bool* raised) {
  ExternResult moved;
  *raised = extern_meta(fn, call, b, &moved).failed();
  if (*raised || moved.tensors.size() != sym.size()) return false;
  for (size_t k = 0; k < sym.size(); ++k) {
    if (moved.tensors[k].sizes.size() != sym[k].size()) return false;
    for (size_t d = 0; d < sym[k].size(); ++d) {
      const auto want = sym[k][d].eval(b);
      if (!want || want->index() != 0 || std::get<int64_t>(*want) != moved.tensors[k].sizes[d]) return false;
    }
  }
  return true;
}

// Result sizes that follow an operand size: each symbolic operand size is moved alone
// (by 1, and further: a floor may hide a step of 1), and a result size that moves
// with one of them is fitted as (m * v + a) // b + c of it (a convolution's or a
// pooling's output side, an upsampling), then checked further away. Where it moves
// with several (a conv's output with the input side and the kernel side), the first
// that fits is taken: extern_sizes then fixes the others if they matter. A result
// size that moves with none is a constant, also where it happens to equal a size (a
// 4x4 feature map in a batch of 4), unless it equals a size whose move raised (tied
// to another: not told apart). Sizes found so are marked in `learned`.
void Tracer::extern_floor_sizes(PyObject* fn, const ExternCallArgs& call, const ExternResult& r,
                                std::vector<jit::SymShape>* out, std::vector<std::vector<bool>>* learned) {
  std::vector<std::vector<int64_t>> base;
  for (jit::NodeId n : call.operands) {
    std::vector<int64_t>& shape = base.emplace_back();
    for (const SymExpr& e : graph_.node(n).sym) {
      const auto v = e.eval(hints_);
      if (!v || v->index() != 0) return;
      shape.push_back(std::get<int64_t>(*v));
    }
  }
  using Sizes = std::vector<std::vector<int64_t>>;
  // The result's sizes with operand size (k, d) at value v; nullopt where the run raises.
  auto sizes_at = [&](size_t k, size_t d, int64_t v) -> std::optional<Sizes> {
    Sizes sizes = base;
    sizes[k][d] = v;
    ExternResult moved;
    if (extern_meta_sized(fn, call, sizes, &moved).failed() || moved.tensors.size() != r.tensors.size()) {
      return std::nullopt;
    }
    Sizes res;
    for (size_t t = 0; t < r.tensors.size(); ++t) {
      if (moved.tensors[t].sizes.size() != r.tensors[t].sizes.size()) return std::nullopt;
      res.push_back(moved.tensors[t].sizes);
    }
    return res;
  };
  constexpr int64_t kFar = 2 * kMaxDiv + 1;
  struct Mover {
    size_t k, d;
    Sizes next;                // the result's sizes with this size + 1
    std::optional<Sizes> far;  // with + kFar, run when first needed
    bool far_ran = false;
  };
  std::vector<Mover> movers;
  std::vector<int64_t> unknown;  // the values of operand sizes whose move raised
  for (size_t k = 0; k < base.size(); ++k) {
    const jit::SymShape& sym = graph_.node(call.operands[k]).sym;
    for (size_t d = 0; d < sym.size(); ++d) {
      if (sym[d].is_constant()) continue;
      auto next = sizes_at(k, d, base[k][d] + 1);
      if (next) movers.push_back({k, d, std::move(*next), std::nullopt});
      else unknown.push_back(base[k][d]);  // tied to another size (matmul's inner dims): not told apart here
    }
  }
  auto far = [&](Mover& m) -> const std::optional<Sizes>& {
    if (!m.far_ran) m.far = sizes_at(m.k, m.d, base[m.k][m.d] + kFar);
    m.far_ran = true;
    return m.far;
  };
  // Result size (t, rd) as a function of mover m's operand size, if it is one.
  auto fit = [&](Mover& m, size_t t, size_t rd) -> std::optional<SymExpr> {
    const int64_t v0 = base[m.k][m.d], y0 = r.tensors[t].sizes[rd];
    if (m.next[t][rd] < y0) return std::nullopt;  // shrinks as it grows (a kernel side)
    const std::optional<Sizes>& f_far = far(m);
    if (!f_far) return std::nullopt;
    const SymExpr& operand = graph_.node(call.operands[m.k]).sym[m.d];
    if (y0 == v0 && m.next[t][rd] == v0 + 1 && (*f_far)[t][rd] == v0 + kFar) return operand;  // checked with the rest
    std::vector<int64_t> y{y0, m.next[t][rd]};
    for (int64_t i = 2; i <= kMaxDiv; ++i) {
      auto s = sizes_at(m.k, m.d, v0 + i);
      if (!s) return std::nullopt;
      y.push_back((*s)[t][rd]);
    }
    const std::optional<FloorFit> f = fit_floor(v0, y);
    if (!f || f->at(v0 + kFar) != (*f_far)[t][rd]) return std::nullopt;
    const int64_t further = 2 * v0 + 7 * kMaxDiv + 3;
    auto s = sizes_at(m.k, m.d, further);
    if (s && (*s)[t][rd] != f->at(further)) return std::nullopt;  // (where the run does not raise)
    return jit::add(jit::floordiv(jit::add(jit::mul(operand, SymExpr::integer(f->m)), SymExpr::integer(f->a)),
                                  SymExpr::integer(f->b)),
                    SymExpr::integer(f->c));
  };
  for (size_t t = 0; t < r.tensors.size(); ++t) {
    for (size_t rd = 0; rd < r.tensors[t].sizes.size(); ++rd) {
      const int64_t y0 = r.tensors[t].sizes[rd];
      std::optional<SymExpr> found;
      // Those that move it by one step first; then those a floor may hide.
      for (Mover& m : movers) {
        if (!found && m.next[t][rd] != y0) found = fit(m, t, rd);
      }
      bool moved = found.has_value();
      for (Mover& m : movers) {
        if (found || m.next[t][rd] != y0) continue;
        const std::optional<Sizes>& f_far = far(m);
        if (!f_far) {
          moved = true;  // not known
          continue;
        }
        if ((*f_far)[t][rd] == y0) continue;
        moved = true;
        found = fit(m, t, rd);
      }
      for (const Mover& m : movers) moved = moved || m.next[t][rd] != y0;
      if (found) {
        (*out)[t][rd] = *found;
        (*learned)[t][rd] = true;
      } else if (!moved && std::find(unknown.begin(), unknown.end(), y0) == unknown.end()) {
        // Not an operand size that moved alone, nor one that could not: a constant (4
        // output channels in a batch of 4).
        (*out)[t][rd] = SymExpr::integer(y0);
        (*learned)[t][rd] = true;
      }
    }
  }
}

}  // namespace fj::interp
