"""Old module paths kept for one release after a move (issue 21), each with a DeprecationWarning.

``alias_modules({"pkg.old": "pkg.new.place", ...})`` lets ``import pkg.old`` and ``from pkg.old import
name`` keep working without leaving a stub file at the old place: importing an old path warns once,
naming the new one, and gives a module that reads every name from the new module.
``moved_names(package, "pkg.new.module")`` is a package's ``__getattr__`` for the names of a
module that became that package (``sim.mapping`` was a module; its names now live in
``sim.mapping.mapping``): reading one warns and forwards.
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import types
import warnings
from typing import Any, Callable, Mapping


def _warn(old: str, new: str) -> None:
    warnings.warn(f"{old} moved to {new}; import it from there (the old path goes in the next release)",
                  DeprecationWarning, stacklevel=4)


class _OldPath(types.ModuleType):
    """What an old path imports as: every attribute is the new module's."""

    def __init__(self, old: str, new: str):
        super().__init__(old, f"Deprecated: moved to ``{new}``.")
        self.__moved_to__ = new

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return getattr(importlib.import_module(self.__moved_to__), name)

    def __dir__(self):
        return dir(importlib.import_module(self.__moved_to__))


class _Aliases(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self, table: Mapping[str, str]):
        self.table = dict(table)

    def find_spec(self, fullname, path=None, target=None):
        if fullname in self.table:
            return importlib.util.spec_from_loader(fullname, self)
        return None

    def create_module(self, spec):
        _warn(spec.name, self.table[spec.name])
        return _OldPath(spec.name, self.table[spec.name])

    def exec_module(self, module) -> None:
        importlib.import_module(module.__moved_to__)  # an import error surfaces at the old path's import


def alias_modules(table: Mapping[str, str]) -> None:
    """Let each old dotted path of ``table`` import as its new module, warning (see module doc)."""
    for f in sys.meta_path:
        if isinstance(f, _Aliases):
            f.table.update(table)
            return
    sys.meta_path.append(_Aliases(table))


def moved_names(package: str, new: str) -> Callable[[str], Any]:
    def __getattr__(name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        mod = importlib.import_module(new)
        if not hasattr(mod, name):
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        warnings.warn(f"{package}.{name} moved to {new}.{name}; import it from there "
                      f"(the old path goes in the next release)", DeprecationWarning, stacklevel=2)
        return getattr(mod, name)
    return __getattr__
