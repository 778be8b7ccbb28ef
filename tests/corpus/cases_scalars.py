"""Python numbers: int and float arithmetic from shapes, float math, int division and
modulo, comparisons whose bools drive branches, numbers passed as arguments and varied
between calls, numbers returned next to tensors."""
import math

import torch

from corpus.registry import case, randn


@case((randn(3, 4),), (randn(5, 6),))
def shape_product(x):
    n = x.shape[0] * x.shape[1]
    return x.reshape(n) * n


@case((randn(8),), (randn(12),))
def shape_floor_div_and_mod(x):
    n = x.shape[0]
    half, rest = n // 2, n % 5
    return x[:half] * rest, half, rest


@case((randn(8, 3),), (randn(16, 3),))
def shape_true_division(x):
    scale = x.shape[1] / x.shape[0]
    return x * scale, scale


@case((randn(4, 64),), (randn(2, 16),))
def attention_scale_from_shape(x):
    d = x.shape[-1]
    return (x @ x.t()) / math.sqrt(d)


@case((randn(3), 2.0), (randn(3), 0.5))
def float_arg_math(x, t):
    return x * math.exp(-t) + math.log1p(t)


@case((randn(3), 4), (randn(3), 9))
def int_arg_varied_between_calls(x, n):
    return x * n + n * n


