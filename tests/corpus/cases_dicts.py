"""Dicts and the mapping types of collections: get, setdefault, update, keys/values/items,
pop, fromkeys, dict(k=v), `in`, defaultdict, OrderedDict, Counter, ChainMap."""
import collections

import torch

from corpus.registry import case, randn


def _named(x):
    return {"w": x, "b": x * 0.5}


@case((randn(3), "w"), (randn(3), "missing"))
def dict_get_with_default(x, key):
    d = _named(x)
    return d.get(key, x.new_zeros(3))


@case((randn(3), "w"), (randn(3), "z"))
def dict_get_none(x, key):
    v = _named(x).get(key)
    return x if v is None else v * 2


@case((randn(3), 2), (randn(4), 3))
def dict_setdefault(x, n):
    d = {}
    for i in range(n):
        d.setdefault(i % 2, []).append(x * i)
    return {k: torch.stack(v) for k, v in d.items()}


@case((randn(3), 1.0), (randn(3), 2.0))
def dict_update_from_dict(x, s):
    d = {"a": x}
    d.update({"b": x * s, "a": x + s})
    return d


@case((randn(3), 1.0), (randn(3), 2.0))
def dict_update_from_kwargs(x, s):
    d = {"a": x}
    d.update(b=x * s, c=x - s)
    return d


@case((randn(3),), (randn(4),))
def dict_keys_values_items(x):
    d = {"a": x, "b": x * 2, "c": x * 3}
    ks = list(d.keys())
    vs = list(d.values())
    pairs = [(k, v.sum()) for k, v in d.items()]
    return ks, torch.stack(vs), pairs


@case((randn(3), "a"), (randn(3), "q"))
def dict_pop_with_default(x, key):
    d = {"a": x, "b": x + 1}
    v = d.pop(key, None)
    return v, d


@case((randn(3),), (randn(5),))
def dict_popitem(x):
    d = {"a": x, "b": x * 2}
    k, v = d.popitem()
    return k, v, len(d)


@case((randn(3), ("a", "b")), (randn(3), ("x", "y", "z")))
def dict_fromkeys(x, names):
    d = dict.fromkeys(names, 0)
    for n in names:
        d[n] += len(n)
    return x * sum(d.values()), d


@case((randn(3), 2.0), (randn(3), 0.5))
def dict_constructor_kwargs(x, lr):
    opts = dict(lr=lr, momentum=0.9, nesterov=False)
    return x * opts["lr"] * opts["momentum"], opts


@case((randn(3), ["a", "b"]), (randn(3), ["c"]))
def dict_constructor_from_zip(x, names):
    d = dict(zip(names, range(len(names))))
    return x + len(d), d


@case((randn(3), "b"), (randn(3), "q"))
def dict_membership(x, key):
    d = {"a": 1, "b": 2}
    if key in d:
        return x * d[key]
    return x, key not in d


@case((randn(3),), (randn(2),))
def dict_len_and_bool(x):
    d = {}
    empty = not d
    d["k"] = x
    return x * len(d), empty, bool(d)


@case((randn(3), "w", 2.0), (randn(3), "v", -1.0))
def dict_item_assignment(x, k, s):
    d = _named(x)
    d[k] = x * s
    return d


@case((randn(3), 3), (randn(3), 5))
def dict_iteration_order(x, n):
    d = {}
    for i in reversed(range(n)):
        d[str(i)] = i
    return list(d), x * next(iter(d.values()))


@case((randn(3), {"a": 1.0}), (randn(3), {"b": 2.0, "a": 3.0}))
def dict_argument_mutated(x, d):
    d["seen"] = x.sum()
    return x * len(d)


@case((randn(3), {"a": 1.0}), (randn(3), {"b": 2.0}))
def dict_copy_then_mutate(x, d):
    e = d.copy()
    e["x"] = x
    return len(d), e


@case((randn(3), {"a": 1, "b": 2}), (randn(3), {"c": 5}))
def dict_union_operator(x, d):
    merged = d | {"z": 0}
    merged |= {"y": 1}
    return x * sum(merged.values()), merged


