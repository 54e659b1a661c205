"""TrainingStep: the step ``estimate_step``, ``measure_step``, ``export_step``
and ``max_batch_size`` share, as one value.

Each public function takes the step's parts as keyword arguments
(peakmem.step.options), so that a call reads as the step it describes, and
builds one ``TrainingStep`` from them (``TrainingStep.of``): checked once, its front end decided once (peakmem.step.frontend), and
handed whole to either front end. What the step is, is the package's
docstring (peakmem.step).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable, Literal, Mapping, Union

from .._deprecation import deprecated
from .frontend import Frontend, resolve_frontend
from .routing import Routing

__all__ = ["Gradient", "Recompute", "TrainingStep"]

# loss.backward()'s gradient: None (a scalar loss) or "ones"
# (loss.backward(torch.ones_like(loss)), a loss of any shape).
Gradient = Literal["ones"]
_GRADIENTS = (None, "ones")

# What recompute= takes: True (as low as the step goes), a budget (bytes or
# a size such as "24GiB": until the step fits it), a list or tuple of
# names (a plan's Recomputation.names: recomputed as they are, no search),
# or a dict of peakmem.recompute.search's options (RECOMPUTE_OPTIONS; its
# "names" is the list's spelling, and a "budget" beside it is what the
# report's ``fits`` is judged against).
Recompute = Union[bool, int, str, list, tuple, Mapping[str, Any]]
RECOMPUTE_OPTIONS = ("budget", "time_budget", "max_simulations", "names")


def _recompute_options(recompute: Recompute | None) -> dict | None:
    """recompute= as peakmem.recompute.search's options (None: no recomputation)."""
    if recompute is None or recompute is False:
        return None
    if recompute is True:
        return {}
    if isinstance(recompute, (int, str)):
        return {"budget": recompute}
    if isinstance(recompute, (list, tuple)):
        return {"names": tuple(recompute)}
    if isinstance(recompute, Mapping):
        unknown = sorted(set(recompute) - set(RECOMPUTE_OPTIONS))
        if unknown:
            raise ValueError(f"recompute: unknown option {', '.join(map(repr, unknown))} "
                             f"(its options: {', '.join(RECOMPUTE_OPTIONS)})")
        out = dict(recompute)
        if "names" in out:
            if isinstance(out["names"], str) or not all(isinstance(n, str) for n in out["names"]):
                raise TypeError(f"recompute: names must be a list of names, got {out['names']!r}")
            out["names"] = tuple(out["names"])
        return out
    raise TypeError(f"recompute must be True, a budget (bytes or a size such as '24GiB'), a list of names or a dict of "
                    f"{', '.join(RECOMPUTE_OPTIONS)}, got {recompute!r}")


def _plan_and_recompute(plan: Any, recompute: Any) -> tuple[Any, dict | None]:
    """plan= (each trace's order) and recompute= apart. plan={"recompute":
    True, ...} and plan={"budget": ..., ...} are recompute='s old spellings:
    they warn and mean recompute= with the same options."""
    if isinstance(plan, Mapping) and (plan.get("recompute") or plan.get("budget") is not None):
        deprecated("plan={'recompute': True} and plan={'budget': ...}",
                   "pass recompute=True, recompute='24GiB' or recompute={'budget': ..., 'max_simulations': ...}; "
                   "plan= is each trace's planned order only")
        if recompute is not None and recompute is not False:
            raise ValueError("recompute= given twice: as recompute= and inside plan=")
        unknown = sorted(set(plan) - {"recompute", *RECOMPUTE_OPTIONS})
        if unknown:
            raise ValueError(f"plan: {', '.join(unknown)} do not apply with recompute or budget "
                             f"(its options: recompute, {', '.join(RECOMPUTE_OPTIONS)})")
        plan, recompute = False, {k: v for k, v in plan.items() if k != "recompute"}
    options = _recompute_options(recompute)
    if options is not None and plan:
        raise ValueError("plan= and recompute= together are not modelled: the recomputation is searched on "
                         "Thunder's own order of the traces; pass one of them")
    return plan, options


