"""``scaled_dot_product_attention`` as CUDA runs it, for a step recorded on
``meta`` for a CUDA target (peakmem.step.device_target).

On ``meta`` the composite always takes the math kernel, which saves the
attention matrix for the backward; on a GPU PyTorch picks a fused backend
that saves only its output and log-sum-exp. ``backend`` picks as torch
2.13's ``select_sdp_backend`` (aten/src/ATen/native/transformers/cuda/
sdp_utils.cpp) does, and ``attention`` calls that backend's ATen op on the
meta tensors, with what ``scaled_dot_product_attention`` (transformers/
attention.cpp) does before it:

* the order: ``[flash, efficient, math, cudnn]`` (``Context::
  sdp_priority_order``), reordered on sm90 and sm100 to ``[cudnn, flash,
  efficient, math]`` by ``check_prefer_cudnn_attention`` (cuDNN newer than
  9.15, as the PyPI cu130 wheel's 9.20 is, and ``TORCH_CUDNN_SDPA_
  DEPRIORITIZED`` unset); ``torch.backends.cuda.enable_*_sdp`` switches
  honoured;
* flash (``can_use_flash_attention``): fp16/bf16, no mask, equal head dims
  up to 256, not causal with Sq != Sk, grouped heads allowed; a head dim
  that is not a multiple of 8 is padded (``pad_last_dim<8>``: three copies)
  and the output sliced;
* memory-efficient (``can_use_mem_efficient_attention``): fp16/bf16/fp32,
  head dims multiples of 8 (4 for fp32), storage offsets aligned alike,
  equal head counts (no grouped heads in 2.13), any mask: a mask whose
  strides are not multiples of 8 is padded (``pad_bias<8>``) and expanded;
  its philox seed and offset are CPU tensors;
* cuDNN (``can_use_cudnn_attention``): fp16/bf16, a 2-D or 4-D mask that
  does not require grad, batch and heads up to 65535, head dims multiples
  of 8 up to 256 on sm90 (128 elsewhere), Sk != 1, dropout a multiple of
  1/16, not deterministic;
* every backend: a boolean mask becomes an additive one in the query's
  dtype (``convert_boolean_attn_mask``, a new tensor of the mask's shape).

The ops' meta functions give the CUDA kernels' outputs (shapes, dtypes,
strides, the flash kernel's CUDA RNG state), so what autograd saves is
what the GPU saves; the workspaces the flash and memory-efficient kernels
allocate and free inside are the registry's rule for those ops
(semantics/fused_attention_scratch.h). Not modelled, and said in the
report: cuDNN's attention workspace (sized by cuDNN's heuristics).
"""

from __future__ import annotations

import math
import os
from typing import Any, Callable

__all__ = ["backend", "attention"]

FLASH, EFFICIENT, MATH, CUDNN = "flash", "efficient", "math", "cudnn"


def _order(arch: int) -> list[str]:
    prefer_cudnn = (arch // 10 in (9, 10)
                    and os.environ.get("TORCH_CUDNN_SDPA_DEPRIORITIZED", "").lower() not in ("1", "true", "on", "yes"))
    return [CUDNN, FLASH, EFFICIENT, MATH] if prefer_cudnn else [FLASH, EFFICIENT, MATH, CUDNN]


def _dense_common(q: Any, k: Any, v: Any, mask: Any, gqa_ok: bool, same_kv_heads: bool, enable_gqa: bool,
                  singleton_d_ok: bool) -> bool:
    """sdp_utils_cpp.h's checks every fused backend makes on dense inputs."""
    if not (q.dim() == k.dim() == v.dim() == 4):
        return False
    if q.shape[2] == 0 or k.shape[2] == 0:
        return False
    unit = all(t.stride(-1) == 1 for t in (q, k, v))
    if not (unit or (singleton_d_ok and q.shape[-1] == 1)):
        return False
    if mask is not None and mask.stride(-1) != 1:
        return False
    if not (q.shape[0] == k.shape[0] == v.shape[0]):
        return False
    hq, hk, hv = q.shape[1], k.shape[1], v.shape[1]
    if enable_gqa and gqa_ok:
        if same_kv_heads and hk != hv:
            return False
        return hq % hk == 0 and (same_kv_heads or hq % hv == 0)
    return hq == hk == hv


def _can_use_flash(q, k, v, mask, dropout_p, is_causal, enable_gqa, arch) -> bool:
    import torch

    if mask is not None or not (80 <= arch <= 121):
        return False
    if not (q.shape[-1] == k.shape[-1] == v.shape[-1] <= 256):
        return False
    if is_causal and q.shape[2] != k.shape[2]:
        return False
    if q.dtype not in (torch.float16, torch.bfloat16) or not (q.dtype == k.dtype == v.dtype):
        return False
    return _dense_common(q, k, v, mask, True, True, enable_gqa, True)


def _can_use_efficient(q, k, v, mask, dropout_p, is_causal, enable_gqa, arch) -> bool:
    import torch

    if not (50 <= arch <= 121) or q.dim() != 4:
        return False
    if q.dtype not in (torch.float16, torch.bfloat16, torch.float32) or not (q.dtype == k.dtype == v.dtype):
        return False
    align = 4 if q.dtype == torch.float32 else 8
    if q.shape[-1] != k.shape[-1] or q.shape[-1] % align or v.shape[-1] % align or q.shape[-1] == 0:
        return False
    if any(t.numel() and t.storage_offset() % align for t in (q, k, v)):
        return False
    return _dense_common(q, k, v, mask, False, True, enable_gqa, False)


