// The tables behind interp/ops.h.
#include "interp/ops.h"

#include <opcode.h>

#include <unordered_map>

namespace fj::interp {
namespace {

std::unordered_map<PyObject*, jit::Op>& torch_functions() {
  static auto* m = new std::unordered_map<PyObject*, jit::Op>();
  return *m;
}

const std::unordered_map<std::string, jit::Op>& names() {
  using jit::Op;
  static const std::unordered_map<std::string, Op> m = {
      {"add", Op::Add},         {"sub", Op::Sub},         {"mul", Op::Mul},     {"div", Op::Div},
      {"neg", Op::Neg},         {"abs", Op::Abs},         {"exp", Op::Exp},     {"log", Op::Log},
      {"sqrt", Op::Sqrt},       {"sin", Op::Sin},         {"cos", Op::Cos},     {"tanh", Op::Tanh},
      {"sigmoid", Op::Sigmoid}, {"relu", Op::Relu},       {"maximum", Op::Maximum},
      {"minimum", Op::Minimum}, {"where", Op::Where},     {"pow", Op::PowScalar},
      {"eq", Op::Eq},           {"ne", Op::Ne},           {"lt", Op::Lt},       {"le", Op::Le},
      {"gt", Op::Gt},           {"ge", Op::Ge},
  };
  return m;
}

}  // namespace

std::optional<jit::Op> op_by_name(const std::string& name) {
  auto it = names().find(name);
  if (it == names().end()) return std::nullopt;
  return it->second;
}

void register_torch_function(PyObject* fn, jit::Op op) {
  auto [it, fresh] = torch_functions().emplace(fn, op);
  if (fresh) Py_INCREF(fn);  // kept for the process: the key must not be reused
  else it->second = op;
}

void clear_torch_functions() {
  for (auto& [fn, op] : torch_functions()) Py_DECREF(fn);
  torch_functions().clear();
}

std::optional<jit::Op> torch_function_op(PyObject* fn) {
  auto it = torch_functions().find(fn);
  if (it == torch_functions().end()) return std::nullopt;
  return it->second;
}

std::optional<jit::Op> tensor_method_op(const std::string& name) {
  if (name == "where") return std::nullopt;  // x.where(cond, y) orders its operands differently
  return op_by_name(name);
}

std::optional<jit::Op> binary_tensor_op(int nb_op) {
  switch (nb_op) {
    case NB_ADD: return jit::Op::Add;
    case NB_SUBTRACT: return jit::Op::Sub;
    case NB_MULTIPLY: return jit::Op::Mul;
    case NB_TRUE_DIVIDE: return jit::Op::Div;
    case NB_POWER: return jit::Op::PowScalar;
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
