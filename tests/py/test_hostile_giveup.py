"""When framejit gives up on a function, what it compiled stays in use: a function
called with 1,000 dtype / rank / size combinations compiles cache_limit entries,
runs the others in CPython, and keeps its cache hits for the combinations that
compiled (as torch.compile does past its cache limit); stats() and explain() say so.
A function with nothing compiled is left to CPython for good."""
import itertools
import warnings

import pytest
import torch

import framejit
from conftest import assert_same

DTYPES = [torch.float32, torch.float64, torch.int32, torch.int64, torch.int16,
          torch.int8, torch.uint8, torch.bool, torch.float16, torch.bfloat16]


def scale_and_shift(x):
    return x * 2 + 1


def combination(dtype, rank, size):
    shape = [size] + [2] * (rank - 1)
    return torch.arange(size * 2 ** (rank - 1), dtype=torch.int64).reshape(shape).to(dtype)


@pytest.fixture
def limits():
    saved = framejit.config.cache_limit, framejit.config.fallback_limit
    yield
    framejit.config.cache_limit, framejit.config.fallback_limit = saved


def call_all(compiled, fn, combos):
    """Calls each combination; returns those whose call compiled an entry."""
    compiled_now = []
    for combo in combos:
        x = combination(*combo)
        before = framejit.stats(fn)["compiles"]
        assert_same(compiled(x), fn(x))
        if framejit.stats(fn)["compiles"] > before:
            compiled_now.append(combo)
    return compiled_now


def test_thousand_combinations_keep_the_compiled_ones(limits):
    # Static shapes: every (dtype, rank, size) is a combination of its own.
    combos = list(itertools.product(DTYPES, range(1, 11), range(1, 11)))
    assert len(combos) == 1000
    compiled = framejit.compile(scale_and_shift, dynamic=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the cache_limit warning
        compiled_combos = call_all(compiled, scale_and_shift, combos)
    s = framejit.stats(scale_and_shift)
    limit = framejit.config.cache_limit
    assert s["compiles"] == limit
    assert s["stopped_compiling"] == 1 and s["skipped"] == 0
    assert s["calls"] == 1000 and s["fallbacks"] == 1000 - limit
    # The compiled combinations, called again: each is a cache hit, still after the limit.
    hits = s["cache_hits"]
    assert len(compiled_combos) == limit
    for _ in range(3):
        call_all(compiled, scale_and_shift, compiled_combos)
    s2 = framejit.stats(scale_and_shift)
    assert s2["cache_hits"] == hits + 3 * limit
    assert s2["compiles"] == limit and s2["fallbacks"] == s["fallbacks"]
    # The others run in CPython without being traced again (no new fallback reasons).
    reasons = framejit.fallbacks(scale_and_shift)
    call_all(compiled, scale_and_shift, combos[500:520])
    assert framejit.fallbacks(scale_and_shift) == reasons
    assert framejit.stats(scale_and_shift)["compiles"] == limit
    status = framejit.explain(compiled, combination(torch.float32, 1, 3)).status
    assert status.startswith("stopped compiling") and f"{limit} cached entries" in status


def test_unsupported_combinations_do_not_disable_the_supported_ones(limits):
    # float16 does not compile (the same fallback every time); float32 does.
    compiled = framejit.compile(scale_and_shift)
    half, single = torch.ones(3, dtype=torch.float16), torch.ones(3)
    for _ in range(5):
        assert_same(compiled(half), scale_and_shift(half))
        assert_same(compiled(single), scale_and_shift(single))
    s = framejit.stats(scale_and_shift)
    assert s["compiles"] == 1 and s["cache_hits"] == 4
    assert s["stopped_compiling"] == 1 and s["fallbacks"] == 5
    assert "compiling" in str(framejit.explain(compiled, single))


def test_cache_limit_keeps_earlier_entries(limits):
    # The BERT note: past cache_limit the entries already compiled are still used.
    framejit.config.cache_limit = 3
    compiled = framejit.compile(scale_and_shift, dynamic=False)
    sizes = [(n,) for n in range(2, 12)]
    with pytest.warns(RuntimeWarning, match="cache_limit"):
        for s in sizes:
            x = torch.ones(s)
            assert_same(compiled(x), scale_and_shift(x))
    st = framejit.stats(scale_and_shift)
    assert st["compiles"] == 3 and st["fallbacks"] == len(sizes) - 3
    for _ in range(4):
        for s in sizes[:3]:
            x = torch.ones(s)
            assert_same(compiled(x), scale_and_shift(x))
    assert framejit.stats(scale_and_shift)["cache_hits"] == st["cache_hits"] + 12


def pure_python(n):
    return sum(range(n))


def test_nothing_compiled_is_skipped_for_good(limits):
    compiled = framejit.compile(pure_python)
    for n in range(6):
        assert compiled(n) == pure_python(n)
    s = framejit.stats(pure_python)
    assert s["skipped"] == 1 and s["stopped_compiling"] == 0 and s["compiles"] == 0
    assert s["fallbacks"] == framejit.config.fallback_limit  # then calls bypass framejit
    assert framejit.explain(compiled, 3).status.startswith("skipped")
    framejit.reset()
    assert framejit.stats(pure_python)["skipped"] == 0
    assert compiled(4) == 6 and framejit.stats(pure_python)["fallbacks"] == 1


def test_global_stats_count_code_objects_that_gave_up(limits):
    a = framejit.compile(scale_and_shift)
    b = framejit.compile(pure_python)
    half = torch.ones(2, dtype=torch.float16)
    a(torch.ones(2))
    for _ in range(3):
        a(half)
        b(3)
    s = framejit.stats()
    assert s["stopped_compiling"] == 1 and s["skipped"] == 1
    framejit.reset()
    assert framejit.stats() == {k: 0 for k in framejit.stats()}
