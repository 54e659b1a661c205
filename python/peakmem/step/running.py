"""The step as the user's code runs it: the backward from the loss, one
iteration of a jitted module, and what a failed step is reported as."""

from __future__ import annotations

import contextlib
import sys
from typing import Any

from ..measure import local_shard


def _import_torch_and_thunder():
    import torch

    from .._thunder_compat import import_thunder

    return torch, import_thunder()


def _backward(loss: Any, gradient: str | None) -> int:
    """Runs the step's backward from `loss` as the user's code does; returns
    the cotangent's bytes (this rank's shard for a DTensor)."""
    import torch

    if not isinstance(loss, torch.Tensor):
        hint = (" (the model's output: pass loss_fn=lambda output, *inputs: ... that picks or computes the loss "
                "from it, e.g. output[0].sum())" if isinstance(loss, (tuple, list, dict)) else
                " (pass loss_fn=lambda output, *inputs: ... that returns a scalar tensor)")
        raise ValueError(f"the loss must be a tensor; the step returned a {type(loss).__name__}{hint}")
    if gradient is None and loss.dim() != 0:
        raise ValueError(
            f"the loss must be a scalar tensor; the step returned shape {tuple(loss.shape)} "
            "(pass loss_fn=, reduce the model's output, or gradient='ones')")
    if not loss.requires_grad:
        raise ValueError("the loss does not require grad: no parameter of the model takes part in it")
    if gradient is None:
        loss.backward()
    else:
        loss.backward(torch.ones_like(loss))
    local = local_shard(loss)
    return local.element_size() * local.numel()


class _OptimizerFailed(Exception):
    """optimizer.step() raised (the user's optimizer, not Thunder): its error is the cause."""


def _run_step(jm: Any, inputs: tuple, optimizer: Any, zero_grad: bool, gradient: str | None) -> None:
    loss = jm(*inputs)
    _backward(loss, gradient)
    if optimizer is not None:
        try:
            optimizer.step()
        except Exception as e:
            raise _OptimizerFailed() from e
    if zero_grad:
        (optimizer if optimizer is not None else jm).zero_grad(set_to_none=True)


def _step_failure(e: Exception, module: Any, inputs: tuple, why: str = "") -> RuntimeError:
    """What a failed traced step is reported as: a failure of the user's
    optimizer, or of their model or loss (the module raises the same without
    Thunder: it is run once, eagerly, to tell), or else Thunder's (`why`:
    what is known of the reason)."""
    if isinstance(e, _OptimizerFailed):
        cause = e.__cause__
        return RuntimeError(f"optimizer.step() raised {type(cause).__name__}: {cause}")
    try:
        module(*inputs)
    except Exception as eager:
        return RuntimeError(f"the model or loss raises {type(eager).__name__}: {eager} (run without Thunder "
                            "too: the error is in the step's own code, not in the tracing)")
    import importlib.metadata

    # Thunder's interpreter ends its message with the module's whole repr.
    reason = str(e).split(" while tracing ", 1)[0]
    if reason != str(e):
        reason += f" while tracing {type(module).__name__}"
    return RuntimeError(
        f"Thunder {importlib.metadata.version('lightning-thunder')} could not trace the step: "
        f"{type(e).__name__}: {reason}{why}. Without Thunder, the step as eager PyTorch runs it is "
        "estimate_step(..., frontend='eager')")


@contextlib.contextmanager
def transformers_quiet() -> Any:
    """`transformers` logs notes about the model's config at its first forward
    (``loss_type=None ... Using the default loss``): the model's, printed
    when the user trains it, not the estimate's. While the step is recorded
    only its errors are shown."""
    if "transformers" not in sys.modules:
        yield
        return
    from transformers.utils import logging

    verbosity = logging.get_verbosity()
    logging.set_verbosity_error()
    try:
        yield
    finally:
        logging.set_verbosity(verbosity)
