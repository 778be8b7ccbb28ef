"""Reductions and normalizations through framejit against eager."""
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import framejit
from _opcheck import check

X = torch.randn(4, 6, 5)
REDUCE = {
    "sum_all": lambda x: x.sum(),
    "sum_dim": lambda x: torch.sum(x, 1),
    "sum_tuple_keep": lambda x: x.sum(dim=(0, 2), keepdim=True),
    "sum_neg": lambda x: x.sum(-1),
    "sum_dtype": lambda x: x.sum(1, dtype=torch.float64),
    "sum_int": lambda x: (x > 0).sum(1),
    "mean_all": lambda x: x.mean(),
    "mean_dims": lambda x: torch.mean(x, (1, 2), keepdim=True),
    "mean_dtype": lambda x: x.mean(0, dtype=torch.float64),
    "prod": lambda x: x.prod(2),
    "prod_all": lambda x: torch.prod(x[0, 0]),
    "amax": lambda x: x.amax(1),
    "amin_tuple": lambda x: torch.amin(x, (0, 1)),
    "max_all": lambda x: x.max(),
    "min_all": lambda x: torch.min(x),
    "max_dim": lambda x: x.max(1),
    "min_dim_keep": lambda x: torch.min(x, dim=2, keepdim=True),
    "max_values": lambda x: x.max(dim=-1).values * 2,
    "max_unpack": lambda x: (lambda v_i: v_i[0] + v_i[1])(x.max(0)),
    "max_other": lambda x: torch.max(x, x * 0.5),
    "argmax": lambda x: x.argmax(1),
    "argmin_all": lambda x: torch.argmin(x),
    "argmax_keep": lambda x: x.argmax(dim=0, keepdim=True),
    "var": lambda x: x.var(),
    "var_dim": lambda x: torch.var(x, 1),
    "var_unbiased_false": lambda x: x.var(1, unbiased=False),
    "var_correction": lambda x: torch.var(x, dim=(0, 2), correction=0, keepdim=True),
    "std": lambda x: x.std(),
    "std_dim": lambda x: torch.std(x, -1, keepdim=True),
    "norm": lambda x: x.norm(),
    "norm_fro": lambda x: torch.norm(x, p="fro"),
    "norm_dim": lambda x: x.norm(dim=1),
    "norm_1": lambda x: x.norm(p=1, dim=-1),
    "logsumexp": lambda x: torch.logsumexp(x, 1),
    "logsumexp_keep": lambda x: x.logsumexp(dim=(1, 2), keepdim=True),
    "any": lambda x: (x > 1).any(),
    "all_dim": lambda x: torch.all(x > -1, dim=1),
    "any_keep": lambda x: (x > 1).any(2, keepdim=True),
    "softmax": lambda x: torch.softmax(x, 1),
    "softmax_F": lambda x: F.softmax(x, dim=-1),
    "softmax_method": lambda x: x.softmax(0),
    "softmax_dtype": lambda x: F.softmax(x, dim=1, dtype=torch.float64),
    "log_softmax": lambda x: torch.log_softmax(x, -1),
    "log_softmax_F": lambda x: F.log_softmax(x, 1),
    "log_softmax_method": lambda x: x.log_softmax(dim=2),
    "layer_norm": lambda x: F.layer_norm(x, (5,)),
    "layer_norm_2d": lambda x: F.layer_norm(x, x.shape[1:], eps=1e-3),
    "gelu_tanh": lambda x: F.gelu(x.sum(1), approximate="tanh"),
}


@pytest.mark.parametrize("name", sorted(REDUCE))
def test_reduce(name):
    fn = REDUCE[name]
    check(lambda x: fn(x), X)


def test_int_reductions_exact():
    x = torch.randint(-5, 5, (3, 7))
    check(lambda x: (x.sum(1), x.prod(0), x.amax(), x.argmin(1), x.max(1)), x)


def test_layer_norm_weight_bias():
    w, b = torch.randn(5), torch.randn(5)
    check(lambda x, w, b: F.layer_norm(x, (5,), w, b), X, w, b)


