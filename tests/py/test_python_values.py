"""Python values that model code computes with, traced instead of ending the trace:
`import` of modules already imported, subscripts of known constants (list[int] for
torch.jit.annotate), zip(strict=) / enumerate(start=), lists the frame builds and
mutates (append, extend, pop, ..., with their aliases), and a list of ints indexing a
tensor. Each case is compared against eager (values, exceptions, side effects) and
checked to trace without a fallback."""
import math
import sys
import types

import pytest
import torch

import framejit
from conftest import assert_same


def traced_whole(fn, *args):
    e = framejit.explain(fn, *args)
    assert e.graph_breaks == [], [b.reason for b in e.graph_breaks]
    assert e.graph_count == 1
    framejit.reset()


def no_fallback(fn):
    s = framejit.stats(fn)
    assert s["fallbacks"] == 0, s


def same_exception(fn, cf, *args):
    try:
        fn(*args)
    except Exception as e:  # noqa: BLE001 - whatever eager raises
        eager = e
    else:
        raise AssertionError("eager did not raise")
    with pytest.raises(type(eager)) as got:
        cf(*args)
    assert str(got.value) == str(eager)


# ---- import of modules already imported ----


def imports_inside(x):
    import torch
    import torch.nn.functional as F
    from torch.nn import functional as G
    import math

    return F.relu(x) + G.gelu(x) * math.pi + torch.tanh(x)


def test_import_of_imported_modules_is_traced():
    x = torch.randn(4, 5)
    traced_whole(imports_inside, x)
    cf = framejit.compile(imports_inside)
    for shape in [(4, 5), (3, 7), (4, 5)]:
        x = torch.randn(shape)
        assert_same(cf(x), imports_inside(x))
    no_fallback(imports_inside)


def imports_fake(x):
    import fj_test_fake_module

    return x * fj_test_fake_module.SCALE


def test_import_reads_sys_modules_at_each_call():
    first = types.ModuleType("fj_test_fake_module")
    first.SCALE = 2.0
    second = types.ModuleType("fj_test_fake_module")
    second.SCALE = 5.0
    x = torch.randn(3)
    try:
        sys.modules["fj_test_fake_module"] = first
        cf = framejit.compile(imports_fake)
        assert_same(cf(x), imports_fake(x))
        no_fallback(imports_fake)
        first.SCALE = 3.0  # an attribute of the imported module changes
        assert_same(cf(x), x * 3.0)
        sys.modules["fj_test_fake_module"] = second  # another module under the name
        assert_same(cf(x), x * 5.0)
    finally:
        sys.modules.pop("fj_test_fake_module", None)


