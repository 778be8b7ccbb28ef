"""Custom torch.autograd.Function in compiled code: forward and backward are both
traced; numbers stored on ctx are inputs of the backward graph (a new value does not
recompile). Results and gradients are compared with eager autograd."""
import torch
import torch.nn.functional as F

import framejit


def leaf(*shape, dtype=torch.float64, seed=0, requires_grad=True):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=dtype).requires_grad_(requires_grad)


def twin(t):
    return t.detach().clone().requires_grad_(t.requires_grad)


def assert_no_fallback(fn, compiles=1):
    s = framejit.stats(fn)
    assert s["fallbacks"] == 0, framejit.fallbacks(fn)
    assert s["graph_breaks"] == 0 and s["compiles"] == compiles and s["recompiles"] == compiles - 1, s


class ScaleSin(torch.autograd.Function):
    """y = x * scale + sin(x), with a hand-written backward that reads the scale from ctx."""

    @staticmethod
    def forward(ctx, x, scale):
        ctx.scale = scale
        ctx.save_for_backward(x)
        return x * scale + x.sin()

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * (ctx.scale + x.cos()), None


def test_float_on_ctx_is_a_backward_input_and_does_not_recompile():
    def f(x, scale):
        return ScaleSin.apply(x * 2.0, scale).sum(-1)

    cf = framejit.compile(f)
    for step, scale in enumerate((0.5, 1.25, -3.0, 7.5)):
        x = leaf(3, 2 + step, seed=step)
        xe = twin(x)
        y, ye = cf(x, scale), f(xe, scale)
        torch.testing.assert_close(y, ye, rtol=1e-12, atol=1e-12)
        assert "CompiledGraphFunction" in type(y.grad_fn).__name__
        (y * torch.arange(3.0, dtype=torch.float64)).sum().backward()
        (ye * torch.arange(3.0, dtype=torch.float64)).sum().backward()
        torch.testing.assert_close(x.grad, xe.grad, rtol=1e-12, atol=1e-12)
    assert_no_fallback(f)
    assert framejit.stats(f)["cache_hits"] == 3


class MulAdd(torch.autograd.Function):
    """(a * b + k, flag): gradients only where ctx.needs_input_grad asks; an int and a
    bool kept on ctx."""

    @staticmethod
    def forward(ctx, a, b, k, flag):
        ctx.save_for_backward(a, b)
        ctx.k = k
        ctx.flag = flag
        return a * b + k

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        ga = grad * b * ctx.k if ctx.needs_input_grad[0] else None
        gb = grad * a if ctx.needs_input_grad[1] else None
        if ctx.flag:
            gb = gb * 2.0
        return ga, gb, None, None


def test_needs_input_grad_int_and_bool_on_ctx():
    def f(a, b, k, flag):
        return MulAdd.apply(a, b, k, flag)

    cf = framejit.compile(f)
    for k in (2, 3, 5):
        a, b = leaf(4, seed=k), leaf(4, seed=10 + k)
        ae, be = twin(a), twin(b)
        y, ye = cf(a, b, k, True), f(ae, be, k, True)
        torch.testing.assert_close(y, ye)
        y.sum().backward()
        ye.sum().backward()
        torch.testing.assert_close(a.grad, ae.grad)
        torch.testing.assert_close(b.grad, be.grad)
    assert_no_fallback(f)
    # Only b requires grad: needs_input_grad[0] is False, a gets no gradient.
    a, b = leaf(4, requires_grad=False), leaf(4, seed=1)
    be = twin(b)
    cf(a, b, 3, False).sum().backward()
    f(a, be, 3, False).sum().backward()
    assert a.grad is None
    torch.testing.assert_close(b.grad, be.grad)


class SplitSign(torch.autograd.Function):
    """Three results: a differentiable one, a float mask marked non-differentiable, and
    an integer index; backward returns None for the second input."""

    @staticmethod
    def forward(ctx, x, y):
        mask = (x > 0).to(torch.float64)
        ctx.mark_non_differentiable(mask)
        ctx.save_for_backward(mask)
        return x * mask + y.exp(), mask, x.argmax(-1)

    @staticmethod
    def backward(ctx, grad, grad_mask, grad_index):
        (mask,) = ctx.saved_tensors
        return grad * mask, None


