"""TrainingStep (peakmem.step.training_step): the step estimate_step,
measure_step, export_step and max_batch_size build from their keyword
arguments, checked once whichever front end runs it."""

from __future__ import annotations

import pytest
import torch

import peakmem
from peakmem.step import TrainingStep
from step_models import MLP, mse_loss


def test_a_step_is_checked_when_it_is_made():
    assert TrainingStep().steps == 1 and TrainingStep().zero_grad
    with pytest.raises(ValueError, match="steps must be a positive integer, got 0"):
        TrainingStep(steps=0)
    with pytest.raises(ValueError, match="steps must be a positive integer, got True"):
        TrainingStep(steps=True)
    with pytest.raises(ValueError, match="gradient must be None .* or 'ones' .*, got 'zeros'"):
        TrainingStep(gradient="zeros")
    with pytest.raises(ValueError, match="optimizer_kwargs given without an optimizer"):
        TrainingStep(optimizer_kwargs={"lr": 0.1})


@pytest.mark.parametrize("frontend", ["eager", "thunder"])
def test_each_function_checks_the_step_the_same_way(thunder, frontend):
    model, x = MLP(dim=16, hidden=32), torch.randn(4, 16)
    for run in (peakmem.estimate_step, peakmem.measure_step, peakmem.export_step):
        with pytest.raises(ValueError, match="steps must be a positive integer"):
            run(model, x, loss_fn=mse_loss, steps=0, frontend=frontend)
        with pytest.raises(ValueError, match="gradient must be None"):
            run(model, x, loss_fn=mse_loss, gradient="zeros", frontend=frontend)
