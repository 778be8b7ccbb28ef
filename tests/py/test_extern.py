"""Extern calls: torch functions that framejit does not lower run as one graph node
that calls torch itself (interp/torch/extern_ops.cpp), compared against eager."""
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import framejit
from _opcheck import check
from conftest import assert_same

# Fixed inputs: a case such as repeat_interleave adds a sum of 324 floats to each
# element, and its float32 rounding (an ulp of the sum) is the whole budget of atol.
_GEN = torch.Generator().manual_seed(0)
X = torch.randn(2, 3, 8, 8, generator=_GEN)
W = torch.randn(4, 3, 3, 3, generator=_GEN)
BIAS = torch.randn(4, generator=_GEN)

EXTERN = {
    "conv2d": (lambda x, w: torch.conv2d(x, w, BIAS, padding=1) * 2 + 1, X, W),
    "conv2d_stride_kw": (lambda x, w: torch.relu(torch.conv2d(x, w, stride=2)), X, W),
    # Positive terms: no cancellation that would turn exp()'s last-bit rounding into a large relative error.
    "conv_of_computed": (lambda x, w: torch.conv2d(x.exp(), w.abs() * 0.5).sum(dim=1), X, W),
    "max_pool2d": (lambda x, w: torch.max_pool2d(x * w.sum(), 2) + 1, X, W),
    "avg_pool_nn": (lambda x, w: torch._C._nn.avg_pool2d(x, 2) - w.mean(), X, W),
    "bool_operand": (lambda x, w: torch.cumprod(x > 0, 1).sum() + w.sum(), X, W),
    "int_result": (lambda x, b: torch.bucketize(x, b) + 1, X, torch.tensor([-1.0, 0.0, 1.0])),
    # Positive terms: a sum of signed products can cancel to a value float32 rounding dominates.
    "tensor_method": (lambda x, w: (x.abs() + 0.5).cumprod(1).sum() + w.cumsum(0).logcumsumexp(1).exp().sum(), X, W),
    "tensor_method_kw": (lambda x, w: x.cumprod(dim=1) * 2 + w.logcumsumexp(dim=0).sum(), X, W),
    "list_argument": (lambda x, w: torch.stack([x, x * 2], 1).sum(1) + torch.atan2(w, w + 1).sum(), X, W),
    "repeat_interleave": (lambda x, w: x.repeat_interleave(2, dim=0) * 2 + w.repeat_interleave(3).sum(), X, W),
}


@pytest.mark.parametrize("name", sorted(EXTERN))
def test_extern_call_is_one_node_of_the_graph(name):
    fn, a, b = EXTERN[name]
    check(fn, a, b)
    text = "\n".join(framejit.explain(fn, a, b).graphs)
    assert "extern[torch." in text or name == "list_argument" and "extern" in text, text


def test_graph_text_names_the_torch_function():
    e = framejit.explain(lambda x, w: torch.conv2d(x, w) + 1, X, W)
    assert e.graph_count == 1 and not e.graph_breaks
    assert "extern[torch.conv2d](%0, %1)" in e.graphs[0]


def test_a_new_batch_size_does_not_recompile():
    def f(x, w):
        return torch.relu(torch.conv2d(x, w, BIAS, padding=1))
    cf = framejit.compile(f)
    for b in (2, 5, 3, 7):
        x = torch.randn(b, 3, 8, 8)
        assert_same(cf(x, W), f(x, W))
    s = framejit.stats(f)
    assert s["compiles"] == 1 and s["fallbacks"] == 0, s


def test_repeat_interleave_by_a_tensor_stays_eagers():
    # Its output size depends on the repeats' values: no extern node, eager's result.
    def f(x, r):
        return x.repeat_interleave(r, dim=0) + 1
    cf = framejit.compile(f)
    for r in (torch.tensor([1, 2]), torch.tensor([3, 0])):
        x = torch.randn(2, 3)
        assert_same(cf(x, r), f(x, r))


