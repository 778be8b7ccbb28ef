"""Hostile signals (issue 21): Ctrl-C (SIGINT) during a long compiled call raises
KeyboardInterrupt within 100 ms, on the thread pool and serially, with the GIL
released (large outputs) or held (small ones); the process stays usable and the next
call gives eager's result. A KeyboardInterrupt raised while a frame is traced is not
swallowed. An absurd FRAMEJIT_NUM_THREADS warns and runs with the default."""
import json

import pytest

from conftest import probe

# A compiled call that runs for seconds is interrupted after `delay` s; prints the
# latency from the signal to the KeyboardInterrupt, then checks the next call.
RUNNER = r"""
import json, os, signal, sys, threading, time, torch, framejit
kind = sys.argv[1]
def rows(x, n):  # a reduction per row: n rows of len(x) exp's (2**32 of them)
    return (x.expand(n, x.shape[0]) * 1.5 + 1).exp().sum(1)
def pointwise(x, n):  # a large output of many sines per element
    y = x.expand(n, x.shape[0])
    for _ in range(40):
        y = torch.sin(y) * 1.25
    return y
def few_rows(x, n):  # 4096 rows: an output too small to release the GIL
    return (x.expand(1 << 12, n) * 1.5 + 1).exp().sum(1)
fn, small, big = {
    "rows": (rows, 8, 1 << 16),
    "pointwise": (pointwise, 8, 1 << 10),
    "few_rows": (few_rows, 1 << 10, 1 << 24),
}[kind]
x = torch.linspace(-1, 1, 1 << 16 if kind != "few_rows" else 1)
c = framejit.compile(fn)
assert torch.allclose(c(x, small), fn(x, small))
fired = []
if kind == "few_rows":  # the GIL stays held: the signal comes from a timer, not a thread
    signal.signal(signal.SIGALRM, signal.default_int_handler)
    fired.append(time.perf_counter() + 0.4)
    signal.setitimer(signal.ITIMER_REAL, 0.4)
else:
    def fire():
        fired.append(time.perf_counter())
        os.kill(os.getpid(), signal.SIGINT)
    threading.Timer(0.4, fire).start()
t0 = time.perf_counter()
try:
    c(x, big)
    outcome = "returned"
except KeyboardInterrupt:
    outcome = "interrupted"
t1 = time.perf_counter()
if kind == "few_rows":
    signal.setitimer(signal.ITIMER_REAL, 0)  # a call that returned early must not die by SIGALRM
n2 = small + 3
again = torch.allclose(c(x, n2), fn(x, n2), rtol=1e-5, atol=1e-5)
print(json.dumps({"outcome": outcome, "elapsed": t1 - t0, "latency": t1 - fired[0] if fired else None,
                  "again": again}))
"""


def interrupt(kind, threads=None):
    env = {"FRAMEJIT_NUM_THREADS": str(threads)} if threads else None
    r = probe(RUNNER, timeout=120, args=[kind], env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    d = json.loads(r.stdout.strip().splitlines()[-1])
    assert d["outcome"] == "interrupted", d
    assert d["elapsed"] >= 0.35, d  # the call was running when the signal came
    assert d["latency"] < 0.1, f"KeyboardInterrupt came {d['latency']:.3f} s after the signal"
    assert d["again"], "the call after the interrupt differs from eager"


def test_sigint_stops_a_long_reduction_on_the_thread_pool():
    interrupt("rows")


def test_sigint_stops_a_long_reduction_run_serially():
    interrupt("rows", threads=1)


def test_sigint_stops_a_long_pointwise_kernel():
    interrupt("pointwise")


def test_signal_stops_a_long_kernel_that_holds_the_gil():
    interrupt("few_rows")


def test_keyboard_interrupt_raised_while_tracing_is_not_swallowed():
    code = r"""
import os, signal, torch, framejit
calls = []
def poke():
    calls.append(1)
    raise KeyboardInterrupt
def ctrl_c():
    calls.append(2)
    os.kill(os.getpid(), signal.SIGINT)
def f(x, hook):
    y = x * 2
    hook()
    return y + 1
c = framejit.compile(f)
x = torch.ones(3)
for hook in (poke, ctrl_c):
    calls.clear()
    try:
        c(x, hook)
        print("no interrupt")
    except KeyboardInterrupt:
        print("interrupted", len(calls))
print("after", torch.equal(c(x, lambda: None), f(x, lambda: None)))
"""
    r = probe(code, timeout=60)
    assert r.returncode == 0, r.stderr[-3000:]
    # Each hook ran once (not again in CPython after the trace) and its interrupt came out.
    assert r.stdout.split("\n")[:3] == ["interrupted 1", "interrupted 1", "after True"], r.stdout + r.stderr


@pytest.mark.parametrize("value", ["99999999999999999999", "-4", "1e6"])
def test_absurd_num_threads_warns_and_runs(value):
    code = r"""
import torch, framejit
f = framejit.compile(lambda x: (x * 2).sum(1))
x = torch.randn(1024, 512)
torch.testing.assert_close(f(x), (x * 2).sum(1), rtol=1e-4, atol=1e-4)
print("ok")
"""
    r = probe(code, timeout=60, env={"FRAMEJIT_NUM_THREADS": value})
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-3000:]
    assert f"FRAMEJIT_NUM_THREADS={value} is not a thread count" in r.stderr, r.stderr
