"""Plain user classes made in the function: __init__, attributes, methods, properties,
class attributes, __getattr__, inheritance with super(), __call__, static and class
methods, isinstance/issubclass/type checks, objects returned or passed to helpers."""
import torch

from corpus.registry import case, const, randn


class Affine:
    def __init__(self, w, b):
        self.w = w
        self.b = b

    def __call__(self, x):
        return x * self.w + self.b


class Point:
    dims = 2

    def __init__(self, x, y):
        self.x = x
        self.y = y

    def norm(self):
        return (self.x * self.x + self.y * self.y).sqrt()

    @property
    def total(self):
        return self.x + self.y

    def shifted(self, d):
        return Point(self.x + d, self.y + d)


class Counter:
    def __init__(self):
        self.n = 0

    def tick(self, k=1):
        self.n += k
        return self


class Base:
    kind = "base"

    def __init__(self, scale):
        self.scale = scale

    def forward(self, x):
        return x * self.scale

    def describe(self):
        return self.kind


class Child(Base):
    kind = "child"

    def __init__(self, scale, shift):
        super().__init__(scale)
        self.shift = shift

    def forward(self, x):
        return super().forward(x) + self.shift


class GrandChild(Child):
    def forward(self, x):
        return super().forward(x) * 2


class Defaults:
    def __getattr__(self, name):
        if name.startswith("w_"):
            return float(name[2:])
        raise AttributeError(name)


class Units:
    factor = 10

    @staticmethod
    def clamp01(x):
        return x.clamp(0, 1)

    @classmethod
    def make(cls, n):
        u = cls()
        u.n = n * cls.factor
        return u


class Celsius:
    def __init__(self, t):
        self._t = t

    @property
    def t(self):
        return self._t

    @t.setter
    def t(self, v):
        self._t = v * 1.0

    @property
    def fahrenheit(self):
        return self._t * 9 / 5 + 32


class Slotted:
    __slots__ = ("a", "b")

    def __init__(self, a, b):
        self.a = a
        self.b = b


class Stack:
    def __init__(self):
        self.items = []

    def push(self, t):
        self.items.append(t)

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.items[i]

    def __iter__(self):
        return iter(self.items)


class Vec:
    def __init__(self, t):
        self.t = t

    def __add__(self, other):
        return Vec(self.t + other.t)

    def __mul__(self, k):
        return Vec(self.t * k)

    def __neg__(self):
        return Vec(-self.t)


def _use_point(p, k):
    return p.x * k - p.y


@case((randn(3), randn(3)), (randn(5), randn(5)))
def construct_and_call_method(x, y):
    p = Point(x, y)
    return p.norm()


@case((randn(3), randn(3)), (randn(4), randn(4)))
def property_read(x, y):
    return Point(x, y).total * 2


@case((randn(3), randn(3)), (randn(2), randn(2)))
def class_attribute_read(x, y):
    p = Point(x, y)
    return p.x * p.dims + Point.dims


@case((randn(3), randn(3)), (randn(4), randn(4)))
def object_returned(x, y):
    return Point(x * 2, y + 1)


@case((randn(3), randn(3), 2.0), (randn(4), randn(4), -1.0))
def object_passed_to_helper(x, y, k):
    return _use_point(Point(x, y), k)


@case((randn(3), 1.0), (randn(3), 3.0))
def method_returning_new_object(x, d):
    p = Point(x, x * 2).shifted(d)
    return p.x + p.y, type(p).__name__


@case((randn(3), 3), (randn(3), 5))
def method_mutating_self(x, n):
    c = Counter()
    for _ in range(n):
        c.tick()
    c.tick(10)
    return x * c.n


@case((randn(3), 4), (randn(3), 2))
def method_chaining(x, k):
    c = Counter().tick(k).tick(1)
    return x + c.n


@case((randn(3), 2.0, 1.0), (randn(4), 0.5, -1.0))
def inheritance_with_super_init(x, s, b):
    m = Child(s, b)
    return m.forward(x), m.describe(), m.scale


@case((randn(3), 2.0, 1.0), (randn(4), 3.0, 0.0))
def two_level_super(x, s, b):
    return GrandChild(s, b).forward(x)


@case((randn(3), 2.0), (randn(3), 0.5))
def callable_object(x, w):
    f = Affine(w, 1.0)
    return f(x), callable(f)


@case((randn(3),), (randn(5),))
def dunder_getattr_fallback(x):
    d = Defaults()
    return x * d.w_2 + d.w_3


@case((randn(3),), (randn(4),))
def dunder_getattr_raises_for_hasattr(x):
    d = Defaults()
    return x * (2 if hasattr(d, "bias") else 3)


@case((randn(3) ,), (randn(6),))
def staticmethod_call(x):
    return Units.clamp01(x), Units().clamp01(x * 2)


@case((randn(3), 2), (randn(3), 5))
def classmethod_constructor(x, n):
    u = Units.make(n)
    return x * u.n, isinstance(u, Units)


@case((randn(3), 20.0), (randn(3), 37.5))
def property_setter(x, t):
    c = Celsius(t)
    c.t = c.t + 1
    return x * c.fahrenheit, c.t


@case((randn(3), randn(3)), (randn(2), randn(2)))
def slotted_object(x, y):
    s = Slotted(x, y)
    s.a = s.a * 2
    return s.a + s.b


@case((randn(3), randn(3)), (randn(4), randn(4)))
def container_protocol_methods(x, y):
    st = Stack()
    st.push(x)
    st.push(y)
    total = 0
    for t in st:
        total = total + t
    return total, len(st), st[0]


