"""tensor.tolist(): nested lists of the elements as Python numbers, each read from the
graph as .item() is (no graph break); the sizes are the trace's, guarded."""
import pytest
import torch

import framejit
from conftest import assert_same


@pytest.mark.parametrize("make", [lambda: torch.randn(3), lambda: torch.randn(2, 2), lambda: torch.randn(0),
                                  lambda: torch.randn(2, 0, 3), lambda: torch.tensor(2.5)])
def test_tolist_matches_eager_for_each_dtype(make):
    def f(x):
        return x.tolist(), (x > 0).tolist(), x.int().tolist(), x.double().tolist(), x * 2
    framejit.reset()
    x = make()
    out = framejit.compile(f)(x)
    assert_same(out, f(x))
    assert repr(out[:4]) == repr(f(x)[:4])  # the very floats, not just close ones
    s = framejit.stats(f)
    assert s["graph_breaks"] == 0 and s["fallbacks"] == 0, s


def test_tolist_reads_values_after_an_inplace_write():
    def f(x):
        y = x.clone()
        first = y.tolist()
        y.add_(1)
        return first, y.tolist()
    framejit.reset()
    x = torch.randn(4)
    assert_same(framejit.compile(f)(x), f(x))
