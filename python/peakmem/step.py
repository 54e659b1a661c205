"""One training step, predicted (``estimate_step``) and measured (``measure_step``).

The step, as both functions run it (``steps`` times in a row)::

    def step():
        loss = model(*inputs)              # or loss_fn(model(*inputs), *inputs), traced together
        loss.backward()
        if optimizer is not None:
            optimizer.step()
        if zero_grad:
            optimizer.zero_grad(set_to_none=True)   # the module's, without an optimizer
        # `loss` dies when step() returns

with the module's parameters and buffers held throughout and the caller
holding the inputs. Every byte a tensor holds counts: parameters, buffers and
inputs included.

How the estimate is made (on ``meta`` inputs nothing is allocated): the
module is traced with ``thunder.jit`` (one call and one ``backward`` on the
given inputs), and the two execution traces are simulated by the runtime
model and joined with the identity of every tensor carried across:

* forward: called as Thunder's autograd function calls it, the caller
  holding every argument (parameters, buffers, inputs);
* backward: called as ``ThunderFunction.backward`` calls it
  (thunder/executors/torch_autograd.py: ``compiled_backward([saved_tensors_list,
  saved_other], cotangents)`` after ``ctx.maybe_clear_saved_tensors()``), each
  saved tensor being the forward's own: a saved parameter, input or output is
  that tensor (held elsewhere, it costs the backward nothing and is never
  freed by it), two saved views of one forward storage are one storage with
  the forward's strides, and the cotangent (``torch.ones_like(loss)``, made
  by ``loss.backward()``) is held by autograd until ``backward`` returns;
* gradients, as ``AccumulateGrad`` accumulates them
  (torch/csrc/autograd/functions/accumulate_grad.h): into an empty ``.grad``
  the backward's gradient is stolen (no copy) when it obeys the layout
  contract (the parameter's strides on every dimension of size other than 1)
  and nothing else holds it; into an existing ``.grad`` it is added in place
  and freed;
* the optimizer (``torch.optim.SGD``, ``Adam``, ``AdamW``; others are an
  error): its ``step()`` is written as a program of the tensor calls the
  single-tensor implementation makes (peakmem.optimizer_program) and
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

from .step_timeline import ACTIVATIONS, GRADIENTS, STATE, StepTimeline

__all__ = ["StepReport", "estimate_step", "measure_step"]

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
        budget: the bytes the step must fit in (``None``: not asked);
            ``fits`` and ``headroom_bytes`` then say whether and by how much.
        forward, backward: the runtime model's reports of the two traces as
            the step runs them; optimizer: that of the first step's
            ``optimizer.step()`` program (estimate only).
        measured: ``True`` for ``measure_step``.
        timeline: the live bytes by category at every statement of every
            phase (peakmem.step_timeline.StepTimeline; estimate only): its
            ``plot()`` draws them with the phases marked, and ``plot()``
            here is that.
        seconds: wall time by part (estimate only): ``"thunder"`` (importing
            Thunder, on the first call, and tracing the step with it),
            ``"peakmem"`` (everything else) and, within it, ``"simulate"``
            (the runtime model reading and simulating the two traces).
    """

    peak_bytes: int
    final_bytes: int
    phase_at_peak: str
    step_at_peak: int
    by_category: dict[str, int] = field(default_factory=dict)
    budget: int | None = None
    fits: bool | None = None
    headroom_bytes: int | None = None
    forward: Any = None
    backward: Any = None
    optimizer: Any = None
    measured: bool = False
    seconds: dict[str, float] = field(default_factory=dict)
    timeline: Any = None

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


def _check_loss(loss: Any) -> None:
    import torch

    if not isinstance(loss, torch.Tensor):
        raise ValueError(f"the loss must be a scalar tensor; the step returned a {type(loss).__name__}")
    if loss.dim() != 0:
        raise ValueError(
            f"the loss must be a scalar tensor; the step returned shape {tuple(loss.shape)} "
            "(pass loss_fn=, or reduce the model's output)")
    if not loss.requires_grad:
        raise ValueError("the loss does not require grad: no parameter of the model takes part in it")


