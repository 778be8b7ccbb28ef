// The tables behind interp/torch/torch_ops.h.
#include "interp/torch/torch_ops.h"

#include <opcode.h>

#include <initializer_list>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace fj::interp {
namespace {

std::unordered_map<PyObject*, const PyOp*>& torch_functions() {
  static auto* m = new std::unordered_map<PyObject*, const PyOp*>();
  return *m;
}

using Kind = ParamDefault::Kind;
const ParamDefault kReq{};
const ParamDefault kNone{Kind::None};
ParamDefault num(double v) { return ParamDefault{Kind::Float, v}; }
ParamDefault integer(double v) { return ParamDefault{Kind::Int, v}; }
ParamDefault str(const char* s) { return ParamDefault{Kind::Str, 0, s}; }

// One parameter of a row of interp/torch/torch_ops.def.
struct Param {
  const char* name;
  ParamDefault value;
};

PyOp tensor_op_row(const char* name, TensorOp op, int varargs, std::initializer_list<Param> params) {
  PyOp p{name, jit::Op::Sum, {}, {}, 0, Binding::Tensor};
  for (const Param& q : params) {
    p.params.emplace_back(q.name);
    p.defaults.push_back(q.value);
  }
  p.tensor_op = op;
  p.varargs = varargs;
  return p;
}

// The rows of interp/torch/torch_ops.def (Binding::Tensor): every parameter is handed
// to the op's lowering, which checks the options itself.
void add_tensor_ops(std::vector<PyOp>& t) {
  const ParamDefault kFalse{Kind::Bool, 0};
#define FACTORY_OPTIONS \
  {"dtype", kNone}, {"layout", kNone}, {"device", kNone}, {"pin_memory", kFalse}, {"requires_grad", kFalse}
#define TORCH_OP(Enum, name, Family, First, varargs, ...) \
  t.push_back(tensor_op_row(#name, TensorOp::Enum, varargs, {__VA_ARGS__}));
#define TORCH_SIGNATURE(Enum, name, varargs, ...) \
  t.push_back(tensor_op_row(#name, TensorOp::Enum, varargs, {__VA_ARGS__}));
#include "interp/torch/torch_ops.def"
#undef FACTORY_OPTIONS
}

// The graph op named "aten.<name>.default", if ops.def has one.
std::optional<jit::Op> op_of_aten_name(const std::string& name) {
  for (size_t k = 0; k < jit::kNumOps; ++k) {
    const auto op = static_cast<jit::Op>(k);
    if (jit::aten_name(op) == "aten." + name + ".default") return op;
  }
  return std::nullopt;
}

// The table: name, op, parameters with defaults, number of operand parameters.
std::vector<PyOp> make_table() {
  using jit::Op;
  using jit::DType;
  std::vector<PyOp> t;
  auto unary = [&](const char* name, Op op) { t.push_back(PyOp{name, op, {"input"}, {kReq}, 1}); };
  auto binary = [&](const char* name, Op op) {
    t.push_back(PyOp{name, op, {"input", "other"}, {kReq, kReq}, 2});
  };
  for (auto [n, o] : {std::pair{"add", Op::Add}, {"sub", Op::Sub}}) {
    t.push_back(PyOp{n, o, {"input", "other", "alpha"}, {kReq, kReq, integer(1)}, 2, Binding::Alpha});
  }
  for (auto [n, o] : {std::pair{"mul", Op::Mul}, {"div", Op::Div},
                      {"floor_divide", Op::FloorDiv}, {"remainder", Op::Remainder},
                      {"maximum", Op::Maximum}, {"minimum", Op::Minimum}, {"eq", Op::Eq}, {"ne", Op::Ne},
                      {"lt", Op::Lt}, {"le", Op::Le}, {"gt", Op::Gt}, {"ge", Op::Ge},
                      {"logical_and", Op::LogicalAnd}, {"logical_or", Op::LogicalOr},
                      {"logical_xor", Op::LogicalXor}, {"bitwise_and", Op::BitwiseAnd},
                      {"bitwise_or", Op::BitwiseOr}, {"bitwise_xor", Op::BitwiseXor}}) {
    binary(n, o);
  }
  // F.relu(x, inplace=False) and F.silu: inplace=True ends the trace (the inplace= form is not traced; in-place methods such as x.add_() are, interp/torch/inplace.cpp).
  t.push_back(PyOp{"relu", Op::Relu, {"input", "inplace"}, {kReq, ParamDefault{Kind::Bool, 0}}, 1});
  t.push_back(PyOp{"silu", Op::Silu, {"input", "inplace"}, {kReq, ParamDefault{Kind::Bool, 0}}, 1});
  t.push_back(PyOp{"round", Op::Round, {"input", "decimals"}, {kReq, integer(0)}, 1});
  t.push_back(PyOp{"where", Op::Where, {"condition", "input", "other"}, {kReq, kReq, kReq}, 3});
  t.push_back(PyOp{"pow", Op::PowScalar, {"input", "exponent"}, {kReq, kReq}, 2});
  t.push_back(PyOp{"masked_fill", Op::MaskedFill, {"input", "mask", "value"}, {kReq, kReq, kReq}, 3});
  t.push_back(PyOp{"softplus", Op::Softplus, {"input", "beta", "threshold"},
                   {kReq, integer(1), integer(20)}, 3});
  t.push_back(PyOp{"nan_to_num", Op::NanToNum, {"input", "nan", "posinf", "neginf"},
                   {kReq, num(0.0), kNone, kNone}, 1});
  t.push_back(PyOp{"clamp", Op::Clamp, {"input", "min", "max"}, {kReq, kNone, kNone}, 3,
                   Binding::ClampBounds});
  t.push_back(PyOp{"clamp_min", Op::ClampMin, {"input", "min"}, {kReq, kReq}, 2});
  t.push_back(PyOp{"clamp_max", Op::ClampMax, {"input", "max"}, {kReq, kReq}, 2});
  t.push_back(PyOp{"gelu", Op::Gelu, {"input", "approximate"}, {kReq, str("none")}, 1,
                   Binding::GeluApprox});
  for (auto [n, d] : {std::pair{"float", DType::Float32}, {"double", DType::Float64},
                      {"long", DType::Int64}, {"int", DType::Int32}, {"bool", DType::Bool}}) {
    t.push_back(PyOp{n, Op::Cast, {"input"}, {kReq}, 1, Binding::CastFixed, d});
  }
  add_tensor_ops(t);
  // Last, so that a row above with its own signature (relu, round, ...) keeps the name.
  for (const std::string& name : unary_pointwise_names()) {
    unary(name.c_str(), *op_of_aten_name(name));
  }
  return t;
}

const std::unordered_map<std::string, PyOp>& names() {
  static const auto* m = [] {
    auto* out = new std::unordered_map<std::string, PyOp>();
    for (PyOp& op : make_table()) {
      FJ_CHECK(op.params.size() == op.defaults.size() && op.operands <= op.params.size(),
               "op table: bad signature of " + op.name);
      std::string key = op.name;
      out->emplace(std::move(key), std::move(op));
    }
    return out;
  }();
  return *m;
}

}  // namespace

PyObject* default_object(const ParamDefault& d) {
  switch (d.kind) {
    case Kind::Required: return nullptr;
    case Kind::None: return Py_NewRef(Py_None);
    case Kind::Int: return PyLong_FromDouble(d.number);
    case Kind::Float: return PyFloat_FromDouble(d.number);
    case Kind::Bool: return PyBool_FromLong(d.number != 0);
    case Kind::Str: return PyUnicode_FromString(d.str);
  }
  return nullptr;
}

TensorFamily family(TensorOp op) {
  static constexpr TensorFamily kFamily[] = {
#define TORCH_OP(Enum, name, Family, First, varargs, ...) TensorFamily::Family,
#include "interp/torch/torch_ops.def"
  };
  return kFamily[static_cast<size_t>(op)];
}

FirstArg first_arg(TensorOp op) {
  static constexpr FirstArg kFirst[] = {
#define TORCH_OP(Enum, name, Family, First, varargs, ...) FirstArg::First,
#include "interp/torch/torch_ops.def"
  };
  return kFirst[static_cast<size_t>(op)];
}

std::vector<std::string> unary_pointwise_names() {
  std::vector<std::string> out;
  for (size_t k = 0; k < jit::kNumOps; ++k) {
    const auto op = static_cast<jit::Op>(k);
    const std::string_view aten = jit::aten_name(op);
    if (jit::op_family(op) != jit::Family::Pointwise || jit::op_operands(op) != "T" || op == jit::Op::Cast) continue;
    if (!aten.starts_with("aten.") || !aten.ends_with(".default")) continue;  // not gelu[tanh]
    out.emplace_back(aten.substr(5, aten.size() - 5 - 8));
  }
  return out;
}

const PyOp* op_by_name(const std::string& name) {
  auto it = names().find(name);
  if (it == names().end()) return nullptr;
  return &it->second;
}

std::unordered_set<PyObject*>& scalar_first_ok() {
  static auto* s = new std::unordered_set<PyObject*>();
  return *s;
}

void register_torch_function(PyObject* fn, const PyOp* op, bool tensor_first) {
  auto [it, fresh] = torch_functions().emplace(fn, op);
  if (fresh) Py_INCREF(fn);  // kept for the process: the key must not be reused
  else it->second = op;
  if (tensor_first) scalar_first_ok().erase(fn);
  else scalar_first_ok().insert(fn);
}

std::vector<const char*> binary_dunders(int nb_op) {
  switch (nb_op) {
    case NB_ADD: return {"__add__", "__radd__"};
    case NB_SUBTRACT: return {"__sub__", "__rsub__"};
    case NB_MULTIPLY: return {"__mul__", "__rmul__"};
    case NB_TRUE_DIVIDE: return {"__truediv__", "__rtruediv__"};
    case NB_FLOOR_DIVIDE: return {"__floordiv__", "__rfloordiv__"};
    case NB_REMAINDER: return {"__mod__", "__rmod__"};
    case NB_POWER: return {"__pow__", "__rpow__"};
    case NB_AND: return {"__and__", "__rand__"};
    case NB_OR: return {"__or__", "__ror__"};
    case NB_XOR: return {"__xor__", "__rxor__"};
    default: return {};
  }
}

std::vector<PyObject*>& grad_mode_classes() {
  static auto* v = new std::vector<PyObject*>();
  return *v;
}

void register_grad_mode_class(PyObject* cls) { grad_mode_classes().push_back(Py_NewRef(cls)); }

bool is_grad_mode_class(PyObject* obj) {
  for (PyObject* c : grad_mode_classes()) {
    if (obj == c) return true;
  }
  return false;
}

bool is_grad_mode_manager(PyObject* obj) {
  for (PyObject* c : grad_mode_classes()) {
    if (Py_TYPE(obj) == reinterpret_cast<PyTypeObject*>(c)) return true;  // exact: no subclasses
  }
  return false;
}

bool takes_scalar_first(PyObject* fn) { return scalar_first_ok().count(fn) != 0; }

void clear_torch_functions() {
  for (auto& [fn, op] : torch_functions()) Py_DECREF(fn);
  torch_functions().clear();
}

const PyOp* torch_function_op(PyObject* fn) {
  auto it = torch_functions().find(fn);
  if (it == torch_functions().end()) return nullptr;
  return it->second;
}

const PyOp* tensor_method_op(const std::string& name) {
  if (name == "where") return nullptr;  // x.where(cond, y) orders its operands differently
  return op_by_name(name);
}

std::optional<jit::Op> binary_tensor_op(int nb_op) {
  switch (nb_op) {
    case NB_ADD: return jit::Op::Add;
    case NB_SUBTRACT: return jit::Op::Sub;
    case NB_MULTIPLY: return jit::Op::Mul;
    case NB_TRUE_DIVIDE: return jit::Op::Div;
    case NB_FLOOR_DIVIDE: return jit::Op::FloorDiv;
    case NB_REMAINDER: return jit::Op::Remainder;
    case NB_POWER: return jit::Op::PowScalar;
    case NB_AND: return jit::Op::BitwiseAnd;
    case NB_OR: return jit::Op::BitwiseOr;
    case NB_XOR: return jit::Op::BitwiseXor;
    default: return std::nullopt;
  }
}

jit::Op compare_tensor_op(int cmp) {
  switch (cmp) {
    case Py_LT: return jit::Op::Lt;
    case Py_LE: return jit::Op::Le;
    case Py_EQ: return jit::Op::Eq;
    case Py_NE: return jit::Op::Ne;
    case Py_GT: return jit::Op::Gt;
    default: return jit::Op::Ge;
  }
}

std::optional<jit::SymExpr> binary_sym_op(int nb_op, const jit::SymExpr& a, const jit::SymExpr& b) {
  switch (nb_op) {
    case NB_ADD: case NB_INPLACE_ADD: return jit::add(a, b);
    case NB_SUBTRACT: case NB_INPLACE_SUBTRACT: return jit::sub(a, b);
    case NB_MULTIPLY: case NB_INPLACE_MULTIPLY: return jit::mul(a, b);
    case NB_TRUE_DIVIDE: case NB_INPLACE_TRUE_DIVIDE: return jit::truediv(a, b);
    case NB_FLOOR_DIVIDE: case NB_INPLACE_FLOOR_DIVIDE: return jit::floordiv(a, b);
    case NB_REMAINDER: case NB_INPLACE_REMAINDER: return jit::mod(a, b);
    case NB_POWER: case NB_INPLACE_POWER: return jit::pow(a, b);
    default: return std::nullopt;
  }
}

jit::SymExpr compare_sym(int cmp, const jit::SymExpr& a, const jit::SymExpr& b) {
  switch (cmp) {
    case Py_LT: return jit::lt(a, b);
    case Py_LE: return jit::le(a, b);
    case Py_EQ: return jit::eq(a, b);
    case Py_NE: return jit::ne(a, b);
    case Py_GT: return jit::gt(a, b);
    default: return jit::ge(a, b);
  }
}

PyObject* binary_number_op(int nb_op, PyObject* a, PyObject* b) {
  switch (nb_op) {
    case NB_ADD: case NB_INPLACE_ADD: return PyNumber_Add(a, b);
    case NB_SUBTRACT: case NB_INPLACE_SUBTRACT: return PyNumber_Subtract(a, b);
    case NB_MULTIPLY: case NB_INPLACE_MULTIPLY: return PyNumber_Multiply(a, b);
    case NB_TRUE_DIVIDE: case NB_INPLACE_TRUE_DIVIDE: return PyNumber_TrueDivide(a, b);
    case NB_FLOOR_DIVIDE: case NB_INPLACE_FLOOR_DIVIDE: return PyNumber_FloorDivide(a, b);
    case NB_REMAINDER: case NB_INPLACE_REMAINDER: return PyNumber_Remainder(a, b);
    case NB_POWER: case NB_INPLACE_POWER: return PyNumber_Power(a, b, Py_None);
    case NB_AND: case NB_INPLACE_AND: return PyNumber_And(a, b);
    case NB_OR: case NB_INPLACE_OR: return PyNumber_Or(a, b);
    case NB_XOR: case NB_INPLACE_XOR: return PyNumber_Xor(a, b);
    case NB_LSHIFT: case NB_INPLACE_LSHIFT: return PyNumber_Lshift(a, b);
    case NB_RSHIFT: case NB_INPLACE_RSHIFT: return PyNumber_Rshift(a, b);
    default:
      PyErr_SetString(PyExc_TypeError, "unsupported constant operator");
      return nullptr;
  }
}

}  // namespace fj::interp
