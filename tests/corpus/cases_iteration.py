"""Iteration helpers: min/max with key, sum, any/all, range indexing and slicing,
zip(strict=True), map/filter, itertools, the operator module, math on ints and floats."""
import itertools
import math
import operator

import torch

from corpus.registry import case, randn


@case((randn(3), randn(4), randn(2)), (randn(1), randn(5), randn(3)))
def max_with_key(a, b, c):
    return max([a, b, c], key=lambda t: t.shape[0]) * 2


@case((randn(3), [3, -7, 2]), (randn(3), [-1, 4]))
def min_with_key_abs(x, vals):
    return x * min(vals, key=abs), max(vals), min(vals)


@case((randn(3), 4, 9), (randn(3), 11, 2))
def min_max_of_two_ints(x, a, b):
    return x * min(a, b) + max(a, b, 5)


@case((randn(3), 3), (randn(4), 5))
def sum_of_tensors_with_start(x, n):
    return sum([x * i for i in range(n)], torch.ones_like(x))


@case((randn(3), [0.5, 1.5]), (randn(3), [2.0, 3.0, 4.0]))
def sum_of_floats(x, ws):
    return x * sum(ws), sum(ws)


@case((randn(3), [1, 0, 2]), (randn(3), [1, 2]))
def any_all_of_ints(x, vals):
    return x * (2 if all(vals) else 1) + (1 if any(vals) else 0)


@case((randn(3), 10, 3), (randn(3), 20, 7))
def range_indexing(x, n, i):
    r = range(0, n, 2)
    return x * r[i], r[-1], len(r)


@case((randn(3), 10), (randn(3), 25))
def range_slicing(x, n):
    r = range(n)[2::3]
    return x * len(r), list(r), r.start, r.step


@case((randn(3), 7, 4), (randn(3), 8, 20))
def range_membership(x, n, v):
    return x * (1 if v in range(0, n, 2) else -1)


@case((randn(3), randn(3), [1.0, 2.0]), (randn(3), randn(3), [1.0, 2.0, 3.0]))
def zip_strict(x, y, ws):
    try:
        return [a * w for a, w in zip([x, y], ws, strict=True)]
    except ValueError as e:
        return str(e)


@case((randn(3), randn(3)), (randn(5), randn(5)))
def zip_three_ways(x, y):
    names = ("a", "b")
    return {n: a + b for n, a, b in zip(names, [x, y], [y, x])}


@case((randn(3), [1, 2, 3]), (randn(3), [4, 5]))
def map_builtin_function(x, vals):
    strs = list(map(str, vals))
    return x * len("".join(strs)), strs


@case((randn(3), randn(3)), (randn(4), randn(4)))
def map_two_iterables(x, y):
    return list(map(torch.add, [x, y], [y, x]))


@case((randn(3), [1, -2, 3, -4]), (randn(3), [5, 6]))
def filter_with_lambda(x, vals):
    pos = list(filter(lambda v: v > 0, vals))
    return x * sum(pos), pos


@case((randn(3), [0, 1, 2, None]), (randn(3), [3, 0]))
def filter_none_truthiness(x, vals):
    return x * len(list(filter(None, vals)))


@case((randn(3), randn(3)), (randn(2), randn(2)))
def itertools_chain(x, y):
    return torch.stack(list(itertools.chain([x, y], (x * y,))))


@case((randn(3), 2, 3), (randn(3), 3, 2))
def itertools_product(x, n, m):
    pairs = list(itertools.product(range(n), range(m)))
    return x * len(pairs), pairs[-1]


@case((randn(3), [1, 2, 3]), (randn(3), [4, 4]))
def itertools_accumulate(x, vals):
    run = list(itertools.accumulate(vals))
    return x * run[-1], run


@case((randn(3), [2, 3]), (randn(3), [2, 5]))
def itertools_accumulate_mul(x, vals):
    return x * list(itertools.accumulate(vals, operator.mul))[-1]


@case((randn(3), 5, 2), (randn(3), 8, 3))
def itertools_islice(x, n, k):
    head = list(itertools.islice(range(n), k))
    return x * sum(head), head


