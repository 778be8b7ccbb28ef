// gemm on OpenBLAS: each operand is passed as is, transposed, or (for other
// strides) copied into a contiguous scratch matrix.
#include "jit/cpu/blas.h"

#include <cblas.h>

#include <algorithm>
#include <cstring>
#include <vector>

namespace fj::jit {
namespace {

// How BLAS reads a matrix: row-major as is (NoTrans, ld = row stride), row-major
// transposed (Trans, ld = column stride), or not at all (copy).
struct Layout {
  bool ok;
  CBLAS_TRANSPOSE trans;
  int64_t ld;
};

Layout layout(const Matrix& m) {
  // Strides of size-1 dims are arbitrary: normalize them.
  const int64_t cs = m.cols == 1 ? 1 : m.col_stride;
  const int64_t rs = m.rows == 1 ? std::max<int64_t>(m.cols, 1) : m.row_stride;
  if (cs == 1 && rs >= std::max<int64_t>(m.cols, 1)) return {true, CblasNoTrans, rs};
  const int64_t cs2 = m.cols == 1 ? std::max<int64_t>(m.rows, 1) : m.col_stride;
  const int64_t rs2 = m.rows == 1 ? 1 : m.row_stride;
  if (rs2 == 1 && cs2 >= std::max<int64_t>(m.rows, 1)) return {true, CblasTrans, cs2};
  return {false, CblasNoTrans, 0};
}

template <class T>
T at(const Matrix& m, int64_t i, int64_t j) {
  return reinterpret_cast<const T*>(m.data)[i * m.row_stride + j * m.col_stride];
}

template <class T>
std::vector<T> contiguous_copy(const Matrix& m) {
  std::vector<T> out(static_cast<size_t>(m.rows * m.cols));
  const T* src = reinterpret_cast<const T*>(m.data);
  for (int64_t i = 0; i < m.rows; ++i) {
    for (int64_t j = 0; j < m.cols; ++j) out[static_cast<size_t>(i * m.cols + j)] = src[i * m.row_stride + j * m.col_stride];
  }
  return out;
}

template <class T>
void gemm_t(const Matrix& a, const Matrix& b, T* c, int64_t ldc, bool outer) {
  const int64_t m = a.rows, k = a.cols, n = b.cols;
  if (m == 0 || n == 0) return;
  if (k == 0) {
    for (int64_t i = 0; i < m; ++i) std::fill(c + i * ldc, c + i * ldc + n, T(0));
    return;
  }
  if (outer) {
    for (int64_t i = 0; i < m; ++i) {
      const T ai = at<T>(a, i, 0);
      for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = ai * at<T>(b, 0, j);
    }
    return;
  }
  Layout la = layout(a), lb = layout(b);
  std::vector<T> ca, cb;
  const T* pa = reinterpret_cast<const T*>(a.data);
  const T* pb = reinterpret_cast<const T*>(b.data);
  if (!la.ok) {
    ca = contiguous_copy<T>(a);
    pa = ca.data();
    la = {true, CblasNoTrans, k};
  }
  if (!lb.ok) {
    cb = contiguous_copy<T>(b);
    pb = cb.data();
    lb = {true, CblasNoTrans, n};
  }
  if constexpr (sizeof(T) == 4) {
    cblas_sgemm(CblasRowMajor, la.trans, lb.trans, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k),
                1.0f, pa, static_cast<int>(la.ld), pb, static_cast<int>(lb.ld), 0.0f, c, static_cast<int>(ldc));
  } else {
    cblas_dgemm(CblasRowMajor, la.trans, lb.trans, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k),
                1.0, pa, static_cast<int>(la.ld), pb, static_cast<int>(lb.ld), 0.0, c, static_cast<int>(ldc));
  }
}

}  // namespace

void blas_single_threaded() {
#ifdef OPENBLAS_VERSION
  openblas_set_num_threads(1);
#endif
}

void gemm(DType dtype, const Matrix& a, const Matrix& b, char* c, int64_t ldc, bool outer) {
  FJ_CHECK(a.cols == b.rows, "gemm: inner sizes differ");
  if (dtype == DType::Float32) {
    gemm_t<float>(a, b, reinterpret_cast<float*>(c), ldc, outer);
  } else {
    FJ_CHECK(dtype == DType::Float64, "gemm of a non-float dtype");
    gemm_t<double>(a, b, reinterpret_cast<double*>(c), ldc, outer);
  }
}

}  // namespace fj::jit