def _can_use_cudnn(q, k, v, mask, dropout_p, is_causal, enable_gqa, arch) -> bool:
    import torch

    if not (80 <= arch <= 121) or q.dim() != 4 or torch.are_deterministic_algorithms_enabled():
        return False
    if q.dtype not in (torch.float16, torch.bfloat16) or not (q.dtype == k.dtype == v.dtype):
        return False
    b, hq, sq, dqk = q.shape
    sk, dv = k.shape[2], v.shape[-1]
    if mask is not None:
        if mask.requires_grad or mask.dim() not in (2, 4):
            return False
        if mask.shape[-2] not in (sq, 1) or mask.shape[-1] not in (sk, 1):
            return False
        if mask.dim() == 4 and (mask.shape[0] not in (b, 1) or mask.shape[1] not in (hq, 1)):
            return False
    if float(dropout_p * 16) != int(dropout_p * 16):
        return False
    if not _dense_common(q, k, v, mask, True, False, enable_gqa, True):
        return False
    limit = 256 if arch == 90 else 128
    if b > 65535 or hq > 65535 or dqk > limit or dv > limit or dqk % 8 or dv % 8:
        return False
    return sk != 1 and not (sq == 1 and dropout_p > 0)


def backend(q: Any, k: Any, v: Any, mask: Any, dropout_p: float, is_causal: bool, enable_gqa: bool,
            arch: int) -> str:
    """The backend CUDA's scaled_dot_product_attention runs these tensors
    with on a GPU of compute capability `arch` (major * 10 + minor)."""
    import torch

    enabled = {FLASH: torch.backends.cuda.flash_sdp_enabled(), EFFICIENT: torch.backends.cuda.mem_efficient_sdp_enabled(),
               MATH: torch.backends.cuda.math_sdp_enabled(), CUDNN: torch.backends.cuda.cudnn_sdp_enabled()}
    checks: dict[str, Callable[..., bool]] = {FLASH: _can_use_flash, EFFICIENT: _can_use_efficient,
                                              CUDNN: _can_use_cudnn, MATH: lambda *a: True}
    for b in _order(arch):
        if enabled[b] and checks[b](q, k, v, mask, dropout_p, is_causal, enable_gqa, arch):
            return b
    raise RuntimeError("scaled_dot_product_attention: no backend CUDA has is enabled for these inputs")


def _additive(mask: Any, dtype: Any) -> Any:
    """convert_boolean_attn_mask: a boolean mask as 0 where kept, -inf where not."""
    import torch

    if mask is None or mask.dtype != torch.bool:
        return mask
    return torch.where(mask, 0.0, torch.scalar_tensor(-math.inf, dtype=dtype, device=mask.device))


def attention(query: Any, key: Any, value: Any, attn_mask: Any = None, dropout_p: float = 0.0,
              is_causal: bool = False, scale: float | None = None, enable_gqa: bool = False, *, arch: int,
              to_host: Callable[[Any], None], chosen: Callable[[str], None]) -> Any:
    """scaled_dot_product_attention on meta tensors as CUDA runs it (see the
    module docstring). `to_host` is told each output that is a CPU tensor on
    the GPU; `chosen` each call's backend."""
    import torch
    import torch.nn.functional as F

    which = backend(query, key, value, attn_mask, dropout_p, is_causal, enable_gqa, arch)
    chosen(which)
    if which == MATH:
        return F.scaled_dot_product_attention(query, key, value, attn_mask, dropout_p, is_causal, scale=scale,
                                              enable_gqa=enable_gqa)
    mask = _additive(attn_mask, query.dtype)
    grad = torch.is_grad_enabled() and any(t.requires_grad for t in (query, key, value))
    if which == FLASH:
        d = query.shape[-1]
        if d % 8:
            query, key, value = (F.pad(t, (0, 8 - d % 8)) for t in (query, key, value))
        scale = scale if scale is not None else 1.0 / math.sqrt(d)
        out = torch.ops.aten._scaled_dot_product_flash_attention(query, key, value, dropout_p, is_causal, False,
                                                                 scale=scale)[0]
        return out[..., :d] if d % 8 else out
    if which == EFFICIENT:
        if mask is not None:
            if any(s % 8 for s in mask.stride()[:-1]):
                sk = mask.shape[-1]
                mask = F.pad(mask, (0, 8 - sk % 8))[..., :sk]
            mask = mask.expand(query.shape[0], query.shape[1], query.shape[2], key.shape[2])
        lse = grad or (mask is not None and mask.requires_grad)
        out, _lse, seed, offset = torch.ops.aten._scaled_dot_product_efficient_attention(
            query, key, value, mask, lse, dropout_p, is_causal, scale=scale)
        to_host(seed)
        to_host(offset)
        return out
    return torch.ops.aten._scaled_dot_product_cudnn_attention(query, key, value, mask, grad, dropout_p, is_causal,
                                                              False, scale=scale)[0]
