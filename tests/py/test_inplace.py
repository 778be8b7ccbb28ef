"""In-place ops (add_, x += y, x[i] = v, copy_, ...) with eager's aliasing semantics:
compiled results, the caller's tensors afterwards, and what falls back."""
import pytest
import torch

import framejit
from conftest import assert_same, same_outcome


def clone_args(args):
    """Clones of the arguments; a tensor passed twice stays one object (aliasing)."""
    memo = {}

    def one(a):
        if isinstance(a, torch.Tensor):
            if id(a) not in memo:
                memo[id(a)] = a.detach().clone().requires_grad_(a.requires_grad)
            return memo[id(a)]
        if isinstance(a, list):
            return [one(x) for x in a]
        if isinstance(a, tuple):
            return tuple(one(x) for x in a)
        return a

    return [one(a) for a in args]


def run_both(fn, *args, calls=2, graphs=1, fallbacks=0):
    """fn eagerly and compiled on clones of args, `calls` times: same result, same
    arguments afterwards (the caller sees each in-place update); stats as given."""
    cf = framejit.compile(fn)
    for _ in range(calls):
        e_args, c_args = clone_args(args), clone_args(args)
        expected = fn(*e_args)
        actual = cf(*c_args)
        assert_same(actual, expected)
        for a, e in zip(c_args, e_args):
            if isinstance(e, (torch.Tensor, list, tuple)):
                assert_same(a, e)
    s = framejit.stats(fn)
    assert s["fallbacks"] == fallbacks, framejit.fallbacks(fn)
    if graphs is not None:
        assert s["graphs"] == graphs, s
    return cf


def raises_like_eager(fn, *args):
    """The compiled call raises eager's error (type and message), having fallen back."""
    with pytest.raises(Exception) as eager:
        fn(*clone_args(args))
    with pytest.raises(type(eager.value)) as compiled:
        framejit.compile(fn)(*clone_args(args))
    assert str(compiled.value) == str(eager.value)
    assert framejit.stats(fn)["fallbacks"] >= 1


F = torch.randn(4, 6)
G = torch.randn(4, 6)
ROW = torch.randn(6)
I = torch.arange(24, dtype=torch.int64).reshape(4, 6) - 7
B = torch.rand(4, 6) > 0.5
C = torch.rand(4, 6) > 0.3


# ---- each in-place method on an input ----

METHODS = {
    "add_": lambda x, y: x.add_(y),
    "sub_": lambda x, y: x.sub_(y),
    "mul_": lambda x, y: x.mul_(y),
    "div_": lambda x, y: x.div_(y.abs() + 1),
    "clamp_": lambda x, y: x.clamp_(-0.5, 0.5),
    "clamp_min_": lambda x, y: x.clamp_min_(0.1),
    "clamp_max_": lambda x, y: x.clamp_(max=0.2),
    "masked_fill_": lambda x, y: x.masked_fill_(y > 0, 3.0),
    "copy_": lambda x, y: x.copy_(y),
    "zero_": lambda x, y: x.zero_(),
    "fill_": lambda x, y: x.fill_(2.5),
    "relu_": lambda x, y: x.relu_(),
    "neg_": lambda x, y: x.neg_(),
    "exp_": lambda x, y: x.exp_(),
    "tril_": lambda x, y: x.tril_(),
}


@pytest.mark.parametrize("name", sorted(METHODS))
def test_method_on_an_input(name):
    op = METHODS[name]

    def f(x, y):
        op(x, y)
        return x * 2

    run_both(f, F, G)


def test_method_returns_self_and_chains():
    def f(x, y):
        z = x.mul_(2).add_(y)
        return z

    cf = run_both(f, F, G)
    x = F.clone()
    assert cf(x, G) is x  # eager returns self: the caller's own tensor


@pytest.mark.parametrize("src", ["x += y", "x -= 1", "x *= y", "x /= 2", "x **= 2"])
def test_augmented_assignment_on_float_input(src):
    ns = {}
    exec(f"def f(x, y):\n    {src}\n    return x + 0", ns)
    run_both(ns["f"], F, G)


