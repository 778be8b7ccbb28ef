"""A small GPT-style model in plain PyTorch (no framejit in sight): token and position
embeddings, two blocks of layer norm + causal self-attention + MLP, a language-model
head. It runs inference over sequence lengths 5..64 and prints one line per length
(stdout), then the time per forward pass (stderr).

Run it plainly, or under framejit without changing a line:
    python -m framejit run --report examples/transformer.py"""
import math
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


def attention(q, k, v):
    """Causal scaled dot-product attention over [batch, heads, seq, head_dim]."""
    t = q.shape[-2]
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    mask = torch.ones(t, t).tril() == 0
    scores = scores.masked_fill(mask, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


class Block(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.ln2 = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, 4 * dim)
        self.fc2 = nn.Linear(4 * dim, dim)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=-1)
        q = q.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        k = k.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        v = v.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        y = attention(q, k, v).transpose(1, 2).reshape(b, t, c)
        x = x + self.proj(y)
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class GPT(nn.Module):
    def __init__(self, vocab=512, dim=128, heads=4, layers=2, max_len=64):
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(max_len, dim)
        self.blocks = nn.ModuleList(Block(dim, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab)

    def forward(self, ids):
        x = self.tok(ids) + self.pos(torch.arange(ids.shape[1]))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x))


def main():
    torch.manual_seed(0)
    model = GPT().eval()
    lengths = list(range(5, 65, 7)) + [64]
    with torch.no_grad():
        for t in lengths:
            ids = torch.randint(0, 512, (2, t))
            logits = model(ids)
            print(f"seq {t:2d}: logits {tuple(logits.shape)}, sum {logits.sum().item():.2f}")
        ids = torch.randint(0, 512, (2, 48))
        model(ids)
        t0 = time.perf_counter()
        for _ in range(20):
            model(ids)
        ms = (time.perf_counter() - t0) / 20 * 1e3
    print(f"forward pass, batch 2, 48 tokens: {ms:.2f} ms", file=sys.stderr)


if __name__ == "__main__":
    main()
