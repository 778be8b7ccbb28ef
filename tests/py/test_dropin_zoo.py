"""The model zoo under the drop-in `python -m framejit run` (issue 17): a plain training
script (examples/models/train_zoo.py, no framejit in it) run by plain python and by
framejit with the zoo's modules watched gives the same eval outputs (1e-5 relative),
losses (1e-4 relative) and final weights (test_models.py's tolerance). Each model's
`output(model, batch)` and `loss(model, batch)` (the zoo's helpers, which take the model
as an argument) compile with the model's forward traced into them, without a fallback
or a graph break, once for all batch sizes."""
import os
import re
import subprocess

import torch

from conftest import PYTHON, ROOT, assert_same

SCRIPT = os.path.join(ROOT, "examples", "models", "train_zoo.py")
MODELS = ("gpt", "bert", "resnet", "cnn", "rnn")


def run(args, out):
    done = subprocess.run(PYTHON + args + [SCRIPT, str(out), *MODELS], capture_output=True, text=True,
                          timeout=600, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    return torch.load(out), done.stderr


def report_rows(text):
    """{(qualname, file): (calls, compiles, recompiles, hits, breaks, fallbacks)} of a
    --report table."""
    rows = {}
    for line in text.splitlines():
        m = re.match(r"(\S+) \(([^:)]*):\d+\)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+[\d.]+$", line)
        if m:
            rows[(m.group(1), m.group(2))] = tuple(int(v) for v in m.groups()[2:])
    return rows


def test_zoo_training_script_under_framejit_run_equals_plain_python(tmp_path):
    eager, _ = run([], tmp_path / "eager.pt")
    jit, report = run(["-m", "framejit", "run", "--modules", "models", "--report"], tmp_path / "jit.pt")
    for name in MODELS:
        want, got = eager[name], jit[name]
        assert len(got["eval"]) == len(want["eval"]) == 2
        for g, w in zip(got["eval"], want["eval"]):
            assert_same(g, w)
        for step, (g, w) in enumerate(zip(got["losses"], want["losses"])):
            assert abs(g.item() - w.item()) <= 1e-4 * abs(w.item()), f"{name} step {step}: {g} vs {w}"
        assert got["state"].keys() == want["state"].keys()
        for key, w in want["state"].items():
            torch.testing.assert_close(got["state"][key], w, rtol=1e-4, atol=2e-5, msg=lambda m: f"{name} {key}: {m}")
    rows = report_rows(report)
    for name in MODELS:
        for helper, calls in (("output", 2), ("loss", 3)):
            row = rows[(helper, name + ".py")]
            assert row[0] == calls and (row[4], row[5]) == (0, 0), (name, helper, row)
            # one compile for every batch size; the GRU loop unrolls over the sequence
            # length, so it compiles once per length of its loop
            assert row[1] == (calls if name == "rnn" else 1), (name, helper, row)
