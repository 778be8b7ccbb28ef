"""Sequences repeated by an int ([x] * n, n * (a,), lst *= n, with n's value guarded),
list methods read as values (push = parts.append), and a str's builtin method read
for a *args call ("{}x{}".format(*x.shape)). Compared against eager, with no graph
break and no fallback; argument lists end as eager leaves them."""
import torch

import framejit
from conftest import run_both


def run_whole(fn, make_args, calls=3):
    """run_both (argument lists end as eager leaves them), with no break or fallback."""
    s = run_both(fn, make_args, calls)
    assert s["fallbacks"] == 0 and s["graph_breaks"] == 0, s


def repeated(x, n):
    a = [x] * n
    b = a + [x * 2]
    return torch.stack(b), len(b), (1, n) * 2, 2 * (n,), (x.shape * 2)[-1]


def test_repeat_by_a_symbolic_int():
    run_whole(repeated, lambda k: (torch.randn(3), k))


def bound_append(x):
    parts = []
    push = parts.append
    push(x)
    push(x * 2)
    return torch.stack(parts), len(parts)


def test_a_list_method_read_as_a_value():
    run_whole(bound_append, lambda k: (torch.randn(3 + k),))


def inplace_repeat(x, log, n):
    log *= n
    pop = log.pop
    return x * len(log), pop() if log else None


def test_inplace_repeat_of_an_argument_list():
    run_whole(inplace_repeat, lambda k: (torch.randn(3), [[1, 2], [1.5], []][k], 2 + k))


def formatted(x):
    return "{}x{}".format(*x.shape), x.t() * 2


def test_str_format_with_star_args():
    run_whole(formatted, lambda k: (torch.randn(4 + k, 3),))
