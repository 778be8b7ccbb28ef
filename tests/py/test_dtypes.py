"""The pointwise family over every dtype, differential against eager PyTorch.

Generated from a table of ops: each case compiles one function that applies the op
to many operands at once (every dtype pair, dimensioned and 0-d tensors, Python
numbers, transposed / broadcast / one-element / empty shapes), so that one trace and
one LLVM module cover a whole row of the matrix. Every result is compared with
eager: integers and bools bit-exact, float32 within 1e-5 and float64 within 1e-12
relative, the same dtype (that is torch.result_type's promotion) and shape.
Combinations that eager rejects must raise the same exception type and message
through framejit (which falls back)."""
import operator

import pytest
import torch
import torch.nn.functional as F

import framejit

DTYPES = [torch.bool, torch.uint8, torch.int32, torch.int64, torch.float32, torch.float64]
NAMES = {torch.bool: "b", torch.uint8: "u8", torch.int32: "i32", torch.int64: "i64",
         torch.float32: "f32", torch.float64: "f64"}


def sample(dtype, shape, seed):
    """Values that exercise each dtype's corners: negatives, zero, wrapping
    magnitudes, NaN, infinities, -0.0, halves (rounding), big floats (casts)."""
    g = torch.Generator().manual_seed(seed)
    n = 1
    for s in shape:
        n *= s
    if dtype == torch.bool:
        flat = torch.rand(n, generator=g) > 0.5
    elif dtype == torch.uint8:
        flat = torch.randint(0, 256, (n,), generator=g, dtype=torch.int64).to(torch.uint8)
    elif dtype in (torch.int32, torch.int64):
        flat = torch.randint(-60, 60, (n,), generator=g, dtype=torch.int64)
        special = [0, -1, 1, 7, -7, 2**31 - 1 if dtype == torch.int32 else 2**62 + 5,
                   -2**31 if dtype == torch.int32 else -2**63]
        flat[:min(n, len(special))] = torch.tensor(special[:n])
        flat = flat.to(dtype)
    else:
        flat = (torch.randn(n, generator=g, dtype=torch.float64) * 3).to(dtype)
        special = [float("nan"), float("inf"), -float("inf"), -0.0, 0.5, 2.5, -1.5, 3e9, -7.0, 300.7]
        flat[:min(n, len(special))] = torch.tensor(special[:n], dtype=dtype)
    return flat.reshape(shape)


def assert_close(actual, expected, what):
    assert isinstance(actual, torch.Tensor), what
    assert actual.dtype == expected.dtype, f"{what}: dtype {actual.dtype} != eager {expected.dtype}"
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != eager {expected.shape}"
    if expected.dtype == torch.float32:
        torch.testing.assert_close(actual, expected, rtol=1e-5, atol=1e-6, equal_nan=True, msg=what)
    elif expected.dtype == torch.float64:
        torch.testing.assert_close(actual, expected, rtol=1e-12, atol=1e-12, equal_nan=True, msg=what)
    else:
        assert torch.equal(actual, expected), f"{what}:\n{actual}\n!= eager\n{expected}"


def eager_ok(fn, *args):
    try:
        fn(*args)
        return True
    except Exception:  # noqa: BLE001 - any rejection by eager
        return False


def make_fn(params, exprs, env):
    """def fn(params): return ((exprs[:25]), (exprs[25:50]), ...) built from source, so
    that framejit traces it (tuples of at most 25: CPython builds longer displays
    with LIST_APPEND)."""
    chunks = ["(" + ", ".join(exprs[i:i + 25]) + ",)" for i in range(0, len(exprs), 25)]
    src = f"def fn({', '.join(params)}):\n    return ({', '.join(chunks)},)\n"
    scope = dict(env)
    exec(src, scope)  # noqa: S102 - test code generated from the tables below
    return scope["fn"], src


def flat(results):
    return [t for chunk in results for t in chunk]


def run_compiled(params, exprs, args, env, expect_graph=True):
    fn, src = make_fn(params, exprs, env)
    expected = flat(fn(*args))
    actual = flat(framejit.compile(fn)(*args))
    assert len(actual) == len(expected)
    for e, a, x in zip(exprs, actual, expected):
        assert_close(a, x, e)
    s = framejit.stats(fn)
    if expect_graph:
        assert s["fallbacks"] == 0 and s["graphs"] == 1, (src, framejit.fallbacks(fn))
    return fn


def check_raises_like_eager(params, expr, args, env):
    fn, src = make_fn(params, [expr], env)
    with pytest.raises(Exception) as eager:
        fn(*args)
    with pytest.raises(type(eager.value)) as ours:
        framejit.compile(fn)(*args)
    assert str(ours.value) == str(eager.value), src


ENV = {"torch": torch, "F": F, "operator": operator, "nan": float("nan")}

