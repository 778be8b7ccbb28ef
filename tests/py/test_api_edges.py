"""The edges of framejit.compile's API: any callable compiles (a builtin, a partial, a
class, a callable object), a compiled module is invisible to module hooks, a function
that always raises compiles once, giving up is per argument types (a lambda first
called with ints still compiles for tensors), and tracing runs no user __repr__."""
import functools
import sys

import pytest
import torch

import framejit
from conftest import assert_same


def test_a_builtin_compiles_as_a_call_of_it():
    add = framejit.compile(torch.add)
    x, y = torch.randn(5), torch.randn(5)
    for _ in range(3):
        assert_same(add(x, y, alpha=2), torch.add(x, y, alpha=2))
    s = framejit.stats(add)
    assert s["compiles"] == 1 and s["graphs"] == 1 and s["cache_hits"] == 2
    assert add.__name__ == "add" and add._framejit_target is torch.add
    assert framejit.compile(len)([1, 2, 3]) == 3


def test_two_compiled_builtins_keep_caches_of_their_own():
    mul, sub = framejit.compile(torch.mul), framejit.compile(torch.sub)
    x = torch.randn(4)
    assert_same(mul(x, 3.0), torch.mul(x, 3.0))
    assert_same(sub(x, 3.0), torch.sub(x, 3.0))
    assert framejit.stats(mul)["compiles"] == 1 and framejit.stats(sub)["compiles"] == 1


def scaled_sum(x, y, scale=1.0):
    return (x + y) * scale


def test_a_partial_compiles_its_function_with_its_arguments():
    y = torch.randn(3)
    p = functools.partial(scaled_sum, y=y, scale=0.5)
    compiled = framejit.compile(p)
    x = torch.randn(3)
    assert_same(compiled(x), p(x))
    assert_same(compiled(x, scale=2.0), p(x, scale=2.0))  # a keyword overrides, as in partial
    assert framejit.stats(scaled_sum)["compiles"] == 1


class Scaled:
    def __init__(self, x, k):
        self.value = x * k + 1
        self.k = k


def test_a_class_compiles_as_its_construction():
    make = framejit.compile(Scaled)
    x = torch.randn(4)
    got, want = make(x, 3), Scaled(x, 3)
    assert type(got) is Scaled and got.k == want.k
    assert_same(got.value, want.value)
    assert make.__name__ == "Scaled"


class Affine:
    def __init__(self):
        self.w = torch.randn(3)

    def __call__(self, x):
        return torch.relu(x * self.w)


def test_a_callable_object_compiles_its_call():
    obj = Affine()
    compiled = framejit.compile(obj)
    x = torch.randn(3)
    assert_same(compiled(x), obj(x))
    assert framejit.stats(compiled)["graphs"] >= 1


def test_a_value_that_is_not_callable_is_refused():
    with pytest.raises(TypeError, match="expects a callable, got int"):
        framejit.compile(3)


def hook_calls(module, x):
    """(hook, module class) of every global and per-module hook a call of module fires,
    forward and backward."""
    seen = []
    mm = torch.nn.modules.module
    handles = [
        mm.register_module_forward_pre_hook(lambda m, a: seen.append(("pre", type(m).__name__))),
        mm.register_module_forward_hook(lambda m, a, r: seen.append(("fwd", type(m).__name__))),
        mm.register_module_full_backward_hook(lambda m, gi, go: seen.append(("bwd", type(m).__name__))),
    ]
    try:
        module(x).sum().backward()
    finally:
        for h in handles:
            h.remove()
    return seen


def test_a_compiled_module_fires_each_hook_as_the_module_does():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
    x = torch.randn(2, 4, requires_grad=True)
    want = hook_calls(m, x)
    assert ("pre", "Sequential") in want and ("bwd", "Linear") in want
    compiled = framejit.compile(m)
    assert hook_calls(compiled, x) == want
    # A hook on the module itself fires once, and the compiled module runs without hooks.
    fired = []
    h = m.register_forward_hook(lambda mod, a, r: fired.append(type(mod).__name__))
    compiled(x)
    h.remove()
    assert fired == ["Sequential"]
    compiled(x)
    before = framejit.stats(type(m).forward)
    assert_same(compiled(x), m(x))
    after = framejit.stats(type(m).forward)
    assert before["compiles"] >= 1 and after["cache_hits"] == before["cache_hits"] + 1


