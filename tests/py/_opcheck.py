"""Shared check for the op tests: compiled once, equal to eager, no fallback."""
import framejit
from conftest import assert_same


def check(fn, *args, graphs=1):
    cf = framejit.compile(fn)
    expected = fn(*args)
    actual = cf(*args)
    assert_same(actual, expected)
    s = framejit.stats(fn)
    assert s["fallbacks"] == 0, framejit.fallbacks(fn)
    assert s["graphs"] == graphs, s
    assert_same(cf(*args), expected)  # the cache hit too
    return cf
