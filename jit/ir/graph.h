// The graph IR.
//
// Design: a Graph is a vector of small value-type Nodes (op, dtype, symbolic shape,
// inputs, a few attributes), indexed by NodeId; no class per op. Op names, ATen
// names and families come from jit/ir/ops.def. Nodes are appended in topological
// order, so a walk from 0 to size() is a valid schedule. Shapes are SymShapes:
// constants where static, expressions over size symbols where dynamic (sizes 0 and
// 1 are always static). Every op has value semantics: a view op (permute, slice,
// ...) describes which operand element each result element is, and the backend
// decides what is materialized.
// Building a node checks its operands (dtype rules, broadcasting, ranks) and
// returns an Error for what eager PyTorch would reject or framejit cannot compile;
// the interpreter turns such errors into a fallback, so eager raises its own error.
// Size equalities that an op needs but cannot prove (s0 == s1) are recorded as
// assumptions, which the interpreter guards.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "jit/common.h"
#include "jit/ir/extern_fn.h"
#include "jit/sym/symexpr.h"

namespace fj::jit {

// Tensor element types. Bool is one byte 0/1 in memory. The declaration order is
// PyTorch's promotion order for these six (bool < uint8 < int32 < int64 < float32
// < float64): promote_types() of two of them is the later one.
enum class DType : uint8_t { Bool, UInt8, Int32, Int64, Float32, Float64 };

// What a Python number operand was in Python; it decides how the number takes part
// in type promotion (a "weak" operand: it lifts the category, never the width).
enum class ScalarKind : uint8_t { Bool, Int, Float };

enum class Op : uint8_t {
#define FJ_OP(name, aten, family, operands, rule) name,
#include "jit/ir/ops.def"
#undef FJ_OP
};

// How many ops jit/ir/ops.def defines (tables indexed by Op have this many rows).
inline constexpr size_t kNumOps = 0
#define FJ_OP(name, aten, family, operands, rule) +1
#include "jit/ir/ops.def"
#undef FJ_OP
    ;

// How an op's result elements relate to its operands':
//   Input, Constant  placeholders, scalar inputs, Python number constants
//   Pointwise  element i of the result from element i of each (broadcast) operand
//   Reduction  over Node::dims of one operand (keepdim: they stay as size 1)
//   View       each result element is one operand element (permute, reshape, ...)
//   Index      as View, with the position read from an integer tensor operand
//   Creation   no tensor operand (full, iota)
//   Item       a one-element tensor as a Python number operand (int(t), float(t))
//   Extern     a library kernel (matmul) or a call the embedder makes (ExternCall);
//              operands and result are materialized
enum class Family : uint8_t { Input, Constant, Pointwise, Reduction, View, Index, Creation, Item, Extern };

// How a pointwise op's dtypes follow from its operands' (PyTorch's rules):
//   Arith          result = computation = promoted type of the operands
//   NoBoolOperand  Arith, and eager rejects any bool operand (sub)
//   NoBool         Arith, and eager rejects a bool promoted type (neg, abs, floor, ...)
//   TrueDiv        promoted; integral and bool promote further to float32
//   FloatMath      as TrueDiv (exp, log, ...)
//   FloatOnly      floating operands only (gelu, silu, softplus)
//   IntDiv         promoted, bool alone rejected; an integral computation needs a
//                  nonzero constant divisor (eager raises on zero, a kernel cannot)
//   Pow            promoted; integral: constant exponent >= 0 only
//   Compare        computed in the promoted type, result bool
//   Predicate      computed in the operand's type, result bool (isnan, isinf)
//   Logical        operands as bool, result bool
//   Bitwise        promoted; floating types rejected
//   Keep           result = computation = the operand's type (sign, nan_to_num)
//   Clamp          promoted with the bounds; bool rejected
//   Select         where(cond, a, b): cond bool, the branches promoted
//   MaskedFill     masked_fill(x, mask, value): x's type, mask bool
//   Cast           the target type (Graph::cast)
//   Input          placeholders and scalars
//   Special        set by the op's builder (non-pointwise families)
enum class DTypeRule : uint8_t {
  Arith, NoBoolOperand, NoBool, TrueDiv, FloatMath, FloatOnly, IntDiv, Pow, Compare,
  Predicate, Logical, Bitwise, Keep, Clamp, Select, MaskedFill, Cast, Input, Special
};

std::string_view op_name(Op op);       // "Add"
std::string_view aten_name(Op op);     // "aten.add.Tensor"
Family op_family(Op op);
int op_arity(Op op);
// Operand kinds, one letter each: T tensor, S Python number, A either.
std::string_view op_operands(Op op);
DTypeRule op_dtype_rule(Op op);
std::string_view dtype_name(DType d);  // "f32", "bool", "i64", ...
size_t dtype_size(DType d);
bool is_floating(DType d);
bool is_integral(DType d);             // UInt8, Int32, Int64 (not Bool)
// PyTorch's promote_types for two dtypes.
DType promote_types(DType a, DType b);
// The dtype a Python number stands for in promotion: bool, int64, float32 (the
// default dtype).
DType scalar_kind_dtype(ScalarKind k);

using NodeId = int32_t;
using Shape = std::vector<int64_t>;
using SymShape = std::vector<SymExpr>;

// Two symbolic shapes that are equal for every binding.
bool same_shape(const SymShape& a, const SymShape& b);
SymShape static_shape(const Shape& s);
// The sizes when every one is a constant.
std::optional<Shape> concrete(const SymShape& s);
// The product of the sizes (1 for a 0-d shape).
SymExpr numel(const SymShape& s);
// A size that is the constant `v`.
inline bool is_const(const SymExpr& e, int64_t v) { return e.as_int() == std::optional<int64_t>(v); }

struct Node {
  Op op;
  DType dtype;                  // the result's; Scalar/ScalarInput/Item: scalar_kind_dtype(scalar_kind)
  SymShape sym;                 // sizes: constants where static, else expressions over symbols
  std::vector<NodeId> inputs;
  double scalar = 0;            // Scalar: the value; PowScalar: unused (exponent is input 1)
  int32_t index = -1;           // Placeholder: position among the graph's tensor inputs;
                                // ScalarInput: position among its scalar inputs
  ScalarKind scalar_kind = ScalarKind::Float;  // Scalar, ScalarInput, Item: the Python type
  int64_t int_value = 0;        // Scalar of kind Int or Bool: the exact value;
                                // IndexSelect: 1 when negative indices count from the end
  DType compute = DType::Float32;  // pointwise: the type the operands convert to
                                   // (see DTypeRule); Cast: the target; Reduction: the
                                   // accumulator's type
  // Reduction: the reduced dims of the operand (sorted); Permute: the operand dim of
  // each result dim; Flip: the flipped dims; Slice, Select, Cat, IndexSelect, Gather,
  // Iota, SliceScatter: {the dim}.
  std::vector<int64_t> dims;
  bool keepdim = false;         // Reduction
  // Slice, SliceScatter: {start, step} (the length is sym[dim] of the slice, of
  // the second operand for SliceScatter); Select: {index} (0 <= index < size).
  std::vector<SymExpr> args;
  std::shared_ptr<const ExternFn> extern_fn;  // ExternCall: what computes it

