"""The foreach ``step()`` (``foreach=True``) written as a program: ``_multi_tensor_sgd``
(torch/optim/sgd.py) and ``_multi_tensor_adam`` (torch/optim/adam.py).

The parameters are split into groups of one device and dtype
(``Optimizer._group_tensors_by_device_and_dtype``, whose order is read from
the real grouping), and each ``torch._foreach_*`` call runs over a group's
lists. On the CPU a ``_foreach_*`` op falls back to a loop of the per-tensor
op (``_foreach_mul_(xs, s)`` is ``x.mul_(s)`` for each ``x``, the Scalar
wrapped each time), and the program writes that loop: one statement per
tensor, in the group's order. The fused CUDA kernels allocate the same
outputs: an out-of-place ``_foreach_x`` makes one output per input tensor,
returned together as a list.

A list holds its tensors until its name is rebound or deleted, and then
frees them last first (CPython's list_dealloc): ``device_grads`` (made by
``maximize`` or coupled weight decay) until SGD binds it to the momentum
buffers, Adam ``del``s it, or the next group rebinds it; Adam's
``exp_avg_sq_sqrt`` until the next group's is made. Adam's step increment
wraps ``torch.tensor(1.0)`` once per group, freed when the
``_foreach_add_`` returns; the bias corrections are Python floats.
"""

from __future__ import annotations

from typing import Any

from .optimizer_writing import ParamInfo, Writer, adam_arguments, dtype_attr, num, sgd_arguments, type_of

__all__ = ["adam_foreach", "sgd_foreach"]


def _groups(params: list[ParamInfo]) -> list[list[int]]:
    """The parameters' indices per device and dtype group, in the order the
    optimizer visits the groups (torch's own grouping of CPU tensors with the
    parameters' dtypes)."""
    import torch
    from torch.optim import Optimizer

    probes = [torch.empty(0, dtype=p.dtype) for p in params]
    grouped = Optimizer._group_tensors_by_device_and_dtype([probes], with_indices=True)
    return [list(indices) for _lists, indices in grouped.values()]


class _Group:
    """Per-tensor statements for ``_foreach_*`` calls over one group."""

    def __init__(self, w: Writer, params: list[ParamInfo], indices: list[int]) -> None:
        self.w, self.params, self.indices = w, params, indices

    def names(self, per_param: list) -> list:
        """The group's items of a list kept per parameter."""
        return [per_param[i] for i in self.indices]

    def each(self, callee: str, *operands: Any, new: bool = False, state: str | None = None) -> list:
        """`callee` once per tensor of the group: a list operand gives each
        call its item, a string is passed to every call. `new`: each call makes
        a tensor like its parameter (the list returned); `state`: that tensor is
        the state of that name prefix, kept."""
        made = []
        for k, i in enumerate(self.indices):
            self.w.param(i)
            args = [o[k] if isinstance(o, list) else o for o in operands]
            out = self.w.call(callee, *args, type_=type_of(self.params[i]) if new or state else None,
                              state=f"{state}{i}" if state else None)
            made.append(out)
        return made if new or state else []

    def drop(self, names: list) -> None:
        """A list of temporaries dies: its items are freed last first."""
        self.w.delete(*reversed(names))


def sgd_foreach(w: Writer, group: dict, params: list[ParamInfo], first: bool) -> None:
    """``_multi_tensor_sgd``: on the first step (no momentum buffers yet) each
    buffer is ``device_grads[i].detach().clone()``, made per tensor."""
    momentum, wd, nesterov, maximize = (group["momentum"], group["weight_decay"], group["nesterov"],
                                        group["maximize"])
    names = sgd_arguments(w, group, params, first)
    made: list = []  # the temporaries `device_grads` holds
    for indices in _groups(params):
        f = _Group(w, params, indices)
        f.drop(made)  # the rebinding of `device_grads` to this group's
        p, grads, bufs = (f.names([n[k] for n in names]) for k in (1, 2, 3))
        made = []
        if maximize:
            grads = made = f.each("torch.neg", grads, new=True)
        if wd != 0:
            if maximize:
                f.each("Tensor.add_", grads, p, f"alpha={num(wd)}")
            else:
                grads = made = f.each("torch.add", grads, p, f"alpha={num(wd)}", new=True)
        if momentum != 0:
            if first:
                bufs = f.each("torch.clone", grads, state="b")
            else:
                f.each("Tensor.mul_", bufs, num(momentum))
                f.each("Tensor.add_", bufs, grads, f"alpha={num(1 - group['dampening'])}")
            if nesterov:  # in place, into `device_grads` (the gradients themselves without a temporary)
                f.each("Tensor.add_", grads, bufs, f"alpha={num(momentum)}")
            else:
                f.drop(made)  # device_grads = bufs
                grads, made = bufs, []
        f.each("Tensor.add_", p, grads, f"alpha={num(-group['lr'])}")


def adam_foreach(w: Writer, group: dict, params: list[ParamInfo], first: bool) -> None:
    """``_multi_tensor_adam`` (``capturable=False``), Adam and AdamW."""
    decoupled = group.get("decoupled_weight_decay", False)
    names = adam_arguments(w, group, params, first)
    beta1, beta2 = group["betas"]
    lr, wd, eps = group["lr"], group["weight_decay"], group["eps"]
    roots: list = []  # `exp_avg_sq_sqrt`, the previous group's
    for indices in _groups(params):
        f = _Group(w, params, indices)
        p, grads = f.names([n[0] for n in names]), f.names([n[1] for n in names])
        steps, m, v = (f.names([n[2][k] for n in names]) for k in range(3))
        made: list = []  # the temporaries `device_grads` holds
        if group["maximize"]:
            grads = made = f.each("torch.neg", grads, new=True)
        # _foreach_add_(device_state_steps, torch.tensor(1.0, device="cpu"), alpha=1.0)
        w.param(-1)
        one = w.call("torch.full", "()", "1.0", f"dtype={dtype_attr(w.spec.default_dtype)}",
                     type_=type_of(ParamInfo((), w.spec.default_dtype)))
        f.each("Tensor.add_", steps, one, "alpha=1.0")
        w.delete(one)
        if wd != 0 and decoupled:
            f.each("Tensor.mul_", p, num(1 - lr * wd))
        elif wd != 0 and group["maximize"]:
            f.each("Tensor.add_", grads, p, f"alpha={num(wd)}")
        elif wd != 0:
            grads = made = f.each("torch.add", grads, p, f"alpha={num(wd)}", new=True)
        f.each("Tensor.lerp_", m, grads, num(1 - beta1))
        f.each("Tensor.mul_", v, num(beta2))
        f.each("Tensor.addcmul_", v, grads, grads, f"value={num(1 - beta2)}")
        f.drop(made)  # del device_grads, scaled_device_grads
        source = v
        if group["amsgrad"]:
            source = f.names([n[2][3] for n in names])
            # _foreach_maximum_(device_max_exp_avg_sqs, device_exp_avg_sqs): in place
            f.each("torch.maximum", source, v, [f"out={x}" for x in source])
        new_roots = f.each("torch.sqrt", source, new=True)
        f.drop(roots)  # the rebinding of `exp_avg_sq_sqrt`
        roots = new_roots
        # bias_correction2_sqrt[i] and step_size[i] (-lr / bias_correction1)
        # are Python floats that change with the step: their type, not their
        # value, decides what the calls allocate.
        f.each("Tensor.div_", roots, num(1.0))
        f.each("Tensor.add_", roots, num(eps))
        f.each("Tensor.addcdiv_", p, m, roots, f"value={num(-float(lr))}")
