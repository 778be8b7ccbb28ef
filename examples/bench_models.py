"""The model zoo (examples/models) under eager, framejit.compile and torch.compile, side
by side in one process: the first call's time (trace and compile included), then the
steady-state median of an eval forward (no_grad) and of a training step (forward, loss,
backward, optimizer step), each with its ratio to eager. Each backend gets its own
identical copy of the model; rounds interleave the backends so that machine noise
hits them alike.

Usage: python examples/bench_models.py [names ...] [--rounds 15] [--no-inductor] [--json PATH]
       (names: gpt bert resnet cnn rnn hf.gpt2 hf.bert; default all)"""
import argparse
import json
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import framejit  # noqa: E402
from models import NAMES, entry  # noqa: E402


def timed(fn):
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def runners(e, backend, seed=0):
    """(forward(), train_step()) of a fresh copy of entry e under `backend`."""
    model = e.make_model(seed)
    run = model
    if backend == "framejit":
        run = framejit.compile(model)
    elif backend == "inductor":
        run = torch.compile(model)
    opt = e.make_optimizer(model)
    batch, size = e.SHAPES[0]
    data = e.make_batch(batch, size, seed)

    def forward():
        model.eval()
        with torch.no_grad():
            e.output(run, data)

    def train_step():
        model.train()
        opt.zero_grad(set_to_none=True)
        e.loss(run, data).backward()
        opt.step()
    return forward, train_step


def bench(name, backends, rounds):
    e = entry(name)
    framejit.reset()
    row = {"model": name}
    steps = {b: runners(e, b) for b in backends}
    for kind, index in (("forward", 0), ("train", 1)):
        for b in backends:
            row[f"{kind}_first_{b}"] = timed(steps[b][index])
        times = {b: [] for b in backends}
        for _ in range(rounds):
            for b in backends:
                times[b].append(timed(steps[b][index]))
        for b in backends:
            row[f"{kind}_{b}"] = statistics.median(times[b])
    total = framejit.stats()
    row["framejit_counters"] = {k: total[k] for k in ("graphs", "graph_breaks", "fallbacks", "recompiles")}
    return row


def ms(s):
    return f"{s * 1e3:9.2f}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("names", nargs="*", default=list(NAMES))
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--no-inductor", action="store_true")
    ap.add_argument("--json")
    opts = ap.parse_args()
    backends = ["eager", "framejit"] + ([] if opts.no_inductor else ["inductor"])
    print(f"model zoo, medians of {opts.rounds} rounds (ms); x = eager / backend (above 1: faster than eager)")
    head = f"{'model':9} {'kind':8}" + "".join(f" {b:>9}" for b in backends)
    head += "".join(f" {'x ' + b:>11}" for b in backends[1:])
    head += "".join(f" {'1st ' + b:>13}" for b in backends)
    print(head)
    rows = []
    for name in opts.names:
        row = bench(name, backends, opts.rounds)
        rows.append(row)
        for kind in ("forward", "train"):
            line = f"{name:9} {kind:8}" + "".join(f" {ms(row[f'{kind}_{b}'])}" for b in backends)
            line += "".join(f" {row[f'{kind}_eager'] / row[f'{kind}_{b}']:11.2f}" for b in backends[1:])
            line += "".join(f" {ms(row[f'{kind}_first_{b}']):>13}" for b in backends)
            print(line, flush=True)
        print(f"{'':9} framejit: {row['framejit_counters']}")
    if opts.json:
        with open(opts.json, "w") as f:
            json.dump({"backends": backends, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
