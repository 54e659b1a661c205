"""Selective activation checkpointing planned for an eager step: which
operators of which blocks ``torch.utils.checkpoint`` runs again in the
backward, chosen under a budget by judging each choice with the eager
front end's estimate of the whole step.

``estimate_step(model, ..., frontend="eager", recompute=budget)`` plans,
and the report's ``recomputation`` is an ``EagerRecomputation``; its
``apply(model)`` makes the user's model run the plan (PyTorch's own
checkpointing, nothing of peakmem's at run time).

The blocks are the model's repeated layers: the children of each
``nn.ModuleList`` or ``nn.Sequential`` whose two or more children are all of
one class (a GPT's ``blocks``, a transformers model's ``layers``), the
outermost such list where lists nest. A plan leaves a block alone or runs
it under ``checkpoint(..., use_reentrant=False, context_fn=...)`` with a
selective-checkpoint policy (``create_selective_checkpoint_contexts``)
that saves the operators the plan names, by their index in the order the
block's forward calls them, and recomputes the rest.

The candidates (planning/save_search.h):
* each operator of a block that costs FLOPs by the count below and that
  the recomputation reaches (non-reentrant checkpoint stops recomputing
  once it has every tensor the backward saved, so what comes after costs
  nothing and saving it would only hold memory): kept saved, or
  recomputed, its bytes its outputs'. An operator that writes into its
  inputs, or whose outputs the forward writes into later (dropout's mask,
  filled in place), is always recomputed: SAC refuses a saved output that
  changed, and recomputing it from the checkpoint's saved RNG state draws
  the same numbers;
* each block as the group of its operators: left out of checkpointing (no
  FLOPs added at all), its bytes measured by the simulation.
The search starts with every block checkpointed and nothing saved (the
lowest peak the candidates reach) and keeps saved whatever still fits the
budget, in three tiers: the expensive operators (more than one FLOP per
output element: matmuls, attention), most FLOPs per byte first; then the
blocks; then the other operators. Every step it tries is estimated whole
(forward, loss, backward, optimizer) on ``meta``.

FLOPs are counted per operator as ``operator_flops`` says: a matmul's or
convolution's by ``torch.utils.flop_counter``, attention's as two batched
matmuls (2·b·h·s_q·s_k·(d_qk + d_v); the counter has no entry for the CPU
flash kernel), one per output element for any other operator that is not
a view, none for a view. A plan's ``added_flops`` is the sum over the
operators its recomputation runs.

The plan is judged by the bytes PyTorch requests (the estimate's
``peak_bytes``), whatever the allocator the report is priced with.
"""

from __future__ import annotations

import contextlib
import functools
from dataclasses import dataclass, replace
from typing import Any, Callable, Iterator

__all__ = ["EagerRecomputation", "installed", "operator_flops", "repeated_blocks", "plan_eager_recomputation"]


def operator_flops(func: Any, args: tuple, kwargs: dict, out: Any) -> int:
    """The FLOPs an ATen call `func(*args, **kwargs)` returning `out` costs
    (the module docstring's count)."""
    import torch
    import torch.utils._pytree as pytree
    from torch.utils._runtime_estimation import _IGNORE_OPS, _VIEW_OPS
    from torch.utils.flop_counter import flop_registry

    packet = func._overloadpacket
    if packet is torch.ops.aten._scaled_dot_product_flash_attention_for_cpu:
        query, key, value = args[:3]
        b, h, s_q, d_qk = query.shape
        return 2 * b * h * s_q * key.shape[-2] * (d_qk + value.shape[-1])
    if packet in flop_registry:
        return int(flop_registry[packet](*args, **kwargs, out_val=out))
    if func.is_view or packet in _VIEW_OPS or packet in _IGNORE_OPS:
        return 0
    return sum(t.numel() for t in pytree.tree_leaves(out) if isinstance(t, torch.Tensor))


def repeated_blocks(model: Any) -> list[str]:
    """The qualified names of `model`'s blocks (the module docstring says
    which); ValueError when it has none."""
    import torch.nn as nn

    found: list[str] = []
    for name, module in model.named_modules():
        if any(name == f or name.startswith(f + ".") for f in found):
            continue  # inside a block
        children = list(module.named_children())
        if (isinstance(module, (nn.ModuleList, nn.Sequential)) and len(children) >= 2
                and len({type(c) for _, c in children}) == 1):
            found.extend(f"{name}.{child}" if name else child for child, _ in children)
    if not found:
        raise ValueError(f"{type(model).__name__} has no repeated blocks to checkpoint (an nn.ModuleList or "
                         "nn.Sequential of two or more modules of one class)")
    return found


