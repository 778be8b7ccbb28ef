"""Functions: nested defs with defaults, closures, lambdas, *args/**kwargs, keyword-only
arguments, functools.partial/reduce/wraps/lru_cache, recursion, generator functions,
function attributes."""
import functools

import torch

from corpus.registry import call, case, const, randn


def _scale(x, factor=2.0, *, bias=0.0):
    return x * factor + bias


def _sum_all(*ts):
    total = ts[0]
    for t in ts[1:]:
        total = total + t
    return total


def _apply(fn, *args, **kwargs):
    return fn(*args, **kwargs)


@functools.lru_cache(maxsize=None)
def _fib(n):
    return n if n < 2 else _fib(n - 1) + _fib(n - 2)


@functools.lru_cache(maxsize=8)
def _window(n):
    return tuple(range(n))


def _logged(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs) + 1
    return wrapper


@_logged
def _double(x):
    """Doubles x."""
    return x * 2


def _countdown(n):
    while n > 0:
        yield n
        n -= 1


def _pairs(xs):
    for i in range(len(xs) - 1):
        yield xs[i], xs[i + 1]


def _depth(n):
    return 0 if n == 0 else 1 + _depth(n - 1)


def _power(x, k):
    if k == 0:
        return torch.ones_like(x)
    return x * _power(x, k - 1)


def _tagged(x):
    return x * _tagged.factor


_tagged.factor = 3


@case((randn(3), 2.0), (randn(4), 0.5))
def nested_def_with_default(x, s):
    def f(t, k=3):
        return t * k + s
    return f(x) + f(x, 1)


@case((randn(3), 2), (randn(3), 5))
def closure_reads_outer(x, n):
    def add_n(t):
        return t + n
    return add_n(x) * add_n(x)


@case((randn(3), 1.5), (randn(5), -1.0))
def returns_closure(x, w):
    def make(k):
        def g(t):
            return t * k
        return g
    g = make(w)
    return g(x), g(x * 2)


@case((randn(3),), (randn(4),))
def closure_returned_to_caller(x):
    scale = x.shape[0]

    def apply(t):
        return t * scale
    return apply(x), apply


@case((randn(3), 3), (randn(3), 5))
def lambda_local(x, n):
    sq = lambda t: t * t  # noqa: E731
    add = lambda t, k=n: t + k  # noqa: E731
    return add(sq(x))


@case((randn(3), randn(3), randn(3)), (randn(2), randn(2), randn(2)))
def lambda_in_sorted_key(a, b, c):
    ranked = sorted([(2, a), (0, b), (1, c)], key=lambda p: p[0])
    return torch.stack([t for _, t in ranked])


@case((randn(3),), (randn(6),))
def lambda_in_map(x):
    return list(map(lambda t: t * 2, [x, x + 1]))


@case((randn(3), randn(3)), (randn(5), randn(5)))
def star_args_helper(x, y):
    return _sum_all(x, y, x * y)


@case((randn(3), 2.0), (randn(3), 0.5))
def call_with_star_and_double_star(x, f):
    args = (x,)
    kw = {"factor": f, "bias": 1.0}
    return _scale(*args, **kw)


@case((randn(3), 2.0), (randn(3), 3.0))
def keyword_only_argument(x, b):
    return _scale(x, bias=b), _scale(x, 0.5, bias=-b)


@case((randn(3),), (randn(4),))
def forwarding_kwargs(x):
    return _apply(_scale, x, factor=3.0, bias=2.0)


@case((randn(3), 1.0), (randn(3), 2.0))
def kwargs_collected(x, a):
    def f(t, **opts):
        y = t
        for k in sorted(opts):
            y = y * opts[k]
        return y, sorted(opts)
    return f(x, alpha=a, beta=a + 1)


@case(call(randn(3), scale=2.0), call(randn(3), scale=0.5, shift=1.0))
def keyword_only_parameters(x, *, scale, shift=0.0):
    return x * scale + shift


@case(call(randn(3), 1, 2, 3), call(randn(3)))
def varargs_parameters(x, *ks):
    for k in ks:
        x = x + k
    return x, len(ks)


@case(call(randn(3), a=1.0, b=2.0), call(randn(3), c=0.5))
def varkw_parameters(x, **kw):
    return {k: x * v for k, v in kw.items()}


