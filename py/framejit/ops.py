"""Which torch callables framejit records as graph ops, by graph op name."""

import operator

import torch
import torch.nn.functional as F


def torch_functions():
    """Pairs (callable, op name) for every torch function framejit can record."""
    T = torch.Tensor
    table = {
        "add": [operator.add, torch.add, T.add],
        "sub": [operator.sub, torch.sub, torch.subtract, T.sub],
        "mul": [operator.mul, torch.mul, torch.multiply, T.mul],
        "div": [operator.truediv, torch.div, torch.true_divide, T.div],
        "neg": [operator.neg, torch.neg, torch.negative, T.neg],
        "abs": [operator.abs, torch.abs, torch.absolute, T.abs, abs],
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
        "pow": [operator.pow, torch.pow, T.pow],
        "eq": [operator.eq, torch.eq, T.eq],
        "ne": [operator.ne, torch.ne, torch.not_equal, T.ne],
        "lt": [operator.lt, torch.lt, torch.less, T.lt],
        "le": [operator.le, torch.le, torch.less_equal, T.le],
        "gt": [operator.gt, torch.gt, torch.greater, T.gt],
        "ge": [operator.ge, torch.ge, torch.greater_equal, T.ge],
    }
    for name, fns in table.items():
        for fn in fns:
            yield fn, name
