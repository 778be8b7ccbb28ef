"""HuggingFace-style Python traced without a break: a config class whose own
__getattribute__ aliases names through a class-level attribute_map (and reads its
instance __dict__ through super().__getattribute__), and wrappers that pop keywords
from **kwargs. Each case is compared against eager, checked for breaks where it should
have none, and checked to follow a change of what it read (a retrace, never a stale
result)."""
import torch
import torch.nn as nn

import framejit
from conftest import assert_same


class AliasConfig:
    """Like transformers' PretrainedConfig: names in attribute_map read other names."""

    attribute_map = {"hidden_size": "n_embd"}
    return_dict = True

    def __init__(self, n_embd, scale):
        self.n_embd = n_embd
        self.scale = scale

    def __getattribute__(self, key):
        if key != "attribute_map" and key in super().__getattribute__("attribute_map"):
            key = super().__getattribute__("attribute_map")[key]
        return super().__getattribute__(key)


class SpecMixin:
    """Like transformers' HeterogeneousConfigMixin: a look into the instance __dict__."""

    def __getattribute__(self, key):
        spec = super().__getattribute__("__dict__").get("_spec")
        if spec is not None and key in spec:
            return spec[key]
        return super().__getattribute__(key)


class SpecConfig(SpecMixin, AliasConfig):
    pass


class Block(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        y = self.lin(x) * self.config.scale + self.config.hidden_size
        return (y,) if self.config.return_dict else y


def no_breaks(fn, *args):
    with torch.no_grad():  # one graph, no backward graph beside it
        e = framejit.explain(fn, *args)
    assert e.graph_breaks == [], [b.reason for b in e.graph_breaks]
    assert e.graph_count == 1
    framejit.reset()


def test_config_getattribute_is_inlined_and_guarded():
    torch.manual_seed(0)
    config = AliasConfig(3, 0.5)
    m = Block(config)
    x = torch.randn(2, 4)
    no_breaks(Block.forward, m, x)
    cm = framejit.compile(m)
    assert_same(cm(x), m(x))
    assert_same(cm(x), m(x))
    s = framejit.stats()
    assert s["fallbacks"] == 0 and s["graph_breaks"] == 0 and s["cache_hits"] >= 1
    # What the inlined __getattribute__ read is guarded: the instance entries, the
    # class attributes, and the answer of `key in attribute_map`.
    config.n_embd = 7
    assert_same(cm(x), m(x))
    config.return_dict = False  # an instance entry now shadows the class's
    assert_same(cm(x), m(x))
    AliasConfig.attribute_map = {}  # hidden_size is no alias now: AttributeError in eager
    try:
        try:
            m(x)
        except AttributeError as e:
            expected = str(e)
        else:
            raise AssertionError("eager did not raise")
        try:
            cm(x)
        except AttributeError as e:
            assert str(e) == expected
        else:
            raise AssertionError("the compiled call did not raise")
    finally:
        AliasConfig.attribute_map = {"hidden_size": "n_embd"}
    del config.return_dict
    assert_same(cm(x), m(x))


def reads_with_defaults(m, x):
    a = getattr(m.config, "scale", 1.0)
    b = getattr(m.config, "missing", 2.0)  # __getattribute__ raises: the default
    c = getattr(m.config, "hidden_size", None)
    return x * a + b * c


def test_config_getattr_with_default_of_a_missing_name():
    config = AliasConfig(3, 0.5)
    m = Block(config)
    x = torch.randn(2, 4)
    no_breaks(reads_with_defaults, m, x)  # the missing name's AttributeError is proved
    cf = framejit.compile(reads_with_defaults)
    assert_same(cf(m, x), reads_with_defaults(m, x))
    assert_same(cf(m, x), reads_with_defaults(m, x))
    config.missing = -4.0
    assert_same(cf(m, x), reads_with_defaults(m, x))
    assert framejit.stats(reads_with_defaults)["fallbacks"] == 0


def test_config_getattribute_replaced_on_the_class_retraces():
    torch.manual_seed(0)
    m = Block(AliasConfig(3, 0.5))
    x = torch.randn(2, 4)
    cm = framejit.compile(m)
    assert_same(cm(x), m(x))
    original = AliasConfig.__getattribute__

    def doubled(self, key):
        v = original(self, key)
        return v * 2 if key == "scale" else v

    AliasConfig.__getattribute__ = doubled
    try:
        assert_same(cm(x), m(x))
    finally:
        AliasConfig.__getattribute__ = original
    assert_same(cm(x), m(x))


def test_config_mixin_reads_its_instance_dict():
    torch.manual_seed(0)
    config = SpecConfig(3, 0.5)
    m = Block(config)
    x = torch.randn(2, 4)
    no_breaks(Block.forward, m, x)
    cm = framejit.compile(m)
    assert_same(cm(x), m(x))
    config._spec = {"scale": 4.0}  # a new instance entry changes every read
    assert_same(cm(x), m(x))
    config._spec["scale"] = -1.0
    assert_same(cm(x), m(x))
    config._spec = None
    assert_same(cm(x), m(x))


def returns_tuple_unless_told(self_fn, x, **kwargs):
    return_dict = kwargs.pop("return_dict", True)
    out = self_fn(x, **kwargs)
    return out if return_dict else (out,)


def inner(x, scale=1.0, bias=0.0):
    return x * scale + bias


def wrapper(x, **kwargs):
    return returns_tuple_unless_told(inner, x, **kwargs)


def test_kwargs_pop_in_a_wrapper():
    x = torch.randn(5)
    no_breaks(wrapper, x)
    cf = framejit.compile(wrapper)
    for kwargs in ({}, {"return_dict": False}, {"scale": 2.0}, {"return_dict": False, "bias": 1.5},
                   {"return_dict": True, "scale": 3.0, "bias": -1.0}):
        assert_same(cf(x, **kwargs), wrapper(x, **kwargs))
    assert framejit.stats(wrapper)["fallbacks"] == 0


def pop_shared(x, **kwargs):
    alias = kwargs
    kept = [kwargs]
    s = alias.pop("scale", 1.0)
    return x * s, len(kwargs), len(kept[0]), "scale" in kwargs


def test_kwargs_pop_seen_through_every_alias():
    x = torch.randn(3)
    cf = framejit.compile(pop_shared)
    assert_same(cf(x, scale=2.0, bias=1.0), pop_shared(x, scale=2.0, bias=1.0))
    assert_same(cf(x, bias=1.0), pop_shared(x, bias=1.0))


def test_tiny_huggingface_gpt2_equals_eager():
    import transformers

    transformers.logging.set_verbosity_error()  # the tiny config trips token-id warnings
    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=1, n_head=2, n_embd=8, vocab_size=16, n_positions=16,
                                     bos_token_id=0, eos_token_id=0)
    model = transformers.GPT2LMHeadModel(config).eval()
    cm = framejit.compile(model)
    with torch.no_grad():
        for n in (5, 5, 7):
            ids = torch.randint(0, 16, (2, n))
            got, want = cm(ids), model(ids)
            assert type(got) is type(want)
            assert_same(got.logits, want.logits)
    # The config's return_dict, read by transformers' can_return_tuple wrapper, no
    # longer sends the frame to CPython.
    s = framejit.stats()
    assert s["fallbacks"] == 0 and s["compiles"] >= 1


