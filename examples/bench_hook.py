"""The cost of framejit's frame hook for code it does not watch: a recursion-heavy
pure-Python benchmark (fib), in interleaved rounds in one process, medians.

  plain      fib(n) called directly
  via entry  fib(n) called from a framejit-compiled function that runs in CPython
             (framejit installs its PEP 523 hook for the call; it removes itself
             once the compiled frame is entered)
  hook kept  fib(n) with the hook left installed for the whole run: every Python
             call then leaves CPython's inlined-call fast path (the cost that
             framejit avoids by removing the hook)

Usage: python examples/bench_hook.py [--n 22] [--rounds 31] [--json PATH]"""
import argparse
import json
import statistics
import time

import framejit
from framejit import _C


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


_scratch = None


def driver(n):
    # `del` of a global is not traced: the whole frame runs in CPython at once, so the
    # trace never reaches fib (tracing it would inline the recursion).
    global _scratch
    _scratch = n
    del _scratch
    return fib(n)


def timed(fn, n):
    t0 = time.perf_counter()
    fn(n)
    return time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=22)
    ap.add_argument("--rounds", type=int, default=31)
    ap.add_argument("--json")
    args = ap.parse_args()

    framejit.config.fallback_limit = 10**9  # keep the entry point watched: every call traces and falls back
    entry = framejit.compile(driver)
    for _ in range(3):
        timed(fib, args.n)
        timed(entry, args.n)
    plain, via_entry, kept = [], [], []
    for _ in range(args.rounds):
        plain.append(timed(fib, args.n))
        via_entry.append(timed(entry, args.n))
        _C.set_hook(True)
        try:
            kept.append(timed(fib, args.n))
        finally:
            _C.set_hook(False)
    p, e, k = (statistics.median(x) for x in (plain, via_entry, kept))
    assert framejit.stats(driver)["fallbacks"] >= args.rounds
    result = {"workload": f"fib({args.n})", "rounds": args.rounds, "plain_ms": p * 1e3,
              "via_entry_ms": e * 1e3, "hook_kept_ms": k * 1e3,
              "via_entry_slowdown_pct": (e / p - 1) * 100, "hook_kept_slowdown_pct": (k / p - 1) * 100}
    print(f"{result['workload']}, medians of {args.rounds} interleaved rounds:")
    print(f"  plain                     {result['plain_ms']:8.2f} ms")
    print(f"  via a compiled entry      {result['via_entry_ms']:8.2f} ms  ({result['via_entry_slowdown_pct']:+.1f} %)")
    print(f"  hook kept installed       {result['hook_kept_ms']:8.2f} ms  ({result['hook_kept_slowdown_pct']:+.1f} %)")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(result, fh, indent=2)


if __name__ == "__main__":
    main()
