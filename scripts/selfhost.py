"""framejit's own code under its own hook (issue 9, item 5): the pytest suite and the
examples, run plainly and under `python -m framejit run` with every project module
watched; the results must be the same.

    scripts/selfhost [--tests PATH ...] [--no-examples] [--no-tests] [-k EXPR]

Tests: tests/py runs twice, plainly and as
    python -m framejit run --modules 'test_*,conftest,_opcheck' -m pytest ...
so that every function of the test modules and of their helpers (including the many
small functions each test defines) is watched: called eagerly by a test, it is traced
and compiled; framejit.compile() wraps a function whose code the hook already
watches. The two runs' outcomes (passed, failed, skipped, xfailed, ...) are compared
test by test. --assert=plain in both runs: pytest's assertion rewriting imports the
test modules through its own finder, ahead of framejit's.
A small pytest plugin (this file, loaded with -p) adds up, before each test's
framejit.reset(), what the hook did in the test modules, so the report shows that
the hooked run really ran compiled code.

Examples: each of examples/*.py runs plainly and under `python -m framejit run`; its
stdout must be the same once what legitimately varies is masked (timings, and the
counters that the hook changes by compiling the eager reference calls too).

Tests left out of both runs, with the reason, are in EXCLUDED. Exit status 1 when an
outcome or an output differs."""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HOOKED_MODULES = "test_*,conftest,_opcheck"

# Tests whose outcome under a process-wide hook differs for a reason that is not a
# framejit bug; each is left out of both runs.
COUNTS = ("counts compiles, cache hits or fallbacks of a function that the test also calls eagerly as "
          "the reference: under the hook those eager calls are compiled (or fall back) too")
EXCLUDED = {
    "tests/py/test_dropin.py::test_import_hook_in_process":
        "calls framejit.hook() and framejit.unhook(), which replace the run's own import hook and "
        "stop watching every module it watched",
    "tests/py/test_selfhost.py": "runs scripts/selfhost itself (a plain and a hooked pytest run of its own)",
    "tests/py/test_ops.py::test_unsupported_dtype_falls_back": COUNTS,
    "tests/py/test_inline.py::test_loops_over_ranges_and_sequences_are_unrolled": COUNTS,
    "tests/py/test_explain_logs.py::test_explain_reports_graph_ops_and_guards": COUNTS,
    "tests/py/test_ops_matmul.py::test_int_matmul_falls_back": COUNTS,
}

# How an example's stdout is compared: regular expressions whose matches are masked
# (an example with masks also has object addresses and column padding masked).
TIMING = [r"\d+(\.\d+)? ?ms", r"\(\d+(\.\d+)?x\)", r"\d+(\.\d+)?x faster", r"\d+(\.\d+)? ?us"]
EXAMPLES = {
    # name: (arguments, masks, why the masks)
    "transformer.py": ([], [], "exact"),
    "demo.py": ([], TIMING + [r"counters: \{.*\}", r"compiles \d+, recompiles \d+, cache hits \d+",
                              r"compiles \d+, cache hits \d+"],
                "timings; counters (under the hook the eager reference calls of f and Gate.forward "
                "are compiled too)"),
    "bench_pointwise.py": (["--n", "65536", "--rounds", "2", "--no-inductor", "--keep-malloc-defaults"],
                           [r"-?\d+(\.\d+)?(e-?\d+)?"], "every number (timings)"),
    "bench_ops.py": (["--rounds", "1", "--no-inductor", "--keep-malloc-defaults"],
                     [r"-?\d+(\.\d+)?(e-?\d+)?"], "every number (timings)"),
    "bench_dynamic.py": (["--no-inductor"], [r"-?\d+(\.\d+)?(e-?\d+)?"], "every number (timings)"),
    "bench_hook.py": (["--n", "12", "--rounds", "3"], [r"-?\d+(\.\d+)?(e-?\d+)?"], "every number (timings)"),
}


def python_cmd():
    # -S when this interpreter runs with it (a worktree's build on PYTHONPATH).
    return [sys.executable, "-S"] if sys.flags.no_site else [sys.executable]


def env_with_plugin():
    env = dict(os.environ)
    here = os.path.dirname(os.path.abspath(__file__))
    env["PYTHONPATH"] = here + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


# ---- the tests ----

def command_for_pytest(paths, junit, extra, tally=None):
    args = ["-m", "pytest", *paths, "-q", "-p", "no:cacheprovider", "-p", "no:randomly", "--assert=plain",
            f"--junit-xml={junit}", *extra]
    for test in EXCLUDED:
        args += ["--deselect", test]
    if tally:
        args += ["-p", "selfhost"]
    return args


def outcomes(junit):
    """test id -> outcome, from a junit xml file."""
    out = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        name = case.get("classname", "").replace(".", "/") + ".py::" + case.get("name")
        state = "passed"
        for child in case:
            if child.tag in ("failure", "error"):
                state = child.tag
            elif child.tag == "skipped":
                state = "xfailed" if child.get("type") == "pytest.xfail" else "skipped"
        out[name] = state
    return out


