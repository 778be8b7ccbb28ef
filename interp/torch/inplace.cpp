// In-place tensor ops (x.add_(y), x += y, x[i] = v, copy_, zero_, fill_, ...),
// functionalized: each records its out-of-place op, the written storage gets a new
// base node, and every live value aliasing that storage is rebound (see tracer.h).
// What cannot be tracked exactly (a write through an expanded view, operands that
// share the written memory, views that crossed a graph break, inputs written after
// one) ends the trace, so that eager runs it.
#include "interp/trace/tracer.h"

#include <opcode.h>

#include <algorithm>
#include <functional>
#include <iterator>
#include <optional>

#include "interp/runtime/plan.h"

namespace fj::interp {

using jit::DType;
using jit::NodeId;
using jit::SymExpr;

namespace {

// PyTorch's canCast: what an in-place op may write into a tensor of type `to`.
bool can_cast(DType from, DType to) {
  if (jit::is_floating(from) && !jit::is_floating(to)) return false;
  if (from != DType::Bool && to == DType::Bool) return false;
  return true;
}

// `to` only splits dims of `from` (and adds or drops 1s): a view for any strides.
bool splits_only(const jit::SymShape& from, const jit::SymShape& to) {
  auto big = [](const jit::SymShape& s) {
    jit::SymShape out;
    for (const SymExpr& e : s) {
      if (!jit::is_const(e, 1)) out.push_back(e);
    }
    return out;
  };
  const jit::SymShape f = big(from), t = big(to);
  size_t j = 0;
  for (const SymExpr& size : f) {
    if (j >= t.size()) return false;
    SymExpr prod = t[j++];
    while (!prod.same(size) && j < t.size()) prod = jit::mul(prod, t[j++]);
    if (!prod.same(size)) return false;
  }
  return j == t.size();
}

void walk(Value& v, const std::function<void(Value&)>& fn) {
  fn(v);
  for (Value& item : v.items) walk(item, fn);
}

// The dunder Python calls for `x op= y` on a tensor.
const char* inplace_dunder(int nb_op) {
  switch (nb_op) {
    case NB_INPLACE_ADD: return "__iadd__";
    case NB_INPLACE_SUBTRACT: return "__isub__";
    case NB_INPLACE_MULTIPLY: return "__imul__";
    case NB_INPLACE_TRUE_DIVIDE: return "__itruediv__";
    case NB_INPLACE_FLOOR_DIVIDE: return "__ifloordiv__";
    case NB_INPLACE_REMAINDER: return "__imod__";
    case NB_INPLACE_POWER: return "__ipow__";
    case NB_INPLACE_AND: return "__iand__";
    case NB_INPLACE_OR: return "__ior__";
    case NB_INPLACE_XOR: return "__ixor__";
    default: return nullptr;
  }
}

}  // namespace

// ---- storages and views ----

Status Tracer::push_view(Expected<NodeId> n, const std::string& what, NodeId of) {
  // A view that changes nothing is still a tensor of its own in eager (y.view(y.shape) is not y).
  if (n && *n == of) n = graph_.alias(of);
  if (n) mark_view(*n, of);
  return push_built(std::move(n), what, of);
}

NodeId Tracer::storage_of(NodeId n) const {
  for (auto it = view_parent_.find(n); it != view_parent_.end(); it = view_parent_.find(n)) n = it->second;
  const auto k = storage_key_.find(n);
  return k == storage_key_.end() ? n : k->second;
}

// Whether two views of one storage share no element: below their last common view,
// each is a select or a slice of the same dim, at constant ranges that do not meet,
// and nothing from the common view up to the storage is an expand (whose elements
// alias one another). An input updated in place is guarded to have no internally
// overlapping elements, and a tensor the graph made has none.
bool Tracer::disjoint_views(NodeId a, NodeId b) const {
  auto chain = [&](NodeId n) {  // from the view down to its base
    std::vector<NodeId> c{n};
    for (auto p = view_parent_.find(n); p != view_parent_.end(); p = view_parent_.find(n)) c.push_back(n = p->second);
    return c;
  };
  const std::vector<NodeId> ca = chain(a), cb = chain(b);
  size_t i = ca.size(), j = cb.size();
  while (i > 0 && j > 0 && ca[i - 1] == cb[j - 1]) --i, --j;
  if (i == 0 || j == 0 || i == ca.size()) return false;  // one is a view of the other, or no common view
  for (size_t k = i; k < ca.size(); ++k) {
    if (graph_.node(ca[k]).op == jit::Op::Expand) return false;
  }
  // The first and last positions that a select or a slice takes along its dim, where
  // they are constants (a slice's last one needs its length).
  struct Range {
    std::optional<int64_t> lo, hi;
  };
  auto range = [&](const jit::Node& n) -> std::optional<Range> {
    if (n.op == jit::Op::Select) {
      const auto at = n.args[0].as_int();
      return Range{at, at};
    }
    if (n.op != jit::Op::Slice) return std::nullopt;
    const auto start = n.args[0].as_int(), step = n.args[1].as_int();
    const auto len = n.sym[static_cast<size_t>(n.dims[0])].as_int();
    Range r{start, std::nullopt};
    if (start && step && len && *step >= 1) r.hi = *start + (*len - 1) * *step;  // empty: hi < lo
    return r;
  };
  const jit::Node& na = graph_.node(ca[i - 1]);
  const jit::Node& nb = graph_.node(cb[j - 1]);
  if (na.dims.empty() || nb.dims.empty() || na.dims[0] != nb.dims[0]) return false;
  const auto ra = range(na), rb = range(nb);
  if (!ra || !rb) return false;
  auto below = [](const Range& x, const Range& y) { return x.hi && y.lo && *x.hi < *y.lo; };
  auto empty = [](const Range& x) { return x.lo && x.hi && *x.hi < *x.lo; };
  return empty(*ra) || empty(*rb) || below(*ra, *rb) || below(*rb, *ra);
}

// The view `view` (of its parent) taken again from `parent`, a node of the same
// shape and dtype as the old parent.
Expected<NodeId> Tracer::replay_view(NodeId view, NodeId parent) {
  const jit::Node n = graph_.node(view);
  Expected<NodeId> r = Error{"a view made by " + std::string(jit::aten_name(n.op)) + " cannot be taken again"};
  switch (n.op) {
    case jit::Op::Permute: r = graph_.permute(parent, n.dims); break;
    case jit::Op::Reshape: r = graph_.reshape(parent, n.sym); break;
    case jit::Op::Expand: r = graph_.expand(parent, n.sym); break;
    case jit::Op::Slice:
      r = graph_.slice(parent, n.dims[0], n.args[0], n.sym[static_cast<size_t>(n.dims[0])], *n.args[1].as_int());
      break;
    case jit::Op::Select: r = graph_.select(parent, n.dims[0], n.args[0]); break;
    default: break;
  }
  // A view of the whole tensor (y = x[:]) stays an object of its own: `y is x` is false.
  if (r && *r == parent) return graph_.alias(parent);
  return r;
}

// A copy of x as a node of its own (x * 1, or x & True for bools: every value kept).
Expected<NodeId> Tracer::fresh_copy(NodeId x) {
  const bool is_bool = graph_.node(x).dtype == DType::Bool;
  const NodeId one = is_bool ? graph_.scalar(1, jit::ScalarKind::Bool) : graph_.scalar_int(1);
  return graph_.pointwise(is_bool ? jit::Op::BitwiseAnd : jit::Op::Mul, {x, one});
}

Status Tracer::check_writable(const Value& dst, const std::string& what) {
  if (!is_tensor(dst)) return unsupported(what + " of " + describe(dst));
  const NodeId storage = storage_of(dst.node);
  if (alias_lost_.count(storage)) {
    return unsupported(what + " of a tensor whose views crossed a graph break (not supported yet)");
  }
  const jit::Node& root = graph_.node(storage);
  if (root.op == jit::Op::Placeholder) {
    const InputRef ref = placeholder_slot_[static_cast<size_t>(root.index)];
    if (ref.kind == InputRef::Kind::Reg) {
      return unsupported(what + " of a tensor computed before a graph break (not supported yet)");
    }
    if (committed_ || continuation_) return unsupported(what + " of an input after a graph break (not supported yet)");
    // Eager refuses it outside inference mode and allows it inside; either way eager does it.
    if (inference_inputs_.count(storage)) return unsupported(what + " of an inference tensor (eager checks it)");
    if (grad_inputs_.count(storage) && grad_enabled_) {
      return unsupported(what + " of an input that requires grad, with grad mode on (eager raises)");
    }
  }
  return ok();
}

Status Tracer::write_to(const Value& dst, NodeId value, const std::string& what, NodeId* now) {
  FJ_TRY(check_writable(dst, what));
  const NodeId storage = storage_of(dst.node);
  // Through each view step, up to the base.
  NodeId cur = dst.node, val = value;
  for (auto p = view_parent_.find(cur); p != view_parent_.end(); p = view_parent_.find(cur)) {
    const NodeId parent = p->second;
    const jit::Node v = graph_.node(cur);
    Expected<NodeId> up = Error{""};
    switch (v.op) {
      case jit::Op::Permute: {
        std::vector<int64_t> inverse(v.dims.size());
        for (size_t i = 0; i < v.dims.size(); ++i) inverse[static_cast<size_t>(v.dims[i])] = static_cast<int64_t>(i);
        up = graph_.permute(val, inverse);
        break;
      }
      case jit::Op::Reshape:
        // Inputs are taken as contiguous (strides are not guarded under dynamic
        // shapes): a reshape that merges their dims may be a copy in eager.
        if (graph_.node(storage).op == jit::Op::Placeholder && !splits_only(graph_.node(parent).sym, v.sym)) {
          return unsupported(what + " through a reshape that merges dims of an input (eager may copy)");
        }
        up = graph_.reshape(val, graph_.node(parent).sym);
        break;
      case jit::Op::Slice: up = graph_.slice_scatter(parent, val, v.dims[0], v.args[0], *v.args[1].as_int()); break;
      case jit::Op::Select: {
        auto u = graph_.unsqueeze(val, v.dims[0]);
        if (!u) return unsupported(what + ": " + u.error());
        up = graph_.slice_scatter(parent, *u, v.dims[0], v.args[0], 1);
        break;
      }
      case jit::Op::Expand:
        return unsupported(what + " of an expanded view (eager raises: elements share memory)");
      default:
        return unsupported(what + " through a view made by " + std::string(jit::aten_name(v.op)) + " (not supported yet)");
    }
    if (!up) return unsupported(what + ": " + up.error());
    val = *up;
    cur = parent;
  }
  sync_scalar_inputs();
  const NodeId old_base = cur;
  const NodeId new_base = val;
  if (new_base == old_base) {  // wrote the values it held (cannot happen: values are fresh)
    *now = dst.node;
    return ok();
  }
  storage_key_[new_base] = storage;
  storage_now_[storage] = new_base;
  if (may_be_noncontig(old_base)) mark_noncontig(new_base);
  // Every live value of this storage, rebound: the base, and each view taken again.
  std::unordered_map<NodeId, NodeId> renewed{{old_base, new_base}};
  std::string failure;
  std::function<NodeId(NodeId)> renew = [&](NodeId n) -> NodeId {
    auto it = renewed.find(n);
    if (it != renewed.end()) return it->second;
    const auto p = view_parent_.find(n);
    FJ_CHECK(p != view_parent_.end(), "a value of the written storage that is neither its base nor a view");
    const NodeId parent = renew(p->second);
    if (parent < 0) return -1;
    auto r = replay_view(n, parent);
    if (!r) {
      failure = r.error();
      return -1;
    }
    mark_view(*r, parent);
    if (may_be_noncontig(n)) mark_noncontig(*r);
    renewed[n] = *r;
    return *r;
  };
  auto rebind = [&](Value& v) {
    const bool array = v.kind == ValueKind::Array;  // a NumPy array of the same memory
    if ((v.kind != ValueKind::Tensor && !array) || (!array && is_number(v)) || storage_of(v.node) != storage) return;
    const NodeId n = renew(v.node);
    if (n >= 0) v.node = n;
  };
  for (Value* v : list_roots()) walk(*v, rebind);  // frames, argument lists, autograd ctxs
  *now = renew(dst.node);
  if (!failure.empty() || *now < 0) return unsupported(what + ": " + failure);
  sync_scalar_inputs();
  ++writes_;
  note_write(-1);
  return ok();
}

Status Tracer::finish_inplace(const Value& dst, NodeId result, size_t first_new, const std::vector<Value>& operands,
                              const std::string& what) {
  const jit::Node d = graph_.node(dst.node);  // copies: building nodes moves the graph's
  const jit::Node r = graph_.node(result);
  // Operands in the written memory: eager raises on a partial overlap; this tracer
  // reads only dst itself or views it can prove disjoint from dst.
  const NodeId storage = storage_of(dst.node);
  for (const Value& o : operands) {
    if (is_tensor(o) && o.node != dst.node && storage_of(o.node) == storage && !disjoint_views(o.node, dst.node)) {
      return unsupported(what + " with an operand that shares the written tensor's memory (not supported)");
    }
  }
  if (r.rank() != d.rank()) return unsupported(what + ": the result's shape differs from the tensor's (eager raises)");
  for (size_t i = 0; i < d.rank(); ++i) {
    if (r.sym[i].same(d.sym[i])) continue;
    bool eq = false;
    FJ_TRY(guard_truth(jit::eq(r.sym[i], d.sym[i]), &eq));
    if (!eq) return unsupported(what + ": the result's shape differs from the tensor's (eager raises)");
  }
  NodeId value = result;
  if (r.dtype != d.dtype) {
    if (!can_cast(r.dtype, d.dtype)) {
      return unsupported(what + ": result type " + std::string(jit::dtype_name(r.dtype)) + " cannot be cast to " +
                         std::string(jit::dtype_name(d.dtype)) + " (eager raises)");
    }
    auto c = graph_.cast(result, d.dtype);
    if (!c) return unsupported(what + ": " + c.error());
    value = *c;
  }
  if (!r.sym.empty() && !jit::same_shape(r.sym, d.sym)) {
    auto e = graph_.reshape(value, d.sym);  // equal sizes, written as the tensor's
    if (!e) return unsupported(what + ": " + e.error());
    value = *e;
  }
  if (static_cast<size_t>(value) < first_new) {  // an existing value: write a copy of it
    auto c = fresh_copy(value);
    if (!c) return unsupported(what + ": " + c.error());
    value = *c;
  }
  NodeId now;
  FJ_TRY(write_to(dst, value, what, &now));
  Value self = dst;
  self.node = now;
  push(std::move(self));
  return ok();
}

// ---- in-place methods ----

bool Tracer::is_inplace_method(const std::string& name) {
  if (name == "copy_" || name == "zero_" || name == "fill_") return true;
  if (name.size() < 2 || name.back() != '_' || name[0] == '_') return false;
  const PyOp* op = op_by_name(name.substr(0, name.size() - 1));
  if (op == nullptr) return false;
  switch (op->binding) {
    case Binding::Plain: case Binding::ClampBounds: case Binding::GeluApprox: case Binding::Alpha: return true;
    case Binding::Tensor:
      return op->tensor_op == TensorOp::Tril || op->tensor_op == TensorOp::Triu || op->tensor_op == TensorOp::CumSum;
    case Binding::CastFixed: return false;
  }
  return false;
}

std::optional<Status> Tracer::call_torch_inplace(CallSite& c) {
  if (c.callable.kind != ValueKind::Const || is_opaque(c.callable) || !PyCFunction_Check(c.callable.obj.get()) ||
      c.args.empty() || c.args[0].kind != ValueKind::Tensor) {
    return std::nullopt;
  }
  const std::string name = reinterpret_cast<PyCFunctionObject*>(c.callable.obj.get())->m_ml->ml_name;
  if (!is_inplace_method(name)) return std::nullopt;
  PyObject* torch = PyImport_AddModule("torch");  // borrowed; imported long before
  PyRef same = torch ? PyRef::steal(PyObject_GetAttrString(torch, name.c_str())) : PyRef();
  if (!same) guards::clear_error();
  if (same.get() != c.callable.obj.get()) return std::nullopt;  // not torch's own
  return call_inplace_method(name, std::move(c.args), c.kw_names.get());
}

Status Tracer::call_inplace_method(const std::string& name, std::vector<Value> args, PyObject* kw_names) {
  const std::string what = "." + name + "()";
  if (args.empty() || !is_tensor(args[0])) return unsupported(what + " of " + (args.empty() ? "nothing" : describe(args[0])));
  const Value dst = args[0];
  const jit::Node d = graph_.node(dst.node);
  const size_t first_new = graph_.size();
  const size_t nkw = kw_names ? static_cast<size_t>(PyTuple_GET_SIZE(kw_names)) : 0;
  if (name == "zero_" || name == "fill_" || name == "copy_") {
    if (nkw != 0) return unsupported(what + " with keyword arguments (not supported yet)");
    Expected<NodeId> value = Error{""};
    if (name == "zero_") {
      if (args.size() != 1) return unsupported(what + " with arguments (CPython raises)");
      value = graph_.full(d.sym, graph_.scalar_int(0), d.dtype);
    } else if (name == "fill_") {
      if (args.size() != 2) return unsupported(what + " with these arguments");
      if (is_tensor(args[1])) {
        if (graph_.node(args[1].node).rank() != 0) return unsupported(what + " with a tensor of dims (eager raises)");
        auto c = graph_.cast(args[1].node, d.dtype);
        value = c ? graph_.expand(*c, d.sym) : c;
      } else {
        FJ_TRY(check_fill_value(args[1], d.dtype, what));
        auto v = operand(args[1]);
        if (!v) return unsupported(what + ": " + v.error());
        value = graph_.full(d.sym, *v, d.dtype);
      }
    } else {
      if (args.size() != 2 && !(args.size() == 3 && args[2].kind == ValueKind::Const && args[2].obj.get() == Py_False)) {
        return unsupported(what + " with these arguments");
      }
      if (!is_tensor(args[1])) return unsupported(what + " from " + describe(args[1]) + " (eager raises)");
      auto e = graph_.expand(args[1].node, d.sym);  // copy_ broadcasts the source, any dtype
      value = e ? graph_.cast(*e, d.dtype) : e;
    }
    if (!value) return unsupported(what + ": " + value.error());
    sync_scalar_inputs();
    std::vector<Value> operands(args.begin() + 1, args.end());
    const NodeId result = *value;
    if (name == "copy_") {
      // copy_ does not check castability: the source converts to the tensor's type.
      for (const Value& o : operands) {
        if (is_tensor(o) && storage_of(o.node) == storage_of(dst.node) && o.node != dst.node) {
          return unsupported(what + " from a tensor that shares the written tensor's memory (not supported)");
        }
      }
    }
    return finish_inplace(dst, result, first_new, operands, what);
  }
  const PyOp* op = op_by_name(name.substr(0, name.size() - 1));
  if (op == nullptr) return unsupported(what + " (not supported yet)");
  // The out-of-place op, then its result written back.
  std::vector<Value> operands(args.begin() + 1, args.end());
  FJ_TRY(call_py_op(*op, std::move(args), kw_names));
  Value result = pop();
  if (!is_tensor(result)) return unsupported(what + " gave " + describe(result));
  return finish_inplace(dst, result.node, first_new, operands, what);
}

// (lhs, rhs -- lhs): `x op= y` on a tensor x is x.op_(y).
Status Tracer::inplace_binary(int nb_op, const Value& lhs, const Value& rhs) {
  const char* dunder = inplace_dunder(nb_op);
  const int base = nb_op - kNbInplaceAdd;
  const auto op = binary_tensor_op(base);
  if (dunder == nullptr || !op) return unsupported("in-place operator " + std::to_string(nb_op) + " on a tensor (not supported yet)");
  FJ_TRY(require_tensor_attr(dunder));
  const std::string what = std::string(dunder);
  const size_t first_new = graph_.size();
  FJ_TRY(call_op(*op, {lhs, rhs}));
  Value result = pop();
  return finish_inplace(lhs, result.node, first_new, {rhs}, what);
}

// ---- item assignment ----

// (value, container, index -- )
Status Tracer::op_store_subscr(const Instruction&) {
  Value index = pop();
  Value container = pop();
  Value value = pop();
  if (is_traced_list(container)) return list_setitem(container, index, value);
  if (std::optional<Status> s = array_store_subscr(container, index, value)) return std::move(*s);
  if (container.kind == ValueKind::Dict) return dict_store(container, index, std::move(value));
  if (DequeCalls::is_deque(container)) return DequeCalls::store_subscript(*this, container, index, value);
  if (container.kind == ValueKind::Object) {  // its class's Python __setitem__
    std::optional<Status> s = python_dunder(container, "__setitem__", {index, std::move(value)});
    if (!s) return unsupported("item assignment to " + describe(container) + " (not supported yet)");
    FJ_TRY(std::move(*s));
    pop();  // its None
    return ok();
  }
  if (!is_tensor(container)) return unsupported("item assignment to " + describe(container) + " (not supported yet)");
  if (is_numpy_scalar(value) && value.obj.get() != numpy_attr("float64") && value.expr.type() != jit::SymType::Int) {
    return unsupported("assignment of a NumPy " + std::string(reinterpret_cast<PyTypeObject*>(value.obj.get())->tp_name) +
                       " into a tensor (eager raises TypeError)");
  }
  FJ_TRY(require_tensor_attr("__setitem__"));
  return setitem(container, index, value);
}

// (value, owner -- ): attributes of a custom Function's ctx, and the store that
// changes nothing: `self.n += 1` on a tensor
// attribute stores back the very tensor that __iadd__ updated in place (nn.Module's
// or object's __setattr__, guarded, sets it to itself).
Status Tracer::op_store_attr(const Instruction& ins) {
  const std::string name = FJ_TRY(guards::utf8_of(PyTuple_GET_ITEM(cur_.co->co_names, ins.arg)));
  Value owner = pop();
  Value value = pop();
  if (owner.kind == ValueKind::Object) return object_store_attr(owner, name, std::move(value));
  if (owner.kind == ValueKind::Const && owner.ctx >= 0 && owner.method.empty()) {
    return store_ctx_attr(name, owner, std::move(value));
  }
  const std::string no = "assignment to attribute '" + name + "' (not supported yet)";
  if (!is_tensor(value) || owner.kind != ValueKind::Const || owner.fresh || owner.source.kind == Source::Kind::None) {
    return unsupported(no);
  }
  Source child = owner.source;
  child.attrs.push_back(name);
  const auto seen = path_inputs_.find(source_text(child));
  if (seen == path_inputs_.end()) return unsupported(no);
  const auto now = storage_now_.find(seen->second);
  if (value.node != (now == storage_now_.end() ? seen->second : now->second)) return unsupported(no);
  static PyObject* module_setattr = [] {
    PyObject* mod = PyImport_ImportModule("torch.nn.modules.module");
    PyObject* cls = mod ? PyObject_GetAttrString(mod, "Module") : nullptr;
    PyObject* fn = cls ? PyObject_GetAttrString(cls, "__setattr__") : nullptr;  // kept for the process
    Py_XDECREF(cls);
    Py_XDECREF(mod);
    guards::clear_error();
    return fn;
  }();
  PyObject* obj = owner.obj.get();
  PyRef key = PyRef::steal(PyUnicode_InternFromString("__setattr__"));
  PyObject* fn = _PyType_Lookup(Py_TYPE(obj), key.get());
  guards::PathRoot root;
  PyRef holder;
  const bool plain = Py_TYPE(obj)->tp_setattro == PyObject_GenericSetAttr || (fn != nullptr && fn == module_setattr);
  if (!plain || fn == nullptr || !path_root(owner, &root, &holder)) return unsupported(no);
  guards().add_path_method(source_text(owner.source), root, owner.source.attrs, "__setattr__", fn);
  return ok();
}

Status Tracer::setitem(const Value& x, const Value& index, const Value& value) {
  const std::string what = "assignment to a tensor's items";
  const size_t first_new = graph_.size();
  const jit::Node xn = graph_.node(x.node);
  if (!is_tensor(value)) FJ_TRY(check_fill_value(value, xn.dtype, what));  // t[0] = 1e308: eager raises
  if (is_tensor(index) && graph_.node(index.node).dtype == DType::Bool) {
    // x[mask] = v with a mask over leading dims and a number (or 0-d tensor) v.
    const jit::Node m = graph_.node(index.node);
    if (m.rank() > xn.rank() || m.rank() == 0) return unsupported(what + " with a mask of this rank (not supported yet)");
    for (size_t i = 0; i < m.rank(); ++i) {
      if (m.sym[i].same(xn.sym[i])) continue;
      bool eq = false;
      FJ_TRY(guard_truth(jit::eq(m.sym[i], xn.sym[i]), &eq));
      if (!eq) return unsupported(what + ": a mask whose shape differs from the tensor's (eager raises)");
    }
    if (is_tensor(value) && graph_.node(value.node).rank() != 0) {
      return unsupported(what + " with a mask and a tensor of values (not supported yet)");
    }
    if (is_tensor(value) && storage_of(value.node) == storage_of(x.node)) {
      return unsupported(what + " from a tensor that shares the written tensor's memory (not supported)");
    }
    jit::SymShape ms = xn.sym;
    for (size_t i = m.rank(); i < ms.size(); ++i) ms[i] = SymExpr::integer(1);
    for (size_t i = 0; i < m.rank(); ++i) ms[i] = m.sym[i];
    auto mr = graph_.reshape(index.node, ms);
    if (!mr) return unsupported(what + ": " + mr.error());
    NodeId v;
    if (is_tensor(value)) {
      auto c = graph_.cast(value.node, xn.dtype);
      if (!c) return unsupported(what + ": " + c.error());
      v = *c;
    } else {
      auto o = operand(value);
      if (!o) return unsupported(what + ": " + o.error());
      auto f = graph_.full({}, *o, xn.dtype);
      if (!f) return unsupported(what + ": " + f.error());
      v = *f;
    }
    auto w = graph_.pointwise(jit::Op::Where, {*mr, v, x.node});
    if (!w) return unsupported(what + ": " + w.error());
    auto c = graph_.cast(*w, xn.dtype);
    if (!c) return unsupported(what + ": " + c.error());
    FJ_TRY(finish_inplace(x, *c, first_new, {}, what));
    pop();
    return ok();
  }
  // Basic indexing only: x[index] is then a view, written like any view.
  std::vector<Value> items = index.kind == ValueKind::Tuple ? index.items : std::vector<Value>{index};
  if (index.kind == ValueKind::Const && !is_opaque(index) && PyTuple_CheckExact(index.obj.get())) {
    items.clear();
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(index.obj.get()); ++i) {
      items.push_back(Value::constant(PyRef::borrow(PyTuple_GET_ITEM(index.obj.get(), i))));
    }
  }
  for (const Value& i : items) {
    if (i.kind == ValueKind::Tensor) return unsupported(what + " with a tensor index (not supported yet)");
  }
  FJ_TRY(subscript(x, index));
  const Value target = pop();
  const jit::Node t = graph_.node(target.node);
  NodeId v;
  if (is_tensor(value)) {
    // x[i] op= y: the view was updated in place already and is stored back to
    // itself (the same view of the same base): nothing to write.
    std::function<bool(NodeId, NodeId)> same_view = [&](NodeId a, NodeId b) {
      if (a == b) return true;
      const auto pa = view_parent_.find(a), pb = view_parent_.find(b);
      if (pa == view_parent_.end() || pb == view_parent_.end()) return false;
      const jit::Node& na = graph_.node(a);
      const jit::Node& nb = graph_.node(b);
      if (na.op != nb.op || na.dims != nb.dims || !jit::same_shape(na.sym, nb.sym) || na.args.size() != nb.args.size()) return false;
      for (size_t k = 0; k < na.args.size(); ++k) {
        if (!na.args[k].same(nb.args[k])) return false;
      }
      return same_view(pa->second, pb->second);
    };
    if (same_view(value.node, target.node)) return ok();
    if (storage_of(value.node) == storage_of(target.node) && !disjoint_views(value.node, target.node)) {
      return unsupported(what + " from a tensor that shares the written tensor's memory (not supported)");
    }
    auto e = graph_.expand(value.node, t.sym);  // as copy_: broadcast, converted to the tensor's type
    if (!e) return unsupported(what + ": " + e.error());
    auto c = graph_.cast(*e, t.dtype);
    if (!c) return unsupported(what + ": " + c.error());
    v = *c;
  } else {
    auto o = operand(value);
    if (!o) return unsupported(what + ": " + o.error());
    auto f = graph_.full(t.sym, *o, t.dtype);
    if (!f) return unsupported(what + ": " + f.error());
    v = *f;
  }
  if (static_cast<size_t>(v) < first_new) {
    auto c = fresh_copy(v);
    if (!c) return unsupported(what + ": " + c.error());
    v = *c;
  }
  sync_scalar_inputs();
  NodeId now;
  return write_to(target, v, what, &now);
}

