// Shared by the autodiff doctests (test_autodiff*.cpp): dense tensors held as doubles,
// the CPU backend, and the check of a joint graph's gradients against central finite
// differences of the forward in float64.
#pragma once

#include <doctest.h>

#include <doctest.h>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "jit/autodiff/autodiff.h"
#include "jit/autodiff/differentiator.h"
#include "jit/cpu/cpu_backend.h"

using namespace fj::jit;

namespace {

// A dense row-major tensor, its elements held as doubles whatever its dtype.
struct Tensor {
  DType dtype = DType::Float64;
  Shape shape;
  std::vector<double> v;
};

int64_t count(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

Tensor random(const Shape& s, std::mt19937& rng, double lo = -1.5, double hi = 1.5) {
  std::uniform_real_distribution<double> dist(lo, hi);
  Tensor t{DType::Float64, s, {}};
  for (int64_t e = 0; e < count(s); ++e) t.v.push_back(dist(rng));
  return t;
}

// Random magnitudes in [lo, hi] with random signs: away from kinks at 0.
[[maybe_unused]] Tensor away_from_zero(const Shape& s, std::mt19937& rng, double lo = 0.2, double hi = 1.5) {
  Tensor t = random(s, rng, lo, hi);
  std::bernoulli_distribution sign;
  for (double& x : t.v) x = sign(rng) ? x : -x;
  return t;
}

// A typed buffer for one run.
struct Buffer {
  DType dtype;
  Shape shape;
  std::vector<int64_t> strides;
  std::vector<double> storage;  // 8 bytes per element: room for every dtype

  Buffer(DType d, Shape s) : dtype(d), shape(std::move(s)), strides(shape.size(), 1) {
    for (size_t k = shape.size(); k-- > 1;) strides[k - 1] = strides[k] * shape[k];
    storage.assign(static_cast<size_t>(count(shape)) + 1, 0.0);
  }
  void set(size_t i, double x) {
    void* p = storage.data();
    switch (dtype) {
      case DType::Bool: static_cast<uint8_t*>(p)[i] = x != 0; break;
      case DType::UInt8: static_cast<uint8_t*>(p)[i] = static_cast<uint8_t>(x); break;
      case DType::Int32: static_cast<int32_t*>(p)[i] = static_cast<int32_t>(x); break;
      case DType::Int64: static_cast<int64_t*>(p)[i] = static_cast<int64_t>(x); break;
      case DType::Float32: static_cast<float*>(p)[i] = static_cast<float>(x); break;
      case DType::Float64: static_cast<double*>(p)[i] = x; break;
    }
  }
  double get(size_t i) const {
    const void* p = storage.data();
    switch (dtype) {
      case DType::Bool: return static_cast<const uint8_t*>(p)[i];
      case DType::UInt8: return static_cast<const uint8_t*>(p)[i];
      case DType::Int32: return static_cast<const int32_t*>(p)[i];
      case DType::Int64: return static_cast<double>(static_cast<const int64_t*>(p)[i]);
      case DType::Float32: return static_cast<const float*>(p)[i];
      case DType::Float64: return static_cast<const double*>(p)[i];
    }
    return 0;
  }
  TensorArg arg() {
    return TensorArg{storage.data(), shape.data(), strides.data(), static_cast<int>(shape.size())};
  }
};

CpuBackend& backend() {
  static std::unique_ptr<CpuBackend> b = [] {
    auto r = CpuBackend::create();
    REQUIRE(r);
    return std::move(*r);
  }();
  return *b;
}

std::shared_ptr<CompiledGraph> compile(const Graph& g) {
  auto c = backend().compile(g);
  REQUIRE_MESSAGE(c, (c ? "" : c.error()));
  return *c;
}

Shape eval_shape(const SymShape& sym, const Bindings& b) {
  Shape s;
  for (const SymExpr& e : sym) {
    const auto v = e.eval(b);
    REQUIRE(v.has_value());
    s.push_back(std::get<int64_t>(*v));
  }
  return s;
}

// The values of g's scalar inputs: `user` for those of scalar_input(), in order;
// size scalars evaluated with the bindings (an int64 bit pattern, as runtime.cpp).
std::vector<double> scalar_values(const Graph& g, const std::vector<double>& user, const Bindings& b) {
  std::vector<double> out;
  size_t next = 0;
  for (size_t i = 0; i < g.num_scalar_inputs(); ++i) {
    const SymExpr& e = g.scalar_input_exprs()[i];
    if (e.is_null()) {
      REQUIRE(next < user.size());
      out.push_back(user[next++]);
      continue;
    }
    const auto v = e.eval(b);
    REQUIRE(v.has_value());
    const int64_t iv = std::get<int64_t>(*v);
    double d;
    std::memcpy(&d, &iv, sizeof d);
    out.push_back(d);
  }
  return out;
}

std::vector<Tensor> run(const Graph& g, const CompiledGraph& c, const std::vector<Tensor>& inputs,
                        const std::vector<double>& user_scalars, const Bindings& b) {
  std::vector<Buffer> ins, outs;
  std::vector<TensorArg> in_args, out_args;
  ins.reserve(inputs.size());
  for (const Node& n : g.nodes()) {
    if (n.op != Op::Placeholder) continue;
    const Tensor& t = inputs.at(static_cast<size_t>(n.index));
    REQUIRE(static_cast<size_t>(n.index) == ins.size());
    ins.emplace_back(n.dtype, t.shape);
    for (size_t e = 0; e < t.v.size(); ++e) ins.back().set(e, t.v[e]);
  }
  outs.reserve(g.outputs().size());
  for (NodeId o : g.outputs()) outs.emplace_back(g.node(o).dtype, eval_shape(g.node(o).sym, b));
  for (Buffer& x : ins) in_args.push_back(x.arg());
  for (Buffer& x : outs) out_args.push_back(x.arg());
  const std::vector<double> scalars = scalar_values(g, user_scalars, b);
  REQUIRE(c.run(in_args, out_args, scalars.empty() ? nullptr : scalars.data(), &b) == 0);
  std::vector<Tensor> result;
  for (const Buffer& x : outs) {
    Tensor t{x.dtype, x.shape, {}};
    for (int64_t e = 0; e < count(x.shape); ++e) t.v.push_back(x.get(static_cast<size_t>(e)));
    result.push_back(std::move(t));
  }
  return result;
}

NodeId ok(fj::Expected<NodeId> e) {
  REQUIRE_MESSAGE(e, (e ? "" : e.error()));
  return *e;
}

Joint joint_of(const Graph& g, const std::vector<bool>& rg) {
  auto j = differentiate(g, rg);
  REQUIRE_MESSAGE(j, (j ? "" : j.error()));
  return std::move(*j);
}

// The gradients of sum_k <out_k, weight_k> with respect to grad_inputs from the
// joint pair, with seeds `weights` (one per forward output).
struct GradRun {
  Joint joint;
  std::vector<Tensor> grads;
};

GradRun backward_grads(const Graph& g, const std::vector<Tensor>& inputs, const std::vector<bool>& rg,
                       const std::vector<Tensor>& weights, const std::vector<double>& user_scalars,
                       const Bindings& b) {
  GradRun r{joint_of(g, rg), {}};
  const Joint& j = r.joint;
  CHECK(j.forward.outputs().size() == j.num_outputs + j.saved.size());
  CHECK(j.backward.num_inputs() == j.saved.size() + j.num_outputs);
  CHECK(j.backward.num_scalar_inputs() == g.num_scalar_inputs());
  auto fw = compile(j.forward);
  auto bw = compile(j.backward);
  const std::vector<Tensor> outs = run(j.forward, *fw, inputs, user_scalars, b);
  std::vector<Tensor> bw_in(outs.begin() + static_cast<long>(j.num_outputs), outs.end());
  bw_in.insert(bw_in.end(), weights.begin(), weights.end());
  r.grads = run(j.backward, *bw, bw_in, user_scalars, b);
  REQUIRE(r.grads.size() == j.grad_inputs.size());
  return r;
}

struct GradOptions {
  double h = 1e-6;
  double tol = 1e-6;
  std::vector<double> scalars;  // values of the scalar_input()s
  Bindings bindings;            // for symbolic shapes
  uint32_t seed = 11;
};

// Checks the backward's gradients against central differences of the forward, for
// the loss sum_k <out_k, w_k> with random w_k. Returns the joint pair.
Joint check_grads(const Graph& g, std::vector<Tensor> inputs, const std::vector<bool>& rg,
                  const GradOptions& opt = {}) {
  std::mt19937 rng(opt.seed);
  std::vector<Tensor> weights;
  for (NodeId o : g.outputs()) {
    Tensor w = random(eval_shape(g.node(o).sym, opt.bindings), rng);
    w.dtype = g.node(o).dtype;
    weights.push_back(std::move(w));
  }
  GradRun r = backward_grads(g, inputs, rg, weights, opt.scalars, opt.bindings);
  auto fw = compile(g);
  auto loss = [&](const std::vector<Tensor>& xs) {
    const std::vector<Tensor> outs = run(g, *fw, xs, opt.scalars, opt.bindings);
    double l = 0;
    for (size_t k = 0; k < outs.size(); ++k) {
      if (!is_floating(outs[k].dtype)) continue;
      for (size_t e = 0; e < outs[k].v.size(); ++e) l += outs[k].v[e] * weights[k].v[e];
    }
    return l;
  };
  size_t checked = 0;
  for (size_t q = 0; q < r.joint.grad_inputs.size(); ++q) {
    const size_t p = static_cast<size_t>(r.joint.grad_inputs[q]);
    const Tensor& grad = r.grads[q];
    REQUIRE(grad.v.size() == inputs[p].v.size());
    for (size_t e = 0; e < inputs[p].v.size(); ++e) {
      const double x0 = inputs[p].v[e];
      inputs[p].v[e] = x0 + opt.h;
      const double up = loss(inputs);
      inputs[p].v[e] = x0 - opt.h;
      const double down = loss(inputs);
      inputs[p].v[e] = x0;
      const double fd = (up - down) / (2 * opt.h);
      CAPTURE(p);
      CAPTURE(e);
      CAPTURE(fd);
      CAPTURE(grad.v[e]);
      CHECK(std::fabs(fd - grad.v[e]) <= opt.tol * (1 + std::fabs(fd)));
      ++checked;
    }
  }
  CHECK(checked > 0);
  return std::move(r.joint);
}

const SymExpr kS0 = SymExpr::symbol(0, SymType::Int, 2);

}  // namespace
