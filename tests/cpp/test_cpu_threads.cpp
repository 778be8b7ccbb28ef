// Threads: the pool runs every task once, and large loops split into chunks give
// the same bits as one thread, on shapes that split unevenly, with broadcasting,
// strided inputs, bool outputs and scalar inputs.
#include <doctest.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "jit/cpu/cpu_backend.h"
#include "jit/cpu/thread_pool.h"

using namespace fj::jit;

namespace {

CpuBackend& threaded_backend(size_t threads) {
  static std::unique_ptr<CpuBackend> backends[8];
  REQUIRE(threads < 8);
  if (!backends[threads]) {
    auto created = CpuBackend::create(CpuOptions{true, threads});
    REQUIRE_MESSAGE(created, (created ? "" : created.error()));
    backends[threads] = std::move(*created);
  }
  return *backends[threads];
}

int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

std::vector<int64_t> contiguous(const Shape& s) {
  std::vector<int64_t> st(s.size());
  int64_t acc = 1;
  for (size_t d = s.size(); d-- > 0;) {
    st[d] = acc;
    acc *= s[d];
  }
  return st;
}

NodeId op(Graph& g, Op o, std::vector<NodeId> in) {
  auto id = g.pointwise(o, in);
  REQUIRE_MESSAGE(id, (id ? "" : id.error()));
  return *id;
}

// out = tanh(x * row + s) (float), cmp = x > col (bool), for x of `shape`, row the
// last dim (broadcast), col [.., 1] (broadcast in the last dim); x optionally read
// through a transposed layout. Returns the outputs' bytes after one run.
struct Case {
  Shape shape;
  bool transposed_x = false;
};

std::vector<std::vector<uint8_t>> run_case(const Case& c, size_t threads, double s) {
  const Shape& shape = c.shape;
  Graph g;
  NodeId x = g.placeholder(DType::Float32, shape);
  NodeId row = g.placeholder(DType::Float32, {shape.back()});
  Shape col_shape = shape;
  col_shape.back() = 1;
  NodeId col = g.placeholder(DType::Float32, col_shape);
  NodeId sv = g.scalar_input();
  NodeId t = op(g, Op::Tanh, {op(g, Op::Add, {op(g, Op::Mul, {x, row}), sv})});
  g.set_outputs({t, op(g, Op::Gt, {x, col})});
  auto compiled = threaded_backend(threads).compile(g);
  REQUIRE_MESSAGE(compiled, (compiled ? "" : compiled.error()));

  const int64_t n = numel(shape);
  std::vector<float> xs(static_cast<size_t>(n)), rows(static_cast<size_t>(shape.back())),
      cols(static_cast<size_t>(numel(col_shape)));
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = std::sin(static_cast<float>(i) * 0.001f) * 3.f;
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = 0.5f + static_cast<float>(i % 17) * 0.1f;
  for (size_t i = 0; i < cols.size(); ++i) cols[i] = static_cast<float>(i % 5) * 0.4f - 1.f;
  std::vector<int64_t> x_strides = contiguous(shape);
  if (c.transposed_x) {
    // The same logical values stored with the last two dims swapped in memory.
    REQUIRE(shape.size() >= 2);
    const size_t r = shape.size();
    Shape swapped = shape;
    std::swap(swapped[r - 1], swapped[r - 2]);
    std::vector<int64_t> st = contiguous(swapped);
    std::swap(st[r - 1], st[r - 2]);
    x_strides = st;
  }
  const std::vector<int64_t> row_strides{1}, col_strides = contiguous(col_shape),
                             out_strides = contiguous(shape);
  const Shape row_shape{shape.back()};
  std::vector<float> out(static_cast<size_t>(n), -12345.f);
  std::vector<uint8_t> cmp(static_cast<size_t>(n), 7);
  const double scalars[] = {s};
  (*compiled)->run(
      {TensorArg{xs.data(), shape.data(), x_strides.data(), static_cast<int>(shape.size())},
       TensorArg{rows.data(), row_shape.data(), row_strides.data(), 1},
       TensorArg{cols.data(), col_shape.data(), col_strides.data(),
                 static_cast<int>(col_shape.size())}},
      {TensorArg{out.data(), shape.data(), out_strides.data(), static_cast<int>(shape.size())},
       TensorArg{cmp.data(), shape.data(), out_strides.data(), static_cast<int>(shape.size())}},
      scalars);
  std::vector<uint8_t> out_bytes(out.size() * sizeof(float));
  std::memcpy(out_bytes.data(), out.data(), out_bytes.size());
  for (float v : out) REQUIRE(v != -12345.f);  // every element written
  for (uint8_t v : cmp) REQUIRE(v <= 1);
  return {out_bytes, cmp};
}

}  // namespace

