// IS_OP: `a is b` answered while tracing where identity is known (constants fixed by
// guards, singletons, lists, dicts and objects the frame made, tensors an op made),
// guarded where it rests on a path or an argument, and ending the trace elsewhere.
#include "interp/trace/tracer.h"

namespace fj::interp {

namespace {
bool is_singleton(PyObject* o) { return o == Py_None || o == Py_True || o == Py_False; }
}  // namespace

// `a is b` where one side is None, True or False and the other an object whose class
// the trace knows but not its identity (opaque_type, a module guarded by class): an
// object of another class is never it.
std::optional<bool> Tracer::singleton_test(const Value& a, const Value& b) {
  const auto singleton = [](const Value& v) { return v.kind == ValueKind::Const && !is_opaque(v) && is_singleton(v.obj.get()); };
  const Value* one = singleton(a) ? &a : singleton(b) ? &b : nullptr;
  const Value& other = one == &a ? b : a;
  if (one == nullptr || other.kind != ValueKind::Const) return std::nullopt;
  PyObject* type = is_opaque(other)        ? opaque_type(other)
                   : other.path_slot >= 0 ? reinterpret_cast<PyObject*>(Py_TYPE(other.obj.get()))  // guarded by class
                                           : nullptr;
  if (type == nullptr) return std::nullopt;
  if (type != reinterpret_cast<PyObject*>(Py_TYPE(one->obj.get()))) return false;
  return std::nullopt;  // a bool result may be True or False: not known from its class
}

// `a is b` of two objects the frame finds by path (modules guarded by class, objects
// below arguments): answered now and guarded at both paths.
std::optional<bool> Tracer::paths_same(const Value& a, const Value& b) {
  if (a.kind != ValueKind::Const || b.kind != ValueKind::Const || is_opaque(a) || is_opaque(b) ||
      (a.path_slot < 0 && b.path_slot < 0)) {
    return std::nullopt;
  }
  guards::PathRoot ra, rb;
  PyRef ha, hb;
  if (!path_root(a, &ra, &ha) || !path_root(b, &rb, &hb)) return std::nullopt;
  const bool same = a.obj.get() == b.obj.get();
  guards().add_paths_same(source_text(a.source) + " is " + source_text(b.source), ra, a.source.attrs, rb,
                          b.source.attrs, same);
  return same;
}

// An object argument the trace passed through unguarded, compared by `is` with a
// known object (`flag is _MISSING`): guarded by identity from here on.
void Tracer::pin_argument(Value& v) {
  if (!is_opaque(v) || v.reg >= 0 || v.source.kind != Source::Kind::Arg || !v.source.attrs.empty() || v.source.arg < 0 ||
      v.source.arg >= in_.num_args) {
    return;
  }
  guards::PathRoot root;
  root.arg = v.source.arg;
  guards().add_path(source_text(v.source), root, {}, v.obj.get());
  v.opaque = false;
  v.pinned = true;
}

// `a is b` of two tensors of different nodes. A tensor that is no view is the object
// its storage began with (an in-place write gives it a new node of that storage; ops
// that return their operand itself give its node): two such are one object exactly
// when their storages are one, told where either storage began in this graph (not
// an input, which may be passed twice). Views are left alone: a view op makes a new
// object, but a write rebinds an existing view to a new node too.
std::optional<bool> Tracer::tensors_same(const Value& a, const Value& b) const {
  if (!is_tensor(a) || !is_tensor(b) || view_parent_.count(a.node) != 0 || view_parent_.count(b.node) != 0) return std::nullopt;
  const jit::NodeId x = storage_of(a.node), y = storage_of(b.node);
  if (x == y) return true;
  const auto made = [&](jit::NodeId n) { return graph_.node(n).op != jit::Op::Placeholder; };
  if (made(x) || made(y)) return false;
  return std::nullopt;
}

// (lhs, rhs -- bool)
Status Tracer::op_is_op(const Instruction& ins) {
  Value rhs = pop();
  Value lhs = pop();
  bool same;
  // Constants from arguments are guarded by value, not identity (an equal string or a
  // big int may be another object next time): `is` on them ends the trace, except
  // for the singletons None, True and False.
  // An object guarded by class (path_slot) may be another one at each call.
  const auto known = [&](const Value& v) {
    if (v.kind == ValueKind::Const && v.pinned && v.reg < 0) return true;
    return v.kind == ValueKind::Const && !is_opaque(v) &&
           ((v.source.kind != Source::Kind::Arg && v.path_slot < 0) || is_singleton(v.obj.get()) ||
            (v.source.kind == Source::Kind::Arg && v.source.attrs.empty() && guarded_by_identity(v.obj.get())));
  };
  if (known(rhs)) pin_argument(lhs);
  if (known(lhs)) pin_argument(rhs);
  // None, True, False against a constant guarded by value (its type and value fixed).
  const auto singleton = [&](const Value& v) { return known(v) && is_singleton(v.obj.get()); };
  const auto made_list = [&](const Value& v) { return is_traced_list(v) && v.source.kind == Source::Kind::None; };
  const auto pinned = [&](const Value& v) { return v.kind == ValueKind::Const && !is_opaque(v) && v.path_slot < 0 && v.reg < 0; };
  if (known(lhs) && known(rhs)) {
    same = lhs.obj.get() == rhs.obj.get();
  } else if ((lhs.kind == ValueKind::Tensor && known(rhs)) || (rhs.kind == ValueKind::Tensor && known(lhs))) {
    same = false;  // a tensor is never a constant object
  } else if ((lhs.kind == ValueKind::Sym && known(rhs) && rhs.obj.get() == Py_None) ||
             (rhs.kind == ValueKind::Sym && known(lhs) && lhs.obj.get() == Py_None)) {
    same = false;  // a number is never None
  } else if (is_traced_list(lhs) && is_traced_list(rhs)) {
    same = lhs.identity == rhs.identity;  // one list (argument lists: guarded so, bind_caller_list)
  } else if ((made_list(lhs) && known(rhs)) || (made_list(rhs) && known(lhs))) {
    same = false;  // a list made here is a new object
  } else if (lhs.kind == ValueKind::Object || rhs.kind == ValueKind::Object) {
    // An object made in the frame (not yet given to any call) is no other object.
    same = lhs.kind == rhs.kind && lhs.identity == rhs.identity;
  } else if (lhs.kind == ValueKind::Dict && rhs.kind == ValueKind::Dict && lhs.identity >= 0 && rhs.identity >= 0 &&
             lhs.source.kind == Source::Kind::None && rhs.source.kind == Source::Kind::None) {
    same = lhs.identity == rhs.identity;  // dicts the frame made: one object per identity
  } else if (lhs.kind == ValueKind::Tensor && rhs.kind == ValueKind::Tensor && lhs.node == rhs.node) {
    same = true;  // two tensors of different nodes may still be one object (f(a, a))
  } else if (std::optional<bool> s = tensors_same(lhs, rhs); s.has_value()) {
    same = *s;
  } else if ((singleton(lhs) && pinned(rhs)) || (singleton(rhs) && pinned(lhs))) {
    same = lhs.obj.get() == rhs.obj.get();  // v is None of an argument guarded by its value
  } else if (std::optional<bool> s = singleton_test(lhs, rhs); s.has_value()) {
    same = *s;
  } else if (std::optional<bool> s = paths_same(lhs, rhs); s.has_value()) {
    same = *s;
  } else if (std::optional<bool> s = numbers_same(lhs, rhs); s.has_value()) {
    same = *s;
  } else {
    return unsupported("'is' of " + describe(lhs) + " and " + describe(rhs));
  }
  push(Value::constant(PyRef::borrow((same != (ins.arg == 1)) ? Py_True : Py_False)));
  return ok();
}

}  // namespace fj::interp
