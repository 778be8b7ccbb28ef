"""for loops over range, lists, tuples, dicts, zip, enumerate, reversed, tensors and
strings; break, continue and else; nested loops; list, dict and set comprehensions and
generator expressions."""
import torch

from corpus.registry import case, randn


@case((randn(3), 3), (randn(3), 6))
def for_range(x, n):
    y = x
    for i in range(n):
        y = y + i
    return y


@case((randn(3), 10), (randn(3), 17))
def for_range_with_step(x, n):
    acc = 0
    for i in range(1, n, 3):
        acc += i
    return x * acc


@case((randn(3), 5), (randn(3), 8))
def for_range_negative_step(x, n):
    out = []
    for i in range(n, 0, -2):
        out.append(x * i)
    return torch.stack(out)


@case((randn(3), randn(3), randn(3)), (randn(5), randn(5), randn(5)))
def for_over_list_of_tensors(a, b, c):
    total = torch.zeros_like(a)
    for t in [a, b, c]:
        total = total + t * t
    return total


@case((randn(3), (1, 2, 3)), (randn(3), (4, 5)))
def for_over_tuple_arg(x, ks):
    for k in ks:
        x = x * k
    return x


@case((randn(3), {"a": 1.0, "b": 2.0}), (randn(3), {"w": 0.5}))
def for_over_dict_keys(x, weights):
    y = x
    for name in weights:
        y = y + weights[name]
    return y


@case((randn(3), {"a": 1.0, "b": 2.0}), (randn(3), {"w": 0.5, "v": 3.0, "u": 1.0}))
def for_over_dict_items(x, weights):
    out = {}
    for name, w in weights.items():
        out[name] = x * w
    return out


@case((randn(3), randn(3), [1.0, 2.0]), (randn(4), randn(4), [3.0, 0.5]))
def for_over_zip(x, y, ws):
    total = 0
    for t, w in zip([x, y], ws):
        total = total + t * w
    return total


@case((randn(4),), (randn(6),))
def for_enumerate(x):
    parts = x.chunk(2)
    out = x.new_zeros(parts[0].shape)
    for i, p in enumerate(parts):
        out = out + p[: out.shape[0]] * (i + 1)
    return out


@case((randn(3), [2.0, 3.0]), (randn(3), [1.0, 1.0, 1.0]))
def for_enumerate_with_start(x, ws):
    for i, w in enumerate(ws, start=1):
        x = x + w * i
    return x


@case((randn(3), 4), (randn(3), 2))
def for_reversed_range(x, n):
    seq = []
    for i in reversed(range(n)):
        seq.append(i)
        x = x * 2 + i
    return x, seq


@case((randn(3), randn(3)), (randn(2), randn(2)))
def for_reversed_list(x, y):
    layers = [x, y, x * y]
    out = torch.ones_like(x)
    for t in reversed(layers):
        out = out * 0.5 + t
    return out


@case((randn(3, 4),), (randn(2, 5),))
def for_over_tensor_rows(x):
    rows = []
    for row in x:
        rows.append(row.max())
    return torch.stack(rows)


@case((randn(2, 3),), (randn(3, 2, 2),))
def for_over_shape(x):
    n = 1
    for s in x.shape:
        n *= s
    return x.reshape(n)


@case((randn(3), "abc"), (randn(3), "hello"))
def for_over_string(x, word):
    code = 0
    for ch in word:
        if ch in "aeiou":
            code += 1
    return x * code


@case((randn(3), 3, 7), (randn(3), 12, 7))
def for_else_not_found(x, n, target):
    for i in range(n):
        if i == target:
            found = i
            break
    else:
        found = -1
    return x + found


@case((randn(3), [1, 5, 2, 8]), (randn(3), [3, 4]))
def for_with_break(x, vals):
    for v in vals:
        if v > 4:
            break
        x = x + v
    return x


@case((randn(3), 6), (randn(3), 9))
def for_with_continue(x, n):
    for i in range(n):
        if i % 2:
            continue
        x = x + i
    return x


@case((randn(3), 3, 2), (randn(3), 2, 4))
def nested_for_loops(x, n, m):
    out = []
    for i in range(n):
        for j in range(m):
            out.append(x * i + j)
    return torch.stack(out)


@case((randn(3), 4), (randn(3), 6))
def nested_loop_break_inner(x, n):
    pairs = 0
    for i in range(n):
        for j in range(n):
            if j > i:
                break
            pairs += 1
    return x * pairs


@case((randn(4),), (randn(8),))
def loop_over_split(x):
    total = 0
    for c in torch.split(x, 2):
        total = total + c.sum()
    return total


@case((randn(3), 4), (randn(5), 2))
def list_comprehension(x, n):
    return [x * i for i in range(n)]


@case((randn(3), 7), (randn(3), 4))
def list_comprehension_with_if(x, n):
    return torch.stack([x + i for i in range(n) if i % 3 != 1])


@case((randn(3), 2, 3), (randn(3), 3, 1))
def nested_list_comprehension(x, n, m):
    grid = [[x * i - j for j in range(m)] for i in range(n)]
    return torch.stack([torch.stack(r) for r in grid])


@case((randn(3), ["a", "b"]), (randn(2), ["p", "q", "r"]))
def dict_comprehension(x, names):
    return {n: x * i for i, n in enumerate(names)}


@case((randn(3), [1, 2, 2, 3]), (randn(3), [4, 4]))
def set_comprehension(x, vals):
    s = {v % 3 for v in vals}
    return x * len(s), sorted(s)


@case((randn(3), 4), (randn(6), 3))
def generator_expression_sum(x, n):
    return sum(x * i for i in range(n))


@case((randn(3), [1, 2, 3]), (randn(3), [1, -2]))
def generator_expression_any_all(x, vals):
    if any(v < 0 for v in vals):
        return x * -1
    if all(v > 0 for v in vals):
        return x * 2
    return x


@case((randn(3), 3), (randn(3), 5))
def tuple_from_generator(x, n):
    return tuple(x[i % 3] * i for i in range(n))


@case((randn(3), randn(3)), (randn(4), randn(4)))
def comprehension_over_zip(x, y):
    return [a * b for a, b in zip(x.unbind(0), y.unbind(0))]


@case((randn(2, 3),), (randn(4, 3),))
def comprehension_over_enumerate_rows(x):
    return torch.stack([r * i for i, r in enumerate(x)])


@case((randn(3), {"a": 2, "b": 3}), (randn(3), {"c": 1}))
def dict_comprehension_filtering(x, d):
    kept = {k: v for k, v in d.items() if v > 1}
    return x * sum(kept.values()), kept


@case((randn(3), 5), (randn(3), 8))
def loop_building_tuple(x, n):
    acc = ()
    for i in range(n):
        acc = acc + (i * i,)
    return x * acc[-1], acc


@case((randn(3), 3), (randn(3), 4))
def loop_variable_after_loop(x, n):
    for i in range(n):
        pass
    return x * i


@case((randn(3), randn(3)), (randn(6), randn(6)))
def loop_over_zip_of_unbinds(x, y):
    out = []
    for i, (a, b) in enumerate(zip(x, y)):
        out.append(a * b + i)
    return torch.stack(out)


@case((randn(3), 4), (randn(3), 2))
def loop_unrolling_list_of_layers(x, depth):
    ws = [torch.full((3,), 0.5 + i) for i in range(depth)]
    for w in ws:
        x = torch.tanh(x * w)
    return x
