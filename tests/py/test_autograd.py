"""Compiled backward: frames whose inputs require grad (with grad mode on) compile a
forward and a backward graph; outputs join eager autograd. Gradients are compared with
eager autograd on the same inputs."""
import pytest
import torch
import torch.nn.functional as F

import framejit


def _leaves(tensors):
    return [t.detach().clone().requires_grad_(t.requires_grad) for t in tensors]


def _loss(out, seed=1):
    """A weighted sum of the floating outputs that need a gradient (the same weights
    for eager and compiled), so every output element gets its own gradient."""
    outs = out if isinstance(out, (tuple, list)) else (out,)
    g = torch.Generator().manual_seed(seed)
    total = 0
    for o in outs:
        if isinstance(o, torch.Tensor) and o.requires_grad:
            total = total + (o * torch.randn(o.shape, generator=g, dtype=o.dtype)).sum()
    return total


def check_grads(fn, *inputs, rtol=1e-8, atol=1e-10, backward_graphs=1):
    """Runs fn eagerly and compiled on copies of `inputs`, backpropagates the same loss,
    and compares outputs, requires_grad flags and the inputs' gradients."""
    eager_in, jit_in = _leaves(inputs), _leaves(inputs)
    expected = fn(*eager_in)
    cf = framejit.compile(fn)
    actual = cf(*jit_in)
    exp_t = expected if isinstance(expected, tuple) else (expected,)
    act_t = actual if isinstance(actual, tuple) else (actual,)
    assert len(act_t) == len(exp_t)
    for a, e in zip(act_t, exp_t):
        assert a.requires_grad == e.requires_grad
        assert a.dtype == e.dtype and a.shape == e.shape
        torch.testing.assert_close(a.detach(), e.detach(), rtol=rtol, atol=atol)
        if a.requires_grad:
            assert "CompiledGraphFunction" in type(a.grad_fn).__name__
    _loss(expected).backward()
    _loss(actual).backward()
    for a, e in zip(jit_in, eager_in):
        if e.grad is None:
            assert a.grad is None
        else:
            assert a.grad is not None and a.grad.dtype == e.grad.dtype
            torch.testing.assert_close(a.grad, e.grad, rtol=rtol, atol=atol)
    s = framejit.stats(fn)
    assert s["fallbacks"] == 0, framejit.fallbacks(fn)
    assert s["graph_breaks"] == 0 and s["compiles"] == 1, s
    assert s["graphs"] == 1 + backward_graphs, s
    return cf


def f64(*shape, requires_grad=True, seed=0):
    g = torch.Generator().manual_seed(seed + sum(shape))
    return torch.randn(*shape, generator=g, dtype=torch.float64).requires_grad_(requires_grad)


# ---- the must-show gradients, float64 within 1e-8 ----

def test_tanh_times_mul():
    check_grads(lambda x, y: torch.tanh(x) * y * 3.0, f64(4, 5), f64(4, 5, seed=1))


def test_softmax_and_log_softmax():
    check_grads(lambda x: (torch.softmax(x, -1), torch.log_softmax(x, 0)), f64(6, 7))


def test_layer_norm_with_weight_and_bias():
    check_grads(lambda x, w, b: F.layer_norm(x, (8,), w, b, 1e-5), f64(3, 5, 8), f64(8, seed=1), f64(8, seed=2))


def test_matmul_batched_and_broadcast():
    check_grads(lambda a, b: a @ b, f64(2, 3, 4, 5), f64(5, 6))


def test_exp_div():
    check_grads(lambda x, y: torch.exp(x) / (y * y + 1.0), f64(4, 6), f64(6, seed=3))


def test_log2():
    check_grads(lambda x: torch.log2(x * x + 0.5) * x.log2(), f64(4, 5).abs().detach().requires_grad_())


def test_view_and_transpose():
    check_grads(lambda x, w: (x.view(2, 3, 4).transpose(1, 2) * w).reshape(8, 3), f64(6, 4), f64(3, seed=1))


