"""framejit's demo: compile a small tensor function, run it, and show what
framejit made of it (result, graph, counters)."""
import time

import torch

import framejit


def f(x, y):
    return torch.relu(x * y + 1).exp() - y


def main():
    torch.manual_seed(0)
    x, y = torch.randn(4, 5), torch.randn(4, 5)
    cf = framejit.compile(f)

    t0 = time.perf_counter()
    out = cf(x, y)
    first_ms = (time.perf_counter() - t0) * 1e3
    eager = f(x, y)
    torch.testing.assert_close(out, eager, rtol=1e-5, atol=1e-6)
    cf(x, y)  # the same shapes again: a cache hit

    print("framejit demo: f(x, y) = torch.relu(x * y + 1).exp() - y")
    print(f"\ncompiled result (first call, trace + compile: {first_ms:.1f} ms):")
    print(out)
    print(f"\nequal to eager: {torch.allclose(out, eager, rtol=1e-5, atol=1e-6)}")
    print("\ngraph:")
    print(framejit.explain(f, x, y).graphs[0].rstrip())
    print("\ncounters:", framejit.stats(f))


if __name__ == "__main__":
    main()
