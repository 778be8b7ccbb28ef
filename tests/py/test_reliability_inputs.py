"""Reliability: bad input. Wrong argument counts, unexpected types, ints beyond int64,
NaN and inf, empty tensors, aliasing and overlapping tensors, torch's default dtype,
and KeyboardInterrupt inside a compiled frame: each call gives eager's result or
eager's exception (type and message), and framejit keeps working afterwards."""
import _thread
import enum
import math
import signal
import threading

import numpy as np
import pytest
import torch

import framejit
from framejit import _C
from conftest import assert_same


def outcome(fn, *args, **kwargs):
    try:
        return ("ok", fn(*args, **kwargs))
    except BaseException as e:  # noqa: BLE001 - KeyboardInterrupt included
        # c10 appends the C++ stack to some messages; its depth differs between any two
        # call sites, so only the message itself is compared.
        return ("exc", type(e), str(e).split("\nException raised from")[0])


def check(fn, calls):
    """Runs every call eagerly and compiled, in order (so later calls are cache hits
    or recompiles of the same function); returns the compiled function."""
    cf = framejit.compile(fn)
    for args, kwargs in calls:
        e, c = outcome(fn, *args, **kwargs), outcome(cf, *args, **kwargs)
        assert e[0] == c[0], f"{args!r}: eager {e!r} vs compiled {c!r}"
        if e[0] == "exc":
            assert e[1:] == c[1:], f"{args!r}: eager {e!r} vs compiled {c!r}"
        else:
            assert_same_values(c[1], e[1])
    return cf


def assert_same_values(actual, expected):
    """assert_same, with Python floats compared bit for bit (NaN equals NaN, the sign
    of zero counts)."""
    if isinstance(expected, float):
        assert type(actual) is float
        assert (math.isnan(actual) and math.isnan(expected)) or (
            actual == expected and math.copysign(1, actual) == math.copysign(1, expected)), (actual, expected)
    elif isinstance(expected, (tuple, list)):
        assert type(actual) is type(expected) and len(actual) == len(expected)
        for a, e in zip(actual, expected):
            assert_same_values(a, e)
    else:
        assert_same(actual, expected)


def calls(*argsets):
    return [(a, {}) if isinstance(a, tuple) else ((), a) for a in argsets]


def still_usable():
    """framejit compiles and runs a fresh function correctly, and a cached one hits."""
    def probe(x, a):
        return x * a - 1

    cf = framejit.compile(probe)
    for a in (2.0, 3.0):
        x = torch.arange(5.0)
        assert_same(cf(x, a), probe(x, a))
    s = framejit.stats(cf)
    assert s["compiles"] == 1 and s["cache_hits"] == 1


def axpy(x, a):
    return x * a + 1


T = torch.randn(4)


def test_wrong_argument_counts():
    check(axpy, calls((T, 1.0), (T,), (T, 1.0, 2.0), {"x": T}, {"x": T, "a": 2.0, "b": 1},
                      {"a": 2.0, "x": T}, (), (T, 2.0)))
    still_usable()


class Color(enum.IntEnum):
    RED = 3


class MyFloat(float):
    pass


class MyInt(int):
    pass


def test_unexpected_types():
    check(axpy, calls((T, 2.0), (T, "s"), (T, None), (T, [1, 2]), ("s", 2), (None, 2.0), (T, 3 + 4j),
                      (T, torch.tensor(2.0)), (T, Color.RED), (T, MyFloat(2.5)), (T, MyInt(7)), (T, True),
                      (T, np.float32(2.0)), (T, np.int64(3)), (T, np.float64(1.5)),
                      (torch.ones(3, dtype=torch.float16), 2.0), (torch.ones(3, dtype=torch.complex64), 2.0),
                      (torch.nn.Parameter(torch.randn(3)), 2.0), (torch.randn(3, requires_grad=True), 2.0),
                      (T, 2.0)))
    still_usable()


def test_bool_tensors_where_eager_refuses_them():
    check(lambda x, y: x - y, calls((torch.ones(3, dtype=torch.bool), torch.zeros(3, dtype=torch.bool)),
                                    (torch.ones(3), torch.ones(3)),
                                    (torch.ones(3, dtype=torch.bool), torch.zeros(3, dtype=torch.bool))))
    check(lambda x: -x, calls((torch.ones(3),), (torch.ones(3, dtype=torch.bool),), (torch.ones(2),)))
    still_usable()