def _policy(block: str, saved: frozenset[int], operators: tuple[str, ...]) -> Callable:
    """A selective-checkpoint policy saving the operators `saved` names (by
    call index in the block's forward) and recomputing the rest. Each call
    is checked against `operators`, the block's calls as the plan recorded
    them: where the forward runs other operators (another device's
    kernels, another input's branch), the indices would name other outputs,
    so that is a RuntimeError naming the first that differs."""
    from torch.utils.checkpoint import CheckpointPolicy

    seen = {False: 0, True: 0}

    def policy(ctx: Any, func: Any, *args: Any, **kwargs: Any) -> Any:
        i = seen[ctx.is_recompute]
        seen[ctx.is_recompute] = i + 1
        if i >= len(operators) or str(func) != operators[i]:
            planned = operators[i] if i < len(operators) else "nothing (the plan recorded fewer calls)"
            raise RuntimeError(
                f"the recomputation plan for block {block} does not fit this run: its call {i} is {func}, "
                f"planned as {planned}; plan the step on the device and inputs it runs with")
        return CheckpointPolicy.PREFER_SAVE if i in saved else CheckpointPolicy.PREFER_RECOMPUTE

    return policy


def _run_block(forward: Callable, context_of: Callable[[], Callable | None], *args: Any, **kwargs: Any) -> Any:
    """A block's forward as planned: as it is (``context_of()`` None) or
    under non-reentrant checkpoint with that context_fn."""
    from torch.utils.checkpoint import checkpoint

    context_fn = context_of()
    if context_fn is None:
        return forward(*args, **kwargs)
    return checkpoint(forward, *args, use_reentrant=False, context_fn=context_fn, **kwargs)


def _install(model: Any, blocks: list[str], context_of: Callable[[int], Callable[[], Callable | None]]) -> None:
    """Each block's forward made `_run_block`'s with ``context_of(b)`` (an
    instance attribute; a partial of the bound forward, so that a deep copy
    of the model binds the copy's)."""
    modules = dict(model.named_modules())
    for b, name in enumerate(blocks):
        module = modules[name]
        forward = module.forward
        if isinstance(forward, functools.partial) and forward.func is _run_block:
            forward = forward.args[0]  # planned before: the plan replaced
        module.forward = functools.partial(_run_block, forward, context_of(b))


class _BlockPlan:
    """`_install`'s context_of for one block of a fixed plan (what
    ``EagerRecomputation.apply`` installs): None when the block is not
    checkpointed, else a context_fn whose policy saves `saved`. Plain data
    and module-level functions, so that a planned model pickles
    (``torch.save``) and deep-copies with its plan."""

    def __init__(self, block: str, saved: frozenset[int] | None, operators: tuple[str, ...]) -> None:
        self.block, self.saved, self.operators = block, saved, operators

    def __call__(self) -> Callable | None:
        if self.saved is None:
            return None
        return functools.partial(_selective_contexts, self.block, self.saved, self.operators)


def _selective_contexts(block: str, saved: frozenset[int], operators: tuple[str, ...]) -> tuple:
    """A fresh pair of selective-checkpoint contexts with `_policy`'s policy (one per checkpoint call)."""
    from torch.utils.checkpoint import create_selective_checkpoint_contexts

    return create_selective_checkpoint_contexts(_policy(block, saved, operators))


def _planned(plan: list[frozenset[int] | None], blocks: list[str],
             operators: list[tuple[str, ...]]) -> Callable[[int], Callable[[], Callable | None]]:
    """`_install`'s context_of for `plan` (read when each block runs, so
    the plan may change between runs): per block None (not checkpointed)
    or the operators its selective-checkpoint policy saves."""

    def context_of(b: int) -> Callable[[], Callable | None]:
        return lambda: _BlockPlan(blocks[b], plan[b], operators[b])()

    return context_of


