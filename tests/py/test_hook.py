"""The frame hook and the CompiledFunction wrapper: what runs where, exceptions,
generators, methods, nesting, and living beside numba's LLVM in one process."""
import subprocess

import pytest
import torch

import framejit
from conftest import assert_same


def test_exception_inside_compiled_function_propagates_unchanged():
    def g(x):
        y = x * 2
        raise ValueError(f"bad value {y.shape[0]}")

    cf = framejit.compile(g)
    with pytest.raises(ValueError, match="bad value 3"):
        cf(torch.ones(3))
    # still usable afterwards
    with pytest.raises(ValueError, match="bad value 4"):
        cf(torch.ones(4))


def test_generator_function_runs_in_cpython():
    def gen(x):
        yield x + 1
        yield x * 2

    cf = framejit.compile(gen)
    x = torch.randn(3)
    assert_same(list(cf(x)), list(gen(x)))


def test_compiled_method_and_nested_compiled_calls():
    class M:
        def __init__(self):
            self.k = 3

        @framejit.compile
        def inner(self, x):
            return x * 2 + 1

    m = M()
    x = torch.randn(4)
    assert_same(m.inner(x), x * 2 + 1)

    inner = framejit.compile(lambda x: torch.sigmoid(x))

    def outer(x):
        return inner(x) + 1  # a compiled function called from a compiled one: inlined

    cf = framejit.compile(outer)
    assert_same(cf(x), torch.sigmoid(x) + 1)
    assert framejit.stats(inner)["compiles"] == 0
    assert framejit.stats(outer)["graphs"] == 1


def test_reset_clears_caches_and_counters():
    def g(x):
        return x - 1

    cf = framejit.compile(g)
    cf(torch.ones(2))
    cf(torch.ones(2))
    assert framejit.stats()["cache_hits"] == 1
    framejit.reset()
    assert framejit.stats() == {k: 0 for k in framejit.stats()}
    cf(torch.ones(2))
    assert framejit.stats(g)["compiles"] == 1


def test_cache_limit_falls_back_with_reason():
    def g(x, k):
        return x * k

    framejit.config.cache_limit = 2
    try:
        cf = framejit.compile(g)
        x = torch.ones(2)
        assert_same(cf(x, 0), x * 0)
        assert_same(cf(x, 1), x * 1)
        with pytest.warns(RuntimeWarning, match="cache_limit"):
            assert_same(cf(x, 4), x * 4)  # 0 and 1 are specialized: a third entry
        import warnings
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # the warning comes once
            assert_same(cf(x, 5), x * 5)
        s = framejit.stats(g)
        assert s["compiles"] == 2 and s["fallbacks"] == 2
        assert "cache_limit" in framejit.fallbacks(g)[-1].reason
    finally:
        framejit.config.cache_limit = 8


def test_config_rejects_bad_settings():
    with pytest.raises(AttributeError):
        framejit.config.no_such_setting = 1
    with pytest.raises(ValueError):
        framejit.config.cache_limit = 0
    with pytest.raises(TypeError):
        framejit.compile(42)


def test_llvm_symbols_stay_private():
    out = subprocess.run(["nm", "-D", "--defined-only", framejit._C.__file__],
                         capture_output=True, text=True, check=True).stdout
    exported = [line.split()[-1] for line in out.splitlines()]
    assert "PyInit__C" in exported
    assert not [s for s in exported if "llvm" in s.lower()], exported


def test_numba_and_framejit_in_one_process():
    import numba

    @numba.njit
    def nsum(a):
        s = 0.0
        for v in a:
            s += v
        return s

    def g(x):
        return torch.tanh(x) * 2

    cf = framejit.compile(g)
    x = torch.randn(100)
    assert_same(cf(x), g(x))
    assert abs(nsum(x.numpy()) - float(x.sum())) < 1e-3
    assert_same(cf(x + 1), g(x + 1))


def test_code_objects_that_torch_dynamo_touched_die_cleanly():
    # Dynamo stores state in its own code-extra slot; CPython 3.11 then calls
    # framejit's slot deleter with NULL when such a code object dies (this crashed).
    import gc

    ns = {}
    exec("import torch\ndef f(x):\n    return torch.sin(x) * 2\n", ns)
    x = torch.randn(8)
    torch.testing.assert_close(torch.compile(ns["f"], backend="eager")(x), torch.sin(x) * 2)
    torch._dynamo.reset()
    ns.clear()
    gc.collect()
    cf = framejit.compile(lambda t: t + 1)  # framejit still works afterwards
    torch.testing.assert_close(cf(x), x + 1)


def test_fullgraph_turns_a_fallback_into_an_error_with_reason_and_line():
    def g(x):
        y = x + 1
        print("side effect")
        return y

    cf = framejit.compile(g, fullgraph=True)
    with pytest.raises(framejit.GraphBreakError) as err:
        cf(torch.ones(2))
    line = g.__code__.co_firstlineno + 2
    assert "print" in str(err.value) and f"{__file__}:{line}" in str(err.value)
    ok = framejit.compile(lambda x: x * 2, fullgraph=True)
    assert_same(ok(torch.ones(3)), torch.ones(3) * 2)
