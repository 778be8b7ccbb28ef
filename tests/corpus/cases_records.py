"""Record types: dataclasses (defaults, __post_init__, default_factory, frozen, __eq__,
asdict/replace), collections.namedtuple and typing.NamedTuple, and enums."""
import collections
import dataclasses
import enum
import typing

import torch

from corpus.registry import case, randn


@dataclasses.dataclass
class Config:
    hidden: int
    scale: float = 1.0
    act: str = "relu"


@dataclasses.dataclass
class Stats:
    mean: torch.Tensor
    std: torch.Tensor
    n: int = 0

    def __post_init__(self):
        self.std = self.std.clamp(min=1e-6)


@dataclasses.dataclass
class Bag:
    items: list = dataclasses.field(default_factory=list)
    tags: dict = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Frozen:
    a: int
    b: int = 2

    def area(self):
        return self.a * self.b


@dataclasses.dataclass
class Pair:
    x: int
    y: int


@dataclasses.dataclass
class Base3:
    k: int = 1


@dataclasses.dataclass
class Derived3(Base3):
    m: int = 2

    def total(self):
        return self.k + self.m


Shape = collections.namedtuple("Shape", ["rows", "cols"])
Range = collections.namedtuple("Range", "lo hi", defaults=[1.0])


class Output(typing.NamedTuple):
    logits: torch.Tensor
    loss: torch.Tensor
    steps: int = 1

    def scaled(self, k):
        return self.logits * k


class Act(enum.Enum):
    RELU = "relu"
    TANH = "tanh"


class Mode(enum.IntEnum):
    TRAIN = 0
    EVAL = 1


class Flag(enum.Flag):
    A = enum.auto()
    B = enum.auto()


@case((randn(3), 4), (randn(3), 8))
def dataclass_defaults(x, h):
    cfg = Config(h)
    return x * cfg.hidden * cfg.scale, cfg.act


@case((randn(3), 4, 0.5), (randn(3), 2, 2.0))
def dataclass_keyword_construction(x, h, s):
    cfg = Config(hidden=h, scale=s, act="tanh")
    return torch.tanh(x) * cfg.scale + cfg.hidden


@case((randn(3),), (randn(5),))
def dataclass_post_init(x):
    s = Stats(x.mean(), x.std(), x.numel())
    return (x - s.mean) / s.std, s.n


@case((randn(3), 2), (randn(3), 3))
def dataclass_default_factory(x, n):
    b = Bag()
    for i in range(n):
        b.items.append(x * i)
        b.tags[f"t{i}"] = i
    return torch.stack(b.items), b.tags


@case((randn(3), 3), (randn(3), 5))
def frozen_dataclass(x, a):
    f = Frozen(a)
    return x * f.area(), f.b


@case((randn(3), 3), (randn(3), 5))
def frozen_dataclass_assignment_raises(x, a):
    f = Frozen(a)
    try:
        f.a = 10
    except dataclasses.FrozenInstanceError:
        return x * f.a
    return x


@case((randn(3), 1, 2), (randn(3), 2, 2))
def dataclass_equality(x, a, b):
    if Pair(a, 2) == Pair(b, 2):
        return x * 2
    return x


@case((randn(3), 4), (randn(4), 6))
def dataclass_returned(x, h):
    return Config(h, scale=x.shape[0] * 0.5), x


@case((randn(3), 2, 5), (randn(3), 4, 1))
def dataclass_replace(x, a, b):
    p = dataclasses.replace(Pair(a, b), y=b * 10)
    return x * p.y, p


@case((randn(3), 2, 3), (randn(3), 5, 7))
def dataclass_astuple_asdict(x, a, b):
    p = Pair(a, b)
    return x * sum(dataclasses.astuple(p)), dataclasses.asdict(p)


@case((randn(3), 3), (randn(3), 5))
def dataclass_inheritance(x, k):
    d = Derived3(k=k)
    return x * d.total(), isinstance(d, Base3)


@case((randn(3), 3), (randn(3), 7))
def dataclass_fields_introspection(x, h):
    names = [f.name for f in dataclasses.fields(Config)]
    return x * len(names) + h, names


@case((randn(3), 2), (randn(3), 7))
def dataclass_mutated_attribute(x, h):
    cfg = Config(h)
    cfg.scale = cfg.scale * 3
    return x * cfg.scale


