// CpuBackend: compiled graphs run on real buffers and match a plain C++ reference
// element by element (broadcasting, strides, rank 0, empty tensors, NaN, no fma).
#include <doctest.h>
#include <spdlog/sinks/ostream_sink.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <sstream>
#include <thread>

#include "jit/cpu/cpu_backend.h"
#include "jit/codegen/schedule.h"  // KernelStatus
#include "jit/log.h"

using namespace fj::jit;

namespace {

const float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();
// Tolerances against the reference (which uses glibc's float functions): one op of
// framejit's own math (tests/cpp/test_cpu_math.cpp), and chains where later ops
// (a subtraction that cancels, a division) magnify that difference.
constexpr int64_t kMathUlps = 2;
constexpr int64_t kChainUlps = 64;

// A host tensor: float or bool (uint8 0/1) storage with sizes and strides.
struct Host {
  DType dtype = DType::Float32;
  Shape sizes;
  std::vector<int64_t> strides;
  std::vector<float> f;
  std::vector<uint8_t> b;

  static std::vector<int64_t> contiguous(const Shape& s) {
    std::vector<int64_t> st(s.size());
    int64_t acc = 1;
    for (size_t d = s.size(); d-- > 0;) {
      st[d] = acc;
      acc *= s[d];
    }
    return st;
  }
  static int64_t numel(const Shape& s) {
    int64_t n = 1;
    for (int64_t d : s) n *= d;
    return n;
  }
  static Host floats(Shape s, std::vector<float> v) {
    Host h{DType::Float32, s, contiguous(s), std::move(v), {}};
    REQUIRE(static_cast<int64_t>(h.f.size()) == numel(s));
    return h;
  }
  static Host bools(Shape s, std::vector<uint8_t> v) {
    Host h{DType::Bool, s, contiguous(s), {}, std::move(v)};
    REQUIRE(static_cast<int64_t>(h.b.size()) == numel(s));
    return h;
  }
  // An output filled with a sentinel, so that unwritten elements show.
  static Host output(DType d, Shape s) {
    const auto n = static_cast<size_t>(numel(s));
    if (d == DType::Bool) return Host{d, s, contiguous(s), {}, std::vector<uint8_t>(n, 7)};
    return Host{d, s, contiguous(s), std::vector<float>(n, -12345.f), {}};
  }
  // Element at a multi-index (bool as 0/1).
  float at(const std::vector<int64_t>& idx) const {
    int64_t off = 0;
    for (size_t d = 0; d < idx.size(); ++d) off += idx[d] * strides[d];
    return dtype == DType::Bool ? b[static_cast<size_t>(off)] : f[static_cast<size_t>(off)];
  }
  TensorArg arg() {
    void* data = dtype == DType::Bool ? static_cast<void*>(b.data()) : f.data();
    return TensorArg{data, sizes.data(), strides.data(), static_cast<int>(sizes.size())};
  }
};

CpuBackend& backend() {
  static std::unique_ptr<CpuBackend> b = [] {
    auto created = CpuBackend::create();
    REQUIRE_MESSAGE(created, (created ? "" : created.error()));
    return std::move(*created);
  }();
  return *b;
}

std::shared_ptr<CompiledGraph> compile(const Graph& g) {
  auto c = backend().compile(g);
  REQUIRE_MESSAGE(c, (c ? "" : c.error()));
  return *c;
}

NodeId op(Graph& g, Op o, std::vector<NodeId> in) {
  auto id = g.pointwise(o, in);
  REQUIRE_MESSAGE(id, (id ? "" : id.error()));
  return *id;
}

// Reference semantics of one node in plain C++ (bools as 0/1 floats).
float ref_op(const Graph& g, const Node& n, const std::vector<float>& a,
             const std::vector<double>& scalars) {
  switch (n.op) {
    case Op::Placeholder: case Op::Scalar: case Op::ScalarInput: FAIL("not an op"); return 0;
    case Op::Add: return a[0] + a[1];
    case Op::Sub: return a[0] - a[1];
    case Op::Mul: return a[0] * a[1];
    case Op::Div: return a[0] / a[1];
    case Op::Neg: return -a[0];
    case Op::Abs: return std::fabs(a[0]);
    case Op::Exp: return std::exp(a[0]);
    case Op::Log: return std::log(a[0]);
    case Op::Sqrt: return std::sqrt(a[0]);
    case Op::Sin: return std::sin(a[0]);
    case Op::Cos: return std::cos(a[0]);
    case Op::Tanh: return std::tanh(a[0]);
    case Op::Sigmoid: return 1.0f / (1.0f + std::exp(-a[0]));
    case Op::Relu: return std::isnan(a[0]) ? a[0] : (a[0] <= 0 ? 0.0f : a[0]);
    case Op::Maximum:
      return std::isnan(a[0]) || std::isnan(a[1]) ? kNaN : std::max(a[0], a[1]);
    case Op::Minimum:
      return std::isnan(a[0]) || std::isnan(a[1]) ? kNaN : std::min(a[0], a[1]);
    case Op::Where: return a[0] != 0 ? a[1] : a[2];
    case Op::PowScalar: {
      // Eager's special cases, for a constant and a runtime exponent alike (eager
      // checks the Scalar at run time), else powf.
      const Node& exponent = g.node(n.inputs[1]);
      const float x = a[0];
      const double e = exponent.op == Op::ScalarInput ? scalars[static_cast<size_t>(exponent.index)] : exponent.scalar;
      if (e == 2) return x * x;
      if (e == 3) return x * x * x;
      if (e == 0.5) return std::sqrt(x);
      if (e == -1) return 1.0f / x;
      if (e == -2) return 1.0f / (x * x);
      if (e == -0.5) return 1.0f / std::sqrt(x);
      if (e == 1) return x;
      if (e == 0) return 1.0f;
      return std::pow(x, static_cast<float>(e));
    }
    case Op::Eq: return a[0] == a[1];
    case Op::Ne: return a[0] != a[1];
    case Op::Lt: return a[0] < a[1];
    case Op::Le: return a[0] <= a[1];
    case Op::Gt: return a[0] > a[1];
    case Op::Ge: return a[0] >= a[1];
    // float32-only reference: the other dtypes and ops are checked against eager
    // PyTorch end to end (tests/py/test_dtypes.py)
    default:
      FAIL("no float reference for " << op_name(n.op));
      return 0;
  }
  return 0;
}

// Evaluates output `out` of g at every element, with broadcasting of the inputs.
std::vector<float> ref_eval(const Graph& g, NodeId out, const std::vector<Host>& inputs,
                            const std::vector<double>& scalars = {}) {
  const Shape shape = *concrete(g.node(out).sym);
  std::vector<float> result;
  std::vector<int64_t> idx(shape.size(), 0);
  for (int64_t e = 0; e < Host::numel(shape); ++e) {
    int64_t rem = e;
    for (size_t d = shape.size(); d-- > 0;) {
      idx[d] = rem % shape[d];
      rem /= shape[d];
    }
    std::vector<float> v(g.size());
    for (size_t id = 0; id < g.size(); ++id) {
      const Node& n = g.nodes()[id];
      if (n.op == Op::Placeholder) {
        const Host& h = inputs[static_cast<size_t>(n.index)];
        std::vector<int64_t> in_idx(h.sizes.size());
        const size_t lead = shape.size() - h.sizes.size();
        for (size_t d = 0; d < in_idx.size(); ++d) {
          in_idx[d] = h.sizes[d] == 1 ? 0 : idx[d + lead];
        }
        v[id] = h.at(in_idx);
      } else if (n.op == Op::Scalar) {
        v[id] = static_cast<float>(n.scalar);
      } else if (n.op == Op::ScalarInput) {
        v[id] = static_cast<float>(scalars.at(static_cast<size_t>(n.index)));
      } else {
        std::vector<float> a;
        for (NodeId in : n.inputs) a.push_back(v[static_cast<size_t>(in)]);
        v[id] = ref_op(g, n, a, scalars);
      }
    }
    result.push_back(v[static_cast<size_t>(out)]);
  }
  return result;
}

// Distance in units in the last place; 0 for equal values and for two NaNs.
int64_t ulps(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b) ? 0 : INT64_MAX;
  auto key = [](float x) {
    int32_t i;
    std::memcpy(&i, &x, sizeof i);
    return i < 0 ? -static_cast<int64_t>(i & 0x7fffffff) : static_cast<int64_t>(i);
  };
  return std::llabs(key(a) - key(b));
}

