"""`a is b` of two tensors: answered while tracing when one is a tensor an op made in
the frame (a new object, as eager's), or both are one node; ops that return their
operand itself (x.float() of a float x, x.add_(1)) keep its node. Aliased inputs, and
views (a new object, or one rebound after an in-place write), are not told apart."""
import torch

import framejit
from conftest import assert_same


def test_identity_of_computed_tensors_matches_eager():
    def f(x):
        y = x * 2
        xs = [x, y]
        a, b = x * 3, x * 3
        z = y.add_(1)
        return (y, any(t is y for t in xs), [t is x for t in xs], a is b, a is a, z is y, y.float() is y,
                y.clone() is y, y.contiguous() is y)
    framejit.reset()
    c = framejit.compile(f)
    for n in (3, 4):
        x = torch.randn(n)
        out, want = c(x), f(x)
        assert_same(out, want)
        assert out[1:] == want[1:]
    s = framejit.stats(f)
    assert s["graph_breaks"] == 0 and s["fallbacks"] == 0, s


def test_identity_of_two_inputs_is_left_to_eager():
    def f(x, y):
        return x + 1, x is y
    framejit.reset()
    c = framejit.compile(f)
    x = torch.randn(3)
    assert_same(c(x, x), f(x, x))
    assert c(x, x)[1] is True
    assert c(x, torch.randn(3))[1] is False
