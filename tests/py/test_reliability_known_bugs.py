"""Edge cases that the fuzzer found (tests/fuzz): signed-zero ties of clamp and
maximum/minimum (eager's own answer depends on the element's position: framejit
follows its scalar loop, the vector loop's answer is a strict xfail), gelu(+inf)
(inf in a one-element tensor, NaN otherwise: framejit matches), and what the long runs
with reductions, views, matmul and numbers read from tensors found: fixed ones are
plain tests, open ones strict xfails (a crash runs in a child process)."""
import subprocess
import textwrap

import pytest
import torch

import framejit
from conftest import PYTHON, assert_same


def signs_and_values(t):
    # A NaN's sign bit is not part of the contract.
    return [("nan" if v != v else (v, s)) for v, s in zip(t.tolist(), torch.signbit(t).tolist())]


def test_clamp_keeps_the_input_on_a_signed_zero_tie():
    def f(x, lo):
        return x.clamp(min=lo), torch.clamp(x, max=-lo)

    x = torch.tensor([-0.0, 0.0, -1.0, 2.0, float("nan")] * 4)
    got, want = framejit.compile(f)(x, 0.0), f(x, 0.0)
    assert framejit.stats(f)["compiles"] == 1
    for g, w in zip(got, want):
        assert signs_and_values(g) == signs_and_values(w)


def test_maximum_minimum_ties_follow_eagers_scalar_loop():
    def f(x, y):
        return torch.maximum(x, y), torch.minimum(x, y)

    # Under 16 elements eager runs its scalar loop only: the first operand on a tie.
    nan = float("nan")
    x = torch.tensor([-0.0, 0.0, 1.0, nan, 3.0, -0.0, 0.0, 2.0])
    y = torch.tensor([0.0, -0.0, 2.0, 1.0, nan, -0.0, 0.0, 2.0])
    got, want = framejit.compile(f)(x, y), f(x, y)
    assert framejit.stats(f)["compiles"] == 1
    for g, w in zip(got, want):
        assert signs_and_values(g) == signs_and_values(w)


@pytest.mark.xfail(strict=True, reason="eager's vector loop keeps the second operand on a signed-zero tie and its "
                                       "scalar loop (tails, small tensors) the first; framejit follows the scalar loop")
def test_maximum_minimum_ties_in_eagers_vector_loop():
    def f(x, y):
        return torch.maximum(x, y), torch.minimum(x, y)

    x = torch.tensor([-0.0, 0.0] * 40)
    y = torch.tensor([0.0, -0.0] * 40)
    got, want = framejit.compile(f)(x, y), f(x, y)
    for g, w in zip(got, want):
        assert signs_and_values(g) == signs_and_values(w)



def test_amax_amin_keep_the_first_signed_zero_as_eagers_scalar_loop():
    # Rows under 32 elements run eager's scalar loop: the first of equal values stays,
    # so amax([-0.0, 0.0]) is -0.0 (llvm.maximum alone gives 0.0). Full, inner, outer
    # (the lanes path) and multi-dim reductions, transposed inputs, both float dtypes.
    def f(x):
        return (torch.amax(x), torch.amin(x), torch.amax(x, dim=0), x.amin(dim=0),
                torch.amax(x, dim=-1, keepdim=True), x.amin(dim=1), x.amax(dim=(0, 1)),
                x.max(dim=-1).values, torch.relu(x).amax(dim=-1) * 1.0)

    gen = torch.Generator().manual_seed(3)
    choices = torch.tensor([-0.0, 0.0, -1.0, 1.0, -2.0, float("nan")])
    compiled = framejit.compile(f)
    for k in range(60):
        shape = [(3, 5), (2, 7), (4, 4), (1, 9), (5, 1), (6, 3)][k % 6]
        pick = torch.randint(0, 5 if k % 4 else 6, shape, generator=gen)
        x = choices[pick].to((torch.float32, torch.float64)[k % 2])
        if k % 3 == 0:
            x = x.t()
        for g, w in zip(compiled(x), f(x)):
            assert signs_and_values(g.reshape(-1)) == signs_and_values(w.reshape(-1)), (k, x, g, w)
    assert framejit.stats(f)["fallbacks"] == 0


