// Reductions, views, indexing, creation and matmul on the CPU backend, against a
// plain reference interpreter of the graph (doubles, static shapes).
#include <doctest.h>

#include <cmath>
#include <functional>
#include <map>
#include <random>

#include "jit/codegen/driver.h"
#include "jit/cpu/cpu_backend.h"

using namespace fj::jit;

namespace {

// A dense row-major tensor of doubles.
struct Ref {
  Shape shape;
  std::vector<double> v;
  double at(const std::vector<int64_t>& idx) const {
    int64_t off = 0;
    for (size_t d = 0; d < shape.size(); ++d) off = off * shape[d] + idx[d];
    return v[static_cast<size_t>(off)];
  }
};

int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

std::vector<int64_t> unravel(int64_t e, const Shape& s) {
  std::vector<int64_t> idx(s.size());
  for (size_t d = s.size(); d-- > 0;) {
    idx[d] = e % s[d];
    e /= s[d];
  }
  return idx;
}

// Evaluates every node of g (static shapes) on the inputs.
std::vector<Ref> reference(const Graph& g, const std::vector<Ref>& inputs) {
  std::vector<Ref> val(g.size());
  for (size_t id = 0; id < g.size(); ++id) {
    const Node& n = g.nodes()[id];
    const Shape shape = *concrete(n.sym);
    Ref out{shape, std::vector<double>(static_cast<size_t>(numel(shape)))};
    auto in = [&](size_t k) -> const Ref& { return val[static_cast<size_t>(n.inputs[k])]; };
    auto bcast = [&](const Ref& r, const std::vector<int64_t>& idx) {
      std::vector<int64_t> j(r.shape.size());
      const size_t lead = idx.size() - r.shape.size();
      for (size_t d = 0; d < j.size(); ++d) j[d] = r.shape[d] == 1 ? 0 : idx[lead + d];
      return r.at(j);
    };
    switch (n.op) {
      case Op::Placeholder: val[id] = inputs[static_cast<size_t>(n.index)]; continue;
      case Op::Scalar: val[id] = Ref{{}, {n.scalar}}; continue;
      default: break;
    }
    for (int64_t e = 0; e < numel(shape); ++e) {
      const std::vector<int64_t> idx = unravel(e, shape);
      double r = 0;
      switch (n.op) {
        case Op::Add: r = bcast(in(0), idx) + bcast(in(1), idx); break;
        case Op::Sub: r = bcast(in(0), idx) - bcast(in(1), idx); break;
        case Op::Mul: r = bcast(in(0), idx) * bcast(in(1), idx); break;
        case Op::Div: r = bcast(in(0), idx) / bcast(in(1), idx); break;
        case Op::Exp: r = std::exp(bcast(in(0), idx)); break;
        case Op::Log: r = std::log(bcast(in(0), idx)); break;
        case Op::Rsqrt: r = 1 / std::sqrt(bcast(in(0), idx)); break;
        case Op::Sum: case Op::Amax: case Op::ArgMax: {
          const Ref& x = in(0);
          double acc = n.op == Op::Sum ? 0 : -INFINITY, best = 0;
          int64_t pos = 0;
          for (int64_t f = 0; f < numel(x.shape); ++f) {
            const auto xi = unravel(f, x.shape);
            size_t p = 0;
            bool match = true;
            int64_t lin = 0;
            for (size_t d = 0; d < xi.size(); ++d) {
              const bool red = std::find(n.dims.begin(), n.dims.end(), static_cast<int64_t>(d)) != n.dims.end();
              if (red) {
                lin = lin * x.shape[d] + xi[d];
                if (n.keepdim) ++p;
                continue;
              }
              match = match && xi[d] == idx[p++];
            }
            if (!match) continue;
            const double v = x.at(xi);
            if (n.op == Op::Sum) acc += v;
            else if (v > acc) { acc = v; best = static_cast<double>(lin); pos = lin; }
          }
          (void)pos;
          r = n.op == Op::ArgMax ? best : acc;
          break;
        }
        case Op::Permute: {
          std::vector<int64_t> j(idx.size());
          for (size_t d = 0; d < idx.size(); ++d) j[static_cast<size_t>(n.dims[d])] = idx[d];
          r = in(0).at(j);
          break;
        }
        case Op::Reshape: r = in(0).v[static_cast<size_t>(e)]; break;
        case Op::Expand: r = bcast(in(0), idx); break;
        case Op::Slice: {
          auto j = idx;
          const size_t k = static_cast<size_t>(n.dims[0]);
          j[k] = *n.args[0].as_int() + idx[k] * *n.args[1].as_int();
          r = in(0).at(j);
          break;
        }
        case Op::Select: {
          auto j = idx;
          j.insert(j.begin() + n.dims[0], *n.args[0].as_int());
          r = in(0).at(j);
          break;
        }
        case Op::CumSum: {
          const size_t k = static_cast<size_t>(n.dims[0]);
          auto j = idx;
          for (j[k] = 0; j[k] <= idx[k]; ++j[k]) r += in(0).at(j);
          break;
        }
        case Op::SliceScatter: {
          const size_t k = static_cast<size_t>(n.dims[0]);
          const int64_t rel = idx[k] - *n.args[0].as_int(), step = *n.args[1].as_int();
          auto j = idx;
          j[k] = rel / step;
          const bool inside = rel >= 0 && rel % step == 0 && rel / step < in(1).shape[k];
          r = inside ? in(1).at(j) : in(0).at(idx);
          break;
        }
        case Op::Flip: {
          auto j = idx;
          for (int64_t d : n.dims) j[static_cast<size_t>(d)] = in(0).shape[static_cast<size_t>(d)] - 1 - idx[static_cast<size_t>(d)];
          r = in(0).at(j);
          break;
        }
        case Op::Cat: {
          const size_t k = static_cast<size_t>(n.dims[0]);
          int64_t off = idx[k];
          for (size_t q = 0; q < n.inputs.size(); ++q) {
            if (off < in(q).shape[k]) {
              auto j = idx;
              j[k] = off;
              r = in(q).at(j);
              break;
            }
            off -= in(q).shape[k];
          }
          break;
        }
        case Op::IndexSelect: {
          const size_t k = static_cast<size_t>(n.dims[0]);
          const Ref& ix = in(1);
          std::vector<int64_t> sub(idx.begin() + static_cast<long>(k), idx.begin() + static_cast<long>(k + ix.shape.size()));
          std::vector<int64_t> j(idx.begin(), idx.begin() + static_cast<long>(k));
          j.push_back(static_cast<int64_t>(ix.at(sub)));
          j.insert(j.end(), idx.begin() + static_cast<long>(k + ix.shape.size()), idx.end());
          r = in(0).at(j);
          break;
        }
        case Op::Iota: r = static_cast<double>(idx[static_cast<size_t>(n.dims[0])]); break;
        case Op::Matmul: {
          const Ref& a = in(0);
          const Ref& b = in(1);
          const int64_t kk = a.shape.back();
          for (int64_t t = 0; t < kk; ++t) {
            auto ia = idx, ib = idx;
            ia.back() = t;
            ib[ib.size() - 2] = t;
            r += a.at(ia) * b.at(ib);
          }
          break;
        }
        default: FAIL("no reference for " << op_name(n.op));
      }
      out.v[static_cast<size_t>(e)] = r;
    }
    val[id] = std::move(out);
  }
  return val;
}

CpuBackend& backend() {
  static std::unique_ptr<CpuBackend> b = [] {
    auto r = CpuBackend::create();
    REQUIRE(r);
    return std::move(*r);
  }();
  return *b;
}

// Compiles g, runs it on random float32 inputs (integer inputs from `ints`), and
// compares every output with the reference within `tol` relative. Returns the
// number of kernels.
size_t check(Graph& g, const std::vector<Shape>& input_shapes, double tol = 1e-5,
           std::map<size_t, std::vector<int64_t>> ints = {}) {
  std::mt19937 rng(7);
  std::normal_distribution<float> dist;
  std::vector<Ref> refs;
  std::vector<std::vector<float>> fbufs;
  std::vector<std::vector<int64_t>> ibufs;
  std::vector<std::vector<int64_t>> strides;
  std::vector<TensorArg> args;
  fbufs.reserve(input_shapes.size());
  ibufs.reserve(input_shapes.size());
  strides.reserve(input_shapes.size() * 2 + 8);
  for (size_t i = 0; i < input_shapes.size(); ++i) {
    const Shape& s = input_shapes[i];
    Ref r{s, {}};
    std::vector<int64_t> st(s.size(), 1);
    for (size_t d = s.size(); d-- > 1;) st[d - 1] = st[d] * s[d];
    strides.push_back(st);
    if (ints.count(i)) {
      ibufs.push_back(ints[i]);
      fbufs.emplace_back();
      for (int64_t v : ints[i]) r.v.push_back(static_cast<double>(v));
      args.push_back(TensorArg{ibufs.back().data(), input_shapes[i].data(), strides.back().data(), static_cast<int>(s.size())});
    } else {
      fbufs.emplace_back();
      ibufs.emplace_back();
      for (int64_t e = 0; e < numel(s); ++e) {
        fbufs.back().push_back(dist(rng));
        r.v.push_back(fbufs.back().back());
      }
      args.push_back(TensorArg{fbufs.back().data(), input_shapes[i].data(), strides.back().data(), static_cast<int>(s.size())});
    }
    refs.push_back(std::move(r));
  }
  auto compiled = backend().compile(g);
  REQUIRE_MESSAGE(compiled, (compiled ? "" : compiled.error()));
  const std::vector<Ref> want = reference(g, refs);
  std::vector<Shape> out_shapes;
  std::vector<std::vector<double>> obufs;
  std::vector<TensorArg> outs;
  out_shapes.reserve(g.outputs().size());
  obufs.reserve(g.outputs().size());
  for (NodeId o : g.outputs()) {
    out_shapes.push_back(*concrete(g.node(o).sym));
    std::vector<int64_t> st(out_shapes.back().size(), 1);
    for (size_t d = st.size(); d-- > 1;) st[d - 1] = st[d] * out_shapes.back()[d];
    strides.push_back(st);
    obufs.emplace_back(static_cast<size_t>(numel(out_shapes.back())) + 1);
    outs.push_back(TensorArg{obufs.back().data(), out_shapes.back().data(), strides.back().data(),
                             static_cast<int>(out_shapes.back().size())});
  }
  REQUIRE((*compiled)->run(args, outs) == 0);
  for (size_t k = 0; k < g.outputs().size(); ++k) {
    const Node& n = g.node(g.outputs()[k]);
    const Ref& w = want[static_cast<size_t>(g.outputs()[k])];
    for (int64_t e = 0; e < numel(out_shapes[k]); ++e) {
      double got = 0;
      const void* p = obufs[k].data();
      if (n.dtype == DType::Float32) got = static_cast<const float*>(p)[e];
      else if (n.dtype == DType::Int64) got = static_cast<double>(static_cast<const int64_t*>(p)[e]);
      else FAIL("dtype");
      CAPTURE(k);
      CAPTURE(e);
      CHECK(std::fabs(got - w.v[static_cast<size_t>(e)]) <= tol * (1 + std::fabs(w.v[static_cast<size_t>(e)])));
    }
  }
  return (*compiled)->num_kernels();
}

NodeId ok(fj::Expected<NodeId> e) {
  REQUIRE_MESSAGE(e, (e ? "" : e.error()));
  return *e;
}

}  // namespace

