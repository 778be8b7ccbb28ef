// Graph construction (dtype and broadcast rules), the op table accessors and the
// stable text printer.
#include "jit/ir/graph.h"

#include <cmath>
#include <cstdio>
#include <optional>
#include <sstream>

namespace fj::jit {
namespace {

struct OpInfo {
  std::string_view name;
  std::string_view aten;
  Family family;
  std::string_view operands;
  DTypeRule rule;
};

constexpr OpInfo kOps[] = {
#define FJ_OP(name, aten, family, operands, rule) \
  {#name, aten, Family::family, operands, DTypeRule::rule},
#include "jit/ir/ops.def"
#undef FJ_OP
};

const OpInfo& info(Op op) { return kOps[static_cast<size_t>(op)]; }

std::string dt(DType d) { return std::string(dtype_name(d)); }

// PyTorch's combine_categories (c10 ResultTypeState): `higher` is the state of a
// stronger operand class (dimensioned over 0-d over Python numbers). A weaker class
// only lifts the category: it wins when it is floating and the stronger one is not,
// or when the stronger one is bool.
std::optional<DType> combine_categories(std::optional<DType> higher, std::optional<DType> lower) {
  if (!higher) return lower;
  if (!lower) return higher;
  if (is_floating(*higher)) return higher;
  if (*higher == DType::Bool || is_floating(*lower)) return promote_types(*higher, *lower);
  return higher;
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
int op_arity(Op op) { return static_cast<int>(info(op).operands.size()); }
std::string_view op_operands(Op op) { return info(op).operands; }
DTypeRule op_dtype_rule(Op op) { return info(op).rule; }

std::string_view dtype_name(DType d) {
  switch (d) {
    case DType::Bool: return "bool";
    case DType::UInt8: return "u8";
    case DType::Int32: return "i32";
    case DType::Int64: return "i64";
    case DType::Float32: return "f32";
    case DType::Float64: return "f64";
  }
  return "?";
}

size_t dtype_size(DType d) {
  switch (d) {
    case DType::Bool: return 1;
    case DType::UInt8: return 1;
    case DType::Int32: return 4;
    case DType::Int64: return 8;
    case DType::Float32: return 4;
    case DType::Float64: return 8;
  }
  return 0;
}

bool is_floating(DType d) {
  switch (d) {
    case DType::Float32: case DType::Float64: return true;
    case DType::Bool: case DType::UInt8: case DType::Int32: case DType::Int64: return false;
  }
  return false;
}

bool is_integral(DType d) {
  switch (d) {
    case DType::UInt8: case DType::Int32: case DType::Int64: return true;
    case DType::Bool: case DType::Float32: case DType::Float64: return false;
  }
  return false;
}

// With int8 and int16 absent these six are totally ordered by promotion.
DType promote_types(DType a, DType b) { return static_cast<uint8_t>(a) < static_cast<uint8_t>(b) ? b : a; }

DType scalar_kind_dtype(ScalarKind k) {
  switch (k) {
    case ScalarKind::Bool: return DType::Bool;
    case ScalarKind::Int: return DType::Int64;
    case ScalarKind::Float: return DType::Float32;
  }
  return DType::Float32;
}

DType result_type(const std::vector<OperandType>& operands) {
  std::optional<DType> dim, zero, wrapped;
  for (const OperandType& o : operands) {
    std::optional<DType>& slot = o.is_scalar ? wrapped : o.zero_dim ? zero : dim;
    slot = slot ? promote_types(*slot, o.dtype) : o.dtype;
  }
  const auto r = combine_categories(dim, combine_categories(zero, wrapped));
  FJ_CHECK(r.has_value(), "result_type of no operands");
  return *r;
}

Expected<OpTypes> infer_types(Op op, const std::vector<OperandType>& operands) {
  const std::string name(aten_name(op));
  auto rejected = [&](const std::string& why) { return Error{name + ": " + why}; };
  bool any_bool = false, any_float = false;
  for (const OperandType& o : operands) {
    any_bool |= o.dtype == DType::Bool;
    any_float |= is_floating(o.dtype);
  }
  const DType promoted = result_type(operands);
  switch (op_dtype_rule(op)) {
    case DTypeRule::Arith:
      return OpTypes{promoted, promoted};
    case DTypeRule::NoBoolOperand:
      if (any_bool) return rejected("a bool operand (eager raises)");
      return OpTypes{promoted, promoted};
    case DTypeRule::NoBool:
    case DTypeRule::Clamp:
      if (promoted == DType::Bool) return rejected("on bool (eager raises)");
      return OpTypes{promoted, promoted};
    case DTypeRule::TrueDiv:
    case DTypeRule::FloatMath: {
      const DType f = is_floating(promoted) ? promoted : DType::Float32;
      return OpTypes{f, f};
    }
    case DTypeRule::FloatOnly:
      if (!is_floating(operands[0].dtype)) return rejected("on " + dt(operands[0].dtype) + " (eager raises)");
      return OpTypes{operands[0].dtype, operands[0].dtype};
    case DTypeRule::IntDiv:
    case DTypeRule::Pow:
      if (promoted == DType::Bool) return rejected("on bool (eager raises or is not supported)");
      return OpTypes{promoted, promoted};
    case DTypeRule::Compare:
      return OpTypes{DType::Bool, promoted};
    case DTypeRule::Predicate:
      return OpTypes{DType::Bool, operands[0].dtype};
    case DTypeRule::Logical:
      return OpTypes{DType::Bool, DType::Bool};
    case DTypeRule::Bitwise:
      if (any_float) return rejected("on a floating type (eager raises)");
      return OpTypes{promoted, promoted};
    case DTypeRule::Keep:
      return OpTypes{operands[0].dtype, operands[0].dtype};
    case DTypeRule::Select: {
      if (operands[0].dtype != DType::Bool) {
        return rejected("the condition is a " + dt(operands[0].dtype) + " tensor (eager raises)");
      }
      const DType r = result_type({operands[1], operands[2]});
      return OpTypes{r, r};
    }
    case DTypeRule::MaskedFill:
      if (operands[1].dtype != DType::Bool) {
        return rejected("the mask is a " + dt(operands[1].dtype) + " tensor (eager raises)");
      }
      return OpTypes{operands[0].dtype, operands[0].dtype};
    case DTypeRule::Cast:
    case DTypeRule::Input:
    case DTypeRule::Special:
      break;
  }
  return rejected("not built by pointwise()");
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

Expected<SymShape> broadcast_sym(const SymShape& a, const SymShape& b,
                                 std::vector<SymExpr>* assumed) {
  const size_t n = std::max(a.size(), b.size());
  SymShape out(n);
  for (size_t i = 0; i < n; ++i) {
    const bool has_a = i >= n - a.size(), has_b = i >= n - b.size();
    const SymExpr* sa = has_a ? &a[i - (n - a.size())] : nullptr;
    const SymExpr* sb = has_b ? &b[i - (n - b.size())] : nullptr;
    if (sb == nullptr) out[i] = *sa;
    else if (sa == nullptr || is_const(*sa, 1)) out[i] = *sb;
    else if (is_const(*sb, 1) || sa->same(*sb)) out[i] = *sa;
    else {
      // Provably different (3 vs 0, or s0 >= 2 vs 0): eager raises.
      SymExpr same = eq(*sa, *sb);
      if (same.as_bool() == std::optional<bool>(false)) {
        return Error{"The size of tensor a (" + sa->str() + ") must match the size of tensor b (" +
                     sb->str() + ") at non-singleton dimension " + std::to_string(i)};
      }
      out[i] = *sa;
      if (!same.is_constant()) assumed->push_back(std::move(same));
    }
  }
  return out;
}

std::optional<Shape> concrete(const SymShape& s) {
  Shape out;
  for (const SymExpr& e : s) {
    if (!e.as_int()) return std::nullopt;
    out.push_back(*e.as_int());
  }
  return out;
}

SymExpr numel(const SymShape& s) {
  SymExpr n = SymExpr::integer(1);
  for (const SymExpr& e : s) n = mul(n, e);
  return n;
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

Graph Graph::cone(const std::vector<NodeId>& outputs) const {
  std::vector<bool> live(nodes_.size(), false);
  for (NodeId o : outputs) live[static_cast<size_t>(o)] = true;
  for (size_t i = nodes_.size(); i-- > 0;) {
    if (!live[i]) continue;
    for (NodeId in : nodes_[i].inputs) live[static_cast<size_t>(in)] = true;
  }
  Graph g;
  std::vector<NodeId> remap(nodes_.size(), -1);
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const Node& n = nodes_[i];
    if (!live[i] && n.op != Op::Placeholder && n.op != Op::ScalarInput) continue;
    Node copy = n;
    for (NodeId& in : copy.inputs) in = remap[static_cast<size_t>(in)];
    remap[i] = g.push(std::move(copy));
  }
  g.num_inputs_ = num_inputs_;
  g.num_scalar_inputs_ = num_scalar_inputs_;
  g.scalar_input_exprs_ = scalar_input_exprs_;
  g.assumptions_ = assumptions_;
  g.scalar_ranges_ = scalar_ranges_;
  for (NodeId c : checks_) {
    if (live[static_cast<size_t>(c)]) g.checks_.push_back(remap[static_cast<size_t>(c)]);
  }
  for (NodeId o : outputs) g.outputs_.push_back(remap[static_cast<size_t>(o)]);
  return g;
}

NodeId Graph::push(Node n) {
  nodes_.push_back(std::move(n));
  return static_cast<NodeId>(nodes_.size() - 1);
}

NodeId Graph::placeholder(DType dtype, const Shape& shape, SymShape sym) {
  if (sym.empty()) sym = static_shape(shape);
  FJ_CHECK(sym.size() == shape.size(), "placeholder: symbolic and traced ranks differ");
  Node n{Op::Placeholder, dtype, std::move(sym), {}, 0, static_cast<int32_t>(num_inputs_)};
  ++num_inputs_;
  return push(std::move(n));
}

NodeId Graph::scalar(double value, ScalarKind kind) {
  Node n{Op::Scalar, scalar_kind_dtype(kind), {}, {}, value, -1};
  n.scalar_kind = kind;
  if (kind != ScalarKind::Float) {
    FJ_CHECK(std::nearbyint(value) == value && std::fabs(value) < 0x1p63, "scalar: an int kind needs an integral value");
    n.int_value = static_cast<int64_t>(value);
  }
  nodes_.push_back(std::move(n));
  return static_cast<NodeId>(nodes_.size() - 1);
}

NodeId Graph::scalar_int(int64_t value) {
  Node n{Op::Scalar, DType::Int64, {}, {}, static_cast<double>(value), -1};
  n.scalar_kind = ScalarKind::Int;
  n.int_value = value;
  nodes_.push_back(std::move(n));
  return static_cast<NodeId>(nodes_.size() - 1);
}

NodeId Graph::scalar_input(ScalarKind kind) {
  Node n{Op::ScalarInput, scalar_kind_dtype(kind), {}, {}, 0,
         static_cast<int32_t>(num_scalar_inputs_)};
  n.scalar_kind = kind;
  ++num_scalar_inputs_;
  scalar_input_exprs_.emplace_back();
  return push(std::move(n));
}

NodeId Graph::size_scalar(const SymExpr& value) {
  const NodeId id = scalar_input(ScalarKind::Int);
  scalar_input_exprs_.back() = value;
  return id;
}

namespace {

constexpr double kFloatMax = 3.4028234663852886e38;

// For the ops whose eager kernels check a Python number's conversion (clamp bounds,
// where / masked_fill values raise "value cannot be converted to type ... without
// overflow"): the range a runtime number of `kind` must lie in for the conversion
// to `to` to succeed; nullopt when it always succeeds. A runtime float into an
// integer type is not supported (an empty range).
std::optional<std::pair<double, double>> runtime_range(ScalarKind kind, DType to) {
  if (to == DType::Bool || to == DType::Float64 || kind == ScalarKind::Bool) return std::nullopt;
  if (kind == ScalarKind::Float) {
    if (to == DType::Float32) return std::make_pair(-kFloatMax, kFloatMax);
    return std::make_pair(1.0, 0.0);
  }
  switch (to) {
    case DType::UInt8: return std::make_pair(-255.0, 255.0);
    case DType::Int32: return std::make_pair(-2147483648.0, 2147483647.0);
    case DType::Bool: case DType::Int64: case DType::Float32: case DType::Float64: break;
  }
  return std::nullopt;
}

// Whether a constant Python number converts to `to` as eager's checked conversion
// does (runtime numbers: see runtime_range).
bool scalar_converts(const Node& s, DType to) {
  if (to == DType::Bool || to == DType::Float64) return true;
  FJ_CHECK(s.op == Op::Scalar, "scalar_converts of a runtime number");
  // c10::overflows: an int into uint8 may be negative down to -255 (it wraps); a
  // float is compared before truncation.
  const bool is_float = s.scalar_kind == ScalarKind::Float;
  double lo = 0, hi = 0;
  switch (to) {
    case DType::Float32:
      return s.scalar_kind != ScalarKind::Float || !std::isfinite(s.scalar) ||
             std::fabs(s.scalar) <= kFloatMax;
    case DType::UInt8: lo = is_float ? 0 : -255; hi = 255; break;
    case DType::Int32: lo = -2147483648.0; hi = 2147483647.0; break;
    case DType::Int64:
      if (s.scalar_kind != ScalarKind::Float) return true;
      lo = -0x1p63; hi = 0x1p63 - 1024; break;
    case DType::Bool: case DType::Float64: return true;
  }
  if (s.scalar_kind != ScalarKind::Float) {
    return static_cast<double>(s.int_value) >= lo && static_cast<double>(s.int_value) <= hi;
  }
  return std::isfinite(s.scalar) && s.scalar >= lo && s.scalar <= hi;
}

// A constant Python int / bool operand that fits `to`, or nullopt.
std::optional<int64_t> constant_int(const Node& s, DType to) {
  if (s.op != Op::Scalar || s.scalar_kind == ScalarKind::Float) return std::nullopt;
  if (!scalar_converts(s, to)) return std::nullopt;
  return s.int_value;
}

}  // namespace

Expected<NodeId> Graph::pointwise(Op op, const std::vector<NodeId>& inputs) {
  FJ_CHECK(op_family(op) == Family::Pointwise, "pointwise() of a non-pointwise op");
  if (op == Op::PowScalar && inputs.size() == 2 && !is_python_scalar(node(inputs[1]))) op = Op::Pow;
  if (static_cast<int>(inputs.size()) != op_arity(op)) {
    return Error{std::string(aten_name(op)) + " takes " + std::to_string(op_arity(op)) +
                 " operands, got " + std::to_string(inputs.size())};
  }
  const std::string_view kinds = op_operands(op);
  for (size_t i = 0; i < inputs.size(); ++i) {
    const bool scalar = is_python_scalar(node(inputs[i]));
    if (kinds[i] == 'T' && scalar) {
      return Error{std::string(aten_name(op)) + ": operand " + std::to_string(i) +
                   " is a Python number where a tensor is needed"};
    }
    if (kinds[i] == 'S' && !scalar) {
      return Error{std::string(aten_name(op)) + ": operand " + std::to_string(i) +
                   " is a tensor where a Python number is needed (not supported yet)"};
    }
  }
  bool any_tensor = false;
  SymShape sym;
  std::vector<SymExpr> assumed;
  std::vector<OperandType> types;
  for (NodeId id : inputs) {
    const Node& in = node(id);
    types.push_back(OperandType{in.dtype, is_python_scalar(in), in.sym.empty()});
    if (is_python_scalar(in)) continue;
    any_tensor = true;
    auto b = broadcast_sym(sym, in.sym, &assumed);
    if (!b) return b.take_error();
    sym = std::move(*b);
  }
  if (!any_tensor) return Error{std::string(aten_name(op)) + " of Python scalars only"};

  auto types_or = infer_types(op, types);
  if (!types_or) return types_or.take_error();
  const OpTypes t = *types_or;
  const std::string name(aten_name(op));
  const DTypeRule rule = op_dtype_rule(op);
  if (rule == DTypeRule::IntDiv && !is_floating(t.compute)) {
    // Eager raises ZeroDivisionError for a zero divisor; a kernel cannot, so only a
    // nonzero constant divisor is compiled.
    const auto d = constant_int(node(inputs[1]), t.compute);
    if (!d || *d == 0) {
      return Error{name + ": integer division by a tensor or a runtime value (eager raises on zero)"};
    }
  }
  if (rule == DTypeRule::Pow && !is_floating(t.compute)) {
    const auto e = constant_int(node(inputs[1]), t.compute);
    if (op != Op::PowScalar || !e || *e < 0) {
      return Error{name + ": integer power with a tensor, runtime or negative exponent (not supported)"};
    }
  }
  std::vector<ScalarRange> ranges;
  if (rule == DTypeRule::Clamp || rule == DTypeRule::Select || rule == DTypeRule::MaskedFill) {
    for (size_t i = 1; i < inputs.size(); ++i) {
      const Node& in = node(inputs[i]);
      if (in.op == Op::Scalar && !scalar_converts(in, t.compute)) {
        return Error{name + ": a Python number that " + dt(t.compute) +
                     " cannot hold (eager raises)"};
      }
      if (op_family(in.op) == Family::Item && !(t.compute == DType::Float64 || t.compute == DType::Bool)) {
        return Error{name + ": a tensor's value as a " + dt(t.compute) + " bound (not supported)"};
      }
      if (in.op != Op::ScalarInput) continue;
      if (const auto r = runtime_range(in.scalar_kind, t.compute)) {
        if (r->first > r->second) {
          return Error{name + ": a runtime float as a " + dt(t.compute) + " value (not supported)"};
        }
        ranges.push_back(ScalarRange{in.index, r->first, r->second});
      }
    }
  }
  scalar_ranges_.insert(scalar_ranges_.end(), ranges.begin(), ranges.end());

  for (SymExpr& a : assumed) {
    if (!a.is_constant()) assumptions_.push_back(std::move(a));
  }
  Node n{op, t.result, std::move(sym), inputs, 0, -1};
  n.compute = t.compute;
  return push(std::move(n));
}

Expected<NodeId> Graph::cast(NodeId x, DType to) {
  const Node& in = node(x);
  if (is_python_scalar(in)) return Error{"cast of a Python number"};
  if (in.dtype == to) return x;
  Node n{Op::Cast, to, in.sym, {x}, 0, -1};
  n.compute = to;
  return push(std::move(n));
}

void Graph::set_outputs(std::vector<NodeId> outputs) { outputs_ = std::move(outputs); }

void Graph::roll_back(const Mark& m) {
  FJ_CHECK(m.assumptions <= assumptions_.size() && m.ranges <= scalar_ranges_.size() && m.checks <= checks_.size(),
           "rolling a graph back to a mark it never had");
  assumptions_.resize(m.assumptions);
  scalar_ranges_.resize(m.ranges);
  checks_.resize(m.checks);
}

std::string Graph::str() const {
  std::ostringstream os;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const Node& n = nodes_[i];
    os << "%" << i << " = ";
    switch (op_family(n.op)) {
      case Family::Input:
        if (n.op == Op::ScalarInput) {
          os << "scalar_input[" << n.index << "]";
          if (n.scalar_kind == ScalarKind::Int) os << " int";
          if (n.scalar_kind == ScalarKind::Bool) os << " bool";
          if (!scalar_input_exprs_[static_cast<size_t>(n.index)].is_null()) {
            os << " = " << scalar_input_exprs_[static_cast<size_t>(n.index)].str();
          }
        } else {
          os << "placeholder[" << n.index << "] " << dtype_name(n.dtype) << shape_str(n.sym);
        }
        break;
      case Family::Constant:
        switch (n.scalar_kind) {
          case ScalarKind::Float: os << "scalar " << scalar_str(n.scalar); break;
          case ScalarKind::Int: os << "scalar " << n.int_value; break;
          case ScalarKind::Bool: os << "scalar " << (n.int_value ? "True" : "False"); break;
        }
        break;
      case Family::Pointwise:
      case Family::Reduction:
      case Family::View:
      case Family::Index:
      case Family::Creation:
      case Family::Item:
      case Family::Extern: {
        os << aten_name(n.op);
        if (n.extern_fn) os << "[" << n.extern_fn->name() << "]";
        os << "(";
        for (size_t k = 0; k < n.inputs.size(); ++k) os << (k ? ", %" : "%") << n.inputs[k];
        const char* sep = n.inputs.empty() ? "" : ", ";
        if (!n.dims.empty()) {
          os << sep << "dims=[";
          for (size_t k = 0; k < n.dims.size(); ++k) os << (k ? ", " : "") << n.dims[k];
          os << "]";
          sep = ", ";
        }
        if (!n.args.empty()) os << sep << "args=" << shape_str(n.args);
        if (n.keepdim) os << ", keepdim";
        os << ")";
        if (op_family(n.op) == Family::Item) break;
        os << " " << dtype_name(n.dtype) << shape_str(n.sym);
        break;
      }
    }
    os << "\n";
  }
  if (!checks_.empty()) {  // evaluated even when unread (int() of a float can raise)
    os << "check (";
    for (size_t k = 0; k < checks_.size(); ++k) os << (k ? ", %" : "%") << checks_[k];
    os << ")\n";
  }
  os << "return (";
  for (size_t k = 0; k < outputs_.size(); ++k) os << (k ? ", %" : "%") << outputs_[k];
  os << ")\n";
  return os.str();
}

// Every field of every node, so that two graphs with one key compile to the same
// code: the kernel cache (jit/cpu/cpu_backend.cpp) shares compiled graphs by this key.
// Numbers are written exactly (doubles as hex floats); the assumptions and scalar
// ranges are part of it although no kernel reads them, so that equal keys mean
// equal graphs in every respect a caller could observe.
std::string Graph::structural_key() const {
  std::ostringstream os;
  auto exact = [&os](double v) {
    char buf[40];
    std::snprintf(buf, sizeof buf, "%a", v);
    os << buf;
  };
  os << "in " << num_inputs_ << " scalars " << num_scalar_inputs_ << "\n";
  for (const Node& n : nodes_) {
    os << static_cast<int>(n.op) << ' ' << static_cast<int>(n.dtype) << ' ' << static_cast<int>(n.compute) << ' '
       << static_cast<int>(n.scalar_kind) << ' ' << n.index << ' ' << n.int_value << ' ' << n.keepdim << ' ';
    exact(n.scalar);
    os << " (";
    for (NodeId in : n.inputs) os << in << ' ';
    os << ") " << shape_str(n.sym) << " dims[";
    for (int64_t d : n.dims) os << d << ' ';
    os << "] args" << shape_str(n.args);
    if (n.extern_fn) os << " extern " << n.extern_fn->key().size() << ':' << n.extern_fn->key();
    os << "\n";
  }
  os << "exprs";
  for (const SymExpr& e : scalar_input_exprs_) os << ' ' << e.str();
  os << "\nassume";
  for (const SymExpr& e : assumptions_) os << ' ' << e.str();
  os << "\nranges";
  for (const ScalarRange& r : scalar_ranges_) {
    os << ' ' << r.index << ':';
    exact(r.lo);
    os << ':';
    exact(r.hi);
  }
  os << "\nchecks";
  for (NodeId c : checks_) os << ' ' << c;
  os << "\nout";
  for (NodeId o : outputs_) os << ' ' << o;
  return os.str();
}

}  // namespace fj::jit
