"""framejit's Python API: compile, stats, reset, explain, config."""

import copyreg
import functools
import sys
import types
from dataclasses import dataclass, field

import torch

from framejit import _C

GraphBreakError = _C.GraphBreakError


def compile(fn=None, *, fullgraph=False, dynamic=True):
    """Returns a wrapper of `fn` whose calls run through framejit.

    Usable as `framejit.compile(fn)`, `@framejit.compile` or
    `@framejit.compile(fullgraph=...)`. Calling `fn` itself stays untouched.
    `dynamic=True` (the default) makes tensor sizes symbols from the first call
    (except sizes 0 and 1), so new sizes do not recompile; `dynamic=False` keeps
    shapes static. With `fullgraph=True` a call that framejit cannot compile whole
    raises framejit.GraphBreakError naming the reason and the source line; by
    default such a call runs in CPython (a fallback, counted and explained).
    """
    if fn is None:
        return functools.partial(compile, fullgraph=fullgraph, dynamic=dynamic)
    options = {"dynamic": bool(dynamic), "fullgraph": bool(fullgraph)}
    if isinstance(fn, types.MethodType):
        return types.MethodType(compile(fn.__func__, **options), fn.__self__)
    if isinstance(fn, torch.nn.Module):
        return CompiledModule(fn, **options)
    if type(fn) is functools.partial:
        return functools.partial(compile(fn.func, **options), *fn.args, **fn.keywords)
    if isinstance(fn, types.FunctionType):
        wrapper = _C.compile(fn, **options)
        functools.update_wrapper(wrapper, fn)
    elif callable(fn):
        # A builtin, a class, a callable object: framejit compiles a call of it (a
        # class's __init__, torch.add's op, an object's __call__ are traced from there).
        call = _caller(fn)
        wrapper = _C.compile(call, **options)
        functools.update_wrapper(wrapper, fn, updated=())
        wrapper.__wrapped__ = call  # stats(), explain() and fallbacks() read its code
        wrapper._framejit_target = fn
    else:
        raise TypeError(f"framejit.compile expects a callable, got {type(fn).__name__}")
    wrapper._framejit_options = options
    return wrapper


def _caller(target):
    """A function that calls target, with a code object of its own (its cache entries
    and counters are target's alone)."""
    def call(*args, **kwargs):
        return target(*args, **kwargs)

    name = getattr(target, "__qualname__", None) or type(target).__qualname__
    call.__code__ = call.__code__.replace(co_name="call", co_qualname=f"framejit.compile({name})")
    return call


# Pickling (multiprocessing, torch.multiprocessing, copy): a compiled function is
# a reference to its original function plus its compile options, and unpickles to
# a compiled function again. Under fork the new wrapper watches the same code
# object, so it finds what the parent compiled; under spawn the worker compiles
# anew. A compiled function that is itself its module's attribute (`@framejit.compile`
# on a module-level function or method) pickles as that name, as functions do: the
# original function is not reachable by name then, and the name gives the same
# compiled object back.

def _resolve(module_name, qualname):
    obj = sys.modules.get(module_name)
    for part in qualname.split("."):
        obj = getattr(obj, part, None)
    return obj


def _reduce_compiled(wrapper):
    fn = getattr(wrapper, "_framejit_target", None) or wrapper.__wrapped__
    if _resolve(getattr(wrapper, "__module__", None), getattr(wrapper, "__qualname__", "")) is wrapper:
        return wrapper.__qualname__  # pickle stores a global reference, as for a function
    options = getattr(wrapper, "_framejit_options", {})
    return _rebuild_compiled, (fn, options)


def _rebuild_compiled(fn, options):
    return compile(fn, **options)


copyreg.pickle(_C.CompiledFunction, _reduce_compiled)


