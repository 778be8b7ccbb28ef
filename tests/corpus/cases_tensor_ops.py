"""Tensor methods and torch functions as user code calls them: clone, to, type_as,
new_zeros/new_ones/new_full, bound methods stored in variables, keyword arguments,
torch.tensor from numbers, where, cat/stack, activations, indexing, in-place ops,
reductions, random numbers after manual_seed."""
import torch
import torch.nn.functional as F

from corpus.registry import case, randint, randn


@case((randn(3),), (randn(5),))
def clone_then_inplace(x):
    y = x.clone()
    y.add_(1)
    return x, y


@case((randn(3),), (randn(2, 2),))
def to_dtype(x):
    return x.to(torch.float64), x.to(dtype=torch.int32), x.double().half().float()


@case((randn(3), randint(5, 3)), (randn(4), randint(5, 4)))
def type_as_other(x, i):
    return i.type_as(x) + x, x.type_as(i)


@case((randn(3), 4), (randn(2), 2))
def new_zeros_ones_full(x, n):
    return x.new_zeros(n), x.new_ones((n, 2)), x.new_full((n,), 7.5), x.new_tensor([1.0, 2.0])


@case((randn(3),), (randn(4),))
def bound_method_in_variable(x):
    f = x.sub
    g = x.mul
    return f(1), g(2), f(other=x)


@case((randn(3, 4),), (randn(2, 5),))
def keyword_args_to_torch_functions(x):
    return torch.sum(x, dim=1, keepdim=True), torch.mean(x, dim=(0, 1)), torch.std(x, dim=0, unbiased=False)


@case((1.5, 2), (-0.5, 7))
def torch_tensor_from_numbers(a, n):
    return torch.tensor([a, a * 2, n]), torch.tensor(n), torch.tensor([[n, 1], [2, n]])


@case((randn(3), 2.0), (randn(4), -1.0))
def torch_tensor_of_float_arg(x, s):
    return x * torch.tensor(s)


@case((randn(4),), (randn(6),))
def torch_where(x):
    return torch.where(x > 0, x, x * 0.1), torch.where(x > 0, 1.0, -1.0)


@case((randn(2, 3), randn(2, 3)), (randn(4, 3), randn(1, 3)))
def cat_and_stack(x, y):
    c = torch.cat([x, y], dim=0)
    s = torch.stack([x[0], y[0]], dim=1)
    return c, s


@case((randn(3, 4),), (randn(2, 6),))
def functional_activations(x):
    return F.relu(x), F.gelu(x), F.silu(x), F.softmax(x, dim=-1), F.leaky_relu(x, 0.2)


@case((randn(3, 4),), (randn(5, 4),))
def functional_with_kwargs(x):
    return F.log_softmax(x, dim=1), F.normalize(x, p=2.0, dim=1), F.pad(x, (1, 1), value=0.5)


@case((randn(3, 4),), (randn(2, 4),))
def layer_norm_functional(x):
    w = torch.ones(4) * 2
    return F.layer_norm(x, (4,), weight=w, bias=None, eps=1e-5)


@case((randn(3),), (randn(5),))
def manual_seed_then_rand(x):
    torch.manual_seed(42)
    noise = torch.rand(x.shape)
    return x + noise, torch.randn(2)


@case((randn(4, 4),), (randn(8, 4),))
def manual_seed_then_dropout(x):
    torch.manual_seed(3)
    return F.dropout(x, p=0.5, training=True)


@case((randn(3),), (randn(6),))
def generator_object_seeded(x):
    g = torch.Generator().manual_seed(11)
    return x + torch.rand(x.shape, generator=g)


@case((randn(5),), (randn(8),))
def inplace_ops_chain(x):
    y = x.clone()
    y.mul_(2).add_(1).clamp_(min=0)
    return y


@case((randn(4),), (randn(6),))
def inplace_on_argument(x):
    x.add_(1)
    return x * 2


@case((randn(4, 3), 1), (randn(6, 3), 3))
def indexing_and_slicing(x, i):
    return x[i], x[:, 1], x[1:i + 1], x[..., -1], x[None, i]


