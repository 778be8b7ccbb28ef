"""inspect.signature of a function the trace guards, or of a method it bound, is
computed while tracing (transformers' apply_chunking_to_forward reads
len(inspect.signature(fn).parameters) in every layer): an immutable known value,
whose parameters are read with no Python run, and which follows a change of the
function (its defaults, a rebound global) by a retrace."""
import functools
import inspect

import torch
import torch.nn as nn

import framejit
from conftest import assert_same, compiled_whole, one_graph


def apply_chunking(forward_fn, *tensors):
    n = len(inspect.signature(forward_fn).parameters)
    if n != len(tensors):
        raise ValueError(f"forward_fn expects {n} arguments, got {len(tensors)}")
    return forward_fn(*tensors)


class Layer(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def chunk(self, x):
        return torch.relu(self.lin(x))

    def forward(self, x):
        return apply_chunking(self.chunk, x) + 1


def test_a_layers_bound_method_signature_is_one_graph_for_every_instance():
    torch.manual_seed(0)
    a, b = Layer(), Layer()
    x = torch.randn(2, 3)
    with torch.no_grad():
        one_graph(Layer.forward, a, x)
        ca, cb = framejit.compile(a), framejit.compile(b)
        assert_same(ca(x), a(x))
        assert_same(cb(x), b(x))
    s = framejit.stats()
    assert s["fallbacks"] == 0 and s["graph_breaks"] == 0 and s["compiles"] == 1, s


def scale(x, factor=2.0):
    return x * factor


def default_of_factor(x):
    return x * inspect.signature(scale).parameters["factor"].default


def test_a_changed_default_is_seen():
    x = torch.randn(4)
    cf = framejit.compile(default_of_factor)
    assert_same(cf(x), default_of_factor(x))
    scale.__defaults__ = (5.0,)
    try:
        assert_same(cf(x), default_of_factor(x))
    finally:
        scale.__defaults__ = (2.0,)
    assert_same(cf(x), default_of_factor(x))
    assert framejit.stats(default_of_factor)["fallbacks"] == 0


def one(x):
    return x + 1


def count_params(x):
    return x * len(inspect.signature(one).parameters)


def test_a_rebound_global_is_seen():
    global one
    x = torch.randn(3)
    compiled_whole(count_params, [(x,), (x * 2,)], compiles=1)
    cf = framejit.compile(count_params)
    saved = one
    try:
        one = lambda x, y, z: x  # noqa: E731 - three parameters now
        assert_same(cf(x), count_params(x))
    finally:
        one = saved
    assert_same(cf(x), count_params(x))


def wrapped(fn):
    @functools.wraps(fn)
    def inner(*args):
        return fn(*args)
    return inner


@wrapped
def doubled(x):
    return x * 2


def count_wrapped(x):
    return x * len(inspect.signature(doubled).parameters)


def test_a_wrapped_function_gives_eagers_answer():
    x = torch.randn(3)
    cf = framejit.compile(count_wrapped)
    for _ in range(2):
        assert_same(cf(x), count_wrapped(x))


def test_the_mismatch_error_is_eagers():
    m = Layer()
    x = torch.randn(2, 3)

    def two_tensors(x):
        return apply_chunking(m.chunk, x, x)

    cf = framejit.compile(two_tensors)
    for fn in (two_tensors, cf):
        try:
            fn(x)
        except ValueError as e:
            assert str(e) == "forward_fn expects 1 arguments, got 2"
        else:
            raise AssertionError("no ValueError")
