"""collections.deque made in the frame: an object of the trace whose items are a list
of its own. Its methods, maxlen, len(), truth, q[i], q[i] = v and iteration compile
whole with eager's results; what CPython raises for, a change while a loop iterates
it, and a deque that leaves the frame run in CPython (correct, not compiled)."""
import collections

import pytest
import torch

import framejit
from conftest import assert_same

D = collections.deque


def queue(x, n):
    q = D()
    for i in range(n):
        q.append(x * i)
    first = q.popleft()
    q.appendleft(x)
    return first, len(q), q[0], q[-1]


def bounded(x, n):
    q = D(maxlen=2)
    for i in range(n):
        q.append(x + i)
    return list(q)


def rotated(x, n):
    q = D([x, x * 2, x * 3])
    q.rotate(n)
    return torch.stack(list(q))


def mixed(x, n):
    q = D([1, 2, 3], 4)
    q.extend(range(n))
    q.extendleft([7, 8])
    q.rotate(-2)
    r = q.pop()
    if len(q) < 4:
        q.insert(1, 9)
    q[0] = 42
    return x * r, list(q), q.maxlen, isinstance(q, D), type(q) is D, bool(q), q.count(42), [v for v in q], len(q)


def breadth_first(x, n):
    q = D()
    total = x
    q.append(n)
    while q:
        v = q.popleft()
        total = total + v
        if v > 0:
            q.append(v - 1)
    return total


def copies(x, n):
    q = D([x] * n)
    p = q.copy()
    p.append(x * 2)
    q.clear()
    q.reverse()
    return len(q), len(p), p[-1], q is p, q.maxlen, sorted(D([3, 1])), sum(D([3, 1])), [*D([n, 1])]


@pytest.mark.parametrize("f", [queue, bounded, rotated, mixed, breadth_first, copies])
def test_deque_compiles_whole_with_eager_results(f):
    framejit.reset()
    c = framejit.compile(f)
    for n in (2, 3, 5, 3):
        x = torch.randn(3)
        out, want = c(x, n), f(x, n)
        assert_same(out, want)
        assert repr(out) == repr(want)
    s = framejit.stats(f)
    assert s["graph_breaks"] == 0 and s["fallbacks"] == 0 and s["cache_hits"] >= 1, s


def returned(x):
    return x + 1, D([1, 2], 3)


def changed_while_iterated(x):
    q = D([1, 2])
    for v in q:
        q.append(v)
    return x


def attribute_set(x):
    q = D([1])
    try:
        q.foo = 1
    except AttributeError as e:
        return x, str(e)


def pop_empty(x):
    return x, D().pop()


def compared_and_shown(x):
    return x, D([2, 3], maxlen=2) == D([2, 3]), repr(D([1], 3)), 2 in D([1, 2]), D([1]) + D([2])


@pytest.mark.parametrize("f", [returned, changed_while_iterated, attribute_set, pop_empty, compared_and_shown])
def test_what_is_not_traced_runs_as_eager(f):
    framejit.reset()
    c = framejit.compile(f)
    x = torch.randn(2)

    def run(fn):
        try:
            return fn(x)
        except Exception as e:  # noqa: BLE001 - the very exception is compared
            return type(e), str(e)
    assert repr(run(c)) == repr(run(f))
    assert framejit.stats(f)["fallbacks"] >= 1
