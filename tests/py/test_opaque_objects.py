"""Objects framejit does not trace into (a cache object passed in, the result of a call
that runs as a graph break): their class is still known where the code asks for it
(isinstance, `is None`), guarded at each call; a tensor method with no graph op
(ndarray.copy()) runs as a graph break; a Python __getitem__ of a registry object is traced."""
import torch

import framejit
from conftest import assert_same


class Cache:
    def __init__(self):
        self.items = []


class SlidingCache(Cache):
    pass


def use_cache(x, cache):
    if cache is None:
        return x * 2
    if isinstance(cache, SlidingCache):
        return x - 1
    if isinstance(cache, Cache):
        return x + 1
    return x


def test_isinstance_and_is_none_of_an_opaque_argument_are_guarded_by_class():
    cf = framejit.compile(use_cache)
    x = torch.randn(4)
    for cache in (Cache(), Cache(), SlidingCache(), None, object(), SlidingCache(), Cache()):
        assert_same(cf(x, cache), use_cache(x, cache))
    s = framejit.stats(use_cache)
    assert s["fallbacks"] == 0, framejit.fallbacks(use_cache)
    # One entry per class (Cache, SlidingCache, None, object): two more calls hit them.
    assert (s["compiles"], s["cache_hits"]) == (4, 3), s


_MADE = []


def make_cache(kind):
    _MADE.append(kind)  # a side effect: the call is a graph break, its result opaque
    return SlidingCache() if kind == "sliding" else Cache() if kind == "full" else None


def after_break(x, kind):
    y = x.exp()
    cache = make_cache(kind)
    if cache is not None and isinstance(cache, SlidingCache):
        return y * 3
    return y + (0 if cache is None else 1)


def test_class_of_a_break_result_is_checked_at_each_call():
    cf = framejit.compile(after_break)
    x = torch.randn(3)
    for kind in ("full", "full", "sliding", "none", "full", "sliding"):
        assert_same(cf(x, kind), after_break(x, kind))
    assert _MADE == [k for k in ("full", "full", "sliding", "none", "full", "sliding") for _ in (0, 1)]
    s = framejit.stats(after_break)
    assert (s["fallbacks"], s["deopts"]) == (0, 0), s
    assert s["recompiles"] == 2, s  # the results of another class (SlidingCache, None), once each


def to_list_and_back(x):
    a = (x * 2).numpy()
    values = a.copy().tolist()  # ndarray.copy(): no graph op, a graph break
    return torch.tensor(values) + x


def test_a_tensor_method_without_a_graph_op_is_a_break():
    cf = framejit.compile(to_list_and_back)
    for _ in range(3):
        x = torch.randn(5)
        assert_same(cf(x), to_list_and_back(x))
    s = framejit.stats(to_list_and_back)
    assert (s["fallbacks"], s["compiles"], s["cache_hits"]) == (0, 1, 2), s
    assert s["graph_breaks"] >= 1, s


class Registry:
    """A mapping-like registry with a Python __getitem__ (transformers' AttentionMaskInterface)."""

    def __init__(self):
        self._funcs = {"double": lambda t: t * 2, "negate": lambda t: -t}

    def __getitem__(self, key):
        return self._funcs[key]


REGISTRY = Registry()


def dispatch(x, name: str):
    return REGISTRY[name](x) + 1


def test_python_getitem_of_a_global_object_is_traced():
    cf = framejit.compile(dispatch)
    x = torch.randn(4)
    for name in ("double", "negate", "double"):
        assert_same(cf(x, name), dispatch(x, name))
    s = framejit.stats(dispatch)
    assert (s["fallbacks"], s["graph_breaks"]) == (0, 0), framejit.fallbacks(dispatch)
    assert s["cache_hits"] == 1, s


def mask_sizes(n):
    _MADE.append(n)  # a break whose result is a tuple of ints
    return n, n * 2


def unpack_break_result(x):
    length, width = mask_sizes(x.shape[0])
    return x * width + length


def test_a_tuple_of_numbers_from_a_break_is_unpacked_and_checked():
    cf = framejit.compile(unpack_break_result)
    for n in (3, 4, 3, 5, 4):
        x = torch.randn(n)
        assert_same(cf(x), unpack_break_result(x))
    s = framejit.stats(unpack_break_result)
    assert (s["fallbacks"], s["deopts"], s["compiles"]) == (0, 0, 1), s
    assert s["recompiles"] == 2, s  # (4, 8) and (5, 10): a continuation each, once


class Pair(torch.nn.Module):
    def __init__(self, share):
        super().__init__()
        self.a = torch.nn.Linear(2, 2)
        self.b = self.a if share else torch.nn.Linear(2, 2)


HOLDER = torch.nn.Module()


def tied(x):
    m = HOLDER.pair
    if m.a is m.b:  # modules are guarded by class: which pair this is must not be baked in
        return m.a(x)
    return m.a(x) - m.b(x)


def test_is_between_modules_guarded_by_class_is_checked_at_each_call():
    cf = framejit.compile(tied)
    x = torch.randn(3, 2)
    torch.manual_seed(0)
    pairs = [Pair(True), Pair(False), Pair(True), Pair(False)]
    with torch.no_grad():
        for p in pairs:
            HOLDER.pair = p
            assert_same(cf(x), tied(x))
    s = framejit.stats(tied)
    assert (s["fallbacks"], s["compiles"], s["cache_hits"]) == (0, 2, 2), s
