"""The device a step is estimated for: ``estimate_step(..., device=...)``.

A step recorded on ``meta`` stand-ins runs what the CPU would run unless
told otherwise. Where PyTorch's own code decides by the device (which
optimizer implementation, which kernels' scratch, which libraries keep
workspaces), the estimate for a CUDA target decides as CUDA would:

* **the optimizer**: ``torch.optim``'s ``_default_to_fused_or_foreach``
  picks the foreach implementation for CUDA parameters (the for-loop one
  for the CPU and ``meta``), and accepts ``fused=True`` for them (and for
  the CPU's). While a step is recorded, torch's list of the devices with
  fused kernels names ``meta`` too, and on a CUDA target its list of those
  with foreach kernels (``kernel_choices``), so PyTorch's own rule chooses,
  with the user's ``foreach=``/``fused=``/``differentiable=`` honoured as
  on the device;
  ``clip_grad_norm_`` takes its ``_foreach_norm`` path likewise. Adam's
  ``step`` counters are then CPU tensors (not capturable, not fused), as on
  CUDA: host memory, left out of the device's bytes;
* **op scratch**: the registry's rules as CUDA's kernels allocate
  (``_core.aten_scratch(..., device="cuda")``, semantics/aten_ops.h);
* **library workspaces**: cuBLAS's and cuBLASLt's, allocated through the
  caching allocator by the first matrix product and kept
  (semantics/execution_context.h ``CublasWorkspaceBytes``), in the step's
  ``workspaces`` category.

What the allocator never sees (the CUDA context, NCCL's buffers) is not in
these figures; a GPU model's memory and CUDA context (the catalog in
semantics/execution_context.h, ``peakmem.gpu_catalog()``) judge the budget
(peakmem.step.budget). ``scaled_dot_product_attention``'s CUDA backends and
``torch.autocast("cuda")`` are not yet recorded as CUDA runs them: a step
that meets either is flagged in the report's diagnostics.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, replace
from typing import Any, Iterator

__all__ = ["DeviceTarget", "device_target", "gpu_catalog"]

# ATen's matrix products that run cuBLAS (or cuBLASLt) on CUDA: the first
# of them makes the handles' workspaces (CublasHandlePool.cpp).
GEMM_OPS = frozenset({"mm", "addmm", "bmm", "baddbmm", "addbmm", "mv", "addmv", "_addmm_activation",
                      "dot", "vdot", "addr"})


@dataclass(frozen=True)
class DeviceTarget:
    """The device whose kernels the estimate records: ``kind`` ``"cpu"`` or
    ``"cuda"``; ``name`` as the user gave it (``"cuda:h100"``); the cuBLAS
    and cuBLASLt workspaces' bytes on a CUDA target, which a step in a fresh
    process makes (``libraries_warm()``: a process whose earlier matrix
    products made them already, where the step makes none)."""

    name: str
    kind: str
    cuda_arch: int = 0
    cublas_workspace_bytes: int = 0
    cublas_lt_workspace_bytes: int = 0
    total_memory_bytes: int = 0
    context_bytes: int = 0
    description: str = ""

    @property
    def cuda(self) -> bool:
        return self.kind == "cuda"

    def libraries_warm(self) -> "DeviceTarget":
        """This target in a process whose CUDA libraries already hold their
        workspaces (scripts/gpu_check.py measures after a warm-up)."""
        return replace(self, cublas_workspace_bytes=0, cublas_lt_workspace_bytes=0)

    @property
    def storage_device(self) -> str:
        """The device name the recording gives a ``meta`` stand-in's
        storage: ``cuda:0`` on a CUDA target (so that the caching
        allocator's model prices it), else ``meta``."""
        return "cuda:0" if self.cuda else "meta"


def device_target(device: str | None, model: Any) -> DeviceTarget:
    """`device` parsed (semantics/execution_context.h names them: ``"cpu"``,
    ``"cuda"``, a GPU model of its catalog: ``"cuda:h100"``,
    ``"cuda:a100-40gb"``, ``"cuda:l4"``, ...); None or
    ``"auto"``: the device `model`'s parameters are on, ``meta`` standing
    for the CPU; a DeviceTarget as it is. ValueError for another name."""
    from .._core import target_device

    if isinstance(device, DeviceTarget):
        return device
    if device is None or device == "auto":
        on = next((p.device for p in model.parameters()), None) if hasattr(model, "parameters") else None
        device = cuda_target_name(on) if on is not None and on.type == "cuda" else "cpu"
    if not isinstance(device, str):
        raise ValueError(f"device must be a name such as 'cuda:h100' or 'cpu', got {device!r}")
    parsed = target_device(device)
    return DeviceTarget(name=parsed["name"] or device, kind=parsed["kind"], cuda_arch=parsed["cuda_arch"],
                        cublas_workspace_bytes=parsed["cublas_workspace_bytes"],
                        cublas_lt_workspace_bytes=parsed["cublas_lt_workspace_bytes"],
                        total_memory_bytes=parsed["total_memory_bytes"], context_bytes=parsed["context_bytes"],
                        description=parsed["description"])


def gpu_catalog() -> list[dict]:
    """The GPU models ``device=`` may name (semantics/execution_context.h's
    catalog), each a dict: ``name`` (``"cuda:h100"``), ``description``,
    ``cuda_arch``, ``sm_count``, ``total_memory_bytes`` (what
    ``torch.cuda.get_device_properties().total_memory`` reported, from the
    public printout named in ``source``; it moves by tens of MiB between
    drivers, so pass your card's own as ``budget=`` where it matters),
    ``context_bytes`` (the CUDA context counted against it) and
    ``context_measured``."""
    from .._core import gpu_catalog as catalog

    return list(catalog())


def cuda_target_name(device: Any) -> str:
    """The target name of a real CUDA device: its compute capability's
    (8.x: ``"cuda:a100"``'s rules, else Hopper's, ``"cuda"``)."""
    import torch

    major, _minor = torch.cuda.get_device_capability(device)
    return "cuda:a100" if major == 8 else "cuda"


@contextlib.contextmanager
def kernel_choices(target: DeviceTarget) -> Iterator[None]:
    """While recording: ``meta`` is among torch's devices with fused
    optimizer kernels (the CPU and CUDA have them, so ``fused=True`` is
    accepted as on the device), and on a CUDA target among those with
    foreach kernels too (see the module docstring); PyTorch's own rules then
    choose as on the device."""
    import torch.optim.optimizer as optimizer_module
    import torch.utils._foreach_utils as foreach_utils

    names = ["_get_fused_kernels_supported_devices"]
    if target.cuda:
        names.append("_get_foreach_kernels_supported_devices")
    saved = {(module, name): getattr(module, name) for module in (optimizer_module, foreach_utils)
             for name in names if hasattr(module, name)}
    for (module, name), original in saved.items():
        setattr(module, name, lambda original=original: [*original(), "meta"])
    try:
        yield
    finally:
        for (module, name), original in saved.items():
            setattr(module, name, original)
