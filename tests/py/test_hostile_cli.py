"""Hostile conditions for `python -m framejit run` (issue 21): the script sees what
it sees under plain `python` (arguments, exit codes, stdin, stdout, stderr,
tracebacks, __main__'s attributes, loaders of hooked modules, trace and profile
functions). Each case runs the same script both ways and compares."""
import os
import signal
import subprocess
import textwrap

from conftest import PYTHON


def run(args, cwd, stdin=None):
    return subprocess.run(PYTHON + args, cwd=cwd, capture_output=True, text=True, input=stdin,
                          timeout=300, env=dict(os.environ))


def both(tmp_path, script, args=(), stdin=None, fj_options=()):
    """(plain python, framejit run) on the same script, arguments and stdin."""
    (tmp_path / "s.py").write_text(textwrap.dedent(script))
    plain = run(["s.py", *args], tmp_path, stdin)
    jit = run(["-m", "framejit", "run", *fj_options, "s.py", *args], tmp_path, stdin)
    return plain, jit


def assert_same_run(plain, jit):
    assert (jit.returncode, jit.stdout, jit.stderr) == (plain.returncode, plain.stdout, plain.stderr)


SHOW_MAIN = '''
    import importlib.machinery, sys
    loader = __loader__
    print("argv", sys.argv)
    print("path0", sys.path[0])
    print("name", __name__, "file", __file__, "spec", __spec__, "package", __package__, "cached", __cached__)
    print("loader", type(loader) is importlib.machinery.SourceFileLoader, loader.name, loader.path)
    print("main", sys.modules["__main__"].__dict__ is globals())
    print("keys", sorted(k for k in globals() if k.startswith("__")))
    def f():
        pass
    print("co_filename", f.__code__.co_filename)
'''


def test_script_arguments_pass_untouched(tmp_path):
    args = ["a", "--report", "b", "--modules", "c", "--", "d", "-m", "x", "--modules=y"]
    plain, jit = both(tmp_path, SHOW_MAIN, args)
    assert plain.returncode == 0, plain.stderr
    assert f"argv ['s.py', {', '.join(map(repr, args))}]" in plain.stdout
    assert_same_run(plain, jit)


def test_main_module_attributes_as_under_python(tmp_path):
    plain, jit = both(tmp_path, SHOW_MAIN, fj_options=["--modules", "nothing_here"])
    assert plain.returncode == 0, plain.stderr
    assert_same_run(plain, jit)


def test_module_mode_as_under_python_m(tmp_path):
    pkg = tmp_path / "app"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "__main__.py").write_text(textwrap.dedent('''
        import sys
        print(sys.argv, __name__, __file__, __spec__.name, __package__, type(__loader__).__name__)
        sys.exit(5)
    '''))
    args = ["--report", "x", "--"]
    plain = run(["-m", "app", *args], tmp_path)
    jit = run(["-m", "framejit", "run", "-m", "app", *args], tmp_path)
    assert plain.returncode == 5, plain.stderr
    assert_same_run(plain, jit)


def test_framejit_options_after_the_script_belong_to_the_script(tmp_path):
    plain, jit = both(tmp_path, "import sys; print(sys.argv[1:])", ["--report"])
    assert_same_run(plain, jit)  # no report printed: --report was the script's
    assert "framejit report" not in jit.stderr


def test_unknown_option_before_the_script_is_a_usage_error(tmp_path):
    (tmp_path / "s.py").write_text("print('ran')")
    r = run(["-m", "framejit", "run", "--no-such-option", "s.py"], tmp_path)
    assert r.returncode == 2 and "unknown option --no-such-option" in r.stderr and "ran" not in r.stdout


def test_missing_script_and_module_exit_as_python(tmp_path):
    plain = run(["missing.py"], tmp_path)
    jit = run(["-m", "framejit", "run", "missing.py"], tmp_path)
    assert plain.returncode == 2 and "can't open file" in plain.stderr
    assert_same_run(plain, jit)
    plain = run(["-m", "no_such_module_here"], tmp_path)
    jit = run(["-m", "framejit", "run", "-m", "no_such_module_here"], tmp_path)
    assert plain.returncode == 1
    assert_same_run(plain, jit)


def test_exit_codes_output_and_stdin(tmp_path):
    script = '''
        import atexit, sys
        atexit.register(lambda: print("atexit"))
        data = sys.stdin.read()
        print("out", data.upper(), end="")
        print("err", len(data), file=sys.stderr)
        sys.exit(int(sys.argv[1]) if sys.argv[1].isdigit() else sys.argv[1])
    '''
    for code in ("3", "a message"):
        plain, jit = both(tmp_path, script, [code], stdin="line one\nline two\n")
        assert plain.returncode == (int(code) if code.isdigit() else 1)
        assert_same_run(plain, jit)


