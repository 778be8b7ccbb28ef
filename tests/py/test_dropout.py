"""Dropout in training under framejit.compile against eager with the same torch seed:
the noise is drawn at run time by torch as eager draws it (bernoulli_(1 - p) / (1 - p)),
so masks, values and gradients are eager's bit for bit, with and without autograd."""
import torch
import torch.nn as nn
import torch.nn.functional as F

import framejit


def equal(a, b):
    """Bit-identical tensors (NaN where the other has NaN)."""
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a.nan_to_num(), b.nan_to_num()) and \
        torch.equal(a.isnan(), b.isnan())


def seeded(fn, seed, *args):
    """fn(*args) after torch.manual_seed(seed), and the next draw of the generator (it
    shows how far the call moved the generator)."""
    torch.manual_seed(seed)
    out = fn(*args)
    return out, torch.rand(4)


def no_fallback(fn):
    s = framejit.stats(fn)
    assert s["fallbacks"] == 0 and s["graph_breaks"] == 0 and s["compiles"] == 1, s


def test_forward_values_with_grad_match_eager():
    def f(x):
        return F.dropout(x * 2, 0.5, True) + 1
    cf = framejit.compile(f)
    x = torch.randn(16, 33, requires_grad=True)
    for seed in (0, 1, 2):
        (want, after_want), (got, after_got) = seeded(f, seed, x), seeded(cf, seed, x)
        assert equal(got.detach(), want.detach()) and equal(after_got, after_want)
        assert got.requires_grad
    no_fallback(f)


class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(9, 7)

    def forward(self, x):
        return (F.dropout(self.lin(x), 0.3, True).tanh() * x[:, :7]).sum()


def test_gradients_of_inputs_and_params_match_eager():
    torch.manual_seed(0)
    head = Head()
    compiled = framejit.compile(head)
    x = torch.randn(6, 9, requires_grad=True)
    grads = []
    for fn in (head, compiled):
        head.zero_grad(set_to_none=True)
        x.grad = None
        torch.manual_seed(7)
        fn(x).backward()
        grads.append([x.grad.clone(), head.lin.weight.grad.clone(), head.lin.bias.grad.clone()])
    # The masks are eager's bit for bit, but tanh may differ from eager's by an ulp (eager's
    # vector tanh is another polynomial on AVX-512 machines), and the weight gradient sums
    # six such products: float32's 1e-5 relative, as everywhere else.
    for got, want in zip(grads[1], grads[0]):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    s = framejit.stats()
    assert s["fallbacks"] == 0 and s["graph_breaks"] == 0 and s["compiles"] == 1, s


def test_two_dropouts_and_rand_like_draw_in_eagers_order():
    # torch.rand_like of a tensor that requires grad is a random extern call whose
    # result needs no gradient: it stays in the graph under autograd.
    def f(x):
        a = F.dropout(x, 0.2, True)
        r = torch.rand_like(x)
        b = F.dropout(a * r, 0.7, True)
        return (a + b).sum(), a, b
    cf = framejit.compile(f)
    x = torch.randn(5, 8, requires_grad=True)
    for seed in (3, 4):
        (want, after_want), (got, after_got) = seeded(f, seed, x), seeded(cf, seed, x)
        torch.testing.assert_close(got[0], want[0], rtol=1e-6, atol=1e-6)  # a sum: another order
        assert equal(got[1].detach(), want[1].detach()) and equal(got[2].detach(), want[2].detach())
        assert equal(after_got, after_want)
    torch.manual_seed(5)
    f(x)[0].backward()
    want = x.grad.clone()
    x.grad = None
    torch.manual_seed(5)
    cf(x)[0].backward()
    torch.testing.assert_close(x.grad, want, rtol=1e-6, atol=1e-7)
    no_fallback(f)


def test_dropout_module_in_train_and_eval():
    model = nn.Sequential(nn.Linear(6, 12), nn.ReLU(), nn.Dropout(0.25), nn.Linear(12, 3))
    cm = framejit.compile(model)
    x = torch.randn(10, 6)
    for train in (True, False):
        model.train(train)
        (want, after_want), (got, after_got) = seeded(model, 11, x), seeded(cm, 11, x)
        torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-7)
        assert equal(after_got, after_want)  # eval draws nothing; train draws once
    s = framejit.stats()
    assert s["fallbacks"] == 0 and s["graph_breaks"] == 0, s


