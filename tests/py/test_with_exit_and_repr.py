"""Two traced pieces of everyday Python: a Python __exit__ that sees an exception
leaving its with block (contextlib.suppress and user managers), and a dataclass's
generated __repr__ (its recursion guard is not traced)."""
import contextlib
import dataclasses

import torch

import framejit
from conftest import assert_same, compiled_whole as whole, same_outcome


class _Log:
    def __init__(self):
        self.seen = []

    def __enter__(self):
        return self

    def __exit__(self, kind, value, tb):
        self.seen.append(kind)
        return kind is KeyError  # swallows KeyError only


def test_exit_sees_the_exception_and_may_swallow_it():
    def f(x, d):
        y = x
        with contextlib.suppress(KeyError):
            y = x * d["a"]
        log = _Log()
        with log:
            y = y + d["b"]
        return y, log.seen

    whole(f, [(torch.randn(3), {"a": 2.0, "b": 1.0}), (torch.randn(3), {"b": 3.0}), (torch.randn(3), {"a": 4.0}),
              (torch.randn(3), {})])


def test_an_exception_exit_does_not_swallow_still_raises():
    def f(x, d):
        with _Log():
            return x * d[0]  # IndexError from a list: _Log lets it through
    framejit.reset()
    same_outcome(framejit.compile(f), f, torch.randn(3), [])
    same_outcome(framejit.compile(f), f, torch.randn(3), [2.0])


def test_exit_that_reads_the_traceback_runs_in_cpython():
    class Tb:
        def __enter__(self):
            return self

        def __exit__(self, kind, value, tb):
            return tb is not None

    def f(x, d):
        y = x
        with Tb():
            y = x * d["k"]
        return y
    framejit.reset()
    same_outcome(framejit.compile(f), f, torch.randn(3), {})


@dataclasses.dataclass
class _Pair:
    a: int
    b: float


def test_dataclass_repr_is_traced():
    def f(x, a):
        return repr(_Pair(a, a / 2)), str(_Pair(1, 0.5)), x * a
    whole(f, [(torch.randn(3), 2), (torch.randn(3), 3)])
