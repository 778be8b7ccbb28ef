"""numpy at the edges: numpy scalars as arguments, np.finfo/np.iinfo/np.dtype read in
the function, numpy arrays turned into tensors with torch.from_numpy, numpy math on
Python numbers."""
import numpy as np
import torch

from corpus.registry import case, randn


@case((randn(3), np.float64(2.5)), (randn(3), np.float64(-0.5)))
def numpy_float64_scalar_arg(x, s):
    return x * s


@case((randn(3), np.int64(3)), (randn(3), np.int64(5)))
def numpy_int64_scalar_arg(x, n):
    return x * n, x[: int(n) % 3 + 1]


@case((randn(3), np.float32(0.25)), (randn(3), np.float32(4.0)))
def numpy_float32_scalar_arg(x, s):
    return x + float(s)


@case((randn(3), np.int64(2)), (randn(3), np.int64(7)))
def numpy_int_in_range(x, n):
    acc = x
    for _ in range(n):
        acc = acc * 0.5
    return acc


@case((randn(3), np.float64(1.5)), (randn(3), np.float64(3.0)))
def numpy_scalar_in_branch(x, s):
    if s > 2:
        return x * 2
    return x - s


@case((randn(3),), (randn(3, dtype=torch.float64),))
def finfo_eps(x):
    eps = np.finfo(np.float32).eps
    return x.clamp(min=float(eps)), float(np.finfo(np.float64).max) > 1e300


@case((randn(3),), (randn(5),))
def iinfo_bounds(x):
    info = np.iinfo(np.int32)
    return x.clamp(float(info.min), float(info.max)), int(info.bits)


@case((randn(3), "float32"), (randn(3), "float64"))
def numpy_dtype_by_name(x, name):
    dt = np.dtype(name)
    return dt.itemsize, x * dt.itemsize, dt.kind


@case((lambda: np.arange(6.0).reshape(2, 3),), (lambda: np.linspace(0, 1, 8).reshape(2, 4),))
def from_numpy_argument(a):
    t = torch.from_numpy(a)
    return t * 2, t.dtype


@case((randn(3), 3), (randn(4), 5))
def from_numpy_inside(x, n):
    a = np.arange(n, dtype=np.float32)
    return x.sum() + torch.from_numpy(a)


@case((randn(3), [1.0, 2.0]), (randn(3), [3.0, 4.0, 5.0]))
def numpy_array_of_list_to_tensor(x, vals):
    arr = np.asarray(vals, dtype=np.float32)
    return torch.as_tensor(arr) + x.mean()


@case((randn(3), 16), (randn(3), 25))
def numpy_math_on_python_numbers(x, n):
    return x * float(np.sqrt(n)), float(np.log2(n))


@case((randn(3), 2.0), (randn(3), 0.0))
def numpy_clip_scalar(x, v):
    return x * float(np.clip(v, 0.5, 1.5))


@case((lambda: np.array([1, 2, 3], dtype=np.int64),), (lambda: np.array([4, 5], dtype=np.int64),))
def torch_tensor_of_numpy_array(a):
    t = torch.tensor(a)
    a[0] = 100  # the tensor copied the array
    return t, a


@case((lambda: np.ones((2, 2), dtype=np.float32),), (lambda: np.zeros((3, 1), dtype=np.float32),))
def from_numpy_shares_memory(a):
    t = torch.from_numpy(a)
    t.add_(1)
    return a, t


@case((randn(3),), (randn(4),))
def numpy_pi_and_e(x):
    return x * np.pi + np.e


@case((randn(3), np.bool_(True)), (randn(3), np.bool_(False)))
def numpy_bool_scalar_arg(x, flag):
    if flag:
        return x * 2
    return x


@case((randn(3), np.float64(2.0)), (randn(3), np.float64(0.5)))
def numpy_scalar_times_python(x, s):
    k = s * 3 + 1
    return x * k, type(k).__name__


@case((randn(4),), (randn(6),))
def tensor_numpy_roundtrip(x):
    a = x.numpy()
    return torch.from_numpy(a * 2) + x


@case((randn(3), np.int32(3)), (randn(3), np.int32(4)))
def numpy_int32_as_size(x, n):
    return x.new_zeros(int(n)), torch.ones(int(n)) * x.sum()


@case((randn(2, 3), "float64"), (randn(2, 3), "int32"))
def numpy_dtype_to_torch_dtype(x, name):
    table = {np.dtype("float64"): torch.float64, np.dtype("int32"): torch.int32}
    return x.to(table[np.dtype(name)])


@case((randn(3), np.float64(1e-8)), (randn(3), np.float64(0.1)))
def numpy_isclose_on_scalars(x, eps):
    if np.isclose(eps, 0.0, atol=1e-6):
        return x
    return x + eps


@case((lambda: np.random.rand(3).astype(np.float32),), (lambda: np.random.rand(5).astype(np.float32),))
def seeded_numpy_input(a):
    return torch.from_numpy(a).exp()


@case((randn(3), (np.int64(2), np.int64(3))), (randn(3), (np.int64(1), np.int64(4))))
def numpy_ints_as_shape(x, shape):
    return torch.zeros(tuple(int(s) for s in shape)) + x.sum()


@case((randn(3),), (randn(2, 2),))
def numpy_dtype_equality(x):
    a = np.zeros(2, dtype=np.float32)
    return a.dtype == np.float32, x * a.size


@case((randn(3), np.float64(0.5)), (randn(3), np.float64(1.5)))
def numpy_scalar_to_torch_tensor(x, s):
    return x * torch.tensor(s), torch.tensor(s).dtype


@case((randn(3), np.int64(4)), (randn(3), np.int64(6)))
def numpy_int_in_shape_arith(x, n):
    return x.repeat(int(n) // 2), int(n) % 4


@case((randn(2, 3),), (randn(3, 3),))
def numpy_shape_of_tensor_numpy(x):
    a = x.detach().numpy()
    return a.shape, a.dtype.name, x * a.ndim


@case((randn(3), [1, 2]), (randn(3), [3, 4, 5]))
def numpy_sum_of_python_list(x, vals):
    return x * int(np.sum(vals)), float(np.mean(vals))


@case((randn(3), np.float32(2.0)), (randn(3), np.float32(0.5)))
def numpy_float32_dtype_of_result(x, s):
    return x * float(s), isinstance(s, np.floating)
