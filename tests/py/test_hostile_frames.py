"""The user's frames under framejit, against eager: traceback entries of errors raised
in compiled code (names, files, line numbers, in order), what warnings and
sys._getframe() see from code a compiled frame calls, and debuggers: under
sys.settrace / sys.setprofile a compiled function runs in CPython, with eager's
events, and compiles again once the trace function is gone."""
import inspect
import sys
import textwrap
import traceback
import warnings

import pytest
import torch

import framejit
from conftest import assert_same, probe


class Obj:
    scale = 2.0


OBJ = Obj()
CALLS = []


def helper_raises(y):
    raise ValueError("in the helper")


def helper_deep(y):
    return helper_raises(y) + 1


def helper_twice(y):
    return helper_deep(y) * 2


def raise_on_third_call(y):
    CALLS.append(1)
    if len(CALLS) % 3 == 0:
        raise KeyError("third call")
    return y


# ---- each case: (function, arguments per call); every call is run three times
# (trace, cache hit, cache hit) under framejit and once in eager.

def raise_in_frame(x):
    y = x + 1
    raise ValueError("in the frame")


def raise_after_compute(x):
    y = x * 2
    if y.shape[0] == 3:
        raise ValueError("shape 3")
    return y


def inlined_one_level(x):
    y = x + 1
    return helper_raises(y)


def inlined_two_levels(x):
    y = x + 1
    return helper_deep(y)


def inlined_three_levels(x):
    y = x - 1
    z = helper_twice(y)
    return z


def shape_mismatch(x, w):
    y = x + 1
    return y @ w


def helper_matmul(y, w):
    return y @ w


def inlined_shape_mismatch(x, w):
    y = x + 1
    return helper_matmul(y, w)


def shape_mismatch_after_break(x, w):
    y = x + 1
    CALLS.append(0)
    return torch.mm(y, w)


def missing_attribute(x):
    y = x + 1
    return y * OBJ.missing


def missing_attribute_getattr(x):
    y = x + 1
    return y * getattr(OBJ, "missing")


def missing_method(x):
    y = x + 1
    return OBJ.missing_method(y)


def call_non_callable(x):
    y = x + 1
    n = 3
    return n(y)


def call_non_callable_attr(x):
    y = x + 1
    return OBJ.scale(y)


def raise_after_break(x):
    y = x + 1
    CALLS.append(0)
    z = y * 2
    raise ValueError("after the break")


def attr_after_break(x):
    y = x + 1
    CALLS.append(0)
    z = y * OBJ.missing
    return z


def opaque_raises_on_a_cache_hit(x):
    y = x + 1
    z = raise_on_third_call(y)
    return z * 2


@framejit.compile
def compiled_inner(y):
    z = y * 3
    CALLS.append(0)
    raise ValueError("in a compiled callee")


def calls_a_compiled_function(x):
    y = x + 1
    return compiled_inner(y)


def frames_of(fn, *args):
    """(exception type, message, [(name, file, line), ...]) of fn(*args), the
    caller's own entry left out."""
    try:
        fn(*args)
    except Exception as e:  # noqa: BLE001: any exception is compared with eager's
        tb = traceback.extract_tb(e.__traceback__)[1:]
        return type(e).__name__, str(e), [(f.name, f.filename, f.lineno) for f in tb]
    return None


