"""Branches on a tensor's value where the plan cannot branch itself (inside an inlined
call, or under autograd): the condition is computed by a small graph of its own when
the entry is looked up (a data check), and the trace goes on in one graph. A call for
which the condition differs traces the other way once; from then on both entries hit.
Each case against eager, with the counters that show no break and no fallback."""
import torch
import torch.nn as nn

import framejit
from conftest import assert_same, compiled_whole, one_graph


def packed_or_none(position_ids):
    # transformers' find_packed_sequence_indices: diff and cumsum, then a branch on all()
    first = position_ids[:, :1] - 1
    diff = torch.diff(position_ids, prepend=first, dim=-1)
    packed = (diff != 1).cumsum(-1)
    if (packed[:, -1] == 0).all():
        return None
    return packed


def masked_scores(x, position_ids):
    scores = x * 2.0
    packed = packed_or_none(position_ids)
    if packed is None:
        return scores + 1
    return scores * packed


def test_a_branch_inside_a_helper_is_a_data_check_and_one_graph():
    x = torch.randn(2, 5)
    plain = torch.arange(5).repeat(2, 1)
    packed = torch.tensor([[0, 1, 0, 1, 2], [0, 1, 2, 3, 4]])
    one_graph(masked_scores, x, plain)
    one_graph(masked_scores, x, packed)
    # Alternating outcomes: two compiles (one per way), then cache hits only.
    calls = [(x, plain), (x, packed), (x, plain), (x, packed), (x * 3, plain), (x, packed)]
    compiled_whole(masked_scores, calls, compiles=2)
    s = framejit.stats(masked_scores)
    assert s["cache_hits"] == 4 and s["graphs"] == 2, s


def test_a_new_sequence_length_keeps_the_data_check_symbolic():
    calls = [(torch.randn(2, n), torch.arange(n).repeat(2, 1)) for n in (5, 7, 9)]
    compiled_whole(masked_scores, calls, compiles=1)


def scaled_unless_padded(x, mask):
    if mask.all():
        return x * 2
    return x * mask.unsqueeze(-1)


def test_a_branch_on_an_input_mask_under_autograd_gives_eagers_gradients():
    w = torch.randn(4, 3, requires_grad=True)
    cf = framejit.compile(scaled_unless_padded)
    for mask in (torch.ones(4, dtype=torch.bool), torch.tensor([True, False, True, True]),
                 torch.ones(4, dtype=torch.bool)):
        w.grad = None
        out = cf(w, mask)
        out.sum().backward()
        got = w.grad.clone()
        w.grad = None
        want = scaled_unless_padded(w, mask)
        want.sum().backward()
        assert_same(out, want)
        assert_same(got, w.grad)
    s = framejit.stats(scaled_unless_padded)
    assert (s["fallbacks"], s["graph_breaks"], s["compiles"]) == (0, 0, 2), s


