"""The torch-specific things model code does, traced instead of ending the trace:
tensor metadata (.dtype, .device, .stride(), ...), the torch.overrides checks,
conversions and copies (.to, .clone, .new_zeros, ...), and torch.nn.functional
calls built on them; each against eager, with one graph and no graph break."""

import pytest
import torch
import torch.nn.functional as F

import framejit


def one_graph(fn, *args):
    """fn compiled whole: one graph, no break; returns framejit's result."""
    framejit.reset()
    info = framejit.explain(fn, *args)
    assert info.graph_count == 1, [b.reason for b in info.graph_breaks]
    assert not info.graph_breaks, [b.reason for b in info.graph_breaks]
    framejit.reset()
    return framejit.compile(fn)(*args)


def same(got, want):
    if isinstance(want, torch.Tensor):
        assert isinstance(got, torch.Tensor)
        assert got.dtype == want.dtype and got.shape == want.shape
        if want.dtype.is_floating_point:
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
        else:
            assert torch.equal(got, want)
    elif isinstance(want, (tuple, list)):
        assert type(got) is type(want) and len(got) == len(want)
        for g, w in zip(got, want):
            same(g, w)
    else:
        assert type(got) is type(want) and got == want, (got, want)


def check(fn, *args):
    same(one_graph(fn, *args), fn(*args))


def check_module(m, *args):
    """A module compiled whole (its forward: one graph, no break), against eager."""
    framejit.reset()
    info = framejit.explain(m.forward, *args)
    assert info.graph_count == 1 and not info.graph_breaks, [b.reason for b in info.graph_breaks]
    framejit.reset()
    same(framejit.compile(m)(*args), m(*args))


# ---- tensor metadata ----

def test_device_into_arange():
    def f(x):
        device = x.device
        return torch.arange(0, x.shape[1], dtype=torch.long, device=device) + x

    check(f, torch.randn(3, 5))


def test_device_compares_and_type():
    def f(x):
        d = x.device
        return x + (1 if d.type == "cpu" else 2) + (3 if d == torch.device("cpu") else 4) * 0 + (5 if x.is_cuda else 6)

    x = torch.randn(4)
    framejit.reset()
    same(framejit.compile(f)(x), f(x))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64])
def test_dtype_uses(dtype):
    def f(x):
        y = torch.zeros(3, dtype=x.dtype) + x[:3]
        z = y.to(x.dtype) * 2
        return z if x.dtype == torch.float32 else z + 1, x.dtype.is_floating_point

    check(f, (torch.randn(5) * 10).to(dtype))


def test_dtype_guard_retraces():
    def f(x):
        return x * 2 if x.dtype == torch.float32 else x - 1

    framejit.reset()
    g = framejit.compile(f)
    a, b = torch.randn(4), torch.randn(4).double()
    same(g(a), f(a))
    same(g(b), f(b))
    same(g(a), f(a))


def test_simple_attributes():
    def f(x):
        return (x + x.ndim + x.element_size(), x.layout == torch.strided, x.is_floating_point(),
                x.requires_grad, x.is_complex(), x.get_device(), x.itemsize, (x > 0).is_floating_point(),
                (x > 0).element_size(), x.long().is_signed(), x.nelement())

    check(f, torch.randn(3, 4))


@pytest.mark.parametrize("shape", [(3, 4), (2, 1, 5), (4,), (1, 3)])
def test_stride_and_contiguous(shape):
    def f(x):
        y = x * 2
        s = y.sum(-1, keepdim=True)
        return y, x.stride(), y.stride(), y.stride(0), y.stride(-1), x.is_contiguous(), y.is_contiguous(), \
            x.view(-1).is_contiguous(), s.stride()

    check(f, torch.randn(*shape))


def test_stride_guard_on_non_contiguous_input():
    def f(x):
        return x + x.stride(0)

    framejit.reset()
    g = framejit.compile(f)
    a = torch.randn(4, 6)
    same(g(a), f(a))
    b = torch.randn(6, 4).t()  # not contiguous: the entry must not answer 6
    same(g(b), f(b))
    same(g(a), f(a))


def test_is_contiguous_of_transposed_falls_back_correctly():
    def f(x):
        y = x.t()
        return y if y.is_contiguous() else y.contiguous() + 1

    x = torch.randn(3, 4)
    framejit.reset()
    same(framejit.compile(f)(x), f(x))


def test_requires_grad_of_parameter_under_no_grad():
    w = torch.nn.Parameter(torch.randn(4))

    def f(x):
        with torch.no_grad():
            return x * 2 if w.requires_grad else x, x.requires_grad

    x = torch.randn(4)
    framejit.reset()
    same(framejit.compile(f)(x), f(x))