// Runs `compiled` (of g) on `inputs` and the scalar inputs' values and checks every
// output against ref_eval. max_ulps: 0 means bit-exact (NaN matches NaN).
void check_run(const Graph& g, const CompiledGraph& compiled, std::vector<Host> inputs,
               const std::vector<double>& scalars = {}, int64_t max_ulps = 0) {
  REQUIRE(scalars.size() == g.num_scalar_inputs());
  std::vector<Host> outs;
  for (NodeId o : g.outputs()) outs.push_back(Host::output(g.node(o).dtype, *concrete(g.node(o).sym)));
  std::vector<TensorArg> in_args, out_args;
  for (Host& h : inputs) in_args.push_back(h.arg());
  for (Host& h : outs) out_args.push_back(h.arg());
  compiled.run(in_args, out_args, scalars.empty() ? nullptr : scalars.data());
  for (size_t k = 0; k < outs.size(); ++k) {
    const std::vector<float> want = ref_eval(g, g.outputs()[k], inputs, scalars);
    for (size_t e = 0; e < want.size(); ++e) {
      const float got = outs[k].dtype == DType::Bool ? outs[k].b[e] : outs[k].f[e];
      CAPTURE(k);
      CAPTURE(e);
      CAPTURE(got);
      CAPTURE(want[e]);
      CHECK(ulps(got, want[e]) <= max_ulps);
    }
  }
}

