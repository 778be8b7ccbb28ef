"""Enum members and classes (enum.Enum, IntEnum, Flag): members passed in are guarded
by identity, and what the enum module computes on known members (==, is, |, in,
Act(value), Act[name], .value, .name, iteration over the class) is computed while
tracing. Compared against eager, results and exceptions; a member class with its
own Python __eq__ is never computed early."""
import enum

import pytest
import torch

import framejit
from conftest import same_outcome


class Act(enum.Enum):
    RELU = "relu"
    TANH = "tanh"


class Mode(enum.IntEnum):
    TRAIN = 0
    EVAL = 1


class Perm(enum.Flag):
    R = enum.auto()
    W = enum.auto()
    X = enum.auto()


class Loud(enum.Enum):
    """Its __eq__ is user code with a side effect: never run while tracing."""
    A = 1
    B = 2

    def __eq__(self, other):
        SEEN.append(other)
        return self is other

    __hash__ = enum.Enum.__hash__


SEEN = []


def compare_run(fn, calls):
    """fn eagerly and compiled on each argument tuple: results or exceptions match."""
    cf = framejit.compile(fn)
    for args in calls:
        same_outcome(cf, fn, *args)
    return framejit.stats(fn)


def member_argument(x, act):
    if act == Act.TANH:
        return torch.tanh(x), act.value
    return x * 2, act.name


def test_a_member_argument_is_compared_and_read_whole():
    s = compare_run(member_argument, [(torch.randn(3), Act.TANH), (torch.randn(3), Act.RELU),
                                      (torch.randn(4), Act.TANH)])
    assert s["fallbacks"] == 0 and s["graph_breaks"] == 0
    assert s["compiles"] == 2  # one entry per member: guarded by identity


def class_calls(x, name, m):
    act = Act(name)
    mode = Mode(m)
    y = torch.relu(x) if act is Act.RELU else torch.tanh(x)
    return y * (mode + 1), mode == Mode.EVAL, int(mode), Act[name.upper()].value


def test_class_call_getitem_and_int_enum_arithmetic():
    s = compare_run(class_calls, [(torch.randn(3), "relu", 0), (torch.randn(3), "tanh", 1),
                                  (torch.randn(3), "relu", 1)])
    assert s["fallbacks"] == 0 and s["graph_breaks"] == 0


def test_a_missing_value_raises_as_eager():
    compare_run(class_calls, [(torch.randn(3), "gelu", 0), (torch.randn(3), "relu", 7)])


def flags(x, write):
    p = Perm.R | Perm.W if write else Perm.R
    return x * (3 if Perm.W in p else 1), p.value, bool(p & Perm.X)


def test_flag_operators_whole():
    s = compare_run(flags, [(torch.randn(3), True), (torch.randn(3), False), (torch.randn(2), True)])
    assert s["fallbacks"] == 0 and s["graph_breaks"] == 0


def iterate_members(x):
    names = [a.name for a in Act]
    return x * len(names), names, [m.value for m in Mode]


def test_iteration_over_the_class_whole():
    s = compare_run(iterate_members, [(torch.randn(3),), (torch.randn(5),)])
    assert s["fallbacks"] == 0 and s["graph_breaks"] == 0


def loud_compare(x, a):
    return x * (2 if a == Loud.B else 1)


def test_a_python_eq_runs_as_eager_each_call():
    SEEN.clear()
    compare_run(loud_compare, [(torch.randn(3), Loud.A), (torch.randn(3), Loud.B), (torch.randn(3), Loud.A)])
    # eager and framejit each ran __eq__ once per call: nothing was run while tracing
    assert SEEN == [Loud.B] * 6


@pytest.mark.parametrize("member", list(Act))
def test_a_member_in_a_container_argument(member):
    def pick(x, acts):
        return x * (2 if acts[0] is Act.RELU else 3)
    compare_run(pick, [(torch.randn(3), (member,)), (torch.randn(3), (Act.RELU,))])
