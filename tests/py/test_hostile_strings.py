"""Hostile strings (issue 21): Python strings that are not valid UTF-8 (a lone
surrogate), hold a NUL, or name files whose path is not UTF-8, reaching framejit as
arguments, attribute and global names, qualnames and file names. framejit gives
eager's outcome (value, or exception type and message) and never crashes. And
neither FRAMEJIT_LOG nor FRAMEJIT_TRACE_DIR calls repr() or str() on user objects.

Each probe runs in its own interpreter (conftest.probe): a crash there fails the test."""
import json
import os
import textwrap

from conftest import probe

# Shared by the probes: each case's outcome, eager against framejit, as data.
PRELUDE = textwrap.dedent('''
    import json, sys, torch, framejit

    def outcome(fn, *args):
        try:
            r = fn(*args)
        except Exception as e:
            return ("raise", type(e).__name__, str(e))
        return ("value", r)

    def same(a, b):
        if isinstance(a, torch.Tensor):
            return isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape and \\
                bool(torch.equal(a, b) or torch.allclose(a, b, equal_nan=True))
        if isinstance(a, (tuple, list)):
            return type(a) is type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
        return type(a) is type(b) and a == b

    def compare(name, source, *args, env=None):
        """Runs the function made from `source` in eager and compiled (two calls: a
        trace, then the cache) and prints one JSON line saying whether they agree."""
        make = lambda: eval(source, dict(env or {}, torch=torch))
        eager = outcome(make(), *args)
        compiled = framejit.compile(make())
        got = [outcome(compiled, *args) for _ in range(2)]
        ok = all(g[0] == eager[0] and (same(g[1], eager[1]) if g[0] == "value" else g[1:] == eager[1:])
                 for g in got)
        show = lambda o: [o[0], o[1] if o[0] == "raise" else repr(o[1])[:200], *o[2:]]
        print(json.dumps({"case": name, "ok": ok, "eager": show(eager), "framejit": [show(g) for g in got]}))
''')


def run_cases(code, env=None, timeout=120):
    r = probe(PRELUDE + textwrap.dedent(code), timeout=timeout, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    rows = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{\"case\"")]
    assert rows, r.stdout
    bad = [row for row in rows if not row["ok"]]
    assert not bad, json.dumps(bad, indent=1)
    return rows, r


def test_surrogate_and_nul_string_arguments_give_eagers_outcome():
    # A lone surrogate (and a NUL) where torch takes a string: gelu's approximate=, a
    # device, an einsum equation, norm's p, plus strings used as dict keys and
    # attribute names. Eager raises (or not); framejit does exactly the same.
    rows, _ = run_cases('''
        x = torch.randn(4, 4)
        cases = {
            "gelu": "lambda x, s: torch.nn.functional.gelu(x, approximate=s)",
            "zeros_device": "lambda x, s: torch.zeros(3, device=s) + 1",
            "to_device": "lambda x, s: x.to(s) * 2",
            "einsum": "lambda x, s: torch.einsum(s, x, x)",
            "norm": "lambda x, s: torch.norm(x, p=s)",
            "getattr": "lambda x, s: getattr(torch, s, x) + 1",
            "dict_key": "lambda x, s: {s: x * 2}[s] + 1",
            "concat": "lambda x, s: (x * 2, s + 'a')",
        }
        for text in ("\\ud800", "tanh\\ud800", "cpu\\x00", "ij,jk\\udcff"):
            for name, source in cases.items():
                compare(f"{name}({text!a})", source, x, text)
    ''')
    assert len(rows) == 32


def test_names_that_are_not_utf8_or_hold_a_nul():
    # Attribute and global names made by code.replace: a NUL inside a name must not
    # cut it short (o.k instead of o.'k\\0z' was a wrong result), a surrogate must not
    # crash; the closure variable and keyword names too.
    run_cases('''
        class O: pass
        o = O(); o.k = 1.0
        setattr(o, "k\\x00z", 2.0); setattr(o, "k\\ud800", 3.0)
        x = torch.zeros(2)
        def renamed(fn, old, new):
            fn.__code__ = fn.__code__.replace(
                co_names=tuple(new if n == old else n for n in fn.__code__.co_names))
            return fn
        for new in ("k\\x00z", "k\\ud800"):
            src = f"(lambda: (lambda f: renamed(f, 'k', {new!a}))(lambda x, o: x + o.k))()"
            compare(f"attr {new!a}", src, x, o, env={"renamed": renamed})
            src = f"(lambda: (lambda f: renamed(f, 'mul', {new!a}))(lambda x: x.mul(2)))()"
            compare(f"method {new!a}", src, x, env={"renamed": renamed})
            src = f"(lambda: (lambda f: renamed(f, 'k', {new!a}))(lambda x: x + k))()"
            compare(f"global {new!a}", src, x, env={"renamed": renamed, "k": 1.0, new: 2.0})
            src = "lambda x, d: torch.nn.functional.gelu(x, **d)"
            compare(f"kwargs {new!a}", src, x, {new: "none"})
    ''')


