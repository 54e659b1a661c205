"""TrainingStep: the step ``estimate_step``, ``measure_step``, ``export_step``
and ``max_batch_size`` share, as one value.

Each public function takes the step's parts as keyword arguments, so that a
call reads as the step it describes, and builds one ``TrainingStep`` from
them: checked once, its front end decided once (peakmem.step.frontend), and
handed whole to either front end. What the step is, is the package's
docstring (peakmem.step).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable, Literal, Mapping

from .frontend import Frontend, resolve_frontend

__all__ = ["Gradient", "TrainingStep"]

# loss.backward()'s gradient: None (a scalar loss) or "ones"
# (loss.backward(torch.ones_like(loss)), a loss of any shape).
Gradient = Literal["ones"]
_GRADIENTS = (None, "ones")


@dataclass(frozen=True)
class TrainingStep:
    """One training step as the caller describes it (``estimate_step``'s
    arguments of the same names say what each means).

    Attributes:
        loss_fn: ``loss_fn(output, *inputs)`` is the loss (None: the model's output is).
        gradient: None or ``"ones"`` (``Gradient``).
        optimizer, optimizer_kwargs: the optimizer's class and its settings (None: no optimizer).
        steps: how many steps run in a row (a positive integer).
        zero_grad: ``zero_grad(set_to_none=True)`` after each step.
        kwargs: the model's keyword inputs (the eager front end's).
        transform: applied to the ``thunder.jit`` module (Thunder's).
        plan: True, or ``peakmem.plan``'s options: Thunder runs each trace planned.
        frontend: ``"thunder"`` or ``"eager"``; None until ``resolved``.

    ValueError on construction for steps that are not a positive integer,
    a gradient other than None or ``"ones"``, and optimizer_kwargs without
    an optimizer.
    """

    loss_fn: Callable | None = None
    gradient: Gradient | None = None
    optimizer: Any = None
    optimizer_kwargs: Mapping[str, Any] | None = None
    steps: int = 1
    zero_grad: bool = True
    kwargs: Mapping[str, Any] | None = None
    transform: Callable | None = None
    plan: bool | Mapping[str, Any] = False
    frontend: Frontend | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.steps, int) or isinstance(self.steps, bool) or self.steps < 1:
            raise ValueError(f"steps must be a positive integer, got {self.steps!r}")
        if self.gradient not in _GRADIENTS:
            raise ValueError(f"gradient must be None (a scalar loss) or 'ones' "
                             f"(loss.backward(torch.ones_like(loss))), got {self.gradient!r}")
        if self.optimizer is None and self.optimizer_kwargs:
            raise ValueError("optimizer_kwargs given without an optimizer")

    def resolved(self, model: Any) -> tuple["TrainingStep", Any]:
        """This step with its front end decided (peakmem.step.frontend), and
        the module that front end runs (a ``thunder.jit`` module's own)."""
        frontend, module = resolve_frontend(model, self.frontend, dict(self.kwargs or {}),
                                            transform=self.transform, plan=self.plan)
        return replace(self, frontend=frontend), module

    def optimizer_spec(self) -> Any:
        """The optimizer as Thunder's front end models it
        (peakmem.optimizer_program.OptimizerSpec; None without one);
        ValueError for an optimizer it does not model."""
        if self.optimizer is None:
            return None
        from ..optimizer_program import resolve_optimizer

        return resolve_optimizer(self.optimizer, dict(self.optimizer_kwargs or {}))
