// Extern calls: work that a graph hands back to its embedder, for ops jit/ does not
// lower (a torch function the interpreter records as one node: conv2d, dropout, ...).
//
// Design: jit/ knows nothing of Python or torch, so an ExternCall node holds an
// ExternFn, an object the embedder (interp/) implements. The CPU runtime gives it its
// operands' memory (strided views) and a result buffer of the node's shape and dtype,
// contiguous; the fn computes the result into it. Operands and result never overlap.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace fj::jit {

enum class DType : uint8_t;

// One operand or the result of an extern call: sizes and strides in elements.
struct ExternArg {
  void* data = nullptr;
  DType dtype{};
  int rank = 0;
  const int64_t* sizes = nullptr;
  const int64_t* strides = nullptr;
};

class ExternFn {
 public:
  virtual ~ExternFn() = default;
  // Shown in graph printouts and explain: "torch.conv2d".
  virtual const std::string& name() const = 0;
  // Equal keys: calls that compute the same function of their operands (the name and
  // every constant argument); part of Graph::structural_key.
  virtual const std::string& key() const = 0;
  // Computes the result into `result`. False when the call failed (eager would raise
  // there, or the result is not what the trace saw): the graph's run then reports
  // kExternFailed and its caller computes the frame's result another way. Called on
  // the thread that runs the graph, possibly without the GIL held.
  virtual bool run(const std::vector<ExternArg>& operands, const ExternArg& result) const noexcept = 0;
  // The gradients of operands ks (ascending, all of one dtype): an ExternFn of (the
  // operands..., the result's gradient) whose result is operand ks[0]'s gradient (its
  // shape and dtype) when ks has one item, else every gradient flattened and
  // concatenated in ks order, one 1-d result (torch's backward of an op computes the
  // gradients of all its operands in one call: conv2d's of input, weight and bias).
  // Null when there is none (the graph is then not differentiated: autograd runs in
  // CPython).
  virtual std::shared_ptr<const ExternFn> vjp(const std::vector<size_t>& ks) const = 0;
  // Whether each run draws from a random generator (dropout's noise, rand_like): such
  // a node is never merged with another, moved across one, cloned or recomputed (the
  // autodiff saves it, see jit/autodiff/autodiff.cpp), and runs in node order among
  // the graph's extern calls (jit/codegen/schedule.cpp), so the draws keep the order
  // the trace saw. Its result carries no gradient.
  virtual bool random() const { return false; }
};

}  // namespace fj::jit
