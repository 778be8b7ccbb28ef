"""Op families the fuzzer draws from, held as data.

An OpSpec is a source template and the kinds of its arguments; the generator fills
the arguments with variables, literals or nested expressions, evaluates the result
on sample inputs to learn its dtype and shape, and drops candidates that eager
rejects for the sample (most of the time: some stay, so errors are compared too).
Nothing here describes dtypes or shapes: eager torch is the oracle.

To add a family (reductions, views, matmul, ...): write a list of OpSpecs, e.g.
    REDUCTIONS = [OpSpec("sum_dim", "torch.sum({0}, dim={d})", "T", family="reduction"), ...]
and add it to FAMILIES below. Placeholders: {0}, {1}, ... are the arguments in
order; {d} and {d2} are dims valid for the first argument's rank (drawn apart), {u} a
dim valid for unsqueeze, {perm} a permutation of the first argument's dims (as
arguments), {k} a small int literal.
Argument kinds, one letter each:
    T  a tensor (variable or expression)
    N  a Python number (scalar variable, literal, or expression of them)
    X  either of the above
    M  a bool tensor (a mask; usually a comparison)
"""
from dataclasses import dataclass


@dataclass(frozen=True)
class OpSpec:
    name: str
    template: str
    args: str             # argument kinds, see above
    family: str = "pointwise"
    weight: float = 1.0
    result: str = "T"     # "T" tensor, "N" Python number


def _binary(name, fn, op=None, weight=1.0):
    specs = [OpSpec(name, f"{fn}({{0}}, {{1}})", "TX", weight=weight)]
    if op:
        specs.append(OpSpec(name + "_op", f"({{0}} {op} {{1}})", "TX", weight=weight))
        specs.append(OpSpec(name + "_rop", f"({{0}} {op} {{1}})", "NT", weight=weight / 2))
    return specs


def _unary(name, fn, weight=1.0):
    return [OpSpec(name, f"{fn}({{0}})", "T", weight=weight)]


POINTWISE = (
    _binary("add", "torch.add", "+", 3) + _binary("sub", "torch.sub", "-", 2) + _binary("mul", "torch.mul", "*", 3)
    + _binary("div", "torch.div", "/") + _binary("floor_divide", "torch.floor_divide", "//", 0.5)
    + _binary("remainder", "torch.remainder", "%", 0.5) + _binary("pow", "torch.pow", "**", 0.5)
    + _binary("maximum", "torch.maximum") + _binary("minimum", "torch.minimum")
    + _binary("bitwise_and", "torch.bitwise_and", "&", 0.3) + _binary("bitwise_or", "torch.bitwise_or", "|", 0.3)
    + _binary("bitwise_xor", "torch.bitwise_xor", "^", 0.3)
    + [OpSpec("logical_and", "torch.logical_and({0}, {1})", "TT", weight=0.3),
       OpSpec("logical_or", "torch.logical_or({0}, {1})", "TT", weight=0.3),
       OpSpec("logical_not", "torch.logical_not({0})", "T", weight=0.3)]
    + [u for n in ("neg", "abs", "exp", "log", "sqrt", "sin", "cos", "tanh", "sigmoid", "relu", "sign", "erf",
                   "expm1", "log1p", "rsqrt", "reciprocal", "floor", "ceil", "round", "trunc", "isnan", "isinf")
       for u in _unary(n, "torch." + n, 0.5)]
    + [OpSpec("neg_op", "(-{0})", "T"), OpSpec("abs_builtin", "abs({0})", "T", weight=0.3),
       OpSpec("bitwise_not", "(~{0})", "T", weight=0.2),
       OpSpec("gelu", "torch.nn.functional.gelu({0})", "T", weight=0.3),
       OpSpec("silu", "torch.nn.functional.silu({0})", "T", weight=0.3),
       OpSpec("softplus", "torch.nn.functional.softplus({0})", "T", weight=0.3),
       OpSpec("where", "torch.where({0}, {1}, {2})", "MTX", weight=1.5),
       OpSpec("masked_fill", "{0}.masked_fill({1}, {2})", "TMN", weight=0.5),
       OpSpec("clamp", "torch.clamp({0}, {1}, {2})", "TNN", weight=0.5),
       OpSpec("clamp_min", "{0}.clamp(min={1})", "TN", weight=0.3),
       OpSpec("nan_to_num", "torch.nan_to_num({0})", "T", weight=0.3)]
)

COMPARISONS = [OpSpec(n, f"({{0}} {op} {{1}})", "TX", family="compare")
               for n, op in (("lt", "<"), ("le", "<="), ("gt", ">"), ("ge", ">="), ("eq", "=="), ("ne", "!="))]

CASTS = [OpSpec(n, f"{{0}}.{n}()", "T", family="cast", weight=0.4) for n in ("float", "double", "long", "int", "bool")] + [
    OpSpec(f"to_{d}", f"{{0}}.to(torch.{d})", "T", family="cast", weight=0.3)
    for d in ("float32", "float64", "int32", "int64", "bool")]

