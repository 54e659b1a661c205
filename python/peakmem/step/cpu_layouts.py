"""Output layouts of CPU kernels where ATen's meta function differs.

A step recorded on ``meta`` stand-ins takes each output's strides from the
op's meta function. Where the CPU kernel lays its output out otherwise,
what the step does next differs: a ``reshape`` of a tensor the CPU made
contiguous is a view, of the meta output with other strides a copy that
the real step never makes. On a CPU target the recording replaces such an
output by a stand-in with the CPU kernel's layout (``cpu_layout``) before
anything sees it.

* ``native_layer_norm_backward``: the CPU kernel makes the input's
  gradient ``empty_like(X, LEGACY_CONTIGUOUS_MEMORY_FORMAT)`` of the
  contiguous input (aten/src/ATen/native/layer_norm.cpp,
  ``layer_norm_backward_cpu``); the meta function follows the incoming
  gradient's strides.
"""

from __future__ import annotations

from typing import Any

__all__ = ["cpu_layout"]


def _contiguous_first(out: Any) -> Any:
    import torch

    first = out[0]
    if first is None or first.is_contiguous():
        return out
    with torch.utils._python_dispatch._disable_current_modes():
        made = torch.empty(first.shape, dtype=first.dtype, device=first.device)
    return (made, *out[1:])


def cpu_layout(func: Any, out: Any) -> Any:
    """`out`, the meta outputs of `func`, laid out as the CPU kernel lays them."""
    import torch

    if func is torch.ops.aten.native_layer_norm_backward.default:
        return _contiguous_first(out)
    return out
