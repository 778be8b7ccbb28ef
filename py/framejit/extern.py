"""Extern torch calls: which torch functions the tracer may record as one graph node
(an ExternCall that calls the function itself at run time), and the run on meta
tensors that gives the node its dtype and sizes. Used while tracing only."""
import types

import torch

# The torch namespaces whose public functions are plain ops on tensors.
_NAMESPACES = {"torch", "torch._C._nn", "torch._C._special", "torch._C._linalg", "torch._C._fft",
               "torch.nn.functional"}
# Functions that return or keep something other than a fresh tensor, or read global
# state a graph would not see change.
_DENY = {"detach", "alias", "set_", "numel", "is_tensor", "is_storage", "is_floating_point", "is_complex",
         "is_nonzero", "is_same_size", "is_signed", "is_conj", "is_neg", "is_inference", "result_type",
         "can_cast", "promote_types", "get_default_dtype", "is_grad_enabled", "get_device", "manual_seed", "seed", "initial_seed",
         "from_numpy", "from_dlpack", "as_tensor", "tensor", "asarray", "frombuffer", "as_strided",
         "empty", "empty_like", "empty_strided", "empty_permuted", "unique", "unique_consecutive", "nonzero",
         "masked_select", "bincount", "histc", "combinations", "where", "argwhere",
         "sparse_coo_tensor", "sparse_csr_tensor", "to_sparse", "quantize_per_tensor", "dequantize"}
# Composite functions that write an argument in place though their names do not end
# in "_" (and torch's schema does not say so): (name, position of the flag, keyword,
# position of the buffer written): a call with the flag set is not an extern node.
_WRITES_WHEN = {"batch_norm": (5, "training", 3), "instance_norm": (5, "use_input_stats", 3)}

_reasons = {}


def _schema_writes(name):
    """Whether an overload of aten's `name` writes a tensor argument that is not an
    out= buffer (out variants such as topk.values, and aten's in-place sort of a
    Python list, do not count)."""
    packet = getattr(torch.ops.aten, name, None)
    if packet is None:
        return False
    for overload in packet.overloads():
        for arg in getattr(packet, overload)._schema.arguments:
            written = arg.alias_info is not None and arg.alias_info.is_write and not arg.is_out
            if written and str(arg.type).startswith("Tensor"):
                return True
    return False


def extern_reason(fn):
    """None when `fn` may be an extern node, else why not (cached per function)."""
    try:
        return _reasons[fn]
    except (KeyError, TypeError):
        pass
    name = getattr(fn, "__name__", "")
    method = isinstance(fn, types.MethodDescriptorType) and getattr(fn, "__objclass__", None) is torch._C.TensorBase
    if not isinstance(fn, types.BuiltinFunctionType) and not method:
        why = "not a torch builtin"
    elif not method and getattr(fn, "__module__", None) not in _NAMESPACES:
        why = "not in a torch namespace"
    elif not name or name.startswith("_") or name.endswith("_") or name in _DENY:
        why = "not a plain torch op"
    elif _schema_writes(name):
        why = "writes an argument in place"
    else:
        why = None
    try:
        _reasons[fn] = why
    except TypeError:
        pass
    return why


def _storages(x, out):
    if isinstance(x, torch.Tensor):
        out.append(x)
    elif isinstance(x, (list, tuple)):
        for item in x:
            _storages(item, out)


