"""DistributedDataParallel (issue 17): two gloo ranks train a small model with
framejit inside DDP (DDP(framejit.compile(model))) and around it
(framejit.compile(DDP(model))); the gradients are all-reduced, so both ranks end with
the same weights, equal to those of plain eager DDP trained on the same batches."""
import json
import os
import subprocess
import sys

import pytest
import torch

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    init = tmp_path_factory.mktemp("ddp") / "init"
    procs = [subprocess.Popen([sys.executable, os.path.join(HERE, "_ddp_rank.py"), str(r), "2", str(init)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for r in range(2)]
    outs = []
    try:
        for p in procs:
            stdout, stderr = p.communicate(timeout=240)
            assert p.returncode == 0, stderr[-3000:]
            outs.append(json.loads(stdout.strip().splitlines()[-1]))
    finally:
        for p in procs:
            p.kill()
    return outs


def close(a, b):
    return torch.allclose(torch.tensor(a), torch.tensor(b), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("way", ["inner", "outer"])
def test_both_ranks_end_with_eager_ddp_weights(ranks, way):
    for r in ranks:
        assert close(r[way]["losses"], r["eager"]["losses"]), (r[way]["losses"], r["eager"]["losses"])
        assert all(close(w, e) for w, e in zip(r[way]["weights"], r["eager"]["weights"]))
    # All-reduced gradients: the ranks agree exactly, though each saw its own batches.
    assert ranks[0][way]["weights"] == ranks[1][way]["weights"]
    assert ranks[0][way]["losses"] != ranks[1][way]["losses"]


def test_the_model_inside_ddp_is_compiled(ranks):
    for r in ranks:
        s = r["inner_stats"]
        assert s["graphs"] >= 1 and s["fallbacks"] == 0, s
