"""Modules of one class and structure share compiled code: a layer's forward traced
once serves every layer of a stack (parameters fetched from the instance called),
while any difference the trace depends on (sizes, a submodule, a float used as a
constant, `training`, hooks) gives a correct result of its own."""
import torch
import torch.nn as nn
import torch.nn.functional as F

import framejit
from conftest import assert_same, run_python


class Mlp(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.fc1 = nn.Linear(d, h)
        self.fc2 = nn.Linear(h, d)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))


class Block(nn.Module):
    """A small pre-norm transformer block: LayerNorm, Linear, GELU, residual."""

    def __init__(self, d=16, h=32, scale=0.5, extra=False):
        super().__init__()
        self.ln = nn.LayerNorm(d)
        self.mlp = Mlp(d, h)
        self.scale = scale
        # an extra submodule in the structure: another key in post._modules
        self.post = nn.Sequential(nn.Linear(d, d), nn.Linear(d, d)) if extra else nn.Sequential(nn.Linear(d, d))

    def forward(self, x):
        y = self.mlp(self.ln(x)) * self.scale
        if self.training:
            y = y * 2.0
        return x + self.post(y)


def _stack(n, **kw):
    torch.manual_seed(0)
    return [Block(**kw) for _ in range(n)]


def test_twelve_layers_share_one_compile():
    layers = _stack(12)
    compiled = [framejit.compile(layer) for layer in layers]
    x = torch.randn(4, 16)
    for layer, c in zip(layers, compiled):
        assert_same(c(x), layer(x))
    st = framejit.stats(Block.forward)
    assert st["compiles"] == 1, st
    assert st["fallbacks"] == 0, st
    assert st["cache_hits"] == 11, st


def test_stack_run_layer_after_layer_equals_eager():
    layers = _stack(12)
    compiled = [framejit.compile(layer) for layer in layers]
    for n in (5, 7, 9):
        x = torch.randn(2, n, 16, requires_grad=True)  # as every later layer's input
        h, e = x, x
        for layer, c in zip(layers, compiled):
            h, e = c(h), layer(e)
        assert_same(h, e)
    assert framejit.stats(Block.forward)["compiles"] == 1
    assert framejit.stats(Block.forward)["fallbacks"] == 0


def _each_correct(layers, x):
    compiled = [framejit.compile(layer) for layer in layers]
    for _ in range(2):  # the second round runs from the cache
        for layer, c in zip(layers, compiled):
            assert_same(c(x), layer(x))


def test_other_sizes_get_their_own_entry():
    torch.manual_seed(1)
    layers = [Block(16, 32), Block(16, 64), Block(16, 32), Block(16, 8)]
    _each_correct(layers, torch.randn(3, 16))
    # sizes are symbols: one entry may serve them all, but never more than one each
    assert 1 <= framejit.stats(Block.forward)["compiles"] <= 3


def test_a_float_attribute_is_a_guarded_constant():
    torch.manual_seed(2)
    layers = [Block(scale=0.5), Block(scale=0.25), Block(scale=0.5)]
    _each_correct(layers, torch.randn(3, 16))
    assert framejit.stats(Block.forward)["compiles"] == 2


def test_an_extra_submodule_is_another_structure():
    torch.manual_seed(3)
    layers = [Block(), Block(extra=True), Block(), Block(extra=True)]
    _each_correct(layers, torch.randn(3, 16))
    assert framejit.stats(Block.forward)["compiles"] == 2


def test_training_flag_is_guarded_per_instance():
    torch.manual_seed(4)
    layers = [Block(), Block(), Block()]
    layers[1].train(False)
    _each_correct(layers, torch.randn(3, 16))
    # and flipping a flag later is seen too
    layers[0].train(False)
    layers[1].train(True)
    _each_correct(layers, torch.randn(3, 16))


def test_a_submodule_of_another_class_with_the_same_names():
    class Gelu2(nn.Module):
        def forward(self, x):
            return F.gelu(x) * 2

    class Act(nn.Module):
        def __init__(self, act):
            super().__init__()
            self.act = act

        def forward(self, x):
            return self.act(x) + 1

    layers = [Act(nn.GELU()), Act(Gelu2()), Act(nn.GELU())]
    _each_correct(layers, torch.randn(5))
    assert framejit.stats(Act.forward)["compiles"] == 2