# ---- torch.overrides checks, is_scripting & co ----

def test_override_checks_answer_false():
    w = torch.nn.Parameter(torch.randn(4), requires_grad=False)

    def f(x):
        a = torch._C._has_torch_function_unary(x)
        b = torch._C._has_torch_function_variadic(x, w, None, 2)
        c = torch.overrides.has_torch_function((x, w))
        d = torch.jit.is_scripting() or torch.compiler.is_compiling()
        return x + (1 if (a or b or c or d) else 2)

    check(f, torch.randn(4))


def test_override_check_under_function_mode_matches_eager():
    class Mode(torch.overrides.TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    def f(x):
        return x + (1 if torch._C._has_torch_function_unary(x) else 2)

    x = torch.randn(4)
    framejit.reset()
    g = framejit.compile(f)
    with Mode():
        want = f(x)
        got = g(x)
    same(got, want)
    same(g(x), f(x))  # traced outside the mode: answers False
    with Mode():  # the entry's guard sees the mode: eager's answer again
        want = f(x)
        got = g(x)
    same(got, want)


# ---- conversions, copies, new_* ----

@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_to_forms(dtype):
    def f(x, other):
        return (x.to(torch.float64) + 1, x.to("cpu") * 2, x.to(other) + 1, x.to(dtype=torch.float64, device="cpu"),
                x.to(torch.device("cpu"), torch.int32), x.to(torch.float32, False), x.to(x.dtype, copy=True) + 0,
                x.type_as(other), x.double().type_as(x))

    check(f, (torch.randn(3, 4) * 5).to(dtype), torch.randn(2).long())


def test_to_same_dtype_returns_self_like_eager():
    def f(x):
        y = x.to(torch.float32)
        z = x.clone()
        z.add_(1)
        return y is x, z

    x = torch.randn(5)
    framejit.reset()
    got = framejit.compile(f)(x.clone())
    same(got[1], f(x)[1])
    assert got[0] == f(x)[0]


def test_clone_is_a_copy():
    def f(x):
        y = x.clone()
        y.mul_(2)
        return x + 0, y, torch.clone(x) - 1

    check(f, torch.randn(3, 4))


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.float64])
def test_new_factories(dtype):
    def f(x):
        return (x.new_zeros(3, 4), x.new_ones((2,)), x.new_full((2, 3), 2.5), x.new_zeros(x.shape[0], dtype=torch.float64),
                x.new_empty(2, 2).shape, x + x.new_ones(x.shape))

    check(f, (torch.randn(3, 4) * 5).to(dtype))


def test_zeros_like_with_dtype():
    check(lambda x: torch.zeros_like(x, dtype=torch.long) + torch.ones_like(x, dtype=torch.float64), torch.randn(3))


# ---- torch.nn.functional ----

def test_dropout_eval():
    def f(x):
        return F.dropout(x, 0.1, training=False) * 2 + F.dropout(x, p=0.5, training=False)

    check(f, torch.randn(4, 8))


def test_dropout_bad_p_raises_like_eager():
    def f(x):
        return F.dropout(x, 1.5, training=False) + 1

    x = torch.randn(3)
    with pytest.raises(ValueError) as want:
        f(x)
    framejit.reset()
    with pytest.raises(ValueError) as got:
        framejit.compile(f)(x)
    assert str(got.value) == str(want.value)


@pytest.mark.parametrize("shape", [(4, 3), (2, 3, 5), (2, 3, 4, 4)])
@pytest.mark.parametrize("affine", [True, False])
def test_batch_norm_eval(shape, affine):
    c = shape[1]
    params = (torch.randn(c), torch.rand(c) + 0.5) + ((torch.randn(c), torch.randn(c)) if affine else ())

    def f(x, rm, rv, w=None, b=None):
        return F.batch_norm(x, rm, rv, w, b, training=False, eps=1e-3) + 1

    check(f, torch.randn(*shape), *params)


class BNNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv_out = torch.nn.Linear(4, 4)
        self.bn = torch.nn.BatchNorm2d(3)

    def forward(self, x):
        with torch.no_grad():
            return self.conv_out(self.bn(x)).relu()


def test_batch_norm_module_eval():
    m = BNNet().eval()
    with torch.no_grad():
        m.bn.running_mean.normal_()
        m.bn.running_var.uniform_(0.5, 2)
        m.bn.weight.normal_()
        m.bn.bias.normal_()
    check_module(m, torch.randn(2, 3, 4, 4))


