"""Graph breaks and data-dependent branches as steps of the plan: the frame still
runs compiled, with eager's results, exceptions and side effects, in order."""
import types

import pytest
import torch

import framejit
from conftest import assert_same


def no_fallbacks(fn):
    s = framejit.stats(fn)
    assert s["fallbacks"] == 0, framejit.fallbacks(fn)
    return s


# ---- call steps ----

def print_mid(x):
    y = x * 2
    print("y sum sign", y.shape, "first")
    z = y + 1
    print("second")
    return z.relu()


def test_print_in_the_middle(capsys):
    cf = framejit.compile(print_mid)
    for _ in range(3):
        x = torch.randn(4, 3)
        expected = print_mid(x)
        eager_out = capsys.readouterr().out
        assert_same(cf(x), expected)
        assert capsys.readouterr().out == eager_out  # once per call, in order
    s = no_fallbacks(print_mid)
    assert s["compiles"] == 1 and s["graph_breaks"] == 2 and s["cache_hits"] == 2


def print_once(x):
    y = x + 1
    print("between")
    return y * y


def test_one_print_is_one_graph_break(capsys):
    cf = framejit.compile(print_once)
    x = torch.randn(5)
    for _ in range(3):
        assert_same(cf(x), print_once(x))
    assert capsys.readouterr().out == "between\n" * 6
    s = no_fallbacks(print_once)
    assert s["graph_breaks"] == 1 and s["compiles"] == 1


LOG = []


def log_around(x):
    LOG.append("start")
    y = x.sigmoid()
    LOG.append(y)
    z = y * 3 - x
    LOG.append(z)
    LOG.append(len(LOG))
    return z


def test_log_append_around_tensor_work():
    cf = framejit.compile(log_around)
    for _ in range(3):
        x = torch.randn(6)
        LOG.clear()
        expected = log_around(x)
        eager_log = list(LOG)
        LOG.clear()
        assert_same(cf(x), expected)
        assert len(LOG) == len(eager_log)
        for a, e in zip(LOG, eager_log):
            assert_same(a, e)
    s = no_fallbacks(log_around)
    assert s["compiles"] == 1 and s["graph_breaks"] == 4


def opaque_helper(t):
    return t.numpy().copy().tolist()  # ndarray.copy() is not traced: the call runs as a call step


def unsupported_call(x):
    y = x + 1
    values = opaque_helper(y)
    return y * 2, values


def test_unsupported_function_is_a_call_step():
    cf = framejit.compile(unsupported_call)
    for n in (3, 4):
        x = torch.randn(n)
        assert_same(cf(x), unsupported_call(x))
    s = no_fallbacks(unsupported_call)
    assert s["graph_breaks"] >= 1


def make_tensor(n):
    return torch.arange(n, dtype=torch.float32)


def uses_call_result(x):
    t = make_tensor(x.shape[0] if False else 4)
    t2 = torch.ones(2) if False else t
    return x + t2


def test_tensor_result_of_a_call_feeds_the_next_segment():
    cf = framejit.compile(uses_call_result)
    x = torch.randn(4)
    for _ in range(2):
        assert_same(cf(x), uses_call_result(x))


class Box:
    scale = 2.0


BOX = Box()


def set_scale(v):
    BOX.scale = v


def read_after_call(x, v):
    y = x + 1
    set_scale(v)
    return y * BOX.scale


def test_state_read_after_an_opaque_call_is_checked_there():
    cf = framejit.compile(read_after_call)
    x = torch.randn(3)
    for v in (2.0, 3.0, 5.0, 3.0):
        BOX.scale = 2.0
        expected = read_after_call(x, v)
        BOX.scale = 2.0
        assert_same(cf(x, v), expected)
    assert framejit.stats(read_after_call)["fallbacks"] == 0


def call_raises(x):
    y = x * 2
    int("not a number")
    return y