def _run_step(jm: Any, inputs: tuple, optimizer: Any, zero_grad: bool) -> None:
    loss = jm(*inputs)
    _check_loss(loss)
    loss.backward()
    if optimizer is not None:
        optimizer.step()
    if zero_grad:
        (optimizer if optimizer is not None else jm).zero_grad(set_to_none=True)


def _storage_bytes(tensors) -> int:
    """Bytes of the distinct storages behind `tensors` (a view counts its whole storage once)."""
    seen: dict[Any, int] = {}
    for t in tensors:
        s = t.untyped_storage()
        key = (t.device.type, s.data_ptr()) if t.device.type != "meta" else id(s)
        seen[key] = s.nbytes()
    return sum(seen.values())


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
    return replace(report, budget=budget, fits=report.peak_bytes <= budget,
                   headroom_bytes=budget - report.peak_bytes)


# ---------------------------------------------------------------------------
# The estimate


def _jit(thunder: Any, module: Any, transform: Callable | None, plan: bool | dict = False) -> tuple[Any, Any]:
    """The jitted module (transformed), and what holds the parameters the
    step trains: the module, or the transformed module (a distributed
    transform's shards). `plan`: Thunder runs peakmem's planned forward and
    backward (planning.plan_transform; a dict gives plan's options)."""
    transforms = []
    if plan:
        from .planning import plan_transform

        transforms.append(plan_transform(**(plan if isinstance(plan, dict) else {})))
    jm = thunder.jit(module, transforms=transforms)
    if transform is None:
        return jm, module
    try:
        jm = transform(jm)
    except Exception as e:
        raise RuntimeError(f"the transform failed: {type(e).__name__}: {e}") from e
    return jm, jm


def _trace_step(thunder: Any, module: Any, inputs: tuple, transform: Callable | None, plan: bool | dict = False):
    """Runs the jitted module once, forward and backward, for its traces."""
    jm, holder = _jit(thunder, module, transform, plan)
    params = list(holder.parameters())
    grads_before = [p.grad for p in params]
    try:
        loss = jm(*inputs)
        _check_loss(loss)
        loss.backward()
    except ValueError:
        raise
    except Exception as e:  # what Thunder cannot trace or run
        why = ""
        meta = [x for x in inputs if getattr(x, "is_meta", False)]
        if len(meta) > 1 and "update_aliases" in "".join(traceback.format_tb(e.__traceback__)):
            why = (" (Thunder groups its tensor inputs by storage address, and every meta tensor's "
                   "is 0: with an in-place update in the program, such as batch norm's running "
                   "statistics, it takes the meta inputs for views of one tensor; pass one meta "
                   "input tensor, or estimate on CPU inputs)")
        raise RuntimeError(f"Thunder could not trace the step: {type(e).__name__}: {e}{why}") from e
    finally:
        for p, g in zip(params, grads_before):
            p.grad = g
    fw = thunder.last_traces(jm)[-1]
    bw = thunder.last_backward_traces(jm)[-1]
    if bw is None:
        raise RuntimeError("Thunder made no backward trace for the step")
    cotangent_bytes = loss.element_size() * loss.numel()
    return fw, bw, cotangent_bytes, holder


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


class _Timeline:
    """The step's live bytes as the phases add to them; keeps the peak."""

    def __init__(self, start: int, categories: dict[str, int]) -> None:
        self.peak = start
        self.at = ("forward", 1)
        self.categories = categories

    def reach(self, value: int, phase: str, step: int, categories: Callable[[], dict[str, int]]) -> None:
        if value > self.peak:
            self.peak = value
            self.at = (phase, step)
            self.categories = categories()