// Compiles g and checks one run (see check_run).
std::shared_ptr<CompiledGraph> check_graph(const Graph& g, std::vector<Host> inputs,
                                           int64_t max_ulps = 0,
                                           const std::vector<double>& scalars = {}) {
  auto compiled = compile(g);
  check_run(g, *compiled, std::move(inputs), scalars, max_ulps);
  return compiled;
}

// 37 values (an odd count, so vector loops need a remainder) with the specials.
std::vector<float> sample(float scale, float shift) {
  std::vector<float> v;
  for (int i = 0; i < 32; ++i) v.push_back((static_cast<float>(i) - 15.5f) * scale + shift);
  for (float s : {kNaN, kInf, -kInf, -0.0f, 0.0f}) v.push_back(s);
  return v;
}

}  // namespace

TEST_CASE("cpu backend: every unary op matches C++") {
  const Op ops[] = {Op::Neg, Op::Abs, Op::Exp, Op::Log, Op::Sqrt, Op::Sin,
                    Op::Cos, Op::Tanh, Op::Sigmoid, Op::Relu};
  for (Op o : ops) {
    CAPTURE(op_name(o));
    Graph g;
    NodeId x = g.placeholder(DType::Float32, {37});
    g.set_outputs({op(g, o, {x})});
    // framejit's own exp/log/sin/cos/tanh/sigmoid are within 2 ulp of glibc's.
    auto c = check_graph(g, {Host::floats({37}, sample(0.41f, 0.2f))}, kMathUlps);
    CHECK(c->num_kernels() == 1);
  }
}

TEST_CASE("cpu backend: every binary op and comparison matches C++") {
  const Op ops[] = {Op::Add, Op::Sub, Op::Mul, Op::Div, Op::Maximum, Op::Minimum,
                    Op::Eq, Op::Ne, Op::Lt, Op::Le, Op::Gt, Op::Ge};
  std::vector<float> a = sample(0.5f, 0.0f), b = sample(-0.25f, 0.5f);
  a[3] = b[3] = 1.0f;  // some equal pairs for Eq/Le/Ge
  a[4] = b[4] = -2.0f;
  for (Op o : ops) {
    CAPTURE(op_name(o));
    Graph g;
    NodeId x = g.placeholder(DType::Float32, {37});
    NodeId y = g.placeholder(DType::Float32, {37});
    NodeId r = op(g, o, {x, y});
    g.set_outputs({r});
    check_graph(g, {Host::floats({37}, a), Host::floats({37}, b)});
  }
}

TEST_CASE("cpu backend: comparisons store bool 0/1, Ne is true on NaN") {
  Graph g;
  NodeId x = g.placeholder(DType::Float32, {4});
  NodeId y = g.placeholder(DType::Float32, {4});
  g.set_outputs({op(g, Op::Ne, {x, y}), op(g, Op::Eq, {x, y}), op(g, Op::Lt, {x, y})});
  auto c = compile(g);
  Host hx = Host::floats({4}, {1, kNaN, 2, 3}), hy = Host::floats({4}, {1, kNaN, 5, 0});
  Host ne = Host::output(DType::Bool, {4}), eq = Host::output(DType::Bool, {4}),
       lt = Host::output(DType::Bool, {4});
  c->run({hx.arg(), hy.arg()}, {ne.arg(), eq.arg(), lt.arg()});
  CHECK(ne.b == std::vector<uint8_t>{0, 1, 1, 1});
  CHECK(eq.b == std::vector<uint8_t>{1, 0, 0, 0});
  CHECK(lt.b == std::vector<uint8_t>{0, 0, 1, 0});
  CHECK(c->num_kernels() == 1);
}

TEST_CASE("cpu backend: pow with a scalar exponent, special cases and powf") {
  for (double e : {2.0, 3.0, 0.5, -1.0, -2.0, -0.5, 1.0, 0.0, 1.7, -3.25}) {
    CAPTURE(e);
    Graph g;
    NodeId x = g.placeholder(DType::Float32, {37});
    g.set_outputs({op(g, Op::PowScalar, {x, g.scalar(e)})});
    check_graph(g, {Host::floats({37}, sample(0.3f, 0.1f))});
  }
  // The special cases are the formulas, not powf: 3 -> x*x*x (two roundings).
  Graph g;
  NodeId x = g.placeholder(DType::Float32, {1});
  g.set_outputs({op(g, Op::PowScalar, {x, g.scalar(3.0)})});
  auto c = compile(g);
  Host hx = Host::floats({1}, {1.1f}), out = Host::output(DType::Float32, {1});
  c->run({hx.arg()}, {out.arg()});
  CHECK(out.f[0] == 1.1f * 1.1f * 1.1f);
}

