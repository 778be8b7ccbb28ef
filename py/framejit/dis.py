"""framejit.dis: the instructions framejit's C++ decoder reads from a function."""
import collections
import types

from framejit import _C

__all__ = ["Instruction", "dis"]

Instruction = collections.namedtuple(
    "Instruction", ["offset", "opname", "opcode", "arg", "line", "target"])
Instruction.__doc__ = """One decoded instruction.

offset: in bytes, like dis; opname/opcode: the de-specialized opcode; arg: the oparg
with EXTENDED_ARG folded in (None below HAVE_ARGUMENT); line: the source line (None
without one); target: the jump target offset (None for non-jumps)."""


def _code_of(obj):
    # A framejit-compiled wrapper (or functools.wraps) keeps the original here.
    seen = 0
    while hasattr(obj, "__wrapped__") and seen < 100:
        obj = obj.__wrapped__
        seen += 1
    if isinstance(obj, types.MethodType):
        obj = obj.__func__
    if isinstance(obj, types.FunctionType):
        obj = obj.__code__
    return obj  # anything else: _C.decode raises the TypeError


def dis(fn_or_code):
    """Decoded instructions of a function, bound method, or code object."""
    return [Instruction._make(t) for t in _C.decode(_code_of(fn_or_code))]
