"""Lists, tuples, sets and deques: list methods, slicing, + and * on sequences, set and
frozenset operations, collections.deque, len, sorted, reversed."""
import collections

import torch

from corpus.registry import case, randn


@case((randn(3), 2), (randn(3), 4))
def list_append_and_stack(x, n):
    out = []
    for i in range(n):
        out.append(x + i)
    return torch.stack(out)


@case((randn(3), randn(3)), (randn(5), randn(5)))
def list_extend(x, y):
    out = [x]
    out.extend([y, x + y])
    out.extend((x * 2,))
    return torch.stack(out)


@case((randn(3), 0), (randn(3), 2))
def list_insert(x, i):
    out = [x, x * 2]
    out.insert(i, x * 10)
    return out


@case((randn(3),), (randn(4),))
def list_pop_last_and_index(x):
    xs = [x, x + 1, x + 2, x + 3]
    last = xs.pop()
    first = xs.pop(0)
    return last - first, len(xs)


@case((randn(3), 3), (randn(3), 9))
def list_index_and_count(x, v):
    vals = [1, 3, 3, 9, 3]
    return x * vals.index(v), vals.count(v)


@case((randn(3), [3, 1, 2]), (randn(3), [5, 4]))
def list_sort_in_place(x, vals):
    vals = list(vals)
    vals.sort()
    vals.sort(reverse=True)
    return x * vals[0], vals


@case((randn(3), randn(3)), (randn(2), randn(2)))
def list_reverse_in_place(x, y):
    xs = [x, y, x * y]
    xs.reverse()
    return xs


@case((randn(3),), (randn(5),))
def list_copy_independent(x):
    a = [x, x * 2]
    b = a.copy()
    b.append(x * 3)
    return len(a), len(b), b[-1]


@case((randn(3),), (randn(2),))
def list_clear(x):
    xs = [x, x]
    xs.clear()
    xs.append(x * 5)
    return xs


@case((randn(3), [1, 2]), (randn(3), [4]))
def list_argument_mutated(x, vals):
    vals.append(len(vals))
    return x * sum(vals)


@case((randn(6),), (randn(9),))
def list_slicing(x):
    xs = list(x.unbind(0))
    return torch.stack(xs[1:4]), torch.stack(xs[::2]), torch.stack(xs[::-1]), xs[-1]


@case((randn(4), 1), (randn(4), 2))
def list_slice_assignment(x, k):
    xs = [x, x + 1, x + 2, x + 3]
    xs[1:3] = [x * k]
    return torch.stack(xs)


@case((randn(3), 2), (randn(3), 3))
def list_plus_and_times(x, n):
    a = [x] * n
    b = a + [x * 2]
    return torch.stack(b), len(b)


@case((randn(3), (1, 2)), (randn(3), (3,)))
def tuple_plus_and_times(x, t):
    u = t + (10,)
    v = u * 2
    return x * sum(v), v


@case((randn(3), [1, 2, 3], [3, 4]), (randn(3), [5], [5, 6]))
def set_operations(x, a, b):
    sa, sb = set(a), set(b)
    return x * len(sa | sb), sorted(sa & sb), sorted(sa - sb), sorted(sa ^ sb)


@case((randn(3), 2), (randn(3), 5))
def set_add_discard_membership(x, v):
    s = {1, 2, 3}
    s.add(v)
    s.discard(1)
    return x * len(s), v in s, 1 in s


@case((randn(3), (1, 2)), (randn(3), (2, 3)))
def frozenset_ops(x, t):
    f = frozenset(t)
    g = f | frozenset({9})
    return x * len(g), 2 in g, f.issubset({1, 2, 3})


@case((randn(3), [3, 1, 3, 2]), (randn(3), [1, 1]))
def set_of_list_dedup(x, vals):
    uniq = sorted(set(vals))
    return x * len(uniq), uniq


