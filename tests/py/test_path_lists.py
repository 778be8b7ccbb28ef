"""A list held by an attribute (a config's per-layer settings, a plain list of
submodules, a cache's per-layer objects) is read by its length and its items by path:
another list of the same length, on another instance, takes the same compile; what
changes the list works on the live object. Compared against eager."""
import torch
import torch.nn as nn

import framejit
from conftest import assert_same


class Stack(nn.Module):
    def __init__(self, scales, kinds):
        super().__init__()
        self.scales = list(scales)
        self.kinds = list(kinds)
        self.blocks = [nn.Linear(4, 4) for _ in scales]  # a plain list, as some code has

    def forward(self, x):
        for i, (block, scale) in enumerate(zip(self.blocks, self.scales)):
            y = block(x) * scale
            x = torch.relu(y) if self.kinds[i] == "relu" else torch.tanh(y)
        return x, len(self.kinds), "tanh" in self.kinds, self.scales


def test_list_attributes_of_two_instances_share_one_compile():
    # equal items (numbers and strings are guarded by value), distinct list objects
    torch.manual_seed(0)
    a = Stack([0.5, 2.0, 1.0], ["relu", "tanh", "relu"])
    b = Stack([0.5, 2.0, 1.0], ["relu", "tanh", "relu"])
    fwd = framejit.compile(Stack.forward)
    with torch.no_grad():
        for m in (a, b, a, b):
            x = torch.randn(2, 4)
            got, want = fwd(m, x), Stack.forward(m, x)
            assert_same(got[:3], want[:3])
            assert got[3] is m.scales  # the instance's own list, not a copy
    assert a.scales is not b.scales
    s = framejit.stats(Stack.forward)
    assert (s["fallbacks"], s["graph_breaks"], s["compiles"]) == (0, 0, 1), s


def test_a_list_of_another_length_recompiles():
    torch.manual_seed(0)
    a = Stack([0.5, 2.0], ["relu", "tanh"])
    b = Stack([1.5, -1.0, 3.0], ["tanh", "tanh", "relu"])
    fwd = framejit.compile(Stack.forward)
    with torch.no_grad():
        x = torch.randn(2, 4)
        for m in (a, b):
            assert_same(fwd(m, x)[:3], Stack.forward(m, x)[:3])
        a.kinds[1] = "relu"  # an item changed in place: its own guard sees it
        assert_same(fwd(a, x)[:3], Stack.forward(a, x)[:3])
    assert framejit.stats(Stack.forward)["compiles"] == 3


class Growing(nn.Module):
    def __init__(self):
        super().__init__()
        self.seen = []

    def forward(self, x):
        n = len(self.seen)
        self.seen.append(n)
        return x * (n + 1), self.seen


def test_a_list_attribute_changed_by_the_frame_is_the_live_list():
    g_jit, g_eager = Growing(), Growing()
    fwd = framejit.compile(Growing.forward)
    x = torch.randn(3)
    for _ in range(4):
        got, want = fwd(g_jit, x), Growing.forward(g_eager, x)
        assert_same(got[0], want[0])
        assert got[1] is g_jit.seen
    assert g_jit.seen == g_eager.seen == [0, 1, 2, 3]


class Layered(nn.Module):
    def __init__(self, types):
        super().__init__()
        self.types = list(types)

    def forward(self, x):
        # transformers' find_first_full_attention_index, and a count over a list attribute
        is_full = [t == "full" for t in self.types]
        first = is_full.index(True) if True in is_full else 0
        return x * (first + 1) + self.types.count("sliding")


def test_index_and_count_of_lists():
    fwd = framejit.compile(Layered.forward)
    x = torch.randn(3)
    for types in (["sliding", "full", "full"], ["sliding", "sliding", "sliding"], ["full", "sliding", "x"]):
        m = Layered(types)
        assert_same(fwd(m, x), Layered.forward(m, x))
    s = framejit.stats(Layered.forward)
    assert (s["fallbacks"], s["graph_breaks"]) == (0, 0), s


class SelfHolding(nn.Module):
    def __init__(self):
        super().__init__()
        loop = [1.0]
        loop.append(loop)  # a list that holds itself
        self.loop = loop
        self.nested = [[[[2.0]]]]

    def forward(self, x):
        return x * len(self.loop) + self.nested[0][0][0][0]


def test_a_list_that_holds_itself_and_deep_nesting():
    m = SelfHolding()
    fwd = framejit.compile(SelfHolding.forward)
    x = torch.randn(3)
    for _ in range(2):
        assert_same(fwd(m, x), SelfHolding.forward(m, x))
