// The graphs the CUDA backend is checked on: PTX through ptxas in
// tests/cpp/test_nvptx.cpp, and on a GPU through scripts/gpu-check's bundle
// (tests/gpu/bundle.cpp). Each is built for concrete sizes, some given as symbols
// (bound at run time) so that one PTX serves both the check and the benchmark.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "jit/ir/graph.h"

namespace fj::gpu_graphs {

using namespace fj::jit;

inline NodeId ok(Expected<NodeId> r) {
  FJ_CHECK(static_cast<bool>(r), r ? std::string() : r.error());
  return *r;
}

// A placeholder whose sizes are symbols first_symbol, first_symbol + 1, ... (>= 2).
inline NodeId sym_input(Graph& g, DType dt, const Shape& shape, int first_symbol = 0) {
  SymShape sym;
  for (size_t d = 0; d < shape.size(); ++d) {
    sym.push_back(SymExpr::symbol(first_symbol + static_cast<int>(d), SymType::Int, 2));
  }
  return g.placeholder(dt, shape, sym);
}

struct GraphCase {
  std::string name;
  std::function<Graph(const Shape&)> build;  // the graph for sizes `shape`
  Shape check_shape;                         // sizes of the correctness check
  Shape bench_shape;                         // sizes of the benchmark ({}: none)
};

// 8 pointwise ops over one float32 tensor: x -> ((((x*1.5+0.25).relu()-1).abs()...
inline Graph pointwise_chain(const Shape& s) {
  Graph g;
  NodeId x = sym_input(g, DType::Float32, s);
  NodeId v = ok(g.pointwise(Op::Mul, {x, g.scalar(1.5)}));
  v = ok(g.pointwise(Op::Add, {v, g.scalar(0.25)}));
  v = ok(g.pointwise(Op::Relu, {v}));
  v = ok(g.pointwise(Op::Sub, {v, g.scalar(1.0)}));
  v = ok(g.pointwise(Op::Abs, {v}));
  v = ok(g.pointwise(Op::Mul, {v, x}));
  v = ok(g.pointwise(Op::Sigmoid, {v}));
  v = ok(g.pointwise(Op::Add, {v, x}));
  g.set_outputs({v});
  return g;
}

// int64 [n, 1] + float32 [m] -> float32 [n, m]; also an int32 * 3 result.
inline Graph broadcast_mix(const Shape& s) {
  Graph g;
  NodeId a = g.placeholder(DType::Int64, {s[0], 1});
  NodeId b = g.placeholder(DType::Float32, {s[1]});
  NodeId c = g.placeholder(DType::Int32, {s[0], s[1]});
  NodeId sum = ok(g.pointwise(Op::Add, {a, b}));
  NodeId prod = ok(g.pointwise(Op::Mul, {c, g.scalar_int(3)}));
  NodeId mixed = ok(g.pointwise(Op::Div, {prod, sum}));
  g.set_outputs({sum, prod, mixed});
  return g;
}

inline Graph softmax_rows(const Shape& s) {
  Graph g;
  NodeId x = sym_input(g, DType::Float32, s);
  g.set_outputs({ok(g.softmax(x, 1, false))});
  return g;
}

inline Graph layer_norm_gelu(const Shape& s) {
  Graph g;
  NodeId x = g.placeholder(DType::Float32, s);
  NodeId w = g.placeholder(DType::Float32, {s[1]});
  NodeId b = g.placeholder(DType::Float32, {s[1]});
  NodeId ln = ok(g.layer_norm(x, 1, w, b, 1e-5));
  g.set_outputs({ok(g.pointwise(Op::Gelu, {ln}))});
  return g;
}

inline Graph reductions(const Shape& s) {
  Graph g;
  NodeId x = g.placeholder(DType::Float32, s);
  NodeId rows = ok(g.reduce(Op::Sum, x, {1}, false));
  NodeId cols = ok(g.mean(x, {0}, true));
  NodeId all = ok(g.reduce(Op::Sum, x, {}, false));
  NodeId mx = ok(g.reduce(Op::Amax, x, {-1}, false));
  NodeId am = ok(g.reduce(Op::ArgMax, x, {1}, false));
  NodeId centered = ok(g.pointwise(Op::Sub, {x, cols}));
  g.set_outputs({rows, cols, all, mx, am, centered});
  return g;
}

inline Graph erf_pow_where(const Shape& s) {
  Graph g;
  NodeId x = g.placeholder(DType::Float32, s);
  NodeId y = g.placeholder(DType::Float32, s);
  NodeId e = ok(g.pointwise(Op::Erf, {x}));
  NodeId p = ok(g.pointwise(Op::Pow, {ok(g.pointwise(Op::Abs, {x})), y}));
  NodeId ps = ok(g.pointwise(Op::PowScalar, {x, g.scalar(3.0)}));
  NodeId w = ok(g.pointwise(Op::Where, {ok(g.pointwise(Op::Gt, {x, y})), e, p}));
  NodeId m1 = ok(g.pointwise(Op::Expm1, {y}));
  NodeId l1 = ok(g.pointwise(Op::Log1p, {ok(g.pointwise(Op::Abs, {y}))}));
  NodeId tr = ok(g.pointwise(Op::Add, {ok(g.pointwise(Op::Sin, {x})), ok(g.pointwise(Op::Tanh, {y}))}));
  g.set_outputs({w, ps, m1, l1, tr});
  return g;
}

inline Graph views(const Shape& s) {
  Graph g;
  NodeId x = g.placeholder(DType::Float32, s);
  NodeId e = ok(g.pointwise(Op::Exp, {x}));
  NodeId t = ok(g.transpose(e, 0, 1));
  NodeId r = ok(g.reshape(t, {SymExpr::integer(-1)}));
  NodeId fl = ok(g.flip(x, {0}));
  NodeId ca = ok(g.cat({x, fl}, 1));
  g.set_outputs({r, ca});
  return g;
}

inline std::vector<GraphCase> all_cases() {
  return {
      {"pointwise_chain", pointwise_chain, {100003}, {1 << 24}},
      {"broadcast_mix", broadcast_mix, {37, 129}, {}},
      {"softmax", softmax_rows, {67, 513}, {1 << 15, 1024}},
      {"layer_norm_gelu", layer_norm_gelu, {33, 256}, {}},
      {"reductions", reductions, {45, 77}, {}},
      {"erf_pow_where", erf_pow_where, {3001}, {}},
      {"views", views, {13, 17}, {}},
  };
}

}  // namespace fj::gpu_graphs
