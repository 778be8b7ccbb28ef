"""Symbolic scalars: Python ints, floats and bools never force a recompile, except
the ints 0 and 1 and conditions that decide control flow (guarded)."""
import pytest
import torch

import framejit
from conftest import assert_same, run_python, same_outcome


def test_int_argument_compiles_once():
    def f(x, n):
        return x * n + n

    cf = framejit.compile(f)
    x = torch.randn(5)
    for n in range(2, 102):
        assert_same(cf(x, n), f(x, n))
    s = framejit.stats(f)
    assert s["compiles"] == 1 and s["cache_hits"] == 99


def test_zero_and_one_are_specialized():
    def f(x, n):
        return x * n + n

    cf = framejit.compile(f)
    x = torch.randn(5)
    for n in range(0, 6):
        assert_same(cf(x, n), f(x, n))
    assert framejit.stats(f)["compiles"] == 3


def test_learning_rate_sweep_compiles_once():
    def step(w, g, lr):
        return w - lr * g

    cf = framejit.compile(step)
    w, g = torch.randn(64), torch.randn(64)
    for i in range(50):
        lr = 0.001 * (i + 1) + 1e-7 * i * i
        assert_same(cf(w, g, lr), step(w, g, lr))
    assert framejit.stats(step)["compiles"] == 1


def test_branch_on_int_guards_the_condition():
    def f(x, y):
        if y == 2:
            return x + 1
        return x - 1

    cf = framejit.compile(f)
    x = torch.randn(3)
    for y in (2, 3, 4, 5, 2, 7):
        assert_same(cf(x, y), f(x, y))
    assert framejit.stats(f)["compiles"] == 2


@pytest.mark.parametrize("n", [2, 7, -3, -8, 123456789])
def test_scalar_results_follow_python_semantics(n):
    def f(x, n):
        return x + 1, n * 2 + 1, n / 2, n // 3, -n % 5, n ** 2, n > 3, n * 0.5, 7 // n, 7 % n

    cf = framejit.compile(f)
    assert_same(cf(torch.ones(2), n), f(torch.ones(2), n))


def test_many_scalar_values_share_one_entry_and_return_python_numbers():
    def f(x, n, lr):
        return x * lr, n * 3 - 1, lr * n

    cf = framejit.compile(f)
    x = torch.randn(4)
    for n, lr in [(2, 0.5), (9, 1.25), (-4, -0.1), (1000, 3.0)]:
        assert_same(cf(x, n, lr), f(x, n, lr))
    assert framejit.stats(f)["compiles"] == 1


def test_bool_flag_compiles_at_most_three_times():
    def f(x, flag):
        if flag:
            return x * 2
        return x

    cf = framejit.compile(f)
    x = torch.randn(3)
    for flag in (True, False, None, True, False, None):
        assert_same(cf(x, flag), f(x, flag))
    assert framejit.stats(f)["compiles"] <= 3


def test_division_by_zero_raises_like_eager_and_recovers():
    def f(x, lr):
        return x * (1 / lr)

    cf = framejit.compile(f)
    x = torch.randn(3)
    assert_same(cf(x, 0.5), f(x, 0.5))
    with pytest.raises(ZeroDivisionError) as eager:
        f(x, 0.0)
    with pytest.raises(ZeroDivisionError) as compiled:
        cf(x, 0.0)
    assert str(compiled.value) == str(eager.value)
    with pytest.raises(ZeroDivisionError):
        cf(x, 0.0)  # the zero's own entry (lr == 0.0, its sign guarded) raises again
    assert_same(cf(x, 0.25), f(x, 0.25))
    s = framejit.stats(f)
    assert s["compiles"] == 2 and s["cache_hits"] == 2, s


def test_ints_beyond_int64_are_constants():
    def f(x, n):
        return x + 1, n * 2

    cf = framejit.compile(f)
    big = 2 ** 70
    assert_same(cf(torch.ones(2), big), f(torch.ones(2), big))
    assert_same(cf(torch.ones(2), 5), f(torch.ones(2), 5))


