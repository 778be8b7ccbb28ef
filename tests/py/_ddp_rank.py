"""One rank of tests/py/test_ddp.py: trains the same small model three ways under
DistributedDataParallel with the gloo backend (plain eager, DDP around
framejit.compile(model), framejit.compile around DDP) and prints, as JSON, each way's
losses and final weights and framejit's counters.

    python _ddp_rank.py RANK WORLD_SIZE INIT_FILE"""
import json
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

import framejit


def make_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 4))


def train(run, params, rank, steps=3):
    opt = torch.optim.SGD(params, lr=0.1, momentum=0.9)
    losses = []
    for step in range(steps):
        g = torch.Generator().manual_seed(100 * step + rank)  # each rank its own batch
        x, y = torch.randn(6, 8, generator=g), torch.randn(6, 4, generator=g)
        opt.zero_grad()
        loss = ((run(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return {"losses": losses, "weights": [p.detach().flatten().tolist() for p in params]}


def main():
    rank, world, init = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    dist.init_process_group("gloo", init_method=f"file://{init}", rank=rank, world_size=world)
    out = {}
    eager = DDP(make_model())
    out["eager"] = train(eager, list(eager.parameters()), rank)
    inner_model = make_model()
    inner = DDP(framejit.compile(inner_model))
    out["inner"] = train(inner, list(inner.parameters()), rank)
    out["inner_stats"] = framejit.stats(type(inner_model).forward)
    outer_ddp = DDP(make_model())
    out["outer"] = train(framejit.compile(outer_ddp), list(outer_ddp.parameters()), rank)
    dist.destroy_process_group()
    print(json.dumps(out), flush=True)
    # A gloo worker thread may still be dropping its last finished work, whose saved
    # autograd state holds a Python object; if the interpreter is finalizing by then,
    # taking the GIL ends that thread inside a noexcept destructor and the process
    # aborts ("terminate called without an active exception", about 1 run in 10 here).
    # The results are out, so leave without finalizing.
    os._exit(0)


if __name__ == "__main__":
    main()
