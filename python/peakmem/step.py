"""One training step, predicted (``estimate_step``) and measured (``measure_step``).

The step, as both functions run it (``steps`` times in a row)::

    def step():
        loss = model(*inputs)              # or loss_fn(model(*inputs), *inputs), traced together
        loss.backward()                    # gradient="ones": loss.backward(torch.ones_like(loss))
        if optimizer is not None:
            optimizer.step()
        if zero_grad:
            optimizer.zero_grad(set_to_none=True)   # the module's, without an optimizer
        # `loss` dies when step() returns

with the module's parameters and buffers held throughout and the caller
holding the inputs. Every byte a tensor holds counts: parameters, buffers and
inputs included.

Which front end makes the step: by default the one the user runs
(peakmem.step_frontend): a ``thunder.jit`` module's under Thunder, as
below, any other module's as eager PyTorch runs it (peakmem.eager_step);
``frontend=`` says it outright.

How Thunder's estimate is made (on ``meta`` inputs nothing is allocated): the
module is traced with ``thunder.jit`` (one call and one ``backward`` on the
given inputs), and the two execution traces are simulated by the runtime
model and joined with the identity of every tensor carried across (in C++,
peakmem/models/training_step.h, which ``peakmem step STEP.json`` runs on a
file ``export_step`` writes):

* forward: called as Thunder's autograd function calls it, the caller
  holding every argument (parameters, buffers, inputs);
* backward: called as ``ThunderFunction.backward`` calls it
  (thunder/executors/torch_autograd.py: ``compiled_backward([saved_tensors_list,
  saved_other], cotangents)`` after ``ctx.maybe_clear_saved_tensors()``), each
  saved tensor being the forward's own: a saved parameter, input or output is
  that tensor (held elsewhere, it costs the backward nothing and is never
  freed by it), two saved views of one forward storage are one storage with
  the forward's strides, and the cotangent (``torch.ones_like(loss)``, made
  by ``loss.backward()``, or by the caller with ``gradient="ones"``) is
  held until ``backward`` returns;
* gradients, as ``AccumulateGrad`` accumulates them
  (torch/csrc/autograd/functions/accumulate_grad.h): into an empty ``.grad``
  the backward's gradient is stolen (no copy) when it obeys the layout
  contract (the parameter's strides on every dimension of size other than 1)
  and nothing else holds it; into an existing ``.grad`` it is added in place
  and freed;
* the optimizer (``torch.optim.SGD``, ``Adam``, ``AdamW``; others are an
  error): its ``step()`` is written as a program of the tensor calls the
  single-tensor or foreach implementation makes (peakmem.optimizer_program) and
  simulated by the runtime model, its arguments the parameters, their
  ``.grad`` and the state kept from the step before, with the parameters,
  inputs and the loss held around it. The first step creates the state
  (Adam's ``step`` and moments, SGD's momentum buffers); it is held from
  then on.

``measure_step`` runs the same step for real on the CPU under the PyTorch
profiler (peakmem.measure's event walk), after one untimed warm-up step
(Thunder compiles on the first call) whose gradients are dropped.
"""

from __future__ import annotations

import gc
import time
import traceback
from dataclasses import dataclass, field, replace
from typing import Any, Callable

from .distribution import with_strategy
from .measure import local_shard
from .step_checks import check_devices, check_loss_fn_captures
from .step_frontend import Frontend, resolve_frontend
from .step_timeline import StepTimeline

__all__ = ["StepReport", "estimate_step", "export_step", "measure_step"]

CATEGORIES = ("parameters", "inputs", "gradients", "optimizer_state", "activations", "temporaries")