def test_layer_norm_module():
    ln = nn.LayerNorm(5).requires_grad_(False)
    ln.weight.normal_()
    ln.bias.normal_()

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln = ln

        def forward(self, x):
            return self.ln(x)

    m = M()
    cm = framejit.compile(m)
    torch.testing.assert_close(cm(X), m(X), rtol=1e-5, atol=1e-5)
    s = framejit.stats(M.forward)
    assert s["fallbacks"] == 0 and s["graphs"] == 1, framejit.fallbacks(M.forward)
    assert "aten.sum.dim_IntList" in framejit.explain(M.forward, m, X).graphs[0]


def test_softmax_dynamic_one_compile():
    def f(x):
        return torch.softmax(x, -1).sum(0)

    cf = framejit.compile(f)
    for n in (3, 5, 9):
        x = torch.randn(n, n + 1)
        torch.testing.assert_close(cf(x), f(x), rtol=1e-5, atol=1e-6)
    s = framejit.stats(f)
    assert s["compiles"] == 1 and s["fallbacks"] == 0, s


def test_mean_of_int_falls_back_with_eager_error():
    def f(x):
        return x.mean()

    cf = framejit.compile(f)
    with pytest.raises(RuntimeError):
        cf(torch.arange(4))
    assert framejit.stats(f)["fallbacks"] == 1


STASHED = {
    # exp(x - max) feeds the row sum and the output: the sum's loop keeps it in the
    # output buffer and the output loop reads it back.
    "softmax_rows": lambda x: torch.softmax(x, -1),
    "softmax_two_dims": lambda x: (lambda e: e / e.sum((1, 2), keepdim=True))((x - x.amax((1, 2), keepdim=True)).exp()),
    "scaled_and_shifted": lambda x: (lambda e: 3 * e / e.sum(-1, keepdim=True) - e)(torch.tanh(x) + 2),
    "sigmoid_times_its_sum": lambda x: (lambda s: s * s.sum(-1, keepdim=True))(x.sigmoid()),
    "exp_over_its_max": lambda x: (lambda e: e / e.amax(-1, keepdim=True))(x.exp()),
}


@pytest.mark.parametrize("name", STASHED)
@pytest.mark.parametrize("shape", [(3, 4, 5), (64, 8, 300), (1, 1, 1), (0, 2, 3)])
def test_reduction_operand_kept_in_output(name, shape):
    fn = STASHED[name]
    x = torch.randn(*shape) * 4
    check(fn, x)
    check(fn, x.transpose(0, 2).contiguous().transpose(0, 2))  # strided input


# A 0-d tensor reduces as its one element (dim 0 and -1 name it), as eager's.
ZERO_DIM = {
    "sum": lambda x: x.sum(), "sum_dim": lambda x: x.sum(0), "sum_keepdim": lambda x: x.sum(-1, keepdim=True),
    "sum_bool": lambda x: (x > 0).sum(), "mean": lambda x: x.mean(), "mean_dim": lambda x: torch.mean(x, dim=0),
    "amax": lambda x: x.amax(), "max_dim": lambda x: x.max(0).values, "argmax": lambda x: x.argmax(),
    "argmin_dim": lambda x: x.argmin(0), "any": lambda x: x.any(), "all_dim": lambda x: x.all(0),
    "prod": lambda x: x.prod(), "logsumexp": lambda x: torch.logsumexp(x, 0), "softmax": lambda x: torch.softmax(x, 0),
}


@pytest.mark.parametrize("name", list(ZERO_DIM))
@pytest.mark.parametrize("value", [2.5, -1.0])
def test_reductions_of_a_zero_dim_tensor(name, value):
    check(ZERO_DIM[name], torch.tensor(value))


def test_reduction_of_a_zero_dim_tensor_over_a_bad_dim_raises_as_eager():
    def f(x):
        return x.sum(1)
    with pytest.raises(IndexError, match=r"Dimension out of range \(expected to be in range of \[-1, 0\], but got 1\)"):
        framejit.compile(f)(torch.tensor(1.0))
