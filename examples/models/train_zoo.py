"""A plain training script over the model zoo, written as a user writes one, with no
framejit in it: for each model named, eval forwards on two shapes, then a short
training loop over the entry's shapes. It saves every output, loss and the final
weights to OUT (torch.save), so that a run under plain python and one under
`python -m framejit run` can be compared.

    python examples/models/train_zoo.py OUT name [name ...]
    python -m framejit run --modules models --report examples/models/train_zoo.py OUT name ..."""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from models import entry  # noqa: E402


def evaluate(e, model, seed):
    model.eval()
    outputs = []
    with torch.no_grad():
        for i, (batch_size, size) in enumerate(e.SHAPES[:2]):
            outputs.append(e.output(model, e.make_batch(batch_size, size, seed=seed + i)))
    return outputs


def train_step(e, model, optimizer, batch):
    optimizer.zero_grad(set_to_none=True)
    loss = e.loss(model, batch)
    loss.backward()
    optimizer.step()
    return loss.detach()


def train(e, model, steps):
    model.train()
    optimizer = e.make_optimizer(model)
    losses = []
    for step in range(steps):
        batch_size, size = e.SHAPES[step % len(e.SHAPES)]
        torch.manual_seed(1000 + step)  # dropout draws the same masks in every run
        losses.append(train_step(e, model, optimizer, e.make_batch(batch_size, size, seed=100 + step)))
    return losses


def main(out, names):
    torch.set_num_threads(1)
    results = {}
    for name in names:
        e = entry(name)
        model = e.make_model(0)
        results[name] = {"eval": evaluate(e, model, seed=10), "losses": train(e, model, steps=3),
                         "state": model.state_dict()}
    torch.save(results, out)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
