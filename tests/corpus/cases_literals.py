"""Literals and unpacking: list/tuple/set/dict displays, starred unpacking, string
formatting on known values, conditional expressions, and/or on values."""
import torch

from corpus.registry import case, randn


@case((randn(4),), (randn(7),))
def list_literal_of_tensors(x):
    parts = [x, x * 2, x + 1]
    return torch.stack(parts).sum(0)


@case((randn(3),), (randn(5),))
def tuple_literal_returned(x):
    return (x + 1, x - 1)


@case((randn(3), 2), (randn(6), 5))
def tuple_of_mixed_values(x, n):
    return (x.sum() * n, n, "done", None)


@case((randn(3), 2), (randn(4), 5))
def set_literal_of_ints(x, n):
    s = {n, n + 1, 2}
    return x * len(s)


@case((randn(4),), (randn(9),))
def dict_literal_returned(x):
    return {"sum": x.sum(), "max": x.max(), "n": x.numel()}


@case((randn(3), randn(3), 0), (randn(5), randn(5), 1))
def dict_literal_int_keys(x, y, i):
    d = {0: x, 1: y}
    return d[i] * 2


@case((randn(3),), (randn(8),))
def list_display_with_stars(x):
    a = [x, x + 1]
    b = [x * 2]
    return torch.stack([*a, *b, x - 1])


@case((randn(2, 3),), (randn(4, 3),))
def tuple_display_with_star(x):
    rows = x.unbind(0)
    return torch.stack((*rows, rows[0]))


@case((randn(3), 1.0), (randn(4), 0.5))
def dict_merge_with_double_star(x, w):
    base = {"a": x, "b": x * w}
    extra = {"c": x + w}
    merged = {**base, **extra}
    return [merged[k] for k in ("a", "b", "c")]


@case((randn(3),), (randn(6),))
def dict_override_with_double_star(x):
    d = {"a": x, "b": x + 1}
    d2 = {**d, "b": x * 3}
    return d2


@case((randn(3), 2), (randn(3), 7))
def fstring_key(x, n):
    name = f"layer_{n}"
    return {name: x * n, f"{name}_bias": x + n}


@case((randn(3), 0.5), (randn(4), 0.125))
def fstring_with_format_spec(x, scale):
    label = f"scale={scale:.2f}|{scale!r}"
    return x * scale, label


@case((randn(4), 3), (randn(5), 11))
def percent_format_ints(x, n):
    tag = "%s-%d" % ("blk", n)
    return tag, x[: n % 4 + 1]


@case((randn(2), 1e-5), (randn(3), 0.25))
def percent_format_float(x, eps):
    return "%.3f" % eps, x + eps


@case((randn(2, 3),), (randn(4, 5),))
def str_format_of_shape(x):
    desc = "{}x{}".format(*x.shape)
    return desc, x.t()


@case((randn(4, 3),), (randn(6, 2),))
def star_rest_of_rows(x):
    first, *rest = x.unbind(0)
    return first + sum(rest)


@case((randn(3), 4), (randn(3), 7))
def star_middle_of_range(x, n):
    a, *mid, b = range(n)
    return x * (a + b + len(mid))


@case((randn(3), randn(3)), (randn(5), randn(5)))
def tuple_swap(x, y):
    a, b = x, y
    a, b = b, a * 2
    return a - b


@case((randn(3), randn(3), randn(3)), (randn(2), randn(2), randn(2)))
def nested_unpacking(x, y, z):
    (a, b), c = (x, y), z
    return a * b + c


@case((randn(3), 2, 5), (randn(3), 4, 4))
def chained_equality(x, a, b):
    if a == b == 4:
        return x * 4
    return x - a


@case((randn(3),), (randn(5),))
def del_local_name(x):
    tmp = x * 2
    y = tmp + 1
    del tmp
    return y


@case((randn(3), randn(3)), (randn(4), randn(4)))
def del_dict_item(x, y):
    d = {"a": x, "b": y, "c": x + y}
    del d["a"]
    return d


@case((randn(3),), (randn(2),))
def del_list_slice(x):
    xs = [x, x + 1, x + 2, x + 3]
    del xs[1:3]
    return xs


@case((randn(3), 1), (randn(3), 4))
def conditional_expression(x, n):
    y = x if n > 2 else -x
    return y * (1 if n % 2 else 2)


@case((randn(3), None), (randn(3), 2.0), (randn(3), 0.0))
def or_default_value(x, scale):
    s = scale or 1.0
    return x * s


@case((randn(3), True, 3), (randn(3), False, 3))
def and_returns_operand(x, flag, n):
    k = flag and n
    return x + k


@case((randn(3), 3), (randn(3), 12))
def integer_literal_forms(x, n):
    return x * (0b101 + 0x10 + 1_000 + 0o7) + n


@case((randn(2, 3),), (randn(5, 2),))
def shape_plus_tuple(x):
    return x.reshape(x.shape + (1,))


@case((randn(3), 2), (randn(3), 4))
def string_repeat_and_join(x, n):
    s = "-".join(["ab"] * n)
    return len(s), x * len(s)


@case((1.0, 2.0), (0.5, -3.0))
def nested_list_to_tensor(a, b):
    return torch.tensor([[a, b], [b, a]])


@case((randn(3), 3), (randn(3), 5))
def list_repeat_literal(x, n):
    zs = [0] * n
    zs[1] = 2
    return x * sum(zs), zs


@case((randn(3), "x"), (randn(3), "y"))
def bytes_and_str_literals(x, name):
    raw = b"abc"
    return x * len(raw) if name == "x" else x + raw[0]


@case((randn(4),), (randn(6),))
def empty_containers(x):
    a, b, c = [], {}, ()
    a.append(x)
    b["k"] = x * 2
    return a, b, c + (x.sum(),)


@case((randn(3), 2), (randn(5), 3))
def tuple_literal_of_tuples(x, n):
    table = ((1, 2), (3, 4), (5, 6))
    return x * table[n - 2][1]


@case((randn(3),), (randn(4),))
def string_methods_on_literals(x):
    name = "Conv2d_Block".lower().replace("_", ".")
    parts = name.split(".")
    return parts, x * len(parts[0]), name.startswith("conv")


@case((randn(3), 3), (randn(2), 8))
def slice_literal_object(x, n):
    s = slice(0, n, 2)
    return list(range(10))[s], x * s.stop
