"""The step's keyword arguments, written once.

``estimate_step``, ``measure_step``, ``export_step``, ``max_batch_size`` and
``peak_formula`` take the step's parts as keywords typed with PEP 692's
``**options: Unpack[...]``: an editor completes them and a type checker
checks them from the TypedDicts below, each key documented once, in the
class that adds it. ``takes(Options)`` makes a function check its keywords
(an unknown one is a TypeError naming it, as Python's own is) and appends
the keys' documentation to its docstring, so ``help()`` lists every one.

    StepOptions                 the step: every function's
    RunOptions(StepOptions)     + plan, recompute: the planned step (estimate, measure, export)
    EstimateOptions(RunOptions) + allocator, alloc_conf, device_memory: how the estimate is priced
"""

from __future__ import annotations

import difflib
import functools
from typing import Any, Callable, Mapping, TypedDict, TypeVar, cast

from .._deprecation import deprecated
from ..api import Allocator
from ..distribution import Strategy
from .frontend import Frontend
from .training_step import Gradient, Recompute

__all__ = ["EstimateOptions", "RunOptions", "StepOptions", "takes"]


class StepOptions(TypedDict, total=False):
    """The step (peakmem.step's docstring says what it runs):

    loss_fn: ``loss_fn(output, *inputs)`` returns the scalar loss (None,
        the default: the model returns it). It may read the inputs, not a
        tensor of its own (targets in a closure are a ValueError).
    model_inputs: how many of the inputs, the first ones, the model takes
        (None, the default: all of them); the rest are the loss's only
        (targets): ``model(*inputs[:model_inputs])``, then
        ``loss_fn(output, *inputs)``. An ``nn.Sequential`` classifier's
        step is ``estimate_step(model, x, y, model_inputs=1,
        loss_fn=lambda output, x, y: F.cross_entropy(output, y))``.
    gradient: None (the default: a scalar loss) or ``"ones"``:
        ``loss.backward(torch.ones_like(loss))`` on a loss of any shape (a
        DTensor program's output, say: Thunder 0.2.6 has no DTensor
        reduction to make a scalar with).
    optimizer: the optimizer's class (``torch.optim.SGD``, ``Adam`` or
        ``AdamW`` under Thunder, with their own defaults; any
        ``torch.optim`` class, or a callable taking the parameters,
        eagerly); None (the default): no optimizer. An instance is a
        TypeError: pass its class and `optimizer_kwargs`.
    optimizer_kwargs: the optimizer's settings (``{"lr": 1e-3}``).
    steps: how many steps run in a row; None (the default): the steady
        state of a training run, as many as it takes for the step's memory
        to repeat: two with an optimizer (from the second step on its state
        is held through the forward and backward), with ``zero_grad=False``
        or a distributed wrapper; one otherwise; the eager front end
        records more while what is live after a step still changes. The
        peak is the highest of them (``step_at_peak`` names the step,
        ``steps`` says how many); ``steps=1`` is the first step alone.
    zero_grad: ``zero_grad(set_to_none=True)`` after each step (default True).
    accumulation_steps: gradient accumulation (default 1): each step runs
        the forward and backward this many times on its inputs (one
        micro-batch used k times), the gradients summed into ``.grad``,
        then one ``optimizer.step()`` and ``zero_grad``; under
        ``strategy="ddp"`` the first k-1 run in DDP's ``no_sync()``, under
        ``"fsdp"`` with FSDP2's ``set_requires_gradient_sync(False)``. The
        eager front end's.
    transform: applied to the ``thunder.jit`` module before it runs: a
        distributed transform such as ``lambda jm:
        thunder.distributed.fsdp(jm, device=...)`` or
        ``thunder.distributed.ddp``, which makes the step one rank's (its
        shards of parameters, gradients and optimizer state). The caller
        initialises the process group; torch's fake process group
        (``torch.testing._internal.distributed.fake_pg``) is rank r of any
        world size in one process, so a cluster's rank is estimated on a
        laptop.
    strategy: ``"fsdp"`` (``"fsdp-zero2"``), ``"fsdp-zero3"`` or ``"ddp"``,
        with `world_size` and `rank`: Thunder's transform for the strategy,
        run as that rank of a fake process group made for the call
        (peakmem.distribution). Not with `transform`. With
        ``frontend="eager"``, ``"ddp"`` is torch's DistributedDataParallel
        around the model (peakmem.step.data_parallel) and ``"fsdp"`` is
        FSDP2, torch's ``fully_shard`` (peakmem.step.fully_sharded), that
        rank's step recorded in this process; ``"fsdp-zero2"`` and
        ``"fsdp-zero3"`` are Thunder's names, not modelled there.
    parallelize: with ``strategy="fsdp"`` on the eager front end, the
        user's own wrapping: ``parallelize(model)`` is called on the copy
        of the model the rank runs, under its process group, and shards it
        as the training script does (``fully_shard`` per block and on the
        root, with ``reshard_after_forward`` and ``mp_policy``, composed
        with ``parallelize_module``'s tensor parallelism on a 2-D mesh as
        torchtitan does; a module it returns is the one run). None (the
        default): every block of each
        ``nn.ModuleList`` is sharded, then the root, with fully_shard's
        defaults.
    world_size: the number of ranks of `strategy`'s process group.
    rank: which of them the step is (default 0).
    kwinputs: the model's keyword inputs, ``model(*inputs, **kwinputs)``
        (the eager front end's; ``kwargs=`` is its old spelling).
    frontend: None (the default: the step as the model runs, a
        ``thunder.jit`` module's under Thunder and any other eagerly; a
        Thunder-only option, `transform`, `plan`, `recompute` or
        `strategy`, makes it Thunder's; peakmem.step.frontend),
        ``"thunder"`` (a ``thunder.jit`` module stands for the module it
        wraps) or ``"eager"``: the step as eager PyTorch runs it
        (peakmem.eager_step), any model PyTorch runs (``transformers``
        models included) and a model output with a ``.loss`` (a
        ``transformers`` ModelOutput given ``labels``) taken as the loss.
        Real tensors are replaced by ``meta`` stand-ins for the recording,
        so the user's model is not run or changed.
    routing: a mixture-of-experts router's choice, where the eager step
        cannot read it (its scores are floating-point activations, which
        the ``meta`` stand-ins do not have): ``"balanced"`` (each expert
        ``N·k/E`` of the tokens' choices), ``"worst"`` (every token to the
        same ``k`` experts), or per-expert token counts, one list for
        every router call or a list of lists in call order
        (peakmem.step.routing). Each assumption is stated in the report's
        diagnostics. None (the default): a step that reads its routing is
        a ValueError naming the line.
    """

    loss_fn: Callable | None
    model_inputs: int | None
    gradient: Gradient | None
    optimizer: Any
    optimizer_kwargs: Mapping[str, Any] | None
    steps: int | None
    zero_grad: bool
    accumulation_steps: int
    transform: Callable | None
    strategy: Strategy | None
    parallelize: Callable | None
    world_size: int | None
    rank: int
    kwinputs: Mapping[str, Any] | None
    frontend: Frontend | None
    routing: Any


