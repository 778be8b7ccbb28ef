"""batch_norm in training, lowered into the graph: nn.BatchNorm1d/2d and F.batch_norm
against eager on identical copies (outputs, running statistics, num_batches_tracked,
gradients), with and without autograd, in one compiled graph without fallback."""

import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import framejit


def same(got, want, dtype=torch.float32):
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == torch.float32 else dict(rtol=1e-10, atol=1e-12)
    assert got.dtype == want.dtype and got.shape == want.shape
    if want.dtype.is_floating_point:
        torch.testing.assert_close(got, want, **tol)
    else:
        assert torch.equal(got, want)


def same_state(m1, m2, dtype=torch.float32):
    s1, s2 = m1.state_dict(), m2.state_dict()
    assert s1.keys() == s2.keys()
    for k in s2:
        same(s1[k], s2[k], dtype)


def whole(stats):
    assert stats["fallbacks"] == 0 and stats["graph_breaks"] == 0 and stats["compiles"] >= 1, stats


MODULES = {
    "1d-NC": (lambda: nn.BatchNorm1d(3), (3,)),
    "1d-NCL": (lambda: nn.BatchNorm1d(3), (3, 7)),
    "2d": (lambda: nn.BatchNorm2d(3), (3, 5, 4)),
    "momentum-None": (lambda: nn.BatchNorm2d(3, momentum=None), (3, 5, 4)),
    "affine-False": (lambda: nn.BatchNorm2d(3, affine=False), (3, 5, 4)),
    "no-running-stats": (lambda: nn.BatchNorm2d(3, track_running_stats=False), (3, 5, 4)),
    "momentum-0.3-eps": (lambda: nn.BatchNorm1d(3, momentum=0.3, eps=1e-3), (3, 6)),
}


def make(name, dtype):
    make_module, tail = MODULES[name]
    torch.manual_seed(0)
    m = make_module().to(dtype)
    if m.affine:
        with torch.no_grad():
            m.weight.normal_()
            m.bias.normal_()
    return m, copy.deepcopy(m), tail


def train_steps(name, grad, dtype=torch.float32, batches=(4, 4, 4)):
    """Three training forwards (and backwards with grad) of a compiled module and of its
    eager copy, compared after each step and at the end."""
    m1, m2, tail = make(name, dtype)
    framejit.reset()
    c = framejit.compile(m1)
    torch.manual_seed(1)
    for n in batches:
        x = torch.randn(n, *tail, dtype=dtype) * 3 + 1
        x1, x2 = x.clone().requires_grad_(grad), x.clone().requires_grad_(grad)
        y1, y2 = c(x1), m2(x2)
        same(y1, y2, dtype)
        if grad:
            g = torch.randn_like(y2)
            y1.backward(g)
            y2.backward(g)
            same(x1.grad, x2.grad, dtype)
        same_state(m1, m2, dtype)
    if grad and m2.affine:
        same(m1.weight.grad, m2.weight.grad, dtype)
        same(m1.bias.grad, m2.bias.grad, dtype)
    whole(framejit.stats())
    return m1, m2, c


@pytest.mark.parametrize("name", sorted(MODULES))
def test_training_steps_update_running_stats(name):
    with torch.no_grad():
        train_steps(name, grad=False)


@pytest.mark.parametrize("name", sorted(MODULES))
def test_training_steps_with_autograd(name):
    train_steps(name, grad=True)


@pytest.mark.parametrize("name", ["1d-NCL", "momentum-None", "affine-False"])
def test_training_steps_float64(name):
    train_steps(name, grad=True, dtype=torch.float64)


def test_varying_batch_sizes_compile_once():
    train_steps("2d", grad=True, batches=(4, 6, 5))
    assert framejit.stats()["recompiles"] == 0


