"""Lets lightning-thunder 0.2.6 import under torch 2.13.

Thunder 0.2.6 registers every `torch.Tensor` method it knows by name at
import time, including the named-tensor methods (`align_as`, `rename`, ...)
that torch 2.13 removed; the import then fails with AttributeError. Before
importing thunder we give each missing method a stand-in with the right
`__name__` that raises if anything ever calls it. Nothing in a trace can call
them (torch has no named tensors any more), so traces are unaffected.
"""

from __future__ import annotations

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


def import_thunder():
    """Imports and returns the `thunder` package, patching torch first if needed."""
    import torch

    for name in _REMOVED_TENSOR_METHODS:
        if not hasattr(torch.Tensor, name):
            setattr(torch.Tensor, name, _stand_in(name))
    import thunder

    return thunder
