"""Tensor creation ops and Python numbers read from tensors through framejit."""
import pytest
import torch
import torch.nn as nn

import framejit
from _opcheck import check

X = torch.randn(3, 4)
CREATE = {
    "zeros": lambda x: torch.zeros(3, 4) + x,
    "zeros_tuple": lambda x: torch.zeros((2, 3)),
    "ones_dtype": lambda x: torch.ones(x.shape, dtype=torch.int64),
    "ones_shape_arg": lambda x: torch.ones(x.size(0), 1) * x,
    "empty_as_zeros": lambda x: torch.empty(0, 4),
    "full": lambda x: torch.full((3, 4), 2.5) + x,
    "full_int": lambda x: torch.full((2,), 7),
    "full_bool": lambda x: torch.full((2, 2), True),
    "full_dtype": lambda x: torch.full((2,), 3, dtype=torch.float64),
    "arange": lambda x: torch.arange(4) + x,
    "arange_start": lambda x: torch.arange(1, 9),
    "arange_step": lambda x: torch.arange(1, 10, 3),
    "arange_neg_step": lambda x: torch.arange(10, 1, -2),
    "arange_float": lambda x: torch.arange(0.0, 1.0, 0.25),
    "arange_dtype": lambda x: torch.arange(5, dtype=torch.float32),
    "arange_size": lambda x: torch.arange(x.shape[1]) * x,
    "linspace": lambda x: torch.linspace(0, 1, 5),
    "linspace_neg": lambda x: torch.linspace(-2.5, 4.0, steps=7),
    "eye": lambda x: torch.eye(3) @ x,
    "eye_rect": lambda x: torch.eye(2, 4, dtype=torch.int64),
    "zeros_like": lambda x: torch.zeros_like(x),
    "ones_like_dtype": lambda x: torch.ones_like(x, dtype=torch.int32),
    "full_like": lambda x: torch.full_like(x, 3.0),
    "tril": lambda x: torch.tril(x),
    "triu_diag": lambda x: x.triu(1),
    "tril_neg": lambda x: torch.tril(x, diagonal=-1),
    "tril_bool": lambda x: torch.tril(x > 0),
    "device_kw": lambda x: torch.zeros(2, device="cpu"),
}


@pytest.mark.parametrize("name", sorted(CREATE))
def test_create(name):
    fn = CREATE[name]
    check(lambda x: fn(x), X)


def test_arange_symbolic_end_one_compile():
    def f(x, n):
        return torch.arange(n) * x[0]

    cf = framejit.compile(f)
    for n in (3, 7, 11):
        x = torch.randn(1)
        torch.testing.assert_close(cf(x, n), f(x, n))
    s = framejit.stats(f)
    assert s["compiles"] == 1 and s["fallbacks"] == 0, s


def test_empty_like_shape_only():
    def f(x):
        return torch.empty_like(x).shape

    assert framejit.compile(f)(X) == X.shape


def test_float_of_float32_sum_within_tolerance():
    def f(x):
        return float(x.sum())

    r = framejit.compile(f)(X)
    assert type(r) is float and abs(r - f(X)) <= 1e-5 * max(1.0, abs(f(X)))
    assert framejit.stats(f)["fallbacks"] == 0


def test_random_ops_fall_back():
    def f(x):
        return x + torch.randn(3)

    cf = framejit.compile(f)
    assert cf(torch.zeros(3)).shape == (3,)
    # torch.randn is not compiled: it runs in torch, as a call step of the plan.
    s = framejit.stats(f)
    assert s["graph_breaks"] == 1 and s["fallbacks"] == 0 and s["compiles"] == 1


