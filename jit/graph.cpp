// Graph construction (dtype and broadcast rules), the op table accessors and the
// stable text printer.
#include "jit/graph.h"

#include <cmath>
#include <cstdio>
#include <sstream>

namespace fj::jit {
namespace {

struct OpInfo {
  std::string_view name;
  std::string_view aten;
  Family family;
  int arity;
};

constexpr OpInfo kOps[] = {
#define FJ_OP(name, aten, family, arity) {#name, aten, Family::family, arity},
#include "jit/ops.def"
#undef FJ_OP
};

const OpInfo& info(Op op) { return kOps[static_cast<size_t>(op)]; }

enum class Rule { FloatMath, Compare, Select };

Rule rule_of(Op op) {
  switch (op) {
    case Op::Eq: case Op::Ne: case Op::Lt: case Op::Le: case Op::Gt: case Op::Ge:
      return Rule::Compare;
    case Op::Where:
      return Rule::Select;
    case Op::Add: case Op::Sub: case Op::Mul: case Op::Div: case Op::Neg: case Op::Abs:
    case Op::Exp: case Op::Log: case Op::Sqrt: case Op::Sin: case Op::Cos: case Op::Tanh:
    case Op::Sigmoid: case Op::Relu: case Op::Maximum: case Op::Minimum:
    case Op::PowScalar: case Op::Placeholder: case Op::ScalarInput: case Op::Scalar:
      return Rule::FloatMath;
  }
  return Rule::FloatMath;
}

std::string shape_str(const SymShape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) out += ", ";
    out += s[i].str();
  }
  return out + "]";
}

std::string shape_str(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(s[i]);
  }
  return out + "]";
}

std::string scalar_str(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

}  // namespace

std::string_view op_name(Op op) { return info(op).name; }
std::string_view aten_name(Op op) { return info(op).aten; }
Family op_family(Op op) { return info(op).family; }
int op_arity(Op op) { return info(op).arity; }

std::string_view dtype_name(DType d) {
  switch (d) {
    case DType::Bool: return "bool";
    case DType::Float32: return "f32";
  }
  return "?";
}

size_t dtype_size(DType d) {
  switch (d) {
    case DType::Bool: return 1;
    case DType::Float32: return 4;
  }
  return 0;
}

Expected<Shape> broadcast_shapes(const Shape& a, const Shape& b) {
  const size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    // Align from the right.
    const int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1) {
      return Error{"The size of tensor a (" + std::to_string(da) +
                   ") must match the size of tensor b (" + std::to_string(db) +
                   ") at non-singleton dimension " + std::to_string(i)};
    }
    out[i] = da == 1 ? db : da;
  }
  return out;
}

bool same_shape(const SymShape& a, const SymShape& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!a[i].same(b[i])) return false;
  }
  return true;
}

SymShape static_shape(const Shape& s) {
  SymShape out;
  for (int64_t d : s) out.push_back(SymExpr::integer(d));
  return out;
}

NodeId Graph::placeholder(DType dtype, Shape shape, SymShape sym) {
  if (sym.empty()) sym = static_shape(shape);
  FJ_CHECK(sym.size() == shape.size(), "placeholder: symbolic and traced ranks differ");
  Node n{Op::Placeholder, dtype, std::move(shape), std::move(sym), {}, 0,
         static_cast<int32_t>(num_inputs_)};
  ++num_inputs_;
  nodes_.push_back(std::move(n));
  return static_cast<NodeId>(nodes_.size() - 1);
}

NodeId Graph::scalar(double value) {
  nodes_.push_back(Node{Op::Scalar, DType::Float32, {}, {}, {}, value, -1});
  return static_cast<NodeId>(nodes_.size() - 1);
}

NodeId Graph::scalar_input() {
  nodes_.push_back(Node{Op::ScalarInput, DType::Float32, {}, {}, {}, 0,
                        static_cast<int32_t>(num_scalar_inputs_)});
  ++num_scalar_inputs_;
  return static_cast<NodeId>(nodes_.size() - 1);
}

