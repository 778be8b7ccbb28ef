"""A character-level recurrent language model whose GRU cell is written with Linear
layers (the equations of torch.nn.GRUCell) and looped over time steps in Python, as
tutorials and research code write recurrent cells; Adam."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class GRUCell(nn.Module):
    """r = sigmoid(W_ir x + W_hr h), z = sigmoid(W_iz x + W_hz h),
    n = tanh(W_in x + r * (W_hn h)), h' = (1 - z) * n + z * h (biases in the Linears)."""

    def __init__(self, input_size, hidden_size):
        super().__init__()
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.x2h = nn.Linear(input_size, 3 * hidden_size)
        self.h2h = nn.Linear(hidden_size, 3 * hidden_size)

    def forward(self, x, hidden):
        gate_x = self.x2h(x)
        gate_h = self.h2h(hidden)
        i_r, i_z, i_n = gate_x.chunk(3, 1)
        h_r, h_z, h_n = gate_h.chunk(3, 1)
        resetgate = torch.sigmoid(i_r + h_r)
        updategate = torch.sigmoid(i_z + h_z)
        newgate = torch.tanh(i_n + resetgate * h_n)
        return (1 - updategate) * newgate + updategate * hidden


class CharRNN(nn.Module):
    def __init__(self, vocab_size=64, embed_size=32, hidden_size=64):
        super().__init__()
        self.hidden_size = hidden_size
        self.embedding = nn.Embedding(vocab_size, embed_size)
        self.cell = GRUCell(embed_size, hidden_size)
        self.decoder = nn.Linear(hidden_size, vocab_size)

    def init_hidden(self, batch_size, device):
        return torch.zeros(batch_size, self.hidden_size, device=device)

    def forward(self, inputs, hidden=None):
        batch_size, seq_len = inputs.shape
        if hidden is None:
            hidden = self.init_hidden(batch_size, inputs.device)
        embedded = self.embedding(inputs)
        outputs = []
        for t in range(seq_len):
            hidden = self.cell(embedded[:, t, :], hidden)
            outputs.append(hidden)
        outputs = torch.stack(outputs, dim=1)
        return self.decoder(outputs), hidden


# The zoo's common interface (see examples/models/__init__.py).

VOCAB = 64
SHAPES = [(4, 12), (2, 7), (3, 16)]  # (batch, sequence length) per training step


def make_model(seed=0):
    torch.manual_seed(seed)
    return CharRNN(vocab_size=VOCAB)


def make_batch(batch, seq_len, seed=0):
    g = torch.Generator().manual_seed(seed)
    data = torch.randint(0, VOCAB, (batch, seq_len + 1), generator=g)
    return {"inputs": data[:, :-1].contiguous(), "targets": data[:, 1:].contiguous()}


def make_optimizer(model):
    return torch.optim.Adam(model.parameters(), lr=3e-3)


def output(model, batch):
    logits, hidden = model(batch["inputs"])
    return logits, hidden


def loss(model, batch):
    logits, _ = model(batch["inputs"])
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), batch["targets"].reshape(-1))
