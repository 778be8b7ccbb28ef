"""try/except/else/finally, raise (caught and uncaught, in the frame and in helpers),
exception objects and messages, and with-blocks: torch.no_grad, enable_grad,
set_grad_enabled, inference_mode, contextlib helpers and user context managers."""
import contextlib

import torch

from corpus.registry import case, randn


def _grad_input(*shape):
    return lambda: torch.randn(*shape, requires_grad=True)


class ShapeError(ValueError):
    pass


def _check_square(x):
    if x.shape[0] != x.shape[1]:
        raise ShapeError(f"not square: {tuple(x.shape)}")
    return x


@case((randn(3), 1), (randn(3), 5))
def raise_caught_in_frame(x, n):
    try:
        if n > 2:
            raise ValueError("too big")
        y = x + n
    except ValueError:
        y = x - n
    return y


@case((randn(3), 1), (randn(3), 5))
def try_except_else(x, n):
    try:
        if n > 3:
            raise KeyError(n)
    except KeyError:
        return x * 0
    else:
        return x * n


@case((randn(3), 2), (randn(4), 3))
def try_finally_runs(x, n):
    log = []
    try:
        y = x * n
    finally:
        log.append("done")
    return y, log


@case((randn(3), 0), (randn(3), 4))
def try_except_finally(x, n):
    steps = []
    try:
        steps.append("try")
        if n == 0:
            raise ZeroDivisionError("n is zero")
        y = x / n
    except ZeroDivisionError:
        steps.append("except")
        y = x
    finally:
        steps.append("finally")
    return y, steps


@case((randn(3, 3),), (randn(2, 3),))
def raise_in_helper_caught(x):
    try:
        return _check_square(x).diagonal()
    except ShapeError as e:
        return x.flatten(), str(e)


@case((randn(3), 1), (randn(3), 2), (randn(3), 3))
def except_tuple_of_types(x, kind):
    try:
        if kind == 1:
            raise TypeError("t")
        if kind == 2:
            raise IndexError("i")
        return x
    except (TypeError, IndexError) as e:
        return x * 2, type(e).__name__


@case((randn(3), 1), (randn(3), 4))
def nested_try(x, n):
    try:
        try:
            if n > 2:
                raise RuntimeError("inner")
            y = x
        except KeyError:
            y = x * 100
    except RuntimeError as e:
        y = x * -1
        msg = e.args[0]
        return y, msg
    return y, ""


@case((randn(3), 1), (randn(3), 7))
def raise_uncaught(x, n):
    if n > 5:
        raise ValueError(f"n={n} is out of range")
    return x * n


@case((randn(3), 1), (randn(3), 7))
def reraise_from_except(x, n):
    try:
        if n > 5:
            raise KeyError("k")
    except KeyError as e:
        raise RuntimeError("lookup failed") from e
    return x


@case((randn(3), 2), (randn(3), 9))
def raise_custom_exception_subclass(x, n):
    try:
        if n > 4:
            raise ShapeError("bad")
    except ValueError as e:
        return x * 2, isinstance(e, ShapeError)
    return x, False


@case((randn(3), "a"), (randn(3), "z"))
def keyerror_from_dict(x, key):
    table = {"a": 1.0, "b": 2.0}
    try:
        w = table[key]
    except KeyError:
        w = -1.0
    return x * w


@case((randn(3), 1), (randn(3), 5))
def indexerror_from_list(x, i):
    vals = [x, x * 2, x * 3]
    try:
        return vals[i]
    except IndexError:
        return vals[-1]


@case((randn(3), 2), (randn(3), 0))
def zero_division_caught(x, n):
    try:
        r = 10 // n
    except ZeroDivisionError:
        r = 0
    return x * r


@case((randn(3), 2), (randn(3), 0))
def zero_division_uncaught(x, n):
    return x * (7 % n)


@case((randn(3), 2), (randn(4), -2))
def finally_overrides_nothing(x, n):
    try:
        return x * n
    finally:
        n = 0


@case((randn(3), [1, 2, 0, 4]), (randn(3), [5, 0]))
def except_then_continue(x, vals):
    total = 0.0
    for v in vals:
        try:
            total += 1.0 / v
        except ZeroDivisionError:
            continue
    return x * total


@case((randn(3), randn(4)), (randn(3), randn(3)))
def torch_error_caught(x, y):
    try:
        return x + y
    except RuntimeError:
        return x.sum() + y.sum()


@case((randn(2, 3), randn(3, 2)), (randn(2, 3), randn(2, 3)))
def torch_error_uncaught(x, y):
    return x @ y


