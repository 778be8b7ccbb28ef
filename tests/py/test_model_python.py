"""The Python that model code uses, traced into one graph instead of ending the trace:
*args / **kwargs parameters and f(*args, **kwargs) calls, super(), hasattr() and
getattr() with a default, properties and __getattr__, Module.parameters() and the
other structure generators. Each case is compared against eager, checked to trace
as one graph without a break, and checked to retrace (not reuse a stale result) when
what it read changes."""
import pytest
import torch
import torch.nn as nn

import framejit
from conftest import assert_same, one_graph


# ---- *args / **kwargs ----


def star_params(x, *args, scale=1.0, **kwargs):
    y = x * scale
    for a in args:
        y = y + a
    if kwargs.get("mask") is not None:
        y = y * kwargs["mask"]
    if "bias" in kwargs:
        y = y + kwargs["bias"]
    return y


def test_star_parameters_of_the_compiled_frame():
    x, a, m = torch.randn(3, 4), torch.randn(3, 4), torch.randn(3, 4)
    one_graph(star_params, x, a, mask=m)
    cf = framejit.compile(star_params)
    calls = [((x,), {}), ((x, a, a), {}), ((x, a), {"mask": m}), ((x,), {"mask": None, "bias": 2.0}),
             ((x,), {"mask": m, "bias": 3.0}), ((x, a), {"scale": 3.0, "mask": m}), ((x, a), {"mask": m})]
    for args, kwargs in calls:
        assert_same(cf(*args, **kwargs), star_params(*args, **kwargs))
    s = framejit.stats(star_params)
    assert s["fallbacks"] == 0 and s["graph_breaks"] == 0
    assert s["cache_hits"] >= 1  # the last call repeats the structure of the third


def test_star_parameters_new_keys_and_values_retrace():
    x, m = torch.randn(5), torch.randn(5)
    cf = framejit.compile(star_params)
    assert_same(cf(x, mask=m), star_params(x, mask=m))
    assert_same(cf(x, bias=m), star_params(x, bias=m))  # other key: not the mask's trace
    assert_same(cf(x, bias=2.0), star_params(x, bias=2.0))
    assert_same(cf(x, bias=5.0), star_params(x, bias=5.0))  # another value of a kwarg
    assert_same(cf(x, m, bias=5.0), star_params(x, m, bias=5.0))  # one more *args item


def takes_kwargs(a, **kw):
    return a * kw.get("s", 2.0) + kw.get("t", 0.0)


def first_or_second(*args, **kwargs):
    # a boolean_dispatch-style wrapper: picks an implementation by a keyword
    if kwargs.get("second", False):
        return args[1] - args[0]
    return args[0] - args[1]


def calls_with_stars(x, y):
    args = (x, y * 2)
    kw = {"s": 3.0}
    p = takes_kwargs(x, **kw) + takes_kwargs(*args[:1], t=1.0)
    q = first_or_second(*args) + first_or_second(*[x, *args[1:]], **{"second": True})
    merged = {**kw, "t": 0.5}
    return p + q + takes_kwargs(y, **merged)


def test_star_calls_and_kwargs_callees_are_inlined():
    x, y = torch.randn(6), torch.randn(6)
    one_graph(calls_with_stars, x, y)
    cf = framejit.compile(calls_with_stars)
    assert_same(cf(x, y), calls_with_stars(x, y))
    assert_same(cf(y, x), calls_with_stars(y, x))
    assert framejit.stats(calls_with_stars)["fallbacks"] == 0


def test_star_kwargs_forwarded_to_a_torch_function():
    def f(x, **kw):
        return torch.softmax(x, **kw) + torch.sum(x, *(1,), **{"keepdim": True})

    x = torch.randn(3, 4)
    one_graph(f, x, dim=-1)
    cf = framejit.compile(f)
    assert_same(cf(x, dim=-1), f(x, dim=-1))
    assert_same(cf(x, dim=0), f(x, dim=0))


def test_duplicate_keyword_raises_as_eager():
    def f(x):
        kw = {"a": x}
        return takes_kwargs(x, **kw, **{"a": x})

    cf = framejit.compile(f)
    x = torch.randn(2)
    try:
        f(x)
    except TypeError as e:
        eager = str(e)
    try:
        cf(x)
    except TypeError as e:
        assert str(e) == eager
    else:
        raise AssertionError("no TypeError")


# ---- super() ----


