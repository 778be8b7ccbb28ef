"""Hostile inputs (issue 21): input kinds framejit does not compile get eager's own
result or error (it falls back), never another one; and a probe of bad inputs (every
dtype torch has, 0-d, empty, 9 dims, non-contiguous, flipped, expanded and overlapping
memory, NaN and inf, Python ints beyond int64) on pointwise, reduction, view, matmul and
in-place functions, each against eager. Each probe runs in its own interpreter, so that
a crash or a hang is a failure of its test and not of the run."""
import pytest

from conftest import probe

# The probes' shared half: outcome() is a call's result (with its arguments after it,
# for in-place functions) or its exception's type and first line; check() calls eager
# and a freshly compiled function twice (trace, then cache hit) on equal inputs and
# reports each difference as a MISMATCH line.
HARNESS = r'''
import contextlib, math, warnings
import torch, framejit
warnings.simplefilter("ignore")

def after(args):
    """The arguments as they are after a call (copies of the plain tensors)."""
    return [a.clone() if isinstance(a, torch.Tensor) and a.layout == torch.strided
            and not a.is_nested and a.device.type == "cpu" else a for a in args]

def outcome(fn, args, ctx=contextlib.nullcontext):
    """("ok", result, arguments after) or ("raise", type, first line, arguments after)."""
    try:
        with ctx():
            r = fn(*args)
        return ("ok", r, after(args))
    except Exception as e:
        return ("raise", type(e).__name__, str(e).split("\n")[0], after(args))

def comparable(t):
    if t.is_sparse or t.layout != torch.strided and t.layout != torch.jagged:
        t = t.to_dense()
    if t.is_quantized:
        t = t.dequantize()
    if t.is_nested:
        return [comparable(p) for p in t.unbind()]
    if t.is_meta:
        return ("meta", tuple(t.shape))
    if t.is_conj() or t.is_neg():
        t = t.resolve_conj().resolve_neg()
    if t.dtype.is_floating_point and t.dtype.itemsize == 1:
        return t.float()
    if t.dtype in (torch.uint16, torch.uint32):
        return t.to(torch.int64)
    if t.dtype == torch.uint64:
        return t.to(torch.float64)
    return t

def same(a, b):
    if isinstance(a, torch.Tensor) and a.is_nested:
        return isinstance(b, torch.Tensor) and b.is_nested and same(a.unbind(), b.unbind())
    if isinstance(a, torch.Tensor):
        if not isinstance(b, torch.Tensor) or a.dtype != b.dtype or a.shape != b.shape or a.layout != b.layout:
            return False
        if type(a) is not type(b) or a.is_inference() != b.is_inference() or a.requires_grad != b.requires_grad:
            return False
        a, b = comparable(a), comparable(b)
        if not isinstance(a, torch.Tensor):
            return same(a, b)
        if a.dtype.is_floating_point or a.dtype.is_complex:
            return torch.allclose(a, b, rtol=1e-5, atol=1e-6, equal_nan=True)
        return torch.equal(a, b)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    return type(a) is type(b) and a == b

def differs(want, got):
    if want[0] != got[0]:
        return True
    if want[0] == "raise":
        return want[1:3] != got[1:3] or not same(want[3], got[3])
    return not (same(want[1], got[1]) and same(want[2], got[2]))

def show(o):
    return f"raises {o[1]}: {o[2]}" if o[0] == "raise" else "returns"  # results differ

def seeded(make):
    torch.manual_seed(0)
    return make()

MISMATCHES = []

def check(name, fn, make, ctx=contextlib.nullcontext, warm=None):
    """eager against framejit on make()'s arguments; `warm`: arguments the compiled
    function sees first (an entry compiled for them, so that make()'s go through guards)."""
    framejit.reset()
    compiled = framejit.compile(fn)
    if warm is not None:
        outcome(compiled, warm())
    for k in range(2):
        want = outcome(fn, seeded(make), ctx)
        got = outcome(compiled, seeded(make), ctx)
        if differs(want, got):
            MISMATCHES.append(f"{name} (call {k}): eager {show(want)} / framejit {show(got)}")
            return

def finish():
    for m in MISMATCHES:
        print("MISMATCH", m)
    print("DONE")
'''


def run_probe(body, timeout=120):
    r = probe(HARNESS + body + "\nfinish()\n", timeout=timeout)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "DONE" in r.stdout, r.stdout + r.stderr[-3000:]
    mismatches = [line for line in r.stdout.splitlines() if line.startswith("MISMATCH")]
    assert mismatches == []


# ---- input kinds framejit does not compile --------------------------------------

