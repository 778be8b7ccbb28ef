#!/usr/bin/env python3
"""Generates interp/trace/opcodes.def, the X-macro of CPython's opcodes, from the running
interpreter's own `opcode` module (it must be CPython 3.11, the version framejit reads),
with the tracer's handler family of each opcode (HANDLERS below).

Adding an opcode to the tracer: one line in HANDLERS (and the Tracer::op_<family>
handler if the family is new), then rerun this script.

Usage: python3 scripts/gen_opcodes.py [output]   (default: interp/trace/opcodes.def)
       python3 scripts/gen_opcodes.py --check    exits 1 when interp/trace/opcodes.def
                                                 differs from what it would generate
"""
import opcode
import os
import sys

FLAG_SETS = [
    ("FJ_HASARG", None),  # opcode >= HAVE_ARGUMENT
    ("FJ_HASJREL", opcode.hasjrel),
    ("FJ_HASJABS", opcode.hasjabs),
    ("FJ_HASCONST", opcode.hasconst),
    ("FJ_HASNAME", opcode.hasname),
    ("FJ_HASLOCAL", opcode.haslocal),
    ("FJ_HASFREE", opcode.hasfree),
    ("FJ_HASCOMPARE", opcode.hascompare),
    ("FJ_JUMP_BACKWARD", None),  # a relative jump whose offset counts backwards
]

# Opcode -> the family of Tracer::op_<family> that traces it (interp/trace/ops_*.cpp,
# interp/torch/*.cpp). An opcode not listed gets `unsupported`: a trace that meets it
# ends there, with the opcode's name as the reason.
HANDLERS = {
    # no effect on the traced state
    "CACHE": "nop", "NOP": "nop", "RESUME": "nop", "PRECALL": "nop", "EXTENDED_ARG": "nop",
    "MAKE_CELL": "nop", "COPY_FREE_VARS": "nop",
    # loads and stores (ops_load_store.cpp, torch/inplace.cpp)
    "LOAD_FAST": "load_fast", "STORE_FAST": "store_fast", "LOAD_DEREF": "load_deref",
    "LOAD_CLOSURE": "load_closure", "STORE_DEREF": "store_deref", "LOAD_CONST": "load_const",
    "LOAD_GLOBAL": "load_global", "STORE_GLOBAL": "store_global", "LOAD_ATTR": "load_attr", "STORE_ATTR": "store_attr",
    "LOAD_METHOD": "load_method", "PUSH_NULL": "push_null", "MAKE_FUNCTION": "make_function",
    "KW_NAMES": "kw_names", "STORE_SUBSCR": "store_subscr",
    # imports of modules already imported (ops_import.cpp)
    "IMPORT_NAME": "import_name", "IMPORT_FROM": "import_from",
    "LOAD_BUILD_CLASS": "load_build_class",  # ops_classes.cpp
    # calls (ops_call.cpp)
    "CALL": "call", "CALL_FUNCTION_EX": "call_function_ex",
    # operators (ops_values.cpp)
    "BINARY_OP": "binary_op", "UNARY_NEGATIVE": "unary_negative", "UNARY_NOT": "unary_not",
    "UNARY_INVERT": "unary_invert", "COMPARE_OP": "compare_op", "IS_OP": "is_op",
    # containers and the stack (ops_control.cpp, torch/views.cpp)
    "BUILD_TUPLE": "build_seq", "BUILD_LIST": "build_seq", "LIST_APPEND": "list_append", "MAP_ADD": "map_add",
    "UNPACK_SEQUENCE": "unpack_sequence", "BINARY_SUBSCR": "binary_subscr",
    "BUILD_MAP": "build_map", "BUILD_CONST_KEY_MAP": "build_map", "BUILD_SLICE": "build_slice",
    "POP_TOP": "pop_top", "COPY": "copy", "SWAP": "swap",
    "LIST_EXTEND": "list_extend", "LIST_TO_TUPLE": "list_to_tuple",
    "DICT_MERGE": "dict_merge", "DICT_UPDATE": "dict_merge", "CONTAINS_OP": "contains_op",
    # control flow (ops_control.cpp)
    "JUMP_FORWARD": "jump", "JUMP_BACKWARD": "jump", "JUMP_BACKWARD_NO_INTERRUPT": "jump",
    "POP_JUMP_FORWARD_IF_FALSE": "pop_jump_if", "POP_JUMP_FORWARD_IF_TRUE": "pop_jump_if",
    "POP_JUMP_BACKWARD_IF_FALSE": "pop_jump_if", "POP_JUMP_BACKWARD_IF_TRUE": "pop_jump_if",
    "POP_JUMP_FORWARD_IF_NONE": "pop_jump_if", "POP_JUMP_FORWARD_IF_NOT_NONE": "pop_jump_if",
    "POP_JUMP_BACKWARD_IF_NONE": "pop_jump_if", "POP_JUMP_BACKWARD_IF_NOT_NONE": "pop_jump_if",
    "JUMP_IF_FALSE_OR_POP": "jump_if_or_pop", "JUMP_IF_TRUE_OR_POP": "jump_if_or_pop",
    "RETURN_VALUE": "return_value", "RAISE_VARARGS": "raise_varargs",
    "RETURN_GENERATOR": "return_generator", "YIELD_VALUE": "yield_value",
    "GET_ITER": "get_iter", "FOR_ITER": "for_iter", "BEFORE_WITH": "before_with",
    # strings and imports of constants (ops_consts.cpp)
    "FORMAT_VALUE": "format_value", "BUILD_STRING": "build_string", "IMPORT_NAME": "import_name",
    # exceptions raised and caught inside the trace (ops_except.cpp)
    "PUSH_EXC_INFO": "push_exc_info", "POP_EXCEPT": "pop_except", "CHECK_EXC_MATCH": "check_exc_match",
    "WITH_EXCEPT_START": "with_except_start",
    "RERAISE": "reraise", "LOAD_ASSERTION_ERROR": "load_assertion_error", "DELETE_FAST": "delete_fast",
    # sets of known items and calls evaluated now (ops_fold.cpp)
    "BUILD_SET": "build_set", "SET_ADD": "set_add", "SET_UPDATE": "set_update",
    # unpacking, deletion, pattern matching (ops_patterns.cpp)
    "UNPACK_EX": "unpack_ex", "DELETE_SUBSCR": "delete_subscr", "GET_LEN": "get_len",
    "MATCH_SEQUENCE": "match_kind", "MATCH_MAPPING": "match_kind", "MATCH_KEYS": "match_keys",
    "MATCH_CLASS": "match_class", "UNARY_POSITIVE": "unary_positive",
}