@pytest.mark.parametrize("src", ["x += y", "x //= 3", "x %= 5", "x *= -2", "x &= y", "x |= 6", "x ^= y"])
def test_augmented_assignment_on_int_input(src):
    ns = {}
    exec(f"def f(x, y):\n    {src}\n    return x", ns)
    run_both(ns["f"], I, I.flip(0))


@pytest.mark.parametrize("src", ["b |= c", "b &= c", "b ^= c", "b.logical_or_(c)"])
def test_bool_input(src):
    ns = {}
    exec(f"def f(b, c):\n    {src}\n    return b", ns)
    run_both(ns["f"], B, C)


def test_augmented_assignment_with_a_number_on_the_left_is_out_of_place():
    def f(x):
        a = 2.0
        a += x
        return a

    run_both(f, F)


# ---- locals and their views ----

def test_local_and_its_views():
    def f(x):
        y = x * 2
        v = y[1]
        w = y[:, ::2]
        v.add_(100)          # reaches y and w
        w.mul_(-1)           # reaches y and v
        return y, v, w

    run_both(f, F)


def test_view_read_before_and_after_a_write():
    def f(x):
        v = x[0]
        before = v * 1
        x.add_(1)
        return before, v + 0

    run_both(f, F)


def test_read_number_keeps_its_value():
    def f(x):
        a = x[0, 0].item()
        x.mul_(3)
        return x + a

    run_both(f, F)


# ---- views of inputs ----

VIEW_WRITES = {
    "slice_step": lambda x, y: x[::2].add_(1),
    "slice_cols": lambda x, y: x[:, 1:5:3].mul_(y[:, :2]),
    "select": lambda x, y: x[1].zero_(),
    "select_dim1": lambda x, y: x.select(1, 2).fill_(5.0),
    "transpose": lambda x, y: x.t().add_(y.t()),
    "transpose_select": lambda x, y: x.transpose(0, 1)[3].sub_(7),
    "narrow": lambda x, y: x.narrow(1, 2, 3).clamp_(0, 0.1),
    "view_flat": lambda x, y: x.view(-1)[3:20:4].copy_(y[0, :5] * 10),
    "unsqueeze": lambda x, y: x.unsqueeze(0)[0, 2].neg_(),
    "permute_slice": lambda x, y: x.permute(1, 0)[1:3].mul_(0),
    "negative_index": lambda x, y: x[-1, -2:].add_(50),
    "split": lambda x, y: x.split(2)[1].add_(y[:2]),
}


@pytest.mark.parametrize("name", sorted(VIEW_WRITES))
def test_write_through_a_view_of_an_input(name):
    op = VIEW_WRITES[name]

    def f(x, y):
        op(x, y)
        return x.sum(1)

    run_both(f, F, G)


def test_other_live_views_see_the_write():
    def f(x):
        a = x[:, 0]
        b = x[1]
        c = x.t()
        a.mul_(10)
        b.add_(1)
        return a + 0, b + 0, c + 0

    run_both(f, F)


# ---- item assignment ----

SETITEMS = {
    "col_from_tensor": "x[:, 1] = y[:, 0]",
    "row_number": "x[0] = 3.5",
    "slice_zero": "x[1:3] = 0",
    "ellipsis": "x[..., 0] = y[..., 1]",
    "none": "x[None, 2] = 1.25",
    "broadcast_row": "x[2:] = y[0]",
    "step": "x[::3, ::2] = -1",
    "element": "x[1, 2] = y[3, 4]",
    "mask": "x[x > 0] = 0.0",
    "mask_rows": "x[y[:, 0] > 0] = 7.0",
    "augmented": "x[1] += y[2]",
    "augmented_cols": "x[:, 1:3] *= 2",
}


@pytest.mark.parametrize("name", sorted(SETITEMS))
def test_setitem_on_an_input(name):
    ns = {}
    exec(f"def f(x, y):\n    {SETITEMS[name]}\n    return x * 1", ns)
    run_both(ns["f"], F, G)


