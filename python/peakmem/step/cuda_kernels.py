"""The kernels CUDA picks where ATen picks by device: a step recorded on
``meta`` for a CUDA target (peakmem.step.device_target).

Some ATen functions are CompositeImplicitAutograd and choose their
implementation from the input's device; on ``meta`` they take the CPU's.
While a CUDA target is recorded, ``F.dropout`` (training, ``0 < p < 1``,
not in place, not empty) runs ``native_dropout`` as on CUDA, whose mask is
a bool tensor saved for the backward (aten/src/ATen/native/Dropout.cpp
``dropout``: ``is_fused_kernel_acceptable`` needs a CUDA input), where the
CPU's ``_dropout_impl`` saves a noise tensor in the input's dtype.
It is patched as a module attribute (as ``nn.Dropout`` calls it), so a
checkpointed block's recomputation inside ``loss.backward()`` takes the
same kernel. What is not yet recorded as CUDA runs it is counted and named
in the report: ``scaled_dot_product_attention`` (the fused backends CUDA
picks), ``F.rms_norm`` (CUDA's ``_fused_rms_norm`` keeps an fp32 ``rstd``
of one element a row where the composite keeps fp32 copies of the input;
on ``meta`` ``_fused_rms_norm`` itself decomposes into the composite) and
``torch.autocast("cuda")`` (off on a host without CUDA, so its casts are
missing from the recording).
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator

__all__ = ["cuda_kernels"]


def _on_meta(x: Any) -> bool:
    import torch

    return isinstance(x, torch.Tensor) and x.device.type == "meta"


@contextlib.contextmanager
def cuda_kernels(diagnostics: list[str], target_name: str) -> Iterator[None]:
    """Routes the functions above to CUDA's kernels on ``meta`` tensors;
    appends to `diagnostics` what the step met that is not modelled."""
    import torch
    import torch.nn.functional as F
    from torch.overrides import TorchFunctionMode

    dropout, rms_norm, sdpa = F.dropout, F.rms_norm, F.scaled_dot_product_attention
    autocast_enter = torch.amp.autocast_mode.autocast.__enter__
    met = {"attention": 0, "autocast": 0, "rms_norm": 0}

    def cuda_dropout(input, p=0.5, training=True, inplace=False):
        if (_on_meta(input) and training and not inplace and 0 < p < 1 and input.numel() > 0
                and not input.is_complex()):
            return torch.ops.aten.native_dropout(input, p, True)[0]
        return dropout(input, p, training, inplace)

    inside = [False]  # F.rms_norm's torch-function handling calls the patched name again

    def counted_rms_norm(input, normalized_shape, weight=None, eps=None):
        if inside[0]:
            return rms_norm(input, normalized_shape, weight, eps)
        if _on_meta(input) and not input.is_complex() and (weight is None or weight.dtype == input.dtype):
            met["rms_norm"] += 1
        inside[0] = True
        try:
            return rms_norm(input, normalized_shape, weight, eps)
        finally:
            inside[0] = False

    def counted_autocast_enter(self):
        if getattr(self, "device", None) == "cuda":
            met["autocast"] += 1
        return autocast_enter(self)

    class CountedAttention(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            met["attention"] += func is sdpa
            return func(*args, **(kwargs or {}))

    F.dropout, F.rms_norm = cuda_dropout, counted_rms_norm
    torch.amp.autocast_mode.autocast.__enter__ = counted_autocast_enter
    try:
        with CountedAttention():
            yield
    finally:
        F.dropout, F.rms_norm = dropout, rms_norm
        torch.amp.autocast_mode.autocast.__enter__ = autocast_enter
        if met["attention"]:
            diagnostics.append(
                f"scaled_dot_product_attention ({met['attention']} calls) is recorded with the math kernel; on "
                f"{target_name} PyTorch picks a fused backend (flash, memory-efficient or cuDNN) where the "
                "dtype, shapes and mask allow, whose saved tensors and scratch are not modelled yet")
        if met["rms_norm"]:
            diagnostics.append(
                f"F.rms_norm ({met['rms_norm']} calls) is recorded with the composite; on {target_name} the fused "
                "kernel runs, saving an fp32 rstd of one element a row instead: not modelled yet")
        if met["autocast"]:
            diagnostics.append(
                f"torch.autocast('cuda') ({met['autocast']} regions) is off on this host, so the step is recorded "
                f"without its casts and cast cache; on {target_name} they run: not modelled yet")
