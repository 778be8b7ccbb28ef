"""Which torch callables framejit records as graph ops, by graph op name."""

import operator

import torch
import torch.nn.functional as F


def _not_tensor_first():
    """Torch functions whose first argument is not a tensor: factories take sizes or
    numbers, cat and stack a sequence of tensors."""
    return {torch.zeros, torch.ones, torch.empty, torch.full, torch.arange, torch.linspace, torch.eye,
            torch.cat, torch.concat, torch.concatenate, torch.stack, torch.einsum}


def tensor_first(fn):
    """Whether `fn` rejects a Python number as its first argument: torch functions and
    Tensor methods do (torch.eq(2.0, x) raises), operators, abs() and torch.pow do not."""
    return not (getattr(fn, "__module__", None) in ("_operator", "operator", "builtins")
                or fn is torch.pow or fn is abs or fn in _not_tensor_first())


def torch_functions(pointwise_names=()):
    """Pairs (callable, op name) for every torch function framejit can record.
    `pointwise_names`: the one-tensor pointwise ops named by their ATen name
    (framejit._C._unary_pointwise_names()); torch.<name> and Tensor.<name> are added
    for each name the table below does not list."""
    T = torch.Tensor
    table = {
        "add": [operator.add, torch.add, T.add],
        "sub": [operator.sub, torch.sub, torch.subtract, T.sub],
        "mul": [operator.mul, torch.mul, torch.multiply, T.mul],
        "div": [operator.truediv, torch.div, torch.true_divide, T.div],
        "neg": [operator.neg, torch.neg, torch.negative, T.neg],
        "abs": [operator.abs, torch.abs, torch.absolute, T.abs, abs],
        "tanh": [torch.tanh, T.tanh, F.tanh],
        "sigmoid": [torch.sigmoid, T.sigmoid, F.sigmoid],
        "relu": [torch.relu, T.relu, F.relu],
        "maximum": [torch.maximum, T.maximum],
        "minimum": [torch.minimum, T.minimum],
        "where": [torch.where],
        "pow": [operator.pow, torch.pow, T.pow],
        "eq": [operator.eq, torch.eq, T.eq],
        "ne": [operator.ne, torch.ne, torch.not_equal, T.ne],
        "lt": [operator.lt, torch.lt, torch.less, T.lt],
        "le": [operator.le, torch.le, torch.less_equal, T.le],
        "gt": [operator.gt, torch.gt, torch.greater, T.gt],
        "ge": [operator.ge, torch.ge, torch.greater_equal, T.ge],
        "floor_divide": [operator.floordiv, torch.floor_divide, T.floor_divide],
        "remainder": [operator.mod, torch.remainder, T.remainder],
        "erf": [torch.erf, torch.special.erf, T.erf],
        "expm1": [torch.expm1, torch.special.expm1, T.expm1],
        "log1p": [torch.log1p, torch.special.log1p, T.log1p],
        "gelu": [F.gelu],
        "silu": [F.silu],
        "softplus": [F.softplus],
        "round": [torch.round, T.round],
        "trunc": [torch.trunc, torch.fix, T.trunc],
        "clamp": [torch.clamp, torch.clip, T.clamp, T.clip],
        "clamp_min": [torch.clamp_min, T.clamp_min],
        "clamp_max": [torch.clamp_max, T.clamp_max],
        "masked_fill": [torch.masked_fill, T.masked_fill],
        "nan_to_num": [torch.nan_to_num, T.nan_to_num],
        "logical_and": [torch.logical_and, T.logical_and],
        "logical_or": [torch.logical_or, T.logical_or],
        "logical_xor": [torch.logical_xor, T.logical_xor],
        "bitwise_and": [operator.and_, torch.bitwise_and, T.bitwise_and],
        "bitwise_or": [operator.or_, torch.bitwise_or, T.bitwise_or],
        "bitwise_xor": [operator.xor, torch.bitwise_xor, T.bitwise_xor],
        "bitwise_not": [operator.invert, operator.inv, torch.bitwise_not, T.bitwise_not],
        "to": [T.to],
        "float": [T.float],
        "double": [T.double],
        "long": [T.long],
        "int": [T.int],
        "bool": [T.bool],
        # reductions and normalizations
        "sum": [torch.sum, T.sum],
        "mean": [torch.mean, T.mean],
        "prod": [torch.prod, T.prod],
        "amax": [torch.amax, T.amax],
        "amin": [torch.amin, T.amin],
        "max": [torch.max, T.max],
        "min": [torch.min, T.min],
        "argmax": [torch.argmax, T.argmax],
        "argmin": [torch.argmin, T.argmin],
        "any": [torch.any, T.any],
        "all": [torch.all, T.all],
        "var": [torch.var, T.var],
        "std": [torch.std, T.std],
        "norm": [torch.norm, T.norm],
        "logsumexp": [torch.logsumexp, T.logsumexp],
        "cumsum": [torch.cumsum, T.cumsum],
        "softmax": [torch.softmax, T.softmax, torch.special.softmax],
        "log_softmax": [torch.log_softmax, T.log_softmax, torch.special.log_softmax],
        "F_softmax": [F.softmax],
        "F_log_softmax": [F.log_softmax],
        "layer_norm": [F.layer_norm], "lerp": [torch.lerp, T.lerp],
        # views and movement
        "view": [T.view],
        "reshape": [T.reshape],
        "reshape_fn": [torch.reshape],
        "permute": [T.permute],
        "permute_fn": [torch.permute],
        "movedim": [torch.movedim, T.movedim, torch.moveaxis, T.moveaxis],
        "transpose": [torch.transpose, T.transpose, torch.swapaxes, T.swapaxes, torch.swapdims, T.swapdims],
        "t": [torch.t, T.t],
        "unsqueeze": [torch.unsqueeze, T.unsqueeze],
        "squeeze": [torch.squeeze, T.squeeze],
        "expand": [T.expand], "expand_as": [T.expand_as],
        "broadcast_to": [torch.broadcast_to, T.broadcast_to], "broadcast_tensors": [torch.broadcast_tensors],
        "flatten": [torch.flatten, T.flatten],
        "contiguous": [T.contiguous],
        "detach": [torch.detach, T.detach],
        "narrow": [torch.narrow, T.narrow], "diagonal": [torch.diagonal, T.diagonal],
        "select": [torch.select, T.select],
        "unbind": [torch.unbind, T.unbind],
        "split": [T.split],
        "split_fn": [torch.split],
        "chunk": [torch.chunk, T.chunk],
        "cat": [torch.cat, torch.concat, torch.concatenate],
        "stack": [torch.stack],
        "flip": [T.flip],
        "flip_fn": [torch.flip],
        "index_select": [torch.index_select, T.index_select],
        "gather": [torch.gather, T.gather],
        "embedding": [F.embedding],
        # creation
        "zeros": [torch.zeros],
        "ones": [torch.ones],
        "empty": [torch.empty],
        "full": [torch.full],
        "arange": [torch.arange],
        "linspace": [torch.linspace],
        "eye": [torch.eye],
        "zeros_like": [torch.zeros_like],
        "ones_like": [torch.ones_like],
        "empty_like": [torch.empty_like],
        "full_like": [torch.full_like],
        "tril": [torch.tril, T.tril],
        "triu": [torch.triu, T.triu],
        # matmul family
        "matmul": [torch.matmul, T.matmul, operator.matmul],
        "mm": [torch.mm, T.mm],
        "bmm": [torch.bmm, T.bmm],
        "addmm": [torch.addmm, T.addmm],
        "linear": [F.linear],
        "einsum": [torch.einsum],
        "item": [T.item], "tolist": [T.tolist],
        # conversions, copies, new_*
        "type_as": [T.type_as],
        "clone": [torch.clone, T.clone],
        "new_zeros": [T.new_zeros],
        "new_ones": [T.new_ones],
        "new_empty": [T.new_empty],
        "new_full": [T.new_full],
        # torch.nn.functional's ops (F.dropout and F.batch_norm call these)
        "dropout": [torch.dropout],  # torch._VF.dropout is the same object
        "feature_dropout": [torch.feature_dropout],  # F.dropout1d/2d/3d call it through _VF
        "dropout_": [torch.dropout_],  # inplace=True
        "feature_dropout_": [torch.feature_dropout_],
        "batch_norm": [torch.batch_norm],
        "scaled_dot_product_attention": [F.scaled_dot_product_attention],
        "nll_loss_nd": [torch._C._nn.nll_loss_nd],
        "cross_entropy_loss": [torch._C._nn.cross_entropy_loss],
    }
    for name in pointwise_names:
        if name not in table:
            table[name] = [fn for fn in (getattr(torch, name, None), getattr(T, name, None)) if fn is not None]
    for name, fns in table.items():
        for fn in fns:
            yield fn, name


def tensor_attr_names():
    """torch.Tensor methods and operator dunders that traces record by meaning."""
    dunders = [f"__{n}__" for n in ("add", "radd", "sub", "rsub", "mul", "rmul", "truediv", "rtruediv",
                                     "floordiv", "rfloordiv", "mod", "rmod", "pow", "rpow", "and", "rand",
                                     "or", "ror", "xor", "rxor", "neg", "pos", "invert", "abs",
                                     "lt", "le", "eq", "ne", "gt", "ge", "matmul", "rmatmul",
                                     "getitem", "setitem", "iter", "int", "float", "bool",
                                     "iadd", "isub", "imul", "itruediv", "ifloordiv", "imod", "ipow",
                                     "iand", "ior", "ixor")]
    methods = [n for n in dir(torch.Tensor) if not n.startswith("_")]
    return dunders + methods
