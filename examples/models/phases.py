"""Where a training step's time goes, eager against framejit.compile, for one zoo model:
the medians over 50 steps of forward+loss, backward and optimizer step (ms per step),
and under framejit the compiled forward and backward graphs' own time and each extern
op's gradient (framejit.extern.vjp: torch's backward run by the compiled backward).

    python examples/models/phases.py resnet"""
import collections
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import framejit  # noqa: E402
from framejit import _C, autograd, extern  # noqa: E402
from models import entry  # noqa: E402

spent = collections.Counter()


def timed(key, fn):
    def run(*args):
        start = time.perf_counter()
        try:
            return fn(*args)
        finally:
            spent[key if isinstance(key, str) else key(args)] += time.perf_counter() - start
    return run


def instrument():
    _C._set_extern(extern.extern_reason, extern.meta_call, timed(lambda a: "vjp " + a[0].__name__, extern.vjp),
                   torch.from_dlpack)
    f = autograd.CompiledGraphFunction
    f.forward = staticmethod(timed("graph forward", f.forward))
    f.backward = staticmethod(timed("graph backward", f.backward))


def stepper(e, compiled):
    model = e.make_model(0)
    run = framejit.compile(model) if compiled else model
    opt = e.make_optimizer(model)
    batch_size, size = e.SHAPES[0]
    batch = e.make_batch(batch_size, size, 0)
    model.train()

    def step():
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = e.loss(run, batch)
        t1 = time.perf_counter()
        loss.backward()
        t2 = time.perf_counter()
        opt.step()
        spent["step: forward+loss"] += t1 - t0
        spent["step: backward"] += t2 - t1
        spent["step: optimizer"] += time.perf_counter() - t2
    return step


def main(name, steps=50):
    e = entry(name)
    instrument()
    for compiled in (False, True):
        step = stepper(e, compiled)
        for _ in range(5):
            step()
        spent.clear()
        for _ in range(steps):
            step()
        print("framejit" if compiled else "eager", "ms per step:",
              ", ".join(f"{k} {v * 1e3 / steps:.3f}" for k, v in sorted(spent.items())))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "resnet")
