"""Runs a fuzz Program eagerly and through framejit, compares, shrinks a failure and
writes it out as a standalone pytest file."""
import copy
import math
import os
import textwrap

import torch

import framejit

# The contract's 1e-5 relative for float32, and as much absolute for values near zero
# that cancellation leaves. float64 gets the same: a float64 result often carries a
# float32 intermediate (log1p of an int tensor, then + a double), whose last-ulp
# differences (framejit's math is within 2 ulp) a tighter bound would report.
TOLERANCE = {torch.float32: (1e-5, 1e-5), torch.float64: (1e-5, 1e-5)}


def outcome(fn, args):
    try:
        return ("ok", fn(*args))
    except Exception as e:  # noqa: BLE001
        # c10 appends its C++ stack to some messages; it differs from call site to call site.
        return ("exc", type(e).__name__, str(e).split("\nException raised from")[0])


def difference(actual, expected, where="result"):
    """None when actual matches expected as the contract asks, else what differs."""
    if isinstance(expected, torch.Tensor):
        if not isinstance(actual, torch.Tensor):
            return f"{where}: expected a tensor, got {type(actual).__name__}"
        if actual.dtype != expected.dtype:
            return f"{where}: dtype {actual.dtype} vs eager {expected.dtype}"
        if actual.shape != expected.shape:
            return f"{where}: shape {tuple(actual.shape)} vs eager {tuple(expected.shape)}"
        if expected.dtype in TOLERANCE:
            rtol, atol = TOLERANCE[expected.dtype]
            if not torch.allclose(actual, expected, rtol=rtol, atol=atol, equal_nan=True):
                bad = ~torch.isclose(actual, expected, rtol=rtol, atol=atol, equal_nan=True)
                i = bad.nonzero()[0].tolist()
                return (f"{where}: values differ at {i}: {actual[tuple(i)].item()!r} vs eager "
                        f"{expected[tuple(i)].item()!r} ({int(bad.sum())} of {expected.numel()})")
        elif not torch.equal(actual, expected):
            return f"{where}: values differ ({actual.flatten()[:8].tolist()} vs eager {expected.flatten()[:8].tolist()})"
        return None
    if isinstance(expected, (tuple, list)):
        if type(actual) is not type(expected) or len(actual) != len(expected):
            return f"{where}: {type(actual).__name__} of {len(actual) if hasattr(actual, '__len__') else '?'} vs eager {type(expected).__name__} of {len(expected)}"
        for k, (a, e) in enumerate(zip(actual, expected)):
            d = difference(a, e, f"{where}[{k}]")
            if d:
                return d
        return None
    if type(actual) is not type(expected):
        return f"{where}: {type(actual).__name__} {actual!r} vs eager {type(expected).__name__} {expected!r}"
    if isinstance(expected, float):
        if actual == expected:
            same = math.copysign(1, actual) == math.copysign(1, expected)
        else:
            # A number read from a float32 tensor (float(t.sum())) carries the tensor's
            # rounding: the contract's 1e-5 relative applies to it as to the tensor.
            same = (math.isnan(actual) and math.isnan(expected)) or (
                math.isfinite(expected) and math.isclose(actual, expected, rel_tol=1e-5, abs_tol=1e-5))
        return None if same else f"{where}: values differ ({actual!r} vs eager {expected!r})"
    return None if actual == expected else f"{where}: {actual!r} vs eager {expected!r}"


def load(prog):
    """The program's function (fresh code object each time)."""
    scope = {}
    exec(compile(prog.source(), f"<{prog.name}>", "exec"), scope)
    return scope[prog.name]


def check(prog, sets=None):
    """Runs input sets (all by default) eagerly and compiled, then set 0 again compiled
    (a cache hit). Returns None, or a description of the first difference."""
    framejit.reset()
    try:
        fn = load(prog)
    except SyntaxError as e:
        return None if sets is not None else f"generated a syntax error: {e}"
    cf = framejit.compile(fn)
    order = list(sets if sets is not None else range(len(prog.input_sets)))
    order.append(order[0])
    for k in order:
        e = outcome(fn, prog.inputs(k))
        c = outcome(cf, prog.inputs(k))
        if e[0] != c[0] or e[0] == "exc" and e[1:] != c[1:]:
            show = lambda o: o if o[0] == "exc" else ("ok", type(o[1]).__name__)
            return f"input set {k}: eager {show(e)!r} vs compiled {show(c)!r}"
        if e[0] == "ok":
            d = difference(c[1], e[1])
            if d and "values differ" in d and _as_good_as_eager(fn, prog.inputs(k), c[1], e[1]):
                d = None
            if d:
                return f"input set {k}: {d}"
    return None


