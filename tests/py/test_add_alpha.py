"""add / sub with alpha= (input op other * alpha): tensors, Python numbers, in place,
and eager's error for a float alpha of integral tensors."""
import pytest
import torch

import framejit
from conftest import assert_same, same_outcome


def test_add_and_sub_with_alpha_as_an_optimizer_step_writes_them():
    def step(p, g, lr):
        p.add_(g, alpha=-lr)
        return torch.add(p, g, alpha=2), p.sub(g, alpha=0.5)

    def ints(x, y, k):
        return torch.add(x, y, alpha=k), x.sub(y, alpha=3)

    cs, ci = framejit.compile(step), framejit.compile(ints)
    for n, lr in ((3, 0.1), (5, 0.01)):
        p, g = torch.randn(n), torch.randn(n)
        p2 = p.clone()
        assert_same(cs(p, g, lr), step(p2, g, lr))
        assert_same(p, p2)
        x, y = torch.arange(n), torch.arange(n) * 2
        assert_same(ci(x, y, n), ints(x, y, n))
    assert framejit.stats(step)["fallbacks"] == 0 and framejit.stats(ints)["fallbacks"] == 0
    with pytest.raises(RuntimeError, match="alpha"):
        ci(torch.arange(3), torch.arange(3), 0.5)  # eager raises: a float alpha for int tensors


def test_add_and_sub_of_a_python_number_with_alpha():
    def f(x, n, a):
        y = x.clone()
        y.add_(n, alpha=a)
        return x.add(n, alpha=a), x.sub(2.5, alpha=a), torch.add(x, n, alpha=2), y

    def ints(x, n):
        return x.add(n, alpha=0.5)  # eager raises: a float alpha for an int tensor

    cf, ci = framejit.compile(f), framejit.compile(ints)
    for n, a in ((1, 2.0), (3, 4.0), (2, -0.5), (3, 3)):
        x = torch.randn(4)
        assert_same(cf(x, n, a), f(x, n, a))
    assert framejit.stats(f)["fallbacks"] == 0 and framejit.stats(f)["graph_breaks"] == 0
    same_outcome(ci, ints, torch.arange(3), 2, errors=(RuntimeError,))