def test_setitem_converts_to_the_tensor_dtype():
    def f(x, y):
        x[0] = 2.7         # int tensor: truncated, as copy_ does
        x[1] = y[1] * 0.5  # float tensor into int: truncated
        return x

    run_both(f, I, F)


def test_setitem_on_bool():
    def f(b):
        b[0] = True
        b[:, 1] = False
        return b

    run_both(f, B)


def test_setitem_symbolic_index():
    def f(x, i):
        x[i] = -x[i]
        return x

    cf = run_both(f, F, 2, calls=1)
    x = F.clone()
    cf(x, 3)
    expected = F.clone()
    expected[3] = -expected[3]
    assert_same(x, expected)
    assert framejit.stats(f)["recompiles"] == 0


# ---- broadcasting and dtypes ----

def test_broadcast_operand():
    def f(x, row):
        x.add_(row)
        x[0].mul_(row)
        return x

    run_both(f, F, ROW)


def test_broadcast_into_a_smaller_tensor_raises_like_eager():
    def f(row, x):
        row.add_(x)
        return row

    raises_like_eager(f, ROW, F)


def test_int_tensor_add_float_raises_like_eager():
    def f(x):
        x.add_(1.5)
        return x

    raises_like_eager(f, I)


def test_int_truediv_in_place_raises_like_eager():
    def f(x):
        x /= 2
        return x

    raises_like_eager(f, I)


def test_float32_written_from_float64():
    def f(x, y):
        x.mul_(y)
        x += 1
        return x

    run_both(f, F, G.double())


# ---- loops (issue 5 must-show) ----

def test_row_loop_with_augmented_assignment_is_one_graph():
    def f(x, w):
        for i in range(x.shape[0]):
            x[i] *= w[i]
        return x.sum()

    run_both(f, torch.randn(5, 3), torch.randn(5, 3))
    assert framejit.stats(f)["graph_breaks"] == 0


def test_loop_over_rows_with_add_():
    def f(x):
        for row in x:
            row.add_(1)
        return x

    cf = run_both(f, torch.randn(4, 3))
    x = torch.zeros(4, 3)
    out = cf(x)
    assert out is x and torch.equal(x, torch.ones(4, 3))


def test_running_sum_in_place_loop():
    def f(x):
        for i in range(1, x.shape[0]):
            x[i] += x[i - 1] * 0 + x[i - 1]
        return x

    # x[i - 1] shares x's memory with x[i]: tracked exactly or left to eager
    cf = framejit.compile(f)
    x1, x2 = torch.randn(6, 2), None
    x2 = x1.clone()
    assert_same(cf(x1), f(x2))
    assert_same(x1, x2)


# ---- aliasing between arguments ----

def test_same_tensor_for_two_parameters_after_distinct_ones():
    def f(x, y):
        x.add_(y)
        return x + y

    cf = framejit.compile(f)
    for same in (False, True, False):
        e = torch.randn(3, 4)
        c = e.clone()
        ey, cy = (e, c) if same else (torch.ones(3, 4), torch.ones(3, 4))
        expected = f(e, ey)
        actual = cf(c, cy)
        assert_same(actual, expected)
        assert_same(c, e)
    s = framejit.stats(f)
    assert s["compiles"] >= 1
    assert s["fallbacks"] >= 1  # f(x, x): the in-place update aliases the other input


def test_an_input_and_its_view_as_two_parameters():
    def f(x, v):
        x.mul_(2)
        return v + 0

    x = torch.randn(3, 4)
    cx = x.clone()
    expected = f(x, x[1])
    actual = framejit.compile(f)(cx, cx[1])
    assert_same(actual, expected)
    assert_same(cx, x)


def test_expanded_input_written_in_place_raises_like_eager():
    def f(x):
        x.add_(1)
        return x

    base = torch.randn(1, 4)
    with pytest.raises(RuntimeError) as eager:
        f(base.clone().expand(3, 4))
    with pytest.raises(RuntimeError) as compiled:
        framejit.compile(f)(base.clone().expand(3, 4))
    assert str(compiled.value) == str(eager.value)