  size_t rank() const { return sym.size(); }
};

class Graph {
 public:
  // `sym` gives symbolic sizes (one per dim); empty means static sizes.
  NodeId placeholder(DType dtype, const Shape& shape, SymShape sym = {});
  // A Python number used as an operand ("weak" type, see ScalarKind). Kind Int
  // needs an integral value (use scalar_int beyond 2^53); kind Bool 0 or 1.
  NodeId scalar(double value, ScalarKind kind = ScalarKind::Float);
  NodeId scalar_int(int64_t value);
  // A Python number known only at run time (a SymFloat / SymInt / SymBool value):
  // weak-typed like scalar(), its value is passed to CompiledGraph::run by index
  // (kind Float: the double; kinds Int and Bool: an int64 bit pattern in the
  // double's 8 bytes, see jit/codegen/schedule.h). Shape {}. Indices count scalar inputs only,
  // so placeholders keep their numbering.
  NodeId scalar_input(ScalarKind kind = ScalarKind::Float);
  // A pointwise op with broadcasting and PyTorch's type promotion (DTypeRule); an
  // Error for what eager rejects or framejit cannot compute exactly as eager does.
  // At least one operand of an op must be a tensor. pow with a tensor exponent
  // becomes Op::Pow.
  Expected<NodeId> pointwise(Op op, const std::vector<NodeId>& inputs);
  // x.to(dtype): a Cast node, or x itself when it already has that dtype (as eager
  // returns self).
  Expected<NodeId> cast(NodeId x, DType to);

