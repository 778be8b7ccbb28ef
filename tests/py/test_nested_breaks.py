"""A graph break inside a called function: the call runs in CPython from the caller's
plan, and the callee is compiled on its own from then on (inside compiled code only),
so its work before and after the break is compiled rather than lost to CPython. Also
the Python the HuggingFace output wrappers use on the way: str() of a class, dict.get
unbound (super().get in a dict subclass), a dict comprehension, and the truth and keys
of a dict found by path, each guarded."""
import re

import numpy as np
import pytest
import torch

import framejit
from conftest import assert_same


def leaf(x):
    a = x.sin() * 2
    b = torch.as_tensor(np.asarray(a)) + 1  # graph breaks: numpy
    return (b.cos() + a).sum(0)


def middle(x):
    return leaf(x + 1) * 3


def outer(x):
    return middle(x).exp()


def test_a_break_two_calls_deep_compiles_the_callees_around_it():
    cf = framejit.compile(outer)
    for n in (4, 7, 4):
        x = torch.randn(n, 3)
        assert_same(cf(x), outer(x))
    assert framejit.stats()["fallbacks"] == 0
    # middle's frames ran through framejit, and leaf's, with the break at its top: a
    # graph before it and one after.
    assert framejit.stats(middle)["compiles"] >= 1
    s = framejit.stats(leaf)
    assert s["compiles"] >= 1 and s["graphs"] >= 1 and s["graph_breaks"] >= 1
    assert s["cache_hits"] >= 1


def passthrough(fn, *args):
    return fn(*args)


def test_a_nested_callee_without_tensor_work_is_left_to_cpython():
    def f(x):
        return passthrough(leaf, x * 2) + 1

    cf = framejit.compile(f)
    for _ in range(3):
        x = torch.randn(5, 2)
        assert_same(cf(x), f(x))
    s = framejit.stats(passthrough)
    assert s["skipped"] == 1 and s["graphs"] == 0 and s["fallbacks"] == 0
    assert framejit.stats(leaf)["cache_hits"] >= 1  # called from passthrough, in CPython


def test_a_nested_callee_is_left_alone_outside_compiled_code():
    cf = framejit.compile(outer)
    x = torch.randn(4, 3)
    assert_same(cf(x), outer(x))
    calls = framejit.stats(leaf)["calls"]
    assert calls >= 1
    assert_same(leaf(x), leaf(x))  # called from plain Python: CPython's own
    assert framejit.stats(leaf)["calls"] == calls


def test_a_nested_callee_that_raises_raises_like_eager():
    def bad(x):
        a = x * 2
        np.asarray(a)  # a graph break
        raise ValueError(f"bad {a.shape[0]}")

    def f(x):
        return bad(x + 1)

    cf = framejit.compile(f)
    for _ in range(3):
        try:
            cf(torch.randn(5))
        except ValueError as e:
            assert str(e) == "bad 5"
        else:
            raise AssertionError("no ValueError")


class Registry(dict):
    """Like transformers' _CanRecordRegistry: keyed by str(cls), read through the
    dict's own get (super().get)."""

    def get(self, obj):
        return super().get(str(obj.__class__)) or {}


class Scale:
    pass


class Shift:
    pass


REGISTRY = Registry()
REGISTRY[str(Scale)] = {"scale": 2.0, "twice": 2.0}


def flagged(obj, x):
    flags = REGISTRY.get(obj)
    wanted = {f"use_{k}": v for k, v in flags.items() if k != "twice"}
    for k in flags:
        x = x * flags[k]
    return x + len(wanted)


def test_dict_subclass_read_by_super_get_keyed_by_str_of_a_class():
    cf = framejit.compile(flagged)
    x = torch.randn(3)
    e = framejit.explain(flagged, Scale(), x)
    assert e.graph_breaks == [] and e.graph_count == 1, [b.reason for b in e.graph_breaks]
    assert_same(cf(Scale(), x), flagged(Scale(), x))
    assert_same(cf(Shift(), x), flagged(Shift(), x))  # absent: `or {}`
    # The registry and the dict it holds change: a retrace, never a stale result.
    REGISTRY[str(Shift)] = {"scale": 3.0}
    REGISTRY[str(Scale)]["twice"] = 5.0
    try:
        assert_same(cf(Shift(), x), flagged(Shift(), x))
        assert_same(cf(Scale(), x), flagged(Scale(), x))
        del REGISTRY[str(Scale)]["twice"]
        REGISTRY[str(Scale)]["scale"] = 0.5
        assert_same(cf(Scale(), x), flagged(Scale(), x))
    finally:
        del REGISTRY[str(Shift)]
        REGISTRY[str(Scale)] = {"scale": 2.0, "twice": 2.0}
    assert framejit.stats(flagged)["fallbacks"] == 0


def test_dict_comprehension_keeps_the_last_value_of_a_repeated_key():
    def f(x, n: int):
        d = {k % 3: x * k for k in range(n)}
        return d[0] + d[1] + d[2], len(d)

    cf = framejit.compile(f)
    x = torch.randn(4)
    assert_same(cf(x, 5), f(x, 5))
    e = framejit.explain(f, x, 5)
    assert e.graph_breaks == []


def test_str_and_repr_of_constants():
    def f(x):
        return x * len(str(Scale)) + len(repr("a'b")) + len(str(torch.float32)) + len(str(2.5))

    cf = framejit.compile(f)
    x = torch.randn(3)
    assert_same(cf(x), f(x))
    assert framejit.explain(f, x).graph_breaks == []


def test_a_loop_over_a_dict_that_changes_it_runs_as_eager():
    def grows(x):
        d = {"a": x}
        for k in d:
            d["b" + k] = x * 2  # eager raises: the dict changed size during iteration
        return d["a"]

    def rescales(x):
        d = {"a": x, "b": x + 1}
        for k in d:
            d[k] = d[k] * 2  # allowed: same keys
        return d["a"] + d["b"]

    x = torch.randn(3)
    assert_same(framejit.compile(rescales)(x), rescales(x))
    with pytest.raises(RuntimeError) as eager:
        grows(x)
    with pytest.raises(RuntimeError, match=re.escape(str(eager.value))):
        framejit.compile(grows)(x)