class RunOptions(StepOptions, total=False):
    """The planned step (``export_step`` writes it as a step file):

    plan: True (or a dict of ``peakmem.plan``'s options; Thunder's front
        end only): Thunder runs peakmem's planned forward and backward
        (``peakmem.plan_transform``), each trace planned on its own under
        its usual calling convention. Default False.
    recompute: recompute saved tensors in the backward instead of keeping
        them, where that lowers the step's peak: True as low as it goes,
        a budget (``"24GiB"`` or bytes) until the step fits it, or a dict
        of ``"budget"``, ``"max_simulations"`` (5000 by default) and
        ``"time_budget"`` (seconds, none by default: a search bounded by
        wall time can differ between machines). peakmem.recompute's
        search, judged by the step's simulation; the report's
        ``recomputation`` says what was chosen and the FLOPs it adds.
        ``recompute=report.recomputation.names`` (a list or tuple, or the
        dict's ``"names"``) recomputes those as they are, without
        searching again: how ``measure_step`` runs a plan already chosen.
        Not with `plan`. Its old spellings, ``plan={"recompute": True}`` and
        ``plan={"budget": ...}``, still work and warn. On the eager front
        end (``frontend="eager"``) it plans selective activation
        checkpointing instead (peakmem.step.eager_recompute): True, a
        budget, or a dict of ``"budget"`` and ``"max_simulations"``.
    """

    plan: bool | Mapping[str, Any]
    recompute: Recompute | None