def run_tests(paths, extra=(), timeout=3600, log=print):
    """Runs the tests plainly and hooked; returns (differences, plain outcomes, tally)."""
    with tempfile.TemporaryDirectory(prefix="fj-selfhost-") as tmp:
        plain_xml, hooked_xml = os.path.join(tmp, "plain.xml"), os.path.join(tmp, "hooked.xml")
        tally_file = os.path.join(tmp, "tally.json")
        env = env_with_plugin()
        env["FJ_SELFHOST_TALLY"] = tally_file
        runs = {}
        for label, prefix, xml in (("plain", [], plain_xml),
                                   ("hooked", ["-m", "framejit", "run", "--modules", HOOKED_MODULES], hooked_xml)):
            cmd = python_cmd() + prefix + command_for_pytest(paths, xml, list(extra), tally=label == "hooked")
            log(f"== {label}: {' '.join(cmd[1:])}")
            proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
            summary = [ln for ln in proc.stdout.splitlines() if ln.strip()][-1:] or ["(no output)"]
            log(f"   {summary[0]}")
            if not os.path.exists(xml):
                current = tally_file + ".current"
                where = open(current).read() if label == "hooked" and os.path.exists(current) else "?"
                raise RuntimeError(f"the {label} run wrote no results (exit status {proc.returncode}; the last "
                                   f"test started: {where}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
            runs[label] = (outcomes(xml), proc)
        plain, hooked = runs["plain"][0], runs["hooked"][0]
        diffs = []
        for test in sorted(set(plain) | set(hooked)):
            a, b = plain.get(test, "missing"), hooked.get(test, "missing")
            if a != b:
                diffs.append((test, a, b))
        tally = json.load(open(tally_file)) if os.path.exists(tally_file) else {}
        if diffs:
            log(runs["hooked"][1].stdout[-6000:])
        return diffs, plain, tally


# ---- the examples ----

def masked(text, masks):
    """text with the matches of masks replaced; with any mask, object addresses (repr of
    functions in guard lists) and column padding (numbers of other widths) too."""
    if not masks:
        return text
    for m in masks:
        text = re.sub(m, "#", text)
    text = re.sub(r"0x[0-9a-f]+", "0x#", text)
    return re.sub(r"[ \t]+", " ", text)


def run_examples(names=None, timeout=900, log=print):
    """Runs each example plainly and hooked; returns a list of (name, what differs)."""
    bad = []
    for name, (args, masks, why) in EXAMPLES.items():
        if names and name not in names:
            continue
        path = os.path.join("examples", name)
        outs = {}
        for label, prefix in (("plain", []), ("hooked", ["-m", "framejit", "run"])):
            proc = subprocess.run(python_cmd() + prefix + [path] + args, cwd=ROOT, capture_output=True, text=True,
                                  timeout=timeout)
            if proc.returncode != 0:
                bad.append((name, f"{label} run exited with {proc.returncode}:\n{proc.stderr[-3000:]}"))
            outs[label] = masked(proc.stdout, masks)
        same = outs["plain"] == outs["hooked"]
        log(f"   {name}: stdout {'the same' if same else 'DIFFERS'} ({why})")
        if not same:
            import difflib
            diff = "\n".join(difflib.unified_diff(outs["plain"].splitlines(), outs["hooked"].splitlines(),
                                                  "plain", "hooked", lineterm=""))
            bad.append((name, diff))
    return bad


# ---- the pytest plugin (-p selfhost, in the hooked run) ----

_tally = {"tests": 0, "functions": set(), "calls": 0, "compiles": 0, "cache_hits": 0, "fallbacks": 0}


def _test_dir():
    return os.path.join(ROOT, "tests")


try:
    import pytest

    def pytest_runtest_logstart(nodeid, location):
        path = os.environ.get("FJ_SELFHOST_TALLY")
        if path:  # so that a crash of the hooked run can say where it happened
            with open(path + ".current", "w") as fh:
                fh.write(nodeid)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(item):
        yield
        # Before the test's teardown resets framejit's counters.
        from framejit import _C
        _tally["tests"] += 1
        for row in _C.watched():
            if row["calls"] and row["filename"].startswith(_test_dir()):
                _tally["functions"].add(f"{os.path.relpath(row['filename'], ROOT)}:{row['line']}")
                for k in ("calls", "compiles", "cache_hits", "fallbacks"):
                    _tally[k] += row[k]

    def pytest_sessionfinish(session):
        path = os.environ.get("FJ_SELFHOST_TALLY")
        if path:
            with open(path, "w") as fh:
                json.dump(dict(_tally, functions=len(_tally["functions"])), fh)
except ImportError:  # the script itself does not need pytest
    pass


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tests", nargs="*", default=["tests/py"], help="test paths (default: tests/py)")
    ap.add_argument("-k", default=None, help="pytest -k expression for both runs")
    ap.add_argument("--no-tests", action="store_true")
    ap.add_argument("--no-examples", action="store_true")
    args = ap.parse_args(argv)
    status = 0
    if not args.no_tests:
        extra = ["-k", args.k] if args.k else []
        diffs, plain, tally = run_tests(args.tests, extra)
        print(f"{len(plain)} tests; left out of both runs: {len(EXCLUDED)}")
        for test, why in EXCLUDED.items():
            print(f"   {test}: {why}")
        print(f"under the hook: {tally.get('functions', 0)} functions of tests/ called, "
              f"{tally.get('compiles', 0)} compiles, {tally.get('cache_hits', 0)} cache hits, "
              f"{tally.get('fallbacks', 0)} fallbacks over {tally.get('tests', 0)} tests")
        for test, a, b in diffs:
            print(f"DIFFERS {test}: plain {a}, hooked {b}")
        print(f"tests: {'the same outcomes' if not diffs else f'{len(diffs)} outcomes differ'}")
        status |= bool(diffs)
    if not args.no_examples:
        print("== examples, plainly and under python -m framejit run")
        bad = run_examples()
        for name, what in bad:
            print(f"DIFFERS {name}:\n{what}")
        print(f"examples: {'the same output' if not bad else f'{len(bad)} differ'}")
        status |= bool(bad)
    return status


if __name__ == "__main__":
    sys.exit(main())