# Binary ops on two tensors: name -> expression over a and b.
BINARY = {
    "add": "{a} + {b}", "sub": "{a} - {b}", "mul": "{a} * {b}", "div": "{a} / {b}",
    "floordiv": "{a} // {b}", "mod": "{a} % {b}", "pow": "torch.pow({a}, {b})",
    "maximum": "torch.maximum({a}, {b})", "minimum": "torch.minimum({a}, {b})",
    "eq": "{a} == {b}", "ne": "{a} != {b}", "lt": "{a} < {b}", "le": "{a} <= {b}",
    "gt": "{a} > {b}", "ge": "{a} >= {b}",
    "logical_and": "torch.logical_and({a}, {b})", "logical_or": "{a}.logical_or({b})",
    "logical_xor": "torch.logical_xor({a}, {b})",
    "and": "{a} & {b}", "or": "{a} | {b}", "xor": "torch.bitwise_xor({a}, {b})",
}


def compiled_binary(name, da, db):
    """Whether framejit compiles this tensor-tensor combination (eager accepts it):
    integer division and integer powers by a tensor fall back (eager raises
    ZeroDivisionError on a zero element, which a kernel cannot)."""
    r = torch.promote_types(da, db)
    if name in ("floordiv", "mod", "pow"):
        return r.is_floating_point
    return True


def binary_operands():
    """12 tensors: each dtype dimensioned [3, 4] (a1..) and 0-d (z..)."""
    params, args = [], []
    for k, d in enumerate(DTYPES):
        params.append(f"d_{NAMES[d]}")
        args.append(sample(d, (3, 4), 10 + k))
    for k, d in enumerate(DTYPES):
        params.append(f"z_{NAMES[d]}")
        args.append(sample(d, (), 20 + k).clone() if d != torch.bool else torch.tensor(True))
    # nonzero divisors for the exact integer paths
    return params, args


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_dtype_matrix(name):
    params, args = binary_operands()
    by_name = dict(zip(params, args))
    exprs, rejected = [], []
    for pa in params:
        for pb in params:
            if pa.startswith("z") and pb.startswith("z") and pa != pb and pa[2:] != "f32":
                continue  # 0-d with 0-d: a row is enough
            e = BINARY[name].format(a=pa, b=pb)
            da, db = by_name[pa].dtype, by_name[pb].dtype
            if not eager_ok(eval("lambda " + ",".join(params) + ": " + e, ENV), *args):
                rejected.append(e)
            elif compiled_binary(name, da, db):
                exprs.append(e)
                if name in ("add", "mul", "maximum"):
                    assert eval(e, ENV, by_name).dtype == torch.result_type(by_name[pa], by_name[pb])
    assert exprs
    run_compiled(params, exprs, args, ENV)
    for e in rejected[:6]:  # each rejection traces alone; a few per op suffice
        check_raises_like_eager(params, e, args, ENV)


UNARY = {
    "neg": "-{x}", "abs": "torch.abs({x})", "sign": "{x}.sign()", "exp": "torch.exp({x})",
    "log": "torch.log({x})", "sqrt": "{x}.sqrt()", "sin": "torch.sin({x})", "cos": "torch.cos({x})",
    "tanh": "torch.tanh({x})", "sigmoid": "torch.sigmoid({x})", "erf": "torch.erf({x})",
    "expm1": "torch.expm1({x})", "log1p": "torch.log1p({x})", "log2": "torch.log2({x})", "rsqrt": "torch.rsqrt({x})",
    "reciprocal": "{x}.reciprocal()", "relu": "F.relu({x})",
    # eager's float32 gelu(+inf) is NaN on its vectorized path, inf on its scalar
    # path (one-element tensors): framejit matches both; +inf is kept out here
    "gelu": "F.gelu({x}.clamp(max=1e30))",
    "gelu_tanh": "F.gelu({x}, approximate='tanh')", "silu": "F.silu({x})",
    "softplus": "F.softplus({x})", "softplus_kw": "F.softplus({x}, beta=2, threshold=1.5)",
    "floor": "torch.floor({x})", "ceil": "{x}.ceil()", "round": "torch.round({x})",
    "trunc": "torch.trunc({x})", "isnan": "torch.isnan({x})", "isinf": "{x}.isinf()",
    "logical_not": "torch.logical_not({x})", "invert": "~{x}", "nan_to_num": "torch.nan_to_num({x})",
    "float": "{x}.float()", "double": "{x}.double()", "long": "{x}.long()", "int": "{x}.int()",
    "bool": "{x}.bool()", "to_u8": "{x}.to(torch.uint8)", "to_kw": "{x}.to(dtype=torch.int32)",
    "clamp": "torch.clamp({x}, min=-1, max=2)", "clamp_f": "{x}.clamp(0.5)",
    "clamp_max": "torch.clamp_max({x}, 1)", "clip": "torch.clip({x}, max=3)",
    "pow2": "{x} ** 2", "pow3": "torch.pow({x}, 3)", "pow_f": "{x} ** 2.5",
}


