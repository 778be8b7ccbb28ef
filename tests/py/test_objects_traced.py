"""Objects of plain Python classes made in the frame (`Point(x, y)`, dataclasses): the
class's __init__, methods and properties are traced on the object, which is built for
real only where it leaves the trace. Each case is compared against eager: values,
the object's class and attributes in order, identity between outputs, exceptions
and side effects."""
import abc
import collections
import collections.abc
import dataclasses
import typing

import pytest
import torch

import framejit
from conftest import assert_same


def assert_same_object(actual, expected):
    assert type(actual) is type(expected)
    assert list(vars(actual)) == list(vars(expected))  # attributes, in eager's order
    for name, value in vars(expected).items():
        assert_same(getattr(actual, name), value)


def whole(fn, calls, compiles=1):
    """Runs the compiled fn on each argument tuple against eager; the function is
    compiled `compiles` times, with no graph break and no fallback."""
    framejit.reset()
    cf = framejit.compile(fn)
    results = []
    for args in calls:
        got, want = cf(*args), fn(*args)
        results.append((got, want))
    s = framejit.stats(fn)
    assert (s["compiles"], s["fallbacks"], s["graph_breaks"]) == (compiles, 0, 0), s
    return results


class Point:
    scale = 2.0

    def __init__(self, x, y):
        self.x = x
        self.y = y

    def norm(self):
        return (self.x * self.x + self.y * self.y).sqrt() * self.scale

    @property
    def total(self):
        return self.x + self.y

    def shift(self, d):
        self.x = self.x + d
        return self


def methods_and_properties(a, b):
    p = Point(a, b)
    p.z = p.x * 3
    return p.norm() + p.total + p.z


def test_methods_properties_and_class_attributes_are_traced():
    for got, want in whole(methods_and_properties, [(torch.randn(4), torch.randn(4)), (torch.randn(6), torch.randn(6))]):
        assert_same(got, want)


def returned(a, n):
    p = Point(a * n, n)
    p.shift(1).shift(n)
    p.tag = "moved"
    return p


def test_a_returned_object_is_built_with_eager_attributes_and_ints_stay_symbolic():
    calls = [(torch.randn(3), 2), (torch.randn(3), 5), (torch.randn(4), 7)]
    for got, want in whole(returned, calls):
        assert_same_object(got, want)


@dataclasses.dataclass
class Output:
    logits: torch.Tensor
    loss: torch.Tensor = None
    extra: tuple = ()

    def __post_init__(self):
        self.extra = (self.logits.shape[-1],)


def dataclass_output(x, w, y):
    out = Output(x @ w)
    out.loss = (out.logits - y).pow(2).mean()
    return out


def test_a_dataclass_with_defaults_and_post_init_is_returned_whole():
    calls = [(torch.randn(2, 3), torch.randn(3, 4), torch.randn(2, 4)), (torch.randn(5, 3), torch.randn(3, 4), torch.randn(5, 4))]
    for got, want in whole(dataclass_output, calls):
        assert_same_object(got, want)


def test_a_dataclass_under_autograd_gives_eager_gradients():
    w = torch.randn(3, 4, requires_grad=True)
    w_eager = w.detach().clone().requires_grad_(True)
    x, y = torch.randn(2, 3), torch.randn(2, 4)
    cf = framejit.compile(dataclass_output)
    got, want = cf(x, w, y), dataclass_output(x, w_eager, y)
    got.loss.backward()
    want.loss.backward()
    assert_same(got.loss.detach(), want.loss.detach())
    assert_same(w.grad, w_eager.grad)


def identity_and_types(a):
    p = Point(a, a + 1)
    q = Point(a, a)
    same = p is p and p is not q and isinstance(p, Point) and type(q) is Point
    return (p, q, p) if same else None


def test_identity_isinstance_and_type_are_answered_and_aliases_kept():
    for got, want in whole(identity_and_types, [(torch.randn(2),), (torch.randn(3),)]):
        assert got[0] is got[2] and got[0] is not got[1]
        for g, w in zip(got, want):
            assert_same_object(g, w)


def make_point(a):
    return Point(a, -a)


