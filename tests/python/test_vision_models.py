"""torchvision's ResNet-50 and a small U-Net (vision_models.py): one AdamW
step each on the eager front end, the estimate equal to the step run for
real on the CPU (measure_step, the profiler) to the byte, from the CPU
model and from its meta copy. Their convolutions outside
convolution_scratch.h's measured rules (strided, 1x1 batch-split,
transposed) are asked of oneDNN (step/cpu_kernel_probe.py)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import peakmem
from vision_models import MODELS


@pytest.mark.parametrize("name", sorted(MODELS))
def test_an_adamw_step_is_exact_on_cpu_and_meta(name):
    # One step: its peak is AdamW's. (The steady step of ResNet-50 peaks in
    # its second backward, where a oneDNN buffer is missed: below.)
    step = {"loss_fn": lambda out, x, y: F.cross_entropy(out, y), "model_inputs": 1,
            "optimizer": torch.optim.AdamW, "frontend": "eager", "steps": 1}
    model, inputs = MODELS[name]("cpu")
    estimate = peakmem.estimate_step(model, *inputs, **step)
    measured = peakmem.measure_step(model, *inputs, **step)
    assert (estimate.peak_bytes, estimate.final_bytes) == (measured.peak_bytes, measured.final_bytes)
    assert not any(d.startswith("statement ") for d in estimate.report.diagnostics), estimate.report.diagnostics
    meta_model, meta_inputs = MODELS[name]("meta")
    on_meta = peakmem.estimate_step(meta_model, *meta_inputs, **step)
    assert (on_meta.peak_bytes, on_meta.final_bytes) == (estimate.peak_bytes, estimate.final_bytes)


@pytest.mark.xfail(strict=True, reason="a oneDNN buffer of ResNet-50's backward is not counted: the 3x3 "
                   "convolution_backward of layer4 (512 channels, 2x2 images) allocates and frees 75,645,184 bytes "
                   "inside itself, and the step's backward peaks 19,054,848 bytes above the estimate there (a single "
                   "SGD step too, whose backward is its peak)")
def test_the_steady_resnet50_step_whose_backward_peaks_is_exact():
    step = {"loss_fn": lambda out, x, y: F.cross_entropy(out, y), "model_inputs": 1,
            "optimizer": torch.optim.SGD, "optimizer_kwargs": {"lr": 0.1}, "frontend": "eager"}
    model, inputs = MODELS["resnet50"]("cpu")
    estimate = peakmem.estimate_step(model, *inputs, **step)
    measured = peakmem.measure_step(model, *inputs, **step)
    assert (estimate.peak_bytes, estimate.final_bytes) == (measured.peak_bytes, measured.final_bytes)
