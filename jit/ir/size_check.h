// Checked size arithmetic: whether a shape's element count, contiguous strides and
// byte size fit in int64, before anything is allocated or looped over.
//
// Design: eager checks each tensor it creates (TensorImpl's numel, the contiguous
// strides of a new tensor, the storage's bytes) and raises; a graph's kernels would
// instead wrap around and compute a wrong value or loop for hours. One conservative
// rule covers all three checks: the product of max(size, 1) times the element size
// fits in int64 (every prefix product of the sizes, every contiguous stride and the
// byte count is at most that). A graph whose shapes fail it never runs: the caller
// runs the frame in CPython, where eager raises its own error (or, for the few
// shapes the rule rejects and eager accepts, computes the value itself).
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "jit/ir/graph.h"

namespace fj::jit {

// Sizes as above: none negative, and prod(max(size, 1)) * itemsize <= INT64_MAX.
bool sizes_fit(const int64_t* sizes, size_t rank, size_t itemsize) noexcept;
// The same for a symbolic shape under these bindings; false also when a size has no
// int value.
bool sizes_fit(const SymShape& shape, size_t itemsize, const Bindings& b);

// The shapes of a graph's nodes that must be checked at each run: the distinct
// symbolic ones (a constant shape is checked once, here).
class SizeChecks {
 public:
  SizeChecks() = default;
  explicit SizeChecks(const Graph& g);
  // Every node's shape fits for these bindings. Allocates nothing.
  bool fit(const Bindings& b) const;

 private:
  bool static_fit_ = true;
  std::vector<std::pair<SymShape, size_t>> shapes_;  // (shape, widest element size)
};

}  // namespace fj::jit