def test_ints_beyond_int64():
    def f(x, n):
        return x + n, n * 2, n + 1

    ints = torch.arange(4)
    check(f, calls((ints, 5), (ints, 2**62), (ints, 2**63 - 1), (ints, 2**63), (ints, -2**63), (ints, -2**63 - 1),
                   (ints, 10**30), (T, 10**30), (ints, 7)))

    def scaled(x, n):
        return x * n

    i32 = torch.ones(3, dtype=torch.int32)
    check(scaled, calls((i32, 3), (i32, 2**31), (i32, 2**62), (i32, 2**63), (torch.ones(3, dtype=torch.uint8), 300),
                        (torch.ones(3, dtype=torch.uint8), -1), (i32, 4)))

    def branch(x, n):
        if n > 2**40:
            return x + 1
        return x - 1

    check(branch, calls((T, 3), (T, 2**50), (T, 2**70), (T, -2**70), (T, 4)))
    check(lambda n: torch.ones(n), calls((3,), (-1,), (2**70,), (4,)))
    still_usable()


def test_nan_and_inf():
    specials = torch.tensor([float("nan"), float("inf"), -float("inf"), 0.0, -0.0])
    check(axpy, calls((T, 2.0), (T, float("nan")), (T, float("inf")), (T, -float("inf")), (specials, 0.0),
                      (specials, float("inf")), (T, 2.5)))

    def f(x, a):
        return x / a, a * 2.0, x + float(a)

    check(f, calls((T, 2.0), (T, float("nan")), (T, float("inf")), (T, 0.0), (T, -0.0), (specials, -0.0)))

    def to_int(x, a):
        return x + int(a)

    check(to_int, calls((T, 2.0), (T, float("nan")), (T, float("inf")), (T, 1e300), (T, 3.5)))

    def mod(x, a):
        return a % 3, a // 3, x % a

    check(mod, calls((T, 7), (T, -7), (T, 0), (T, 7.5), (T, 0.0), (T, float("inf")), (T, 5)))
    still_usable()


def test_empty_tensors():
    check(axpy, calls((torch.empty(0), 2.0), (torch.empty(3, 0), 2.0), (torch.empty(0, 5), 1.0),
                      (torch.randn(3), 2.0), (torch.empty(0), 3.0), (torch.empty(2, 0, 3), 1.0)))

    def mixed(x, y):
        return x + y, (x * y).shape

    check(mixed, calls((torch.empty(0), torch.empty(0)), (torch.empty(0), torch.randn(1)),
                       (torch.empty(0), torch.randn(2)), (torch.empty(2, 0), torch.empty(0)),
                       (torch.randn(3), torch.randn(3))))

    # Found by the fuzzer (seed 606, program 8): an operand broadcast against a size-0
    # dim was read once per kernel call, at its element 0, which an empty tensor does
    # not have (a segfault on the first call with t of size [0, 1]).
    def broadcast_empty(t):
        return (t * (t.permute(1, 0) + 7)).reshape(-1), t.sum() * (t.mT + 1)

    check(broadcast_empty, calls((torch.empty(0, 1),), (torch.empty(0, 3),), (torch.randn(2, 1),),
                                 (torch.empty(0, 1),)))
    still_usable()


def test_aliasing_and_overlapping_inputs():
    def f(x, y):
        return x * 2 + y, y - x

    base = torch.randn(12)
    check(f, calls((base, base), (base[:6], base[6:]), (base[1:7], base[:6]), (base[::2], base[1::2]),
                   (base.view(3, 4), base.view(3, 4)[0]), (base.view(3, 4).t(), base.view(4, 3)),
                   (base[:4].expand(3, 4), base[:4]), (base.as_strided((3, 3), (1, 1)), base[:3]),
                   (base, base)))
    # The inputs are left as they were: outputs never overlap them.
    snapshot = base.clone()
    framejit.compile(f)(base[1:7], base[:6])
    assert torch.equal(base, snapshot)
    still_usable()


def test_mismatched_shapes_and_dtypes():
    def f(x, y):
        return x + y

    check(f, calls((torch.randn(3), torch.randn(3)), (torch.randn(3), torch.randn(4)),
                   (torch.randn(2, 3), torch.randn(3)), (torch.randn(2, 3), torch.randn(2)),
                   (torch.randn(3), torch.ones(3, dtype=torch.bool)), (torch.ones(3, dtype=torch.int32), 2**40),
                   (torch.ones(3, dtype=torch.int64), 1.5), (torch.randn(4, 5).t(), torch.randn(5, 4)),
                   (torch.randn(3), torch.randn(3))))
    still_usable()