def test_amax_reductions():
    check_grads(lambda x: (x.amax(-1), x - x.amax(dim=0, keepdim=True)), f64(5, 7))


# ---- dtypes, broadcasting, partial requires_grad, outputs ----

def test_float32_mlp_block():
    torch.manual_seed(0)

    def block(x, w1, b1, w2, b2):
        h = F.gelu(F.linear(F.layer_norm(x, (16,)), w1, b1))
        return x + F.linear(h, w2, b2)

    args = [torch.randn(8, 16), torch.randn(32, 16) * 0.2, torch.randn(32), torch.randn(16, 32) * 0.2,
            torch.randn(16)]
    check_grads(block, *[a.requires_grad_() for a in args], rtol=1e-5, atol=1e-5)


def test_broadcasting_operands_get_summed_gradients():
    check_grads(lambda x, y, z: x * y + z, f64(4, 1, 5), f64(3, 5, seed=1), f64(1, seed=2))


def test_only_some_inputs_require_grad():
    x = f64(4, 5, requires_grad=False)
    check_grads(lambda x, w: torch.sigmoid(x @ w).sum(0), x, f64(5, 3, seed=1))


def test_outputs_that_need_no_gradient():
    def f(x, w):
        y = x * w
        with torch.no_grad():
            z = x * 2.0
        return y, y.argmax(-1), torch.ones(3, dtype=torch.float64), z, y > 0

    check_grads(f, f64(4, 5), f64(5, seed=1))


def test_nn_module_parameters_get_gradients():
    torch.manual_seed(0)

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(6, 4)
            self.norm = torch.nn.LayerNorm(4)

        def forward(self, x):
            return torch.tanh(self.norm(self.fc(x)))

    m = Net()
    ref = Net()
    ref.load_state_dict(m.state_dict())
    cm = framejit.compile(m)
    x = torch.randn(5, 6)
    _loss(cm(x)).backward()
    _loss(ref(x)).backward()
    for (name, p), q in zip(m.named_parameters(), ref.parameters()):
        assert p.grad is not None, name
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-5, atol=1e-6)
    s = framejit.stats(Net.forward)
    assert s["fallbacks"] == 0 and s["graph_breaks"] == 0 and s["graphs"] == 2, s


def test_backward_twice_with_retain_graph():
    def f(x, w):
        return torch.exp(x * w).sum(-1)

    x, w = f64(3, 4), f64(4, seed=1)
    xe, we = _leaves([x, w])
    cf = framejit.compile(f)
    y, ye = cf(x, w), f(xe, we)
    y.sum().backward(retain_graph=True)
    y.sum().backward()
    ye.sum().backward(retain_graph=True)
    ye.sum().backward()
    torch.testing.assert_close(x.grad, xe.grad, rtol=1e-8, atol=0)
    torch.testing.assert_close(w.grad, we.grad, rtol=1e-8, atol=0)
    with pytest.raises(RuntimeError):
        y.sum().backward()  # the saved tensors are freed, as eager's are
    with pytest.raises(RuntimeError):
        ye.sum().backward()


def test_new_sizes_reuse_the_entry_and_its_backward():
    def f(x, w):
        return (torch.tanh(x @ w) * x.shape[0]).mean()

    cf = framejit.compile(f)
    w = f64(4, 3, seed=9)
    for n in (2, 5, 7):
        x = f64(n, 4, seed=n)
        xe, we = _leaves([x, w])
        cf(x, w).backward()
        f(xe, we).backward()
        torch.testing.assert_close(x.grad, xe.grad, rtol=1e-8, atol=1e-12)
        torch.testing.assert_close(w.grad, we.grad, rtol=1e-8, atol=1e-12)
        w.grad = None
    s = framejit.stats(f)
    assert s["compiles"] == 1 and s["recompiles"] == 0 and s["cache_hits"] == 2, s


