"""Fused pointwise chains on the CPU: eager PyTorch, framejit and torch.compile
(Inductor), in one process, interleaved rounds after warm-up, medians.

  chain8   mul, add, sigmoid, mul, sub, tanh, mul, add on two float32 tensors
  arith6   six arithmetic ops on two float32 tensors, against one eager
           torch.add(x, y) of the same tensors: the memory-traffic floor (reading
           two inputs and writing one output is all a fused loop has to do)

arith6's ratio to eager add is also reported as the median of per-round ratios of
the two calls, which run next to each other in every round.
Eager torch gets every core (torch.set_num_threads(os.cpu_count())); framejit uses
torch's OpenMP threads (FRAMEJIT_NUM_THREADS of them, default: every hardware thread).
Each timed call follows an untimed call of the same contender, so that every one
finds the caches as it left them (not as the previous contender did).
glibc is told to keep freed memory (GLIBC_TUNABLES, set by re-executing the script
unless --keep-malloc-defaults): on this kind of machine re-faulting a 16 MB buffer
that malloc gave back costs ~10 ms, and which contender paid it depended on the
order of allocations, not on its code.
Also reported: each compiler's first call (trace + compile + run); Inductor
compiles into a fresh cache directory (TORCHINDUCTOR_CACHE_DIR unless set), so
its time is a cold compile.

Usage: python examples/bench_pointwise.py [--n 4194304] [--rounds 21] [--no-inductor]
                                           [--keep-malloc-defaults] [--json PATH]"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time

MALLOC_TUNABLES = "glibc.malloc.trim_threshold=4294967296:glibc.malloc.mmap_threshold=33554432"
if "--keep-malloc-defaults" not in sys.argv and os.environ.get("GLIBC_TUNABLES") != MALLOC_TUNABLES:
    os.environ["GLIBC_TUNABLES"] = MALLOC_TUNABLES
    os.execv(sys.executable, [sys.executable] + sys.orig_argv[1:])

os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="fj-bench-inductor-"))

import torch  # noqa: E402 (after the cache directory is chosen)

import framejit  # noqa: E402


def chain8(x, y):
    a = x * y
    b = a + x
    c = torch.sigmoid(b)
    d = c * y
    e = d - x
    f = torch.tanh(e)
    g = f * x
    return g + y


def arith6(x, y):
    a = x * y
    b = a + x
    c = b - y
    d = c * a
    e = d + x
    return e - b


def eager_add(x, y):
    return torch.add(x, y)


def timed(fn, *args):
    fn(*args)
    t0 = time.perf_counter()
    fn(*args)
    return time.perf_counter() - t0


def first_call(fn, *args):
    t0 = time.perf_counter()
    out = fn(*args)
    return out, time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=4 * 1024 * 1024)
    ap.add_argument("--rounds", type=int, default=21)
    ap.add_argument("--no-inductor", action="store_true")
    ap.add_argument("--keep-malloc-defaults", action="store_true")
    ap.add_argument("--json")
    args = ap.parse_args()

    torch.set_num_threads(os.cpu_count())
    torch.manual_seed(0)
    x = torch.randn(args.n)
    y = torch.randn(args.n)

    workloads = {"chain8": chain8, "arith6": arith6}
    contenders = {}  # (workload, name) -> callable
    compile_s = {}
    for wname, fn in workloads.items():
        contenders[(wname, "eager")] = fn
        fj = framejit.compile(fn)
        out, compile_s[(wname, "framejit")] = first_call(fj, x, y)
        torch.testing.assert_close(out, fn(x, y), rtol=1e-5, atol=1e-6)
        contenders[(wname, "framejit")] = fj
        if wname == "arith6":
            # Right after framejit's arith6 in every round: the two calls whose ratio is
            # the goal run next to each other (see the per-round ratio below).
            contenders[("add", "eager")] = eager_add
        if not args.no_inductor:
            ind = torch.compile(fn)
            out, compile_s[(wname, "inductor")] = first_call(ind, x, y)
            torch.testing.assert_close(out, fn(x, y), rtol=1e-5, atol=1e-6)
            contenders[(wname, "inductor")] = ind

    for _ in range(5):  # warm-up: caches, allocator, first touch of output memory
        for fn in contenders.values():
            fn(x, y)
    times = {key: [] for key in contenders}
    for _ in range(args.rounds):
        for key, fn in contenders.items():
            times[key].append(timed(fn, x, y))
    ms = {key: statistics.median(v) * 1e3 for key, v in times.items()}

    for wname, fn in workloads.items():
        s = framejit.stats(fn)
        assert s["compiles"] == 1 and s["fallbacks"] == 0, f"{wname}: framejit did not compile it: {s}"

    result = {"n": args.n, "rounds": args.rounds, "torch_threads": torch.get_num_threads(),
              "glibc_tunables": os.environ.get("GLIBC_TUNABLES", ""),
              "framejit_threads": int(os.environ.get("FRAMEJIT_NUM_THREADS", "0")) or os.cpu_count(),
              "eager_add_ms": ms[("add", "eager")], "workloads": {}}
    for wname in workloads:
        row = {"eager_ms": ms[(wname, "eager")], "framejit_ms": ms[(wname, "framejit")],
               "framejit_compile_s": compile_s[(wname, "framejit")]}
        row["eager_over_framejit"] = row["eager_ms"] / row["framejit_ms"]
        if (wname, "inductor") in ms:
            row["inductor_ms"] = ms[(wname, "inductor")]
            row["inductor_compile_s"] = compile_s[(wname, "inductor")]
            row["eager_over_inductor"] = row["eager_ms"] / row["inductor_ms"]
            row["inductor_over_framejit"] = row["inductor_ms"] / row["framejit_ms"]
        result["workloads"][wname] = row
    a6 = result["workloads"]["arith6"]
    a6["framejit_over_eager_add"] = a6["framejit_ms"] / result["eager_add_ms"]
    # The machine's speed drifts over seconds (a shared host): the median of the
    # per-round ratios of two adjacent calls is steadier than a ratio of medians.
    a6["framejit_over_eager_add_per_round"] = statistics.median(
        f / e for f, e in zip(times[("arith6", "framejit")], times[("add", "eager")]))

    print(f"{args.n} float32 elements, medians of {args.rounds} interleaved rounds, "
          f"torch threads {result['torch_threads']}, framejit threads {result['framejit_threads']}")
    hdr = f"{'':8} {'eager ms':>9} {'framejit ms':>12} {'inductor ms':>12} {'eager/fj':>9} " \
          f"{'eager/ind':>10} {'ind/fj':>7} {'fj compile s':>13} {'ind compile s':>14}"
    print(hdr)
    for wname, row in result["workloads"].items():
        def f(key, fmt):
            return format(row[key], fmt) if key in row else "-"
        print(f"{wname:8} {row['eager_ms']:9.3f} {row['framejit_ms']:12.3f} {f('inductor_ms', '12.3f'):>12} "
              f"{row['eager_over_framejit']:9.2f} {f('eager_over_inductor', '10.2f'):>10} "
              f"{f('inductor_over_framejit', '7.2f'):>7} {row['framejit_compile_s']:13.3f} "
              f"{f('inductor_compile_s', '14.1f'):>14}")
    print(f"eager torch.add(x, y): {result['eager_add_ms']:.3f} ms; "
          f"framejit arith6 / eager add = {a6['framejit_over_eager_add']:.2f}, median of per-round "
          f"ratios {a6['framejit_over_eager_add_per_round']:.2f} (goal <= 1.25)")
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as fh:
            json.dump(result, fh, indent=2)


if __name__ == "__main__":
    main()
