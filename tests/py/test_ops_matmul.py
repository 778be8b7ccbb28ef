"""The matmul family, linear layers and a transformer-style block through framejit."""
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import framejit
from _opcheck import check

A = torch.randn(5, 7)
B = torch.randn(7, 3)
MATMUL = {
    "at": (lambda a, b: a @ b, A, B),
    "matmul": (lambda a, b: torch.matmul(a, b), A, B),
    "method": (lambda a, b: a.matmul(b) + 1, A, B),
    "mm": (lambda a, b: torch.mm(a, b), A, B),
    "vec_mat": (lambda a, b: a[0] @ b, A, B),
    "mat_vec": (lambda a, b: a @ b[:, 0], A, B),
    "dot": (lambda a, b: a[0] @ b[:, 1], A, B),
    "batched": (lambda a, b: a @ b, torch.randn(2, 4, 5, 7), torch.randn(4, 7, 3)),
    "bmm": (lambda a, b: torch.bmm(a, b), torch.randn(3, 5, 7), torch.randn(3, 7, 2)),
    "addmm": (lambda a, b: torch.addmm(torch.ones(3), a, b), A, B),
    "addmm_scaled": (lambda a, b: torch.addmm(torch.ones(5, 3), a, b, beta=0.5, alpha=2.0), A, B),
    "linear": (lambda a, b: F.linear(a, b.t()), A, B),
    "linear_bias": (lambda a, b: F.linear(a, b.t(), b[0]), A, B),
    "float64": (lambda a, b: a.double() @ b.double(), A, B),
    # Operands that are views: read in place (no kernel), or copied when a reshape
    # has no strides.
    "expanded_row": (lambda a, b: a @ b[:1].expand(7, 3), A, B),
    "stepped_rows": (lambda a, b: a[:, ::2] @ b[::2], A, B),
    "selected": (lambda a, b: a @ b.unsqueeze(0).expand(2, 7, 3)[1], A, B),
    "transposed_computed": (lambda a, b: a @ (b.t() * 2).t(), A, B),
    "reshaped_transposed": (lambda a, b: a @ b.t().reshape(21).reshape(7, 3), A, B),
}


@pytest.mark.parametrize("name", sorted(MATMUL))
def test_matmul(name):
    fn, a, b = MATMUL[name]
    check(lambda a, b: fn(a, b), a, b)


def test_int_matmul_falls_back():
    def f(a, b):
        return a @ b

    cf = framejit.compile(f)
    a = torch.arange(6).view(2, 3)
    assert torch.equal(cf(a, a.t()), f(a, a.t()))
    assert framejit.stats(f)["fallbacks"] == 1


def test_linear_module_no_grad_params():
    lin = nn.Linear(7, 4).requires_grad_(False)

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = lin

        def forward(self, x):
            return torch.relu(self.lin(x))

    m = M()
    cm = framejit.compile(m)
    for n in (3, 8):
        x = torch.randn(n, 7)
        torch.testing.assert_close(cm(x), m(x))
    s = framejit.stats(M.forward)
    assert s["fallbacks"] == 0 and s["compiles"] == 1, framejit.fallbacks(M.forward)


def test_requires_grad_params_of_a_closure_module_compile():
    lin = nn.Linear(7, 4)

    def f(x):
        return lin(x)

    cf = framejit.compile(f)
    x = torch.randn(3, 7)
    out = cf(x)
    assert out.requires_grad
    torch.testing.assert_close(out, lin(x))
    # The module held in the closure is traced into (its parameters read by path).
    s = framejit.stats(f)
    assert s["fallbacks"] + s["graph_breaks"] == 0 and s["graphs"] >= 1, framejit.fallbacks(f)


