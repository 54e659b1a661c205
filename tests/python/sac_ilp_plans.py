"""PyTorch's SAC ILP (torch.distributed._tools.sac_ilp) on the CPU: its
choices for a step, applied and measured, beside which peakmem's
recomputation is judged (bench/bench_recompute.py's pareto part,
test_recompute_sac_ilp.py).

The pipeline is torch's own (its test_sac_ilp.py): under FakeTensorMode,
MemTracker, RuntimeEstimator and SACEstimator record one forward and
backward; ilp_utils.aggregate_stats and parse_module_info make the module
graph; sac_milp(graph, budget in GiB) picks the modules to checkpoint and
the share of each one's activation memory to discard. It needs pulp (the
MILP front end) and pwlf (SACEstimator's trade-off curves):
bench/requirements-sac-ilp.txt.

One substitution: RuntimeEstimator's "operator-level-cost-model", the
roofline both estimators time operators with, reads the CUDA device's peak
FLOP/s and DRAM bandwidth and refuses to run without CUDA. Here the same
roofline runs with fixed CPU figures: an operator takes
max(FLOPs / CPU_FLOPS, bytes read and written / CPU_BYTES_PER_S), its FLOPs
counted as the step's are (below), so that the CPU's flash attention,
which torch.utils.flop_counter leaves out, costs its matmuls.
Only the ratios between operators matter to the ILP (it minimizes
recomputation time under the memory budget).

A choice is applied as SAC applies it: each module picked, with discard
ratio r, runs under torch.utils.checkpoint (non-reentrant) with a
create_selective_checkpoint_contexts policy from
get_optimal_checkpointing_policy_per_module(its SACStats, 1 - r), one
save-or-recompute decision per operator in the order SACEstimator recorded
them (checkpoint's ignored operators, OPS_TO_ALWAYS_SKIP, left out). The
choices are made on the step as PyTorch runs it; PyTorch runs them with
its own selective checkpointing, Thunder with peakmem's checkpoint
lookaside (peakmem.step.thunder_checkpoint), without which it ignores
checkpoint's context_fn (recompute_frontier runs both).

Added FLOPs are counted as peakmem.step.eager_recompute.operator_flops
counts them (torch.utils.flop_counter's for matmuls, attention as its two
batched matmuls, one per output element of any other operator but a
view): every operator the planned step runs, minus every operator the
plain step runs; checkpoint's recomputation is the difference (the
backward's own operators are the same in both).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Callable

# The CPU roofline's figures (the substitution above): about what 2 AVX2
# cores reach in float32 matmuls, and one socket's DRAM bandwidth.
CPU_FLOPS = 1e11
CPU_BYTES_PER_S = 2e10


def _cpu_roofline(func: Any, args: tuple, kwargs: dict | None) -> tuple[Any, float]:
    """RuntimeEstimator._roofline_estimate's model with CPU_FLOPS and
    CPU_BYTES_PER_S: (the operator's result, its time in ms)."""
    import torch
    import torch.utils._pytree as pytree
    from torch.utils._runtime_estimation import _IGNORE_OPS, get_num_bytes

    from peakmem.step.eager_recompute import operator_flops

    kwargs = kwargs or {}
    out = func(*args, **kwargs)
    if func._overloadpacket in _IGNORE_OPS:
        return out, 0.0
    tensors = [t for t in pytree.tree_leaves((args, kwargs, out)) if isinstance(t, torch.Tensor)]
    moved = sum(get_num_bytes(t) for t in tensors)
    flops = operator_flops(func, args, kwargs, out)
    return out, max(flops / CPU_FLOPS, moved / CPU_BYTES_PER_S) * 1e3


@dataclass
class SacModel:
    """SAC ILP's view of one step: the module graph sac_milp takes, and each
    module's per-operator statistics (SACEstimator.sac_mod_stats)."""

    graph: Any
    sac_stats: dict
    baseline_bytes: int  # the graph's own estimate of the unplanned peak


def sac_model(make: Callable[[], Any], inputs: Callable[[], tuple]) -> SacModel:
    """Records the step `make()(*inputs())` (a model whose forward returns
    the loss) as torch's SAC ILP does, on fake CPU tensors."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.distributed._tools.ilp_utils import (aggregate_stats, get_peak_memory_runtime_baseline,
                                                    parse_module_info)
    from torch.distributed._tools.mem_tracker import MemTracker
    from torch.distributed._tools.runtime_estimator import RuntimeEstimator
    from torch.distributed._tools.sac_estimator import SACEstimator

    saved = RuntimeEstimator.__dict__["_roofline_estimate"]
    RuntimeEstimator._roofline_estimate = classmethod(lambda cls, f, a, k: _cpu_roofline(f, a, k))
    try:
        with FakeTensorMode():
            model = make()
            given = inputs()
            tracker = MemTracker()
            tracker.track_external(model)
            with tracker:
                model(*given).backward()
            model.zero_grad(set_to_none=True)
            runtimes = RuntimeEstimator()
            with runtimes("operator-level-cost-model"):
                model(*given).backward()
            model.zero_grad(set_to_none=True)
            sac = SACEstimator()
            with sac("operator-level-cost-model"):
                loss = model(*given)
            loss.backward()
    finally:
        RuntimeEstimator._roofline_estimate = saved
    graph = parse_module_info(aggregate_stats(model, tracker, runtimes, sac, torch.device("cpu")))
    return SacModel(graph, dict(sac.sac_mod_stats), get_peak_memory_runtime_baseline(graph)[0])


def sac_choice(m: SacModel, budget_bytes: int) -> dict[str, float] | None:
    """sac_milp's choice under `budget_bytes` (in its memory model): module
    name -> share of its activation memory discarded; None when the solver
    finds none."""
    from torch.distributed._tools.sac_ilp import sac_milp

    choice, _time, peak = sac_milp(m.graph, memory_budget=budget_bytes / 2**30)
    return None if peak < 0 else choice


def _policy(decisions: list[int]) -> Callable:
    """A selective-checkpoint policy saving the operators `decisions` marks
    1, counted in the forward and again in the recomputation."""
    from torch.distributed._tools.sac_estimator import OPS_TO_ALWAYS_SKIP
    from torch.utils.checkpoint import CheckpointPolicy

    seen = {False: 0, True: 0}

    def policy(ctx: Any, func: Any, *args: Any, **kwargs: Any) -> Any:
        if func in OPS_TO_ALWAYS_SKIP:
            return CheckpointPolicy.PREFER_RECOMPUTE  # checkpoint ignores these operators
        i = seen[ctx.is_recompute]
        seen[ctx.is_recompute] = i + 1
        return CheckpointPolicy.PREFER_SAVE if decisions[i] else CheckpointPolicy.PREFER_RECOMPUTE

    return policy


def apply_choice(model: Any, m: SacModel, choice: dict[str, float]) -> Any:
    """`model` (the one `m` recorded, made again) with each chosen module's
    forward under selective checkpointing (the module docstring)."""
    from torch.distributed._tools.sac_ilp import get_optimal_checkpointing_policy_per_module
    from torch.utils.checkpoint import checkpoint, create_selective_checkpoint_contexts

    modules = dict(model.named_modules())
    for fqn, discard in choice.items():
        name = fqn.partition(".")[2]  # SAC names modules from the root's class name
        decisions = get_optimal_checkpointing_policy_per_module(m.sac_stats[fqn], 1 - discard)
        if not decisions:
            raise RuntimeError(f"SAC ILP found no per-operator policy for {fqn} at ratio {discard}")
        module = modules[name]
        module.forward = functools.partial(
            checkpoint, module.forward, use_reentrant=False,
            context_fn=lambda d=tuple(decisions): create_selective_checkpoint_contexts(_policy(list(d))))
    return model


def step_flops(model: Any, inputs: tuple, warm: bool = False) -> int:
    """The FLOPs of one forward and backward of `model` (its gradients
    dropped after), each operator counted by
    peakmem.step.eager_recompute.operator_flops. `model` may be a
    ``thunder.jit`` of one, whose operators are those Thunder's traces run;
    ``warm``: a first forward and backward, not counted, traces it."""
    from torch.utils._python_dispatch import TorchDispatchMode

    from peakmem.step.eager_recompute import operator_flops

    class Count(TorchDispatchMode):
        total = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            Count.total += operator_flops(func, args, kwargs or {}, out)
            return out

    if warm:
        model(*inputs).backward()
        model.zero_grad(set_to_none=True)
    with Count():
        model(*inputs).backward()
    model.zero_grad(set_to_none=True)
    return Count.total


def _fake_inputs(inputs: tuple) -> Callable[[], tuple]:
    import torch

    shapes = [(x.shape, x.dtype) if isinstance(x, torch.Tensor) else x for x in inputs]
    return lambda: tuple(torch.zeros(s[0], dtype=s[1]) if isinstance(s, tuple) else s for s in shapes)


def sac_choices(make: Callable[[], Any], inputs: tuple, shares: list[float]) -> tuple[SacModel, list[tuple]]:
    """SAC ILP's choices for the step `make()(*inputs)` at budgets of
    `shares` of its own estimate of the unplanned peak, each distinct
    choice once: (budget, choice) pairs, the budget in bytes."""
    m = sac_model(make, _fake_inputs(inputs))
    out, seen = [], set()
    for share in shares:
        budget = int(m.baseline_bytes * share)
        choice = sac_choice(m, budget)
        if choice is None:
            continue
        key = tuple(sorted(choice.items()))
        if key not in seen:
            seen.add(key)
            out.append((budget, choice))
    return m, out
