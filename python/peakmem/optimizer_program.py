"""An optimizer's ``step()`` written as a trace, for the runtime model to simulate.

``torch.optim`` on the CPU (and on ``meta``, which takes the same defaults)
runs the single-tensor implementation: ``_single_tensor_sgd``
(torch/optim/sgd.py) and ``_single_tensor_adam`` (torch/optim/adam.py, which
``AdamW`` runs with ``decoupled_weight_decay=True``). With ``foreach=True``
(CUDA's default) it runs ``_multi_tensor_sgd`` / ``_multi_tensor_adam``,
which peakmem.optimizer_foreach writes. ``optimizer_program``
writes the tensor calls one ``step()`` makes, in its order, as printed trace
text: parameters, gradients and the state kept from earlier steps are the
trace's arguments (the caller holds them), the state a first step creates is
what it returns. The runtime model then prices the calls with the rules it
uses for every trace (the 0-d tensor a Python scalar is wrapped in, the
outputs' layouts), so no byte count is written here.

Python frees a temporary when its name is rebound, and the program says so
with ``del`` at that point: ``grad`` (a new tensor under ``maximize`` or
coupled weight decay) lives until the next parameter's ``grad = grads[i]``;
Adam's ``denom`` until the next parameter's ``denom`` is made; what is left
dies when ``step()`` returns.

Modelled: ``torch.optim.SGD`` (momentum, dampening, nesterov, weight decay,
maximize), ``torch.optim.Adam`` and ``torch.optim.AdamW`` (weight decay,
amsgrad, maximize), with Python-number hyperparameters, single-tensor and
``foreach=True``. ``fused=True``, ``capturable``, ``differentiable`` and
tensor-valued hyperparameters take other code paths and are refused with an
error.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .optimizer_foreach import adam_foreach, sgd_foreach
from .optimizer_writing import ParamInfo, Writer, adam_arguments, num, sgd_arguments, type_of

__all__ = ["OptimizerProgram", "OptimizerSpec", "ParamInfo", "resolve_optimizer",
           "optimizer_program"]


@dataclass(frozen=True)
class OptimizerSpec:
    """An optimizer class with its hyperparameters, the class's defaults filled in."""

    kind: str            # "sgd" or "adam" (Adam and AdamW)
    name: str            # the class's name, for messages
    group: dict          # param_groups[0] without "params"
    step_dtype: Any      # the dtype of Adam's state["step"] (_get_scalar_dtype())
    default_dtype: Any = None  # torch.get_default_dtype(): foreach Adam's torch.tensor(1.0)


_NUMERIC_KEYS = {"sgd": ("lr", "momentum", "dampening", "weight_decay"),
                 "adam": ("lr", "eps", "weight_decay")}


def resolve_optimizer(optimizer: Any, kwargs: dict, cuda: bool = False) -> OptimizerSpec:
    """The class's real defaults, read from an instance over one meta parameter.

    Raises ValueError for an optimizer, or an option of one, not modelled,
    and TypeError for an optimizer instance (the class is wanted).
    """
    import torch

    kinds = {torch.optim.SGD: "sgd", torch.optim.Adam: "adam", torch.optim.AdamW: "adam"}
    if isinstance(optimizer, torch.optim.Optimizer):
        raise TypeError(_instance_given(optimizer, kwargs))
    name = getattr(optimizer, "__name__", repr(optimizer))
    if optimizer not in kinds:
        raise ValueError(
            f"optimizer {name} is not modelled yet: peakmem models torch.optim.SGD, "
            "torch.optim.Adam and torch.optim.AdamW")
    try:
        probe = optimizer([torch.nn.Parameter(torch.empty(1, device="meta"))], **kwargs)
    except (TypeError, ValueError) as e:
        raise ValueError(f"torch.optim.{name} rejects optimizer_kwargs {kwargs!r}: {e}") from e
    group = {k: v for k, v in probe.param_groups[0].items() if k != "params"}
    if cuda and group.get("foreach") is None and not group.get("fused") and not group.get("differentiable"):
        # CUDA parameters: torch.optim.optimizer._default_to_fused_or_foreach
        # picks foreach (never fused) where the user chose neither.
        group["foreach"] = True
    for key in ("fused", "capturable", "differentiable"):
        if group.get(key):
            raise ValueError(
                f"torch.optim.{name} with {key}=True is not modelled yet: peakmem models the "
                "single-tensor and foreach steps")
    kind = kinds[optimizer]
    numbers = [group[k] for k in _NUMERIC_KEYS[kind]] + list(group.get("betas", ()))
    if any(isinstance(v, torch.Tensor) for v in numbers):
        raise ValueError(f"torch.optim.{name} with tensor-valued hyperparameters is not modelled yet")
    from torch.optim.optimizer import _get_scalar_dtype

    return OptimizerSpec(kind=kind, name=name, group=group, step_dtype=_get_scalar_dtype(),
                         default_dtype=torch.get_default_dtype())


def _instance_given(optimizer: Any, kwargs: dict) -> str:
    """The error for an optimizer instance where its class is wanted: the
    class and the instance's non-default hyperparameters as the call takes them."""
    import torch

    cls = type(optimizer)
    try:
        fresh = cls([torch.nn.Parameter(torch.empty(1, device="meta"))]).defaults
    except Exception:  # a class that cannot be made without more arguments
        fresh = {}
    changed = {k: v for k, v in optimizer.defaults.items() if k not in fresh or fresh[k] != v}
    changed.update(kwargs)
    spelled = (f"torch.optim.{cls.__name__}" if getattr(torch.optim, cls.__name__, None) is cls
               else f"{cls.__module__}.{cls.__qualname__}")
    suggestion = f"optimizer={spelled}" + (f", optimizer_kwargs={changed!r}" if changed else "")
    return (f"optimizer= takes the optimizer's class, not an instance (got an instance of {cls.__name__}): peakmem "
            f"makes the optimizer for the traced step itself; pass {suggestion}")