@dataclass(frozen=True)
class StepReport:
    """The memory of one training step (or ``steps`` of them), in bytes.

    Attributes:
        peak_bytes: the most bytes held at once, parameters and inputs included.
        final_bytes: bytes still held after the last step (parameters,
            buffers, inputs, gradients left by ``zero_grad=False``,
            optimizer state).
        phase_at_peak: where the peak is: ``"forward"``, ``"backward"`` or
            ``"optimizer"``; ``step_at_peak``: which step (1-based).
        by_category: the bytes held at the peak, by what they are (every key
            of CATEGORIES; they sum to ``peak_bytes``): parameters (and
            buffers), inputs, gradients (``.grad`` and gradients being
            made), optimizer_state, activations (tensors saved for the
            backward) and temporaries (everything else: intermediates, the
            loss, the cotangent, op scratch).
        by_module: the same bytes by ``nn.Module`` path, largest first (they
            sum to ``peak_bytes``; ``""`` is the top: the inputs, the loss,
            the cotangent). A parameter, its gradient and its optimizer
            state are its module's; a tensor the traces make is the module's
            whose parameters its op reads, else its inputs'
            (peakmem.module_paths says how). Estimate only.
        budget: the bytes the step must fit in (``None``: not asked);
            ``fits`` and ``headroom_bytes`` then say whether and by how much.
        forward, backward: the runtime model's reports of the two traces as
            the step runs them; optimizer: that of the first step's
            ``optimizer.step()`` program (estimate only).
        measured: ``True`` for ``measure_step``.
        frontend: the front end that made the report: ``"thunder"`` (the
            step traced, or run, by Thunder) or ``"eager"`` (recorded, or
            run, as eager PyTorch runs it); peakmem.step_frontend says
            which a call's default picks.
        timeline: the live bytes by category at every statement of every
            phase (peakmem.step_timeline.StepTimeline; estimate only): its
            ``plot()`` draws them with the phases marked, and ``plot()``
            here is that.
        seconds: wall time by part (estimate only): ``"thunder"`` (importing
            Thunder, on the first call, and tracing the step with it),
            ``"peakmem"`` (everything else) and, within it, ``"simulate"``
            (the runtime model reading and simulating the two traces).
        recomputation: with ``plan={"recompute": True}`` or a budget, what
            was recomputed in the backward instead of saved and what it did
            (peakmem.recompute.Recomputation: names, added FLOPs, the peak
            before and after).
        nccl_estimate: for a rank of a distributed step whose traces run
            collectives (estimate only): NCCL's own device buffers, outside
            PyTorch's allocator and apart from every figure above
            (peakmem.distribution.nccl_estimate with its defaults).
        allocator: for ``estimate_step(..., allocator="cuda-caching")``:
            PyTorch's CUDA caching allocator run over the whole step's
            allocation stream, the parameters and inputs allocated first
            (``peakmem.analyze``'s ``report.allocator`` dict: allocated and
            reserved bytes at the peak and the end, segments, ``fits`` the
            device memory, where it runs out). For ``measure_step`` on a
            CUDA device: the allocator's ``allocated_peak_bytes``,
            ``allocated_final_bytes``, ``reserved_peak_bytes`` and
            ``reserved_final_bytes`` over the measured steps
            (``torch.cuda.memory_stats``), relative to what was held before
            them (the parameters not included).
        report: the whole step as one ``peakmem.Report`` (estimate only):
            every phase's statements in the order the step runs them, its
            storages in the step's categories, its phases in
            ``report.phases``; what ``write`` renders.
    """

    peak_bytes: int
    final_bytes: int
    phase_at_peak: str
    step_at_peak: int
    by_category: dict[str, int] = field(default_factory=dict)
    by_module: dict[str, int] = field(default_factory=dict)
    budget: int | None = None
    fits: bool | None = None
    headroom_bytes: int | None = None
    forward: Any = None
    backward: Any = None
    optimizer: Any = None
    measured: bool = False
    frontend: str | None = None
    seconds: dict[str, float] = field(default_factory=dict)
    timeline: Any = None
    recomputation: Any = None
    nccl_estimate: dict | None = None
    allocator: dict | None = None
    report: Any = None

    def summary(self) -> dict[str, Any]:
        """The step's figures as plain data (what ``to_json`` writes and the
        repr shows): peak and final bytes, where the peak is, by category and
        by module, the budget's verdict, the allocator's figures and, for an
        estimate, the seconds by part. The per-statement timeline is
        ``timeline`` (and ``write``'s formats)."""
        out: dict[str, Any] = {
            "measured": self.measured, "frontend": self.frontend,
            "peak_bytes": self.peak_bytes, "final_bytes": self.final_bytes,
            "phase_at_peak": self.phase_at_peak, "step_at_peak": self.step_at_peak,
            "by_category": dict(self.by_category), "by_module": dict(self.by_module),
            "budget": self.budget, "fits": self.fits, "headroom_bytes": self.headroom_bytes,
            "allocator": self.allocator, "nccl_estimate": self.nccl_estimate, "seconds": dict(self.seconds)}
        return out

    def to_json(self, indent: int | None = 2) -> str:
        """``summary()`` as JSON."""
        import json

        return json.dumps(self.summary(), indent=indent)

    def __repr__(self) -> str:
        kind = "measured" if self.measured else "estimated"
        lines = [f"StepReport({kind}: peak {self.peak_bytes:,} bytes in the {self.phase_at_peak} of "
                 f"step {self.step_at_peak}; final {self.final_bytes:,} bytes"]
        if self.budget is not None:
            verdict = "fits" if self.fits else "does not fit"
            if self.headroom_bytes is not None:
                verdict += f", headroom {self.headroom_bytes:,} bytes"
            oom = (self.allocator or {}).get("out_of_memory")
            if oom:
                verdict += f"; the allocator runs out of memory at {oom['op']} ({oom['requested_bytes']:,} bytes)"
            lines.append(f"  budget {self.budget:,} bytes: {verdict}")
        if self.allocator is not None and "reserved_peak_bytes" in self.allocator:
            lines.append(f"  allocator: allocated peak {self.allocator['allocated_peak_bytes']:,}, "
                         f"reserved peak {self.allocator['reserved_peak_bytes']:,} bytes")
        if self.by_category:
            lines.append("  at the peak: " + ", ".join(f"{c} {b:,}" for c, b in self.by_category.items()))
        return "\n".join(lines) + ")"

    def write(self, format: str = "text", **options: Any) -> str | bytes:
        """The whole step in any of ``peakmem.Report.write``'s formats
        (``"html"``, ``"snapshot"``, ``"chrome-trace"``, ``"json"``,
        ``"text"``, ...): the step's statements, phase by phase, with its
        categories. Estimate only."""
        if self.report is None:
            raise ValueError("a measured step has no stream to write (estimate_step makes one)")
        return self.report.write(format, **options)

    def plot(self, ax: Any = None) -> Any:
        """The timeline on matplotlib Axes (new ones if None): live bytes by
        category, the forward, backward and optimizer of each step marked, the
        peak marked."""
        if self.timeline is None:
            raise ValueError("a measured step has no timeline (estimate_step makes one)")
        return self.timeline.plot(ax)

    def _repr_html_(self) -> str:
        from .step_timeline import step_report_html

        return step_report_html(self)


# ---------------------------------------------------------------------------
# What both functions share: the module to trace, the step, the bytes held


def _import_torch_and_thunder():
    import torch

    from ._thunder_compat import import_thunder

    return torch, import_thunder()