@dataclass(frozen=True)
class EagerRecomputation:
    """A selective-checkpointing plan for an eager step and what it does.

    Attributes:
        blocks: the blocks' qualified module names.
        saved: per block, None (not checkpointed) or the call indices of
            the operators its policy saves (the others are recomputed).
        operators: per block, its operators' names in call order.
        budget: the bytes planned for (the lowest peak where none was given).
        peak_before: the step's peak without checkpointing.
        lowest_peak: every block checkpointed, nothing saved.
        peak_after: the step's peak with the plan (what ``estimate_step``
            reports).
        added_flops: the FLOPs the plan's recomputation runs.
        simulations: the steps estimated to find it.
        fits: whether the plan meets the budget (with none, always).
    """

    blocks: tuple[str, ...]
    saved: tuple[tuple[int, ...] | None, ...]
    operators: tuple[tuple[str, ...], ...]
    budget: int | None
    peak_before: int
    lowest_peak: int
    peak_after: int
    added_flops: int
    simulations: int
    fits: bool

    def apply(self, model: Any) -> Any:
        """`model` (the planned one, or another of the same structure) with
        the plan installed in place: each checkpointed block's forward runs
        under torch.utils.checkpoint with its policy, which checks each
        call against ``operators`` (a RuntimeError where the run calls
        other operators than the plan recorded). Returns `model`, which
        ``torch.save`` saves with the plan installed."""
        plans = [_BlockPlan(name, None if s is None else frozenset(s), ops)
                 for name, s, ops in zip(self.blocks, self.saved, self.operators)]
        _install(model, list(self.blocks), plans.__getitem__)
        return model

    def describe(self) -> list[str]:
        """One line per block: left alone, or what its recomputation runs again."""
        lines = []
        for name, saved, ops in zip(self.blocks, self.saved, self.operators):
            if saved is None:
                lines.append(f"{name}: not checkpointed")
            else:
                kept = ", ".join(f"{i} {ops[i]}" for i in saved) or "nothing"
                lines.append(f"{name}: checkpointed, saving {kept}")
        return lines


@contextlib.contextmanager
def installed(model: Any, plan: EagerRecomputation | None) -> Iterator[Any]:
    """`model` with `plan` installed (nothing with None) for the block's
    duration; its blocks' own forwards back after."""
    if plan is None:
        yield model
        return
    modules = dict(model.named_modules())
    before = {name: modules[name].__dict__.get("forward") for name in plan.blocks}
    try:
        yield plan.apply(model)
    finally:
        for name, forward in before.items():
            if forward is None:
                del modules[name].forward
            else:
                modules[name].forward = forward


@dataclass
class _Operator:
    name: str
    flops: int
    bytes: int  # its outputs' storages
    expensive: bool  # more than one FLOP per output element (a matmul, attention, a convolution)
    savable: bool  # neither mutates its inputs nor has its outputs mutated later in the forward
    reached: bool = False


class _Lookups(dict):
    """torch's SAC cache for one operator (call index -> its entry), which
    remembers the call indices the recomputation looked up."""

    def __init__(self) -> None:
        super().__init__()
        self.looked: set[int] = set()

    def get(self, key: Any, default: Any = None) -> Any:
        self.looked.add(key)
        return super().get(key, default)


def _block_operators(model: Any, inputs: tuple, step: Any, blocks: list[str]) -> list[list[_Operator]]:
    """Each block's operators in call order, from one forward and backward
    on `model` (a meta replica) with every block checkpointed recomputing
    everything: an operator is reached when the recomputation looked its
    call up in torch's SAC cache (storage[op][call index], the cache the
    policy's context makes; read, not changed)."""
    import torch
    from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts

    from .cpu_attention import cpu_attention
    from .eager import _loss
    from .running import _backward

    ops: list[list[_Operator]] = [[] for _ in blocks]
    keys: list[list[tuple[Any, int]]] = [[] for _ in blocks]
    versions: list[list[list[tuple[Any, int]]]] = [[] for _ in blocks]
    storages: list[Any] = [None] * len(blocks)

    def context(b: int) -> tuple:
        if storages[b] is not None:
            raise ValueError(f"the block {blocks[b]} runs more than once in a forward: its recomputation is not "
                             "planned (one checkpoint policy per block call)")
        counts: dict = {}

        def policy(ctx: Any, func: Any, *args: Any, **kwargs: Any) -> Any:
            if not isinstance(func, torch._ops.OpOverload):
                raise ValueError(f"the block {blocks[b]} calls {func}, not an ATen operator (a higher-order "
                                 "operator or a compiled region): its recomputation is not planned")
            out = ctx.op_output
            tensors = [t for t in torch.utils._pytree.tree_leaves(out) if isinstance(t, torch.Tensor)]
            flops = operator_flops(func, args, kwargs, out)
            held = 0 if flops == 0 else sum(t.untyped_storage().nbytes() for t in tensors)
            ops[b].append(_Operator(str(func), flops, held, flops > sum(t.numel() for t in tensors),
                                    not func._schema.is_mutable))
            versions[b].append([(t, t._version) for t in tensors])
            keys[b].append((func, counts.get(func, 0)))
            counts[func] = counts.get(func, 0) + 1
            return CheckpointPolicy.PREFER_RECOMPUTE

        contexts = create_selective_checkpoint_contexts(policy)
        storages[b] = contexts[0].storage
        storages[b].default_factory = _Lookups
        return contexts

    _install(model, blocks, lambda b: (lambda: functools.partial(context, b)))
    kwargs = dict(step.kwargs or {})
    with cpu_attention():
        loss = _loss(model(*step.model_call(inputs), **kwargs), step.loss_fn, inputs, kwargs)
        for b in range(len(blocks)):
            for op, outputs in zip(ops[b], versions[b]):
                op.savable = op.savable and all(t._version == v for t, v in outputs)
        versions.clear()
        _backward(loss, step.gradient)
    for b in range(len(blocks)):
        for op, (f, i) in zip(ops[b], keys[b]):
            op.reached = i in storages[b][f].looked
    return ops


