// Handlers that make constants from constants: f-strings (FORMAT_VALUE, BUILD_STRING)
// of constant pieces.
#include "interp/trace/tracer.h"

namespace fj::interp {
namespace {

// An exact int, float, bool, str or None: formatting it runs no user code.
bool formats_in_c(PyObject* o) { return is_plain_scalar(o) || o == Py_None || PyUnicode_CheckExact(o); }

}  // namespace

// (value[, spec] -- str): f"{value}" or f"{value!r:spec}" of a constant.
Status Tracer::op_format_value(const Instruction& ins) {
  Value spec;
  if (ins.arg & 0x04) spec = pop();
  Value v = pop();
  if (v.kind == ValueKind::Sym) {  // a symbolic number: its value, guarded (a str cannot stay symbolic)
    PyRef number;
    FJ_TRY(concrete_number(v, "an f-string", &number));
    v = Value::constant(std::move(number));
  }
  if ((v.kind == ValueKind::Tuple || v.kind == ValueKind::List) && knowable(v, true)) {  // f"{x.shape}"
    KnownObjects made;
    PyRef o;
    FJ_TRY(known_object(v, made, &o));
    v = Value::constant(std::move(o));
  } else if (v.kind != ValueKind::Const || is_opaque(v) || !formats_in_c(v.obj.get())) {
    return unsupported("an f-string of " + describe(v) + " (not supported yet)");
  }
  if ((ins.arg & 0x04) && (spec.kind != ValueKind::Const || is_opaque(spec) || !PyUnicode_CheckExact(spec.obj.get()))) {
    return unsupported("an f-string format spec that is not a constant str");
  }
  PyRef value = v.obj;
  switch (ins.arg & 0x03) {
    case 0: break;
    case 1: value = PyRef::steal(PyObject_Str(value.get())); break;
    case 2: value = PyRef::steal(PyObject_Repr(value.get())); break;
    case 3: value = PyRef::steal(PyObject_ASCII(value.get())); break;
  }
  PyRef out = value ? PyRef::steal(PyObject_Format(value.get(), spec.obj.get())) : PyRef();
  if (!out) {
    guards::clear_error();
    return unsupported("an f-string whose formatting raises (CPython raises)");
  }
  push(Value::constant(std::move(out)));
  return ok();
}

// (pieces[arg] -- str): the f-string's constant pieces joined.
Status Tracer::op_build_string(const Instruction& ins) {
  const auto n = static_cast<size_t>(ins.arg);
  auto& stack = cur_.fs->stack;
  if (n > stack.size()) return unsupported("BUILD_STRING below the value stack");
  PyRef pieces = PyRef::steal(PyTuple_New(static_cast<Py_ssize_t>(n)));
  for (size_t k = 0; k < n; ++k) {
    const Value& p = stack[stack.size() - n + k];
    if (p.kind != ValueKind::Const || is_opaque(p) || !PyUnicode_CheckExact(p.obj.get())) {
      return unsupported("an f-string piece that is " + describe(p));
    }
    PyTuple_SET_ITEM(pieces.get(), static_cast<Py_ssize_t>(k), Py_NewRef(p.obj.get()));
  }
  PyRef empty = PyRef::steal(PyUnicode_FromString(""));
  PyRef joined = PyRef::steal(empty ? PyUnicode_Join(empty.get(), pieces.get()) : nullptr);
  if (!joined) {
    guards::clear_error();
    return unsupported("cannot join an f-string");
  }
  stack.resize(stack.size() - n);
  push(Value::constant(std::move(joined)));
  return ok();
}

}  // namespace fj::interp