def made_in_a_helper(a):
    p = make_point(a)
    p.y = p.y * 2
    return p.norm(), p


def test_an_object_made_in_a_helper_is_returned_to_the_caller():
    for got, want in whole(made_in_a_helper, [(torch.randn(3),), (torch.randn(5),)]):
        assert_same(got[0], want[0])
        assert_same_object(got[1], want[1])


def attribute_lookups(a):
    p = Point(a, a)
    r = a * (2 if hasattr(p, "x") else 3)
    r = r + getattr(p, "missing", 10) + getattr(p, "y")
    return r if not hasattr(p, "nothing") else None


def test_hasattr_and_getattr_with_a_default_are_answered():
    for got, want in whole(attribute_lookups, [(torch.randn(3),), (torch.randn(2),)]):
        assert_same(got, want)


def missing_attribute(a):
    p = Point(a, a)
    return p.nothing


def test_a_missing_attribute_raises_eager_error():
    cf = framejit.compile(missing_attribute)
    with pytest.raises(AttributeError) as want:
        missing_attribute(torch.randn(2))
    with pytest.raises(AttributeError) as got:
        cf(torch.randn(2))
    assert str(got.value) == str(want.value)


def missing_caught(a):
    p = Point(a, a)
    try:
        return p.nothing
    except AttributeError:
        return a + 1


def test_a_missing_attribute_caught_in_the_frame_is_traced():
    for got, want in whole(missing_caught, [(torch.randn(2),), (torch.randn(4),)]):
        assert_same(got, want)


def class_attribute(a):
    return Point(a, a).norm()


def test_a_modified_class_is_seen_by_the_next_call():
    cf = framejit.compile(class_attribute)
    x = torch.randn(3)
    assert_same(cf(x), class_attribute(x))
    old = Point.scale
    try:
        Point.scale = 5.0
        assert_same(cf(x), class_attribute(x))
        assert torch.allclose(cf(x), (2 * x * x).sqrt() * 5.0)
    finally:
        Point.scale = old
    assert_same(cf(x), class_attribute(x))


class Counter:
    def __init__(self, start):
        self.n = start


def bump(c):  # not traced: the object itself reaches it
    print("bump", end=" ")
    c.n = c.n + 1


def passed_to_an_untraced_call(a):
    c = Counter(1)
    bump(c)
    bump(c)
    return a * c.n, c


def test_an_object_given_to_an_untraced_call_is_that_object_from_then_on(capsys):
    cf = framejit.compile(passed_to_an_untraced_call)
    for x in (torch.randn(3), torch.randn(3)):
        got, want = cf(x), passed_to_an_untraced_call(x)
        assert_same(got[0], want[0])
        assert_same_object(got[1], want[1])
    assert capsys.readouterr().out == "bump " * 8


class Checked:
    def __init__(self, x, n):
        if n < 0:
            raise ValueError(f"n must be >= 0, got {n}")
        self.v = x * n


def raises_in_init(x, n):
    return Checked(x, n).v


def test_an_exception_of_init_is_eager_exception():
    cf = framejit.compile(raises_in_init)
    x = torch.randn(3)
    assert_same(cf(x, 2), raises_in_init(x, 2))
    with pytest.raises(ValueError, match="n must be >= 0, got -1"):
        cf(x, -1)


class Slotted:
    __slots__ = ("x",)

    def __init__(self, x):
        self.x = x


class Loud:
    def __init__(self, x):
        print("made", end=" ")
        self.x = x


def other_classes(a):
    s = Slotted(a * 2)
    loud = Loud(a)
    return s.x + loud.x


def test_classes_outside_the_model_still_give_eager_results_and_side_effects(capsys):
    cf = framejit.compile(other_classes)
    for x in (torch.randn(3), torch.randn(3)):
        assert_same(cf(x), other_classes(x))
    assert capsys.readouterr().out == "made " * 4


Pair = collections.namedtuple("Pair", "first second")


class Span(typing.NamedTuple):
    start: torch.Tensor
    width: int = 1

    def end(self):
        return self.start + self.width

    @property
    def mid(self):
        return self.start + self.width / 2


