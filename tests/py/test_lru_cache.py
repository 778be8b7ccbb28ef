"""functools.lru_cache / functools.cache wrappers called from a compiled frame: the
wrapped function is traced when its arguments and result are numbers, strings or
tuples of them; anything else (a tensor result eager hands out from its cache, a
tensor argument) is a call that runs in CPython, the cache with it."""
import functools

import torch

import framejit
from conftest import assert_same


@functools.lru_cache(maxsize=None)
def _fib(n):
    return n if n < 2 else _fib(n - 1) + _fib(n - 2)


@functools.lru_cache(maxsize=4)
def _window(n, label="w"):
    return tuple(range(n)), label * 2


@functools.cache
def _ramp(n):
    return torch.arange(n)


def test_cached_number_functions_are_traced_whole():
    def fn(x, n):
        return x * _fib(n), _window(n), x * len(_window(n, label="v")[0])
    framejit.reset()
    compiled = framejit.compile(fn)
    for n in (5, 8, 5):
        x = torch.randn(3)
        assert_same(compiled(x, n), fn(x, n))
    s = framejit.stats(fn)
    assert s["graph_breaks"] == 0 and s["fallbacks"] == 0 and s["cache_hits"] >= 1, s


def test_a_cached_tensor_is_eager_s_own_object():
    def fn(x, n):
        r = _ramp(n)
        return r + x, r
    framejit.reset()
    compiled = framejit.compile(fn)
    x = torch.randn(3)
    out = compiled(x, 3)
    assert_same(out, fn(x, 3))
    assert out[1] is _ramp(3)  # the cache's tensor, not a copy
    assert framejit.stats(fn)["fallbacks"] == 0


def test_a_tensor_argument_goes_to_the_cache():
    calls = []

    @functools.lru_cache(maxsize=None)
    def scaled(t):
        calls.append(1)
        return t * 2

    def fn(x):
        return scaled(x) + scaled(x)
    framejit.reset()
    x = torch.randn(3)
    assert_same(framejit.compile(fn)(x), fn(x))
    assert len(calls) == 1  # eager's cache answered every other call
