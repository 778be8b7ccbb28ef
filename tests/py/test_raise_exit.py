"""A raise that leaves the frame (no handler of the frame takes it) ends the plan as a
return would: CPython runs only that instruction and unwinds out. Not a graph break,
not a deopt; eager's exception, cause and traceback line.

PYTEST_DONT_REWRITE: assert_fails below is traced with its plain assert statement."""
import traceback

import pytest
import torch

import framejit
from conftest import assert_same


def _raise_line(fn, marker):
    lines, first = __import__("inspect").getsourcelines(fn)
    return first + next(i for i, line in enumerate(lines) if marker in line)


def checked_size(x, n):
    y = x * 2 + 1
    if n > 5:
        raise ValueError("n is out of range")  # RAISE-HERE
    return y * n


def test_raise_out_of_the_frame_is_not_a_break():
    f = framejit.compile(checked_size)
    x = torch.randn(4)
    for n in (2, 7, 9, 3, 8):
        if n > 5:
            with pytest.raises(ValueError, match="n is out of range") as info:
                f(x, n)
            last = traceback.extract_tb(info.value.__traceback__)[-1]
            assert last.name == "checked_size"
            assert last.lineno == _raise_line(checked_size, "RAISE-HERE")
        else:
            assert_same(f(x, n), checked_size(x, n))
    s = framejit.stats(f)
    assert s["graph_breaks"] == 0 and s["deopts"] == 0 and s["fallbacks"] == 0
    assert s["compiles"] == 2  # one plan per outcome of n > 5; the raise one is cached
    assert s["cache_hits"] == 3


def raise_from(x, n):
    if n < 0:
        raise RuntimeError("negative") from KeyError("k")
    return x + n


def raise_not_an_exception(x):
    raise 3


def assert_fails(x, n):
    assert n > 0, "n must be positive"
    return x * n


def test_cause_and_bad_raise_as_eager():
    f = framejit.compile(raise_from)
    with pytest.raises(RuntimeError, match="negative") as info:
        f(torch.ones(2), -1)
    assert type(info.value.__cause__) is KeyError and info.value.__cause__.args == ("k",)
    with pytest.raises(TypeError, match="exceptions must derive from BaseException"):
        framejit.compile(raise_not_an_exception)(torch.ones(2))
    g = framejit.compile(assert_fails)
    with pytest.raises(AssertionError, match="n must be positive"):
        g(torch.ones(2), 0)
    assert_same(g(torch.ones(2), 3), assert_fails(torch.ones(2), 3))
    assert framejit.stats(g)["graph_breaks"] == 0


def logged_then_raise(x, log):
    log.append("before")
    print("side effect", end="")
    y = x.sum()
    if y.item() > 1e9:
        return y
    raise LookupError("done")


def test_raise_after_opaque_calls_keeps_their_effects_once(capsys):
    f = framejit.compile(logged_then_raise)
    for _ in range(3):
        log = []
        with pytest.raises(LookupError, match="done"):
            f(torch.ones(3), log)
        assert log == ["before"]
    assert capsys.readouterr().out == "side effect" * 3
    assert framejit.stats(f)["fallbacks"] == 0


def raise_caught_in_frame(x, n):
    try:
        if n > 3:
            raise KeyError("big")
        y = x * n
    except KeyError:
        y = x - 1
    return y


def test_raise_with_a_handler_in_the_frame_still_handled():
    f = framejit.compile(raise_caught_in_frame)
    for n in (1, 5, 6, 2):
        assert_same(f(torch.ones(3), n), raise_caught_in_frame(torch.ones(3), n))


def raise_inside_no_grad(x, n):
    try:
        with torch.no_grad():
            y = x * n  # no gradient, whether or not the block raises
            if n == 3:
                raise ValueError("three")
    except ValueError:
        y = y + x  # the mode outside again: a gradient through x
    return y, torch.is_grad_enabled()


def test_an_exception_leaving_a_no_grad_block_restores_the_mode():
    f = framejit.compile(raise_inside_no_grad)
    for requires_grad in (False, True):
        for n in (2, 3, 3, 4):
            x = torch.randn(3, requires_grad=requires_grad)
            x2 = x.detach().clone().requires_grad_(requires_grad)
            got, want = f(x, n), raise_inside_no_grad(x2, n)
            assert_same(got[0].detach(), want[0].detach())
            assert got[0].requires_grad == want[0].requires_grad and got[1] == want[1]
            if want[0].requires_grad:
                got[0].sum().backward()
                want[0].sum().backward()
                assert_same(x.grad, x2.grad)
    assert framejit.stats(f)["fallbacks"] == 0
