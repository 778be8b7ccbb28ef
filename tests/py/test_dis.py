"""framejit's bytecode decoder (interp/trace/bytecode.cpp) against CPython's own dis."""
import dis as std_dis
import functools
import opcode
import os
import sysconfig
import time
import types
import warnings

import pytest

import framejit
from framejit import _C

JUMPS = frozenset(opcode.hasjrel) | frozenset(opcode.hasjabs)


def reference(code):
    """What framejit should decode, from dis.get_instructions: per instruction
    (offset, opname, opcode, arg, line, target, end_line, col, end_col)."""
    out = []
    for ins in std_dis.get_instructions(code):
        p = ins.positions
        out.append((ins.offset, ins.opname, ins.opcode, ins.arg, p.lineno,
                    ins.argval if ins.opcode in JUMPS else None,
                    p.end_lineno, p.col_offset, p.end_col_offset))
    return out


def reference_exceptions(code):
    return [tuple(e) for e in std_dis._parse_exception_table(code)]


def differences(code, limit=3):
    """Readable differences between framejit and dis for one code object."""
    diffs = []
    mine = _C.decode(code, positions=True)
    ref = reference(code)
    where = f"{code.co_filename}:{code.co_firstlineno} {code.co_qualname}"
    if len(mine) != len(ref):
        diffs.append(f"{where}: {len(mine)} instructions, dis has {len(ref)}")
    for m, r in zip(mine, ref):
        if m != r:
            diffs.append(f"{where}: framejit {m} != dis {r}")
            if len(diffs) >= limit:
                break
    mine_exc = _C.exception_table(code)
    ref_exc = reference_exceptions(code)
    if mine_exc != ref_exc:
        diffs.append(f"{where}: exception table {mine_exc} != dis {ref_exc}")
    return diffs


def all_code_objects(code):
    stack = [code]
    while stack:
        c = stack.pop()
        yield c
        stack.extend(k for k in c.co_consts if isinstance(k, types.CodeType))


def stdlib_modules():
    """(compiled module code objects, number of files that are not valid modules)."""
    root = sysconfig.get_paths()["stdlib"]
    codes, skipped = [], 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for d, dirs, files in os.walk(root):
            dirs[:] = sorted(x for x in dirs if x not in ("site-packages", "__pycache__"))
            for f in sorted(files):
                if not f.endswith(".py"):
                    continue
                path = os.path.join(d, f)
                try:
                    with open(path, "rb") as fh:
                        codes.append(compile(fh.read(), path, "exec"))
                except (SyntaxError, ValueError, UnicodeDecodeError):
                    skipped += 1  # test data that is deliberately not valid Python
    return codes, skipped