def test_a_submodule_with_a_hook_is_called_on_its_own_instance():
    calls = []

    class Outer(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = nn.Linear(4, 4)

        def forward(self, x):
            return self.inner(x) * 2

    torch.manual_seed(5)
    layers = [Outer() for _ in range(4)]
    for k, layer in enumerate(layers):
        layer.inner.register_forward_hook(lambda m, i, o, k=k: calls.append(k))
    x = torch.randn(2, 4)
    compiled = [framejit.compile(layer) for layer in layers]
    with torch.no_grad():  # a break (the hooked call) where tensors require grad falls back
        got = [c(x) for c in compiled]
    assert calls == [0, 1, 2, 3]
    calls.clear()
    expected = [layer(x) for layer in layers]
    assert calls == [0, 1, 2, 3]
    for g, e in zip(got, expected):
        assert_same(g, e)
    assert framejit.stats(Outer.forward)["compiles"] == 1


def test_hooks_added_to_one_instance_later():
    calls = []
    torch.manual_seed(6)
    layers = _stack(3)
    compiled = [framejit.compile(layer) for layer in layers]
    x = torch.randn(2, 16)
    for c in compiled:
        c(x)
    layers[2].mlp.fc1.register_forward_hook(lambda m, i, o: calls.append(1))
    for layer, c in zip(layers, compiled):
        assert_same(c(x), layer(x))
    assert calls == [1, 1]  # once under framejit, once eager


def test_a_module_list_of_another_length():
    class Stack(nn.Module):
        def __init__(self, n):
            super().__init__()
            self.layers = nn.ModuleList(Mlp(8, 8) for _ in range(n))

        def forward(self, x):
            for layer in self.layers:
                x = x + layer(x)
            return x

    torch.manual_seed(7)
    stacks = [Stack(2), Stack(3), Stack(2)]
    _each_correct(stacks, torch.randn(3, 8))
    assert framejit.stats(Stack.forward)["compiles"] == 2


def test_a_submodule_passed_to_an_opaque_call_is_the_callers_own():
    seen = []

    def record(m):
        seen.append(m)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 4)

        def forward(self, x):
            record(self.fc)  # a graph break with the submodule as argument
            return self.fc(x) + 1

    torch.manual_seed(8)
    nets = [Net() for _ in range(3)]
    x = torch.randn(2, 4)
    compiled = [framejit.compile(n) for n in nets]
    with torch.no_grad():
        for _ in range(2):
            for n, c in zip(nets, compiled):
                seen.clear()
                assert_same(c(x), n(x))
                assert len(seen) == 2 and seen[0] is n.fc and seen[1] is n.fc  # framejit's call, then eager's
    assert framejit.stats(Net.forward)["compiles"] == 1


def test_a_submodule_returned_is_the_callers_own():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 4)

        def forward(self, x):
            return self.fc(x), self.fc

    torch.manual_seed(9)
    nets = [Net() for _ in range(3)]
    x = torch.randn(2, 4)
    compiled = [framejit.compile(n) for n in nets]
    for n, c in zip(nets, compiled):
        out, fc = c(x)
        assert fc is n.fc
        assert_same(out, n(x)[0])


def test_replacing_a_submodule_by_another_instance():
    torch.manual_seed(10)
    layer = Block()
    c = framejit.compile(layer)
    x = torch.randn(2, 16)
    assert_same(c(x), layer(x))
    layer.mlp = Mlp(16, 32)  # same class and sizes, other weights
    assert_same(c(x), layer(x))
    layer.mlp.fc2 = nn.Linear(32, 16, bias=False)
    assert_same(c(x), layer(x))
    layer.mlp = None
    try:
        c(x)
        raised = None
    except TypeError as e:
        raised = e
    assert raised is not None and "NoneType" in str(raised)


class Branchy(nn.Module):
    def __init__(self, s):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.inner = nn.Linear(4, 4)
        self.s = s

    def forward(self, x):
        y = self.fc(x)
        if y.sum() > 0:  # a data-dependent branch: a plan step
            return self.inner(y) * self.s  # parameters first read after the branch
        return self.inner(y) - self.s


def _signed_input(net, sign):
    x = torch.ones(2, 4) * 10 * sign
    return x if (net.fc(x).sum() > 0) == (sign > 0) else -x


def test_a_branch_then_a_parameter_read_on_the_first_call():
    # The plan runs its steps while it is traced: the parameter read after the branch
    # must be found for that very call (it used to read an unfilled slot and crash).
    torch.manual_seed(11)
    net = Branchy(0.5)
    c = framejit.compile(net)
    with torch.no_grad():
        for sign in (1, -1, 1, -1):
            x = _signed_input(net, sign)
            assert_same(c(x), net(x))


