"""The eager front end: a training step recorded as PyTorch runs it, without Thunder.

``estimate_step(..., frontend="eager")`` runs the user's step, as eager
PyTorch runs it, on ``meta`` stand-ins of the model's parameters, buffers and
inputs (nothing is allocated and nothing is computed, so a model of any size
is estimated on a laptop; the user's own model is not touched), under a
``TorchDispatchMode`` that writes down every ATen call in order:

* what the call made: each output storage not seen before, with its bytes;
* the scratch the call allocates and frees before it returns, by the
  registry's rule for the op (``_core.aten_scratch``,
  peakmem/semantics/aten_ops.h): Python numbers ATen wraps into 0-d
  tensors and the dtype casts TensorIterator makes;
* what was freed, and when: each storage carries a weak reference whose
  callback fires when PyTorch drops its last reference (a Python variable,
  autograd's saved tensor once its node has run, ``zero_grad``), so the
  lifetimes are PyTorch's own, not inferred.

The step is the one ``measure_step(..., frontend="eager")`` runs (eager_measure.py) and
``peakmem.step``'s docstring states (forward and loss, ``loss.backward()``,
``optimizer.step()``, ``zero_grad(set_to_none=True)``, the loss released),
``steps`` times, or until what is live after a step repeats
(``steps=None``). The record becomes the step's event stream in C++
(peakmem/models/recorded_step.h), so the report, its formats and the
caching-allocator pricing are those of a traced step. Categories are read
off the objects once each phase ends: a storage that is a parameter's
``.grad`` is a gradient, one in the optimizer's ``state`` optimizer state,
one the forward made that outlives it (autograd saved it) an activation;
the rest are temporaries.

A ``torch.compile``'d module (``frontend="compile"``) is recorded the same
way, its forward and backward the programs Inductor generates for it
(inductor_replay.py), compiled in one unrecorded step first.

The device the step is recorded for (``device=``, device_target.py)
decides the kernels' choices and rules (cuda_kernels.py, cuda_attention.py
on a CUDA target); the real values of the step's integer and boolean
inputs ride beside their stand-ins for the calls that read them
(shadow_values.py).

What the recording cannot see: memory a kernel allocates inside itself
beyond the registry's rules (a CPU convolution's oneDNN buffers, BLAS
operand copies of strided matmuls): see docs/eager-front-end.md.
"""

from __future__ import annotations

import copy
import contextlib
import gc
import time
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable

from ..measure import local_shard
from .accumulation import Accumulations
from .compiled import CompiledStepError, compiled_regions_refused
from .cpu_attention import cpu_attention
from .call_pricing import _arguments, _describe, _scratch_events
from .cpu_kernel_probe import KernelProbes
from .cpu_outputs import cpu_layout, cpu_meta
from .cuda_kernels import cuda_kernels
from .data_parallel import wrapped_in_ddp
from .fully_sharded import meta_parameters_trained, wrapped_in_fsdp
from .device_target import GEMM_OPS, DeviceTarget, kernel_choices
from .inductor_replay import (compile_failures_named, compiled_specs, compiling_for_the_cpu, is_compiled_module,
                              no_recompiles, recompiled, replayed_callback)
from .meta_replica import meta_replica
from .recorded_run import RecordedRun, optimizer_description, recorded_run
from .report import CATEGORIES
from .running import transformers_quiet
from .routing import Routing, assumed_topk_indices, observed_counts
from .shadow_values import DataDependentError, ShadowValues, source_line

__all__ = ["record_step", "estimate_eager_step", "recorded_step_file"]

# Indexes of report.CATEGORIES (C++'s kStepCategories), as recorded storages name their category.
_PARAMETERS, _INPUTS, _GRADIENTS, _STATE, _ACTIVATIONS, _TEMPORARIES, _WORKSPACES = (
    CATEGORIES.index(c) for c in ("parameters", "inputs", "gradients", "optimizer_state", "activations",
                                  "temporaries", "workspaces"))




@dataclass
class RecordedStep:
    """The lists ``_core.simulate_recorded_step`` takes (recorded_step.h)."""

    storages: list[list] = field(default_factory=list)  # [bytes, name, category, module, device, scratch]
    held: list[int] = field(default_factory=list)
    statements: list[tuple[str, str, list[int]]] = field(default_factory=list)
    phases: list[tuple[str, int, int, int]] = field(default_factory=list)
    diagnostics: list[str] = field(default_factory=list)
    iterations: int = 0  # the steps recorded


