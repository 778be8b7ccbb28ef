"""A small CNN in the style of PyTorch's MNIST example (examples/mnist/main.py): two
convolutions with relu, max_pool2d, dropout, two linears, log_softmax, nll_loss,
Adadelta; narrower than the example (8 and 16 channels) on 28x28 one-channel images."""
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim


class Net(nn.Module):
    def __init__(self):
        super(Net, self).__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, 1)
        self.conv2 = nn.Conv2d(8, 16, 3, 1)
        self.dropout1 = nn.Dropout(0.25)
        self.dropout2 = nn.Dropout(0.5)
        self.fc1 = nn.Linear(2304, 64)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x):
        x = self.conv1(x)
        x = F.relu(x)
        x = self.conv2(x)
        x = F.relu(x)
        x = F.max_pool2d(x, 2)
        x = self.dropout1(x)
        x = torch.flatten(x, 1)
        x = self.fc1(x)
        x = F.relu(x)
        x = self.dropout2(x)
        x = self.fc2(x)
        output = F.log_softmax(x, dim=1)
        return output


# The zoo's common interface (see examples/models/__init__.py). fc1 fixes the image
# side at 28 (MNIST), so the training loop varies the batch size only.

SHAPES = [(8, 28), (3, 28), (5, 28)]  # (batch, image side) per training step


def make_model(seed=0):
    torch.manual_seed(seed)
    return Net()


def make_batch(batch, size=28, seed=0):
    g = torch.Generator().manual_seed(seed)
    # normalized like the example's transforms.Normalize((0.1307,), (0.3081,))
    data = (torch.rand(batch, 1, size, size, generator=g) - 0.1307) / 0.3081
    return {"data": data, "target": torch.randint(0, 10, (batch,), generator=g)}


def make_optimizer(model):
    return optim.Adadelta(model.parameters(), lr=1.0)


def output(model, batch):
    return model(batch["data"])


def loss(model, batch):
    return F.nll_loss(model(batch["data"]), batch["target"])
