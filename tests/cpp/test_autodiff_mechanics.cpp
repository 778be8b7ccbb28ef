// Autodiff mechanics (jit/autodiff/autodiff.h) rather than op rules: ops without a
// rule, unused inputs and repeated outputs, no_grad nodes and custom fragments,
// random extern nodes saved for the backward, and clone_node.
#include "autodiff_check.h"

TEST_CASE("autodiff: embedding gathers and sums repeated rows; ops without a rule are an error") {
  std::mt19937 rng(29);
  Graph g;
  NodeId w = g.placeholder(DType::Float64, {10, 4});
  NodeId ids = g.placeholder(DType::Int64, {2, 3});
  NodeId emb = ok(g.index_select(w, 0, ids));
  g.set_outputs({emb});
  Joint je = check_grads(g, {random({10, 4}, rng), Tensor{DType::Int64, {2, 3}, {1, 7, 1, 0, 9, 1}}}, {true, true});
  CHECK(je.grad_inputs == std::vector<int32_t>{0});  // integer indices get no gradient
  // Only the indices asked: nothing flows, and no gradient is returned.
  auto j = differentiate(g, {false, true});
  REQUIRE(j);
  CHECK(j->grad_inputs.empty());

  Graph p;
  NodeId x = p.placeholder(DType::Float64, {4, 6});
  p.set_outputs({ok(p.reduce(Op::Prod, x, {1}, false))});
  auto prod = differentiate(p, {true});
  REQUIRE_FALSE(prod);
  CHECK(prod.error() == "autodiff: no gradient rule for aten.prod.dim_int");

  Graph s;
  NodeId z = s.placeholder(DType::Float64, {4, 6});
  s.set_outputs({ok(s.slice(z, 1, SymExpr::integer(0), SymExpr::integer(3), 2))});
  auto strided = differentiate(s, {true});
  REQUIRE_FALSE(strided);
  CHECK(strided.error() == "autodiff: no gradient rule for aten.slice.Tensor");
}

TEST_CASE("autodiff: an unused input gets zeros; an output may be an input; repeated outputs add") {
  std::mt19937 rng(17);
  Graph g;
  NodeId x = g.placeholder(DType::Float64, {2, 3});
  g.placeholder(DType::Float64, {3});  // unused
  NodeId e = ok(g.pointwise(Op::Exp, {x}));
  g.set_outputs({e, x, e});
  Joint j = check_grads(g, {random({2, 3}, rng), random({3}, rng)}, {true, true});
  REQUIRE(j.grad_inputs == std::vector<int32_t>{0, 1});
  CHECK(j.saved.size() == 1);  // x, to recompute exp(x)
}

TEST_CASE("autodiff: nodes recorded under no_grad stop gradients; a custom fragment replaces the rules") {
  std::mt19937 rng(23);
  Graph g;
  NodeId x = g.placeholder(DType::Float64, {4});
  NodeId a = ok(g.pointwise(Op::Exp, {x}));
  NodeId b = ok(g.pointwise(Op::Sin, {x}));  // under no_grad: a constant for autograd
  NodeId y = ok(g.pointwise(Op::Mul, {a, b}));
  // A custom Function whose forward computed x * 3 and whose backward claims 5 * grad.
  NodeId c = ok(g.pointwise(Op::Mul, {x, g.scalar(3.0)}));
  NodeId result = ok(g.alias(c));
  NodeId out = ok(g.pointwise(Op::Add, {result, y}));
  g.set_outputs({out});
  DiffOptions opts;
  opts.no_grad.assign(g.size(), false);
  opts.no_grad[static_cast<size_t>(b)] = true;
  opts.no_grad[static_cast<size_t>(c)] = true;  // the forward ran with grad mode off
  CustomGrad custom;
  NodeId gy = custom.fragment.placeholder(DType::Float64, {4});
  custom.fragment.set_outputs({ok(custom.fragment.pointwise(Op::Mul, {gy, custom.fragment.scalar(5.0)}))});
  custom.outputs = {result};
  custom.inputs = {x};
  opts.customs.push_back(std::move(custom));
  auto j = differentiate(g, {true}, opts);
  REQUIRE_MESSAGE(j, (j ? "" : j.error()));
  REQUIRE(j->grad_inputs == std::vector<int32_t>{0});
  CHECK(j->grad_defined == std::vector<bool>{true});
  CHECK(j->output_needs_grad == std::vector<bool>{true});
  const Tensor xv = random({4}, rng), w = random({4}, rng);
  auto fw = compile(j->forward);
  auto bw = compile(j->backward);
  const Bindings none;
  const std::vector<Tensor> outs = run(j->forward, *fw, {xv}, {}, none);
  std::vector<Tensor> bw_in(outs.begin() + static_cast<long>(j->num_outputs), outs.end());
  bw_in.push_back(w);
  const std::vector<Tensor> grads = run(j->backward, *bw, bw_in, {}, none);
  for (size_t e = 0; e < 4; ++e) {
    const double expected = 5 * w.v[e] + w.v[e] * std::sin(xv.v[e]) * std::exp(xv.v[e]);
    CHECK(grads[0].v[e] == doctest::Approx(expected).epsilon(1e-12));
  }
  // Everything under no_grad: no output needs a gradient.
  opts.no_grad.assign(g.size(), true);
  opts.customs.clear();
  auto none_needed = differentiate(g, {true}, opts);
  REQUIRE(none_needed);
  CHECK(none_needed->output_needs_grad == std::vector<bool>{false});
  CHECK(none_needed->grad_defined == std::vector<bool>{false});
}

