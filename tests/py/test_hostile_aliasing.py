"""Outputs that alias in eager alias under framejit (issue 21): a returned view of a
tensor the function computes is a real view of that tensor, as eager's is, so that a
later in-place write to one output is seen in the others."""
import contextlib

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


# ---- views that cross a graph break ----
# A view taken before an opaque call (print: a plan step) and returned, or used, after
# it: the plan makes its register a view of its base's register at run time, so that it
# is one in eager's sense after the break (`_base`, shared memory, writes seen).

def brk_view(x):
    y = x * 2
    v = y.view(-1)
    print("break")
    return y, v


def brk_slice(x):
    y = x * 2
    v = y[1:]
    print("break")
    return y, v


def brk_transpose(x):
    y = x + 1
    v = y.t()
    print("break")
    return v, y


def brk_unsqueeze(x):
    y = x * 2
    v = y.unsqueeze(0)
    w = y[None, :, None]
    print("break")
    return y, v, w


def brk_select(x):
    y = x - 1
    v = y[1]
    w = y.select(1, 2)
    print("break")
    return y, w, v


def brk_expand(x):
    y = x * 2
    v = y[:, :1].expand(4, 5)
    print("break")
    return y, v


def brk_split(x):
    y = x * 2
    a, b = y.split(3, 1)
    print("break")
    return y, a, b


def brk_noop_views(x):
    y = x * 2
    a, b, c = y[:], y.view(y.shape), y[...]
    print("break")
    return y, a, b, c


def brk_view_of_view(x):
    y = x.exp()
    z = y.t()
    v = z[1:3]
    print("break")
    return z, v, y


def brk_view_only(x):
    v = (x * 2)[1:]  # its base is no local: still its base in eager
    print("break")
    return v


def brk_pieces_only(x):
    a, b = (x * 3).chunk(2)
    print("break")
    return a, b


def brk_base_returned_view_used(x):
    y = x * 2
    v = y[1:]
    print("break")
    return y, v * 3


def brk_view_used_in_a_later_view(x):
    y = x * 2
    v = y.t()
    print("break")
    return y, v[0], v + 1


def brk_view_of_input(x):
    v = x[1:]
    w = x.t()
    print("break")
    return x, v, w


def brk_view_of_input_only(x):
    v = x.view(-1)
    print("break")
    return v


def brk_two_breaks(x):
    y = x * 2
    v = y[1:]
    print("break 1")
    w = v[0]
    print("break 2")
    return y, v, w


def brk_two_breaks_same_view(x):
    y = x + 1
    v = y.t()
    print("break 1")
    print("break 2")
    return v, y, v[1:]


def brk_write_before(x):
    y = x * 2
    v = y[0]
    v.add_(1)  # before the break: y's new value is the base the view is taken from again
    print("break")
    return y, v


def brk_write_view_after(x):
    y = x * 2
    v = y[0]
    print("break")
    v.add_(1)  # reaches y in eager
    return y


def brk_write_base_after(x):
    y = x * 2
    v = y[:, 1:3]
    print("break")
    y.mul_(3)  # reaches v in eager
    return v, y


def brk_write_input_view_after(x):
    v = x[0]
    print("break")
    v.add_(1)  # reaches the caller's x in eager
    return x, v


def helper_break(y):
    v = y[1:]
    print("in helper")
    return v


def brk_in_helper(x):
    y = x * 2
    v = helper_break(y)
    return y, v


def helper_view_then_break(y):
    v = y.t()
    print("in helper")
    return y, v


def brk_helper_returns_both(x):
    y, v = helper_view_then_break(x * 2)
    return y, v


def helper_print(t):
    print("in helper", t.shape)


def brk_view_passed_to_helper(x):
    y = x * 2
    v = y[0]
    helper_print(v)
    return y, v


def helper_take_view(y):
    return y[1:].t()


def brk_view_made_in_helper(x):
    y = x * 2
    v = helper_take_view(y)
    print("break")
    return y, v


BREAK_FUNCTIONS = [brk_view, brk_slice, brk_transpose, brk_unsqueeze, brk_select, brk_expand, brk_split,
                   brk_noop_views, brk_view_of_view, brk_view_only, brk_pieces_only,
                   brk_base_returned_view_used, brk_view_used_in_a_later_view, brk_view_of_input,
                   brk_view_of_input_only, brk_two_breaks, brk_two_breaks_same_view, brk_write_before, brk_write_view_after,
                   brk_write_base_after, brk_write_input_view_after, brk_in_helper, brk_helper_returns_both,
                   brk_view_passed_to_helper, brk_view_made_in_helper]


def break_inputs(seed):
    return torch.randn(4, 6, generator=torch.Generator().manual_seed(seed))


def as_tuple(out):
    return out if isinstance(out, tuple) else (out,)


@pytest.mark.parametrize("fn", BREAK_FUNCTIONS, ids=lambda f: f.__name__)
def test_views_across_a_graph_break_alias_as_in_eager(fn):
    compiled = framejit.compile(fn)
    for seed in range(3):  # the trace's call and two cache hits
        x_got, x_want = break_inputs(seed), break_inputs(seed)
        got, want = compiled(x_got), fn(x_want)
        assert_same_values(got, want)
        assert_same(x_got, x_want)  # what the frame wrote to its input
        # How the results alias one another and the input.
        assert alias_pattern((x_got,) + as_tuple(got)) == alias_pattern((x_want,) + as_tuple(want))
    assert framejit.stats()["graph_breaks"] >= 1  # the break is a plan step, not a fallback