def unary_operands(dtype):
    """The shapes: contiguous, transposed (non-contiguous), one element, empty, 0-d."""
    x = sample(dtype, (5, 6), 1)
    return ["x", "xt", "x1", "xe", "x0"], [x, sample(dtype, (6, 5), 2).t(), sample(dtype, (1,), 3),
                                           sample(dtype, (0, 3), 4), sample(dtype, (), 5)]


@pytest.mark.parametrize("dtype", DTYPES, ids=[NAMES[d] for d in DTYPES])
def test_unary_ops_every_dtype_and_shape(dtype):
    params, args = unary_operands(dtype)
    exprs, rejected = [], []
    for name, template in UNARY.items():
        for p in params:
            e = template.format(x=p)
            (exprs if eager_ok(eval("lambda " + ",".join(params) + ": " + e, ENV), *args) else rejected).append(e)
    run_compiled(params, exprs, args, ENV)
    for e in rejected[:: max(1, len(rejected) // 8)]:
        check_raises_like_eager(params, e, args, ENV)


SCALARS = ["True", "False", "3", "-2", "2.5", "-0.5", "2**40", "nan"]
WITH_SCALAR = {
    "add": "x + {s}", "radd": "{s} + x", "sub": "x - {s}", "rsub": "{s} - x", "mul": "x * {s}",
    "div": "x / {s}", "rdiv": "{s} / x", "floordiv": "x // {s}", "mod": "x % {s}",
    "pow": "x ** {s}", "rpow": "{s} ** x", "lt": "x < {s}", "eq": "{s} == x", "ge": "x >= {s}",
    "and": "x & {s}", "or": "{s} | x", "xor": "x ^ {s}",
    "clamp_min": "x.clamp(min={s})", "clamp": "torch.clamp(x, -{s}, {s})",
    "masked_fill": "x.masked_fill(m, {s})", "where": "torch.where(m, x, {s})",
    "where_l": "torch.where(m, {s}, x)",
}


def scalar_case_compiles(name, dtype, s):
    """What framejit leaves to eager: integer floor division / remainder / power by a
    value that is not a nonzero (non-negative) constant, powers of bools, reversed
    integer division and pow."""
    v = eval(s, ENV)
    integral = not dtype.is_floating_point and not isinstance(v, float)
    if name in ("floordiv", "mod") and integral and v == 0:
        return False
    if name == "pow" and integral and (v < 0 or dtype == torch.bool and isinstance(v, bool)):
        return False
    if name == "rpow" and not dtype.is_floating_point and not isinstance(v, float):
        return False
    return True


@pytest.mark.parametrize("dtype", DTYPES, ids=[NAMES[d] for d in DTYPES])
def test_python_scalars_promote_weakly(dtype):
    x = sample(dtype, (4, 5), 7)
    m = sample(torch.bool, (4, 5), 8)
    exprs, fallback, rejected = [], [], []
    for name, template in WITH_SCALAR.items():
        for s in SCALARS:
            e = template.format(s=s)
            if not eager_ok(eval("lambda x, m: " + e, ENV), x, m):
                rejected.append(e)
            elif scalar_case_compiles(name, dtype, s):
                exprs.append(e)
            else:
                fallback.append(e)
    run_compiled(["x", "m"], exprs, [x, m], ENV)
    for e in fallback[:4]:
        run_compiled(["x", "m"], [e], [x, m], ENV, expect_graph=False)
    for e in rejected[:: max(1, len(rejected) // 8)]:
        check_raises_like_eager(["x", "m"], e, [x, m], ENV)


def test_result_type_of_weak_and_zero_dim_operands():
    """The promotion rules named in the issue, each against torch.result_type."""
    args = dict(i32=torch.arange(4, dtype=torch.int32), b=torch.tensor([True, False, True, True]),
                f32=torch.ones(4), z_f64=torch.tensor(2.0, dtype=torch.float64),
                z_i64=torch.tensor(2), z_u8=torch.tensor(2, dtype=torch.uint8))
    cases = [("i32 * 2.5", torch.float32), ("i32 + 3", torch.int32), ("b + 1", torch.int64),
             ("f32 * 2", torch.float32), ("f32 * z_f64", torch.float32), ("i32 * z_i64", torch.int32),
             ("i32 * z_f64", torch.float64), ("b * z_u8", torch.uint8), ("b & True", torch.bool),
             ("i32 / 2", torch.float32), ("b ** 2", torch.int64)]
    for expr, want in cases:
        fn = run_compiled(list(args), [expr], list(args.values()), ENV)
        out = flat(fn(*args.values()))[0]
        assert out.dtype == want, expr


def test_binary_shapes_broadcast_transposed_empty():
    cases = [((3, 4), (4, 3), True), ((2, 1, 4), (3, 1), False), ((0, 3), (1, 3), False),
             ((1,), (1,), False), ((5,), (), False)]
    for da, db in [(torch.int32, torch.int64), (torch.uint8, torch.bool), (torch.float32, torch.float64),
                   (torch.int64, torch.float32)]:
        for sa, sb, transpose in cases:
            a = sample(da, sa, 1)
            b = sample(db, sb, 2)
            if transpose:
                b = b.t()
            exprs = ["a + b", "a * b", "a < b", "torch.maximum(a, b)", "torch.where(a > 0, a, b)",
                     "a // 3", "a % 3"]
            if not (a.dtype.is_floating_point or b.dtype.is_floating_point):
                exprs += ["a & b", "a ^ b"]
            run_compiled(["a", "b"], exprs, [a, b], ENV)


def test_integer_division_by_zero_raises_like_eager():
    x = torch.arange(-3, 3)
    zero = torch.zeros(6, dtype=torch.int64)
    for expr in ["x // 0", "x % 0", "x // zero", "torch.remainder(x, zero)", "5 // zero"]:
        check_raises_like_eager(["x", "zero"], expr, [x, zero], ENV)
    # A tensor divisor without zeros runs in eager (framejit falls back), same values.
    run_compiled(["x", "y"], ["x // y", "x % y"], [x, torch.tensor([2, -3, 4, -5, 6, -7])], ENV,
                 expect_graph=False)
    # INT_MIN // -1 wraps and INT_MIN % -1 is 0, as in eager
    for dtype in (torch.int32, torch.int64):
        m = torch.tensor([torch.iinfo(dtype).min, -7, 7, 0], dtype=dtype)
        run_compiled(["m"], ["m // -1", "m % -1", "m // -2", "m % -2", "m // 3", "m % 3"], [m], ENV)


def test_float_to_int_casts_of_nan_inf_and_out_of_range():
    vals = [float("nan"), float("inf"), -float("inf"), 3e9, -3e9, 1e20, -1e20, 2.0**33 + 7,
            -2.5, 2.5, 255.9, 256.1, -0.7, 0.7]
    for dtype in (torch.float32, torch.float64):
        x = torch.tensor(vals * 40, dtype=dtype)  # long enough for the vector loop
        x1 = torch.tensor(vals[:1], dtype=dtype)  # and a lone element
        run_compiled(["x", "x1"], ["x.long()", "x.int()", "x.to(torch.uint8)", "x.bool()",
                                   "x.to(torch.int32) + 1", "x1.long()", "x1.int()"], [x, x1], ENV)


def test_runtime_scalars_keep_their_python_type():
    """SymInt / SymFloat / SymBool operands: ints exact in int64 (beyond 2^53), weak
    promotion by their Python type, one compile for every value."""
    def f_int(x, n, s, flag):
        return x + n, x * s, x & flag, x < n, x.clamp(min=n), x // 3 + n

    def f_float(x, n, s, flag):
        return x + n, x * s, x < n, x.clamp(min=n), torch.where(x > 0, x, s), x * flag

    for dtype in (torch.int64, torch.int32, torch.uint8, torch.float32, torch.float64):
        f = f_float if dtype.is_floating_point else f_int
        framejit.reset()
        cf = framejit.compile(f)
        x = sample(dtype, (6,), 3)
        for n, s, flag in [(2**60 + 1, 0.25, True), (-5, 1.5, False), (7, -2.0, True)]:
            if dtype == torch.int32 and abs(n) > 2**31 or dtype == torch.uint8 and abs(n) > 255:
                continue
            for a, e in zip(cf(x, n, s, flag), f(x, n, s, flag)):
                assert_close(a, e, f"{dtype} n={n}")
        st = framejit.stats(f)
        assert st["fallbacks"] == 0 and st["compiles"] == 1, (dtype, framejit.fallbacks(f))


def test_checked_scalar_conversions_are_guarded():
    def f(x, m, v):
        return x.masked_fill(m, v)

    cf = framejit.compile(f)
    x = torch.arange(6, dtype=torch.int32)
    m = torch.tensor([True, False] * 3)
    assert_close(cf(x, m, 5), f(x, m, 5), "in range")
    assert framejit.stats(f)["graphs"] == 1
    with pytest.raises(RuntimeError) as eager:
        f(x, m, 2**40)
    with pytest.raises(RuntimeError) as ours:
        cf(x, m, 2**40)  # the range guard fails; the retrace falls back; eager raises
    assert str(ours.value) == str(eager.value)
    assert_close(cf(x, m, -9), f(x, m, -9), "in range again")
