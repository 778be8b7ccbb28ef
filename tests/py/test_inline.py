"""Calls of Python functions from a compiled function are traced into the same
graph: arguments bound as CPython binds them, globals and closures guarded."""
import types

import pytest
import torch
import torch.nn as nn

import framejit
from conftest import assert_same


def helper(a, b=2.0, *, scale=1.0):
    return (a * b + 1) * scale


def uses_helper(x, y):
    return helper(x, scale=0.5) + helper(y, 3.0)


def test_helper_with_defaults_and_keywords_is_inlined():
    cf = framejit.compile(uses_helper)
    x, y = torch.randn(4), torch.randn(4)
    assert_same(cf(x, y), uses_helper(x, y))
    s = framejit.stats(uses_helper)
    assert s["graphs"] == 1 and s["fallbacks"] == 0
    e = framejit.explain(uses_helper, x, y)
    assert e.ops.count("aten.mul.Tensor") == 4


def star(*ts):
    out = ts[0]
    for_sum = ts[1] + ts[2]
    return out * for_sum


def test_star_args_helper():
    def f(a, b, c):
        return star(a, b, c) + 1

    cf = framejit.compile(f)
    a, b, c = torch.randn(3), torch.randn(3), torch.randn(3)
    assert_same(cf(a, b, c), f(a, b, c))
    assert framejit.stats(f)["fallbacks"] == 0


def test_closures_are_guarded_by_content():
    factor = 2.0

    def scaled(t):
        return t * factor

    def f(x):
        return scaled(x) + 1

    cf = framejit.compile(f)
    x = torch.randn(5)
    assert_same(cf(x), x * 2.0 + 1)
    factor = 3.0  # a new value in the closure cell: the trace must not reuse 2.0
    assert_same(cf(x), x * 3.0 + 1)
    assert framejit.stats(f)["fallbacks"] == 0


def test_function_from_another_module_reads_its_own_globals():
    mod = types.ModuleType("fj_test_mod")
    exec("import torch\nK = 3.0\ndef h(t):\n    return torch.tanh(t) * K\n", mod.__dict__)
    scope = {"mod": mod, "torch": torch}
    exec("def f(x):\n    return mod.h(x) - 1\n", scope)
    f = scope["f"]
    cf = framejit.compile(f)
    x = torch.randn(6)
    assert_same(cf(x), torch.tanh(x) * 3.0 - 1)
    mod.K = 4.0
    assert_same(cf(x), torch.tanh(x) * 4.0 - 1)
    s = framejit.stats(f)
    assert s["recompiles"] == 1 and s["fallbacks"] == 0


def recurse(t, n):
    if n == 0:
        return t
    return recurse(t * 1.5, n - 1)


def test_deep_recursion_falls_back_with_reason():
    def f(x):
        return recurse(x, 40)

    cf = framejit.compile(f)
    x = torch.randn(3)
    assert_same(cf(x), f(x))
    # The call that nests too deep runs as a call step of the plan (a graph break).
    assert framejit.stats(f)["fallbacks"] == 0
    (b,) = framejit.explain(f, x).graph_breaks
    assert "nested deeper than 32" in b.reason


def test_shallow_recursion_is_inlined():
    def f(x):
        return recurse(x, 4)

    cf = framejit.compile(f)
    x = torch.randn(3)
    assert_same(cf(x), f(x))
    assert framejit.stats(f)["graphs"] == 1


def test_wrong_call_inside_raises_like_eager():
    def f(x):
        return helper(x, 1.0, 2.0)  # too many positional arguments

    cf = framejit.compile(f)
    with pytest.raises(TypeError) as eager:
        f(torch.ones(2))
    with pytest.raises(TypeError) as compiled:
        cf(torch.ones(2))
    assert str(compiled.value) == str(eager.value)


def test_loops_over_ranges_and_sequences_are_unrolled():
    def f(x, w1, w2, n):
        for w in (w1, w2):
            x = x * w + 1
        for i in range(n):
            x = x - i * 0.5
        for k in (1.0, 2.0):
            x = x / k
        return x

    cf = framejit.compile(f)
    x, w1, w2 = torch.randn(5), torch.randn(5), torch.randn(5)
    for n in (3, 3, 4):
        assert_same(cf(x, w1, w2, n), f(x, w1, w2, n))
    s = framejit.stats(f)
    assert (s["compiles"], s["cache_hits"], s["fallbacks"]) == (2, 1, 0)  # one entry per loop length


def test_loop_over_a_symbolic_range_specializes_its_length():
    def f(x, n):
        for i in range(n):
            x = x + i
        return x

    cf = framejit.compile(f)
    x = torch.randn(4)
    for n in (3, 3, 5, 3):
        assert_same(cf(x, n), f(x, n))
    s = framejit.stats(f)
    assert s["compiles"] == 2 and s["fallbacks"] == 0
    assert "L['n'] == 3" in framejit.explain(f, x, 3).guards