@case((randn(3), 3), (randn(3), 4))
def itertools_repeat(x, n):
    return torch.stack(list(itertools.repeat(x, n))).sum(0)


@case((randn(3), randn(3), randn(3)), (randn(4), randn(4), randn(4)))
def itertools_pairwise(a, b, c):
    return [u - v for u, v in itertools.pairwise([a, b, c])]


@case((randn(3), 3), (randn(3), 5))
def itertools_count_with_zip(x, n):
    out = []
    for i, t in zip(itertools.count(1), [x] * n):
        out.append(t * i)
    return torch.stack(out)


@case((randn(3), [1, 2, 3]), (randn(3), [1, 2, 3, 4]))
def itertools_combinations(x, vals):
    combos = list(itertools.combinations(vals, 2))
    return x * len(combos), combos


@case((randn(3), randn(3)), (randn(4), randn(4)))
def operator_add_and_mul(x, y):
    return operator.add(x, y), operator.mul(x, 2), operator.sub(3, 1)


@case((randn(3), [5, 6, 7]), (randn(3), [1, 2, 3, 4]))
def operator_itemgetter(x, vals):
    get = operator.itemgetter(0, 2)
    return x * sum(get(vals)), operator.itemgetter(-1)(vals)


@case((randn(3), 2), (randn(4), 5))
def operator_attrgetter(x, n):
    get = operator.attrgetter("shape", "dtype")
    shape, dtype = get(x)
    return x * n, shape, dtype


@case((randn(3), 3), (randn(3), 2))
def operator_methodcaller(x, n):
    f = operator.methodcaller("mul", n)
    return f(x)


@case((randn(3), 2, 3), (randn(3), 5, 5))
def operator_comparisons(x, a, b):
    return x * (operator.lt(a, b) + operator.eq(a, b)), operator.truth(a - b)


@case((randn(3), 16), (randn(3), 10))
def math_on_ints(x, n):
    return x * math.isqrt(n) + math.gcd(n, 6), math.factorial(4), math.comb(n, 2)


@case((randn(3), 2.5), (randn(3), 0.1))
def math_on_floats(x, v):
    return x * math.floor(v) + math.ceil(v), math.log(v), math.exp(v), math.isclose(v, 0.1)


@case((randn(3), 4), (randn(3), 9))
def math_sqrt_of_shape(x, n):
    return x / math.sqrt(n), math.hypot(3, n)


@case((randn(3), 30.0), (randn(3), 90.0))
def math_trig_and_constants(x, deg):
    r = math.radians(deg)
    return x * math.sin(r) + math.cos(r) * math.pi, math.tau / math.e


@case((randn(3), float("inf")), (randn(3), 2.0))
def math_isinf_isfinite(x, v):
    if math.isinf(v):
        return x
    return x * v, math.isfinite(v), math.isnan(v)


@case((randn(3), [1.0, 2.0, 3.5]), (randn(3), [0.5]))
def math_fsum_prod(x, vals):
    return x * math.fsum(vals), math.prod(vals)


@case((randn(3), 5), (randn(3), 6))
def enumerate_to_list(x, n):
    e = list(enumerate("ab" * (n // 2)))
    return x * len(e), e


@case((randn(3), [[1, 2], [3, 4]]), (randn(3), [[5], [6]]))
def zip_transpose(x, rows):
    cols = list(zip(*rows))
    return x * len(cols), cols


@case((randn(3), 4), (randn(3), 6))
def iter_and_next(x, n):
    it = iter(range(n))
    a = next(it)
    b = next(it)
    rest = next(it, -1)
    return x * (a + b + rest)


@case((randn(3), 2), (randn(3), 0))
def next_with_default_on_empty(x, n):
    it = iter([x * i for i in range(n)])
    first = next(it, None)
    return x if first is None else first


@case((randn(3), [3, 1, 2]), (randn(3), [9, 8]))
def sorted_enumerate_argsort(x, vals):
    order = [i for i, _ in sorted(enumerate(vals), key=lambda p: p[1])]
    return x * order[0], order
