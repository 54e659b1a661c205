"""Attention on meta stand-ins as the CPU runs it: the kernel the CPU picks."""

from __future__ import annotations

import contextlib
from typing import Any

__all__ = ["cpu_attention"]


@contextlib.contextmanager
def cpu_attention():
    """A TorchFunctionMode under which scaled_dot_product_attention on meta
    tensors runs the kernel the CPU would. On meta, ATen's composite always
    picks the math kernel (_fused_sdp_choice_meta), which saves the
    attention matrix for the backward; the CPU picks its flash kernel when
    the shapes allow (select_sdp_backend_cpp), which saves only its output
    and log-sum-exp. The CPU's choice reads shapes, dtypes and the last
    dimension's stride, so it is asked on CPU stand-ins of one row each,
    expanded to the shapes (nothing of the tensors' size is allocated), and
    the flash kernel, whose meta function takes grouped-query shapes as the
    CPU kernel does, is called directly.

    A TorchFunctionMode is off while it handles a call, and so inside
    ``loss.backward()``, where torch.utils.checkpoint recomputes a
    checkpointed forward; there the replaced
    ``torch.nn.functional.scaled_dot_product_attention`` routes the call,
    so that the recomputation takes the kernel its forward took."""
    import torch
    from torch.nn.attention import SDPBackend
    from torch.overrides import TorchFunctionMode
    from torch.utils._python_dispatch import _disable_current_modes
    from torch.utils._pytree import tree_map

    sdpa = torch.nn.functional.scaled_dot_product_attention
    flash = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu

    def on_cpu(x: Any) -> Any:
        # requires_grad too: the CPU's flash kernel takes no mask that
        # requires grad (a learned attention bias), so the choice reads it.
        if not isinstance(x, torch.Tensor):
            return x
        row = torch.zeros(x.shape[-1] if x.dim() else (), dtype=x.dtype)
        if x.requires_grad and (x.is_floating_point() or x.is_complex()):
            row.requires_grad_(True)
        return row.expand(x.shape) if x.dim() == 0 or x.stride(-1) == 1 else row[:1].expand(x.shape)

    def attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                  enable_gqa=False):
        with _disable_current_modes():  # the stand-ins are not the step's
            choice = torch._fused_sdp_choice(*tree_map(on_cpu, (query, key, value, attn_mask)), dropout_p,
                                             is_causal, scale=scale, enable_gqa=enable_gqa)
        if choice != int(SDPBackend.FLASH_ATTENTION):
            return sdpa(query, key, value, attn_mask, dropout_p, is_causal, scale=scale, enable_gqa=enable_gqa)
        if attn_mask is not None and attn_mask.dtype == torch.bool:
            # attention.cpp's convert_boolean_attn_mask, before the flash
            # kernel: an additive mask, -inf where the boolean one is False.
            attn_mask = torch.where(attn_mask.logical_not(), -float("inf"),
                                    torch.scalar_tensor(0.0, dtype=query.dtype, device=attn_mask.device))
        return flash(query, key, value, dropout_p, is_causal, attn_mask=attn_mask, scale=scale)[0]

    def routed(query, *args, **kwargs):
        if isinstance(query, torch.Tensor) and query.device.type == "meta":
            with torch._C.DisableTorchFunction():
                return attention(query, *args, **kwargs)
        return sdpa(query, *args, **kwargs)

    class CpuAttention(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            return routed(*args, **kwargs) if func is sdpa else func(*args, **kwargs)

    torch.nn.functional.scaled_dot_product_attention = routed
    try:
        with CpuAttention():
            yield
    finally:
        torch.nn.functional.scaled_dot_product_attention = sdpa
