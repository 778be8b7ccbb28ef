"""Exceptions raised and caught inside a trace: a `raise` (in the frame or in a helper
it calls) that an `except` of a traced frame takes runs the handler in the trace, with
no graph break and no fallback; what no traced handler takes still raises eager's
exception. Each case is compared against eager on several inputs.

PYTEST_DONT_REWRITE: the traced functions' own `assert`s stay plain Python."""
import pytest
import torch

import framejit
from conftest import assert_same


def one_graph(fn, *args):
    e = framejit.explain(fn, *args)
    assert e.graph_breaks == [], [b.reason for b in e.graph_breaks]
    assert e.graph_count == 1
    framejit.reset()


def stats_clean(fn):
    s = framejit.stats(fn)
    assert (s["fallbacks"], s["graph_breaks"]) == (0, 0), s
    return s


def check(fn, inputs):
    cf = framejit.compile(fn)
    for args in inputs:
        assert_same(cf(*args), fn(*args))
    return stats_clean(fn)


# ---- raise and except in one frame ----


def except_in_frame(x, n):
    try:
        if n > 2:
            raise ValueError("big")
        y = x + 1
    except ValueError:
        y = x - 1
    return y * 2


def test_a_raise_caught_in_the_same_frame_is_traced():
    x = torch.randn(4)
    one_graph(except_in_frame, x, 3)
    one_graph(except_in_frame, x, 1)
    check(except_in_frame, [(torch.randn(4), 3), (torch.randn(5), 1), (torch.randn(3), 7)])


def _checked(x):
    if x.dim() != 2:
        raise TypeError(f"want a matrix, got {x.dim()} dims")
    return x.sum(0)


def except_from_helper(x):
    try:
        return _checked(x)
    except TypeError as e:
        assert "matrix" in str(e)
        return x * 3


def test_a_helper_that_raises_into_the_callers_handler():
    one_graph(except_from_helper, torch.randn(3))
    one_graph(except_from_helper, torch.randn(2, 3))
    check(except_from_helper, [(torch.randn(3),), (torch.randn(2, 3),), (torch.randn(5),)])


class _Dummy:
    # as torch's _dummy_type: a class whose __new__ always raises
    def __new__(cls, *args, **kwargs):
        raise RuntimeError(f"Tried to instantiate dummy base class {cls.__name__}")


def _capturing():
    try:
        return _Dummy()
    except Exception:
        return False


def probe_then_compute(x):
    if _capturing():
        return x
    return torch.relu(x) + 1


def test_a_class_whose_new_raises_caught_by_a_helper():
    # transformers' is_cuda_stream_capturing on a CPU build of torch
    one_graph(probe_then_compute, torch.randn(4))
    check(probe_then_compute, [(torch.randn(4),), (torch.randn(2, 3),)])


def nested_handlers(x, k):
    try:
        try:
            if k == 0:
                raise KeyError("k")
            if k == 1:
                raise IndexError("i")
            r = x + 1
        except KeyError:
            r = x + 2
    except LookupError:
        r = x + 3
    finally:
        r = r * 2
    return r


def test_nested_handlers_finally_and_a_base_class_match():
    for k in (0, 1, 2):
        one_graph(nested_handlers, torch.randn(3), k)
    check(nested_handlers, [(torch.randn(3), k) for k in (0, 1, 2, 0)])


def reraised(x, k):
    try:
        try:
            if k:
                raise ValueError("inner")
            return x + 1
        except ValueError:
            x = x * 10
            raise
    except ValueError:
        return x - 1


def test_a_bare_raise_in_a_handler_reaches_the_outer_handler():
    one_graph(reraised, torch.randn(3), 1)
    check(reraised, [(torch.randn(3), 1), (torch.randn(3), 0), (torch.randn(2), 1)])


def asserted(x, n):
    try:
        assert n < 3, "too many"
        return x + n
    except AssertionError:
        return x - n


def test_a_failing_assert_caught():
    one_graph(asserted, torch.randn(3), 5)
    check(asserted, [(torch.randn(3), 5), (torch.randn(3), 1)])


# ---- what no traced handler takes: eager's exception ----


def uncaught_from_helper(x):
    try:
        y = x + 1
    except ValueError:
        y = x
    return _checked(y)


