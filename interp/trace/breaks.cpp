// Graph breaks and branches while tracing: a trace that meets an opaque call or a
// branch on a tensor's value ends the current graph segment, runs it on this call's
// inputs, performs the call (once: a cache hit performs it from the plan), and goes
// on tracing with the results as inputs of the next segment. What it then cannot
// trace runs in CPython from that point (a Deopt step, interp/trace/resume.cpp), never
// again from the start.
// A view live at a break stays a view: its register is taken from its base's at run
// time (a View step), never a copy.
#include <functional>
#include <unordered_set>

#include "interp/trace/interpreter.h"
#include "interp/trace/tracer.h"
#include "jit/log.h"

namespace fj::interp {
void walk_values(std::vector<Value*>& roots, const std::function<void(Value&)>& fn) {
  std::function<void(Value&)> walk = [&](Value& v) {
    fn(v);
    for (Value& item : v.items) walk(item);
  };
  for (Value* v : roots) walk(*v);
}

std::vector<Value*> state_roots(FrameState& fs) {
  std::vector<Value*> roots;
  for (Value& v : fs.locals) roots.push_back(&v);
  for (Value& v : fs.stack) roots.push_back(&v);
  return roots;
}

// The dtype of the 0-d tensor that carries a number read from a tensor (as eager's
// Python float is a double); data_checks.cpp uses it too.
jit::DType item_dtype(jit::ScalarKind k) {
  const jit::DType d = jit::scalar_kind_dtype(k);
  return d == jit::DType::Float32 ? jit::DType::Float64 : d;
}

// ---- conditions ----

Status Tracer::can_resume(bool at_call) const {
  if (st_.fullgraph) return Error{"fullgraph=True"};
  if (cur_.depth != 0) return Error{"inside an inlined call"};
  if (cur_.fs->kw_names) return Error{"between KW_NAMES and CALL"};
  // CPython's state would lack the exception being handled (sys.exc_info(), a bare raise).
  if (!cur_.fs->handling.empty()) return Error{"inside an except block"};
  if (!global_names_.empty()) return Error{"after an assignment to a global (its store waits for the return)"};
  if (!at_call && caller_lists_changed()) return Error{"after a change of an argument list (its store waits for the return)"};
  bool grad_block = false, slice = false, closure = false, made = false;
  std::vector<Value*> roots = state_roots(*cur_.fs);
  walk_values(roots, [&](Value& v) {
    grad_block |= v.kind == ValueKind::GradModeExit;
    slice |= v.kind == ValueKind::Slice;
    // A function made here over the frame's cells holds stand-in cells (op_load_closure),
    // not the ones CPython's frame gets when it resumes.
    closure |= v.kind == ValueKind::Const && v.fresh && v.obj && has_traced_cells(v.obj.get());
    // What convert cannot hand over: an iterator of a list (iter(l)), an exception or a
    // bound method made while tracing.
    made |= v.kind == ValueKind::Iterator && v.fresh;
    // A generator run ahead: what CPython (the break's call) changes it would not see.
    made |= v.kind == ValueKind::Iterator && v.writes >= 0 && v.next < v.items.size();
    made |= v.kind == ValueKind::Const && v.fresh && v.obj && (PyExceptionInstance_Check(v.obj.get()) || !v.items.empty());
  });
  if (grad_block) return Error{"inside a with block"};
  if (slice) return Error{"with a symbolic slice on the stack"};
  if (closure) return Error{"with a closure over the frame's variables alive"};
  if (made) return Error{"with an iterator (a generator run ahead), exception or bound method made in the frame alive"};
  return ok();
}

// A graph break's call: the argument lists the frame changed are stored as it starts.
Status Tracer::can_cut(const Instruction&) const { return can_resume(/*at_call=*/true); }

// Whether an exception raised at `ins` goes to a handler of the frame (a try block).
bool Tracer::in_try_block(const Instruction& ins) const {
  for (const ExceptionEntry& e : cur_.code->exception_table) {
    if (ins.offset >= e.start && ins.offset < e.end) return true;
  }
  return false;
}

// ---- values of the plan ----

Status Tracer::convert(const Value& v, PlanValue* out, ConvertCtx& ctx) {
  switch (v.kind) {
    case ValueKind::Tensor:
      return convert_tensor(v, out, ctx);
    case ValueKind::Const:
      if (v.fresh && PySet_CheckExact(v.obj.get())) return convert_set(v, out, ctx);
      if (v.fresh && !ctx.frame_state && PyFunction_Check(v.obj.get()) && v.items.empty()) return convert_function(v, out, ctx);
      return convert_const(v, out, ctx);
    case ValueKind::Sym:
      out->kind = PlanValue::Kind::Sym;
      out->expr = v.expr;
      out->obj = v.obj;
      plan_->must_evaluate.push_back(v.expr);
      return ok();
    case ValueKind::Tuple:
    case ValueKind::List:
    case ValueKind::Dict:
    case ValueKind::Object:
      return convert_container(v, out, ctx);
    case ValueKind::Array: {  // .numpy() of the tensor, as the plan builds it
      PlanValue t;
      Value tensor = v;
      tensor.kind = ValueKind::Tensor;
      FJ_TRY(convert_tensor(tensor, &t, ctx));
      if (t.kind == PlanValue::Kind::View && t.items.size() == 1 && t.items[0].kind == PlanValue::Kind::Arg) {
        *out = std::move(t.items[0]);  // a NumPy array argument: the very object
        return ok();
      }
      if (t.kind == PlanValue::Kind::View) {
        *out = std::move(t);
      } else {
        out->kind = PlanValue::Kind::View;
        out->items.push_back(std::move(t));
      }
      PlanValue step;
      step.kind = PlanValue::Kind::Tuple;
      step.items.resize(1);
      step.items[0].obj = PyRef::steal(PyUnicode_FromString("numpy"));  // a Const
      out->items.push_back(std::move(step));
      return ok();
    }
    case ValueKind::Null:
      if (!ctx.frame_state) break;
      out->kind = PlanValue::Kind::Null;
      return ok();
    case ValueKind::Iterator:
      if (!ctx.frame_state || v.fresh || pending_error(v)) break;  // fresh: reversed() of a list, which CPython reads late
      out->kind = PlanValue::Kind::Iter;
      if (v.identity >= 0 || v.source.kind == Source::Kind::Arg) {
        // A loop over a list the state holds: an iterator of that very list, advanced to
        // where the loop is (the list built once, see convert_container).
        Value list = Value::sequence(ValueKind::List, v.items);
        list.identity = v.identity;
        list.source = v.source;
        out->items.resize(1);
        out->index = static_cast<int>(v.next);
        return convert(list, &out->items[0], ctx);
      }
      out->items.resize(v.items.size() - v.next);
      for (size_t i = v.next; i < v.items.size(); ++i) {
        FJ_TRY(convert(v.items[i], &out->items[i - v.next], ctx));
      }
      return ok();
    case ValueKind::TensorMethod: {
      // CPython's LOAD_METHOD leaves (function, self): the function is torch's (guarded).
      // A dict's method carries dict's own descriptor in obj.
      if (v.items.size() == 1) {  // read as a value (x.sub): the method of that tensor
        out->kind = PlanValue::Kind::Method;
        out->obj = PyRef::steal(PyUnicode_FromString(v.method.c_str()));
        out->items.resize(1);
        return convert(v.items[0], &out->items[0], ctx);
      }
      PyObject* fn = !ctx.frame_state ? nullptr : v.obj ? v.obj.get() : guards::original_tensor_attr(v.method);
      if (fn == nullptr) break;
      out->kind = PlanValue::Kind::Const;
      out->obj = PyRef::borrow(fn);
      return ok();
    }
    case ValueKind::GradModeExit:
    case ValueKind::Slice:
      break;
  }
  return unsupported((ctx.frame_state ? "resuming with " : "returning ") + describe(v));
}

// A tensor: a graph input as the plan reads it, a graph output, or a number read
// from a tensor (a 0-d output the plan converts).
Status Tracer::convert_tensor(const Value& v, PlanValue* out, ConvertCtx& ctx) {
  const jit::Node& n = graph_.node(v.node);
  if (jit::op_family(n.op) == jit::Family::Item) {
    // A Python number read from a tensor: a 0-d graph output, converted by the plan.
    if (ctx.output_index == nullptr) return unsupported("internal error: a number read from a tensor at a break");
    auto t = graph_.full({}, v.node, item_dtype(n.scalar_kind));
    if (!t) return unsupported("returning a number read from a tensor: " + t.error());
    auto [it, fresh] = ctx.output_index->emplace(*t, static_cast<int>(ctx.outputs->size()));
    if (fresh) ctx.outputs->push_back(*t);
    out->kind = PlanValue::Kind::Item;
    out->index = it->second;
    return ok();
  }
  jit::NodeId shown = v.node;
  if (const jit::NodeId s = storage_of(v.node); ctx.output_index != nullptr && s != v.node &&
                                                !view_parent_.count(v.node) &&
                                                graph_.node(s).op == jit::Op::Placeholder) {
    shown = s;  // an input written in place: the final graph's WriteBack gives it this value
  }
  if (graph_.node(shown).op == jit::Op::Placeholder) {
    const InputRef ref = placeholder_slot_[static_cast<size_t>(graph_.node(shown).index)];
    out->kind = ref.kind == InputRef::Kind::Arg    ? PlanValue::Kind::Arg
                : ref.kind == InputRef::Kind::Path ? PlanValue::Kind::PathTensor
                                                   : PlanValue::Kind::Reg;
    out->index = ref.index;
    if (ndarray_inputs_.count(shown) != 0) {  // a NumPy array argument, as a tensor: from_numpy of it
      PlanValue arg = std::move(*out);
      *out = PlanValue{};
      out->kind = PlanValue::Kind::View;
      out->items.push_back(std::move(arg));
    }
    return ok();
  }
  if (ctx.output_index == nullptr) return unsupported("internal error: a tensor that is no graph input at a break");
  if (aliasing_view(v.node, ctx, out)) return ok();
  auto [it, fresh] = ctx.output_index->emplace(v.node, static_cast<int>(ctx.outputs->size()));
  if (fresh) ctx.outputs->push_back(v.node);
  out->kind = PlanValue::Kind::GraphOutput;
  out->index = it->second;
  return ok();
}

// A Python object: a register, an argument, or a constant fixed by guards.
Status Tracer::convert_const(const Value& v, PlanValue* out, const ConvertCtx& ctx) {
  if (v.fresh && PyExceptionInstance_Check(v.obj.get())) {
    return unsupported("an exception object made while tracing, returned or live at a graph break");
  }
  if (v.fresh && PyType_Check(v.obj.get())) return unsupported("a class defined in the frame, returned or live at a graph break");
  if (v.fresh && !ctx.frame_state) return unsupported("returning a function defined in the frame");
  if (v.fresh && has_traced_cells(v.obj.get())) return unsupported("a closure defined in the frame, live at a graph break");
  // A bound method or super() object the trace made holds the traced call's self.
  if (v.fresh && !v.items.empty()) return unsupported("a bound method or super() object, live at a graph break");
  if (v.reg >= 0 && v.item) {
    out->kind = PlanValue::Kind::Item;  // the number of a 0-d tensor computed before a break
    out->reg = v.reg;
  } else if (v.reg >= 0) {
    out->kind = PlanValue::Kind::Reg;  // an opaque call's result, this call's own
    out->index = v.reg;
  } else if (v.source.kind == Source::Kind::Arg && v.source.arg >= 0 && v.source.attrs.empty()) {
    out->kind = PlanValue::Kind::Arg;  // the call's own argument object
    out->index = v.source.arg;
  } else if (v.path_slot >= 0) {
    out->kind = PlanValue::Kind::PathTensor;  // an nn.Module guarded by class: this call's instance
    out->index = v.path_slot;
  } else {  // a constant, a default value or a bound method's self: fixed by guards
    out->kind = PlanValue::Kind::Const;
    out->obj = v.obj;
  }
  return ok();
}

// A set the frame made (ops_fold.cpp): built anew from its items, as one object
// however often it appears. A call the trace does not follow could change it unseen.
Status Tracer::convert_set(const Value& v, PlanValue* out, ConvertCtx& ctx) {
  if (ctx.next_reg != nullptr) return unsupported("a set made in the frame, given to a call the trace does not follow (not supported yet)");
  // The plan builds set(items): where that iterates in another order than the set
  // itself (its table has a history of deletions), the set cannot leave the trace.
  PyRef copy = PyRef::steal(PySet_New(v.obj.get()));
  PyRef a = copy ? PyRef::steal(PySequence_List(v.obj.get())) : PyRef();
  PyRef b = a ? PyRef::steal(PySequence_List(copy.get())) : PyRef();
  if (!b || PyObject_RichCompareBool(a.get(), b.get(), Py_EQ) != 1) {
    guards::clear_error();
    return unsupported("a set made in the frame whose copy would iterate in another order (not supported yet)");
  }
  auto [it, first] = ctx.memo_of.emplace(v.identity, ctx.num_memos);
  if (!first) {
    out->kind = PlanValue::Kind::Repeat;
    out->index = it->second;
    return ok();
  }
  out->memo = ctx.num_memos++;
  out->kind = PlanValue::Kind::Tuple;
  out->obj = PyRef::borrow(reinterpret_cast<PyObject*>(&PySet_Type));
  PyRef iter = PyRef::steal(PyObject_GetIter(v.obj.get()));
  while (PyObject* item = iter ? PyIter_Next(iter.get()) : nullptr) {
    PlanValue p;
    p.kind = PlanValue::Kind::Const;
    p.obj = PyRef::steal(item);
    out->items.push_back(std::move(p));
  }
  guards::clear_error();
  return ok();
}

// A tuple, list, dict or object the frame built (built again by the plan, each object
// once), or an argument's own.
Status Tracer::convert_container(const Value& v, PlanValue* out, ConvertCtx& ctx) {
  if (is_partial_object(v) || is_count_object(v) || DequeCalls::is_deque(v)) {
    return unsupported("a " + object_class_name(v) + " made in the frame, returned or live at a graph break (not supported yet)");
  }
  if (v.source.kind == Source::Kind::Arg && v.source.arg >= 0 && v.source.attrs.empty()) {
    out->kind = PlanValue::Kind::Arg;  // an argument list or tuple: the object itself
    out->index = v.source.arg;
    return ok();
  }
  if (v.path_slot >= 0) {
    out->kind = PlanValue::Kind::PathTensor;  // a list attribute: this call's own list
    out->index = v.path_slot;
    return ok();
  }
  if (v.identity >= 0) {  // one object, however often it appears
    auto [it, fresh] = ctx.memo_of.emplace(v.identity, ctx.num_memos);
    if (!fresh) {
      out->kind = PlanValue::Kind::Repeat;
      out->index = it->second;
      return ok();
    }
    out->memo = ctx.num_memos++;
  }
  out->obj = v.obj;  // a torch.return_types type, an object's class, or null
  if (v.kind == ValueKind::Dict) FJ_TRY(dict_maker(v, &out->obj));
  out->kind = v.kind == ValueKind::List     ? PlanValue::Kind::List
              : v.kind == ValueKind::Dict   ? PlanValue::Kind::Dict
              : v.kind == ValueKind::Object ? PlanValue::Kind::Object
              : v.torch_size                ? PlanValue::Kind::Size
                                            : PlanValue::Kind::Tuple;
  if (v.kind != ValueKind::Tuple && ctx.next_reg != nullptr) {  // the callee may change it
    out->reg = (*ctx.next_reg)++;
    if (v.identity >= 0) ctx.list_regs[v.identity] = out->reg;
  }
  const size_t first = v.kind == ValueKind::Object ? 1 : 0;  // an object's items start with its class
  if (first == 1 && v.items[0].fresh) {  // eager's would be of a new class at each call
    return unsupported("an object of a class defined in the frame, returned or live at a graph break");
  }
  out->items.resize(v.items.size() - first);
  for (size_t i = first; i < v.items.size(); ++i) {
    FJ_TRY(convert(v.items[i], &out->items[i - first], ctx));
  }
  return ok();
}

// The root frame's state as CPython will hold it when it resumes at instruction `pc`.
Status Tracer::save_state(const FrameState& fs, size_t pc, const std::string& reason,
                          std::shared_ptr<DeoptState>* out) {
  FJ_TRY(no_context_set("a point where CPython could take the frame over"));
  auto d = std::make_shared<DeoptState>();
  ConvertCtx ctx;
  ctx.frame_state = true;
  d->locals.resize(fs.locals.size());
  for (size_t i = 0; i < fs.locals.size(); ++i) {
    FJ_TRY(convert(fs.locals[i], &d->locals[i], ctx));
  }
  d->stack.resize(fs.stack.size());
  for (size_t i = 0; i < fs.stack.size(); ++i) {
    FJ_TRY(convert(fs.stack[i], &d->stack[i], ctx));
  }
  d->num_memos = ctx.num_memos;
  if (pc >= cur_.code->instructions.size()) return unsupported("resuming past the end of the bytecode");
  d->offset = cur_.code->instructions[pc].offset;
  d->reason = reason;
  *out = std::move(d);
  return ok();
}

// ---- segments ----

// Ends the current graph segment: every tensor that the root frame's state (or
// `extra`) holds becomes a register (computed now, on this call's inputs) and an
// input of the next segment.
Status Tracer::cut(std::vector<Value*> extra) {
  // A segment's outputs would leave autograd: a frame that needs it runs whole or in CPython.
  if (autograd_) return unsupported("a graph break in a frame that reads tensors requiring grad (not supported yet)");
  FJ_TRY(no_context_set("a graph break"));
  for (const auto& [storage, now] : storage_now_) {
    if (now != storage && graph_.node(storage).op == jit::Op::Placeholder) {
      return unsupported("an in-place update of an input before a graph break (not supported yet)");
    }
  }
  std::vector<Value*> roots = state_roots(root_fs_);
  roots.insert(roots.end(), extra.begin(), extra.end());
  for (CallerList& c : caller_lists_) roots.push_back(&c.now);  // stored as the break's call starts
  std::vector<jit::NodeId> live;
  std::unordered_map<jit::NodeId, int> seen;
  std::vector<Value*> items;  // Python numbers read from tensors: they become registers too
  walk_values(roots, [&](Value& v) {
    if (v.kind != ValueKind::Tensor && v.kind != ValueKind::Array) return;  // an array: its tensor
    if (jit::op_family(graph_.node(v.node).op) == jit::Family::Item) items.push_back(&v);
    else if (seen.emplace(v.node, static_cast<int>(live.size())).second) live.push_back(v.node);
  });
  // Computed tensors become outputs of the segment; a view (of an input or of a
  // computed tensor) becomes a register made a view of its base at run time (a View
  // step), so that it aliases its base after the break as eager's does. Its base is
  // then an output, live or not (eager's view keeps its base alive too).
  std::vector<jit::NodeId> outputs;
  std::unordered_map<jit::NodeId, int> out_index;
  ConvertCtx vctx;
  vctx.output_index = &out_index;
  vctx.outputs = &outputs;
  std::vector<std::pair<jit::NodeId, PlanValue>> views;
  for (jit::NodeId n : live) {
    if (graph_.node(n).op == jit::Op::Placeholder) continue;
    if (view_parent_.count(n)) {
      PlanValue pv;
      if (!aliasing_view(n, vctx, &pv)) {
        // A copy would be a wrong result: CPython redoes the work since the last call.
        if (committed_) resume_at_ = after_call_;
        return unsupported("a view live at a graph break that cannot be taken again from its base");
      }
      views.emplace_back(n, std::move(pv));
      continue;
    }
    if (out_index.emplace(n, static_cast<int>(outputs.size())).second) outputs.push_back(n);
  }
  const size_t first_item = outputs.size();
  for (Value* v : items) {
    auto t = graph_.full({}, v->node, item_dtype(graph_.node(v->node).scalar_kind));
    if (!t) return unsupported("a number read from a tensor at a break: " + t.error());
    outputs.push_back(*t);
  }
  if (!continuation_ && !committed_) {
    jit::Bindings b;  // fills in_.path_tensors for the segments (the guards hold: just read)
    if (!entry_->guards.check(in_, &b)) return unsupported("internal error: the entry's guards fail at a break");
  }
  FJ_TRY(flush_block_guards());
  std::vector<int> out_regs;
  if (!outputs.empty() || !graph_.checks().empty() || has_extern_calls()) {
    graph_.set_outputs(outputs);
    PlanStep step;
    step.kind = PlanStep::Kind::RunGraph;
    FJ_TRY(seal_outputs(outputs, &step.seg.outputs));
    FJ_TRY(compile_graph(&step.seg.graph));
    entry_->segment_texts.push_back(graph_.str());
    step.seg.args = placeholder_slot_;
    step.seg.scalar_inputs = plan_->scalar_inputs;
    for (size_t k = 0; k < outputs.size(); ++k) out_regs.push_back(new_reg());
    step.seg.out_regs = out_regs;
    step.deopt = after_call_;  // a kernel's index error: CPython redoes this segment's work
    const DeoptState* deopt = nullptr;
    if (!run_step(step, *run_, &deopt)) {
      guards::clear_error();
      if (deopt != nullptr) resume_at_ = step.deopt;
      return unsupported("running a graph segment failed (eager raises)");
    }
    plan_->steps.push_back(std::move(step));
    segment_since_call_ = true;
  }
  std::unordered_map<jit::NodeId, int> reg_of;  // each live tensor that is no input: its register
  for (size_t k = 0; k < first_item; ++k) reg_of[outputs[k]] = out_regs[k];
  FJ_TRY(view_steps(std::move(views), out_regs, &reg_of));
  // Numbers read from tensors: opaque values from now on (their register's .item()).
  for (size_t k = 0; k < items.size(); ++k) {
    const int reg = out_regs[first_item + k];
    PyRef number = PyRef::steal(PyObject_CallMethod(run_->regs[static_cast<size_t>(reg)].get(), "item", nullptr));
    if (!number) {
      guards::clear_error();
      return unsupported("reading a number from a tensor failed");
    }
    Value o = Value::constant(std::move(number));
    o.opaque = true;
    o.reg = reg;
    o.item = true;
    *items[k] = std::move(o);
  }
  // The next segment: one placeholder per live tensor.
  const jit::Graph old = std::move(graph_);
  const std::vector<InputRef> old_slots = std::move(placeholder_slot_);
  graph_ = jit::Graph();
  placeholder_slot_.clear();
  scalar_nodes_.clear();
  plan_->scalar_inputs.clear();
  synced_scalars_ = 0;  // the new graph's nodes are numbered from 0
  std::unordered_map<jit::NodeId, jit::NodeId> remap;
  std::vector<jit::NodeId> strided;  // live tensors whose eager layout may be non-contiguous
  for (jit::NodeId n : live) {
    if (may_be_noncontig(n)) strided.push_back(n);
  }
  noncontig_.clear();
  for (jit::NodeId n : live) {
    const jit::Node& node = old.node(n);
    const InputRef ref = node.op == jit::Op::Placeholder ? old_slots[static_cast<size_t>(node.index)]
                                                         : InputRef{InputRef::Kind::Reg, reg_of.at(n)};
    jit::Shape shape;  // this call's sizes
    for (const jit::SymExpr& e : node.sym) {
      const auto v = e.eval(hints_);
      shape.push_back(v && v->index() == 0 ? std::get<int64_t>(*v) : 0);
    }
    remap[n] = graph_.placeholder(node.dtype, shape, node.sym);
    placeholder_slot_.push_back(ref);
  }
  for (jit::NodeId n : strided) mark_noncontig(remap.at(n));  // so a view() that merges dims still ends the trace
  FJ_TRY(cut_storages(live, remap));
  walk_values(roots, [&](Value& v) {
    if (v.kind == ValueKind::Tensor || v.kind == ValueKind::Array) v.node = remap.at(v.node);
  });
  snapshot_.reset();  // its tensors named nodes of the old segment
  // So did the cells of returned frames; no closure that reads them is alive here
  // (can_resume).
  for (Value& v : returned_cells_.locals) v = Value{};
  return ok();
}

// The views live at a cut: each a register taken at run time from its base (an input,
// or the register of a segment output), in a View step run now for this call too.
Status Tracer::view_steps(std::vector<std::pair<jit::NodeId, PlanValue>> views, const std::vector<int>& out_regs,
                          std::unordered_map<jit::NodeId, int>* reg_of) {
  for (auto& [n, pv] : views) {
    PlanValue& base = pv.items[0];
    if (base.kind == PlanValue::Kind::GraphOutput) {
      base.kind = PlanValue::Kind::Reg;
      base.index = out_regs[static_cast<size_t>(base.index)];
    }
    PlanStep step;
    step.kind = PlanStep::Kind::View;
    step.view = std::move(pv);
    step.result_reg = new_reg();
    const DeoptState* deopt = nullptr;
    if (!run_step(step, *run_, &deopt)) {
      guards::clear_error();
      return unsupported("taking a view again after a graph break failed (internal error)");
    }
    (*reg_of)[n] = step.result_reg;
    plan_->steps.push_back(std::move(step));
  }
  return ok();
}

// A guard set for what the trace reads after a break: its path slots follow every
// slot the plan's guard sets used before it (the entry's, earlier blocks'), so that
// the tensors those found stay where the plan's segments read them.
std::shared_ptr<guards::GuardSet> Tracer::new_block_guards() {
  path_slots_ = std::max(path_slots_, entry_->guards.num_path_slots());
  if (block_guards_) path_slots_ = std::max(path_slots_, block_guards_->num_path_slots());
  auto set = std::make_shared<guards::GuardSet>();
  set->continue_path_slots(path_slots_);
  return set;
}

// What the trace read since the last opaque call, checked at this point of the plan.
Status Tracer::flush_block_guards() {
  if (!committed_ || !block_guards_ || block_guards_->size() == 0) return ok();
  PlanStep step;
  step.kind = PlanStep::Kind::CheckGuards;
  path_slots_ = std::max(path_slots_, block_guards_->num_path_slots());
  step.guards = std::move(block_guards_);
  step.deopt = after_call_;
  // Reads right after a call (nothing but views between): when they change, that call's
  // continuations are tried, or a new one traced, as for a new kind of result.
  size_t k = plan_->steps.size();
  while (k > 0 && plan_->steps[k - 1].kind == PlanStep::Kind::View) --k;
  if (k > 0 && plan_->steps[k - 1].kind == PlanStep::Kind::Call && plan_->steps[k - 1].outcomes) {
    step.retrace = plan_->steps[k - 1].outcomes;
    step.result_reg = plan_->steps[k - 1].result_reg;
  } else if (k == 0 && resumed_outcomes_ && plan_ == continuation_plan_) {
    step.retrace = resumed_outcomes_;
    step.result_reg = resumed_reg_;
  }
  block_guards_ = new_block_guards();
  const DeoptState* deopt = nullptr;
  if (!run_step(step, *run_, &deopt)) return unsupported("internal error: guards just read do not hold");
  plan_->steps.push_back(std::move(step));
  return ok();
}

// An opaque call's result in register `reg` as the trace goes on with it, and the
// check that a later call's result must pass for that trace to hold: None, a CPU
// tensor (a new placeholder of its dtype and sizes) and constants (numbers, strings,
// tuples of them) are checked; any other object is opaque (only passed on, returned,
// raised, or asked its class: opaque_type).
void Tracer::call_result(int reg, ResultCheck* check, Value* out) {
  PyObject* r = run_->regs[static_cast<size_t>(reg)].get();
  guards::TensorMeta meta;
  std::optional<jit::DType> dtype;
  if (r == Py_None) {
    check->kind = ResultCheck::Kind::Is;
    check->obj = PyRef::borrow(r);
    *out = Value::constant(PyRef::borrow(r));
  } else if (Py_TYPE(r) == reinterpret_cast<PyTypeObject*>(guards::torch_refs().tensor_type) &&
             guards::read_tensor_meta(r, &meta, nullptr) && meta.is_cpu && !meta.requires_grad &&
             (dtype = dtype_from_torch(meta.dtype))) {
    check->kind = ResultCheck::Kind::Tensor;
    check->meta = meta;
    check->contiguous = is_contiguous(meta);
    jit::Shape shape(meta.sizes.begin(), meta.sizes.begin() + meta.rank);
    jit::SymShape sym;
    for (int64_t d : shape) sym.push_back(jit::SymExpr::integer(d));
    *out = Value::tensor(graph_.placeholder(*dtype, shape, std::move(sym)));
    // A strided result (x.t() of the callee's): a view() that merges its dims ends the
    // trace, as eager raises; a contiguous one must stay so at each call (the check).
    if (!check->contiguous) mark_noncontig(out->node);
    placeholder_slot_.push_back(InputRef{InputRef::Kind::Reg, reg});
  } else if (is_foldable(r)) {  // a number, a str, a dtype, a tuple of these
    check->kind = ResultCheck::Kind::Equals;
    check->obj = PyRef::borrow(r);
    *out = Value::constant(PyRef::borrow(r));
  } else {
    guards::clear_error();
    *out = Value::constant(PyRef::borrow(r));
    out->opaque = true;
  }
  // However the trace uses it, a resumed frame gets this call's own result.
  if (out->kind == ValueKind::Const) out->reg = reg;
}

PyObject* Tracer::opaque_type(const Value& v) {
  if (v.kind != ValueKind::Const || !v.obj || v.fresh || v.item) return nullptr;
  PyObject* type = reinterpret_cast<PyObject*>(Py_TYPE(v.obj.get()));
  if (v.reg >= 0) {
    ResultCheck* check = nullptr;
    if (v.reg == resumed_reg_) {
      check = resumed_check_;
    } else if (auto it = call_steps_.find(v.reg); it != call_steps_.end()) {
      check = &it->second.first->steps[it->second.second].check;
    } else {
      return PyList_CheckExact(v.obj.get()) || PyDict_CheckExact(v.obj.get()) ? type : nullptr;
    }
    if (check->kind == ResultCheck::Kind::Any) {
      check->kind = ResultCheck::Kind::Type;
      check->obj = PyRef::borrow(type);
    }
    return type;  // each kind of check pins the class
  }
  guards::PathRoot root;
  PyRef holder;
  if (v.source.kind != Source::Kind::Arg || v.path_slot >= 0 || !path_root(v, &root, &holder)) return nullptr;
  guards().add_path_type(source_text(v.source), root, v.source.attrs, type);
  return type;
}

// ---- breaks ----

Status Tracer::break_call(Value callable, std::vector<Value> args, PyObject* kw_names, bool pure,
                          const std::string& why_not_traced) {
  const std::string what = "call to " + describe(callable);
  if (Status s = can_cut(*last_ins_); s.failed()) {
    return unsupported(what + " (not supported yet; no graph break " + s.error() + ")");
  }
  note_write(-1);  // the call may change anything
  // A list the call receives may change there; a live loop over it could not follow.
  {
    std::unordered_set<int> passed;
    std::vector<Value*> arg_roots;
    for (Value& a : args) arg_roots.push_back(&a);
    walk_values(arg_roots, [&](Value& v) {
      if (v.kind == ValueKind::List && v.identity >= 0) passed.insert(v.identity);
    });
    bool looped = false, live_iterator = false;
    std::vector<Value*> roots = state_roots(root_fs_);
    walk_values(roots, [&](Value& v) {
      if (v.kind != ValueKind::Iterator) return;
      live_iterator = true;
      looped |= passed.count(v.identity) != 0 || v.source.kind == Source::Kind::Arg;
    });
    for (int id : passed) looped |= live_iterator && iterated_lists_.count(id) != 0;  // zip's
    if (looped) return unsupported(what + " that receives a list a live loop iterates over (not supported yet)");
  }
  std::vector<Value*> extra{&callable};
  for (Value& a : args) extra.push_back(&a);
  FJ_TRY(cut(extra));
  PlanStep step;
  step.kind = PlanStep::Kind::Call;
  ConvertCtx ctx;
  ctx.next_reg = &num_regs_;
  FJ_TRY(convert(callable, &step.callable, ctx));
  FJ_TRY(convert(Value::sequence(ValueKind::Tuple, args), &step.args, ctx));
  const bool stores = caller_lists_changed();  // then the step changes the caller's lists: never redone
  if (stores) FJ_TRY(store_caller_lists(&step.args, ctx));
  step.num_memos = ctx.num_memos;
  step.kw_names = PyRef::borrow(kw_names);
  step.result_reg = new_reg();
  step.offset = cur_.code->instructions[cur_.fs->pc].offset;  // breaks happen in the root frame
  // Inside a try block, an exception of the call goes to the frame's handler: CPython
  // takes the frame over at the call with the exception (its stack below the call).
  if (in_try_block(cur_.code->instructions[cur_.fs->pc])) FJ_TRY(save_state(root_fs_, root_fs_.pc, "an exception of the " + what, &step.unwind));
  const DeoptState* deopt = nullptr;
  const bool grad_before = guards::grad_enabled();
  if (!run_step(step, *run_, &deopt)) {  // the call raised: so does the frame, here (or its handler runs)
    call_raised_ = true;
    if (step.unwind) FJ_TRY(end_with_unwind(std::move(step), what));
    return unsupported(what + " raised");
  }
  // The trace goes on with the result as it is now; the plan checks it at each call.
  const size_t num_inputs = placeholder_slot_.size();
  Value result;
  call_result(step.result_reg, &step.check, &result);
  // Lists, dicts and objects the callee received (or could reach: the arguments, but
  // not the frame's own **kwargs dict unless it was given) may have changed: from now
  // on they are those objects.
  {
    std::unordered_set<int> given;  // argument slots of the lists and dicts the call received
    std::vector<Value*> arg_roots;
    for (Value& a : args) arg_roots.push_back(&a);
    walk_values(arg_roots, [&](Value& v) {
      if (v.source.kind == Source::Kind::Arg && v.source.attrs.empty()) given.insert(v.source.arg);
    });
    std::vector<Value*> roots = state_roots(root_fs_);
    walk_values(roots, [&](Value& v) {
      if ((v.kind == ValueKind::List || v.kind == ValueKind::Dict) && v.source.kind == Source::Kind::Arg && v.source.arg >= 0 &&
          v.source.attrs.empty() && (v.source.arg < named_params_ || given.count(v.source.arg) != 0)) {
        Value o = Value::constant(PyRef::borrow(in_.args[v.source.arg]), v.source);
        o.opaque = true;
        v = std::move(o);
        return;
      }
      if (v.kind == ValueKind::List && v.path_slot >= 0) {  // a list attribute: the live list
        v = pin_path_list(v);
        return;
      }
      if ((v.kind != ValueKind::List && v.kind != ValueKind::Dict && v.kind != ValueKind::Object) || v.identity < 0) return;
      auto it = ctx.list_regs.find(v.identity);
      if (it == ctx.list_regs.end()) return;
      Value o = Value::constant(run_->regs[static_cast<size_t>(it->second)]);
      o.opaque = true;
      o.reg = it->second;
      v = std::move(o);
    });
  }
  // Another result goes on in a continuation of its own, traced from here (an opaque
  // result too: its check may pin its class later, see opaque_type).
  step.outcomes = std::make_shared<CallOutcomes>();
  step.outcomes->resume = resume_point(num_inputs, root_fs_.pc + 1);
  push(std::move(result));
  if (!pure || stores) committed_ = true;
  if (committed_) block_guards_ = new_block_guards();
  FJ_TRY(save_state(root_fs_, root_fs_.pc + 1, "after the " + what, &step.deopt));
  after_call_ = step.deopt;
  segment_since_call_ = false;
  call_steps_[step.result_reg] = {plan_, plan_->steps.size()};
  plan_->steps.push_back(std::move(step));
  if (!pure) {
    st_.counters.graph_breaks++;
    entry_->breaks.push_back({what + " (graph break: " + why_not_traced + ")", location(*last_ins_)});
    if (log::enabled(log::Channel::GraphBreaks)) {
      log::interp().info("graph break in {}: {} ({})", guards::utf8_lossy(st_.code->co_qualname), what,
                         location(*last_ins_));
    }
  }
  // The call changed torch's default dtype (torch.set_default_dtype) or grad mode
  // (torch.set_grad_enabled(False)): graphs assume float32 and the traced mode, so
  // CPython runs the rest of the frame from just after it, now and at every call of
  // the plan (a Deopt step).
  const bool dtype_changed = guards::default_dtype() != guards::torch_refs().float32;
  if (dtype_changed || guards::grad_enabled() != grad_before) {
    const std::string why = "the " + what + " changed " + (dtype_changed ? "torch.get_default_dtype()" : "grad mode") +
                            " (the rest of the frame runs in CPython)";
    deopt_step(after_call_, why, last_ins_);
    handed_over_ = true;
    return unsupported(why);
  }
  return ok();
}

// `if t:` on a one-element tensor: the plan branches; this outcome is traced now, the
// other one the first time it occurs.
Status Tracer::branch_on(Value cond, const Instruction& ins, bool jump_if) {
  if (Status s = can_resume(); s.failed()) return unsupported("a branch on a tensor's value (no plan branch " + s.error() + ")");
  const jit::Node& n = graph_.node(cond.node);
  int64_t numel = 1;
  for (const jit::SymExpr& e : n.sym) numel = e.is_constant() ? numel * *e.as_int() : -1;
  if (numel != 1) return unsupported("a branch on a tensor that may hold more than one element");
  const int target = cur_.code->index_at(ins.target);
  if (target < 0) return unsupported("jump to an unknown offset " + std::to_string(ins.target));
  FJ_TRY(cut({&cond}));
  PlanStep step;
  step.kind = PlanStep::Kind::Branch;
  ConvertCtx ctx;
  FJ_TRY(convert(cond, &step.cond, ctx));
  std::vector<PyObject*> memo;
  PyRef obj = PyRef::steal(build_value(step.cond, *run_, {}, memo));
  const int truth = obj ? PyObject_IsTrue(obj.get()) : -1;
  if (truth < 0) {
    guards::clear_error();
    return unsupported("the truth value of a tensor raised");
  }
  auto targets = std::make_shared<BranchTargets>();
  size_t pc[2];
  for (int o = 0; o < 2; ++o) {
    pc[o] = (o == 1) == jump_if ? static_cast<size_t>(target) : root_fs_.pc + 1;
    targets->offset[o] = cur_.code->instructions[pc[o]].offset;
  }
  targets->resume = resume_point(placeholder_slot_.size(), pc[0], pc[1]);
  FJ_TRY(save_state(root_fs_, root_fs_.pc, "a branch outcome", &step.deopt));
  step.branch = targets;
  auto next = std::make_shared<Plan>();
  next->scalar_inputs = plan_->scalar_inputs;  // the graph being built goes on in the outcome's plan
  targets->next[truth] = next;
  plan_->steps.push_back(std::move(step));
  plan_ = next.get();
  return (truth == 1) == jump_if ? jump_to(ins.target) : ok();
}

}  // namespace fj::interp
