"""Lists the caller passed in (`out.append(y)`, `vals[0] = v`, `del acc[0]`): traced
as lists the frame built, and given their new items when the plan returns or a graph
break's call starts, so the caller sees eager's list. Compared against eager on fresh
lists each call, side effects and exceptions included."""
import pytest
import torch

import framejit
from conftest import assert_same, run_both


def test_append_and_sum_compile_whole():
    def f(x, vals):
        vals.append(len(vals))
        return x * sum(vals)

    s = run_both(f, lambda k: (torch.randn(3), [1, k + 2]))
    assert (s["compiles"], s["graph_breaks"], s["fallbacks"]) == (1, 0, 0), s


def test_tensors_appended_to_an_empty_list():
    def f(x, out):
        out.append(x * 2)
        out.append(x + 1)
        return x.sum()

    s = run_both(f, lambda k: (torch.randn(4), []))
    assert (s["compiles"], s["graph_breaks"], s["fallbacks"]) == (1, 0, 0), s


def test_every_list_change():
    def f(x, out):
        out.extend([x, x + 1])
        del out[0]
        out.insert(0, 7)
        out += [3]
        out[1] = out[1] * 2
        out.reverse()
        last = out.pop()
        return len(out), last

    s = run_both(f, lambda k: (torch.randn(3), [k, k + 1]))
    assert (s["graph_breaks"], s["fallbacks"]) == (0, 0), s


def test_returned_list_is_the_callers_object():
    def f(x, out):
        out.append(x)
        return out

    cf = framejit.compile(f)
    for _ in range(2):
        mine = [1]
        assert cf(torch.randn(2), mine) is mine
        assert len(mine) == 2


def test_one_list_passed_twice():
    def f(x, a, b):
        a.append(1)
        return x * len(b)

    cf = framejit.compile(f)
    x = torch.randn(3)
    for same in (True, False, True, False):
        a = [5]
        b = a if same else [5]
        ea = [5]
        eb = ea if same else [5]
        assert_same(cf(x, a, b), f(x, ea, eb))
        assert a == ea and b == eb


def test_a_graph_break_sees_the_changed_list():
    seen = []

    def look(lst):
        seen.append(list(lst))

    def f(x, out):
        out.append(1)
        framejit_opaque(look, out)
        out.append(2)
        return x + len(out)

    s = run_both(f, lambda k: (torch.randn(3), [0]))
    assert s["fallbacks"] == 0 and s["graph_breaks"] >= 1, s
    assert seen == [[0, 1]] * 6


def framejit_opaque(fn, arg):
    """A call the tracer cannot follow (print-like): a graph break."""
    import builtins
    builtins.print(end="")
    fn(arg)


@pytest.mark.parametrize("n", [2, 3])
def test_a_raise_after_the_change_keeps_it(n):
    def f(x, out):
        out.append(1)
        if x.shape[0] > 2:
            raise ValueError("too big")
        return x

    run_both(f, lambda k: (torch.randn(n), [0]))


def test_a_branch_on_a_tensor_after_the_change():
    def f(x, out):
        out.append(1)
        if x.sum() > 0:
            return x
        return -x

    run_both(f, lambda k: (torch.randn(3) + (1 if k % 2 else -1) * 10, [0]), calls=4)


def test_reassigned_name_still_stores_the_list():
    def f(x, out):
        o = out
        o.append(2)
        out = [9]
        return x, out

    s = run_both(f, lambda k: (torch.randn(3), [0]))
    assert (s["graph_breaks"], s["fallbacks"]) == (0, 0), s


def append_then_change(x, log):
    y = x * 2
    d = {"a": x}
    inner = [x]
    log.append(y[0])   # a view of y: the in-place op below shows through it
    log.append(d)      # a dict the frame made, changed after
    log.append(inner)  # a list the frame made, changed after
    y.add_(1)
    d["b"] = x + 1
    inner.append(x - 1)
    return y


def test_values_in_an_argument_list_see_later_changes():
    cf = framejit.compile(append_then_change)
    for k in range(3):
        x = torch.randn(2, 3)
        got_log, want_log = [], []
        got, want = cf(x, got_log), append_then_change(x, want_log)
        assert_same(got, want)
        assert_same(got_log[0], want_log[0])
        assert got_log[0]._base is got
        assert list(got_log[1]) == ["a", "b"]
        assert_same(got_log[1]["b"], want_log[1]["b"])
        assert_same(got_log[2], want_log[2])
    s = framejit.stats(append_then_change)
    assert s["fallbacks"] == 0 and s["graph_breaks"] == 0


def append_then_break(x, log):
    y = torch.relu(x) * 2
    log.append(y.sum().item())  # a number read from a tensor
    log.append(y[1:])           # a view
    tag = id(log) != 0          # id(): a graph break; the caller's list is stored first
    return y + 1, len(log), tag


def test_an_argument_list_changed_before_a_graph_break():
    s = run_both(append_then_break, lambda k: (torch.randn(4 + k), []))
    assert s["graph_breaks"] >= 1 and s["fallbacks"] == 0


class _Holder:
    pass


_HOLDER = _Holder()
_HOLDER.items = []


def append_and_read_attribute(x, log):
    log.append(x)
    return x * len(_HOLDER.items)  # the same list as log on some calls


def test_an_argument_list_that_is_also_an_attribute_list():
    cf = framejit.compile(append_and_read_attribute)
    for alias in (False, True, False, True):  # distinct first: the guard must see the alias later
        _HOLDER.items = []
        want_log = _HOLDER.items if alias else []
        want = append_and_read_attribute(torch.ones(2), want_log)
        _HOLDER.items = []
        got_log = _HOLDER.items if alias else []
        got = cf(torch.ones(2), got_log)
        assert_same(got, want)
        assert len(got_log) == len(want_log)