def test_training_is_one_graph():
    m = nn.BatchNorm2d(3).train()
    with torch.no_grad():
        out = framejit.explain(type(m).forward, m, torch.randn(4, 3, 2, 2))
    assert out.graph_count == 1 and not out.graph_breaks, [b.reason for b in out.graph_breaks]
    out = framejit.explain(type(m).forward, m, torch.randn(4, 3, 2, 2))  # the forward and its backward
    assert out.graph_count == 2 and not out.graph_breaks, [b.reason for b in out.graph_breaks]


@pytest.mark.parametrize("name", ["2d", "momentum-None", "1d-NC"])
def test_eval_after_training(name):
    m1, m2, c = train_steps(name, grad=True)
    m1.eval()
    m2.eval()
    for n in (2, 5):
        x = torch.randn(n, *MODULES[name][1])
        with torch.no_grad():
            same(c(x), m2(x))
        same(c(x), m2(x))
    same_state(m1, m2)


def test_one_value_per_channel_raises_like_eager():
    m1, m2, _ = make("1d-NC", torch.float32)
    framejit.reset()
    c = framejit.compile(m1)
    x0, x = torch.randn(4, 3), torch.randn(1, 3)
    c(x0)
    m2(x0)
    with pytest.raises(ValueError) as want:
        m2(x)
    with pytest.raises(ValueError) as got:
        c(x)
    assert str(got.value) == str(want.value)
    same_state(m1, m2)


def test_functional_batch_norm_writes_its_arguments():
    def f(x, rm, rv, w, b):
        return (F.batch_norm(x, rm, rv, w, b, training=True, momentum=0.2, eps=1e-4) * 2).sum()

    torch.manual_seed(2)
    x, w, b = torch.randn(5, 4, 3), torch.randn(4), torch.randn(4)
    rm, rv = torch.randn(4), torch.rand(4) + 0.5
    a1 = [t.clone().requires_grad_(k in (0, 3, 4)) for k, t in enumerate((x, rm, rv, w, b))]
    a2 = [t.clone().requires_grad_(k in (0, 3, 4)) for k, t in enumerate((x, rm, rv, w, b))]
    framejit.reset()
    got, want = framejit.compile(f)(*a1), f(*a2)
    same(got, want)
    got.backward()
    want.backward()
    for t1, t2 in zip(a1, a2):
        same(t1.detach(), t2.detach())
        if t2.requires_grad:
            same(t1.grad, t2.grad)
    assert not a1[1].requires_grad and not a1[2].requires_grad
    whole(framejit.stats())


def test_functional_batch_norm_without_running_stats():
    def f(x, w):
        return F.batch_norm(x, None, None, w, None, training=True) + 1

    x, w = torch.randn(6, 2, 3), torch.randn(2, requires_grad=True)
    framejit.reset()
    got = framejit.compile(f)(x, w)
    same(got, f(x, w))
    whole(framejit.stats())


# An autograd frame writes its in-place updates of inputs back after the forward; the
# cases where that would differ from eager run in CPython.

def test_update_with_a_value_that_requires_grad_runs_eagerly():
    def f(x, buf):
        buf.copy_(x * 2)
        return x + 1

    x = torch.randn(3, requires_grad=True)
    b1, b2 = torch.zeros(3), torch.zeros(3)
    framejit.reset()
    y1, y2 = framejit.compile(f)(x, b1), f(x, b2)
    same(y1, y2)
    same(b1.detach(), b2.detach())
    assert b1.requires_grad == b2.requires_grad
    assert framejit.stats()["fallbacks"] == 1


def test_update_of_an_input_the_backward_reads_runs_eagerly():
    def f(x, s):
        y = x * s
        s.add_(1)
        return y

    x = torch.randn(3, requires_grad=True)
    s1, s2 = torch.rand(3), None
    s2 = s1.clone()
    framejit.reset()
    y1, y2 = framejit.compile(f)(x, s1), f(x, s2)
    same(y1, y2)
    same(s1, s2)
    with pytest.raises(RuntimeError) as want:
        y2.sum().backward()
    with pytest.raises(RuntimeError) as got:
        y1.sum().backward()
    assert str(got.value) == str(want.value)
    assert framejit.stats()["fallbacks"] == 1
