"""Calls evaluated while tracing (interp/trace/ops_fold.cpp) and builtins that call a
function (interp/trace/ops_higher.cpp): pure builtins, str/int/float methods, operators
and sets on known values; sorted/min/max with key=, map, filter, functools.reduce,
itertools.accumulate, operator's functions and getters. Each case runs compiled and
eager on the same inputs: values, types, exceptions, identity where it shows."""
import copy
import functools
import itertools
import operator

import pytest
import torch

import framejit
from conftest import assert_same, compiled_whole as whole




def test_pure_builtins_and_methods_of_known_values():
    def f(x, s, n):
        words = s.lower().split()
        head, sep, tail = "layer.0.weight".partition(".")
        return (x * len(words), "_".join(words), divmod(17, 5), round(2.567, 1), hex(255), int("ff", 16),
                head, tail, sep, (7).bit_length(), 2.5.as_integer_ratio(), str(3.0), list.__name__)

    whole(f, [(torch.randn(3), "Hello World", 2), (torch.randn(3), "a b c", 3)])


def test_a_symbolic_number_stays_symbolic_where_a_handler_keeps_it():
    # abs(n) and n * 2 of an int argument: one compile for every value
    def f(x, n):
        return x * abs(n) + n * 2

    whole(f, [(torch.randn(3), -3), (torch.randn(3), 5), (torch.randn(3), 7)], compiles=1)


def test_a_symbolic_number_a_pure_call_needs_is_guarded_by_value():
    # round(v, 1) has no symbolic form: v's value is guarded, a new value retraces
    def f(x, v):
        return x * round(v, 1), v.is_integer(), f"{v:.2f}"

    whole(f, [(torch.randn(3), 2.567), (torch.randn(3), -1.5), (torch.randn(3), 2.567)], compiles=2)