// ---- the end of a trace, and graph breaks ----

// The tensor a view chain starts from, as the plan reads it: an input (an argument, a
// path tensor, a register of an earlier segment), or the base node itself made an
// output of the final graph. False when the base has no such form.
bool Tracer::view_base(NodeId base, ConvertCtx& ctx, PlanValue* out) {
  const NodeId storage = storage_of(base);
  const jit::Node& root = graph_.node(storage);
  if (root.op == jit::Op::Placeholder) {
    const InputRef ref = placeholder_slot_[static_cast<size_t>(root.index)];
    out->kind = ref.kind == InputRef::Kind::Arg    ? PlanValue::Kind::Arg
                : ref.kind == InputRef::Kind::Path ? PlanValue::Kind::PathTensor
                                                   : PlanValue::Kind::Reg;
    out->index = ref.index;
    // A register is never written in place (write_to refuses it): base is the register.
    return ref.kind != InputRef::Kind::Reg || base == storage;
  }
  if (ctx.output_index == nullptr) return false;
  auto [it, fresh] = ctx.output_index->emplace(base, static_cast<int>(ctx.outputs->size()));
  if (fresh) ctx.outputs->push_back(base);
  out->kind = PlanValue::Kind::GraphOutput;
  out->index = it->second;
  return true;
}