def plan_eager_recomputation(model: Any, inputs: tuple, step: Any, budget: int | None, pricing: dict,
                             max_simulations: int = 5000) -> EagerRecomputation:
    """The plan for `step` (a peakmem.step.TrainingStep) of `model` on
    `inputs` under `budget` bytes (None: as low as the step goes), searched
    as the module docstring says. The model is not touched (the search runs
    on a meta replica)."""
    import copy

    from .._core import save_search
    from .eager import estimate_eager_step
    from .meta_replica import meta_replica

    blocks = repeated_blocks(model)
    kwargs = dict(step.kwargs or {})
    replica, meta_inputs, meta_kwargs = copy.deepcopy(meta_replica(model, tuple(inputs), kwargs))
    step = replace(step, kwargs=meta_kwargs)
    ops = _block_operators(copy.deepcopy(replica), meta_inputs, step, blocks)

    plan: list[frozenset[int] | None] = [None] * len(blocks)
    _install(replica, blocks, _planned(plan, blocks, [tuple(op.name for op in block_ops) for block_ops in ops]))

    def peak() -> int:
        for p in replica.parameters():  # what a recording left (zero_grad=False keeps .grad)
            p.grad = None
        return estimate_eager_step(replica, meta_inputs, step, pricing)[0]["peak_bytes"]

    peak_before = peak()
    # The candidates (the module docstring), in three tiers: the expensive
    # operators, the blocks, the other operators.
    candidates: list[tuple[int, int, list[int], int]] = []
    owner: list[tuple[int, int | None]] = []  # (block, operator index; None: the block)
    for b, block_ops in enumerate(ops):
        for i, op in enumerate(block_ops):
            if op.reached and op.flops > 0 and op.savable:
                candidates.append((op.flops, op.bytes, [], 0 if op.expensive else 2))
                owner.append((b, i))
    singles = len(candidates)
    for b in reversed(range(len(blocks))):
        # The block's own FLOPs: what its recomputation runs that no single
        # candidate can save (operators that write in place or are written into).
        unsavable = sum(op.flops for op in ops[b] if op.reached and not op.savable)
        candidates.append((unsavable, 0, [c for c in range(singles) if owner[c][0] == b], 1))
        owner.append((b, None))

    def plan_of(kept: list[bool]) -> list[frozenset[int] | None]:
        saved: list[set[int] | None] = [set() for _ in blocks]
        for (b, i), keep in zip(owner, kept):
            if keep and i is None:
                saved[b] = None
        for (b, i), keep in zip(owner, kept):
            if keep and i is not None and saved[b] is not None:
                saved[b].add(i)
        return [None if s is None else frozenset(s) for s in saved]

    def simulate(kept: list[bool]) -> int:
        plan[:] = plan_of(kept)
        return peak()

    # Without a budget: the lowest peak (every block checkpointed, nothing
    # saved), keeping saved whatever does not raise it.
    r = save_search(candidates, simulate, budget, max_simulations)
    chosen = plan_of(r["kept"])
    return EagerRecomputation(
        blocks=tuple(blocks), saved=tuple(None if s is None else tuple(sorted(s)) for s in chosen),
        operators=tuple(tuple(op.name for op in block_ops) for block_ops in ops),
        budget=r["lowest_peak"] if budget is None else budget, peak_before=peak_before,
        lowest_peak=r["lowest_peak"], peak_after=r["peak"], added_flops=r["added_flops"],
        simulations=1 + r["simulations"], fits=r["fits"])
