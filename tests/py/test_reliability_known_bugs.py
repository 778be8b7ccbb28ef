"""Edge cases in jit/ that the fuzzer found (tests/fuzz): signed-zero ties of clamp and
maximum/minimum (eager's own answer depends on the element's position: framejit
follows its scalar loop, the vector loop's answer is a strict xfail), and gelu(+inf)
(inf in a one-element tensor, NaN otherwise: framejit matches)."""
import pytest
import torch

import framejit


def signs_and_values(t):
    # A NaN's sign bit is not part of the contract.
    return [("nan" if v != v else (v, s)) for v, s in zip(t.tolist(), torch.signbit(t).tolist())]


def test_clamp_keeps_the_input_on_a_signed_zero_tie():
    def f(x, lo):
        return x.clamp(min=lo), torch.clamp(x, max=-lo)

    x = torch.tensor([-0.0, 0.0, -1.0, 2.0, float("nan")] * 4)
    got, want = framejit.compile(f)(x, 0.0), f(x, 0.0)
    assert framejit.stats(f)["compiles"] == 1
    for g, w in zip(got, want):
        assert signs_and_values(g) == signs_and_values(w)


def test_maximum_minimum_ties_follow_eagers_scalar_loop():
    def f(x, y):
        return torch.maximum(x, y), torch.minimum(x, y)

    # Under 16 elements eager runs its scalar loop only: the first operand on a tie.
    nan = float("nan")
    x = torch.tensor([-0.0, 0.0, 1.0, nan, 3.0, -0.0, 0.0, 2.0])
    y = torch.tensor([0.0, -0.0, 2.0, 1.0, nan, -0.0, 0.0, 2.0])
    got, want = framejit.compile(f)(x, y), f(x, y)
    assert framejit.stats(f)["compiles"] == 1
    for g, w in zip(got, want):
        assert signs_and_values(g) == signs_and_values(w)


@pytest.mark.xfail(strict=True, reason="eager's vector loop keeps the second operand on a signed-zero tie and its "
                                       "scalar loop (tails, small tensors) the first; framejit follows the scalar loop")
def test_maximum_minimum_ties_in_eagers_vector_loop():
    def f(x, y):
        return torch.maximum(x, y), torch.minimum(x, y)

    x = torch.tensor([-0.0, 0.0] * 40)
    y = torch.tensor([0.0, -0.0] * 40)
    got, want = framejit.compile(f)(x, y), f(x, y)
    for g, w in zip(got, want):
        assert signs_and_values(g) == signs_and_values(w)


def test_the_tie_is_visible_downstream():
    # Why the sign matters: 1 // -0.0 is -inf, 1 // 0.0 is inf (what the fuzzer saw).
    x = torch.tensor([-0.0])
    assert (1 // x.clamp(min=0.0)).item() == float("-inf")


def test_gelu_of_inf_as_eager():
    # Eager's float32 gelu(+inf) is inf in a one-element tensor and NaN in any other.
    def f(x):
        return torch.nn.functional.gelu(x)

    cf = framejit.compile(f)
    for shape in ((), (1,), (1, 1), (2,), (3,), (7,), (64,)):
        x = torch.full(shape, float("inf"))
        got, want = cf(x), f(x)
        assert got.isnan().tolist() == want.isnan().tolist(), (shape, got, want)
