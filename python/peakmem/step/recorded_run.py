"""What a recording ran, as the report's assumptions say it
(peakmem.step.report_assumptions): the steps recorded, the optimizer and
the implementation its ``step()`` ran, the parameters' dtypes and the
attention kernels the step called, read off the record's statements."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["RecordedRun", "optimizer_description", "recorded_run"]


@dataclass(frozen=True)
class RecordedRun:
    """What the recording ran, for the report's assumptions: the steps
    recorded, the optimizer with the implementation its ``step()`` ran
    (``"AdamW(lr=0.001), foreach"``; None without one), the parameters'
    dtypes and the attention kernels the step called."""

    steps: int
    optimizer: str | None
    precision: str
    attention: tuple[str, ...]


# The fused attention ops a recorded step may call (ATen's names): the
# backend each is (sdp_utils.cpp's SDPBackend; the CPU's flash kernel).
_ATTENTION_OPS = {
    "_scaled_dot_product_flash_attention": "flash", "_scaled_dot_product_efficient_attention": "efficient",
    "_scaled_dot_product_cudnn_attention": "cuDNN", "_scaled_dot_product_flash_attention_for_cpu": "CPU flash",
    "_flash_attention_forward": "flash", "_efficient_attention_forward": "efficient",
    "_scaled_dot_product_attention_math": "math"}


def recorded_run(model: Any, step: Any, record: Any) -> RecordedRun:
    """The RecordedRun of `record` (eager.RecordedStep), `step`'s (a
    TrainingStep) on `model`."""
    optimizer = None
    if step.optimizer is not None:
        optimizer = optimizer_description(step.optimizer, step.optimizer_kwargs)
        first = next((p for p in record.phases if p[0] == "optimizer"), None)
        ops = {_aten_name(record.statements[i][0]) for i in range(first[2], first[3])} if first else set()
        if any(op.startswith("_fused_") for op in ops):
            optimizer += ", fused"
        elif any(op.startswith("_foreach_") for op in ops):
            optimizer += ", foreach"
        else:
            optimizer += ", for-loop"
    dtypes = sorted({str(p.dtype).removeprefix("torch.") for p in model.parameters()}) if hasattr(
        model, "parameters") else []
    seen = {_aten_name(statement[0]) for statement in record.statements}
    attention = tuple(sorted({backend for op, backend in _ATTENTION_OPS.items() if op in seen}))
    return RecordedRun(record.iterations, optimizer, ", ".join(dtypes) or "no parameters", attention)


def _aten_name(op: str) -> str:
    """A statement's op as ATen names it: ``"aten.mm.default"`` -> ``"mm"``
    (a moment of the step, ``"zero_grad"``, as it is)."""
    parts = op.split(".")
    return parts[1] if parts[0] == "aten" and len(parts) > 1 else op


def optimizer_description(optimizer: Any, optimizer_kwargs: Any) -> str:
    """``"AdamW(lr=0.001)"``: the optimizer's class and the settings given."""
    name = getattr(optimizer, "__name__", type(optimizer).__name__)
    return f"{name}({', '.join(f'{k}={v!r}' for k, v in (optimizer_kwargs or {}).items())})"