INPUT_KINDS = r'''
def pointwise(x): return x * 2 + 1
def inplace(x): x.add_(1); return x
def inplace_sum(x): x.mul_(2); return x.sum()
def view(x): return x[1:]
def with_plain(x, y): return x + y

def inference():
    with torch.inference_mode():
        return (torch.randn(3),)
class Sub(torch.Tensor):
    pass
KINDS = {
    "inference": inference,
    "sparse_coo": lambda: (torch.eye(3).to_sparse(),),
    "sparse_csr": lambda: (torch.eye(3).to_sparse_csr(),),
    "sparse_csc": lambda: (torch.eye(3).to_sparse_csc(),),
    "quantized": lambda: (torch.quantize_per_tensor(torch.randn(3), 0.1, 0, torch.quint8),),
    "nested": lambda: (torch.nested.nested_tensor([torch.randn(2), torch.randn(3)]),),
    "meta": lambda: (torch.empty(3, device="meta"),),
    "complex64": lambda: (torch.randn(3, dtype=torch.complex64),),
    "complex128": lambda: (torch.randn(3, dtype=torch.complex128),),
    "float16": lambda: (torch.randn(3).half(),),
    "bfloat16": lambda: (torch.randn(3).bfloat16(),),
    "requires_grad": lambda: (torch.randn(3, requires_grad=True),),
    "conj": lambda: (torch.randn(3, dtype=torch.complex64).conj(),),
    "neg_bit": lambda: (torch.randn(3, dtype=torch.complex64).conj().imag,),
    "subclass": lambda: (torch.randn(3).as_subclass(Sub),),
    "parameter": lambda: (torch.nn.Parameter(torch.randn(3)),),
    "zero_stride": lambda: (torch.randn(1).expand(3),),
    "overlap": lambda: (torch.randn(10).as_strided((3,), (0,)),),
    "overlap_2d": lambda: (torch.randn(10).as_strided((4, 3), (1, 1)),),
}
for kind, make in KINDS.items():
    for fn in (pointwise, inplace, inplace_sum, view):
        check(f"{fn.__name__}[{kind}]", fn, make)
        # the same input after an entry compiled for a plain tensor: the guards refuse it
        check(f"{fn.__name__}[{kind}, after a plain float32 tensor]", fn, make, warm=lambda: (torch.randn(3),))
    check(f"with_plain[{kind}]", with_plain, lambda: (*make(), torch.ones(3)))
    check(f"with_plain[plain, {kind}]", with_plain, lambda: (torch.ones(3), *make()))
    check(f"inplace[{kind}, no_grad]", inplace, make, ctx=torch.no_grad)
    check(f"inplace[{kind}, inference_mode]", inplace, make, ctx=torch.inference_mode)
'''


def test_input_kinds_get_eagers_outcome():
    run_probe(INPUT_KINDS, timeout=180)


INFERENCE = r'''
def inplace(x): x.add_(1); return x
def make():
    with torch.inference_mode():
        return (torch.zeros(3),)
want = outcome(inplace, make())
assert want[0] == "raise" and want[2].startswith("Inplace update to inference tensor outside InferenceMode"), want
check("add_ of an inference tensor", inplace, make)
check("add_ of an inference tensor, after a plain tensor", inplace, make, warm=lambda: (torch.zeros(3),))
check("add_ of an inference tensor in inference mode", inplace, make, ctx=torch.inference_mode,
      warm=lambda: (torch.zeros(3),))
'''


SPARSE = r'''
def f(x): return x * 2 + 1
x = torch.eye(3).to_sparse()
for _ in range(2):
    want = outcome(f, (x,))
    got = outcome(framejit.compile(f), (x,))
    assert want[0] == "raise" and got[:2] == want[:2] and got[2] == want[2], (want, got)
    assert "data pointer" not in got[2]
'''


OVERLAP_WRITE = r'''
def f(x): x.mul_(2); return x
def make(): return (torch.arange(10.0).as_strided((4, 3), (0, 1)),)
check("mul_ of overlapping memory", f, make)
check("mul_ of overlapping memory, after a plain tensor", f, make, warm=lambda: (torch.ones(4, 3),))
want = outcome(f, make())
assert want[0] == "raise" and "more than one element of the written-to tensor" in want[2], want
'''


def test_inference_sparse_and_overlap_keep_eagers_errors():
    """An in-place update of an inference tensor outside inference mode, a sparse input,
    an in-place update of memory whose elements overlap: eager's own errors."""
    run_probe(INFERENCE + SPARSE + OVERLAP_WRITE)


# ---- the bad-input probe ---------------------------------------------------------

FUNCTIONS = r'''
def pointwise(x): return x * 2 + x
def unary(x): return torch.abs(x) - x
def reduction(x): return x.sum()
def reduction_dim(x): return x.amax(-1) if x.dim() else x.amax()
def view(x): return x.t()[..., :2] if x.dim() >= 2 else x.view(-1)
def matmul(x): return x @ x.transpose(-1, -2) if x.dim() >= 2 else x * x
def inplace(x): x.add_(1); return x.sum()
def compare(x): return (x > 0) & (x == x)
FUNCTIONS = [pointwise, unary, reduction, reduction_dim, view, matmul, inplace, compare]

def make(dtype, shape=(3, 4)):
    base = torch.randn(shape, generator=torch.Generator().manual_seed(0)) * 3
    if dtype.is_complex:
        return torch.complex(base, base.flip(-1) if base.dim() else base)
    try:
        return base.to(dtype)
    except Exception:  # a dtype a float does not convert to directly
        return base.abs().to(torch.uint8).to(dtype)
'''

