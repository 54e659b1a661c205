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
    assert TrainingStep().steps is None and TrainingStep().zero_grad  # None: the steady state
    with pytest.raises(ValueError, match=r"steps must be a positive integer \(or None: until the step.s memory repeats\), got 0"):
        TrainingStep(steps=0)
    with pytest.raises(ValueError, match=r"steps must be a positive integer \(or None.*got True"):
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


def _five_layers():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.GELU(), torch.nn.Linear(256, 256),
                                torch.nn.GELU(), torch.nn.Linear(256, 64))
    return model, torch.randn(512, 64)


def test_recompute_is_apart_from_plan_and_measured_as_estimated(thunder):
    model, x = _five_layers()
    r = peakmem.estimate_step(model, x, loss_fn=mse_loss, recompute=True)
    assert r.frontend == "thunder" and r.recomputation.names  # recompute= is Thunder's: it rewrites its traces
    m = peakmem.measure_step(model, x, loss_fn=mse_loss, recompute=True)
    # The truth: the recomputed step run by Thunder and measured, to the byte,
    # below the step that keeps every saved tensor.
    assert m.peak_bytes == r.peak_bytes < r.recomputation.peak_before
    fits = peakmem.estimate_step(model, x, loss_fn=mse_loss, recompute="5MB")
    assert fits.peak_bytes <= 5_000_000 and set(fits.recomputation.names) <= set(r.recomputation.names)
    same = peakmem.estimate_step(model, x, loss_fn=mse_loss, recompute={"budget": 5_000_000, "max_simulations": 5000})
    assert same.recomputation.names == fits.recomputation.names


def test_the_old_recompute_spellings_warn_and_do_the_same(thunder):
    model, x = _five_layers()
    new = peakmem.estimate_step(model, x, loss_fn=mse_loss, recompute="5MB")
    with pytest.warns(DeprecationWarning, match=r"plan=\{'recompute': True\} and plan=\{'budget': \.\.\.\}") as w:
        old = peakmem.estimate_step(model, x, loss_fn=mse_loss, plan={"budget": "5MB"})
    assert w[0].filename == __file__  # the warning names the caller's line
    assert (old.recomputation.names, old.peak_bytes) == (new.recomputation.names, new.peak_bytes)
    with pytest.warns(DeprecationWarning):
        old = peakmem.estimate_step(model, x, loss_fn=mse_loss, plan={"recompute": True})
    assert old.recomputation.names == peakmem.estimate_step(model, x, loss_fn=mse_loss,
                                                            recompute=True).recomputation.names


def test_recompute_mistakes_are_named():
    with pytest.raises(ValueError, match="recompute: unknown option 'scratch' .*budget, time_budget, max_simulations"):
        TrainingStep(recompute={"scratch": False})
    with pytest.raises(TypeError, match="recompute must be True, a budget"):
        TrainingStep(recompute=2.5)
    with pytest.raises(ValueError, match="plan= and recompute= together are not modelled"):
        TrainingStep(plan=True, recompute=True)
    with pytest.warns(DeprecationWarning), pytest.raises(ValueError, match="recompute= given twice"):
        TrainingStep(plan={"recompute": True}, recompute="1GiB")
    assert TrainingStep(recompute=False).recompute is None and TrainingStep(recompute=True).recompute == {}
    # A plan's names: as a list, a tuple or under "names"; a bare string is not a list of names.
    assert TrainingStep(recompute=["t1", "t2+"]).recompute == {"names": ("t1", "t2+")}
    assert TrainingStep(recompute={"names": ["t1"], "budget": 5}).recompute == {"names": ("t1",), "budget": 5}
    with pytest.raises(TypeError, match="names must be a list of names"):
        TrainingStep(recompute={"names": "t1"})
    model, x = _five_layers()
    # The eager front end plans selective checkpointing under a budget:
    # names of Thunder's saved tensors mean nothing to it.
    with pytest.raises(ValueError, match="recompute: names are Thunder's"):
        peakmem.estimate_step(model, x, loss_fn=mse_loss, recompute=["t1"], frontend="eager")


