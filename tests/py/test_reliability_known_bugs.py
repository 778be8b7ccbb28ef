"""Bugs in jit/ that the fuzzer found (tests/fuzz), kept as
strict xfails with their reproducers: jit/ is being rewritten, and these tests start
passing (and, being strict, fail as XPASS) once the lowering keeps eager's ties."""
import pytest
import torch

import framejit


def signs_and_values(t):
    return t.tolist(), torch.signbit(t).tolist()


@pytest.mark.xfail(strict=True, reason="jit/cpu_lower.cpp: Clamp/ClampMin/ClampMax return the bound on a tie "
                                       "(max(-0.0, 0.0) = 0.0); eager keeps the input (-0.0)")
def test_clamp_keeps_the_input_on_a_signed_zero_tie():
    def f(x, lo):
        return x.clamp(min=lo), torch.clamp(x, max=-lo)

    x = torch.tensor([-0.0, 0.0, -1.0, 2.0])
    got, want = framejit.compile(f)(x, 0.0), f(x, 0.0)
    assert framejit.stats(f)["compiles"] == 1
    for g, w in zip(got, want):
        assert signs_and_values(g) == signs_and_values(w)


@pytest.mark.xfail(strict=True, reason="jit/cpu_lower.cpp: Maximum/Minimum order -0.0 below 0.0; eager returns "
                                       "the first operand on a tie")
def test_maximum_minimum_keep_the_first_operand_on_a_signed_zero_tie():
    def f(x, y):
        return torch.maximum(x, y), torch.minimum(x, y)

    x = torch.tensor([-0.0, 0.0, 1.0])
    y = torch.tensor([0.0, -0.0, 2.0])
    got, want = framejit.compile(f)(x, y), f(x, y)
    assert framejit.stats(f)["compiles"] == 1
    for g, w in zip(got, want):
        assert signs_and_values(g) == signs_and_values(w)


def test_the_tie_is_visible_downstream():
    # Why the sign matters: 1 // -0.0 is -inf, 1 // 0.0 is inf (what the fuzzer saw).
    x = torch.tensor([-0.0])
    assert (1 // x.clamp(min=0.0)).item() == float("-inf")


@pytest.mark.xfail(strict=True, reason="jit/ (gelu lowering): eager's float32 gelu(+inf) is inf for a one-element "
                                       "tensor (its scalar path) and NaN otherwise; framejit gives NaN always "
                                       "(fuzz seed 21 program 236)")
def test_gelu_of_inf_in_a_one_element_float32_tensor():
    def f(x):
        return torch.nn.functional.gelu(x)

    cf = framejit.compile(f)
    for shape in ((), (1,), (3,)):
        x = torch.full(shape, float("inf"))
        got, want = cf(x), f(x)
        assert got.isnan().tolist() == want.isnan().tolist(), (shape, got, want)