def _live_by_role(report: Any, saved_names: set[str], grad_names: set[str]) -> dict[str, int]:
    """The intermediates live at a report's peak, as step categories."""
    out = {"activations": 0, "gradients": 0, "temporaries": 0}
    for t in report.live_at_peak:
        if t.role == "argument" or t.bytes == 0:
            continue
        if t.role == "saved" or t.name in saved_names:
            out["activations"] += t.bytes
        elif t.name in grad_names:
            out["gradients"] += t.bytes
        else:
            out["temporaries"] += t.bytes
    return out


def estimate_step(
    model: Any,
    *inputs: Any,
    loss_fn: Callable | None = None,
    optimizer: Any = None,
    optimizer_kwargs: dict | None = None,
    steps: int = 1,
    zero_grad: bool = True,
    budget: int | str | None = None,
    transform: Callable | None = None,
    plan: bool | dict = False,
) -> StepReport:
    """Predicts the memory of ``steps`` training steps of `model` on `inputs`.

    `model` is an ``nn.Module`` called as ``model(*inputs)``; ``loss_fn(output,
    *inputs)`` returns the scalar loss (``None``: the model returns it).
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

    `plan` (default False): True (or a dict of ``peakmem.plan``'s options)
    has Thunder run peakmem's planned forward and backward
    (``peakmem.plan_transform``), so the estimate is the planned step's.
    Each trace is planned on its own, under its usual calling convention.

    Raises ValueError for an optimizer or a loss peakmem cannot model,
    RuntimeError when Thunder cannot trace the step.
    """
    start = time.perf_counter()
    _torch, thunder = _import_torch_and_thunder()  # the first call imports Thunder: its time
    importing = time.perf_counter() - start
    spec, limit = _check_arguments(steps, optimizer, optimizer_kwargs, budget)
    module = _step_module(model, loss_fn)
    pieces, tracing, holder = _simulate_traces(thunder, module, tuple(inputs), transform, plan)
    opt = None if spec is None else _simulate_optimizer(spec, holder, pieces.grad_bytes, steps)
    parameters = _storage_bytes(_held_by_module(holder))
    input_bytes = _storage_bytes(_input_tensors(tuple(inputs)))
    report = _join_steps(pieces, opt, parameters, input_bytes, steps, zero_grad)
    total = time.perf_counter() - start
    thunder_s = importing + tracing
    return replace(_with_budget(report, limit), seconds={
        "thunder": thunder_s, "peakmem": total - thunder_s, "simulate": pieces.simulate_s})


@dataclass(frozen=True)
class _Pieces:
    """The two traces of one step, simulated, and what joins them."""

    forward: Any              # the forward's Report
    backward: Any             # the backward's Report, its saved tensors the forward's
    args_bytes: int           # what the forward's arguments hold
    own_saved_bytes: int      # forward storages the backward gets as its own arguments
    cotangent_bytes: int      # torch.ones_like(loss)
    grad_bytes: int           # the gradients the backward returns
    loss_bytes: int           # the forward's outputs, held until step() returns
    saved_names: tuple[str, ...]
    simulate_s: float         # seconds in the runtime model (both traces, read live)
    saved_storages: frozenset[int]  # the forward's storages the backward gets as saved tensors
    grad_storages: frozenset[int]   # the backward's storages of the gradients it returns
    # The largest copy AccumulateGrad makes of a gradient whose strides are
    # not its parameter's, into an empty .grad (0: every gradient is stolen).
    grad_layout_copy: int = 0
    # The two TraceCtx and the backward's argument_tensors (the saved
    # tensors' identity), as simulated: what bench/bench_step.py --export
    # writes for the C++ step-simulation benchmark.
    traces: tuple = ()
    backward_arguments: tuple = ()


