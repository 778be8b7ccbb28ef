"""Reliability: threads. Compiled functions called from several threads give eager's
results, threads racing to the same cache miss make one trace between them, and a
large kernel runs with the GIL released."""
import sys
import threading
import time

import pytest
import torch

import framejit
from conftest import assert_same


@pytest.fixture
def fast_switching():
    """Python threads switch every 10 us instead of 5 ms, so races show up."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    yield
    sys.setswitchinterval(old)


def run_threads(n, target):
    """Runs target(i) on n threads started together; re-raises the first error."""
    errors = []
    barrier = threading.Barrier(n)

    def body(i):
        try:
            barrier.wait()
            target(i)
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=body, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "a thread hung"
    if errors:
        raise errors[0]


def f(x, y, a, n):
    z = torch.where(x > a, x * a, y - n)
    return z + 1, n * 3 - 1


def call_plan(i, k):
    """The k-th call of thread i: sizes, dtypes and scalars that vary."""
    size = 2 + (i * 7 + k) % 9
    dtype = torch.float64 if k % 5 == 4 else torch.float32
    g = torch.Generator().manual_seed(i * 1000 + k)
    x = torch.randn(size, generator=g).to(dtype)
    y = torch.randn(size, generator=g).to(dtype)
    return x, y, 0.25 * (k % 7) - 0.5, 2 + (i + k) % 13


def test_four_threads_get_eager_results_and_one_trace_per_guard_set(fast_switching):
    # How many entries one thread needs for the whole call plan.
    single = framejit.compile(f)
    for i in range(4):
        for k in range(200):
            single(*call_plan(i, k))
    expected_compiles = framejit.stats(single)["compiles"]
    assert expected_compiles == 2  # float32 and float64; sizes and scalars are symbols
    framejit.reset()

    cf = framejit.compile(f)
    mismatches = []

    def work(i):
        for k in range(200):
            args = call_plan(i, k)
            got, want = cf(*args), f(*args)
            try:
                assert_same(got, want)
            except AssertionError as e:
                mismatches.append((i, k, str(e)))

    run_threads(4, work)
    assert not mismatches, mismatches[:3]
    s = framejit.stats(cf)
    assert s["compiles"] == expected_compiles, s
    assert s["cache_hits"] == 800 - expected_compiles and s["fallbacks"] == 0, s
    guard_sets = framejit._C.entry_guards(cf)
    assert len(guard_sets) == expected_compiles
    assert len({tuple(g) for g in guard_sets}) == len(guard_sets), "duplicate cache entries"


def test_threads_racing_to_the_same_miss_trace_once(fast_switching):
    # All threads make their first call together with the same guard set: the first
    # traces (compiling without the GIL), the others wait for its entry.
    for rounds in range(5):
        framejit.reset()
        cf = framejit.compile(f)
        x, y = torch.randn(6), torch.randn(6)

        def work(i):
            assert_same(cf(x, y, 0.1 * i, i + 2), f(x, y, 0.1 * i, i + 2))

        run_threads(4, work)
        s = framejit.stats(cf)
        assert s["compiles"] == 1 and s["cache_hits"] == 3, (rounds, s)


def test_waiters_resume_after_a_trace_that_falls_back(fast_switching):
    # A trace that cannot compile releases the waiters too. (An opaque call such as
    # print is a graph break now, imports, writes to globals and plain class statements
    # are traced; a class body that calls a function is not.)
    def g(x):
        class Local:
            size = len("ab")
        return x + Local.size

    cf = framejit.compile(g)
    x = torch.randn(5)

    def work(i):
        for _ in range(20):
            assert_same(cf(x), g(x))

    run_threads(4, work)
    s = framejit.stats(cf)
    assert s["compiles"] == 0 and s["fallbacks"] >= 1


def test_large_kernel_releases_the_gil():
    def heavy(x, a):
        for _ in range(12):
            x = torch.sin(x) * a + torch.cos(x)
        return x

    cf = framejit.compile(heavy)
    x = torch.randn(2_000_000)
    assert_same(cf(x, 0.5), heavy(x, 0.5))

    ticks = []
    stop = threading.Event()

    def ticker():
        while not stop.is_set():
            ticks.append(time.perf_counter())
            time.sleep(0)  # lets go of the GIL: the only way the main thread gets it back

    # No forced switches: the ticker runs only while the main thread lets go of the
    # GIL (its sleeps, and a compiled call that releases it).
    old = sys.getswitchinterval()
    sys.setswitchinterval(30.0)
    t = threading.Thread(target=ticker)
    try:
        t.start()
        time.sleep(0.01)
        windows = []
        for _ in range(3):
            start = time.perf_counter()
            cf(x, 0.5)
            windows.append((start, time.perf_counter()))
    finally:
        stop.set()
        t.join()
        sys.setswitchinterval(old)
    assert framejit.stats(cf)["cache_hits"] == 3
    # torch.empty lets go of the GIL for a moment too (a tick or two per call); the
    # kernel's milliseconds without it give the ticker hundreds.
    inside = sum(1 for s, e in windows for tick in ticks if s < tick < e)
    assert min(e - s for s, e in windows) > 0.005, windows  # long enough to tell
    assert inside > 100, (inside, windows)


def test_small_calls_from_threads_while_a_large_kernel_runs():
    # A thread running a GIL-free kernel and threads making small cache hits of the
    # same function at the same time all get eager's results.
    def g(x, a):
        return torch.tanh(x * a) - x

    cf = framejit.compile(g)
    big = torch.randn(1_000_000)
    cf(big, 1.0)

    def work(i):
        for k in range(30):
            x = big if i == 0 else torch.randn(3 + k)
            assert_same(cf(x, 0.5 + k), g(x, 0.5 + k))

    run_threads(3, work)
    assert framejit.stats(cf)["compiles"] == 1
