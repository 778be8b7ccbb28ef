"""What blocks framejit on the model zoo: for each model, whether framejit.compile(model)
equals eager (eval forwards and 3 training steps on identical copies), framejit's
counters over the run, and the distinct fallback and graph-break reasons with their
source lines (the functions' recorded fallbacks, and framejit.explain of the forward
in eval and in training mode).

    python examples/models/report.py [name ...]      (names: gpt bert resnet cnn rnn hf.gpt2 hf.bert)"""
import os
import sys
import traceback

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import framejit  # noqa: E402
from framejit import _C  # noqa: E402
from models import NAMES, compare, entry  # noqa: E402

COUNTERS = ("graphs", "graph_breaks", "fallbacks", "compiles", "recompiles")
REASON_WIDTH = 150


def where(location):
    """A location 'file:line' shortened to the part after site-packages/ or the repo."""
    for marker in ("site-packages/", "/examples/"):
        if marker in location:
            return location.split(marker, 1)[1]
    return location


def forward_verdict(forwards):
    worst, same = 0.0, True
    for _, eager, compiled in forwards.pairs:
        worst = max(worst, compare.max_rel_diff(compiled, eager))
        for a, e in zip(compare.tensors(compiled), compare.tensors(eager)):
            same = same and a.shape == e.shape and a.dtype == e.dtype and torch.allclose(a, e, rtol=1e-5, atol=1e-6)
    return same, worst


def training_verdict(training):
    loss_rel = max(abs(c - e) / max(abs(e), 1e-12) for c, e in zip(training.compiled_losses, training.eager_losses))
    # The tolerance of tests/py/test_models.py (which says why atol is 2e-5 under AdamW).
    state_same = all(torch.allclose(training.compiled_state[k].double(), v.double(), rtol=1e-4, atol=2e-5)
                     for k, v in training.eager_state.items())
    state_rel = compare.state_max_rel_diff(training.compiled_state, training.eager_state)
    return loss_rel <= 1e-4 and state_same, loss_rel, state_rel


class Explaining:
    """Stands in for a module: each call runs framejit.explain on its forward and keeps
    the graph breaks it reports."""

    def __init__(self, module):
        self.module = module
        self.breaks = []
        self.graphs = 0

    def __call__(self, *args, **kwargs):
        out = framejit.explain(type(self.module).forward, self.module, *args, **kwargs)
        self.breaks.extend((b.reason, b.location) for b in out.graph_breaks)
        self.graphs = max(self.graphs, out.graph_count)
        return out.result


def explain_breaks(e):
    """Graph breaks framejit.explain reports on the forward: eval (no_grad), then training."""
    model = e.make_model(0)
    found = {}
    model.eval()
    batch = e.make_batch(*e.SHAPES[0], seed=10)
    spy = Explaining(model)
    with torch.no_grad():
        e.output(spy, batch)
    found["eval"] = (spy.graphs, spy.breaks)
    model.train()
    spy = Explaining(model)
    torch.manual_seed(0)
    e.loss(spy, batch)
    found["train"] = (spy.graphs, spy.breaks)
    return found


def reasons_table(fallback_records, explained):
    """Distinct (reason, location) -> the labels of where it was seen, first-seen order."""
    table = {}
    for record in fallback_records:
        for reason, location in record["fallback_reasons"]:
            table.setdefault((reason, where(location)), []).append(f"fallback {record['qualname']}")
    for mode, (_, breaks) in explained.items():
        for reason, location in breaks:
            table.setdefault((reason, where(location)), []).append(f"break {mode}")
    return table


def report(name):
    e = entry(name)
    framejit.reset()
    forwards = compare.run_forwards(e)
    training = compare.run_training(e)
    totals = framejit.stats()
    records = [r for r in _C.watched() if r["fallback_reasons"] or r["calls"]]
    fwd_same, fwd_rel = forward_verdict(forwards)
    train_same, loss_rel, state_rel = training_verdict(training)
    framejit.reset()
    explained = explain_breaks(e)
    framejit.reset()

    yes = {True: "yes", False: "NO"}
    print(f"== {name}: eq eager {yes[fwd_same and train_same]}  (forward rel {fwd_rel:.1e}; "
          f"train loss rel {loss_rel:.1e}, final state rel {state_rel:.1e})")
    counters = "  ".join(f"{k} {totals[k]}" for k in COUNTERS)
    states = "".join(f"  {k} {totals[k]}" for k in ("stopped_compiling", "skipped") if totals[k])
    print(f"   stats: {counters}{states}")
    explain_line = "  ".join(f"{mode}: {graphs} graphs, {len(breaks)} breaks"
                             for mode, (graphs, breaks) in explained.items())
    print(f"   explain forward: {explain_line}")
    for (reason, location), seen in reasons_table(records, explained).items():
        labels = sorted(set(seen))
        counts = ", ".join(f"{label} x{seen.count(label)}" if seen.count(label) > 1 else label for label in labels)
        text = reason if len(reason) <= REASON_WIDTH else reason[:REASON_WIDTH - 3] + "..."
        print(f"   - {text}\n       at {location}  [{counts}]")


def main(names):
    versions = f"torch {torch.__version__}"
    try:
        import transformers
        versions += f", transformers {transformers.__version__}"
    except ImportError:
        versions += ", transformers NOT INSTALLED (hf.* entries fail; scripts/setup installs it)"
    print(f"framejit model zoo ({versions})")
    print("eq eager: compiled vs eager on identical copies; forwards within 1e-5 rel (eval, no_grad on 2 shapes "
          "and with grad), 3 training steps: losses within 1e-4 rel, final state_dict close (rtol 1e-4, atol 2e-5); "
          "rel = max|diff| / max|eager|")
    print("reasons: distinct (reason, location); [fallback F xN] = recorded fallbacks of watched function F, "
          "[break eval|train] = framejit.explain of the forward. A frame shows its first blocker only.")
    failed = False
    for name in names:
        try:
            report(name)
        except Exception:  # one model's failure must not hide the others' reports
            failed = True
            print(f"== {name}: ERROR\n" + "".join("   " + line for line in traceback.format_exc().splitlines(True)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or list(NAMES)))
