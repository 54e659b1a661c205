"""Lets lightning-thunder 0.2.6 import under torch 2.13.

Thunder 0.2.6 registers every `torch.Tensor` method it knows by name at
import time, including the named-tensor methods (`align_as`, `rename`, ...)
that torch 2.13 removed; the import then fails with AttributeError. Before
thunder is imported each missing method gets a stand-in with the right
`__name__` that raises if anything ever calls it. Nothing in a trace can call
them (torch has no named tensors any more), so traces are unaffected.

`install()` (run by ``import peakmem``) makes a plain ``import thunder``
work afterwards without importing torch or thunder itself: torch is patched
at once when it is already imported, and otherwise a meta-path finder
patches it when ``thunder`` is first imported (thunder imports torch anyway).
`import_thunder()` patches and imports in one call.
"""

from __future__ import annotations

import sys

_REMOVED_TENSOR_METHODS = (
    "align_as",
    "align_to",
    "refine_names",
    "rename",
    "rename_",
    "has_names",
    "unflatten_names",
)


def _stand_in(name: str):
    def removed(*args, **kwargs):
        raise RuntimeError(f"torch.Tensor.{name} does not exist in this torch version")

    removed.__name__ = name
    removed.__qualname__ = name
    return removed


def patch_torch() -> None:
    """Gives torch.Tensor a stand-in for each named-tensor method it lacks (imports torch)."""
    import torch

    for name in _REMOVED_TENSOR_METHODS:
        if not hasattr(torch.Tensor, name):
            setattr(torch.Tensor, name, _stand_in(name))


class _PatchBeforeThunder:
    """A meta-path finder that finds nothing: asked for the top-level
    ``thunder`` package, it patches torch and removes itself, and the
    ordinary finders then import thunder."""

    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name == "thunder":
            _remove_finder()
            try:
                patch_torch()
            except ImportError:  # no torch: thunder's own import says so
                pass
        return None


def _remove_finder() -> None:
    while _PatchBeforeThunder in sys.meta_path:
        sys.meta_path.remove(_PatchBeforeThunder)


def install() -> None:
    """Makes a later ``import thunder`` work under torch 2.13; imports nothing itself."""
    if "thunder" in sys.modules:
        return
    if sys.modules.get("torch") is not None:
        patch_torch()
    elif _PatchBeforeThunder not in sys.meta_path:
        sys.meta_path.insert(0, _PatchBeforeThunder)


def import_thunder():
    """Imports and returns the `thunder` package, patching torch first if
    needed. Thunder's warning that the optional transformer_engine package
    is missing is left out: peakmem uses no executor of it (Thunder's
    defaults run without it), so it would only be noise on every estimate."""
    import warnings

    patch_torch()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="transformer_engine module not found", category=UserWarning)
        import thunder

    return thunder
