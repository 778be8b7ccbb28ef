"""framejit.hook / framejit.unhook: the functions of chosen modules are watched as
the modules are imported, and called as they are, with no wrapper. A meta-path
finder wraps the modules' loaders; never sys.setprofile or sys.settrace."""

import fnmatch
import importlib.abc
import importlib.machinery
import inspect
import sys
import types

from framejit import _C

_watched = []       # code objects watched directly, in order
_finder = None


def _function_codes(code):
    """The code objects of the functions defined in `code` (nested ones too), not
    `code` itself: a module's or class body's own code runs once and is not watched."""
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            if const.co_flags & inspect.CO_OPTIMIZED and not const.co_name.startswith("<"):
                yield const
            elif const.co_name == "<lambda>":
                yield const
            yield from _function_codes(const)


def watch_code_tree(code):
    """Watches every function defined in a module's (or script's) code object."""
    for c in _function_codes(code):
        _C.watch(c, True)
        _watched.append(c)


class _WatchingLoader(importlib.abc.Loader):
    def __init__(self, inner):
        self._inner = inner

    def create_module(self, spec):
        return self._inner.create_module(spec)

    def exec_module(self, module):
        get_code = getattr(self._inner, "get_code", None)
        code = get_code(module.__name__) if get_code else None
        if code is None:
            return self._inner.exec_module(module)
        watch_code_tree(code)
        exec(code, module.__dict__)

    def __getattr__(self, name):  # get_data, is_package, get_source, ...
        return getattr(self._inner, name)


def _is_pattern(name):
    return any(c in name for c in "*?[")


class _Finder(importlib.abc.MetaPathFinder):
    def __init__(self, names):
        self.prefixes = tuple(n for n in names if not _is_pattern(n))
        self.patterns = tuple(n for n in names if _is_pattern(n))

    def _wanted(self, name):
        return any(name == p or name.startswith(p + ".") for p in self.prefixes) or \
            any(fnmatch.fnmatchcase(name, p) for p in self.patterns)

    def find_spec(self, name, path=None, target=None):
        if not self._wanted(name):
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "get_code"):
            return spec
        spec.loader = _WatchingLoader(spec.loader)
        return spec


def hook(modules):
    """Watches the functions of the modules named in `modules` (and their
    submodules) that are imported from now on. A name with * ? or [ is a pattern
    (fnmatch) that full module names must match: "test_*"."""
    global _finder
    if isinstance(modules, str):
        modules = [modules]
    names = [m for m in modules if m]
    if not names:
        raise ValueError("framejit.hook needs at least one module name")
    unhook_finder()
    _finder = _Finder(names)
    sys.meta_path.insert(0, _finder)


def unhook_finder():
    global _finder
    if _finder is not None and _finder in sys.meta_path:
        sys.meta_path.remove(_finder)
    _finder = None


def unhook():
    """Removes the import hook and stops watching every function it watched."""
    unhook_finder()
    while _watched:
        _C.watch(_watched.pop(), False)