TEST_CASE("cpu backend: where on a bool tensor, with tensor and scalar branches") {
  Graph g;
  NodeId m = g.placeholder(DType::Bool, {2, 5});
  NodeId x = g.placeholder(DType::Float32, {2, 5});
  NodeId y = g.placeholder(DType::Float32, {5});
  NodeId w1 = op(g, Op::Where, {m, x, y});
  NodeId w2 = op(g, Op::Where, {op(g, Op::Gt, {x, g.scalar(0.0)}), g.scalar(-1.5), x});
  g.set_outputs({w1, w2});
  check_graph(g, {Host::bools({2, 5}, {1, 0, 0, 1, 1, 0, 1, 0, 1, 0}),
                  Host::floats({2, 5}, {-3, 2, -1, 4, kNaN, 0, 7, -8, 9, 1}),
                  Host::floats({5}, {10, 20, 30, 40, 50})});
}

TEST_CASE("cpu backend: x*y+c is two roundings, not an fma") {
  Graph g;
  NodeId x = g.placeholder(DType::Float32, {9});
  NodeId y = g.placeholder(DType::Float32, {9});
  const float u = 1.0f + std::ldexp(1.0f, -12);  // u*u = 1 + 2^-11 + 2^-24: rounds
  const double c = -(1.0 + std::ldexp(1.0, -11));
  g.set_outputs({op(g, Op::Add, {op(g, Op::Mul, {x, y}), g.scalar(c)})});
  auto compiled = compile(g);
  Host hx = Host::floats({9}, std::vector<float>(9, u)), hy = hx;
  Host out = Host::output(DType::Float32, {9});
  compiled->run({hx.arg(), hy.arg()}, {out.arg()});
  const float fused = std::fma(u, u, static_cast<float>(c));
  REQUIRE(fused != 0.0f);  // the inputs do tell an fma apart
  for (float v : out.f) CHECK(v == 0.0f);
}

TEST_CASE("cpu backend: NaN in relu, maximum and minimum") {
  Graph g;
  NodeId x = g.placeholder(DType::Float32, {4});
  NodeId y = g.placeholder(DType::Float32, {4});
  g.set_outputs({op(g, Op::Relu, {x}), op(g, Op::Maximum, {x, y}), op(g, Op::Minimum, {x, y})});
  auto c = compile(g);
  Host hx = Host::floats({4}, {kNaN, -1, 2, 3}), hy = Host::floats({4}, {1, kNaN, 5, -kInf});
  Host r = Host::output(DType::Float32, {4}), mx = r, mn = r;
  c->run({hx.arg(), hy.arg()}, {r.arg(), mx.arg(), mn.arg()});
  CHECK(std::isnan(r.f[0]));
  CHECK(r.f[1] == 0.0f);
  CHECK(r.f[2] == 2.0f);
  CHECK(std::isnan(mx.f[0]));
  CHECK(std::isnan(mx.f[1]));
  CHECK(mx.f[2] == 5.0f);
  CHECK(std::isnan(mn.f[0]));
  CHECK(std::isnan(mn.f[1]));
  CHECK(mn.f[3] == -kInf);
}

TEST_CASE("cpu backend: broadcasting [4,1] x [1,5], a 0-d input and a scalar") {
  Graph g;
  NodeId a = g.placeholder(DType::Float32, {4, 1});
  NodeId b = g.placeholder(DType::Float32, {1, 5});
  NodeId c = g.placeholder(DType::Float32, {});
  NodeId ab = op(g, Op::Add, {a, b});
  NodeId r = op(g, Op::Sub, {op(g, Op::Mul, {ab, c}), g.scalar(0.1)});
  g.set_outputs({r});
  auto compiled = check_graph(g, {Host::floats({4, 1}, {1, 2, 3, 4}),
                                  Host::floats({1, 5}, {10, 20, 30, 40, 50}),
                                  Host::floats({}, {-2.5f})});
  CHECK(compiled->num_kernels() == 1);

  // Wider rows (vector loop + remainder), a row vector [37] and a column [3,1].
  Graph w;
  NodeId x = w.placeholder(DType::Float32, {3, 37});
  NodeId row = w.placeholder(DType::Float32, {37});
  NodeId col = w.placeholder(DType::Float32, {3, 1});
  w.set_outputs({op(w, Op::Maximum, {op(w, Op::Add, {x, row}), col})});
  std::vector<float> xs;
  for (int i = 0; i < 3 * 37; ++i) xs.push_back(static_cast<float>((i * 7) % 23) - 11.f);
  check_graph(w, {Host::floats({3, 37}, xs), Host::floats({37}, sample(0.2f, 0.f)),
                  Host::floats({3, 1}, {-1, 0.5f, 3})});

  // Rank 3 against rank 2.
  Graph r3;
  NodeId p = r3.placeholder(DType::Float32, {2, 3, 4});
  NodeId q = r3.placeholder(DType::Float32, {3, 1});
  r3.set_outputs({op(r3, Op::Div, {p, q})});
  std::vector<float> ps;
  for (int i = 0; i < 24; ++i) ps.push_back(static_cast<float>(i) * 0.5f - 3.f);
  check_graph(r3, {Host::floats({2, 3, 4}, ps), Host::floats({3, 1}, {2, -4, 0.5f})});
}