def test_write_from_an_overlapping_view_runs_eagerly():
    def f(x):
        x[1:].add_(x[:-1])  # eager raises on the partial overlap
        return x

    raises_like_eager(f, torch.randn(5))


# ---- optimizer step ----

def sgd(params, grads, lr):
    with torch.no_grad():
        for p, g in zip(params, grads):
            p.sub_(lr * g)


def test_sgd_step_new_lr_each_call_no_recompile():
    params = [torch.randn(4, 3), torch.randn(3)]
    grads = [torch.randn(4, 3), torch.randn(3)]
    ref = [p.clone() for p in params]
    csgd = framejit.compile(sgd)
    for lr in (0.1, 0.05, 0.3, 1e-3):
        sgd(ref, grads, lr)
        assert csgd(params, grads, lr) is None
        for p, r in zip(params, ref):
            assert_same(p, r)
    s = framejit.stats(sgd)
    assert s["fallbacks"] == 0, framejit.fallbacks(sgd)
    assert s["compiles"] == 1 and s["recompiles"] == 0
    assert s["graphs"] == 1


def test_sgd_on_parameters_that_require_grad_is_correct():
    params = [torch.randn(4, 3, requires_grad=True)]
    grads = [torch.randn(4, 3)]
    ref = [params[0].detach().clone()]
    csgd = framejit.compile(sgd)
    for lr in (0.1, 0.2):
        with torch.no_grad():
            ref[0].sub_(lr * grads[0])
        csgd(params, grads, lr)
        assert params[0].requires_grad
        assert_same(params[0].detach(), ref[0])


# ---- autograd state ----

def test_version_counter_read_falls_back():
    def f(x):
        x.add_(1)
        return x._version

    x1, x2 = torch.zeros(3), torch.zeros(3)
    assert framejit.compile(f)(x1) == f(x2)
    assert framejit.stats(f)["fallbacks"] == 1
    assert_same(x1, x2)


def test_version_counter_advances():
    def f(x):
        x.mul_(2)
        return x + 1

    x = torch.ones(3)
    v0 = x._version
    framejit.compile(f)(x)
    assert x._version > v0


def test_requires_grad_input_written_with_grad_on_raises_like_eager():
    def f(x):
        with torch.no_grad():
            y = x * 2
        x.add_(y)
        return x

    x = torch.randn(3, requires_grad=True)
    with pytest.raises(RuntimeError) as eager:
        f(x)
    with pytest.raises(RuntimeError) as compiled:
        framejit.compile(f)(x)
    assert str(compiled.value) == str(eager.value)


def test_requires_grad_input_written_under_no_grad():
    def f(x, y):
        with torch.no_grad():
            x.mul_(y)
        return None

    x = torch.randn(3, requires_grad=True)
    ex = x.detach().clone().requires_grad_()
    y = torch.randn(3)
    f(ex, y)
    framejit.compile(f)(x, y)
    assert x.requires_grad and x.is_leaf
    assert_same(x.detach(), ex.detach())


# ---- plan steps ----

def test_input_write_before_a_graph_break_runs_eagerly(capsys):
    def f(x):
        x.add_(1)
        print("between")
        return x * 2

    cf = framejit.compile(f)
    a, b = torch.randn(3), None
    b = a.clone()
    assert_same(cf(a), f(b))
    assert_same(a, b)
    assert capsys.readouterr().out == "between\nbetween\n"
    assert framejit.stats(f)["fallbacks"] == 1


def test_input_write_after_a_graph_break(capsys):
    def f(x):
        y = x * 2
        print("between")
        x.add_(y)
        y.mul_(3)
        return x, y

    cf = framejit.compile(f)
    for _ in range(2):
        a = torch.randn(3)
        b = a.clone()
        assert_same(cf(a), f(b))
        assert_same(a, b)
    assert capsys.readouterr().out == "between\n" * 4