class CompiledModule(torch.nn.Module):
    """What framejit.compile(module) returns: a module whose forward runs the original's
    forward through framejit. It holds the original as a submodule, so parameters,
    buffers and state are shared (state_dict keys gain the prefix `_orig_mod.`, as with
    torch.compile). A module with hooks runs its __call__ eagerly, hooks included."""

    def __init__(self, module, *, dynamic=True, fullgraph=False):
        super().__init__()
        self._orig_mod = module
        self.__dict__["_framejit_options"] = {"dynamic": dynamic, "fullgraph": fullgraph}
        self.__dict__["_compiled_forward"] = types.MethodType(
            compile(type(module).forward, dynamic=dynamic, fullgraph=fullgraph), module)

    def __call__(self, *args, **kwargs):
        # Invisible to hooks: the original module's own call fires them, global ones
        # included, once (as without framejit); hooks put on this wrapper fire as usual.
        if self._forward_hooks or self._forward_pre_hooks or self._backward_hooks or self._backward_pre_hooks:
            return super().__call__(*args, **kwargs)
        return self.forward(*args, **kwargs)

    def forward(self, *args, **kwargs):
        m = self._orig_mod
        mm = torch.nn.modules.module
        # Hooks, or a class's own __call__: the module's call runs them as eager does.
        if (m._forward_hooks or m._forward_pre_hooks or m._backward_hooks or m._backward_pre_hooks
                or mm._global_forward_hooks or mm._global_forward_pre_hooks or mm._global_backward_hooks
                or mm._global_backward_pre_hooks or type(m).__call__ is not torch.nn.Module.__call__):
            return m(*args, **kwargs)
        return self._compiled_forward(*args, **kwargs)

    def __reduce__(self):
        """Pickles as the original module plus the compile options, and unpickles to a
        compiled module again (over the unpickled module: torch.save / torch.load,
        copy.deepcopy and process pools give a CompiledModule, as framejit.compile
        made it). To store the plain module, pickle `compiled._orig_mod`."""
        return CompiledModule._rebuild, (self._orig_mod, self.__dict__["_framejit_options"])

    @staticmethod
    def _rebuild(module, options):
        return CompiledModule(module, **options)

    def __getattr__(self, name):
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(self._orig_mod, name)


def stats(fn=None):
    """Counters: calls, compiles, recompiles, cache_hits, graph_breaks, fallbacks,
    graphs, deopts (calls whose plan handed the rest of the frame to CPython midway:
    an opaque call's result no longer matching the trace, a branch outcome that could
    not be traced; logged under FRAMEJIT_LOG=recompiles), and the give-up states
    stopped_compiling (framejit traces no new entries for calls like those that fell
    back the same way again and again, or for any call past cache_limit: calls that
    match a cached entry still run compiled, those others run in CPython and count as
    fallbacks) and skipped (the same with nothing compiled: those calls run in CPython).
    "Like" means the same argument types (tensors: dtype, device kind, grad flag).

    With `fn`, those of fn's code object (the states are 0 or 1); without, the sums
    over all code (the states count code objects). A function called from compiled
    code whose trace broke inside it is compiled on its own from then on (when it runs
    inside compiled code); its calls that run in CPython are that caller's graph
    break and do not count as its fallbacks again.
    """
    return _C.stats(fn)


def reset():
    """Drops every cache entry and counter."""
    _C.reset()


def fallbacks(fn):
    """The recent reasons (reason, 'file:line') why calls of fn ran in CPython."""
    return [GraphBreak(r, loc) for r, loc in _C.fallbacks(fn)]


@dataclass
class GraphBreak:
    reason: str
    location: str


