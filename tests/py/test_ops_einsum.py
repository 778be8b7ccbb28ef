"""torch.einsum through framejit: one and two operands lowered to permute / reshape /
sum / mul / matmul in one graph; what is not lowered (diagonals, three operands, the
sublist form, other dtypes) and eager's errors run as eager's einsum."""
import pytest
import torch

import framejit
from _opcheck import check
from conftest import assert_same

# (equation, operand shapes): each is lowered into the graph.
LOWERED = [
    # contractions: one (batched) matmul
    ("ij,jk->ik", (3, 4), (4, 5)),
    ("ij,jk", (3, 4), (4, 5)),
    ("ij,kj->ik", (3, 4), (5, 4)),
    ("ji,jk->ki", (4, 3), (4, 5)),
    ("ij,jk->ki", (3, 4), (4, 5)),
    ("bij,bjk->bik", (2, 3, 4), (2, 4, 5)),
    ("bij,bjk->bki", (2, 3, 4), (2, 4, 5)),
    ("bhqd,bhkd->bhqk", (2, 3, 4, 5), (2, 3, 6, 5)),
    ("bhqk,bhkd->bhqd", (2, 3, 4, 6), (2, 3, 6, 5)),
    ("bqhd,bkhd->bhqk", (2, 4, 3, 5), (2, 6, 3, 5)),
    ("i,i->", (5,), (5,)),
    ("i,i", (5,), (5,)),
    ("bi,bi->b", (3, 4), (3, 4)),
    ("ij,ij->", (3, 4), (3, 4)),
    ("ij,j->i", (3, 4), (4,)),
    ("j,jk->k", (4,), (4, 5)),
    ("abc,cd->abd", (2, 3, 4), (4, 5)),
    ("abcd,cde->abe", (2, 3, 4, 5), (4, 5, 6)),
    ("ba,ab", (2, 3), (3, 2)),
    ("Ba,aB", (2, 3), (3, 2)),
    ("ab,bC", (2, 3), (3, 4)),  # implicit output: upper case sorts first ("Ca")
    ("Ab,bc", (2, 3), (3, 4)),
    ("ij,jk->", (3, 4), (4, 5)),
    ("ijk,ikl->j", (2, 3, 4), (2, 4, 5)),
    # products without a contraction: mul
    ("i,j->ij", (3,), (4,)),
    ("i,j", (3,), (4,)),
    ("i,i->i", (4,), (4,)),
    ("ij,ij->ij", (3, 4), (3, 4)),
    ("ij,ij->ji", (3, 4), (3, 4)),
    ("bi,bj->bij", (2, 3), (2, 4)),
    ("i,->i", (3,), ()),
    (",->", (), ()),
    ("ij,kl->", (2, 3), (4, 5)),
    # one operand: permute and sum
    ("ij->ji", (3, 4)),
    ("ij", (3, 4)),
    ("ji", (3, 4)),
    ("ij->", (3, 4)),
    ("ij->j", (3, 4)),
    ("ijk->kj", (2, 3, 4)),
    ("i->i", (5,)),
    ("->", ()),
    ("", ()),
    # spaces, ellipsis and broadcasting
    (" i j , j k -> i k ", (3, 4), (4, 5)),
    ("...ij,...jk->...ik", (2, 3, 4), (4, 5)),
    ("...ij,...jk", (2, 1, 3, 4), (5, 4, 6)),
    ("...ij->...", (5, 2, 3)),
    ("...ij->ij", (5, 2, 3)),
    ("...ij->...ji", (5, 2, 3)),
    ("b...,b...->b", (2, 1, 3), (2, 4, 3)),
    ("...i,...i", (2, 1, 3), (4, 3)),
    ("ij...,jk...->ik...", (2, 3, 5), (3, 4, 5)),
    ("i...,i...->...", (3,), (3, 2)),
    # size-1 dims broadcast against the other operand's
    ("i,i->i", (1,), (3,)),
    ("ij,jk->ik", (2, 1), (3, 4)),
    ("ij,jk->ik", (2, 3), (1, 4)),
    ("bij,bjk->bik", (1, 3, 4), (2, 4, 5)),
    ("bij,bjk->bik", (2, 3, 1), (2, 1, 5)),
    ("bi,bi->b", (1, 1), (1, 1)),
]


# One operand, output labels in input order: eager returns a view of the input, the
# trace no op (so no graph).
IDENTITY = {"ij", "i->i", "->", ""}
# Pure permutations: the result is a view of the input (no graph), as eager's.
IDENTITY |= {"ij->ji", "ji", "...ij->...ji"}


def _einsum_fn(eq, nargs, as_list=False):
    if nargs == 1:
        return lambda a: torch.einsum(eq, a)
    if as_list:
        return lambda a, b: torch.einsum(eq, [a, b])
    return lambda a, b: torch.einsum(eq, a, b)


def _operands(shapes, dtype=torch.float32, gen=None):
    if dtype.is_floating_point:
        return [torch.randn(s, generator=gen, dtype=dtype) for s in shapes]
    return [torch.randint(-50, 50, s, generator=gen, dtype=dtype) for s in shapes]


