#!/usr/bin/env python3
"""The layering of framejit's C++ as a build step: each component includes only the
components below it. Run by meson on every build (and by scripts/lint); writes its
output file only when every include is allowed, so a violation fails the build.

Usage: check_layers.py OUTPUT SOURCE_ROOT
"""
import os
import re
import sys

# Component (a folder) -> the folders whose headers it may include. Python and
# pybind11 headers are allowed only where the component says "python".
JIT_BASE = ["jit/common.h", "jit/log.h", "jit/fork.h"]
RULES = {
    "jit/sym": JIT_BASE + ["jit/sym"],
    "jit/ir": JIT_BASE + ["jit/sym", "jit/ir"],
    "jit/autodiff": JIT_BASE + ["jit/sym", "jit/ir", "jit/autodiff"],
    "jit/codegen": JIT_BASE + ["jit/sym", "jit/ir", "jit/codegen"],
    "jit/cpu": JIT_BASE + ["jit/sym", "jit/ir", "jit/codegen", "jit/cpu"],
    "jit/cuda": JIT_BASE + ["jit/sym", "jit/ir", "jit/codegen", "jit/cuda"],
    "jit": JIT_BASE,
    "guards": ["jit", "guards", "python"],
    "interp": ["jit", "guards", "interp", "python"],
    "py": ["jit", "guards", "interp", "python"],
}
PYTHON_HEADERS = re.compile(r"^(Python\.h|pybind11/|frameobject\.h|internal/pycore_)")
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')


def component(path):
    for comp in sorted(RULES, key=len, reverse=True):
        if path == comp or path.startswith(comp + "/"):
            return comp
    return None


def allowed(comp, header, quoted):
    rules = RULES[comp]
    if PYTHON_HEADERS.match(header):
        return "python" in rules
    if not quoted:
        return True
    return any(header == r or header.startswith(r + "/") for r in rules if r != "python")


def violations(root):
    for top in ("jit", "guards", "interp", "py"):
        for dirpath, _, names in os.walk(os.path.join(root, top)):
            for name in sorted(names):
                if not name.endswith((".h", ".cpp", ".def", ".inc")):
                    continue
                path = os.path.relpath(os.path.join(dirpath, name), root)
                comp = component(os.path.dirname(path))
                with open(os.path.join(root, path)) as f:
                    for lineno, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if m and not allowed(comp, m.group(2), m.group(1) == '"'):
                            yield f"{path}:{lineno}: {comp}/ may not include {m.group(2)}"


def main():
    out, root = sys.argv[1], sys.argv[2]
    bad = list(violations(root))
    if bad:
        print("layering violations (see scripts/check_layers.py):", *bad, sep="\n  ", file=sys.stderr)
        if os.path.exists(out):
            os.remove(out)
        sys.exit(1)
    with open(out, "w") as f:
        f.write("ok\n")


if __name__ == "__main__":
    main()
