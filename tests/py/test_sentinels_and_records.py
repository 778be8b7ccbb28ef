"""Identity of sentinel defaults (`flag is _MISSING`), dataclasses' own helpers
(fields, replace, default_factory), __slots__ members and dict class attributes read
while tracing, each guarded so that a change shows."""
import dataclasses

import torch

import framejit
from conftest import assert_same

_MISSING = object()


def helper(x, scale=_MISSING):
    return x * 2 if scale is _MISSING else x * scale


def uses_helper(x):
    return helper(x), helper(x, 3)


def root_default(x, scale=_MISSING):
    return x * 2 if scale is _MISSING else x - 1


def test_sentinel_defaults_compare_by_identity():
    f = framejit.compile(uses_helper)
    for _ in range(2):
        assert_same(f(torch.ones(2)), uses_helper(torch.ones(2)))
    assert framejit.stats(f)["graph_breaks"] == 0 and framejit.stats(f)["fallbacks"] == 0
    g = framejit.compile(root_default)
    other = object()
    for args in ((torch.ones(2),), (torch.ones(2), other), (torch.ones(2),), (torch.ones(2), _MISSING)):
        assert_same(g(*args), root_default(*args))
    assert framejit.stats(g)["fallbacks"] == 0


@dataclasses.dataclass
class Pair:
    a: int
    b: int
    items: list = dataclasses.field(default_factory=list)


def dataclass_helpers(x, a, b):
    p = dataclasses.replace(Pair(a, b), b=b * 10)
    names = [f.name for f in dataclasses.fields(Pair)]
    q = Pair(a, a)
    q.items.append(x * a)
    return x * p.b, names, torch.stack(q.items), dataclasses.is_dataclass(p)


def test_dataclass_fields_replace_and_default_factory_compile_whole():
    f = framejit.compile(dataclass_helpers)
    for a, b in ((2, 5), (4, 1)):
        got, want = f(torch.ones(3), a, b), dataclass_helpers(torch.ones(3), a, b)
        assert_same(got, want)
    s = framejit.stats(f)
    assert s["graph_breaks"] == 0 and s["fallbacks"] == 0


class Slotted:
    __slots__ = ("a", "b")

    def __init__(self, a, b):
        self.a = a
        self.b = b


class Registry:
    table = {"double": 2.0, "half": 0.5}

    def __init__(self, name):
        self.name = name

    def scale(self, x):
        return x * self.table[self.name]


HELD = Slotted(3.0, None)


def slots_and_class_dicts(x, name):
    return x * HELD.a, HELD.b is None, Registry(name).scale(x)


def test_slot_members_and_class_dicts_are_guarded():
    f = framejit.compile(slots_and_class_dicts)
    for name in ("double", "half"):
        assert_same(f(torch.ones(2), name), slots_and_class_dicts(torch.ones(2), name))
    assert framejit.stats(f)["fallbacks"] == 0 and framejit.stats(f)["graph_breaks"] == 0
    try:
        HELD.a = 5.0
        Registry.table["double"] = 4.0
        assert_same(f(torch.ones(2), "double"), slots_and_class_dicts(torch.ones(2), "double"))
        del HELD.b  # a missing slot: eager's AttributeError
        try:
            slots_and_class_dicts(torch.ones(2), "half")
        except AttributeError as e:
            want = str(e)
        try:
            f(torch.ones(2), "half")
            raise AssertionError("no AttributeError")
        except AttributeError as e:
            assert str(e) == want
    finally:
        HELD.a, HELD.b = 3.0, None
        Registry.table["double"] = 2.0


class Half:
    __slots__ = ("a", "b")

    def __init__(self, a):
        self.a = a


def slotted_objects_made_here(x, y):
    s = Slotted(x, y)
    s.a = s.a * 2
    h = Half(x + 1)
    try:
        h.c = 1
    except AttributeError as e:
        wrote = str(e)
    try:
        read = h.b
    except AttributeError as e:
        read = str(e)
    return s.a + s.b, wrote, read, h


def test_objects_of_slotted_classes_made_in_the_frame():
    f = framejit.compile(slotted_objects_made_here)
    for n in (3, 2):
        x, y = torch.randn(n), torch.randn(n)
        got, want = f(x, y), slotted_objects_made_here(x, y)
        assert_same(got[:3], want[:3])
        assert type(got[3]) is Half and not hasattr(got[3], "b")
        assert_same(got[3].a, want[3].a)
    s = framejit.stats(f)
    assert s["graph_breaks"] == 0 and s["fallbacks"] == 0


class Segment:
    def __init__(self, start, end):
        self.start, self.end = start, end

    def span(self):
        return (self.end - self.start).abs()

    @property
    def middle(self):
        return (self.start + self.end) / 2


def through_the_class(x, k):
    seg = Segment(x, x * k)
    return Segment.span(seg), Segment.middle.fget(seg), Segment.middle.fset is None


def test_methods_and_property_getters_read_from_the_class():
    f = framejit.compile(through_the_class)
    for k in (2, 3):
        assert_same(f(torch.ones(3), k), through_the_class(torch.ones(3), k))
    s = framejit.stats(f)
    assert s["graph_breaks"] == 0 and s["fallbacks"] == 0
    try:
        Segment.middle = property(lambda self: self.end)  # the class changed: traced again
        assert_same(f(torch.ones(3), 2), through_the_class(torch.ones(3), 2))
    finally:
        Segment.middle = property(lambda self: (self.start + self.end) / 2)
