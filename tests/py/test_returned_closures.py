"""A function the frame makes (a nested def, a lambda, a closure) and returns: the
plan makes it anew at each call, as eager's frame does, with its defaults and a
closure of new cells holding what the variables hold as the frame returns; functions
that share a variable share its cell, a recursive one holds itself."""
import pytest
import torch

import framejit
from conftest import assert_same


def scaled(x):
    scale = x.shape[0]

    def apply(t):
        return t * scale
    return apply(x), apply


def lambdas(x, n):
    return [lambda t, k=k: t + k for k in range(n)], x


def shared_cell(x):
    a = 1

    def g():
        return a

    def h():
        return a * 2
    a = 5
    return g, h, x


def recursive(x, n):
    def fact(k):
        return 1 if k == 0 else k * fact(k - 1)
    return fact, fact(n), x


def over_a_tensor(x):
    y = x * 2

    def g(t):
        return t + y
    return g


def keyword_defaults(x, n):
    def g(t, *, k=n, m=3) -> int:
        return t * k + m
    return g, x


def unbound_cell(x):
    z = None

    def g():
        return z
    del z
    return g, x


def observe(r):
    """What a caller can see of a result: its values, and each function's name,
    defaults, annotations and what it returns on a fixed input."""
    out = []
    for v in r if isinstance(r, (tuple, list)) else (r,):
        if isinstance(v, list):
            out.append(observe(v))
        elif callable(v):
            for call_args in ((torch.ones(3),), (3,), ()):
                try:
                    res = v(*call_args)
                    break
                except Exception as e:  # noqa: BLE001 - the very exception is compared
                    res = (type(e).__name__, str(e))
            out.append((v.__name__, v.__qualname__, v.__defaults__, v.__kwdefaults__, v.__annotations__, repr(res)))
        else:
            out.append(repr(v))
    return out


@pytest.mark.parametrize("f,args", [(scaled, [()]), (lambdas, [(3,), (2,)]), (shared_cell, [()]),
                                    (recursive, [(4,), (5,)]), (over_a_tensor, [()]),
                                    (keyword_defaults, [(2,), (3,)])])
def test_returned_functions_behave_as_eager(f, args):
    framejit.reset()
    c = framejit.compile(f)
    for a in args * 2:
        x = torch.randn(3)
        assert observe(c(x, *a)) == observe(f(x, *a))
    s = framejit.stats(f)
    assert s["graph_breaks"] == 0 and s["fallbacks"] == 0 and s["cache_hits"] >= 1, s


def test_each_call_makes_a_new_function_with_shared_and_own_cells():
    framejit.reset()
    x = torch.randn(3)
    c = framejit.compile(scaled)
    assert c(x)[1] is not c(x)[1]
    g, h, _ = framejit.compile(shared_cell)(x)
    assert g.__closure__[0] is h.__closure__[0] and g() == 5
    fact, n, _ = framejit.compile(recursive)(x, 3)
    assert fact.__closure__[0].cell_contents is fact and n == 6
    t = torch.randn(3)
    assert_same(framejit.compile(over_a_tensor)(x)(t), over_a_tensor(x)(t))


def test_a_deleted_variable_leaves_an_empty_cell():
    framejit.reset()
    x = torch.randn(3)
    assert observe(framejit.compile(unbound_cell)(x)) == observe(unbound_cell(x))


def test_a_function_with_attributes_runs_as_eager():
    def f(x):
        def g():
            return 1
        g.tag = 2
        return g, x
    framejit.reset()
    g, _ = framejit.compile(f)(torch.randn(2))
    assert g.tag == 2 and g() == 1
