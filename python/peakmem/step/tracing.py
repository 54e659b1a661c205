"""Thunder's front end: the step traced by ``thunder.jit`` (one call and one
backward), its two traces and the names that join them, ready to simulate
(``_StepProgram``), recomputed in the backward where asked."""

from __future__ import annotations

import time
import traceback
from dataclasses import dataclass, replace
from typing import Any, Callable

from ..measure import local_shard
from ..step_checks import check_devices, check_loss_fn_captures
from .budget import _budget
from .holdings import (_distinct_storages, _held_by_module, _input_tensors, _printed_device, _rank_and_world_size,
                       _storage_bytes, _storage_key, _storage_nbytes)
from .compiled import compiled_regions_refused
from .running import _backward, _import_torch_and_thunder, _step_failure
from .training_step import TrainingStep


def _step_module(model: Any, loss_fn: Callable | None, model_inputs: int | None = None):
    """The module Thunder traces: the model, with the loss inside when given
    (the model called with the first `model_inputs` inputs, all when None;
    the loss with all of them)."""
    import torch

    if loss_fn is None:
        return model

    class WithLoss(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, *inputs):
            return loss_fn(self.model(*inputs[:model_inputs]), *inputs)

    return WithLoss()


def _checked_step_module(model: Any, inputs: tuple, step: TrainingStep):
    """_step_module, after the checks that name a mistake before Thunder
    traces (peakmem.step_checks): inputs on another device than the model,
    a loss_fn reading tensors that are not inputs. A transform may place
    the model itself (FSDP materializes meta parameters): then devices are
    not checked."""
    if step.transform is None:
        check_devices(model, inputs)
    check_loss_fn_captures(step.loss_fn, model, inputs)
    step.model_call(inputs)  # the count checked before Thunder traces
    return _step_module(model, step.loss_fn, step.model_inputs)


def _jit(thunder: Any, module: Any, transform: Callable | None, plan: bool | dict = False,
         recompute: tuple[str, ...] = ()) -> tuple[Any, Any]:
    """The jitted module (transformed), and what holds the parameters the
    step trains: the module, or the transformed module (a distributed
    transform's shards). `plan`: Thunder runs peakmem's planned forward and
    backward (planning.plan_transform; a dict gives plan's options).
    `recompute`: forward values the backward recomputes
    (recompute.recompute_transform)."""
    transforms = []
    if plan:
        from ..planning import plan_transform

        transforms.append(plan_transform(**(plan if isinstance(plan, dict) else {})))
    if recompute:
        from ..recompute import recompute_transform

        transforms.append(recompute_transform(recompute))
    jm = thunder.jit(module, transforms=transforms)
    if transform is None:
        return jm, module
    try:
        jm = transform(jm)
    except Exception as e:
        raise RuntimeError(f"the transform failed: {type(e).__name__}: {e}") from e
    return jm, jm


def _trace_step(thunder: Any, module: Any, inputs: tuple, transform: Callable | None, plan: bool | dict = False,
                gradient: str | None = None):
    """Runs the jitted module once, forward and backward, for its traces."""
    jm, holder = _jit(thunder, module, transform, plan)
    params = list(holder.parameters())
    grads_before = [p.grad for p in params]
    try:
        with compiled_regions_refused():
            loss = jm(*inputs)
        cotangent_bytes = _backward(loss, gradient)
        relaid = _gradients_placed_otherwise(holder, dict(zip(map(id, params), grads_before)))
    except ValueError:
        raise
    except Exception as e:  # what Thunder cannot trace or run, or the step's own code raises
        why = ""
        meta = [x for x in inputs if getattr(x, "is_meta", False)]
        if len(meta) > 1 and "update_aliases" in "".join(traceback.format_tb(e.__traceback__)):
            why = (" (Thunder groups its tensor inputs by storage address, and every meta tensor's "
                   "is 0: with an in-place update in the program, such as batch norm's running "
                   "statistics, it takes the meta inputs for views of one tensor; pass one meta "
                   "input tensor, or estimate on CPU inputs)")
        raise _step_failure(e, module, inputs, why) from e
    finally:
        for p, g in zip(params, grads_before):
            p.grad = g
    fw = thunder.last_traces(jm)[-1]
    bw = thunder.last_backward_traces(jm)[-1]
    if bw is None:
        raise RuntimeError("Thunder made no backward trace for the step")
    return fw, bw, cotangent_bytes, holder, relaid


