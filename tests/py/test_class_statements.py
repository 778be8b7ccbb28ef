"""Class statements inside a compiled function: a body that only binds names runs while
tracing and the class is known to the rest of the trace; a body or base that runs
code, or a class that would leave the frame, stays eager's (a new class per call)."""
import torch

import framejit
from conftest import assert_same


def scaled(x, n):
    class Scaler:
        """Multiplies by k."""
        k: int
        offset = 1

        def __init__(self, k):
            self.k = k

        def __call__(self, t):
            return t * self.k + self.offset

        @property
        def double(self):
            return self.k * 2

        @staticmethod
        def zero(t):
            return t * 0

    s = Scaler(n)
    return s(x) + s.double + Scaler.zero(x), Scaler.__doc__


def test_plain_class_statement_compiles_whole():
    f = framejit.compile(scaled)
    for n in (2, 3, 7):
        x = torch.randn(4)
        assert_same(f(x, n), scaled(x, n))
    s = framejit.stats(f)
    assert s["compiles"] == 1 and s["cache_hits"] == 2
    assert s["graph_breaks"] == 0 and s["fallbacks"] == 0


def makes_point(x):
    class P:
        pass
    p = P()
    p.v = x * 2
    return p


def test_an_object_of_a_frame_class_is_of_a_new_class_each_call():
    f = framejit.compile(makes_point)
    a, b = f(torch.ones(2)), f(torch.ones(2))
    assert type(a) is not type(b)  # as eager: each call runs the class statement
    assert type(a).__qualname__ == "makes_point.<locals>.P"
    assert_same(a.v, torch.ones(2) * 2)


EVENTS = []


def record(tag):
    EVENTS.append(tag)
    return tag


def body_with_call(x):
    class C:
        tag = record("body")
    return x + len(C.tag)


class Registered:
    def __init_subclass__(cls):
        EVENTS.append("subclass " + cls.__name__)


def base_with_hook(x):
    class D(Registered):
        k = 3
    return x * D.k


def test_bodies_and_bases_that_run_code_run_once_per_call():
    for fn, event in ((body_with_call, "body"), (base_with_hook, "subclass D")):
        EVENTS.clear()
        f = framejit.compile(fn)
        for _ in range(3):
            assert_same(f(torch.ones(2)), fn(torch.ones(2)))
        assert EVENTS == [event] * 6  # three compiled calls and three eager ones


def reads_enclosing(x, k):
    class E:
        def scale(self, t):
            return t * k
    return E().scale(x)


def test_a_class_over_the_function_variables_stays_correct():
    f = framejit.compile(reads_enclosing)
    for k in (2, 5):
        assert_same(f(torch.ones(3), k), reads_enclosing(torch.ones(3), k))