# ---- grad mode and requires_grad are guarded; no backward without autograd ----

def test_no_backward_is_built_under_no_grad():
    def f(x, w):
        return torch.tanh(x * w)

    cf = framejit.compile(f)
    x, w = f64(3, 4), f64(4, seed=1)
    y = cf(x, w)
    assert y.requires_grad
    assert framejit.stats(f)["graphs"] == 2  # forward and backward
    with torch.no_grad():
        y = cf(x, w)
    assert not y.requires_grad and y.grad_fn is None
    s = framejit.stats(f)
    assert s["compiles"] == 2 and s["graphs"] == 3, s  # the no_grad entry has no backward
    y = cf(x.detach(), w.detach())  # nothing requires grad: a guard miss, no backward
    assert not y.requires_grad
    s = framejit.stats(f)
    assert s["compiles"] == 3 and s["graphs"] == 4 and s["fallbacks"] == 0, s
    torch.testing.assert_close(y, f(x, w).detach())


def test_enable_grad_inside_no_grad():
    def f(x, w):
        with torch.no_grad():
            y = x * w
        with torch.enable_grad():
            z = torch.sin(y * w)
        return y, z

    cf = framejit.compile(f)
    x, w = f64(4), f64(4, seed=1)
    xe, we = _leaves([x, w])
    with torch.no_grad():
        y, z = cf(x, w)
        ye, ze = f(xe, we)
    assert not y.requires_grad and z.requires_grad and ze.requires_grad
    z.sum().backward()
    ze.sum().backward()
    assert x.grad is None and xe.grad is None
    torch.testing.assert_close(w.grad, we.grad, rtol=1e-8, atol=0)
    assert framejit.stats(f)["fallbacks"] == 0


# ---- what framejit cannot differentiate runs in CPython ----

def test_op_without_a_gradient_rule_falls_back_with_its_reason():
    def f(x):
        return x.prod(-1)

    cf = framejit.compile(f)
    x = f64(3, 4)
    xe = _leaves([x])[0]
    cf(x).sum().backward()
    f(xe).sum().backward()
    torch.testing.assert_close(x.grad, xe.grad)
    reasons = [b.reason for b in framejit.fallbacks(f)]
    assert any("no gradient rule for aten.prod" in r for r in reasons), reasons


_LOG = []


def test_graph_break_with_autograd_falls_back():
    log = _LOG
    log.clear()

    def f(x):
        y = x * 2.0
        _LOG.append(1)  # a graph break where tensors do not require grad
        return torch.tanh(y)

    cf = framejit.compile(f)
    x = f64(3)
    cf(x).sum().backward()
    assert log == [1]
    torch.testing.assert_close(x.grad, 2.0 / torch.cosh(2.0 * x.detach()) ** 2)
    assert framejit.stats(f)["fallbacks"] == 1
    assert "no graph break where tensors require grad" in framejit.fallbacks(f)[0].reason
    # Without autograd the same frame compiles around its break.
    torch.testing.assert_close(cf(x.detach()), torch.tanh(2.0 * x.detach()))
    s = framejit.stats(f)
    assert s["graph_breaks"] == 1 and s["fallbacks"] == 1 and s["compiles"] == 1, s


# ---- indexing: embedding, index_select, gather, x[idx] ----

def test_embedding_gradient_accumulates_repeated_ids():
    ids = torch.tensor([[1, 3, 3, 0], [9, 1, 1, 1]])
    check_grads(lambda ids, w, s: F.embedding(ids, w) * s, ids, f64(10, 6), f64(6, seed=1))


def test_index_select_and_negative_indices():
    idx = torch.tensor([6, 0, 6, 2])
    check_grads(lambda x, i: torch.exp(x.index_select(1, i)), f64(2, 7, 3), idx)
    neg = torch.tensor([0, -1, 3, 3, -7])
    check_grads(lambda x, i: torch.sin(x[i]), f64(7, 3), neg)


