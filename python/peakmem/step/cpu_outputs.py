"""CPU kernels' outputs where ATen's meta function differs from the kernel.

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
* ``native_layer_norm``: the CPU kernel makes the saved mean and rstd in
  ``param_scalar_type(input, mixed_type)`` (aten/src/ATen/native/
  layer_norm.cpp, ``layer_norm_cpu``): the input's own dtype unless the
  input is bf16 or f16 and the weight is not (mixed), so a bf16 layer
  norm with bf16 weights saves them in bf16; the meta function makes
  them float32 always.
* ``convolution`` (2-d): the CPU computes in channels-last, and returns
  its output so, when the input or the weight suggests channels-last
  (aten/src/ATen/native/Convolution.cpp,
  ``_determine_backend_memory_format``: ``mkldnn_conv_use_channels_last``
  for oneDNN, ``thnn_conv_use_channels_last`` for the native kernels, any
  dtype, transposed or not); the meta function leaves every output
  contiguous (torch/_meta_registrations.py, ``meta_conv``: "meta tensors
  have no device info").

A meta function may also refuse what the CPU kernel takes (``cpu_meta``):

* ``_grouped_mm`` (transformers' default experts path): its meta function
  checks the CUDA kernel's bf16-only inputs
  (torch/_meta_registrations.py, ``_meta_grouped_mm_common``); the CPU
  kernel takes any floating type (aten/src/ATen/native/Blas.cpp,
  ``_grouped_mm``: ``create_grouped_gemm_output_tensor`` for the output,
  then ``_grouped_mm_fallback``'s ``mm_out`` per group into it, nothing
  else allocated): the output as that function makes it.
"""

from __future__ import annotations

from typing import Any

__all__ = ["cpu_layout", "cpu_meta"]


def _contiguous_first(out: Any) -> Any:
    import torch

    first = out[0]
    if first is None or first.is_contiguous():
        return out
    with torch.utils._python_dispatch._disable_current_modes():
        made = torch.empty(first.shape, dtype=first.dtype, device=first.device)
    return (made, *out[1:])


def _channels_last_convolution(out: Any, args: tuple) -> Any:
    """A 2-d convolution's output in channels-last where the CPU makes it
    so (see the module docstring)."""
    import torch
    from torch._prims_common import suggest_memory_format

    if out.dim() != 4 or out.is_contiguous(memory_format=torch.channels_last) or not any(
            suggest_memory_format(t) == torch.channels_last for t in args[:2]):
        return out
    with torch.utils._python_dispatch._disable_current_modes():
        return torch.empty(out.shape, dtype=out.dtype, device=out.device, memory_format=torch.channels_last)


def _statistics_in_the_inputs_dtype(out: Any, args: tuple) -> Any:
    """native_layer_norm's (output, mean, rstd) with mean and rstd in the
    dtype the CPU kernel makes them (see the module docstring)."""
    import torch

    x, weight = args[0], args[2] if len(args) > 2 else None
    mixed = x.dtype in (torch.bfloat16, torch.float16) and weight is not None and weight.dtype != x.dtype
    dtype = torch.float32 if mixed else x.dtype
    if out[1].dtype == dtype:
        return out
    with torch.utils._python_dispatch._disable_current_modes():
        mean, rstd = (torch.empty_strided(t.shape, t.stride(), dtype=dtype, device=t.device) for t in out[1:])
    return (out[0], mean, rstd)


def cpu_layout(func: Any, out: Any, args: tuple = ()) -> Any:
    """`out`, the meta outputs of `func` called on `args`, laid out as the
    CPU kernel lays them."""
    import torch

    if func is torch.ops.aten.native_layer_norm_backward.default:
        return _contiguous_first(out)
    if func is torch.ops.aten.native_layer_norm.default:
        return _statistics_in_the_inputs_dtype(out, args)
    if func is torch.ops.aten.convolution.default:
        return _channels_last_convolution(out, args)
    return out


def _grouped_mm_output(mat_a: Any, mat_b: Any, offs: Any, out_dtype: Any) -> Any:
    """Blas.cpp's ``create_grouped_gemm_output_tensor``: the last dimension
    padded to 16 bytes of the output dtype, rows (and groups) strided by it."""
    import torch

    if mat_a.dim() == 2:
        size = [offs.shape[0], mat_a.shape[0], mat_b.shape[1]] if mat_b.dim() == 2 else [mat_a.shape[0],
                                                                                          mat_b.shape[-1]]
    else:
        size = [mat_a.shape[1], mat_b.shape[1]] if mat_b.dim() == 2 else [mat_a.shape[0], mat_a.shape[1],
                                                                          mat_b.shape[-1]]
    alignment = 16 // torch.empty((), dtype=out_dtype, device="meta").element_size()
    padded = (size[-1] + alignment - 1) // alignment * alignment
    stride = [padded, 1] if (mat_a.dim() == 2) != (mat_b.dim() == 2) else [size[1] * padded, padded, 1]
    with torch.utils._python_dispatch._disable_current_modes():
        return torch.empty_strided(size, stride, dtype=out_dtype, device=mat_a.device)


def cpu_meta(func: Any, args: tuple, kwargs: dict) -> Any:
    """`func`'s meta output where its meta function refuses what the CPU
    kernel runs (above), else None."""
    import torch

    if func is not torch.ops.aten._grouped_mm.default:
        return None
    mat_a, mat_b = args[0], args[1]
    if mat_a.dtype == torch.bfloat16 or not mat_a.is_floating_point():
        return None
    offs = args[2] if len(args) > 2 else kwargs.get("offs")
    out_dtype = (args[4] if len(args) > 4 else kwargs.get("out_dtype")) or mat_a.dtype
    return _grouped_mm_output(mat_a, mat_b, offs, out_dtype)
