"""len(), truth, str() and repr() of objects made in the frame, through their class's
Python __len__, __bool__, __str__ and __repr__; issubclass of known classes. Compared
against eager, CPython's checks on what those methods return included."""
import pytest
import torch

import framejit
from conftest import compiled_whole, same_outcome
from corpus import cases_classes


class Sized:
    def __init__(self, k):
        self.k = k

    def __repr__(self):
        return f"Sized({self.k})"

    def __len__(self):
        return self.k


class Truthy:
    def __init__(self, v):
        self.v = v

    def __bool__(self):
        return self.v > 1


class Named:
    def __str__(self):
        return "named"


class BadBool:
    def __bool__(self):
        return 1  # CPython raises TypeError


class Base:
    pass


class Child(Base):
    pass


def sized(x, k):
    w = Sized(k)
    return repr(w), x * len(w), bool(w), str(w), str(Named()), "yes" if Truthy(k) else "no"


def test_len_truth_str_repr_whole():
    compiled_whole(sized, [(torch.randn(3), 2), (torch.randn(3), 4), (torch.randn(3), 0)])


def subclass(x, cls):
    return x * (2 if issubclass(cls, Child) else 1), issubclass(cls, (Base, int))


def test_issubclass_of_a_class_passed_in():
    compiled_whole(subclass, [(torch.randn(3), Child), (torch.randn(3), Base), (torch.randn(3), int)])


@pytest.mark.parametrize("k", [-1, 2])
def test_a_negative_len_raises_as_eager(k):
    def f(x, k):
        return x * len(Sized(k))
    same_outcome(framejit.compile(f), f, torch.randn(3), k)


def test_a_bool_that_is_not_a_bool_raises_as_eager():
    def f(x):
        return x * 2 if BadBool() else x
    same_outcome(framejit.compile(f), f, torch.randn(3))


def test_a_repr_that_cannot_be_traced_inside_runs_as_a_call():
    import dataclasses

    @dataclasses.dataclass
    class Rec:  # its __repr__ (reprlib.recursive_repr) calls id(): not traced
        a: int
        t: float

    def f(x, a):
        y = x * 2
        r = Rec(a, 1.5)
        return repr(r), y + a
    cf = framejit.compile(f)
    for a in (1, 2):
        same_outcome(cf, f, torch.randn(3), a)
    assert framejit.stats(f)["fallbacks"] == 0


class Defaults:
    def __getattr__(self, name):
        if name.startswith("w_"):
            return float(name[2:])
        raise AttributeError(name)


class KeyHook:
    def __getattr__(self, name):
        raise KeyError(name)  # not an AttributeError: hasattr lets it out


def hooked(x):
    d = Defaults()
    return (x * (2 if hasattr(d, "bias") else 3), hasattr(d, "w_2"), getattr(d, "w_5", 0.0),
            getattr(d, "nope", -1.0))


def test_hasattr_and_getattr_through_a_python_getattr():
    compiled_whole(hooked, [(torch.randn(3),), (torch.randn(4),)])


def key_hook(x):
    try:
        return x * hasattr(KeyHook(), "a")
    except KeyError as e:
        return x - 1, str(e)


def test_an_error_other_than_attribute_error_leaves_hasattr():
    cf = framejit.compile(key_hook)
    for _ in range(2):
        same_outcome(cf, key_hook, torch.randn(3))


class Stack(cases_classes.Stack):  # push, len, [i], iteration; and item assignment
    def __setitem__(self, i, v):
        self.items[i] = v


class Evens:
    def __init__(self, n):
        self.n = n

    def __iter__(self):  # a generator
        for i in range(self.n):
            yield i * 2


class NotAnIterator:
    def __iter__(self):
        return 5  # CPython raises TypeError


def container(x, y, n):
    st = Stack()
    st.push(x)
    st.push(y)
    st[1] = y * 3
    total = 0
    for t in st:
        total = total + t
    return total, len(st), st[0], x * sum(Evens(n)), list(Evens(n))


def test_iteration_and_item_assignment_through_python_dunders():
    compiled_whole(container, [(torch.randn(3), torch.randn(3), 3), (torch.randn(4), torch.randn(4), 3)])


def test_an_iter_that_gives_no_iterator_raises_as_eager():
    def f(x):
        for v in NotAnIterator():
            x = x + v
        return x
    same_outcome(framejit.compile(f), f, torch.randn(3))