def _simulate_traces(thunder: Any, module: Any, inputs: tuple,
                     transform: Callable | None, plan: bool | dict = False) -> tuple[_Pieces, float, Any]:
    """The two traces simulated, the seconds Thunder took to make them, and
    what holds the parameters (_jit)."""
    import torch

    from . import _core

    start = time.perf_counter()
    fw, bw, cotangent_bytes, holder = _trace_step(thunder, module, inputs, transform, plan)
    tracing = time.perf_counter() - start
    # The forward, and the identity of everything it returns.
    simulating = time.perf_counter()
    threads = torch.get_num_threads()  # the kernels' per-thread scratch
    fw_report = _core.analyze_live(fw, "runtime", "forward", True, returned_tensors=True, events=True,
                                   torch_threads=threads)
    simulated = time.perf_counter() - simulating
    returned = {name: (storage, nbytes, list(strides), role)
                for name, storage, nbytes, strides, role in fw_report.returned_tensors}
    data, (saved, _saved_other) = _return_args(fw)
    saved_names = _names(saved)
    # The backward, its saved tensors being the forward's.
    spec, own_saved_bytes = _saved_identity(saved_names, returned, set(_names(data["output"])))
    spec += [(name, True, -1, 0, []) for name in _names(bw.args[1])]  # cotangents: autograd holds them
    simulating = time.perf_counter()
    bw_report = _core.analyze_live(bw, "runtime", "backward", True, argument_tensors=spec,
                                   returned_tensors=True, events=True, torch_threads=threads)
    simulated += time.perf_counter() - simulating
    grads, layout_copies = _accumulated_grads(bw, bw_report, _names(data["flat_args"]), returned)
    outputs = {returned[n][0]: returned[n][1] for n in _names(data["output"])
               if returned[n][3] != "argument"}
    saved_storages = frozenset(returned[n][0] for n in saved_names
                               if returned[n][3] != "argument" and returned[n][0] not in outputs)
    return _Pieces(
        forward=fw_report, backward=bw_report, args_bytes=_argument_bytes(fw_report),
        own_saved_bytes=own_saved_bytes, cotangent_bytes=cotangent_bytes,
        grad_bytes=sum(grads.values()), loss_bytes=sum(outputs.values()),
        saved_names=tuple(saved_names), simulate_s=simulated, saved_storages=saved_storages,
        grad_storages=frozenset(grads), grad_layout_copy=max(layout_copies, default=0),
        traces=(fw, bw), backward_arguments=tuple(spec)), tracing, holder


def _argument_bytes(report: Any) -> int:
    """What a trace's arguments hold: the live bytes before its first statement."""
    first = report.steps[0] if report.steps else None
    return first.live_bytes - first.delta_bytes if first else 0


@dataclass(frozen=True)
class _OptimizerPieces:
    """optimizer.step() simulated: the first (it creates the state) and the later ones."""

    first: Any                # the runtime model's Report of the first step's program
    later: Any                # of a later step's (None when steps == 1)
    state_names: frozenset[str]  # the state's names in both programs
    state_bytes: int          # what the first step creates and the optimizer keeps
    first_state_storages: frozenset[int]  # the first program's storages of the state it makes


def _simulate_optimizer(spec: Any, module: Any, grad_bytes: int, steps: int) -> _OptimizerPieces:
    from . import _core
    from .optimizer_program import ParamInfo, optimizer_program

    trainable = [p for p in module.parameters() if p.requires_grad]
    param_bytes = _storage_bytes(trainable)
    if param_bytes != grad_bytes:
        raise ValueError(
            f"the backward returns {grad_bytes} bytes of gradients, the trainable parameters hold "
            f"{param_bytes}: a parameter without a gradient, or an input that requires one, is not "
            "modelled yet with an optimizer")
    infos = [ParamInfo(tuple(int(d) for d in p.shape), p.dtype) for p in trainable]

    def run(first: bool) -> tuple[Any, frozenset[str]]:
        program = optimizer_program(spec, infos, first)
        report = _core.analyze_text(program.text, f"<torch.optim.{spec.name}.step>", "runtime",
                                    "plain", events=True)
        if report.diagnostics:  # the program is peakmem's own: every op must be known
            raise RuntimeError(f"the {spec.name} step program: {report.diagnostics[0]}")
        return report, program.state_names

    first, names = run(True)
    later = run(False)[0] if steps > 1 else None
    made = frozenset(storage for name, storage, _, _, role in first.returned_tensors
                     if name in names and role == "intermediate")
    return _OptimizerPieces(first=first, later=later, state_names=names,
                            state_bytes=first.final_bytes - _argument_bytes(first),
                            first_state_storages=made)