// A stand-in for dropout's noise: each run "draws" the next numbers of a counter.
class CountingDraw final : public ExternFn {
 public:
  const std::string& name() const override { return name_; }
  const std::string& key() const override { return name_; }
  std::shared_ptr<const ExternFn> vjp(const std::vector<size_t>&) const override { return nullptr; }
  bool random() const override { return true; }
  bool run(const std::vector<ExternArg>&, const ExternArg& result) const noexcept override {
    auto* out = static_cast<double*>(result.data);
    for (int64_t e = 0; e < result.sizes[0]; ++e) out[e * result.strides[0]] = static_cast<double>(++draws);
    return true;
  }
  mutable int draws = 0;

 private:
  std::string name_ = "counting_draw";
};

TEST_CASE("autodiff: a random extern node is saved, never drawn again in the backward") {
  std::mt19937 rng(31);
  Graph g;
  NodeId x = g.placeholder(DType::Float64, {4});
  auto draw = std::make_shared<CountingDraw>();
  NodeId noise = ok(g.extern_call(draw, {}, DType::Float64, {SymExpr::integer(4)}));
  NodeId y = ok(g.pointwise(Op::Mul, {ok(g.pointwise(Op::Exp, {x})), noise}));
  g.set_outputs({y});
  DiffOptions opts;
  opts.no_grad.assign(g.size(), false);
  opts.no_grad[static_cast<size_t>(noise)] = true;  // as the tracer records random draws
  auto j = differentiate(g, {true}, opts);
  REQUIRE_MESSAGE(j, (j ? "" : j.error()));
  CHECK(std::find(j->saved.begin(), j->saved.end(), noise) != j->saved.end());
  for (const Node& n : j->backward.nodes()) CHECK(n.op != Op::ExternCall);
  const Tensor xv = random({4}, rng), w = random({4}, rng);
  auto fw = compile(j->forward);
  auto bw = compile(j->backward);
  const Bindings none;
  const std::vector<Tensor> outs = run(j->forward, *fw, {xv}, {}, none);
  CHECK(draw->draws == 4);
  std::vector<Tensor> bw_in(outs.begin() + static_cast<long>(j->num_outputs), outs.end());
  bw_in.push_back(w);
  const std::vector<Tensor> grads = run(j->backward, *bw, bw_in, {}, none);
  CHECK(draw->draws == 4);  // the backward read the saved noise
  for (size_t e = 0; e < 4; ++e) {
    CHECK(grads[0].v[e] == doctest::Approx(w.v[e] * std::exp(xv.v[e]) * static_cast<double>(e + 1)).epsilon(1e-12));
  }
}