class _Recorder:
    """Storages and statements as the step runs (the dispatch mode's state).
    `target`: the device the step is recorded for (device_target.py): on a
    CUDA target a ``meta`` storage is the GPU's, and a CPU tensor (Adam's
    ``step`` counters, a wrapped number autograd saves) is host memory, not
    recorded: ``host_bytes`` sums them."""

    def __init__(self, target: DeviceTarget | None = None, routing: Any = None, per_step: bool = False) -> None:
        self.target = target or DeviceTarget(name="cpu", kind="cpu")
        self.routing = None if routing is None else Routing(routing, per_step)  # routing.py
        self.host_bytes = 0
        self.workspaces_made = False
        self.shadows = ShadowValues()  # the real values the step reads (shadow_values.py)
        self.record = RecordedStep()
        self.live: dict[int, int] = {}  # id(untyped storage) -> storage index
        self.backward_began = 0  # the first statement of the backward last recorded
        self._refs: dict[int, Any] = {}
        self.pending: list[int] = []  # frees since the last statement
        self.module = ""  # the nn.Module path running now
        # Outputs of calls that wrapped a number, whose autograd node may
        # have saved it (checked once the node exists: see saved_numbers).
        self.unchecked: list[Any] = []
        self.unknown_ops: set[str] = set()  # ATen ops the registry has no entry for
        self.sums = Accumulations()  # the backward's gradient sums (accumulation.py)
        self.probes = KernelProbes()  # CPU convolutions outside the rules (cpu_kernel_probe.py)

    def storage(self, t: Any, name: str, category: int, device: str | None = None) -> int | None:
        """Registers `t`'s storage if new (its index), else None."""
        t = local_shard(t)  # a DTensor's own storage is the global shape's, never allocated
        st = t.untyped_storage()
        key = id(st)
        if key in self.live:
            return None
        device = device or str(t.device)
        if self.target.cuda:
            if t.device.type == "cpu":
                self.host_bytes += st.nbytes()
                return None
            if device == "meta":
                device = self.target.storage_device
        index = len(self.record.storages)
        self.record.storages.append([st.nbytes(), name, category, self.module, device, False])
        self.live[key] = index
        self._refs[key] = weakref.ref(st, lambda _r, key=key: self._freed(key))
        return index

    def index_of(self, t: Any) -> int | None:
        """`t`'s storage index (the storage a gradient sum made in place is, accumulation.py)."""
        index = self.live.get(id(local_shard(t).untyped_storage()))
        return None if index is None else self.sums.root(index)

    def to_host(self, t: Any) -> None:
        """`t`, recorded as a device storage, is a CPU tensor on the target
        (a kernel's output the meta function puts on the device: the
        memory-efficient attention's philox seed and offset): its bytes are
        host memory (``host_bytes``), none on the device."""
        index = self.index_of(t)
        if index is not None and self.record.storages[index][0]:
            self.host_bytes += self.record.storages[index][0]
            self.record.storages[index][0] = 0

    def _freed(self, key: int) -> None:
        index = self.live.pop(key, None)
        self._refs.pop(key, None)
        if index is not None:
            self.pending.append(-1 - index)
            if index in self.sums.alias:  # a gradient sum made in place: its first operand's storage
                self.pending.append(-1 - self.sums.root(index))

    def resized(self, tensors: list, name: str) -> None:
        """Storages resized in place (FSDP2's all-gather buffers,
        fully_sharded.py): one resized to nothing is freed, one given bytes
        again is a new allocation; each is a parameter's, named `name`."""
        events, freed = [], False
        for t in tensors:
            st = t.untyped_storage()
            if st.nbytes() == 0:
                freed |= id(st) in self.live
                self._freed(id(st))
                continue
            index = self.storage(t, name, _PARAMETERS)
            if index is not None:
                events.append(index)
            _categorize(self, [t], _PARAMETERS, [name])
        if events or freed:
            self.statement(f"FSDP2: {name} {'allocated' if events else 'freed'} (UntypedStorage.resize_)",
                           source_line(), events, moment=False)

    def scratch(self, bytes_: int, op: str, device: str) -> int:
        index = len(self.record.storages)
        if self.target.cuda and device == "meta":
            device = self.target.storage_device
        self.record.storages.append([bytes_, f"scratch of {op}", _TEMPORARIES, self.module, device, True])
        return index

    def library_workspaces(self, op: str) -> list[int]:
        """On a CUDA target, at the step's first matrix product: cuBLAS's and
        cuBLASLt's workspaces, which the caching allocator hands the
        handles then and which stay allocated (device_target.py). Their
        allocation events, or none."""
        if not self.target.cuda or self.workspaces_made or op.split(".")[1] not in GEMM_OPS:
            return []
        self.workspaces_made = True
        events = []
        for bytes_, what in ((self.target.cublas_workspace_bytes, "cuBLAS workspace"),
                             (self.target.cublas_lt_workspace_bytes, "cuBLASLt workspace")):
            if not bytes_:
                continue  # made before the step (DeviceTarget.libraries_warm)
            events.append(len(self.record.storages))
            self.record.storages.append([bytes_, f"{what} (made by the first {op})", _WORKSPACES, "",
                                         self.target.storage_device, False])
        return events

    def statement(self, op: str, source: str, events: list[int] | None = None, moment: bool = True) -> None:
        """A statement: the frees since the last one, then `events`. A
        `moment` of the step (not an ATen call) first takes in the numbers
        saved by the calls before it."""
        if moment:
            self.saved_numbers()
        self.record.statements.append((op, source, self.pending + (events or [])))
        self.pending = []

    def topk_without_values(self, args: tuple, kwargs: dict, out: Any) -> None:
        """A top-k of values the step does not have (a mixture-of-experts
        router's scores): its indices' shadow as `routing` assumes it,
        stated in the diagnostics; without `routing`, the line a later
        read of them names (routing.py)."""
        line = source_line()
        if self.routing is None:
            self.shadows.router = line
            return
        k = args[1] if len(args) > 1 else kwargs["k"]
        dim = args[2] if len(args) > 2 else kwargs.get("dim", -1)
        indices, counts = assumed_topk_indices(self.routing, args[0], k, dim)
        self.shadows.give(out[1], indices)
        self.record.diagnostics.append(f"statement {len(self.record.statements)} (aten.topk.default): routing "
                                       f"assumed ({self.routing.describe(counts)}) at {line}")

    def saved_numbers(self) -> None:
        """The wrapped numbers autograd saved for the backward. A number a
        call wraps (``x * 0.5``) is a 0-d CPU tensor the dispatch mode never
        sees (it is handed the number); MulBackward0 and DivBackward0 save
        it, so it lives until their node runs, not just through the call.
        The node is attached to the output after the call returns, so the
        outputs of such calls are looked at here, before the next statement."""
        import torch

        for ref in self.unchecked:
            out = ref()
            node = getattr(out, "grad_fn", None)
            if node is None:
                continue
            for attribute in dir(node):
                if not attribute.startswith("_saved_"):
                    continue
                saved = getattr(node, attribute)
                if isinstance(saved, torch.Tensor) and saved.dim() == 0 and saved.device.type == "cpu":
                    index = self.storage(saved, f"a number {node.name()} saved", _ACTIVATIONS)
                    if index is not None:
                        self.pending.append(index)
        self.unchecked = []