def _join_steps(p: _Pieces, opt: _OptimizerPieces | None, parameters: int, input_bytes: int,
                steps: int, zero_grad: bool) -> StepReport:
    """The traces' timelines joined into `steps` steps (the module docstring's rules)."""
    outside = parameters + input_bytes - p.args_bytes  # held, but not arguments of the forward
    if outside < 0:
        raise RuntimeError(
            f"the forward's arguments hold {p.args_bytes} bytes, more than the module's parameters "
            f"and buffers ({parameters}) and the inputs ({input_bytes}): tensors passed twice (tied "
            "weights) are not modelled yet")
    fw_cats = _live_by_role(p.forward, set(p.saved_names), set())
    bw_cats = _live_by_role(p.backward, set(), {t[0] for t in p.backward.returned_tensors})
    timeline = _Timeline(parameters + input_bytes, {
        "parameters": parameters, "inputs": input_bytes, "gradients": 0, "optimizer_state": 0,
        "activations": 0, "temporaries": 0})
    carry = 0  # bytes of .grad held between steps
    state = 0  # bytes of optimizer state
    series = StepTimeline()

    def holding() -> dict[str, int]:
        return {"parameters": parameters, "inputs": input_bytes, "gradients": carry,
                "optimizer_state": state}

    for k in range(1, steps + 1):
        held = outside + carry + state  # beyond the forward's arguments
        series.add("forward", k, p.forward, dict.fromkeys(p.saved_storages, ACTIVATIONS), held,
                   holding())
        timeline.reach(held + p.forward.peak_bytes, "forward", k, lambda: {
            "parameters": parameters, "inputs": input_bytes, "gradients": carry,
            "optimizer_state": state, **fw_cats})
        # After the forward: its final bytes (arguments, the loss, saved tensors);
        # loss.backward() adds the cotangent; the backward counts the saved
        # tensors it owns as its arguments.
        offset = held + p.forward.final_bytes + p.cotangent_bytes - p.own_saved_bytes
        bw_peak = offset + p.backward.peak_bytes
        series.add("backward", k, p.backward, {
            **{i: ACTIVATIONS for i, c in enumerate(p.backward.storage_categories()) if c == "saved"},
            **dict.fromkeys(p.grad_storages, GRADIENTS)}, offset, holding())
        timeline.reach(bw_peak, "backward", k, lambda: _backward_categories(
            bw_peak, parameters, input_bytes, carry, state, bw_cats))
        # The backward returns: what it still held but its gradients is released
        # (release_variables); AccumulateGrad steals them into empty .grad
        # fields, or adds them in place and frees them. Then the cotangent goes;
        # no moment of the backward's return holds more.
        if carry == 0:
            if p.grad_layout_copy:
                # Into empty .grad fields, one AccumulateGrad at a time: the
                # backward's gradients (and the cotangent, which
                # loss.backward() holds) beside one parameter-layout copy.
                acc_peak = offset + p.backward.final_bytes + p.grad_layout_copy
                timeline.reach(acc_peak, "backward", k, lambda: _accumulation_categories(
                    acc_peak, parameters, input_bytes, p.grad_bytes + p.grad_layout_copy, state))
            carry = p.grad_bytes
        if opt is not None:
            # optimizer.step(): parameters, inputs, .grad, the state and the
            # loss (alive until step() returns) are held; the program's
            # arguments are the parameters, their gradients and the state.
            program = opt.first if k == 1 else opt.later
            base = parameters + input_bytes + carry + state + p.loss_bytes
            opt_peak = base - _argument_bytes(program) + program.peak_bytes
            made = opt.first_state_storages if k == 1 else frozenset()
            series.add("optimizer", k, program, dict.fromkeys(made, STATE),
                       base - _argument_bytes(program), holding())
            timeline.reach(opt_peak, "optimizer", k, lambda: _optimizer_categories(
                opt_peak, program, opt.state_names, parameters, input_bytes, carry, p.loss_bytes))
            if k == 1:
                state = opt.state_bytes
        if zero_grad:
            carry = 0
    return StepReport(
        peak_bytes=timeline.peak, final_bytes=parameters + input_bytes + carry + state,
        phase_at_peak=timeline.at[0], step_at_peak=timeline.at[1],
        by_category=timeline.categories, forward=p.forward, backward=p.backward,
        optimizer=None if opt is None else opt.first, timeline=series)