bool Tracer::aliasing_view(NodeId n, ConvertCtx& ctx, PlanValue* out) {
  std::vector<NodeId> chain;
  NodeId cur = n;
  for (auto p = view_parent_.find(cur); p != view_parent_.end(); p = view_parent_.find(cur)) {
    chain.push_back(cur);
    cur = p->second;
  }
  if (chain.empty()) return false;
  // The steps build_view can take at run time; a view made by any other op is
  // computed as an output of its own.
  static constexpr jit::Op kRebuilt[] = {jit::Op::Permute, jit::Op::Reshape, jit::Op::Expand, jit::Op::Select,
                                         jit::Op::Slice};
  for (NodeId c : chain) {
    if (std::find(std::begin(kRebuilt), std::end(kRebuilt), graph_.node(c).op) == std::end(kRebuilt)) return false;
  }
  PlanValue base;
  if (!view_base(cur, ctx, &base)) return false;
  auto constant = [](PyObject* o) {
    PlanValue c;
    c.kind = PlanValue::Kind::Const;
    c.obj = PyRef::steal(o);
    return c;
  };
  auto number = [&](const SymExpr& e) {
    if (auto i = e.as_int()) return constant(PyLong_FromLongLong(*i));
    PlanValue s;
    s.kind = PlanValue::Kind::Sym;
    s.expr = e;
    plan_->must_evaluate.push_back(e);
    return s;
  };
  PlanValue v;
  v.kind = PlanValue::Kind::View;
  v.items.push_back(std::move(base));
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
    const jit::Node& node = graph_.node(*it);
    PlanValue step;
    step.kind = PlanValue::Kind::Tuple;
    auto add = [&](PlanValue p) { step.items.push_back(std::move(p)); };
    switch (node.op) {
      case jit::Op::Permute: {
        PyObject* dims = PyTuple_New(static_cast<Py_ssize_t>(node.dims.size()));
        for (size_t d = 0; d < node.dims.size(); ++d) PyTuple_SET_ITEM(dims, d, PyLong_FromLongLong(node.dims[d]));
        add(constant(PyUnicode_FromString("permute")));
        add(constant(dims));
        break;
      }
      case jit::Op::Reshape: case jit::Op::Expand:
        add(constant(PyUnicode_FromString(node.op == jit::Op::Reshape ? "reshape" : "expand")));
        for (const SymExpr& e : node.sym) add(number(e));
        break;
      case jit::Op::Select:
        add(constant(PyUnicode_FromString("select")));
        add(constant(PyLong_FromLongLong(node.dims[0])));
        add(number(node.args[0]));
        break;
      case jit::Op::Slice:
        add(constant(PyUnicode_FromString("slice")));
        add(constant(PyLong_FromLongLong(node.dims[0])));
        add(number(node.args[0]));
        add(number(node.sym[static_cast<size_t>(node.dims[0])]));
        add(number(node.args[1]));
        break;
      default:
        return false;
    }
    v.items.push_back(std::move(step));
    if (autograd_ && detached_.count(*it) != 0) {
      PlanValue detach;
      detach.kind = PlanValue::Kind::Tuple;
      detach.items.push_back(constant(PyUnicode_FromString("detach")));
      v.items.push_back(std::move(detach));
    }
  }
  *out = std::move(v);
  return true;
}