NUMBERS = {
    "int": lambda x: int(x[0, 0] * 10),
    "float": lambda x: float(x[1, 2]),
    "float_sum": lambda x: float(x.sum() * 0 + 1.5),
    "bool": lambda x: bool(x[0, 0] > 0),
    "item_float": lambda x: x.max().item(),
    "item_int": lambda x: x.argmax().item(),
    "item_bool": lambda x: (x > 0).all().item(),
    "int_plus_one": lambda x: int(x[1, 1] * 100) + 1,
    "int_ops": lambda x: (int(x[0, 0] * 10) * 3 - 2) // 4,
    "true_div": lambda x: int(x[0, 1] * 10) / 3,
    "float_mix": lambda x: float(x[0, 0]) * 2 + int(x[1, 0] * 5),
    "negate": lambda x: -int(x[0, 2] * 7),
    "compare": lambda x: int(x[0, 0] * 10) < 3,
    "as_operand": lambda x: x * x.sum().item(),
    "in_tuple": lambda x: (x.sum(), int(x[0, 0] * 10)),
}


@pytest.mark.parametrize("name", sorted(NUMBERS))
def test_numbers(name):
    fn = NUMBERS[name]
    check(lambda x: fn(x), X)


def test_issue4_int_of_tensor_in_module():
    class M(nn.Module):
        def forward(self, x):
            return int(x)

    m = M()
    cm = framejit.compile(m)
    for v in (3.7, -2.2, 41.0):
        t = torch.tensor(v)
        r = cm(t)
        assert type(r) is int and r == int(t)
    s = framejit.stats(M.forward)
    assert s["fallbacks"] == 0 and s["compiles"] == 1, framejit.fallbacks(M.forward)
    assert "aten.Int.Tensor" in framejit.explain(M.forward, m, torch.tensor(2.5)).graphs[0]


def helper(t):
    return int(t) + 1


def test_issue4_int_in_helper_same_graph():
    def f(x):
        return x * helper(x.sum())

    x = torch.randn(4)
    check(f, x)
    e = framejit.explain(f, x)
    assert e.graph_count == 1 and "aten.Int.Tensor" in e.graphs[0]


def test_int_of_nan_falls_back_and_raises():
    def f(x):
        return int(x)

    cf = framejit.compile(f)
    assert cf(torch.tensor(2.5)) == 2
    with pytest.raises(ValueError):
        cf(torch.tensor(float("nan")))


def test_branch_on_item_is_a_plan_branch():
    def f(x):
        if x.sum().item() > 0:
            return x + 1
        return x - 1

    cf = framejit.compile(f)
    for sign in (1.0, -1.0, 1.0, -1.0):
        x = torch.rand(5) * sign
        torch.testing.assert_close(cf(x), f(x))
    s = framejit.stats(f)
    assert s["fallbacks"] == 0 and s["compiles"] == 1


def test_torch_tensor_of_python_numbers_is_built_in_the_graph():
    # numbers stay symbolic: a new n or v does not recompile; the dtype is eager's
    # (bool < int64 < float, or dtype=), nested lists are stacked
    def f(x, n, v):
        return (x * torch.tensor([1, 2, n]), torch.tensor([[v, 1.0], [2.0, n]]), torch.tensor(n),
                torch.tensor([True, False]), torch.tensor((1, 2), dtype=torch.float64), torch.tensor([1, 2.5]))

    cf = framejit.compile(f)
    for n, v in [(3, 0.5), (7, 2.5), (11, -1.25)]:
        x = torch.randn(3)
        got, want = cf(x, n, v), f(x, n, v)
        for g, w in zip(got, want):
            assert g.dtype == w.dtype and g.shape == w.shape
            torch.testing.assert_close(g, w)
    s = framejit.stats(f)
    assert (s["compiles"], s["graph_breaks"], s["fallbacks"]) == (1, 0, 0), s


def test_torch_tensor_of_a_ragged_list_raises_as_eager():
    def f(n):
        return torch.tensor([[1, 2], [n]])

    with pytest.raises(ValueError) as want:
        f(3)
    with pytest.raises(ValueError) as got:
        framejit.compile(f)(3)
    assert str(got.value) == str(want.value)