@case((randn(3), ["a", "b", "a"]), (randn(3), ["c", "c", "c"]))
def defaultdict_int_counting(x, words):
    counts = collections.defaultdict(int)
    for w in words:
        counts[w] += 1
    return x * max(counts.values()), dict(counts)


@case((randn(3), 3), (randn(4), 4))
def defaultdict_list_grouping(x, n):
    groups = collections.defaultdict(list)
    for i in range(n):
        groups[i % 2].append(x * i)
    return [torch.stack(groups[k]) for k in sorted(groups)]


@case((randn(3), "w"), (randn(3), "v"))
def defaultdict_missing_key_read(x, key):
    d = collections.defaultdict(lambda: 1.0)
    d["w"] = 3.0
    return x * d[key], key in d


@case((randn(3), 2), (randn(3), 3))
def ordered_dict_move_to_end(x, n):
    od = collections.OrderedDict()
    for i in range(n):
        od[f"k{i}"] = x * i
    od.move_to_end("k0")
    return list(od.keys()), list(od.values())


@case((randn(3),), (randn(5),))
def ordered_dict_popitem_last(x):
    od = collections.OrderedDict(a=x, b=x * 2, c=x * 3)
    k, v = od.popitem(last=False)
    return k, v, list(od)


@case((randn(3), "abca"), (randn(3), "zzzy"))
def counter_most_common(x, s):
    c = collections.Counter(s)
    (ch, n), = c.most_common(1)
    return x * n, ch


@case((randn(3), [1, 2, 2]), (randn(3), [3, 3, 3, 1]))
def counter_update_and_arith(x, vals):
    c = collections.Counter(vals)
    c.update([1])
    d = c + collections.Counter({1: 1})
    return x * d[1], sorted(d.items())


@case((randn(3), {"a": 1}), (randn(3), {"b": 2}))
def chainmap_lookup(x, override):
    cm = collections.ChainMap(override, {"a": 10, "b": 20})
    return x * (cm["a"] + cm["b"])


@case((randn(3), 2), (randn(3), 4))
def dict_of_lists_of_tensors(x, n):
    d = {"even": [], "odd": []}
    for i in range(n):
        d["even" if i % 2 == 0 else "odd"].append(x + i)
    return {k: len(v) for k, v in d.items()}, d["even"]


@case((randn(3), 2), (randn(3), 3))
def nested_dicts(x, n):
    cfg = {"model": {"depth": n, "act": {"name": "relu"}}}
    y = x
    for _ in range(cfg["model"]["depth"]):
        y = torch.relu(y) + 1
    return y, cfg["model"]["act"]["name"]


@case((randn(3),), (randn(4),))
def dict_with_tuple_keys(x):
    d = {(0, 1): x, (1, 0): x * 2}
    return d[(1, 0)] - d[0, 1]


@case((randn(3), "a"), (randn(3), "b"))
def dict_of_functions_dispatch(x, name):
    ops = {"a": torch.sin, "b": torch.cos}
    return ops[name](x)


@case((randn(3), 3), (randn(3), 5))
def dict_sorted_by_value(x, n):
    d = {f"k{i}": (i * 7) % n for i in range(n)}
    order = sorted(d, key=d.get)
    return order, x * d[order[-1]]


@case((randn(3), {"a": 1, "b": 2}), (randn(3), {"a": 1, "b": 2, "c": 3}))
def dict_views_set_ops(x, d):
    common = d.keys() & {"a", "c"}
    return x * len(common), sorted(common)


@case((randn(3), {"w": 2.0}), (randn(3), {"w": 2.0, "b": 1.0}))
def dict_equality(x, d):
    if d == {"w": 2.0}:
        return x * d["w"]
    return x


@case((randn(2, 3),), (randn(4, 3),))
def state_dict_style_loop(x):
    state = {"layer.weight": x, "layer.bias": x.sum(0)}
    out = {}
    for k, v in state.items():
        prefix, _, name = k.rpartition(".")
        out[name] = v * 2
    return out


@case((randn(3), "a"), (randn(3), "b"))
def dict_del_and_contains(x, key):
    d = {"a": x, "b": x * 2}
    del d[key]
    return list(d), key in d
