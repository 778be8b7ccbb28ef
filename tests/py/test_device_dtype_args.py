"""torch.device and torch.dtype arguments are values the trace knows, guarded by value:
factories and conversions that take them compile instead of falling back, once per
device and dtype."""
import torch

import framejit
from conftest import compiled_whole


def positions(x, device):
    return torch.arange(x.shape[0], device=device) + x


def converted(x, dtype):
    return torch.zeros(x.shape, dtype=dtype) + x.to(dtype)


def same_device(x, device):
    return x * 2 if x.device == device else x


def test_a_device_argument_compiles_once_per_device():
    x = torch.randn(4)
    compiled_whole(positions, [(x, x.device), (x * 2, torch.device("cpu")), (torch.randn(6), x.device)], compiles=1)
    compiled_whole(same_device, [(x, torch.device("cpu")), (x, torch.device("cpu"))], compiles=1)


def test_a_dtype_argument_compiles_once_per_dtype():
    x = torch.randn(3)
    compiled_whole(converted, [(x, torch.float64), (x * 3, torch.float64), (x, torch.int64), (x, torch.int64)],
                   compiles=2)


def test_a_device_string_is_another_value():
    x = torch.randn(4)
    cf = framejit.compile(positions)
    for d in (torch.device("cpu"), "cpu", torch.device("cpu")):
        torch.testing.assert_close(cf(x, d), positions(x, d))
    s = framejit.stats(positions)
    assert s["fallbacks"] == 0 and s["compiles"] == 2 and s["cache_hits"] == 1, s
