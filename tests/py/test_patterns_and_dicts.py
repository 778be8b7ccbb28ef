"""Unpacking with a star, del of dict and list items, list slice assignment, `match`
statements, unary + and ~, and the methods that change a dict the frame built
(interp/trace/ops_patterns.cpp, ops_star.cpp). Each case runs compiled and eager on
fresh copies of the same inputs, whole (no graph break, no fallback)."""
import dataclasses

import torch

import framejit
from conftest import compiled_whole as whole




def test_unpacking_with_a_star():
    def f(x, n):
        first, *rest = x.unbind(0)
        a, *mid, b = range(n)
        *init, last = (1, 2, 3)
        return first + sum(rest), a, mid, b, init, last

    whole(f, [(torch.randn(3, 2), 4), (torch.randn(4, 2), 6)])


def test_del_of_dict_and_list_items_and_slice_assignment():
    def f(x, key):
        d = {"a": x, "b": x * 2, "c": x + 1}
        del d[key]
        xs = [x, x + 1, x + 2, x + 3, x + 4]
        del xs[1:3]
        del xs[-1]
        ys = [1, 2, 3, 4]
        ys[1:3] = [x, x, x]
        ys[::2] = [0, 0, 0]
        try:
            del d["missing"]
        except KeyError as e:
            missing = e.args
        return list(d), d, xs, ys, missing

    whole(f, [(torch.randn(2), "a"), (torch.randn(3), "c")])


def test_match_statements():
    @dataclasses.dataclass
    class Conv:
        k: int
        s: int = 1

    def f(x, cfg, n, shape_of):
        match shape_of.shape:
            case (a,):
                r1 = x * a
            case (a, b):
                r1 = x * (a + b)
            case _:
                r1 = x
        match cfg:
            case {"act": "relu", **rest}:
                r2 = (torch.relu(x), sorted(rest))
            case {"act": act, "scale": s}:
                r2 = (x * s, act)
            case _:
                r2 = (x, None)
        match Conv(n, 2):
            case Conv(1, s=s):
                r3 = x * s
            case Conv(k=k, s=2):
                r3 = x * k
        match n:
            case int(k) if k > 3:
                r4 = k
            case [a, b]:
                r4 = a + b
            case _:
                r4 = -1
        return r1, r2, r3, r4

    whole(f, [(torch.randn(3), {"act": "relu", "p": 0.1}, 1, torch.randn(4)),
              (torch.randn(3), {"act": "gelu", "scale": 2.0}, 5, torch.randn(2, 3))])


def test_unary_plus_and_invert():
    def f(x, n, flag):
        return +x, x * +n, ~n, ~flag, +flag

    got = whole(f, [(torch.randn(2), 3, True), (torch.randn(2), -7, False)])
    x = torch.randn(2)
    assert framejit.compile(lambda t: +t)(x) is x  # as eager: positive() returns the tensor


def test_methods_that_change_a_dict():
    def f(x, extra):
        d = {"a": x, "b": 2}
        e = d.copy()
        e["c"] = x * 3
        d.update({"z": 1}, w=x)
        d.update([("p", 5)])
        v = d.setdefault("a", 0)
        w = d.setdefault("new", 7)
        last = d.popitem()
        u = d | {"b": 9}
        d |= {"q": 0}
        g = dict(e)
        g.clear()
        return d, e, v, w, last, u, g, dict(extra, k=x), dict([("r", 1)])

    whole(f, [(torch.randn(2), {"m": 1}), (torch.randn(3), {})])
