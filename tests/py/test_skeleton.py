"""The walking skeleton end to end: the issue's headline function, caching,
fusion, fallbacks, pure-Python recursion and bad input, against eager PyTorch."""
import time

import pytest
import torch

import framejit
from conftest import assert_same, run_python


def f(x, y):
    return torch.relu(x * y + 1).exp() - y


SHAPES = [(7,), (3, 4), (2, 3, 5), (1, 1), (0, 4), (), (33, 65)]


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_headline_function_matches_eager(shape):
    cf = framejit.compile(f)
    x, y = torch.randn(shape), torch.randn(shape)
    assert_same(cf(x, y), f(x, y))
    s = framejit.stats(f)
    assert s["compiles"] == 1 and s["graphs"] == 1 and s["fallbacks"] == 0
    x2, y2 = torch.randn(shape), torch.randn(shape)
    assert_same(cf(x2, y2), f(x2, y2))
    assert framejit.stats(f)["cache_hits"] == 1
    assert framejit.stats(f)["compiles"] == 1


def test_transposed_input():
    cf = framejit.compile(f)
    x = torch.randn(6, 5).t()  # non-contiguous
    y = torch.randn(5, 6)
    assert not x.is_contiguous()
    assert_same(cf(x, y), f(x, y))
    assert framejit.stats(f)["graphs"] == 1


@pytest.mark.parametrize("xs,ys", [((4, 1), (1, 5)), ((3, 4), (4,)), ((2, 1, 3), (5, 1)), ((), (3,)),
                                   ((1, 1, 7), (7,)), ((7,), (1, 1, 7)), ((1, 5), (3, 1))])
def test_broadcast_pair(xs, ys):
    cf = framejit.compile(f)
    x, y = torch.randn(xs), torch.randn(ys)
    assert_same(cf(x, y), f(x, y))
    assert framejit.stats(f)["graphs"] == 1


def test_one_graph_and_one_fused_loop_in_the_ir():
    out = run_python(
        "import torch, framejit\n"
        "def f(x, y):\n"
        "    return torch.relu(x * y + 1).exp() - y\n"
        "cf = framejit.compile(f)\n"
        "x, y = torch.randn(8, 16), torch.randn(8, 16)\n"
        "torch.testing.assert_close(cf(x, y), f(x, y), rtol=1e-5, atol=1e-6)\n"
        "print(framejit.stats(f))\n",
        env={"FRAMEJIT_LOG": "ir"})
    assert out.returncode == 0, out.stderr
    ir = out.stderr.split("optimized LLVM IR")[0]  # the IR as emitted
    defines = [line for line in ir.splitlines() if line.startswith("define ")]
    assert len(defines) == 1, out.stderr
    # One loop nest over x, y and the output only: no intermediate buffers.
    assert "%buf2 = " in ir and "%buf3 = " not in ir, ir
    # (The one stack slot allowed: the stop checks' budget, jit/codegen/lower_stop.cpp.)
    assert [line for line in ir.splitlines() if "alloca" in line and "stop.budget" not in line] == [], ir
    assert "'graphs': 1" in out.stdout


def test_new_sizes_reuse_the_dynamic_entry():
    cf = framejit.compile(f)
    for shape in [(4, 8), (4, 16), (9, 3), (2, 2)]:
        x, y = torch.randn(shape), torch.randn(shape)
        assert_same(cf(x, y), f(x, y))
    s = framejit.stats(f)
    assert (s["compiles"], s["cache_hits"]) == (1, 3)
    x, y = torch.randn(1, 8), torch.randn(1, 8)  # size 1 is specialized
    assert_same(cf(x, y), f(x, y))
    assert framejit.stats(f)["recompiles"] == 1