def _check_optimizer(optimizer: Any, optimizer_kwargs: dict | None):
    """The optimizer's OptimizerSpec (None: no optimizer); ValueError for one not modelled."""
    kwargs = dict(optimizer_kwargs or {})
    if optimizer is None:
        if kwargs:
            raise ValueError("optimizer_kwargs given without an optimizer")
        return None
    from .optimizer_program import resolve_optimizer

    return resolve_optimizer(optimizer, kwargs)


def _step_module(model: Any, loss_fn: Callable | None):
    """The module Thunder traces: the model, with the loss inside when given."""
    import torch

    if loss_fn is None:
        return model

    class WithLoss(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, *inputs):
            return loss_fn(self.model(*inputs), *inputs)

    return WithLoss()


def _checked_step_module(model: Any, inputs: tuple, loss_fn: Callable | None, transform: Callable | None):
    """_step_module, after the checks that name a mistake before Thunder
    traces (peakmem.step_checks): inputs on another device than the model,
    a loss_fn reading tensors that are not inputs. A transform may place
    the model itself (FSDP materializes meta parameters): then devices are
    not checked."""
    if transform is None:
        check_devices(model, inputs)
    check_loss_fn_captures(loss_fn, model, inputs)
    return _step_module(model, loss_fn)


def _check_gradient(gradient: str | None) -> None:
    if gradient not in (None, "ones"):
        raise ValueError(f"gradient must be None (a scalar loss) or 'ones' "
                         f"(loss.backward(torch.ones_like(loss))), got {gradient!r}")


def _backward(loss: Any, gradient: str | None) -> int:
    """Runs the step's backward from `loss` as the user's code does; returns
    the cotangent's bytes (this rank's shard for a DTensor)."""
    import torch

    if not isinstance(loss, torch.Tensor):
        raise ValueError(f"the loss must be a tensor; the step returned a {type(loss).__name__}")
    if gradient is None and loss.dim() != 0:
        raise ValueError(
            f"the loss must be a scalar tensor; the step returned shape {tuple(loss.shape)} "
            "(pass loss_fn=, reduce the model's output, or gradient='ones')")
    if not loss.requires_grad:
        raise ValueError("the loss does not require grad: no parameter of the model takes part in it")
    if gradient is None:
        loss.backward()
    else:
        loss.backward(torch.ones_like(loss))
    local = local_shard(loss)
    return local.element_size() * local.numel()


class _OptimizerFailed(Exception):
    """optimizer.step() raised (the user's optimizer, not Thunder): its error is the cause."""


def _run_step(jm: Any, inputs: tuple, optimizer: Any, zero_grad: bool, gradient: str | None) -> None:
    loss = jm(*inputs)
    _backward(loss, gradient)
    if optimizer is not None:
        try:
            optimizer.step()
        except Exception as e:
            raise _OptimizerFailed() from e
    if zero_grad:
        (optimizer if optimizer is not None else jm).zero_grad(set_to_none=True)


def _step_failure(e: Exception, module: Any, inputs: tuple, why: str = "") -> RuntimeError:
    """What a failed traced step is reported as: a failure of the user's
    optimizer, or of their model or loss (the module raises the same without
    Thunder: it is run once, eagerly, to tell), or else Thunder's (`why`:
    what is known of the reason)."""
    if isinstance(e, _OptimizerFailed):
        cause = e.__cause__
        return RuntimeError(f"optimizer.step() raised {type(cause).__name__}: {cause}")
    try:
        module(*inputs)
    except Exception as eager:
        return RuntimeError(f"the model or loss raises {type(eager).__name__}: {eager} (run without Thunder "
                            "too: the error is in the step's own code, not in the tracing)")
    import importlib.metadata

    # Thunder's interpreter ends its message with the module's whole repr.
    reason = str(e).split(" while tracing ", 1)[0]
    if reason != str(e):
        reason += f" while tracing {type(module).__name__}"
    return RuntimeError(
        f"Thunder {importlib.metadata.version('lightning-thunder')} could not trace the step: "
        f"{type(e).__name__}: {reason}{why}. Without Thunder, the step as eager PyTorch runs it is "
        "estimate_step(..., frontend='eager')")


def _rank_and_world_size() -> dict[str, int]:
    """The rank this process runs as (DTensor values are read as its shards)."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return {"rank": dist.get_rank(), "world_size": dist.get_world_size()}
    return {"rank": 0, "world_size": 0}


def _storage_key(t: Any) -> Any:
    """What identifies a tensor's storage (on meta, where every address is 0,
    the storage object; a DTensor's is its local shard's)."""
    s = local_shard(t).untyped_storage()
    return (t.device.type, s.data_ptr()) if t.device.type != "meta" else id(s)


def _storage_nbytes(t: Any) -> int:
    return local_shard(t).untyped_storage().nbytes()


def _printed_device(t: Any) -> str:
    """A tensor's device as trace types print it ("cpu", "cuda:0", "meta")."""
    d = t.device
    return f"{d.type}:{d.index}" if d.type == "cuda" and d.index is not None else (
        "cuda:0" if d.type == "cuda" else d.type)


def _distinct_storages(tensors) -> list[int]:
    """Bytes of each distinct storage behind `tensors`, in order (a view counts its whole storage once)."""
    seen: dict[Any, int] = {}
    for t in tensors:
        seen[_storage_key(t)] = _storage_nbytes(t)
    return list(seen.values())


def _storage_bytes(tensors) -> int:
    return sum(_distinct_storages(tensors))


def _held_by_module(module: Any) -> list:
    return [*module.parameters(), *module.buffers()]


def _input_tensors(inputs: tuple) -> list:
    import torch

    return [x for x in inputs if isinstance(x, torch.Tensor)]