  // --- reductions (jit/ir/graph_ops.cpp) ---
  // op over `dims` of x (any order, negative dims count from the end; empty: all
  // dims, as sum(dim=None)). keepdim keeps them as size 1. `dtype` (sum, prod): the
  // accumulation and result type, as torch's dtype=; by default bool and integers
  // give int64. ArgMax / ArgMin take one dim or all (then the index is into the
  // flattened tensor). Any / All give bool (uint8 for a uint8 operand).
  Expected<NodeId> reduce(Op op, NodeId x, std::vector<int64_t> dims, bool keepdim,
                          std::optional<DType> dtype = std::nullopt);
  // Decompositions into the ops above and pointwise ones: mean, var (with
  // `correction`, std = sqrt(var)), softmax / log_softmax over one dim, logsumexp,
  // layer_norm over the last `normalized_ndim` dims (weight and bias optional: -1).
  // cumsum along `dim`: the shape of x; the dtype as sum's (integers and bool give
  // int64, `dtype` converts first); float32 accumulates in double, as eager's CPU kernel.
  Expected<NodeId> cumsum(NodeId x, int64_t dim, std::optional<DType> dtype = std::nullopt);
  Expected<NodeId> mean(NodeId x, std::vector<int64_t> dims, bool keepdim,
                        std::optional<DType> dtype = std::nullopt);
  Expected<NodeId> var(NodeId x, std::vector<int64_t> dims, double correction, bool keepdim);
  Expected<NodeId> softmax(NodeId x, int64_t dim, bool log);
  Expected<NodeId> logsumexp(NodeId x, std::vector<int64_t> dims, bool keepdim);
  Expected<NodeId> layer_norm(NodeId x, size_t normalized_ndim, NodeId weight, NodeId bias,
                              double eps);

  // --- views and movement ---
  Expected<NodeId> permute(NodeId x, std::vector<int64_t> order);
  Expected<NodeId> transpose(NodeId x, int64_t d0, int64_t d1);
  // view / reshape / flatten / squeeze / unsqueeze: the new sizes, one of them
  // possibly the constant -1 (inferred). The element count must match (an
  // assumption when it is not provable).
  Expected<NodeId> reshape(NodeId x, SymShape sizes);
  Expected<NodeId> unsqueeze(NodeId x, int64_t dim);
  // expand / broadcast_to: -1 keeps a size; new dims are added at the front.
  Expected<NodeId> expand(NodeId x, SymShape sizes);
  // x[start:start+length*step:step] along dim: start and length already clamped by
  // the caller to the Python slice rules (0 <= start, length >= 0), step >= 1.
  Expected<NodeId> slice(NodeId x, int64_t dim, SymExpr start, SymExpr length, int64_t step);
  // x.select(dim, index) with 0 <= index < size already ensured by the caller.
  Expected<NodeId> select(NodeId x, int64_t dim, SymExpr index);
  Expected<NodeId> flip(NodeId x, std::vector<int64_t> dims);
  // A node distinct from x with x's value (a reshape to its own shape, which
  // reshape() would fold away): the results of a custom autograd.Function, whose
  // gradients come from its own backward (jit/autodiff/autodiff.h).
  Expected<NodeId> alias(NodeId x);
  // `base` with its elements start, start+step, ... along dim replaced by `src`'s
  // (src has base's shape except sizes[dim], the slice's length; same dtype): how a
  // write through a slice or select view reaches its base (functionalized in-place).
  Expected<NodeId> slice_scatter(NodeId base, NodeId src, int64_t dim, SymExpr start, int64_t step);
  Expected<NodeId> cat(const std::vector<NodeId>& xs, int64_t dim);
  // x.index_select(dim, index) for an index tensor of any rank (its dims replace
  // `dim`): embedding is index_select(weight, 0, ids), x[idx] with negative indices
  // allowed is wrap_negative. An index out of range makes the graph's run report
  // kIndexOutOfRange (CompiledGraph::run), and the caller runs the frame eagerly.
  Expected<NodeId> index_select(NodeId x, int64_t dim, NodeId index, bool wrap_negative = false);
  Expected<NodeId> gather(NodeId x, int64_t dim, NodeId index);

