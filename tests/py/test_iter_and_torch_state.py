"""iter() and next() on what a loop iterates, torch's readers of its global state and
of a tensor's metadata (torch.is_grad_enabled, torch.get_default_dtype,
torch.is_floating_point, x.nbytes, x.__class__), and calls that change that state in
the middle of a frame. Each case runs compiled and eager on the same inputs."""
import torch

import framejit
from conftest import assert_same, compiled_whole as whole


def test_iter_and_next_on_lists_tuples_and_generators():
    def f(x, vals):
        it = iter(vals)
        first = next(it)
        second = next(it, None)
        rest = [v * 2 for v in it]
        gen = (k * k for k in range(3))
        return first, second, rest, next(it, "done"), next(gen) + next(gen), next(iter((7, 8))), x * first

    whole(f, [(torch.randn(3), [1, 2, 3, 4]), (torch.randn(3), [5, 6])])


def test_next_of_an_exhausted_iterator_raises_stop_iteration_in_the_trace():
    def f(x):
        it = iter([1])
        next(it)
        try:
            next(it)
        except StopIteration:
            return x + 1
        return x

    whole(f, [(torch.randn(3),)])


def test_no_graph_break_while_an_iterator_over_a_list_is_alive():
    # print() cannot run between graphs with `it` alive (CPython's iterator would read
    # the list as it is then): the frame runs as eager, printing once, never an error
    printed = []

    def f(x, vals):
        it = iter(vals)
        a = next(it)
        printed.append(a)
        return a, list(it), x * 2

    framejit.reset()
    cf = framejit.compile(f)
    x = torch.randn(3)
    assert_same(cf(x, [1, 2, 3]), f(x, [1, 2, 3]))
    assert printed == [1, 1]


def test_torch_state_and_tensor_metadata_readers():
    def f(x):
        with torch.no_grad():
            inner = torch.is_grad_enabled()
        return (x.nbytes, x.ndimension(), x.__class__ is torch.Tensor, torch.is_floating_point(x), torch.numel(x),
                torch.is_grad_enabled(), inner, torch.get_default_dtype(), x.to(torch.get_default_dtype()) * 2)

    whole(f, [(torch.randn(3),), (torch.randn(2, 5),), (torch.arange(4),)])


def test_grad_mode_read_is_guarded():
    def f(x):
        return x * (2 if torch.is_grad_enabled() else 3)

    framejit.reset()
    cf = framejit.compile(f)
    x = torch.randn(3)
    assert_same(cf(x), f(x))
    with torch.no_grad():
        assert_same(cf(x), f(x))
    assert framejit.stats(cf)["compiles"] == 2


def test_a_call_that_changes_grad_mode_hands_the_rest_to_cpython():
    def f(x):
        torch.set_grad_enabled(False)
        try:
            return torch.is_grad_enabled(), x * 2
        finally:
            torch.set_grad_enabled(True)

    framejit.reset()
    cf = framejit.compile(f)
    for n in (3, 4, 5):
        x = torch.randn(n)
        assert_same(cf(x), f(x))
        assert torch.is_grad_enabled()
    s = framejit.stats(cf)
    assert s["fallbacks"] == 0 and s["deopts"] == 3, s
