"""``export_step``: the step as a portable step file (docs/step-file.md)."""

from __future__ import annotations

import json
from typing import Any, Unpack

from ..distribution import with_strategy
from .frontend import records
from .options import RunOptions, takes
from .running import _import_torch_and_thunder
from .tracing import _checked_step_module, _recomputed, _step_program
from .training_step import TrainingStep

__all__ = ["export_step"]


def _traced_step_file(model: Any, inputs: tuple, step: TrainingStep) -> dict:
    """Thunder's step as a step file's JSON object (docs/step-file.md),
    written by C++ from the step's spec (frontend/step_file.h): the traces
    Thunder runs with `step`'s plan and recomputation, as estimate_step
    simulates them."""
    from .._core import step_file_json

    _torch, thunder = _import_torch_and_thunder()
    opt_spec = step.optimizer_spec()
    module = _checked_step_module(model, inputs, step)
    program, _ = _step_program(thunder, module, inputs, step, opt_spec, step.plan, later_program=True)
    if step.recompute is not None:
        program = _recomputed(program, step.recompute)
    return step_file_json(str(program.forward), str(program.backward), program.spec,
                                program.optimizer_first, program.optimizer_later, program.optimizer)


def _recorded_step_file(model: Any, inputs: tuple, step: TrainingStep) -> dict:
    """The eager step recorded, as a recorded step file's JSON object; with
    ``recompute=``, the planned step (peakmem.step.eager_recompute's plan,
    as estimate_step makes it, installed on a meta replica) recorded."""
    from .budget import _pricing_requested
    from .eager import recorded_step_file
    from .estimate import _planned_eager

    if step.recompute is not None:
        model, inputs, step, _plan = _planned_eager(model, inputs, step, _pricing_requested())
    return recorded_step_file(model, inputs, step)


@takes(RunOptions)
@with_strategy
def export_step(model: Any, *inputs: Any, path: str | None = None, **options: Unpack[RunOptions]) -> dict:
    """The step ``estimate_step`` would simulate, as a portable step file
    (docs/step-file.md): both traces as printed text, the names that join
    them, what the step holds, each value's module, and the optimizer's
    ``step()`` programs. Written to `path` (JSON) when given; returned as
    a dict either way. ``peakmem step STEP.json`` simulates it without
    Python, with the same numbers as ``estimate_step``. With
    the eager front end (``frontend``, as ``estimate_step`` resolves it:
    a plain module's default) the file is the recorded step
    (docs/step-file.md, "Recorded steps"; peakmem.step.eager). With
    `plan` or `recompute`, the planned step as estimate_step simulates it
    (the same choices; ``peakmem step`` gives the same peak): on Thunder
    its rewritten traces, on the eager front end the recording of the step
    with the selective-checkpointing plan installed (a recording cannot be
    planned again from its file: ``peakmem plan --recompute`` reads
    Thunder's step files)."""
    step, model = TrainingStep.of(options).resolved(model)
    if records(step.frontend):
        out, indent = _recorded_step_file(model, tuple(inputs), step), None
    else:
        out, indent = _traced_step_file(model, tuple(inputs), step), 1
    if path is not None:
        with open(path, "w") as f:
            json.dump(out, f, indent=indent)
    return out