def _id(case):
    return f"{case[0].replace(' ', '_') or 'empty'}:" + "x".join(str(s) for s in case[1:])


@pytest.mark.parametrize("case", LOWERED, ids=[_id(c) for c in LOWERED])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64], ids=str)
def test_lowered(case, dtype):
    eq, *shapes = case
    ops = _operands(shapes, dtype, torch.Generator().manual_seed(len(eq)))
    check(_einsum_fn(eq, len(ops)), *ops, graphs=0 if eq in IDENTITY else 1)


@pytest.mark.parametrize("as_list", [True, False])
def test_operand_list_and_tuple(as_list):
    a, b = torch.randn(3, 4), torch.randn(4, 5)
    if as_list:
        check(lambda a, b: torch.einsum("ij,jk->ik", [a, b]) + 1, a, b)
    else:
        check(lambda a, b: torch.einsum("ij,jk->ik", (a, b)) + 1, a, b)


def test_one_operand_in_a_list():
    check(lambda a: torch.einsum("ij->j", [a]), torch.randn(3, 4))


def test_non_contiguous_operands():
    a = torch.randn(5, 3)
    b = torch.randn(8, 5)[::2]  # [4, 5] with a step
    c = torch.randn(2, 4, 3).permute(0, 2, 1)  # [2, 3, 4]
    check(lambda a, b: torch.einsum("ij,jk->ik", a.t(), b.t()), a, b)
    check(lambda b, c: torch.einsum("bij,jk->bik", c, b), b, c)
    check(lambda a, c: torch.einsum("ji,bik->bjk", a, c), a, c)


def test_chain_in_one_graph():
    def f(q, k, v):
        s = torch.einsum("bhqd,bhkd->bhqk", q, k) * 0.125
        p = torch.softmax(s, dim=-1)
        return torch.einsum("bhqk,bhkd->bhqd", p, v)

    q, k, v = (torch.randn(2, 3, 5, 4) for _ in range(3))
    check(f, q, k, v)


def test_dynamic_sizes_one_compile():
    def f(q, k):
        return torch.einsum("bhqd,bhkd->bhqk", q, k)

    def g(x, y):
        return torch.einsum("...i,...i->...", x, y)

    cf, cg = framejit.compile(f), framejit.compile(g)
    for b, n, m in ((2, 5, 7), (3, 9, 4), (6, 2, 11), (4, 16, 16)):
        q, k = torch.randn(b, 3, n, 8), torch.randn(b, 3, m, 8)
        assert_same(cf(q, k), f(q, k))
        x, y = torch.randn(b, n, 4), torch.randn(b, n, 4)
        assert_same(cg(x, y), g(x, y))
    for fn in (f, g):
        s = framejit.stats(fn)
        assert s["compiles"] == 1 and s["recompiles"] == 0 and s["fallbacks"] == 0, s
        assert s["cache_hits"] == 3, s


def test_one_operand_result_is_a_view():
    def f(x):
        y = torch.einsum("ij->ji", x)
        y.mul_(2)  # writes x too, as in eager
        return x + 0

    x = torch.randn(3, 4)
    x_eager = x.clone()
    cf = framejit.compile(f)
    assert_same(cf(x), f(x_eager))
    assert torch.equal(x, x_eager)
    assert framejit.stats(f)["fallbacks"] == 0


def test_view_of_a_transposed_result_raises_as_eager():
    def f(x):
        return torch.einsum("ij->ji", x).view(-1)

    x = torch.randn(3, 4)
    with pytest.raises(RuntimeError) as eager:
        f(x)
    with pytest.raises(RuntimeError) as compiled:
        framejit.compile(f)(x)
    assert str(compiled.value) == str(eager.value)


def test_autograd():
    def f(a, b):
        return torch.einsum("bij,bjk->bik", a, b).sum()

    a, b = torch.randn(2, 3, 4, requires_grad=True), torch.randn(2, 4, 5, requires_grad=True)
    framejit.compile(f)(a, b).backward()
    ga, gb = a.grad, b.grad
    a.grad = b.grad = None
    f(a, b).backward()
    torch.testing.assert_close(ga, a.grad)
    torch.testing.assert_close(gb, b.grad)


# Not lowered: the call runs as eager's einsum (a graph break), with eager's result.
NOT_LOWERED = {
    "diagonal": (lambda a: torch.einsum("ii->i", a) + 1, [(3, 3)]),
    "trace": (lambda a: torch.einsum("ii", a) + 1, [(3, 3)]),
    "repeated_two_ops": (lambda a, b: torch.einsum("iij,jk->ik", a, b) + 1, [(3, 3, 4), (4, 2)]),
    "three_operands": (lambda a, b, c: torch.einsum("ij,jk,kl->il", a, b, c) + 1, [(2, 3), (3, 4), (4, 5)]),
    "three_in_list": (lambda a, b, c: torch.einsum("bn,anm,bm->ba", [a, b, c]) + 1, [(2, 3), (4, 3, 5), (2, 5)]),
    "sublist": (lambda a, b: torch.einsum(a, [0, 1], b, [1, 2], [0, 2]) + 1, [(2, 3), (3, 4)]),
    "size_zero": (lambda a, b: torch.einsum("ij,jk->ik", a, b) + 1, [(2, 0), (0, 4)]),
}