def test_default_dtype_is_guarded():
    # torch.ones(n), int / int and int tensors with Python floats all make torch's
    # default dtype: a trace made under float32 must not answer for float64.
    def f(x, n, a):
        return torch.ones(n) + x.sum(), x / 2, x * a, torch.arange(n) * 0.5

    x = torch.arange(6).reshape(2, 3)
    check(f, calls((x, 3, 1.5), (x, 4, 2.5)))
    assert framejit.stats(f)["compiles"] == 1
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        # (One call: two identical fallbacks in a row would skip f from then on.)
        check(f, calls((x, 5, 0.5)))
        assert f(x, 3, 1.5)[0].dtype == torch.float64  # what the compiled call was compared with
        e = framejit.explain(f, x, 3, 1.5)
        assert e.graph_count == 0 and any("get_default_dtype() is torch.float64" in b.reason for b in e.graph_breaks)
    finally:
        torch.set_default_dtype(old)
    s = framejit.stats(f)
    assert s["compiles"] == 1 and s["fallbacks"] == 2, s  # the call and explain's trace
    hits = s["cache_hits"]
    check(f, calls((x, 7, 3.5)))  # float32 again: the first entry serves it
    assert framejit.stats(f)["cache_hits"] == hits + 1
    assert "torch.get_default_dtype() is torch.float32" in framejit.explain(f, x, 3, 1.5).guards
    still_usable()


def test_default_dtype_changed_by_a_call_inside_the_frame():
    # An opaque call in the middle of the frame switches the default: what follows it
    # must use float64 as eager does, on the first call and on cache hits.
    def switch(d):
        torch.set_default_dtype(d)

    def f(x, d):
        y = x + 1
        switch(d)
        return y, torch.ones(3) * 2, x / 2

    x = torch.arange(3)
    old = torch.get_default_dtype()
    try:
        cf = framejit.compile(f)
        for d in (torch.float32, torch.float64, torch.float32, torch.float64):
            torch.set_default_dtype(old)
            want = f(x, d)
            torch.set_default_dtype(old)
            assert_same(cf(x, d), want)
            assert torch.get_default_dtype() == d
    finally:
        torch.set_default_dtype(old)
    still_usable()


def test_default_dtype_set_and_restored_inside_the_frame():
    # float64 for a block, float32 again in `finally`: what follows the switch runs in
    # CPython from just after it (a Deopt step), on the first call and on cache hits.
    def f(x, a):
        torch.set_default_dtype(torch.float64)
        try:
            return torch.ones(2) * a + x.sum(), torch.arange(3) / 2
        finally:
            torch.set_default_dtype(torch.float32)

    assert torch.get_default_dtype() == torch.float32
    cf = framejit.compile(f)
    for a in (2.5, 3.5, 4.5):
        x = torch.randn(3)
        assert_same(cf(x, a), f(x, a))
        assert torch.get_default_dtype() == torch.float32
    s = framejit.stats(cf)
    assert s["compiles"] == 1 and s["fallbacks"] == 0 and s["deopts"] == 3, s
    e = framejit.explain(f, torch.randn(3), 1.5)
    assert any("changed torch.get_default_dtype()" in b.reason for b in e.graph_breaks)
    assert torch.get_default_dtype() == torch.float32
    still_usable()


# ---- KeyboardInterrupt ----

def test_keyboard_interrupt_from_a_callee():
    def interrupt(n):
        if n > 2:
            raise KeyboardInterrupt(f"stop at {n}")
        return n

    def f(x, n):
        y = x + 1
        interrupt(n)
        return y * n

    check(f, calls((T, 1), (T, 3), (T, 2), (T, 5), (T, 7)))
    still_usable()


def test_keyboard_interrupt_from_a_helper_inlined_until_it_raises():
    def helper(x, flag):
        if flag:
            raise KeyboardInterrupt("flagged")
        return x * 2

    def f(x, flag):
        return helper(x, flag) + 1

    check(f, calls((T, False), (T, True), (T, False), (T, True), (T, False)))
    still_usable()


@pytest.fixture
def alarm():
    """Arms a timer whose signal handler raises KeyboardInterrupt in the main thread
    while armed[0] is true. A handler runs at the first bytecode boundary after the
    signal: for a signal that arrives inside a compiled call (a cache hit, a trace, a
    compile without the GIL), right after the call returns, or inside the call where
    framejit waits for another thread's trace."""
    armed = [True]

    def handler(signum, frame):
        if armed[0]:
            raise KeyboardInterrupt("alarm")

    old = signal.signal(signal.SIGALRM, handler)
    yield armed, lambda seconds, interval=0.0: signal.setitimer(signal.ITIMER_REAL, seconds, interval)
    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, old)