def _upcast(args, nudge=None):
    """The inputs for the float64 run: float32 tensors widened, and Python floats
    rounded as a float32 op rounds them (the program's constants are what they meet).
    With `nudge` (a generator), each float is moved by up to one float32 ulp."""
    def moved(t):
        return t if nudge is None else t * (1 + (torch.rand(t.shape, generator=nudge, dtype=t.dtype) * 2 - 1) * 2 ** -23)

    def up(a):
        if isinstance(a, torch.Tensor):
            return moved(a.double()) if a.dtype == torch.float32 else a
        return moved(torch.tensor(a, dtype=torch.float32).double()).item() if type(a) is float else a
    return [up(a) for a in args]


def _strided(args):
    """The same values in another layout: each float tensor of rank >= 1 as a strided
    view (every other element of a buffer twice as long in its last dim)."""
    out = []
    for a in args:
        if isinstance(a, torch.Tensor) and a.is_floating_point() and a.dim() >= 1 and a.numel() > 1:
            wide = torch.zeros(*a.shape[:-1], 2 * a.shape[-1], dtype=a.dtype)
            wide[..., ::2] = a
            a = wide[..., ::2]
        out.append(a)
    return out


def _as_good_as_eager(fn, args, actual, expected):
    """Float values that differ from eager's by more than the tolerance can still be
    right: an op that amplifies error (remainder or floor of a large quotient, a
    cancellation) turns framejit's last-ulp differences into big ones. Such a result is
    accepted when it is about as close as eager's to the program run in float64 (give
    or take how far that moves when its inputs move by a float32 ulp), or equal to
    that; where eager's own float32 value is off by more than 1 % there, the
    element is rounding noise in both and is not compared. Python floats read from
    tensors are judged the same way.

    Integer and bool results are bit-exact, except where eager itself is not: a float
    cast to an integer (or compared) on a rounding boundary takes eager's answer from
    whichever of its kernels ran, and some of eager's float32 kernels differ by an ulp
    between layouts (gelu's vectorized erf for contiguous tensors against the scalar erf
    of strided and one-element ones; tests/py/test_reliability_known_bugs.py). There an
    element may differ when framejit gives what eager gives for the same values in a
    strided layout."""
    # In float64 throughout: inputs, and what int tensors and Python floats promote to;
    # run again on inputs moved by about an ulp of float32, to see how much the program
    # amplifies float32's rounding at each element (its condition).
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        ref = outcome(fn, _upcast(args))
        moved = outcome(fn, _upcast(args, nudge=torch.Generator().manual_seed(0)))
    finally:
        torch.set_default_dtype(old)
    strided = []  # eager on the strided layout, computed when an integer result differs

    def other_layout():
        if not strided:
            strided.append(outcome(fn, _strided(args)))
        return strided[0]

    def ok_exact(a, e, path):
        if torch.equal(a, e):
            return True
        o = other_layout()
        if o[0] != "ok":
            return False
        v = o[1]
        for k in path:
            if not isinstance(v, (tuple, list)) or k >= len(v):
                return False
            v = v[k]
        if not (isinstance(v, torch.Tensor) and v.dtype == e.dtype and v.shape == e.shape):
            return False
        return bool(((a == e) | (a == v)).all())

    if ref[0] != "ok":
        return False

    def ok(a, e, r, m, path=()):
        if isinstance(e, torch.Tensor):
            if not e.is_floating_point():
                return isinstance(a, torch.Tensor) and a.shape == e.shape and ok_exact(a, e, path)
            if not (isinstance(r, torch.Tensor) and r.shape == e.shape):
                return False
            a, e, r = a.double(), e.double(), r.double()
            spread = (m.double() - r).abs() if isinstance(m, torch.Tensor) and m.shape == r.shape else 0
            spread = torch.nan_to_num(spread, nan=0.0, posinf=0.0)
            err_a, err_e = (a - r).abs(), (e - r).abs()
            fine = err_a <= 4 * err_e + 4 * spread + 1e-5 * r.abs() + 1e-5
            fine |= torch.isclose(a, e, rtol=1e-5, atol=1e-5, equal_nan=True)
            fine |= torch.isclose(a, r, rtol=1e-5, atol=1e-5, equal_nan=True)  # framejit is the exact one
            # Where eager has no correct digit (sin of 1e23, the remainder of a rounded
            # huge number, a division by what is left of a cancellation) the value is
            # rounding noise in both, inf and NaN included: not compared.
            fine |= err_e > 1e-2 * r.abs() + 1e-2
            return bool(fine.all())
        if isinstance(e, float) and isinstance(r, float) and type(a) is float:
            m = m if isinstance(m, float) else r
            return ok(*(torch.tensor(v, dtype=torch.float64) for v in (a, e, r, m)), path)
        if isinstance(e, (tuple, list)):
            if not isinstance(m, (tuple, list)) or len(m) != len(r):
                m = r
            return isinstance(r, (tuple, list)) and all(
                ok(x, y, z, w, path + (k,)) for k, (x, y, z, w) in enumerate(zip(a, e, r, m)))
        return difference(a, e) is None

    return ok(actual, expected, ref[1], moved[1] if moved[0] == "ok" else ref[1])