class Gate(nn.Module):
    """A module whose buffer decides the branch: the buffer changes between calls."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.register_buffer("enabled", torch.tensor(True))

    def gate(self, y):
        if self.enabled:
            return torch.relu(y)
        return y

    def forward(self, x):
        return self.gate(self.lin(x)) + 1


def test_a_buffer_read_by_the_check_is_read_at_each_call():
    torch.manual_seed(0)
    m = Gate()
    x = torch.randn(2, 3)
    cm = framejit.compile(m)
    with torch.no_grad():
        for flag in (True, False, True, False):
            m.enabled.fill_(flag)
            assert_same(cm(x), m(x))
    s = framejit.stats()
    assert s["fallbacks"] == 0 and s["compiles"] == 2 and s["cache_hits"] == 2, s


def bump_then_test(x):
    x.add_(1)
    return positive_sum(x)


def positive_sum(x):
    if x.sum() > 0:
        return x * 2
    return x - 1


def test_an_input_written_in_place_before_the_branch():
    for v in (torch.tensor([0.5, -3.0]), torch.tensor([2.0, 1.0]), torch.tensor([-5.0, 1.0])):
        a, b = v.clone(), v.clone()
        cf = framejit.compile(bump_then_test)
        assert_same(cf(a), bump_then_test(b))
        assert_same(a, b)


def noisy_branch(x):
    return helper_with_noise(x)


def helper_with_noise(x):
    n = torch.rand(())
    if n > 0.5:
        return x + n
    return x - n


def test_a_condition_drawn_from_the_generator_is_not_drawn_twice():
    x = torch.randn(3)
    cf = framejit.compile(noisy_branch)
    for seed in range(4):
        torch.manual_seed(seed)
        want, after_want = noisy_branch(x), torch.rand(2)
        torch.manual_seed(seed)
        got, after_got = cf(x), torch.rand(2)
        assert_same(got, want)
        assert_same(after_got, after_want)  # the stream moved as eager's did


def halve_if_small(p, q):
    if q < -1.5:
        return p * 0.5
    return p * p.shape[0]


def reads_a_number_then_branches(x, y):
    q = float(y.amax()) / 2  # a number read from a tensor, compared in the helper
    return halve_if_small(x, q) + q


def test_a_branch_on_a_number_read_from_a_tensor_inside_a_helper():
    # Found by the fuzzer (seed 37 program 1451): the condition was a Python number
    # of the graph, which a graph may not return; the check returns `cond != 0`.
    x = torch.randn(3, 2)
    calls = [(x, torch.tensor([-5.0, -4.0])), (x, torch.tensor([1.0, 2.0])), (x, torch.tensor([-8.0, -3.5]))]
    compiled_whole(reads_a_number_then_branches, calls, compiles=2)


def gate_by_flag(x, flag):
    return x + 1 if flag else x - 1


def gated(x, flag):
    return gate_by_flag(x * 2, flag)


def test_a_branch_on_an_input_tensor_itself_inside_a_helper():
    x = torch.randn(4)
    calls = [(x, torch.tensor(True)), (x, torch.tensor(False)), (x, torch.tensor([1.5])), (x, torch.tensor(0.0))]
    compiled_whole(gated, calls, compiles=4)  # each truth of bool 0-d, then f32 of rank 1 and 0


def double_if_positive(x):
    if (x > 0).all():
        return x * 2
    return x - 1


def check_then_break(x):
    y = double_if_positive(x)  # a data check: nothing ran before it
    print("side", end="")  # a graph break
    return double_if_positive(y + 1) + 1  # after the break: the helper's own frame branches


def test_a_data_check_before_a_graph_break_and_a_branch_after_it(capsys):
    cf = framejit.compile(check_then_break)
    for v in ([1.0, 2.0], [-1.0, 2.0], [1.0, 2.0], [-3.0, -4.0], [0.5, 0.5]):
        x = torch.tensor(v)
        assert_same(cf(x), check_then_break(x))
    assert capsys.readouterr().out == "side" * 10  # the break's call ran once per call, in order
    s = framejit.stats(check_then_break)
    assert s["fallbacks"] == 0 and s["compiles"] == 2 and s["cache_hits"] == 3, s


def halve_until_small(x):
    while (x > 1).any():
        x = x / 2
    return x


def scaled_down(x):
    return halve_until_small(x * 3) + 1


def test_a_loop_on_tensor_values_in_a_helper_is_not_one_entry_per_trip_count():
    # Each trip reads a value: a few trips are data checks, more make the helper a call
    # of its own (which branches in its own plan), so compiles stay few.
    cf = framejit.compile(scaled_down)
    for v in (0.5, 1.0, 3.0, 10.0, 100.0, 1000.0, 0.5, 3.0, 1e6, 7.0):
        x = torch.tensor([v, v / 4])
        assert_same(cf(x), scaled_down(x))
    s = framejit.stats(scaled_down)
    assert s["fallbacks"] == 0 and s["compiles"] <= 4, s
