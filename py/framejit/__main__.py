"""python -m framejit run script.py [args...] [--modules a,b] [--report]
python -m framejit run [--modules a,b] [--report] -m module [args...]
python -m framejit trace-view DIR

Runs a script (or, with -m, a module, as `python -m` does) as __main__ with its
functions, and those of the listed modules, watched by framejit. A module name in
--modules covers its submodules; a name with * ? or [ is a pattern (fnmatch) of full
module names (`test_*`). --report prints a table at exit (to stderr, so that the
script's own output is unchanged). Options for framejit come before the script or
right after it (before -m module: everything after the module is its own); use -- to
pass an option of the same name to the script."""

import atexit
import os
import stat
import sys
import types


def _split_args(argv):
    """(modules, report, module_mode, rest): rest is the script (or, with -m, the
    module name) and its arguments."""
    modules, report, rest = [], False, []
    i = 0
    script_seen = False
    while i < len(argv):
        a = argv[i]
        if a == "--" and script_seen:
            rest.extend(argv[i + 1:])
            break
        if a == "-m" and not script_seen:
            return modules, report, True, argv[i + 1:]
        if a == "--report":
            report = True
        elif a == "--modules" and i + 1 < len(argv):
            modules.extend(m for m in argv[i + 1].split(",") if m)
            i += 1
        elif a.startswith("--modules="):
            modules.extend(m for m in a.split("=", 1)[1].split(",") if m)
        else:
            script_seen = True
            rest.append(a)
        i += 1
    return modules, report, False, rest


def report_rows():
    from framejit import _C
    return [r for r in _C.watched() if r["calls"] > 0]


def format_report(rows):
    lines = ["framejit report", f"{'function':48} {'calls':>6} {'compiles':>8} {'recomp':>6} "
             f"{'hits':>6} {'breaks':>6} {'fallbk':>6} {'compile ms':>10}"]
    for r in sorted(rows, key=lambda r: (-r["calls"], r["qualname"])):
        where = f"{r['qualname']} ({os.path.basename(r['filename'])}:{r['line']})"
        lines.append(f"{where[:48]:48} {r['calls']:6} {r['compiles']:8} {r['recompiles']:6} "
                     f"{r['cache_hits']:6} {r['graph_breaks']:6} {r['fallbacks']:6} "
                     f"{r['compile_seconds'] * 1e3:10.1f}")
        for reason in dict.fromkeys(r["recompile_reasons"]):
            lines.append(f"    recompile: {reason}")
        for reason, location in dict.fromkeys(map(tuple, r["fallback_reasons"])):
            lines.append(f"    fallback: {reason} ({location})")
    if not rows:
        lines.append("(no watched function was called)")
    return "\n".join(lines)


def _main_module_code(name):
    """The spec and code object that `python -m name` runs (a package's __main__)."""
    import importlib.util
    spec = importlib.util.find_spec(name)
    if spec is None:
        raise ImportError(f"No module named {name}")
    if spec.submodule_search_locations is not None:
        return _main_module_code(name + ".__main__")
    get_code = getattr(spec.loader, "get_code", None)
    code = get_code(spec.name) if get_code else None
    if code is None:
        raise ImportError(f"cannot run {name} as a module: no code object")
    return spec, code


def run(argv):
    modules, report, module_mode, rest = _split_args(argv)
    if not rest:
        print(__doc__, file=sys.stderr)
        return 2
    target, target_args = rest[0], rest[1:]
    import framejit
    from framejit import hooks

    if modules:
        framejit.hook(modules)
    main = types.ModuleType("__main__")
    if module_mode:
        spec, code = _main_module_code(target)
        main.__spec__, main.__loader__, main.__package__ = spec, spec.loader, spec.parent
        path = spec.origin
        # sys.path[0] is already the working folder, as under `python -m`.
    else:
        path = target
        with open(target, "rb") as fh:
            code = compile(fh.read(), target, "exec")
        sys.path.insert(0, os.path.dirname(os.path.abspath(target)))
    hooks.watch_code_tree(code)
    if report:
        atexit.register(lambda: print(format_report(report_rows()), file=sys.stderr))
    main.__file__ = path
    main.__builtins__ = __builtins__
    sys.modules["__main__"] = main
    sys.argv = [path] + target_args
    exec(code, main.__dict__)
    return 0


def _read_dump_file(path):
    """A dump file's text, or "" when it is not a regular file (a link, a FIFO planted
    there): trace-view only reads, and never blocks or leaves the folder."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return ""
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return ""
        return fh.read().decode("utf-8", "backslashreplace")


def trace_view(directory):
    """A summary of a FRAMEJIT_TRACE_DIR folder: one line per trace."""
    if not os.path.isdir(directory):
        print(f"trace-view: {directory!a} is not a folder", file=sys.stderr)
        return 2
    if hasattr(sys.stdout, "reconfigure"):
        sys.stdout.reconfigure(errors="backslashreplace")  # folder names need not be UTF-8
    traces = sorted(d for d in os.listdir(directory)
                    if stat.S_ISDIR(os.lstat(os.path.join(directory, d)).st_mode))
    print(f"{len(traces)} traces in {directory}")
    for name in traces:
        path = os.path.join(directory, name)
        read = lambda f: _read_dump_file(os.path.join(path, f))
        outcome = read("outcome.txt").splitlines()
        instructions = len(read("bytecode.txt").splitlines())
        ops = [l for l in read("graph.txt").splitlines() if "aten." in l]
        guards = read("guards.txt").splitlines()
        head = outcome[0] if outcome else "?"
        print(f"{name}: {head}: {instructions} instructions traced, {len(ops)} ops, {len(guards)} guards")
        for line in outcome[1:]:
            print(f"    {line}")
    return 0


USAGE = "usage: python -m framejit run script.py [args...] [--modules a,b] [--report]\n" \
        "       python -m framejit run [--modules a,b] [--report] -m module [args...]\n" \
        "       python -m framejit trace-view DIR"


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) == 2 and argv[0] == "trace-view":
        return trace_view(argv[1])
    if not argv or argv[0] != "run":
        print(USAGE, file=sys.stderr)
        return 2
    return run(argv[1:])


if __name__ == "__main__":
    sys.exit(main())
