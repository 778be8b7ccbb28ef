// Checked size arithmetic (size_check.h).
#include "jit/ir/size_check.h"

#include <algorithm>

namespace fj::jit {

bool sizes_fit(const int64_t* sizes, size_t rank, size_t itemsize) noexcept {
  int64_t span = static_cast<int64_t>(itemsize);
  for (size_t d = 0; d < rank; ++d) {
    if (sizes[d] < 0 || __builtin_mul_overflow(span, std::max<int64_t>(sizes[d], 1), &span)) return false;
  }
  return true;
}

bool sizes_fit(const SymShape& shape, size_t itemsize, const Bindings& b) {
  int64_t span = static_cast<int64_t>(itemsize);
  for (const SymExpr& e : shape) {
    const auto v = e.eval(b);
    if (!v || v->index() != 0) return false;
    const int64_t s = std::get<int64_t>(*v);
    if (s < 0 || __builtin_mul_overflow(span, std::max<int64_t>(s, 1), &span)) return false;
  }
  return true;
}

SizeChecks::SizeChecks(const Graph& g) {
  for (const Node& n : g.nodes()) {
    const size_t itemsize = dtype_size(n.dtype);
    if (const auto fixed = concrete(n.sym)) {
      static_fit_ = static_fit_ && sizes_fit(fixed->data(), fixed->size(), itemsize);
      continue;
    }
    auto same = std::find_if(shapes_.begin(), shapes_.end(), [&](const auto& s) { return same_shape(s.first, n.sym); });
    if (same == shapes_.end()) shapes_.emplace_back(n.sym, itemsize);
    else same->second = std::max(same->second, itemsize);
  }
}

bool SizeChecks::fit(const Bindings& b) const {
  if (!static_fit_) return false;
  for (const auto& [shape, itemsize] : shapes_) {
    if (!sizes_fit(shape, itemsize, b)) return false;
  }
  return true;
}

}  // namespace fj::jit