@case((randn(5), randint(5, 3)), (randn(7), randint(7, 4)))
def index_with_tensor(x, idx):
    return x[idx], x.index_select(0, idx), x.gather(0, idx)


@case((randn(6),), (randn(4),))
def boolean_mask_index(x):
    return x[x > 0]


@case((randn(4),), (randn(5),))
def setitem_on_clone(x):
    y = x.clone()
    y[0] = 10.0
    y[1:3] = y[1:3] * 2
    return y


@case((randn(3, 4),), (randn(2, 6),))
def reductions(x):
    return x.sum(), x.amax(1), x.argmax(1), x.min(dim=0).values, x.norm()


@case((randn(3, 4),), (randn(4, 2),))
def max_with_dim_returns_pair(x):
    vals, idx = x.max(dim=1)
    return vals, idx, torch.max(x, 0)[1]


@case((randn(3, 4), randn(4, 2)), (randn(2, 3), randn(3, 5)))
def matmul_forms(a, b):
    return a @ b, torch.mm(a, b), a.matmul(b), torch.einsum("ij,jk->ik", a, b)


@case((randn(2, 3, 4),), (randn(3, 2, 2),))
def view_and_permute(x):
    return x.permute(2, 0, 1), x.transpose(0, 1).contiguous().view(-1), x.flatten(1), x.unsqueeze(0).squeeze(0)


@case((randn(6),), (randn(9),))
def chunk_and_split(x):
    return x.chunk(3), x.split([1, x.shape[0] - 1])


@case((randn(3), 2.0), (randn(4), 0.5))
def python_scalar_ops_on_tensors(x, s):
    return x + s, s - x, x * s, s / (x.abs() + 1), x ** s if s > 1 else x ** 2, 2 ** x


@case((randn(3), randn(3)), (randn(4), randn(4)))
def comparison_ops(x, y):
    return x > y, x == y, (x >= 0) & (y < 0), torch.eq(x, x).all()


@case((randint(8, 4), randint(8, 4)), (randint(8, 6), randint(8, 6)))
def integer_tensor_ops(a, b):
    return a // (b + 1), a % (b + 1), a & b, a | b, a << 1, a.float() / (b + 1)


@case((randn(3, 3),), (randn(4, 4),))
def creation_like_functions(x):
    return torch.zeros_like(x), torch.ones_like(x, dtype=torch.int64), torch.full_like(x, 3.0), torch.eye(x.shape[0])


@case((4,), (7,))
def creation_from_int(n):
    return torch.arange(n), torch.linspace(0, 1, n), torch.zeros(n, 2), torch.full((n,), n)


@case((randn(3, 4),), (randn(2, 4),))
def cumulative_and_sort(x):
    vals, idx = torch.sort(x, dim=1, descending=True)
    return torch.cumsum(x, 1), vals, idx, x.topk(2, dim=1).values


@case((randn(4),), (randn(7),))
def clamp_forms(x):
    return x.clamp(-0.5, 0.5), torch.clamp(x, min=0), x.clamp(max=0.1)


@case((randn(4),), (randn(6),))
def masked_fill_and_where_scalar(x):
    return x.masked_fill(x < 0, float("-inf")).softmax(0)


@case((randn(3, 4),), (randn(5, 4),))
def expand_and_broadcast(x):
    b = torch.arange(4.0)
    return x + b, b.expand(x.shape[0], 4), torch.broadcast_tensors(x, b)[1]


@case((randn(3),), (randn(4),))
def method_via_torch_namespace_and_tensor(x):
    return torch.exp(x) - x.exp(), torch.Tensor.add(x, 1)


@case((lambda: torch.randn(3, requires_grad=True),), (lambda: torch.randn(5, requires_grad=True),))
def backward_inside(x):
    y = (x * x).sum()
    y.backward()
    return y.detach(), x.grad


@case((randn(4, 4),), (randn(6, 4),))
def repeat_and_tile(x):
    return x.repeat(2, 1), x.tile((1, 2)), x.repeat_interleave(2, dim=0)


@case((randn(4),), (randn(3),))
def nan_and_inf_handling(x):
    y = x / 0.0
    return torch.nan_to_num(y, posinf=1.0, neginf=-1.0), torch.isnan(y).any(), torch.isinf(y).sum()