TEST_CASE("cpu ops: softmax rows fuse into one kernel and match") {
  Graph g;
  NodeId x = g.placeholder(DType::Float32, {37, 301});
  g.set_outputs({ok(g.softmax(x, 1, false))});
  CHECK(check(g, {{37, 301}}) == 1);  // maxima and sums next to the row loop
}

TEST_CASE("cpu ops: sums, amax and argmax over several dims") {
  Graph g;
  NodeId x = g.placeholder(DType::Float32, {5, 6, 7});
  NodeId s0 = ok(g.reduce(Op::Sum, x, {0}, false));
  NodeId s12 = ok(g.reduce(Op::Sum, x, {1, 2}, true));
  NodeId all = ok(g.reduce(Op::Sum, x, {}, false));
  NodeId mx = ok(g.reduce(Op::Amax, x, {-1}, false));
  NodeId am = ok(g.reduce(Op::ArgMax, x, {1}, false));
  NodeId col = ok(g.pointwise(Op::Div, {x, s12}));  // reads a reduction broadcast
  NodeId cols = ok(g.pointwise(Op::Sub, {x, s0}));  // sum over dim 0 read along dim 1, 2
  g.set_outputs({s0, s12, all, mx, am, col, cols});
  check(g, {{5, 6, 7}});
}

