"""peakmem's selective-checkpointing plans for eager steps
(peakmem.step.eager_recompute) beside full activation checkpointing and
PyTorch's SAC ILP, every plan run and measured: the comparison
bench/bench_recompute.py's part 6 prints and draws and
test_recompute_sac_ilp.py asserts.

For one step (a model whose forward returns the loss):
- the step as PyTorch runs it, without checkpointing;
- full per-block checkpointing: the first k blocks each run under
  torch.utils.checkpoint (non-reentrant, no policy), k = 1 .. all;
- SAC ILP's plans (sac_ilp_plans.sac_points) at budgets of `shares` of its
  own estimate of the unplanned step;
- peakmem's plan for each of those steps' measured peaks as the budget
  (``estimate_step(..., frontend="eager", recompute=budget)``), applied to
  a fresh model (``EagerRecomputation.apply``).
Each is measured (``measure_step(frontend="eager")``), its added FLOPs
counted as the step runs (sac_ilp_plans.step_flops: the planned step's
operators less the plain step's), and its loss and gradients compared
bit for bit with the plain step's.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Callable

from step_models import checkpoint_first


@dataclass
class Point:
    """One planned step, run: what planned it, the budget it was planned
    for (None for checkpointing), its measured peak, peakmem's estimate of
    it, the FLOPs it adds and whether its loss and gradients are the plain
    step's, bit for bit."""

    kind: str  # "none", "checkpoint k", "sac", "peakmem"
    budget: int | None
    measured: int
    estimated: int
    added_flops: int
    identical: bool
    plan: Any = None


def loss_and_grads(model: Any, inputs: tuple) -> tuple:
    """The loss and gradients of one forward and backward of `model`."""
    loss = model(*inputs)
    loss.backward()
    return loss.detach(), [p.grad for p in model.parameters()]


class Frontier:
    """The comparison for the step ``make()(*inputs)`` (see the module docstring)."""

    def __init__(self, make: Callable[[], Any], inputs: tuple, shares: list[float]) -> None:
        self.make, self.inputs = make, inputs
        from peakmem.step.eager_recompute import repeated_blocks
        from sac_ilp_plans import step_flops

        self._plain_flops = step_flops(make(), inputs)
        self._reference = loss_and_grads(make(), inputs)
        self.plain = self._run("none", None, lambda m: m)
        blocks = len(repeated_blocks(make()))
        self.checkpointing = [self._run(f"checkpoint {k}", None, functools.partial(checkpoint_first, k=k))
                              for k in range(1, blocks + 1)]
        self.sac = self._sac_points(shares)
        budgets = sorted({p.measured for p in (*self.checkpointing, *self.sac)}, reverse=True)
        self.peakmem = [self._peakmem_point(b) for b in budgets]

    def _run(self, kind: str, budget: int | None, planned: Callable[[Any], Any], plan: Any = None) -> Point:
        import torch

        import peakmem
        from sac_ilp_plans import step_flops

        measured = peakmem.measure_step(planned(self.make()), *self.inputs, frontend="eager").peak_bytes
        estimated = peakmem.estimate_step(planned(self.make()), *self.inputs, frontend="eager").peak_bytes
        flops = step_flops(planned(self.make()), self.inputs) - self._plain_flops
        loss, grads = loss_and_grads(planned(self.make()), self.inputs)
        identical = torch.equal(loss, self._reference[0]) and all(
            torch.equal(a, b) for a, b in zip(grads, self._reference[1]))
        return Point(kind, budget, measured, estimated, flops, identical, plan)

    def _sac_points(self, shares: list[float]) -> list[Point]:
        from sac_ilp_plans import apply_choice, sac_points

        model, points = sac_points(self.make, self.inputs, shares)
        return [self._run("sac", p.budget, lambda m, c=p.choice: apply_choice(m, model, c), p.choice)
                for p in points if p.choice]

    def _peakmem_point(self, budget: int) -> Point:
        import peakmem

        report = peakmem.estimate_step(self.make(), *self.inputs, frontend="eager", recompute=budget)
        plan = report.recomputation
        point = self._run("peakmem", budget, plan.apply, plan)
        assert point.estimated == report.peak_bytes, (point, report.peak_bytes)
        return point

    def peakmem_at(self, budget: int) -> Point:
        """peakmem's plan for `budget` (one of the budgets planned for)."""
        return next(p for p in self.peakmem if p.budget == budget)

    def rows(self) -> list[Point]:
        return [self.plain, *self.checkpointing, *self.sac, *self.peakmem]
