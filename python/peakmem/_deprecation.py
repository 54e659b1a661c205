"""Old spellings of the API: each still works for one release and warns,
naming the new spelling, at the caller's own line."""

from __future__ import annotations

import sys
import warnings
from typing import Any

__all__ = ["deprecated", "renamed"]


def _caller_outside_peakmem() -> int:
    """The stacklevel, for a ``warnings.warn`` in the function that calls
    this (deprecated(), or another warning of peakmem's), of the first frame
    whose code is not peakmem's: the user's call. A frame is told by its
    module's name, not its file: code a dataclass generates (``__init__``)
    runs in its class's module but has no file."""
    frame, level = sys._getframe(2), 2
    while frame is not None and frame.f_globals.get("__name__", "").partition(".")[0] == "peakmem":
        frame, level = frame.f_back, level + 1
    return level


def deprecated(old: str, new: str) -> None:
    """A DeprecationWarning: `old` is spelled `new` now."""
    warnings.warn(f"{old} is deprecated and goes in the next release: {new}", DeprecationWarning,
                  stacklevel=_caller_outside_peakmem())


def renamed(function: str, old: str, old_value: Any, new: str, new_value: Any) -> Any:
    """The value of `function`'s keyword `new`, given as `new` or as its
    old spelling `old` (which warns); None where neither is given (each
    defaults to None). TypeError for both."""
    if old_value is None:
        return new_value
    if new_value is not None:
        raise TypeError(f"{function}() got {new}= and {old}=, its old spelling: pass {new}= only")
    deprecated(f"{function}({old}=...)", f"pass {new}=")
    return old_value