TEST_CASE("cpu ops: layer_norm and mean/var") {
  Graph g;
  NodeId x = g.placeholder(DType::Float32, {9, 64});
  NodeId w = g.placeholder(DType::Float32, {64});
  NodeId b = g.placeholder(DType::Float32, {64});
  g.set_outputs({ok(g.layer_norm(x, 1, w, b, 1e-5))});
  CHECK(check(g, {{9, 64}, {64}, {64}}, 1e-4) == 1);
}

TEST_CASE("cpu ops: views of inputs and of computed values") {
  Graph g;
  NodeId x = g.placeholder(DType::Float32, {4, 6});
  NodeId e = ok(g.pointwise(Op::Exp, {x}));
  NodeId t = ok(g.transpose(e, 0, 1));                          // [6, 4]
  NodeId r = ok(g.reshape(t, {SymExpr::integer(3), SymExpr::integer(-1)}));  // [3, 8]
  NodeId v = ok(g.reshape(x, {SymExpr::integer(2), SymExpr::integer(2), SymExpr::integer(6)}));
  NodeId sl = ok(g.slice(x, 1, SymExpr::integer(1), SymExpr::integer(2), 2));  // x[:, 1:5:2]
  NodeId se = ok(g.select(x, 0, SymExpr::integer(3)));
  NodeId fl = ok(g.flip(x, {0, 1}));
  NodeId ex = ok(g.expand(ok(g.unsqueeze(se, 0)), {SymExpr::integer(3), SymExpr::integer(6)}));
  NodeId ca = ok(g.cat({x, fl, sl}, 1));
  g.set_outputs({r, v, sl, se, fl, ex, ca});
  check(g, {{4, 6}});
}

