"""Lookups on Python values the trace holds: list/tuple index() and count() of
numbers symbolic or not, `v is None` of an argument guarded by value, dict keys that
are symbolic numbers, torch.Size.numel(), and tensor methods read from torch.Tensor.
Each is compiled whole and compared against eager."""
import pytest
import torch

import framejit
from conftest import compiled_whole


def test_index_and_count_of_numbers_symbolic_or_not():
    def f(x, v, t):
        vals = [1, 3, 3, 9, 3]
        return x * vals.index(v), vals.count(v), t.index(t[-1]), t.count(1), (2.5, v).index(v)

    compiled_whole(f, [(torch.randn(3), 3, (1, 2, 3)), (torch.randn(3), 9, (7,)), (torch.randn(3), 3, (1, 1))])
    cf = framejit.compile(f)
    with pytest.raises(ValueError):
        cf(torch.randn(3), 4, (1,))  # not in the list: CPython raises, as eager


def test_is_none_of_an_argument_guarded_by_value():
    def f(x, v):
        return x * 2, v is None, v is not None, v is True

    compiled_whole(f, [(torch.randn(3), 1), (torch.randn(3), 0), (torch.randn(3), "a"), (torch.randn(3), None)])


def test_dict_keys_with_symbolic_numbers_are_their_values():
    def f(x, n):
        seen = {(2, "s"): 1.0, (3, "s"): 2.0}
        table = {2: x * 2, 3: x * 3}
        table[n] = table.get(n, x) + 1
        return x * seen.get((n, "s"), 0.0), table[n], seen.pop((n, "s"), None), len(table)

    compiled_whole(f, [(torch.randn(3), 2), (torch.randn(3), 3), (torch.randn(3), 7)])


def test_numel_of_a_torch_size():
    def f(x):
        s = x.shape
        return x * s.numel(), s.numel(), x.view(-1)[: s.numel() - 1]

    compiled_whole(f, [(torch.randn(3, 4),), (torch.randn(5, 2),)], compiles=1)


def test_a_tensor_method_read_from_the_class():
    def f(x, y):
        add = torch.Tensor.add
        return torch.Tensor.mul(x, 2), add(x, y), torch.Tensor.sum(x, 0), torch.Tensor.relu(x - y)

    compiled_whole(f, [(torch.randn(3), torch.randn(3)), (torch.randn(5), torch.randn(5))], compiles=1)
