"""Hostile sizes (issue 21): a size, stride or byte count past int64 raises eager's own
error (type and message), returns no value, and does so within 10 ms, whether the
absurd size is met while tracing (a constant, or the first call's int argument) or
on a cache hit of a graph compiled for small sizes (a symbolic size from an int
argument). Each group runs in a probe subprocess: before the checks, such calls
returned 0 or ran a kernel for minutes."""
import json

import pytest

from conftest import probe

# Each case: a name, a lambda's source, its small arguments (compiled first, then
# called again to check the cache hit), and its absurd arguments. `x1` is a
# one-element tensor, `x4` a four-element one (views of them stay small in memory).
CASES = [
    ("zeros_square", "lambda n: torch.zeros(n, n).sum()", "(5,)", "(2**32,)"),
    ("ones_3d", "lambda n: torch.ones(n, n, n).sum()", "(3,)", "(2**22,)"),
    ("empty_bytes", "lambda n: torch.empty(n, 2**31, dtype=torch.float64).sum()", "(0,)", "(2**31,)"),
    ("full", "lambda n, m: torch.full((n, m), 2.0).sum()", "(5, 3)", "(2**32, 2**32)"),
    ("full_bytes", "lambda n: torch.full((n, 4), 1.0, dtype=torch.float64).sum()", "(3,)", "(2**61,)"),
    ("arange", "lambda n: torch.arange(n).sum()", "(5,)", "(2**62,)"),
    ("arange_max", "lambda n: torch.arange(n).sum()", "(5,)", "(2**63 - 1,)"),
    ("linspace", "lambda n: torch.linspace(0, 1, n).sum()", "(5,)", "(2**62,)"),
    ("eye", "lambda n: torch.eye(n).sum()", "(4,)", "(2**32,)"),
    ("zeros_like_big", "lambda x1, n: torch.zeros_like(x1.view(1, 1).expand(n, n)).sum()", "(x1, 3)", "(x1, 2**32)"),
    ("stride_empty_dim", "lambda n: torch.empty(n, 0, n, n).sum()", "(3,)", "(2**40,)"),
    ("stride_zero_first", "lambda n: torch.zeros(0, n, n, n).sum()", "(3,)", "(2**32,)"),
    ("expand", "lambda x4, n: x4.expand(n, n, 4).sum()", "(x4, 3)", "(x4, 2**31)"),
    ("expand_pointwise", "lambda x4, n: (x4.expand(n, n, 4) * 2 + 1).sum()", "(x4, 3)", "(x4, 2**31)"),
    ("expand_max", "lambda x4, n: x4.expand(n, 4).amax()", "(x4, 3)", "(x4, 2**62)"),
    ("view_expand", "lambda x1, n: x1.view(1, 1).expand(n, n).sum(0)", "(x1, 3)", "(x1, 2**32)"),
    ("broadcast", "lambda x1, n: (x1.view(1, 1).expand(n, 1) + x1.view(1, 1).expand(1, n)).sum()", "(x1, 3)", "(x1, 2**32)"),
    ("view_flatten", "lambda x4, n: x4.view(2, 2).expand(n, 2, 2).flatten(1).sum()", "(x4, 3)", "(x4, 2**62)"),
    ("negative", "lambda n: torch.zeros(n, 3).sum()", "(4,)", "(-3,)"),
    ("negative_full", "lambda n: torch.full((2, n), 1.0).sum()", "(4,)", "(-1,)"),
]

RUNNER = r"""
import json, sys, time, torch, framejit
x1, x4 = torch.ones(1), torch.arange(4.0)
mode = sys.argv[1]
def outcome(fn, args):
    try:
        return {"value": repr(fn(*args))}
    except Exception as e:
        return {"error": type(e).__name__, "message": str(e)}
for name, src, small, big in json.loads(sys.argv[2]):
    fn = eval(src)
    small, big = eval(small), eval(big)
    eager = outcome(fn, big)
    framejit.reset()
    c = framejit.compile(fn)
    if mode == "runtime":  # compiled for small sizes first: the absurd ones meet the plan
        first = outcome(c, small)
        assert first == outcome(fn, small), (name, first)
    t = time.perf_counter()
    got = outcome(c, big)
    seconds = time.perf_counter() - t
    again = outcome(c, small) == outcome(fn, small)
    print(json.dumps({"name": name, "eager": eager, "got": got, "seconds": seconds, "again": again,
                      "compiles": framejit.stats()["compiles"]}), flush=True)
"""


def run_cases(mode):
    r = probe(RUNNER, timeout=120, args=[mode, json.dumps(CASES)])
    assert r.returncode == 0, r.stderr[-3000:]
    results = {}
    for line in r.stdout.splitlines():
        d = json.loads(line)
        results[d["name"]] = d
    assert sorted(results) == sorted(c[0] for c in CASES)
    return results


def check(results):
    slow = []
    for name, d in results.items():
        assert "error" in d["eager"], f"{name}: eager computed {d['eager']} (the case is not absurd)"
        assert d["got"] == d["eager"], f"{name}: framejit gave {d['got']}, eager {d['eager']}"
        assert d["again"], f"{name}: the call after the absurd one differs from eager"
        if d["seconds"] > 0.010:
            slow.append((name, d["seconds"]))
    assert not slow, f"absurd sizes took over 10 ms to raise: {slow}"


def test_absurd_sizes_met_while_tracing_raise_eagers_error():
    results = run_cases("trace")
    check(results)
    # The cases cover each of eager's overflow checks (so the comparison tests them).
    messages = {d["eager"]["message"] for d in results.values()}
    for text in ["Storage size calculation overflowed", "Stride calculation overflowed",
                 "numel: integer multiplication overflow"]:
        assert any(text in m for m in messages), (text, messages)


def test_absurd_sizes_on_a_cache_hit_raise_eagers_error_before_any_kernel():
    results = run_cases("runtime")
    check(results)
    # The small call compiled a graph with symbolic sizes, which the absurd call met.
    assert all(d["compiles"] >= 1 for d in results.values())