SCALAR = [OpSpec(n, t, a, family="scalar", result="N") for n, t, a in (
    ("sadd", "({0} + {1})", "NN"), ("ssub", "({0} - {1})", "NN"), ("smul", "({0} * {1})", "NN"),
    ("sdiv", "({0} / 2)", "N"), ("sneg", "(-{0})", "N"), ("sfloordiv", "({0} // 3)", "N"))]

def _reduction(name, fn, weight=1.0, whole=True):
    """fn over the whole tensor (as a function and a method), and over one dim with
    and without keepdim."""
    specs = [OpSpec(name + "_dim", f"torch.{fn}({{0}}, dim={{d}})", "T", family="reduction", weight=weight),
             OpSpec(name + "_keepdim", f"{{0}}.{fn}(dim={{d}}, keepdim=True)", "T", family="reduction", weight=weight),
             OpSpec(name + "_pos", f"torch.{fn}({{0}}, {{d}}, True)", "T", family="reduction", weight=weight / 3)]
    if whole:
        specs += [OpSpec(name, f"torch.{fn}({{0}})", "T", family="reduction", weight=weight / 2),
                  OpSpec(name + "_method", f"{{0}}.{fn}()", "T", family="reduction", weight=weight / 2)]
    return specs


REDUCTIONS = (
    _reduction("sum", "sum", 2) + _reduction("mean", "mean", 1.5) + _reduction("amax", "amax", 1, whole=False)
    + _reduction("amin", "amin", 0.5, whole=False) + _reduction("argmax", "argmax") + _reduction("argmin", "argmin", 0.5)
    + _reduction("var", "var") + _reduction("prod", "prod", 0.3, whole=False)
    + [OpSpec("amax_all", "torch.amax({0})", "T", family="reduction", weight=0.5),
       OpSpec("var_biased", "{0}.var(dim={d}, unbiased=False)", "T", family="reduction", weight=0.5),
       OpSpec("var_correction", "torch.var({0}, dim={d}, correction=0, keepdim=True)", "T", family="reduction", weight=0.5),
       OpSpec("std_dim", "{0}.std(dim={d})", "T", family="reduction", weight=0.3),
       OpSpec("max_dim_values", "torch.max({0}, dim={d}).values", "T", family="reduction", weight=0.5),
       OpSpec("min_dim_indices", "{0}.min(dim={d}, keepdim=True)[1]", "T", family="reduction", weight=0.3),
       OpSpec("any_dim", "({0} > 0).any(dim={d})", "T", family="reduction", weight=0.3),
       OpSpec("all", "torch.all({0})", "T", family="reduction", weight=0.3),
       OpSpec("softmax", "torch.softmax({0}, dim={d})", "T", family="reduction", weight=0.5),
       OpSpec("logsumexp", "torch.logsumexp({0}, dim={d})", "T", family="reduction", weight=0.3)]
)

VIEWS = [OpSpec(n, t, a, family="view", weight=w) for n, t, a, w in (
    ("permute", "{0}.permute({perm})", "T", 1.5),
    ("permute_fn", "torch.permute({0}, ({perm}))", "T", 0.5),
    ("transpose", "{0}.transpose({d}, {d2})", "T", 1.5),
    ("transpose_fn", "torch.transpose({0}, {d}, {d2})", "T", 0.5),
    ("t", "{0}.t()", "T", 0.5),
    ("mT", "{0}.mT", "T", 0.3),
    ("reshape_flat", "{0}.reshape(-1)", "T", 1),
    ("reshape_2d", "{0}.reshape(-1, 1)", "T", 0.5),
    ("reshape_fn", "torch.reshape({0}, (1, -1))", "T", 0.5),
    ("view_flat", "{0}.view(-1)", "T", 0.5),
    ("flatten", "{0}.flatten()", "T", 0.5),
    ("unsqueeze", "{0}.unsqueeze({u})", "T", 1),
    ("squeeze", "{0}.squeeze()", "T", 0.5),
    ("squeeze_dim", "{0}.squeeze({d})", "T", 0.5),
    ("slice_from", "{0}[{k}:]", "T", 1),
    ("slice_to", "{0}[:{k}]", "T", 0.5),
    ("slice_step", "{0}[::2]", "T", 0.5),
    ("slice_last", "{0}[..., 1:]", "T", 0.5),
    ("slice_2d", "{0}[:, :{k}]", "T", 0.5),
    ("select_0", "{0}[0]", "T", 1),
    ("select_last", "{0}[-1]", "T", 0.5),
    ("select_dim", "{0}.select({d}, 0)", "T", 0.5),
    ("select_2d", "{0}[:, -1]", "T", 0.5),
    ("narrow", "{0}.narrow({d}, 0, 1)", "T", 0.3),
    ("expand_as", "{0}.expand_as({1})", "TT", 1),
    ("expand_lead", "{0}.expand(2, *{0}.shape)", "T", 0.3),
    ("cat_self", "torch.cat([{0}, {0}], dim={d})", "T", 1),
    ("cat_two", "torch.cat([{0}, {1}], {d})", "TT", 0.7),
    ("cat_tuple", "torch.cat(({0}, {1}))", "TT", 0.3),
    ("stack", "torch.stack([{0}, {0}])", "T", 0.5),
    ("flip", "{0}.flip({d})", "T", 0.3),
    ("contiguous_t", "{0}.t().contiguous()", "T", 0.3),
)]