def test_overflow_at_run_time_runs_eagerly():
    def f(x, n):
        return x + 1, n * n

    cf = framejit.compile(f)
    assert_same(cf(torch.ones(2), 3), f(torch.ones(2), 3))
    n = 2 ** 40  # n*n leaves int64: the symbolic entry must not answer
    assert_same(cf(torch.ones(2), n), f(torch.ones(2), n))


def test_recompile_log_names_the_source():
    out = run_python(
        "import torch, framejit\n"
        "def f(x, y):\n"
        "    if y == 2:\n"
        "        return x + 1\n"
        "    return x - 1\n"
        "cf = framejit.compile(f)\n"
        "cf(torch.ones(2), 2); cf(torch.ones(2), 3)\n",
        env={"FRAMEJIT_LOG": "recompiles"})
    assert out.returncode == 0, out.stderr
    assert "recompiling f (<string>:2): L['y'] == 2 is no longer true" in out.stderr, out.stderr


def test_explain_shows_symbolic_guards():
    def f(x, n):
        if n > 4:
            return x * n
        return x

    e = framejit.explain(f, torch.ones(2), 7)
    assert "L['n'] is an int other than 0 and 1 (s1)" in e.guards  # s0 is x's size
    assert "L['n'] > 4" in e.guards
    assert "scalar_input[0]" in e.graphs[0]


def test_sizes_flow_into_python_arithmetic():
    def f(x):
        n = x.shape[0] * 2 + x.size(1) + x.size(-1) + len(x) + x.dim() + x.numel()
        return x * n, n, x.ndim, x.size()

    cf = framejit.compile(f)
    for shape in [(2, 3), (5, 7)]:
        x = torch.randn(shape)
        assert_same(cf(x), f(x))
    assert framejit.stats(f)["fallbacks"] == 0


def test_size_sweep_compiles_once():
    def f(x, y):
        return x * y

    cf = framejit.compile(f)
    for n in range(2, 65):
        x, y = torch.randn(n), torch.randn(n)
        assert_same(cf(x, y), f(x, y))
    assert framejit.stats(f)["compiles"] == 1


def test_equal_sizes_are_not_assumed_equal_unless_an_op_needs_it():
    def f(x, y):
        return x + 1, y * 2

    cf = framejit.compile(f)
    a, c = torch.randn(5), torch.randn(5)
    assert_same(cf(a, c), f(a, c))
    b = torch.randn(7)
    assert_same(cf(a, b), f(a, b))
    assert framejit.stats(f)["compiles"] == 1


def test_broadcast_equality_is_guarded_and_mismatch_raises_like_eager():
    def f(x, y):
        return x * y + 1

    cf = framejit.compile(f)
    x, y = torch.randn(3, 4), torch.randn(4)
    assert_same(cf(x, y), f(x, y))
    x, y = torch.randn(6, 9), torch.randn(9)
    assert_same(cf(x, y), f(x, y))
    assert framejit.stats(f)["compiles"] == 1
    x, y = torch.randn(3, 4), torch.randn(5)
    with pytest.raises(RuntimeError) as eager:
        f(x, y)
    with pytest.raises(RuntimeError) as compiled:
        cf(x, y)
    assert str(compiled.value) == str(eager.value)


def test_symbolic_sizes_in_python_arithmetic_and_ops():
    def f(x, n):
        m = x.shape[0] * 2 + n
        return x * m, m // 3, x.shape

    cf = framejit.compile(f)
    for size, n in [(4, 5), (9, 2), (13, -6)]:
        x = torch.randn(size, 3)
        assert_same(cf(x, n), f(x, n))
    assert framejit.stats(f)["compiles"] == 1


def test_true_division_of_a_number_read_from_a_tensor_by_zero_raises():
    # x.sum().item() / 0.0 raises ZeroDivisionError in Python; the graph would give inf:
    # a zero divisor sends the call to CPython, which raises (other divisors compile)
    def f(x, n):
        return x.sum().item() / float(x.numel() - n), int(x.sum()) / 4

    framejit.reset()
    cf = framejit.compile(f)
    x = torch.ones(3)
    for n in (2, 3, 4, 3):
        same_outcome(cf, f, x, n, errors=(ZeroDivisionError,))
    assert framejit.stats(cf)["compiles"] == 1