def _budget(budget: int | str | None) -> int | None:
    if budget is None:
        return None
    if isinstance(budget, bool) or not isinstance(budget, (int, str)):
        raise TypeError(f"budget must be a number of bytes or a size such as '80GiB', got {budget!r}")
    if isinstance(budget, str):
        from . import _core

        return _core.parse_byte_size(budget)
    if budget < 0:
        raise ValueError(f"budget must not be negative, got {budget}")
    return budget


def _check_arguments(steps: Any, optimizer: Any, optimizer_kwargs: dict | None,
                     budget: int | str | None) -> tuple[Any, int | None]:
    """What estimate_step and measure_step check first: (OptimizerSpec or None, budget bytes)."""
    if not isinstance(steps, int) or isinstance(steps, bool) or steps < 1:
        raise ValueError(f"steps must be a positive integer, got {steps!r}")
    return _check_optimizer(optimizer, optimizer_kwargs), _budget(budget)


def _with_budget(report: StepReport, budget: int | None) -> StepReport:
    if budget is None:
        return report
    if report.allocator is not None and report.allocator.get("fits") is not None:
        # Priced by an allocator run with the budget as its capacity: its answer.
        # Its headroom is None where it ran out of memory (reserved bytes
        # stop where the failing request could not be met).
        return replace(report, budget=budget, fits=report.allocator["fits"],
                       headroom_bytes=report.allocator["headroom_bytes"])
    return replace(report, budget=budget, fits=report.peak_bytes <= budget,
                   headroom_bytes=budget - report.peak_bytes)


def _pricing(allocator: str, alloc_conf: str | None, device_memory: str | int | None,
             budget: int | None) -> dict:
    """_core.simulate_step's allocator arguments: with an allocator model and
    a budget but no device memory, the budget is the device's capacity."""
    if allocator != "requested" and device_memory is None and budget is not None:
        device_memory = budget
    if isinstance(device_memory, int):
        device_memory = str(device_memory)
    return {"allocator": allocator, "alloc_conf": alloc_conf, "device_memory": device_memory}


# ---------------------------------------------------------------------------
# The estimate


def _plan_options(plan: bool | dict) -> tuple[bool | dict, dict | None]:
    """`plan` split into the reordering each trace gets (planning.plan_transform's
    options; False: none) and the recomputation across the two (recompute's
    options: {"recompute": True} or {"budget": ...}; None: none)."""
    if isinstance(plan, dict) and (plan.get("recompute") or plan.get("budget") is not None):
        unknown = set(plan) - {"recompute", "budget", "time_budget", "max_simulations"}
        if unknown:
            raise ValueError(f"plan: {', '.join(sorted(unknown))} do not apply with recompute or budget "
                             "(its options: recompute, budget, time_budget, max_simulations)")
        return False, dict(plan)
    return plan, None


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
        from .planning import plan_transform

        transforms.append(plan_transform(**(plan if isinstance(plan, dict) else {})))
    if recompute:
        from .recompute import recompute_transform

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


def _traced_program(model: Any, inputs: tuple, *, loss_fn: Callable | None = None, gradient: str | None = None,
                    optimizer: Any = None, optimizer_kwargs: dict | None = None, steps: int = 1,
                    zero_grad: bool = True, transform: Callable | None = None,
                    plan: bool | dict = False) -> tuple[_StepProgram, float]:
    """The step estimate_step simulates, traced by Thunder (recomputed when
    `plan` asks), and the seconds Thunder took: importing it (on the first
    call) and tracing. estimate_step and peakmem.batch_formula (which traces
    a few sizes and derives the rest) both make their steps here."""
    start = time.perf_counter()
    _torch, thunder = _import_torch_and_thunder()  # the first call imports Thunder: its time
    importing = time.perf_counter() - start
    spec, _ = _check_arguments(steps, optimizer, optimizer_kwargs, None)
    module = _checked_step_module(model, tuple(inputs), loss_fn, transform)
    reorder, recompute = _plan_options(plan)
    _check_gradient(gradient)
    program, tracing = _step_program(thunder, module, tuple(inputs), spec, steps, zero_grad, transform,
                                     reorder, gradient=gradient)
    if recompute is not None:
        program = _recomputed(program, recompute)
    return program, importing + tracing


