"""The default front end is what the user runs (peakmem.step.frontend): a
plain module's step is the eager one, a ``thunder.jit`` module's Thunder's,
and the estimate under each default equals the step measured under the same
default (measure_step, the step run for real on the CPU), to the byte.

Which front end made a report is its ``frontend``; an estimate says it
again by its seconds: Thunder's path times its tracing (``"thunder"``), the
eager path its recording (``"record"``).
"""

from __future__ import annotations

import pytest
import torch

import peakmem
from step_models import MLP, mse_loss

ADAMW = {"loss_fn": mse_loss, "optimizer": torch.optim.AdamW, "steps": 2}


def _model_and_input():
    torch.manual_seed(0)
    return MLP(dim=64, hidden=128), torch.randn(16, 64)


def test_a_plain_module_is_estimated_and_measured_eagerly():
    model, x = _model_and_input()
    estimate = peakmem.estimate_step(model, x, **ADAMW)
    measured = peakmem.measure_step(model, x, **ADAMW)
    assert (estimate.frontend, measured.frontend) == ("eager", "eager")
    assert "record" in estimate.seconds and "thunder" not in estimate.seconds
    assert (estimate.peak_bytes, estimate.final_bytes) == (measured.peak_bytes, measured.final_bytes)


def test_a_thunder_jit_module_is_estimated_and_measured_under_thunder(thunder):
    model, x = _model_and_input()
    jitted = thunder.jit(model)
    estimate = peakmem.estimate_step(jitted, x, **ADAMW)
    measured = peakmem.measure_step(jitted, x, **ADAMW)
    assert (estimate.frontend, measured.frontend) == ("thunder", "thunder")
    assert "thunder" in estimate.seconds and "record" not in estimate.seconds
    assert (estimate.peak_bytes, estimate.final_bytes) == (measured.peak_bytes, measured.final_bytes)
    # The jitted module stands for the module it wraps: its parameters are
    # the module's (counted once), and the step is the one Thunder runs for it.
    on_module = peakmem.estimate_step(model, x, frontend="thunder", **ADAMW)
    assert (on_module.peak_bytes, on_module.final_bytes) == (estimate.peak_bytes, estimate.final_bytes)
    assert estimate.by_category["parameters"] == sum(p.numel() * 4 for p in model.parameters())


def test_a_thunder_only_option_picks_thunder(thunder):
    model, x = _model_and_input()
    r = peakmem.estimate_step(model, x, loss_fn=mse_loss, transform=lambda jm: jm)
    assert r.frontend == "thunder" and "thunder" in r.seconds
    ddp = peakmem.estimate_step(model, x, loss_fn=mse_loss, strategy="ddp", world_size=2)
    assert ddp.frontend == "thunder"
    exported = peakmem.export_step(model, x, loss_fn=mse_loss)
    assert "peakmem_recorded_step" in exported  # a plain module's file is the eager record
    assert "peakmem_step" in peakmem.export_step(thunder.jit(model), x, loss_fn=mse_loss)


def test_max_batch_size_follows_the_model(thunder):
    model, _ = _model_and_input()
    meta = model.to("meta")

    def make(b):
        return (torch.randn(b, 64, device="meta"),)

    lines = []
    eager = peakmem.max_batch_size(meta, make, "1GiB", high=4, loss_fn=mse_loss, progress=lines.append)
    assert eager.report.frontend == "eager" and eager.traces == 0
    assert "max_batch_size: n=1: recording the step (eager) ..." in lines
    assert not any("tracing the step with Thunder" in line for line in lines)
    traced = peakmem.max_batch_size(thunder.jit(meta), make, "1GiB", high=4, loss_fn=mse_loss,
                                    method="search", progress=False)
    assert traced.report.frontend == "thunder" and traced.traces > 0


def test_front_end_mistakes_are_named(thunder):
    model, x = _model_and_input()
    with pytest.raises(ValueError, match="frontend must be None .* 'thunder', 'eager' or 'compile', got 'jax'"):
        peakmem.estimate_step(model, x, loss_fn=mse_loss, frontend="jax")
    with pytest.raises(ValueError, match="transform need Thunder"):
        peakmem.estimate_step(model, x, loss_fn=mse_loss, transform=lambda jm: jm, frontend="eager")
    with pytest.raises(ValueError, match="kwinputs= .* needs frontend='eager'"):
        peakmem.estimate_step(thunder.jit(model), loss_fn=mse_loss, kwinputs={"x": x})
    with pytest.raises(ValueError, match="strategy='fsdp-zero3' on the 'eager' front end is not modelled"):
        peakmem.estimate_step(model, x, loss_fn=mse_loss, strategy="fsdp-zero3", world_size=2, frontend="eager")
    with pytest.raises(ValueError, match="the formula is derived from Thunder's traces"):
        peakmem.peak_formula(model, lambda b: (torch.randn(b, 64),), loss_fn=mse_loss, frontend="eager")


def test_a_thunder_jit_module_with_options_peakmem_would_drop_is_refused(thunder):
    model, x = _model_and_input()
    with pytest.raises(ValueError, match=r"runs the executors \['torch', 'python'\], not Thunder's defaults"):
        peakmem.estimate_step(thunder.jit(model, executors=["torch"]), x, loss_fn=mse_loss)
