"""Shared helpers: eager comparison and a clean framejit state per test."""
import os
import subprocess
import sys

import pytest
import torch

import framejit

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# The interpreter command for child processes: with -S when this one runs with it, so
# that a child imports the same framejit as the tests (a worktree's build on
# PYTHONPATH rather than the main checkout's editable install found through site).
PYTHON = [sys.executable, "-S"] if sys.flags.no_site else [sys.executable]
# tests/ on the path: a test may use the corpus's classes (tests/corpus) rather than copy them.
if os.path.join(ROOT, "tests") not in sys.path:
    sys.path.insert(0, os.path.join(ROOT, "tests"))


@pytest.fixture(autouse=True)
def fresh_framejit():
    framejit.reset()
    yield
    framejit.reset()


def assert_same(actual, expected):
    """framejit's result against eager's: same structure, dtype, shape; float32
    values within 1e-5 relative, integers and bools bit-exact."""
    if isinstance(expected, torch.Tensor):
        assert isinstance(actual, torch.Tensor), f"expected a tensor, got {type(actual)}"
        assert actual.dtype == expected.dtype
        assert actual.shape == expected.shape
        if expected.dtype.is_floating_point:
            torch.testing.assert_close(actual, expected, rtol=1e-5, atol=1e-6, equal_nan=True)
        else:
            assert torch.equal(actual, expected)
    elif isinstance(expected, (tuple, list)):
        assert type(actual) is type(expected)
        assert len(actual) == len(expected)
        for a, e in zip(actual, expected):
            assert_same(a, e)
    elif isinstance(expected, dict):
        assert type(actual) is type(expected)
        assert list(actual) == list(expected)  # the same keys, in eager's order
        for k in expected:
            assert_same(actual[k], expected[k])
    elif type(expected).__name__ == "ndarray":  # NumPy's, by its own rules
        assert type(actual) is type(expected), f"expected an ndarray, got {type(actual)}"
        assert_same(torch.from_numpy(actual.copy()), torch.from_numpy(expected.copy()))
    else:
        assert type(actual) is type(expected) and actual == expected


def same_outcome(compiled, fn, *args, errors=(Exception,)):
    """compiled(*args) against fn(*args): the same result, or the same exception (type
    and message) where eager raises one of `errors`."""
    import re
    try:
        want = fn(*args)
    except errors as e:
        with pytest.raises(type(e), match=re.escape(str(e))):
            compiled(*args)
        return
    assert_same(compiled(*args), want)


def run_python(code, env=None):
    """Runs a snippet in a fresh interpreter (for FRAMEJIT_LOG, which is read at import)."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run(PYTHON + ["-c", code], capture_output=True, text=True,
                          env=full_env, timeout=300)


def probe(code, timeout=60, env=None, args=(), cwd=None, input=None):
    """Runs a snippet in its own interpreter for the hostile-condition probes: a hang
    past `timeout` seconds or a death by signal (a crash, an abort) fails the test
    instead of stopping the run. Returns the finished process (stdout, stderr, code)."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    try:
        r = subprocess.run(PYTHON + ["-c", code, *args], capture_output=True, text=True,
                           env=full_env, timeout=timeout, cwd=cwd, input=input)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"probe hung for {timeout} s; output so far:\n{e.stdout}\n{e.stderr}")
    if r.returncode < 0:
        pytest.fail(f"probe killed by signal {-r.returncode}:\n{r.stdout}\n{r.stderr[-3000:]}")
    return r


def compiled_whole(fn, calls, compiles=None):
    """The compiled fn against eager on fresh copies of each argument tuple, with no
    graph break and no fallback (and `compiles` compiles where given); the compiled
    results."""
    import copy
    import framejit
    framejit.reset()
    cf = framejit.compile(fn)
    out = []
    for args in calls:
        got, want = cf(*copy.deepcopy(args)), fn(*copy.deepcopy(args))
        assert_same(got, want)
        out.append(got)
    s = framejit.stats(fn)
    assert (s["fallbacks"], s["graph_breaks"]) == (0, 0) and s["compiles"] >= 1, s
    if compiles is not None:
        assert s["compiles"] == compiles, s
    return out


def one_graph(fn, *args, **kwargs):
    """fn traced on these arguments is one graph with no break (explain); resets framejit."""
    e = framejit.explain(fn, *args, **kwargs)
    assert e.graph_breaks == [], [b.reason for b in e.graph_breaks]
    assert e.graph_count == 1
    framejit.reset()


def run_both(fn, make_args, calls=3):
    """fn eagerly and compiled on equal fresh arguments; the results, the lists
    afterwards and any exception must match."""
    cf = framejit.compile(fn)
    for k in range(calls):
        torch.manual_seed(k)
        want_args = make_args(k)
        torch.manual_seed(k)
        got_args = make_args(k)
        want = got = want_exc = got_exc = None
        try:
            want = fn(*want_args)
        except Exception as e:  # noqa: BLE001 - compared below
            want_exc = e
        try:
            got = cf(*got_args)
        except Exception as e:  # noqa: BLE001
            got_exc = e
        assert type(got_exc) is type(want_exc) and str(got_exc) == str(want_exc)
        for a, b in zip(got_args, want_args):
            if isinstance(b, list):
                assert len(a) == len(b), (a, b)
                assert_same(list(a), list(b))
        if want_exc is None:
            assert_same(got, want)
    return framejit.stats(fn)
