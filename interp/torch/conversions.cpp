// The Convert family of interp/torch/torch_ops.def: a tensor converted (to, type_as),
// copied (clone), or a new tensor with its dtype (new_zeros, new_full, ...). Every
// tensor is on the CPU, so a device argument is accepted only where it names the CPU.
#include "interp/trace/tracer.h"

#include "interp/runtime/plan.h"

namespace fj::interp {

using jit::DType;
using jit::NodeId;

namespace {

bool const_obj(const Value& v, PyObject** out) {
  if (v.kind != ValueKind::Const || v.opaque) return false;
  *out = v.obj.get();
  return true;
}

}  // namespace

// Eager returns the tensor itself when neither the dtype changes nor a copy is asked
// for; otherwise a new tensor (a Cast, or a copy keeping the input's layout).
Status Tracer::cast_or_self(const OpCall& c, std::optional<DType> to, bool copy) {
  const Value& x = c.a[0];
  if (to && *to != graph_.node(c.x).dtype) return push_built(graph_.cast(c.x, *to), c.what, c.x);
  if (!copy) {
    push(x);
    return ok();
  }
  return push_built(fresh_copy(c.x), c.what, c.x);
}

// to(dtype | device | other, non_blocking=False, copy=False, *, dtype=, device=, memory_format=)
Status Tracer::lower_to(const OpCall& c) {
  const std::vector<Value>& a = c.a;  // input, *1, *2, dtype, device, non_blocking, copy, memory_format
  std::optional<DType> to;
  bool have_dtype = false, have_device = false;
  auto take_dtype = [&](const Value& v) -> Status {
    if (have_dtype) return unsupported(c.what + " with two dtypes (CPython raises)");
    FJ_TRY(dtype_arg(v, c.what, &to));
    have_dtype = true;
    return ok();
  };
  auto take_device = [&](const Value& v) -> Status {
    PyObject* o = nullptr;
    if (have_device || !const_obj(v, &o) || !is_cpu_device(o)) return unsupported(c.what + " to device " + describe(v) + " (not supported)");
    have_device = true;
    return ok();
  };
  PyObject* o = nullptr;
  const Value& p1 = a[1];
  if (is_tensor(p1)) {  // to(other): other's dtype (every tensor here is on the CPU)
    to = graph_.node(p1.node).dtype;
    have_dtype = have_device = true;
  } else if (const_obj(p1, &o) && dtype_from_torch(o)) {
    FJ_TRY(take_dtype(p1));
  } else if (const_obj(p1, &o) && o != Py_None && (PyUnicode_Check(o) || is_torch_metadata_object(o))) {
    FJ_TRY(take_device(p1));
  } else if (!is_none(p1)) {
    return unsupported(c.what + " to " + describe(p1) + " (not supported yet)");
  }
  const Value& p2 = a[2];
  if (!is_none(p2)) {
    if (have_device && !have_dtype) {
      FJ_TRY(take_dtype(p2));  // to(device, dtype)
    } else if (const_obj(p2, &o) && PyBool_Check(o)) {
      // non_blocking: no effect on the CPU
    } else {
      return unsupported(c.what + " with " + describe(p2) + " (CPython raises)");
    }
  }
  if (!is_none(a[3])) FJ_TRY(take_dtype(a[3]));
  if (!is_none(a[4])) FJ_TRY(take_device(a[4]));
  bool non_blocking = false, copy = false;
  FJ_TRY(bool_arg(a[5], c.what + " non_blocking", &non_blocking));
  FJ_TRY(bool_arg(a[6], c.what + " copy", &copy));
  if (!is_none(a[7])) return unsupported(c.what + " with a memory_format (not supported yet)");
  return cast_or_self(c, to, copy);
}

// type_as(input, other): to(other.dtype)
Status Tracer::lower_type_as(const OpCall& c) {
  if (!is_tensor(c.a[1])) return unsupported(c.what + " of " + describe(c.a[1]) + " (CPython raises)");
  return cast_or_self(c, graph_.node(c.a[1].node).dtype, false);
}

// clone(input, memory_format=None): a copy with the input's layout (preserve_format)
Status Tracer::lower_clone(const OpCall& c) {
  if (!is_none(c.a[1])) return unsupported(c.what + " with a memory_format (not supported yet)");
  return cast_or_self(c, std::nullopt, true);
}

// new_zeros / new_ones / new_empty / new_full: the factory, with input's dtype by default.
Status Tracer::new_filled(const OpCall& c, const Value& value) {
  std::optional<DType> dtype;
  FJ_TRY(factory_options(c, &dtype));
  jit::SymShape sizes;
  FJ_TRY(sizes_arg(c.a[1], c.what + " size", &sizes, false));
  const DType d = dtype.value_or(graph_.node(c.x).dtype);
  return fill(c, sizes, value, d);
}

Status Tracer::lower_new_zeros(const OpCall& c) { return new_filled(c, Value::constant(PyRef::steal(PyLong_FromLong(0)))); }
Status Tracer::lower_new_ones(const OpCall& c) { return new_filled(c, Value::constant(PyRef::steal(PyLong_FromLong(1)))); }
// new_empty: any value will do; zeros, as torch.empty here
Status Tracer::lower_new_empty(const OpCall& c) { return new_filled(c, Value::constant(PyRef::steal(PyLong_FromLong(0)))); }
Status Tracer::lower_new_full(const OpCall& c) {
  if (!fill_dtype(c.a[2])) return unsupported(c.what + " with fill_value " + describe(c.a[2]) + " (not supported yet)");
  return new_filled(c, c.a[2]);
}

}  // namespace fj::interp
