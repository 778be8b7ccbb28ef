"""Recompiles under changing scalars and sizes: framejit against torch.compile
(default settings) in one process, plus the cost of a cache hit with symbolic
sizes against one with static sizes.

  int sweep    f(x, n) = x * n + n              for n = 2..101
  float sweep  step(w, g, lr) = w - lr * g       for 50 learning rates
  size sweep   f(x, y) = x * y                   for sizes 2..64

Usage: python examples/bench_dynamic.py [--no-inductor] [--json PATH]"""
import argparse
import json
import statistics
import time

import torch

import framejit


def scale_add(x, n):
    return x * n + n


def sgd_step(w, g, lr):
    return w - lr * g


def mul(x, y):
    return x * y


def sweeps():
    x = torch.randn(16)
    w, g = torch.randn(64), torch.randn(64)
    return {
        "int sweep (n = 2..101)": (scale_add, [(x, n) for n in range(2, 102)]),
        "float sweep (50 learning rates)": (sgd_step, [(w, g, 0.001 * (i + 1)) for i in range(50)]),
        "size sweep (2..64)": (mul, [(torch.randn(n), torch.randn(n)) for n in range(2, 65)]),
    }


def framejit_compiles(fn, calls):
    framejit.reset()
    cf = framejit.compile(fn)
    for args in calls:
        torch.testing.assert_close(cf(*args), fn(*args), rtol=1e-5, atol=1e-6)
    return framejit.stats(fn)["compiles"]


def inductor_compiles(fn, calls):
    import torch._dynamo as dynamo  # a peer, measured only
    dynamo.reset()
    counts = {"n": 0}

    def counting_backend(gm, example_inputs):
        counts["n"] += 1
        from torch._inductor.compile_fx import compile_fx
        return compile_fx(gm, example_inputs)

    cf = torch.compile(fn, backend=counting_backend)
    for args in calls:
        torch.testing.assert_close(cf(*args), fn(*args), rtol=1e-5, atol=1e-6)
    return counts["n"]


def hit_cost_us(cf, x, rounds=9, n=20000):
    for _ in range(1000):
        cf(x)
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(n):
            cf(x)
        times.append((time.perf_counter() - t0) / n * 1e6)
    return statistics.median(times)


def add1_dynamic(x):
    return x + 1


def add1_static(x):
    return x + 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--no-inductor", action="store_true")
    ap.add_argument("--json")
    args = ap.parse_args()

    rows = []
    for name, (fn, calls) in sweeps().items():
        row = {"sweep": name, "calls": len(calls), "framejit_compiles": framejit_compiles(fn, calls)}
        if not args.no_inductor:
            row["torch_compile_compiles"] = inductor_compiles(fn, calls)
        rows.append(row)

    framejit.reset()
    x = torch.randn(10)
    dyn, sta = framejit.compile(add1_dynamic), framejit.compile(add1_static, dynamic=False)
    d_us, s_us = [], []
    for _ in range(3):  # interleaved
        d_us.append(hit_cost_us(dyn, x))
        s_us.append(hit_cost_us(sta, x))
    hit = {"symbolic_us": statistics.median(d_us), "static_us": statistics.median(s_us)}
    hit["ratio"] = hit["symbolic_us"] / hit["static_us"]

    print(f"{'sweep':34} {'calls':>5} {'framejit':>9} {'torch.compile':>14}   (compiles)")
    for r in rows:
        print(f"{r['sweep']:34} {r['calls']:5} {r['framejit_compiles']:9} {r.get('torch_compile_compiles', '-'):>14}")
    print(f"cache hit, x + 1 on 10 elements: symbolic sizes {hit['symbolic_us']:.2f} us, "
          f"static sizes {hit['static_us']:.2f} us, ratio {hit['ratio']:.3f}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"sweeps": rows, "cache_hit": hit}, fh, indent=2)


if __name__ == "__main__":
    main()