TEST_CASE("cpu backend: a transposed (non-contiguous) input") {
  Graph g;
  NodeId x = g.placeholder(DType::Float32, {4, 5});
  NodeId t = g.placeholder(DType::Float32, {4, 5});
  g.set_outputs({op(g, Op::Sub, {op(g, Op::Mul, {x, g.scalar(2.0)}), t})});
  std::vector<float> xs, base(20);
  for (int i = 0; i < 20; ++i) xs.push_back(static_cast<float>(i));
  for (int j = 0; j < 5; ++j) {
    for (int i = 0; i < 4; ++i) base[static_cast<size_t>(j * 4 + i)] = static_cast<float>(i * 100 + j);
  }
  Host ht{DType::Float32, {4, 5}, {1, 4}, base, {}};  // t[i][j] = base[j*4 + i]
  auto compiled = check_graph(g, {Host::floats({4, 5}, xs), ht});

  // The same compiled graph on contiguous inputs (the other inner-loop version).
  Host hx = Host::floats({4, 5}, xs), hc = Host::floats({4, 5}, xs);
  Host out = Host::output(DType::Float32, {4, 5});
  compiled->run({hx.arg(), hc.arg()}, {out.arg()});
  for (size_t e = 0; e < 20; ++e) CHECK(out.f[e] == xs[e]);
}

TEST_CASE("cpu backend: rank 0") {
  Graph g;
  NodeId x = g.placeholder(DType::Float32, {});
  NodeId y = g.placeholder(DType::Float32, {});
  g.set_outputs({op(g, Op::Mul, {op(g, Op::Exp, {x}), y}), op(g, Op::Ge, {x, y})});
  auto c = check_graph(g, {Host::floats({}, {0.75f}), Host::floats({}, {-3.f})}, kMathUlps);
  CHECK(c->num_kernels() == 1);
}

TEST_CASE("cpu backend: int() of a float is checked even when nothing reads it") {
  // Graph::checks: the Int node is no output's operand, yet a NaN or an infinity
  // makes the run report kNoIntValue (eager raises at int()); finite values run clean.
  Graph g;
  NodeId x = g.placeholder(DType::Float32, {2});
  NodeId s = *g.reduce(Op::Sum, x, {0}, false);
  NodeId i = *g.item(s, ScalarKind::Int);
  REQUIRE(g.checks() == std::vector<NodeId>{i});
  g.set_outputs({op(g, Op::Add, {x, g.scalar(1.0)})});
  auto c = compile(g);
  for (float bad : {1.0f, kNaN, kInf, -kInf}) {
    Host hx = Host::floats({2}, {0.5f, bad});
    Host out = Host::output(DType::Float32, {2});
    const int64_t status = c->run({hx.arg()}, {out.arg()});
    CHECK(status == (std::isfinite(bad) ? kOk : kNoIntValue));
  }
  // int() of an int tensor cannot fail: no check.
  Graph h;
  NodeId xi = h.placeholder(DType::Int64, {1});
  REQUIRE(h.item(xi, ScalarKind::Int));
  CHECK(h.checks().empty());
}

TEST_CASE("cpu backend: an empty tensor runs no iterations") {
  Graph g;
  NodeId x = g.placeholder(DType::Float32, {0, 3});
  NodeId y = g.placeholder(DType::Float32, {3});
  NodeId e1 = op(g, Op::Add, {x, y});
  NodeId e2 = op(g, Op::Exp, {x});
  NodeId ok = op(g, Op::Add, {y, g.scalar(1.0)});
  g.set_outputs({e1, e2, ok});
  auto c = compile(g);
  CHECK(c->num_kernels() == 2);
  float xbuf = 99.f;  // a size-0 tensor: never read
  Shape x_sizes{0, 3};
  std::vector<int64_t> x_strides{3, 1};
  Host hy = Host::floats({3}, {1, 2, 3});
  float sentinel[2] = {-7.f, -8.f};
  Shape e_sizes{0, 3};
  std::vector<int64_t> e_strides{3, 1};
  Host out = Host::output(DType::Float32, {3});
  c->run({TensorArg{&xbuf, x_sizes.data(), x_strides.data(), 2}, hy.arg()},
         {TensorArg{&sentinel[0], e_sizes.data(), e_strides.data(), 2},
          TensorArg{&sentinel[1], e_sizes.data(), e_strides.data(), 2}, out.arg()});
  CHECK(sentinel[0] == -7.f);
  CHECK(sentinel[1] == -8.f);
  CHECK(out.f == std::vector<float>{2, 3, 4});
}