def _saved_identity(saved_names: list[str], returned: dict, output_names: set[str]):
    """The backward's argument_tensors for the saved tensors, and the bytes of
    the storages it owns (each forward storage once)."""
    spec = []
    groups: dict[int, int] = {}
    own = 0
    for name in saved_names:
        if name not in returned:
            raise RuntimeError(f"the backward's saved tensor {name} is not returned by the forward")
        storage, nbytes, strides, role = returned[name]
        if role == "argument" or name in output_names:
            spec.append((name, True, -1, 0, strides))  # a parameter, an input or the loss
            continue
        if storage not in groups:
            groups[storage] = len(groups)
            own += nbytes
        spec.append((name, False, groups[storage], nbytes, strides))
    return spec, own


def _accumulated_grads(bw: Any, bw_report: Any, flat_arg_names: list[str],
                       returned: dict) -> tuple[dict, list[int]]:
    """The storages (and bytes) of the gradients the backward returns, and the
    bytes of each copy AccumulateGrad makes into an empty .grad: a gradient
    laid out unlike its parameter (a convolution weight's gradient as Thunder
    computes it, permuted) is not stolen but copied to the parameter's
    strides (accumulate_grad.h: obeys_layout_contract, clone_obey_contract);
    the incoming gradient is freed when its AccumulateGrad returns."""
    returned_by_bw = {name: (storage, nbytes, list(strides), role)
                      for name, storage, nbytes, strides, role in bw_report.returned_tensors}
    (grads,) = _return_args(bw)[:1]
    if len(grads) != len(flat_arg_names):
        raise RuntimeError(
            f"the backward returns {len(grads)} gradients for the forward's {len(flat_arg_names)} "
            "arguments")
    out: dict[int, int] = {}
    copies: list[int] = []
    for arg, g in zip(flat_arg_names, grads):
        if g is None or not hasattr(g, "shape"):
            continue
        storage, nbytes, strides, role = returned_by_bw[g.name]
        if role != "intermediate":
            raise ValueError(
                f"the gradient of {arg} ({g.name}) is a view of a tensor the step holds elsewhere "
                f"({role}); AccumulateGrad would clone it: not modelled yet")
        want = returned[arg][2]
        shape = [int(d) for d in g.shape]
        if any(n != 1 and a != b for n, a, b in zip(shape, strides, want)):
            copies.append(returned[arg][1])  # a dense copy in the parameter's layout
        if storage in out:
            raise ValueError(
                f"the gradients of two arguments share {g.name}'s storage: AccumulateGrad would "
                "clone one of them; not modelled yet")
        out[storage] = nbytes
    return out, copies


def _backward_categories(peak: int, parameters: int, inputs: int, carry: int, state: int,
                         live: dict[str, int]) -> dict[str, int]:
    cats = {"parameters": parameters, "inputs": inputs, "gradients": carry + live["gradients"],
            "optimizer_state": state, "activations": live["activations"]}
    cats["temporaries"] = peak - sum(cats.values())  # the loss, the cotangent, intermediates
    return cats


