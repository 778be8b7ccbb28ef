"""itertools.count of ints made in the frame: endless, so zip() takes as many of its
numbers as its other arguments have items; one the frame holds (eager advances it),
one returned, iterated by a loop or of floats runs in CPython (correct, not compiled)."""
import itertools

import pytest
import torch

import framejit
from conftest import assert_same

C = itertools.count


def numbered(x, n):
    out = []
    for i, t in zip(C(1), [x] * n):
        out.append(t * i)
    return torch.stack(out)


def symbolic_start(x, n):
    return [(i, j) for i, j in zip(range(n), C(n, -2))], x * n


def keywords_and_two_counts(x, n):
    return x, list(zip(C(step=3), "abcdef"[:3], C(start=n)))


@pytest.mark.parametrize("f", [numbered, symbolic_start, keywords_and_two_counts])
def test_count_in_zip_compiles_whole(f):
    framejit.reset()
    c = framejit.compile(f)
    for n in (3, 5, 3):
        x = torch.randn(2)
        out, want = c(x, n), f(x, n)
        assert_same(out, want)
    s = framejit.stats(f)
    assert s["graph_breaks"] == 0 and s["fallbacks"] == 0 and s["cache_hits"] >= 1, s


def held_then_advanced(x, n):
    c = C(5)
    r = list(zip(c, range(n)))
    return r, next(c), x


def returned(x, n):
    return x, C(n)


def looped(x, n):
    for i in C():
        if i > n:
            break
    return x * i


def of_floats(x, n):
    return x, list(zip(C(1.5, 0.1), range(n)))


def past_int64(x, n):
    return x, list(zip(C(2 ** 62, 2 ** 62), range(n)))


@pytest.mark.parametrize("f", [held_then_advanced, returned, looped, of_floats, past_int64])
def test_other_uses_run_as_eager(f):
    framejit.reset()
    c = framejit.compile(f)
    x = torch.randn(2)
    assert repr(c(x, 4)) == repr(f(x, 4))
    assert framejit.stats(f)["fallbacks"] >= 1
