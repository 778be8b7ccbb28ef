// The CUDA backend without a GPU: PTX for the graphs of tests/gpu/graphs.h (and
// every pointwise op and dtype) emitted for sm_80 and sm_90 and assembled by
// ptxas where it is installed; the libm-free float32 math measured on the host;
// the driver loader's error without a driver.
#include <doctest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>

#include "jit/cpu/cpu_backend.h"
#include "jit/cuda/cuda_driver.h"
#include "jit/cuda/nvptx_backend.h"
#include "tests/gpu/graphs.h"

using namespace fj::jit;
namespace fs = std::filesystem;

namespace {

// ptxas from PATH or /usr/local/cuda/bin; empty when there is none.
std::string ptxas() {
  static const std::string path = [] {
    if (std::system("command -v ptxas > /dev/null 2>&1") == 0) return std::string("ptxas");
    if (fs::exists("/usr/local/cuda/bin/ptxas")) return std::string("/usr/local/cuda/bin/ptxas");
    return std::string();
  }();
  return path;
}

// Assembles `ptx` for `arch`; returns "" on success, else ptxas's output.
std::string assemble(const std::string& ptx, const std::string& arch) {
  const fs::path dir = fs::temp_directory_path() / ("fj_nvptx_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path in = dir / "k.ptx", out = dir / "k.cubin", log = dir / "log.txt";
  std::ofstream(in) << ptx;
  const std::string cmd = ptxas() + " -arch=" + arch + " " + in.string() + " -o " + out.string() + " > " +
                          log.string() + " 2>&1";
  const int rc = std::system(cmd.c_str());
  std::ifstream l(log);
  std::string text((std::istreambuf_iterator<char>(l)), std::istreambuf_iterator<char>());
  fs::remove_all(dir);
  return rc == 0 ? std::string() : (text.empty() ? "ptxas failed" : text);
}

// PTX of g for both archs, assembled when ptxas exists.
void check_ptx(const Graph& g, const std::string& what) {
  for (const char* arch : {"sm_80", "sm_90"}) {
    CAPTURE(what);
    CAPTURE(arch);
    auto p = emit_ptx(g, NvptxOptions{arch});
    REQUIRE_MESSAGE(p, (p ? "" : p.error()));
    CHECK(p->ptx.find(std::string(".target ") + arch) != std::string::npos);
    CHECK(p->ptx.find(".extern") == std::string::npos);
    for (const PtxKernel& k : p->kernels) CHECK(p->ptx.find(".entry " + k.entry) != std::string::npos);
    if (!ptxas().empty()) {
      const std::string err = assemble(p->ptx, arch);
      CHECK_MESSAGE(err.empty(), err);
    }
  }
}

}  // namespace

TEST_CASE("nvptx: the test graphs compile to PTX that ptxas accepts (sm_80, sm_90)") {
  if (ptxas().empty()) MESSAGE("ptxas not found: PTX emitted but not assembled");
  for (const auto& c : fj::gpu_graphs::all_cases()) {
    SUBCASE(c.name.c_str()) { check_ptx(c.build(c.check_shape), c.name); }
  }
}

TEST_CASE("nvptx: entry ABI, no fma contraction, atomic status") {
  auto p = emit_ptx(fj::gpu_graphs::pointwise_chain({1000}));
  REQUIRE(p);
  REQUIRE(p->kernels.size() == 1);
  CHECK(p->ptx.find(".visible .entry fj_cuda_k0(") != std::string::npos);
  CHECK(p->ptx.find("fma.rn.f32") != std::string::npos);  // exp's own fma (sigmoid)
  CHECK(p->ptx.find("mul.rn.f32") != std::string::npos);  // x*1.5 stays a rounded mul
  Graph g;
  NodeId w = g.placeholder(DType::Float32, {10, 8});
  NodeId ids = g.placeholder(DType::Int64, {5});
  g.set_outputs({*g.index_select(w, 0, ids)});
  auto q = emit_ptx(g, NvptxOptions{"sm_80"});
  REQUIRE_MESSAGE(q, (q ? "" : q.error()));
  CHECK(q->ptx.find("atom.global.or.b64") != std::string::npos);  // out-of-range report
  if (!ptxas().empty()) CHECK(assemble(q->ptx, "sm_80").empty());
}

TEST_CASE("nvptx: every pointwise op and dtype compiles or says why not") {
  const DType dtypes[] = {DType::Float32, DType::Float64, DType::Int32, DType::Int64, DType::Bool, DType::UInt8};
  int compiled = 0, refused = 0;
  std::string all_ptx_80;
  for (int o = 0; o < static_cast<int>(Op::Matmul) + 1; ++o) {
    const Op op = static_cast<Op>(o);
    if (op_family(op) != Family::Pointwise) continue;
    for (DType dt : dtypes) {
      Graph g;
      NodeId x = g.placeholder(dt, {64});
      std::vector<NodeId> in{x};
      const std::string_view operands = op_operands(op);
      for (size_t k = 1; k < operands.size(); ++k) in.push_back(operands[k] == 's' ? g.scalar(2.0) : x);
      auto y = g.pointwise(op, in);
      if (!y) continue;  // not defined for this dtype
      g.set_outputs({*y});
      auto p = emit_ptx(g, NvptxOptions{"sm_80"});
      if (!p) {
        ++refused;
        CAPTURE(op_name(op));
        CAPTURE(p.error());
        CHECK(p.error().find("CUDA") != std::string::npos);
        continue;
      }
      ++compiled;
      CHECK(p->ptx.find(".extern") == std::string::npos);
    }
  }
  MESSAGE("pointwise op/dtype pairs: " << compiled << " compiled, " << refused << " refused");
  CHECK(compiled > 100);
}

TEST_CASE("nvptx: an unknown arch is an error") {
  auto p = emit_ptx(fj::gpu_graphs::pointwise_chain({16}), NvptxOptions{"sm_x"});
  REQUIRE_FALSE(p);
  CHECK(p.error().find("sm_x") != std::string::npos);
}

TEST_CASE("nvptx: launch configuration") {
  CHECK(launch_config(1 << 24, 1 << 24).block == 256);
  CHECK(launch_config(1 << 24, 1 << 24).grid == (1 << 24) / 256);
  CHECK(launch_config(1, 1).grid == 1);
  CHECK(launch_config(1, 1).block == 32);
  CHECK(launch_config(1 << 15, (int64_t{1} << 15) * 1024).block == 128);
  CHECK(launch_config(int64_t{1} << 40, int64_t{1} << 40).grid == (1u << 20));
}

TEST_CASE("cuda driver: a readable error without a driver") {
  auto d = cuda::driver();
  if (d) {
    MESSAGE("a CUDA driver is present: skipping the no-driver check");
    return;
  }
  CHECK(d.error().find("CUDA") != std::string::npos);
  auto dev = cuda::Device::open(0);
  REQUIRE_FALSE(dev);
  CHECK(dev.error() == d.error());
}

namespace {

// A one-op float32 graph on the host with the CUDA target's libm-free math.
struct GpuMathKernel {
  std::shared_ptr<CompiledGraph> compiled;
  explicit GpuMathKernel(Op op, bool binary = false) {
    static std::unique_ptr<CpuBackend> backend = [] {
      auto b = CpuBackend::create(CpuOptions{true, 1, /*gpu_math=*/true});
      REQUIRE_MESSAGE(b, (b ? "" : b.error()));
      return std::move(*b);
    }();
    Graph g;
    NodeId x = g.placeholder(DType::Float32, {16}, {SymExpr::symbol(0, SymType::Int, 2)});
    NodeId y = g.placeholder(DType::Float32, {16}, {SymExpr::symbol(0, SymType::Int, 2)});
    auto r = binary ? g.pointwise(op, {x, y}) : g.pointwise(op, {x});
    REQUIRE(r);
    g.set_outputs({*r});
    auto c = backend->compile(g);
    REQUIRE_MESSAGE(c, (c ? "" : c.error()));
    compiled = *c;
  }
  std::vector<float> operator()(std::vector<float> x, std::vector<float> y = {}) const {
    if (y.empty()) y = x;
    int64_t n = static_cast<int64_t>(x.size());
    const int64_t stride = 1;
    std::vector<float> out(x.size());
    compiled->run({TensorArg{x.data(), &n, &stride, 1}, TensorArg{y.data(), &n, &stride, 1}},
                  {TensorArg{out.data(), &n, &stride, 1}});
    return out;
  }
};

// Distance in float ulps (NaN == NaN; infinities must match exactly).
double ulps(float got, double want) {
  if (std::isnan(want)) return std::isnan(got) ? 0 : 1e9;
  const float w = static_cast<float>(want);
  if (std::isinf(w) || std::isinf(got)) return got == w ? 0 : 1e9;
  const double ulp = std::max(std::nextafter(std::fabs(w), INFINITY) - std::fabs(w), 1.4e-45f);
  return std::fabs(static_cast<double>(got) - want) / ulp;
}

std::vector<float> sweep(float lo, float hi, int n) {
  std::vector<float> v;
  for (int i = 0; i <= n; ++i) v.push_back(lo + (hi - lo) * static_cast<float>(i) / static_cast<float>(n));
  for (float s : {0.0f, -0.0f, 1e-30f, -1e-30f, 1e-7f, -1e-7f, 1e-45f, INFINITY, -INFINITY, NAN}) v.push_back(s);
  return v;
}

}  // namespace

TEST_CASE("nvptx math (on the host): erf, expm1, log1p, sin/cos of large arguments, pow") {
  struct Unary {
    Op op;
    double (*ref)(double);
    float lo, hi;
    double max_ulps;
  };
  const Unary cases[] = {
      {Op::Erf, [](double x) { return std::erf(x); }, -6, 6, 4},
      {Op::Expm1, [](double x) { return std::expm1(x); }, -20, 89, 4},
      {Op::Log1p, [](double x) { return std::log1p(x); }, -1, 1e6, 4},
      {Op::Sin, [](double x) { return std::sin(x); }, -3e38f, 3e38f, 2},
      {Op::Cos, [](double x) { return std::cos(x); }, -3e38f, 3e38f, 2},
      {Op::Sin, [](double x) { return std::sin(x); }, 1e6f, 4e6f, 2},
  };
  for (const Unary& c : cases) {
    CAPTURE(op_name(c.op));
    GpuMathKernel k(c.op);
    std::vector<float> x = sweep(c.lo, c.hi, 200000);
    for (float v : {0x1.fffffep127f, 0x1p21f, -0x1p21f, 12345678.f, 0x1.921fb6p+24f, 1e-4f, -0.5f, 0.999f})
      x.push_back(v);
    std::vector<float> got = k(x);
    double worst = 0;
    float at = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      const double u = ulps(got[i], c.ref(static_cast<double>(x[i])));
      if (u > worst) { worst = u; at = x[i]; }
    }
    CAPTURE(at);
    CHECK(worst <= c.max_ulps);
  }
  GpuMathKernel pow(Op::Pow, true);
  std::vector<float> xs, ys;
  const float specials[] = {0.0f, -0.0f, 1.0f, -1.0f, 2.0f, -2.0f, 0.5f, -0.5f, 3.0f, -3.0f, 1e-3f, 123.5f,
                            1e30f, -1e30f, INFINITY, -INFINITY, NAN, 0x1p24f, 0x1p24f + 2, 7.25f};
  for (float a : specials)
    for (float b : specials) { xs.push_back(a); ys.push_back(b); }
  for (int i = 0; i < 20000; ++i) {  // ordinary values: |x| in [1e-3, 1e3], y in [-12, 12]
    xs.push_back(std::ldexp(1.0f + static_cast<float>(i % 97) / 97.0f, i % 21 - 10));
    ys.push_back(static_cast<float>(i % 241) / 10.0f - 12.0f);
  }
  std::vector<float> got = pow(xs, ys);
  double worst = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const double want = std::pow(static_cast<double>(xs[i]), static_cast<double>(ys[i]));
    const double u = ulps(got[i], want);
    CAPTURE(xs[i]);
    CAPTURE(ys[i]);
    if (u > 1) CHECK(u <= 1);  // one rounding of a double-precision result
    worst = std::max(worst, u);
  }
  MESSAGE("pow worst ulps: " << worst);
}
