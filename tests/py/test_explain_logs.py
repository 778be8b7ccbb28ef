"""framejit.explain, FRAMEJIT_LOG channels, and golden graph printouts."""
import os

import pytest
import torch

import framejit
from conftest import ROOT, run_python

GOLDEN = os.path.join(ROOT, "tests", "golden")


def f(x, y):
    return torch.relu(x * y + 1).exp() - y


def test_explain_reports_graph_ops_and_guards():
    x, y = torch.randn(2, 3), torch.randn(2, 3)
    e = framejit.explain(f, x, y)
    assert e.graph_count == 1
    assert e.ops == ["aten.mul.Tensor", "aten.add.Tensor", "aten.relu.default",
                     "aten.exp.default", "aten.sub.Tensor"]
    assert any("tensor 'x'" in g and "size=[s0, s1]" in g for g in e.guards)
    assert "L['x'].size()[1] == L['y'].size()[1]" in e.guards  # x * y broadcasts s1 against s3
    assert any("global 'torch'" in g for g in e.guards)
    assert e.graph_breaks == []
    torch.testing.assert_close(e.result, f(x, y))
    assert "aten.relu.default" in str(e)
    # explain does not fill the cache
    assert framejit.stats(f)["compiles"] == 0


def test_explain_reports_fallback_reason():
    def g(x):
        print("side effect")
        return x + 1

    e = framejit.explain(g, torch.ones(2))
    assert e.graph_count == 1  # print is a graph break; x + 1 after it still compiles
    assert len(e.graph_breaks) == 1
    assert "print" in e.graph_breaks[0].reason
    assert e.graph_breaks[0].location.endswith(f":{g.__code__.co_firstlineno + 1}")


def test_recompile_reason_in_verbose_guard_log():
    out = run_python(
        "import torch, framejit\n"
        "def f(x):\n"
        "    return x + 1\n"
        "cf = framejit.compile(f, dynamic=False)\n"
        "cf(torch.ones(4, 8)); cf(torch.ones(4, 16))\n",
        env={"FRAMEJIT_LOG": "recompiles"})
    assert out.returncode == 0, out.stderr
    assert "tensor 'x' size mismatch at dim 1: expected 8, actual 16" in out.stderr


def test_bytecode_log_shows_instructions_and_stack():
    out = run_python(
        "import torch, framejit\n"
        "def f(x, y):\n"
        "    return torch.relu(x * y + 1)\n"
        "framejit.compile(f)(torch.ones(2), torch.ones(2))\n",
        env={"FRAMEJIT_LOG": "bytecode,graph"})
    assert out.returncode == 0, out.stderr
    lines = [l for l in out.stderr.splitlines() if "[framejit:interp]" in l]
    ops = [l.split()[2] for l in lines if len(l.split()) > 2]
    for name in ("LOAD_GLOBAL", "LOAD_ATTR", "LOAD_FAST", "BINARY_OP", "CALL", "RETURN_VALUE"):
        assert name in ops, out.stderr
    load = next(l for l in lines if " LOAD_GLOBAL " in l)
    assert "stack: [NULL, <module 'torch'" in load
    binop = next(l for l in lines if " BINARY_OP " in l)
    assert "stack: [NULL, <built-in method relu" in binop and "%2:f32[s0]]" in binop
    assert "aten.relu.default(%" in out.stderr  # the graph channel


def golden_cases():
    return sorted(n for n in os.listdir(GOLDEN) if n.endswith(".txt"))


@pytest.mark.parametrize("name", golden_cases())
def test_golden_graph(name):
    source, expected = open(os.path.join(GOLDEN, name)).read().split("\n---\n")
    scope = {"torch": torch}
    exec(source, scope)
    e = framejit.explain(scope["fn"], *scope["args"])
    assert e.graph_count == 1
    assert e.graphs[0] == expected, e.graphs[0]


def test_explain_lists_recompile_reasons():
    def g(x, n):
        if n > 3:
            return x * n
        return x - n

    cf = framejit.compile(g)
    cf(torch.ones(2), 5)
    cf(torch.ones(2), 2)
    e = framejit.explain(g, torch.ones(2), 7)
    assert e.recompile_reasons == ["L['n'] > 3 is no longer true"]
    assert "L['n'] > 3 is no longer true" in str(e)


def test_log_file(tmp_path):
    log = tmp_path / "fj.log"
    out = run_python(
        "import torch, framejit\n"
        "framejit.compile(lambda x: x + 1)(torch.ones(2))\n",
        env={"FRAMEJIT_LOG": "graph", "FRAMEJIT_LOG_FILE": str(log)})
    assert out.returncode == 0, out.stderr
    assert "aten.add.Tensor" in log.read_text()
    assert "aten.add.Tensor" not in out.stderr


def test_perf_log_says_where_compile_time_goes():
    code = (
        "import torch, framejit\n"
        "f = framejit.compile(lambda x, y: torch.sigmoid(x * y) + torch.tanh(y))\n"
        "x = torch.randn(8, 16)\n"
        "f(x, x); f(x, x)\n"
    )
    out = run_python(code, {"FRAMEJIT_LOG": "perf"})
    assert out.returncode == 0, out.stderr
    lines = [l for l in out.stderr.splitlines() if "perf:" in l]
    # One compile: the backend's breakdown, a line per kernel (one here), then the
    # frame's total; the cache hit logs nothing.
    assert len(lines) == 3, out.stderr
    assert "1 kernels" in lines[0] and "optimize" in lines[0] and "machine code" in lines[0]
    assert "_k0: " in lines[1] and "IR instructions" in lines[1]
    assert "<lambda>" in lines[2] and "trace and compile" in lines[2]


def test_a_transposed_weight_costs_no_kernel():
    # linear(x, w, b) reads w.t() in place: one kernel (the bias add), not a copy too.
    code = (
        "import torch, framejit, torch.nn.functional as F\n"
        "f = framejit.compile(lambda x, w, b: F.linear(x, w, b))\n"
        "f(torch.randn(4, 8), torch.randn(6, 8), torch.randn(6))\n"
    )
    out = run_python(code, {"FRAMEJIT_LOG": "perf"})
    assert out.returncode == 0, out.stderr
    line = next(l for l in out.stderr.splitlines() if "perf:" in l)
    assert ", 1 kernels" in line, out.stderr