TEST_CASE("cpu backend: outputs of two shapes make two kernels") {
  Graph g;
  NodeId a = g.placeholder(DType::Float32, {4, 5});
  NodeId b = g.placeholder(DType::Float32, {5});
  NodeId o1 = op(g, Op::Mul, {a, b});
  NodeId o2 = op(g, Op::Exp, {b});
  NodeId o3 = op(g, Op::Sub, {a, g.scalar(1.0)});
  g.set_outputs({o1, o2, o3, o1});
  std::vector<float> as;
  for (int i = 0; i < 20; ++i) as.push_back(static_cast<float>(i) - 9.5f);
  auto c = check_graph(g, {Host::floats({4, 5}, as), Host::floats({5}, {0.5f, -1, 2, 0, 3})},
                       kMathUlps);
  CHECK(c->num_kernels() == 2);
}

TEST_CASE("cpu backend: one kernel, one define for a single-shape chain") {
  Graph g;
  NodeId x = g.placeholder(DType::Float32, {8, 16});
  NodeId y = g.placeholder(DType::Float32, {8, 16});
  NodeId t = op(g, Op::Add, {op(g, Op::Mul, {x, y}), g.scalar(1.0)});
  g.set_outputs({op(g, Op::Sub, {op(g, Op::Exp, {op(g, Op::Relu, {t})}), y})});
  std::vector<float> xs, ys;
  for (int i = 0; i < 128; ++i) {
    xs.push_back(std::sin(static_cast<float>(i)));
    ys.push_back(std::cos(static_cast<float>(i) * 0.3f));
  }
  auto c = check_graph(g, {Host::floats({8, 16}, xs), Host::floats({8, 16}, ys)}, kMathUlps);
  CHECK(c->num_kernels() == 1);
  const std::string& ir = c->ir();
  size_t defines = 0;
  for (size_t p = ir.find("\ndefine "); p != std::string::npos; p = ir.find("\ndefine ", p + 1)) {
    ++defines;
  }
  CHECK(defines == 1);
  CHECK(ir.find("@fj_g") != std::string::npos);
  CHECK(ir.find("fmuladd") == std::string::npos);
  CHECK(ir.find(" fast ") == std::string::npos);
}

TEST_CASE("cpu backend: the contiguous loop is vectorized (optimized IR, ir log)") {
  std::ostringstream captured;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(captured);
  auto& sinks = fj::log::jit().sinks();
  const auto saved = sinks;
  sinks.assign({sink});
  fj::log::configure("ir");
  // tanh is a libm call that LLVM 19 cannot widen by itself; it must not keep the
  // loop scalar.
  Graph g;
  NodeId x = g.placeholder(DType::Float32, {64});
  NodeId y = g.placeholder(DType::Float32, {64});
  NodeId t = op(g, Op::Add, {op(g, Op::Mul, {x, y}), op(g, Op::Relu, {x})});
  g.set_outputs({op(g, Op::Tanh, {t})});
  std::vector<float> xs, ys;
  for (int i = 0; i < 64; ++i) {
    xs.push_back(static_cast<float>(i) * 0.1f - 3.f);
    ys.push_back(static_cast<float>(i % 7) - 2.5f);
  }
  check_graph(g, {Host::floats({64}, xs), Host::floats({64}, ys)}, kMathUlps);
  fj::log::configure("");
  sinks = saved;
  const std::string text = captured.str();
  const size_t opt = text.find("optimized LLVM IR");
  REQUIRE(opt != std::string::npos);
  CHECK(text.find("LLVM IR of fj_g") < opt);  // the emitted IR is logged first
  const std::string optimized = text.substr(opt);
  // With AVX-512, LLVM may still prefer 256-bit vectors (it does on some CPUs that
  // lower their clock for 512-bit work): either width is a vectorized loop.
  auto has = [&](const char* op, int lanes) {
    return optimized.find(std::string(op) + " <" + std::to_string(lanes) + " x float>") != std::string::npos;
  };
  if (__builtin_cpu_supports("avx512f")) {
    CHECK((has("fmul", 16) || has("fmul", 8)));
    CHECK((has("fadd", 16) || has("fadd", 8)));
  } else if (__builtin_cpu_supports("avx2")) {
    CHECK(optimized.find("fmul <8 x float>") != std::string::npos);
    CHECK(optimized.find("fadd <8 x float>") != std::string::npos);
  } else {
    CHECK(optimized.find("x float>") != std::string::npos);
  }
  CHECK(optimized.find("fmuladd") == std::string::npos);
}

