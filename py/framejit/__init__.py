"""framejit: a C++ JIT for PyTorch code on CPython 3.11."""

import torch

from framejit import _C
from framejit import ops as _ops

_C._init(torch.Tensor, torch.float32, torch.bool, torch.empty, torch.Size,
         torch.float64, torch.int32, torch.int64, torch.uint8)
for _fn, _name in _ops.torch_functions(_C._unary_pointwise_names()):
    _C._register_op(_fn, _name, _ops.tensor_first(_fn))
del _fn, _name
# Tensor methods and operators as torch defines them: a trace records them by meaning,
# so a monkeypatched one must not be (guards compare against this snapshot).
_C._snapshot_tensor_attrs(_ops.tensor_attr_names())
_C._set_module_getattr(torch.nn.Module.__getattr__)
_mm = torch.nn.modules.module
_C._set_module_call(torch.nn.Module.__call__, [
    _mm._global_forward_hooks, _mm._global_forward_pre_hooks, _mm._global_backward_hooks,
    _mm._global_backward_pre_hooks, _mm._global_forward_hooks_with_kwargs,
    _mm._global_forward_hooks_always_called], [torch.nn.Sequential, torch.nn.ModuleList])
del _mm
for _cls in (torch.no_grad, torch.enable_grad):
    _C._register_grad_mode_class(_cls)
del _cls
from framejit import extern as _extern  # noqa: E402
_C._set_extern(_extern.extern_reason, _extern.meta_call, _extern.vjp, torch.from_dlpack)
from framejit import autograd as _autograd  # noqa: E402
_C._set_autograd(_autograd.apply, torch.autograd.Function, torch.autograd.Function.apply,
                 torch.autograd.Function.setup_context)
_C._set_once_differentiable_code(torch.autograd.function.once_differentiable(lambda ctx: None).__code__)

from framejit.api import GraphBreakError, compile, config, explain, fallbacks, ptx, reset, stats  # noqa: E402
from framejit.dis import dis  # noqa: E402
from framejit.hooks import hook, unhook  # noqa: E402

__all__ = ["GraphBreakError", "compile", "config", "dis", "explain", "fallbacks", "hook", "ptx", "reset", "stats", "unhook"]
