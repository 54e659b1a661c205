"""The real values a step reads, beside its ``meta`` stand-ins.

A step recorded on ``meta`` stand-ins cannot read a tensor's value: a model
that asks ``.item()``, ``.all()`` in an ``if``, ``nonzero`` or a boolean
mask's selection stops there (``transformers``' mask code reads its
position ids and its attention mask that way). Most such values come from
the step's integer and boolean inputs (token ids, masks, labels) and the
small tensors made from them, so the recording keeps a real CPU copy, a
*shadow*, of each such tensor beside its stand-in:

* each integer or boolean input, parameter or buffer the user gave as a
  real tensor is its own stand-in's shadow;
* an ATen call whose tensor arguments all have shadows (a factory has
  none: ``arange``, ``ones``), and whose outputs are small (at most
  ``MAX_SHADOW_ELEMENTS`` elements each), runs on the shadows too, and its
  outputs' shadows are the results; an in-place call on a shadowed tensor
  with an argument that has none drops that shadow (its value is no longer
  known);
* a call that cannot run on ``meta`` (``_local_scalar_dense`` for
  ``.item()``, ``nonzero``, ``masked_select``: values and shapes that
  depend on data) takes its result from the shadows: a number as it is, a
  tensor as a ``meta`` stand-in of the result's shape with the result as
  its shadow. Without shadows (a value computed from floating-point
  activations, or a step given ``meta`` inputs) it is a ValueError naming
  the call and the model's source line.

The shadows are values only: what the step allocates is still recorded
from the stand-ins, so every figure is the step's own.
"""

from __future__ import annotations

import traceback
import weakref
from typing import Any

__all__ = ["ShadowValues", "DataDependentError", "source_line"]

# Larger results are not computed for real (their values are not read by
# control flow in practice, and computing them would cost the step's time).
MAX_SHADOW_ELEMENTS = 1 << 22


class DataDependentError(ValueError):
    """The step reads a value peakmem does not have on its meta stand-ins.
    `router`: the line of the top-k the value may come from (a
    mixture-of-experts router: peakmem.step.routing), or empty."""

    router = ""


def source_line() -> str:
    """The innermost frame of the user's code (not torch's, not peakmem's)."""
    for frame in reversed(traceback.extract_stack()):
        path = frame.filename.replace("\\", "/")
        if "/torch/" in path or "/peakmem/" in path or path.startswith("<"):
            continue
        return f"{frame.filename}:{frame.lineno} ({frame.line})"
    return "an unknown line"