Expected<NodeId> Graph::pointwise(Op op, const std::vector<NodeId>& inputs) {
  FJ_CHECK(op_family(op) == Family::Pointwise, "pointwise() of a non-pointwise op");
  if (static_cast<int>(inputs.size()) != op_arity(op)) {
    return Error{std::string(aten_name(op)) + " takes " + std::to_string(op_arity(op)) +
                 " operands, got " + std::to_string(inputs.size())};
  }
  bool any_tensor = false;
  Shape shape;
  SymShape sym;
  std::vector<SymExpr> assumed;
  for (NodeId id : inputs) {
    const Node& in = node(id);
    if (is_python_scalar(in)) continue;
    any_tensor = true;
    auto b = broadcast_shapes(shape, in.shape);
    if (!b) return b.take_error();
    // The same, on symbolic sizes: size-1 dims are always static (1 is specialized),
    // so a dim either broadcasts statically or must equal the other side.
    const size_t n = b->size();
    SymShape out(n);
    for (size_t i = 0; i < n; ++i) {
      const bool has_a = i >= n - sym.size(), has_b = i >= n - in.sym.size();
      const SymExpr* sa = has_a ? &sym[i - (n - sym.size())] : nullptr;
      const SymExpr* sb = has_b ? &in.sym[i - (n - in.sym.size())] : nullptr;
      if (sb == nullptr) out[i] = *sa;
      else if (sa == nullptr || sa->as_int() == std::optional<int64_t>(1)) out[i] = *sb;
      else if (sb->as_int() == std::optional<int64_t>(1) || sa->same(*sb)) out[i] = *sa;
      else {
        out[i] = *sa;
        assumed.push_back(eq(*sa, *sb));
      }
    }
    shape = std::move(*b);
    sym = std::move(out);
  }
  if (!any_tensor) return Error{std::string(aten_name(op)) + " of Python scalars only"};

  DType out = DType::Float32;
  const Rule rule = rule_of(op);
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Node& in = node(inputs[i]);
    if (is_python_scalar(in)) continue;
    const bool want_bool = rule == Rule::Select && i == 0;
    const DType want = want_bool ? DType::Bool : DType::Float32;
    if (in.dtype != want) {
      return Error{std::string(aten_name(op)) + " on a " + std::string(dtype_name(in.dtype)) +
                   " tensor is not supported yet"};
    }
  }
  if (rule == Rule::Select && is_python_scalar(node(inputs[0]))) {
    return Error{"where() with a Python scalar condition"};
  }
  if (rule == Rule::Compare) out = DType::Bool;
  if (op == Op::PowScalar && !is_python_scalar(node(inputs[1]))) {
    return Error{"pow with a tensor exponent is not supported yet"};
  }

  for (SymExpr& a : assumed) {
    if (!a.is_constant()) assumptions_.push_back(std::move(a));
  }
  nodes_.push_back(Node{op, out, std::move(shape), std::move(sym), inputs, 0, -1});
  return static_cast<NodeId>(nodes_.size() - 1);
}

void Graph::set_outputs(std::vector<NodeId> outputs) { outputs_ = std::move(outputs); }

std::string Graph::str() const {
  std::ostringstream os;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const Node& n = nodes_[i];
    os << "%" << i << " = ";
    switch (op_family(n.op)) {
      case Family::Input:
        if (n.op == Op::ScalarInput) {
          os << "scalar_input[" << n.index << "]";
        } else {
          os << "placeholder[" << n.index << "] " << dtype_name(n.dtype) << shape_str(n.sym);
        }
        break;
      case Family::Constant:
        os << "scalar " << scalar_str(n.scalar);
        break;
      case Family::Pointwise: {
        os << aten_name(n.op) << "(";
        for (size_t k = 0; k < n.inputs.size(); ++k) os << (k ? ", %" : "%") << n.inputs[k];
        os << ") " << dtype_name(n.dtype) << shape_str(n.sym);
        break;
      }
    }
    os << "\n";
  }
  os << "return (";
  for (size_t k = 0; k < outputs_.size(); ++k) os << (k ? ", %" : "%") << outputs_[k];
  os << ")\n";
  return os.str();
}

std::string Graph::structural_key() const { return str(); }

}  // namespace fj::jit