def test_a_new_image_size_gives_eager_results():
    # The output's spatial sizes are not a size of an input: fixed and guarded.
    def f(x, w):
        return torch.conv2d(x, w, stride=2) + 1
    cf = framejit.compile(f)
    for hw in (8, 9, 12, 8):
        x = torch.randn(2, 3, hw, hw + 1)
        assert_same(cf(x, W), f(x, W))
    assert framejit.stats(f)["fallbacks"] == 0


def test_sequence_lengths_share_one_compile():
    def f(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True).sum(-1)
    cf = framejit.compile(f)
    for n in (5, 7, 16, 9):
        q, k, v = (torch.randn(2, 3, n, 8) for _ in range(3))
        assert_same(cf(q, k, v), f(q, k, v))
    assert framejit.stats(f)["compiles"] == 1


def test_constant_arguments_are_part_of_the_compiled_graph():
    def f1(x, w):
        return torch.conv2d(x, w, stride=1)

    def f2(x, w):
        return torch.conv2d(x, w, stride=2)
    c1, c2 = framejit.compile(f1), framejit.compile(f2)
    assert_same(c1(X, W), f1(X, W))
    assert_same(c2(X, W), f2(X, W))
    assert_same(c1(X, W), f1(X, W))


def test_random_op_follows_eagers_generator():
    def f(x):
        return torch.dropout(x * 2, 0.5, True) + 1
    cf = framejit.compile(f)
    for seed in (0, 1, 2):
        torch.manual_seed(seed)
        expected = f(X)
        torch.manual_seed(seed)
        assert_same(cf(X), expected)
        assert torch.equal(torch.rand(3), torch.rand(3)) is False  # the generator moves on
    s = framejit.stats(f)
    assert s["compiles"] == 1 and s["graph_breaks"] == 0, s


def test_eagers_error_for_a_call_eager_rejects():
    def f(x, w):
        return torch.conv2d(x, w) + 1
    bad = torch.randn(4, 5, 3, 3)  # 5 input channels for a 3-channel image
    with pytest.raises(RuntimeError) as eager:
        f(X, bad)
    with pytest.raises(RuntimeError) as compiled:
        framejit.compile(f)(X, bad)
    assert str(compiled.value) == str(eager.value)


def test_a_view_returning_function_is_not_copied():
    # diagonal's result is a view: writing it must write x, as in eager.
    def f(x):
        d = torch.diagonal(x * 1)
        return d
    x = torch.randn(4, 4)
    assert_same(framejit.compile(f)(x), f(x))

    def g(x):
        d = torch.diagonal(x)
        d.add_(1)
        return x * 1
    x1, x2 = torch.randn(4, 4), None
    x2 = x1.clone()
    assert_same(framejit.compile(g)(x1), g(x2))
    assert torch.equal(x1, x2)


def test_batch_norm_in_training_still_updates_running_stats():
    def f(x, rm, rv):
        return torch.batch_norm(x, None, None, rm, rv, True, 0.1, 1e-5, False) + 1
    x = torch.randn(4, 3, 5)
    rm1, rv1, rm2, rv2 = torch.zeros(3), torch.ones(3), torch.zeros(3), torch.ones(3)
    assert_same(framejit.compile(f)(x, rm1, rv1), f(x, rm2, rv2))
    assert torch.allclose(rm1, rm2) and torch.allclose(rv1, rv2)
    assert not torch.equal(rm1, torch.zeros(3))


torch.manual_seed(0)
CONV = nn.Conv2d(3, 4, 3, padding=1)


def test_gradients_through_torch_backward():
    conv = CONV

    def f(x):
        return (torch.relu(CONV(x)) * 2).sum()
    cf = framejit.compile(f)
    for b in (2, 3):
        x = torch.randn(b, 3, 8, 8, requires_grad=True)
        conv.zero_grad()
        cf(x).backward()
        got = [conv.weight.grad.clone(), conv.bias.grad.clone(), x.grad.clone()]
        conv.zero_grad()
        x.grad = None
        f(x).backward()
        want = [conv.weight.grad, conv.bias.grad, x.grad]
        for g, w in zip(got, want):
            torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-5)
    s = framejit.stats(f)
    assert s["compiles"] == 1 and s["fallbacks"] == 0, s