def _statements(body):
    """Every (list, index) position of a statement, nested ones included."""
    for i, s in enumerate(body):
        yield body, i
        for inner in (s.body, s.orelse):
            yield from _statements(inner)


def shrink(prog, still_fails=None):
    """Drops statements, returned names and input sets while the program still fails.
    Returns the smaller program, the input sets (indices) that still fail, and the failure."""
    still_fails = still_fails or (lambda p, sets: check(p, sets))
    sets = list(range(len(prog.input_sets)))
    failure = still_fails(prog, sets)
    assert failure, "shrink() needs a failing program"
    changed = True
    while changed:
        changed = False
        for k in list(sets):
            if len(sets) > 1:
                trial = [s for s in sets if s != k]
                f = still_fails(prog, trial)
                if f:
                    sets, failure, changed = trial, f, True
        positions = list(_statements(prog.body))
        for body_path in reversed(range(len(positions))):
            cand = copy.deepcopy(prog)
            cand_positions = list(_statements(cand.body))
            if body_path >= len(cand_positions):
                continue
            lst, i = cand_positions[body_path]
            if len(lst) == 1 and lst is not cand.body:
                continue  # an if / for keeps one statement per block
            del lst[i]
            f = still_fails(cand, sets)
            if f:
                prog, failure, changed = cand, f, True
                break
        if not changed:
            cand_prog, f = _flatten_one(prog, sets, still_fails)
            if f:
                prog, failure, changed = cand_prog, f, True
        if len(prog.returns) > 1:
            for name in list(prog.returns):
                cand = copy.deepcopy(prog)
                cand.returns = [r for r in cand.returns if r != name]
                f = still_fails(cand, sets)
                if f:
                    prog, failure, changed = cand, f, True
                    break
    return prog, sets, failure


def _flatten_one(prog, sets, still_fails):
    """Replaces one if by either branch, or one for by one pass of its body (the loop
    variable bound to 0), when the program still fails; (program, failure) or (_, None)."""
    for i, st in enumerate(prog.body):
        if st.kind in ("if", "try"):
            options = [st.body, st.orelse]
        elif st.kind == "for":
            from gen import Stmt
            options = [[Stmt("assign", st.target, "0")] + st.body]
        else:
            continue
        for replacement in options:
            cand = copy.deepcopy(prog)
            cand.body[i:i + 1] = copy.deepcopy(replacement)
            f = still_fails(cand, sets)
            if f:
                return cand, f
    return prog, None


def _literal(v):
    if isinstance(v, torch.Tensor):
        flat = [_literal(x) for x in v.flatten().tolist()]
        return f"torch.tensor([{', '.join(flat)}], dtype={v.dtype}).reshape({tuple(v.shape)!r})"
    if isinstance(v, float):
        if math.isnan(v):
            return "float('nan')"
        if math.isinf(v):
            return "float('inf')" if v > 0 else "-float('inf')"
    return repr(v)


def write_test(prog, inputs, failure, directory):
    """Writes a standalone pytest file reproducing the failure; returns its path."""
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, f"test_{prog.name}.py")
    arg_lines = ",\n".join("    [" + ", ".join(_literal(a) for a in args) + "]" for args in inputs)
    src = f'''"""framejit fuzz failure {prog.name} (tests/fuzz, seed {prog.seed}, program {prog.index}), shrunk.

{failure}
"""
import math

import torch

import framejit

{textwrap.dedent(prog.source().split("import torch", 1)[1]).strip()}


INPUTS = [
{arg_lines},
]


def outcome(fn, args):
    try:
        return ("ok", fn(*args))
    except Exception as e:  # noqa: BLE001
        return ("exc", type(e).__name__, str(e).split("\\nException raised from")[0])


def same(a, e):
    if isinstance(e, torch.Tensor):
        if not (isinstance(a, torch.Tensor) and a.dtype == e.dtype and a.shape == e.shape):
            return False
        if e.is_floating_point():
            return torch.allclose(a, e, rtol=1e-5, atol=1e-5, equal_nan=True)
        return torch.equal(a, e)
    if isinstance(e, (tuple, list)):
        return type(a) is type(e) and len(a) == len(e) and all(same(x, y) for x, y in zip(a, e))
    if isinstance(e, float):
        return type(a) is float and ((math.isnan(a) and math.isnan(e)) or
                                     (a == e and math.copysign(1, a) == math.copysign(1, e)))
    return type(a) is type(e) and a == e


def test_{prog.name}():
    framejit.reset()
    compiled = framejit.compile({prog.name})
    for args in INPUTS + INPUTS[:1]:
        e = outcome({prog.name}, [a.clone() if isinstance(a, torch.Tensor) else a for a in args])
        c = outcome(compiled, [a.clone() if isinstance(a, torch.Tensor) else a for a in args])
        assert e[0] == c[0] and (e[1:] == c[1:] if e[0] == "exc" else same(c[1], e[1])), (e, c)
'''
    with open(path, "w") as fh:
        fh.write(src)
    return path
