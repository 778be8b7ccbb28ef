"""A seeded generator of random Python functions over tensors and scalars.

generate(seed, index) -> Program, the same for the same (seed, index) on any machine.
A Program is data (parameters, statements, helpers, returned names, four input sets)
so that the shrinker can drop statements and the writer can print a standalone test.

Generation evaluates each candidate statement on the first input set (eager torch is
the oracle for dtypes, shapes and errors): a candidate that raises is usually
dropped, sometimes kept as the program's last statement so that errors get compared.
The ops come from tests/fuzz/ops.py (FAMILIES); control flow and calls are here:
if on flags, on sizes, on scalars and on tensor values (`(t > c).any()`); for over
range(); calls of helper functions, whose bodies may branch too.
"""
import math
import random
from dataclasses import dataclass, field

import torch

from ops import FAMILIES, OpSpec

DTYPES = ["float32", "float32", "float32", "float64", "int32", "int64", "bool"]
# Tensor parameters' shapes, in the program's size variables n and m: all of them
# broadcast together; ("n",) is the odd one out (it broadcasts only when n == m or
# n == 1), so some programs raise eager's size-mismatch error.
SHAPES = [("n", "m"), ("n", "m"), ("m",), ("m",), (), ("n", 1), (1, "m"), ("n",)]


@dataclass
class Param:
    name: str
    kind: str            # "tensor", "int", "float", "bool"
    dtype: str = ""      # tensors: a torch dtype name
    shape: tuple = ()    # tensors: dims, each "n", "m" or an int


@dataclass
class Stmt:
    """One statement: an assignment, or an if / for / try whose bodies are statements."""
    kind: str                       # "assign", "if", "for", "try" (orelse: the except body)
    target: str = ""                # assign: the name; for: the loop variable
    expr: str = ""                  # assign: the value; if: the condition; for: range()'s argument
    body: list = field(default_factory=list)
    orelse: list = field(default_factory=list)

    def lines(self, indent=1):
        pad = "    " * indent
        if self.kind == "assign":
            return [f"{pad}{self.target} = {self.expr}"]
        if self.kind == "for":
            head = [f"{pad}for {self.target} in range({self.expr}):"]
            return head + [ln for s in self.body for ln in s.lines(indent + 1)]
        if self.kind == "try":
            return ([f"{pad}try:"] + [ln for s in self.body for ln in s.lines(indent + 1)] +
                    [f"{pad}except {self.expr}:"] + [ln for s in self.orelse for ln in s.lines(indent + 1)])
        out = [f"{pad}if {self.expr}:"] + [ln for s in self.body for ln in s.lines(indent + 1)]
        if self.orelse:
            out += [f"{pad}else:"] + [ln for s in self.orelse for ln in s.lines(indent + 1)]
        return out


@dataclass
class Program:
    seed: int
    index: int
    params: list
    helpers: list                   # source of each helper function
    body: list                      # Stmts
    returns: list                   # names returned (a tuple when more than one)
    input_sets: list                # each a dict: "n", "m", and a value per scalar parameter
    tensor_seed: int = 0            # seeds the tensors' values of each input set
    return_shape: str = "tuple"     # "tuple" (or the one name), "list", "nested"

    @property
    def name(self):
        return f"fuzz_{self.seed}_{self.index}"

    def source(self):
        lines = ["import torch", ""]
        for h in self.helpers:
            lines += h.splitlines() + [""]
        lines.append(f"def {self.name}({', '.join(p.name for p in self.params)}):")
        for s in self.body:
            lines += s.lines()
        ret = ", ".join(self.returns) if self.returns else "None"
        if self.return_shape == "list" and self.returns:
            ret = f"[{', '.join(self.returns)}]"
        elif self.return_shape == "nested" and len(self.returns) > 1:
            ret = f"({self.returns[0]}, [{', '.join(self.returns[1:])}])"
        lines.append(f"    return {ret}")
        return "\n".join(lines) + "\n"

    def inputs(self, k):
        """The arguments of input set k, freshly made (callers may mutate them)."""
        s = self.input_sets[k]
        g = torch.Generator().manual_seed(self.tensor_seed * 10 + k)
        args = []
        for p in self.params:
            if p.kind == "tensor":
                shape = [s[d] if isinstance(d, str) else d for d in p.shape]
                args.append(make_tensor(shape, p.dtype, g))
            else:
                args.append(s[p.name])
        return args