# Each call's gradients come from one backward call of torch for all operands at
# once: convolution_backward for conv1d/2d/3d (no second forward run), else autograd
# over a new forward run (padding='same', an unbatched input, other ops).
GRAD_CALLS = {
    "conv2d_all": (lambda x, w, b: F.conv2d(x, w, b, stride=2, padding=1), (2, 3, 9, 9), (4, 3, 3, 3), (4,)),
    "conv2d_kw_groups": (lambda x, w, b: F.conv2d(x, weight=w, bias=b, dilation=2, groups=3), (2, 6, 9, 9), (3, 2, 3, 3), (3,)),
    "conv2d_no_bias": (lambda x, w, b: torch.conv2d(x, w, padding=(1, 2)) * b.sum(), (2, 3, 6, 7), (5, 3, 3, 3), (1,)),
    "conv2d_same": (lambda x, w, b: F.conv2d(x, w, b, padding="same"), (2, 3, 6, 6), (4, 3, 2, 2), (4,)),
    "conv2d_unbatched": (lambda x, w, b: F.conv2d(x, w, b), (3, 6, 6), (4, 3, 3, 3), (4,)),
    "conv1d": (lambda x, w, b: F.conv1d(x, w, b, stride=3), (2, 3, 11), (4, 3, 2), (4,)),
    "conv3d": (lambda x, w, b: F.conv3d(x, w, b, padding=1), (1, 2, 4, 5, 4), (3, 2, 3, 3, 3), (3,)),
    "cdist": (lambda x, w, b: torch.cdist(x, w) * b, (2, 5, 3), (2, 4, 3), (4,)),
}


@pytest.mark.parametrize("name", list(GRAD_CALLS))
@pytest.mark.parametrize("needed", ["all", "weights", "input"])
def test_extern_gradients_of_several_operands(name, needed):
    fn, *shapes = GRAD_CALLS[name]
    torch.manual_seed(1)
    values = [torch.randn(*s, dtype=torch.float64) for s in shapes]
    grad = {"all": (True, True, True), "weights": (False, True, True), "input": (True, False, False)}[needed]

    def run(f):
        leaves = [v.clone().requires_grad_(g) for v, g in zip(values, grad)]
        out = f(*leaves)
        (out * torch.linspace(-1, 1, out.numel(), dtype=out.dtype).view(out.shape)).sum().backward()
        return out, [v.grad for v in leaves]
    got, got_grads = run(framejit.compile(fn))
    want, want_grads = run(fn)
    torch.testing.assert_close(got, want)
    for g, w in zip(got_grads, want_grads):
        assert (g is None) == (w is None)
        if w is not None:
            torch.testing.assert_close(g, w)
    s = framejit.stats(fn)
    assert s["compiles"] == 1 and s["fallbacks"] == 0, s


def test_conv_gradients_come_from_one_convolution_backward(monkeypatch):
    from framejit import extern
    calls = []
    direct = extern._direct_backward

    def counted(fn, args, kwargs, output, xs, gy):
        grads = direct(fn, args, kwargs, output, xs, gy)
        calls.append((len(xs), grads is not None))
        return grads
    monkeypatch.setattr(extern, "_direct_backward", counted)
    conv = nn.Conv2d(3, 4, 3)
    f = framejit.compile(lambda x: conv(x).relu().sum())
    f(torch.randn(2, 3, 6, 6, requires_grad=True)).backward()
    assert calls == [(3, True)]  # input, weight and bias in one call, no forward run again


def test_random_op_under_autograd_gives_eagers_gradient():
    def f(x):
        return (torch.dropout(x, 0.5, True) * x).sum()
    x = torch.randn(6, 6, requires_grad=True)
    torch.manual_seed(3)
    framejit.compile(f)(x).backward()
    got = x.grad.clone()
    x.grad = None
    torch.manual_seed(3)
    f(x).backward()
    torch.testing.assert_close(got, x.grad)


def test_large_call_runs_without_the_gil():
    # Over 64K elements the graph runs with the GIL released; the extern call takes it.
    x = torch.randn(1, 3, 256, 256)
    check(lambda x, w: torch.conv2d(x, w, padding=1).exp(), x, W)