def always_raises(x):
    if x.shape[0] > 0:
        raise ValueError("a size above 0")
    return x


def test_a_function_that_always_raises_compiles_once():
    compiled = framejit.compile(always_raises)
    for n in (2, 3, 2, 5):
        with pytest.raises(ValueError, match="^a size above 0$"):
            compiled(torch.ones(n))
    s = framejit.stats(always_raises)
    assert s["compiles"] == 1 and s["cache_hits"] == 3


def test_giving_up_on_ints_still_compiles_for_tensors():
    fn = lambda a, b: a * b + 1  # noqa: E731 - the lambda is the case
    compiled = framejit.compile(fn)
    assert compiled(2, 3) == 7 and compiled(4, 5) == 21  # nothing to compile: falls back
    s = framejit.stats(fn)
    assert s["fallbacks"] == framejit.config.fallback_limit and s["skipped"] == 1
    assert compiled(6, 7) == 43 and framejit.stats(fn)["fallbacks"] == s["fallbacks"]  # ints: CPython
    x, y = torch.randn(3), torch.randn(3)
    for _ in range(2):
        assert_same(compiled(x, y), fn(x, y))
    s = framejit.stats(fn)
    assert s["compiles"] == 1 and s["cache_hits"] == 1 and s["graphs"] == 1
    assert s["skipped"] == 0 and s["stopped_compiling"] == 1  # ints still run in CPython


class Chatty:
    """A user object whose repr changes it (as one of numpy's objects caches an
    attribute in its __repr__), and that counts comparisons."""

    def __init__(self):
        self.reprs = 0
        self.compares = 0

    def __repr__(self):
        self.reprs += 1
        return "Chatty()"

    def __eq__(self, other):
        self.compares += 1
        return self is other

    __hash__ = object.__hash__


def uses_a_chatty_object(x, obj):
    y = x * 2
    n = sys.getrefcount(obj)  # a call framejit does not trace: a graph break with obj
    return y + (n > 0)


def test_tracing_runs_no_user_repr():
    compiled = framejit.compile(uses_a_chatty_object)
    obj = Chatty()
    x = torch.randn(3)
    for _ in range(3):
        assert_same(compiled(x, obj), uses_a_chatty_object(x, obj))
    assert framejit.stats(uses_a_chatty_object)["graph_breaks"] >= 1
    framejit.explain(uses_a_chatty_object, x, obj)
    assert obj.reprs == 0 and obj.compares == 0


def test_a_compiled_module_runs_global_backward_pre_hooks_and_its_own_call():
    from torch.nn.modules import module as mm

    seen = []
    h = mm.register_module_full_backward_pre_hook(lambda m, go: (seen.append(type(m).__name__), (go[0] * 3,))[1])
    try:
        lin = torch.nn.Linear(3, 2)
        x1, x2 = torch.ones(2, 3, requires_grad=True), torch.ones(2, 3, requires_grad=True)
        lin(x1).sum().backward()
        framejit.compile(lin)(x2).sum().backward()
    finally:
        h.remove()
    assert seen == ["Linear", "Linear"]
    assert_same(x2.grad, x1.grad)

    class Tenfold(torch.nn.Module):
        def forward(self, x):
            return x + 1

        def __call__(self, x):
            return super().__call__(x) * 10

    m, x = Tenfold(), torch.ones(2)
    assert_same(framejit.compile(m)(x), m(x))


def test_pow_with_a_runtime_exponent_takes_eagers_special_cases():
    def f(x, p):
        return x ** p

    x = torch.tensor([-0.0, 0.0, float("-inf"), float("inf"), 1.0000001, 4.0, -2.0])
    cf = framejit.compile(f)
    for p in (0.5, -0.5, -1.0, 2.0, 3.0, -2.0, 1.5):
        got, want = cf(x, p), f(x, p)
        assert torch.equal(got.isnan(), want.isnan()), p
        keep = ~want.isnan()
        assert torch.equal(got[keep], want[keep]) and torch.equal(got[keep].signbit(), want[keep].signbit()), p
