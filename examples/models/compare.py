"""Runs a zoo entry eagerly and under framejit.compile on identical copies: forwards in
eval mode (no_grad and with grad) and a short training loop over the entry's shapes,
returning both sides' results for tests (to assert) and report.py (to print)."""
from dataclasses import dataclass, field

import torch

import framejit


def tensors(value):
    """The tensors of an output (a tensor, or nested tuples/lists of them), in order."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in tensors(v)]
    raise TypeError(f"a zoo output holds a {type(value).__name__}, not a tensor")


def max_rel_diff(actual, expected):
    """max |actual - expected| / max |expected| over matching tensors (0 when equal)."""
    worst = 0.0
    for a, e in zip(tensors(actual), tensors(expected)):
        if not e.dtype.is_floating_point:
            worst = max(worst, 0.0 if torch.equal(a, e) else float("inf"))
            continue
        scale = e.detach().abs().max().item() if e.numel() else 0.0
        diff = (a.detach() - e.detach()).abs().max().item() if e.numel() else 0.0
        worst = max(worst, diff / scale if scale > 0 else diff)
    return worst


@dataclass
class Forwards:
    """Eager and compiled outputs of the forwards: one pair per (shape, grad mode)."""
    pairs: list = field(default_factory=list)  # (label, eager output, compiled output)


@dataclass
class Training:
    """Per-step losses of both copies and their state after the last step."""
    eager_losses: list = field(default_factory=list)
    compiled_losses: list = field(default_factory=list)
    eager_state: dict = field(default_factory=dict)
    compiled_state: dict = field(default_factory=dict)


def copies(entry, seed=0):
    """(eager model, its twin, framejit.compile(twin)): the twin holds the compiled copy's
    parameters, so its optimizer and state_dict are the plain module's."""
    eager = entry.make_model(seed)
    twin = entry.make_model(seed)
    return eager, twin, framejit.compile(twin)


def run_forwards(entry, seed=0):
    """Eval-mode forwards on the first two shapes under no_grad, and one with grad."""
    eager, twin, compiled = copies(entry, seed)
    eager.eval()
    twin.eval()
    result = Forwards()
    for i, (batch_size, size) in enumerate(entry.SHAPES[:2]):
        batch = entry.make_batch(batch_size, size, seed=10 + i)
        with torch.no_grad():
            result.pairs.append((f"no_grad {batch_size}x{size}", entry.output(eager, batch),
                                 entry.output(compiled, batch)))
    batch_size, size = entry.SHAPES[0]
    batch = entry.make_batch(batch_size, size, seed=12)
    result.pairs.append((f"grad {batch_size}x{size}", entry.output(eager, batch), entry.output(compiled, batch)))
    return result


def train_step(entry, model, optimizer, batch, rng_seed):
    """One step as training scripts write it: zero_grad, loss, backward, step. The RNG
    is seeded first so that dropout draws the same masks on both copies."""
    torch.manual_seed(rng_seed)
    optimizer.zero_grad(set_to_none=True)
    loss = entry.loss(model, batch)
    loss.backward()
    optimizer.step()
    return loss.item()


def run_training(entry, steps=3, seed=0):
    """`steps` training steps over the entry's shapes (cycled), on both copies."""
    eager, twin, compiled = copies(entry, seed)
    eager.train()
    twin.train()
    opt_eager = entry.make_optimizer(eager)
    opt_compiled = entry.make_optimizer(twin)
    result = Training()
    for step in range(steps):
        batch_size, size = entry.SHAPES[step % len(entry.SHAPES)]
        batch = entry.make_batch(batch_size, size, seed=100 + step)
        result.eager_losses.append(train_step(entry, eager, opt_eager, batch, 1000 + step))
        result.compiled_losses.append(train_step(entry, compiled, opt_compiled, batch, 1000 + step))
    result.eager_state = eager.state_dict()
    result.compiled_state = twin.state_dict()
    return result


def state_max_rel_diff(actual, expected):
    return max_rel_diff([actual[k] for k in expected], [expected[k] for k in expected])