Status Tracer::seal_writes(ConvertCtx& ctx) {
  std::vector<int> tensors;
  std::vector<std::string> names;
  std::vector<bool> updated(placeholder_slot_.size(), false);
  for (const auto& [storage, now] : storage_now_) {
    const jit::Node& root = graph_.node(storage);
    if (root.op != jit::Op::Placeholder || now == storage) continue;
    const InputRef ref = placeholder_slot_[static_cast<size_t>(root.index)];
    FJ_CHECK(ref.kind != InputRef::Kind::Reg, "a register written in place");
    auto [it, fresh] = ctx.output_index->emplace(now, static_cast<int>(ctx.outputs->size()));
    if (fresh) ctx.outputs->push_back(now);
    plan_->writes.push_back(WriteBack{it->second, ref});
    updated[static_cast<size_t>(root.index)] = true;
  }
  if (plan_->writes.empty()) return ok();
  // A joint plan writes back after its autograd Function's forward, where
  // check_joint_writes allows it.
  // Inputs written must not share memory with other inputs (f(x, x), a view of a
  // parameter passed as an argument) or within themselves (an expanded tensor): a
  // guard, and this call must pass it too, else eager runs it.
  auto name_of = [&](size_t i) {
    // The source that tensor_input gave placeholder i ("L['x']", "L['self'].w").
    for (const auto& [node, name] : input_names_) {
      const jit::Node& p = graph_.node(node);
      if (p.op == jit::Op::Placeholder && static_cast<size_t>(p.index) == i) return name;
    }
    return "input tensor " + std::to_string(i);
  };
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t i = 0; i < placeholder_slot_.size(); ++i) {
      if (updated[i] != (pass == 0)) continue;
      const InputRef ref = placeholder_slot_[i];
      if (ref.kind == InputRef::Kind::Reg) continue;
      tensors.push_back(ref.kind == InputRef::Kind::Arg ? ref.index : -ref.index - 1);
      names.push_back(name_of(i));
    }
  }
  size_t num_updated = 0;
  for (bool u : updated) num_updated += u;
  entry_->guards.add_no_overlap(tensors, num_updated, names);
  jit::Bindings b;
  if (!entry_->guards.check(in_, &b)) {
    return unsupported("an input updated in place shares memory with another input or within itself (" +
                       entry_->guards.check_verbose(in_).value_or("?") + ")");
  }
  return ok();
}