def _data_dependent(error: Exception) -> bool:
    """Whether a meta call failed for want of the data (``.item()``,
    ``nonzero``, a data-dependent output shape), not for a mistake."""
    text = str(error).lower()  # "Meta tensors" in a missing meta kernel's message
    return isinstance(error, (RuntimeError, NotImplementedError)) and (
        "meta tensors" in text or "data-dependent" in text or "meta device" in text
        or "data dependent" in text or "data-independent" in text or "cannot copy out of meta tensor" in text)


def _passed_on(types: tuple) -> str | None:
    """How a call the recording does not record is passed on: ``"run"``
    while a fake mode is on (a DTensor's sharding propagated on fake
    tensors: no memory), ``"subclass"`` for a tensor subclass among the
    arguments (a DTensor's sharded parameter: its own dispatch runs the call
    on its local tensors, which come back as plain ones); None: recorded."""
    import torch

    if torch._C._get_dispatch_mode(torch._C._TorchDispatchModeKey.FAKE) is not None:
        return "run"
    plain = (torch.Tensor, torch.nn.Parameter, torch.nn.Buffer)
    return "subclass" if any(t not in plain for t in types) else None


def _dispatch_mode(recorder: _Recorder):
    """The TorchDispatchMode that records each ATen call into `recorder`."""
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_leaves

    from .._core import aten_scratch

    import torch

    threads = torch.get_num_threads()
    kernels = recorder.target.name if recorder.target.cuda else "cpu"  # the device aten_scratch takes

    def price_on_the_cpu(single: Any, call_kwargs: dict) -> tuple[int, int, str, bool]:
        """aten_scratch of one call of `single` with its arguments by name."""
        name = str(single)
        arguments, _ = _arguments(single, (), call_kwargs, name, lambda t: recorder.index_of(t) is not None)
        return aten_scratch(name, arguments, threads, "cpu")

    class RecordingMode(TorchDispatchMode):
        @classmethod
        def ignore_compile_internals(cls) -> bool:  # Dynamo runs compiled frames under it (_compile's)
            return True

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            passed = _passed_on(types)
            if passed:
                return func(*args, **(kwargs or {})) if passed == "run" else NotImplemented
            kwargs = kwargs or {}
            op = str(func)
            recorder.saved_numbers()
            try:
                out = func(*args, **kwargs)
            except DataDependentError:
                raise
            except Exception as e:  # a value or shape meta cannot give: from the shadows, or a clear error
                out = None if recorder.target.cuda else cpu_meta(func, args, kwargs)
                if out is None and not _data_dependent(e):
                    raise
                if out is None:
                    out = recorder.shadows.instead(func, args, kwargs, e)
            if not recorder.target.cuda:
                out = cpu_layout(func, out, args)
            recorder.shadows.follow(func, args, kwargs, out)
            if func is torch.ops.aten.topk.default and recorder.shadows.of(args[0]) is None:
                recorder.topk_without_values(args, kwargs, out)
            events: list[int] = []
            device = "cpu"
            for t in tree_leaves(out):
                if isinstance(t, torch.Tensor):
                    device = str(t.device)
                    index = recorder.storage(t, f"{recorder.module + ': ' if recorder.module else ''}{op}",
                                             _TEMPORARIES)
                    if index is not None:
                        events.append(index)
            if func.overloadpacket is torch.ops.aten.add:
                recorder.sums.note(len(recorder.record.statements), args, out, lambda t: recorder.live.get(
                    id(t.untyped_storage())))
            arguments, wraps = _arguments(func, args, kwargs, op, lambda t: recorder.index_of(t) is not None)
            _scratch_events(recorder, func, (args, kwargs), aten_scratch(op, arguments, threads, kernels),
                            price_on_the_cpu, device, events)
            source = f"{op}({', '.join(_describe(a) for a in args)}) -> {_describe(out)}"
            if recorder.module:
                source += f"  # {recorder.module}"
            if wraps:
                recorder.unchecked += [weakref.ref(t) for t in tree_leaves(out) if isinstance(t, torch.Tensor)]
            recorder.statement(op, source, events, moment=False)
            return out

    return RecordingMode()


