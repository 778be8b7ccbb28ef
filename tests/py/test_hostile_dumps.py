"""FRAMEJIT_TRACE_DIR under hostile conditions (issue 21): symlinks planted where a
dump folder would go are not followed, nothing is written outside the chosen folder,
two processes sharing one folder keep separate, complete dumps, and function names
with '/', '..', NUL, newline or surrogate characters stay inside it.

Every run is a probe in its own interpreter (conftest.probe or Popen with a timeout)."""
import os
import subprocess
import textwrap

import pytest

from conftest import PYTHON, probe

FILES = ("bytecode.txt", "outcome.txt", "graph.txt", "plan.txt", "guards.txt", "ir.ll", "ir_optimized.ll")


def snapshot(folder):
    """Every entry below `folder` (links not followed) with what it holds."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(folder):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            if os.path.islink(p):
                out[p] = ("link", os.readlink(p))
            elif os.path.isfile(p):
                with open(p, "rb") as fh:
                    out[p] = ("file", fh.read())
            else:
                out[p] = ("dir",)
    return out


def dumps_of(root, pid=None):
    """The dump folders in `root` (real folders, not links), of process `pid` if given."""
    names = [n for n in os.listdir(root)
             if os.path.isdir(os.path.join(root, n)) and not os.path.islink(os.path.join(root, n))]
    return sorted(n for n in names if pid is None or n.startswith(f"{pid}-"))


def outcome(root, name):
    with open(os.path.join(root, name, "outcome.txt"), encoding="utf-8") as fh:
        return fh.read()


def test_planted_symlinks_are_not_followed(tmp_path):
    # Where this process's first dump folders would go (both the naming of earlier
    # versions and this one's): a link to a folder outside, a link to a file outside, a
    # dangling link, and a real folder whose files are links to a file outside.
    root, outside = tmp_path / "trace", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (outside / "victim.txt").write_text("keep me\n")
    before = snapshot(outside)
    code = textwrap.dedent(f'''
        import os, torch, framejit
        root, outside = {str(root)!r}, {str(outside)!r}
        pid = os.getpid()
        def plant(name, i):
            kind = i % 4
            p = os.path.join(root, name)
            if kind == 0: os.symlink(outside, p)
            elif kind == 1: os.symlink(os.path.join(outside, "victim.txt"), p)
            elif kind == 2: os.symlink(os.path.join(outside, "made_" + str(i)), p)
            else:
                os.mkdir(p)
                for f in {FILES!r}:
                    os.symlink(os.path.join(outside, "victim.txt"), os.path.join(p, f))
        for i in range(8):
            for name in (f"{{i:04d}}-f", f"{{pid}}-{{i:04d}}-f", f"{{pid}}-{{i}}-f"):
                plant(name, i)
        def f(x):
            return torch.relu(x) * 2 + 1
        x = torch.randn(8)
        assert torch.equal(framejit.compile(f)(x), f(x))
        print("PID", pid)
    ''')
    r = probe(code, env={"FRAMEJIT_TRACE_DIR": str(root)})
    assert r.returncode == 0, r.stderr[-3000:]
    pid = r.stdout.split("PID")[1].split()[0]
    assert snapshot(outside) == before  # nothing written, created or changed outside
    made = [n for n in dumps_of(root, pid) if not os.path.islink(root / n / "outcome.txt")]
    assert len(made) == 1, os.listdir(root)
    dump = root / made[0]
    assert sorted(os.listdir(dump)) == sorted(FILES)
    assert not any(os.path.islink(dump / f) for f in FILES)
    assert outcome(root, made[0]).startswith("compiled f ")
    # The planted links are still there, untouched.
    assert os.readlink(root / f"{pid}-0000-f") == str(outside)


def test_two_processes_on_one_folder_keep_separate_dumps(tmp_path):
    root = tmp_path / "trace"
    code = textwrap.dedent('''
        import os, sys, torch, framejit
        sink = []
        def f(x): return torch.relu(x) + 1
        def g(x): return x.sum(0) * 2
        def h(x):
            sink.append(1)       # a graph break
            return x - 1
        def k(x): return str(x)
        x = torch.randint(-8, 8, (64, 32)).float()  # exact sums in any order
        for fn in (f, g, h, k) * 3:
            a, b = framejit.compile(fn)(x), fn(x)
            ok = torch.equal(a, b) if isinstance(b, torch.Tensor) else a == b
            assert ok, (fn.__name__, a, b)
        print("PID", os.getpid())
    ''')
    env = dict(os.environ, FRAMEJIT_TRACE_DIR=str(root))
    procs = [subprocess.Popen(PYTHON + ["-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=env) for _ in range(2)]
    outs = []
    for p in procs:
        try:
            out, err = p.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            pytest.fail("a process sharing the trace folder hung")
        assert p.returncode == 0, err[-3000:]
        outs.append(out)
    pids = [o.split("PID")[1].split()[0] for o in outs]
    assert pids[0] != pids[1]
    for pid in pids:
        mine = dumps_of(root, pid)
        heads = sorted(outcome(root, n).split(" (")[0].split() for n in mine)
        # One trace per function (the others hit the cache), each dump complete.
        assert [h[1] for h in heads] == ["f", "g", "h", "k"], heads
        for n in mine:
            files = set(os.listdir(root / n))
            assert {"bytecode.txt", "outcome.txt"} <= files
            if outcome(root, n).startswith("compiled"):
                assert {"graph.txt", "plan.txt", "guards.txt"} <= files, (n, files)
            assert os.path.getsize(root / n / "bytecode.txt") > 0
    assert len(dumps_of(root)) == 8


ODD_NAMES = ["../../escape", "a/b/c", "..", ".", "", "/abs", "x\x00y", "\ud800", "s\udcff/..",
             "line\nbreak", "ünïcødé", "n" * 300, "-rf *", "~", "$HOME", "a\\b"]


def test_odd_function_names_stay_inside_the_folder(tmp_path):
    root = tmp_path / "trace"
    before = set(os.listdir(tmp_path))
    code = textwrap.dedent(f'''
        import torch, framejit
        x = torch.randn(4)
        for i, name in enumerate({ODD_NAMES!a}):
            def f(x):
                return x * 3 + 1
            f.__code__ = f.__code__.replace(co_qualname=name, co_name=name or "f")
            f.__qualname__ = name
            assert torch.equal(framejit.compile(f)(x), x * 3 + 1)
    ''')
    r = probe(code, env={"FRAMEJIT_TRACE_DIR": str(root), "FRAMEJIT_LOG": "graph_breaks"})
    assert r.returncode == 0, r.stderr[-3000:]
    assert set(os.listdir(tmp_path)) == before | {"trace"}  # nothing beside the folder
    names = dumps_of(root)
    assert sorted(os.listdir(root)) == names and len(names) == len(ODD_NAMES)
    for n in names:
        assert "/" not in n and "\\" not in n and len(n.encode()) < 200 and n not in (".", "..")
        assert sorted(os.listdir(root / n)) == sorted(FILES)
        assert outcome(root, n).startswith("compiled ")
    # trace-view reads them all.
    view = probe("import sys, framejit.__main__ as m; sys.exit(m.main(['trace-view', sys.argv[1]]))",
                 args=[str(root)])
    assert view.returncode == 0, view.stderr
    assert f"{len(ODD_NAMES)} traces in" in view.stdout
    assert view.stdout.count(": compiled ") == len(ODD_NAMES)


def test_trace_view_on_a_folder_with_links_and_odd_names(tmp_path):
    # trace-view only reads: a link to a folder outside is not listed as a trace, a
    # FIFO planted as outcome.txt does not block it, a non-UTF-8 folder name prints.
    root = tmp_path / "trace \udcff"
    os.makedirs(os.fsencode(root))
    (tmp_path / "elsewhere").mkdir()
    os.symlink(tmp_path / "elsewhere", root / "1-0000-link")
    fifo = root / "1-0001-fifo"
    fifo.mkdir()
    os.mkfifo(fifo / "outcome.txt")
    real = root / "1-0002-real"
    real.mkdir()
    (real / "outcome.txt").write_bytes(b"compiled real (x.py:1)\n\xff bad byte\n")
    view = probe("import sys, framejit.__main__ as m; sys.exit(m.main(['trace-view', sys.argv[1]]))",
                 args=[str(root)], timeout=30)
    assert view.returncode == 0, view.stderr
    assert "2 traces in" in view.stdout and "1-0002-real: compiled real" in view.stdout