TEST_CASE("thread pool: every task runs once, nested and concurrent calls too") {
  ThreadPool& pool = ThreadPool::instance();
  CHECK(pool.num_threads() >= 1);
  for (size_t n : {0, 1, 2, 5, 37, 1000}) {
    CAPTURE(n);
    std::vector<std::atomic<int>> hits(n);
    pool.parallel_for(n, [&](size_t i) { hits[i].fetch_add(1); });
    for (size_t i = 0; i < n; ++i) CHECK(hits[i].load() == 1);
  }
  // A task that calls parallel_for again (the pool is busy: runs serially).
  std::atomic<int> inner{0};
  pool.parallel_for(4, [&](size_t) { pool.parallel_for(3, [&](size_t) { inner.fetch_add(1); }); });
  CHECK(inner.load() == 12);
  // Two threads submitting at once.
  std::atomic<int> total{0};
  std::thread other([&] {
    for (int r = 0; r < 50; ++r) pool.parallel_for(9, [&](size_t) { total.fetch_add(1); });
  });
  for (int r = 0; r < 50; ++r) pool.parallel_for(7, [&](size_t) { total.fetch_add(1); });
  other.join();
  CHECK(total.load() == 50 * 9 + 50 * 7);
}

TEST_CASE("threads: large loops split unevenly give the bits of one thread") {
  const Case cases[] = {
      {{3, 40001}},          // 3 rows: one chunk per row
      {{1, 1, 100003}},      // only the innermost dim is > 1: split inside a row
      {{7, 1, 13, 1001}},    // 7 outer rows into 2..4 chunks
      {{257, 259}, true},    // a transposed (strided) input
      {{65536}},             // exactly the threshold
  };
  for (const Case& c : cases) {
    CAPTURE(c.shape.size());
    CAPTURE(c.shape.back());
    const auto serial = run_case(c, 1, 0.25);
    for (size_t threads : {2, 3, 4, 7}) {
      CAPTURE(threads);
      const size_t before = ThreadPool::instance().split_jobs();
      const auto parallel = run_case(c, threads, 0.25);
      CHECK(ThreadPool::instance().split_jobs() > before);  // the loop was split
      CHECK(parallel[0] == serial[0]);
      CHECK(parallel[1] == serial[1]);
    }
  }
}

TEST_CASE("threads: small loops stay on the calling thread") {
  const size_t before = ThreadPool::instance().split_jobs();
  const auto r = run_case(Case{{3, 1000}}, 4, -1.0);
  CHECK(ThreadPool::instance().split_jobs() == before);
  CHECK(r[0].size() == 3000 * sizeof(float));
}

TEST_CASE("threads: FRAMEJIT_NUM_THREADS sets the default") {
  const char* saved = std::getenv("FRAMEJIT_NUM_THREADS");
  const std::string keep = saved ? saved : "";
  setenv("FRAMEJIT_NUM_THREADS", "3", 1);
  CHECK(default_num_threads() == 3);
  for (const char* bad : {"zero", "-4", "0", "1e6", "1000000", "99999999999999999999", "3x", " "}) {
    setenv("FRAMEJIT_NUM_THREADS", bad, 1);
    CHECK(default_num_threads() == std::max(1u, std::thread::hardware_concurrency()));
  }
  if (saved) setenv("FRAMEJIT_NUM_THREADS", keep.c_str(), 1);
  else unsetenv("FRAMEJIT_NUM_THREADS");
}