ALL_DTYPES = FUNCTIONS + r'''
names = ["bool", "uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64", "float16",
         "bfloat16", "float32", "float64", "complex32", "complex64", "complex128", "float8_e4m3fn",
         "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e8m0fnu"]
dtypes = [getattr(torch, n) for n in names if hasattr(torch, n)]
assert len(dtypes) >= 19, dtypes
for d in dtypes:
    for fn in FUNCTIONS:
        check(f"{fn.__name__}[{d}]", fn, lambda: (make(d),))
# One compiled function meeting every dtype in turn: each goes through the guards.
for fn in FUNCTIONS:
    framejit.reset()
    compiled = framejit.compile(fn)
    for d in dtypes + dtypes:
        want, got = outcome(fn, (make(d),)), outcome(compiled, (make(d),))
        if differs(want, got):
            MISMATCHES.append(f"{fn.__name__}[{d}] in a sequence of dtypes: eager {show(want)} / framejit {show(got)}")
'''


def test_every_dtype():
    run_probe(ALL_DTYPES, timeout=180)


SHAPES = FUNCTIONS + r'''
SHAPES = {
    "0-d": lambda d: make(d, ()),
    "empty": lambda d: make(d, (0, 3)),
    "empty_last": lambda d: make(d, (3, 0)),
    "9 dims": lambda d: make(d, (2, 1, 2, 1, 2, 1, 2, 1, 2)),
    "transposed": lambda d: make(d, (4, 3)).t(),
    "strided": lambda d: make(d, (6, 8))[::2, 1::3],
    "flipped": lambda d: make(d, (3, 4)).flip(0),
    "expanded": lambda d: make(d, (1, 4)).expand(3, 4),
    "overlapping": lambda d: make(d, (12,)).as_strided((3, 4), (1, 1)),
    "offset": lambda d: make(d, (20,))[7:19].view(3, 4),
    "nan_inf": lambda d: torch.tensor([[float("nan"), float("inf"), -float("inf"), 0.0],
                                       [-0.0, 1e38, -1e-45, 3.0]], dtype=d),
}
for d in (torch.float32, torch.int64, torch.bool):
    for name, mk in SHAPES.items():
        if name == "nan_inf" and not d.is_floating_point:
            continue
        for fn in FUNCTIONS:
            check(f"{fn.__name__}[{name}, {d}]", fn, lambda: (mk(d),))
# Rank 9 and beyond with real sizes (the guards read up to a fixed rank).
for rank in (8, 9, 12):
    for fn in FUNCTIONS:
        check(f"{fn.__name__}[rank {rank}]", fn, lambda: (make(torch.float32, (2,) * rank),))
'''


def test_shapes_layouts_and_special_values():
    run_probe(SHAPES, timeout=180)


BIG_INTS = r'''
def add(x, s): return x + s
def mul(x, s): return x * s
def rsub(x, s): return s - x
def fill(x, s): x.fill_(s); return x
def full(x, s): return torch.full((2,), s) + x
def full_like(x, s): return torch.full_like(x, s)
def compare(x, s): return x < s
def clamp(x, s): return x.clamp(max=s)
def where(x, s): return torch.where(x > 0, x, s)
def in_python(x, s): return x * (s // 3 + 1)
FNS = [add, mul, rsub, fill, full, full_like, compare, clamp, where, in_python]
values = [2**63, -2**63 - 1, -2**64, 10**30, 2**63 - 1, 2**31, 256, -256, 1e39, float("inf"), float("nan")]
for s in values:
    for fn in FNS:
        for d in (torch.float32, torch.int64, torch.int32, torch.uint8, torch.bool):
            check(f"{fn.__name__}[{s!r}, {d}]", fn, lambda: (torch.tensor([1, 0], dtype=d), s))
# One compiled function meeting the values in turn: in range, out of range, in range.
for fn in (fill, add, full):
    for d in (torch.uint8, torch.int32, torch.float32):
        framejit.reset()
        compiled = framejit.compile(fn)
        for s in (5, 300, 7, 2**40, -3, 2**63, 9, 1e39, 2.5):
            want = outcome(fn, (torch.zeros(2, dtype=d), s))
            got = outcome(compiled, (torch.zeros(2, dtype=d), s))
            if differs(want, got):
                MISMATCHES.append(f"{fn.__name__}[{d}] then {s!r}: eager {show(want)} / framejit {show(got)}")
'''


def test_python_numbers_beyond_the_dtypes_range():
    run_probe(BIG_INTS, timeout=180)