# Functions with several results (tuples, torch.return_types), out= overloads that
# used to hide a plain function (xlogy, topk), and results that are views of the
# op's own temporaries (avg_pool1d, tensordot): each is an extern call.
M = torch.randn(5, 7)
MULTI = {
    "sort_values": lambda x: torch.sort(x, -1).values * 2,
    "sort_indices": lambda x: torch.sort(x, 0, descending=True)[1] + 1,
    "sort_both": lambda x: torch.sort(x, 1).values + torch.sort(x, 1).indices,
    "topk_kw": lambda x: torch.topk(x, 2, dim=-1).values.sum(-1),
    "topk_method": lambda x: x.topk(3, 0, largest=False).indices * 2,
    "cummax": lambda x: torch.cummax(x, 0).values - x,
    "aminmax_fields": lambda x: torch.aminmax(x, dim=1).max - torch.aminmax(x, dim=1).min,
    "median_dim": lambda x: torch.median(x, 1).values + 1,
    "std_mean_tuple": lambda x: torch.std_mean(x, 0)[0] + torch.std_mean(x, 0)[1],
    "unpacked": lambda x: (lambda v, i: v * i)(*torch.sort(x, 1)),
    "xlogy": lambda x: torch.xlogy(x, x.abs() + 1) + 1,
    "tensordot": lambda x: torch.tensordot(x, x, dims=([1], [1])) * 0.5,
    "avg_pool1d": lambda x: torch.avg_pool1d(x[None], 2)[0] + 1,
}


@pytest.mark.parametrize("name", sorted(MULTI))
def test_extern_calls_with_several_results_and_out_overloads(name):
    check(MULTI[name], M)
    assert "extern[torch." in "\n".join(framejit.explain(MULTI[name], M).graphs)


def test_a_returned_structseq_keeps_its_type_and_fields():
    def f(x):
        return torch.sort(x * 2, 1)
    got, want = framejit.compile(f)(M), f(M)
    assert type(got) is type(want)
    assert_same(got.values, want.values)
    assert_same(got.indices, want.indices)
    assert framejit.stats(f)["graphs"] == 1


def test_several_results_follow_a_new_size():
    def f(x):
        v, i = torch.sort(x, -1)
        return v[:, :1] * i.shape[0] + i
    cf = framejit.compile(f)
    for n in (5, 9, 6):
        x = torch.randn(n, 7)
        assert_same(cf(x), f(x))
    s = framejit.stats(f)
    assert s["compiles"] == 1 and s["fallbacks"] == 0, s


def test_gradients_through_calls_with_several_results():
    def f(x, w):
        v = torch.sort(x * w, -1).values
        m = torch.aminmax(x, dim=0)
        return (v[:, :2] * 3).sum() + m.max.sum() - torch.cummax(x, 1)[0].mean()
    x, w = torch.randn(4, 6, requires_grad=True), torch.randn(6, requires_grad=True)
    x2, w2 = x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
    got = framejit.compile(f)(x, w)
    got.backward()
    want = f(x2, w2)
    want.backward()
    assert_same(got, want)
    assert_same(x.grad, x2.grad)
    assert_same(w.grad, w2.grad)
    assert framejit.stats(f)["fallbacks"] == 0


def test_a_tensor_method_without_a_torch_function():
    check(lambda x: x.repeat(2, 1) * 2 + x.repeat(1, 3).sum(), M)


@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate"])
def test_pad_reads_the_deterministic_flag_as_a_guarded_constant(mode):
    def f(x):
        return F.pad(x, (1, 2), mode=mode) * 2
    x = torch.randn(2, 3, 6)
    check(f, x)
    cf = framejit.compile(f)
    torch.use_deterministic_algorithms(True)
    try:
        assert_same(cf(x), f(x))
    finally:
        torch.use_deterministic_algorithms(False)
    s = framejit.stats(f)
    assert s["recompiles"] == 1 and s["fallbacks"] == 0, s


def test_a_call_eager_rejects_is_not_retried_as_an_extern_call():
    # The lowering declines max() over an empty dim because eager raises there; the
    # meta run does not raise, and the unused result would never have run.
    def f(x):
        unused = torch.max(x, dim=1).values  # noqa: F841
        return x.squeeze()
    x = torch.randn(6, 0, dtype=torch.float64)
    with pytest.raises(IndexError) as want:
        f(x)
    with pytest.raises(IndexError) as got:
        framejit.compile(f)(x)
    assert str(got.value) == str(want.value)


