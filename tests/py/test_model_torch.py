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