def test_an_opaque_call_that_raises():
    cf = framejit.compile(call_raises)
    x = torch.randn(2)
    for _ in range(2):
        with pytest.raises(ValueError) as eager:
            call_raises(x)
        with pytest.raises(ValueError) as compiled:
            cf(x)
        assert str(compiled.value) == str(eager.value)


def test_explain_lists_graph_breaks():
    e = framejit.explain(print_once, torch.randn(3))
    assert len(e.graph_breaks) == 1
    b = e.graph_breaks[0]
    assert "print" in b.reason
    assert b.location.endswith(":%d" % (print_once.__code__.co_firstlineno + 2))
    text = str(e)
    assert "print" in text and b.location in text
    # The graphs on both sides of the break, and the guards, in the same text.
    assert "--- graph 0 ---" in text and "--- graph 1 ---" in text and e.graph_count == 2
    assert "guards:" in text and "tensor 'x'" in text


# ---- raise ----

def raise_after(x, limit):
    y = (x * 2).abs()
    if limit < 0:
        raise ValueError("limit must be non-negative")
    return y


def test_raise_after_tensor_work():
    cf = framejit.compile(raise_after)
    x = torch.randn(4)
    for limit in (-1, -2, -3):
        with pytest.raises(ValueError) as eager:
            raise_after(x, limit)
        with pytest.raises(ValueError) as compiled:
            cf(x, limit)
        assert type(compiled.value) is type(eager.value)
        assert str(compiled.value) == str(eager.value)
    s = no_fallbacks(raise_after)
    assert s["compiles"] == 1
    assert_same(cf(x, 3), raise_after(x, 3))


# ---- branches ----

def data_branch(t, x):
    y = x * 2
    if t > 0:
        y = y + t
    else:
        y = y - 1
    return y.relu()


def test_data_dependent_if_alternates_without_fallback():
    cf = framejit.compile(data_branch)
    x = torch.randn(5)
    for v in (1.0, -1.0, 2.0, -3.0, 0.5, -0.5):
        t = torch.tensor([v])
        assert_same(cf(t, x), data_branch(t, x))
    s = no_fallbacks(data_branch)
    assert s["compiles"] == 1 and s["recompiles"] == 0
    assert s["cache_hits"] == 5


def branch_then_print(t, x):
    if (t * 2) < 1:
        print("small")
        return x - t
    print("large")
    return x + t


def test_branch_with_breaks_in_each_outcome(capsys):
    cf = framejit.compile(branch_then_print)
    x = torch.randn(3)
    for v in (0.0, 5.0, 0.1, 7.0):
        t = torch.tensor(v)
        expected = branch_then_print(t, x)
        eager_out = capsys.readouterr().out
        assert_same(cf(t, x), expected)
        assert capsys.readouterr().out == eager_out
    no_fallbacks(branch_then_print)


# ---- arguments and results ----

def flag_fn(x, flag):
    if flag:
        return x + 1
    if flag is None:
        return x * 0
    return x - 1


def test_bool_flag_true_false_none():
    cf = framejit.compile(flag_fn)
    x = torch.randn(3)
    for flag in (True, False, None, True, False, None):
        assert_same(cf(x, flag), flag_fn(x, flag))
    s = no_fallbacks(flag_fn)
    assert s["compiles"] <= 3


def unpack_pair(xs):
    a, b = xs
    return a * b + a


def test_list_then_tuple_of_tensors_unpacked():
    cf = framejit.compile(unpack_pair)
    a, b = torch.randn(3), torch.randn(3)
    assert_same(cf([a, b]), unpack_pair([a, b]))
    assert_same(cf((a, b)), unpack_pair((a, b)))
    assert_same(cf([b, a]), unpack_pair([b, a]))
    s = no_fallbacks(unpack_pair)
    assert s["compiles"] == 2  # one for the list, one for the tuple


def loop_over_list(xs, log):
    total = xs[0] * 0
    for t in xs:
        total = total + t
    log.append(len(xs))
    xs.append(total)
    return total, xs


