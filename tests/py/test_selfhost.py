"""framejit's own tests and an example under its own hook (issue 9, item 5), at CI
size: a subset of tests/py runs plainly and under
`python -m framejit run --modules 'test_*,conftest,_opcheck' -m pytest`, so that every
function of those test modules (and the small functions each test defines) is watched
and compiled when called; each test's outcome must be the same in both runs. The full
run, every test file and every example, is scripts/selfhost (scripts/selfhost.py says
which tests are left out and why)."""
import importlib.util
import os

from conftest import ROOT

_spec = importlib.util.spec_from_file_location("selfhost_script", os.path.join(ROOT, "scripts", "selfhost.py"))
selfhost = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(selfhost)

SUBSET = ["tests/py/test_ops.py", "tests/py/test_inline.py"]


def test_a_subset_of_the_tests_under_the_hook():
    diffs, plain, tally = selfhost.run_tests(SUBSET, timeout=600, log=lambda *_: None)
    assert len(plain) >= 60, sorted(plain)
    assert all(o in ("passed", "xfailed", "skipped") for o in plain.values()), plain
    assert not diffs, "\n".join(f"{t}: plain {a}, hooked {b}" for t, a, b in diffs)
    # The hook really ran the tests' own functions through framejit.
    assert tally["tests"] == len(plain) - sum(o == "skipped" for o in plain.values())
    assert tally["functions"] >= 30 and tally["compiles"] >= 30 and tally["cache_hits"] >= 20, tally


def test_the_gpt_example_under_the_hook():
    assert selfhost.run_examples(["transformer.py"], log=lambda *_: None) == []
