"""The breadth corpus (tests/corpus/cases_*.py): several hundred small functions, each
using one Python construct, run eagerly and through framejit.compile on fresh copies of
the same inputs. A case fails when framejit's result (the return value, the arguments
after the call, or the exception raised) differs from eager's, or when framejit raises
where eager does not. Graph breaks and fallbacks are allowed here; scripts/coverage
reports how much of the corpus compiles whole.

Each group runs in a child process (tests/corpus/runner.py, as scripts/coverage runs
it), the first time one of its cases is asked for: a case that kills or hangs its
process fails as a crash, and the group's other cases still run."""
import os
import sys

import pytest

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if TESTS not in sys.path:
    sys.path.insert(0, TESTS)

from corpus.registry import load  # noqa: E402
from corpus.runner import run_group  # noqa: E402

CASES = load()

# Known wrong results, each with its minimal repro in the reason. strict: when framejit
# is fixed the test reports XPASS as a failure, and the entry should be removed.
KNOWN_WRONG = {}


def _param(c):
    marks = [pytest.mark.xfail(strict=True, reason=KNOWN_WRONG[c.id])] if c.id in KNOWN_WRONG else []
    return pytest.param(c, id=c.id, marks=marks)


def test_the_corpus_is_large_and_every_case_has_two_calls():
    assert len(CASES) >= 500
    assert all(len(c.calls) >= 2 for c in CASES)
    assert set(KNOWN_WRONG) <= {c.id for c in CASES}


_RESULTS = {}  # case id -> result, filled a group at a time


def _result(c):
    if c.id not in _RESULTS:
        ids = [d.id for d in CASES if d.group == c.group]
        for r in run_group(c.group, ids, timeout=120, log=lambda msg: None):
            _RESULTS[r["id"]] = r
    return _RESULTS[c.id]


@pytest.mark.parametrize("c", [_param(c) for c in CASES])
def test_corpus_case_matches_eager(c):
    r = _result(c)
    assert r["status"] not in ("wrong", "crash"), f"{r['status']}: {r['detail']}\n{r.get('traceback', '')}"
