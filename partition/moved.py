"""Old module paths kept for one release after a move, each with a DeprecationWarning.

An old module becomes a two-line stub: ``__getattr__ = moved(__name__, "new.module")``. Importing
the stub warns once, naming the new place; every name (public or not) is then read from the new
module, so ``from old import name`` keeps working."""
from __future__ import annotations

import importlib
import warnings
from typing import Any, Callable


def moved(old: str, new: str) -> Callable[[str], Any]:
    warnings.warn(f"{old} moved to {new}; import it from there (the old path goes in the next release)",
                  DeprecationWarning, stacklevel=3)

    def __getattr__(name: str) -> Any:
        return getattr(importlib.import_module(new), name)
    return __getattr__