def flags_of(code, name):
    flags = []
    for flag, members in FLAG_SETS:
        if flag == "FJ_HASARG":
            on = code >= opcode.HAVE_ARGUMENT
        elif flag == "FJ_JUMP_BACKWARD":
            # dis._is_backward_jump's rule: the name says it.
            on = code in opcode.hasjrel and "JUMP_BACKWARD" in name
        else:
            on = code in members
        if on:
            flags.append(flag)
    return "|".join(flags) if flags else "0"


def generate():
    names = {opcode.opname[code] for code in range(256)}
    unknown = sorted(set(HANDLERS) - names)
    if unknown:
        sys.exit(f"gen_opcodes.py: HANDLERS names opcodes 3.11 does not have: {', '.join(unknown)}")
    lines = [
        "// Generated by scripts/gen_opcodes.py from CPython 3.11's `opcode` module and the",
        "// handler families listed there; do not edit.",
        "// FJ_OPCODE(name, number, inline CACHE units after it, flags, handler family): one",
        "// line per opcode that 3.11's de-specialized bytecode (PyCode_GetCode) can contain;",
        "// the tracer runs it with Tracer::op_<handler family>.",
        f"// HAVE_ARGUMENT = {opcode.HAVE_ARGUMENT}, EXTENDED_ARG = {opcode.EXTENDED_ARG}.",
        "#ifndef FJ_OPCODE",
        "#error define FJ_OPCODE(name, number, caches, flags, handler) before including opcodes.def",
        "#endif",
    ]
    for code in range(256):
        name = opcode.opname[code]
        if name.startswith("<"):
            continue
        caches = opcode._inline_cache_entries[code]
        handler = HANDLERS.get(name, "unsupported")
        lines.append(f"FJ_OPCODE({name}, {code}, /*caches*/{caches}, "
                     f"/*flags*/{flags_of(code, name)}, {handler})")
    lines.append("#undef FJ_OPCODE")
    return "\n".join(lines) + "\n"


def main():
    if sys.version_info[:2] != (3, 11):
        sys.exit(f"gen_opcodes.py: needs CPython 3.11, running {sys.version.split()[0]}")
    here = os.path.dirname(os.path.abspath(__file__))
    default = os.path.join(here, "..", "interp", "trace", "opcodes.def")
    text = generate()
    if sys.argv[1:] == ["--check"]:
        with open(default) as f:
            if f.read() != text:
                sys.exit("gen_opcodes.py --check: interp/trace/opcodes.def is not what "
                         "scripts/gen_opcodes.py generates; rerun it")
        return
    out = sys.argv[1] if len(sys.argv) > 1 else default
    with open(out, "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