def meta_call(fn, args, kwargs, grad=False):
    """fn(*args, **kwargs) where the tensor arguments are meta tensors: (results,
    random, kind, needs_grad), or a str saying why it cannot be an extern node.
    results: a (dtype, sizes, contiguous) per result tensor; random: the op draws from
    torch's generator (its gradient cannot run it again); kind: None for one tensor,
    else the type of the sequence of tensors it returns (tuple, or a torch.return_types
    type). With grad, some meta tensors require grad and the call runs with grad mode
    on: needs_grad says whether eager's result would require grad."""
    name = getattr(fn, "__name__", "")
    writes = _WRITES_WHEN.get(name)
    if writes is not None:
        pos, key, buf = writes
        flag = args[pos] if len(args) > pos else (kwargs or {}).get(key, False)
        if flag and len(args) > buf and args[buf] is not None:
            return f"{name}() updates its running statistics in place"
    if kwargs and ("out" in kwargs or "generator" in kwargs):
        return "a call with out= or generator="
    try:
        with torch.set_grad_enabled(grad):
            result = fn(*args, **(kwargs or {}))
    except Exception as e:  # eager raises, or torch has no meta kernel for it
        return f"its meta run raised {type(e).__name__}"
    kind = None
    results = (result,)
    if isinstance(result, tuple) and result and type(result).__module__ in ("builtins", "torch.return_types"):
        kind, results = type(result), tuple(result)
    if not all(type(r) is torch.Tensor and r.device.type == "meta" for r in results):
        return "its result is not a tensor or a tuple of tensors"
    random = _seeded(name)
    if random and len(results) > 1:
        return "it draws random numbers for several results"
    inputs = []
    _storages(args, inputs)
    _storages(list((kwargs or {}).values()), inputs)
    storages = {t.untyped_storage()._cdata for t in inputs}
    if any(r.untyped_storage()._cdata in storages for r in results):
        return "its result shares memory with an argument"
    needs_grad = any(r.requires_grad for r in results)
    return tuple((r.dtype, tuple(r.shape), r.is_contiguous()) for r in results), random, kind, needs_grad


def _seeded(name):
    """Whether the aten op `name` draws from torch's random generator."""
    packet = getattr(torch.ops.aten, name, None)
    if packet is None:
        return False
    return any(torch.Tag.nondeterministic_seeded in getattr(packet, o).tags for o in packet.overloads())


def vjp(fn, args, kwargs, output, xs, gy, out):
    """Writes into `out` the gradients of fn(*args, **kwargs) (of its result number
    `output` when it returns several; -1: it returns one) with respect to xs (some of
    its tensor arguments) for that result's gradient gy: out has the shape of xs[0]
    when there is one, else holds them all flattened one after another (a zero where
    the result does not depend on an x). torch's own backward of the op, run on the
    spot: its ATen backward where one is known (no forward run again), else autograd
    over a new forward run. False when a gradient is not what the trace expected."""
    grads = _direct_backward(fn, args, kwargs or {}, output, xs, gy)
    if grads is None:
        with torch.enable_grad():
            for x in xs:
                x.requires_grad_()
            y = fn(*args, **(kwargs or {}))
            if output >= 0:
                y = y[output]
            grads = torch.autograd.grad(y, xs, gy, allow_unused=True) if y.requires_grad else (None,) * len(xs)
    for x, g in zip(xs, grads):
        if g is not None and (g.shape != x.shape or g.dtype != out.dtype):
            return False
    if len(xs) == 1:
        if grads[0] is None:
            out.zero_()
        else:
            out.copy_(grads[0])
    else:
        torch.cat([x.new_zeros(x.numel()) if g is None else g.reshape(-1) for x, g in zip(xs, grads)], out=out)
    return True


_convolution_backward = torch.ops.aten.convolution_backward.default
_CONV_DIMS = {torch.conv1d: 1, torch.conv2d: 2, torch.conv3d: 3}
_CONV_PARAMS = ("input", "weight", "bias", "stride", "padding", "dilation", "groups")


def _direct_backward(fn, args, kwargs, output, xs, gy):
    """The gradients for xs from the op's ATen backward (convolution_backward for
    conv1d/2d/3d, as eager's autograd calls it), or None where there is none here."""
    dims = _CONV_DIMS.get(fn)
    if dims is None or output >= 0 or len(args) + len(kwargs) > len(_CONV_PARAMS):
        return None
    bound = dict(zip(_CONV_PARAMS, args))
    if any(k not in _CONV_PARAMS or k in bound for k in kwargs):
        return None
    bound.update(kwargs)
    x, w, b = bound.get("input"), bound.get("weight"), bound.get("bias")
    padding = bound.get("padding", 0)
    roles = [[r is t for r in (x, w, b)] for t in xs]
    if isinstance(padding, str) or x is None or w is None or x.dim() != dims + 2 or not all(any(r) for r in roles):
        return None  # 'same' padding, an unbatched input: autograd instead

    def tup(v):
        return [v] * dims if isinstance(v, int) else list(v)
    mask = [any(r[i] for r in roles) for i in range(3)]
    grads = _convolution_backward(
        gy, x, w, None if b is None else [b.shape[0]], tup(bound.get("stride", 1)), tup(padding),
        tup(bound.get("dilation", 1)), False, [0] * dims, bound.get("groups", 1), mask)
    return [grads[r.index(True)] for r in roles]