def test_an_exception_of_a_pure_call_is_raised_in_the_trace():
    def f(x, s):
        try:
            k = int(s)
        except ValueError as e:
            return x - 1, str(e)
        try:
            return x * (k // (k - k)), "no"
        except ZeroDivisionError as e:
            return x + k, type(e).__name__

    whole(f, [(torch.randn(3), "x3"), (torch.randn(3), "4")])


def test_an_uncaught_exception_of_a_pure_call_is_eagers():
    def f(x, s):
        return x * int(s)

    cf = framejit.compile(f)
    with pytest.raises(ValueError) as want:
        f(torch.randn(3), "x1")
    with pytest.raises(ValueError) as got:
        cf(torch.randn(3), "x1")
    assert str(got.value) == str(want.value)


def test_sets_of_known_items():
    def f(x, n):
        s = {1, 2, n}
        s.add(7)
        s.discard(2)
        t = {i % 3 for i in range(n + 3)}
        u = set("abca") | frozenset("xy")
        return x * len(s), 7 in s, 2 not in s, sorted(s - t), sorted(u), s, s

    results = whole(f, [(torch.randn(3), 4), (torch.randn(3), 5)])
    for got in results:
        assert got[5] is got[6]  # one set, however often it is returned
    first, second = results[0][5], results[1][5]
    assert first is not second  # built anew at each call


def test_a_set_given_to_a_call_the_trace_does_not_follow_is_not_kept():
    # the callee may change it: the frame must not go on with the trace's own copy
    grow = functools.partial(set.add)  # a call the trace does not follow

    def f(x):
        s = {1, 2}
        grow(s, 99)
        return x * len(s), 99 in s

    cf = framejit.compile(f)
    for _ in range(2):
        assert_same(cf(torch.ones(2)), f(torch.ones(2)))


def test_list_repetition_keeps_aliasing():
    def f(x):
        rows = [[0] * 2] * 2
        rows[0][1] = 5
        return x * rows[1][1], rows, rows[0] is rows[1]

    whole(f, [(torch.randn(2),), (torch.randn(3),)])


def test_sorted_min_max_with_key_over_tensors():
    def f(a, b, c):
        ts = sorted([a, b, c], key=lambda t: t.numel())
        big = max([a, b, c], key=lambda t: t.shape[0])
        small = min(a, b, c, key=lambda t: t.numel())
        order = sorted(range(3), key=lambda i: (3, 1, 2)[i], reverse=True)
        return ts[0] * 2, big.sum(), small + 1, order

    whole(f, [(torch.randn(4), torch.randn(2), torch.randn(3)), (torch.randn(1), torch.randn(5), torch.randn(3))])


def test_sorted_is_stable_and_raises_as_eager():
    def f(x, vals):
        a = sorted(vals, key=lambda v: v % 2)
        b = list(vals)
        b.sort(key=lambda v: -v, reverse=True)
        return x * a[0], a, b

    whole(f, [(torch.randn(2), [4, 1, 3, 2]), (torch.randn(2), [5, 7, 6])])

    def g(x):
        return x, sorted([1, "a"])

    with pytest.raises(TypeError) as want:
        g(torch.ones(1))
    with pytest.raises(TypeError) as got:
        framejit.compile(g)(torch.ones(1))
    assert str(got.value) == str(want.value)


def test_map_filter_reduce_accumulate():
    def f(x, ys):
        doubled = list(map(lambda t: t * 2, ys))
        pairs = list(map(torch.add, ys, doubled))
        kept = list(filter(lambda t: t.shape[0] > 1, ys))
        total = functools.reduce(lambda a, b: a + b, pairs, x)
        runs = list(itertools.accumulate([1, 2, 3], operator.mul))
        sums = list(itertools.accumulate(ys))
        return total, len(kept), runs, sums[-1], list(filter(None, [0, 1, 2]))

    whole(f, [(torch.randn(2), [torch.randn(2), torch.randn(2)]), (torch.randn(2), [torch.randn(2)] * 3)])


def test_a_map_whose_function_writes_in_place_is_not_run_ahead():
    # eager interleaves the function's writes with the consumer's reads
    def f(x):
        out = []
        for v in map(lambda i: x.add_(i), [1, 2]):
            out.append(x.sum().item())
        return out

    x1, x2 = torch.zeros(2), torch.zeros(2)
    got, want = framejit.compile(f)(x1), f(x2)
    assert got == want
    assert_same(x1, x2)


def test_operator_functions_and_getters():
    def f(x, y, n):
        pairs = [(1, "a"), (n, "b")]
        first = list(map(operator.itemgetter(0), pairs))
        shapes = list(map(operator.attrgetter("shape"), [x, y]))
        sums = list(map(operator.methodcaller("sum"), [x, y]))
        return operator.add(x, y), operator.mul(x, 2), operator.lt(x, y), first, shapes, sums[1]

    whole(f, [(torch.randn(3), torch.randn(3), 2), (torch.randn(4), torch.randn(4), 5)])


def test_tracing_a_fold_runs_no_user_code():
    # an object with a __repr__ is not folded (not a known value): its repr is not run
    class Loud:
        calls = 0

        def __repr__(self):
            Loud.calls += 1
            return "loud"

    def f(x, o):
        return x * 2, o

    o = Loud()
    framejit.compile(f)(torch.ones(2), o)
    assert Loud.calls == 0


def test_structural_itertools_keep_the_values_they_move():
    # chain, product, islice, pairwise, combinations, repeat never look into the items:
    # tensors pass through them as themselves, numbers stay symbolic
    def f(x, y, n):
        a = list(itertools.chain([x, y], (n, 2)))
        b = [p * q for p, q in itertools.product([x, y], [1.0, n])]
        c = list(itertools.islice([x, y, x + y], 1, None))
        d = [q - p for p, q in itertools.pairwise([x, y, x * 2])]
        e = len(list(itertools.combinations(range(4), 2)))
        g = list(itertools.repeat(y, 2))
        return a, b, c, d, e, g, g[0] is g[1]

    whole(f, [(torch.randn(2), torch.randn(2), 3), (torch.randn(3), torch.randn(3), 5)], compiles=1)


def test_items_of_constants_and_exceptions_of_items():
    def f(x, i, xs_len):
        r = range(10)[i] + len(range(10)[1:i]) + b"abc"[1]
        try:
            bad = [1, 2][i]
        except IndexError as e:
            bad = str(e)
        return x * r, bad, f"{x.shape}", f"{(i, 2.5)!r}"

    whole(f, [(torch.randn(2), 3, 0), (torch.randn(3), 5, 0)])


def test_getattr_setattr_bool_and_type_builtins():
    class Box:
        def __init__(self, v):
            self.v = v

    def f(x, name, val):
        b = Box(1.0)
        setattr(b, name, val)
        d = {"k": x}
        s = x.sum().item()
        return getattr(x, "neg")() * (b.v + getattr(b, "w", 0.0)), bool(d), bool({}), type(s) is float, b.v

    whole(f, [(torch.randn(3), "v", 3.0), (torch.randn(3), "w", 4.0)])


def same_as_eager(fn, *args):
    """Compiled and eager on fresh copies: the same result, or the same exception."""
    def run(f):
        try:
            return "ok", f(*copy.deepcopy(args))
        except Exception as e:  # noqa: BLE001 - the exception is what is compared
            return "exc", (type(e), str(e))
    framejit.reset()
    got, want = run(framejit.compile(fn)), run(fn)
    assert got[0] == want[0], (got, want)
    if got[0] == "ok":
        assert_same(got[1], want[1])
    else:
        assert got[1] == want[1]
    return got[1]


def test_lazy_and_key_functions_keep_eagers_order_of_effects():
    # map runs lazily in eager: a later item's exception never happens here
    def early_return(x):
        try:
            for v in map(int, ["1", "x"]):
                return x + v
        except ValueError:
            return x - 100

    # a function that changes what the handler already took
    def changing(x):
        d = {"n": 0}

        def bump(dd):
            dd["n"] = dd["n"] + 1
            return dd["n"]
        return x, d, list(map(bump, [d, d, d])), sorted([d, d], key=bump)

    def sort_changes_list(x):
        lst = [3, 1, 2]

        def k(v):
            lst.append(0)
            return v
        try:
            lst.sort(key=k)
        except ValueError as e:
            return x, str(e), lst
        return x, lst

    for fn in (early_return, changing, sort_changes_list):
        same_as_eager(fn, torch.ones(2))


def test_min_max_with_key_as_cpythons_scan():
    def f(x):
        vals = [1.0, float("nan"), 0.5, 2.0]
        return x, max(vals, key=lambda v: v), min(vals, key=lambda v: v), max([2.0, float("nan"), 3.0], key=lambda v: v)

    def g(x):
        return x + min(1, 2, key=abs, default=0)

    same_as_eager(f, torch.ones(2))
    same_as_eager(g, torch.ones(2))


def test_itertools_keep_tuples_and_iterate_what_eager_iterates():
    def f(x, n):
        pairs = [(x, 1), (x * 2, n)]
        d = {"a": 1}
        return (list(itertools.chain(pairs)), list(itertools.repeat((x, 1), 2)), list(itertools.chain(d, ["c"])),
                list(itertools.islice(enumerate([x, x + 1, x + 2]), 2)))

    same_as_eager(f, torch.ones(2), 3)


def test_generators_are_used_up_as_in_eager():
    def f(x):
        gen = (i for i in range(3))
        a = sum(gen)
        g2 = (i * 2 for i in range(3))
        first = list(itertools.islice(g2, 2))
        g3 = (i for i in range(4))
        head, *rest = g3
        g4 = (i for i in range(5))
        stop = any(i > 1 for i in g4)
        return x, a, list(gen), first, list(g2), head, rest, list(g3), stop, list(g4)

    same_as_eager(f, torch.ones(2))


def test_methodcaller_with_keywords_and_match_of_a_missing_attribute():
    class P:
        __match_args__ = ("x", "y")

        def __init__(self, x):
            self.x = x

    def f(t, s):
        r = operator.methodcaller("split", "upper", maxsplit=1)(s)
        match P(3):
            case P(a, b):
                return t + 1, r
            case _:
                return t, r

    same_as_eager(f, torch.ones(2), "x upper y")


def test_sets_that_change_while_iterated_or_leave_with_another_order():
    def changing(x):
        s = {1, 2}
        try:
            for i in s:
                s.add(i + 10)
        except RuntimeError as e:
            return x - 1, str(e)
        return x

    def history(x):
        s = set(range(20))
        for i in range(20):
            if i not in (9, 16):
                s.discard(i)
        return x, list(s)  # the order of the set itself

    same_as_eager(changing, torch.ones(2))
    same_as_eager(history, torch.ones(2))


def _scale(x, factor=1.0, bias=0.0):
    return x * factor + bias


def test_functools_partial_with_keywords_traces_as_its_function():
    # partial(f, *args, **kw) made in the frame: its call is f's, with the call's
    # keywords over its own; p.func / p.args / p.keywords read as CPython's
    def f(x, s):
        p = functools.partial(_scale, factor=s)
        q = functools.partial(functools.partial(_scale, x), 2.0)
        total = functools.partial(torch.sum, dim=0)
        return (p(x), p(x, bias=1.0), p(x, factor=0.5, bias=2.0), q(bias=1.0), total(x * 2, keepdim=True),
                p.func is _scale, p.args, p.keywords, isinstance(p, functools.partial))

    whole(f, [(torch.randn(3), 2.0), (torch.randn(4), -1.0)], compiles=1)


def test_a_partial_that_leaves_the_frame_or_is_changed_runs_as_eager():
    def returned(x):
        return functools.partial(_scale, x)

    def changed(x):
        p = functools.partial(_scale, bias=1.0)
        try:
            p.func = None
        except AttributeError as e:
            return x, str(e)
        return x * 2

    framejit.reset()
    got = framejit.compile(returned)(torch.ones(2))
    assert got.func is _scale and torch.equal(got.args[0], torch.ones(2))
    x = torch.randn(3)
    assert_same(framejit.compile(changed)(x), changed(x))


def test_a_builtin_passed_as_an_argument_is_traced():
    def f(x, fn):
        return fn(x) + 1

    out = whole(f, [(torch.randn(3), torch.exp), (torch.randn(4), torch.exp)], compiles=1)
    assert len(out) == 2
    cf = framejit.compile(f)
    x = torch.randn(3)
    assert_same(cf(x, torch.neg), f(x, torch.neg))  # another builtin: its own entry
    assert framejit.stats(f)["graphs"] >= 1


def test_a_class_passed_as_an_argument_is_guarded():
    import math

    def f(fn, n):
        return torch.ones(2) * fn(n)

    cf = framejit.compile(f)
    for fn, n in ((int, 3), (math.factorial, 4), (abs, -5), (float, 2), (int, 7)):
        assert_same(cf(fn, n), f(fn, n))
