"""NumPy arrays made in a compiled frame (interp/trace/ops_arrays.cpp): np.arange /
zeros / ones / asarray / array of numbers and tensor.numpy() are traced as the tensor
that holds their elements, sharing memory both ways as eager's do; returned arrays are
real ndarrays. What NumPy would compute by other rules than torch's runs in CPython."""
import numpy as np
import pytest
import torch

import framejit
from conftest import assert_same, compiled_whole as whole, same_outcome


def test_arrays_made_from_numbers_become_tensors():
    def f(x, n, vals):
        a = np.arange(n, dtype=np.float32)
        b = np.asarray(vals, dtype=np.float32)
        z = np.zeros(2, dtype=np.float32)
        return x.sum() + torch.from_numpy(a), torch.as_tensor(b) + x.mean(), z.dtype == np.float32, x * z.size

    whole(f, [(torch.randn(3), 3, [1.0, 2.0]), (torch.randn(4), 5, [3.0, 4.0, 5.0])])


def test_numpy_default_dtypes_are_numpy_s():
    def f(x, n):
        return np.zeros(n), np.ones((2, n), dtype=np.int32), np.asarray([1, 2, n]), np.arange(n), x

    out = whole(f, [(torch.randn(2), 3), (torch.randn(2), 4)])
    assert out[0][0].dtype == np.float64 and out[0][2].dtype == np.int64


def test_tensor_numpy_shares_memory_both_ways():
    def f(x):
        a = x.numpy()
        a[0] = 5
        return a * 2, a.shape, a.dtype.name, a.ndim, x + 1

    x = torch.arange(4.0)
    out = whole(f, [(x.clone(),), (torch.randn(6),)])
    assert out[0][0][0] == 10.0
    whole(lambda t: t.numpy(), [(x,)])
    y = torch.zeros(3)
    framejit.compile(lambda t: t.numpy())(y)[1] = 7  # the returned array is the tensor's memory
    assert y[1].item() == 7
    t = torch.zeros(3)
    framejit.reset()
    arr = framejit.compile(lambda t: torch.tensor(t.numpy()))(t)
    t[0] = 1
    assert arr[0].item() == 0  # torch.tensor() of an array copies it


@pytest.mark.parametrize("body", [
    lambda a: a[1], lambda a: a / 2, lambda a: a > 1, lambda a: -a, lambda a: a.sum(), lambda a: len(a),
    lambda a: type(a).__name__, lambda a: [float(v) for v in a], lambda a: np.arange(3) * 2.5, lambda a: a.tolist(),
    lambda a: str(a), lambda a: a * 1e10 if a.dtype == np.int64 else a + 2, lambda a: (a > 1).astype(np.int64) * 3,
])
def test_what_numpy_does_its_own_way_gives_eager_s_result(body):
    def f(x):
        return body(x.numpy()), x * 2
    framejit.reset()
    same_outcome(framejit.compile(f), f, torch.arange(4.0))
    same_outcome(framejit.compile(f), f, torch.arange(4))


def test_numpy_of_a_tensor_that_requires_grad_raises_eager_s_error():
    def f(x):
        return x.numpy()
    framejit.reset()
    same_outcome(framejit.compile(f), f, torch.ones(3, requires_grad=True))


def test_item_assignment_that_numpy_would_refuse_runs_in_cpython():
    def f(x, v):
        a = x.numpy()
        a[0] = v
        return x

    for x, v in ((torch.zeros(3, dtype=torch.int32), 2 ** 40), (torch.zeros(3, dtype=torch.uint8), 300),
                 (torch.zeros(3, dtype=torch.int64), 2.5), (torch.zeros(3), 2.5)):
        framejit.reset()
        same_outcome(framejit.compile(f), f, x.clone(), v)


def test_numpy_array_arguments_are_the_tensors_of_their_memory():
    def shares(a):
        t = torch.from_numpy(a)
        t.add_(1)
        return a, t, t.dtype

    def copies(a):
        t = torch.tensor(a)
        a[0] = 100
        return t, a

    framejit.reset()
    f = framejit.compile(shares)
    for make in (lambda: np.ones((2, 2), dtype=np.float32), lambda: np.zeros((3, 1), dtype=np.float32),
                 lambda: np.arange(6, dtype=np.int64).reshape(2, 3)[:, ::2], lambda: np.ones(4)):
        a, b = make(), make()
        got, want = f(a), shares(b)
        assert_same(got, want)
        assert got[0] is a and np.array_equal(a, b)  # the argument itself, written in place
    assert framejit.stats(shares)["fallbacks"] == 0
    whole(copies, [(np.array([1, 2, 3], dtype=np.int64),), (np.array([4, 5], dtype=np.int64),)])


@pytest.mark.parametrize("make", [lambda: np.ones(3, dtype=">f4"), lambda: np.ones(3, dtype=np.float16),
                                  lambda: np.ones(3, dtype=np.complex64), lambda: np.array(["a", "b"])])
def test_numpy_arrays_torch_cannot_read_as_they_are_run_in_cpython(make):
    def f(a):
        return torch.from_numpy(a) * 2, a
    framejit.reset()
    same_outcome(framejit.compile(f), f, make())


def test_a_numpy_argument_then_a_tensor_argument_recompiles():
    def f(a):
        return a * 2
    framejit.reset()
    cf = framejit.compile(f)
    for a in (np.ones(3, dtype=np.float32), torch.ones(3), np.ones(4, dtype=np.float32), torch.ones(5)):
        assert_same(cf(a), f(a))


def test_numpy_calls_on_an_array_are_graph_breaks_not_fallbacks():
    def f(x):
        y = x * 2
        a = y.numpy()
        b = a.copy()  # NumPy's own method: a call CPython runs between graphs
        return torch.from_numpy(b) + 1, np.sort(a), a.sum(), x - 1

    framejit.reset()
    cf = framejit.compile(f)
    for n in (4, 5, 4):
        x = torch.randn(n)
        got, want = cf(x), f(x)
        assert_same(got[0], want[0])
        assert np.array_equal(got[1], want[1]) and got[2] == want[2]
    s = framejit.stats(f)
    assert s["fallbacks"] == 0 and s["graph_breaks"] >= 1, s
