"""The thin modules left where a public module used to be: each name still imports from the old place, with a
DeprecationWarning naming the new one (for one release; the CHANGELOG lists the moves)."""

from __future__ import annotations

import importlib
import warnings
from typing import Any, Callable

__all__ = ["forwarder"]


def forwarder(old: str, new: str, names: list[str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``old`` that hands out ``names`` from ``new``. The warning is raised where the
    caller asked for the name (``from old import X`` or ``old.X``), so it points at the caller's line."""

    def __getattr__(name: str) -> Any:
        if name not in names:
            raise AttributeError(f"module {old!r} has no attribute {name!r}")
        warnings.warn(f"{old}.{name} has moved to {new}.{name}; {old} will be removed in the next gltensor release",
                      DeprecationWarning, stacklevel=2)
        return getattr(importlib.import_module(new), name)

    return __getattr__