@pytest.mark.parametrize("name", sorted(NOT_LOWERED))
def test_not_lowered_runs_eager(name):
    fn, shapes = NOT_LOWERED[name]
    ops = _operands(shapes)
    cf = framejit.compile(fn)
    expected = fn(*ops)
    assert_same(cf(*ops), expected)
    assert_same(cf(*ops), expected)
    s = framejit.stats(fn)
    assert s["graph_breaks"] + s["fallbacks"] >= 1, s


@pytest.mark.parametrize("dtype", [torch.int32, torch.float16])
def test_other_dtypes_run_eager(dtype):
    def f(a, b):
        return torch.einsum("ij,jk->ik", a, b) * 2

    a, b = torch.ones(3, 4, dtype=dtype), torch.ones(4, 5, dtype=dtype)
    cf = framejit.compile(f)
    assert_same(cf(a, b), f(a, b))
    s = framejit.stats(f)
    assert s["graph_breaks"] + s["fallbacks"] >= 1, s


# Eager raises: framejit raises the same exception.
ERRORS = {
    "size_mismatch": ("ij,jk->ik", [(3, 4), (5, 6)]),
    "rank_mismatch": ("ij,jk", [(3,), (3, 4)]),
    "bad_letter": ("i1,1k", [(2, 3), (3, 4)]),
    "stray_dot": ("i.j", [(2, 3)]),
    "two_ellipses": ("......", [(2, 3)]),
    "unknown_output": ("ij,jk->iK", [(2, 3), (3, 4)]),
    "repeated_output": ("ij,jk->ii", [(2, 3), (3, 4)]),
    "too_many_operands": ("ij->j", [(2, 3), (2, 3)]),
    "too_few_operands": ("ij,jk->ik", [(2, 3)]),
    "dot_in_output": ("ij->.", [(2, 3)]),
    "mixed_dtypes": ("i,i->", [(3,), "f64"]),
    "bool": ("i,i->", ["bool", "bool"]),
}


def _error_operands(specs):
    out = []
    for s in specs:
        if s == "f64":
            out.append(torch.ones(3, dtype=torch.float64))
        elif s == "bool":
            out.append(torch.ones(3, dtype=torch.bool))
        else:
            out.append(torch.randn(s))
    return out


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_errors_as_eager(name):
    eq, specs = ERRORS[name]
    ops = _error_operands(specs)

    def g1(a):
        return torch.einsum(eq, a) + 1

    def g2(a, b):
        return torch.einsum(eq, a, b) + 1

    g = g1 if len(ops) == 1 else g2
    with pytest.raises(Exception) as eager:
        g(*ops)
    cg = framejit.compile(g)
    for _ in range(2):  # the trace, then the call after it
        with pytest.raises(Exception) as compiled:
            cg(*ops)
        assert type(compiled.value) is type(eager.value)
        assert str(compiled.value) == str(eager.value)


def test_keyword_arguments_raise_as_eager():
    def f(a):
        return torch.einsum(equation="ij->j", operands=[a])

    a = torch.randn(2, 3)
    with pytest.raises(TypeError) as eager:
        f(a)
    with pytest.raises(TypeError) as compiled:
        framejit.compile(f)(a)
    assert str(compiled.value) == str(eager.value)


def test_graph_break_keeps_the_rest_compiled():
    def f(a):
        b = a * 2
        c = torch.einsum("ii->i", b)  # not lowered: eager's call between two graphs
        return c + 1

    a = torch.randn(4, 4)
    cf = framejit.compile(f)
    assert_same(cf(a), f(a))
    assert_same(cf(a), f(a))
    s = framejit.stats(f)
    assert s["graph_breaks"] == 1 and s["fallbacks"] == 0 and s["graphs"] == 2, s


def test_equation_argument_is_guarded():
    def f(eq, a, b):
        return torch.einsum(eq, a, b)

    cf = framejit.compile(f)
    a, b = torch.randn(3, 3), torch.randn(3, 3)
    for eq in ("ij,jk->ik", "ij,jk->ki", "ij,kj->ik", "ij,jk->ik"):
        assert_same(cf(eq, a, b), f(eq, a, b))
    s = framejit.stats(f)
    assert s["compiles"] == 3 and s["cache_hits"] == 1 and s["fallbacks"] == 0, s


def test_sizes_that_stop_matching_raise_as_eager():
    def f(a, b):
        return torch.einsum("ij,jk->ik", a, b)

    cf = framejit.compile(f)
    a, b = torch.randn(3, 4), torch.randn(4, 5)
    assert_same(cf(a, b), f(a, b))
    a, b = torch.randn(3, 4), torch.randn(6, 5)
    with pytest.raises(RuntimeError) as eager:
        f(a, b)
    with pytest.raises(RuntimeError) as compiled:
        cf(a, b)
    assert str(compiled.value) == str(eager.value)