TEST_CASE("cpu backend: graphs compiled twice and destroyed keep working") {
  auto make = [] {
    Graph g;
    NodeId x = g.placeholder(DType::Float32, {10});
    g.set_outputs({op(g, Op::Tanh, {op(g, Op::Mul, {x, g.scalar(0.5)})})});
    return g;
  };
  std::vector<float> xs;
  for (int i = 0; i < 10; ++i) xs.push_back(static_cast<float>(i) - 4.5f);
  Graph g = make();
  auto first = check_graph(g, {Host::floats({10}, xs)}, kMathUlps);
  auto second = check_graph(g, {Host::floats({10}, xs)}, kMathUlps);
  first.reset();  // removes the first graph's code
  Host hx = Host::floats({10}, xs), out = Host::output(DType::Float32, {10});
  second->run({hx.arg()}, {out.arg()});
  const std::vector<float> want = ref_eval(g, g.outputs()[0], {Host::floats({10}, xs)});
  for (size_t e = 0; e < 10; ++e) CHECK(ulps(out.f[e], want[e]) <= kMathUlps);
  second.reset();
  check_graph(make(), {Host::floats({10}, xs)}, kMathUlps);  // and the JIT still compiles
}

TEST_CASE("cpu backend: compiling from several threads") {
  std::vector<std::thread> threads;
  std::vector<std::shared_ptr<CompiledGraph>> compiled(4);
  std::vector<std::string> errors(4);
  backend();  // create once, before the threads
  for (size_t t = 0; t < 4; ++t) {
    threads.emplace_back([t, &compiled, &errors] {
      Graph g;
      NodeId x = g.placeholder(DType::Float32, {16});
      auto sum = g.pointwise(Op::Add, {x, g.scalar(static_cast<double>(t))});
      if (!sum) {
        errors[t] = sum.error();
        return;
      }
      g.set_outputs({*sum});
      auto c = backend().compile(g);
      if (c) compiled[t] = *c;
      else errors[t] = c.error();
    });
  }
  for (auto& th : threads) th.join();
  for (size_t t = 0; t < 4; ++t) {
    CAPTURE(t);
    REQUIRE(compiled[t]);
    CHECK(errors[t].empty());
    Host hx = Host::floats({16}, std::vector<float>(16, 1.f)), out = Host::output(DType::Float32, {16});
    compiled[t]->run({hx.arg()}, {out.arg()});
    CHECK(out.f[15] == 1.f + static_cast<float>(t));
  }
}

TEST_CASE("cpu backend: compile time of a 30-op chain (printed, not asserted)") {
  auto chain = [] {
    Graph g;
    NodeId x = g.placeholder(DType::Float32, {256, 256});
    NodeId y = g.placeholder(DType::Float32, {256});
    NodeId v = x;
    const Op cycle[] = {Op::Mul, Op::Add, Op::Tanh, Op::Sub, Op::Sigmoid, Op::Maximum,
                        Op::Relu, Op::Div, Op::Neg, Op::Abs};
    for (int i = 0; i < 30; ++i) {
      const Op o = cycle[i % 10];
      if (op_arity(o) == 1) {
        v = op(g, o, {v});
      } else {
        const bool scalar_ok = op_operands(o)[1] != 'T';  // maximum: tensors only
        v = op(g, o, {v, i % 3 == 0 && scalar_ok ? g.scalar(1.0 + i) : y});
      }
    }
    g.set_outputs({v});
    return g;
  };
  using Clock = std::chrono::steady_clock;
  double ms[3];
  for (double& m : ms) {
    Graph g = chain();
    const auto t0 = Clock::now();
    auto c = compile(g);
    m = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    CHECK(c->num_kernels() == 1);
  }
  MESSAGE("30-op chain compile time: " << ms[0] << " ms, " << ms[1] << " ms, " << ms[2] << " ms");
  Graph g = chain();
  std::vector<float> xs(256 * 256), ys(256);
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = std::sin(static_cast<float>(i) * 0.01f);
  for (size_t i = 0; i < ys.size(); ++i) ys[i] = 0.5f + std::cos(static_cast<float>(i));
  check_graph(g, {Host::floats({256, 256}, xs), Host::floats({256}, ys)}, kChainUlps);
}

// --- scalar inputs: Python numbers known only at run time ------------------------

namespace {

// Values a Python float can take, including ones that round when made float32
// (0.1, 1e-50 -> 0, 1e39 -> inf) and the specials.
const std::vector<double> kScalarValues = {
    0.0, -0.0, 1.0, -2.5, 0.1, 3.0, 1e-50, 1e39, -1e39, 16777217.0,
    std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity(),
    -std::numeric_limits<double>::infinity()};

}  // namespace

