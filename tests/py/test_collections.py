"""collections.OrderedDict and collections.defaultdict made in a compiled function:
traced as dicts of their class (a missing key of a defaultdict calls its factory,
OrderedDict's move_to_end and popitem(last=)), returned as objects of that class."""
import collections

import torch

import framejit
from conftest import assert_same


def same_dicts(got, want):
    assert type(got) is type(want)
    assert list(got) == list(want)
    for k in want:
        assert_same(got[k], want[k])
    if isinstance(want, collections.defaultdict):
        assert got.default_factory is want.default_factory


def counting(x, words):
    counts = collections.defaultdict(int)
    for w in words:
        counts[w] += 1
    groups = collections.defaultdict(list)
    for i, w in enumerate(words):
        groups[w].append(x * i)
    return x * max(counts.values()), dict(counts), counts, [torch.stack(groups[k]) for k in sorted(groups)]


def test_defaultdict_counts_and_groups():
    f = framejit.compile(counting)
    for words in (["a", "b", "a"], ["c", "c", "d", "c"]):
        x = torch.randn(3)
        got, want = f(x, words), counting(x, words)
        assert_same(got[0], want[0])
        assert got[1] == want[1] and type(got[1]) is dict
        same_dicts(got[2], want[2])
        assert_same(got[3], want[3])
    s = framejit.stats(f)
    assert s["graph_breaks"] == 0 and s["fallbacks"] == 0


def missing_read(x, key):
    d = collections.defaultdict(lambda: 1.0)
    d["w"] = 3.0
    plain = collections.defaultdict()
    return x * d[key], key in d, len(d), isinstance(d, collections.defaultdict), type(plain).__name__


def test_a_missing_key_calls_the_factory_and_none_raises():
    f = framejit.compile(missing_read)
    for key in ("w", "v", "u"):
        assert_same(f(torch.ones(2), key), missing_read(torch.ones(2), key))
    assert framejit.stats(f)["fallbacks"] == 0


def no_factory(x):
    d = collections.defaultdict(None, a=1)
    try:
        return d["b"]
    except KeyError as e:
        return x * d["a"], e.args


def test_a_defaultdict_without_factory_raises_key_error_as_eager():
    f = framejit.compile(no_factory)
    assert_same(f(torch.ones(2)), no_factory(torch.ones(2)))


def ordered(x, n):
    od = collections.OrderedDict()
    for i in range(n):
        od[f"k{i}"] = x * i
    od.move_to_end("k0")
    od.move_to_end(f"k{n - 1}", last=False)
    k, v = od.popitem(last=False)
    kw = collections.OrderedDict(a=x, b=x * 2)
    last = kw.popitem()
    return list(od.keys()), list(od.values()), k, v, od, last, kw.copy(), type(od | kw).__name__


def test_ordered_dict_methods_and_results():
    f = framejit.compile(ordered)
    for n in (2, 3, 5):
        x = torch.randn(3)
        got, want = f(x, n), ordered(x, n)
        assert got[0] == want[0] and got[2] == want[2] and got[7] == want[7]
        assert_same(list(got[1]), list(want[1]))
        assert_same(got[3], want[3])
        same_dicts(got[4], want[4])
        same_dicts(got[6], want[6])
        assert_same(got[5], want[5])
    s = framejit.stats(f)
    assert s["graph_breaks"] == 0 and s["fallbacks"] == 0


def moves_missing(x):
    od = collections.OrderedDict(a=1)
    od.move_to_end("zz")
    return x


def test_move_to_end_of_a_missing_key_raises_as_eager():
    f = framejit.compile(moves_missing)
    for _ in range(2):
        try:
            moves_missing(torch.ones(1))
        except KeyError as e:
            want = e.args
        try:
            f(torch.ones(1))
            raise AssertionError("no KeyError")
        except KeyError as e:
            assert e.args == want


def view_set_ops(x, d):
    k = d.keys()
    common = k & {"a", "c"}
    own = {"p": 1, "q": 2}
    kv = own.keys()
    own["r"] = 3  # the view sees the new key
    return (x * len(common), sorted(common), sorted(kv | {"z"}), list({"z"} | k), list(k - {"a"}),
            list(k ^ {"b", "y"}))


def test_set_operators_on_keys_views_as_eager():
    f = framejit.compile(view_set_ops)
    for d in ({"a": 1, "b": 2}, {"a": 1, "b": 2, "c": 3}, {"c": 0}):
        assert_same(f(torch.ones(2), d), view_set_ops(torch.ones(2), d))


def counting_with_counter(x, s, vals):
    c = collections.Counter(s)
    (ch, n), = c.most_common(1)
    v = collections.Counter(vals)
    v.update([1])
    v.update({2: 3})
    total = v + collections.Counter({1: 1, 9: 2})
    del v[12345]  # a Counter ignores a missing key
    return x * n, ch, c["missing"], total, sorted(total.items()), v.most_common(), type(total).__name__


def test_counter_counts_as_eager():
    f = framejit.compile(counting_with_counter)
    for s, vals in (("abca", [1, 2, 2]), ("zzzy", [3, 3, 3, 1])):
        got, want = f(torch.ones(2), s, vals), counting_with_counter(torch.ones(2), s, vals)
        assert_same(got[0], want[0])
        assert got[1:3] == want[1:3] and got[4:] == want[4:]
        same_dicts(got[3], want[3])
    s = framejit.stats(f)
    assert s["graph_breaks"] == 0 and s["fallbacks"] == 0
