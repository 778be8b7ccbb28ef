"""A GPT-style model (examples/transformer.py: a helper attention function, a loop
over two blocks, embeddings, layer norms, linears) compiles to one graph, with no
break and no fallback, once for every sequence length, and equals eager."""
import os
import sys

import torch

import framejit
from conftest import ROOT

sys.path.insert(0, os.path.join(ROOT, "examples"))
import transformer  # noqa: E402


def test_gpt_one_graph_for_every_sequence_length():
    torch.manual_seed(0)
    model = transformer.GPT(vocab=64, dim=32, heads=4, layers=2, max_len=40).eval()
    cm = framejit.compile(model)
    with torch.no_grad():
        for t in (5, 17, 40, 9):
            ids = torch.randint(0, 64, (2, t))
            torch.testing.assert_close(cm(ids), model(ids), rtol=1e-4, atol=1e-5)
    s = framejit.stats(transformer.GPT.forward)
    assert (s["compiles"], s["graphs"], s["graph_breaks"], s["fallbacks"]) == (1, 1, 0, 0), s
    assert s["cache_hits"] == 3