CASES = {
    "raise_in_frame": (raise_in_frame, [(torch.ones(3),)]),
    "raise_after_compute": (raise_after_compute, [(torch.ones(3),)]),
    "inlined_one_level": (inlined_one_level, [(torch.ones(3),)]),
    "inlined_two_levels": (inlined_two_levels, [(torch.ones(3),)]),
    "inlined_three_levels": (inlined_three_levels, [(torch.ones(3),)]),
    "shape_mismatch": (shape_mismatch, [(torch.ones(2, 3), torch.ones(7, 3))]),
    "shape_mismatch_at_run_time": (shape_mismatch, [(torch.ones(2, 3), torch.ones(3, 4)),
                                                    (torch.ones(2, 3), torch.ones(5, 4))]),
    "inlined_shape_mismatch": (inlined_shape_mismatch, [(torch.ones(2, 3), torch.ones(3, 4)),
                                                        (torch.ones(2, 3), torch.ones(5, 4))]),
    "shape_mismatch_after_break": (shape_mismatch_after_break, [(torch.ones(2, 3), torch.ones(3, 4)),
                                                                (torch.ones(2, 3), torch.ones(5, 4))]),
    "missing_attribute": (missing_attribute, [(torch.ones(3),)]),
    "missing_attribute_getattr": (missing_attribute_getattr, [(torch.ones(3),)]),
    "missing_method": (missing_method, [(torch.ones(3),)]),
    "call_non_callable": (call_non_callable, [(torch.ones(3),)]),
    "call_non_callable_attr": (call_non_callable_attr, [(torch.ones(3),)]),
    "raise_after_break": (raise_after_break, [(torch.ones(3),)]),
    "compiled_callee": (calls_a_compiled_function, [(torch.ones(3),)]),
    "attr_after_break": (attr_after_break, [(torch.ones(3),)]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_traceback_frames_match_eager(name):
    fn, calls = CASES[name]
    compiled = framejit.compile(fn)
    for args in calls:
        want = frames_of(fn, *args)
        assert want is not None or len(calls) > 1
        for _ in range(3):
            assert frames_of(compiled, *args) == want


def test_traceback_of_an_opaque_call_raising_on_a_cache_hit():
    compiled = framejit.compile(opaque_raises_on_a_cache_hit)
    x = torch.ones(3)
    CALLS.clear()
    want = [frames_of(opaque_raises_on_a_cache_hit, x) for _ in range(3)]
    assert want[2] is not None and want[2][2][0][0] == "opaque_raises_on_a_cache_hit"
    CALLS.clear()
    got = [frames_of(compiled, x) for _ in range(3)]
    assert got == want
    assert framejit.stats(opaque_raises_on_a_cache_hit)["cache_hits"] >= 1


def test_traceback_entry_points_at_the_raising_instruction():
    # tb_lasti (the instruction) and the column range agree with eager's, not only the line.
    compiled = framejit.compile(call_non_callable)
    x = torch.ones(3)

    def positions(fn):
        try:
            fn(x)
        except TypeError as e:
            tb = e.__traceback__.tb_next
            summary = traceback.extract_tb(e.__traceback__)[1]
            return tb.tb_lasti, tb.tb_lineno, summary.colno, summary.end_colno
        return None

    want = positions(call_non_callable)
    assert want is not None
    assert positions(compiled) == want
    assert positions(compiled) == want


# ---- warnings and sys._getframe() from code a compiled frame calls

def warn_here(x):
    y = x + 1
    warnings.warn("from the frame")
    return y * 2


def warn_at_caller(x):
    y = x + 1
    warnings.warn("at the caller", stacklevel=2)
    return y * 2


def warn_helper(msg):
    warnings.warn(msg, stacklevel=2)


def warn_from_helper(x):
    y = x + 1
    warn_helper("from the helper")
    return y * 2


def warn_twice_from_helper(x):
    y = x + 1
    warn_helper("first")
    z = y * 3
    warn_helper("second")
    return z


def caller_line_helper(y):
    f = sys._getframe(1)
    g = inspect.currentframe().f_back
    assert f is g
    SEEN.append((f.f_code.co_name, f.f_code.co_filename, f.f_lineno,
                 f.f_back.f_code.co_name if f.f_back else None))
    return y


SEEN = []


def calls_a_frame_reader(x):
    y = x + 1
    z = caller_line_helper(y)
    return z * 2


def warnings_of(fn, *args):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = fn(*args)
    return out, [(str(w.message), w.filename, w.lineno) for w in caught]


@pytest.mark.parametrize("fn", [warn_here, warn_at_caller, warn_from_helper, warn_twice_from_helper],
                         ids=lambda f: f.__name__)
def test_warnings_report_eagers_file_and_line(fn):
    x = torch.ones(3)
    want_out, want = warnings_of(fn, x)
    assert want and all(w[1] == __file__ for w in want)
    compiled = framejit.compile(fn)
    for _ in range(3):  # trace, then cache hits
        out, got = warnings_of(compiled, x)
        assert got == want
        assert_same(out, want_out)
    assert framejit.stats(fn)["cache_hits"] >= 1


def test_getframe_in_a_helper_sees_the_compiled_frame():
    x = torch.ones(3)
    SEEN.clear()
    want = calls_a_frame_reader(x)
    compiled = framejit.compile(calls_a_frame_reader)
    for _ in range(3):
        assert_same(compiled(x), want)
    assert framejit.stats(calls_a_frame_reader)["cache_hits"] >= 1
    # The compiled frame, at the line of the call; its caller is this test, as in eager
    # (framejit's wrapper is C code and leaves no frame).
    assert SEEN[1:] == [SEEN[0]] * 3
    assert SEEN[0][0] == "calls_a_frame_reader" and SEEN[0][3] == "test_getframe_in_a_helper_sees_the_compiled_frame"


def make_closure_reader():
    scale = 2.0
    lists = []

    def read_locals(y):
        caller = sys._getframe(1)
        lists.append(dict(caller.f_locals))
        return y

    def uses_closure(x):
        y = x * scale
        z = read_locals(y)
        return z + len(lists)

    return uses_closure, lists


def test_frame_locals_of_a_compiled_closure_are_readable():
    # A helper reads the compiled frame's locals (inspect, pytest's rendering): the
    # arguments and the closure's values are there, nothing crashes.
    fn, seen = make_closure_reader()
    compiled = framejit.compile(fn)
    x = torch.ones(3)
    for k in range(3):
        out = compiled(x)
        assert_same(out, x * 2 + (k + 1))
        assert torch.equal(seen[-1]["x"], x)
        assert seen[-1]["scale"] == 2.0
    assert framejit.stats(fn)["cache_hits"] >= 1


def closure_raises():
    bias = 1.5

    def f(x):
        y = x + bias
        n = 3
        return n(y)

    return f


def test_traceback_with_locals_of_a_compiled_closure():
    fn = closure_raises()
    compiled = framejit.compile(fn)
    for _ in range(2):
        with pytest.raises(TypeError) as info:
            compiled(torch.ones(3))
        te = traceback.TracebackException.from_exception(info.value, capture_locals=True)
        frame = te.stack[-1]
        assert frame.name == "f" and "bias" in frame.locals and "x" in frame.locals


# ---- debuggers: settrace, setprofile

def traced_body(x):
    y = x + 1
    z = y * 2
    if z.shape[0] > 1:
        z = z - 1
    return z


def traced_with_break(x):
    y = x + 1
    CALLS.append(0)
    z = y * 2
    return z


def record_trace(fn, *args, profile=False):
    events = []
    names = {"traced_body", "traced_with_break"}

    def tracer(frame, event, arg):
        if frame.f_code.co_name in names:
            events.append((event, frame.f_code.co_name, frame.f_lineno))
        return tracer

    def profiler(frame, event, arg):
        if frame.f_code.co_name in names:
            events.append((event, frame.f_code.co_name, getattr(arg, "__name__", None)))

    if profile:
        sys.setprofile(profiler)
    else:
        sys.settrace(tracer)
    try:
        out = fn(*args)
    finally:
        sys.setprofile(None)
        sys.settrace(None)
    return out, events


@pytest.mark.parametrize("fn", [traced_body, traced_with_break], ids=lambda f: f.__name__)
@pytest.mark.parametrize("profile", [False, True], ids=["settrace", "setprofile"])
def test_trace_and_profile_events_match_eager(fn, profile):
    x = torch.ones(3)
    compiled = framejit.compile(fn)
    assert_same(compiled(x), fn(x))  # compiled and cached before the trace function comes
    before = framejit.stats(fn)
    want_out, want = record_trace(fn, x, profile=profile)
    assert any(e[0] == ("line" if not profile else "call") for e in want)
    for _ in range(2):
        out, got = record_trace(compiled, x, profile=profile)
        assert got == want
        assert_same(out, want_out)
    after = framejit.stats(fn)
    assert after["fallbacks"] == before["fallbacks"] and after["cache_hits"] == before["cache_hits"]
    # Not a fallback: once the trace function is gone, the function runs compiled again.
    for _ in range(3):
        assert_same(compiled(x), want_out)
    final = framejit.stats(fn)
    assert final["cache_hits"] == before["cache_hits"] + 3
    assert final["fallbacks"] == 0 and final["skipped"] == 0 and final["stopped_compiling"] == 0


def test_first_call_under_settrace_compiles_later():
    # The first calls ever happen under a tracer: they run in CPython and leave
    # nothing behind; the first call without it compiles.
    x = torch.ones(3)
    compiled = framejit.compile(traced_body)
    for _ in range(5):
        _, events = record_trace(compiled, x)
        assert ("line", "traced_body", traced_body.__code__.co_firstlineno + 1) in events
    assert framejit.stats(traced_body)["compiles"] == 0
    assert framejit.stats(traced_body)["fallbacks"] == 0
    assert_same(compiled(x), traced_body(x))
    assert framejit.stats(traced_body)["compiles"] == 1


PDB_SCRIPT = textwrap.dedent("""
    import importlib, pdb, sys, torch, framejit
    sys.path.insert(0, sys.argv[2])
    f = importlib.import_module("pdb_target").f
    fn = framejit.compile(f) if sys.argv[1] == "compiled" else f
    x = torch.ones(2)
    if sys.argv[1] == "compiled":
        fn(x); fn(x)  # cached before the debugger comes
    p = pdb.Pdb(nosigint=True)
    print(p.set_break(f.__code__.co_filename, 3))
    print("result", p.runcall(fn, x).tolist())
    print("fallbacks", framejit.stats(f)["fallbacks"])
""")


def test_pdb_stops_at_a_breakpoint_in_a_compiled_function(tmp_path):
    (tmp_path / "pdb_target.py").write_text("def f(x):\n    y = x + 1\n    z = y * 2\n    return z\n")
    commands = "c\np y.tolist()\nn\np z.tolist()\nc\n"
    eager = probe(PDB_SCRIPT, timeout=120, args=["eager", str(tmp_path)], input=commands)
    got = probe(PDB_SCRIPT, timeout=120, args=["compiled", str(tmp_path)], input=commands)
    assert eager.returncode == 0, eager.stderr
    assert got.returncode == 0, got.stderr
    assert "[2.0, 2.0]" in eager.stdout and "[4.0, 4.0]" in eager.stdout
    assert got.stdout == eager.stdout


BREAKPOINT_SCRIPT = textwrap.dedent("""
    import importlib, sys, torch, framejit
    sys.path.insert(0, sys.argv[2])
    f = importlib.import_module("bp_target").f
    fn = framejit.compile(f) if sys.argv[1] == "compiled" else f
    x = torch.ones(2)
    print("result", fn(x).tolist())  # the first call traces: the debugger starts mid-trace
    print("result", fn(x).tolist())  # a cache hit
    print("result", fn(x).tolist())
""")


def test_breakpoint_in_a_compiled_function_stops_as_in_eager(tmp_path):
    (tmp_path / "bp_target.py").write_text(
        "def f(x):\n    y = x + 1\n    breakpoint()\n    z = y * 2\n    return z\n")
    commands = "p y.tolist()\nn\np z.tolist()\nc\n" * 4
    env = {"PYTHONBREAKPOINT": "pdb.set_trace"}
    eager = probe(BREAKPOINT_SCRIPT, timeout=120, args=["eager", str(tmp_path)], input=commands, env=env)
    got = probe(BREAKPOINT_SCRIPT, timeout=120, args=["compiled", str(tmp_path)], input=commands, env=env)
    assert eager.returncode == 0, eager.stderr
    assert got.returncode == 0, got.stderr
    assert eager.stdout.count("[2.0, 2.0]") >= 3 and "bp_target.py(4)f()" in eager.stdout
    assert got.stdout == eager.stdout
