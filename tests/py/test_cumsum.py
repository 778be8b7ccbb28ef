"""torch.cumsum / Tensor.cumsum (dim, dtype) and cumsum_: a scan along one dim, compared
with eager for each dtype, dim and layout."""
import pytest
import torch

import framejit
from _opcheck import check
from conftest import assert_same


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cumsum_float32_dims(dim):
    check(lambda x: torch.cumsum(x, dim) * 2, torch.randn(5, 7))


def test_cumsum_method_and_long_rows():
    check(lambda x: x.cumsum(1), torch.randn(3, 300))


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.bool, torch.uint8])
def test_cumsum_integers_and_bool_give_int64(dtype):
    x = (torch.randn(4, 6) * 10).to(dtype) if dtype is not torch.bool else torch.rand(4, 6) > 0.5
    check(lambda x: torch.cumsum(x, 0), x)


def test_cumsum_dtype_argument():
    check(lambda x: torch.cumsum(x, 1, dtype=torch.float64), torch.randn(3, 5))
    check(lambda x: x.cumsum(0, dtype=torch.float32), torch.arange(12).reshape(3, 4))


def test_cumsum_of_views_and_in_a_chain():
    def f(x):
        return torch.cumsum(x.t()[:, ::2].exp(), 0).sum(1) + x.cumsum(-1)[:, -1]

    check(f, torch.randn(6, 6))


def test_cumsum_float64_and_3d():
    check(lambda x: x.cumsum(1), torch.randn(2, 9, 3, dtype=torch.float64))


def test_cumsum_in_place():
    def f(x):
        x.cumsum_(0)
        return x

    x, y = torch.randn(4, 3), None
    y = x.clone()
    cf = framejit.compile(f)
    assert_same(cf(x), f(y))
    assert_same(x, y)
    assert framejit.stats(f)["fallbacks"] == 0


def test_cumsum_dynamic_length_no_recompile():
    def f(x):
        return x.cumsum(0)

    cf = framejit.compile(f)
    for n in (5, 9, 17):
        x = torch.randn(n)
        assert_same(cf(x), f(x))
    assert framejit.stats(f)["recompiles"] == 0


def test_cumsum_of_a_0d_tensor_runs_eagerly():
    def f(x):
        return x.cumsum(0)

    x = torch.tensor(2.5)
    assert_same(framejit.compile(f)(x), f(x))


def test_cumsum_rows_split_across_threads():
    # Large enough to be split into chunks of rows: each row's running total starts
    # at its first element, whichever thread runs it.
    check(lambda x: x.cumsum(-1) - x, torch.randn(256, 4096))
    check(lambda x: x.t().cumsum(1), torch.randn(300, 2048))
    check(lambda x: torch.cumsum(x, 1), torch.randint(-9, 9, (64, 40, 400)))