@contextlib.contextmanager
def _rng_states(recorder: _Recorder):
    """The CPU generator's states the step takes, recorded. Its state is a
    tensor ``torch.get_rng_state`` makes without an ATen call the dispatch
    mode sees. torch.utils.checkpoint keeps one per checkpointed call from
    its forward to its recomputation (preserve_rng_state), and
    torch.random.fork_rng takes another around the recomputation: the CPU's
    state always, whatever the device, but on ``meta`` fork_rng forks
    nothing, so there it is run as the real device would. Both are looked
    up on their modules when called, so replacing them there reaches
    checkpoint."""
    import torch

    original_state, original_fork = torch.get_rng_state, torch.random.fork_rng

    def get_rng_state() -> Any:
        state = original_state()
        index = recorder.storage(state, "the CPU RNG state (torch.get_rng_state)", _ACTIVATIONS, "cpu")
        if index is not None:
            recorder.pending.append(index)
        return state

    @contextlib.contextmanager
    def fork_rng(devices=None, enabled=True, _caller="fork_rng", _devices_kw="devices", device_type=None):
        if device_type != "meta":
            with original_fork(devices, enabled, _caller, _devices_kw, device_type):
                yield
            return
        if not enabled:
            yield
            return
        state = torch.get_rng_state()
        try:
            yield
        finally:
            torch.set_rng_state(state)

    torch.get_rng_state, torch.random.fork_rng = get_rng_state, fork_rng
    try:
        yield
    finally:
        torch.get_rng_state, torch.random.fork_rng = original_state, original_fork


def _module_tracking(model: Any, recorder: _Recorder):
    """Forward hooks that keep recorder.module the running submodule's path."""
    import torch

    paths = {id(m): name for name, m in model.named_modules()}
    stack: list[str] = []

    def pre(module, _args):
        stack.append(recorder.module)
        recorder.module = paths.get(id(module), recorder.module)

    def post(module, _args, _out):
        recorder.module = stack.pop() if stack else ""

    return (torch.nn.modules.module.register_module_forward_pre_hook(pre),
            torch.nn.modules.module.register_module_forward_hook(post))


def _loss(out: Any, loss_fn: Callable | None, inputs: tuple, kwargs: dict) -> Any:
    """The step's loss: loss_fn(output, *inputs, **kwargs), else the output's
    ``.loss`` (a transformers ModelOutput's, given labels), else the output."""
    if loss_fn is not None:
        return loss_fn(out, *inputs, **kwargs)
    loss = getattr(out, "loss", None)
    return out if loss is None else loss


def _make_optimizer(optimizer: Any, optimizer_kwargs: dict | None, parameters: list) -> Any:
    import torch

    if optimizer is None:
        if optimizer_kwargs:
            raise ValueError("optimizer_kwargs given without an optimizer")
        return None
    if isinstance(optimizer, torch.optim.Optimizer):
        raise TypeError(
            f"optimizer is a {type(optimizer).__name__} instance; pass its class "
            f"(optimizer=torch.optim.{type(optimizer).__name__}, optimizer_kwargs={{...}}): the step makes "
            "its own, over the stand-ins of the model's parameters")
    if not callable(optimizer):
        raise ValueError(f"optimizer must be an optimizer class or a callable taking the parameters, "
                         f"got {optimizer!r}")
    return optimizer(parameters, **dict(optimizer_kwargs or {}))


def _phase(recorder: _Recorder, name: str, iteration: int, first: int) -> None:
    recorder.record.phases.append((name, iteration, first, len(recorder.record.statements)))