TEST_CASE("cpu ops: index_select, iota and matmul") {
  Graph g;
  NodeId w = g.placeholder(DType::Float32, {10, 8});
  NodeId ids = g.placeholder(DType::Int64, {2, 3});
  NodeId emb = ok(g.index_select(w, 0, ids));  // [2, 3, 8]
  NodeId a = g.placeholder(DType::Float32, {3, 5, 8});
  NodeId b = g.placeholder(DType::Float32, {8, 4});
  NodeId mm = ok(g.matmul(a, ok(g.expand(b, {SymExpr::integer(3), SymExpr::integer(8), SymExpr::integer(4)}))));
  NodeId lin = ok(g.linear(a, ok(g.transpose(b, 0, 1)), -1));  // a @ b through w.T
  NodeId io = g.iota({SymExpr::integer(3), SymExpr::integer(5)}, 1);
  NodeId sq = ok(g.pointwise(Op::Mul, {mm, mm}));
  g.set_outputs({emb, mm, lin, io, sq});
  check(g, {{10, 8}, {2, 3}, {3, 5, 8}, {8, 4}}, 1e-4, {{1, {0, 9, 3, 3, 2, 7}}});
}

TEST_CASE("cpu ops: matmul operands that are transposes and reshapes of computed values") {
  // A matmul reads a permute or reshape of a computed value from that value's buffer
  // when strides allow; a reshape that no strides describe is copied first.
  Graph g;
  NodeId x = g.placeholder(DType::Float32, {6, 8});
  NodeId y = g.placeholder(DType::Float32, {6, 5});
  NodeId z = g.placeholder(DType::Float32, {3, 2});
  NodeId a = g.placeholder(DType::Float32, {2, 3, 4});
  NodeId ex = ok(g.pointwise(Op::Exp, {x}));
  NodeId mm1 = ok(g.matmul(ok(g.transpose(ex, 0, 1)), y));  // exp(x).T @ y: [8, 5]
  NodeId sq = ok(g.pointwise(Op::Mul, {x, x}));
  NodeId odd = ok(g.reshape(ok(g.transpose(sq, 0, 1)), {SymExpr::integer(16), SymExpr::integer(3)}));
  NodeId mm2 = ok(g.matmul(odd, z));  // not a view of (x * x)'s buffer: [16, 2]
  NodeId tn = ok(g.transpose(ok(g.pointwise(Op::Exp, {a})), 1, 2));  // [2, 4, 3]
  NodeId zb = ok(g.expand(z, {SymExpr::integer(2), SymExpr::integer(3), SymExpr::integer(2)}));
  NodeId mm3 = ok(g.matmul(tn, zb));                                   // [2, 4, 2]
  NodeId twice = ok(g.transpose(ok(g.transpose(ex, 0, 1)), 0, 1));     // exp(x) again
  NodeId mm4 = ok(g.matmul(ok(g.transpose(y, 0, 1)), twice));          // [5, 8]
  NodeId read = ok(g.pointwise(Op::Mul, {ok(g.transpose(ex, 0, 1)), g.scalar(2.0)}));  // the view read by a kernel too
  g.set_outputs({mm1, mm2, mm3, mm4, read});
  check(g, {{6, 8}, {6, 5}, {3, 2}, {2, 3, 4}}, 1e-4);
}

