"""`is` between Python ints and bools the trace holds: CPython keeps one object per
small int (and per bool), so there `is` is `==`, guarded; big ints stay eager's."""
import torch

import framejit
from conftest import assert_same


def same_small_ints(x, n, m):
    a = n
    b = a
    five = 5
    return x * (a is b), n is m, (n > 0) is (m > 0), n is five


def test_is_of_small_ints_compiles_and_follows_the_values():
    f = framejit.compile(same_small_ints)
    for n, m in ((5, 6), (7, 7), (6, 8), (200, 200)):
        assert_same(f(torch.ones(2), n, m), same_small_ints(torch.ones(2), n, m))
    s = framejit.stats(f)
    assert s["graph_breaks"] == 0 and s["fallbacks"] == 0


def big_ints(x, n, m):
    return x * 2, n is m


def test_is_of_big_ints_is_eagers():
    f = framejit.compile(big_ints)
    for n, m in ((10**6, 10**6), (300, 3 * 100), (1000, 1001)):
        assert_same(f(torch.ones(2), n, m), big_ints(torch.ones(2), n, m))
    a = 10**6
    assert f(torch.ones(2), a, a)[1] is True  # one object passed twice
