"""Tensor attributes and queries: dtype, device, shape, ndim, size(d), numel, stride,
is_contiguous, element_size, ndimension, is_complex, is_floating_point, __class__,
requires_grad, item/int/float, tolist, torch._check, numpy()."""
import torch

from corpus.registry import case, randint, randn


def _grad(*shape):
    return lambda: torch.randn(*shape, requires_grad=True)


@case((randn(3),), (randn(3, dtype=torch.float64),))
def dtype_read(x):
    return x.dtype, x * 2 if x.dtype == torch.float32 else x * 3


@case((randn(3),), (randint(5, 3),))
def dtype_properties(x):
    d = x.dtype
    return d.is_floating_point, d.is_signed, d.itemsize, x + 1


@case((randn(3),), (randn(2, 2),))
def device_read(x):
    if x.device.type == "cpu":
        return x * 2, x.device, str(x.device)
    return x


@case((randn(3, 4),), (randn(5, 2),))
def shape_unpack(x):
    n, m = x.shape
    return x.reshape(m, n), n * m


@case((randn(3),), (randn(2, 3),), (randn(2, 3, 4),))
def ndim_read(x):
    return x.sum(tuple(range(1, x.ndim))) if x.ndim > 1 else x, x.ndim


@case((randn(3, 4),), (randn(6, 5),))
def size_of_dim(x):
    return x.view(x.size(0) * x.size(-1)), x.size(1), x.size()


@case((randn(3, 4),), (randn(2, 2),))
def numel_read(x):
    return x.reshape(x.numel()) / x.numel()


@case((randn(3, 4),), (randn(5, 6),))
def stride_read(x):
    t = x.t()
    return t.stride(), t.is_contiguous(), x.stride(0)


@case((randn(3, 4),), (randn(4, 4),))
def contiguous_if_needed(x):
    t = x.t()
    if not t.is_contiguous():
        t = t.contiguous()
    return t.view(-1)


@case((randn(3),), (randn(3, dtype=torch.float64),), (randint(5, 3, dtype=torch.int16),))
def element_size_read(x):
    return x.element_size(), x.numel() * x.element_size()


@case((randn(3),), (randn(2, 2),))
def ndimension_and_dim(x):
    return x.ndimension() + x.dim(), x


@case((randn(3),), (lambda: torch.randn(3, dtype=torch.complex64),))
def is_complex_branch(x):
    if x.is_complex():
        return x.real + x.imag
    return x


@case((randn(3),), (randint(7, 3),))
def is_floating_point_branch(x):
    if x.is_floating_point():
        return x.round()
    return x.float() / 2


@case((randn(3),), (randn(5),))
def class_of_tensor(x):
    return x.__class__ is torch.Tensor, type(x).__name__, x * 2


@case((_grad(3),), (randn(3),))
def requires_grad_read(x):
    return x * 2, x.requires_grad


@case((randn(3),), (randn(4),))
def requires_grad_set_on_local(x):
    w = torch.ones_like(x).requires_grad_()
    y = (x * w).sum()
    return y, y.requires_grad


@case((randn(3),), (randn(4),))
def item_of_sum(x):
    s = x.sum().item()
    return x - s, type(s).__name__


@case((randint(10, 3),), (randint(10, 5),))
def int_of_tensor(x):
    n = int(x.max())
    return x * n, n


@case((randn(3),), (randn(2),))
def float_of_tensor(x):
    v = float(x.mean())
    return x / (abs(v) + 1)


@case((randn(3),), (randn(2, 2),))
def tolist_of_tensor(x):
    return x.tolist(), x * 2


@case((randn(3), 2), (randn(5), 4))
def torch_check_passes(x, k):
    torch._check(k <= x.shape[0], lambda: "k too big")
    return x[:k]


@case((randn(3),), (randn(4),))
def numpy_of_tensor(x):
    a = x.numpy()
    return a * 2, x + 1


@case((randn(3, 4),), (randn(2, 8),))
def shape_arithmetic_view(x):
    b, n = x.shape
    half = n // 2
    return x.view(b, 2, half).mean(1)


@case((randn(2, 3),), (randn(4, 3),))
def shape_equality_with_tuple(x):
    return x.shape == (2, 3), x.shape[1:] == torch.Size([3]), x.sum()


@case((randn(2, 3),), (randn(3, 4),))
def torch_size_ops(x):
    s = x.shape
    return torch.Size([s[1], s[0]]), s.numel(), len(s), x.new_empty(s).shape


@case((randn(3),), (randn(5),))
def data_ptr_free_storage_query(x):
    y = x.view(-1)
    return y._base is x, x.is_leaf, y


@case((randn(3),), (randn(3, dtype=torch.float64),))
def dtype_promotion_result(x):
    y = x + torch.ones(3, dtype=torch.float16)
    return y.dtype, y


@case((randn(2, 3),), (randn(2, 5),))
def tensor_T_and_mT(x):
    return x.T, x.mT.shape, x.H if x.is_complex() else x.t()


@case((randn(3),), (randn(4),))
def real_imag_of_real(x):
    return x.real, x.abs().sqrt()


@case((randn(3, 4),), (randn(5, 1),))
def size_with_negative_dim(x):
    return x.size(-1), x.shape[-2], x.expand(x.size(0), 4)


@case((randn(3),), (randn(6),))
def nbytes_and_itemsize(x):
    return x.nbytes, x.itemsize, x * 0


@case((randn(3),), (randn(4),))
def is_grad_enabled_read(x):
    return x * (2 if torch.is_grad_enabled() else 3)


@case((_grad(3),), (_grad(4),))
def grad_fn_present(x):
    y = x * 2
    return y, y.grad_fn is not None, x.grad_fn is None


@case((randn(2, 3),), (randn(4, 3),))
def dim_order_queries(x):
    return x.is_contiguous(memory_format=torch.contiguous_format), x.storage_offset(), x[1:].storage_offset()


@case((randn(3),), (randint(4, 3),))
def dtype_to_string(x):
    return str(x.dtype), repr(x.dtype), x.dtype in (torch.float32, torch.float64)


@case((randn(3),), (randn(4, 2),))
def default_dtype_read(x):
    return torch.get_default_dtype(), x.to(torch.get_default_dtype())


@case((randn(3),), (randn(5),))
def is_tensor_check(x):
    return torch.is_tensor(x), torch.is_floating_point(x), isinstance(x, torch.Tensor), x.sin()


@case((randn(2, 2),), (randn(3, 3),))
def shape_in_fstring(x):
    return f"shape={tuple(x.shape)}", x
