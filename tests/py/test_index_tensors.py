"""x[rows, cols] with several index tensors (transformers' padding_mask[batch_idx,
kv_idx]): torch's own indexing as an extern call in the graph, so the indices
broadcast as in eager, out-of-range indices raise eager's IndexError, and the
gradient is eager's."""
import pytest
import torch

import framejit
from conftest import assert_same, compiled_whole


def pick(m, rows, cols):
    return m[rows[:, None], cols[None, :]] * 2


def mask_grid(mask, n):
    b = torch.arange(mask.shape[0])[:, None, None, None]
    kv = torch.arange(n)[None, None, None, :]
    return mask[b, kv]


def test_two_index_tensors_broadcast_as_in_eager():
    m = torch.randn(3, 5)
    calls = [(m, torch.tensor([0, 2]), torch.tensor([1, -1, 4])),
             (m * 2, torch.tensor([1, 1, 0]), torch.tensor([0, 3]))]
    compiled_whole(pick, calls)
    mask = torch.rand(3, 6) > 0.3
    compiled_whole(mask_grid, [(mask, 4), (mask, 6)], compiles=1)


def test_an_index_out_of_range_raises_eagers_error():
    m = torch.randn(3, 5)
    cf = framejit.compile(pick)
    assert_same(cf(m, torch.tensor([0, 2]), torch.tensor([1, 4])), pick(m, torch.tensor([0, 2]), torch.tensor([1, 4])))
    with pytest.raises(IndexError) as want:
        pick(m, torch.tensor([0, 5]), torch.tensor([1]))
    with pytest.raises(IndexError) as got:
        cf(m, torch.tensor([0, 5]), torch.tensor([1]))
    assert str(got.value) == str(want.value)


def test_the_gradient_through_two_index_tensors_is_eagers():
    rows, cols = torch.tensor([0, 2, 0]), torch.tensor([1, -1])
    x = torch.randn(3, 5, requires_grad=True)
    framejit.compile(pick)(x, rows, cols).sum().backward()
    got, x.grad = x.grad, None
    pick(x, rows, cols).sum().backward()
    assert_same(got, x.grad)
    assert framejit.stats(pick)["fallbacks"] == 0