def not_matching(x, n):
    try:
        if n:
            raise KeyError("missing")
        return x
    except ValueError:
        return x + 1


@pytest.mark.parametrize("fn,args", [(uncaught_from_helper, (torch.randn(3),)), (not_matching, (torch.randn(3), 1))])
def test_an_exception_no_traced_handler_takes_is_eagers(fn, args):
    with pytest.raises(Exception) as eager:
        fn(*args)
    cf = framejit.compile(fn)
    for _ in range(2):
        with pytest.raises(type(eager.value)) as got:
            cf(*args)
        assert str(got.value) == str(eager.value)


def returns_the_exception(x):
    try:
        raise ValueError("kept")
    except ValueError as e:
        err = e
    return x + 1, err


def test_an_exception_object_that_leaves_the_frame_is_a_fresh_one_each_call():
    cf = framejit.compile(returns_the_exception)
    x = torch.randn(3)
    (a, e1), (b, e2) = cf(x), cf(x)
    assert_same(a, x + 1)
    assert isinstance(e1, ValueError) and str(e1) == "kept"
    assert e1 is not e2


def in_handler_side_effects(x, log):
    try:
        raise ValueError("v")
    except ValueError:
        log.append(1)
        y = x.sin()
    log.append(2)
    return y


def test_side_effects_of_a_handler_in_order():
    got, want = [], []
    cf = framejit.compile(in_handler_side_effects)
    x = torch.randn(4)
    assert_same(cf(x, got), in_handler_side_effects(x, want))
    assert got == want


def _positive(v):
    if v < 0:
        raise ValueError("negative")
    return v > 1


def short_circuit(x, a, b):
    # all() stops at the first False; the generator's later items never run in eager
    try:
        ok = all(_positive(v) for v in (a, b))
    except ValueError:
        ok = None
    return x + 1, ok


def test_an_exception_of_a_generator_item_eager_never_reaches():
    cf = framejit.compile(short_circuit)
    x = torch.randn(3)
    for vals in ((0, -1), (2, 3), (2, -1)):
        assert_same(cf(x, *vals), short_circuit(x, *vals))


# ---- AttributeError that C code catches before any traced handler ----


class _Cfg:
    @property
    def scale(self):
        raise AttributeError("no scale configured")


class _WithGetattr:
    @property
    def scale(self):
        raise AttributeError("inner")

    def __getattr__(self, name):
        return 3.0


_CFG, _WG = _Cfg(), _WithGetattr()


def getattr_default_in_try(x):
    try:
        s = getattr(_CFG, "scale", 2.0)  # getattr's default, not the handler
    except AttributeError:
        s = 5.0
    return x * s


def getattr_hook_in_try(x):
    try:
        s = _WG.scale  # the class's __getattr__ answers, not the handler
    except AttributeError:
        s = 5.0
    return x * s


@pytest.mark.parametrize("fn", [getattr_default_in_try, getattr_hook_in_try])
def test_an_attribute_error_that_getattr_or_a_getattr_hook_catches(fn):
    cf = framejit.compile(fn)
    for shape in [(3,), (2, 2)]:
        x = torch.randn(shape)
        assert_same(cf(x), fn(x))


def handler_after_a_break(x, log):
    log.append(id(log) != 0)  # a graph break first (id()): the handler below cannot start over
    y = x + 1
    try:
        z = _checked(x)
    except TypeError:
        z = y * float(len(str(id(x))) > 0)  # id(): not traceable inside the handler
    return z


def test_an_untraceable_handler_after_a_graph_break_resumes_in_cpython():
    cf = framejit.compile(handler_after_a_break)
    for x in (torch.randn(3), torch.randn(2, 3), torch.randn(4)):
        got_log, want_log = [], []
        assert_same(cf(x, got_log), handler_after_a_break(x, want_log))
        assert got_log == want_log == [True]
    assert framejit.stats(handler_after_a_break)["fallbacks"] == 0


def test_except_with_a_tuple_of_classes():
    from conftest import compiled_whole

    def f(x, kind):
        try:
            if kind == 2:
                raise TypeError("t")
            if kind == 3:
                raise IndexError("i")
            return x
        except (TypeError, IndexError) as e:
            return x * 2, type(e).__name__

    compiled_whole(f, [(torch.randn(3), 2), (torch.randn(3), 3), (torch.randn(3), 4)])
