"""How compiled graphs join eager autograd: a torch.autograd.Function whose forward runs
a compiled forward graph and whose backward runs the compiled backward graph.

The C++ runtime (interp/runtime/autograd_runtime.cpp) calls `apply` on a cache hit of a plan
whose graph reads tensors that require grad; `call` carries the compiled graphs and
this call's scalars and sizes, which the backward needs again."""

import torch


class CompiledGraphFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, call, *inputs):
        outputs, saved, non_differentiable = call.forward(inputs)
        ctx.call = call
        ctx.save_for_backward(*saved)
        if non_differentiable:
            ctx.mark_non_differentiable(*non_differentiable)
        return outputs

    @staticmethod
    def backward(ctx, *grads):
        if torch.is_grad_enabled():
            # Grad mode is on in a backward only under create_graph=True: the compiled
            # backward graph is not itself differentiable (nor is torch.compile's).
            raise RuntimeError(
                "framejit: a backward with create_graph=True (double backward) through a compiled "
                "function is not supported; call the function without framejit for that")
        return (None,) + ctx.call.backward(ctx.saved_tensors, grads)


def apply(call, enable_grad, inputs):
    """The outputs of the compiled forward (a tuple), attached to autograd.
    `enable_grad`: grad mode is off at the frame's entry and on where the graph needs it."""
    if enable_grad:
        with torch.enable_grad():
            return CompiledGraphFunction.apply(call, *inputs)
    return CompiledGraphFunction.apply(call, *inputs)
