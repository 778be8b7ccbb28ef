"""Op families the fuzzer draws from, held as data.

An OpSpec is a source template and the kinds of its arguments; the generator fills
the arguments with variables, literals or nested expressions, evaluates the result
on sample inputs to learn its dtype and shape, and drops candidates that eager
rejects for the sample (most of the time: some stay, so errors are compared too).
Nothing here describes dtypes or shapes: eager torch is the oracle.

To add a family (reductions, views, matmul, ...): write a list of OpSpecs, e.g.
    REDUCTIONS = [OpSpec("sum_dim", "torch.sum({0}, dim={d})", "T", family="reduction"), ...]
and add it to FAMILIES below. Placeholders: {0}, {1}, ... are the arguments in
order; {d} is a dim valid for the first argument's rank, {k} a small int literal.
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

FAMILIES = {
    "pointwise": POINTWISE,
    "compare": COMPARISONS,
    "cast": CASTS,
    "scalar": SCALAR,
}