def test_import_of_a_module_not_imported_runs_it_once(tmp_path, monkeypatch):
    (tmp_path / "fj_test_lazy_module.py").write_text(
        "import builtins\nbuiltins.fj_test_lazy_runs = getattr(builtins, 'fj_test_lazy_runs', 0) + 1\nSCALE = 4.0\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import builtins

    def f(x):
        import fj_test_lazy_module

        return x * fj_test_lazy_module.SCALE

    cf = framejit.compile(f)
    x = torch.randn(3)
    try:
        assert_same(cf(x), x * 4.0)
        assert builtins.fj_test_lazy_runs == 1
        assert_same(cf(x), x * 4.0)  # imported now: traced, still run once
        assert builtins.fj_test_lazy_runs == 1
    finally:
        sys.modules.pop("fj_test_lazy_module", None)
        del builtins.fj_test_lazy_runs
    assert framejit.stats(f)["compiles"] >= 1


# ---- subscripts of constants, torch.jit.annotate, len() of constants ----


def annotated(x):
    stride = torch.jit.annotate(list[int], [])
    table = torch.jit.annotate(dict[str, int], {})
    n = len(stride) + len(table) + (10, 20, 30)[-1] + len((1, 2)) + len("ab"[1:])
    return x * n


def test_subscript_of_constants_and_annotate():
    x = torch.randn(3, 2)
    traced_whole(annotated, x)
    cf = framejit.compile(annotated)
    assert_same(cf(x), annotated(x))
    no_fallback(annotated)


def test_subscript_of_a_constant_out_of_range_raises_as_eager():
    def f(x):
        return x * (1, 2)[5]

    same_exception(f, framejit.compile(f), torch.randn(2))


# ---- zip(strict=), enumerate(start=) ----


def zips(x, y):
    out = x
    for i, (a, b) in enumerate(zip((x, y), (y, x), strict=False), start=2):
        out = out + a * b * i
    for a, b in zip((x, y), (y,), strict=False):
        out = out - a * b
    return out


def test_zip_strict_false_and_enumerate_start():
    x, y = torch.randn(3), torch.randn(3)
    traced_whole(zips, x, y)
    cf = framejit.compile(zips)
    assert_same(cf(x, y), zips(x, y))
    no_fallback(zips)


def test_zip_strict_of_different_lengths_raises_as_eager():
    def f(x):
        for a, b in zip((x, x), (x,), strict=True):
            x = a + b
        return x

    same_exception(f, framejit.compile(f), torch.randn(2))


# ---- lists the frame builds and mutates ----


def rnn_like(x, h, n: int):
    outputs = []
    for t in range(x.shape[1]):
        h = torch.tanh(x[:, t] + h)
        outputs.append(h)
    return torch.stack(outputs, 1), len(outputs)


def test_append_in_a_loop_then_stack():
    x, h = torch.randn(2, 5, 3), torch.randn(2, 3)
    traced_whole(rnn_like, x, h, 4)
    cf = framejit.compile(rnn_like)
    for steps in [5, 7, 5]:
        x = torch.randn(2, steps, 3)
        assert_same(cf(x, h, 4), rnn_like(x, h, 4))
    no_fallback(rnn_like)


def list_methods(x):
    a = [x]
    b = a  # one list, two names
    t = (a, 1)  # and held by a tuple
    a.append(x * 2)
    b.extend((x * 3, x * 4))
    a.insert(0, x - 1)
    a.insert(-100, x - 2)
    last = b.pop()
    second = a.pop(1)
    a[0] = a[0] * 10
    b += [x + 5]
    a += (x + 6,)
    c = b.copy()
    c.reverse()
    c.append(x)
    d = [x]
    d.clear()
    return torch.stack(t[0]), last, second, torch.stack(c), len(t[0]), len(c), d, a is b, a is c


def test_list_methods_and_aliases():
    x = torch.randn(3)
    traced_whole(list_methods, x)
    cf = framejit.compile(list_methods)
    assert_same(cf(x), list_methods(x))
    no_fallback(list_methods)


def returns_aliases(x):
    a = [x]
    a.append(x + 1)
    return a, a, [a]


def test_returned_aliases_are_one_list():
    x = torch.randn(2)
    cf = framejit.compile(returns_aliases)
    r, e = cf(x), returns_aliases(x)
    assert_same(r, e)
    assert r[0] is r[1] and r[2][0] is r[0]
    r[0].append(1)  # the caller's list is a list of its own
    assert len(r[1]) == 3 and len(r[2][0]) == 3
    no_fallback(returns_aliases)


def add_to(lst, v):
    lst.append(v * 2)
    return len(lst)


def callee_mutates(x):
    out = [x]
    n = add_to(out, x)
    n2 = add_to(out, out[-1])
    return torch.cat(out), n, n2


def test_inlined_callee_mutates_the_callers_list():
    x = torch.randn(3)
    traced_whole(callee_mutates, x)
    cf = framejit.compile(callee_mutates)
    assert_same(cf(x), callee_mutates(x))
    no_fallback(callee_mutates)


CALLS = []


def opaque_mutator(lst):
    global CALLS  # list + list of a global list is not traced: the call is a graph break
    CALLS = CALLS + [len(lst)]
    lst.append(lst[0] + 1)


def escapes(x):
    out = [x * 2]
    out.append(x)
    opaque_mutator(out)
    out.append(x * 3)
    return torch.stack(out), len(out)


def test_list_given_to_an_opaque_call_sees_its_changes():
    global CALLS
    x = torch.randn(3)
    CALLS = []
    expected = escapes(x)
    eager_calls = list(CALLS)
    CALLS = []
    cf = framejit.compile(escapes)
    assert_same(cf(x), expected)
    assert_same(cf(x), expected)  # from the plan
    assert CALLS == eager_calls * 2
    assert framejit.stats(escapes)["graph_breaks"] >= 1


def test_argument_list_is_mutated_as_eager():
    def f(x, lst):
        lst.append(x)
        return x + 1

    cf = framejit.compile(f)
    x = torch.randn(2)
    mine, theirs = [], []
    for _ in range(3):
        assert_same(cf(x, mine), f(x, theirs))
    assert len(mine) == len(theirs) == 3


def test_loop_over_a_list_it_appends_to():
    def f(x):
        lst = [x, x + 1]
        for v in lst:
            if len(lst) < 5:
                lst.append(v * 2)
        return torch.stack(lst)

    cf = framejit.compile(f)
    x = torch.randn(2)
    assert_same(cf(x), f(x))
    assert_same(cf(x), f(x))


def test_generator_over_a_list_mutated_after():
    def f(x):
        lst = [x]
        g = (v * 2 for v in lst)
        lst.append(x + 1)
        return torch.stack(list(g))

    cf = framejit.compile(f)
    x = torch.randn(2)
    assert_same(cf(x), f(x))


@pytest.mark.parametrize("body", ["pop_empty", "pop_range", "set_range"])
def test_list_errors_raise_as_eager(body):
    def f(x):
        lst = [x]
        if body == "pop_empty":
            lst.clear()
            lst.pop()
        elif body == "pop_range":
            lst.pop(3)
        else:
            lst[-2] = x
        return x

    same_exception(f, framejit.compile(f), torch.randn(2))


# ---- a list of ints indexing a tensor ----


def list_index(x):
    return x[:, [-1], :], x[[0, -1]], x[[1, 0], 1:], x[..., [0, 2, 0]]


def test_int_list_index_is_advanced_indexing():
    x = torch.randn(3, 4, 5)
    traced_whole(list_index, x)
    cf = framejit.compile(list_index)
    for shape in [(3, 4, 5), (2, 6, 3), (3, 4, 5)]:
        x = torch.randn(shape)
        assert_same(cf(x), list_index(x))
    no_fallback(list_index)


def test_int_list_index_copies():
    def f(x):
        y = x[[0]]
        y.add_(1)
        return y

    cf = framejit.compile(f)
    x, x2 = torch.randn(3, 2), None
    x2 = x.clone()
    assert_same(cf(x), f(x2))
    assert_same(x, x2)  # neither wrote through to x


@pytest.mark.parametrize("index", [[3], [-4], [0, 5]])
def test_int_list_index_out_of_range_raises_as_eager(index):
    def f(x):
        return x[:, index] * 2

    same_exception(f, framejit.compile(f), torch.randn(2, 3))


def test_append_to_a_list_being_iterated_in_a_branch_outcome():
    # The first call never appends; a later one takes the other outcome of the
    # tensor-valued branch, traced from the state saved at the branch, where the loop
    # over `lst` is live: it must see the items appended (acc sums them).
    def f(x):
        lst = [x, x + 1]
        acc = x * 0
        for v in lst:
            acc = acc + v
            if v.sum() > 10:
                if len(lst) < 4:
                    lst.append(v * 2)
        return torch.stack(lst), acc

    cf = framejit.compile(f)
    for x in [torch.ones(2), torch.ones(2) * 10, torch.ones(2), torch.ones(2) * 20]:
        assert_same(cf(x), f(x))


def deopt_in_loop(x):
    lst = [x, x + 1]
    acc = x * 0
    for v in lst:
        acc = acc + v
        if v.sum() > 10 and len(lst) < 4:
            junk = [1]
            del junk[0]  # not traced: CPython resumes here, inside the loop
            lst.append(v * 2)
    return torch.stack(lst), acc


def deopt_in_loop_over_argument(x, lst):
    acc = x * 0
    for v in lst:
        acc = acc + v
        if v.sum() > 10 and len(lst) < 4:
            junk = [1]
            del junk[0]
            lst.append(v * 2)
    return acc


def test_resuming_in_cpython_inside_a_loop_over_a_list():
    # The resumed frame's loop iterates the very list its locals hold, at the same
    # position: what CPython appends then is seen by the loop, as in eager.
    cf = framejit.compile(deopt_in_loop)
    cg = framejit.compile(deopt_in_loop_over_argument)
    for x in [torch.ones(2), torch.ones(2) * 10, torch.ones(2), torch.ones(2) * 20]:
        assert_same(cf(x), deopt_in_loop(x))
        mine, theirs = [x, x + 1], [x, x + 1]
        assert_same(cg(x, mine), deopt_in_loop_over_argument(x, theirs))
        assert_same(mine, theirs)


# A dict argument (a batch {"input_ids": t, ...} as training loops pass one) is read
# as the frame's own dict: guarded by its keys in order, its tensors inputs by path,
# so a new dict with the same keys and new sizes reuses the compile.
def batch_loss(batch):
    total = batch["data"].sum() * 0
    for key, value in batch.items():
        if value.dtype.is_floating_point:
            total = total + value.mean()
    scale = batch.get("scale", 2.0)
    return total * scale * len(batch) + ("target" in batch), batch["target"] + 1


def test_dict_argument_is_read_without_recompiling_for_new_dicts():
    cf = framejit.compile(batch_loss)
    for n in (3, 5, 8):
        batch = {"data": torch.randn(n, 4), "target": torch.arange(n), "extra": torch.randn(n)}
        assert_same(cf(batch), batch_loss(batch))
    s = framejit.stats(batch_loss)
    assert (s["compiles"], s["cache_hits"], s["fallbacks"], s["graph_breaks"]) == (1, 2, 0, 0), s
    # other keys (or the same keys in another order: items() follows it) compile again
    for batch in ({"target": torch.arange(2), "data": torch.randn(2, 4)},
                  {"data": torch.randn(2, 4), "target": torch.arange(2), "scale": torch.full((1,), 3.0)}):
        assert_same(cf(batch), batch_loss(batch))
    assert framejit.stats(batch_loss)["compiles"] == 3


def test_dict_argument_changed_in_the_frame_or_by_a_call_stays_eager_correct():
    def store(batch):
        batch["double"] = batch["x"] * 2
        return batch["x"] + 1

    def pop(batch):
        return batch.pop("x") * 3, len(batch)

    def mutate(d):
        d["x"] = d["x"] + 100
        d["new"] = 1

    def passed_on(batch):
        before = batch["x"] * 2
        mutate(batch)  # runs in CPython (not traced: a graph break), changes the caller's dict
        return before + batch["x"], len(batch), sorted(batch)

    for fn in (store, pop):
        got_dict, want_dict = {"x": torch.ones(3), "y": torch.zeros(1)}, {"x": torch.ones(3), "y": torch.zeros(1)}
        assert_same(framejit.compile(fn)(got_dict), fn(want_dict))
        assert got_dict.keys() == want_dict.keys()
        for k in want_dict:
            assert_same(got_dict[k], want_dict[k])
    cf = framejit.compile(passed_on)
    for v in (1.0, 2.0):
        got_dict, want_dict = {"x": torch.full((2,), v)}, {"x": torch.full((2,), v)}
        got, want = cf(got_dict), passed_on(want_dict)
        assert_same(got[0], want[0])
        assert got[1:] == want[1:] and got_dict.keys() == want_dict.keys()
        assert_same(got_dict["x"], want_dict["x"])


# contextvars.ContextVar: set/reset pairs inside the frame (transformers' output
# capturing), get() of what the frame set or of a constant set outside it (guarded).
import contextvars  # noqa: E402

_VAR = contextvars.ContextVar("fj_test_var", default=None)


def _scaled(x):
    c = _VAR.get()
    return x * 2 if c is None else x * c["scale"]


def test_context_var_set_and_reset_in_the_frame_compile_once():
    def f(x, scale):
        token = _VAR.set({"scale": scale})
        try:
            y = _scaled(x) + 1
        finally:
            _VAR.reset(token)
        return y, _VAR.get()

    cf = framejit.compile(f)
    for s in (2.0, 3.0, 4.5):
        x = torch.randn(5)
        assert_same(cf(x, s), f(x, s))
        assert _VAR.get() is None
    st = framejit.stats(f)
    assert (st["compiles"], st["cache_hits"], st["fallbacks"]) == (1, 2, 0), st
    # a value set outside the frame is guarded: a new one compiles again, and is used
    token = _VAR.set(7)
    try:
        x = torch.randn(5)
        assert_same(cf(x, 2.0), f(x, 2.0))
        assert framejit.stats(f)["compiles"] == 2
    finally:
        _VAR.reset(token)


def test_context_var_left_set_or_seen_by_other_code_runs_as_eager():
    seen = []

    def left_set(x):
        _VAR.set({"scale": 3.0})
        return _scaled(x)

    def seen_by_a_call(x):
        token = _VAR.set({"scale": 5.0})
        seen.append(_VAR.get())  # CPython code (a graph break) would see the value
        y = _scaled(x)
        _VAR.reset(token)
        return y

    def raises_inside(x):
        token = _VAR.set({"scale": 5.0})
        try:
            return _scaled(x) + int("no")
        finally:
            _VAR.reset(token)

    ctx_jit, ctx_eager = contextvars.copy_context(), contextvars.copy_context()
    x = torch.randn(3)
    assert_same(ctx_jit.run(framejit.compile(left_set), x), ctx_eager.run(left_set, x))
    assert ctx_jit.run(_VAR.get) == ctx_eager.run(_VAR.get) == {"scale": 3.0}
    assert _VAR.get() is None
    assert_same(framejit.compile(seen_by_a_call)(x), seen_by_a_call(x))
    assert seen == [{"scale": 5.0}] * 2 and _VAR.get() is None
    for fn in (framejit.compile(raises_inside), raises_inside):
        with pytest.raises(ValueError, match="invalid literal"):
            fn(x)
        assert _VAR.get() is None


# ---- callable(), getattr() of a module ----


def _and_all(*fns):
    if not all(callable(f) for f in fns):
        raise RuntimeError("all arguments should be callable")
    return fns


def callables(x, scale):
    fns = _and_all(torch.relu, torch.sigmoid)
    y = fns[0](x) + fns[1](x)
    flags = (callable(x), callable(scale), callable(len), callable(torch.nn.Linear), callable([x]),
             any(f is torch.tanh for f in fns), all([scale > 0, x.dim() == 1]))
    return y * scale, flags


def test_callable_is_traced():
    x = torch.randn(3)
    traced_whole(callables, x, 2.0)
    cf = framejit.compile(callables)
    for shape, scale in [((3,), 2.0), ((2, 4), 0.5)]:
        x = torch.randn(shape)
        assert_same(cf(x, scale), callables(x, scale))
    no_fallback(callables)


def module_getattr(x):
    # transformers' is_fake_tensor: getattr of a module attribute by name
    fake = getattr(torch, "_subclasses").FakeTensor
    has = hasattr(torch, "relu"), hasattr(torch.nn.functional, "gelu")
    return (x if isinstance(x, fake) else x + 1), has


def test_getattr_of_a_module_is_read_as_module_attributes_are():
    x = torch.randn(3)
    traced_whole(module_getattr, x)
    cf = framejit.compile(module_getattr)
    assert_same(cf(x), module_getattr(x))
    no_fallback(module_getattr)


_LIN = torch.nn.Linear(3, 4)


def isinstance_of_subclasses(x):
    h = torch.relu(_LIN(x))
    fake = getattr(torch, "_subclasses").FakeTensor
    return h, isinstance(h, fake), isinstance(h, torch.nn.Parameter), isinstance(h, torch.Tensor)


def test_isinstance_of_an_op_result_against_tensor_subclasses():
    x = torch.randn(2, 3)
    cf = framejit.compile(isinstance_of_subclasses)
    with torch.no_grad():
        traced_whole(isinstance_of_subclasses, x)
        assert_same(cf(x), isinstance_of_subclasses(x))
    no_fallback(isinstance_of_subclasses)


def missing_tensor_attr(x):
    # transformers' is_jax_jitting: `if not hasattr(x, "jax"): return False`
    h = x * 2
    return (h + 1 if not hasattr(h, "jax") else h), getattr(h, "jax", None) is None


def test_hasattr_of_a_name_tensors_lack_is_guarded():
    x = torch.randn(3)
    traced_whole(missing_tensor_attr, x)
    cf = framejit.compile(missing_tensor_attr)
    assert_same(cf(x), missing_tensor_attr(x))
    torch.Tensor.jax = property(lambda self: "here")
    try:
        assert_same(cf(x), missing_tensor_attr(x))  # the guard sees the new attribute
    finally:
        del torch.Tensor.jax
    assert_same(cf(x), missing_tensor_attr(x))
    no_fallback(missing_tensor_attr)


def argument_tensor_attr(x):
    return (x + 1 if not hasattr(x, "jax") else x * 0), getattr(x, "jax", None)


def test_hasattr_of_an_argument_tensor_guards_its_own_attributes():
    x = torch.randn(3)
    traced_whole(argument_tensor_attr, x)
    cf = framejit.compile(argument_tensor_attr)
    assert_same(cf(x), argument_tensor_attr(x))
    y = torch.randn(3)
    y.jax = "mine"  # an attribute of this tensor only
    assert cf(y)[1] == "mine"
    assert_same(cf(y)[0], argument_tensor_attr(y)[0])
    assert_same(cf(x), argument_tensor_attr(x))


def callable_of_arguments(x, fn, obj):
    # an argument the trace does not look into: its class decides, guarded
    if not callable(fn) or callable(obj):
        raise RuntimeError("want a function and a plain object")
    return x + 1


def test_callable_of_an_opaque_argument_is_decided_by_its_guarded_class():
    cf = framejit.compile(callable_of_arguments)
    x = torch.randn(3)
    for fn, obj in [(len, object()), (torch.relu, "s"), (lambda v: v, 3)]:
        assert_same(cf(x, fn, obj), callable_of_arguments(x, fn, obj))
    for fn, obj in [(object(), object()), (len, len)]:
        with pytest.raises(RuntimeError, match="want a function"):
            cf(x, fn, obj)
    no_fallback(callable_of_arguments)


def copysign_of_an_argument(x, z):
    return x * math.copysign(1.0, z)


def test_math_of_a_float_zero_keeps_its_sign():
    # A guard z == 0.0 holds for -0.0 as well: the trace must not reuse the other sign.
    cf = framejit.compile(copysign_of_an_argument)
    x = torch.ones(2)
    for z in (-0.0, 0.0, -0.0, 1.5, -2.5, 0.0):
        assert_same(cf(x, z), copysign_of_an_argument(x, z))


def number_sequences(x, ws, ks):
    for k in ks:
        x = x * k
    return x * sum(ws), len(ws), ws[0], ks[-1] > 2


def test_list_and_tuple_arguments_of_numbers_are_symbols_by_item():
    framejit.reset()
    cf = framejit.compile(number_sequences)
    for ws, ks in (([0.5, 1.5], (2, 3)), ([2.0, 3.0], (4, 5)), ([-1.0, 0.25], (6, 2))):
        x = torch.randn(3)
        assert_same(cf(x, ws, ks), number_sequences(x, ws, ks))
    assert framejit.stats(number_sequences)["compiles"] == 1  # new values: no recompile
    for ws, ks in (([2.0, 3.0, 1.0], (4, 0)), ([1, 2.5], (True, 7)), ([0.5, None and 1.0 or 2.0], ("a" and 3, 1))):
        x = torch.randn(3)
        assert_same(cf(x, ws, ks), number_sequences(x, ws, ks))  # new length, 0 and 1, new types
    no_fallback(number_sequences)


def min_max_reversed(x, a, b, vals):
    r = x * min(a, b) + max(a, b, 5) + min(vals) * max(*vals, 0)
    s = 0
    for v in reversed(vals):
        s = s * 10 + v
    for i in reversed(range(3)):
        r = r + i
    return r, s, min(1, 2.0), max(2.0, 2), max([1.5, 1.5]), list(reversed((a, b)))


def test_min_max_and_reversed_of_python_values():
    cf = framejit.compile(min_max_reversed)
    for args in ((3, 7, [4, 1, 9]), (8, 2, [5, 5, 2]), (3.5, 7, [1.0, 2.0])):
        x = torch.randn(3)
        assert_same(cf(x, *args), min_max_reversed(x, *args))
    no_fallback(min_max_reversed)
    assert framejit.stats(min_max_reversed)["graph_breaks"] == 0


def fstring_of_numbers(x, n, s):
    return x * n, f"n={n} s={s:.2f} {n!r}"


def test_an_fstring_of_a_symbolic_number_is_its_value_guarded():
    cf = framejit.compile(fstring_of_numbers)
    for n, s in ((3, 0.5), (3, 0.5), (4, 0.25), (5, 0.0), (5, -0.0)):
        x = torch.randn(2)
        assert_same(cf(x, n, s), fstring_of_numbers(x, n, s))


def item_at_a_symbolic_index(x, i):
    xs = [x, x * 2, x * 3]
    return xs[i] + xs[-i], (10, 20, 30, 40)[i]


def test_an_item_at_a_symbolic_index_is_chosen_by_its_value_guarded():
    cf = framejit.compile(item_at_a_symbolic_index)
    for i in (2, 2, -2, 1, 0):
        x = torch.randn(3)
        assert_same(cf(x, i), item_at_a_symbolic_index(x, i))
    no_fallback(item_at_a_symbolic_index)
    with pytest.raises(IndexError):
        cf(torch.randn(3), 5)