@case((randn(3),), (randn(3), (1.0, 2.0)))
def default_mutable_read_only(x, ws=(0.5, 0.25)):
    return sum(x * w for w in ws)


_DEFAULT_DIMS = [0]


@case((randn(3, 4),), (randn(3, 4), [1]))
def default_list_argument_read(x, dims=_DEFAULT_DIMS):
    return x.sum(dims[0])


@case((randn(3), 2.0), (randn(4), -1.0))
def functools_partial_positional(x, s):
    f = functools.partial(_scale, factor=s)
    return f(x)


@case((randn(3), 2.0), (randn(4), -1.0))
def functools_partial_kwargs(x, b):
    f = functools.partial(_scale, bias=b)
    return f(x, 4.0), f(x, factor=0.5)


@case((randn(3),), (randn(5),))
def functools_partial_torch_function(x):
    s = functools.partial(torch.sum, dim=0)
    return s(x), s(x * 2, keepdim=True)


@case((randn(3), randn(3), randn(3)), (randn(4), randn(4), randn(4)))
def functools_reduce_tensors(a, b, c):
    return functools.reduce(lambda u, v: u * v, [a, b, c])


@case((randn(3), 4), (randn(3), 6))
def functools_reduce_ints_with_initial(x, n):
    total = functools.reduce(lambda u, v: u + v, range(n), 10)
    return x * total


@case((randn(3),), (randn(4),))
def wraps_decorated_helper(x):
    return _double(x), _double.__name__, _double.__doc__


@case((randn(3), 5), (randn(3), 8))
def lru_cache_helper(x, n):
    return x * _fib(n)


@case((randn(3), 3), (randn(3), 5))
def lru_cache_tuple_result(x, n):
    return x * len(_window(n)), _window(n)


@case((randn(3), 3), (randn(3), 6))
def bounded_recursion_on_int(x, n):
    return x * _depth(n)


@case((randn(3), 2), (randn(3), 4))
def recursion_on_tensor(x, k):
    return _power(x, k)


@case((randn(3), 3), (randn(3), 5))
def generator_function_in_loop(x, n):
    y = x
    for k in _countdown(n):
        y = y + k
    return y


@case((randn(3), randn(3), randn(3)), (randn(2), randn(2), randn(2)))
def generator_yielding_pairs(a, b, c):
    out = []
    for u, v in _pairs([a, b, c]):
        out.append(u - v)
    return out


@case((randn(3), 4), (randn(3), 2))
def generator_into_list(x, n):
    return x * sum(list(_countdown(n)))


@case((randn(3), 3), (randn(3), 6))
def local_generator_function(x, n):
    def evens():
        for i in range(n):
            if i % 2 == 0:
                yield x * i
    return torch.stack(list(evens()))


@case((randn(3),), (randn(5),))
def function_attribute_read(x):
    return _tagged(x)


@case((randn(3), 2), (randn(3), 7))
def function_name_and_defaults(x, n):
    def f(a, b=2, c=3):
        return a
    return x * (n + len(f.__defaults__)), f.__name__


@case((randn(3), 1), (randn(3), 2))
def higher_order_function_argument(x, which):
    fns = [torch.relu, torch.sigmoid, torch.tanh]
    return _apply(fns[which], x)


@case((randn(3), const(torch.exp)), (randn(3), const(torch.neg)))
def function_passed_as_argument(x, fn):
    return fn(x) + 1


@case((randn(3), 3), (randn(3), 4))
def compose_functions(x, n):
    def compose(*fs):
        def run(t):
            for f in fs:
                t = f(t)
            return t
        return run
    pipeline = compose(torch.sin, lambda t: t * n, torch.abs)
    return pipeline(x)


@case((randn(3), 2), (randn(3), 3))
def closure_over_loop_variable(x, n):
    fs = [lambda t, i=i: t * i for i in range(n)]
    return [f(x) for f in fs]


@case((randn(3), 2.0), (randn(3), 4.0))
def decorator_defined_inside(x, s):
    def scaled(fn):
        def inner(t):
            return fn(t) * s
        return inner

    @scaled
    def act(t):
        return torch.relu(t)
    return act(x)


@case((randn(3),), (randn(4),))
def method_reference_of_builtin(x):
    parts = []
    push = parts.append
    push(x)
    push(x * 2)
    return torch.stack(parts)
