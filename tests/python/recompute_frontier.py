"""peakmem's recomputation plans beside full activation checkpointing and
PyTorch's SAC ILP, every plan run and measured, on either engine: the
comparison bench/bench_recompute.py's parts 5 and 6 print and draw and
test_recompute_sac_ilp.py asserts.

For one step (a model whose forward returns the loss), run by
``frontend``, "eager" (PyTorch) or "thunder" (``thunder.jit``):
- the step as the engine runs it, without checkpointing;
- full per-block checkpointing: the first k blocks each run under
  torch.utils.checkpoint (non-reentrant, no policy), k = 1 .. all;
- SAC ILP's plans (sac_ilp_plans.sac_choices) at budgets of `shares` of
  its own estimate of the unplanned eager step, applied with selective
  checkpointing; Thunder runs them with peakmem's checkpoint lookaside
  (peakmem.step.thunder_checkpoint), without which it would ignore the
  policies;
- peakmem's plan for each of those steps' measured peaks as the budget:
  eager, ``estimate_step(..., frontend="eager", recompute=budget)`` applied
  to a fresh model (``EagerRecomputation.apply``); Thunder, the shortest
  prefix of one search's choices down to the lowest of those peaks that
  fits the budget (budget mode is monotone: a larger budget stops earlier
  on the same choices), run with ``recompute=`` those names.
Each is measured (``measure_step``), estimated (``estimate_step``, the
same front end), its added FLOPs counted as the engine runs it
(sac_ilp_plans.step_flops: the planned step's operators less the plain
step's) and its loss and gradients compared bit for bit with the plain
step's.
"""

from __future__ import annotations

import contextlib
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
    plan: Any = None  # eager: the EagerRecomputation; SAC's: its choice; Thunder's: the names recomputed


def loss_and_grads(model: Any, inputs: tuple) -> tuple:
    """The loss and gradients of one forward and backward of `model` (a
    model, or a ``thunder.jit`` of one)."""
    loss = model(*inputs)
    loss.backward()
    params = model._model.parameters() if hasattr(model, "_model") else model.parameters()
    return loss.detach(), [p.grad for p in params]


class Frontier:
    """The comparison for the step ``make()(*inputs)`` (see the module docstring)."""

    def __init__(self, make: Callable[[], Any], inputs: tuple, shares: list[float],
                 frontend: str = "eager") -> None:
        from peakmem.step.eager_recompute import repeated_blocks

        self.make, self.inputs, self.frontend = make, inputs, frontend
        # Thunder: (peak, added FLOPs) after each of the search's choices,
        # its FLOPs the planner's own count (per statement: a matmul's
        # 2·m·n·k, one an element otherwise), which leaves out the copies
        # ATen makes of a matmul's operands that no view reaches and the 0-d
        # tensors it wraps numbers in; the points' are counted as Thunder runs them.
        self.search: list[tuple[int, int]] = []
        with self._engine():
            self._plain_flops = self._flops(make())
            self._reference = self._loss_and_grads(make())
            self.plain = self._run("none", None, lambda m: m)
            blocks = len(repeated_blocks(make()))
            self.checkpointing = [self._run(f"checkpoint {k}", None, functools.partial(checkpoint_first, k=k))
                                  for k in range(1, blocks + 1)]
            self.sac = self._sac_points(shares)
            budgets = sorted({p.measured for p in (*self.checkpointing, *self.sac)}, reverse=True)
            self.peakmem = self._peakmem_points(budgets)

    def _engine(self) -> Any:
        if self.frontend == "eager":
            return contextlib.nullcontext()
        from peakmem.step.thunder_checkpoint import selective_checkpointing

        return selective_checkpointing()

    def _runnable(self, model: Any, names: tuple | None) -> Any:
        if self.frontend == "eager":
            return model
        from peakmem._thunder_compat import import_thunder
        from peakmem.recompute import recompute_transform

        return import_thunder().jit(model, transforms=[recompute_transform(names)] if names else [])

    def _flops(self, model: Any, names: tuple | None = None) -> int:
        from sac_ilp_plans import step_flops

        return step_flops(self._runnable(model, names), self.inputs, warm=self.frontend == "thunder")

    def _loss_and_grads(self, model: Any, names: tuple | None = None) -> tuple:
        return loss_and_grads(self._runnable(model, names), self.inputs)

    def _run(self, kind: str, budget: int | None, planned: Callable[[Any], Any], plan: Any = None,
             names: tuple | None = None) -> Point:
        import torch

        import peakmem

        kw = {"frontend": self.frontend, **({"recompute": list(names)} if names else {})}
        measured = peakmem.measure_step(planned(self.make()), *self.inputs, **kw).peak_bytes
        estimated = peakmem.estimate_step(planned(self.make()), *self.inputs, **kw).peak_bytes
        flops = self._flops(planned(self.make()), names) - self._plain_flops
        loss, grads = self._loss_and_grads(planned(self.make()), names)
        identical = torch.equal(loss, self._reference[0]) and all(
            torch.equal(a, b) for a, b in zip(grads, self._reference[1]))
        return Point(kind, budget, measured, estimated, flops, identical, plan)

    def _sac_points(self, shares: list[float]) -> list[Point]:
        from sac_ilp_plans import apply_choice, sac_choices

        model, choices = sac_choices(self.make, self.inputs, shares)
        return [self._run("sac", budget, lambda m, c=choice: apply_choice(m, model, c), choice)
                for budget, choice in choices if choice]

    def _peakmem_points(self, budgets: list[int]) -> list[Point]:
        import peakmem

        if self.frontend == "eager":
            points = []
            for budget in budgets:
                report = peakmem.estimate_step(self.make(), *self.inputs, frontend="eager", recompute=budget)
                plan = report.recomputation
                point = self._run("peakmem", budget, plan.apply, plan)
                assert point.estimated == report.peak_bytes, (point, report.peak_bytes)
                points.append(point)
            return points
        rc = peakmem.estimate_step(self.make(), *self.inputs, frontend="thunder",
                                   recompute=min(budgets)).recomputation
        assert rc.fits, (min(budgets), rc)
        self.search = [(rc.peak_before, 0)]
        for _, peak, added in rc.steps:
            self.search.append((peak, self.search[-1][1] + added))
        points = []
        for budget in budgets:
            k = next(k for k, (peak, _) in enumerate(self.search) if peak <= budget)  # the shortest prefix that fits
            peak = self.search[k][0]
            names = tuple(n for n, _, _ in rc.steps[:k])
            point = self._run("peakmem", budget, lambda m: m, names, names)
            assert point.estimated == peak, (point, peak)
            points.append(point)
        return points

    def peakmem_at(self, budget: int) -> Point:
        """peakmem's plan for `budget` (one of the budgets planned for)."""
        return next(p for p in self.peakmem if p.budget == budget)

    def rows(self) -> list[Point]:
        return [self.plain, *self.checkpointing, *self.sac, *self.peakmem]