def _accumulation_categories(peak: int, parameters: int, inputs: int, grads: int,
                             state: int) -> dict[str, int]:
    cats = {"parameters": parameters, "inputs": inputs, "gradients": grads,
            "optimizer_state": state, "activations": 0}
    cats["temporaries"] = peak - sum(cats.values())  # the loss and the cotangent
    return cats


def _optimizer_categories(peak: int, program: Any, state_names: frozenset[str], parameters: int,
                          inputs: int, grads: int, loss: int) -> dict[str, int]:
    """At the optimizer's peak: the state (kept or made so far), and as
    temporaries the loss and what the step makes (denominators, decayed
    gradients)."""
    state = sum(t.bytes for t in program.live_at_peak if t.name in state_names)
    cats = {"parameters": parameters, "inputs": inputs, "gradients": grads,
            "optimizer_state": state, "activations": 0}
    cats["temporaries"] = peak - sum(cats.values())
    return cats


# ---------------------------------------------------------------------------
# The measurement


def measure_step(
    model: Any,
    *inputs: Any,
    loss_fn: Callable | None = None,
    optimizer: Any = None,
    optimizer_kwargs: dict | None = None,
    steps: int = 1,
    zero_grad: bool = True,
    budget: int | str | None = None,
    transform: Callable | None = None,
    plan: bool | dict = False,
) -> StepReport:
    """Runs ``steps`` training steps of `model` for real on the CPU and
    measures them: the truth ``estimate_step`` is checked against.

    Same arguments and step as ``estimate_step`` (real CPU tensors only).
    One warm-up step runs first, unmeasured (Thunder compiles on the first
    call); its gradients are dropped and the optimizer is made afresh, so the
    measured steps start as the estimate's do: no ``.grad``, no optimizer
    state. Under the profiler (peakmem.measure's event walk, which counts
    requested bytes), the inputs are copied inside the measured region; the
    parameters and buffers, made before it, are added to every figure.
    ``phase_at_peak`` is ``"measured"`` and ``by_category`` holds the
    parameters and inputs only (the profiler does not say what a block is).
    """
    _, limit = _check_arguments(steps, optimizer, optimizer_kwargs, budget)
    kwargs = dict(optimizer_kwargs or {})
    torch, thunder = _import_torch_and_thunder()
    from torch.profiler import ProfilerActivity, profile, record_function

    from .measure import _INPUTS_RANGE, _InputMaker, _cpu_allocation_events, _walk_events

    given = tuple(inputs)
    for x in _input_tensors(given) + _held_by_module(model):
        if x.device.type != "cpu":
            raise ValueError(f"measure_step runs on the CPU; a tensor is on {x.device}")
    module = _step_module(model, loss_fn)
    jm, holder = _jit(thunder, module, transform, plan)
    maker = _InputMaker(torch.device("cpu"), 0)

    def make_optimizer():
        return None if optimizer is None else optimizer(holder.parameters(), **kwargs)

    try:  # the warm-up: Thunder compiles here
        _run_step(jm, maker.copy_given(given), make_optimizer(), zero_grad=True)
    except ValueError:
        raise
    except Exception as e:
        raise RuntimeError(f"Thunder could not trace the step: {type(e).__name__}: {e}") from e
    for p in holder.parameters():
        p.grad = None
    opt = make_optimizer()
    parameters = _storage_bytes(_held_by_module(holder))

    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            with record_function(_INPUTS_RANGE):
                copies = maker.copy_given(given)
            for _ in range(steps):
                _run_step(jm, copies, opt, zero_grad)
        events = _cpu_allocation_events(prof)
        input_bytes = _storage_bytes(_input_tensors(copies))
        del copies, opt
    finally:
        if was_enabled:
            gc.enable()
    for p in holder.parameters():
        p.grad = None
    peak, final, _inputs, _counted, _ignored = _walk_events(events)
    report = StepReport(
        peak_bytes=parameters + peak, final_bytes=parameters + final, phase_at_peak="measured",
        step_at_peak=0, by_category={"parameters": parameters, "inputs": input_bytes},
        measured=True)
    return _with_budget(report, limit)