def _categorize(recorder: _Recorder, tensors: list, category: int, names: list[str]) -> None:
    for t, name in zip(tensors, names):
        index = recorder.index_of(t)
        if index is not None:
            entry = recorder.record.storages[index]
            entry[2] = category
            entry[1] = name
            entry[3] = name.rsplit(" ", 1)[-1].rpartition(".")[0]


def _factories_on_the_models_device(recorder: _Recorder) -> Any:
    """A tensor the forward makes without a device (``torch.ones(T, T,
    dtype=torch.bool).triu(1)`` for a causal mask, ``torch.arange(T)``) is on
    the default device, the CPU: on a CPU step that is the model's device,
    so it is made on ``meta`` like the model's stand-ins (else the step
    mixes CPU and meta tensors and cannot be recorded). On a CUDA target it
    stays a CPU tensor, as on the GPU."""
    import torch

    return contextlib.nullcontext() if recorder.target.cuda else torch.device("meta")


def _model_call(recorder: _Recorder, step: dict) -> Any:
    """The model called on the step's inputs. A compiled model is called
    outside ``torch.device("meta")``: its graphs are traced as the CPU runs
    them (inductor_replay.compiling_for_the_cpu), and Dynamo guards on the
    device context, so compiling and recording call it alike."""
    model, inputs, kwargs = step["model"], step["inputs"], step["kwargs"]
    with contextlib.nullcontext() if step["compiled"] else _factories_on_the_models_device(recorder):
        return model(*inputs[:step["model_inputs"]], **kwargs)


def _forward(recorder: _Recorder, k: int, step: dict) -> Any:
    """The forward and loss, recorded; returns the loss."""
    model, inputs, kwargs = step["model"], step["inputs"], step["kwargs"]
    first = len(recorder.record.statements)
    made_before = len(recorder.record.storages)
    out = _model_call(recorder, step)
    with _factories_on_the_models_device(recorder):
        loss = _loss(out, step["loss_fn"], inputs, kwargs)
    del out
    recorder.statement("forward returns", "the model's output other than the loss released")
    loss_index = recorder.index_of(loss) if hasattr(loss, "untyped_storage") else None
    for index in recorder.live.values():  # what the forward made and autograd keeps
        entry = recorder.record.storages[index]
        if index >= made_before and index != loss_index and entry[2] == _TEMPORARIES and not entry[5]:
            entry[2] = _ACTIVATIONS
    _phase(recorder, "forward", k, first)
    return loss


def _gradient_sync(step: dict, last: bool) -> Any:
    """A micro-batch's forward and backward under the wrapper's gradient
    sync: DistributedDataParallel's ``no_sync()`` but for the last
    micro-batch (reducer.cpp: the gradients stay in ``.grad``, no bucket is
    reduced); FSDP2's ``set_requires_gradient_sync(last)`` (its
    reduce-scatter skipped, the unsharded gradients kept)."""
    model = step["model"]
    if step["accumulation"] == 1:
        return contextlib.nullcontext()
    if hasattr(model, "no_sync"):
        return contextlib.nullcontext() if last else model.no_sync()
    if hasattr(model, "set_requires_gradient_sync"):
        model.set_requires_gradient_sync(last)
    return contextlib.nullcontext()


def _forward_and_backward(recorder: _Recorder, k: int, step: dict, last: bool) -> list:
    """One micro-batch's forward, loss and backward, recorded, its
    gradients categorized; returns the box holding its loss. The backward's
    first statement is ``recorder.backward_began``."""
    from .running import _backward

    with _gradient_sync(step, last):
        box = [_forward(recorder, k, step)]
        recorder.backward_began = len(recorder.record.statements)
        with recorder.sums.during_backward(recorder.record.diagnostics) as by_engine:
            _backward(box[0], step["gradient"])
    recorder.statement("loss.backward() returns", "AccumulateGrad done; autograd's graph released")
    recorder.sums.rewrite(recorder.record.statements, recorder.record.storages, by_engine)
    params, names = step["parameters"], step["parameter_names"]
    with_grad = [(p.grad, n) for p, n in zip(params, names) if p.grad is not None]
    _categorize(recorder, [g for g, _ in with_grad], _GRADIENTS, [f"grad of {n}" for _, n in with_grad])
    return box