@case((randn(3), "int"), (randn(3), "x"))
def value_error_from_int_conversion(x, s):
    try:
        k = int(s == "int" and "4" or s)
    except ValueError as e:
        return x, str(e)
    return x * k, ""


@case((randn(3), 3), (randn(3), 7))
def assertion_error_caught(x, n):
    try:
        assert n < 5, "limit"
    except AssertionError as e:
        return x * 0, str(e)
    return x, ""


@case((randn(3), 0), (randn(3), 1))
def exception_args_and_attrs(x, n):
    err = ValueError("bad value", n)
    return x + len(err.args), err.args[1]


@case((_grad_input(3),), (_grad_input(5),))
def no_grad_block(x):
    with torch.no_grad():
        y = x * 2
    z = x * 3
    return y, z, y.requires_grad, z.requires_grad


@case((_grad_input(3),), (_grad_input(4),))
def enable_grad_inside_no_grad(x):
    with torch.no_grad():
        a = x + 1
        with torch.enable_grad():
            b = x * 2
    return a, b


@case((_grad_input(3), True), (_grad_input(3), False))
def set_grad_enabled_flag(x, train):
    with torch.set_grad_enabled(train):
        y = x.exp()
    return y, torch.is_grad_enabled()


@case((randn(3),), (randn(6),))
def inference_mode_block(x):
    with torch.inference_mode():
        y = x * 2 + 1
    return y


@case((randn(3), {"a": 1}), (randn(3), {}))
def contextlib_suppress(x, d):
    y = x
    with contextlib.suppress(KeyError):
        y = x * d["a"]
    return y


class _Recorder:
    def __init__(self):
        self.events = []

    def __enter__(self):
        self.events.append("enter")
        return self

    def __exit__(self, *exc):
        self.events.append("exit")
        return False


@case((randn(3),), (randn(5),))
def user_context_manager(x):
    rec = _Recorder()
    with rec as r:
        y = x * 2
        r.events.append("body")
    return y, rec.events


@contextlib.contextmanager
def _scaled(factor, log):
    log.append(f"in {factor}")
    yield factor * 2
    log.append("out")


@case((randn(3), 1.5), (randn(3), 3.0))
def contextmanager_generator(x, f):
    log = []
    with _scaled(f, log) as s:
        y = x * s
    return y, log


@case((_grad_input(3),), (_grad_input(2),))
def no_grad_decorated_helper(x):
    @torch.no_grad()
    def stats(t):
        return t.mean(), t.std()
    m, s = stats(x)
    return (x - m) / (s + 1), m.requires_grad


@case((randn(3), 1), (randn(3), 3))
def exception_in_loop_caught_each_time(x, n):
    msgs = []
    for i in range(n):
        try:
            raise IndexError(f"step {i}")
        except IndexError as e:
            msgs.append(str(e))
    return x * len(msgs), msgs


@case((randn(3), 2), (randn(3), 6))
def raise_in_finally_path(x, n):
    out = []
    try:
        try:
            if n > 4:
                raise ValueError("v")
        finally:
            out.append("cleanup")
    except ValueError:
        out.append("handled")
    return x, out


@case((randn(3), 3), (randn(3), -1))
def raise_not_implemented(x, n):
    if n < 0:
        raise NotImplementedError("negative sizes")
    return x.repeat(n)


@case((randn(3), 2), (randn(3), 5))
def with_nested_grad_modes(x, n):
    with torch.no_grad(), torch.enable_grad():
        y = x * n
    return y, torch.is_grad_enabled()


@case((randn(3), 1), (randn(3), 4))
def exception_group_like_cleanup(x, n):
    done = []
    for i in range(n):
        try:
            if i == 2:
                raise StopIteration
            done.append(i)
        except StopIteration:
            break
    return x * len(done), done


@case((randn(3), {"a": 2.0}), (randn(3), {}))
def lookup_error_base_class(x, d):
    try:
        return x * d["a"]
    except LookupError as e:
        return x, type(e).__name__


@case((randn(3), 2), (randn(3), 3))
def raise_inside_with_no_grad(x, n):
    try:
        with torch.no_grad():
            if n == 3:
                raise ValueError("three")
            y = x * n
    except ValueError:
        y = x
    return y, torch.is_grad_enabled()


@case((randn(3), 2), (randn(3), -1))
def exception_message_with_values(x, k):
    try:
        if k < 0:
            raise ValueError(f"k={k} for shape {tuple(x.shape)}")
        return x * k, ""
    except ValueError as e:
        return x, e.args[0]
