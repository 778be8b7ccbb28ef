"""Drop-in use: the import hook and `python -m framejit run`, on a script and a
helper package written into a temporary folder."""
import json
import os
import subprocess
import sys
import textwrap

import torch

import framejit
from conftest import PYTHON, assert_same

LIB = '''
import torch

def step(w, g, lr):
    return w - lr * g

class Block:
    def forward(self, x):
        def act(t):
            return torch.relu(t) * 2
        return act(x) + 1
'''

MAIN = '''
import json, os, sys
import torch
import mylib

def loss(x):
    return (x * x).sum()

torch.manual_seed(0)
w, g = torch.randn(8), torch.randn(8)
for i in range(10):
    w = mylib.step(w, g, 0.01 * (i + 1))
print("w", [round(v, 5) for v in w.tolist()])
print("block", [round(v, 5) for v in mylib.Block().forward(torch.linspace(-1, 1, 5)).tolist()])
if "framejit" in sys.modules:
    import framejit
    with open(os.environ["STATS_OUT"], "w") as fh:
        json.dump({"step": framejit.stats(mylib.step), "forward": framejit.stats(mylib.Block.forward),
                   "profile": sys.getprofile() is None, "trace": sys.gettrace() is None}, fh)
'''


def write_project(tmp_path):
    (tmp_path / "mylib").mkdir()
    (tmp_path / "mylib" / "__init__.py").write_text(textwrap.dedent(LIB))
    (tmp_path / "main.py").write_text(textwrap.dedent(MAIN))


def run(args, tmp_path, env=None):
    full_env = dict(os.environ, STATS_OUT=str(tmp_path / "stats.json"), **(env or {}))
    return subprocess.run(PYTHON + args, cwd=tmp_path, capture_output=True, text=True,
                          env=full_env, timeout=300)


def test_cli_runs_a_script_with_its_modules_watched(tmp_path):
    write_project(tmp_path)
    plain = run(["main.py"], tmp_path)
    assert plain.returncode == 0, plain.stderr
    jit = run(["-m", "framejit", "run", "--modules", "mylib", "--report", "main.py"], tmp_path)
    assert jit.returncode == 0, jit.stderr
    assert jit.stdout == plain.stdout
    stats = json.loads((tmp_path / "stats.json").read_text())
    assert stats["step"]["compiles"] == 1 and stats["step"]["cache_hits"] == 9
    assert stats["forward"]["compiles"] == 1 and stats["forward"]["fallbacks"] == 0
    assert stats["profile"] and stats["trace"]
    assert "framejit report" in jit.stderr and "step (__init__.py" in jit.stderr, jit.stderr


def test_import_hook_in_process(tmp_path, monkeypatch):
    pkg = tmp_path / "fj_hooked_lib"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(textwrap.dedent(LIB))
    monkeypatch.syspath_prepend(str(tmp_path))
    framejit.hook(["fj_hooked_lib"])
    try:
        import fj_hooked_lib
        w, g = torch.randn(4), torch.randn(4)
        for lr in (0.1, 0.2, 0.3):
            assert_same(fj_hooked_lib.step(w, g, lr), w - lr * g)
        assert framejit.stats(fj_hooked_lib.step)["compiles"] == 1
        assert framejit.stats(fj_hooked_lib.step)["cache_hits"] == 2
        assert type(fj_hooked_lib.step).__name__ == "function"  # no wrapper
    finally:
        framejit.unhook()
        sys.modules.pop("fj_hooked_lib", None)
    before = framejit.stats(fj_hooked_lib.step)["calls"]
    fj_hooked_lib.step(w, g, 0.5)
    assert framejit.stats(fj_hooked_lib.step)["calls"] == before  # no longer watched
    assert not framejit._C.hook_installed()


def test_trace_dumps_and_trace_view(tmp_path):
    write_project(tmp_path)
    dump = tmp_path / "dump"
    jit = run(["-m", "framejit", "run", "--modules", "mylib", "main.py"], tmp_path,
              env={"FRAMEJIT_TRACE_DIR": str(dump)})
    assert jit.returncode == 0, jit.stderr
    traces = sorted(p.name for p in dump.iterdir())
    step = dump / next(n for n in traces if n.endswith("step"))
    for f in ("bytecode.txt", "graph.txt", "plan.txt", "guards.txt", "ir.ll", "ir_optimized.ll", "outcome.txt"):
        assert (step / f).is_file(), f
    assert "BINARY_OP" in (step / "bytecode.txt").read_text()
    assert "__init__.py:5" in (step / "bytecode.txt").read_text()
    assert "aten.mul.Tensor" in (step / "graph.txt").read_text()
    assert "L['lr'] is a float" in (step / "guards.txt").read_text()
    assert "define void @fj_g" in (step / "ir_optimized.ll").read_text()
    view = run(["-m", "framejit", "trace-view", str(dump)], tmp_path)
    assert view.returncode == 0, view.stderr
    assert f"{len(traces)} traces" in view.stdout and "compiled step" in view.stdout


def test_cli_runs_a_module_with_pattern_modules_watched(tmp_path):
    # python -m framejit run [--modules ...] -m module args: the module runs as
    # __main__ (a package's __main__), its functions watched, and modules matched by a
    # pattern watched as they are imported.
    write_project(tmp_path)
    app = tmp_path / "app"
    app.mkdir()
    (app / "__init__.py").write_text("")
    (app / "__main__.py").write_text(textwrap.dedent('''
        import sys
        import torch
        import mylib

        def twice(x):
            return x * 2 + 1

        out = [twice(torch.full((3,), float(i))).sum().item() for i in range(4)]
        print("args", sys.argv[1:], "out", out, "name", __name__)
        w = torch.ones(4)
        for lr in (0.1, 0.2, 0.3):
            w = mylib.step(w, torch.ones(4), lr)
        print("w", [round(v, 5) for v in w.tolist()])
        if "framejit" in sys.modules:
            import framejit
            print("twice", framejit.stats(twice)["compiles"], framejit.stats(twice)["cache_hits"])
            print("step", framejit.stats(mylib.step)["compiles"], framejit.stats(mylib.step)["cache_hits"])
    '''))
    plain = run(["-m", "app", "--flag", "v"], tmp_path)
    assert plain.returncode == 0, plain.stderr
    jit = run(["-m", "framejit", "run", "--modules", "my*", "-m", "app", "--flag", "v"], tmp_path)
    assert jit.returncode == 0, jit.stderr
    assert jit.stdout.startswith(plain.stdout)
    assert "args ['--flag', 'v']" in jit.stdout and "name __main__" in jit.stdout
    assert jit.stdout[len(plain.stdout):] == "twice 1 3\nstep 1 2\n"
