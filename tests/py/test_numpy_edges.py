"""NumPy at the edges of a compiled function (interp/trace/ops_numpy.cpp): NumPy
scalar arguments are symbols tagged with their NumPy type (a new value does not
recompile; torch takes them as Python numbers; Python operators on them give NumPy's
types), and NumPy's math, dtypes, finfo and iinfo on known values run while tracing.
Each case runs compiled and eager on the same inputs: values, types, dtypes."""
import numpy as np
import torch

import framejit
from conftest import assert_same, compiled_whole as whole, same_outcome


def test_numpy_float64_scalar_times_a_tensor_compiles_once():
    # the seed case: three values of s, one compile, eager's results
    def f(x, s):
        return x * s

    whole(f, [(torch.randn(3), np.float64(v)) for v in (2.5, -0.5, 7.25)], compiles=1)


def test_numpy_scalar_arguments_of_each_kind_act_as_torch_takes_them():
    # int32 tensor with np.float64: float32 as with a Python float; np.bool_ in full():
    # float32, unlike True; torch.tensor() keeps NumPy's dtype
    def f(x, i, s):
        return (x * s, i * s, i + s, x > s, torch.full((2,), s), torch.tensor(s), x.new_full((2,), s),
                torch.arange(3) * s)

    ints = torch.arange(4, dtype=torch.int32)
    for s in (np.float64(1.5), np.float32(0.25), np.int64(3), np.int32(-2), np.bool_(True), np.uint8(7)):
        framejit.reset()
        whole(f, [(torch.randn(4), ints, s)])


def test_numpy_scalar_comparisons_stay_symbolic_and_arithmetic_is_numpy_s():
    # comparisons of float64 operands: np.bool_ results, no recompile for a new value;
    # arithmetic: NumPy's own results and types (on the value, guarded)
    def compare(x, s):
        big = s > 2
        return x * 2 if big else x, type(big).__name__, big, s == 0.5, 3 <= s

    def arith(x, s):
        k = s * 3 + 1
        return x * k, type(k).__name__, k - s, -s

    whole(compare, [(torch.randn(3), np.float64(v)) for v in (2.0, 0.5, 3.5, 1.0)], compiles=2)
    whole(arith, [(torch.randn(3), np.float64(v)) for v in (2.0, 0.5)])


def test_other_numpy_arithmetic_is_numpy_s_own():
    # float32 rounding, int overflow wrapping and division by zero are NumPy's, and
    # so are their warnings: what sets a floating-point flag runs each call under the
    # np.errstate of that call (here "ignore", then "raise")
    def f(x, s):
        return s * 3, s / 7, s // 2, x * float(s)

    for s in (np.float32(0.1), np.int32(2**31 - 1), np.int64(-5), np.float64(0.0), np.float64(1e308)):
        framejit.reset()
        cf = framejit.compile(f)
        x = torch.randn(3)
        with np.errstate(all="ignore"):
            assert_same(cf(x, s), f(x, s))
        with np.errstate(all="raise"):
            same_outcome(cf, f, x, s, errors=(FloatingPointError,))


def test_numpy_ints_as_sizes_indices_and_ranges():
    def f(x, n):
        acc = x
        for _ in range(n):
            acc = acc * 0.5
        return acc, x[n], x[: int(n) % 3 + 1], torch.zeros(n), x.reshape(n, -1).shape

    whole(f, [(torch.arange(6.0), np.int64(2)), (torch.arange(6.0), np.int64(3))])


def test_numpy_scalars_keep_their_type_across_calls_breaks_and_returns():
    seen = []

    def record(v):
        seen.append(type(v).__name__)

    def f(x, s):
        record(s)  # an opaque call: it receives the NumPy scalar itself
        if x.sum() > 0:  # a branch on a tensor: s live at the break
            return [s, s + 1.5], {"s": -s}, x * s
        return s, x

    framejit.reset()
    cf = framejit.compile(f)
    for v in (1.5, 2.5):
        for x in (torch.ones(3), -torch.ones(3)):
            assert_same(cf(x, np.float64(v)), f(x, np.float64(v)))
    assert set(seen) == {"float64"}
    assert framejit.stats(cf)["fallbacks"] == 0


def test_a_new_numpy_type_or_a_python_number_is_a_new_entry():
    def f(x, s):
        return x * s, type(s).__name__

    framejit.reset()
    cf = framejit.compile(f)
    x = torch.randn(3)
    for s in (np.float64(2.0), np.float32(2.0), 2.0, np.float64(3.0)):
        assert_same(cf(x, s), f(x, s))
    assert framejit.stats(cf)["compiles"] == 3
    assert any("numpy.float64" in g for g in framejit.explain(f, x, np.float64(1.0)).guards)