  // --- creation ---
  // A tensor of `sizes` filled with a Python number (Scalar / ScalarInput node).
  Expected<NodeId> full(SymShape sizes, NodeId value, DType dtype);
  // int64: each element's position along `dim` (arange, eye, tril masks).
  NodeId iota(SymShape sizes, int64_t dim);

  // --- Python numbers ---
  // int(t) / float(t) / bool(t) of a one-element tensor: a number operand.
  Expected<NodeId> item(NodeId x, ScalarKind kind);
  // A scalar input whose value is a size expression the graph knows (numel of
  // reduced dims): scalar_input_exprs()[index] holds it. Kind Int.
  NodeId size_scalar(const SymExpr& value);
  // Per scalar input: the expression set by size_scalar, null for scalar_input().
  const std::vector<SymExpr>& scalar_input_exprs() const { return scalar_input_exprs_; }

  // --- extern ---
  // matmul of two operands of rank >= 2 ([..., m, k] @ [..., k, n], batch dims
  // broadcast); float32 / float64. linear(x, w, b) = x @ w.T + b (bias may be -1).
  Expected<NodeId> matmul(NodeId a, NodeId b);
  Expected<NodeId> linear(NodeId x, NodeId w, NodeId bias);
  // A call of `fn` on tensor operands whose result has `dtype` and `sizes` (the
  // embedder found them, e.g. by running the op on meta tensors).
  Expected<NodeId> extern_call(std::shared_ptr<const ExternFn> fn, std::vector<NodeId> operands, DType dtype,
                               SymShape sizes);

  void set_outputs(std::vector<NodeId> outputs);
  // A graph of its own returning `outputs`: the nodes they need, plus every
  // placeholder and scalar input (so inputs keep their positions and the same
  // arguments serve both graphs), in the same order.
  Graph cone(const std::vector<NodeId>& outputs) const;
  // Records that shapes `a` and `b` are equal dim by dim, as an op whose operands
  // must agree would: nothing where provable, an Error where provably not, else
  // assumptions (a gradient output whose sizes equal its input's by assumption only).
  Expected<bool> require_same_shape(const SymShape& a, const SymShape& b);