@case((randn(3), 3), (randn(3), 5))
def deque_append_and_popleft(x, n):
    q = collections.deque()
    for i in range(n):
        q.append(x * i)
    first = q.popleft()
    q.appendleft(x)
    return first, len(q), q[0], q[-1]


@case((randn(3), 2), (randn(3), 4))
def deque_with_maxlen(x, n):
    q = collections.deque(maxlen=2)
    for i in range(n):
        q.append(x + i)
    return list(q)


@case((randn(3),), (randn(4),))
def deque_rotate(x):
    q = collections.deque([x, x * 2, x * 3])
    q.rotate(1)
    return torch.stack(list(q))


@case((randn(3), [4, 1, 3]), (randn(3), [2, 9]))
def sorted_reverse_and_key(x, vals):
    a = sorted(vals, reverse=True)
    b = sorted(vals, key=lambda v: -v % 4)
    return x * a[0], a, b


@case((randn(3), randn(4), randn(2)), (randn(5), randn(1), randn(3)))
def sorted_tensors_by_size(a, b, c):
    ts = sorted([a, b, c], key=lambda t: t.numel())
    return [t.sum() for t in ts]


@case((randn(3), [1, 2, 3]), (randn(3), [4, 5]))
def list_unpack_to_tensor(x, vals):
    return x * torch.tensor(vals).sum()


@case((randn(3), [2, 3]), (randn(3), [1, 1, 1]))
def list_equality_and_comparison(x, vals):
    if vals == [2, 3]:
        return x * 2
    return x, vals < [2]


@case((randn(3, 4),), (randn(5, 2),))
def shape_tuple_slicing(x):
    lead = x.shape[:-1]
    return x.reshape(*lead, -1, 1), tuple(lead)


@case((randn(3), 1), (randn(3), -1))
def list_negative_index(x, i):
    xs = [x, x * 2, x * 3]
    return xs[i] + xs[-i]


@case((randn(3), 3), (randn(3), 2))
def nested_lists(x, n):
    grid = [[x * (i + j) for j in range(2)] for i in range(n)]
    return grid[-1][1], len(grid), len(grid[0])


@case((randn(3), 2), (randn(3), 3))
def list_of_tuples_unpacked(x, n):
    pairs = [(i, x * i) for i in range(n)]
    total = 0
    for i, t in pairs:
        total = total + t * i
    return total


@case((randn(3), [1, 2]), (randn(3), []))
def list_truthiness(x, vals):
    if vals:
        return x * vals[0]
    return x


@case((randn(3), 4), (randn(3), 7))
def list_from_range_and_max(x, n):
    vals = list(range(n))
    return x * max(vals) + min(vals), vals


@case((randn(3), [4, 5]), (randn(3), [1, 2, 3]))
def tuple_from_list(x, vals):
    t = tuple(vals)
    return x * len(t), t


@case((randn(3), (1, 2, 3)), (randn(3), (7,)))
def tuple_index_and_count(x, t):
    return x * t.index(t[-1]), t.count(1)


@case((randn(3), 2), (randn(3), 3))
def list_multiplication_aliasing(x, n):
    rows = [[0] * 2 for _ in range(n)]
    rows[0][1] = 5
    return x * rows[0][1], rows


@case((randn(3), [3, 1, 2]), (randn(3), [1]))
def reversed_list_object(x, vals):
    r = list(reversed(vals))
    return x * r[0], r


@case((randn(3), "a,b,c"), (randn(3), "x"))
def list_from_string_split(x, s):
    parts = s.split(",")
    return x * len(parts), parts


@case((randn(3),), (randn(4),))
def list_contains_tensor_identity(x):
    y = x * 2
    xs = [x, y]
    return any(t is y for t in xs), len(xs)


@case((randn(3), 2), (randn(3), 4))
def tuple_compare_and_hash(x, n):
    key = (n, "s")
    seen = {(2, "s"): 1.0, (3, "s"): 2.0}
    return x * seen.get(key, 0.0), key == (2, "s")
