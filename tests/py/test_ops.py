"""Each pointwise op of the skeleton, through framejit, against eager PyTorch:
torch functions, tensor methods and operators, with broadcasting and scalars."""
import operator

import pytest
import torch
import torch.nn.functional as F

import framejit
from conftest import assert_same

UNARY = {
    "neg": lambda x: -x,
    "abs": torch.abs,
    "abs_builtin": lambda x: abs(x),
    "exp": torch.exp,
    "log": lambda x: torch.log(x.abs() + 0.5),
    "sqrt": lambda x: x.abs().sqrt(),
    "sin": torch.sin,
    "cos": lambda x: x.cos(),
    "tanh": torch.tanh,
    "sigmoid": torch.sigmoid,
    "sigmoid_method": lambda x: x.sigmoid(),
    "relu": torch.relu,
    "relu_functional": lambda x: F.relu(x),
    "pow2": lambda x: x ** 2,
    "pow3": lambda x: torch.pow(x, 3),
    "pow_half": lambda x: x.abs() ** 0.5,
    "pow_neg1": lambda x: (x.abs() + 1) ** -1,
    "pow_2_5": lambda x: (x.abs() + 1) ** 2.5,
}

BINARY = {
    "add": operator.add, "sub": operator.sub, "mul": operator.mul, "div": operator.truediv,
    "torch_add": torch.add, "torch_sub": torch.sub, "method_mul": lambda a, b: a.mul(b),
    "torch_div": torch.div, "maximum": torch.maximum, "minimum": torch.minimum,
    "lt": operator.lt, "le": operator.le, "gt": operator.gt, "ge": operator.ge,
    "eq": operator.eq, "ne": operator.ne, "torch_gt": torch.gt,
}

SCALAR = {
    "add_int": lambda x: x + 2, "radd_float": lambda x: 0.5 + x, "rsub": lambda x: 1 - x,
    "rdiv": lambda x: 3 / (x.abs() + 1), "mul_bool": lambda x: x * True, "lt_zero": lambda x: x < 0,
    "where": lambda x: torch.where(x > 0, x, x * 0.1), "where_scalar": lambda x: torch.where(x > 0, x, 0.0),
}


def check(fn, *args):
    if not isinstance(fn, type(check)):
        op = fn
        fn = (lambda x: op(x)) if len(args) == 1 else (lambda a, b: op(a, b))  # noqa: E731
    cf = framejit.compile(fn)
    assert_same(cf(*args), fn(*args))
    s = framejit.stats(fn)
    assert s["graphs"] == 1 and s["fallbacks"] == 0, framejit.fallbacks(fn)


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary(name):
    x = torch.randn(5, 7)
    x[0, 0] = 0.0
    check(UNARY[name], x)


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_with_broadcast(name):
    a = torch.randn(4, 1, 6)
    b = torch.randn(3, 1)
    b[0, 0] = a[0, 0, 0]  # an equal pair for eq/ne
    check(BINARY[name], a, b)


@pytest.mark.parametrize("name", sorted(SCALAR))
def test_with_python_scalars(name):
    check(SCALAR[name], torch.randn(9))


def test_nan_and_inf_follow_eager():
    x = torch.tensor([float("nan"), float("inf"), -float("inf"), -0.0, 0.0, 1.0])
    check(lambda x: torch.relu(x) + torch.maximum(x, x * 0) + torch.sigmoid(x), x)


def test_bool_tensor_input_and_output():
    m = torch.randn(10) > 0
    x = torch.randn(10)
    check(lambda m, x: torch.where(m, x, -x), m, x)
    check(lambda x: (x > 0, x * 2), x)


def test_returns_inputs_constants_and_structures():
    x = torch.randn(3)

    def g(x, k):
        return [x, (x + k, None), k, "s"]

    cf = framejit.compile(g)
    out = cf(x, 2)
    assert_same(out, g(x, 2))
    assert out[0] is x
    assert framejit.stats(g)["graphs"] == 1


def test_scalar_argument_kinds_are_guarded():
    def g(x, k):
        return x * k

    cf = framejit.compile(g)
    x = torch.randn(3)
    for k in (2, 3, -7, 2.5, 0.1, 1, True):
        assert_same(cf(x, k), g(x, k))
    # ints other than 0 and 1 share a symbolic entry; floats, the int 1 and bools have their own
    assert framejit.stats(g)["compiles"] == 4


SCALE = 2.0


def uses_global(x):
    return x * SCALE


def test_globals_are_guarded():
    global SCALE
    cf = framejit.compile(uses_global)
    x = torch.randn(4)
    assert_same(cf(x), x * 2.0)
    SCALE = 3.0
    try:
        assert_same(cf(x), x * 3.0)
        assert framejit.stats(uses_global)["recompiles"] == 1
    finally:
        SCALE = 2.0


def test_constant_branches_are_followed():
    def g(x, flag, bias):
        if flag:
            x = x + 1
        if bias is not None:
            x = x * bias
        return x

    cf = framejit.compile(g)
    x = torch.randn(4)
    b = torch.randn(4)
    for flag in (True, False):
        for bias in (None, b):
            assert_same(cf(x, flag, bias), g(x, flag, bias))
    s = framejit.stats(g)
    assert s["fallbacks"] == 0
    assert s["compiles"] == 4 and s["graphs"] == 3  # (False, None) only returns x


def test_unsupported_dtype_falls_back():
    x = torch.arange(6, dtype=torch.int16)  # int16: not in the graph's dtypes
    check_fn = lambda x: x * 2  # noqa: E731
    cf = framejit.compile(check_fn)
    assert_same(cf(x), check_fn(x))
    assert framejit.stats(check_fn)["fallbacks"] == 1
    assert "dtype" in framejit.fallbacks(check_fn)[0].reason


def test_inplace_on_input_falls_back_and_mutates_like_eager():
    def g(x):
        x += 1
        return x

    cf = framejit.compile(g)
    a = torch.zeros(3)
    b = torch.zeros(3)
    out = cf(a)
    g(b)
    assert_same(a, b)
    assert out is a