def test_surrogate_qualname_of_an_inlined_helper_and_of_the_function(tmp_path):
    # A helper whose code's co_qualname and whose __qualname__ hold a lone surrogate,
    # inlined into a compiled function (was SIGSEGV/SIGABRT); the compiled function's
    # own qualname too. With logs and dumps on, which print those names.
    code = '''
        def h(x):
            return x * 2
        h.__code__ = h.__code__.replace(co_qualname="h\\ud800")
        h.__qualname__ = "h\\udcff"
        def g(x):
            y = h(x) + 1
            return h(y)
        g.__code__ = g.__code__.replace(co_qualname="g\\ud800/..")
        x = torch.randn(5)
        compare("inlined", "g", x, env={"g": g})
        compare("called directly", "h", x, env={"h": h})
        print(json.dumps({"explain": str(framejit.explain(g, x)), "fallbacks": framejit.fallbacks(h)}))
        framejit._C.watch(g.__code__)
        g(x)
        print(json.dumps({"watched": [w["qualname"] for w in framejit._C.watched()]}))
    '''
    rows, r = run_cases(code, env={"FRAMEJIT_LOG": "all", "FRAMEJIT_TRACE_DIR": str(tmp_path / "d")})
    watched = json.loads(next(line for line in r.stdout.splitlines() if '"watched"' in line))["watched"]
    assert "g\ud800/.." in watched  # the code's own str, surrogate kept
    assert "h\\ud800" in r.stderr  # the log shows the name, escaped
    dumps = os.listdir(tmp_path / "d")
    assert dumps and all("/" not in d and "\\" not in d for d in dumps)
    outcomes = "".join(open(tmp_path / "d" / d / "outcome.txt", encoding="utf-8").read() for d in dumps)
    assert "g\\ud800/.." in outcomes


def test_function_from_a_file_whose_path_is_not_utf8_with_a_graph_break(tmp_path):
    # co_filename holds a surrogate-escaped byte (\udcff): a graph break reports its
    # location, the logs and the dumps print it. Was SIGABRT.
    src = tmp_path / "src"
    src.mkdir()
    path = os.path.join(os.fsencode(src), b"mod_\xff.py")
    with open(path, "w") as fh:
        fh.write(textwrap.dedent('''
            import torch
            def f(x, log):
                y = torch.relu(x) * 2
                log.append(y.sum().item())   # a graph break
                print("inside f")
                return y + 1, len(log)
        '''))
    dump = tmp_path / "dump"
    rows, r = run_cases(f'''
        import importlib, os
        sys.path.insert(0, {str(src)!r})
        mod = importlib.import_module(os.fsdecode(b"mod_\\xff"))
        assert mod.f.__code__.co_filename.endswith("mod_\\udcff.py")
        x = torch.randn(6)
        compare("f", "lambda x: mod.f(x, [])", x, env={{"mod": mod}})
        compiled = framejit.compile(mod.f)
        log = []
        out = compiled(x, log)
        print(json.dumps({{"stats": framejit.stats(mod.f), "explain": str(framejit.explain(mod.f, x, []))}}))
    ''', env={"FRAMEJIT_LOG": "all", "FRAMEJIT_TRACE_DIR": str(dump)})
    row = json.loads(next(line for line in r.stdout.splitlines() if '"stats"' in line))
    stats = row["stats"]
    assert stats["graph_breaks"] >= 1 and stats["calls"] >= 1, stats
    assert r.stdout.count("inside f") == 5  # eager once, compiled three times, explain once
    assert "mod_\\udcff.py" in row["explain"]  # explain() names the file, escaped
    assert "mod_\\udcff.py" in r.stderr
    outcome = [open(dump / d / "outcome.txt", encoding="utf-8").read() for d in os.listdir(dump)]
    assert any("mod_\\udcff.py" in o for o in outcome), outcome