def test_mlp_training_loop_matches_eager():
    def make():
        torch.manual_seed(0)
        return nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Dropout(0.3), nn.Linear(32, 16), nn.GELU(),
                             nn.Dropout(0.1), nn.Linear(16, 1))
    eager, twin = make(), make()
    compiled = framejit.compile(twin)
    runs = []
    for model, run in ((eager, eager), (twin, compiled)):
        opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        losses = []
        for step in range(3):
            g = torch.Generator().manual_seed(100 + step)
            x, y = torch.randn(4 + step, 8, generator=g), torch.randn(4 + step, 1, generator=g)
            torch.manual_seed(1000 + step)
            opt.zero_grad(set_to_none=True)
            loss = F.mse_loss(run(x), y)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        runs.append((losses, model.state_dict()))
    (want_losses, want_state), (got_losses, got_state) = runs
    for got, want in zip(got_losses, want_losses):
        assert abs(got - want) <= 1e-6 * abs(want), (got_losses, want_losses)
    for k, v in want_state.items():
        torch.testing.assert_close(got_state[k], v, rtol=1e-6, atol=1e-6)
    s = framejit.stats()
    assert s["fallbacks"] == 0 and s["graph_breaks"] == 0, s


def test_p0_returns_the_input_and_p1_multiplies_by_zero():
    def f(x):
        return F.dropout(x, 0.0, True), F.dropout(x * 1, 1.0, True)
    cf = framejit.compile(f)
    x = torch.tensor([float("nan"), -1.5, float("inf"), 2.0], requires_grad=True)
    (want, after_want), (got, after_got) = seeded(f, 0, x), seeded(cf, 0, x)
    assert got[0] is x and want[0] is x
    assert equal(got[1].detach(), want[1].detach())  # NaN and inf times 0 are NaN
    assert equal(after_got, after_want)  # neither draws
    (got[0].sum() + got[1].sum()).backward()
    g = x.grad.clone()
    x.grad = None
    (want[0].sum() + want[1].sum()).backward()
    assert equal(g, x.grad)
    no_fallback(f)


def test_feature_dropout_draws_per_channel():
    def f(x):
        return F.dropout2d(x, 0.4, True) * 2
    cf = framejit.compile(f)
    x = torch.randn(3, 5, 4, 4, requires_grad=True)
    (want, after_want), (got, after_got) = seeded(f, 2, x), seeded(cf, 2, x)
    assert equal(got.detach(), want.detach()) and equal(after_got, after_want)
    no_fallback(f)


def test_unused_dropout_still_moves_the_generator():
    def f(x):
        torch.dropout(x, 0.5, True)
        return x
    cf = framejit.compile(f)
    x = torch.randn(7)
    for seed in (0, 1):
        (_, after_want), (got, after_got) = seeded(f, seed, x), seeded(cf, seed, x)
        assert got is x and equal(after_got, after_want)


def test_noncontiguous_input_is_eagers_dropout():
    # The noise follows the input's memory order in eager: a transposed input is not
    # lowered, and the result is still eager's.
    def f(x):
        return F.dropout(x, 0.5, True) + 1
    cf = framejit.compile(f)
    x = torch.randn(6, 5).t()
    (want, after_want), (got, after_got) = seeded(f, 9, x), seeded(cf, 9, x)
    assert equal(got, want) and equal(after_got, after_want)


def test_inplace_dropout_writes_the_tensor_as_eager():
    def f(x, w):
        h = x * w
        F.dropout(h, 0.5, True, inplace=True)
        return h + 1, F.dropout(x, 0.3, True, inplace=True)
    cf = framejit.compile(f)
    w = torch.randn(4, 6, requires_grad=True)
    for with_grad in (False, True):
        x1, x2 = torch.randn(4, 6), None
        x2 = x1.clone()
        wi = w if with_grad else w.detach()
        (want, after_want), (got, after_got) = seeded(f, 4, x1, wi), seeded(cf, 4, x2, wi)
        assert equal(got[0].detach(), want[0].detach()) and equal(after_got, after_want)
        assert got[1] is x2 and equal(x1, x2)  # the input itself, written
        if not with_grad:  # writing an input in a frame that needs autograd falls back
            no_fallback(f)


def test_inplace_dropout_of_a_result_differentiates_as_eager():
    def f(x, w):
        h = x * w
        F.dropout(h, 0.5, True, inplace=True)
        return (h * h).sum()
    cf = framejit.compile(f)
    x, w = torch.randn(4, 6), torch.randn(4, 6, requires_grad=True)
    grads = []
    for fn in (f, cf):
        w.grad = None
        torch.manual_seed(6)
        fn(x, w).backward()
        grads.append(w.grad.clone())
    assert equal(grads[1], grads[0])
    no_fallback(f)


def test_inplace_dropout_of_a_leaf_that_requires_grad_raises_as_eager():
    def f(x):
        return F.dropout(x, 0.5, True, inplace=True)
    x = torch.randn(3, requires_grad=True)
    try:
        f(x)
    except RuntimeError as e:
        want = str(e)
    try:
        framejit.compile(f)(x)
    except RuntimeError as e:
        assert str(e) == want
    else:
        raise AssertionError("no error")
