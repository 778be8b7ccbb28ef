"""framejit.hook / framejit.unhook: the functions of chosen modules are watched as
the modules are imported, and called as they are, with no wrapper; never
sys.setprofile or sys.settrace.

A meta-path finder asks the other finders for the module's spec and returns it with
its loader as it was (same object, same type: `isinstance(m.__loader__,
SourceFileLoader)` and `type(...) is` checks hold). Only the loader's `get_code`
is shadowed, on that one instance and for one call: the stock `exec_module` calls
it for the module's code, which gets watched before it runs, and the shadow is
removed then, so the loader compares equal to a fresh one afterwards. Loaders other
than importlib's file loaders (one instance per module) are left alone, and those
modules are not watched."""

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


def _watch_on_get_code(loader):
    """Shadows the loader's get_code (this instance only, for one call) with one
    that watches the code it returns."""
    def get_code(fullname):
        del loader.get_code  # back to the class's: the loader is as it was
        code = type(loader).get_code(loader, fullname)
        if code is not None:
            watch_code_tree(code)
        return code

    loader.get_code = get_code


# importlib's loaders that read one file: one instance per module.
_FILE_LOADERS = (importlib.machinery.SourceFileLoader, importlib.machinery.SourcelessFileLoader)


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
        spec = self._others_spec(name, path, target)
        if spec is not None and isinstance(spec.loader, _FILE_LOADERS):
            _watch_on_get_code(spec.loader)
        return spec

    def _others_spec(self, name, path, target):
        """The spec the rest of sys.meta_path gives (as if this finder were not there)."""
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            if finder is self or find is None:
                continue
            spec = find(name, path, target)
            if spec is not None:
                return spec
        return None


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