# A product of a tensor with its own transpose is symmetric: eager's BLAS may make the
# mirrored entries bit-equal where framejit's rounds them apart, and an argmin over such
# a tie then differs by design. The second operand is shifted to break the symmetry.
MATMUL = [OpSpec(n, t, a, family="matmul", weight=w) for n, t, a, w in (
    ("matmul_op", "({0} @ {1})", "TT", 1.5),
    ("matmul", "torch.matmul({0}, {1})", "TT", 1),
    ("matmul_self", "({0} @ ({0}.mT * 0.5 + 1))", "T", 1),
    ("matmul_self_t", "torch.matmul({0}.mT, {0} + 1)", "T", 0.7),
    ("mm", "torch.mm({0}, {1})", "TT", 0.5),
    ("mm_t", "{0}.mm({0}.t() - 1)", "T", 0.5),
    ("matvec", "({0} @ ({0}[0] + 0.5))", "T", 0.5),
)]

# Python numbers read from tensors: int(), float(), bool(), .item() of one-element
# tensors (data-dependent scalars in the graph).
ITEMS = [OpSpec(n, t, a, family="item", result="N", weight=w) for n, t, a, w in (
    ("int_sum", "int({0}.sum())", "T", 1),
    ("float_sum", "float({0}.sum())", "T", 1),
    ("item_sum", "{0}.sum().item()", "T", 1),
    ("float_mean", "float({0}.mean())", "T", 0.7),
    ("float_amax", "float({0}.amax())", "T", 0.5),
    ("int_argmax", "int({0}.argmax())", "T", 0.5),
    ("item_first", "{0}.flatten()[0].item()", "T", 0.5),
    ("bool_any", "bool(({0} > 0).any())", "T", 0.5),
    ("float_0d", "float({0}[0, 0])", "T", 0.3),
)]

# Torch functions framejit does not lower: each is an extern call, a graph node that
# calls torch at run time (interp/torch/extern_ops.cpp), some with several results.
EXTERN = [OpSpec(n, t, a, family="extern", weight=w) for n, t, a, w in (
    ("cumprod", "torch.cumprod({0}, {d})", "T", 1),
    ("logcumsumexp", "torch.logcumsumexp({0}, {d})", "T", 0.5),
    ("atan2", "torch.atan2({0}, {1})", "TT", 1),
    ("fmod", "torch.fmod({0}, 1.5)", "T", 0.5),
    ("hypot", "torch.hypot({0}, {1})", "TT", 0.5),
    ("roll", "torch.roll({0}, 1, {d})", "T", 0.7),
    ("diff", "torch.diff({0}, dim={d})", "T", 0.5),
    ("lerp", "torch.lerp({0}, {1}, 0.25)", "TT", 0.5),
    ("addcmul", "torch.addcmul({0}, {0}, {1}, value=0.5)", "TT", 0.5),
    ("xlogy", "torch.xlogy({0}, {1})", "TT", 0.3),
    ("hardtanh", "torch.nn.functional.hardtanh({0})", "T", 0.5),
    ("elu", "torch.nn.functional.elu({0})", "T", 0.5),
    ("leaky_relu", "torch.nn.functional.leaky_relu({0}, 0.1)", "T", 0.5),
    ("sort_values", "torch.sort({0}, {d}).values", "T", 0.7),
    ("sort_indices", "torch.sort({0}, dim={d}, descending=True)[1]", "T", 0.5),
    ("topk", "torch.topk({0}, 1, dim={d}).values", "T", 0.5),
    ("cummax", "torch.cummax({0}, {d}).values", "T", 0.5),
    ("repeat", "{0}.repeat(2, *([1] * ({0}.dim() - 1)))", "T", 0.3),
)]

# An op framejit cannot trace: a graph break where it is in the root frame, and an
# opaque helper call where it is in a helper.
BREAKS = [OpSpec("numpy_roundtrip", "torch.from_numpy({0}.numpy().copy())", "T", family="break", weight=0.5),
          # breaks on the ndarray a break returned; NumPy raises ValueError for an odd size
          OpSpec("numpy_pairs", "torch.from_numpy({0}.numpy().copy().reshape(-1, 2))", "T", family="break", weight=0.3)]

FAMILIES = {
    "pointwise": POINTWISE,
    "compare": COMPARISONS,
    "cast": CASTS,
    "scalar": SCALAR,
    "reduction": REDUCTIONS,
    "view": VIEWS,
    "matmul": MATMUL,
    "item": ITEMS,
    "extern": EXTERN,
    "break": BREAKS,
}
