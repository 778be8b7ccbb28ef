// The graph IR.
//
// Design: a Graph is a vector of small value-type Nodes (op, dtype, shape, inputs,
// one scalar attribute), indexed by NodeId; no class per op. Op names, ATen names
// and families come from jit/ops.def. Nodes are appended in topological order, so a
// walk from 0 to size() is a valid schedule. Shapes are concrete in this version
// (the interpreter guards them); symbolic shapes come with SymExpr.
// Building a node checks its operands (dtype rules, broadcasting) and returns an
// Error for what eager PyTorch would reject or framejit cannot compile; the
// interpreter turns such errors into a fallback, so eager raises its own error.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "jit/common.h"
#include "jit/symexpr.h"

namespace fj::jit {

enum class DType : uint8_t { Bool, Float32 };

enum class Op : uint8_t {
#define FJ_OP(name, aten, family, arity) name,
#include "jit/ops.def"
#undef FJ_OP
};

enum class Family : uint8_t { Input, Constant, Pointwise };

std::string_view op_name(Op op);       // "Add"
std::string_view aten_name(Op op);     // "aten.add.Tensor"
Family op_family(Op op);
int op_arity(Op op);
std::string_view dtype_name(DType d);  // "f32", "bool"
size_t dtype_size(DType d);

using NodeId = int32_t;
using Shape = std::vector<int64_t>;
using SymShape = std::vector<SymExpr>;

// Two symbolic shapes that are equal for every binding.
bool same_shape(const SymShape& a, const SymShape& b);
SymShape static_shape(const Shape& s);

struct Node {
  Op op;
  DType dtype;
  Shape shape;                  // sizes in the traced call (exact where `sym` is constant); empty for 0-d
  SymShape sym;                 // symbolic sizes: constants where static, else expressions over symbols
  std::vector<NodeId> inputs;
  double scalar = 0;            // Scalar: the value; PowScalar: unused (exponent is input 1)
  int32_t index = -1;           // Placeholder: position among the graph's tensor inputs;
                                // ScalarInput: position among its scalar inputs
};

class Graph {
 public:
  // `sym` gives symbolic sizes (one per dim); empty means static sizes.
  NodeId placeholder(DType dtype, Shape shape, SymShape sym = {});
  // A Python number used as an operand ("weak" type: it takes the tensor's dtype).
  NodeId scalar(double value);
  // A Python number known only at run time (a SymFloat / SymInt value): weak-typed
  // like scalar(), its value is passed to CompiledGraph::run by index. dtype Float32
  // stands for "a weak Python number"; shape {}. Indices count scalar inputs only,
  // so placeholders keep their numbering.
  NodeId scalar_input();
  // A pointwise op with broadcasting and the skeleton's dtype rules: arithmetic and
  // math on float32 (scalars allowed), comparisons give bool, Where takes a bool
  // condition. At least one operand of an op must be a tensor.
  Expected<NodeId> pointwise(Op op, const std::vector<NodeId>& inputs);
  void set_outputs(std::vector<NodeId> outputs);

  const Node& node(NodeId id) const { return nodes_[static_cast<size_t>(id)]; }
  const std::vector<Node>& nodes() const { return nodes_; }
  const std::vector<NodeId>& outputs() const { return outputs_; }
  size_t num_inputs() const { return num_inputs_; }  // tensor placeholders
  size_t num_scalar_inputs() const { return num_scalar_inputs_; }
  // Equalities of symbolic sizes that building the graph relied on (broadcasting
  // s0 against s1 needs s0 == s1); the interpreter guards each of them.
  const std::vector<SymExpr>& assumptions() const { return assumptions_; }
  size_t size() const { return nodes_.size(); }

  // Stable text form used by golden tests, FRAMEJIT_LOG=graph and explain:
  //   %0 = placeholder[0] f32[4, 8]
  //   %1 = scalar_input[0]
  //   %2 = aten.mul.Tensor(%0, %1) f32[4, 8]
  //   return (%5)
  std::string str() const;
  // A key that is equal for graphs with the same structure (kernel cache).
  std::string structural_key() const;

 private:
  std::vector<Node> nodes_;
  std::vector<NodeId> outputs_;
  size_t num_inputs_ = 0;
  std::vector<SymExpr> assumptions_;
  size_t num_scalar_inputs_ = 0;
};

// Scalar and ScalarInput: a Python number operand (weak type, shape {}).
inline bool is_python_scalar(const Node& n) {
  return n.op == Op::Scalar || n.op == Op::ScalarInput;
}

// Broadcast two shapes by PyTorch's rules; an Error names the mismatching dim.
Expected<Shape> broadcast_shapes(const Shape& a, const Shape& b);

}  // namespace fj::jit