TEST_CASE("cpu backend: scalar inputs on either side of every binary op and comparison") {
  // maximum / minimum take tensors only (eager raises a TypeError for a number)
  {
    Graph g;
    NodeId x = g.placeholder(DType::Float32, {3});
    CHECK_FALSE(g.pointwise(Op::Maximum, {x, g.scalar_input()}));
    CHECK_FALSE(g.pointwise(Op::Minimum, {g.scalar(1.0), x}));
  }
  const Op ops[] = {Op::Add, Op::Sub, Op::Mul, Op::Div,
                    Op::Eq, Op::Ne, Op::Lt, Op::Le, Op::Gt, Op::Ge};
  std::vector<float> xs = sample(0.5f, 0.0f);
  xs[3] = 1.0f;  // equal to some of the scalar values
  xs[4] = 3.0f;
  xs[5] = 0.1f;
  for (Op o : ops) {
    for (int side = 0; side < 2; ++side) {
      CAPTURE(op_name(o));
      CAPTURE(side);
      Graph g;
      NodeId x = g.placeholder(DType::Float32, {37});
      NodeId s = g.scalar_input();
      g.set_outputs({op(g, o, side == 0 ? std::vector<NodeId>{s, x} : std::vector<NodeId>{x, s})});
      auto c = compile(g);  // once, for every value
      for (double v : kScalarValues) {
        CAPTURE(v);
        check_run(g, *c, {Host::floats({37}, xs)}, {v});
      }
    }
  }
}

TEST_CASE("cpu backend: scalar inputs as where branches and as the pow exponent") {
  Graph g;
  NodeId x = g.placeholder(DType::Float32, {37});
  NodeId a = g.scalar_input();
  NodeId b = g.scalar_input();
  NodeId cond = op(g, Op::Gt, {x, a});
  g.set_outputs({op(g, Op::Where, {cond, a, x}), op(g, Op::Where, {cond, x, b}),
                 op(g, Op::Where, {cond, b, a})});
  auto c = compile(g);
  for (double va : {0.0, -1.5, 0.1}) {
    for (double vb : {2.0, std::numeric_limits<double>::quiet_NaN()}) {
      CAPTURE(va);
      CAPTURE(vb);
      check_run(g, *c, {Host::floats({37}, sample(0.3f, 0.f))}, {va, vb});
    }
  }

  Graph p;
  NodeId px = p.placeholder(DType::Float32, {37});
  p.set_outputs({op(p, Op::PowScalar, {px, p.scalar_input()})});
  auto pc = compile(p);
  for (double e : {2.0, 3.0, 0.5, -1.0, -0.5, 0.0, 1.0, 1.7, -3.25,
                   std::numeric_limits<double>::quiet_NaN()}) {
    CAPTURE(e);
    check_run(p, *pc, {Host::floats({37}, sample(0.3f, 0.1f))}, {e});
  }
  // The graph rules: a scalar input cannot be a where condition, nor the only operand.
  Graph r;
  NodeId rx = r.placeholder(DType::Float32, {3});
  NodeId rs = r.scalar_input();
  CHECK_FALSE(r.pointwise(Op::Where, {rs, rx, rx}));
  CHECK_FALSE(r.pointwise(Op::Add, {rs, r.scalar(1.0)}));
  CHECK_FALSE(r.pointwise(Op::Exp, {rs}));
}

TEST_CASE("cpu backend: x * n + n compiled once gives each n's result") {
  Graph g;
  NodeId x = g.placeholder(DType::Float32, {3, 37});
  NodeId n = g.scalar_input();
  NodeId y = g.placeholder(DType::Float32, {37});
  NodeId m = g.scalar_input();
  g.set_outputs({op(g, Op::Add, {op(g, Op::Mul, {x, n}), n}),
                 op(g, Op::Sub, {op(g, Op::Mul, {y, m}), op(g, Op::Exp, {y})})});
  CHECK(g.num_inputs() == 2);
  CHECK(g.num_scalar_inputs() == 2);
  CHECK(g.node(y).index == 1);  // placeholders keep their numbering
  CHECK(g.node(m).index == 1);
  auto c = compile(g);
  CHECK(c->num_kernels() == 2);
  std::vector<float> xs;
  for (int i = 0; i < 3 * 37; ++i) xs.push_back(static_cast<float>(i % 11) * 0.25f - 1.f);
  const Host hy = Host::floats({37}, sample(0.2f, 0.f));
  std::vector<float> firsts;
  for (double v : {1.0, 2.5, -3.0, 1e-3, 7.0}) {
    CAPTURE(v);
    check_run(g, *c, {Host::floats({3, 37}, xs), hy}, {v, -v}, kChainUlps);
    // And explicitly: element 5 of the first output is x*n + n.
    Host hx = Host::floats({3, 37}, xs), hyc = hy;
    Host o1 = Host::output(DType::Float32, {3, 37}), o2 = Host::output(DType::Float32, {37});
    const double vals[] = {v, -v};
    c->run({hx.arg(), hyc.arg()}, {o1.arg(), o2.arg()}, vals);
    const float fv = static_cast<float>(v);
    CHECK(o1.f[5] == xs[5] * fv + fv);
    firsts.push_back(o1.f[5]);
  }
  std::sort(firsts.begin(), firsts.end());
  CHECK(std::unique(firsts.begin(), firsts.end()) == firsts.end());  // every run differs
}