def _run_iteration(recorder: _Recorder, k: int, step: dict) -> None:
    """One training iteration, recorded: forward (and loss) and backward
    for each of its micro-batches (``accumulation_steps``: the gradients
    summed into ``.grad``, a data-parallel wrapper's gradient sync off but
    for the last), then optimizer, zero_grad, the loss released (`box`
    holds it, so that releasing it is one clear())."""
    micro = step["accumulation"]
    for i in range(1, micro):
        box = _forward_and_backward(recorder, k, step, last=False)
        box.clear()
        recorder.statement("micro-batch returns", f"micro-batch {i} of {micro} done: its loss released, .grad kept")
        _phase(recorder, "backward", k, recorder.backward_began)
    box = _forward_and_backward(recorder, k, step, last=True)
    first = recorder.backward_began
    params, names = step["parameters"], step["parameter_names"]
    opt = step["optimizer"]
    if opt is None:
        _release(recorder, step, box)
        _phase(recorder, "backward", k, first)
        return
    _phase(recorder, "backward", k, first)
    first = len(recorder.record.statements)
    opt.step()
    recorder.statement("optimizer.step() returns", "the optimizer's temporaries released")
    by_param = {id(p): n for p, n in zip(params, names)}
    for p, state in opt.state.items():
        kept = [(key, v) for key, v in state.items() if hasattr(v, "untyped_storage")]
        _categorize(recorder, [v for _, v in kept], _STATE,
                    [f"{key} of {by_param.get(id(p), '?')}" for key, _ in kept])
    _release(recorder, step, box)
    _phase(recorder, "optimizer", k, first)


def _release(recorder: _Recorder, step: dict, box: list) -> None:
    """zero_grad (when asked), then the loss released."""
    target = step["optimizer"] if step["optimizer"] is not None else step["model"]
    if step["zero_grad"]:
        target.zero_grad(set_to_none=True)
        recorder.statement("zero_grad", "zero_grad(set_to_none=True): .grad released")
    box.clear()
    recorder.statement("step() returns", "the loss released")


# A step whose live bytes still change after this many steps is flagged.
_MOST_STEADY_STEPS = 5


def record_step(model: Any, *inputs: Any, kwargs: dict | None = None, loss_fn: Callable | None = None,
                gradient: str | None = None, optimizer: Any = None, optimizer_kwargs: dict | None = None,
                steps: int | None = 1, zero_grad: bool = True, target: DeviceTarget | None = None,
                model_inputs: int | None = None, routing: Any = None,
                distributed: str | None = None, parallelize: Callable | None = None,
                least_steps: int = 1, accumulation_steps: int = 1) -> RecordedStep:
    """Runs ``steps`` iterations of the step on meta stand-ins under the
    recording dispatch mode (see the module docstring) and returns the record.
    ``steps=None``: the steady state: iterations until what is live after
    one equals (bytes by category) what was live after the one before,
    `least_steps` at least and _MOST_STEADY_STEPS at most (beyond them a
    diagnostic says the memory still changes); ``record.iterations`` says
    how many ran. `accumulation_steps`: each step's micro-batches, each on
    the same inputs (_run_iteration).
    `target`: the device the step is recorded for (device_target.py; None:
    the CPU). `model_inputs`: how many of the inputs, the first, the model
    takes (None: all); the loss takes all of them. `routing`: the
    mixture-of-experts routing assumed where the step cannot read it
    (routing.py). `distributed="ddp"`: the replica wrapped in
    DistributedDataParallel under the current process group
    (data_parallel.py), its buckets held from the start; ``"fsdp"``: the
    replica sharded by FSDP2's fully_shard, by `parallelize` or by default
    (fully_sharded.py)."""
    kwargs = dict(kwargs or {})
    if model_inputs is not None and model_inputs > len(inputs):
        raise ValueError(f"model_inputs={model_inputs} but the step has {len(inputs)} inputs")
    recorder = _Recorder(target, routing, per_step=steps is None)
    compiled = compiled_specs(model, recorder.target)
    if is_compiled_module(model):
        model = model._orig_mod
    given = model
    model, inputs, kwargs = meta_replica(model, tuple(inputs), kwargs, recorder.shadows)
    if (compiled or distributed) and model is given:  # a meta model is its own replica: copied first
        model = copy.deepcopy(model)
    def sharding() -> Any:  # FSDP2 on the meta replica: made and run under it
        return meta_parameters_trained(recorder.resized) if distributed == "fsdp" else contextlib.nullcontext()

    with sharding():
        model, buckets = _distributed(recorder, model, distributed, parallelize)
    named = _held_at_the_start(recorder, model, inputs, kwargs, buckets)
    buckets.clear()  # the reducer's own: freed when it rebuilds them (the second step)
    parameters = [p for _, p in named]
    model, backends = recompiled(model, compiled)
    step = {"model": model, "inputs": inputs, "kwargs": kwargs, "loss_fn": loss_fn, "gradient": gradient,
            "compiled": backends,
            "model_inputs": model_inputs, "accumulation": accumulation_steps,
            "optimizer": _make_optimizer(optimizer, optimizer_kwargs, parameters), "zero_grad": zero_grad,
            "parameters": parameters, "parameter_names": [n for n, _ in named]}
    # A compiled step's modules run inside Inductor's programs: no hooks
    # (Dynamo would trace them into its graphs).
    hooks = () if compiled else _module_tracking(model, recorder)
    # torch._disable_dynamo imports torch._dynamo at a decorated function's
    # first call. That import's frames stay in a reference cycle that holds
    # the call's arguments until the collector runs (never, while the
    # recording keeps it off), so a process's first recording would free
    # them late. Imported here, the recording is the steady step's.
    import torch._dynamo  # noqa: F401

    was_enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        with kernel_choices(recorder.target), compiled_regions_refused(replayed_callback), transformers_quiet(), \
                sharding():
            if compiled:
                _compile(recorder, step)
            with _recording_contexts(recorder, bool(compiled)), _dispatch_mode(recorder):
                _run_iterations(recorder, step, steps, least_steps)
    finally:
        for h in hooks:
            h.remove()
        if was_enabled:
            gc.enable()
    return _closed(recorder)