class Block(nn.Module):
    def __init__(self, d=16, heads=2):
        super().__init__()
        self.heads = heads
        self.ln = nn.LayerNorm(d)
        self.q = nn.Linear(d, d)
        self.k = nn.Linear(d, d)
        self.v = nn.Linear(d, d)
        self.o = nn.Linear(d, d)

    def forward(self, x):
        b, t, c = x.shape
        h = self.ln(x)
        q = self.q(h).view(b, t, self.heads, -1).transpose(1, 2)
        k = self.k(h).view(b, t, self.heads, -1).transpose(1, 2)
        v = self.v(h).view(b, t, self.heads, -1).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (k.size(-1) ** -0.5)
        mask = torch.tril(torch.ones(t, t))
        att = att.masked_fill(mask == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(b, t, c)
        return x + self.o(y)


def test_issue4_transformer_block_one_compile():
    blk = Block().requires_grad_(False)
    cb = framejit.compile(blk)
    for t in range(5, 65, 7):
        x = torch.randn(2, t, 16)
        torch.testing.assert_close(cb(x), blk(x), rtol=1e-5, atol=1e-5)
    s = framejit.stats(Block.forward)
    assert s["fallbacks"] == 0 and s["compiles"] == 1, (s, framejit.fallbacks(Block.forward))


def test_issue4_transformer_block_under_no_grad_with_masked_fill():
    # Parameters frozen, the call under no_grad as inference code does.
    blk = Block(d=8, heads=4).requires_grad_(False)
    cb = framejit.compile(blk)
    with torch.no_grad():
        for t in (5, 17, 64):
            x = torch.randn(1, t, 8)
            torch.testing.assert_close(cb(x), blk(x), rtol=1e-5, atol=1e-5)
    assert framejit.stats(Block.forward)["fallbacks"] == 0


def small_ints(*shape, dtype=torch.float32):
    # Integer-valued floats: every product and partial sum is exact, so the result
    # does not depend on how BLAS orders the sums, and equality is exact.
    return torch.randint(-3, 4, shape).to(dtype)


# Products big enough to be split into tasks on the thread pool (jit/cpu/cpu_backend.cpp):
# by batch item, by rows, by columns, with broadcast batch dims and strided operands.
SPLIT = {
    "batches": (lambda a, b: a @ b, small_ints(6, 96, 64), small_ints(64, 80)),
    "rows": (lambda a, b: a @ b, small_ints(1000, 96), small_ints(96, 48)),
    "cols_transposed_b": (lambda a, b: a @ b.t(), small_ints(24, 96), small_ints(1000, 96)),
    "broadcast_batches": (lambda a, b: a @ b, small_ints(2, 1, 80, 64), small_ints(3, 64, 100)),
    "broadcast_rows": (lambda a, b: a @ b, small_ints(2, 1, 400, 64), small_ints(3, 64, 100)),
    "rows_float64": (lambda a, b: (a @ b) * 0.5, small_ints(1000, 96, dtype=torch.float64),
                     small_ints(96, 48, dtype=torch.float64)),
    "linear_bias_sliced_input": (lambda a, b: F.linear(a[:, ::2], b, b[0, :1]),
                                 small_ints(700, 128), small_ints(80, 64)),
}


@pytest.mark.parametrize("name", sorted(SPLIT))
def test_matmul_split_into_tasks(name):
    fn, a, b = SPLIT[name]
    cf = framejit.compile(lambda a, b: fn(a, b))
    expected = fn(a, b)
    actual = cf(a, b)
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    assert torch.equal(actual, expected)
    assert framejit.stats(cf)["fallbacks"] == 0


# Pointwise consumers of products split into tasks (a bias, an activation, a
# residual: one fused pass after the product), and consumers that read the product
# at other positions. Integer-valued operands keep the products exact.
CONSUMERS = {
    "rows_bias_relu": (lambda a, b, c: torch.relu(a @ b + c[0, :48]) * 2,
                       small_ints(1000, 96), small_ints(96, 48), small_ints(4, 1000)),
    "cols_bias_clamp": (lambda a, b, c: (a @ b + c[0]).clamp(-20, 30),
                        small_ints(24, 96), small_ints(96, 1000), small_ints(4, 1000)),
    "cols_residual_two_outputs": (lambda a, b, c: ((a @ b) - c[:, :800].sum(0), (a @ b) > 0),
                                  small_ints(40, 96), small_ints(96, 800), small_ints(40, 1000)),
    "linear_relu": (lambda a, b, c: F.relu(F.linear(a, b.t(), c[1, :48])),
                    small_ints(1000, 96), small_ints(96, 48), small_ints(4, 1000)),
    "flipped": (lambda a, b, c: (lambda y: y - y.flip(0))(a @ b),
                small_ints(1000, 96), small_ints(96, 48), small_ints(4, 1000)),
    "row_sums": (lambda a, b, c: (lambda y: y - y.sum(1, keepdim=True))(a @ b),
                 small_ints(1000, 96), small_ints(96, 48), small_ints(4, 1000)),
    "transposed_square": (lambda a, b, c: (lambda y: y * 2 + y.t())(a[:200] @ a[:200].t()),
                          small_ints(1000, 96), small_ints(96, 48), small_ints(4, 1000)),
}


@pytest.mark.parametrize("name", sorted(CONSUMERS))
def test_consumers_of_a_split_product(name):
    fn, a, b, c = CONSUMERS[name]
    cf = framejit.compile(lambda a, b, c: fn(a, b, c))
    expected = fn(a, b, c)
    for _ in range(2):
        actual = cf(a, b, c)
        for x, y in zip(actual if isinstance(actual, tuple) else (actual,),
                        expected if isinstance(expected, tuple) else (expected,)):
            assert x.dtype == y.dtype and x.shape == y.shape
            assert torch.equal(x, y)
    assert framejit.stats(cf)["fallbacks"] == 0


def test_in_place_add_of_a_product_that_reads_the_target():
    # b += a @ b: every row block of the product reads all of b, so b may only be
    # written once the whole product is computed.
    def fn(a, b):
        b.add_(a @ b)
        return b
    a, b = small_ints(256, 256), small_ints(256, 256)
    expected = fn(a.clone(), b.clone())
    cf = framejit.compile(fn)
    for _ in range(3):
        b2 = b.clone()
        assert torch.equal(cf(a, b2), expected)
        assert torch.equal(b2, expected)


# The sign of a zero product (found by the fuzzer: a division by it then gave -inf where
# eager gives inf): eager's MKL writes a k = 1 product of at least 2 x 2 (a batch over a
# 2-d operand counts as one product of all its rows) as the products themselves, and
# sums from a zero elsewhere (one row or column, bmm).
@pytest.mark.parametrize("sa,sb", [((2, 1), (1, 2)), ((1, 1), (1, 5)), ((4, 1), (1, 1)), ((3, 2, 1), (1, 2)),
                                   ((3, 1, 1), (1, 2)), ((3, 2, 1), (3, 1, 2)), ((2, 1), (3, 1, 2)), ((64, 1), (1, 80))])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_signed_zeros_of_a_k1_product_as_eager(sa, sb, dtype):
    a = torch.zeros(sa, dtype=dtype)
    a.view(-1)[::2] = -0.0
    b = torch.full(sb, -2.0, dtype=dtype)

    def f(a, b):
        return 1.0 / (a @ b)
    got, want = framejit.compile(f)(a, b), f(a, b)
    assert torch.equal(got, want) and torch.equal(torch.signbit(got), torch.signbit(want))
    assert framejit.stats(f)["fallbacks"] == 0
