"""Modules whose parameters require grad compile under torch.no_grad(): grad mode is
traced through with blocks and guarded at entry; with grad mode on the backward is
compiled too (tests/py/test_autograd.py)."""
import torch

import framejit
from conftest import assert_same


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(16, 32)
        self.fc2 = torch.nn.Linear(32, 8)

    def forward(self, x):
        return self.fc2(torch.nn.functional.gelu(self.fc1(x)))


def test_parameters_that_require_grad_compile_under_no_grad_and_follow_new_weights():
    torch.manual_seed(0)
    m = MLP()
    cm = framejit.compile(m)
    x = torch.randn(5, 16)
    with torch.no_grad():
        assert_same(cm(x), m(x))
        m.fc1.weight.add_(0.5)  # in place: the compiled code reads the parameter, not a copy
        assert_same(cm(x), m(x))
        x9 = torch.randn(9, 16)
        assert_same(cm(x9), m(x9))
    s = framejit.stats(MLP.forward)
    assert s["fallbacks"] == 0 and s["compiles"] == 1, s


def test_grad_mode_is_guarded_and_enable_grad_inside_joins_autograd():
    torch.manual_seed(0)
    m = MLP()
    cm = framejit.compile(m)
    x = torch.randn(5, 16)
    with torch.no_grad():
        out = cm(x)
    assert not out.requires_grad
    # Grad mode on: a guard miss; the new entry compiles a backward too.
    out = cm(x)
    assert out.requires_grad and out.grad_fn is not None
    assert_same(out.detach(), m(x).detach())
    s = framejit.stats(MLP.forward)
    assert s["fallbacks"] == 0 and s["compiles"] == 2 and s["graphs"] == 3, s
    reasons = [w["recompile_reasons"] for w in framejit._C.watched() if w["qualname"] == "MLP.forward"]
    assert reasons and "grad" in reasons[0][-1], reasons

    def f(w, x):
        with torch.no_grad():
            y = x * w
        with torch.enable_grad():
            z = y * w
        return y, z

    w = torch.randn(4, requires_grad=True)
    x = torch.randn(4)
    cf = framejit.compile(f)
    with torch.no_grad():
        y, z = cf(w, x)
    # As eager: only what enable_grad computed requires grad.
    assert z.requires_grad and not y.requires_grad
    z.sum().backward()
    assert_same(w.grad, x * w.detach())  # y was computed under no_grad: a constant for autograd
    assert framejit.stats(f)["fallbacks"] == 0


def test_with_set_grad_enabled_of_a_flag_traces_both_modes():
    def step(x, train):
        with torch.set_grad_enabled(train):
            y = x.exp()
        return y, torch.is_grad_enabled(), y.requires_grad

    cf = framejit.compile(step)
    for train in (True, False, True):
        x, x2 = torch.randn(3, requires_grad=True), None
        x2 = x.detach().clone().requires_grad_()
        got, want = cf(x, train), step(x2, train)
        assert_same(got, want)
        assert got[0].requires_grad == want[0].requires_grad
        if train:
            got[0].sum().backward()
            want[0].sum().backward()
            assert torch.allclose(x.grad, x2.grad)
    s = framejit.stats(step)
    assert s["fallbacks"] == 0 and s["graph_breaks"] == 0 and s["compiles"] == 2, s


def test_set_grad_enabled_called_alone_changes_the_mode_as_eager():
    def off(x):
        torch.set_grad_enabled(False)
        return x * 2

    try:
        x = torch.randn(3, requires_grad=True)
        assert_same(framejit.compile(off)(x), off(x.detach()).detach())
        assert not torch.is_grad_enabled()
    finally:
        torch.set_grad_enabled(True)


@torch.no_grad()
def _stats(t):
    return t.mean(), t.std()


def test_functions_decorated_with_no_grad_are_traced_in_that_mode():
    def module_level(x):
        m, s = _stats(x)
        return (x - m) / (s + 1), m.requires_grad

    def made_in_frame(x):
        @torch.no_grad()
        def scale(t):
            return t.abs().max()
        return x / (scale(x) + 1)

    for fn in (module_level, made_in_frame):
        cf = framejit.compile(fn)
        for n in (4, 6):
            x = torch.randn(n, requires_grad=True)
            x2 = x.detach().clone().requires_grad_()
            got, want = cf(x), fn(x2)
            assert_same(got, want)
            first = got[0] if isinstance(got, tuple) else got
            (want[0] if isinstance(want, tuple) else want).sum().backward()
            first.sum().backward()
            assert torch.allclose(x.grad, x2.grad)
        s = framejit.stats(fn)
        assert s["fallbacks"] == 0 and s["graph_breaks"] == 0, s