def test_whole_stdlib_matches_dis():
    t0 = time.perf_counter()
    modules, skipped = stdlib_modules()
    assert len(modules) > 500
    assert skipped <= max(30, len(modules) // 50), f"{skipped} stdlib files did not compile"
    compared = 0
    instructions = 0
    diffs = []
    for module in modules:
        for code in all_code_objects(module):
            compared += 1
            instructions += len(code.co_code) // 2
            if len(diffs) < 20:
                diffs.extend(differences(code))
    elapsed = time.perf_counter() - t0
    print(f"\ncompared {compared} code objects ({len(modules)} modules, {skipped} skipped, "
          f"{instructions} code units) in {elapsed:.1f}s")
    assert not diffs, "\n".join(diffs[:10])
    assert compared > 10000


def _matches_dis(fn_or_code):
    code = getattr(fn_or_code, "__code__", fn_or_code)
    assert differences(code) == []


def test_instruction_fields():
    def f(x):
        return x + 1

    ins = framejit.dis(f)
    assert ins[0]._fields == ("offset", "opname", "opcode", "arg", "line", "target")
    assert [i.opname for i in ins] == ["RESUME", "LOAD_FAST", "LOAD_CONST", "BINARY_OP",
                                       "RETURN_VALUE"]
    # BINARY_OP is followed by one CACHE unit, which is skipped.
    assert [i.offset for i in ins] == [0, 2, 4, 6, 10]
    assert ins[-1].arg is None and ins[1].arg == 0
    first = f.__code__.co_firstlineno
    assert ins[0].line == first and ins[1].line == first + 1
    _matches_dis(f)


def test_extended_arg_many_constants():
    n = 300
    src = "def f():\n" + "".join(f"    v{i} = {i}.5\n" for i in range(n)) + "    return v299\n"
    ns = {}
    exec(compile(src, "<many>", "exec"), ns)
    ins = framejit.dis(ns["f"])
    ext = [k for k, i in enumerate(ins) if i.opname == "EXTENDED_ARG"]
    assert ext, "expected EXTENDED_ARG for constant/local indexes > 255"
    for k in ext:
        # dis reports the prefix's own accumulated arg, and folds it into the next.
        assert ins[k + 1].arg >= 256
        assert ins[k + 1].arg >> 8 == ins[k].arg
    assert any(i.opname == "LOAD_CONST" and i.arg == n for i in ins)  # 299.5: const 300
    _matches_dis(ns["f"])


def test_extended_arg_long_jump():
    src = ("def f(x):\n    if x:\n" + "".join(f"        x = x + {i}\n" for i in range(200))
           + "    return x\n")
    ns = {}
    exec(compile(src, "<jump>", "exec"), ns)
    ins = framejit.dis(ns["f"])
    offsets = {i.offset for i in ins}
    jumps = [i for i in ins if i.target is not None]
    assert jumps and all(i.target in offsets for i in jumps)
    long = [i for i in jumps if i.arg > 255]
    assert long, "expected a jump whose argument needs EXTENDED_ARG"
    assert ins[ins.index(long[0]) - 1].opname == "EXTENDED_ARG"
    assert long[0].target > long[0].offset + 2 * 255
    _matches_dis(ns["f"])


def test_backward_jump():
    def f(n):
        s = 0
        while n:
            n -= 1
            s += n
        return s

    ins = framejit.dis(f)
    back = [i for i in ins if "JUMP_BACKWARD" in i.opname]
    assert back and all(i.target < i.offset for i in back)
    _matches_dis(f)


def test_generator():
    def gen(xs):
        try:
            for x in xs:
                yield x * 2
        finally:
            xs.clear()
        return 0

    ins = framejit.dis(gen)
    names = [i.opname for i in ins]
    assert names[:2] == ["RETURN_GENERATOR", "POP_TOP"] and "YIELD_VALUE" in names
    assert _C.exception_table(gen.__code__)  # the finally handler
    _matches_dis(gen)
    assert list(gen([1, 2])) == [2, 4]


def test_try_except_exception_table():
    def f(x):
        try:
            x = 1 / x
        except ZeroDivisionError:
            x = 0
        finally:
            x += 1
        return x

    table = _C.exception_table(f.__code__)
    assert table == reference_exceptions(f.__code__)
    offsets = {i.offset for i in framejit.dis(f)}
    for start, end, target, depth, lasti in table:
        assert start < end and target in offsets and depth >= 0
        assert isinstance(lasti, bool)
    assert any(lasti for *_, lasti in table)
    _matches_dis(f)


def test_accepts_methods_wrappers_and_code():
    class C:
        def m(self, y):
            return y

    def deco(fn):
        @functools.wraps(fn)
        def wrapper(*a):
            return fn(*a)
        return wrapper

    @deco
    def wrapped(a):
        return a * 3

    code = C.m.__code__
    assert framejit.dis(C().m) == framejit.dis(C.m) == framejit.dis(code)
    assert framejit.dis(wrapped) == framejit.dis(wrapped.__wrapped__.__code__)
    assert any(i.opname == "BINARY_OP" for i in framejit.dis(wrapped))


@pytest.mark.parametrize("bad", [42, "def f(): pass", len, None])
def test_bad_argument(bad):
    with pytest.raises(TypeError,
                       match=r"framejit.dis\(\) expects a function or a code object, got "):
        framejit.dis(bad)
    with pytest.raises(TypeError):
        _C.exception_table(bad)


def test_malformed_bytecode_is_a_value_error():
    def f():
        return None

    # JUMP_FORWARD by 100 units, past the end of the code
    jump = bytes([opcode.opmap["JUMP_FORWARD"], 100])
    bad = f.__code__.replace(co_code=f.__code__.co_code[:2] + jump + f.__code__.co_code[4:])
    with pytest.raises(ValueError, match="JUMP_FORWARD at offset 2 jumps to 204"):
        framejit.dis(bad)
    # a truncated code object: BINARY_OP needs one CACHE unit after it
    binop = bytes([opcode.opmap["BINARY_OP"], 0])
    bad = f.__code__.replace(co_code=f.__code__.co_code + binop)
    with pytest.raises(ValueError, match="inside the inline caches of BINARY_OP"):
        framejit.dis(bad)