TEST_CASE("cpu ops: a reduction whose operand reads values of an outer loop level") {
  // (a / c).sum(1, keepdim=True) with c [9, 1]: c's value belongs to the row loop's
  // level and is hoisted out of the reduction loop, which itself sits in that
  // level's hoist block.
  Graph g;
  NodeId a = g.placeholder(DType::Float32, {9, 7});
  NodeId c = g.placeholder(DType::Float32, {9, 1});
  NodeId cc = ok(g.pointwise(Op::Mul, {c, c}));
  NodeId s = ok(g.reduce(Op::Sum, ok(g.pointwise(Op::Div, {a, cc})), {1}, true));
  NodeId inner = ok(g.reduce(Op::Sum, ok(g.pointwise(Op::Mul, {a, ok(g.reduce(Op::Sum, c, {1}, true))})), {1}, true));
  g.set_outputs({ok(g.pointwise(Op::Add, {s, a})), ok(g.expand(s, {SymExpr::integer(9), SymExpr::integer(7)})),
                 ok(g.pointwise(Op::Sub, {a, inner}))});
  check(g, {{9, 7}, {9, 1}}, 1e-4);
}

TEST_CASE("cpu ops: a reduction reading a reduction of the same level, under a view") {
  // (x + x.sum(0)).sum(0).view(1, 5): the inner sum is placed next to the outer one.
  Graph g;
  NodeId x = g.placeholder(DType::Float32, {4, 5});
  NodeId s0 = ok(g.reduce(Op::Sum, x, {0}, false));
  NodeId y = ok(g.pointwise(Op::Add, {x, s0}));
  NodeId s1 = ok(g.reduce(Op::Sum, y, {0}, false));
  g.set_outputs({ok(g.reshape(s1, {SymExpr::integer(1), SymExpr::integer(5)}))});
  check(g, {{4, 5}});
}

TEST_CASE("cpu ops: argmax over every dim of a matrix") {
  Graph g;
  NodeId x = g.placeholder(DType::Float32, {6, 7});
  NodeId am = ok(g.reduce(Op::ArgMax, x, {}, false));
  NodeId mx = ok(g.reduce(Op::Amax, x, {}, true));
  g.set_outputs({am, ok(g.pointwise(Op::Sub, {x, mx}))});
  check(g, {{6, 7}});
}

TEST_CASE("cpu ops: slice_scatter writes a slice or a row into a base") {
  Graph g;
  NodeId x = g.placeholder(DType::Float32, {7, 5});
  NodeId y = g.placeholder(DType::Float32, {3, 5});
  NodeId c = g.placeholder(DType::Float32, {7, 1});
  NodeId rows = ok(g.slice_scatter(x, y, 0, SymExpr::integer(1), 3));  // x[1::3] = y
  NodeId col = ok(g.slice_scatter(rows, c, 1, SymExpr::integer(4), 1)); // then [:, 4] = c
  CHECK(ok(g.slice_scatter(x, ok(g.slice(y, 0, SymExpr::integer(0), SymExpr::integer(0), 1)), 0,
                           SymExpr::integer(2), 1)) == x);  // an empty slice writes nothing
  // A chain as an unrolled loop makes it: row i = 2 * (row i of the previous version).
  NodeId cur = x;
  for (int64_t i = 0; i < 7; ++i) {
    for (int rep = 0; rep < 3; ++rep) {
      NodeId row = ok(g.select(cur, 0, SymExpr::integer(i)));
      NodeId twice = ok(g.pointwise(Op::Mul, {row, g.scalar(2.0)}));
      cur = ok(g.slice_scatter(cur, ok(g.unsqueeze(twice, 0)), 0, SymExpr::integer(i), 1));
    }
  }
  g.set_outputs({rows, col, cur});
  check(g, {{7, 5}, {3, 5}, {7, 1}});
}

TEST_CASE("cpu ops: cumsum along each dim, alone and fused") {
  Graph g;
  NodeId x = g.placeholder(DType::Float32, {6, 33});
  NodeId c0 = ok(g.cumsum(x, 0));
  NodeId c1 = ok(g.cumsum(x, -1));
  NodeId e = ok(g.pointwise(Op::Exp, {ok(g.cumsum(ok(g.transpose(x, 0, 1)), 1))}));
  g.set_outputs({c0, c1, e});
  check(g, {{6, 33}}, 1e-4);
}