def test_numpy_metadata_and_math_on_known_values_fold():
    def f(x, name, n):
        eps = np.finfo(np.float32).eps
        info = np.iinfo(np.int32)
        dt = np.dtype(name)
        return (x.clamp(min=float(eps)), int(info.bits), float(info.max), dt.itemsize, dt.kind,
                x * float(np.sqrt(n)), int(np.sum([1, 2, n])), bool(np.isclose(n, 4.0, atol=1e-6)),
                dt == np.float32)

    whole(f, [(torch.randn(3), "float32", 4), (torch.randn(3), "float64", 9)])


def test_numpy_dtype_as_a_dict_key():
    def f(x, name):
        table = {np.dtype("float64"): torch.float64, np.dtype("int32"): torch.int32}
        return x.to(table[np.dtype(name)])

    whole(f, [(torch.randn(2, 3), "float64"), (torch.randn(2, 3), "int32")])


def test_a_tuple_of_numpy_ints_as_a_shape():
    def f(x, shape):
        return torch.zeros(tuple(int(s) for s in shape)) + x.sum(), int(shape[0]) * 2

    whole(f, [(torch.randn(3), (np.int64(2), np.int64(3))), (torch.randn(3), (np.int64(4), np.int64(5)))], compiles=1)


def test_torch_from_numpy_of_an_argument_compiles_whole():
    # a NumPy array argument is the tensor of its memory (interp/trace/ops_arrays.cpp):
    # from_numpy of it is that tensor, and the argument comes back as itself
    def f(a):
        t = torch.from_numpy(a)
        return t * 2 + 1, a

    framejit.reset()
    cf = framejit.compile(f)
    for shape in ((2, 2), (3, 1), (2, 2)):
        a, b = np.ones(shape, dtype=np.float32), np.ones(shape, dtype=np.float32)
        got, want = cf(a), f(b)
        assert_same(got[0], want[0])
        assert np.array_equal(got[1], want[1]) and got[1] is a
    s = framejit.stats(cf)
    assert s["fallbacks"] == 0 and s["graph_breaks"] == 0 and s["graphs"] >= 1, s


def test_a_numpy_call_on_a_float_zero_stays_a_call():
    # np.clip(0.0, ...) cannot be folded on a guarded value (a zero's sign is not
    # guarded): it runs as a call between graphs, never a fallback
    def f(x, v):
        return x * float(np.clip(v, 0.5, 1.5))

    framejit.reset()
    cf = framejit.compile(f)
    for v in (2.0, 0.0, 1.0):
        x = torch.randn(3)
        assert_same(cf(x, v), f(x, v))
    assert framejit.stats(cf)["fallbacks"] == 0


def test_a_ufunc_that_calls_python_runs_at_every_call():
    # np.frompyfunc makes a ufunc that calls a Python function: never computed while
    # tracing (its side effect would happen once), unlike NumPy's own ufuncs
    calls = []

    def side(a):
        calls.append(a)
        return a * 2

    twice = np.frompyfunc(side, 1, 1)

    def f(x, s):
        return x * float(twice(s)), float(np.sqrt(s))

    framejit.reset()
    cf = framejit.compile(f)
    for v in (2.0, 2.0, 3.0):
        x = torch.randn(3)
        assert_same(cf(x, np.float64(v)), f(x, np.float64(v)))
    assert calls == [2.0, 2.0, 2.0, 2.0, 3.0, 3.0]


def test_where_torch_rejects_numpy_scalars_so_does_the_compiled_call():
    # torch's own rules: split() wants a Python int, a tensor item takes an np.float64
    # or a NumPy int but not np.float32 or np.bool_, an index list of np.uint32 does
    # not promote; a dict key must hash (a slice does not)
    def split(x, s):
        return x.split(s)

    def store(x, s):
        t = torch.zeros(3)
        t[1] = s
        return t, x

    def index(x, s):
        return x[[s, 0]]

    def key(x, s):
        d = {"a": 1}
        return x + 1, d.get(slice(1, 2), 5)

    cases = [(split, np.int64(2)), (store, np.float32(2.5)), (store, np.bool_(True)), (store, np.float64(2.5)),
             (store, np.int32(4)), (index, np.uint32(2)), (index, np.int64(2)), (key, np.float64(1.0))]
    for f, s in cases:
        framejit.reset()
        cf = framejit.compile(f)
        same_outcome(cf, f, torch.arange(6.0), s, errors=(TypeError, RuntimeError))
