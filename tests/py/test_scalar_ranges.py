"""A runtime Python float that eager converts to float32 (a clamp bound, a where value):
guarded to convert, as eager checks it. Infinities and NaN convert (no recompile, no
fallback); a finite float past float32's range raises as eager's does."""
import pytest
import torch

import framejit
from conftest import assert_same


def clamp_and_divide(x, v):
    return x.clamp(max=v), v > 0, 1.0 / v


def where_and_clamp(x, v):
    return torch.where(x > 0, x, v), x.clamp(min=v)


@pytest.mark.parametrize("f", [clamp_and_divide, where_and_clamp])
def test_infinities_and_nan_share_the_entry(f):
    framejit.reset()
    c = framejit.compile(f)
    for v in (2.0, float("inf"), float("-inf"), float("nan"), 3e38, 0.5):
        x = torch.randn(3)
        out, want = c(x, v), f(x, v)
        assert_same(out[0], want[0])
        assert repr(out) == repr(want)  # NaN where eager has it
    s = framejit.stats(f)
    assert s["compiles"] == 1 and s["fallbacks"] == 0 and s["graph_breaks"] == 0, s


@pytest.mark.parametrize("v", [1e308, -1e39])
def test_a_float_past_float32_raises_as_eager(v):
    framejit.reset()
    c = framejit.compile(clamp_and_divide)
    x = torch.randn(3)
    c(x, 1.0)
    with pytest.raises(RuntimeError) as want:
        clamp_and_divide(x, v)
    with pytest.raises(RuntimeError) as got:
        c(x, v)
    assert str(got.value) == str(want.value)
