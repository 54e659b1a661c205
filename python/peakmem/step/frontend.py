"""Which front end runs a training step: Thunder's tracing or the eager recording.

``estimate_step``, ``measure_step``, ``export_step`` and ``max_batch_size``
take ``frontend=None`` by default, which estimates the step the way the user
runs it:

* a module made by ``thunder.jit`` (a ``ThunderModule``) runs under Thunder:
  ``"thunder"``, on the module it wraps;
* a step given an option only Thunder's path has (``transform=``, ``plan=``,
  ``strategy=``: each rewrites or distributes Thunder's traces) or
  ``recompute=`` (Thunder's traces rewritten; with ``frontend="eager"``
  said outright, selective checkpointing planned instead,
  peakmem.step.eager_recompute) is Thunder's: ``"thunder"``;
* any other module is one its user runs eagerly: ``"eager"``
  (peakmem.step.eager).

* a module made by ``torch.compile(module)`` (an ``OptimizedModule``), or
  one with modules compiled inside it (``torch.compile(block)``,
  ``block.compile()``), runs the programs Inductor generates:
  ``"compile"``, recorded as the eager front end records a step, with
  Inductor's forward and backward programs in place of the compiled
  modules' ATen calls (peakmem.step.inductor_replay).
  ``frontend="eager"`` on an ``OptimizedModule`` estimates the module it
  compiles, run eagerly: the comparison of what compiling saves.

Other torch.compile'd code (a compiled ``forward`` function, a compiled
function the step calls) is refused on every front end
(peakmem.step.compiled), and so is compiled code inside a model on the
Thunder and eager front ends: its memory is the compiled program's.
``frontend="thunder"``, ``"eager"`` or ``"compile"`` says it outright. Either way a
``ThunderModule`` stands for the module it wraps: the Thunder path jits that
module itself (with the transforms the step's options ask for), and the
eager path runs it without Thunder.
"""

from __future__ import annotations

import sys
from typing import Any, Literal

__all__ = ["FRONTENDS", "Frontend", "records", "resolve_frontend", "unwrap_thunder_module"]

Frontend = Literal["thunder", "eager", "compile"]
FRONTENDS: tuple[str, ...] = ("thunder", "eager", "compile")


def records(frontend: str | None) -> bool:
    """Whether `frontend` records the step as PyTorch runs it (the eager
    front end, and the compiled step it records with Inductor's programs),
    rather than tracing it with Thunder."""
    return frontend in ("eager", "compile")


def _is_thunder_module(model: Any) -> bool:
    """Whether `model` is ``thunder.jit``'s module wrapper. Thunder is
    imported when one exists, so it is looked up, never imported here."""
    module = sys.modules.get("thunder.core.module")
    return module is not None and isinstance(model, module.ThunderModule)


def unwrap_thunder_module(model: Any) -> Any:
    """The module a ``thunder.jit`` module wraps (its ``_model``); any other
    model as it is. ValueError for a jitted module carrying transforms
    (FSDP, DDP, a user's own): the step is traced from the wrapped module by
    peakmem's own ``thunder.jit``, which would leave them out; they go in
    as ``transform=`` (or ``strategy=``) instead."""
    if not _is_thunder_module(model):
        return model
    import thunder
    from thunder.extend import get_always_executors, get_default_executors

    compiled = thunder.compile_data(model)
    transforms = list(getattr(compiled, "transforms", None) or [])
    if transforms:
        names = ", ".join(type(t).__name__ for t in transforms)
        raise ValueError(
            f"the thunder.jit module carries transforms ({names}); peakmem traces the module it wraps with its "
            "own thunder.jit and would leave them out: pass the plain module, with transform= (a function of "
            "the jitted module) or strategy= for a distributed one")
    # Each jit adds an executor of its own ("__ad_hoc_executor_<id>"): not a choice of the user's.
    executors = [e.name for e in compiled.executors_list if not e.name.startswith("__ad_hoc_executor")]
    defaults = [e.name for e in (*get_default_executors(), *get_always_executors())]
    if executors != defaults:
        raise ValueError(
            f"the thunder.jit module runs the executors {executors}, not Thunder's defaults {defaults}; "
            "peakmem traces the module it wraps with Thunder's defaults, whose traces differ: pass a module "
            "jitted with the default executors")
    return model._model


def resolve_frontend(model: Any, frontend: Frontend | None, kwargs: dict | None = None,
                     **thunder_only: Any) -> tuple[Frontend, Any]:
    """(the front end the step runs on, the module to run). `thunder_only`:
    the options only the Thunder path takes, by name, with their values
    (a false value is not given). ValueError for a front end that is
    neither, keyword inputs to Thunder's (it calls ``model(*inputs)``), or
    Thunder's options with ``frontend="eager"``; CompiledStepError (a
    ValueError) for compiled code the front end does not model."""
    from .compiled import compiled_parts, refuse_compiled
    from .inductor_replay import is_compiled_module

    if frontend not in (None, *FRONTENDS):
        raise ValueError(f"frontend must be None (what the model runs: a thunder.jit module under Thunder, a "
                         f"torch.compile'd one compiled, any other eagerly), 'thunder', 'eager' or 'compile', "
                         f"got {frontend!r}")
    given = [name for name, value in thunder_only.items() if value]
    compiled = is_compiled_module(model) or bool(compiled_parts(model))
    if compiled and frontend in (None, "compile"):
        if given:
            raise ValueError(f"{', '.join(given)} are not modelled for a torch.compile'd step (Inductor's "
                             "partitioner chooses what the backward recomputes); pass frontend='eager' for the "
                             "module run eagerly")
        return "compile", model
    if frontend == "compile":
        raise ValueError("frontend='compile' records the programs of a model's torch.compile'd modules, and "
                         "nothing of this one is compiled: pass torch.compile(model) (or compile its blocks)")
    if is_compiled_module(model) and frontend == "eager":
        model = model._orig_mod  # the module the user compiled, run eagerly
    refuse_compiled(model)
    if frontend == "eager":
        # The eager front end plans recomputation of its own (peakmem.step.eager_recompute).
        given = [name for name in given if name != "recompute"]
    if frontend is None:
        frontend = "thunder" if _is_thunder_module(model) or given else "eager"
    if frontend == "thunder":
        if kwargs:
            raise ValueError("kwinputs= (keyword inputs to the model) needs frontend='eager'; Thunder's step "
                             "calls model(*inputs)")
    elif given:
        raise ValueError(f"{', '.join(given)} need Thunder: pass frontend='thunder' (they rewrite Thunder's traces)")
    return frontend, unwrap_thunder_module(model)
