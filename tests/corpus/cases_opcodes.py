"""Statements and operators: walrus, unary ops on ints, chained comparisons, match,
global and nonlocal reads and writes, import inside a function, assert."""
import torch

from corpus.registry import case, randint, randn

SCALE = 3.0
CONFIG = {"eps": 1e-3, "act": "relu"}
LAST_SIZE = 0
_COUNT = 0
TABLE = [1, 4, 9, 16]


@case((randn(3), 1), (randn(3), 4))
def walrus_in_if(x, n):
    if (n2 := n * 2) > 4:
        return x * n2
    return x - n2


@case((randn(3), 5), (randn(3), 8))
def walrus_in_comprehension(x, n):
    squares = [s for i in range(n) if (s := i * i) % 2 == 0]
    return x * sum(squares), squares


@case((randn(3), 3), (randn(3), 6))
def walrus_in_while(x, n):
    acc = torch.zeros_like(x)
    k = n
    while (k := k - 1) > 0:
        acc = acc + x * k
    return acc


@case((randn(3), 5), (randn(3), -2))
def unary_ops_on_int(x, n):
    return x * (~n) + (-n) + (+n), not n


@case((randn(4), randint(16, 4)), (randn(5), randint(16, 5)))
def unary_ops_on_tensors(x, i):
    return -x, ~i, +x, ~(x > 0)


@case((randn(3), 3), (randn(3), 12), (randn(3), 0))
def chained_comparison_ints(x, n):
    if 0 < n < 10:
        return x * n
    return x


@case((randn(4),), (randn(9),))
def chained_comparison_shape(x):
    if 1 < x.shape[0] <= 8:
        return x.cumsum(0)
    return x.flip(0)


@case((randn(3), "relu"), (randn(3), "gelu"), (randn(3), "none"))
def match_string_literal(x, mode):
    match mode:
        case "relu":
            return torch.relu(x)
        case "gelu":
            return torch.nn.functional.gelu(x)
        case _:
            return x


@case((randn(5),), (randn(2, 3),), (randn(2, 2, 2),))
def match_shape_sequence(x):
    match x.shape:
        case (n,):
            return x * n
        case (a, b):
            return x.sum(1) * a + b
        case _:
            return x.flatten()


@case((randn(3), {"act": "relu", "scale": 2.0}), (randn(3), {"act": "tanh", "scale": 0.5}))
def match_mapping_pattern(x, cfg):
    match cfg:
        case {"act": "relu", **rest}:
            return torch.relu(x) * rest["scale"]
        case {"act": act, "scale": s}:
            return torch.tanh(x) * s, act


@case((randn(3), 2), (randn(3), 6))
def match_with_guard(x, n):
    match n:
        case k if k > 3:
            return x * k
        case k:
            return x + k


@case((randn(3), 0, 5), (randn(3), 2, 0), (randn(3), 1, 1))
def match_tuple_of_ints(x, a, b):
    match (a, b):
        case (0, _):
            return x * b
        case (_, 0):
            return x * a
        case (p, q):
            return x * (p + q)


@case((randn(3), [1, 2]), (randn(3), (4,)), (randn(3), 7))
def match_type_patterns(x, v):
    match v:
        case [a, b]:
            return x * (a + b)
        case (a,):
            return x - a
        case int(k):
            return x * k


@case((randn(3),), (randn(6),))
def global_read(x):
    return x * SCALE


@case((randn(3),), (randn(6),))
def global_dict_read(x):
    return torch.clamp(x, min=CONFIG["eps"]) if CONFIG["act"] == "relu" else x


@case((randn(3),), (randn(5),))
def global_write_of_size(x):
    global LAST_SIZE
    LAST_SIZE = x.shape[0]
    return x * LAST_SIZE


@case((randn(3), 3), (randn(3), 5))
def global_counter_reset_and_count(x, n):
    global _COUNT
    _COUNT = 0
    for _ in range(n):
        _COUNT += 1
    return x * _COUNT


@case((randn(3), 1), (randn(3), 3))
def global_list_index(x, i):
    return x * TABLE[i]


@case((randn(3), 3), (randn(3), 5))
def nonlocal_counter(x, n):
    count = 0

    def bump():
        nonlocal count
        count += 1

    for _ in range(n):
        bump()
    return x * count


@case((randn(3), 2), (randn(4), 4))
def nonlocal_tensor_accumulator(x, n):
    total = torch.zeros_like(x)

    def add(t):
        nonlocal total
        total = total + t

    for i in range(n):
        add(x * i)
    return total


@case((randn(3),), (randn(4),))
def import_inside_function(x):
    import math
    return x * math.pi


@case((randn(3),), (randn(4, 2),))
def from_import_inside_function(x):
    from torch.nn import functional as F
    return F.relu(x) + F.softplus(x)


@case((randn(3),), (randn(5),))
def import_submodule_attr(x):
    import torch.nn.functional
    return torch.nn.functional.silu(x)


@case((randn(2, 3),), (randn(4, 2),))
def assert_passes(x):
    assert x.dim() == 2, "need a matrix"
    return x.t()


@case((randn(3), 2), (randn(3), -1))
def assert_may_fail(x, n):
    assert n > 0, f"n must be positive, got {n}"
    return x * n


@case((randn(3), 2.0), (randn(3), 3))
def assert_isinstance(x, s):
    assert isinstance(s, (int, float))
    return x * s


@case((randn(3), 6), (randn(3), 7))
def augmented_assignments_on_ints(x, n):
    k = n
    k += 3
    k *= 2
    k //= 3
    k %= 5
    k **= 2
    k -= 1
    k <<= 1
    k |= 1
    return x * k, k


@case((randn(3), 6, 3), (randn(3), 9, 4))
def binary_ops_on_ints(x, a, b):
    vals = (a + b, a - b, a * b, a // b, a % b, a ** 2, a << 1, a >> 1, a & b, a | b, a ^ b)
    return x * sum(vals), vals


@case((randn(3), 2), (randn(3), 5))
def is_and_is_not_none(x, n):
    v = None if n > 3 else n
    if v is None:
        return x
    if v is not None:
        return x * v


@case((randn(3), "a"), (randn(3), "c"))
def in_and_not_in(x, key):
    if key in ("a", "b"):
        return x + 1
    if key not in ["x"]:
        return x - 1


@case((randn(3), 3), (randn(3), 4))
def lambda_with_default_from_global(x, n):
    f = lambda t, s=SCALE: t * s + n  # noqa: E731
    return f(x)


@case((randn(3), "relu"), (randn(3), "other"))
def match_or_pattern(x, name):
    match name:
        case "relu" | "gelu":
            return torch.relu(x)
        case _:
            return x


@case((randn(3), 2), (randn(3), 5))
def match_capture_with_as(x, n):
    match [n, n + 1]:
        case [a, b] as pair:
            return x * (a * b), pair


@case((randn(3), 2), (randn(3), 3))
def star_unpack_into_call(x, n):
    dims = [x.shape[0], 1]
    return x.reshape(*dims).expand(*dims[:1], n)


@case((randn(3), [1, 2]), (randn(3), [3, 4, 5]))
def star_unpack_in_call_of_builtin(x, vals):
    return x * max(*vals, 0), min(0, *vals)


@case((randn(3), 1), (randn(3), 2))
def nested_function_global_read(x, n):
    def inner(t):
        return t * SCALE * n
    return inner(x)
