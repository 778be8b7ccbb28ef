"""Reductions and cumulative sums over a dim that is not the innermost one (the CPU
kernels run them per tile of innermost lanes) against eager: shapes that span
several tiles and a partial one, threads, epilogues, views and empty tensors."""
import re

import pytest
import torch

import framejit
from _opcheck import check


def rand(*shape, dtype=torch.float32):
    """Multiples of 1/16 in [-4, 4): float sums are exact in any order (eager's
    float32 and framejit's double accumulators agree), so a misplaced or missing
    element shows as a difference, not as rounding noise."""
    return (torch.randint(-64, 64, shape) / 16).to(dtype)


def check_or_raises(fn, *args):
    """check(), or where eager raises (amax over an empty dim), the same error."""
    try:
        fn(*args)
    except (RuntimeError, IndexError) as e:
        with pytest.raises(type(e), match=re.escape(str(e))):
            framejit.compile(fn)(*args)
        return
    check(fn, *args)

def same_as_eager(fn, x):
    """Softmax over an empty dim: its amax has no value, so framejit runs it as eager
    does (a fallback, which check() would refuse); the result must still be eager's."""
    expected, actual = fn(x), framejit.compile(fn)(x)
    assert actual.shape == expected.shape and actual.dtype == expected.dtype
    assert torch.equal(actual, expected)


# 2-D shapes: several tiles of 256 lanes and a partial one (large enough for threads),
# fewer lanes than a tile, one row or one column, empty along either dim.
SHAPES_2D = [(300, 700), (37, 5), (1, 300), (300, 1), (1, 1), (0, 7), (7, 0)]
SHAPES_3D = [(6, 50, 300), (3, 1, 257), (2, 9, 1), (4, 0, 3)]

FLOAT_2D = {
    "sum0": lambda x: x.sum(0),
    "sum0_keep": lambda x: x.sum(0, keepdim=True),
    "mean0": lambda x: x.mean(0),
    "amax0": lambda x: x.amax(0),
    "amin0_keep": lambda x: torch.amin(x, 0, keepdim=True),
    "prod0": lambda x: (x * 0.1 + 1).prod(0),
    "var0": lambda x: x.var(0),
    "std0_keep": lambda x: x.std(0, keepdim=True),
    "cumsum0": lambda x: torch.cumsum(x, 0),
    "cumsum0_epilogue": lambda x: torch.cumsum(x.exp(), 0) * 0.5 - x,
    "sum0_and_cumsum0": lambda x: (x.sum(0), x.cumsum(0)),
    "mean0_centered": lambda x: x - x.mean(0),
    "softmax0": lambda x: torch.softmax(x, 0),
    "sum0_of_transposed": lambda x: x.t().sum(0),
    "sum0_of_sliced": lambda x: x[:, 1:].sum(0),
    "sum0_two_outputs": lambda x: (x.sum(0), (x * x).amax(0)),
    "sum0_and_rows": lambda x: (x.sum(0) + 1, x.sum(1)),
}

FLOAT_3D = {
    "sum1": lambda x: x.sum(1),
    "mean1_keep": lambda x: x.mean(1, keepdim=True),
    "amax1": lambda x: x.amax(1),
    "var1": lambda x: torch.var(x, 1, correction=0),
    "sum01": lambda x: x.sum((0, 1)),
    "amin01_keep": lambda x: x.amin((0, 1), keepdim=True),
    "sum02": lambda x: x.sum((0, 2)),
    "sum0": lambda x: x.sum(0),
    "cumsum0": lambda x: torch.cumsum(x, 0),
    "cumsum1": lambda x: torch.cumsum(x, 1),
    "softmax1": lambda x: torch.softmax(x, 1),
    "sum1_of_permuted": lambda x: x.permute(0, 2, 1).sum(1),
}


@pytest.mark.parametrize("shape", SHAPES_2D)
@pytest.mark.parametrize("name", sorted(FLOAT_2D))
def test_float_2d(name, shape):
    fn = FLOAT_2D[name]
    if name == "softmax0" and shape[0] == 0:
        same_as_eager(fn, rand(*shape))
        return
    check_or_raises(fn, rand(*shape))


@pytest.mark.parametrize("shape", SHAPES_3D)
@pytest.mark.parametrize("name", sorted(FLOAT_3D))
def test_float_3d(name, shape):
    if name == "softmax1" and shape[1] == 0:
        same_as_eager(FLOAT_3D[name], rand(*shape))
        return
    check_or_raises(FLOAT_3D[name], rand(*shape))


@pytest.mark.parametrize("name", ["sum0", "mean0", "amax0", "var0", "cumsum0", "sum0_and_cumsum0"])
def test_transposed_input(name):
    # A strided input takes the kernels' strided version.
    x = rand(700, 300).t()
    check(FLOAT_2D[name], x)


def test_float64():
    check(lambda x: (x.sum(0), x.cumsum(0), x.var(0)), rand(300, 700, dtype=torch.float64))


INT = {
    "sum0": lambda x: x.sum(0),
    "sum1_3d": lambda x: x.view(10, 30, 700).sum(1),
    "prod0": lambda x: (x % 3 + 1).prod(0),
    "amax0": lambda x: x.amax(0),
    "amin01": lambda x: x.view(10, 30, 700).amin((0, 1)),
    "cumsum0": lambda x: x.cumsum(0),
    "cumsum1_3d": lambda x: torch.cumsum(x.view(10, 30, 700), 1),
    "wrapping_sum0": lambda x: (x * (2 ** 60)).sum(0),
}


@pytest.mark.parametrize("name", sorted(INT))
def test_int64_exact(name):
    x = torch.randint(-1000, 1000, (300, 700))
    check(INT[name], x)


BOOL = {
    # Thresholds that leave both outcomes in the results (x is a multiple of 1/16).
    "any0": lambda x: (x > 3.9).any(0),
    "all0_keep": lambda x: torch.all(x > -3.95, 0, keepdim=True),
    "any1_3d": lambda x: (x.view(10, 30, 700) > 3.5).any(1),
    "sum0_of_bool": lambda x: (x > 0).sum(0),
    "cumsum0_of_bool": lambda x: (x > 0).cumsum(0),
    "amax0_of_bool": lambda x: (x > 3.9).amax(0),
    "amin0_of_bool": lambda x: (x > -3.95).amin(0),
}


@pytest.mark.parametrize("name", sorted(BOOL))
def test_bool_exact(name):
    x = rand(300, 700)
    r = BOOL[name](x)
    if r.dtype == torch.bool:
        assert r.any() and not r.all()  # the test can tell a wrong lane
    check(BOOL[name], x)


def test_mlp_bias_grad_shape():
    # The bias gradient of a linear layer's backward: grad.sum(0) beside a matmul.
    g, h = rand(512, 300), rand(512, 200)
    check(lambda g, h: (g.t() @ h, g.sum(0)), g, h)
