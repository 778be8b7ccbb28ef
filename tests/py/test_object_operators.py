"""Operators on objects made in the frame, traced through their class's Python
methods (a + b, 2 * v, v += w, -v, a < b, a dataclass's order=True, a frozen
dataclass's __setattr__), and the ordering of tuples and named tuples of symbolic
numbers. Compared against eager: values, exceptions, and no graph break."""
import collections
import dataclasses

import pytest
import torch

import framejit
from conftest import assert_same, compiled_whole, same_outcome
from corpus.cases_records import Frozen


class Vec:
    def __init__(self, t):
        self.t = t

    def __add__(self, o):
        return Vec(self.t + o.t)

    def __mul__(self, k):
        return Vec(self.t * k)

    def __rmul__(self, k):
        return Vec(self.t * k * 10)

    def __neg__(self):
        return Vec(-self.t)

    def __iadd__(self, o):
        self.t = self.t + 2 * o.t
        return self

    def __lt__(self, o):
        return NotImplemented

    def __gt__(self, o):  # the reflection of <
        return bool((self.t.sum() > o.t.sum()).item() > 0) if isinstance(o, Vec) else NotImplemented


@dataclasses.dataclass(order=True)
class Version:
    major: int
    minor: int


Shape = collections.namedtuple("Shape", "rows cols")


def arithmetic(x, y):
    v = (Vec(x) + Vec(y)) * 3
    w = 2 * Vec(x)
    w += Vec(y)
    return (-v).t, w.t


def test_arithmetic_dunders_and_their_reflections():
    compiled_whole(arithmetic, [(torch.randn(3), torch.randn(3)), (torch.randn(5), torch.randn(5))])


def test_a_method_that_returns_notimplemented_hands_over_to_the_reflection():
    def lt(x, y):
        return x * 2 if Vec(y) < Vec(x) else x  # Vec.__lt__ declines; Vec.__gt__ answers
    cf = framejit.compile(lt)
    for _ in range(3):
        args = (torch.randn(3), torch.randn(3))
        same_outcome(cf, lt, *args)


def test_an_operator_no_method_answers_raises_as_eager():
    def bad(x):
        return Vec(x) - Vec(x)
    cf = framejit.compile(bad)
    same_outcome(cf, bad, torch.randn(3))


def versions(x, a, b):
    if Version(a, b) < Version(1, 5):
        return x
    return -x, Version(a, b) >= Version(a, 0)


def test_dataclass_ordering_whole():
    compiled_whole(versions, [(torch.randn(3), 0, 7), (torch.randn(3), 1, 2), (torch.randn(3), 1, 9), (torch.randn(3), 2, 1)])


def sequence_order(x, a, b):
    return (x * 2 if Shape(a, b) < Shape(b, a) else x, (a, b) <= (a, b + 1), [a] > [a, b], (a, 2) >= (a,),
            (a, b) < (a, b))


def test_tuple_and_list_ordering_of_symbols():
    compiled_whole(sequence_order, [(torch.randn(3), 2, 3), (torch.randn(3), 3, 2), (torch.randn(3), 4, 4)])


def frozen(x, a):
    f = Frozen(a)
    try:
        f.a = 10
    except dataclasses.FrozenInstanceError as e:
        return x * f.area(), f, str(e)
    return x


def test_frozen_dataclass_made_and_its_assignment_raises():
    cf = framejit.compile(frozen)
    for a in (3, 5):
        x = torch.randn(3)
        got, want = cf(x, a), frozen(x, a)
        assert_same(got[0], want[0])
        assert got[1] == want[1] and type(got[1]) is Frozen and got[2] == want[2]
    s = framejit.stats(frozen)
    assert s["fallbacks"] == 0 and s["graph_breaks"] == 0, s


class Doubling:
    def __init__(self, v):
        self.v = v

    def __setattr__(self, name, value):
        object.__setattr__(self, name, value * 2)


def custom_setattr(x, k):
    d = Doubling(x)
    d.k = k
    setattr(d, "w", x + 1)
    return d.v + d.k, d


def test_a_python_setattr_runs_at_each_store():
    cf = framejit.compile(custom_setattr)
    for k in (1.5, 2.5):
        x = torch.randn(3)
        got, want = cf(x, k), custom_setattr(x, k)
        assert_same(got[0], want[0])
        assert list(vars(got[1])) == list(vars(want[1]))
        for name in vars(want[1]):
            assert_same(getattr(got[1], name), getattr(want[1], name))
    s = framejit.stats(custom_setattr)
    assert s["fallbacks"] == 0 and s["graph_breaks"] == 0, s
