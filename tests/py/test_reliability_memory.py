"""Reliability: memory. Cache hits leak neither memory nor references, and
framejit.reset() frees the compiled code and plans (counted by
framejit._C.live_resources(), which holds only weak references)."""
import gc
import sys

import torch

import framejit
from framejit import _C
from conftest import assert_same


def rss_bytes():
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * 4096


def test_cache_hits_keep_rss_and_refcounts_flat():
    def f(x, y, a, n):
        z = x * a + y
        return z, z.shape, n * 2 + 1, y

    cf = framejit.compile(f)
    x, y = torch.randn(8), torch.randn(8)
    for i in range(2000):  # warm up: the trace, torch's allocator, Python's free lists
        cf(x, y, 0.5 + i, i + 2)
    assert_same(cf(x, y, 0.25, 7), f(x, y, 0.25, 7))
    gc.collect()
    refs = (sys.getrefcount(x), sys.getrefcount(y))
    before = rss_bytes()
    for i in range(100_000):
        cf(x, y, 0.5 + i, i + 2)
    gc.collect()
    growth = rss_bytes() - before
    assert (sys.getrefcount(x), sys.getrefcount(y)) == refs
    assert growth < 5 * 2**20, f"RSS grew by {growth / 2**20:.2f} MiB over 100,000 cache hits"
    s = framejit.stats(cf)
    assert s["compiles"] == 1 and s["cache_hits"] == 102_000


def test_failing_calls_keep_refcounts_flat():
    # The error paths (a cache hit whose torch call raises, a fallback) drop what they took.
    def f(x, y):
        return x + y

    cf = framejit.compile(f)
    x, y, bad = torch.randn(4), torch.randn(4), torch.randn(5)
    cf(x, y)
    refs = (sys.getrefcount(x), sys.getrefcount(bad))
    for _ in range(200):
        try:
            cf(x, bad)
        except RuntimeError as e:
            assert "must match the size" in str(e)
        else:
            raise AssertionError("mismatched sizes did not raise")
    gc.collect()
    assert (sys.getrefcount(x), sys.getrefcount(bad)) == refs


def test_reset_frees_compiled_graphs_and_entries():
    def f(x, a):
        return x * a + 1

    cf = framejit.compile(f)
    assert _C.live_resources() == {"graphs": 0, "entries": 0}
    inputs = [torch.randn(4), torch.randn(4, 3), torch.randn(4, dtype=torch.float64)]
    for x in inputs:  # three guard sets: three entries, three graphs
        cf(x, 2.0)
    assert _C.live_resources() == {"graphs": 3, "entries": 3}
    framejit.reset()
    assert _C.live_resources() == {"graphs": 0, "entries": 0}
    assert framejit.stats(cf)["compiles"] == 0
    # Still usable: the next call traces again and is right.
    x = torch.randn(6)
    assert_same(cf(x, 3.0), f(x, 3.0))
    assert framejit.stats(cf)["compiles"] == 1
    assert _C.live_resources() == {"graphs": 1, "entries": 1}
    assert_same(cf(x, -1.5), f(x, -1.5))
    assert framejit.stats(cf)["cache_hits"] == 1


def test_dead_functions_free_their_graphs():
    # Without reset(): once a compiled function and its code object go, so does the code.
    made = []
    for i in range(20):
        ns = {}
        exec(f"def g(x, a):\n    return x * a + {i}.5\n", ns)
        g = framejit.compile(ns["g"])
        x = torch.randn(3)
        assert_same(g(x, 2.0), ns["g"](x, 2.0))
        made.append(g)
    assert _C.live_resources()["graphs"] == 20
    del made, g, ns
    gc.collect()
    assert _C.live_resources() == {"graphs": 0, "entries": 0}


def test_compile_reset_cycles_do_not_grow_rss():
    # Machine code freed by reset() is reused by later compiles (LLVM's memory manager).
    def cycle():
        for i in range(40):
            ns = {}
            exec(f"def g(x, a):\n    return x * a - {i}\n", ns)
            framejit.compile(ns["g"])(torch.randn(4), 1.0)
        framejit.reset()
        gc.collect()

    cycle()
    before = rss_bytes()
    for _ in range(3):
        cycle()
    assert _C.live_resources() == {"graphs": 0, "entries": 0}
    growth = rss_bytes() - before
    assert growth < 5 * 2**20, f"RSS grew by {growth / 2**20:.2f} MiB over 120 compiles + resets"


def make_scaled(c):
    # A fresh code object per call (exec), so that each function is traced on its own.
    ns = {"torch": torch}
    exec(f"def scaled(x, y):\n    return torch.tanh(x * {c!r} + y).sum(1)\n", ns)
    return ns["scaled"]


def test_equal_graphs_share_compiled_code():
    # Two functions whose graphs are equal run one piece of machine code; a graph that
    # differs only in a constant (by one ulp) gets its own.
    x, y = torch.randn(6, 5), torch.randn(6, 5)
    f1, f2, f3 = make_scaled(0.5), make_scaled(0.5), make_scaled(0.5000000000000001)
    c1, c2, c3 = framejit.compile(f1), framejit.compile(f2), framejit.compile(f3)
    before = _C.live_resources()
    reused = _C.graphs_reused()
    assert_same(c1(x, y), f1(x, y))
    assert_same(c2(x, y), f2(x, y))
    after_two = _C.live_resources()
    assert after_two["graphs"] == before["graphs"] + 1
    assert _C.graphs_reused() == reused + 1
    assert_same(c3(x, y), f3(x, y))
    after_three = _C.live_resources()
    assert after_three["graphs"] == before["graphs"] + 2
    assert _C.graphs_reused() == reused + 1
    # reset() frees the shared code with the plans; the next compile makes it anew.
    framejit.reset()
    gc.collect()
    assert _C.live_resources()["graphs"] == 0
    assert_same(c2(x, y), f2(x, y))
    assert _C.live_resources()["graphs"] == 1