# A user class whose __repr__, __str__ and __format__ count their calls, used where
# framejit describes values: arguments in guards and recompile reasons, closure
# cells, globals, constants of a plan, the stack of a traced instruction, fallback
# and graph-break reasons; a metaclass with its own __repr__ for the class itself.
REPR_PROBE = '''
import json, torch, framejit
calls = []
class Meta(type):
    def __repr__(cls):
        calls.append("meta repr")
        return "Meta"
class Obj(metaclass=Meta):
    def __init__(self, k):
        self.k = k
    def __repr__(self):
        calls.append("repr")
        return "Obj"
    def __str__(self):
        calls.append("str")
        return "Obj"
    def __format__(self, spec):
        calls.append("format")
        return "Obj"
    def __call__(self, x):
        return x * self.k
class Broken:
    def __repr__(self):
        raise RuntimeError("repr called")
held = Obj(5.0)
sink = []
def f(x, a):
    y = a(x + 1)
    sink.append(held)            # a graph break with user objects live
    return y + held.k, a, Obj, held
def g(x, a):
    return x * a.k + (held if a is None else a).k
def h(x, b, c):
    return x + 1, b, (b, c)
results = []
def run(fn, *args):
    try:
        r = fn(*args)
    except Exception as e:
        r = type(e).__name__
    results.append(r if isinstance(r, str) else [str(t.tolist()) if isinstance(t, torch.Tensor) else type(t).__name__ for t in r] if isinstance(r, tuple) else str(r.tolist()))
use = framejit.compile if COMPILE else (lambda fn: fn)
cf, cg, ch = use(f), use(g), use(h)
x = torch.arange(3.0)
for i in range(3):
    run(cf, x, Obj(2.0)); run(cf, x, Obj(float(i))); run(cg, x, Obj(1.0)); run(cg, x, Obj(float(i)))
    run(cg, x, 4); run(cg, x, Obj); run(cg, x, None); run(ch, x, Broken(), Obj(1.0)); run(ch, x, i, Broken())
    held = Obj(float(i))
# explain() runs the function once, as eager does here
(framejit.explain if COMPILE else lambda fn, *a: fn(*a))(f, x, Obj(2.0))
(framejit.explain if COMPILE else lambda fn, *a: fn(*a))(h, x, Broken(), Obj(1.0))
print(json.dumps({"calls": calls, "results": results, "sink": len(sink)}))
'''


def test_logs_and_dumps_never_call_repr_on_user_objects(tmp_path):
    def run(compiled, env=None):
        r = probe(f"COMPILE = {compiled}\n" + REPR_PROBE, env=env, timeout=120)
        assert r.returncode == 0, r.stderr[-3000:]
        return json.loads(r.stdout.splitlines()[-1]), r

    eager, _ = run(False)
    plain, _ = run(True)
    dump = tmp_path / "dump"
    logged, r = run(True, env={"FRAMEJIT_LOG": "all", "FRAMEJIT_TRACE_DIR": str(dump)})
    assert eager["calls"] == [] and plain["calls"] == [] and logged["calls"] == []
    assert plain == eager and logged == eager
    # The logs and dumps did describe those objects, by type.
    dumped = "".join(open(os.path.join(dump, d, f), encoding="utf-8").read()
                     for d in os.listdir(dump) for f in os.listdir(os.path.join(dump, d)))
    assert "<__main__.Obj object>" in dumped and "<__main__.Obj object>" in r.stderr
    assert "<class '__main__.Obj'>" in dumped + r.stderr
    assert "repr called" not in dumped + r.stderr


def test_giving_up_on_a_function_with_a_surrogate_qualname_while_logging():
    # The give-up log line names the function: a qualname that is not UTF-8 must
    # neither leave a Python error set (a SystemError at the call) nor crash.
    code = textwrap.dedent('''
        import torch, framejit
        def f(x):
            yield x + 1
        f.__code__ = f.__code__.replace(co_qualname="f\\ud800")
        c = framejit.compile(f)
        got = [list(c(torch.ones(2)))[0].tolist() for _ in range(4)]
        print(got == [list(f(torch.ones(2)))[0].tolist()] * 4, framejit.stats()["skipped"])
    ''')
    r = probe(code, timeout=120, env={"FRAMEJIT_LOG": "all"})
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.split() == ["True", "1"], r.stdout + r.stderr[-3000:]
    assert "giving up on f" in r.stderr, r.stderr[-3000:]