@case((randn(3), 7, 2), (randn(3), -7, 2))
def int_floor_division_negative(x, a, b):
    return x * (a // b) + (a % b), a // b, a % b


@case((randn(3), 7.5, 2.0), (randn(3), -7.5, 2.0))
def float_floor_division_and_mod(x, a, b):
    return x * (a // b), a % b


@case((randn(3), 3), (randn(3), 8))
def comparison_bool_in_branch(x, n):
    big = n > 5
    even = n % 2 == 0
    if big and even:
        return x * 2
    if big or even:
        return x * 3
    return x


@case((randn(3), 3), (randn(3), 8))
def bool_arithmetic(x, n):
    return x * ((n > 5) + (n > 2) * 2)


@case((randn(4, 6),), (randn(6, 4),))
def shape_comparison_result_used(x):
    wide = x.shape[1] > x.shape[0]
    return x.t() if wide else x, wide


@case((randn(3), 0.1), (randn(3), 0.7))
def float_accumulation_loop(x, lr):
    w = 1.0
    for _ in range(5):
        w = w * (1 - lr)
    return x * w, w


@case((randn(3), 3), (randn(3), 10))
def int_pow_and_float_pow(x, n):
    return x * (2 ** n) + n ** 0.5, 2 ** -1


@case((randn(3), 1e-6), (randn(3), 1e-2))
def eps_in_denominator(x, eps):
    return x / (x.abs().sum() + eps)


@case((randn(6),), (randn(10),))
def shape_to_float(x):
    return x * float(x.shape[0]), x.numel() / 2


@case((randn(3), 5), (randn(3), 2))
def int_to_float_conversion(x, n):
    f = float(n)
    return x * f, f / 2


@case((randn(3), 3.7), (randn(3), -3.7))
def float_to_int_conversion(x, v):
    k = int(v)
    return x * k, k, math.trunc(v), math.floor(v)


@case((randn(3), 2.0, 3), (randn(3), 0.5, 1))
def mixed_int_float_ops(x, f, n):
    return x * (f * n + n / f - f // 1)


@case((randn(12),), (randn(20),))
def shapes_for_chunking(x):
    n = x.shape[0]
    k = 4
    per = (n + k - 1) // k
    return [x[i * per:(i + 1) * per].sum() for i in range(k)]


@case((randn(3), 10, 3), (randn(3), 11, 4))
def ceil_division(x, n, k):
    return x * -(-n // k), math.ceil(n / k)


@case((randn(4, 4), 0.5), (randn(4, 4), 2.0))
def scalar_times_shape(x, s):
    n = int(x.shape[0] * s)
    return torch.zeros(n) + x.sum()


@case((randn(3), 1), (randn(3), 2))
def return_python_numbers(x, n):
    return n * 2, n / 4, n > 1, x


@case((randn(3), 4.0), (randn(3), 9.0))
def math_sqrt_and_pi(x, v):
    return x * math.sqrt(v) * math.pi


@case((randn(2, 8),), (randn(3, 4),))
def shape_as_python_list_of_ints(x):
    dims = list(x.shape)
    dims[-1] = dims[-1] // 2
    return x.reshape(*dims, 2), dims


@case((randn(3), 0), (randn(3), 1), (randn(3), 2))
def special_ints_zero_and_one(x, n):
    return x * n + n


@case((randn(3), 3), (randn(3), 4))
def max_min_on_ints(x, n):
    return x[: max(1, min(n, 3))]


@case((randn(5, 3),), (randn(2, 3),))
def shape_in_range_loop(x):
    total = x[0] * 0
    for i in range(x.shape[0]):
        total = total + x[i] * i
    return total


@case((randn(3), 2.5), (randn(3), 3.5))
def round_half_even(x, v):
    return x * round(v), round(v)


@case((randn(3), 1e20), (randn(3), 1e-20))
def extreme_floats(x, v):
    return x * (v * v > 1), v * 2


@case((randn(3), 2 ** 40), (randn(3), 3))
def big_int(x, n):
    return x * (n % 7), n * n


@case((randn(3), -0.0), (randn(3), 0.0))
def signed_zero(x, z):
    return x * math.copysign(1.0, z)


@case((randn(3), float("nan")), (randn(3), 1.0))
def nan_argument(x, v):
    if v != v:
        return x
    return x * v


@case((randn(3), 3), (randn(3), 6))
def int_bit_ops_from_args(x, n):
    return x * (n & 1) + (n >> 1), n ^ 5


@case((randn(4, 8),), (randn(2, 6),))
def head_dim_from_shapes(x):
    heads = 2
    b, c = x.shape
    return x.view(b, heads, c // heads).transpose(0, 1)


@case((randn(3), 3, 4), (randn(3), 5, 5))
def comparison_chain_on_args(x, a, b):
    return x * (a < b), a <= b, a != b, a == b


@case((randn(3), 1.5), (randn(3), 2.5))
def float_compare_to_int(x, v):
    if v > 2:
        return x * 2
    return x / v


@case((randn(3), 3), (randn(3), 3.0))
def int_vs_float_equal(x, v):
    return x * v, type(v) is int, v == 3


@case((randn(7),), (randn(9),))
def symbolic_size_arithmetic_chain(x):
    n = x.shape[0]
    m = (n * 3 + 1) // 2 - n % 3
    return x.new_ones(m), m


@case((randn(3), 2), (randn(3), 4))
def sum_of_range_of_arg(x, n):
    return x * sum(range(n)), sum(range(n))


@case((randn(3), 0.3), (randn(3), 0.9))
def lerp_with_python_float(x, w):
    return torch.lerp(x, torch.ones_like(x), w)


@case((randn(3), 1, 2.0), (randn(3), 3, 4.0))
def scalar_tensor_ops(x, n, f):
    return torch.full((n,), f) + x[:1], x.add(n, alpha=f)


@case((randn(3), 2 ** 70), (randn(3), 12345))
def int_beyond_int64(x, seed):
    return x * (seed % 1000), seed // 7


@case((randn(3), True), (randn(3), False))
def bool_argument_times_tensor(x, flag):
    return x * flag + (not flag)


@case((randn(0),), (randn(3),), (randn(1),))
def empty_then_nonempty(x):
    if x.numel() == 0:
        return x.sum(), 0
    return x.mean(), x.shape[0]


@case((randn(1), randn(4)), (randn(4), randn(4)), (randn(4), randn(1)))
def size_one_broadcast(x, y):
    return x + y, (x * y).shape[0]


@case((randn(3), float("inf")), (randn(3), float("-inf")), (randn(3), 1e308))
def infinite_float_args(x, v):
    return x.clamp(max=v), v > 0, 1.0 / v