def test_mark_non_differentiable_and_none_gradients():
    def f(x, y):
        out, mask, idx = SplitSign.apply(x, y)
        return out * 2.0, mask, idx

    cf = framejit.compile(f)
    x, y = leaf(3, 4), leaf(3, 4, seed=1)
    xe, ye = twin(x), twin(y)
    got, want = cf(x, y), f(xe, ye)
    for a, e in zip(got, want):
        assert a.requires_grad == e.requires_grad and a.dtype == e.dtype
        torch.testing.assert_close(a.detach(), e.detach())
    assert not got[1].requires_grad and not got[2].requires_grad
    got[0].sum().backward()
    want[0].sum().backward()
    torch.testing.assert_close(x.grad, xe.grad)
    assert y.grad is None and ye.grad is None
    assert_no_fallback(f)


class Untraceable(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 3.0

    @staticmethod
    def backward(ctx, grad):
        print("backward")  # not traceable: the frame runs in CPython when it needs it
        return grad * 3.0


def test_no_backward_traced_without_grad_and_fallback_when_it_cannot_be():
    def f(x):
        return Untraceable.apply(x).sin()

    cf = framejit.compile(f)
    x = leaf(5)
    with torch.no_grad():
        y = cf(x)
    assert not y.requires_grad
    torch.testing.assert_close(y, torch.sin(x.detach() * 3.0))
    assert framejit.stats(f)["fallbacks"] == 0
    y = cf(x)  # grad mode on: the backward is needed and cannot be traced
    y.sum().backward()
    torch.testing.assert_close(x.grad, 3.0 * torch.cos(3.0 * x.detach()))
    assert framejit.stats(f)["fallbacks"] == 1


# ---- the must-show training loop ----

class GradScale(torch.autograd.Function):
    """Identity forward that multiplies the gradient by a float kept on ctx."""

    @staticmethod
    def forward(ctx, x, scale):
        ctx.scale = scale
        return x * 1.0

    @staticmethod
    def backward(ctx, grad):
        return grad * ctx.scale, None


class Classifier(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(12, 32)
        self.fc2 = torch.nn.Linear(32, 5)

    def forward(self, x, target, scale):
        h = F.gelu(self.fc1(x))
        h = GradScale.apply(h, scale)
        logp = torch.log_softmax(self.fc2(h), dim=-1)
        return -(logp * target).sum(-1).mean()


def test_training_40_steps_matches_eager_without_recompiles():
    torch.manual_seed(0)
    model = Classifier()
    ref = Classifier()
    ref.load_state_dict(model.state_dict())
    compiled = framejit.compile(model)
    g = torch.Generator().manual_seed(1)
    for step in range(40):
        batch = 8 + step % 3
        x = torch.randn(batch, 12, generator=g)
        target = F.one_hot(torch.randint(0, 5, (batch,), generator=g), 5).float()
        scale = 0.5 + 0.037 * step  # a new float on ctx every step
        lr = 0.2 / (1.0 + 0.1 * step)
        loss = compiled(x, target, scale)
        loss_ref = ref(x, target, scale)
        torch.testing.assert_close(loss, loss_ref, rtol=1e-4, atol=1e-4)
        loss.backward()
        loss_ref.backward()
        with torch.no_grad():  # the SGD update, eager code outside the compiled forward
            for p, q in zip(model.parameters(), ref.parameters()):
                p -= lr * p.grad
                q -= lr * q.grad
                p.grad = None
                q.grad = None
    for p, q in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-4)
    s = framejit.stats(Classifier.forward)
    assert s["compiles"] == 1 and s["recompiles"] == 0, s
    assert s["graph_breaks"] == 0 and s["fallbacks"] == 0, framejit.fallbacks(Classifier.forward)
    assert s["cache_hits"] == 39, s


class CubeSetup(torch.autograd.Function):
    """The newer style: forward without ctx, setup_context, and a once_differentiable
    backward."""

    @staticmethod
    def forward(x, k):
        return x ** 3 * k

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, k = inputs
        ctx.save_for_backward(x)
        ctx.k = k

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * 3 * x * x * ctx.k, None


def test_setup_context_and_once_differentiable():
    def f(x, k):
        return CubeSetup.apply(x, k).tanh()

    cf = framejit.compile(f)
    for k in (0.5, 2.0):
        x = leaf(6, seed=int(k * 10))
        xe = twin(x)
        y, ye = cf(x, k), f(xe, k)
        torch.testing.assert_close(y, ye)
        y.sum().backward()
        ye.sum().backward()
        torch.testing.assert_close(x.grad, xe.grad)
    assert_no_fallback(f)