@pytest.mark.parametrize("fn", BREAK_FUNCTIONS, ids=lambda f: f.__name__)
def test_write_after_a_graph_break_reaches_the_other_outputs(fn):
    compiled = framejit.compile(fn)
    compiled(break_inputs(0))
    for k in range(len(tensors_of(fn(break_inputs(0))))):
        x_got, x_want = break_inputs(k), break_inputs(k)
        got = write_outcome((x_got, compiled(x_got)), k + 1)
        want = write_outcome((x_want, fn(x_want)), k + 1)
        if isinstance(want, tuple):
            assert got == want
        else:
            assert_same(got, want)


def test_view_across_a_break_has_its_base():
    compiled = framejit.compile(brk_view)
    for _ in range(3):
        a, b = compiled(torch.randn(3, 8))
        assert b._base is a
        assert b.data_ptr() == a.data_ptr()
        a[0, 0] = 100.0
        assert b[0].item() == 100.0
    assert framejit.stats()["cache_hits"] == 2


def test_view_of_input_across_a_break_is_a_view_of_the_input():
    compiled = framejit.compile(brk_view_of_input)
    for _ in range(3):
        x = torch.randn(4, 6)
        _, v, w = compiled(x)
        assert v._base is x and w._base is x
        x.zero_()
        assert v.abs().sum().item() == 0 and w.abs().sum().item() == 0


def test_view_passed_to_an_opaque_call_aliases_its_base():
    def f(x, log):
        y = x * 2
        v = y[0]
        log.append(v)  # the caller's list keeps the view
        y.add_(1)      # after the break: seen through the kept view
        return y
    compiled = framejit.compile(f)
    for seed in range(3):
        got_log, want_log = [], []
        got, want = compiled(break_inputs(seed), got_log), f(break_inputs(seed), want_log)
        assert_same(got, want)
        assert_same(got_log[0], want_log[0])
        assert got_log[0]._base is got


def test_view_of_a_parameter_across_a_break():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(4, 6), requires_grad=False)

        def forward(self, x):
            v = self.w[1:].t()
            print("break")
            return v, v * x.sum()
    m = M()
    compiled = framejit.compile(m)
    for seed in range(3):
        got, want = compiled(break_inputs(seed)), m(break_inputs(seed))
        assert_same_values(got, want)
        assert got[0]._base is m.w and want[0]._base is m.w


def test_views_across_a_break_with_symbolic_sizes():
    def f(x):
        y = x * 2
        v, w = y[1:], y.view(-1)
        print("break")
        return y, v, w, v.t()
    compiled = framejit.compile(f, dynamic=True)
    for n in (3, 5, 7, 5):
        x = torch.randn(n, 4)
        got, want = compiled(x), f(x)
        assert_same_values(got, want)
        assert alias_pattern(got) == alias_pattern(want)
    assert framejit.stats()["compiles"] == 1


def test_views_across_a_branch_on_a_tensor():
    def f(x):
        y = x * 2
        v = y.t()
        if y.sum() > 0:  # a plan branch: each outcome continues from registers
            w = v[0]
        else:
            w = v[1:]
        return y, v, w
    compiled = framejit.compile(f)
    for sign in (1, -1, 1, -1):  # each outcome traced, then run from the plan
        x = sign * (torch.rand(3, 4) + 0.1)
        got, want = compiled(x), f(x)
        assert_same_values(got, want)
        assert alias_pattern(got) == alias_pattern(want)


@pytest.mark.parametrize("branch", [False, True])
def test_noncontiguous_view_across_a_break_still_refuses_view(branch):
    # v.view(-1) of a transposed view raises in eager; the register that stands for v
    # after the break (or after a branch) must not pass for a contiguous tensor.
    def f(x):
        y = x * 2
        v = y.t()
        print("break")
        return v.view(-1)

    def g(x):
        y = x * 2
        v = y.t()
        if y.sum() > 0:
            return v.view(-1)
        return v.view(-1)
    fn = g if branch else f
    compiled = framejit.compile(fn)
    for sign in (1, -1, 1):
        x = sign * (torch.rand(3, 4) + 0.1)
        with pytest.raises(RuntimeError) as want:
            fn(x)
        with pytest.raises(RuntimeError) as got:
            compiled(x)
        assert str(got.value) == str(want.value)


def helper_strided(x, flip):
    print("in helper")  # a break inside: the helper runs as an opaque call
    return x.t() if flip else x * 1


def test_view_of_an_opaque_calls_result_follows_its_layout():
    # The result of an opaque call is a register: a view() that merges its dims raises
    # in eager when it is strided, whether it was at the trace or only at a later call.
    def f(x, flip):
        r = helper_strided(x, flip)
        v = r.view(-1)
        print("break")
        return r, v
    compiled = framejit.compile(f)
    for flip in (False, False, True, False, True):
        x = torch.randn(3, 4)
        try:
            want = f(x, flip)
        except RuntimeError as e:
            with pytest.raises(RuntimeError) as got:
                compiled(x, flip)
            assert str(got.value) == str(e)
            continue
        got = compiled(x, flip)
        assert_same_values(got, want)
        assert alias_pattern(got) == alias_pattern(want)
    framejit.reset()
    compiled = framejit.compile(f)
    for flip in (True, False):  # traced with the strided result first
        x = torch.randn(3, 4)
        with pytest.raises(RuntimeError) if flip else contextlib.nullcontext():
            f(x, flip)
        with pytest.raises(RuntimeError) if flip else contextlib.nullcontext():
            compiled(x, flip)
