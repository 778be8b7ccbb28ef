"""Attributes of objects and nn.Modules: read the plain way (instance dict, class
attributes, a module's parameters, buffers and submodules), guarded by path, and
methods of the object's class inlined."""
import types

import pytest
import torch

import framejit
from conftest import assert_same


class Scaler(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("shift", torch.randn(4))
        self.scale = 2.0
        self.act = torch.nn.Identity()

    def helper(self, x):
        return x * self.scale

    def forward(self, x):
        return self.helper(x) + self.shift


def test_module_buffers_and_attributes_are_graph_inputs_and_guards():
    m = Scaler()
    cf = framejit.compile(m.forward)
    x = torch.randn(3, 4)
    assert_same(cf(x), m(x))
    s = framejit.stats(Scaler.forward)
    assert s["graphs"] == 1 and s["fallbacks"] == 0, framejit.fallbacks(Scaler.forward)
    m.shift.add_(1.0)  # in place: same tensor, new values, no recompile
    assert_same(cf(x), m(x))
    m.scale = 3.0  # a new constant: recompile
    assert_same(cf(x), m(x))
    m.shift = torch.randn(4)  # a new buffer object of the same shape: its data is read at each call
    assert_same(cf(x), m(x))
    assert framejit.stats(Scaler.forward)["fallbacks"] == 0
    guards = framejit.explain(m.forward, x).guards
    assert any("L['self'].shift" in g for g in guards) and "L['self'].scale is 3.0" in guards


def test_returning_an_attribute_tensor_returns_that_object():
    m = Scaler()

    def f(mod, x):
        return mod.shift, x + mod.shift

    cf = framejit.compile(f)
    out = cf(m, torch.randn(4))
    assert out[0] is m.shift


def test_method_replaced_on_the_class_or_instance_is_respected():
    class A:
        def __init__(self):
            self.k = 2.0

        def g(self, x):
            return x * self.k

    def f(a, x):
        return a.g(x) + 1

    a, x = A(), torch.randn(3)
    cf = framejit.compile(f)
    assert_same(cf(a, x), f(a, x))
    A.g = lambda self, x: x - self.k
    assert_same(cf(a, x), f(a, x))
    a.g = lambda x: x * 100  # shadowed by the instance
    assert_same(cf(a, x), f(a, x))


def test_global_config_object_attributes_are_used_when_they_change():
    cfg = types.SimpleNamespace(eps=1e-3, on=True)
    scope = {"cfg": cfg, "torch": torch}
    exec("def f(x):\n    if cfg.on:\n        return x + cfg.eps\n    return x - cfg.eps\n", scope)
    f = scope["f"]
    cf = framejit.compile(f)
    x = torch.randn(3)
    assert_same(cf(x), x + 1e-3)
    cfg.eps = 0.5
    assert_same(cf(x), x + 0.5)
    cfg.on = False
    assert_same(cf(x), x - 0.5)
    assert framejit.stats(f)["fallbacks"] == 0


def test_properties_are_traced_through_their_getter():
    class P:
        @property
        def k(self):
            return 3.0

    def f(p, x):
        return x * p.k

    cf = framejit.compile(f)
    assert_same(cf(P(), torch.ones(2)), torch.ones(2) * 3.0)
    assert framejit.fallbacks(f) == []
    assert framejit.stats(f)["graphs"] == 1


def test_parameters_join_autograd():
    lin = torch.nn.Linear(3, 3)

    def f(m, x):
        return x * m.weight

    cf = framejit.compile(f)
    x = torch.randn(3, 3)
    out = cf(lin, x)
    assert out.requires_grad
    assert_same(out.detach(), (x * lin.weight).detach())
    out.sum().backward()
    assert_same(lin.weight.grad, x)  # d(sum(x * w))/dw
    assert framejit.stats(f)["fallbacks"] == 0


def test_compile_module_shares_state_and_runs_forward_compiled():
    m = Scaler()
    cm = framejit.compile(m)
    assert isinstance(cm, torch.nn.Module)
    x = torch.randn(2, 4)
    assert_same(cm(x), m(x))
    assert framejit.stats(Scaler.forward)["graphs"] == 1
    m.shift.mul_(2)  # shared buffer
    assert_same(cm(x), m(x))
    assert cm.scale == 2.0 and cm.shift is m.shift
    assert set(cm.state_dict()) == {"_orig_mod." + k for k in m.state_dict()}
    calls = []
    handle = m.register_forward_hook(lambda mod, inp, out: calls.append(1))
    assert_same(cm(x), m(x))  # hooks run (eagerly)
    handle.remove()
    assert len(calls) == 2


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = Scaler()
        self.act = torch.nn.ReLU()
        self.gate = torch.nn.Sigmoid()
        self.skip = torch.nn.Identity()

    def forward(self, x):
        return self.act(self.inner(x)) * self.gate(x) + self.skip(x)


def test_submodule_calls_are_inlined_and_hooks_respected():
    b = Block()
    cb = framejit.compile(b)
    x = torch.randn(3, 4)
    assert_same(cb(x), b(x))
    s = framejit.stats(Block.forward)
    assert s["graphs"] == 1 and s["fallbacks"] == 0, framejit.fallbacks(Block.forward)
    calls = []
    handle = b.act.register_forward_hook(lambda mod, inp, out: calls.append(1))
    assert_same(cb(x), b(x))  # a hook on a submodule: its guard fails and the hook runs
    assert len(calls) == 2
    handle.remove()
    assert_same(cb(x), b(x))
    assert len(calls) == 2


class Stack(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = torch.nn.ModuleList([Gate(), Gate()])
        self.tail = torch.nn.Sequential(torch.nn.Tanh(), torch.nn.Identity())

    def forward(self, x):
        for blk in self.blocks:
            x = blk(x) + x
        return self.tail(x)


class Gate(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("bias", torch.randn(4))

    def forward(self, x):
        return torch.sigmoid(x + self.bias) * x


def test_module_list_and_sequential_are_unrolled():
    s = Stack()
    cs = framejit.compile(s)
    for rows in (3, 7):
        x = torch.randn(rows, 4)
        assert_same(cs(x), s(x))
    st = framejit.stats(Stack.forward)
    assert (st["compiles"], st["graphs"], st["fallbacks"]) == (1, 1, 0), framejit.fallbacks(Stack.forward)
    s.blocks.append(Gate())  # a new submodule: the guard on the list's submodules fails
    x = torch.randn(2, 4)
    assert_same(cs(x), s(x))
    assert framejit.stats(Stack.forward)["recompiles"] == 1
