"""The lines a printed StepReport ends with: what the estimate assumed.

A figure is only as good as what it stands for, so the report says, in a
few lines: how many steps it covers and which one peaks (the steady state,
or ``steps=k`` as asked), the optimizer and its implementation, the
parameters' precision, the attention kernels the step ran, what the
workspaces are, the card and its CUDA context on a GPU target, and how many
diagnostics there are (``report.diagnostics``)."""

from __future__ import annotations

from typing import Any

__all__ = ["assumptions"]


def _steps(report: Any, step: Any) -> str:
    covered = report.steps or step.steps_to_run()
    if step.steady:
        why = ("the steady state of a training run: each later step repeats the last"
               if covered > 1 else "the steady state of a training run: the first step leaves nothing the next holds")
        return f"steps: {covered} ({why}); the peak is in step {report.step_at_peak}"
    return f"steps: {covered}, as asked (steps={step.steps}); the peak is in step {report.step_at_peak}"


def _card(target: Any, report: Any) -> str | None:
    if not target.cuda or not target.total_memory_bytes:
        return None
    outside = (report.verdict or {}).get("context_bytes", target.context_bytes)
    nccl = (report.nccl_estimate or {}).get("total_bytes", 0) if target.cuda else 0
    context = outside - nccl
    said = (f"CUDA context {context:,} bytes (assumed: not yet measured for torch 2.13; pass context_bytes=)"
            if context == target.context_bytes else f"{context:,} bytes given as context_bytes=")
    if nccl:
        said += f" + NCCL's buffers {nccl:,} (an estimate: report.nccl_estimate)"
    return (f"device: {target.name}, {target.description}: {target.total_memory_bytes:,} bytes "
            f"(torch's total_memory); outside the allocator: {said}")


def assumptions(report: Any, step: Any, target: Any, precision: str | None,
                attention: tuple[str, ...] | None) -> tuple[str, ...]:
    """The assumption lines of `report`, estimated for `step` (a
    TrainingStep) on `target` (a DeviceTarget); `precision` and `attention`
    as the recording saw them (None where the front end does not say)."""
    lines = [_steps(report, step)]
    lines.append(f"optimizer: {report.optimizer}" if report.optimizer else "optimizer: none")
    if precision is not None:
        lines.append(f"precision: parameters {precision}; autocast is not modelled")
    if attention:
        lines.append(f"attention: {', '.join(attention)} (scaled_dot_product_attention's kernels the step ran)")
    workspaces = report.by_category.get("workspaces", 0)
    if workspaces:
        lines.append(f"workspaces: {workspaces:,} bytes: cuBLAS's and cuBLASLt's, made by the first matrix "
                     "product and kept")
    card = _card(target, report)
    if card:
        lines.append(card)
    count = len(report.diagnostics)
    lines.append(f"diagnostics: {count}" + (" (report.diagnostics: what was not counted or was assumed)"
                                             if count else ""))
    return tuple(lines)