@with_strategy
def estimate_step(
    model: Any,
    *inputs: Any,
    loss_fn: Callable | None = None,
    gradient: str | None = None,
    optimizer: Any = None,
    optimizer_kwargs: dict | None = None,
    steps: int = 1,
    zero_grad: bool = True,
    budget: int | str | None = None,
    transform: Callable | None = None,
    plan: bool | dict = False,
    allocator: str = "requested",
    alloc_conf: str | None = None,
    device_memory: str | int | None = None,
    strategy: str | None = None,  # these three: distribution.with_strategy's
    world_size: int | None = None,
    rank: int = 0,
    kwargs: dict | None = None,
    frontend: Frontend | None = None,
) -> StepReport:
    """Predicts the memory of ``steps`` training steps of `model` on `inputs`.

    `model` is an ``nn.Module`` called as ``model(*inputs)``; ``loss_fn(output,
    *inputs)`` returns the scalar loss (``None``: the model returns it).
    ``gradient="ones"`` instead runs ``loss.backward(torch.ones_like(loss))``
    on a loss of any shape (a DTensor program's output, say: Thunder 0.2.6
    has no DTensor reduction to make a scalar with).
    `inputs` may be real tensors or on the ``meta`` device (then nothing is
    allocated: the model's parameters should be on ``meta`` too). `optimizer`
    is a class (``torch.optim.SGD``, ``Adam`` or ``AdamW``, with their own
    defaults) with `optimizer_kwargs`; `budget` bytes
    (or a size such as ``"80GiB"``) to check the peak against. See the
    module docstring for the step and how it is modelled.

    `transform` (default None) is applied to the ``thunder.jit`` module
    before it runs: a distributed transform such as
    ``lambda jm: thunder.distributed.fsdp(jm, device=...)`` or
    ``thunder.distributed.ddp``, which makes the estimate one rank's step
    (its shards of parameters, gradients and optimizer state). The caller
    initialises the process group; torch's fake process group
    (``torch.testing._internal.distributed.fake_pg``) is rank r of any world
    size in one process, so a cluster's rank is estimated on a laptop.
    ``strategy="fsdp"`` (``"fsdp-zero3"``, ``"ddp"``) with ``world_size=``
    and ``rank=`` does that itself: Thunder's transform for the strategy,
    run as that rank of a fake process group made for the call
    (peakmem.distribution).

    `plan` (default False): True (or a dict of ``peakmem.plan``'s options)
    has Thunder run peakmem's planned forward and backward
    (``peakmem.plan_transform``), so the estimate is the planned step's.
    Each trace is planned on its own, under its usual calling convention.
    ``plan={"recompute": True}`` instead recomputes saved tensors in the
    backward where that lowers the step's peak, and ``plan={"budget":
    "24GiB"}`` until the step fits (optionally ``"max_simulations"``, 5000
    by default, and ``"time_budget"``, seconds, none by default: a plan
    bounded by wall time can differ between machines):
    peakmem.recompute's search, judged by this step's simulation; the
    report's ``recomputation`` says what was chosen and the FLOPs it adds.

    `allocator` (default ``"requested"``): ``"cuda-caching"`` also runs
    PyTorch's CUDA caching allocator over the whole step's allocation
    stream (the parameters and inputs allocated first, then every phase's
    storages in the order the step makes and frees them) and fills
    ``report.allocator``: allocated and reserved bytes. `alloc_conf` is
    ``PYTORCH_CUDA_ALLOC_CONF``'s syntax (``None``: that environment
    variable's value) and `device_memory` the device's capacity
    (``"80GiB"``); with a `budget` and no `device_memory`, the budget is
    the capacity. Then ``fits`` says whether the step runs without the
    allocator running out of memory (what a GPU user runs out of is
    reserved bytes, not requested ones), and ``headroom_bytes`` is the
    capacity less the reserved peak.

    `frontend` (default None: the step as the model runs, a ``thunder.jit``
    module under Thunder and any other eagerly; a Thunder-only option,
    `transform`, `plan` or `strategy`, makes it Thunder's; see
    peakmem.step_frontend): ``"thunder"`` traces the step with Thunder (a
    ``thunder.jit`` module stands for the module it wraps), ``"eager"``
    records the step as eager PyTorch runs it
    (peakmem.eager_step): any model PyTorch runs (``transformers`` models
    included), any ``torch.optim`` optimizer class (or a callable taking
    the parameters), keyword inputs in `kwargs` (``model(*inputs,
    **kwargs)``), and a model output with a ``.loss`` (a ``transformers``
    ModelOutput given ``labels``) taken as the loss. Real tensors are
    replaced by ``meta`` stand-ins for the recording, so the user's model
    is not run or changed. `transform`, `plan` and `strategy` need Thunder.

    Raises ValueError for an optimizer or a loss peakmem cannot model, for
    inputs on another device than the parameters and for a `loss_fn` that
    reads a tensor that is not an input (targets in a closure);
    TypeError for an optimizer instance (pass its class and
    `optimizer_kwargs`); RuntimeError when Thunder cannot trace the step.
    """
    start = time.perf_counter()
    frontend, model = resolve_frontend(model, frontend, kwargs, transform=transform, plan=plan)
    if frontend == "eager":
        return _estimate_eager(model, inputs, kwargs=kwargs, loss_fn=loss_fn, gradient=gradient,
                               optimizer=optimizer, optimizer_kwargs=optimizer_kwargs, steps=steps,
                               zero_grad=zero_grad, budget=budget,
                               pricing=(allocator, alloc_conf, device_memory), start=start)
    _, limit = _check_arguments(steps, optimizer, optimizer_kwargs, budget)
    program, thunder_s = _traced_program(model, inputs, loss_fn=loss_fn, gradient=gradient, optimizer=optimizer,
                                         optimizer_kwargs=optimizer_kwargs, steps=steps, zero_grad=zero_grad,
                                         transform=transform, plan=plan)
    pricing = _pricing(allocator, alloc_conf, device_memory, limit)
    report, simulating = _simulate(program, pricing)
    world_size = program.spec.get("world_size", 0)
    if world_size > 1:
        from .distribution import nccl_estimate, traces_collectives

        collectives = traces_collectives(program.forward, program.backward)
        if collectives:
            report = replace(report, nccl_estimate=nccl_estimate(world_size, collectives))
    total = time.perf_counter() - start
    return replace(_with_budget(report, limit), seconds={
        "thunder": thunder_s, "peakmem": total - thunder_s, "simulate": simulating})