def test_repeated_call_is_a_cache_hit_and_new_shape_recompiles_when_static():
    cf = framejit.compile(f, dynamic=False)
    x, y = torch.randn(4, 8), torch.randn(4, 8)
    for _ in range(3):
        assert_same(cf(x, y), f(x, y))
    s = framejit.stats(f)
    assert (s["compiles"], s["cache_hits"], s["recompiles"]) == (1, 2, 0)
    x, y = torch.randn(4, 16), torch.randn(4, 16)
    assert_same(cf(x, y), f(x, y))
    s = framejit.stats(f)
    assert (s["compiles"], s["recompiles"]) == (2, 1)


def test_calling_the_original_function_stays_untouched():
    cf = framejit.compile(f)
    x, y = torch.randn(3), torch.randn(3)
    assert_same(f(x, y), cf(x, y))
    before = framejit.stats(f)
    f(x, y)
    assert framejit.stats(f) == before
    assert cf.__wrapped__ is f and cf.__name__ == "f"


def read_a_file(x, path):
    with open(path) as fh:
        n = len(fh.read())
    return x * n


def test_unsupported_code_falls_back_with_reason(tmp_path):
    p = tmp_path / "data.txt"
    p.write_text("hello")
    cf = framejit.compile(read_a_file)
    x = torch.randn(3)
    assert_same(cf(x, str(p)), read_a_file(x, str(p)))
    s = framejit.stats(read_a_file)
    assert s["fallbacks"] == 1 and s["compiles"] == 0
    (fb,) = framejit.fallbacks(read_a_file)
    assert "open" in fb.reason
    line = read_a_file.__code__.co_firstlineno + 1
    assert fb.location == f"{__file__}:{line}"


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


def test_pure_python_recursion_is_left_to_cpython_quickly():
    global fib
    original = fib
    fib = framejit.compile(original)  # the recursive calls go through the wrapper too
    try:
        start = time.perf_counter()
        assert fib(20) == 6765
        elapsed = time.perf_counter() - start
        s = framejit.stats(original)
        assert s["compiles"] == 0
        assert s["fallbacks"] <= framejit.config.fallback_limit
        assert elapsed < 1.0, f"fib(20) took {elapsed:.3f} s"
    finally:
        fib = original


def two(x, y):
    return x + y


@pytest.mark.parametrize("args,kwargs", [
    ((torch.ones(2),), {}),
    ((torch.ones(2), torch.ones(2), torch.ones(2)), {}),
    ((torch.ones(2),), {"z": 1}),
    ((torch.ones(2), torch.ones(2)), {"x": 1}),
])
def test_wrong_argument_counts_raise_what_eager_raises(args, kwargs):
    cf = framejit.compile(two)
    with pytest.raises(TypeError) as eager:
        two(*args, **kwargs)
    with pytest.raises(TypeError) as compiled:
        cf(*args, **kwargs)
    assert str(compiled.value) == str(eager.value)


@pytest.mark.parametrize("x,y", [
    ("a", torch.ones(2)),
    (torch.ones(2), [1, 2]),
    (torch.ones(3), torch.ones(4)),
    (None, None),
    (object(), 1),
])
def test_wrong_types_raise_what_eager_raises(x, y):
    cf = framejit.compile(f)
    with pytest.raises(Exception) as eager:
        f(x, y)
    with pytest.raises(Exception) as compiled:
        cf(x, y)
    assert type(compiled.value) is type(eager.value)
    assert str(compiled.value) == str(eager.value)
    # The process stays usable.
    a, b = torch.randn(2), torch.randn(2)
    assert_same(cf(a, b), f(a, b))


def test_requires_grad_input_compiles_its_backward():
    cf = framejit.compile(f)
    x = torch.randn(4, requires_grad=True)
    y = torch.randn(4)
    out = cf(x, y)
    out.sum().backward()
    x2 = x.detach().clone().requires_grad_()
    f(x2, y).sum().backward()
    torch.testing.assert_close(x.grad, x2.grad)
    s = framejit.stats(f)
    assert s["fallbacks"] == 0 and s["graphs"] == 2, s  # forward and backward


def test_hook_is_only_installed_during_compiled_calls():
    cf = framejit.compile(f)
    cf(torch.ones(2), torch.ones(2))
    assert not framejit._C.hook_installed()