EXCEPTION = '''
    import sys
    import torch

    def helper(n):
        if n > 2:
            raise ValueError(f"bad {n} {sys.argv[1:]}")
        return n

    def outer(n):
        return helper(n * 2)

    def tensors(x):
        return x * 2 + 1

    print(tensors(torch.ones(3)).tolist(), flush=True)
    try:
        outer(5)
    except ValueError as e:
        print("caught", e)
    try:
        outer(4)
    finally:
        print("finally", file=sys.stderr)
'''


def test_uncaught_exception_traceback_as_under_python(tmp_path):
    plain, jit = both(tmp_path, EXCEPTION, ["arg"])
    assert plain.returncode == 1 and "Traceback (most recent call last)" in plain.stderr
    assert_same_run(plain, jit)
    assert "framejit" not in jit.stderr and "runpy" not in jit.stderr


def test_excepthook_of_the_script_sees_the_scripts_traceback(tmp_path):
    plain, jit = both(tmp_path, '''
        import sys, traceback
        def hook(t, v, tb):
            print("hook", t.__name__, [f.name for f in traceback.extract_tb(tb)], file=sys.stderr)
        sys.excepthook = hook
        def f():
            raise KeyError("k")
        f()
    ''')
    assert plain.returncode == 1 and "hook KeyError ['<module>', 'f']" in plain.stderr
    assert_same_run(plain, jit)


def test_syntax_error_and_keyboard_interrupt_as_under_python(tmp_path):
    plain, jit = both(tmp_path, "x = (\n")
    assert plain.returncode == 1 and "SyntaxError" in plain.stderr
    assert_same_run(plain, jit)
    plain, jit = both(tmp_path, '''
        import atexit
        atexit.register(lambda: print("atexit ran"))
        def f():
            raise KeyboardInterrupt
        f()
    ''')
    assert plain.returncode == -signal.SIGINT  # python exits by SIGINT after finalizing
    assert_same_run(plain, jit)


def test_settrace_and_setprofile_scripts(tmp_path):
    # A script that traces and profiles its own (pure-Python) functions: the events are
    # those of plain python. Compiled tensor code under a trace function is covered by
    # the settrace tests of the frames work (compiled functions run in CPython then).
    plain, jit = both(tmp_path, '''
        import sys
        events = []
        def tracer(frame, event, arg):
            if frame.f_code.co_filename == __file__:
                events.append((event, frame.f_code.co_name, frame.f_lineno))
            return tracer
        def g(n):
            total = 0
            for i in range(n):
                total += i
            return total
        sys.settrace(tracer)
        g(3)
        sys.settrace(None)
        print(events)
        calls = []
        sys.setprofile(lambda fr, ev, arg: calls.append((ev, fr.f_code.co_name)))
        g(2)
        sys.setprofile(None)
        print(calls)
        print(sys.gettrace(), sys.getprofile())
    ''')
    assert plain.returncode == 0 and "('line', 'g'" in plain.stdout, plain.stderr
    assert_same_run(plain, jit)


def test_hooked_modules_keep_their_loaders(tmp_path):
    (tmp_path / "hooked_lib.py").write_text(textwrap.dedent('''
        import torch
        def step(x):
            return x * 2 + 1
    '''))
    plain, jit = both(tmp_path, '''
        import importlib.machinery as m, sys, torch
        import hooked_lib
        fresh = m.SourceFileLoader("hooked_lib", hooked_lib.__file__)
        print(type(hooked_lib.__loader__) is m.SourceFileLoader, hooked_lib.__loader__ == fresh,
              hooked_lib.__spec__.loader is hooked_lib.__loader__, vars(hooked_lib.__loader__) == vars(fresh))
        print([hooked_lib.step(torch.ones(2)).tolist() for _ in range(3)])
        if "framejit" in sys.modules:
            import framejit
            print("compiles", framejit.stats(hooked_lib.step)["compiles"], file=sys.stderr)
    ''', fj_options=["--modules", "hooked_lib"])
    assert plain.returncode == 0, plain.stderr
    assert "True True True True" in plain.stdout
    assert (jit.returncode, jit.stdout) == (plain.returncode, plain.stdout)
    assert jit.stderr == "compiles 1\n"  # watched all the same