def _live_signature(recorder: _Recorder) -> list[tuple[int, int]]:
    """What is live now, as the steady state compares it: each storage's
    bytes and category, sorted."""
    storages = recorder.record.storages
    return sorted((storages[i][0], storages[i][2]) for i in recorder.live.values())


def _run_iterations(recorder: _Recorder, step: dict, steps: int | None, least: int) -> None:
    """`steps` iterations, or with None until the live bytes after one
    repeat those after the one before (record_step)."""
    before = _live_signature(recorder)
    k = 0
    while True:
        k += 1
        if recorder.routing is not None:
            recorder.routing.new_step()
        _run_iteration(recorder, k, step)
        if steps is not None:
            if k == steps:
                break
            continue
        after = _live_signature(recorder)
        if k >= least and after == before:
            break
        if k == _MOST_STEADY_STEPS:
            recorder.record.diagnostics.append(
                f"the step's live bytes after step {k} still differ from those after step {k - 1} "
                f"({sum(b for b, _ in before):,} -> {sum(b for b, _ in after):,} bytes): the figures cover "
                f"{k} steps, and a longer run may hold more (pass steps= to run more)")
            break
        before = after
    recorder.record.iterations = k


def _distributed(recorder: _Recorder, model: Any, distributed: str | None,
                 parallelize: Callable | None) -> tuple[Any, list]:
    """The replica as the rank runs it, and the tensors its wrapper made and
    keeps (DDP's buckets)."""
    if distributed == "ddp":
        return wrapped_in_ddp(model)
    if distributed == "fsdp":
        if recorder.target.cuda:
            recorder.record.diagnostics.append(
                "FSDP2's all-gathers and reduce-scatters run on their own CUDA streams; they are recorded in "
                "the order the program makes them: the requested bytes are the program's, the caching "
                "allocator's reserved bytes do not yet keep its streams' blocks apart")
        return wrapped_in_fsdp(model, parallelize), []
    return model, []


def _held_at_the_start(recorder: _Recorder, model: Any, inputs: tuple, kwargs: dict, buckets: list) -> list:
    """Registers the parameters, buffers, inputs and a data-parallel
    wrapper's gradient buckets (held before the step starts) and returns the
    named parameters."""
    from torch.utils._pytree import tree_leaves

    import torch

    named = list(model.named_parameters())
    for name, p in named:
        recorder.storage(p, f"parameter {name}", _PARAMETERS)
    for name, b in model.named_buffers():
        recorder.storage(b, f"buffer {name}", _PARAMETERS)
    for i, x in enumerate(tree_leaves((inputs, kwargs))):
        if isinstance(x, torch.Tensor):
            recorder.storage(x, f"input {i}", _INPUTS)
    for i, b in enumerate(buckets):
        recorder.storage(b, f"DDP gradient bucket {i}", _GRADIENTS)
    for entry in recorder.record.storages:
        entry[3] = entry[1].split(" ", 1)[1].rpartition(".")[0] if entry[2] == _PARAMETERS else ""
    recorder.record.held = list(range(len(recorder.record.storages)))
    return named


def _closed(recorder: _Recorder) -> RecordedStep:
    """The record, with what the recording saw but did not count named."""
    if recorder.routing is not None:
        recorder.routing.check_all_used()
    recorder.probes.settle(recorder.record.storages, recorder.record.diagnostics)
    if recorder.host_bytes:
        recorder.record.diagnostics.append(
            f"{recorder.host_bytes:,} bytes of CPU tensors (Adam's step counters, saved numbers, attention's "
            f"philox seeds) are host memory on {recorder.target.name}: not counted in the device's bytes")
    if recorder.unknown_ops:
        recorder.record.diagnostics.append(
            f"{len(recorder.unknown_ops)} ATen ops are not in peakmem's registry; what their "
            f"{'CUDA' if recorder.target.cuda else 'CPU'} kernels "
            f"allocate inside themselves, if anything, is not counted: {', '.join(sorted(recorder.unknown_ops))}")
    return recorder.record


def _recording_contexts(recorder: _Recorder, compiled: bool) -> Any:
    """What the recording runs under besides its dispatch mode: the
    kernels' choices and the RNG states of an eager step; a compiled
    step's programs, already compiled, under ``fail_on_recompile``."""
    if compiled:
        return no_recompiles()
    stack = contextlib.ExitStack()
    stack.enter_context(cuda_kernels(recorder) if recorder.target.cuda else cpu_attention())
    stack.enter_context(_rng_states(recorder))
    return stack


