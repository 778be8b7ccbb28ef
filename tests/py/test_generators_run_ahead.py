"""Generators and iterators run ahead of their consumer (inline_call's ran_ahead):
generator functions run to their end where they are made, and every change the
consumer makes that they may read (a list, a dict, an object, a variable, an iterator
both take items from, grad mode, a graph break) sends the rest to CPython, as the
reviews' wrong results showed it must. Each case is compared against eager."""
import itertools

import pytest
import torch

import framejit
from conftest import assert_same, one_graph


def countdown(n):
    for i in range(n, 0, -1):
        yield i


def pairs(xs):
    for a, b in zip(xs, xs[1:]):
        yield a, b


def generator_functions(x, ts, n):
    y = x
    for k in countdown(n):
        y = y + k
    diffs = [u - v for u, v in pairs(ts)]

    def evens():
        for i in range(n):
            if i % 2 == 0:
                yield x * i
    return y, diffs, torch.stack(list(evens())), sum(countdown(n))


def test_generator_functions_run_to_their_end():
    x, ts = torch.randn(3), [torch.randn(3) for _ in range(3)]
    for n in (3, 4):
        one_graph(generator_functions, x, ts, n)
    cf = framejit.compile(generator_functions)
    for n in (3, 4, 3):
        assert_same(cf(x, ts, n), generator_functions(x, ts, n))
    assert framejit.stats(generator_functions)["fallbacks"] == 0


def rebinds_what_a_generator_reads(x, n):
    # The generator reads k each time it resumes in eager: the consumer's new k counts.
    k = 1
    out = []
    for v in (i * k for i in range(n)):
        k = k + v + 1
        out = out + [x * v]

    def scaled():
        for i in range(n):
            yield i * k
    for v in scaled():
        k = k + 1
        out = out + [x * v]
    return out, k


def set_read_by_a_generator(x):
    s = {100}
    out = []
    for v in (len(s) for _ in range(3)):
        s.add(v)
        out.append(x * v)
    return out


def appends_while_a_generator_yields(x, ts):
    out = []
    for u, v in pairs(ts):  # out is not the generator's: its items stay good
        out.append(u - v + x)
    return out


def appends_to_what_a_generator_reads(x, ts):
    acc = [x]
    for t in (a * acc[-1] for a in ts):  # acc is read by the generator: not run ahead
        acc.append(t)
    return acc


def guarded(x):
    # A with block around the yield: its context belongs between the items.
    with torch.no_grad():
        yield x * 2
    yield x * 3


def with_block_generator(x):
    return [t.requires_grad for t in guarded(x)], sum(guarded(x))


def test_a_generator_is_not_run_ahead_of_what_changes_under_it():
    x = torch.randn(3)
    cf = framejit.compile(rebinds_what_a_generator_reads)
    assert_same(cf(x, 3), rebinds_what_a_generator_reads(x, 3))
    ts = [torch.randn(3) for _ in range(3)]
    for fn, args in ((set_read_by_a_generator, (x,)), (appends_to_what_a_generator_reads, (x, ts))):
        assert_same(framejit.compile(fn)(*args), fn(*args))
    ca = framejit.compile(appends_while_a_generator_yields)
    for _ in range(2):
        assert_same(ca(x, ts), appends_while_a_generator_yields(x, ts))
    assert framejit.stats(appends_while_a_generator_yields)["fallbacks"] == 0
    w = torch.randn(3, requires_grad=True)
    cg = framejit.compile(with_block_generator)
    got, want = cg(w), with_block_generator(w)
    assert got[0] == want[0] == [False, True]
    assert_same(got[1], want[1])


# ---- generators run ahead: what the review found (each was a wrong result) ----


class Counter:
    def __init__(self):
        self.n = 0

    def bump(self):
        self.n += 1


def yields_count(c):
    for _ in range(3):
        yield c.n


def bumps_through_a_method(x, c):
    out = []
    for v in yields_count(c):
        c.bump()  # a graph break that changes what the generator reads
        out.append(x + v)
    return out


def takes_from_a_shared_iterator(x, items):
    it = iter(items)
    g = (next(it) for _ in range(2))
    return [(a, next(it)) for a in g], x


def pulls(it):
    for _ in range(2):
        yield next(it)


def interleaves_with_a_generator(x, items):
    it = iter(items)
    g = pulls(it)
    a = next(g)
    b = next(it)
    return a, b, next(g), x


def yields_grad_mode():
    for _ in range(2):
        yield torch.is_grad_enabled()


def consumed_under_no_grad(x):
    g = yields_grad_mode()
    h = (torch.is_grad_enabled() for _ in range(2))
    with torch.no_grad():
        return x, list(g), list(h)


def test_a_generator_sees_what_its_consumer_changed_as_in_eager():
    x = torch.tensor([1.0])
    cases = [(bumps_through_a_method, lambda: (x, Counter())),
             (takes_from_a_shared_iterator, lambda: (x, [1, 2, 3, 4])),
             (interleaves_with_a_generator, lambda: (x, [1, 2, 3, 4])),
             (consumed_under_no_grad, lambda: (x,))]
    for fn, args in cases:
        cf = framejit.compile(fn)
        for _ in range(2):
            assert_same(cf(*args()), fn(*args()))


def view_then_change(x):
    d = {"a": 1, "b": 2}
    vs = d.values()
    d["a"] = 5
    out = []
    for v in d.values():
        out.append(x * v)
        d["b"] = 10
    return x * sum(vs), out


def chain_then_change(x):
    lst = [1, 2, 3]
    it = itertools.chain(lst)
    lst[2] = 10
    return [x * v for v in it]


def closure_read_by_a_generator(x):
    k = [1]
    getk = lambda: k[0]  # noqa: E731
    gen = (x * getk() for _ in range(3))
    a = next(gen)
    k[0] = 10
    return a, list(gen)


def items_grow_while_iterated(x):
    d = {"a": 1}
    out = []
    for key, v in d.items():
        out.append(x * v)
        d["z"] = 5  # eager raises RuntimeError
    return out


def test_dict_views_itertools_and_closures_see_later_changes():
    x = torch.tensor([1.0, 2.0])
    for fn in (view_then_change, chain_then_change, closure_read_by_a_generator):
        cf = framejit.compile(fn)
        for _ in range(2):
            assert_same(cf(x), fn(x))
    cf = framejit.compile(items_grow_while_iterated)
    for _ in range(2):
        with pytest.raises(RuntimeError, match="dictionary changed size during iteration"):
            cf(x)