@with_strategy
def export_step(
    model: Any,
    *inputs: Any,
    path: str | None = None,
    loss_fn: Callable | None = None,
    gradient: str | None = None,
    optimizer: Any = None,
    optimizer_kwargs: dict | None = None,
    steps: int = 1,
    zero_grad: bool = True,
    transform: Callable | None = None,
    strategy: str | None = None,  # these three: distribution.with_strategy's
    world_size: int | None = None,
    rank: int = 0,
    kwargs: dict | None = None,
    frontend: Frontend | None = None,
) -> dict:
    """The step ``estimate_step`` would simulate, as a portable step file
    (docs/step-file.md): both traces as printed text, the names that join
    them, what the step holds, each value's module, and the optimizer's
    ``step()`` programs. Written to `path` (JSON) when given; returned as
    a dict either way. ``peakmem step STEP.json`` simulates it without
    Python, with the same numbers as ``estimate_step``. With
    the eager front end (``frontend``, as ``estimate_step`` resolves it:
    a plain module's default) the file is the recorded step
    (docs/step-file.md, "Recorded steps"; peakmem.eager_step)."""
    frontend, model = resolve_frontend(model, frontend, kwargs, transform=transform)
    if frontend == "eager":
        from .eager_step import recorded_step_file

        out = recorded_step_file(model, tuple(inputs), kwargs=kwargs, loss_fn=loss_fn, gradient=gradient,
                                 optimizer=optimizer, optimizer_kwargs=optimizer_kwargs, steps=steps,
                                 zero_grad=zero_grad)
        if path is not None:
            import json

            with open(path, "w") as f:
                json.dump(out, f)
        return out
    _torch, thunder = _import_torch_and_thunder()
    spec, _ = _check_arguments(steps, optimizer, optimizer_kwargs, None)
    module = _checked_step_module(model, tuple(inputs), loss_fn, transform)
    _check_gradient(gradient)
    program, _ = _step_program(thunder, module, tuple(inputs), spec, steps, zero_grad, transform, False,
                               later_program=True, gradient=gradient)
    s = program.spec
    out: dict[str, Any] = {
        "peakmem_step": 1,
        "steps": s["steps"], "zero_grad": s["zero_grad"], "torch_threads": s["torch_threads"],
        "rank": s["rank"], "world_size": s["world_size"],
        "parameter_bytes": s["parameter_bytes"], "input_bytes": s["input_bytes"],
        "input_storages": s["input_storages"],
        "cotangent_bytes": s["cotangent_bytes"],
        "forward": {"trace": str(program.forward), "saved": s["saved"], "outputs": s["outputs"],
                    "flat_args": s["flat_args"]},
        "backward": {"trace": str(program.backward), "cotangents": s["cotangents"],
                     "grads": [g or None for g in s["grads"]]},
        "optimizer": None,
        "modules": {"values": s["value_modules"],
                    "held": [{"module": m, "bytes": b, "trainable": t} for m, b, t in s["held"]]},
    }
    if program.optimizer_first is not None:
        out["optimizer"] = {
            "name": s["optimizer_name"], "description": program.optimizer,
            "trainable_bytes": s["trainable_bytes"], "state": s["optimizer_state"],
            "first_step": program.optimizer_first, "later_step": program.optimizer_later,
            "modules": s["optimizer_modules"]}
    if path is not None:
        import json

        with open(path, "w") as f:
            json.dump(out, f, indent=1)
    return out


@dataclass(frozen=True)
class _StepProgram:
    """A step ready to simulate: the forward and backward (live TraceCtx),
    the optimizer's step() programs (text; None without one) and the dict
    of TrainingStepSpec's fields that joins them (ir/training_step_spec.h)."""

    forward: Any
    backward: Any
    optimizer_first: str | None
    optimizer_later: str | None
    optimizer: str  # the optimizer's description ("" without one)
    spec: dict


def _step_program(thunder: Any, module: Any, inputs: tuple, opt_spec: Any, steps: int, zero_grad: bool,
                  transform: Callable | None, plan: bool | dict,
                  later_program: bool = False, gradient: str | None = None) -> tuple[_StepProgram, float]:
    """Traces the step; returns it ready to simulate and the seconds Thunder
    took. `later_program`: make the optimizer's later step() program even
    for one step (a step file may be run for more)."""
    import torch

    from . import module_paths

    start = time.perf_counter()
    fw, bw, cotangent_bytes, holder, relaid = _trace_step(thunder, module, inputs, transform, plan, gradient)
    if relaid and opt_spec is not None:
        raise ValueError("a DTensor parameter's gradient is placed otherwise than the parameter: "
                         + "; ".join(relaid) + ". The optimizer's redistribution of it is not modelled "
                         "(without an optimizer the step is)")
    tracing = time.perf_counter() - start
    names = _trace_names(fw, bw)
    arguments = module_paths.argument_modules(holder)
    gradient_modules = {g: arguments[a] for a, g in zip(names["flat_args"], names["grads"])
                        if g and a in arguments}
    spec: dict[str, Any] = {
        **names, "cotangent_bytes": cotangent_bytes,
        "parameter_bytes": _storage_bytes(_held_by_module(holder)),
        "input_bytes": _storage_bytes(_input_tensors(inputs)),
        "input_storages": _distinct_storages(_input_tensors(inputs)),
        "steps": steps, "zero_grad": zero_grad,
        **_rank_and_world_size(),
        "torch_threads": torch.get_num_threads(),  # the kernels' per-thread scratch
        "value_modules": module_paths.value_modules([fw, bw], arguments, gradient_modules),
        "held": module_paths.held_tensors(holder, _storage_key, _storage_nbytes),
        "optimizer_modules": {},
    }
    first = later = None
    description = ""
    if opt_spec is not None:
        from .optimizer_program import ParamInfo, optimizer_program

        trainable = [(path, p) for path, p in holder.named_parameters() if p.requires_grad]
        infos = [ParamInfo(tuple(int(d) for d in local_shard(p).shape), p.dtype, _printed_device(local_shard(p)))
                 for _, p in trainable]
        programs = [optimizer_program(opt_spec, infos, True)]
        if steps > 1 or later_program:
            programs.append(optimizer_program(opt_spec, infos, False))
        first = programs[0].text
        later = programs[1].text if len(programs) > 1 else None
        owners = {n: i for p in programs for n, i in p.owner.items()}
        param_modules = [module_paths.module_of_path(path) for path, _ in trainable]
        spec.update({
            # What their gradients hold (a DTensor's: its local shard,
            # dense even where distribute_tensor's padded storage is larger).
            "trainable_bytes": sum(local_shard(p).numel() * p.element_size() for _, p in trainable),
            "optimizer_state": sorted(programs[0].state_names),
            "optimizer_name": opt_spec.name,
            "optimizer_modules": {n: param_modules[i] for n, i in owners.items() if i >= 0},
        })
        group = ", ".join(f"{k}={v!r}" for k, v in opt_spec.group.items())
        description = f"torch.optim.{opt_spec.name}({group})"
    return _StepProgram(fw, bw, first, later, description, spec), tracing


