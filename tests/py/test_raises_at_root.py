"""An instruction of the frame that eager raises at (an operator on numbers, a matmul
of sizes that do not fit), where no handler of the frame takes the exception: the plan
runs the frame up to it and hands that state to CPython, which runs the instruction
and raises eager's exception (not a fallback, not a break). The raising case is
guarded, so calls that do not raise still get their own plan. Exceptions made with
symbolic arguments inside the frame take the arguments' values (guarded)."""
import pytest
import torch

import framejit
from conftest import assert_same, same_outcome


def _stats(fn):
    s = framejit.stats(fn)
    return {k: s[k] for k in ("compiles", "graph_breaks", "fallbacks", "deopts")}


def mod_by(x, n):
    y = x * 2
    return y * (7 % n)


def matmul(x, y):
    return (x + 1) @ y


def test_a_raising_operator_at_the_root_compiles_and_raises_eager_s_error():
    framejit.reset()
    f = framejit.compile(mod_by)
    for n in (2, 0, 3, 0, 5):
        same_outcome(f, mod_by, torch.randn(3), n)
    assert _stats(mod_by) == {"compiles": 2, "graph_breaks": 0, "fallbacks": 0, "deopts": 0}


def test_sizes_that_do_not_fit_raise_and_fitting_sizes_keep_their_plan():
    framejit.reset()
    f = framejit.compile(matmul)
    good, bad = (torch.randn(2, 3), torch.randn(3, 4)), (torch.randn(2, 3), torch.randn(2, 3))
    for args in (bad, good, bad, good, (torch.randn(5, 6), torch.randn(6, 2))):
        same_outcome(f, matmul, *args)
    s = _stats(matmul)
    assert s["fallbacks"] == 0 and s["graph_breaks"] == 0 and s["deopts"] == 0, s
    assert s["compiles"] == 2, s  # one plan that raises, one that computes


def test_a_handler_in_the_frame_still_sees_eager_s_exception():
    def caught(x, y):
        try:
            return x @ y
        except RuntimeError as e:
            return x.sum() + y.sum(), str(e).split("(")[0]
    framejit.reset()
    f = framejit.compile(caught)
    same_outcome(f, caught, torch.randn(2, 3), torch.randn(2, 3))
    same_outcome(f, caught, torch.randn(2, 3), torch.randn(3, 2))


def test_exceptions_with_symbolic_arguments():
    def made(x, n):
        err = ValueError("bad value", n)
        try:
            if n > 3:
                raise KeyError(n)
        except KeyError as e:
            return x * 0, e.args, err.args[1]
        return x * n, (), len(err.args)
    framejit.reset()
    f = framejit.compile(made)
    for n in (1, 5, 2, 5, 9):
        x = torch.randn(3)
        assert_same(f(x, n), made(x, n))
    s = _stats(made)
    assert s["fallbacks"] == 0 and s["graph_breaks"] == 0, s


@pytest.mark.parametrize("w", [0.3, 0.9, -0.7, 0.5, 2.0])
def test_lerp_with_a_python_float_weight(w):
    def f(x, e, w):
        return torch.lerp(x, e, w), x.lerp(e, w)
    framejit.reset()
    x, e = torch.randn(50), torch.randn(50)
    assert_same(framejit.compile(f)(x, e, w), f(x, e, w))
    assert _stats(f)["fallbacks"] == 0


def test_int_arithmetic_past_int64_is_python_s():
    def big(x, n):
        return x * (n % 7), n * n, n ** 2 // 3
    framejit.reset()
    f = framejit.compile(big)
    for n in (2 ** 40, 3, 2 ** 40, 5, 3 * 2 ** 33):
        x = torch.randn(3)
        assert_same(f(x, n), big(x, n))
    s = _stats(big)
    assert s["fallbacks"] == 0 and s["graph_breaks"] == 0, s