def _compile(recorder: _Recorder, step: dict) -> None:
    """One unrecorded forward, loss and backward of the compiled replica:
    Dynamo and Inductor compile its programs there (inductor_replay.py);
    its gradients are dropped. The recording's dispatch mode says it
    ignores compile internals, so Dynamo runs these compiled frames under
    it (it would run them eagerly otherwise); any other compiled code is
    refused before Dynamo sees it (compiled_regions_refused)."""
    from .running import _backward

    with compile_failures_named(), compiling_for_the_cpu():
        out = _model_call(recorder, step)
        with _factories_on_the_models_device(recorder):
            loss = _loss(out, step["loss_fn"], step["inputs"], step["kwargs"])
        del out
        _backward(loss, step["gradient"])
    del loss
    for p in step["parameters"]:
        p.grad = None
    programs = [kind for backend in step["compiled"] for kind, _ in backend.programs]
    forward = programs.count("forward")
    if not forward:
        raise CompiledStepError("torch.compile compiled nothing of the step (Dynamo ran it eagerly: see "
                                "TORCH_LOGS=graph_breaks); peakmem records Inductor's programs, and there are none")
    breaks = forward - len(step["compiled"])
    recorder.record.diagnostics.append(
        f"torch.compile'd step: Inductor's programs recorded ({forward} forward and {len(programs) - forward} "
        f"backward, of {len(step['compiled'])} compiled modules; {max(breaks, 0)} graph breaks, the code "
        f"between them recorded eagerly); its C++ kernels allocate nothing through PyTorch's allocator")


def _record(model: Any, inputs: tuple, step: Any, target: DeviceTarget | None = None) -> RecordedStep:
    """record_step on a peakmem.step.TrainingStep, for `target`. A real
    model whose step reads its mixture-of-experts routing, with real
    inputs and no ``routing=``, is recorded with the routing of one real
    forward (routing.observed_counts), as its diagnostics say."""
    import torch
    from torch.utils._pytree import tree_leaves

    def record(routing: Any) -> RecordedStep:
        return record_step(model, *inputs, kwargs=dict(step.kwargs or {}), loss_fn=step.loss_fn,
                           gradient=step.gradient, optimizer=step.optimizer, optimizer_kwargs=step.optimizer_kwargs,
                           steps=step.steps, zero_grad=step.zero_grad, target=target,
                           model_inputs=step.model_inputs, routing=routing, distributed=step.distributed,
                           parallelize=step.parallelize, least_steps=step.least_steps(),
                           accumulation_steps=step.accumulation_steps)

    try:
        return record(step.routing)
    except DataDependentError as e:
        tensors = [t for t in tree_leaves((list(model.parameters()), inputs, dict(step.kwargs or {})))
                   if isinstance(t, torch.Tensor)]
        if step.routing is not None or not e.router or any(t.device.type == "meta" for t in tensors):
            raise
        counts = observed_counts(model, lambda: model(*step.model_call(inputs), **dict(step.kwargs or {})))
    recorded = record(counts * step.steps if step.steps is not None else counts)
    later = "; later steps assumed to route as the first" if recorded.iterations > 1 else ""
    recorded.diagnostics.insert(0, f"routing read from one real forward of the model ({len(counts)} router "
                                   f"calls{later})")
    return recorded


def estimate_eager_step(model: Any, inputs: tuple, step: Any, pricing: dict,
                        target: DeviceTarget | None = None) -> tuple[dict, float, RecordedRun]:
    """`step` (a peakmem.step.TrainingStep) recorded for `target` and
    simulated (``_core.simulate_recorded_step``'s dict), the seconds the
    recording took and what it ran."""
    from .._core import simulate_recorded_step

    start = time.perf_counter()
    record = _record(model, inputs, step, target)
    recording = time.perf_counter() - start
    result = simulate_recorded_step(record.storages, record.held, record.statements, record.phases,
                                          record.diagnostics, events=True, **pricing)
    return result, recording, recorded_run(model, step, record)


def recorded_step_file(model: Any, inputs: tuple, step: Any, target: DeviceTarget | None = None) -> dict:
    """`step` (a peakmem.step.TrainingStep) recorded, as a recorded step
    file's JSON object (docs/step-file.md, "Recorded steps"): what
    ``peakmem step`` reads, written by C++ (frontend/recorded_step_file.h)."""
    from .._core import recorded_step_file_json

    record = _record(model, inputs, step, target)
    description = optimizer_description(step.optimizer, step.optimizer_kwargs) if step.optimizer is not None else ""
    return recorded_step_file_json(record.storages, record.held, record.statements, record.phases,
                                         record.diagnostics, description, target.name if target is not None else "")
