"""Branches and while loops: if/elif on ints, bools, None, strings, dtypes and shapes;
while loops with counters, break, continue and else; branches on tensor values."""
import torch

from corpus.registry import case, randint, randn


@case((randn(3), 0), (randn(3), 1), (randn(3), 5))
def if_elif_else_on_int(x, n):
    if n == 0:
        return x
    elif n == 1:
        return x * 2
    else:
        return x ** 2


@case((randn(3), True), (randn(3), False))
def if_on_bool_flag(x, training):
    if training:
        return torch.nn.functional.dropout(x, 0.0, True)
    return x * 0.5


@case((randn(3), None), (randn(3), randn(3)))
def if_optional_bias_is_none(x, bias):
    y = x * 2
    if bias is not None:
        y = y + bias
    return y


@case((randn(3),), (randn(2, 3),), (randn(2, 1, 3),))
def if_on_ndim(x):
    if x.dim() == 1:
        x = x.unsqueeze(0)
    elif x.dim() == 3:
        x = x.squeeze(1)
    return x @ x.t()


@case((randn(4),), (randn(12),))
def if_on_shape_size(x):
    if x.shape[0] > 8:
        return x[:8]
    return torch.cat([x, x.new_zeros(8 - x.shape[0])])


@case((randn(2, 3),), (randn(4, 6),))
def if_on_numel(x):
    if x.numel() % 2 == 0 and x.numel() > 6:
        return x.reshape(2, -1)
    return x.reshape(-1)


@case((randn(3),), (randn(3, dtype=torch.float64),), (randint(5, 3),))
def if_on_dtype(x):
    if x.dtype == torch.float64:
        return x.float()
    if x.dtype.is_floating_point:
        return x * 2
    return x.to(torch.float32) / 2


@case((randn(3), "sum"), (randn(3), "mean"), (randn(3), "none"))
def if_on_string(x, reduction):
    if reduction == "sum":
        return x.sum()
    elif reduction == "mean":
        return x.mean()
    return x


@case((randn(3), "avg"), (randn(3), "max"), (randn(3), "min"))
def if_string_in_tuple(x, pool):
    if pool in ("avg", "mean"):
        return x.mean()
    if pool in {"max"}:
        return x.max()
    return x.min()


@case((randn(3), [1, 2]), (randn(3), [1, 2, 3, 4]))
def if_on_list_length(x, dims):
    if len(dims) > 2:
        return x * dims[-1]
    return x + dims[0]


@case((randn(3), 2, 3), (randn(3), -2, 3), (randn(3), 2, -3), (randn(3), -2, -3))
def nested_ifs(x, a, b):
    if a > 0:
        if b > 0:
            return x * (a + b)
        return x * a
    else:
        if b > 0:
            return x - b
    return -x


@case((randn(3), 1, 0), (randn(3), 0, 0), (randn(3), 0, 4))
def if_with_and_or(x, a, b):
    if a or b:
        y = x + a + b
    else:
        y = x
    if a and not b:
        y = y * 3
    return y


@case((randn(3), 3), (randn(3), 6))
def early_return_in_loop(x, n):
    for i in range(10):
        if i == n:
            return x * i
    return x


@case((randn(3),), (randn(3, 3),))
def if_tensor_sum_positive(x):
    if x.sum() > 0:
        return x * 2
    return -x


@case((randn(4),), (randn(7),))
def if_any_negative(x):
    if (x < 0).any():
        return x.abs()
    return x


@case((randn(3), 4), (randn(3), 7))
def while_counter(x, n):
    i = 0
    y = x
    while i < n:
        y = y * 0.5 + x
        i += 1
    return y


@case((randn(16),), (randn(48),))
def while_halving_shape(x):
    while x.shape[0] > 4:
        x = x[::2] + x[1::2]
    return x


@case((randn(3), 5), (randn(3), 11))
def while_true_with_break(x, n):
    k = 1
    while True:
        k *= 2
        if k > n:
            break
    return x * k


@case((randn(3), 7), (randn(3), 2))
def while_with_continue(x, n):
    i = 0
    acc = x * 0
    while i < n:
        i += 1
        if i % 3 == 0:
            continue
        acc = acc + x * i
    return acc


@case((randn(3), 4, 2), (randn(3), 4, 9))
def while_else(x, n, stop):
    i = 0
    while i < n:
        if i == stop:
            break
        i += 1
    else:
        return x * 100
    return x * i


@case((randn(3), 10), (randn(3), 21))
def while_collatz_steps(x, n):
    steps = 0
    while n != 1:
        n = n // 2 if n % 2 == 0 else 3 * n + 1
        steps += 1
    return x + steps


@case((randn(5),), (randn(3),))
def while_on_tensor_value(x):
    x = x.abs() + 1
    while x.max() > 0.5:
        x = x / 2
    return x


@case((randn(3), 3, 4), (randn(3), 2, 5))
def nested_while(x, n, m):
    i = 0
    acc = 0
    while i < n:
        j = 0
        while j < m:
            acc += i * j
            j += 1
        i += 1
    return x * acc


@case((randn(3), None), (randn(3), 0.5))
def optional_default_resolved(x, p):
    if p is None:
        p = 0.25
    return x * p


@case((randn(3), 0.0), (randn(3), 1.5))
def if_on_float_arg(x, momentum):
    if momentum == 0.0:
        return x
    return x * momentum + 1


@case((randn(2, 3), 1), (randn(2, 3), -1), (randn(2, 3), 0))
def if_on_negative_dim(x, dim):
    if dim < 0:
        dim += x.dim()
    return x.sum(dim)


@case((randn(3), randn(3)), (randn(3), randn(4)))
def if_shapes_equal(x, y):
    if x.shape == y.shape:
        return x + y
    return x.sum() + y.sum()


@case((randn(3, 4),), (randn(4, 4),))
def if_square(x):
    rows, cols = x.shape
    if rows == cols:
        return x.diagonal()
    return x[:, 0]


@case((randn(3),), (lambda: torch.randn(3, requires_grad=True),))
def if_requires_grad(x):
    if x.requires_grad:
        return x.detach() * 2
    return x + 1


@case((randn(3), 1), (randn(3), 2), (randn(3), 3))
def elif_chain_returning_ops(x, kind):
    if kind == 1:
        op = torch.sin
    elif kind == 2:
        op = torch.cos
    else:
        op = torch.exp
    return op(x)


@case((randn(3), 4), (randn(3), 9))
def pass_and_ellipsis(x, n):
    if n > 5:
        pass
    else:
        ...
    return x * n


@case((randn(6),), (randn(10),))
def while_pop_from_list(x):
    chunks = list(x.split(2))
    total = torch.zeros(2)
    while chunks:
        c = chunks.pop()
        if c.shape[0] == 2:
            total = total + c
    return total


@case((randn(3), 1), (randn(3), 3))
def if_bool_of_int(x, n):
    flag = bool(n - 1)
    if flag:
        return x * n
    return x


@case((randn(3), [], [1]), (randn(3), [2, 3], []))
def if_on_empty_list(x, a, b):
    if not a:
        return x + len(b)
    if b:
        return x
    return x * sum(a)
