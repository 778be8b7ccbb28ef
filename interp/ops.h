// How Python-level operations map to graph ops: torch functions (registered from
// framejit's Python side by object), tensor method names, and operator opcodes.
#pragma once

#include "interp/compat.h"

#include <optional>
#include <string>

#include "jit/graph.h"
#include "jit/symexpr.h"

namespace fj::interp {

// The op for a graph op name used by the Python-side table ("add", "relu", ...).
std::optional<jit::Op> op_by_name(const std::string& name);
// Registers a torch callable (torch.relu, torch.nn.functional.relu, ...) as `op`.
void register_torch_function(PyObject* fn, jit::Op op);
void clear_torch_functions();
std::optional<jit::Op> torch_function_op(PyObject* fn);
// Tensor methods with the same signature as the function (self first).
std::optional<jit::Op> tensor_method_op(const std::string& name);
// BINARY_OP's argument (NB_ADD, ...) on tensors.
std::optional<jit::Op> binary_tensor_op(int nb_op);
// COMPARE_OP's argument (Py_LT, ...) on tensors.
jit::Op compare_tensor_op(int cmp);
// BINARY_OP on symbolic scalars (nullopt for operators not traced symbolically).
std::optional<jit::SymExpr> binary_sym_op(int nb_op, const jit::SymExpr& a, const jit::SymExpr& b);
// COMPARE_OP on symbolic scalars.
jit::SymExpr compare_sym(int cmp, const jit::SymExpr& a, const jit::SymExpr& b);
// BINARY_OP on two Python numbers (new reference, or NULL with an error set).
PyObject* binary_number_op(int nb_op, PyObject* a, PyObject* b);

}  // namespace fj::interp