def test_batch_norm_channel_mismatch_raises_like_eager():
    def f(x, rm, rv):
        return F.batch_norm(x, rm, rv, training=False) + 1

    args = torch.randn(2, 3), torch.randn(4), torch.rand(4) + 0.5
    with pytest.raises(RuntimeError) as want:
        f(*args)
    framejit.reset()
    with pytest.raises(RuntimeError) as got:
        framejit.compile(f)(*args)
    assert str(got.value) == str(want.value)


def test_layer_norm_and_embedding():
    def f(x, idx, w, b, emb):
        return F.layer_norm(x, (8,), w, b) + F.embedding(idx, emb)

    check(f, torch.randn(4, 8), torch.randint(0, 10, (4,)), torch.randn(8), torch.randn(8), torch.randn(10, 8))


class TinyGPT(torch.nn.Module):
    """nanoGPT's forward prologue: .device on the first line, arange on it, dropout."""

    def __init__(self):
        super().__init__()
        self.wte, self.wpe = torch.nn.Embedding(16, 8), torch.nn.Embedding(12, 8)
        self.drop = torch.nn.Dropout(0.1)
        self.ln = torch.nn.LayerNorm(8)

    def forward(self, idx):
        device = idx.device
        b, t = idx.size()
        pos = torch.arange(0, t, dtype=torch.long, device=device)
        with torch.no_grad():
            x = self.drop(self.wte(idx) + self.wpe(pos))
            return self.ln(x).to(x.dtype)


def test_nanogpt_style_forward():
    torch.manual_seed(0)
    check_module(TinyGPT().eval(), torch.randint(0, 16, (2, 5)))


# ---- attention and losses ----

@pytest.mark.parametrize("lq,ls", [(5, 5), (4, 6), (6, 3)])
def test_sdpa_causal_keywords(lq, ls):
    def f(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True) * 2

    check(f, torch.randn(2, 3, lq, 8), torch.randn(2, 3, ls, 8), torch.randn(2, 3, ls, 4))


def test_sdpa_plain_scaled_and_masked():
    q, k, v = torch.randn(2, 2, 4, 8), torch.randn(2, 2, 6, 8), torch.randn(2, 2, 6, 8)
    bool_mask = torch.rand(4, 6) > 0.3
    bool_mask[1] = False  # a row masked everywhere: eager gives 0
    float_mask = torch.randn(2, 1, 4, 6)

    def f(q, k, v, bm, fm):
        return (F.scaled_dot_product_attention(q, k, v),
                F.scaled_dot_product_attention(q, k, v, scale=0.3),
                F.scaled_dot_product_attention(q, k, v, attn_mask=bm),
                F.scaled_dot_product_attention(q, k, v, fm, 0.0))

    check(f, q, k, v, bool_mask, float_mask)


def test_sdpa_new_sizes_and_dtype_retrace():
    def f(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    framejit.reset()
    g = framejit.compile(f)
    for t, dtype in [(5, torch.float32), (7, torch.float32), (7, torch.float64), (3, torch.float32)]:
        args = [torch.randn(1, 2, t, 8, dtype=dtype) for _ in range(3)]
        same(g(*args), f(*args))


def test_sdpa_mask_and_causal_raises_like_eager():
    def f(q):
        return F.scaled_dot_product_attention(q, q, q, attn_mask=torch.ones(3, 3, dtype=torch.bool), is_causal=True)

    q = torch.randn(1, 3, 8)
    with pytest.raises(RuntimeError) as want:
        f(q)
    framejit.reset()
    with pytest.raises(RuntimeError) as got:
        framejit.compile(f)(q)
    assert str(got.value) == str(want.value)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_and_nll(reduction):
    def f(x, t):
        return (F.cross_entropy(x, t, reduction=reduction), F.nll_loss(F.log_softmax(x, -1), t, reduction=reduction),
                F.cross_entropy(x, t, ignore_index=2, reduction=reduction))

    t = torch.tensor([0, 2, 4, 2, 1, 3])
    check(f, torch.randn(6, 5), t)


def test_cross_entropy_target_out_of_range_raises_like_eager():
    def f(x, t):
        return F.cross_entropy(x, t)

    x, t = torch.randn(3, 4), torch.tensor([0, 7, 1])
    with pytest.raises(IndexError) as want:
        f(x, t)
    framejit.reset()
    with pytest.raises(IndexError) as got:
        framejit.compile(f)(x, t)
    assert str(got.value) == str(want.value)


def test_finfo_and_is_tracing():
    def f(x):
        lo = torch.finfo(x.dtype).min
        big = torch.iinfo(torch.int32).max
        return x.masked_fill(x < 0, lo) + (0 if torch.jit.is_tracing() else 1), big, torch.finfo(x.dtype).eps

    check(f, torch.randn(6))
    check(f, torch.randn(6).double())
