"""Reductions, matmul and call overhead on the CPU: eager PyTorch, framejit and
torch.compile (Inductor), in one process, interleaved rounds after warm-up, medians.

  softmax_hand  amax, sub, exp, sum, div over the rows of a [2048, 4096] float32
  softmax       torch.softmax(x, -1) on the same tensor
  mlp           layer_norm, linear 1024->4096, gelu, linear 4096->1024, residual on
                [512, 1024] float32 (weights passed as arguments, no autograd)
  add1          x + 1 on a 10-element tensor: the cost of a call (cache hit)
Compile ratio: Inductor's compile time over framejit's, each the first call less a
warm call (nan where framejit reused code compiled for an earlier row's graph).
Also: the median time to trace and compile a fresh 30-op pointwise function, for
framejit and for Inductor (fewer samples: Inductor takes seconds each).

Eager torch gets every core; framejit runs on the same OpenMP threads. glibc keeps freed
memory (see bench_pointwise.py for why).

Usage: python examples/bench_ops.py [--rounds 15] [--no-inductor] [--json PATH]"""
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

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import framejit  # noqa: E402


def softmax_hand(x):
    m = x.amax(dim=-1, keepdim=True)
    e = torch.exp(x - m)
    return e / e.sum(dim=-1, keepdim=True)


def softmax(x):
    return torch.softmax(x, -1)


def mlp(x, w1, b1, w2, b2, g, b):
    h = F.layer_norm(x, (x.shape[-1],), g, b)
    h = F.gelu(F.linear(h, w1, b1))
    return x + F.linear(h, w2, b2)


def add1(x):
    return x + 1


def chain30_source(k):
    lines = [f"def chain30_{k}(x, y):", "    a = x * y"]
    ops = ["a = a + x", "a = a * y", "a = torch.sigmoid(a)", "a = a - y", "a = torch.tanh(a)",
           "a = a * 0.5", "a = a + 1.0"]
    for i in range(29):
        lines.append("    " + ops[(i + k) % len(ops)])
    lines.append("    return a")
    return "\n".join(lines)


def fresh_chain30(k):
    ns = {"torch": torch}
    exec(chain30_source(k), ns)
    return ns[f"chain30_{k}"]


def timed(fn, args):
    fn(*args)
    t0 = time.perf_counter()
    fn(*args)
    return time.perf_counter() - t0


