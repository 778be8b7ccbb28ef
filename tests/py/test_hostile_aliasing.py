"""Outputs that alias in eager alias under framejit (issue 21): a returned view of a
tensor the function computes is a real view of that tensor, as eager's is, so that a
later in-place write to one output is seen in the others."""
import pytest
import torch
import torch.nn.functional as F

import framejit
from conftest import assert_same


def tensors_of(out):
    """The tensors of a result, in order (through tuples, lists and dicts)."""
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, dict):
        return [t for v in out.values() for t in tensors_of(v)]
    if isinstance(out, (list, tuple)):
        return [t for v in out for t in tensors_of(v)]
    return []


def assert_same_values(got, want):
    assert type(got) is type(want)
    assert_same(tensors_of(got), tensors_of(want))


def alias_pattern(out):
    """Which returned tensors are one object, which share a base (`._base`, or the
    tensor itself), and which share memory: labels by first appearance, so that two
    results compare equal when they alias in the same way."""
    ts = tensors_of(out)
    def labels(keys):
        seen = {}
        return [seen.setdefault(k, len(seen)) for k in keys]
    objects = labels(id(t) for t in ts)
    bases = labels(id(t._base if t._base is not None else t) for t in ts)
    storages = labels(t.untyped_storage().data_ptr() for t in ts)
    is_view = [t._base is not None for t in ts]
    return objects, bases, storages, is_view


def write_outcome(out, k):
    """Adds 1 in place to the k-th returned tensor; the tensors afterwards, or the
    exception's type and message when the write raises (an expanded view)."""
    ts = tensors_of(out)
    try:
        ts[k].add_(1)
    except RuntimeError as e:
        return type(e), str(e).split("\n")[0]
    return [t.clone() for t in ts]


def y_view(x):
    y = x * 2
    return y, y.view(-1)


def y_reshape(x):
    y = x * 2
    return y, y.reshape(3, 8)


def y_transpose(x):
    y = x + 1
    return y, y.t(), y.transpose(0, 1)


def y_permute(x):
    y = x.exp()
    return y.permute(1, 0), y


def y_slice(x):
    y = x * 2
    return y, y[1:3, ::2], y[:, 1]


def y_select(x):
    y = x - 1
    return y, y[1], y.select(1, 2)


def y_expand(x):
    y = x * 2
    return y, y[:, :1].expand(4, 5)


def y_unsqueeze(x):
    y = torch.relu(x)
    return y, y.unsqueeze(0), y[None, :, None]


def y_split(x):
    y = x * 2
    a, b = y.split(3, 1)
    return y, a, b


def y_chunk(x):
    y = x * 3
    return y, y.chunk(2)


def y_unbind(x):
    y = x * 3
    return y.unbind(0)


def y_twice(x):
    y = x * 2
    return y, y


def y_in_list(x):
    y = x * 2
    return [y, y.view(-1), y]


def y_in_dict(x):
    y = x * 2
    return {"a": y, "b": y.permute(1, 0), "c": (y[0], y)}


def views_only(x):
    y = x * 2  # not returned: both results are views of it
    return y.view(-1), y.view(2, 12)


def view_of_view(x):
    y = x + 1
    z = y.t()
    return z, z[0], z[1:3]


def flatten_squeeze(x):
    y = x.sin()[None]
    return y, y.flatten(1), y.squeeze(0)


def view_then_write(x):
    y = x * 2
    v = y[0]
    v.add_(1)  # reaches y, in the graph and in the result
    return y, v


def noop_views(x):
    y = x * 2  # each view below changes nothing, yet is a tensor of its own in eager
    return y, y[:], y[...], y.view(y.shape), y.reshape(4, 6), y[0].t()


def input_noop_views(x):
    return x, x[:], x.view(x.shape), x[0].t()


def relu_view(x):
    return F.relu(x), F.relu(x).view(x.shape[0], -1)


FUNCTIONS = [y_view, y_reshape, y_transpose, y_permute, y_slice, y_select, y_expand, y_unsqueeze,
             y_split, y_chunk, y_unbind, y_twice, y_in_list, y_in_dict, views_only, view_of_view,
             flatten_squeeze, view_then_write, noop_views, input_noop_views, relu_view]


@pytest.mark.parametrize("fn", FUNCTIONS, ids=lambda f: f.__name__)
def test_outputs_alias_as_in_eager(fn):
    x = torch.randn(4, 6)
    compiled = framejit.compile(fn)
    for _ in range(2):  # the trace's call and a cache hit
        got, want = compiled(x.clone()), fn(x.clone())
        assert_same_values(got, want)
        assert alias_pattern(got) == alias_pattern(want)
    assert framejit.stats()["fallbacks"] == 0


@pytest.mark.parametrize("fn", FUNCTIONS, ids=lambda f: f.__name__)
def test_write_to_one_output_reaches_the_others(fn):
    x = torch.randn(4, 6)
    compiled = framejit.compile(fn)
    compiled(x.clone())
    for k in range(len(tensors_of(fn(x.clone())))):
        got, want = write_outcome(compiled(x.clone()), k), write_outcome(fn(x.clone()), k)
        if isinstance(want, tuple):
            assert got == want
        else:
            assert_same(got, want)


def test_view_base_is_the_returned_tensor():
    compiled = framejit.compile(y_view)
    for _ in range(2):
        a, b = compiled(torch.randn(3, 8))
        assert b._base is a
        b[0] = 100.0
        assert a[0, 0].item() == 100.0


def test_same_tensor_returned_twice_is_one_object():
    compiled = framejit.compile(y_twice)
    for _ in range(2):
        a, b = compiled(torch.randn(3))
        assert a is b


def test_views_with_symbolic_sizes():
    def f(x):
        y = x * 2
        return y, y[1:], y.view(-1), y.t()
    compiled = framejit.compile(f, dynamic=True)
    for n in (3, 5, 7):
        x = torch.randn(n, 4)
        got, want = compiled(x), f(x)
        assert_same_values(got, want)
        assert alias_pattern(got) == alias_pattern(want)
    assert framejit.stats()["compiles"] == 1


def test_view_with_autograd():
    def f(x):
        y = x * 2
        return y, y.t()
    x = torch.randn(3, 4, requires_grad=True)
    compiled = framejit.compile(f)
    grads = []
    for fn in (compiled, f):
        a, b = fn(x)
        assert b._base is a
        (a.sum() + (b * b).sum()).backward()
        grads.append(x.grad.clone())
        x.grad = None
    torch.testing.assert_close(grads[0], grads[1])


def test_view_of_a_tensor_made_before_a_graph_break():
    def f(x, log):
        y = x * 2
        log.append(1)  # an opaque call: y crosses it as a register
        return y, y.view(-1)
    compiled = framejit.compile(f)
    for _ in range(2):
        a, b = compiled(torch.randn(3, 4), [])
        want = f(torch.randn(3, 4), [])
        assert alias_pattern((a, b)) == alias_pattern(want)
