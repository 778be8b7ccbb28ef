// Autograd while tracing: the grad mode of each recorded node, the joint forward /
// backward compile of a graph whose inputs require grad, and custom
// torch.autograd.Functions (forward traced into the graph with grad mode off, as
// eager runs it; backward traced into a fragment that differentiate() instantiates).
//
// Design: a custom Function's ctx is a symbolic object of the trace (Value::ctx, an
// AutogradCtx here): attributes set on it are the Values they were (a SymFloat stays
// a symbol, so the backward reads it as a scalar input and a new value does not
// recompile), save_for_backward keeps Values, and the backward reads tensors of the
// forward through fragment placeholders (`captured`), which differentiate() maps to
// saved or recomputed forward values. Each tensor result of the Function becomes a
// distinct alias node of the graph, so its gradient comes from the fragment and
// never from the rules of what the forward recorded.
#include <algorithm>
#include <functional>

#include "interp/runtime/autograd.h"
#include "interp/trace/interpreter.h"
#include "interp/runtime/resources.h"
#include "interp/trace/tracer.h"
#include "jit/cpu/cpu_backend.h"
#include "jit/log.h"

namespace fj::interp {
namespace {

PyObject* g_function_type = nullptr;   // torch.autograd.Function
PyObject* g_function_apply = nullptr;       // torch 2.13: the function under Function.apply (a classmethod)
const PyMethodDef* g_apply_def = nullptr;   // torch 2.14: Function.apply is a C classmethod: its method def
PyObject* g_setup_context = nullptr;   // Function.setup_context, not overridden by classic Functions
PyObject* g_vjp = nullptr;             // Function.vjp
PyObject* g_once_code = nullptr;       // the code of torch's once_differentiable wrapper

bool is_function_class(PyObject* o) {
  return g_function_type != nullptr && PyType_Check(o) && o != g_function_type &&
         PyType_IsSubtype(reinterpret_cast<PyTypeObject*>(o), reinterpret_cast<PyTypeObject*>(g_function_type));
}

// The Function subclass whose inherited apply `callable` is (Cls.apply, bound to Cls:
// a method over a Python function, or a builtin method over C's), or nullptr.
PyObject* apply_class(PyObject* callable) {
  PyObject* cls = nullptr;
  if (PyMethod_Check(callable) && g_function_apply != nullptr && PyMethod_GET_FUNCTION(callable) == g_function_apply) {
    cls = PyMethod_GET_SELF(callable);
  } else if (PyCFunction_Check(callable) && g_apply_def != nullptr &&
             reinterpret_cast<PyCFunctionObject*>(callable)->m_ml == g_apply_def) {
    cls = PyCFunction_GET_SELF(callable);
  }
  return cls != nullptr && is_function_class(cls) ? cls : nullptr;
}

// cls.<name> as a plain function (a staticmethod's), or nullptr.
PyRef class_function(PyObject* cls, const char* name) {
  PyRef f = PyRef::steal(PyObject_GetAttrString(cls, name));
  if (!f) guards::clear_error();
  return f && PyFunction_Check(f.get()) ? f : PyRef();
}

jit::Shape traced_shape(const jit::SymShape& sym, const jit::Bindings& hints) {
  jit::Shape shape;
  for (const jit::SymExpr& e : sym) {
    const auto v = e.eval(hints);
    shape.push_back(v && v->index() == 0 ? std::get<int64_t>(*v) : 0);
  }
  return shape;
}

}  // namespace

void set_once_differentiable_code(PyObject* code) { Py_XSETREF(g_once_code, Py_NewRef(code)); }

void set_autograd_function(PyObject* function_type, PyObject* apply, PyObject* setup_context) {
  Py_XSETREF(g_function_type, Py_NewRef(function_type));
  if (PyMethod_Check(apply)) Py_XSETREF(g_function_apply, Py_NewRef(PyMethod_GET_FUNCTION(apply)));
  if (PyCFunction_Check(apply)) g_apply_def = reinterpret_cast<PyCFunctionObject*>(apply)->m_ml;
  Py_XSETREF(g_setup_context, Py_NewRef(setup_context));
  PyObject* vjp = PyObject_GetAttrString(function_type, "vjp");
  if (vjp == nullptr) guards::clear_error();
  Py_XSETREF(g_vjp, vjp);
}

// ---- grad mode per node ----

void Tracer::note_grad_mode(size_t first_node) {
  if (node_grad_.size() < graph_.size()) node_grad_.resize(graph_.size(), -1);
  for (size_t i = first_node; i < graph_.size(); ++i) {
    if (node_grad_[i] < 0) node_grad_[i] = grad_enabled_ ? 1 : 0;
  }
}

void Tracer::record_without_grad(jit::NodeId n) {
  if (node_grad_.size() <= static_cast<size_t>(n)) node_grad_.resize(static_cast<size_t>(n) + 1, -1);
  node_grad_[static_cast<size_t>(n)] = 0;
}

bool Tracer::node_needs_grad(jit::NodeId target) const {
  std::vector<bool> needs(static_cast<size_t>(target) + 1, false);
  for (size_t id = 0; id <= static_cast<size_t>(target); ++id) {
    const jit::Node& n = graph_.node(static_cast<jit::NodeId>(id));
    if (jit::is_python_scalar(n) || !jit::is_floating(n.dtype)) continue;
    if (n.op == jit::Op::Placeholder) {
      const auto p = static_cast<size_t>(n.index);
      needs[id] = p < placeholder_requires_grad_.size() && placeholder_requires_grad_[p];
      continue;
    }
    const int8_t mode = id < node_grad_.size() ? node_grad_[id] : -1;
    if (mode == 0 || (mode < 0 && !grad_enabled_)) continue;
    const std::vector<jit::NodeId>* from = &n.inputs;
    for (const auto& [m, k] : markers_) {
      if (m == static_cast<jit::NodeId>(id)) from = &customs_[k].inputs;
    }
    for (jit::NodeId x : *from) needs[id] = needs[id] || needs[static_cast<size_t>(x)];
  }
  return needs[static_cast<size_t>(target)];
}

// ---- the joint compile ----

Status Tracer::compile_joint(bool* joint) {
  *joint = false;
  if (!plan_->steps.empty() || continuation_ || plan_ != &entry_->plan) {
    return unsupported("autograd in a frame with graph breaks (not supported yet)");
  }
  jit::DiffOptions options;
  options.no_grad.assign(graph_.size(), false);
  for (size_t i = 0; i < graph_.size(); ++i) {
    const int8_t mode = i < node_grad_.size() ? node_grad_[i] : -1;
    options.no_grad[i] = mode == 0 || (mode < 0 && !grad_enabled_);
  }
  options.customs = customs_;
  std::vector<bool> requires_grad = placeholder_requires_grad_;
  requires_grad.resize(graph_.num_inputs(), false);
  auto j = jit::differentiate(graph_, requires_grad, options);
  if (!j) return unsupported(j.error());
  if (std::none_of(j->output_needs_grad.begin(), j->output_needs_grad.end(), [](bool b) { return b; })) return ok();
  FJ_TRY(check_joint_writes(*j));

  auto jp = std::make_shared<JointPlan>();
  const std::vector<jit::NodeId> outputs = graph_.outputs();
  std::vector<jit::NodeId> forward_outputs = outputs;
  std::vector<jit::NodeId> extra;
  for (jit::NodeId s : j->saved) {
    const jit::Node& n = graph_.node(s);
    if (n.op == jit::Op::Placeholder) {
      jp->saved.push_back({true, n.index});
      continue;
    }
    const auto at = std::find(forward_outputs.begin(), forward_outputs.end(), s);
    if (at == forward_outputs.end()) {
      forward_outputs.push_back(s);
      extra.push_back(s);
    }
    jp->saved.push_back({false, static_cast<int>(std::find(forward_outputs.begin(), forward_outputs.end(), s) -
                                                 forward_outputs.begin())});
  }
  graph_.set_outputs(forward_outputs);
  FJ_TRY(seal_outputs(extra, &plan_->outputs));
  entry_->graph_text = graph_.str();
  entry_->graph = std::make_shared<const jit::Graph>(graph_);
  FJ_TRY(compile_graph(&plan_->graph));

  // The backward's builders may assume size equalities too: they hold where the
  // forward's do, and are guarded the same way.
  const jit::Graph& bw = j->backward;
  for (const jit::SymExpr& a : bw.assumptions()) {
    const auto v = a.eval(hints_);
    if (!v || !std::holds_alternative<bool>(*v) || !std::get<bool>(*v)) {
      return unsupported("the backward assumes sizes that do not hold: " + readable(a));
    }
    guards().add_expr(a, readable(a));
  }
  if (!bw.scalar_ranges().empty()) return unsupported("a backward with range-checked scalar operands (not supported yet)");
  if (log::enabled(log::Channel::Graph)) {
    log::interp().info("backward graph of {}:\n{}", guards::utf8_lossy(st_.code->co_qualname), bw.str());
  }
  Expected<std::shared_ptr<jit::CompiledGraph>> compiled = compile_on_cpu(bw, "the backward graph");
  if (compiled.failed()) return compiled.take_error();

  jp->forward = plan_->graph;
  jp->backward = *compiled;
  jp->num_outputs = outputs.size();
  jp->forward_outputs = plan_->outputs;
  jp->differentiable = j->output_needs_grad;
  jp->num_inputs = placeholder_slot_.size();
  jp->grad_inputs = j->grad_inputs;
  jp->grad_defined = j->grad_defined;
  for (jit::NodeId o : bw.outputs()) jp->grads.push_back(output_spec(bw.node(o)));
  jp->enable_grad = !grad_at_entry_;
  entry_->backward_text = bw.str();
  plan_->joint = std::move(jp);
  *joint = true;
  return ok();
}

// Inputs written in place (plan_->writes) are copied into after the joint forward
// returns, outside autograd: that is eager's result only where the new value does not
// require grad (eager would give the input a grad_fn) and the backward does not read
// the input's old value (eager's saved-tensor check would raise, or the value read
// would be the new one).
Status Tracer::check_joint_writes(const jit::Joint& j) {
  for (const WriteBack& w : plan_->writes) {
    const auto o = static_cast<size_t>(w.output);
    if (o < j.output_needs_grad.size() && j.output_needs_grad[o]) {
      return unsupported("an in-place update of an input with a value that requires grad (not supported yet)");
    }
    for (jit::NodeId s : j.saved) {
      const jit::Node& n = graph_.node(s);
      if (n.op != jit::Op::Placeholder) continue;
      const InputRef ref = placeholder_slot_[static_cast<size_t>(n.index)];
      if (ref.kind == w.target.kind && ref.index == w.target.index) {
        return unsupported("the backward reads an input that the frame updates in place (not supported yet)");
      }
    }
  }
  return ok();
}

// ---- custom autograd.Function ----

void Tracer::swap_graph_state(GraphState& o) {
  std::swap(graph_, o.graph);
  std::swap(noncontig_, o.noncontig);
  std::swap(synced_scalars_, o.synced_scalars);
  std::swap(placeholder_slot_, o.slots);
  std::swap(scalar_nodes_, o.scalar_nodes);
  std::swap(plan_->scalar_inputs, o.scalar_inputs);
  std::swap(placeholder_requires_grad_, o.requires_grad);
  std::swap(node_grad_, o.node_grad);
}

std::optional<Status> Tracer::autograd_attr(const Value& owner, const std::string& name, bool method) {
  if (owner.kind != ValueKind::Const) return std::nullopt;
  if (owner.ctx >= 0 && owner.method.empty()) {
    AutogradCtx& c = ctxs_[static_cast<size_t>(owner.ctx)];
    static const char* kMethods[] = {"save_for_backward", "mark_non_differentiable", "set_materialize_grads", "mark_dirty"};
    const bool is_method = std::any_of(std::begin(kMethods), std::end(kMethods), [&](const char* m) { return name == m; });
    if (method) push(Value::null());
    if (is_method) {
      Value m = owner;
      m.method = name;
      push(std::move(m));
      return ok();
    }
    if (name == "needs_input_grad") {
      std::vector<Value> items;
      for (bool b : c.needs_input_grad) items.push_back(Value::constant(PyRef::borrow(b ? Py_True : Py_False)));
      push(Value::sequence(ValueKind::Tuple, std::move(items)));
      return ok();
    }
    if (name == "saved_tensors") {
      if (!c.in_backward) {
        return unsupported("ctx.saved_tensors outside backward (not supported yet)");
      }
      std::vector<Value> items;
      for (const Value& v : c.saved) {
        Value f;
        FJ_TRY(to_fragment(static_cast<size_t>(owner.ctx), v, &f));
        items.push_back(std::move(f));
      }
      push(Value::sequence(ValueKind::Tuple, std::move(items)));
      return ok();
    }
    for (auto it = c.attrs.rbegin(); it != c.attrs.rend(); ++it) {
      if (it->first != name) continue;
      Value v = it->second;
      if (c.in_backward) FJ_TRY(to_fragment(static_cast<size_t>(owner.ctx), it->second, &v));
      push(std::move(v));
      return ok();
    }
    return unsupported("ctx." + name + " that was never set (eager raises)");
  }
  if (name == "apply" && !is_opaque(owner) && is_function_class(owner.obj.get())) {
    PyRef bound = PyRef::steal(PyObject_GetAttrString(owner.obj.get(), "apply"));
    if (!bound || apply_class(bound.get()) != owner.obj.get()) {
      guards::clear_error();
      return unsupported("an autograd.Function subclass that overrides apply (not supported yet)");
    }
    if (method) push(Value::null());
    push(Value::constant(std::move(bound)));
    return ok();
  }
  return std::nullopt;
}

// `ctx.name = value` on a custom Function's ctx (op_store_attr, interp/torch/inplace.cpp).
Status Tracer::store_ctx_attr(const std::string& name, const Value& owner, Value value) {
  if (value.ctx >= 0) return unsupported("storing a ctx on itself");
  ctxs_[static_cast<size_t>(owner.ctx)].attrs.emplace_back(name, std::move(value));
  return ok();
}

std::optional<Status> Tracer::autograd_call(const Value& callable, std::vector<Value>& args, PyObject* kw_names) {
  if (callable.kind != ValueKind::Const) return std::nullopt;
  if (callable.ctx >= 0 && !callable.method.empty()) {
    return kw_names ? unsupported("keyword arguments to ctx." + callable.method + "()")
                     : ctx_method(static_cast<size_t>(callable.ctx), callable.method, args);
  }
  PyObject* cls = is_opaque(callable) ? nullptr : apply_class(callable.obj.get());
  if (cls == nullptr) return std::nullopt;
  return kw_names ? unsupported("keyword arguments to autograd.Function.apply (not supported yet)")
                  : apply_function(cls, std::move(args));
}

Status Tracer::ctx_method(size_t ctx, const std::string& name, std::vector<Value>& args) {
  AutogradCtx& c = ctxs_[ctx];
  if (name == "save_for_backward") {
    if (c.in_backward) return unsupported("ctx.save_for_backward in backward");
    for (const Value& a : args) {
      if (!is_tensor(a) && !is_none(a)) return unsupported("ctx.save_for_backward of " + describe(a) + " (eager raises)");
    }
    c.saved = args;
  } else if (name == "mark_non_differentiable") {
    for (const Value& a : args) {
      if (!is_tensor(a)) return unsupported("ctx.mark_non_differentiable of " + describe(a));
      c.non_differentiable.push_back(a.node);
    }
  } else if (name == "set_materialize_grads") {
    if (args.size() != 1 || args[0].kind != ValueKind::Const || args[0].obj.get() != Py_True) {
      return unsupported("ctx.set_materialize_grads(False) (not supported yet)");
    }
  } else {
    return unsupported("ctx." + name + "() (not supported yet)");
  }
  push(Value::constant(PyRef::borrow(Py_None)));
  return ok();
}

// A ctx value as the backward fragment sees it: tensors of the forward become
// placeholders of the fragment (one per forward node).
Status Tracer::to_fragment(size_t ctx, const Value& v, Value* out) {
  AutogradCtx& c = ctxs_[ctx];
  *out = v;
  if (v.kind == ValueKind::Tuple || v.kind == ValueKind::List) {
    for (Value& item : out->items) {
      FJ_TRY(to_fragment(ctx, Value(item), &item));
    }
    return ok();
  }
  if (v.kind != ValueKind::Tensor) return ok();
  const jit::Node& n = c.forward->node(v.node);
  if (jit::is_python_scalar(n)) return unsupported("a number read from a tensor, kept on ctx (not supported yet)");
  for (const auto& [fwd, ph] : c.captured) {
    if (fwd == v.node) {
      *out = Value::tensor(ph);
      return ok();
    }
  }
  const jit::NodeId ph = graph_.placeholder(n.dtype, traced_shape(n.sym, hints_), n.sym);
  placeholder_slot_.push_back(InputRef{});
  c.captured.emplace_back(v.node, ph);
  *out = Value::tensor(ph);
  return ok();
}

// MyFunction.apply(args...): forward traced into the graph with grad mode off; when an
// input needs a gradient, its results become alias nodes and backward is traced into
// a fragment (trace_custom_backward).
Status Tracer::apply_function(PyObject* cls, std::vector<Value> args) {
  const std::string name = reinterpret_cast<PyTypeObject*>(cls)->tp_name;
  PyRef forward = class_function(cls, "forward");
  PyRef backward = class_function(cls, "backward");
  PyRef setup = PyRef::steal(PyObject_GetAttrString(cls, "setup_context"));
  PyRef vjp = PyRef::steal(PyObject_GetAttrString(cls, "vjp"));
  guards::clear_error();
  if (!forward || !backward) return unsupported(name + ".forward / backward are not plain static functions");
  if (vjp.get() != g_vjp) return unsupported(name + " defines vjp (not supported yet)");
  // forward(*args) and setup_context(ctx, inputs, output), or forward(ctx, *args).
  PyRef setup_fn;
  if (setup.get() != g_setup_context) {
    setup_fn = class_function(cls, "setup_context");
    if (!setup_fn) return unsupported(name + ".setup_context is not a plain static function");
    guards().add_function(setup_fn.get());
  }
  guards().add_function(forward.get());
  // @once_differentiable: the backward runs with grad mode off here anyway, so the
  // function it wraps is traced.
  if (g_once_code != nullptr && PyFunction_GET_CODE(backward.get()) == g_once_code) {
    guards().add_function(backward.get());
    backward = PyRef::steal(PyObject_GetAttrString(backward.get(), "__wrapped__"));
    if (!backward || !PyFunction_Check(backward.get())) {
      guards::clear_error();
      return unsupported(name + ".backward wraps something that is not a function");
    }
  }
  guards().add_function(backward.get());

  const size_t ctx = ctxs_.size();
  ctxs_.emplace_back();
  bool any = false;
  for (const Value& a : args) {
    const bool needs = grad_enabled_ && is_tensor(a) && node_needs_grad(a.node);
    ctxs_[ctx].needs_input_grad.push_back(needs);
    any = any || needs;
  }
  Value ctx_value = Value::constant(PyRef::borrow(cls));
  ctx_value.opaque = true;
  ctx_value.ctx = static_cast<int>(ctx);
  std::vector<Value> fargs;
  if (!setup_fn) fargs.push_back(ctx_value);
  fargs.insert(fargs.end(), args.begin(), args.end());
  const bool outer = grad_enabled_;
  grad_enabled_ = false;
  note_write(-1);  // grad mode: a generator run ahead saw another
  Status s = inline_call(forward.get(), std::move(fargs), nullptr);
  Value result;
  if (s.ok()) result = pop();
  if (s.ok() && setup_fn) {
    s = inline_call(setup_fn.get(), {ctx_value, Value::sequence(ValueKind::Tuple, args), result}, nullptr);
    if (s.ok()) pop();
  }
  grad_enabled_ = outer;
  note_write(-1);
  if (s.failed()) {
    raising_.reset();  // a forward that raises is not unwound into the caller's handler
    return s;
  }
  std::function<bool(const Value&)> has_ctx = [&](const Value& v) {
    return v.ctx >= 0 || std::any_of(v.items.begin(), v.items.end(), has_ctx);
  };
  if (has_ctx(result)) return unsupported(name + ".forward returns its ctx (not supported)");
  if (!any) {  // no backward: the results need no gradient (recorded with grad mode off)
    push(std::move(result));
    return ok();
  }
  // Each tensor result is an alias node: a result of the Function, not of its forward's ops.
  std::vector<Value*> slots;
  if (result.kind == ValueKind::Tuple) {
    for (Value& item : result.items) slots.push_back(&item);
  } else {
    slots.push_back(&result);
  }
  std::vector<jit::NodeId> markers;
  const std::vector<jit::NodeId>& nondiff = ctxs_[ctx].non_differentiable;
  for (Value* v : slots) {
    if (v->kind == ValueKind::Tensor && is_number(*v)) return unsupported(name + ".forward returns a number read from a tensor");
    if (v->kind != ValueKind::Tensor) {
      if (v->kind == ValueKind::Const || v->kind == ValueKind::Sym) continue;
      return unsupported(name + ".forward returns " + describe(*v) + " (not supported yet)");
    }
    auto m = graph_.alias(v->node);
    if (!m) return unsupported(name + ": " + m.error());
    if (may_be_noncontig(v->node)) mark_noncontig(*m);
    note_grad_mode(graph_.size() - 1);
    const bool differentiable = std::find(nondiff.begin(), nondiff.end(), v->node) == nondiff.end();
    node_grad_[static_cast<size_t>(*m)] = differentiable ? 1 : 0;
    markers.push_back(*m);
    v->node = *m;
  }
  FJ_TRY(trace_custom_backward(ctx_value, backward.get(), markers, result, args));
  push(std::move(result));
  return ok();
}

Status Tracer::trace_custom_backward(const Value& ctx_value, PyObject* backward, const std::vector<jit::NodeId>& markers,
                                     const Value& result, const std::vector<Value>& args) {
  const auto ctx = static_cast<size_t>(ctx_value.ctx);
  // One gradient per forward result (None for a result that is not a tensor).
  std::vector<const Value*> results;
  if (result.kind == ValueKind::Tuple) {
    for (const Value& item : result.items) results.push_back(&item);
  } else {
    results.push_back(&result);
  }
  GraphState forward;
  swap_graph_state(forward);  // graph_ is now the fragment
  AutogradCtx& c = ctxs_[ctx];
  c.in_backward = true;
  c.forward = &forward.graph;
  std::vector<Value> bargs{ctx_value};
  for (const Value* r : results) {
    if (r->kind != ValueKind::Tensor) {
      bargs.push_back(Value::constant(PyRef::borrow(Py_None)));
      continue;
    }
    const jit::Node& n = forward.graph.node(r->node);
    bargs.push_back(Value::tensor(graph_.placeholder(n.dtype, traced_shape(n.sym, hints_), n.sym)));
    placeholder_slot_.push_back(InputRef{});
  }
  const bool outer = grad_enabled_;
  grad_enabled_ = false;
  note_write(-1);  // grad mode: a generator run ahead saw another
  Status s = inline_call(backward, std::move(bargs), nullptr);
  grad_enabled_ = outer;
  note_write(-1);
  if (s.failed()) raising_.reset();
  jit::CustomGrad custom;
  if (s.ok()) {
    Value grads = pop();
    std::vector<Value> items = grads.kind == ValueKind::Tuple ? grads.items : std::vector<Value>{grads};
    if (items.size() < args.size()) s = unsupported("backward returned fewer gradients than forward has inputs (eager raises)");
    std::vector<jit::NodeId> outs;
    for (size_t i = 0; s.ok() && i < items.size(); ++i) {
      const Value& g = items[i];
      if (is_none(g)) continue;
      if (i >= args.size() || !is_tensor(g)) {
        s = unsupported("backward returned " + describe(g) + " as a gradient (not supported yet)");
        break;
      }
      if (!c.needs_input_grad[i]) continue;
      // As eager, a gradient may have the input's shape or one it broadcasts to (it is
      // summed down); sizes equal here but not by name become assumptions of the backward.
      const jit::SymShape& xs = forward.graph.node(args[i].node).sym;
      const jit::SymShape& gs = graph_.node(g.node).sym;
      bool fits = gs.size() >= xs.size();
      for (size_t d = 0; fits && d < xs.size(); ++d) {
        const jit::Shape gx = traced_shape({gs[gs.size() - xs.size() + d], xs[d]}, hints_);
        fits = gx[0] == gx[1] || gx[1] == 1;
      }
      if (!fits) {
        s = unsupported("backward returned a gradient whose shape does not fit its input (eager raises)");
        break;
      }
      outs.push_back(g.node);
      custom.inputs.push_back(args[i].node);
    }
    if (s.ok() && graph_.num_inputs() != markers.size() + c.captured.size()) {
      s = unsupported("backward reads tensors that are neither gradients nor saved on ctx (not supported yet)");
    }
    if (s.ok()) {
      sync_scalar_inputs();
      graph_.set_outputs(outs);
      for (const jit::SymExpr& a : graph_.assumptions()) {
        const auto v = a.eval(hints_);
        if (!v || !std::holds_alternative<bool>(*v) || !std::get<bool>(*v)) {
          s = unsupported("backward assumes sizes that do not hold (eager raises)");
          break;
        }
        guards().add_expr(a, readable(a));
      }
    }
  }
  c.in_backward = false;
  c.forward = nullptr;
  swap_graph_state(forward);  // back to the forward graph; `forward` holds the fragment
  if (s.failed()) return s;
  // Placeholders of non-tensor results were not made: renumber the gradients' ones.
  for (const Value* r : results) {
    if (r->kind == ValueKind::Tensor) custom.outputs.push_back(r->node);
  }
  FJ_CHECK(custom.outputs == markers, "custom Function results and their aliases differ");
  for (const auto& [fwd, ph] : c.captured) custom.captured.push_back(fwd);
  // The fragment's scalar inputs (ctx-saved numbers, sizes) are scalars of the forward.
  for (const jit::SymExpr& e : forward.scalar_inputs) {
    auto n = operand(Value::sym(e));
    if (!n) return unsupported("a scalar of the backward: " + n.error());
    custom.scalars.push_back(*n);
  }
  custom.fragment = std::move(forward.graph);
  const size_t k = customs_.size();
  for (jit::NodeId m : markers) markers_.emplace_back(m, k);
  customs_.push_back(std::move(custom));
  return ok();
}

}  // namespace fj::interp
