"""peakmem.step.cpu_outputs: where the CPU kernel's outputs differ from
ATen's meta function's, the recording takes the kernel's."""

from __future__ import annotations

import pytest
import torch

import peakmem
from peakmem.step.cpu_outputs import cpu_layout

LAYER_NORM = torch.ops.aten.native_layer_norm.default


@pytest.mark.parametrize("dtype,weight,saved", [
    (torch.bfloat16, torch.bfloat16, torch.bfloat16),  # not mixed: the input's dtype
    (torch.bfloat16, None, torch.bfloat16),
    (torch.float16, torch.float16, torch.float16),
    (torch.bfloat16, torch.float32, torch.float32),  # mixed: float
    (torch.float32, torch.float32, torch.float32),
])
def test_layer_norm_statistics_take_the_dtype_the_cpu_kernel_gives(dtype, weight, saved):
    x = torch.randn(4, 8, dtype=dtype)
    w = None if weight is None else torch.ones(8, dtype=weight)
    real = LAYER_NORM(x, [8], w, None, 1e-5)
    assert real[1].dtype == saved  # the CPU kernel, run
    meta_args = (x.to("meta"), [8], None if w is None else w.to("meta"), None, 1e-5)
    laid_out = cpu_layout(LAYER_NORM, LAYER_NORM(*meta_args), meta_args)
    assert [t.dtype for t in laid_out] == [real[0].dtype, saved, saved]
    assert [t.shape for t in laid_out] == [t.shape for t in real]


def test_a_bf16_layer_norm_step_is_measured_as_estimated():
    # A bf16 LayerNorm over 4,096 rows saves its mean and rstd for the
    # backward: 2 x 4,096 bf16 values (16,384 bytes), not the meta
    # function's float32 (32,768).
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.LayerNorm(256), torch.nn.Linear(256, 256))
    model = model.to(torch.bfloat16)
    x = torch.randn(4096, 256, dtype=torch.bfloat16)
    options = {"loss_fn": lambda out, x: out.float().pow(2).mean(), "frontend": "eager"}
    estimate = peakmem.estimate_step(model, x, **options)
    measured = peakmem.measure_step(model, x, **options)
    assert (estimate.peak_bytes, estimate.final_bytes) == (measured.peak_bytes, measured.final_bytes)


CONVOLUTION = torch.ops.aten.convolution.default


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("input_last,weight_last,groups,transposed", [
    (False, False, 1, False),
    (True, False, 1, False),  # the input channels-last: so is the output
    (False, True, 1, False),  # the weight alone decides it too
    (True, False, 16, False),  # depthwise
    (True, False, 1, True),  # transposed
])
def test_a_convolution_output_takes_the_memory_format_the_cpu_kernel_gives(dtype, input_last, weight_last, groups,
                                                                          transposed):
    last = torch.channels_last
    x = torch.randn(2, 16, 8, 8, dtype=dtype)
    w = torch.randn(16, 16 // groups, 3, 3, dtype=dtype)
    x = x.contiguous(memory_format=last) if input_last else x
    w = w.contiguous(memory_format=last) if weight_last else w
    rest = (None, [1, 1], [1, 1], [1, 1], transposed, [0, 0], groups)
    real = CONVOLUTION(x, w, *rest)  # the CPU kernel, run
    meta_args = (x.to("meta"), w.to("meta"), *rest)
    laid_out = cpu_layout(CONVOLUTION, CONVOLUTION(*meta_args), meta_args)
    assert (laid_out.shape, laid_out.stride()) == (real.shape, real.stride())
