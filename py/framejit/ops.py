"""Which torch callables framejit records as graph ops, by graph op name."""

import torch
import torch.nn.functional as F


def torch_functions():
    """Pairs (callable, op name) for every torch function framejit can record."""
    T = torch.Tensor
    table = {
        "add": [torch.add, T.add],
        "sub": [torch.sub, torch.subtract, T.sub],
        "mul": [torch.mul, torch.multiply, T.mul],
        "div": [torch.div, torch.true_divide, T.div],
        "neg": [torch.neg, torch.negative, T.neg],
        "abs": [torch.abs, torch.absolute, T.abs, abs],
        "exp": [torch.exp, T.exp],
        "log": [torch.log, T.log],
        "sqrt": [torch.sqrt, T.sqrt],
        "sin": [torch.sin, T.sin],
        "cos": [torch.cos, T.cos],
        "tanh": [torch.tanh, T.tanh, F.tanh],
        "sigmoid": [torch.sigmoid, T.sigmoid, F.sigmoid],
        "relu": [torch.relu, T.relu, F.relu],
        "maximum": [torch.maximum, T.maximum],
        "minimum": [torch.minimum, T.minimum],
        "where": [torch.where],
        "pow": [torch.pow, T.pow],
        "eq": [torch.eq, T.eq],
        "ne": [torch.ne, torch.not_equal, T.ne],
        "lt": [torch.lt, torch.less, T.lt],
        "le": [torch.le, torch.less_equal, T.le],
        "gt": [torch.gt, torch.greater, T.gt],
        "ge": [torch.ge, torch.greater_equal, T.ge],
    }
    for name, fns in table.items():
        for fn in fns:
            yield fn, name
