"""The model zoo: small models written the way real projects write them (nanoGPT,
HuggingFace's BERT, torchvision's ResNet, PyTorch's MNIST example, a hand-written GRU
loop), plus transformers' own GPT-2 and BERT, for framejit's tests and reports.

Every entry has the same interface:
    SHAPES                          (batch, sequence length or image side) per training step
    make_model(seed)                a fresh model; equal seeds give identical copies
    make_batch(batch, size, seed)   a dict of input tensors (and targets)
    make_optimizer(model)           the optimizer that project would train it with
    output(model, batch)            the forward's output (a tensor or a tuple of tensors)
    loss(model, batch)              the training loss (a 0-d tensor), read as that project does
`model` in output/loss may be the module itself or framejit.compile(module)."""
import importlib

OWN = ("gpt", "bert", "resnet", "cnn", "rnn")
HF = ("hf.gpt2", "hf.bert")
NAMES = OWN + HF


def entry(name):
    """The zoo entry called `name` (one of NAMES). The HF entries import transformers."""
    if name.startswith("hf."):
        return getattr(importlib.import_module(".hf", __name__), name[3:])
    return importlib.import_module("." + name, __name__)