TEST_CASE("cpu ops: an output over a matmul operand is written after the whole product") {
  // out = x @ w + 1 with out's buffer being w's: each row block of the product reads
  // all of w, so the add may not run block by block as the product's tasks finish
  // (4 blocks on the pool would overwrite rows that later blocks read).
  const int64_t n = 256;
  Graph g;
  NodeId x = g.placeholder(DType::Float32, {n, n});
  NodeId w = g.placeholder(DType::Float32, {n, n});
  g.set_outputs({ok(g.pointwise(Op::Add, {ok(g.matmul(x, w)), g.scalar(1.0)}))});
  auto compiled = backend().compile(g);
  REQUIRE(compiled);
  std::vector<float> xs(static_cast<size_t>(n * n)), ws(xs.size());
  for (size_t e = 0; e < xs.size(); ++e) {  // small integers: every sum is exact
    xs[e] = static_cast<float>(static_cast<int64_t>(e * 7 % 5) - 2);
    ws[e] = static_cast<float>(static_cast<int64_t>(e * 3 % 7) - 3);
  }
  std::vector<float> want(xs.size(), 1.0f);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t k = 0; k < n; ++k) {
      for (int64_t j = 0; j < n; ++j) want[static_cast<size_t>(i * n + j)] += xs[static_cast<size_t>(i * n + k)] * ws[static_cast<size_t>(k * n + j)];
    }
  }
  const Shape shape{n, n};
  const std::vector<int64_t> st{n, 1};
  std::vector<TensorArg> in{{xs.data(), shape.data(), st.data(), 2}, {ws.data(), shape.data(), st.data(), 2}};
  std::vector<TensorArg> out{{ws.data(), shape.data(), st.data(), 2}};
  REQUIRE((*compiled)->run(in, out) == 0);
  CHECK(ws == want);
}

TEST_CASE("lowering driver: a reduction read by two kernels gets a buffer, and the graph is lowered again") {
  // s = x.sum(1, keepdim): the [4, 1] output's kernel computes it first, so the
  // [4, 6] output's kernel may not compute it again.
  Graph g;
  NodeId x = g.placeholder(DType::Float32, {4, 6});
  NodeId s = ok(g.reduce(Op::Sum, x, {1}, true));
  g.set_outputs({ok(g.pointwise(Op::Add, {s, g.scalar(1.0)})), ok(g.pointwise(Op::Sub, {x, s}))});

  Schedule first = schedule_graph(g, "t");
  CHECK(first.buffer_of[static_cast<size_t>(s)] < 0);
  llvm::LLVMContext ctx;
  llvm::Module m("t", ctx);
  const LowerOutcome outcome = lower_schedule(g, first, {&m}, LowerOptions{});
  CHECK_FALSE(outcome.complete());
  CHECK(outcome.rematerialize == s);

  LoweredGraph per_kernel = lower_graph(g, "t", LowerOptions{}, ModuleLayout::PerKernel);
  CHECK(per_kernel.rescheduled == 1);
  CHECK(per_kernel.schedule.buffer_of[static_cast<size_t>(s)] >= 0);
  REQUIRE(per_kernel.modules.size() == per_kernel.schedule.kernels.size());
  for (size_t k = 0; k < per_kernel.modules.size(); ++k) {
    const llvm::Module& mk = *per_kernel.modules[k].module;
    CHECK(mk.getName() == per_kernel.schedule.kernels[k].symbol);
    CHECK(mk.getFunction(per_kernel.schedule.kernels[k].symbol) != nullptr);
    verify_kernels(mk, "test");
  }

  LoweredGraph single = lower_graph(g, "t", LowerOptions{}, ModuleLayout::Single, "one");
  REQUIRE(single.modules.size() == 1);
  CHECK(single.modules[0].module->getName() == "one");
  for (const KernelSpec& spec : single.schedule.kernels) CHECK(single.modules[0].module->getFunction(spec.symbol) != nullptr);
  CHECK(module_text(*single.modules[0].module).find("define void @t_k0(") != std::string::npos);

  CHECK(check(g, {{4, 6}}) == per_kernel.schedule.kernels.size());  // and the CPU runs it right
}
