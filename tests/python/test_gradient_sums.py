"""Gradients summed in autograd's input buffers (peakmem.step.accumulation):
the eager front end's estimate equals the step run for real (measure_step,
the profiler on the CPU), where the plain step sums in place and where it
does not, though the recording's dispatch mode makes every sum out of
place.

Each model's estimate without the rewrite is checked too, by the bytes a
hand count says the out-of-place sums add (so the test fails if the rewrite
stops applying, not only if it goes wrong)."""

from __future__ import annotations

import contextlib

import pytest
import torch

import peakmem
from peakmem.step import accumulation


class Slices(torch.nn.Module):
    """A weight's 16 slices each used once: 16 gradients of the whole
    weight (select_backward's zeros with one slice filled) summed into one."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(16, 256, 256))

    def forward(self, x):
        return sum((x @ self.w[i]).sum() for i in range(16))


class Tied(torch.nn.Module):
    """An embedding whose weight is the output layer's too (a tied LM head)."""

    def __init__(self, vocab: int = 4096, width: int = 256):
        super().__init__()
        self.embedding = torch.nn.Embedding(vocab, width)

    def forward(self, ids):
        return torch.nn.functional.linear(self.embedding(ids), self.embedding.weight).sum()


@contextlib.contextmanager
def _observed_sums():
    """The recording without the rewrite: every sum out of place, as the dispatch mode runs it."""
    original = accumulation.Accumulations.during_backward

    @contextlib.contextmanager
    def none(self, diagnostics):
        yield []

    accumulation.Accumulations.during_backward = none
    try:
        yield
    finally:
        accumulation.Accumulations.during_backward = original


WEIGHT = 16 * 256 * 256 * 4  # Slices' weight: 4,194,304 bytes


@pytest.mark.parametrize("model, inputs, out_of_place_extra", [
    # In place in the plain step: each select_backward gradient is the
    # buffer's only reference, dense and not a view. Its peak is then while
    # select_backward turns a slice's gradient (W/16) into a whole weight's
    # (W) beside the running sum (W): 2W + W/16. Out of place, it is a sum
    # beside the two gradients it adds: 3W. The difference is W - W/16.
    (Slices, lambda: (torch.randn(8, 256),), WEIGHT - WEIGHT // 16),
    # Out of place in the plain step too: the head's weight gradient is the
    # transpose of mm's result, a view, whose base its autograd meta holds.
    (Tied, lambda: (torch.randint(0, 4096, (2, 16)),), 0),
])
def test_the_plain_steps_sums_are_estimated_as_it_makes_them(model, inputs, out_of_place_extra):
    torch.manual_seed(0)
    m, args = model(), inputs()
    measured = peakmem.measure_step(m, *args, frontend="eager")
    estimate = peakmem.estimate_step(m, *args, frontend="eager")
    assert (estimate.peak_bytes, estimate.final_bytes) == (measured.peak_bytes, measured.final_bytes)
    with _observed_sums():
        observed = peakmem.estimate_step(m, *args, frontend="eager")
    assert observed.peak_bytes - measured.peak_bytes == out_of_place_extra


def test_a_profiler_already_running_leaves_the_sums_as_observed_and_says_so():
    torch.manual_seed(0)
    m, x = Slices(), torch.randn(8, 256)
    with torch.autograd.profiler_legacy.profile():
        estimate = peakmem.estimate_step(m, x, frontend="eager")
    measured = peakmem.measure_step(m, x, frontend="eager")
    assert estimate.peak_bytes - measured.peak_bytes == WEIGHT - WEIGHT // 16
    assert any("a profiler was already running" in d for d in estimate.report.diagnostics)


@pytest.mark.parametrize("zero_grad", [True, False])
def test_two_steps_sum_as_the_plain_steps_do(zero_grad):
    # Each backward's sums are told apart and rewritten on their own; with
    # zero_grad=False the second backward adds into the gradient the first
    # one's in-place sum became.
    torch.manual_seed(0)
    m, x = Slices(), torch.randn(8, 256)
    step = {"frontend": "eager", "steps": 2, "zero_grad": zero_grad, "optimizer": torch.optim.SGD}
    measured = peakmem.measure_step(m, x, **step)
    estimate = peakmem.estimate_step(m, x, **step)
    assert (estimate.peak_bytes, estimate.final_bytes) == (measured.peak_bytes, measured.final_bytes)