def test_gather_gradient():
    idx = torch.tensor([[0, 4, 4, 1], [2, 2, 2, 2], [3, 0, 1, 4]])
    check_grads(lambda x, i: torch.gather(x, 1, i) * 2.0, f64(3, 5), idx)


def test_gather_with_a_smaller_index_is_still_right():
    # The index covers fewer rows than x: framejit's rule does not handle it and the
    # frame runs in CPython (eager's gradient, zeros in the rows the index skips).
    def f(x, i):
        return torch.gather(x, 1, i)

    cf = framejit.compile(f)
    x, idx = f64(4, 5), torch.tensor([[0, 4], [2, 2]])
    xe = _leaves([x])[0]
    cf(x, idx).sum().backward()
    f(xe, idx).sum().backward()
    torch.testing.assert_close(x.grad, xe.grad)


def test_gpt_parameters_get_eager_gradients_for_every_sequence_length():
    # examples/transformer.py: embeddings, attention with a causal mask, layer norms,
    # linears, gelu; one compile (forward and backward) for all lengths.
    import os
    import sys

    from conftest import ROOT
    sys.path.insert(0, os.path.join(ROOT, "examples"))
    import transformer

    torch.manual_seed(0)
    model = transformer.GPT(vocab=64, dim=32, heads=4, layers=2, max_len=40)
    ref = transformer.GPT(vocab=64, dim=32, heads=4, layers=2, max_len=40)
    ref.load_state_dict(model.state_dict())
    cm = framejit.compile(model)
    for t in (5, 17, 40):
        ids = torch.randint(0, 64, (2, t))
        out, expected = cm(ids), ref(ids)
        torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-5)
        _loss(out).backward()
        _loss(expected).backward()
        for (name, p), q in zip(model.named_parameters(), ref.parameters()):
            torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-5, msg=name)
            p.grad = q.grad = None
    s = framejit.stats(transformer.GPT.forward)
    assert (s["compiles"], s["graphs"], s["graph_breaks"], s["fallbacks"]) == (1, 2, 0, 0), s


def test_explain_shows_the_backward_graph():
    def f(x, w):
        return torch.tanh(x * w)

    e = framejit.explain(f, f64(3), f64(3, requires_grad=False))
    assert e.graph_count == 2
    forward, backward = e.graphs
    assert "aten.tanh.default" in forward
    # The backward recomputes tanh from the inputs (no saved intermediate) and reads
    # the output's gradient as a third placeholder.
    assert "placeholder[2]" in backward and "aten.tanh.default" in backward and "aten.sub.Tensor" in backward


def test_view_of_an_input_read_by_matmul_and_by_a_kernel():
    # jit/codegen/schedule.cpp: a view that is a matmul operand (read in place when its strides
    # allow) and a reduction's operand (a kernel reads its buffer) must be written. The
    # backward of linear + bias makes this graph; here it is a forward.
    def f(g, w, b):
        t = g.view(g.shape[0], w.shape[0])
        return t @ w, t.sum(0).view(b.shape[0])

    args = (torch.randn(8, 16), torch.randn(16, 32), torch.randn(16))
    cf = framejit.compile(f)
    for a, e in zip(cf(*args), f(*args)):
        torch.testing.assert_close(a, e, rtol=1e-5, atol=1e-5)
    assert framejit.stats(f)["fallbacks"] == 0


def test_double_backward_raises_a_clear_error():
    def f(x):
        return (x ** 3).sum()

    x = torch.randn(4, dtype=torch.float64, requires_grad=True)
    y = framejit.compile(f)(x)
    with pytest.raises(RuntimeError, match="create_graph=True"):
        torch.autograd.grad(y, x, create_graph=True)
    # A plain backward of a new call still works, and matches eager.
    x2 = x.detach().clone().requires_grad_(True)
    framejit.compile(f)(x).backward()
    f(x2).backward()
    assert torch.allclose(x.grad, x2.grad)