def test_list_argument_mutated_by_a_call_step():
    cf = framejit.compile(loop_over_list)
    for n in (2, 3):
        ts = [torch.randn(4) for _ in range(n)]
        xs_e, xs_c, log_e, log_c = list(ts), list(ts), [], []
        want = loop_over_list(xs_e, log_e)
        got = cf(xs_c, log_c)
        assert_same(got[0], want[0])
        assert got[1] is xs_c and len(xs_c) == len(xs_e) and log_c == log_e


_REMEMBERED = []


def remember(d):
    _REMEMBERED.append(d)  # list.append of a global: the call is a graph break
    d["seen"] = len(_REMEMBERED)


def closure_frame(x, n):
    ys = [x * k for k in range(n)]  # x is a cell variable: the comprehension closes over it
    d = {k: [] for k in ("a", "b")}
    remember(d)  # a break that receives (and changes) a dict the frame built
    z = ys[-1] + 1
    g = lambda: x + z  # noqa: E731  a closure over the frame's cells, after the break
    return g(), d, len(d)  # len() of the dict the call changed: CPython from the break on


def test_a_frame_with_cell_variables_breaks_and_resumes():
    cf = framejit.compile(closure_frame)
    for n in (2, 3, 3):
        x = torch.randn(3)
        _REMEMBERED.clear()
        want = closure_frame(x, n)
        got = cf(x, n)
        assert_same(got[0], want[0])
        assert got[1] is _REMEMBERED[-1]  # the very dict the call received, as in eager
        assert got[1] == {**want[1], "seen": 2} and got[2] == want[2]
    s = no_fallbacks(closure_frame)
    assert s["graph_breaks"] >= 1 and s["cache_hits"] == 1, s


def closure_after_a_branch(x, n):
    ys = [x * k for k in range(n)]  # x is a cell variable
    remember({})  # a break
    if ys[-1].sum() > 0:  # a plan branch: its segment runs before the outcome is traced
        y = ys[-1] * 2
    else:
        y = ys[-1] - 1
    g = lambda: x + y  # noqa: E731  a closure after the branch: CPython runs from here
    return g(), len(_REMEMBERED)


def test_a_closure_after_a_break_and_a_branch_runs_in_cpython_from_there():
    cf = framejit.compile(closure_after_a_branch)
    for sign in (1, -1, 1, -1):
        x = torch.rand(4) * sign + sign
        _REMEMBERED.clear()
        want = closure_after_a_branch(x, 3)
        _REMEMBERED.clear()
        got = cf(x, 3)
        assert_same(got[0], want[0])
        assert got[1] == want[1] == 1  # the break's call ran once
    s = no_fallbacks(closure_after_a_branch)
    assert s["cache_hits"] >= 2, s


class Token:
    """A C method on an attribute of a user object (transformers' CompileableContextVar)."""
    def __init__(self):
        import contextvars
        self.var = contextvars.ContextVar("framejit_test", default=None)

    def set(self, value):
        return self.var.set(value)

    def reset(self, token):
        self.var.reset(token)


TOKEN = Token()


def with_context(x, **flags):
    collected = {k: [] for k in ("hidden", "attn") if flags.get(k)}
    token = TOKEN.set(collected)  # ContextVar.set inside an inlined method: traced (ops_contextvars.cpp)
    try:
        y = (x * 2).relu()
        seen = TOKEN.var.get() is collected
    finally:
        TOKEN.reset(token)
    return y + 1, seen, TOKEN.var.get()


def test_a_context_variable_set_inside_a_helper_is_traced():
    cf = framejit.compile(with_context)
    for _ in range(3):
        x = torch.randn(5)
        assert_same(cf(x, hidden=True), with_context(x, hidden=True))
    s = no_fallbacks(with_context)
    assert (s["compiles"], s["cache_hits"], s["graph_breaks"]) == (1, 2, 0), s


