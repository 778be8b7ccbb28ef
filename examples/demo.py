"""framejit's demo: compile ordinary PyTorch code, run it, and show what framejit made
of it: results against eager, graphs, counters, and speed measured in the same run."""
import math
import statistics
import time

import torch

import framejit


def f(x, y):
    return torch.relu(x * y + 1).exp() - y


def sgd_step(w, g, buf, lr, momentum, weight_decay):
    """One SGD step with momentum and weight decay, written as plain tensor code."""
    g = g + weight_decay * w
    buf = buf * momentum + g
    return w - lr * buf, buf


class Gate(torch.nn.Module):
    def __init__(self, width):
        super().__init__()
        self.register_buffer("bias", torch.randn(width))
        self.act = torch.nn.SiLU()

    def forward(self, x):
        return self.act(x + self.bias) * torch.sigmoid(x)


def median_ms(fn, *args, rounds=15):
    fn(*args)
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def main():
    torch.manual_seed(0)
    torch.set_num_threads(torch.get_num_threads())

    # 1. The headline function: one fused loop.
    x, y = torch.randn(4, 5), torch.randn(4, 5)
    cf = framejit.compile(f)
    t0 = time.perf_counter()
    out = cf(x, y)
    first_ms = (time.perf_counter() - t0) * 1e3
    torch.testing.assert_close(out, f(x, y), rtol=1e-5, atol=1e-6)
    cf(x, y)
    print("framejit demo")
    print("\n1. f(x, y) = torch.relu(x * y + 1).exp() - y")
    print(f"compiled result (first call, trace + compile: {first_ms:.1f} ms):")
    print(out)
    print(f"equal to eager: {torch.allclose(out, f(x, y), rtol=1e-5, atol=1e-6)}")
    print("graph:")
    print(framejit.explain(f, x, y).graphs[0].rstrip())
    print("counters:", framejit.stats(f))

    # 2. A training-style loop: the learning rate changes at every step.
    n = 1 << 20
    w, buf = torch.randn(n), torch.zeros(n)
    w_eager, buf_eager = w.clone(), buf.clone()
    step = framejit.compile(sgd_step)
    steps = 50
    for i in range(steps):
        lr = 0.05 * 0.5 * (1 + math.cos(math.pi * i / steps))  # cosine schedule
        g = torch.randn(n)
        w, buf = step(w, g, buf, lr, 0.9, 1e-4)
        w_eager, buf_eager = sgd_step(w_eager, g, buf_eager, lr, 0.9, 1e-4)
    torch.testing.assert_close(w, w_eager, rtol=1e-5, atol=1e-6)
    s = framejit.stats(sgd_step)
    g = torch.randn(n)
    eager_ms = median_ms(sgd_step, w, g, buf, 0.01, 0.9, 1e-4)
    jit_ms = median_ms(step, w, g, buf, 0.01, 0.9, 1e-4)
    print(f"\n2. SGD with momentum over {steps} steps, a new learning rate each step, {n} parameters")
    print(f"compiles {s['compiles']}, recompiles {s['recompiles']}, cache hits {s['cache_hits']}; "
          f"result equal to eager")
    print(f"one step: eager {eager_ms:.2f} ms, framejit {jit_ms:.2f} ms ({eager_ms / jit_ms:.1f}x)")

    # 3. A module over varying sequence lengths: sizes are symbolic.
    gate = Gate(64)
    cg = framejit.compile(gate)
    for seq in (5, 17, 33, 64, 9):
        xs = torch.randn(seq, 64)
        torch.testing.assert_close(cg(xs), gate(xs), rtol=1e-5, atol=1e-6)
    s = framejit.stats(Gate.forward)
    print("\n3. a module (buffer + SiLU submodule + sigmoid) over sequence lengths 5, 17, 33, 64, 9")
    print(f"compiles {s['compiles']}, cache hits {s['cache_hits']}, fallbacks {s['fallbacks']}; "
          f"results equal to eager")
    print("guards:")
    for line in framejit.explain(gate.forward, torch.randn(8, 64)).guards:
        print("  " + line)


if __name__ == "__main__":
    main()