class EstimateOptions(RunOptions, total=False):
    """How the estimate is priced (peakmem.step.budget):

    allocator: ``"requested"`` (the storages' own bytes) or
        ``"cuda-caching"``, which also runs PyTorch's CUDA caching allocator
        over the whole step's allocation stream (the parameters and inputs
        allocated first, then every phase's storages in the order the step
        makes and frees them) and fills ``report.allocator``: allocated and
        reserved bytes. Then ``fits`` says whether the step runs without
        the allocator running out of memory (what a GPU user runs out of is
        reserved bytes, not requested ones), and ``headroom_bytes`` is the
        budget less the reserved peak and the CUDA context. None (the
        default): ``"cuda-caching"`` on a GPU model (``device=``), else
        ``"requested"`` (peakmem.step.budget: one verdict everywhere).
    context_bytes: what the card holds outside the caching allocator (the
        CUDA context; a rank's NCCL buffers), counted against the budget
        (bytes or a size such as ``"600MiB"``). None (the default): the GPU
        model's from peakmem.gpu_catalog() (an assumption until measured,
        as the report says), 0 on the CPU.
    alloc_conf: ``PYTORCH_CUDA_ALLOC_CONF``'s syntax (None: that
        environment variable's value).
    device_memory: the device's capacity the allocator model runs with
        (``"80GiB"`` or bytes); with a `budget` and no `device_memory`, the
        budget less `context_bytes` is the capacity.
    device: the device the step is estimated for: a GPU model of
        ``peakmem.gpu_catalog()`` (``"cuda:h100"``, ``"cuda:h100-pcie"``,
        ``"cuda:h200"``, ``"cuda:a100"``, ``"cuda:a100-40gb"``,
        ``"cuda:l4"``, ``"cuda:l40s"``, ``"cuda:a10g"``, ``"cuda:rtx4090"``,
        ...; ``"cuda"``: a Hopper GPU, the H100 SXM's figures) or ``"cpu"``;
        None (the default): the device the model is on, ``meta`` standing
        for the CPU. On a GPU model the budget defaults to the card's
        memory (torch's ``total_memory``), judged by the caching
        allocator's reserved peak plus the CUDA context. On a CUDA target the step is recorded as CUDA
        runs it: the optimizer implementation PyTorch picks there (foreach
        by default; ``fused=True`` accepted on the eager front end), the op
        scratch CUDA's kernels allocate, cuBLAS's and cuBLASLt's workspaces
        kept from the first matrix product (category ``workspaces``), CPU
        tensors (Adam's step counters) as host memory
        (peakmem.step.device_target says what is not yet modelled, and the
        report's diagnostics name it where a step meets it).
    """

    allocator: Allocator | None
    alloc_conf: str | None
    device_memory: int | str | None
    device: str | None
    context_bytes: int | str | None


# A decorated function keeps its own type, so that an editor shows its
# signature and completes its **options' keys.
F = TypeVar("F", bound=Callable[..., Any])

# Old spellings of the keys: each warns and means the new one.
_RENAMED = {"kwargs": "kwinputs"}


def _keys(options: type) -> frozenset[str]:
    return frozenset(options.__required_keys__ | options.__optional_keys__)


def _check(name: str, allowed: frozenset[str], given: dict[str, Any]) -> dict[str, Any]:
    """`given` with the old spellings renamed (each warns); TypeError for a
    keyword outside `allowed` (function `name`'s), or one given in both
    spellings."""
    for old, new in _RENAMED.items():
        if old in given and new in allowed:
            if new in given:
                raise TypeError(f"{name}() got {new}= and {old}=, its old spelling: pass {new}= only")
            deprecated(f"{name}({old}=...)", f"pass {new}=")
            given = {(new if k == old else k): v for k, v in given.items()}
    unknown = sorted(set(given) - allowed)
    if unknown:
        close = difflib.get_close_matches(unknown[0], sorted(allowed), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise TypeError(f"{name}() got an unexpected keyword argument {unknown[0]!r}{hint}; "
                        f"its keywords: {', '.join(sorted(allowed))}")
    return given


def takes(options: type) -> Callable[[F], F]:
    """A decorator for ``fn(..., **options: Unpack[options])``: a keyword
    that is neither a key of `options` nor a parameter of `fn`'s own is a
    TypeError naming it, before `fn` runs, and `fn`'s docstring gets the
    keys' documentation (each class's on the way down from StepOptions)."""
    import inspect

    def decorate(fn: F) -> F:
        own = [p.name for p in inspect.signature(fn).parameters.values()
               if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)]
        allowed = _keys(options) | set(own)
        name = fn.__name__

        @functools.wraps(fn)
        def run(*args: Any, **given: Any) -> Any:
            return fn(*args, **_check(name, allowed, given))

        run.__doc__ = "\n\n".join([inspect.cleandoc(fn.__doc__ or ""), "Keyword arguments:",
                                   *(inspect.cleandoc(c.__doc__ or "") for c in _lineage(options))])
        return cast(F, run)

    return decorate


def _lineage(options: type) -> list[type]:
    """`options` and the TypedDicts above it here, StepOptions first."""
    chain = [StepOptions, RunOptions, EstimateOptions]
    if options not in chain:
        raise ValueError(f"{options.__name__} is not one of {', '.join(c.__name__ for c in chain)}")
    return chain[:chain.index(options) + 1]