def test_a_context_variable_still_set_at_a_graph_break_is_an_opaque_call():
    # CPython code at the break could read the variable: the frame is traced again with
    # ContextVar calls as graph breaks, which run them for real.
    seen = []

    def reads(v):
        seen.append(v.get())

    def f(x):
        token = TOKEN.set("on")
        reads(TOKEN.var)  # not traced (list.append of a closure's list): a graph break
        y = x * 2
        TOKEN.reset(token)
        return y, TOKEN.var.get()
    cf = framejit.compile(f)
    for _ in range(2):
        x = torch.randn(3)
        assert_same(cf(x), f(x))
    assert seen == ["on"] * 4
    s = no_fallbacks(f)
    assert s["compiles"] == 1 and s["graph_breaks"] >= 1, s


_CALLS = []


def flaky(fail):
    _CALLS.append(fail)  # list.append of a global: the call is a graph break
    if fail:
        raise ValueError("flaky failed")


def guarded(x, fail):
    y = x * 2
    try:
        flaky(fail)  # a break inside a try block, raising on some calls
        z = y + 1
    except ValueError as e:
        _CALLS.append(str(e))
        z = y - 1
    finally:
        _CALLS.append("finally")
    return z.relu()


@pytest.mark.parametrize("first", [False, True])
def test_a_break_inside_try_raises_into_the_frames_handler(first):
    cf = framejit.compile(guarded)
    x = torch.randn(4)
    for fail in (first, not first, first, True, False, True):
        _CALLS.clear()
        want = guarded(x, fail)
        eager_calls = list(_CALLS)
        _CALLS.clear()
        assert_same(cf(x, fail), want)
        assert _CALLS == eager_calls  # the handler and the finally block ran, in order
    assert framejit.stats(guarded)["cache_hits"] >= 3


def index_in_try(x, i):
    y = x * 2
    try:
        flaky(False)  # a break inside the try block
        z = y[i] + 1  # out of range for some i: eager raises IndexError, which is caught
    except IndexError:
        z = y.sum()
    return z


def test_a_traced_op_raising_after_a_break_inside_try_is_caught():
    cf = framejit.compile(index_in_try)
    x = torch.randn(5)
    for i in (9, 2, 7, 3, -8, 4):
        assert_same(cf(x, i), index_in_try(x, i))
    assert framejit.stats(index_in_try)["fallbacks"] == 0, framejit.fallbacks(index_in_try)


def odd_raises(i):
    _CALLS.append(i)
    if i % 2:
        raise KeyError(i)


def loop_with_try(x, n):
    acc = x * 0
    for i in range(n):
        try:
            odd_raises(i)  # raises at i = 1 already while the first call is traced
            acc = acc + x * i
        except KeyError:
            acc = acc - 1
    return acc


def test_a_break_that_raises_into_a_handler_while_tracing_is_cached():
    # The trace ends at the call that raised (CPython runs the handler and the rest);
    # later calls run that plan and trace what follows a call that returns, once.
    cf = framejit.compile(loop_with_try)
    x = torch.randn(3)
    for _ in range(3):
        _CALLS.clear()
        want = loop_with_try(x, 4)
        eager_calls = list(_CALLS)
        _CALLS.clear()
        assert_same(cf(x, 4), want)
        assert _CALLS == eager_calls
    s = no_fallbacks(loop_with_try)
    assert (s["compiles"], s["cache_hits"]) == (1, 2), s


def uncaught(x):
    y = x.exp()
    try:
        flaky(True)
    finally:
        _CALLS.append("finally")
    return y


def test_an_exception_a_finally_block_does_not_catch_still_raises():
    cf = framejit.compile(uncaught)
    for _ in range(3):
        _CALLS.clear()
        with pytest.raises(ValueError, match="flaky failed") as info:
            cf(torch.randn(3))
        assert _CALLS == [True, "finally"]
        # The traceback goes through the frame and the call, as eager's does.
        names = [entry.name for entry in info.traceback]
        assert names[-2:] == ["uncaught", "flaky"], names


class Config:
    def __init__(self):
        self.scale = 2.0
        self.shift = 1.0