def test_keyboard_interrupt_while_tracing_a_constant_fold(alarm):
    # A big constant power is folded by the tracer (CPython's long arithmetic checks
    # for signals while it works): the KeyboardInterrupt of a signal that arrives
    # then reaches the caller, as in eager, and is not taken for "cannot fold this,
    # run the frame in CPython" (which would swallow Ctrl-C and redo the work).
    def f(x):
        return x * ((7 ** 2_000_000) % 10)

    _, alarm = alarm
    x = torch.arange(4.0)
    alarm(0.02)
    with pytest.raises(KeyboardInterrupt, match="alarm"):
        f(x)
    cf = framejit.compile(f)
    alarm(0.02)
    with pytest.raises(KeyboardInterrupt, match="alarm"):
        cf(x)
    s = framejit.stats(f)
    assert s["compiles"] == 0 and s["fallbacks"] == 0, s
    assert_same(cf(x), f(x))  # the next call traces, compiles and is right
    assert_same(cf(x + 1), f(x + 1))
    s = framejit.stats(f)
    assert s["compiles"] == 1 and s["cache_hits"] == 1 and s["fallbacks"] == 0, s
    still_usable()


def test_keyboard_interrupt_from_interrupt_main_inside_a_traced_helper():
    # _thread.interrupt_main() in a helper that the trace inlines: the KeyboardInterrupt
    # reaches the caller of the compiled function (eager raises it too), and the next
    # calls trace and run correctly.
    def helper(x, stop):
        if stop:
            _thread.interrupt_main()
        return x + 1

    def f(x, stop):
        y = helper(x, stop)
        return y * 2, y.sum()

    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    x = torch.arange(5.0)
    with pytest.raises(KeyboardInterrupt):
        f(x, True)
    cf = framejit.compile(f)
    for stop in (True, False, True, False, False):
        if stop:
            with pytest.raises(KeyboardInterrupt):
                cf(x, stop)
        else:
            assert_same(cf(x, stop), f(x, stop))
    assert framejit.stats(f)["cache_hits"] >= 1
    still_usable()


def test_keyboard_interrupt_from_a_signal_during_cache_hits(alarm):
    _, alarm = alarm
    cf = framejit.compile(axpy)
    x = torch.randn(64)
    cf(x, 1.0)
    alarm(0.05)
    with pytest.raises(KeyboardInterrupt, match="alarm"):
        for i in range(10_000_000):
            cf(x, 0.5 + i)
    # The same loop, eagerly, raises the same.
    alarm(0.05)
    with pytest.raises(KeyboardInterrupt, match="alarm"):
        for i in range(10_000_000):
            axpy(x, 0.5 + i)
    assert framejit.stats(cf)["compiles"] == 1
    assert_same(cf(x, 3.0), axpy(x, 3.0))
    still_usable()


def test_keyboard_interrupts_during_traces_and_compiles(alarm):
    # A signal every 0.7 ms while fresh functions are traced and compiled (without the
    # GIL) and large kernels run (without it too): whatever each interrupt hits,
    # framejit's state stays whole: no stale "tracing" mark, no lost or extra entries.
    armed, alarm = alarm
    made, interrupted = [], 0
    big = torch.randn(300_000)
    armed[0] = False
    alarm(0.0007, 0.0007)
    for i in range(150):
        ns = {}
        exec(f"def g(x, a):\n    return torch.sin(x * a) + {i}\n", {"torch": torch}, ns)
        g = framejit.compile(ns["g"])
        made.append((g, ns["g"]))
        try:
            armed[0] = True
            g(big if i % 3 == 0 else T, 1.5)
            armed[0] = False
        except KeyboardInterrupt:
            armed[0] = False
            interrupted += 1
    alarm(0)
    assert interrupted > 0
    for g, fn in made:
        x = torch.randn(5)
        assert_same(g(x, 2.0), fn(x, 2.0))
        assert framejit.stats(g)["compiles"] == 1
    # Other threads can still trace the same code (nothing waits on a dead trace).
    results = []
    threads = [threading.Thread(target=lambda: results.append(made[0][0](torch.ones(3, 3), 1.0)))
               for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert len(results) == 2
    for r in results:
        assert_same(r, made[0][1](torch.ones(3, 3), 1.0))
    framejit.reset()
    del made, g, ns
    import gc
    gc.collect()
    assert _C.live_resources() == {"graphs": 0, "entries": 0}
    still_usable()
