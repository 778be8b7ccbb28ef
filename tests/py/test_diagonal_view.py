"""x.diagonal() / torch.diagonal(x, offset) of a contiguous matrix: a view traced as the
flat view sliced with a step of cols + 1 (cols guarded), so it aliases x as eager's
does, with eager's sizes, strides and storage offset. Other dims, layouts and
gradients through it run as eager's (correct, not compiled)."""
import pytest
import torch

import framejit
from conftest import assert_same


def diag_and_layout(x, k):
    d = x.diagonal(k)
    return d * 2, d.shape, d.stride(), d.storage_offset(), torch.diagonal(x, -k).sum()


@pytest.mark.parametrize("k", [0, 1, -1, 2, -2, 5, -9])
def test_diagonal_matches_eager(k):
    framejit.reset()
    c = framejit.compile(diag_and_layout)
    for shape in ((3, 4), (4, 4), (4, 3), (3, 0), (0, 3), (4, 4)):
        x = torch.randn(*shape)
        assert_same(c(x, k), diag_and_layout(x, k))
    s = framejit.stats(diag_and_layout)
    assert s["graph_breaks"] == 0 and s["fallbacks"] == 0 and s["cache_hits"] >= 1, s


def test_returned_diagonal_aliases_the_input():
    def f(x):
        rows, cols = x.shape
        if rows == cols:
            return x.diagonal()
        return x[:, 0]
    framejit.reset()
    c = framejit.compile(f)
    x = torch.randn(3, 3)
    d = c(x)
    assert d._base is x and d.stride() == (4,)
    d[1] = 100.0
    assert x[1, 1].item() == 100.0
    y = torch.randn(3, 4)
    assert_same(c(y), f(y))
    assert framejit.stats(f)["graph_breaks"] == 0


@pytest.mark.parametrize("f", [lambda x: x.t().diagonal() + 1, lambda x: x.diagonal(0, 1, 0) + 1,
                               lambda x: torch.randn(2, 3, 4).diagonal() + x.sum()])
def test_other_diagonals_keep_eager_results(f):
    framejit.reset()
    x = torch.randn(3, 4)
    torch.manual_seed(0)
    want = f(x)
    torch.manual_seed(0)
    assert_same(framejit.compile(f)(x), want)


def test_gradient_through_a_diagonal():
    def g(w):
        return (w.diagonal() * 3).sum()
    framejit.reset()
    w = torch.randn(3, 4, requires_grad=True)
    w2 = w.detach().clone().requires_grad_()
    g(w).backward()
    framejit.compile(g)(w2).backward()
    assert torch.equal(w.grad, w2.grad)
