"""torch.broadcast_tensors(*tensors): each tensor expanded to the broadcast shape as a
view of it (eager's strides; a tensor already of that shape is returned itself);
sizes that do not broadcast and one sequence argument raise as eager's do."""
import pytest
import torch

import framejit
from conftest import assert_same


def expanded(x):
    b = torch.arange(4.0)
    return x + b, b.expand(x.shape[0], 4), torch.broadcast_tensors(x, b)[1]


def layouts(x, y):
    a, b = torch.broadcast_tensors(x, y)
    return a, b, a.stride(), b.stride(), a.shape, (a * b).sum()


@pytest.mark.parametrize("f,shapes", [(expanded, [((3, 4),), ((5, 4),), ((3, 4),)]),
                                      (layouts, [((3, 1), (4,)), ((3, 4), (3, 4)), ((2, 1, 3), (4, 1)), ((3, 1), (4,))])])
def test_broadcast_tensors_matches_eager(f, shapes):
    framejit.reset()
    c = framejit.compile(f)
    for s in shapes:
        xs = [torch.randn(*d) for d in s]
        out, want = c(*xs), f(*xs)
        assert_same(out, want)
        assert repr(out) == repr(want)
    st = framejit.stats(f)
    assert st["graph_breaks"] == 0 and st["fallbacks"] == 0 and st["cache_hits"] >= 1, st


def test_results_alias_their_inputs():
    framejit.reset()
    x, y = torch.randn(3, 1), torch.randn(4)
    a, b = framejit.compile(lambda p, q: torch.broadcast_tensors(p, q))(x, y)
    assert a._base is x and b._base is y
    same = framejit.compile(lambda p: (torch.broadcast_tensors(p)[0] is p, p + 1))(x)
    assert same[0] is True


@pytest.mark.parametrize("f,shapes", [(layouts, ((3,), (4,))), (lambda x, y: torch.broadcast_tensors([x, y]), ((3, 1), (4,)))])
def test_what_eager_rejects_raises_the_same(f, shapes):
    framejit.reset()
    xs = [torch.randn(*d) for d in shapes]
    with pytest.raises(Exception) as want:
        f(*xs)
    with pytest.raises(Exception) as got:
        framejit.compile(f)(*xs)
    assert type(got.value) is type(want.value) and str(got.value) == str(want.value)