  const Node& node(NodeId id) const { return nodes_[static_cast<size_t>(id)]; }
  const std::vector<Node>& nodes() const { return nodes_; }
  const std::vector<NodeId>& outputs() const { return outputs_; }
  size_t num_inputs() const { return num_inputs_; }  // tensor placeholders
  size_t num_scalar_inputs() const { return num_scalar_inputs_; }
  // Equalities of symbolic sizes that building the graph relied on (broadcasting
  // s0 against s1 needs s0 == s1); the interpreter guards each of them.
  const std::vector<SymExpr>& assumptions() const { return assumptions_; }
  // Ranges that scalar inputs must lie in, where eager checks a Python number's
  // conversion (clamp bounds, where / masked_fill values) and would raise; the
  // interpreter guards each (and falls back when the traced value is outside).
  struct ScalarRange {
    int32_t index;  // ScalarInput index
    double lo, hi;  // inclusive
  };
  const std::vector<ScalarRange>& scalar_ranges() const { return scalar_ranges_; }
  // Nodes that must be evaluated at each run even when no output reads them, because
  // evaluating them can fail the way eager fails: int() of a floating tensor (NaN and
  // infinities raise in Python; the kernel reports kNoIntValue and the caller runs the
  // frame eagerly). item() registers them; the schedule evaluates the unread ones.
  const std::vector<NodeId>& checks() const { return checks_; }
  // How many assumptions, scalar ranges and checks the graph holds: a mark to roll
  // back to when the ops recorded after it will not run (the frame resumes in CPython
  // before them), so that what only they needed no longer holds the graph back.
  struct Mark {
    size_t assumptions = 0, ranges = 0, checks = 0;
  };
  Mark mark() const { return {assumptions_.size(), scalar_ranges_.size(), checks_.size()}; }
  void roll_back(const Mark& m);
  size_t size() const { return nodes_.size(); }

  // Stable text form used by golden tests, FRAMEJIT_LOG=graph and explain:
  //   %0 = placeholder[0] f32[4, 8]
  //   %1 = scalar_input[0]          (kind Float; "scalar_input[0] int" / "bool" else)
  //   %2 = aten.mul.Tensor(%0, %1) f32[4, 8]
  //   return (%5)
  std::string str() const;
  // A key that is equal exactly when two graphs are the same in every field (ops,
  // dtypes, symbolic shapes, attributes, exact constants, outputs): the CPU
  // backend's cache of compiled graphs is keyed by it.
  std::string structural_key() const;

 private:
  NodeId push(Node n);
  Expected<int64_t> norm_dim(NodeId x, int64_t dim, bool one_past = false) const;
  Expected<SymExpr> reduced_count(NodeId x, std::vector<int64_t>* dims) const;

  std::vector<Node> nodes_;
  std::vector<NodeId> outputs_;
  size_t num_inputs_ = 0;
  std::vector<SymExpr> assumptions_;
  std::vector<ScalarRange> scalar_ranges_;
  std::vector<NodeId> checks_;
  size_t num_scalar_inputs_ = 0;
  std::vector<SymExpr> scalar_input_exprs_;
};

// Scalar, ScalarInput and Item: a Python number operand (weak type, shape {}).
inline bool is_python_scalar(const Node& n) {
  return n.op == Op::Scalar || n.op == Op::ScalarInput || op_family(n.op) == Family::Item;
}

// The dtypes of a pointwise op on these operands (tensor dtypes and ranks, Python
// scalar kinds), or the reason eager or framejit rejects it. Exposed for tests.
struct OperandType {
  DType dtype;
  bool is_scalar;  // a Python number (dtype = scalar_kind_dtype of its kind)
  bool zero_dim;   // a 0-d tensor
};
struct OpTypes {
  DType result;
  DType compute;
};
Expected<OpTypes> infer_types(Op op, const std::vector<OperandType>& operands);
// torch.result_type over the operands (dimensioned tensors, then 0-d tensors, then
// Python numbers, each category able to lift only the category).
DType result_type(const std::vector<OperandType>& operands);

// Broadcast two shapes by PyTorch's rules; an Error names the mismatching dim.
Expected<Shape> broadcast_shapes(const Shape& a, const Shape& b);
// The same on symbolic sizes: size-1 dims are static, so a dim either broadcasts
// statically or must equal the other side; equalities that are not provable are
// appended to `assumed` (constant sizes that differ are an Error).
Expected<SymShape> broadcast_sym(const SymShape& a, const SymShape& b,
                                 std::vector<SymExpr>* assumed);

}  // namespace fj::jit