@dataclass(frozen=True)
class OptimizerProgram:
    """One ``step()`` as trace text, and the names its state tensors have in it."""

    text: str
    state_names: frozenset[str]
    # Each value's parameter (its index in `params`): the arguments, the state
    # and the temporaries made for it (the breakdown by module).
    owner: dict = None  # type: ignore[assignment]


def optimizer_program(spec: OptimizerSpec, params: list[ParamInfo], first: bool) -> OptimizerProgram:
    """One ``step()`` over `params` (in param_groups order).

    `first`: the state does not exist yet (the first step); the program
    creates it and returns it. Otherwise the state is passed in as arguments
    after each parameter's gradient.
    """
    w = Writer(spec)
    if spec.group.get("foreach"):
        adam, sgd = adam_foreach, sgd_foreach
    else:
        adam, sgd = _adam, _sgd
    if spec.kind == "adam":
        adam(w, spec.group, params, first)
    else:
        sgd(w, spec.group, params, first)
    return OptimizerProgram(w.text(), frozenset(w.state), dict(w.owner))


def _bind_grad(w: Writer, g: str, info: ParamInfo, maximize: bool,
               previous: list[str]) -> tuple[str, list[str]]:
    """`grad = grads[i] if not maximize else -grads[i]`: the name bound and the
    temporaries it made. Binding it drops the previous parameter's `grad`."""
    if not maximize:
        w.delete(*previous)
        return g, []
    neg = w.call("torch.neg", g, type_=type_of(info))
    w.delete(*previous)
    return neg, [neg]


def _decay_grad(w: Writer, g: str, p: str, info: ParamInfo, weight_decay: Any,
                made: list[str]) -> tuple[str, list[str]]:
    """`grad = grad.add(param, alpha=weight_decay)`: a new tensor; the rebinding
    drops the temporaries `grad` was."""
    decayed = w.call("torch.add", g, p, f"alpha={num(weight_decay)}", type_=type_of(info))
    w.delete(*made)
    return decayed, [decayed]


def _adam(w: Writer, group: dict, params: list[ParamInfo], first: bool) -> None:
    amsgrad = group["amsgrad"]
    decoupled = group.get("decoupled_weight_decay", False)
    names = adam_arguments(w, group, params, first)
    beta1, beta2 = group["betas"]
    lr, wd, eps = group["lr"], group["weight_decay"], group["eps"]
    pending: list[str] = []  # the previous parameter's grad
    denom = None
    for i, ((p, g, state), info) in enumerate(zip(names, params)):
        w.param(i)
        step_t, m, v = state[:3]
        g, made = _bind_grad(w, g, info, group["maximize"], pending)
        w.call("Tensor.add_", step_t, "1")                       # step_t += 1
        if wd != 0 and decoupled:
            w.call("Tensor.mul_", p, num(1 - lr * wd))            # param.mul_(1 - lr * wd)
        elif wd != 0:
            g, made = _decay_grad(w, g, p, info, wd, made)
        w.call("Tensor.lerp_", m, g, num(1 - beta1))
        w.call("Tensor.mul_", v, num(beta2))
        w.call("Tensor.addcmul_", v, g, g, f"value={num(1 - beta2)}")
        source = v
        if amsgrad:
            # torch.maximum(max_exp_avg_sq, exp_avg_sq, out=max_exp_avg_sq): in place
            w.call("torch.maximum", state[3], v, f"out={state[3]}")
            source = state[3]
        root = w.call("torch.sqrt", source, type_=type_of(info))
        new = w.call("torch.div", root, "1.0", type_=type_of(info))  # / bias_correction2 ** 0.5
        w.delete(root)
        w.call("Tensor.add_", new, num(eps))
        w.delete(denom)  # the rebinding of `denom`
        denom = new
        w.call("Tensor.addcdiv_", p, m, denom, "value=-0.001")  # value=-step_size: a Scalar
        pending = made


def _sgd(w: Writer, group: dict, params: list[ParamInfo], first: bool) -> None:
    momentum, wd, nesterov = group["momentum"], group["weight_decay"], group["nesterov"]
    names = sgd_arguments(w, group, params, first)
    pending: list[str] = []
    for (i, p, g, buf), info in zip(names, params):
        w.param(i)
        g, made = _bind_grad(w, g, info, group["maximize"], pending)
        if wd != 0:
            g, made = _decay_grad(w, g, p, info, wd, made)
        if momentum != 0:
            if buf is None:  # buf = grad.detach().clone(), kept as the state
                buf = w.call("torch.clone", g, type_=type_of(info), state=f"b{i}")
            else:
                w.call("Tensor.mul_", buf, num(momentum))
                w.call("Tensor.add_", buf, g, f"alpha={num(1 - group['dampening'])}")
            if nesterov:
                g2 = w.call("torch.add", g, buf, f"alpha={num(momentum)}", type_=type_of(info))
            else:
                g2 = buf
            w.delete(*made)  # the rebinding of `grad`
            g, made = g2, ([g2] if nesterov else [])
        w.call("Tensor.add_", p, g, f"alpha={num(-group['lr'])}")
        pending = made
