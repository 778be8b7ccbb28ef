"""Attributes of functions read while tracing (__name__, __doc__, __defaults__...): of a
global function guarded to stay as traced, of a nested one as the frame made it. And
abs() of a number read from a tensor: a Python number of the graph, not a tensor op."""
import functools

import torch

import framejit
from conftest import assert_same


def _wrap(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs)
    return wrapper


@_wrap
def doubled(t):
    """Doubles t."""
    return t * 2


def reads_attrs(x, n):
    def inner(a, b=2, c=3, *, d=4):
        return a
    return (x * (n + len(inner.__defaults__)), inner.__name__, inner.__kwdefaults__,
            doubled(x), doubled.__name__, doubled.__doc__, doubled.__module__, doubled.__qualname__)


def test_function_attributes_compile_whole_and_follow_changes():
    f = framejit.compile(reads_attrs)
    for n in (2, 5):
        assert_same(f(torch.ones(3), n), reads_attrs(torch.ones(3), n))
    s = framejit.stats(f)
    assert s["compiles"] == 1 and s["graph_breaks"] == 0 and s["fallbacks"] == 0
    old = doubled.__doc__
    try:
        doubled.__doc__ = "changed"
        assert f(torch.ones(3), 2)[5] == "changed"  # the guard sees the new __doc__
        assert framejit.stats(f)["recompiles"] == 1
    finally:
        doubled.__doc__ = old


def traced_default(x, k):
    def inner(a, b=k):
        return a * b
    return inner(x), inner.__defaults__


def test_traced_defaults_are_read_per_call():
    f = framejit.compile(traced_default)
    for k in (2, 3):
        assert_same(f(torch.ones(2), k), traced_default(torch.ones(2), k))


def abs_of_numbers_read_from_tensors(x):
    v = float(x.mean())
    i = int(x.sum())
    b = bool(x.sum() > 100)
    return x / (abs(v) + 1), abs(i), abs(b), -b


def test_abs_of_a_number_read_from_a_tensor_is_a_python_number():
    f = framejit.compile(abs_of_numbers_read_from_tensors)
    for x in (torch.randn(3), -3 * torch.ones(4)):
        assert_same(f(x), abs_of_numbers_read_from_tensors(x))
    s = framejit.stats(f)
    assert s["compiles"] == 1 and s["graph_breaks"] == 0 and s["fallbacks"] == 0
