"""copy.deepcopy of numbers, strings and tuples of them returns its argument (no memo
by id() to trace), so dataclasses.astuple/asdict of such records compile whole; a
default argument that is an immutable builtin type (tuple_factory=tuple) is known."""
import copy
import dataclasses

import torch

import framejit
from conftest import assert_same


@dataclasses.dataclass
class Pair:
    x: int
    y: float


def test_astuple_and_asdict_compile_whole():
    def f(x, a, b):
        p = Pair(a, b)
        return x * sum(dataclasses.astuple(p)), dataclasses.asdict(p)
    framejit.reset()
    c = framejit.compile(f)
    for a, b in ((2, 3.0), (5, 7.5), (2, -1.0)):
        x = torch.randn(3)
        assert_same(c(x, a, b), f(x, a, b))
    s = framejit.stats(f)
    assert s["graph_breaks"] == 0 and s["fallbacks"] == 0, s


def test_deepcopy_of_values_and_of_a_list():
    def f(x, n, s):
        t = copy.deepcopy((n, s, 2.5))
        lst = [n]
        d = copy.deepcopy(lst)
        d.append(1)
        return x * t[0], t, lst, d, d is lst
    framejit.reset()
    c = framejit.compile(f)
    for n in (3, 4):
        x = torch.randn(2)
        assert_same(c(x, n, "a"), f(x, n, "a"))