def test_an_unknown_keyword_is_a_type_error_naming_it():
    from peakmem.batch_formula import peak_formula
    from peakmem.batch_search import max_batch_size

    model, x = MLP(dim=16, hidden=32), torch.randn(4, 16)
    for run in (peakmem.estimate_step, peakmem.measure_step, peakmem.export_step):
        name = run.__name__
        with pytest.raises(TypeError, match=rf"^{name}\(\) got an unexpected keyword argument 'los_fn' "
                                            r"\(did you mean 'loss_fn'\?\)"):
            run(model, x, los_fn=mse_loss)
        # Checked before the strategy's process group is made.
        with pytest.raises(TypeError, match=rf"^{name}\(\) got an unexpected keyword argument 'wold_size'"):
            run(model, x, strategy="ddp", wold_size=2)
    # A keyword of another of the step's functions is not this one's.
    with pytest.raises(TypeError, match=r"export_step\(\) got an unexpected keyword argument 'budget'"):
        peakmem.export_step(model, x, loss_fn=mse_loss, budget="1GiB")
    with pytest.raises(TypeError, match=r"measure_step\(\) got an unexpected keyword argument 'device_memory'"):
        peakmem.measure_step(model, x, loss_fn=mse_loss, device_memory="1GiB")
    with pytest.raises(TypeError, match=r"max_batch_size\(\) got an unexpected keyword argument 'optimiser'"):
        max_batch_size(model, lambda n: (torch.randn(n, 16),), "1GiB", optimiser=torch.optim.SGD)
    with pytest.raises(TypeError, match=r"peak_formula\(\) got an unexpected keyword argument 'size'"):
        peak_formula(model, lambda n: (torch.randn(n, 16),), size=(2, 3, 4))


def test_help_lists_every_keyword_each_function_takes():
    from typing import get_type_hints

    from peakmem.batch_search import max_batch_size
    from peakmem.step.options import EstimateOptions, RunOptions, StepOptions

    for run, options in ((peakmem.estimate_step, EstimateOptions), (peakmem.measure_step, RunOptions),
                         (peakmem.export_step, StepOptions), (max_batch_size, EstimateOptions)):
        for key in get_type_hints(options):
            assert f"\n{key}: " in run.__doc__, (run.__name__, key)
    assert "\nallocator: " not in peakmem.measure_step.__doc__


def test_kwargs_is_kwinputs_old_spelling():
    model, x = MLP(dim=16, hidden=32), torch.randn(4, 16)

    class Keyworded(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = model

        def forward(self, *, x):
            return self.inner(x).square().mean()

    # The eager front end's first estimate in a process can differ from the
    # later ones (on this step it is 768 bytes above them and the
    # measurement): the recording's, not the spelling's; one is made first.
    peakmem.estimate_step(Keyworded(), kwinputs={"x": x}, frontend="eager")
    new = peakmem.estimate_step(Keyworded(), kwinputs={"x": x}, frontend="eager")
    with pytest.warns(DeprecationWarning, match=r"estimate_step\(kwargs=...\) is deprecated .*: pass kwinputs="):
        old = peakmem.estimate_step(Keyworded(), kwargs={"x": x}, frontend="eager")
    measured = peakmem.measure_step(Keyworded(), kwinputs={"x": x}, frontend="eager")
    assert (old.peak_bytes, old.final_bytes) == (new.peak_bytes, new.final_bytes) == (measured.peak_bytes,
                                                                                      measured.final_bytes)
    with pytest.raises(TypeError, match=r"estimate_step\(\) got kwinputs= and kwargs=, its old spelling"):
        peakmem.estimate_step(Keyworded(), kwinputs={"x": x}, kwargs={"x": x}, frontend="eager")
