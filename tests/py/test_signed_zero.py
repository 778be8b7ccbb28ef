"""A float argument that is zero, made concrete (a math function's argument, a NumPy
call on it): its sign is guarded too, so that -0.0 and 0.0 never share an entry
whose result depends on the sign."""
import math

import numpy as np
import torch

import framejit
from conftest import assert_same


def test_copysign_of_a_zero_argument_follows_its_sign():
    def f(x, z):
        return x * math.copysign(1.0, z)
    framejit.reset()
    c = framejit.compile(f)
    x = torch.randn(3)
    for z in (-0.0, 0.0, -0.0, 0.0, 2.0, -3.0):
        assert_same(c(x, z), f(x, z))
    s = framejit.stats(f)
    assert s["graph_breaks"] == 0 and s["fallbacks"] == 0, s
    assert s["cache_hits"] >= 2, s  # each zero's entry is found again


def test_numpy_clip_of_a_float_zero_argument():
    def f(x, v):
        return x * float(np.clip(v, 0.5, 1.5)), math.atan2(v, -1.0)
    framejit.reset()
    c = framejit.compile(f)
    x = torch.randn(3)
    for v in (2.0, 0.0, -0.0, 0.0):
        out, want = c(x, v), f(x, v)
        assert_same(out, want)
        assert math.copysign(1.0, out[1]) == math.copysign(1.0, want[1])  # atan2(+-0.0, -1) is +-pi
    s = framejit.stats(f)
    assert s["graph_breaks"] == 0 and s["fallbacks"] == 0, s


def test_the_sign_guard_is_shown_by_explain():
    def f(x, z):
        return x * math.copysign(2.0, z)
    framejit.reset()
    text = str(framejit.explain(f, torch.randn(3), -0.0))
    assert "copysign(1.0, L['z']) == -1.0" in text
