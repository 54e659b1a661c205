"""Old spellings of the API: each still works for one release and warns,
naming the new spelling, at the caller's own line."""

from __future__ import annotations

import sys
import warnings

__all__ = ["deprecated"]


def _caller_outside_peakmem() -> int:
    """The stacklevel of the first frame whose code is not peakmem's (the
    user's call), counted from deprecated()'s caller. A frame is told by its
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
