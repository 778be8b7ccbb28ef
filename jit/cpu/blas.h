// Matrix products through OpenBLAS's cblas (the CPU extern kernel of Op::Matmul).
#pragma once

#include <cstdint>

#include "jit/ir/graph.h"

namespace fj::jit {

// A strided matrix: element (i, j) at data + (i * row_stride + j * col_stride) * elem.
struct Matrix {
  const char* data;
  int64_t rows, cols, row_stride, col_stride;
};

// C = A @ B for float32 or float64 (A: m x k, B: k x n), C row-major with leading
// dimension ldc. Operands whose strides BLAS cannot take are copied first. `outer`
// (k = 1 of a product that eager computes as one MKL gemm of at least 2 x 2): each
// element is its one product, as MKL writes it (OpenBLAS adds it to a zero, which
// turns a -0.0 product into 0.0, and a division by it flips an infinity's sign).
void gemm(DType dtype, const Matrix& a, const Matrix& b, char* c, int64_t ldc, bool outer = false);

// Makes OpenBLAS run each call on the calling thread: the CPU backend splits
// products into tasks on its own pool (jit/cpu/thread_pool.h), which shares PyTorch's
// threads, instead of waking a second set of spinning threads per call.
void blas_single_threaded();

}  // namespace fj::jit
