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
same kernel. ``scaled_dot_product_attention`` runs the backend CUDA picks
(peakmem.step.cuda_attention). What is not yet recorded as CUDA runs it is
counted and named in the report: ``F.rms_norm`` (CUDA's ``_fused_rms_norm`` keeps an fp32 ``rstd``
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
def cuda_kernels(recorder: Any) -> Iterator[None]:
    """Routes the functions above to CUDA's kernels on ``meta`` tensors for
    `recorder` (peakmem.step.eager's: its ``target``, ``to_host`` and
    ``record.diagnostics``); appends to the diagnostics what the step met
    that is not modelled."""
    import torch
    import torch.nn.functional as F
    from torch.overrides import TorchFunctionMode

    from .cuda_attention import attention

    target, diagnostics = recorder.target, recorder.record.diagnostics
    dropout, rms_norm, sdpa = F.dropout, F.rms_norm, F.scaled_dot_product_attention
    autocast_enter = torch.amp.autocast_mode.autocast.__enter__
    met = {"autocast": 0, "rms_norm": 0}
    backends: dict[str, int] = {}

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

    def chosen(backend: str) -> None:
        backends[backend] = backends.get(backend, 0) + 1

    def routed_attention(query, *args, **kwargs):
        if not _on_meta(query):
            return sdpa(query, *args, **kwargs)
        with torch._C.DisableTorchFunction():
            return attention(query, *args, **kwargs, arch=target.cuda_arch, to_host=recorder.to_host,
                             chosen=chosen)

    def counted_autocast_enter(self):
        if getattr(self, "device", None) == "cuda":
            met["autocast"] += 1
        return autocast_enter(self)

    class CudaAttention(TorchFunctionMode):
        """Catches calls through an alias of the function (``from
        torch.nn.functional import scaled_dot_product_attention``)."""

        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            return routed_attention(*args, **kwargs) if func is sdpa else func(*args, **kwargs)

    F.dropout, F.rms_norm, F.scaled_dot_product_attention = cuda_dropout, counted_rms_norm, routed_attention
    torch.amp.autocast_mode.autocast.__enter__ = counted_autocast_enter
    try:
        with CudaAttention():
            yield
    finally:
        F.dropout, F.rms_norm, F.scaled_dot_product_attention = dropout, rms_norm, sdpa
        torch.amp.autocast_mode.autocast.__enter__ = autocast_enter
        diagnostics += _what_was_met(target.name, backends, met)


def _what_was_met(target_name: str, backends: dict[str, int], met: dict[str, int]) -> list[str]:
    """The report's lines on what cuda_kernels met: the attention backends
    picked, and what is not modelled yet."""
    out = []
    if backends:
        calls = ", ".join(f"{n} on {b}" for b, n in sorted(backends.items()))
        out.append(f"scaled_dot_product_attention ({calls}): the backends {target_name} picks, with their outputs, "
                   "saved tensors and the flash and memory-efficient kernels' workspaces as PyTorch's source sizes "
                   "them (not yet measured on a GPU); cuDNN's attention workspace is not counted")
    if met["rms_norm"]:
        out.append(f"F.rms_norm ({met['rms_norm']} calls) is recorded with the composite; on {target_name} the fused "
                   "kernel runs, saving an fp32 rstd of one element a row instead: not modelled yet")
    if met["autocast"]:
        out.append(f"torch.autocast('cuda') ({met['autocast']} regions) is off on this host, so the step is recorded "
                   f"without its casts and cast cache; on {target_name} they run: not modelled yet")
    return out