@dataclass
class ExplainOutput:
    graphs: list = field(default_factory=list)
    ops: list = field(default_factory=list)
    guards: list = field(default_factory=list)
    graph_breaks: list = field(default_factory=list)
    result: object = None
    recompile_reasons: list = field(default_factory=list)
    # Whether framejit still compiles new entries for fn: "compiling", "stopped
    # compiling: ..." (cached entries still run) or "skipped: ..." (all in CPython).
    status: str = "compiling"

    @property
    def graph_count(self):
        return len(self.graphs)

    def __str__(self):
        lines = [f"graphs: {self.graph_count}", f"status: {self.status}"]
        for i, g in enumerate(self.graphs):
            lines.append(f"--- graph {i} ---")
            lines.append(g.rstrip())
        lines.append(f"ops: {', '.join(self.ops) or '(none)'}")
        lines.append("guards:")
        lines.extend(f"  {g}" for g in self.guards)
        if self.recompile_reasons:
            lines.append("recompiles:")
            lines.extend(f"  {r}" for r in self.recompile_reasons)
        if self.graph_breaks:
            lines.append("fallbacks / graph breaks:")
            lines.extend(f"  {b.reason} ({b.location})" for b in self.graph_breaks)
        return "\n".join(lines)


def explain(fn, *args, **kwargs):
    """Traces fn on these arguments (a fresh trace, not cached) and tells what
    framejit made of it: the graphs, their ops, the guards, and why any part ran
    in CPython; `.recompile_reasons` lists the reasons of fn's recompiles so far.
    The call itself runs, and its result is in `.result`."""
    if isinstance(fn, types.MethodType):
        fn, args = fn.__func__, (fn.__self__,) + args
    result, info = _C.explain(fn, args, kwargs)
    target = getattr(fn, "__wrapped__", fn)
    reasons, status = [], "compiling"
    if isinstance(target, types.FunctionType):
        records = [r for r in _C.watched()
                   if r["qualname"] == target.__code__.co_qualname
                   and r["filename"] == target.__code__.co_filename and r["line"] == target.__code__.co_firstlineno]
        if records:
            reasons, status = records[0]["recompile_reasons"], _status(records[0])
    return ExplainOutput(
        status=status,
        recompile_reasons=list(reasons),
        graphs=info["graphs"],
        ops=info["ops"],
        guards=info["guards"],
        graph_breaks=[GraphBreak(r, loc) for r, loc in info["breaks"]],
        result=result,
    )


def _status(record):
    """What framejit does with new calls of a watched function (see ExplainOutput.status)."""
    why = record["fallback_reasons"][-1][0] if record["fallback_reasons"] else "?"
    if record["skipped"]:
        return f"skipped: calls like those that fell back run in CPython (fallback_limit identical fallbacks: {why})"
    if record["stopped_compiling"]:
        return (f"stopped compiling: calls that match one of its {record['entries']} cached entries "
                f"run compiled, others like those that fell back run in CPython ({why})")
    return "compiling"


def ptx(fn, *example_args, arch="sm_90"):
    """The PTX of fn's kernels for the CUDA architecture `arch` (sm_80, sm_90, ...),
    as one str; no GPU is needed. fn is traced (fresh, not cached) on the example
    arguments, which are CPU tensors and Python numbers; sizes stay symbolic as in
    framejit.compile, so the kernels take the actual sizes at run time. Raises
    ValueError when the trace yields no graph or the CUDA backend cannot lower one
    of its ops (float64 transcendental functions, float remainder)."""
    if isinstance(fn, types.MethodType):
        fn, example_args = fn.__func__, (fn.__self__,) + example_args
    return _C.ptx(fn, example_args, {}, str(arch))


class _Config:
    """framejit.config: cache_limit (entries per code object; calls that match none
    of them run in CPython), fallback_limit (identical fallbacks in a row, for calls
    with the same argument types, before framejit stops tracing such calls of a
    function: they run in CPython, its cached entries stay in use, and calls with
    other argument types are still traced)."""

    __slots__ = ()

    def __getattr__(self, name):
        values = _C.get_config()
        if name not in values:
            raise AttributeError(f"framejit.config has no setting '{name}'")
        return values[name]

    def __setattr__(self, name, value):
        _C.set_config(name, int(value))

    def __repr__(self):
        return f"framejit.config({_C.get_config()})"


config = _Config()