@case((randn(3), randn(3)), (randn(5), randn(5)))
def operator_overloads(x, y):
    v = (Vec(x) + Vec(y)) * 3
    return (-v).t


@case((randn(3), 1), (randn(3), 2), (randn(3), 3))
def isinstance_dispatch(x, which):
    obj = [Base(2.0), Child(2.0, 1.0), GrandChild(1.0, 1.0)][which - 1]
    if isinstance(obj, GrandChild):
        return obj.forward(x) * 10
    if isinstance(obj, Child):
        return obj.forward(x) + 5
    return obj.forward(x)


@case((randn(3), const(Child)), (randn(3), const(Base)))
def issubclass_of_argument(x, cls):
    return x * (2 if issubclass(cls, Child) else 1), issubclass(cls, Base)


@case((randn(3), 1), (randn(3), 2))
def type_identity_check(x, which):
    obj = Base(1.0) if which == 1 else Child(1.0, 0.0)
    if type(obj) is Base:
        return x
    return -x


@case((randn(3), 2.0), (randn(3), 3.0))
def attribute_added_after_init(x, k):
    p = Point(x, x)
    p.extra = k
    p.x = p.x * p.extra
    return p


@case((randn(3), randn(3)), (randn(2), randn(2)))
def getattr_setattr_on_local_object(x, y):
    p = Point(x, y)
    for name in ("x", "y"):
        setattr(p, name, getattr(p, name) + 1)
    return p.x * p.y


@case((randn(3), randn(3)), (randn(4), randn(4)))
def objects_in_a_list(x, y):
    pts = [Point(x, y), Point(y, x)]
    return sum(p.norm() for p in pts)


@case((randn(3), 2), (randn(3), 4))
def local_class_definition(x, n):
    class Scaler:
        def __init__(self, k):
            self.k = k

        def __call__(self, t):
            return t * self.k
    return Scaler(n)(x)


@case((randn(3), 0.5), (randn(3), 2.0))
def object_with_tensor_and_float(x, lr):
    class SGD:
        def __init__(self, lr):
            self.lr = lr

        def step(self, w, g):
            return w - self.lr * g
    opt = SGD(lr)
    return opt.step(x, x * 2)


@case((randn(3),), (randn(4),))
def dunder_class_name(x):
    p = Point(x, x)
    return p.__class__.__name__, type(p).__qualname__, x * 2


@case((randn(3), randn(3)), (randn(2), randn(2)))
def vars_of_object(x, y):
    p = Point(x, y)
    return sorted(vars(p)), p.__dict__["x"] + 1


@case((randn(3), 1.0), (randn(4), 2.0))
def bound_method_stored(x, d):
    p = Point(x, x)
    f = p.shifted
    return f(d).x


@case((randn(3), randn(3)), (randn(4), randn(4)))
def object_equality_default_identity(x, y):
    a = Point(x, y)
    b = a
    c = Point(x, y)
    return a is b, a == c, a is not c


@case((randn(3), 2.0), (randn(3), -1.0))
def torch_module_subclass(x, w):
    class Scale(torch.nn.Module):
        def __init__(self, w):
            super().__init__()
            self.w = w

        def forward(self, t):
            return t * self.w
    return Scale(w)(x)


@case((randn(2, 4),), (randn(3, 4),))
def nn_linear_made_in_function(x):
    torch.manual_seed(0)
    lin = torch.nn.Linear(4, 2)
    return lin(x)


class Registry:
    """A class-level dict shared by instances, read through self."""
    table = {"relu": torch.relu, "tanh": torch.tanh}

    def __init__(self, name):
        self.name = name

    def apply(self, x):
        return self.table[self.name](x)


class Accum:
    def __init__(self, start):
        self.total = start
        self.steps = 0

    def add(self, t):
        self.total = self.total + t
        self.steps += 1

    def mean(self):
        return self.total / self.steps


class WithRepr:
    def __init__(self, k):
        self.k = k

    def __repr__(self):
        return f"WithRepr(k={self.k})"

    def __len__(self):
        return self.k

    def __bool__(self):
        return self.k > 2


class Mixin:
    def double(self):
        return self.value * 2


class Holder(Mixin):
    def __init__(self, value):
        self.value = value


@case((randn(3), "relu"), (randn(3), "tanh"))
def class_dict_lookup_through_self(x, name):
    return Registry(name).apply(x)


@case((randn(3), 3), (randn(4), 5))
def accumulator_object(x, n):
    acc = Accum(torch.zeros_like(x))
    for i in range(n):
        acc.add(x * i)
    return acc.mean(), acc.steps


@case((randn(3), 2), (randn(3), 4))
def dunder_repr_len_bool(x, k):
    w = WithRepr(k)
    return repr(w), x * len(w), bool(w)


@case((randn(3),), (randn(5),))
def mixin_method(x):
    return Holder(x).double()


@case((randn(3), 2.0), (randn(3), 3.0))
def object_attribute_holds_tensor_updated(x, lr):
    class State:
        pass
    s = State()
    s.w = x.clone()
    for _ in range(3):
        s.w = s.w - lr * 0.1 * s.w
    return s.w


@case((randn(3), 1), (randn(3), 2))
def instance_method_from_class(x, which):
    p = Point(x, x * which)
    return Point.norm(p), Point.total.fget(p)


@case((randn(3), 2.0), (randn(3), 5.0))
def objects_compared_by_attribute(x, s):
    a, b = Base(s), Base(3.0)
    best = a if a.scale > b.scale else b
    return best.forward(x)