class ShadowValues:
    """The shadows of one recording's stand-ins, by the stand-in's identity
    (each forgotten when its stand-in dies)."""

    def __init__(self) -> None:
        self._real: dict[int, Any] = {}
        self._refs: dict[int, Any] = {}
        # The line of the last top-k of values the step does not have (a
        # mixture-of-experts router's, peakmem.step.routing): where the
        # value a failing call wants may have come from, told in its error.
        self.router = ""

    def give(self, stand_in: Any, real: Any) -> None:
        key = id(stand_in)
        self._real[key] = real
        if key not in self._refs:
            self._refs[key] = weakref.ref(stand_in, lambda _r, key=key: self._forget(key))

    def _forget(self, key: int) -> None:
        self._real.pop(key, None)
        self._refs.pop(key, None)

    def of(self, t: Any) -> Any:
        """`t`'s shadow; a real CPU tensor is its own (the shadows are CPU
        tensors: another device's has none)."""
        if t.device.type == "meta":
            return self._real.get(id(t))
        return t if t.device.type == "cpu" else None

    def give_inputs(self, pairs: list[tuple[Any, Any]]) -> None:
        """(stand-in, real) of the step's given tensors: the integer and
        boolean ones are their stand-ins' shadows."""
        for stand_in, real in pairs:
            if not (real.is_floating_point() or real.is_complex()) and real.numel() <= MAX_SHADOW_ELEMENTS:
                self.give(stand_in, real.detach().cpu())

    def _real_arguments(self, args: tuple, kwargs: dict) -> tuple[tuple, dict] | None:
        """The call's arguments with each tensor its shadow (None: one has
        none) and a meta device the CPU."""
        import torch
        from torch.utils._pytree import tree_flatten, tree_unflatten

        flat, spec = tree_flatten((args, kwargs))
        out = []
        for a in flat:
            if isinstance(a, torch.Tensor):
                real = self.of(a)
                if real is None:
                    return None
                out.append(real)
            elif isinstance(a, torch.device) and a.type == "meta":
                out.append(torch.device("cpu"))
            else:
                out.append(a)
        real_args, real_kwargs = tree_unflatten(out, spec)
        return real_args, real_kwargs

    def _run(self, func: Any, args: tuple, kwargs: dict) -> Any:
        from torch.utils._python_dispatch import _disable_current_modes

        real = self._real_arguments(args, kwargs)
        if real is None:
            return None
        with _disable_current_modes():
            return func(*real[0], **real[1])

    def instead(self, func: Any, args: tuple, kwargs: dict, error: Exception) -> Any:
        """The result of a call `meta` refused (`error`), from the shadows:
        a number as it is, tensors as meta stand-ins with their shadows.
        DataDependentError where the arguments have no shadows."""
        import torch
        from torch.utils._pytree import tree_leaves, tree_map

        result = self._run(func, args, kwargs)
        if result is None and "meta kernel" in str(error).lower():
            raise DataDependentError(
                f"{func} has no meta kernel, so peakmem cannot run it on the step's meta stand-ins, and not every "
                f"argument's value is known to run it on them; at {source_line()}. peakmem does not model this op "
                "yet") from error
        if result is None:
            error_out = DataDependentError(
                f"{func} needs a tensor's value, which peakmem does not have: the step is recorded on meta "
                f"stand-ins, and the value comes from floating-point data or from a meta input; at "
                f"{source_line()}. Pass the step's integer and boolean inputs (ids, masks) as real tensors, "
                "or avoid the data-dependent branch" + (
                    f". The value comes from the top-k at {self.router}: if it is a mixture-of-experts router, "
                    "routing='balanced', 'worst' or per-expert token counts assume its choice" if self.router else ""))
            error_out.router = self.router
            raise error_out from error

        given = {id(a) for a in tree_leaves((args, kwargs)) if isinstance(a, torch.Tensor) and a.device.type == "cpu"}

        def stand_in(x: Any) -> Any:
            if not isinstance(x, torch.Tensor) or id(x) in given:  # a real tensor written in place: itself
                return x
            with torch.utils._python_dispatch._disable_current_modes():
                meta = torch.empty_strided(x.shape, x.stride(), dtype=x.dtype, device="meta")
            self.give(meta, x)
            return meta

        return tree_map(stand_in, result)

    def follow(self, func: Any, args: tuple, kwargs: dict, out: Any) -> None:
        """After a call ran on meta: its outputs' shadows, where every
        tensor argument has one and the outputs are small; an in-place call
        whose arguments do not all have shadows drops its target's."""
        import torch
        from torch.utils._pytree import tree_leaves

        outs = [t for t in tree_leaves(out) if isinstance(t, torch.Tensor)]
        if not outs:
            return
        if func is torch.ops.aten.copy_.default and outs[0].device.type == "meta":
            # The whole stand-in overwritten: the source's value, where it
            # has one (a real CPU tensor copied to the device, DDP's bucket
            # indices among them), broadcast and cast as copy_ does.
            source = self.of(args[1])
            self._forget(id(outs[0]))
            if source is not None and outs[0].numel() <= MAX_SHADOW_ELEMENTS:
                self.give(outs[0], source.to(outs[0].dtype).expand(outs[0].shape).clone())
            return
        tensors = [a for a in tree_leaves((args, kwargs)) if isinstance(a, torch.Tensor)]
        if not all(self.of(a) is not None for a in tensors) or any(t.numel() > MAX_SHADOW_ELEMENTS for t in outs):
            for t in outs:  # written in place (or a fresh output): its old value is not known
                self._forget(id(t))
            return
        if any(t.device.type != "meta" for t in outs) or not (tensors or _is_factory(func)):
            return
        real = self._run(func, args, kwargs)
        reals = [t for t in tree_leaves(real) if isinstance(t, torch.Tensor)]
        if len(reals) == len(outs):
            for stand_in, value in zip(outs, reals):
                self.give(stand_in, value)


def _is_factory(func: Any) -> bool:
    """An ATen call that makes a tensor from its arguments' numbers only
    (arange, ones, full, scalar_tensor, ...), deterministic."""
    name = func._schema.name.split("::")[-1]
    return not name.startswith(("rand", "normal", "bernoulli", "empty")) and all(
        not str(a.type).startswith("Tensor") for a in func._schema.arguments)
