"""CPU convolutions outside convolution_scratch.h's measured rules, asked
of oneDNN itself (peakmem.step.cpu_kernel_probe): the eager estimate equals
the step run for real (measure_step, the profiler), and says that it asked;
a call too large to run, or one met while a profiler is on, stays named as
not counted."""

from __future__ import annotations

import pytest
import torch

import peakmem
from peakmem.step import cpu_kernel_probe


class _Strided(torch.nn.Module):
    """A stride-2 3x3 convolution whose input gradient is asked for (the
    second's): oneDNN's strided backward-data kernel, outside the rules."""

    def __init__(self) -> None:
        super().__init__()
        self.a = torch.nn.Conv2d(3, 16, 3, padding=1)
        self.b = torch.nn.Conv2d(16, 32, 3, stride=2, padding=1)

    def forward(self, x):
        return self.b(torch.relu(self.a(x))).mean()


class _DepthwiseChannelsLast(torch.nn.Module):
    """ConvNeXt's depthwise 7x7 in channels-last memory: grouped and
    channels-last, both outside the rules."""

    def __init__(self) -> None:
        super().__init__()
        self.pw = torch.nn.Conv2d(3, 32, 1)
        self.dw = torch.nn.Conv2d(32, 32, 7, padding=3, groups=32)

    def forward(self, x):
        return self.dw(self.pw(x).contiguous(memory_format=torch.channels_last)).square().mean()


def _probed(diagnostics: list[str]) -> bool:
    return any("counted by running each kernel once on this CPU" in d for d in diagnostics)


@pytest.mark.parametrize("net", [_Strided, _DepthwiseChannelsLast], ids=["strided", "depthwise_channels_last"])
def test_a_convolution_outside_the_rules_is_exact_on_cpu_and_meta(net):
    torch.manual_seed(0)
    model, x = net(), torch.randn(8, 3, 24, 24)
    step = {"optimizer": torch.optim.AdamW, "frontend": "eager", "loss_fn": lambda out, *_: out}
    estimate = peakmem.estimate_step(model, x, **step)
    measured = peakmem.measure_step(model, x, **step)
    assert (estimate.peak_bytes, estimate.final_bytes) == (measured.peak_bytes, measured.final_bytes)
    assert _probed(estimate.report.diagnostics), estimate.report.diagnostics
    assert not any(d.startswith("statement ") and "not counted" in d for d in estimate.report.diagnostics)
    on_meta = peakmem.estimate_step(model.to("meta"), x.to("meta"), **step)
    assert (on_meta.peak_bytes, on_meta.final_bytes) == (estimate.peak_bytes, estimate.final_bytes)


def test_without_asking_the_kernel_the_step_is_under_and_says_where(monkeypatch):
    """Past the probe's limit nothing is run: the statement is named as
    not counted, and the estimate is under the measurement there (what the
    kernel allocates is real)."""
    torch.manual_seed(0)
    model, x = _Strided(), torch.randn(8, 3, 24, 24)
    step = {"optimizer": torch.optim.AdamW, "frontend": "eager", "loss_fn": lambda out, *_: out}
    measured = peakmem.measure_step(model, x, **step)
    monkeypatch.setattr(cpu_kernel_probe, "PROBE_LIMIT_BYTES", 0)
    estimate = peakmem.estimate_step(model, x, **step)
    assert estimate.peak_bytes < measured.peak_bytes
    named = [d for d in estimate.report.diagnostics if "that peakmem runs a kernel on to ask it" in d]
    assert named and all(d.startswith("statement ") and "convolution" in d for d in named), named
    assert not _probed(estimate.report.diagnostics)


def test_a_running_profiler_leaves_the_call_named():
    torch.manual_seed(0)
    model, x = _DepthwiseChannelsLast(), torch.randn(2, 3, 12, 12)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]):
        estimate = peakmem.estimate_step(model, x, frontend="eager", loss_fn=lambda out, *_: out)
    assert any("a profiler is running, so the kernel could not be asked" in d for d in estimate.report.diagnostics)


def test_asking_the_kernel_prints_nothing(capfd):
    """The profiler's own start and stop lines (its C++ side writes them to
    standard error) are not the estimate's to print."""
    torch.manual_seed(0)
    model, x = _Strided(), torch.randn(3, 3, 20, 20)  # a shape no other test asks about
    estimate = peakmem.estimate_step(model, x, frontend="eager", loss_fn=lambda out, *_: out)
    assert _probed(estimate.report.diagnostics)
    printed = capfd.readouterr()
    assert "profiler" not in printed.err + printed.out, printed