CONFIG = Config()


def use_config(x):
    return x * CONFIG.scale + CONFIG.shift


def test_global_config_attributes_change_between_calls():
    cf = framejit.compile(use_config)
    x = torch.randn(4)
    try:
        for scale, shift in ((2.0, 1.0), (3.0, 1.0), (3.0, -2.0), (2.0, 1.0)):
            CONFIG.scale, CONFIG.shift = scale, shift
            assert_same(cf(x), use_config(x))
    finally:
        CONFIG.scale, CONFIG.shift = 2.0, 1.0
    no_fallbacks(use_config)


def two_params(a, b):
    a2 = a * 2
    return a2 + b, a2 - b


def test_same_tensor_for_two_parameters():
    cf = framejit.compile(two_params)
    a, b = torch.randn(3), torch.randn(3)
    assert_same(cf(a, b), two_params(a, b))
    assert_same(cf(a, a), two_params(a, a))
    assert_same(cf(b, b), two_params(b, b))
    no_fallbacks(two_params)


def kw_defaults(x, scale=2.0, *, shift=1, clamp=False):
    y = x * scale + shift
    if clamp:
        y = y.clamp(min=0.0)
    return y


def test_keyword_arguments_and_defaults():
    cf = framejit.compile(kw_defaults)
    x = torch.randn(5)
    assert_same(cf(x), kw_defaults(x))
    assert_same(cf(x, 3.0), kw_defaults(x, 3.0))
    assert_same(cf(x, shift=4), kw_defaults(x, shift=4))
    assert_same(cf(x, scale=0.5, clamp=True), kw_defaults(x, scale=0.5, clamp=True))
    assert_same(cf(x=x, shift=-1, clamp=False), kw_defaults(x=x, shift=-1, clamp=False))
    no_fallbacks(kw_defaults)


def mixed_results(x, n):
    y = x + 1
    return {"y": y, "n": n, "name": "out", "pair": (y * 2, 3), "items": [x, "s", n + 1]}


def test_dict_list_tuple_results_mixing_tensors_ints_strings():
    cf = framejit.compile(mixed_results)
    x = torch.randn(3)
    for n in (5, 7):
        got, want = cf(x, n), mixed_results(x, n)
        assert type(got) is dict and list(got) == list(want)
        for k in want:
            assert_same(got[k], want[k])
    no_fallbacks(mixed_results)


def nested_returns(x):
    t = (x, x * 2)
    return [t, "tag", 4], t


def test_list_tuple_results_keep_shared_objects():
    cf = framejit.compile(nested_returns)
    x = torch.randn(2)
    got, want = cf(x), nested_returns(x)
    assert_same(got, want)
    assert got[0][0] is got[1]


def float_of(x, a):
    return x / a, a * 2.0, x + float(a)


def test_call_result_that_changes_resumes_with_the_new_value():
    # float() is a call step; its result differs from the traced one on later calls:
    # the rest of the frame runs in CPython with the new value.
    cf = framejit.compile(float_of)
    x = torch.randn(4)
    for a in (2.0, 3.0, float("inf"), 0.5, 2.0):
        assert_same(cf(x, a), float_of(x, a))
    assert framejit.stats(float_of)["compiles"] == 1


def sum_branch(x):
    if x.sum() > 0:
        return x * 2
    return -x


def test_branch_on_a_reduction_alternates():
    cf = framejit.compile(sum_branch)
    for sign in (1.0, -1.0, 1.0, -1.0):
        x = torch.rand(6) * sign
        assert_same(cf(x), sum_branch(x))
    s = no_fallbacks(sum_branch)
    assert s["compiles"] == 1 and s["cache_hits"] == 3


def item_across_break(x):
    n = x.sum().item()
    print("n is", round(n, 3))
    return x * n, n


