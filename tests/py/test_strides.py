"""Strides, contiguity and storage offsets of views (.stride(), .is_contiguous(),
.storage_offset()) answered at trace time as eager has them, symbolic in the sizes;
where the layout is not known (a non-contiguous input, a tensor computed from a
transposed one) the frame runs in CPython with eager's answer."""
import pytest
import torch

import framejit
from conftest import assert_same


def _layout(t):
    return t.stride(), t.is_contiguous(), t.storage_offset()


def views(x):
    return (_layout(x.t()), _layout(x[1:, ::2]), _layout(x[0].expand(3, x.shape[1])), _layout(x.unsqueeze(1)),
            _layout(x[:, 1]), _layout(x.t().t()), _layout(x[2:3]), _layout(x.reshape(-1)),
            _layout(x.permute(1, 0)[1:]), x.is_contiguous(memory_format=torch.contiguous_format), x * 2)


def transpose_if_needed(x):
    t = x.t()
    if not t.is_contiguous():
        t = t.contiguous()
    return t.view(-1), t.stride()


@pytest.mark.parametrize("fn", [views, transpose_if_needed])
def test_view_layouts_match_eager_without_recompiles(fn):
    framejit.reset()
    compiled = framejit.compile(fn)
    for shape in [(3, 4), (5, 6), (4, 9)]:
        x = torch.randn(*shape)
        assert_same(compiled(x), fn(x))
    s = framejit.stats(fn)
    assert s["compiles"] == 1 and s["fallbacks"] == 0 and s["graph_breaks"] == 0, s


def test_unknown_layouts_give_eager_s_answer():
    def computed(x):
        return (x.t() + 1).stride(), x.stride()
    framejit.reset()
    compiled = framejit.compile(computed)
    x = torch.randn(3, 4)
    assert_same(compiled(x), computed(x))  # (x.t() + 1) keeps the transposed layout in eager
    wide = torch.randn(3, 8)[:, ::2]  # a non-contiguous input: its strides are not the standard ones
    assert_same(compiled(wide), computed(wide))
    framejit.reset()
    compiled = framejit.compile(views)
    assert_same(compiled(wide), views(wide))


def test_reshape_views_or_copies_as_eager_for_any_input_layout():
    # Eager's reshape is a view where strides allow (a step-2 slice merges, a transpose
    # does not): seen by .stride() and by a call that runs in CPython at a graph break.
    def fn(x):
        return _layout(x.reshape(-1)), x[:, ::2].reshape(-1).stride(), x.t().reshape(-1).stride(), x * 2
    framejit.reset()
    compiled = framejit.compile(fn)
    for make in (lambda: torch.randn(3, 8)[:, ::2], lambda: torch.randn(3, 4), lambda: torch.randn(4, 3).t(),
                 lambda: torch.randn(5, 6)):
        x = make()
        assert_same(compiled(x), fn(x))
