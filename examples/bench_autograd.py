"""Forward + backward of the MLP block on the CPU: eager autograd against framejit's
compiled forward and backward, in one process, interleaved rounds after warm-up,
medians; and the memory each keeps for the backward (saved tensors).

  mlp_train  layer_norm, linear 1024->4096, gelu, linear 4096->1024, residual on
             [512, 1024] float32; x and every weight require grad; one step is the
             forward and out.backward(grad) with a fixed grad

Saved memory: the bytes of the distinct storages autograd keeps between forward and
backward (torch.autograd.graph.saved_tensors_hooks sees every save_for_backward),
total and excluding the inputs and weights (which live anyway).

Eager torch gets every core; framejit uses its own thread pool.

Usage: python examples/bench_autograd.py [--rounds 15] [--json PATH]"""
import argparse
import json
import os
import statistics
import time

import torch
import torch.nn.functional as F

import framejit


def mlp(x, w1, b1, w2, b2, g, b):
    h = F.layer_norm(x, (x.shape[-1],), g, b)
    h = F.gelu(F.linear(h, w1, b1))
    return x + F.linear(h, w2, b2)


def saved_bytes(fn, args):
    """(all saved bytes, saved bytes that are not the arguments), distinct storages."""
    storages = {}

    def pack(t):
        s = t.untyped_storage()
        storages[s.data_ptr()] = s.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = fn(*args)
    inputs = {a.untyped_storage().data_ptr() for a in args}
    total = sum(storages.values())
    extra = sum(n for p, n in storages.items() if p not in inputs)
    del out
    return total, extra


def step(fn, args, grad):
    for a in args:
        a.grad = None
    out = fn(*args)
    out.backward(grad)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--json")
    opts = ap.parse_args()
    torch.set_num_threads(os.cpu_count())
    torch.manual_seed(0)
    args = [torch.randn(512, 1024), torch.randn(4096, 1024) * 0.03, torch.randn(4096) * 0.1,
            torch.randn(1024, 4096) * 0.015, torch.randn(1024) * 0.1, torch.randn(1024) * 0.1 + 1,
            torch.randn(1024) * 0.1]
    args = [a.requires_grad_() for a in args]
    grad = torch.randn(512, 1024)
    compiled = framejit.compile(mlp)

    # Same gradients first.
    step(mlp, args, grad)
    expected = [a.grad.clone() for a in args]
    step(compiled, args, grad)
    for a, e in zip(args, expected):
        torch.testing.assert_close(a.grad, e, rtol=2e-3, atol=2e-3)
    s = framejit.stats(mlp)
    assert s["fallbacks"] == 0 and s["graphs"] == 2, (s, framejit.fallbacks(mlp))

    contenders = {"eager": mlp, "framejit": compiled}
    for fn in contenders.values():  # warm-up
        for _ in range(3):
            step(fn, args, grad)
    times = {name: [] for name in contenders}
    for _ in range(opts.rounds):
        for name, fn in contenders.items():
            t0 = time.perf_counter()
            step(fn, args, grad)
            times[name].append(time.perf_counter() - t0)
    result = {}
    for name, fn in contenders.items():
        total, extra = saved_bytes(fn, args)
        result[name] = {"median_ms": statistics.median(times[name]) * 1e3,
                        "saved_mb": total / 2**20, "saved_beyond_inputs_mb": extra / 2**20}
        print(f"mlp_train {name:9s} {result[name]['median_ms']:8.2f} ms   saved {total / 2**20:7.1f} MB "
              f"({extra / 2**20:.1f} MB beyond the inputs and weights)")
    print(f"speedup over eager: {result['eager']['median_ms'] / result['framejit']['median_ms']:.2f}x")
    if opts.json:
        with open(opts.json, "w") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