@pytest.mark.xfail(strict=True, reason="eager's vector loop (rows of 32 and more) combines lanes in its own order; "
                                       "framejit keeps the first zero, as eager's scalar loop. Neither that rule nor "
                                       "llvm.maximum's (any +0.0 wins, which passed here) matches it: each agrees "
                                       "with eager on about half of random rows of signed zeros")
def test_amax_signed_zero_in_eagers_vector_loop():
    def f(x):
        return torch.amax(x)

    x = torch.tensor([-0.0] + [0.0] * 63)
    assert signs_and_values(framejit.compile(f)(x).reshape(1)) == signs_and_values(f(x).reshape(1))

def test_the_tie_is_visible_downstream():
    # Why the sign matters: 1 // -0.0 is -inf, 1 // 0.0 is inf (what the fuzzer saw).
    x = torch.tensor([-0.0])
    assert (1 // x.clamp(min=0.0)).item() == float("-inf")


def test_gelu_of_inf_as_eager():
    # Eager's float32 gelu(+inf) depends on torch's CPU kernels: with AVX-512 it is inf in
    # a one-element tensor and NaN in any other; with AVX2 or none it is inf everywhere.
    def f(x):
        return torch.nn.functional.gelu(x)

    cf = framejit.compile(f)
    for shape in ((), (1,), (1, 1), (2,), (3,), (7,), (64,)):
        x = torch.full(shape, float("inf"))
        got, want = cf(x), f(x)
        assert got.isnan().tolist() == want.isnan().tolist(), (shape, got, want)


# ---- a view of an input returned by a compiled frame ----

def test_returned_view_of_an_input_has_eagers_values():
    def f(x):
        x.add_(1)
        return x[1:, ::2].t()

    x, y = torch.randn(3, 4), None
    y = x.clone()
    got, want = framejit.compile(f)(x), f(y)
    assert torch.equal(got, want) and torch.equal(x, y)


# ---- found by the long fuzz runs (seed 4242): fixed ----

def test_reductions_over_the_one_dim_of_a_0d_tensor():
    # dim 0 / -1 of a 0-d tensor is the tensor itself (var over it read past the shape).
    def f(x):
        return (torch.var(x, dim=-1), x.mean(dim=0, keepdim=True), torch.sum(x, -1, True),
                torch.amax(x, dim=-1), x.argmax(dim=0), x.var(dim=0, unbiased=False))

    cf = framejit.compile(f)
    for v in (1.5, -2.0, float("inf")):
        x = torch.tensor(v)
        assert_same(cf(x), f(x))


def test_cat_of_parts_empty_along_the_dim():
    def f(x, y):
        return torch.cat([x, x], dim=0), torch.cat([x, y], 0) * 2

    x, y = torch.empty(0, 3), torch.empty(0, 3, dtype=torch.float64)
    assert_same(framejit.compile(f)(x, y), f(x, y))


def test_pow_with_a_number_read_from_a_tensor_as_exponent():
    def f(x, y):
        return x.abs() ** y.sum().item(), x.abs() ** float(y.mean())

    cf = framejit.compile(f)
    for y in (torch.tensor([0.5, 1.5]), torch.tensor([1.0, 1.0]), torch.tensor([-1.0, 0.0])):
        x = torch.tensor([0.25, 2.0, -3.0, 0.0])
        assert_same(cf(x, y), f(x, y))


def test_pow_with_an_exponent_that_float32_rounds_keeps_its_parity():
    # 2**24 + 1 is odd, its float32 (2**24) even: a negative base keeps its sign, as in
    # eager's scalar loop (every tensor under 16 elements); 2**24 + 0.5 is not an
    # integer: NaN. A constant and a runtime exponent take the same path.
    def f(x, n):
        return x ** n

    def g(x):
        return x ** (2**24 + 1), x ** 16777216.5, x ** -(2**24 + 1)

    def same(got, want):
        # -1.0000001 ** (2**24 + 1) is -7.389056 in eager and float32's pow gives
        # -7.389055 from the rounded exponent: signs and NaNs exact, values to 1e-6.
        assert torch.equal(got.isnan(), want.isnan())
        assert torch.equal(torch.signbit(got) | got.isnan(), torch.signbit(want) | want.isnan())
        torch.testing.assert_close(got, want, rtol=1e-6, atol=0, equal_nan=True)

    x = torch.tensor([-2.0, -1.0, -0.0, 0.0, 1.0, float("-inf"), float("nan"), -1.0000001, 0.5])
    cf = framejit.compile(f)
    for n in (2**24 + 1, 2**24, 16777216.5, -(2**24 + 1), 3, 2.5):
        same(cf(x, n), f(x, n))
    assert framejit.stats(f)["compiles"] == 2  # one for int exponents, one for float
    for got, want in zip(framejit.compile(g)(x), g(x)):
        same(got, want)


def test_an_output_that_views_an_input_and_feeds_a_matmul():
    # The output's copy was a "view copy" that the runtime skips when the matmul reads
    # the input in place: the output was never written.
    def f(p):
        v = p.reshape(-1, 1)
        return v, v @ v.mT

    def g(p):
        v = p.t()
        return v, (v @ p)[..., 1:] + 1.5

    cf, cg = framejit.compile(f), framejit.compile(g)
    for n in (3, 5):
        p = torch.randn(1, n)
        assert_same(cf(p), f(p))
        assert_same(cg(p), g(p))


def test_permute_with_an_int_for_dims_raises():
    # torch.permute(x, (0)) passes an int where eager wants a tuple (program 599).
    def f(x):
        return torch.permute(x, (0)).sum()

    x = torch.tensor([-0.25, 0.0])
    with pytest.raises(TypeError, match="must be tuple of ints, not int"):
        f(x)
    with pytest.raises(TypeError, match="must be tuple of ints, not int"):
        framejit.compile(f)(x)


def test_branch_on_an_item_then_mean_over_a_dim():
    # After a branch on a number read from a tensor, a segment that divides by a
    # symbolic size (mean over a dim) got no scalar inputs: FJ_CHECK aborted the process
    # (programs 533, 928). In a child process, so that a regression cannot kill the run.
    code = textwrap.dedent("""
        import torch, framejit
        def f(t0):
            v1 = t0.sum().item()
            if v1 >= -0.75:
                v2 = t0[::2]
            else:
                v2 = t0
            return t0.mean(dim=-2, keepdim=True)
        x = torch.randn(4, 3)
        torch.testing.assert_close(framejit.compile(f)(x), f(x))
        print("same")
    """)
    proc = subprocess.run(PYTHON + ["-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and "same" in proc.stdout, proc.stderr[-2000:]


def test_matmul_with_an_empty_batch_or_inner_dim():
    # An empty batch ran one product into a zero-size buffer: a segfault (seed 31337,
    # program 1239). An empty inner dim gives zeros.
    def f(x):
        return (x[1:].unsqueeze(-1) * 2) @ x

    def g(a, b):
        return a @ b

    cf, cg = framejit.compile(f), framejit.compile(g)
    for n in (2, 3):
        x = torch.randn(1, n)
        assert_same(cf(x), f(x))
    for a, b in ((torch.randn(0, 2, 3), torch.randn(3, 4)), (torch.randn(2, 0), torch.randn(0, 3)),
                 (torch.randn(0, 3), torch.randn(3, 2)), (torch.randn(4, 2, 0), torch.randn(4, 0, 5))):
        assert_same(cg(a, b), g(a, b))


# ---- found by the long fuzz runs: fixed (were strict xfails) ----

def test_unused_int_of_a_nan_tensor_raises():
    # int() of a NaN (inf) tensor whose result is unused was dead code: eager's
    # ValueError (OverflowError) was lost (seed 4242 programs 500, 845, 1516; seed 777
    # program 1230). The conversion is now a check of its graph, evaluated whether or
    # not anything reads it: before and after a graph break, with and without outputs,
    # on the first call and on cache hits.
    def f(x):
        v = int(x.sum())  # noqa: F841
        return x + 1

    def g(x, e):
        return e * int(x.sum())  # an empty operand: the product's loop never runs

    def h(x, log):
        y = x * 2
        log.append(id(log) != 0)  # id(): an opaque call, a graph break
        int(x.mean())
        return (y + 1).sum()

    def k(x):
        int(x[0])
        return 3

    nan, inf = float("nan"), float("inf")
    for fn in (f, g, h, k):
        cf = framejit.compile(fn)
        for vals in ([1.0, 2.0], [1.0, nan], [0.5, -4.0], [inf, 1.0], [-inf, 0.0]):
            x = torch.tensor(vals)
            args = (x, torch.empty(0)) if fn is g else (x, []) if fn is h else (x,)
            args_eager = (x, torch.empty(0)) if fn is g else (x, []) if fn is h else (x,)
            try:
                want = fn(*args_eager)
            except (ValueError, OverflowError) as e:
                with pytest.raises(type(e)) as got:
                    cf(*args)
                assert str(got.value) == str(e)
                if fn is h:
                    assert args[1] == args_eager[1] == [1]  # the call before it ran once
                continue
            assert_same(cf(*args), want)
        assert framejit.stats(fn)["compiles"] == 1, fn.__name__
        assert framejit.stats(fn)["cache_hits"] >= 3, fn.__name__


def test_size_mismatch_after_a_graph_break_raises_as_eager():
    # A size mismatch that eager raises in the middle of the frame was found only when
    # the trace ended (the graph's size assumptions); after a graph break the frame
    # could not resume at that op: 'cannot continue ... after a graph break' (seed 4242
    # program 1133, seed 777 program 1437). The op that needs a false size equality now
    # stops the trace there, and CPython resumes at it.
    scope = {"torch": torch}
    exec(textwrap.dedent("""
        def h(p, q):
            v3 = torch.argmin(torch.mean(p, dim=0))
            return (p + p)[..., 1:]

        def f(t0, f0):
            for i1 in range(t0.shape[0]):
                t0 = (t0 % i1)
            v2 = torch.var(t0, dim=1)
            v5 = h(v2, -0.75)
            v7 = v5.reshape(-1)
            if t0.shape[1] <= i1:
                v8 = torch.remainder(v2, t0)
            else:
                v8 = v2
            for i9 in range(3):
                v7 = (v7 / v2)
            return [v7, v8, torch.prod(v8, 1, True)]
    """), scope)
    f = scope["f"]
    x = torch.randn(4, 3)
    with pytest.raises(RuntimeError, match="must match the size"):
        f(x, 0.5)
    with pytest.raises(RuntimeError, match="must match the size"):
        framejit.compile(f)(x, 0.5)


def _helper_add(a, b):
    return a * 2 + b


@pytest.mark.parametrize("where", ["root", "helper", "branch"])
def test_size_mismatch_after_a_graph_break_on_cache_hits(where):
    # The mismatch at the root, inside an inlined helper, or after a plan branch; sizes
    # that fit and sizes that do not, in turns, so that traces and cache hits both meet
    # it. Results, exceptions and the opaque call's side effect are eager's.
    def f(x, y, log):
        z = x.sum(1)
        log.append(id(log) != 0)  # id(): an opaque call, a graph break
        if where == "root":
            w = z + y[0]
        elif where == "helper":
            w = _helper_add(z, y[0])
        else:
            w = (z + y[0]).sum() if y.shape[0] > 2 else z.sum()
        return w * 2, z

    cf = framejit.compile(f)
    for rows, cols in ((4, 3), (3, 3), (4, 3), (5, 5), (2, 7), (6, 4), (6, 6)):
        x, y = torch.randn(rows, cols), torch.randn(cols, cols)
        outcome = []
        for fn in (f, cf):
            log = []
            try:
                outcome.append(("value", fn(x, y, log), len(log)))
            except RuntimeError as e:
                outcome.append(("raised", str(e), len(log)))
        (kind_e, want, calls_e), (kind_c, got, calls_c) = outcome
        assert (kind_c, calls_c) == (kind_e, calls_e), (rows, cols, got)
        if kind_e == "value":
            assert_same(got, want)
        else:
            assert got == want
    assert framejit.stats(f)["graph_breaks"] >= 1


def test_gelu_then_long_on_a_rounding_boundary_is_eagers_own_ambiguity():
    # Why (gelu(x) / y).long() may differ from eager in its integer result (the
    # reported seed 31337 program 447 class): eager's float32 gelu is two kernels, a
    # vectorized erf for contiguous tensors of two or more elements and the scalar erf
    # for strided and one-element ones, one ulp apart for about a third of all inputs.
    # Where a quotient lands on an integer, eager's own integer answer depends on the
    # layout. framejit's gelu is within 1e-5 of both (the contract); a cast on such a
    # boundary gives one of eager's two answers, and the fuzzer accepts exactly that
    # (tests/fuzz/check.py, _as_good_as_eager).
    gelu = torch.nn.functional.gelu
    xs = torch.linspace(0.5, 4.0, 4001)
    vec, scalar = gelu(xs), gelu(torch.stack([xs, xs], 1)[:, 0])
    differ = (vec != scalar).nonzero().flatten().tolist()
    if not differ:
        pytest.skip("eager's gelu does not depend on the layout here")
    x = xs[differ[0]].item()

    def f(t, y):
        g = gelu(t)
        return g, (g / y).long()

    t = torch.tensor([x, x, -1.5])
    strided = torch.stack([t, t], 1)[:, 0]
    y = torch.maximum(gelu(t)[0], gelu(strided)[0])
    answers = [f(t, y)[1], f(strided, y)[1]]
    assert not torch.equal(*answers)  # eager is not deterministic at this value
    cf = framejit.compile(f)
    for inp in (t, strided):
        g, n = cf(inp, y)
        torch.testing.assert_close(g, gelu(inp), rtol=1e-5, atol=1e-5)
        assert bool(((n == answers[0]) | (n == answers[1])).all()), (n, answers)


# ---- found by scripts/selfhost (the tests under the hook): fixed ----

def test_a_function_defined_in_the_frame_passed_on_after_a_graph_break():
    # After a graph break, a call that passes a function defined in the frame to an
    # inlined helper which calls framejit.compile (as the test helpers do) became an
    # opaque plan step, which cannot take that function: 'cannot continue ... after a
    # graph break'. Such a call now resumes the frame in CPython before it.
    def check(fn, x):
        return framejit.compile(fn)(x)

    def t(x):
        y = x + 1
        print("a graph break")

        def f(z):
            return z * 2

        return check(f, y)

    ct = framejit.compile(t)
    for n in (3, 3, 5):
        x = torch.randn(n)
        assert_same(ct(x), t(x))


def outcome(fn, *args):
    try:
        return "ok", fn(*args)
    except Exception as e:  # noqa: BLE001
        return "raised", type(e), str(e).split("\nException raised from")[0]


def dead_matmul(t):
    v = torch.matmul(t.mT, t + 1)  # bool @ int64: eager raises; its meta run does not
    return t.shape[0]


def dead_argmin(t):
    v = torch.trunc(torch.argmin(t)).reshape(-1)  # argmin of bool: eager raises
    return 0


def dead_var(t):
    v = torch.var(t, dim=0, correction=0, keepdim=True)  # var of bool: eager raises
    return 7


@pytest.mark.parametrize("fn", [dead_matmul, dead_argmin, dead_var])
def test_an_op_that_raises_raises_even_when_its_result_is_unused(fn):
    # Found by scripts/fuzz --count 2000 (seed 1): the graph had no outputs, so nothing
    # ran and the call returned where eager raises.
    t = torch.tensor([[False], [True]]) if fn is dead_matmul else torch.tensor([False, True, False])
    cf = framejit.compile(fn)
    for _ in range(2):
        want = outcome(fn, t)
        assert want[0] == "raised"
        assert outcome(cf, t) == want


def int_times(t, n):
    k = int(t.argmax())  # a number read from a tensor: arithmetic on it is in the graph
    for _ in range(2):
        k = k * n
    return k, k + n


def test_int_arithmetic_on_a_number_read_from_a_tensor_does_not_wrap():
    # Found by the fuzzer: 1 * -2**63 * -2**63 wrapped to 0 in int64; Python's is 2**126.
    cf = framejit.compile(int_times)
    t = torch.tensor([-1.0, 2.0, 1.0])
    for n in (3, -2**63, 2**40, 5, 2**31 + 7, -7):
        assert cf(t, n) == int_times(t, n)
    assert framejit.stats(int_times)["fallbacks"] == 0, framejit.fallbacks(int_times)
