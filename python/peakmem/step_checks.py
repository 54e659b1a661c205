"""What estimate_step checks before Thunder traces the step, so that two
common mistakes get an error naming the cause and the fix at once rather
than a failure inside Thunder seconds later:

- ``check_devices``: the inputs on another device than the model's
  parameters (a CPU model with ``meta`` inputs, say);
- ``check_loss_fn_captures``: a ``loss_fn`` that reads a tensor from outside
  its arguments (targets captured by a closure or read as a global), which
  Thunder makes an extra argument of the step that is neither a parameter
  nor an input.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

__all__ = ["check_devices", "check_loss_fn_captures"]


def check_devices(model: Any, inputs: tuple) -> None:
    """ValueError when the model's parameters and buffers are all on one
    device and an input tensor (other than a 0-dim one, which PyTorch lets
    mix with any device) is on another."""
    import torch

    held = {str(t.device) for t in (*model.parameters(), *model.buffers())}
    if len(held) != 1:
        return
    (device,) = held
    for i, x in enumerate(inputs):
        if isinstance(x, torch.Tensor) and x.dim() > 0 and str(x.device) != device:
            fix = (f"to estimate without allocating, put the model on meta too (model.to('meta'), or build it "
                   f"under `with torch.device('meta'):`)" if x.device.type == "meta"
                   else f"make the inputs on {device}, or move the model with model.to('{x.device}')")
            raise ValueError(f"the model's parameters are on {device} but input {i} (shape {tuple(x.shape)}) is on "
                             f"{x.device}: the step needs them on one device; {fix}")


def _referenced(fn: Callable) -> list[tuple[str, Any, str]]:
    """(name, value, how) for what `fn` reads besides its arguments: its
    closure's cells, the globals its code names, a partial's bound arguments."""
    if isinstance(fn, functools.partial):
        bound = [(f"argument {i}", v, "bound by functools.partial") for i, v in enumerate(fn.args)]
        bound += [(k, v, "bound by functools.partial") for k, v in fn.keywords.items()]
        return bound + _referenced(fn.func)
    code = getattr(fn, "__code__", None)
    if code is None:
        return []
    found = []
    for name, cell in zip(code.co_freevars, getattr(fn, "__closure__", None) or ()):
        try:
            found.append((name, cell.cell_contents, "captured by its closure"))
        except ValueError:  # an empty cell
            pass
    namespace = getattr(fn, "__globals__", {})
    found += [(n, namespace[n], "a global it reads") for n in code.co_names if n in namespace]
    return found


def check_loss_fn_captures(loss_fn: Callable | None, model: Any, inputs: tuple, frontend: str = "thunder") -> None:
    """ValueError naming each tensor `loss_fn` reads from outside its
    arguments that is not one of the model's parameters or buffers or an
    input. Under Thunder it would be an extra argument of the traced step;
    on the eager front end, a real tensor among the step's meta stand-ins
    (a ``meta`` one is allowed there: it is a stand-in too)."""
    import torch

    if loss_fn is None:
        return
    known = {id(t) for t in (*model.parameters(), *model.buffers(), *inputs) if isinstance(t, torch.Tensor)}
    outside = [(name, v, how) for name, v, how in _referenced(loss_fn)
               if isinstance(v, torch.Tensor) and id(v) not in known
               and not (frontend in ("eager", "compile") and v.device.type == "meta")]
    if not outside:
        return
    named = ", ".join(f"`{name}` (shape {tuple(v.shape)}, {how})" for name, v, how in outside)
    why = ("Thunder makes it an extra argument of the traced step, which is neither a parameter nor an input, "
           "and peakmem cannot place it" if frontend == "thunder" else
           "the eager front end records the step on meta stand-ins of the step's own tensors, and a real tensor "
           "from outside cannot meet them (make it on meta to leave it out of the step's memory)")
    raise ValueError(
        f"loss_fn reads a tensor that is not an input of the step: {named}. {why}. Pass it as an input "
        "instead, for the loss alone: estimate_step(model, x, targets, model_inputs=1, loss_fn=lambda output, "
        "x, targets: ...) calls model(x) and loss_fn(output, x, targets)")