def make_tensor(shape, dtype, g):
    if dtype == "bool":
        return torch.randint(0, 2, shape, generator=g).bool()
    if dtype in ("int32", "int64"):
        return torch.randint(-4, 9, shape, generator=g).to(getattr(torch, dtype))
    t = (torch.randn(shape, generator=g, dtype=torch.float64) * 2).to(getattr(torch, dtype))
    # Some exact zeros (division, log, pow), and rarely an inf or a NaN.
    r = torch.rand(shape, generator=g)
    t = torch.where(r < 0.08, torch.zeros((), dtype=t.dtype), t)
    t = torch.where(r > 0.995, torch.full((), math.inf, dtype=t.dtype), t)
    return t


INT_LITERALS = [2, 3, 5, 7, -1, -3, 0, 1]
FLOAT_LITERALS = [0.5, -1.5, 2.25, 3.0, 1e-3, -0.75, 0.0]


class Generator:
    def __init__(self, seed, index, families=None, max_stmts=8):
        self.rng = random.Random(f"framejit-fuzz:{seed}:{index}")
        self.seed, self.index = seed, index
        self.max_stmts = max_stmts
        fams = families or list(FAMILIES)
        self.specs = [s for f in fams for s in FAMILIES[f]]
        self.env = {}           # name -> sample value (input set 0)
        self.scope = {"torch": torch}
        self.counter = 0
        self.helpers = []
        self.ended = False      # a statement that raises was kept: nothing may follow

    # ---- names and samples ----

    def fresh(self, prefix="v"):
        self.counter += 1
        return f"{prefix}{self.counter}"

    def tensors(self, mask=None):
        return [k for k, v in self.env.items() if isinstance(v, torch.Tensor)
                and (mask is None or (v.dtype == torch.bool) == mask)]

    def numbers(self):
        """Names of Python numbers; bools only now and then (True + t is legal)."""
        bools = self.rng.random() < 0.15
        return [k for k, v in self.env.items() if type(v) in (int, float) or (bools and type(v) is bool)]

    def run(self, src, env):
        """Executes src in a copy of env; the new env, or the exception."""
        local = dict(env)
        try:
            exec(src, dict(self.scope), local)
        except Exception as e:  # noqa: BLE001
            return e
        return local

    # ---- expressions ----

    def literal(self):
        r = self.rng
        return repr(r.choice(INT_LITERALS)) if r.random() < 0.5 else repr(r.choice(FLOAT_LITERALS))

    def number(self, depth):
        r = self.rng
        names = self.numbers()
        x = r.random()
        sized = [k for k in self.tensors() if self.env[k].dim() > 0]
        if sized and x < 0.12:  # sizes are symbolic ints too
            t = r.choice(sized)
            d = r.randrange(self.env[t].dim())
            return r.choice([f"{t}.shape[{d}]", f"{t}.size({d})", f"len({t})", f"{t}.shape[-1]"])
        if names and x < 0.55:
            return r.choice(names)
        if depth > 0 and x < 0.7:
            return self.op_expr("N", depth - 1)
        return self.literal()

    def tensor(self, depth, mask=False):
        r = self.rng
        names = self.tensors(mask=True if mask else None)
        if mask:
            if names and r.random() < 0.4:
                return r.choice(names)
            return self.op_expr("M", max(depth - 1, 0))
        if not names or (depth > 0 and r.random() < 0.35):
            return self.op_expr("T", max(depth - 1, 0))
        return r.choice(names)

    def arg(self, kind, depth):
        if kind == "T":
            return self.tensor(depth)
        if kind == "M":
            return self.tensor(depth, mask=True)
        if kind == "N":
            return self.number(depth)
        return self.tensor(depth) if self.rng.random() < 0.6 else self.number(depth)

    def op_expr(self, want, depth):
        r = self.rng
        if want == "M":
            pool = [s for s in self.specs if s.family == "compare"]
        elif want == "N":
            pool = [s for s in self.specs if s.result == "N"]
        else:
            pool = [s for s in self.specs if s.result == "T" and s.family != "compare"] or \
                   [s for s in self.specs if s.result == "T"]
        if not pool:
            return self.literal() if want == "N" else r.choice(self.tensors() or ["None"])
        spec = r.choices(pool, weights=[s.weight for s in pool])[0]
        return self.fill(spec, depth)

    def fill(self, spec: OpSpec, depth):
        args = [self.arg(k, depth) for k in spec.args]
        extra = {}
        if any(p in spec.template for p in ("{d}", "{d2}", "{u}", "{perm}")):
            r = self.rng
            first = self.run(f"__r = ({args[0]}).dim()", self.env)
            true_rank = first["__r"] if isinstance(first, dict) else 1
            rank = max(true_rank, 1)  # a 0-d tensor takes dim 0 and -1
            extra["d"] = r.randrange(-rank, rank)
            others = [d for d in range(-rank, rank) if d % rank != extra["d"] % rank]
            extra["d2"] = r.choice(others) if others else extra["d"]
            extra["u"] = r.randrange(-true_rank - 1, true_rank + 1)
            perm = list(range(true_rank))
            r.shuffle(perm)
            extra["perm"] = ", ".join(str(p - true_rank if r.random() < 0.2 else p) for p in perm)
        if "{k}" in spec.template:
            extra["k"] = self.rng.choice([1, 2, 3])
        return spec.template.format(*args, **extra)

    # ---- statements ----

    def assign(self, depth=2):
        # An operation at the top: a bare copy of a name tests nothing.
        name = self.fresh()
        return Stmt("assign", name, self.op_expr("T" if self.rng.random() < 0.85 else "N", depth))

    def condition(self):
        r = self.rng
        flags = [k for k, v in self.env.items() if type(v) is bool]
        sized = [k for k in self.tensors() if self.env[k].dim() > 0]
        ints = [k for k, v in self.env.items() if type(v) is int]
        x = r.random()
        if flags and x < 0.35:
            f = r.choice(flags)
            return f if r.random() < 0.7 else f"not {f}"
        if sized and x < 0.75:
            t = r.choice(sized)
            d = r.randrange(self.env[t].dim())
            rhs = r.choice(ints) if ints and r.random() < 0.5 else str(r.choice([1, 2, 3, 4]))
            return f"{t}.shape[{d}] {r.choice(['<', '<=', '>', '==', '!='])} {rhs}"
        if x < 0.9 and (v := self.value_condition()):
            return v
        nums = self.numbers()
        if nums:
            return f"{r.choice(nums)} {r.choice(['<', '>', '>='])} {self.literal()}"
        return "True"

    def value_condition(self):
        """A branch on tensor values (a plan branch; in a helper, a data check), or None."""
        valued = [k for k in self.tensors() if self.env[k].dtype != torch.bool]
        if not valued:
            return None
        t = self.rng.choice(valued)
        return f"({t} {self.rng.choice(['<', '>', '>='])} {self.literal()}).{self.rng.choice(['any', 'all'])}()"

    def if_stmt(self):
        # Both branches assign the same fresh name, so later statements may use it.
        name = self.fresh()
        then = Stmt("assign", name, self.arg("T", 1))
        other = Stmt("assign", name, self.arg("T", 1))
        return Stmt("if", expr=self.condition(), body=[then], orelse=[other])

    def try_stmt(self):
        # What eager raises in the try body (a size mismatch, a break that raises) is
        # caught; both bodies assign the same fresh name.
        name = self.fresh()
        body = [Stmt("assign", name, self.arg("T", 1))]
        handler = [Stmt("assign", name, self.arg("T", 1))]
        return Stmt("try", expr=self.rng.choice(["Exception", "(RuntimeError, ValueError)"]), body=body, orelse=handler)

    def for_stmt(self):
        r = self.rng
        nums = [k for k, v in self.env.items() if type(v) in (int, float)]
        if nums and r.random() < 0.25:
            return self.scalar_loop(r.choice(nums))
        acc = r.choice(self.tensors())
        loop = self.fresh("i")
        ints = [k for k, v in self.env.items() if type(v) is int and -3 <= v <= 9]
        sized = [k for k in self.tensors() if self.env[k].dim() > 0]
        x = r.random()
        if ints and x < 0.35:
            bound = f"{r.choice(ints)} % 6"  # ints may be huge in later input sets
        elif sized and x < 0.6:
            bound = f"{r.choice(sized)}.shape[0]"
        else:
            bound = str(r.choice([1, 2, 3, 4]))
        self.env[loop] = 1  # visible to the body's generation as an int
        pool = [s for s in self.specs if s.args[:2] in ("TX", "TT", "TN") and s.result == "T" and s.family == "pointwise"]
        body = []
        for _ in range(r.choice([1, 1, 2])):
            spec = r.choice(pool)
            other = loop if spec.args[1] != "T" and r.random() < 0.5 else self.arg(spec.args[1], 1)
            if r.random() < 0.3 and spec.args[1] != "T":
                other = f"({loop} * {self.number(0)})"
            body.append(Stmt("assign", acc, spec.template.format(acc, other, *[self.arg(k, 0) for k in spec.args[2:]])))
        del self.env[loop]
        return Stmt("for", loop, bound, body=body)

    def scalar_loop(self, acc):
        """A Python number updated in a loop (symbolic arithmetic, unrolled)."""
        r = self.rng
        loop = self.fresh("i")
        self.env[loop] = 1
        other = r.choice([loop, f"({loop} * {self.number(0)})", self.number(0)])
        del self.env[loop]
        op = r.choice(["+", "-", "*"])
        return Stmt("for", loop, str(r.choice([1, 2, 3])), body=[Stmt("assign", acc, f"{acc} {op} {other}")])

    def helper_call(self):
        r = self.rng
        name = f"h{len(self.helpers)}_{self.seed}_{self.index}"
        actuals = [r.choice(self.tensors())] + ([self.number(0)] if r.random() < 0.6 else [r.choice(self.tensors())])
        # The helper's body is generated against the call's sample values.
        outer = self.env
        self.env = {"p": outer[actuals[0]] if actuals[0] in outer else None,
                    "q": self._sample(actuals[1], outer)}
        if self.env["q"] is None or self.env["p"] is None:
            self.env = outer
            return None
        body = []
        if r.random() < 0.35:  # a branch inside the helper, on its arguments' values or sizes
            body.append(self.if_stmt())
            if r.random() < 0.7 and (v := self.value_condition()):
                body[-1].expr = v
            step = self.run("\n".join(body[-1].lines(0)), self.env)
            if not isinstance(step, dict):
                self.env = outer
                return None
            self.env = step
        for _ in range(r.choice([1, 2])):
            body.append(self.assign(1))
            step = self.run("\n".join(body[-1].lines(0)), self.env)
            if not isinstance(step, dict):
                self.env = outer
                return None
            self.env = step
        ok_env = self.env
        self.env = outer
        if not isinstance(ok_env, dict):
            return None
        result = body[-1].target
        src = "\n".join([f"def {name}(p, q):"] + [ln for s in body for ln in s.lines(1)] + [f"    return {result}"])
        self.scope_add(src)
        self.helpers.append(src)
        call = f"{name}({actuals[0]}, q={actuals[1]})" if r.random() < 0.3 else f"{name}({', '.join(actuals)})"
        return Stmt("assign", self.fresh(), call)

    def _sample(self, expr, env):
        out = self.run(f"__v = {expr}", env)
        return out["__v"] if isinstance(out, dict) else None

    def scope_add(self, src):
        exec(src, self.scope)

    def statement(self):
        r = self.rng
        x = r.random()
        if x < 0.12 and any(type(v) is bool for v in self.env.values()) or (0.12 <= x < 0.2):
            return self.if_stmt()
        if x < 0.3 and self.tensors():
            return self.for_stmt()
        if x < 0.38 and self.tensors():
            return self.helper_call()
        if x < 0.43 and self.tensors():
            return self.try_stmt()
        return self.assign()

    # ---- the program ----

    def params_and_inputs(self):
        r = self.rng
        params = []
        for k in range(r.choice([1, 2, 2, 3])):
            params.append(Param(f"t{k}", "tensor", r.choice(DTYPES), r.choice(SHAPES)))
        for k in range(r.choice([0, 1, 1, 2])):
            params.append(Param(f"n{k}", "int"))
        for k in range(r.choice([0, 1, 1, 2])):
            params.append(Param(f"f{k}", "float"))
        if r.random() < 0.4:
            params.append(Param("b0", "bool"))
        sets = []
        for k in range(4):
            sizes = [2, 3, 4, 5] if k == 0 else [0, 1, 2, 2, 3, 4, 5, 6, 7]
            s = {"n": r.choice(sizes), "m": r.choice(sizes)}
            for p in params:
                # Now and then (never in the sample set) a value at the edges: ints past
                # int32 or near int64's end, infinities and NaN.
                edge = k > 0 and r.random() < 0.06
                if p.kind == "int":
                    s[p.name] = r.choice([2**31, -2**31 - 1, 2**40, 2**62, -2**63]) if edge else \
                        r.choice([-2, 0, 1, 2, 3, 4, 5, 7, 9])
                elif p.kind == "float":
                    s[p.name] = r.choice([math.inf, -math.inf, math.nan, 1e300]) if edge else \
                        r.choice([0.0, -0.0, 0.5, 2.0]) if r.random() < 0.2 else round(r.uniform(-3, 3), 3)
                elif p.kind == "bool":
                    s[p.name] = r.random() < 0.5
            sets.append(s)
        return params, sets

    def generate(self):
        params, sets = self.params_and_inputs()
        prog = Program(self.seed, self.index, params, self.helpers, [], [], sets,
                       tensor_seed=self.rng.randrange(2**31))
        for name, value in zip([p.name for p in params], prog.inputs(0)):
            self.env[name] = value
        for _ in range(self.rng.randint(2, self.max_stmts)):
            stmt = None
            for _attempt in range(6):
                cand = self.statement()
                if cand is None:
                    continue
                out = self.run("\n".join(cand.lines(0)), self.env)
                if isinstance(out, dict):
                    stmt = cand
                    self.env = {k: v for k, v in out.items() if not k.startswith("__")}
                    break
                if self.rng.random() < 0.04:  # keep an error now and then, as the end
                    stmt = cand
                    self.ended = True
                    break
            if stmt is not None:
                prog.body.append(stmt)
            if self.ended:
                break
        # Return what the last statements computed (loops update a name in place).
        locals_ = []
        for s in prog.body:
            name = s.body[0].target if s.kind in ("if", "for", "try") else s.target
            if name not in locals_:
                locals_.append(name)
        pool = locals_ or [p.name for p in params]
        k = min(len(pool), self.rng.choice([1, 1, 2, 3]))
        prog.return_shape = self.rng.choice(["tuple", "tuple", "tuple", "list", "nested"])
        prog.returns = sorted(set(self.rng.sample(pool[-4:], min(k, len(pool[-4:])))), key=pool.index)
        return prog


def generate(seed, index, families=None):
    return Generator(seed, index, families).generate()