Status Tracer::cut_storages(const std::vector<NodeId>& live, const std::unordered_map<NodeId, NodeId>& remap) {
  // Storages with more than one live value, or a live view: their values become
  // separate registers, so writes to any of them could no longer reach the others.
  std::unordered_map<NodeId, int> count;
  std::unordered_set<NodeId> lost;
  for (NodeId n : live) {
    const NodeId s = storage_of(n);
    if (++count[s] > 1 || view_parent_.count(n)) lost.insert(s);
  }
  std::unordered_set<NodeId> next_lost;
  for (NodeId n : live) {
    if (lost.count(storage_of(n)) || alias_lost_.count(storage_of(n))) next_lost.insert(remap.at(n));
  }
  // Inputs that stay inputs keep their names and their requires_grad.
  std::unordered_set<NodeId> next_grad;
  std::unordered_map<NodeId, std::string> next_names;
  for (NodeId n : live) {
    if (grad_inputs_.count(n)) next_grad.insert(remap.at(n));
    if (auto it = input_names_.find(n); it != input_names_.end()) next_names[remap.at(n)] = it->second;
  }
  view_parent_.clear();
  path_inputs_.clear();
  storage_key_.clear();
  storage_now_.clear();
  grad_inputs_ = std::move(next_grad);
  inference_inputs_.clear();  // inputs are not written after a break
  input_names_ = std::move(next_names);
  alias_lost_ = std::move(next_lost);
  return ok();
}

}  // namespace fj::interp