def timed_calls(fn, args, calls):
    t0 = time.perf_counter()
    for _ in range(calls):
        fn(*args)
    return (time.perf_counter() - t0) / calls


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--no-inductor", action="store_true")
    ap.add_argument("--keep-malloc-defaults", action="store_true")
    ap.add_argument("--json")
    args = ap.parse_args()
    torch.set_num_threads(os.cpu_count())
    torch.manual_seed(0)
    sm = torch.randn(2048, 4096)
    x = torch.randn(512, 1024)
    w1, b1 = torch.randn(4096, 1024) * 0.03, torch.randn(4096) * 0.1
    w2, b2 = torch.randn(1024, 4096) * 0.015, torch.randn(1024) * 0.1
    g, b = torch.randn(1024) * 0.1 + 1, torch.randn(1024) * 0.1
    small = torch.randn(10)
    workloads = {
        "softmax_hand": (softmax_hand, (sm,)),
        "softmax": (softmax, (sm,)),
        "mlp": (mlp, (x, w1, b1, w2, b2, g, b)),
    }
    contenders = {}
    first = {}
    with torch.no_grad():
        for name, (fn, a) in workloads.items():
            contenders[(name, "eager")] = fn
            for cname, make in (("framejit", framejit.compile), ("inductor", torch.compile)):
                if cname == "inductor" and args.no_inductor:
                    continue
                c = make(fn)
                t0 = time.perf_counter()
                out = c(*a)
                first[(name, cname)] = time.perf_counter() - t0
                torch.testing.assert_close(out, fn(*a), rtol=1e-4, atol=1e-4)
                contenders[(name, cname)] = c
        for _ in range(3):
            for (name, _), fn in contenders.items():
                fn(*workloads[name][1])
        times = {k: [] for k in contenders}
        for _ in range(args.rounds):
            for (name, cname), fn in contenders.items():
                times[(name, cname)].append(timed(fn, workloads[name][1]))
        ms = {k: statistics.median(v) * 1e3 for k, v in times.items()}

        # Call overhead: many calls of a tiny function.
        calls = {"eager": add1, "framejit": framejit.compile(add1)}
        if not args.no_inductor:
            calls["inductor"] = torch.compile(add1)
        for fn in calls.values():
            for _ in range(200):
                fn(small)
        call_us = {k: [] for k in calls}
        for _ in range(args.rounds):
            for k, fn in calls.items():
                call_us[k].append(timed_calls(fn, (small,), 2000) * 1e6)
        call_us = {k: statistics.median(v) for k, v in call_us.items()}

        # Compile time of fresh 30-op functions.
        cx, cy = torch.randn(1000), torch.randn(1000)
        fj_compile = []
        for k in range(9):
            f = framejit.compile(fresh_chain30(k))
            t0 = time.perf_counter()
            f(cx, cy)
            fj_compile.append(time.perf_counter() - t0)
        ind_compile = []
        if not args.no_inductor:
            for k in range(3):
                f = torch.compile(fresh_chain30(100 + k))
                t0 = time.perf_counter()
                f(cx, cy)
                ind_compile.append(time.perf_counter() - t0)

    stats = {name: framejit.stats(fn) for name, (fn, _) in workloads.items()}
    print(f"medians of {args.rounds} interleaved rounds, torch threads {torch.get_num_threads()}")
    print(f"{'':14}{'eager ms':>10}{'framejit ms':>13}{'inductor ms':>13}{'eager/fj':>10}{'ind/fj':>8}"
          f"{'fj first s':>12}{'ind first s':>12}{'compile ratio':>15}  framejit compiles/fallbacks")
    rows = {}
    for name in workloads:
        e, f = ms[(name, "eager")], ms[(name, "framejit")]
        i = ms.get((name, "inductor"), float("nan"))
        s = stats[name]
        rows[name] = {"eager_ms": e, "framejit_ms": f, "inductor_ms": i,
                      "framejit_first_s": first[(name, "framejit")],
                      "inductor_first_s": first.get((name, "inductor")),
                      "compiles": s["compiles"], "fallbacks": s["fallbacks"]}
        # Compile time: the first call less a warm call (the first call also runs).
        fj_first, ind_first = first[(name, "framejit")], first.get((name, "inductor"), float("nan"))
        # Under 2 ms: framejit reused code compiled for an earlier workload (same graph).
        fj_compile_s = fj_first - f / 1e3
        ratio = (ind_first - i / 1e3) / fj_compile_s if fj_compile_s > 2e-3 else float("nan")
        rows[name]["compile_ratio"] = ratio if ratio == ratio else None
        print(f"{name:14}{e:10.3f}{f:13.3f}{i:13.3f}{e / f:10.2f}{i / f:8.2f}"
              f"{fj_first:12.3f}{ind_first:12.3f}{ratio:14.0f}x"
              f"  {s['compiles']}/{s['fallbacks']}")
    print("call of add1 on 10 elements (us): " +
          ", ".join(f"{k} {v:.2f}" for k, v in call_us.items()) +
          f"; framejit/eager = {call_us['framejit'] / call_us['eager']:.2f} (goal <= 1.3)")
    fj_c = statistics.median(fj_compile)
    line = f"fresh 30-op function, trace+compile+first run: framejit {fj_c * 1e3:.1f} ms (goal < 100)"
    if ind_compile:
        ind_c = statistics.median(ind_compile)
        line += f", inductor {ind_c:.2f} s, ratio {ind_c / fj_c:.0f}x (goal >= 20x)"
    print(line)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"workloads": rows, "call_us": call_us,
                       "compile_30op_s": {"framejit": fj_compile, "inductor": ind_compile}}, fh, indent=1)


if __name__ == "__main__":
    main()