TEST_CASE("autodiff: clone_node rebuilds every op as its builder made it") {
  Graph g;
  const NodeId x = g.placeholder(DType::Float64, {3, 4});
  const NodeId b = g.placeholder(DType::Bool, {3, 4});
  const NodeId i = g.placeholder(DType::Int64, {3, 4});
  const NodeId idx = g.placeholder(DType::Int64, {2});
  const NodeId one = g.placeholder(DType::Float64, {1});
  const NodeId s = g.scalar_input();
  const NodeId two = g.scalar(2.0), three = g.scalar_int(3), yes = g.scalar(1, ScalarKind::Bool);
  // Every pointwise op whose operands are all tensors, on the first of float64, int64
  // and bool that it accepts (so a new pointwise op is covered without a line here).
  for (size_t k = 0; k < autodiff_detail::kNumOps; ++k) {
    const Op op = static_cast<Op>(k);
    const std::string_view kinds = op_operands(op);
    if (op_family(op) != Family::Pointwise || op == Op::Cast || kinds.find('S') != kinds.npos) continue;
    if (kinds.size() > 2) continue;  // where, masked_fill: below, with operands of their own
    bool built = false;
    for (NodeId v : {x, i, b}) {
      if (!built) built = static_cast<bool>(g.pointwise(op, std::vector<NodeId>(kinds.size(), v)));
    }
    CAPTURE(op_name(op));
    CHECK(built);
  }
  ok(g.pointwise(Op::PowScalar, {x, s}));
  ok(g.pointwise(Op::Softplus, {x, two, g.scalar(20.0)}));
  ok(g.pointwise(Op::Clamp, {x, g.scalar(-1.0), two}));
  ok(g.pointwise(Op::ClampMin, {x, three}));
  ok(g.pointwise(Op::ClampMax, {x, yes}));
  ok(g.pointwise(Op::Where, {b, x, two}));
  ok(g.pointwise(Op::MaskedFill, {x, b, two}));
  ok(g.cast(x, DType::Float32));
  for (Op op : {Op::Sum, Op::Prod, Op::Amax, Op::Amin, Op::ArgMax, Op::ArgMin}) ok(g.reduce(op, x, {1}, false));
  ok(g.reduce(Op::Sum, i, {0}, true, DType::Float64));
  ok(g.reduce(Op::Any, b, {0, 1}, false));
  ok(g.reduce(Op::All, b, {1}, true));
  ok(g.cumsum(x, 1));
  ok(g.permute(x, {1, 0}));
  ok(g.reshape(x, {SymExpr::integer(12)}));
  ok(g.expand(one, {SymExpr::integer(5), SymExpr::integer(1)}));
  ok(g.slice(x, 1, SymExpr::integer(1), SymExpr::integer(2), 1));
  ok(g.select(x, 0, SymExpr::integer(2)));
  ok(g.flip(x, {0, 1}));
  ok(g.cat({x, x}, 0));
  ok(g.slice_scatter(x, ok(g.slice(x, 1, SymExpr::integer(0), SymExpr::integer(2), 2)), 1, SymExpr::integer(0), 2));
  ok(g.index_select(x, 0, idx, true));
  ok(g.gather(x, 1, i));
  const NodeId filled = ok(g.full({SymExpr::integer(3)}, s, DType::Float64));
  ok(g.iota({SymExpr::integer(3), SymExpr::integer(4)}, 1));
  ok(g.item(one, ScalarKind::Int));
  ok(g.item(one, ScalarKind::Bool));
  const NodeId f = ok(g.item(one, ScalarKind::Float));
  ok(g.pointwise(Op::Mul, {filled, f}));
  ok(g.matmul(x, ok(g.permute(x, {1, 0}))));
  ok(g.extern_call(nullptr, {x}, DType::Float64, SymShape(g.node(x).sym)));
  g.set_outputs({filled});

  std::vector<bool> seen(autodiff_detail::kNumOps, false);
  Graph h;
  std::vector<NodeId> map;
  for (const Node& n : g.nodes()) {
    seen[static_cast<size_t>(n.op)] = true;
    if (n.op == Op::Placeholder) {
      map.push_back(h.placeholder(n.dtype, *concrete(n.sym)));
    } else if (n.op == Op::ScalarInput) {
      map.push_back(h.scalar_input(n.scalar_kind));
    } else {
      std::vector<NodeId> in;
      for (NodeId q : n.inputs) in.push_back(map[static_cast<size_t>(q)]);
      map.push_back(ok(clone_node(h, n, in)));
    }
  }
  h.set_outputs({map[static_cast<size_t>(filled)]});
  CHECK(h.str() == g.str());
  CHECK(h.structural_key() == g.structural_key());
  for (size_t k = 0; k < seen.size(); ++k) {
    CAPTURE(op_name(static_cast<Op>(k)));
    CHECK(seen[k]);  // every op of jit/ir/ops.def is built above
  }
}