def test_local_written_after_a_branch_on_its_value():
    def f(x):
        y = x + 1
        if y.sum() > 0:
            y.mul_(2)
        else:
            y.sub_(5)
        return y

    cf = framejit.compile(f)
    for sign in (1, -1, 1, -1):
        x = torch.full((3,), float(sign))
        assert_same(cf(x), f(x))


# ---- module state ----

class Stats(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("mean", torch.zeros(3))
        self.register_buffer("count", torch.zeros((), dtype=torch.int64))

    def forward(self, x):
        with torch.no_grad():
            self.mean.mul_(0.9).add_(0.1 * x.mean(0))
            self.count += 1
        return x - self.mean  # the buffer as just written


def test_module_buffers_updated_in_place():
    eager, comp = Stats(), Stats()
    cm = framejit.compile(comp)
    for k in range(3):
        x = torch.randn(5, 3) + k
        assert_same(cm(x), eager(x))
        assert_same(comp.mean, eager.mean)
        assert_same(comp.count, eager.count)
    s = framejit.stats(Stats.forward)
    assert s["fallbacks"] == 0, framejit.fallbacks(Stats.forward)
    assert s["compiles"] == 1


def test_write_through_a_reshape_that_merges_an_inputs_dims():
    def f(x):
        x.reshape(-1)[:4].add_(1)  # eager: a view when x is contiguous, a copy when not
        return x

    for x in (torch.randn(3, 4), torch.randn(4, 3).t()):
        e, c = x.clone(memory_format=torch.preserve_format), x.clone(memory_format=torch.preserve_format)
        assert_same(framejit.compile(f)(c), f(e))
        assert_same(c, e)


def test_long_row_loop_compiles_and_matches():
    def f(x, w):
        for i in range(x.shape[0]):
            x[i] *= w[i]
        return x

    run_both(f, torch.randn(48, 8), torch.randn(48, 8), calls=1)


def test_repeated_slice_writes_stay_small():
    # Each write reads the previous version at two positions (base and source).
    def f(x):
        for _ in range(24):
            x[1:] += x[:-1] * 0 + 1
        return x

    run_both(f, torch.randn(6, 4), calls=1)


def test_functional_inplace_flag():
    def f(x):
        y = torch.nn.functional.relu(x, inplace=True)
        return y is x, x * 1

    cf = run_both(f, F)
    x = F.clone()
    assert cf(x)[0] is True and torch.equal(x, F.relu())


def test_zip_and_enumerate_over_rows_and_lists():
    def f(x, ws):
        for i, (row, w) in enumerate(zip(x, ws)):
            row.mul_(w).add_(i)
        return x

    run_both(f, torch.randn(3, 4), [torch.randn(4), torch.randn(4), torch.randn(4)])


def test_input_written_in_a_frame_that_needs_autograd_runs_as_eager():
    # A joint (autograd) plan writes inputs back after its forward, but here its backward
    # recomputes x * 2 from the input's old value: such a frame must run in CPython,
    # with eager's mutation and gradients.
    def f(w, x):
        x.mul_(2)
        return (w * x).sum()

    cf = framejit.compile(f)
    w1 = torch.randn(5, requires_grad=True)
    w2 = w1.detach().clone().requires_grad_(True)
    x1 = torch.randn(5)
    x2 = x1.clone()
    f(w1, x1).backward()
    cf(w2, x2).backward()
    assert torch.equal(x1, x2)
    assert torch.allclose(w1.grad, w2.grad)
    assert framejit.stats(cf)["fallbacks"] >= 1
    assert any("backward reads an input that the frame updates" in r.reason for r in framejit.fallbacks(cf))


# ---- operands that are other views of the written tensor ----

def test_inplace_from_disjoint_views_of_the_same_tensor():
    def rows(x):
        x[0].add_(x[1])
        x[2].mul_(x[3] * 2)
        return x

    def columns(x):
        x[:, 0] = x[:, 2]
        x[:, 1:3] += x[:, 3:5]
        return x.sum()

    def fresh(x):
        y = x + 0
        y[1:3].sub_(y[3:])
        return y

    run_both(rows, torch.randn(4, 3))
    run_both(columns, torch.randn(3, 6))
    run_both(fresh, torch.randn(5, 2))


def test_inplace_from_overlapping_views_runs_as_eager():
    def partial(x):
        x[1:].add_(x[:-1])  # eager raises: partial overlap
        return x

    def interleaved(x):
        x[::2].add_(x[1::2])  # disjoint, but not proven so: runs eagerly
        return x

    def expanded(x):
        y = x[0].expand(3, 4)
        y[0].add_(y[1])  # y's rows are one memory: not proven disjoint, runs eagerly
        return y

    raises_like_eager(partial, torch.randn(4, 3))
    run_both(interleaved, torch.randn(4, 3), graphs=0, fallbacks=2)
    run_both(expanded, torch.randn(2, 4), graphs=0, fallbacks=2)


# ---- views of inputs returned ----

def test_returned_view_of_an_input_aliases_it():
    def f(x):
        return x[1:, ::2].t()

    x = torch.zeros(3, 4)
    out = framejit.compile(f)(x)
    assert framejit.stats(f)["compiles"] == 1 and framejit.stats(f)["fallbacks"] == 0
    assert out.shape == (2, 2) and out.data_ptr() != 0
    out.fill_(1.0)  # eager's result is a view: the write reaches x
    expected = torch.zeros(3, 4)
    expected[1:, ::2] = 1.0
    assert_same(x, expected)


def test_returned_views_of_written_and_dynamic_inputs():
    def f(x, i):
        x.mul_(2)
        return x[i], x.unsqueeze(0).expand(2, -1, -1), x.view(-1)[2:]

    cf = framejit.compile(f)
    for n in (4, 6):
        a = torch.randn(n, 3)
        b = a.clone()
        got, want = cf(a, 2), f(b, 2)
        assert_same(got, want)
        assert_same(a, b)
        got[0].add_(100)  # a view of a, as eager's
        assert_same(a[2], b[2] + 100)
    assert framejit.stats(f)["fallbacks"] == 0


def test_torch_functions_of_inplace_methods_are_traced():
    # torch.relu_(y) is y.relu_(): on a non-leaf that requires grad (eager does not
    # raise), with gradients through it; on a leaf that requires grad, eager's error.
    w = torch.randn(5, requires_grad=True)

    def f(x):
        y = x * w
        torch.relu_(y)
        z = y * 3
        torch.sigmoid_(z)
        return torch.tanh_(z * 2) + y

    x = torch.randn(5)
    got = framejit.compile(f)(x)
    got.sum().backward()
    g_got = w.grad.clone()
    w.grad = None
    want = f(x)
    want.sum().backward()
    assert_same(got, want)
    assert_same(g_got, w.grad)
    s = framejit.stats(f)
    assert (s["graphs"], s["graph_breaks"], s["fallbacks"]) == (2, 0, 0), (s, framejit.fallbacks(f))

    def g(p):
        return torch.relu_(p)

    with pytest.raises(RuntimeError) as e_got:
        framejit.compile(g)(torch.randn(3, requires_grad=True))
    with pytest.raises(RuntimeError) as e_want:
        g(torch.randn(3, requires_grad=True))
    assert str(e_got.value) == str(e_want.value)


def test_item_assignment_of_a_number_out_of_the_dtype_s_range_raises_as_eager():
    # t[0] = 1e308 into float32, NaN into int64, 300 into uint8: eager raises
    # RuntimeError ("value cannot be converted ... without overflow"); in range, inf
    # and NaN into floats, and -1 into uint8 (it wraps) are stored

    def store(x, s):
        t = torch.zeros(2, dtype=x.dtype)
        t[0] = s
        t[1:] = s
        return t

    for dt, vals in ((torch.float32, [1e308, 2.5, float("inf"), -1e39]), (torch.int64, [float("nan"), 1e300, 7]),
                     (torch.int32, [2**31, -2**31]), (torch.uint8, [-1, 300, -3.0])):
        for v in vals:
            framejit.reset()
            same_outcome(framejit.compile(store), store, torch.zeros(1, dtype=dt), v, errors=(RuntimeError,))
