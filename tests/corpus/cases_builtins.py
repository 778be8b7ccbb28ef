"""Builtins on Python values: callable, hasattr, getattr with a default, setattr on local
objects, abs, round, divmod, pow, int/float/bool/str conversions, identity, hash of
constants, isinstance with tuples, len, repr, chr/ord, sorted strings."""
import torch

from corpus.registry import case, const, randn


class _Box:
    def __init__(self, v):
        self.v = v


@case((randn(3), const(torch.relu)), (randn(3), 2.0))
def callable_check(x, f):
    if callable(f):
        return f(x)
    return x * f


@case((randn(3), "v"), (randn(3), "w"))
def hasattr_on_local_object(x, name):
    b = _Box(x)
    return b.v * 2 if hasattr(b, name) else x


@case((randn(3), "v"), (randn(3), "scale"))
def getattr_with_default(x, name):
    b = _Box(2.0)
    return x * getattr(b, name, 5.0)


@case((randn(3), "v", 3.0), (randn(3), "w", 4.0))
def setattr_on_local_object(x, name, val):
    b = _Box(1.0)
    setattr(b, name, val)
    return x * (b.v + getattr(b, "w", 0.0))


@case((randn(3), "double"), (randn(3), "neg"))
def getattr_of_tensor_method_by_name(x, name):
    return getattr(x, name)()


@case((randn(3), -3), (randn(3), 4))
def abs_of_int(x, n):
    return x * abs(n), abs(-2.5)


@case((randn(3), 2.567), (randn(3), -1.5))
def round_of_float(x, v):
    return x * round(v, 1), round(v), round(2.5), round(3.5)


@case((randn(3), 17, 5), (randn(3), -7, 3))
def divmod_of_ints(x, a, b):
    q, r = divmod(a, b)
    return x * q + r, divmod(7.5, 2)


@case((randn(3), 3), (randn(3), 5))
def pow_builtin(x, n):
    return x * pow(2, n), pow(n, 2, 7), pow(2.0, -1)


@case((randn(3), "12"), (randn(3), "7"))
def int_from_string(x, s):
    return x * int(s), int("ff", 16)


@case((randn(3), 2.9), (randn(3), -2.9))
def int_of_float_truncates(x, v):
    return x * int(v), float(int(v))


@case((randn(3), "0.5"), (randn(3), "2e-1"))
def float_from_string(x, s):
    return x * float(s)


@case((randn(3), 0), (randn(3), 3))
def bool_conversions(x, n):
    return x * bool(n), bool([]), bool("a"), bool(0.0)


@case((randn(3), 3), (randn(3), 42))
def str_of_int_and_len(x, n):
    s = str(n)
    return x * len(s), s + "!"


@case((randn(3), 2.5), (randn(3), 1e-3))
def str_and_repr_of_float(x, v):
    return str(v), repr(v), x


@case((randn(3), None), (randn(3), 1))
def identity_with_is(x, v):
    a = [1]
    b = a
    return x * (a is b), v is None, v is not None


@case((randn(3), "a"), (randn(3), "b"))
def hash_of_constants(x, k):
    table = {hash(("a", 1)): 1.0, hash(("b", 1)): 2.0}
    return x * table[hash((k, 1))], hash(7) == 7


@case((randn(3), 2), (randn(3), 2.5), (randn(3), "s"))
def isinstance_with_tuple(x, v):
    if isinstance(v, (int, float)):
        return x * v
    return x


@case((randn(3), True), (randn(3), 1))
def isinstance_bool_is_int(x, v):
    return x, isinstance(v, int), type(v) is bool


@case((randn(3), "a"), (randn(3), "z"))
def chr_and_ord(x, c):
    return x * (ord(c) - ord("a")), chr(ord(c) + 1)


@case((randn(3), 10), (randn(3), 255))
def hex_bin_oct_format(x, n):
    return hex(n), bin(n), oct(n), format(n, "04d"), x * n


@case((randn(3), [3.0, 1.0]), (randn(3), [2.0]))
def len_of_various(x, vals):
    return x * (len(vals) + len("abc") + len({1: 2}) + len(range(4)) + len(x))


@case((randn(3), "Hello World"), (randn(3), "a b c d"))
def str_methods(x, s):
    words = s.lower().split()
    return x * len(words), "_".join(words), s.upper(), s.count("o")


@case((randn(3), "layer.0.weight"), (randn(3), "bias"))
def str_partition_and_strip(x, key):
    head, sep, tail = key.partition(".")
    return x * len(head), sep, tail, "  pad ".strip()


@case((randn(3), 3), (randn(3), 12))
def str_format_with_padding(x, n):
    return f"{n:>4}|{n:<4}|{n:^5}|{n:x}", x * n


@case((randn(3), "prefix_a"), (randn(3), "other"))
def str_startswith_endswith(x, s):
    if s.startswith("prefix") or s.endswith("_z"):
        return x * 2
    return x


@case((randn(3), 4), (randn(3), -4))
def sign_via_comparisons(x, n):
    return x * ((n > 0) - (n < 0))


@case((randn(3), [2, 3]), (randn(3), [1]))
def type_of_value(x, v):
    t = type(v)
    return x * len(v), t is list, t.__name__


@case((randn(3), 7), (randn(3), 8))
def int_methods(x, n):
    return x * n.bit_length(), (n).to_bytes(2, "little"), int.from_bytes(b"\x01\x00", "little")


@case((randn(3), 2.5), (randn(3), 3.0))
def float_methods(x, v):
    return x * v.is_integer(), v.as_integer_ratio(), float.fromhex("0x1p-1")


@case((randn(3), 3), (randn(3), 5))
def builtin_min_max_mixed(x, n):
    return x.clamp(min(-1.0, -n / 10), max(1, n // 2))


@case((randn(3), 2), (randn(3), 4))
def builtin_sum_of_generator_ints(x, n):
    return x + sum(i * i for i in range(n))


@case((randn(3), 1), (randn(3), 0))
def ternary_with_builtins(x, n):
    f = abs if n else round
    return x * f(-2.4)


@case((randn(3), 3), (randn(3), 6))
def all_any_on_range(x, n):
    return x * all(i < 5 for i in range(n)), any(range(0))


@case((randn(3), [0.5, 1.5]), (randn(3), [2.0]))
def iter_over_reversed_and_sorted(x, ws):
    out = x
    for w in sorted(reversed(ws)):
        out = out * w
    return out


@case((randn(3), "3"), (randn(3), "x3"))
def str_isdigit(x, s):
    return x * (int(s) if s.isdigit() else 1)


@case((randn(3), 65), (randn(3), 97))
def ascii_and_ord_roundtrip(x, code):
    return x * ord(chr(code)), ascii("é"), chr(code)


@case((randn(3), 5), (randn(3), 6))
def object_identity_of_small_ints(x, n):
    a = n
    b = a
    return x * (a is b), n == 5
