"""python -m framejit run [--modules a,b] [--report] [--] script.py [args...]
python -m framejit run [--modules a,b] [--report] -m module [args...]
python -m framejit trace-view DIR

Runs a script (or, with -m, a module, as `python -m` does) as __main__ with its
functions, and those of the listed modules, watched by framejit. A module name in
--modules covers its submodules; a name with * ? or [ is a pattern (fnmatch) of full
module names (`test_*`). --report prints a table at exit (to stderr, so that the
script's own output is unchanged). framejit's options come before the script (or
-m module); everything after it is the script's, untouched, `--` included.

The script runs as under plain `python`: the same sys.argv, sys.path[0], __file__,
__loader__ and __spec__, exit codes (2 for a script that cannot be opened, 1 for an
uncaught exception, the script's own for sys.exit), and tracebacks that start at
the script's frame (framejit's own frames do not show)."""

import atexit
import builtins
import importlib.machinery
import os
import runpy
import stat
import sys
import types


class _UsageError(Exception):
    pass


def _split_args(argv):
    """(modules, report, module_mode, rest): rest is the script (or, with -m, the
    module name) and its arguments. Options are read only before the script."""
    modules, report = [], False
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in ("--", "-m"):
            return modules, report, a == "-m", argv[i + 1:]
        if a == "--report":
            report = True
        elif a == "--modules":
            if i + 1 == len(argv):
                raise _UsageError("--modules needs a value")
            modules.extend(m for m in argv[i + 1].split(",") if m)
            i += 1
        elif a.startswith("--modules="):
            modules.extend(m for m in a.split("=", 1)[1].split(",") if m)
        elif a.startswith("-") and a != "-":
            raise _UsageError(f"unknown option {a}")
        else:
            return modules, report, False, argv[i:]
        i += 1
    return modules, report, False, []


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


def _script(target):
    """(code, __main__'s globals, sys.path[0]) for a script as `python target` runs
    it, or None (with python's message) when it cannot be read."""
    if target == "-":  # the script is stdin, as `python -`
        return _Compile(sys.stdin.buffer.read(), "<stdin>"), {}, ""
    path = os.path.abspath(target)
    try:
        with open(path, "rb") as fh:
            source = fh.read()
    except OSError as e:
        print(f"{sys.orig_argv[0]}: can't open file {path!r}: [Errno {e.errno}] {e.strerror}", file=sys.stderr)
        return None
    main = {"__file__": path, "__loader__": importlib.machinery.SourceFileLoader("__main__", path)}
    return _Compile(source, path), main, os.path.dirname(os.path.realpath(path))


class _Compile:
    """A script's code, compiled when run (so that a SyntaxError is reported as
    python reports it, after sys.argv and sys.path are set)."""

    def __init__(self, source, path):
        self.source, self.path = source, path

    def __call__(self):
        return compile(self.source, self.path, "exec", dont_inherit=True)


def _module(name):
    """(code, __main__'s globals) of a module as `python -m name` runs it; exits as python
    does when there is no such module."""
    try:
        _, spec, code = runpy._get_module_details(name, runpy._Error)
    except runpy._Error as exc:
        sys.exit(f"{sys.executable}: {exc}")
    main = {"__file__": spec.origin, "__cached__": spec.cached, "__loader__": spec.loader,
            "__package__": spec.parent, "__spec__": spec}
    return code, main


def _hide_own_frames(code):
    """Makes the next sys.excepthook call (python's report of the exception now
    leaving the script) show the traceback from the script's frame on, as plain
    python would; the hook the script left in place does the printing."""
    hook = sys.excepthook

    def once(etype, value, tb):
        sys.excepthook = hook
        while tb is not None and tb.tb_frame.f_code is not code:
            tb = tb.tb_next
        if value is not None:
            value.__traceback__ = tb
        sys.last_traceback = tb
        hook(etype, value, tb)

    sys.excepthook = once


def _exec_as_main(code, main_globals):
    from framejit import hooks
    main = types.ModuleType("__main__")
    main.__dict__.update({"__annotations__": {}, "__builtins__": builtins, "__cached__": None})
    main.__dict__.update(main_globals)
    sys.modules["__main__"] = main
    try:
        if isinstance(code, _Compile):
            code = code()
        hooks.watch_code_tree(code)
        exec(code, main.__dict__)
    except SystemExit:
        raise
    except BaseException:
        _hide_own_frames(code)
        raise


def run(argv):
    try:
        modules, report, module_mode, rest = _split_args(argv)
    except _UsageError as e:
        print(f"framejit run: {e}\n{USAGE}", file=sys.stderr)
        return 2
    if not rest:
        print(__doc__, file=sys.stderr)
        return 2
    target, target_args = rest[0], rest[1:]
    import framejit

    if module_mode:
        code, main_globals = _module(target)  # sys.path[0] is the working folder, as under -m
        sys.argv = [main_globals["__file__"]] + target_args
    else:
        script = _script(target)
        if script is None:
            return 2
        code, main_globals, path0 = script
        if not sys.flags.safe_path and sys.path:
            sys.path[0] = path0
        sys.argv = [target] + target_args
    if modules:
        framejit.hook(modules)
    if report:
        atexit.register(lambda: print(format_report(report_rows()), file=sys.stderr))
    _exec_as_main(code, main_globals)
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


USAGE = "usage: python -m framejit run [--modules a,b] [--report] [--] script.py [args...]\n" \
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