def test_branch_outcomes_across_instances():
    torch.manual_seed(12)
    nets = [Branchy(0.5), Branchy(0.5), Branchy(0.25), Branchy(0.5)]
    compiled = [framejit.compile(n) for n in nets]
    with torch.no_grad():
        for _ in range(2):
            for n, c in zip(nets, compiled):
                for sign in (1, -1):
                    x = _signed_input(n, sign)
                    assert_same(c(x), n(x))
    assert framejit.stats(Branchy.forward)["compiles"] == 2  # the two values of `s`


def _untraceable(x):
    return torch.from_numpy(x.numpy().copy())  # ndarray.copy(): a graph break


def test_a_new_result_after_a_break_is_traced_not_left_to_cpython():
    # The break's result has the traced size only for the first length: each other
    # length gets a continuation of its own, traced once (a recompile), then reused.
    def f(x):
        y = _untraceable(x)
        return y * 2 + x

    cf = framejit.compile(f)
    with torch.no_grad():
        for n in (3, 4, 5, 3, 4, 5):
            x = torch.randn(n)
            assert_same(cf(x), f(x))
    st = framejit.stats(f)
    assert (st["compiles"], st["cache_hits"], st["deopts"]) == (1, 5, 0), st
    assert st["recompiles"] == 2, st  # lengths 4 and 5, once each


def test_a_sweep_of_lengths_after_a_break_has_no_deopts():
    def f(x):
        y = _untraceable(x)  # a break whose result's size is the length's
        z = torch.sigmoid(y) * x
        print("mid", z.shape[0])  # a second break, inside each continuation
        return z + 1

    cf = framejit.compile(f)
    lengths = (2, 3, 5, 8, 13, 21, 34)  # cache_limit (8) continuations at most
    import contextlib, io
    with torch.no_grad():
        for _ in range(2):
            for n in lengths:
                x = torch.randn(n)
                with contextlib.redirect_stdout(io.StringIO()) as got:
                    r = cf(x)
                with contextlib.redirect_stdout(io.StringIO()) as want:
                    e = f(x)
                assert_same(r, e)
                assert got.getvalue() == want.getvalue()
    st = framejit.stats(f)
    assert (st["compiles"], st["deopts"], st["fallbacks"]) == (1, 0, 0), st
    assert st["recompiles"] == len(lengths) - 1, st  # the second sweep traces nothing


def test_past_cache_limit_a_new_result_deopts():
    def f(x):
        y = _untraceable(x)
        return y * 2 + x

    old = framejit.config.cache_limit
    framejit.config.cache_limit = 3
    try:
        cf = framejit.compile(f)
        with torch.no_grad():
            for n in (2, 3, 4, 5, 6, 2, 4):
                x = torch.randn(n)
                assert_same(cf(x), f(x))
        st = framejit.stats(f)
        assert st["recompiles"] == 2, st  # lengths 3 and 4: three continuations in all
        assert st["deopts"] == 2, st      # lengths 5 and 6 run the rest in CPython, counted
    finally:
        framejit.config.cache_limit = old


def test_a_number_returned_by_a_break_gets_a_continuation_per_value():
    def count(x):
        return len(x.numpy().copy())  # ndarray.copy() breaks: an int the trace goes on with as a constant

    def f(x):
        n = count(x)
        return x * n + (n > 3)

    cf = framejit.compile(f)
    with torch.no_grad():
        for n in (2, 5, 2, 5, 7):
            x = torch.randn(n)
            assert_same(cf(x), f(x))
    st = framejit.stats(f)
    assert (st["compiles"], st["recompiles"], st["deopts"]) == (1, 2, 0), st


def test_a_deopt_is_logged_under_recompiles():
    out = run_python(
        "import torch, framejit\n"
        "def g(x):\n"
        "    return torch.tensor([float(v) for v in x.numpy().copy()])\n"
        "def f(x):\n"
        "    return g(x) * 2 + x\n"
        "framejit.config.cache_limit = 2\n"
        "cf = framejit.compile(f)\n"
        "with torch.no_grad():\n"
        "    cf(torch.ones(3)); cf(torch.ones(4)); r = cf(torch.ones(5))\n"
        "assert torch.equal(r, torch.ones(5) * 3), r\n",
        env={"FRAMEJIT_LOG": "recompiles"})
    assert out.returncode == 0, out.stderr
    assert "recompile: f goes on after a graph break with a new kind of result" in out.stderr, out.stderr
    assert "deopt: resuming f in CPython" in out.stderr, out.stderr  # past cache_limit