@case((randn(2, 3),), (randn(4, 5),))
def namedtuple_from_shape(x):
    s = Shape(*x.shape)
    return x.reshape(s.cols, s.rows), s


@case((randn(2, 3),), (randn(3, 3),))
def namedtuple_indexing_and_unpacking(x):
    s = Shape(x.shape[0], x.shape[1])
    r, c = s
    return x * (s[0] + r * c)


@case((randn(3), 0.5), (randn(3), 0.25))
def namedtuple_defaults(x, lo):
    r = Range(lo)
    return x.clamp(r.lo, r.hi)


@case((randn(3), 2, 3), (randn(3), 4, 1))
def namedtuple_replace_and_asdict(x, a, b):
    s = Shape(a, b)._replace(cols=b + 1)
    return x * s.cols, s._asdict()


@case((randn(3),), (randn(4),))
def typing_namedtuple_returned(x):
    return Output(x * 2, x.sum())


@case((randn(3), 2), (randn(5), 3))
def typing_namedtuple_method_and_default(x, k):
    out = Output(x, x.mean(), steps=k)
    return out.scaled(out.steps), out.steps


@case((randn(3),), (randn(4),))
def namedtuple_fields(x):
    return x * len(Output._fields), Output._fields


@case((randn(3), "relu"), (randn(3), "tanh"))
def enum_from_value(x, name):
    act = Act(name)
    if act is Act.RELU:
        return torch.relu(x)
    return torch.tanh(x)


@case((randn(3), Act.RELU), (randn(3), Act.TANH))
def enum_argument(x, act):
    if act == Act.TANH:
        return torch.tanh(x), act.value
    return x, act.name


@case((randn(3), 0), (randn(3), 1))
def int_enum_arithmetic(x, m):
    mode = Mode(m)
    return x * (mode + 1), mode == Mode.EVAL


@case((randn(3), True), (randn(3), False))
def enum_flags(x, both):
    f = Flag.A | Flag.B if both else Flag.A
    return x * (2 if Flag.B in f else 1)


@case((randn(3),), (randn(6),))
def enum_iteration(x):
    names = [a.name for a in Act]
    return x * len(names), names


@case((randn(3), "TANH"), (randn(3), "RELU"))
def enum_by_name_lookup(x, name):
    return Act[name].value, x * 2


@case((randn(3), 5), (randn(3), 2))
def namedtuple_in_loop(x, n):
    ranges = [Range(i * 0.1, i * 0.2) for i in range(1, n)]
    return torch.stack([x.clamp(r.lo, r.hi) for r in ranges])


@case((randn(3), 2), (randn(4), 3))
def dataclass_list_of_records(x, n):
    cfgs = [Config(hidden=i + 1) for i in range(n)]
    return sum(x * c.hidden for c in cfgs)


@case((randn(3), 2), (randn(3), 5))
def dataclass_as_dict_key(x, a):
    table = {Frozen(1): 10, Frozen(2): 20}
    return x * table.get(Frozen(a), -1)


@case((randn(3), 2, 3), (randn(3), 3, 2))
def namedtuple_comparison(x, a, b):
    if Shape(a, b) < Shape(b, a):
        return x
    return -x


@dataclasses.dataclass(order=True)
class Version:
    major: int
    minor: int = 0


@dataclasses.dataclass
class Layer:
    weight: torch.Tensor
    bias: torch.Tensor = None

    def __call__(self, x):
        y = x * self.weight
        return y if self.bias is None else y + self.bias


@case((randn(3), 1, 2), (randn(3), 2, 0))
def dataclass_ordering(x, a, b):
    if Version(a, b) < Version(1, 5):
        return x
    return -x


@case((randn(3), True), (randn(3), False))
def dataclass_holding_tensors_called(x, with_bias):
    layer = Layer(torch.full((3,), 2.0), torch.ones(3) if with_bias else None)
    return layer(x)


@case((randn(3), 2), (randn(3), 3))
def dataclass_repr(x, a):
    return repr(Pair(a, a + 1)), x * a


@case((randn(2, 3),), (randn(3, 4),))
def namedtuple_make_and_len(x):
    s = Shape._make(x.shape)
    return x * len(s), s.rows + s.cols


@case((randn(3), Mode.TRAIN), (randn(3), Mode.EVAL))
def int_enum_argument_in_branch(x, mode):
    if mode == Mode.TRAIN:
        return x * 2, int(mode)
    return x, int(mode)