def test_long_loops_fall_back():
    def f(x):
        for i in range(5000):
            x = x + 1
        return x

    cf = framejit.compile(f)
    assert_same(cf(torch.zeros(2)), f(torch.zeros(2)))
    assert "more than 1024 iterations" in framejit.fallbacks(f)[0].reason


def test_with_no_grad_and_enable_grad_blocks():
    def f(x, y):
        with torch.no_grad():
            a = x * y + 1
            with torch.enable_grad():
                b = a.sigmoid()
        return a + b

    def early(x):
        with torch.no_grad():
            return x * 2

    for fn, args in ((f, (torch.randn(4), torch.randn(4))), (early, (torch.randn(3),))):
        cf = framejit.compile(fn)
        assert_same(cf(*args), fn(*args))
        s = framejit.stats(fn)
        assert s["graphs"] == 1 and s["fallbacks"] == 0, framejit.fallbacks(fn)
    assert torch.is_grad_enabled()


def test_inference_mode_block_falls_back():
    def f(x):
        with torch.inference_mode():
            return x + 1

    cf = framejit.compile(f)
    out = cf(torch.ones(2))
    assert out.is_inference() and framejit.stats(f)["fallbacks"] == 1


def test_list_comprehensions_are_traced():
    # LIST_APPEND: the comprehension's list lives on the value stack.
    def f(x, ws):
        parts = [w * 2 for w in ws]
        dims = [d * 2 for d in x.shape if d > 1]
        return x * (parts[0] + parts[-1]), dims, [p.sum() for p in x.split(2)]

    ws = [torch.randn(3), torch.randn(3), torch.randn(3)]
    for n in (4, 5):
        x = torch.randn(n, 3)
        cf = framejit.compile(f)
        assert_same(cf(x, ws), f(x, ws))
    s = framejit.stats(f)
    assert s["fallbacks"] == 0 and s["graph_breaks"] == 0, (s, framejit.fallbacks(f))


def make_scaler(y):
    return lambda t: t * y


def test_closures_over_locals_are_traced():
    # A comprehension or lambda that reads a local of the frame: its call reads the
    # local's value at the time of the call, as the shared cell does in CPython.
    def f(x, n):
        y = x + 1
        rows = [y[i] * i for i in range(n)]
        h = lambda: y * 2
        y = y - 3  # rebinding: h sees the new value
        nested = [[y[i] + j for j in range(2)] for i in range(2)]
        return torch.stack(rows), h(), nested

    cf = framejit.compile(f)
    for m in (4, 6):
        x = torch.randn(m, 3)
        assert_same(cf(x, 3), f(x, 3))
    s = framejit.stats(f)
    assert s["fallbacks"] == 0 and s["graph_breaks"] == 0 and s["graphs"] == 1, (s, framejit.fallbacks(f))


def test_nested_functions_with_defaults_are_traced():
    # MAKE_FUNCTION with constant defaults, keyword defaults and annotations: the
    # calls bind them as CPython does, and no call runs in CPython.
    def f(x, k):
        def inner(t, scale=2.0, *, shift=k, mode: str = "add") -> torch.Tensor:
            return t * scale + shift if mode == "add" else t * scale - shift

        return inner(x), inner(x, 3.0, mode="sub"), inner(x, shift=-1)

    cf = framejit.compile(f)
    x = torch.randn(4)
    assert_same(cf(x, 5), f(x, 5))
    s = framejit.stats(f)
    assert s["fallbacks"] == 0 and s["graph_breaks"] == 0 and s["graphs"] == 1, (s, framejit.fallbacks(f))


def test_nested_function_with_traced_defaults():
    # Defaults computed in the frame (a tensor, a symbolic int) are bound by the
    # inlined calls; a new n does not recompile.
    def f(x, n):
        def inner(t, bias=x.sum(), *, times=n):
            return t * times + bias

        return inner(x), inner(x, 1.0, times=2)

    cf = framejit.compile(f)
    x = torch.randn(4)
    for n in (3, 4, 5):
        assert_same(cf(x, n), f(x, n))
    s = framejit.stats(f)
    assert s["fallbacks"] == 0 and s["graphs"] == 1 and s["recompiles"] == 0, (s, framejit.fallbacks(f))


def test_nested_function_with_a_mutable_or_live_default_runs_as_eager():
    # A list default is shared by every call in eager; a function with a traced
    # default alive at a graph break cannot be handed to CPython: both run as eager.
    def shared(x):
        def inner(t, seen=[]):
            seen.append(t)
            return t * len(seen)

        return inner(x), inner(x)

    log = []

    def live(x):
        def inner(t, b=x * 2):
            return t + b

        log.append(len(log))  # an opaque call
        return inner(x)

    x = torch.randn(4)
    for f in (shared, live):
        cf = framejit.compile(f)
        assert_same(cf(x), f(x))
        assert_same(cf(x), f(x))
    assert "mutable default" in str(framejit.fallbacks(shared))
    assert log == [0, 1, 2, 3]