def test_number_read_from_a_tensor_lives_across_a_break(capsys):
    cf = framejit.compile(item_across_break)
    for _ in range(3):
        x = torch.rand(4)
        want = item_across_break(x)
        eager_out = capsys.readouterr().out
        got = cf(x)
        assert capsys.readouterr().out == eager_out
        assert_same(got[0], want[0])
        assert type(got[1]) is float and got[1] == pytest.approx(want[1], rel=1e-6)
    no_fallbacks(item_across_break)


def with_after_break(x):
    y = x + 1
    print("before")
    with torch.no_grad():
        z = y * 2
    items = [1]
    del items[0]  # not traced: the rest runs in CPython
    return z - 1


def test_untraceable_code_after_a_break_resumes_in_cpython(capsys):
    cf = framejit.compile(with_after_break)
    for _ in range(3):
        x = torch.randn(3)
        want = with_after_break(x)
        eager_out = capsys.readouterr().out
        assert_same(cf(x), want)
        assert capsys.readouterr().out == eager_out
    s = no_fallbacks(with_after_break)
    assert s["compiles"] == 1


def test_sizes_that_do_not_broadcast_raise_before_a_break(capsys):
    # Found by the fuzzer: a segment runs while the trace goes on, so the graph's size
    # assumptions (s0 == s1 for a + b) must hold before it runs, and be guarded after.
    def f(a, b):
        c = a + b
        print("after the add")
        return c * 2

    cf = framejit.compile(f)
    for sizes in ((5, 6), (4, 4), (7, 3), (4, 4)):
        a, b = torch.randn(sizes[0]), torch.randn(sizes[1])
        try:
            want = ("ok", f(a, b))
        except RuntimeError as e:
            want = ("exc", str(e))
        eager_out = capsys.readouterr().out
        try:
            got = ("ok", cf(a, b))
        except RuntimeError as e:
            got = ("exc", str(e))
        assert capsys.readouterr().out == eager_out
        assert got[0] == want[0]
        if got[0] == "ok":
            assert torch.equal(got[1], want[1])
        else:
            assert got[1] == want[1]


class _Cfg:
    scale = 2.0
    flag = True


def test_values_read_after_a_break_that_change_trace_a_continuation():
    # What the trace reads after an opaque call is checked there; when it changed, the
    # call's continuations are tried, or a new one traced from the call on (the call
    # is not run again), rather than running the rest of the frame in CPython.
    seen = []

    def note(t):
        seen.append(t.sum().item())

    def f(x):
        y = x * 2
        note(y)
        if _Cfg.flag:
            return y * _Cfg.scale
        return y - 1
    f.__globals__["note"] = note
    cf = framejit.compile(f)
    settings = [(2.0, True), (3.0, True), (3.0, False), (2.0, True), (3.0, True), (5.0, False), (3.0, True)]
    for i, (scale, flag) in enumerate(settings):
        _Cfg.scale, _Cfg.flag = scale, flag
        x = torch.full((3,), float(i))
        got = cf(x)
        assert len(seen) == 1  # the opaque call ran once
        want = f(x)
        assert_same(got, want)
        assert seen[0] == seen[1]
        seen.clear()
    s = no_fallbacks(f)
    # continuations: (flag, scale) = (True, 2.0) traced first, (True, 3.0), (False, any)
    assert (s["compiles"], s["recompiles"], s["deopts"]) == (1, 2, 0), s


def test_past_the_cache_limit_a_changed_read_runs_the_rest_in_cpython():
    def f(x):
        y = x + 1
        print("", end="")
        return y * _Cfg.scale
    cf = framejit.compile(f)
    old = framejit.config.cache_limit
    framejit.config.cache_limit = 3
    try:
        for k in range(6):
            _Cfg.scale = float(k + 10)
            x = torch.ones(2)
            assert_same(cf(x), f(x))
    finally:
        _Cfg.scale = 2.0
        framejit.config.cache_limit = old
    s = no_fallbacks(f)
    # the first trace and 2 continuations (3 in all); the other 3 values run in CPython
    assert (s["recompiles"], s["deopts"]) == (2, 3), s
