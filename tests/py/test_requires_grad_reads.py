"""requires_grad of tensors the frame computes, and detach(), where inputs require
grad: answered at trace time as eager's autograd would record them (grad mode per
node, the inputs' flags guarded), with the frame still compiled whole."""
import torch

import framejit
from conftest import assert_same


def _grad(n):
    return torch.randn(n, requires_grad=True)


def _flags(out):
    return [v.requires_grad if isinstance(v, torch.Tensor) else v for v in out]


def _run(fn, *inputs):
    framejit.reset()
    compiled = framejit.compile(fn)
    for x in inputs:
        expected = fn(x)
        actual = compiled(x)
        assert_same(actual, expected)
        assert _flags(actual) == _flags(expected)
    return framejit.stats(fn)


def test_requires_grad_of_computed_tensors_matches_eager():
    def fn(x):
        return (x * 2).requires_grad, x.argmax().requires_grad, (x > 0).requires_grad, \
            torch.zeros_like(x).requires_grad, x.floor().requires_grad, x.new_ones(3).requires_grad, \
            x.detach().requires_grad, x.detach().exp().requires_grad, x.int().requires_grad
    s = _run(fn, _grad(3), _grad(5), torch.randn(4))
    assert s["fallbacks"] == 0 and s["graph_breaks"] == 0, s


def test_no_grad_block_results_do_not_require_grad():
    def fn(x):
        with torch.no_grad():
            y = x * 2
            v = x.view(-1)
        z = x * 3
        return y, z, v, y.requires_grad, z.requires_grad
    s = _run(fn, _grad(3), _grad(5))
    assert s["fallbacks"] == 0 and s["graph_breaks"] == 0, s


def test_requires_grad_of_a_view_made_under_no_grad_is_eager_s():
    def fn(x):
        with torch.no_grad():
            v = x.view(-1)
        return v.requires_grad, x * 2  # eager: True (the view keeps its base's flag)
    _run(fn, _grad(3), _grad(4))


def test_detach_branch_and_returned_detached_view():
    def fn(x):
        if x.requires_grad:
            return x.detach() * 2, x.detach()
        return x + 1, x
    s = _run(fn, torch.randn(3), _grad(3), _grad(4))
    assert s["fallbacks"] == 0 and s["graph_breaks"] == 0, s
    x = _grad(3)
    before = x.detach().clone()
    framejit.compile(fn)(x)[1].add_(1)  # the detached view shares x's memory, as eager's
    assert torch.equal(x.detach(), before + 1) and x.requires_grad


def test_gradient_does_not_flow_through_detach():
    def fn(x):
        y = x * 3
        return y.sum() + (y.detach() * y.detach()).sum()
    framejit.reset()
    x = _grad(4)
    x2 = x.detach().clone().requires_grad_()
    framejit.compile(fn)(x).backward()
    fn(x2).backward()
    assert torch.allclose(x.grad, x2.grad) and torch.equal(x.grad, torch.full((4,), 3.0))
    assert framejit.stats(fn)["fallbacks"] == 0