def named_tuples(a, n):
    p = Pair(a * 2, second=n)
    s = Span(a, n)
    t = Span(a)
    first, second = p
    x = p.first + p[1] + s.end() + s.mid + t.width + first * second
    return x, p, s, isinstance(s, tuple)


def test_named_tuples_are_traced_and_returned_as_their_class():
    for got, want in whole(named_tuples, [(torch.randn(3), 2), (torch.randn(3), 4), (torch.randn(5), 3)]):
        assert_same(got[0], want[0])
        assert type(got[1]) is Pair and type(got[2]) is Span and got[3] is True
        for g, w in zip(got[1:3], want[1:3]):
            assert g._fields == w._fields
            for a, b in zip(g, w):
                assert_same(a, b)


class Base:
    def __init__(self, x):
        super().__init__()
        self.x = x

    def value(self):
        return self.x * 2


class Derived(Base):
    def __init__(self, x, k):
        super().__init__(x + k)
        self.k = k

    def value(self):
        return super().value() + self.k


class Layer(abc.ABC):
    @abc.abstractmethod
    def update(self, t):
        ...


class ConcreteLayer(Layer):
    def __init__(self):
        self.seen = None

    def update(self, t):
        self.seen = t if self.seen is None else torch.cat([self.seen, t])
        return self.seen


def inheritance_and_abc(a, k):
    d = Derived(a, k)
    layer = ConcreteLayer()
    layer.update(a)
    return d.value() + layer.update(a * 2).sum(), isinstance(layer, Layer), isinstance(d, Base)


def test_super_init_and_abstract_base_classes_are_traced():
    for got, want in whole(inheritance_and_abc, [(torch.randn(3), 2), (torch.randn(4), 5)]):
        assert_same(got, want)


class Registry(collections.abc.Mapping):
    """A read-only mapping of names to functions, as transformers' AttentionInterface."""
    _global = {"double": lambda t: t * 2, "neg": lambda t: -t}

    def __getitem__(self, key):
        return self._global[key]

    def __iter__(self):
        return iter(self._global)

    def __len__(self):
        return len(self._global)


REGISTRY = Registry()


class Scaled:
    factor = 3
    name = "scaled"

    @classmethod
    def make(cls, t):
        return t * cls.factor

    @staticmethod
    def shift(t):
        return t + 1


def class_reads_and_mappings(a):
    kind = "double" if "double" in REGISTRY and "cube" not in REGISTRY else "neg"
    f = REGISTRY[kind]
    cls = type(Scaled())
    same = cls.make is not None and type(a) is torch.Tensor
    return f(Scaled.make(a)) + cls.shift(a) * Scaled.factor + (1 if same else 0), Scaled.name


def test_class_attributes_and_python_mappings_are_read_in_the_trace():
    for got, want in whole(class_reads_and_mappings, [(torch.randn(3),), (torch.randn(5),)]):
        assert_same(got, want)


def bound_tensor_methods(a, b):
    sub = a.sub
    shape = a.shape
    return sub(b).reshape(*shape[:-1], -1, 1), a.view(*shape).add(1)


def test_tensor_methods_read_as_values_are_called_on_their_tensor():
    for got, want in whole(bound_tensor_methods, [(torch.randn(2, 4), torch.randn(2, 4)), (torch.randn(3, 4), torch.randn(3, 4))]):
        assert_same(got, want)


class Affine:
    def __init__(self, w, b):
        self.w = w
        self.b = b

    def __call__(self, x):
        return x * self.w + self.b


@dataclasses.dataclass
class Config:
    width: int
    act: str = "relu"


def callables_and_equality(x, n):
    f = Affine(2.0, n)
    a, b = Config(n), Config(n, "relu")
    c = Config(n + 1)
    flags = (a == b, a != c, f == f, f != Affine(2.0, n), a == None, f is not None)  # noqa: E711
    return f(x), flags


def test_objects_called_and_compared_as_eager_does():
    for got, want in whole(callables_and_equality, [(torch.randn(3), 2), (torch.randn(4), 7)]):
        assert_same(got, want)