def _gradients_placed_otherwise(holder: Any, before: dict[int, Any]) -> list[str]:
    """The DTensor parameters whose new gradient is placed otherwise than
    they are (Thunder's DTensor mul returns a Shard gradient for a
    Replicate operand): DTensor redistributes such a gradient inside the
    optimizer's ops, which the optimizer program does not model."""
    out = []
    for path, p in holder.named_parameters():
        g = p.grad
        if g is None or g is before.get(id(p)) or not hasattr(p, "placements") or not hasattr(g, "placements"):
            continue
        if tuple(g.placements) != tuple(p.placements):
            out.append(f"'{path}' is placed {tuple(p.placements)} and its gradient {tuple(g.placements)}")
    return out


def _return_args(trace: Any) -> tuple:
    last = trace.bound_symbols[-1]
    if last.sym.name not in ("return", "python_return"):
        raise RuntimeError(f"the trace does not end with a return (its last op is {last.sym.name})")
    return last.args


def _names(x: Any) -> list[str]:
    """Names of the tensor proxies in a nested structure, in order."""
    out: list[str] = []
    if isinstance(x, (list, tuple)):
        for item in x:
            out.extend(_names(item))
    elif isinstance(x, dict):
        for item in x.values():
            out.extend(_names(item))
    elif hasattr(x, "name") and hasattr(x, "shape"):
        out.append(x.name)
    return out


def _traced_program(model: Any, inputs: tuple, step: TrainingStep) -> tuple[_StepProgram, float]:
    """The step estimate_step simulates, traced by Thunder (recomputed when
    the step asks), and the seconds Thunder took: importing it (on
    the first call) and tracing. estimate_step and peakmem.batch_formula
    (which traces a few sizes and derives the rest) both make their steps
    here."""
    start = time.perf_counter()
    _torch, thunder = _import_torch_and_thunder()  # the first call imports Thunder: its time
    importing = time.perf_counter() - start
    opt_spec = step.optimizer_spec()
    module = _checked_step_module(model, tuple(inputs), step)
    program, tracing = _step_program(thunder, module, tuple(inputs), step, opt_spec, step.plan)
    if step.recompute is not None:
        program = _recomputed(program, step.recompute)
    return program, importing + tracing


@dataclass(frozen=True)
class _StepProgram:
    """A step ready to simulate: the forward and backward (live TraceCtx),
    the optimizer's step() programs (text; None without one) and the spec
    that joins them, a dict in the step file's schema without the traces
    (docs/step-file.md; C++ reads and checks it, frontend/step_spec_json.h).
    ``recomputation``: the saved tensors recomputed in the backward, when
    asked (peakmem.recompute.search's choice)."""

    forward: Any
    backward: Any
    optimizer_first: str | None
    optimizer_later: str | None
    optimizer: str  # the optimizer's description ("" without one)
    spec: dict
    recomputation: Any = None


def _step_program(thunder: Any, module: Any, inputs: tuple, step: TrainingStep, opt_spec: Any,
                  plan: bool | dict, later_program: bool = False) -> tuple[_StepProgram, float]:
    """Traces the step (`module`: the model with its loss) with `opt_spec`
    (step.optimizer_spec()) and Thunder running each trace planned by
    `plan`'s options (False: as Thunder orders it); returns it ready to
    simulate and the seconds Thunder took. `later_program`: make the
    optimizer's later step() program even for one step (a step file may be
    run for more)."""
    import torch

    from .. import module_paths

    start = time.perf_counter()
    fw, bw, cotangent_bytes, holder, relaid = _trace_step(thunder, module, inputs, step.transform, plan,
                                                          step.gradient)
    if relaid and opt_spec is not None:
        raise ValueError("a DTensor parameter's gradient is placed otherwise than the parameter: "
                         + "; ".join(relaid) + ". The optimizer's redistribution of it is not modelled "
                         "(without an optimizer the step is)")
    tracing = time.perf_counter() - start
    names = _trace_names(fw, bw)
    tied = module_paths.tied_arguments(holder, names["forward"]["flat_args"], inputs)
    if tied:
        names["forward"]["tied"] = tied
    arguments = module_paths.argument_modules(holder)
    gradient_modules = {g: arguments[a] for a, g in zip(names["forward"]["flat_args"], names["backward"]["grads"])
                        if g and a in arguments}
    held = module_paths.held_tensors(holder, _storage_key, _storage_nbytes)
    spec: dict[str, Any] = {
        "steps": step.steps_to_run(), "zero_grad": step.zero_grad,
        "torch_threads": torch.get_num_threads(),  # the kernels' per-thread scratch
        **_rank_and_world_size(),
        "parameter_bytes": _storage_bytes(_held_by_module(holder)),
        "input_bytes": _storage_bytes(_input_tensors(inputs)),
        "input_storages": _distinct_storages(_input_tensors(inputs)),
        "cotangent_bytes": cotangent_bytes,
        **names,
        "optimizer": None,
        "modules": {"values": module_paths.value_modules([fw, bw], arguments, gradient_modules),
                    "held": [{"module": m, "bytes": b, "trainable": t} for m, b, t in held]},
    }
    first = later = None
    description = ""
    if opt_spec is not None:
        spec["optimizer"], first, later, description = _optimizer_part(opt_spec, holder,
                                                                       step.steps_to_run() > 1 or later_program)
    return _StepProgram(fw, bw, first, later, description, spec), tracing