class CatchingConfig(AliasConfig):
    """A __getattribute__ that catches the AttributeError itself: getattr's default
    is never used."""

    def __getattribute__(self, key):
        try:
            return super().__getattribute__(key)
        except AttributeError:
            return 10.0


def test_getattr_default_not_taken_where_a_handler_catches():
    m = Block(CatchingConfig(3, 0.5))
    x = torch.randn(2, 4)
    cf = framejit.compile(reads_with_defaults)
    assert_same(cf(m, x), reads_with_defaults(m, x))
    assert_same(cf(m, x), reads_with_defaults(m, x))


class Action(str, __import__("enum").Enum):
    NONE = "none"
    NOTIFY = "notify"
    RAISE = "raise"


def deprecating(func, old_name):
    def wrapped(*args, **kwargs):
        import math

        func_name = func.__name__
        func_name = f"{args[0].__class__.__name__}.{func_name}"
        action = Action.NONE
        if old_name in kwargs:
            action = Action.NOTIFY
            kwargs["scale"] = kwargs.pop(old_name) * math.pi
        index = func.__code__.co_varnames.index("scale") if "scale" in func.__code__.co_varnames else None
        if action == Action.RAISE:
            raise ValueError(func_name)
        out = func(*args, **kwargs)
        return out, func_name, action in (Action.NOTIFY, Action.RAISE), index

    return wrapped


class Scaled(nn.Module):
    def forward(self, x, scale=1.0):
        return x * scale


def test_deprecation_style_wrapper_traces_without_a_break():
    m = Scaled()
    f = deprecating(Scaled.forward, "factor")
    x = torch.randn(3)
    no_breaks(f, m, x)
    cf = framejit.compile(f)
    for kwargs in ({}, {"factor": 2.0}, {"scale": 3.0}, {"factor": 0.5}):
        assert_same(cf(m, x, **kwargs), f(m, x, **kwargs))
    # The names the trace read are guarded: a renamed function or class retraces.
    Scaled.forward.__name__ = "renamed"
    try:
        assert_same(cf(m, x), f(m, x))
    finally:
        Scaled.forward.__name__ = "forward"
    Scaled.__name__ = "Other"
    try:
        assert_same(cf(m, x), f(m, x))
    finally:
        Scaled.__name__ = "Scaled"
    assert_same(cf(m, x), f(m, x))
    assert framejit.stats(f)["fallbacks"] == 0


def returns_its_kwargs(x, **kw):
    a = kw.pop("a", 0.0)
    kw["b"] = a * 2
    return x + a, kw


def test_changed_kwargs_of_the_compiled_frame_are_returned_changed():
    x = torch.randn(3)
    cf = framejit.compile(returns_its_kwargs)
    for kwargs in ({"a": 1.5}, {"a": 2.5, "c": 1}, {"c": 3}):
        got, want = cf(x, **kwargs), returns_its_kwargs(x, **kwargs)
        assert_same(got[0], want[0])
        assert got[1] == want[1]
    assert framejit.stats(returns_its_kwargs)["fallbacks"] == 0
