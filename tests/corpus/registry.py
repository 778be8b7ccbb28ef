"""The corpus registry: each case is a function of tensors and Python values plus the
calls to make of it. `@case(call, call, ...)` registers a function; a call is a tuple of
arguments (or `call(*args, **kwargs)` for keyword arguments). A callable inside a call
is a factory: it is called anew for each run (eager, compiled, explain) so in-place
changes cannot leak from one run into the next; other values are deep-copied for each
run for the same reason. Wrap a value that is itself callable (a function, a class) in
`const(...)` to pass it as it is. Before call i's inputs are made, torch's and numpy's
generators are seeded with a number fixed by i, so every run of call i sees the same
values. A case's group is its module's name without `cases_` unless `group=` says."""
import copy
import importlib
import os

import numpy as np
import torch

CASES = []
GROUPS = []  # group names in the order their modules were loaded

HERE = os.path.dirname(os.path.abspath(__file__))


class Const:
    """An argument passed as it is, even when it is callable."""
    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value


def const(value):
    return Const(value)


class Call:
    """One call's arguments: positional and keyword (values may be factories)."""
    __slots__ = ("args", "kwargs")

    def __init__(self, args, kwargs):
        self.args = tuple(args)
        self.kwargs = dict(kwargs)


def call(*args, **kwargs):
    return Call(args, kwargs)


def _make(value):
    if isinstance(value, Const):
        return value.value
    if callable(value):
        return value()
    return copy.deepcopy(value)  # a list or dict written in the call: a fresh copy each run


class Case:
    __slots__ = ("group", "name", "fn", "calls")

    def __init__(self, group, name, fn, calls):
        self.group, self.name, self.fn, self.calls = group, name, fn, calls

    @property
    def id(self):
        return f"{self.group}/{self.name}"

    def inputs(self, i):
        """Fresh (args, kwargs) for call i, the same values every time."""
        c = self.calls[i]
        if not isinstance(c, Call):
            c = Call(c, {})
        torch.manual_seed(1000 + i)
        np.random.seed(1000 + i)
        return [_make(a) for a in c.args], {k: _make(v) for k, v in c.kwargs.items()}

    def __repr__(self):
        return f"<case {self.id}>"


def case(*calls, group=None):
    """Registers the decorated function with these calls (at least two)."""
    if len(calls) < 2:
        raise ValueError("a corpus case needs at least two calls")

    def register(fn):
        g = group or fn.__module__.rsplit(".", 1)[-1].removeprefix("cases_")
        if any(c.group == g and c.name == fn.__name__ for c in CASES):
            raise ValueError(f"duplicate corpus case {g}/{fn.__name__}")
        CASES.append(Case(g, fn.__name__, fn, calls))
        if g not in GROUPS:
            GROUPS.append(g)
        return fn
    return register


# Factories for the common inputs.

def randn(*shape, dtype=torch.float32):
    return lambda: torch.randn(*shape, dtype=dtype)


def randint(high, *shape, dtype=torch.int64):
    return lambda: torch.randint(0, high, shape, dtype=dtype)


def module_names():
    """The corpus modules (cases_*.py), sorted."""
    return sorted(f[:-3] for f in os.listdir(HERE) if f.startswith("cases_") and f.endswith(".py"))


def load(group=None):
    """Imports the case modules (cases_*.py) and returns the cases, only `group`'s
    with a group given, in the order they were defined."""
    for m in module_names():
        importlib.import_module(f"corpus.{m}")
    return [c for c in CASES if group is None or c.group == group]