@dataclass(frozen=True)
class TrainingStep:
    """One training step as the caller describes it (peakmem.step.options'
    keys of the same names say what each means).

    Attributes:
        loss_fn: ``loss_fn(output, *inputs)`` is the loss (None: the model's output is).
        model_inputs: how many of the inputs, the first, the model takes
            (None: all); the rest are the loss's only (``model_call``).
        gradient: None or ``"ones"`` (``Gradient``).
        optimizer, optimizer_kwargs: the optimizer's class and its settings (None: no optimizer).
        steps: how many steps run in a row (a positive integer); None
            (the default): the steady state, as many as it takes for the
            step's memory to repeat (``least_steps`` at least; see
            peakmem.step's docstring).
        zero_grad: ``zero_grad(set_to_none=True)`` after each step.
        accumulation_steps: the micro-batches of each step (gradient
            accumulation: a forward and backward each, summed into
            ``.grad``, then one optimizer step; the eager front end's).
        kwargs: the model's keyword inputs (the eager front end's; the
            functions' ``kwinputs=``).
        transform: applied to the ``thunder.jit`` module (Thunder's).
        plan: True, or ``peakmem.plan``'s options: Thunder runs each trace planned.
        recompute: None, or peakmem.recompute.search's options (``budget``,
            ``time_budget``, ``max_simulations``; ``{}``: as low as the step
            goes; ``names``: those recomputed, no search): saved tensors
            recomputed in the backward. Given as ``recompute=``
            (``Recompute``: True, a budget, a list of names or the dict), or
            in its old spelling inside ``plan=``, which warns.
        frontend: ``"thunder"``, ``"eager"`` or ``"compile"``; None until ``resolved``.
        routing: the mixture-of-experts routing assumed where the eager
            step cannot read it (peakmem.step.routing; None: none assumed).
        distributed: ``"ddp"``: the eager step's model wrapped in torch's
            DistributedDataParallel under the current process group
            (peakmem.step.data_parallel); ``"fsdp"``: sharded by FSDP2's
            fully_shard (peakmem.step.fully_sharded); set by
            distribution.with_strategy from ``strategy=``; None: the model
            as it is.
        parallelize: with ``"fsdp"``, the caller's wrapping of the model
            (None: each ModuleList block, then the root).

    ValueError on construction for steps that are not a positive integer,
    a gradient other than None or ``"ones"``, optimizer_kwargs without an
    optimizer, recompute options it does not know and plan= with
    recompute=.
    """

    loss_fn: Callable | None = None
    model_inputs: int | None = None
    gradient: Gradient | None = None
    optimizer: Any = None
    optimizer_kwargs: Mapping[str, Any] | None = None
    steps: int | None = None
    zero_grad: bool = True
    accumulation_steps: int = 1
    kwargs: Mapping[str, Any] | None = None
    transform: Callable | None = None
    plan: bool | Mapping[str, Any] = False
    recompute: Recompute | None = None
    frontend: Frontend | None = None
    device: str | None = None
    routing: Any = None
    distributed: str | None = None
    parallelize: Callable | None = None

    def __post_init__(self) -> None:
        if self.steps is not None and (not isinstance(self.steps, int) or isinstance(self.steps, bool)
                                       or self.steps < 1):
            raise ValueError(f"steps must be a positive integer (or None: until the step's memory repeats), "
                             f"got {self.steps!r}")
        if not isinstance(self.accumulation_steps, int) or isinstance(self.accumulation_steps, bool) \
                or self.accumulation_steps < 1:
            raise ValueError(f"accumulation_steps must be a positive integer, got {self.accumulation_steps!r}")
        if self.gradient not in _GRADIENTS:
            raise ValueError(f"gradient must be None (a scalar loss) or 'ones' "
                             f"(loss.backward(torch.ones_like(loss))), got {self.gradient!r}")
        if self.optimizer is None and self.optimizer_kwargs:
            raise ValueError("optimizer_kwargs given without an optimizer")
        if self.model_inputs is not None:
            if not isinstance(self.model_inputs, int) or isinstance(self.model_inputs, bool) \
                    or self.model_inputs < 0:
                raise ValueError(f"model_inputs must be how many of the inputs the model takes, a non-negative "
                                 f"integer, got {self.model_inputs!r}")
            if self.loss_fn is None:
                raise ValueError("model_inputs= leaves inputs to the loss alone: it needs loss_fn= "
                                 "(loss_fn(output, *inputs) is called with all of them)")
        if self.routing is not None:
            Routing(self.routing)  # ValueError naming what is wrong
        plan, recompute = _plan_and_recompute(self.plan, self.recompute)
        object.__setattr__(self, "plan", plan)  # frozen: normalised once, here
        object.__setattr__(self, "recompute", recompute)

    @classmethod
    def of(cls, options: Mapping[str, Any]) -> "TrainingStep":
        """The step `options` describe (peakmem.step.options' keys, checked
        by ``takes`` and with `strategy` made a `transform` by
        distribution.with_strategy): its ``kwinputs`` are ``kwargs`` here,
        and the keys that are not the step's (the estimate's pricing) are
        left out."""
        given = {("kwargs" if k == "kwinputs" else k): v for k, v in options.items()}
        return cls(**{k: v for k, v in given.items() if k in cls.__dataclass_fields__})

    @property
    def steady(self) -> bool:
        """Whether the step runs until its memory repeats (``steps=None``)."""
        return self.steps is None

    def least_steps(self) -> int:
        """The fewest steps the steady state takes: two where the first
        step leaves something the next one holds through its forward and
        backward (an optimizer's state, ``.grad`` kept by
        ``zero_grad=False``, a distributed wrapper's buckets rebuilt or
        state made lazily at the first step), else one. The eager front end
        records more while the live bytes after a step still differ from
        those after the one before."""
        keeps = (self.optimizer is not None or not self.zero_grad or self.distributed is not None
                 or self.transform is not None)
        return 2 if keeps else 1

    def steps_to_run(self) -> int:
        """``steps``, or where it is None the least number of steps the
        steady state takes (what Thunder's simulation and measure_step run:
        their later steps repeat the second by construction, and
        measure_step runs one more to show it)."""
        return self.steps if self.steps is not None else self.least_steps()

    def measured_steps(self) -> int:
        """The steps measure_step runs: ``steps``, or where it is None three
        at least (the steady state's least and one more, which repeats the
        last: the measurement shows it, where the estimate reasons it)."""
        return self.steps if self.steps is not None else max(3, self.least_steps() + 1)

    def model_call(self, inputs: tuple) -> tuple:
        """The inputs the model is called with: the first `model_inputs`
        (all when None). ValueError when there are fewer inputs than that."""
        if self.model_inputs is None:
            return tuple(inputs)
        if self.model_inputs > len(inputs):
            raise ValueError(f"model_inputs={self.model_inputs} but the step has {len(inputs)} inputs")
        return tuple(inputs[:self.model_inputs])

    def resolved(self, model: Any) -> tuple["TrainingStep", Any]:
        """This step with its front end decided (peakmem.step.frontend), and
        the module that front end runs (a ``thunder.jit`` module's own)."""
        frontend, module = resolve_frontend(model, self.frontend, dict(self.kwargs or {}),
                                            transform=self.transform, plan=self.plan,
                                            recompute=self.recompute is not None)
        if self.accumulation_steps > 1 and frontend == "thunder":
            raise ValueError(f"accumulation_steps={self.accumulation_steps} is the eager front end's "
                             "(frontend='eager'): Thunder's step runs one forward and backward")
        if self.routing is not None and frontend != "eager":
            raise ValueError(f"routing= assumes a mixture-of-experts router's choice on the eager front end "
                             f"(frontend='eager'), not on the {frontend!r} one: "
                             + ("a Thunder trace's shapes are fixed when it is traced" if frontend == "thunder"
                                else "a compiled step's graphs are fixed when Dynamo traces them"))
        return replace(self, frontend=frontend), module

    def optimizer_spec(self) -> Any:
        """The optimizer as Thunder's front end models it
        (peakmem.optimizer_program.OptimizerSpec; None without one);
        ValueError for an optimizer it does not model."""
        if self.optimizer is None:
            return None
        from ..optimizer_program import resolve_optimizer

        return resolve_optimizer(self.optimizer, dict(self.optimizer_kwargs or {}),
                                 cuda=self.device is not None and self.device.startswith("cuda"))
