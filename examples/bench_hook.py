"""The cost of framejit's frame hook for code it does not watch: a recursion-heavy
pure-Python benchmark (fib) with the PEP 523 hook installed vs not, interleaved
rounds in one process, medians. Usage: python examples/bench_hook.py [--json PATH]"""
import argparse
import json
import statistics
import time

import framejit
from framejit import _C


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


def timed(n):
    t0 = time.perf_counter()
    fib(n)
    return time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=22)
    ap.add_argument("--rounds", type=int, default=31)
    ap.add_argument("--json")
    args = ap.parse_args()

    for _ in range(3):
        timed(args.n)
    plain, hooked = [], []
    for _ in range(args.rounds):
        plain.append(timed(args.n))
        _C.set_hook(True)
        try:
            hooked.append(timed(args.n))
        finally:
            _C.set_hook(False)
    p, h = statistics.median(plain), statistics.median(hooked)
    result = {"workload": f"fib({args.n})", "plain_ms": p * 1e3, "hooked_ms": h * 1e3,
              "slowdown_pct": (h / p - 1) * 100}
    print(f"{result['workload']}: plain {result['plain_ms']:.2f} ms, hook installed "
          f"{result['hooked_ms']:.2f} ms, slowdown {result['slowdown_pct']:+.1f} % (median of {args.rounds})")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(result, fh, indent=2)


if __name__ == "__main__":
    main()