def _trace_names(fw: Any, bw: Any) -> dict[str, list[str]]:
    """What the spec takes from the two traces: the names that cross between them."""
    data, (saved, _saved_other) = _return_args(fw)
    (grads,) = _return_args(bw)[:1]
    return {"saved": _names(saved), "outputs": _names(data["output"]), "flat_args": _names(data["flat_args"]),
            "grads": [g.name if g is not None and hasattr(g, "shape") else "" for g in grads],
            "cotangents": _names(bw.args[1])}


def _recomputed(program: _StepProgram, options: dict) -> _StepProgram:
    """`program` with saved tensors recomputed in the backward
    (peakmem.recompute.search, judged by the step's peak); the choice is
    kept in the spec under "recomputation"."""
    from . import _core, recompute

    lean = {k: v for k, v in program.spec.items() if k not in ("value_modules", "optimizer_modules", "held")}

    def peak(fw: Any, bw: Any) -> int:
        spec = {**lean, **_trace_names(fw, bw)}
        return _core.simulate_step(fw, bw, program.optimizer_first, program.optimizer_later, spec)["peak_bytes"]

    budget = _budget(options.get("budget"))
    bounds = {k: options[k] for k in ("time_budget", "max_simulations") if k in options}
    choice, fw, bw = recompute.search(program.forward, program.backward, peak, budget, **bounds)
    spec = {**program.spec, **_trace_names(fw, bw), "recomputation": choice}
    return replace(program, forward=fw, backward=bw, spec=spec)


def _simulate(program: _StepProgram, pricing: dict | None = None) -> tuple[StepReport, float]:
    """The step simulated (models/training_step.h) as one event stream, its
    timeline read from it, priced by `pricing`'s allocator; and the seconds
    the simulation took."""
    from . import _core

    start = time.perf_counter()
    r = _core.simulate_step(program.forward, program.backward, program.optimizer_first,
                            program.optimizer_later, program.spec, events=True, **(pricing or {}))
    simulating = time.perf_counter() - start
    whole = r["step"]
    report = StepReport(
        peak_bytes=r["peak_bytes"], final_bytes=r["final_bytes"], phase_at_peak=r["phase_at_peak"],
        step_at_peak=r["step_at_peak"], by_category=r["by_category"], by_module=r["by_module"],
        forward=r["forward"], backward=r["backward"], optimizer=r["optimizer_first"],
        timeline=StepTimeline.from_report(whole), recomputation=program.spec.get("recomputation"),
        allocator=whole.allocator, report=whole, frontend="thunder")
    return report, simulating


# ---------------------------------------------------------------------------
# The eager front end (peakmem.eager_step)


def _estimate_eager(model: Any, inputs: tuple, *, kwargs: dict | None, loss_fn: Callable | None,
                    gradient: str | None, optimizer: Any, optimizer_kwargs: dict | None, steps: int,
                    zero_grad: bool, budget: int | str | None, pricing: tuple, start: float) -> StepReport:
    from .eager_step import estimate_eager_step

    if not isinstance(steps, int) or isinstance(steps, bool) or steps < 1:
        raise ValueError(f"steps must be a positive integer, got {steps!r}")
    _check_gradient(gradient)
    limit = _budget(budget)
    r, recording = estimate_eager_step(model, tuple(inputs), kwargs=kwargs, loss_fn=loss_fn, gradient=gradient,
                                       optimizer=optimizer, optimizer_kwargs=optimizer_kwargs, steps=steps,
                                       zero_grad=zero_grad, pricing=_pricing(*pricing, limit))
    whole = r["step"]
    report = StepReport(
        peak_bytes=r["peak_bytes"], final_bytes=r["final_bytes"], phase_at_peak=r["phase_at_peak"],
        step_at_peak=r["step_at_peak"], by_category=r["by_category"], by_module=r["by_module"],
        timeline=StepTimeline.from_report(whole), allocator=whole.allocator, report=whole, frontend="eager")
    total = time.perf_counter() - start
    return replace(_with_budget(report, limit), seconds={"record": recording, "peakmem": total - recording})


def _measure_eager(model: Any, inputs: tuple, *, kwargs: dict | None, loss_fn: Callable | None,
                   gradient: str | None, optimizer: Any, optimizer_kwargs: dict | None, steps: int,
                   zero_grad: bool, budget: int | str | None) -> StepReport:
    import torch
    from torch.utils._pytree import tree_leaves

    from .eager_step import measure_eager_step

    if not isinstance(steps, int) or isinstance(steps, bool) or steps < 1:
        raise ValueError(f"steps must be a positive integer, got {steps!r}")
    _check_gradient(gradient)
    limit = _budget(budget)
    given = [x for x in tree_leaves((tuple(inputs), kwargs or {})) if isinstance(x, torch.Tensor)]
    device = _step_device(torch, given + _held_by_module(model))
    peak, final, input_bytes, allocator = measure_eager_step(
        model, tuple(inputs), kwargs=kwargs, loss_fn=loss_fn, gradient=gradient, optimizer=optimizer,
        optimizer_kwargs=optimizer_kwargs, steps=steps, zero_grad=zero_grad, device=device)
    parameters = _storage_bytes(_held_by_module(model))
    report = StepReport(
        peak_bytes=parameters + peak, final_bytes=parameters + final, phase_at_peak="measured",
        step_at_peak=0, by_category={"parameters": parameters, "inputs": input_bytes},
        measured=True, allocator=allocator, frontend="eager")
    return _with_budget(report, limit)