def test_a_batch_equal_to_the_channel_count_stays_symbolic():
    # Batch 4 and 4 output channels: the result's sizes follow each alone.
    def f(x, w):
        return torch.relu(torch.conv2d(x, w, BIAS, padding=1))
    cf = framejit.compile(f)
    for b in (4, 6, 3):
        x = torch.randn(b, 3, 8, 8)
        assert_same(cf(x, W), f(x, W))
    s = framejit.stats(f)
    assert s["compiles"] == 1 and s["fallbacks"] == 0, s


# ---- output sides that follow an input side through a floor ----

def test_conv_and_pool_output_sides_stay_symbolic():
    # (H + 2p - d(k-1) - 1) // s + 1 and its kin, fitted from meta runs: one compile for
    # every image size, no guard on the input side, and compiled code runs each time.
    gen = torch.Generator().manual_seed(0)
    w = torch.randn(6, 3, 5, 5, generator=gen)
    wt = torch.randn(3, 4, 3, 3, generator=gen)

    def conv(x, w, wt):
        return F.conv2d(x, w, stride=2, padding=1).relu()

    def conv_dilated(x, w, wt):
        return F.conv2d(x, w, stride=3, padding=2, dilation=2) * 2

    def pool_ceil(x, w, wt):
        return F.max_pool2d(x, 3, stride=2, padding=1, ceil_mode=True) + 1

    def avg(x, w, wt):
        return F.avg_pool2d(x, 2) * 2

    def transposed(x, w, wt):
        return F.conv_transpose2d(x, wt, stride=2, padding=1, output_padding=1) - 1

    def upsample(x, w, wt):
        return F.interpolate(x, scale_factor=2, mode="nearest") - 1

    def conv1d(x, w, wt):
        return F.conv1d(x[:, :, 0], w[:, :, 0], stride=2).tanh()

    for fn in (conv, conv_dilated, pool_ceil, avg, transposed, upsample, conv1d):
        compiled = framejit.compile(fn)
        for n, h, wd in ((2, 17, 19), (3, 24, 24), (3, 31, 20), (5, 40, 33), (2, 12, 12)):
            x = torch.randn(n, 3, h, wd, generator=gen)
            assert_same(compiled(x, w, wt), fn(x, w, wt))
        s = framejit.stats(fn)
        assert (s["compiles"], s["deopts"], s["fallbacks"], s["cache_hits"]) == (1, 0, 0, 4), (fn.__name__, s)


def test_a_feature_map_side_equal_to_the_batch_is_not_taken_for_it():
    # At 4x4 pixels in a batch of 4, the side matched the batch size and the batch was
    # then fixed: every new batch size or image size compiled again.
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, stride=2, padding=1), torch.nn.ReLU(),
                              torch.nn.Conv2d(4, 4, 3, stride=2, padding=1), torch.nn.AdaptiveAvgPool2d(1),
                              torch.nn.Flatten(), torch.nn.Linear(4, 2)).eval()
    compiled = framejit.compile(net)
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for n, side in ((4, 16), (2, 16), (4, 20), (3, 9)):
            x = torch.randn(n, 3, side, side, generator=gen)
            assert_same(compiled(x), net(x))
    s = framejit.stats(net.forward)
    assert (s["compiles"], s["deopts"], s["fallbacks"]) == (1, 0, 0), s


def test_an_extern_call_that_raises_at_run_time_counts_a_deopt():
    def f(a):
        return torch.linalg.cholesky(a) * 2

    compiled = framejit.compile(f)
    a = torch.eye(3) * 2
    assert_same(compiled(a), f(a))
    with pytest.raises(torch.linalg.LinAlgError) as got:
        compiled(-a)
    with pytest.raises(torch.linalg.LinAlgError) as want:
        f(-a)
    assert str(got.value) == str(want.value)
    assert framejit.stats(f)["deopts"] == 1
    assert_same(compiled(a * 3), f(a * 3))