def test_closure_that_outlives_its_frame_runs_as_eager():
    # make_scaler's lambda is called after make_scaler returned: its cell is not a
    # traced local any more, and the frame runs in CPython.
    def f(x):
        g = make_scaler(x.sum())
        return g(x)

    cf = framejit.compile(f)
    x = torch.randn(3)
    assert_same(cf(x), f(x))
    assert_same(cf(x), f(x))


def test_closure_live_at_a_graph_break_runs_as_eager():
    log = []

    def f(x):
        y = x * 2
        h = lambda: y + 1
        log.append(len(log))  # an opaque call
        print("", end="")
        return h()

    cf = framejit.compile(f)
    x = torch.randn(3)
    assert_same(cf(x), f(x))
    assert log == [0, 1]


def test_sum_and_isinstance_builtins_are_traced():
    def f(x, ws, n):
        total = sum([w * x for w in ws])
        k = sum(x.shape) + sum((n, 2), 10)
        kinds = (isinstance(x, torch.Tensor), isinstance(ws, list), isinstance(x.shape, tuple),
                 isinstance(n, int), isinstance(n, float), isinstance(2.5, (int, float)), isinstance(x, nn.Parameter))
        return total * k, kinds

    ws = [torch.randn(3), torch.randn(3)]
    cf = framejit.compile(f)
    for m, n in ((4, 3), (5, 7)):
        x = torch.randn(m, 3)
        assert_same(cf(x, ws, n), f(x, ws, n))
    s = framejit.stats(f)
    assert s["fallbacks"] == 0 and s["graph_breaks"] == 0 and s["compiles"] == 1, (s, framejit.fallbacks(f))


def test_isinstance_of_a_parameter_runs_as_eager():
    m = nn.Linear(2, 2)

    def f(x):
        return x * 2 if isinstance(m.weight, nn.Parameter) else x

    x = torch.randn(2)
    assert_same(framejit.compile(f)(x), f(x))


BIAS = torch.randn(3)


def test_global_tensors_are_graph_inputs():
    # A tensor in a module global is read from the globals at every call (not baked
    # in): an in-place change of it is seen, a new tensor bound to the name retraces.
    global BIAS

    def f(x):
        return torch.tanh(x + BIAS) * 2

    cf = framejit.compile(f)
    x = torch.randn(4, 3)
    assert_same(cf(x), f(x))
    BIAS.add_(1)
    assert_same(cf(x), f(x))
    old = BIAS
    BIAS = torch.randn(3, dtype=torch.float64)
    try:
        assert_same(cf(x), f(x))
    finally:
        BIAS = old
    s = framejit.stats(f)
    assert s["fallbacks"] == 0 and s["graphs"] == 2 and s["recompiles"] == 1, s


def test_nonlocal_writes_of_functions_made_in_the_frame():
    # `nonlocal` one level deeper than the frame's own closures (the corpus has the
    # direct ones: opcodes/nonlocal_*), and a walrus in a comprehension: they write the
    # frame's own variable, which later reads see
    from conftest import compiled_whole

    def nested(x):
        c = 1

        def outer():
            def inner():
                nonlocal c
                c = c * 3
            inner()
            inner()
            return c
        return x * outer(), c

    def walrus(x, n):
        return [s for i in range(n) if (s := i * i) % 2 == 0], s, x * 2

    compiled_whole(nested, [(torch.randn(3),), (torch.randn(4),)], compiles=1)
    compiled_whole(walrus, [(torch.randn(3), 3), (torch.randn(3), 6)])


def test_a_closure_that_outlives_the_call_that_made_it():
    # make() returns g over its local k: g still reads (and with nonlocal, writes) k
    # after make's inlined frame returned; two closures of one call share the variable.
    from conftest import compiled_whole

    def returned(x, w):
        def make(k):
            def g(t):
                return t * k
            return g
        g = make(w)
        h = make(x.sum())
        return g(x), g(x * 2), h(x)

    def counter(x):
        def make():
            n = 0

            def bump():
                nonlocal n
                n += 1
                return n

            def read():
                return n
            return bump, read
        bump, read = make()
        bump()
        bump()
        return x * bump(), read()

    def compose(x, n):
        def chain(*fs):
            def run(t):
                for f in fs:
                    t = f(t)
                return t
            return run
        return chain(torch.sin, lambda t: t * n, torch.abs)(x)

    compiled_whole(returned, [(torch.randn(3), 2.0), (torch.randn(4), 3.0)], compiles=1)
    compiled_whole(counter, [(torch.randn(3),), (torch.randn(4),)], compiles=1)
    compiled_whole(compose, [(torch.randn(3), 2), (torch.randn(3), 3)], compiles=1)