def test_cache_limit_counts_structures_and_keeps_working_entries():
    # 12 layers of 3 structures (the float `scale`): 3 entries, far below cache_limit.
    torch.manual_seed(13)
    layers = [Block(scale=(0.5, 0.25, 0.125)[k % 3]) for k in range(12)]
    _each_correct(layers, torch.randn(2, 16))
    st = framejit.stats(Block.forward)
    assert st["compiles"] == 3 and st["fallbacks"] == 0, st
    # More structures than cache_limit: the first ones keep running compiled.
    old = framejit.config.cache_limit
    framejit.config.cache_limit = 4
    try:
        framejit.reset()
        more = [Block(scale=0.5 + k) for k in range(6)]
        compiled = [framejit.compile(m) for m in more]
        x = torch.randn(2, 16)
        import warnings
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            for _ in range(3):
                for m, c in zip(more, compiled):
                    assert_same(c(x), m(x))
        st = framejit.stats(Block.forward)
        assert st["compiles"] == 4, st
        assert st["cache_hits"] == 8, st  # the 4 compiled structures, twice more each
    finally:
        framejit.config.cache_limit = old


def test_a_branch_outcome_first_taken_by_another_instance():
    # The outcome that the first instance never took is traced on the call of another
    # instance of the class (which shares the entry): it must read that instance's
    # float, not the first one's (it used to return y - 0.5 for s=0.25).
    class OnlyElse(nn.Module):
        def __init__(self, s):
            super().__init__()
            self.fc = nn.Linear(4, 4)
            self.s = s

        def forward(self, x):
            y = self.fc(x)
            if y.sum() > 0:
                return y * 2
            return y - self.s

    torch.manual_seed(14)
    nets = [OnlyElse(0.5), OnlyElse(0.25), OnlyElse(0.125)]
    compiled = [framejit.compile(n) for n in nets]
    with torch.no_grad():
        x = _signed_input(nets[0], 1)
        assert_same(compiled[0](x), nets[0](x))
        for k in (1, 2, 1, 0, 2):
            x = _signed_input(nets[k], -1)
            assert_same(compiled[k](x), nets[k](x))
    st = framejit.stats(OnlyElse.forward)
    assert st["compiles"] == 1, st
    assert st["deopts"] >= 1, st  # instances whose `s` differs from the traced outcome's


# An nn.Module passed as an argument (a training step's `model`) is traced into, guarded
# by class as a module found by path is: one compile serves every instance of the
# class, each call using its own instance's parameters, training flag and hooks.
def _step_loss(model, batch):
    out = model(batch["x"])
    return F.cross_entropy(out, batch["y"]), out.argmax(-1)


def test_a_module_argument_is_traced_and_shared_by_class():
    torch.manual_seed(3)
    nets = [nn.Sequential(nn.Linear(6, 16), nn.GELU(), nn.Dropout(0.0), nn.Linear(16, 4)) for _ in range(3)]
    cf = framejit.compile(_step_loss)
    for k in (0, 1, 2, 1):
        batch = {"x": torch.randn(5, 6), "y": torch.randint(0, 4, (5,))}
        nets[k].zero_grad()
        got, got_arg = cf(nets[k], batch)
        got.backward()
        got_grads = [p.grad.clone() for p in nets[k].parameters()]
        nets[k].zero_grad()
        want, want_arg = _step_loss(nets[k], batch)
        want.backward()
        assert_same(got, want)
        assert torch.equal(got_arg, want_arg)
        for g, p in zip(got_grads, nets[k].parameters()):
            torch.testing.assert_close(g, p.grad)
    s = framejit.stats(_step_loss)
    assert (s["compiles"], s["fallbacks"], s["graph_breaks"]) == (1, 0, 0), s
    # a module of another structure, or one with a hook, gets a correct result of its own
    other = nn.Sequential(nn.Linear(6, 4))
    hooked = nn.Sequential(nn.Linear(6, 16), nn.GELU(), nn.Dropout(0.0), nn.Linear(16, 4))
    calls = []
    hooked[0].register_forward_hook(lambda m, i, o: calls.append(o.shape))
    batch = {"x": torch.randn(2, 6), "y": torch.randint(0, 4, (2,))}
    for m in (other, hooked):
        assert_same(cf(m, batch)[0], _step_loss(m, batch)[0])
    assert calls == [torch.Size([2, 16])] * 2