class Base(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, x):
        return self.lin(x)


class Derived(Base):
    def forward(self, x):
        return super().forward(x) * 2


class Twice(Derived):
    def forward(self, x):
        return super().forward(x) + 1


class Outer(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = Twice()

    def forward(self, x):
        return self.inner(x) - 3


def test_super_forward_in_root_and_inlined_frames():
    x = torch.randn(4, 8)
    with torch.no_grad():
        for m in (Derived(), Twice(), Outer()):
            one_graph(type(m).forward, m, x)
            cm = framejit.compile(m)
            assert_same(cm(x), m(x))
            assert framejit.stats()["fallbacks"] == 0
            framejit.reset()


class A:
    def calc(self, x):
        return x + 1


class B(A):
    def calc(self, x):
        return super().calc(x) * 2


class Mixin(A):
    def calc(self, x):
        return x - 5


class C(B, Mixin):  # MRO C, B, Mixin, A: super() in B.calc reaches Mixin.calc
    pass


def calls_calc(o, x):
    return o.calc(x)


def test_super_follows_the_mro_of_each_object():
    x = torch.randn(5)
    one_graph(calls_calc, B(), x)
    cf = framejit.compile(calls_calc)
    assert_same(cf(B(), x), calls_calc(B(), x))
    assert_same(cf(C(), x), calls_calc(C(), x))  # same B.calc, another super() target
    assert_same(cf(B(), x), calls_calc(B(), x))


class ExplicitSuper(B):
    def calc(self, x):
        return super(B, self).calc(x) + super(ExplicitSuper, self).calc(x)  # Python 2 style, as PyTorch's examples


class NotASubclass(A):
    def calc(self, x):
        return super(B, self).calc(x)  # CPython raises TypeError: self is no B


def test_super_with_a_class_and_an_object():
    x = torch.randn(5)
    one_graph(calls_calc, ExplicitSuper(), x)
    cf = framejit.compile(calls_calc)
    assert_same(cf(ExplicitSuper(), x), calls_calc(ExplicitSuper(), x))
    assert_same(cf(C(), x), calls_calc(C(), x))
    for fn in (cf, calls_calc):
        with pytest.raises(TypeError, match=r"super\(type, obj\): obj must be an instance or subtype of type"):
            fn(NotASubclass(), x)


# ---- hasattr / getattr with a default ----


class Config:
    def __init__(self):
        self.a = 2.0

    @property
    def double(self):
        return self.a * 2


def reads_config(x, c):
    if hasattr(c, "a"):
        x = x + c.a
    if hasattr(c, "extra"):
        x = x + 100
    return x * getattr(c, "b", 3.0) + getattr(c, "a", 7.0)


def test_hasattr_and_getattr_default():
    x = torch.randn(4)
    c = Config()
    one_graph(reads_config, x, c)
    cf = framejit.compile(reads_config)
    assert_same(cf(x, c), reads_config(x, c))
    c.extra = 1  # now present: the absent guard fails, the trace is redone
    assert_same(cf(x, c), reads_config(x, c))
    c.b = 0.5  # getattr finds it now instead of the default
    assert_same(cf(x, c), reads_config(x, c))
    del c.a
    assert_same(cf(x, c), reads_config(x, c))
    assert framejit.stats(reads_config)["fallbacks"] == 0


def test_hasattr_on_module_submodules_and_parameters():
    class M(nn.Module):
        def __init__(self, with_proj):
            super().__init__()
            self.lin = nn.Linear(4, 4)
            if with_proj:
                self.proj = nn.Linear(4, 4)

        def forward(self, x):
            x = self.lin(x)
            if hasattr(self, "proj"):
                x = self.proj(x)
            if getattr(self.lin, "bias", None) is not None:
                x = x + 1
            return x

    x = torch.randn(2, 4)
    with torch.no_grad():
        for with_proj in (False, True):
            m = M(with_proj)
            one_graph(M.forward, m, x)
            assert_same(framejit.compile(m)(x), m(x))


# ---- properties and __getattr__ ----


class Lazy:
    def __init__(self):
        self.known = 2.0

    def __getattr__(self, name):
        return 5.0 if name == "five" else 1.0


def test_property_getter_is_inlined_and_follows_its_reads():
    def f(x, c):
        return x * c.double

    x = torch.randn(4)
    c = Config()
    one_graph(f, x, c)
    cf = framejit.compile(f)
    assert_same(cf(x, c), f(x, c))
    c.a = 10.0  # the getter's own read is guarded
    assert_same(cf(x, c), f(x, c))


def test_getattr_fallback_is_inlined_until_the_attribute_exists():
    def f(x, d):
        return x * d.five + d.known

    x = torch.randn(4)
    d = Lazy()
    one_graph(f, x, d)
    cf = framejit.compile(f)
    assert_same(cf(x, d), f(x, d))
    d.five = -1.0  # a plain attribute now: __getattr__ is no longer reached
    assert_same(cf(x, d), f(x, d))


def test_method_read_as_a_value_and_called_with_stars():
    class Calc:
        def __init__(self, k):
            self.k = k

        def sub(self, a, b):
            return (a - b) * self.k

    def f(x, o):
        fn = o.sub
        args = (x, 1.0)
        return fn(*args)

    x = torch.randn(3)
    one_graph(f, x, Calc(2.0))
    cf = framejit.compile(f)
    assert_same(cf(x, Calc(2.0)), f(x, Calc(2.0)))
    assert_same(cf(x, Calc(4.0)), f(x, Calc(4.0)))


# ---- Module.parameters() and the other structure generators ----


class Tree(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = nn.Linear(8, 8)
        self.l2 = nn.Sequential(nn.Linear(8, 8), nn.ReLU())
        self.register_buffer("scale", torch.full((8,), 0.5))

    def forward(self, x):
        for child in self.children():
            x = child(x)
        total = sum([p.sum() for p in self.parameters()])
        n = 0
        for _name, _m in self.named_modules():
            n += 1
        for _name, b in self.named_buffers():
            x = x * b
        names = [name for name, _ in self.named_parameters(prefix="top")]
        for p, q in zip(self.l1.parameters(), list(self.l2.parameters())):
            x = x + p.mean() - q.mean()
        return x + total + n + len(names)


def test_module_generators_trace_as_one_graph():
    x = torch.randn(4, 8)
    m = Tree()
    with torch.no_grad():
        one_graph(Tree.forward, m, x)
        cm = framejit.compile(m)
        assert_same(cm(x), m(x))
        m.l1.weight.mul_(2)  # new values in place: read again at every call
        assert_same(cm(x), m(x))
    assert framejit.stats()["fallbacks"] == 0


def test_module_generators_retrace_on_a_new_structure():
    x = torch.randn(4, 8)
    m = Tree()
    with torch.no_grad():
        cm = framejit.compile(m)
        assert_same(cm(x), m(x))
        m.l3 = nn.Linear(8, 8)  # one more child: children() and parameters() change
        assert_same(cm(x), m(x))
        m.register_buffer("shift", torch.full((8,), 2.0))
        assert_same(cm(x), m(x))
        m.l2.append(nn.Tanh())  # a submodule deeper in the tree
        assert_same(cm(x), m(x))
        assert framejit.stats()["fallbacks"] == 0
        del m.l2[1]  # Sequential rebuilds _modules as an OrderedDict: correct, maybe not traced
        assert_same(cm(x), m(x))


def test_parameters_with_autograd():
    x = torch.randn(4, 8)
    m = Tree()
    cm = framejit.compile(m)
    out = cm(x).sum()
    ref = m(x).sum()
    assert_same(out, ref)
    out.backward()
    grads = [p.grad.clone() for p in m.parameters()]
    m.zero_grad()
    ref.backward()
    for g, p in zip(grads, m.parameters()):
        torch.testing.assert_close(g, p.grad, rtol=1e-5, atol=1e-5)


# ---- generator expressions consumed by sum(), tuple(), for loops ----


def genexprs(x, ts):
    s = sum(t.sum() for t in ts)
    outs = tuple(v for v in [x, None, x * 2] if v is not None)
    for y in (t * 3 for t in ts):
        x = x + y
    return s + outs[0] + outs[1] + len(outs) + x


def test_generator_expressions_run_to_their_end():
    x = torch.randn(3)
    ts = [torch.randn(3), torch.randn(3)]
    one_graph(genexprs, x, ts)
    cf = framejit.compile(genexprs)
    assert_same(cf(x, ts), genexprs(x, ts))
    ts3 = ts + [torch.randn(3)]  # a longer list: retraced, not the two-item loop
    assert_same(cf(x, ts3), genexprs(x, ts3))
    assert framejit.stats(genexprs)["fallbacks"] == 0


def test_parameter_count_through_a_generator_expression():
    class M(nn.Module):
        def __init__(self, n):
            super().__init__()
            self.layers = nn.ModuleList([nn.Linear(3, 3) for _ in range(n)])

        def forward(self, x):
            return x * sum(p.numel() for p in self.parameters())

    x = torch.randn(3)
    with torch.no_grad():
        m = M(2)
        one_graph(M.forward, m, x)
        cm = framejit.compile(m)
        assert_same(cm(x), m(x))
        m.layers.append(nn.Linear(3, 3))
        assert_same(cm(x), m(x))


def test_generator_expression_that_writes_in_place_keeps_eager_order():
    def f(x):
        ts = [x.clone(), x.clone()]
        out = []
        for t in (u.add_(1) for u in ts):  # eager runs each add_ when the loop asks
            ts[1].mul_(2)
            out.append(t.clone())
        return out[0] + out[1]

    x = torch.randn(4)
    cf = framejit.compile(f)
    assert_same(cf(x), f(x))


# ---- the combination, in the style of a HuggingFace model ----


class HfConfig:
    def __init__(self):
        self.hidden = 8
        self._eps = 1e-5

    @property
    def eps(self):
        return self._eps


class HfLayer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.lin = nn.Linear(cfg.hidden, cfg.hidden)

    def forward(self, hidden_states, attention_mask=None, *args, output_attentions=False, **kwargs):
        h = self.lin(hidden_states)
        if attention_mask is not None:
            h = h * attention_mask
        return (h,) + ((h.sum(),) if output_attentions else ())


class HfModel(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.layers = nn.ModuleList([HfLayer(cfg) for _ in range(2)])

    def forward(self, x, attention_mask=None, return_dict=None, **kwargs):
        all_hidden = ()
        for layer in self.layers:
            out = layer(x, attention_mask, **kwargs)
            x = out[0]
            all_hidden = all_hidden + (x,)
        x = x + getattr(self.cfg, "eps", 0.0) + getattr(self.cfg, "missing", 1.0)
        return tuple(v for v in [x, all_hidden, None] if v is not None)


def test_huggingface_style_forward_is_one_graph():
    m = HfModel(HfConfig())
    x, mask = torch.randn(2, 8), torch.ones(2, 8)
    with torch.no_grad():
        one_graph(HfModel.forward, m, x, attention_mask=mask, output_attentions=True)
        cm = framejit.compile(m)
        for kwargs in ({"attention_mask": mask, "output_attentions": True}, {}, {"output_attentions": False}):
            assert_same(cm(x, **kwargs), m(x, **kwargs))
        m.cfg._eps = 0.5  # read through the property: guarded
        assert_same(cm(x), m(x))
    assert framejit.stats()["fallbacks"] == 0


def test_generator_expression_consumed_by_a_loop_that_writes_in_place():
    def f(x):
        ts = [x + 0, x + 1, x + 2]
        out = x * 0
        for i, y in enumerate(t * 3 for t in ts):  # eager computes each item when asked
            ts[-1].mul_(2)
            out = out + y * (i + 1)
        return out

    x = torch.randn(4)
    cf = framejit.compile(f)
    assert_same(cf(x), f(x))
    assert_same(cf(x), f(x))


def closure_model():
    lin = nn.Linear(4, 3)
    norm = nn.Linear(3, 3)

    def helper(h):  # an inlined callee whose closure holds a module
        return torch.tanh(norm(h)) * 2

    def f(x):
        return helper(torch.relu(lin(x))) + 1
    return f, lin, norm


def test_a_module_held_in_a_closure_is_traced_into():
    f, lin, _ = closure_model()
    cf = framejit.compile(f)
    x = torch.randn(5, 4)
    assert_same(cf(x), f(x))
    s = framejit.stats(f)
    assert s["graphs"] >= 1 and s["graph_breaks"] == 0 and s["fallbacks"] == 0, (s, framejit.fallbacks(f))
    # Its parameters are read again at each call: updated in place, or replaced.
    with torch.no_grad():
        lin.weight.mul_(-2)
    assert_same(cf(x), f(x))
    lin.bias = nn.Parameter(torch.randn(3))
    assert_same(cf(x), f(x))
    assert framejit.stats(f)["compiles"] == 1



def test_a_tensor_held_in_a_closure_is_a_graph_input():
    # Read from the cell's object at each call (guarded by identity), as a module's
    # parameter is: an extern call (conv2d), a subscript and pointwise ops take it, its
    # values may change in place between calls, and a write inside reaches it.
    gen = torch.Generator().manual_seed(5)
    w = torch.randn(4, 3, 3, 3, generator=gen)
    scale = torch.ones(4, 1, 1)

    def helper(h):  # an inlined callee with the same tensor in its own closure
        return h * scale

    def f(x):
        y = torch.nn.functional.conv2d(x, w, padding=1).relu() + w[0, 0, 0, 0]
        scale.add_(0.5)
        return helper(y)

    w2, scale2 = w.clone(), scale.clone()

    def g(x):  # the same body over its own copies, run by CPython
        y = torch.nn.functional.conv2d(x, w2, padding=1).relu() + w2[0, 0, 0, 0]
        scale2.add_(0.5)
        return y * scale2

    cf = framejit.compile(f)
    for n, side in ((2, 8), (3, 11), (2, 6)):
        x = torch.randn(n, 3, side, side, generator=gen)
        assert_same(cf(x), g(x))
        assert_same(scale, scale2)
        with torch.no_grad():
            w.mul_(-1.5)
            w2.mul_(-1.5)
    s = framejit.stats(f)
    assert (s["compiles"], s["graph_breaks"], s["fallbacks"], s["deopts"]) == (1, 0, 0, 0), (s, framejit.fallbacks(f))

def test_gradients_reach_a_closure_module_parameters():
    f, lin, norm = closure_model()
    x, gy = torch.randn(5, 4), torch.randn(5, 3)
    framejit.compile(f)(x).backward(gy)
    got = [p.grad.clone() for p in (lin.weight, lin.bias, norm.weight)]
    for p in (lin.weight, lin.bias, norm.weight):
        p.grad = None
    f(x).backward(gy)
    for g, p in zip(got, (lin.weight, lin.bias, norm.weight)):
        assert_same(g, p.grad)


# ---- assignments to globals ----

LAST_SIZE = None
HISTORY = None


def records_its_size(x):
    global LAST_SIZE, HISTORY
    LAST_SIZE = x.shape[0]
    HISTORY = [LAST_SIZE]
    HISTORY.append(LAST_SIZE * 2)
    return x * LAST_SIZE


def test_a_global_assignment_is_stored_when_the_plan_returns():
    global LAST_SIZE, HISTORY
    cf = framejit.compile(records_its_size)
    for n in (3, 5, 4):
        x = torch.randn(n)
        want = records_its_size(x)
        want_globals = (LAST_SIZE, list(HISTORY))
        LAST_SIZE = HISTORY = None
        assert_same(cf(x), want)
        assert (LAST_SIZE, HISTORY) == want_globals
    s = framejit.stats(records_its_size)
    assert s["compiles"] == 1 and s["fallbacks"] == 0 and s["graph_breaks"] == 0


def reads_the_global_in_cpython(x):
    global LAST_SIZE
    LAST_SIZE = x.shape[0] + 1
    seen = eval("LAST_SIZE")  # noqa: S307 - a call framejit runs in CPython, which reads the global
    return x * seen


def test_code_run_in_cpython_after_a_global_assignment_sees_it():
    global LAST_SIZE
    cf = framejit.compile(reads_the_global_in_cpython)
    for n in (3, 4):
        x = torch.randn(n)
        LAST_SIZE = None
        assert_same(cf(x), reads_the_global_in_cpython(x))
        assert LAST_SIZE == n + 1


# ---- with blocks on objects of the frame's own context managers ----


class Scope:
    def __init__(self, scale):
        self.scale = scale
        self.depth = 0

    def __enter__(self):
        self.depth += 1
        return self.scale * 2

    def __exit__(self, *exc):
        self.depth -= 1
        return False


def uses_a_context_manager(x, s):
    cm = Scope(s)
    with cm as k:
        y = x * k
        inside = cm.depth
    with Scope(3):
        y = y + 1
    return y, inside, cm.depth


def test_a_with_block_on_a_user_context_manager_is_traced():
    for s in (2.0, 0.5):
        one_graph(uses_a_context_manager, torch.randn(3), s)
    cf = framejit.compile(uses_a_context_manager)
    for n, s in ((3, 2.0), (4, 0.5)):
        x = torch.randn(n)
        assert_same(cf(x, s), uses_a_context_manager(x, s))
    assert framejit.stats(uses_a_context_manager)["fallbacks"] == 0
