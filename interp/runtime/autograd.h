// Autograd for compiled plans: the Python side's registration (the compiled-plan
// Function's entry point lives in py/framejit/autograd.py).
#pragma once

#include "interp/compat.h"

namespace fj::interp {

// framejit.autograd.apply(call, enable_grad, inputs): runs a joint plan's forward
// through the torch.autograd.Function (registered at import).
void set_autograd_apply(PyObject* fn);
// torch.autograd.Function and its `apply` (bound to it: a method, or a builtin in torch 2.14), so
// that the tracer recognizes MyFunction.apply(...) (registered at import).
void set_autograd_function(PyObject* function_type, PyObject* apply, PyObject* setup_context);
// The code object of torch.autograd.function.once_differentiable's wrapper: a backward
// with it is traced as the function it wraps.
void set_once_differentiable_code(PyObject* code);

}  // namespace fj::interp