def _optimizer_part(opt_spec: Any, holder: Any, later: bool) -> tuple[dict, str, str | None, str]:
    """The optimizer's part of the spec, its first step() program and (with
    `later`) a later one, and its description."""
    from .. import module_paths
    from ..optimizer_program import ParamInfo, optimizer_program

    trainable = [(path, p) for path, p in holder.named_parameters() if p.requires_grad]
    infos = [ParamInfo(tuple(int(d) for d in local_shard(p).shape), p.dtype, _printed_device(local_shard(p)))
             for _, p in trainable]
    programs = [optimizer_program(opt_spec, infos, True)]
    if later:
        programs.append(optimizer_program(opt_spec, infos, False))
    owners = {n: i for p in programs for n, i in p.owner.items()}
    param_modules = [module_paths.module_of_path(path) for path, _ in trainable]
    part = {
        "name": opt_spec.name,
        # What their gradients hold (a DTensor's: its local shard, dense
        # even where distribute_tensor's padded storage is larger).
        "trainable_bytes": sum(local_shard(p).numel() * p.element_size() for _, p in trainable),
        "state": sorted(programs[0].state_names),
        "modules": {n: param_modules[i] for n, i in owners.items() if i >= 0},
    }
    group = ", ".join(f"{k}={v!r}" for k, v in opt_spec.group.items())
    return (part, programs[0].text, programs[1].text if len(programs) > 1 else None,
            f"torch.optim.{opt_spec.name}({group})")


def _trace_names(fw: Any, bw: Any) -> dict[str, dict[str, list[str]]]:
    """What the spec takes from the two traces, its "forward" and
    "backward" objects: the names that cross between them."""
    data, (saved, _saved_other) = _return_args(fw)
    (grads,) = _return_args(bw)[:1]
    return {"forward": {"saved": _names(saved), "outputs": _names(data["output"]),
                        "flat_args": _names(data["flat_args"])},
            "backward": {"cotangents": _names(bw.args[1]),
                         "grads": [g.name if g is not None and hasattr(g, "shape") else None for g in grads]}}


def _recomputed(program: _StepProgram, options: dict) -> _StepProgram:
    """`program` with saved tensors recomputed in the backward
    (peakmem.recompute.search, judged by the step's peak, or the names
    given: peakmem.recompute.apply); the choice is kept as its
    ``recomputation``."""
    from .._core import simulate_step
    from .. import recompute

    # The search simulates without the module breakdown: the peak is the same.
    lean = {k: v for k, v in program.spec.items() if k != "modules"}
    if lean["optimizer"] is not None:
        lean["optimizer"] = {k: v for k, v in lean["optimizer"].items() if k != "modules"}

    def peak(fw: Any, bw: Any) -> int:
        spec = {**lean, **_trace_names(fw, bw)}
        return simulate_step(fw, bw, program.optimizer_first, program.optimizer_later, spec)["peak_bytes"]

    budget = _budget(options.get("budget"))
    if "names" in options:
        choice, fw, bw = recompute.apply(program.forward, program.backward, peak, options["names"], budget)
    else:
        bounds = {k: options[k] for k in ("time_budget", "max_simulations") if k in options}
        choice, fw, bw = recompute.search(program.forward, program.backward, peak, budget, **bounds)
    return replace(program, forward=fw, backward=bw, spec={**program.spec, **_trace_names(fw, bw)},
                   recomputation=choice)