# ---------------------------------------------------------------------------
# The measurement


def _step_device(torch: Any, tensors: list) -> Any:
    """The one device a measured step runs on: the CPU or a CUDA device."""
    devices = sorted({str(x.device) for x in tensors})
    if len(devices) > 1:
        raise ValueError(f"measure_step runs on one device; the model and inputs are on {', '.join(devices)}")
    device = torch.device(devices[0] if devices else "cpu")
    if device.type not in ("cpu", "cuda"):
        raise ValueError(f"measure_step runs on the CPU or a CUDA device; a tensor is on {device}")
    return device


@with_strategy
def measure_step(
    model: Any,
    *inputs: Any,
    loss_fn: Callable | None = None,
    gradient: str | None = None,
    optimizer: Any = None,
    optimizer_kwargs: dict | None = None,
    steps: int = 1,
    zero_grad: bool = True,
    budget: int | str | None = None,
    transform: Callable | None = None,
    plan: bool | dict = False,
    strategy: str | None = None,  # these three: distribution.with_strategy's
    world_size: int | None = None,
    rank: int = 0,
    kwargs: dict | None = None,
    frontend: Frontend | None = None,
) -> StepReport:
    """Runs ``steps`` training steps of `model` for real and measures them:
    the truth ``estimate_step`` is checked against.

    Same arguments and step as ``estimate_step``, with real tensors, all on
    the CPU or all on one CUDA device. One warm-up step runs first,
    unmeasured (Thunder compiles on the first call; on CUDA, cuBLAS makes
    its workspace); its gradients are dropped and the optimizer is made
    afresh, so the measured steps start as the estimate's do: no ``.grad``,
    no optimizer state. The inputs are copied inside the measured region;
    the parameters and buffers, made before it, are added to every figure.
    On the CPU the profiler's events are walked (peakmem.measure's walk,
    which counts requested bytes); on CUDA ``torch.cuda.memory_stats``'s
    ``requested_bytes`` give the figures, and ``allocator`` the allocated and
    reserved bytes. ``phase_at_peak`` is ``"measured"`` and ``by_category``
    holds the parameters and inputs only (neither source says what a block
    is). `frontend` is ``estimate_step``'s (default None: a ``thunder.jit``
    module's step under Thunder, any other module's eagerly, without
    Thunder), and so is `kwargs`.
    """
    frontend, model = resolve_frontend(model, frontend, kwargs, transform=transform, plan=plan)
    if frontend == "eager":
        return _measure_eager(model, inputs, kwargs=kwargs, loss_fn=loss_fn, gradient=gradient,
                              optimizer=optimizer, optimizer_kwargs=optimizer_kwargs, steps=steps,
                              zero_grad=zero_grad, budget=budget)
    _, limit = _check_arguments(steps, optimizer, optimizer_kwargs, budget)
    _check_gradient(gradient)
    kwargs = dict(optimizer_kwargs or {})
    torch, thunder = _import_torch_and_thunder()

    from .measure import _InputMaker, measure_region_cpu, measure_region_cuda

    given = tuple(inputs)
    device = _step_device(torch, _input_tensors(given) + _held_by_module(model))
    reorder, recompute = _plan_options(plan)
    names: tuple[str, ...] = ()
    if recompute is not None:  # the estimate's choice, then run
        names = estimate_step(model, *inputs, loss_fn=loss_fn, gradient=gradient, optimizer=optimizer,
                              optimizer_kwargs=optimizer_kwargs, steps=steps, zero_grad=zero_grad,
                              transform=transform, plan=plan, frontend="thunder").recomputation.names
    module = _step_module(model, loss_fn)
    jm, holder = _jit(thunder, module, transform, reorder, names)
    maker = _InputMaker(device, 0)

    def make_optimizer():
        return None if optimizer is None else optimizer(holder.parameters(), **kwargs)

    try:  # the warm-up: Thunder compiles here
        _run_step(jm, maker.copy_given(given, whole_storages=True), make_optimizer(), zero_grad=True,
                  gradient=gradient)
    except ValueError:
        raise
    except Exception as e:
        raise _step_failure(e, module, given) from e
    for p in holder.parameters():
        p.grad = None
    opt = make_optimizer()
    parameters = _storage_bytes(_held_by_module(holder))

    def make_copies():
        return maker.copy_given(given, whole_storages=True)

    def run(copies):
        for _ in range(steps):
            _run_step(jm, copies, opt, zero_grad, gradient)

    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        measured = measure_region_cuda if device.type == "cuda" else measure_region_cpu
        peak, final, copies, allocator = measured(device, make_copies, run)
        input_bytes = _storage_bytes(_input_tensors(copies))
        del copies, opt
    finally:
        if was_enabled:
            gc.enable()
    for p in holder.parameters():
        p.grad = None
    report = StepReport(
        peak_bytes=parameters + peak, final_bytes=parameters + final, phase_at_peak="measured",
        step_at_peak=0, by_category={"parameters": parameters, "inputs": input_bytes},
        measured=True, allocator=allocator, frontend="thunder")
    return _with_budget(report, limit)
