"""torch.compile'd steps, refused until they are modelled.

A compiled step allocates what Inductor's generated program allocates: its
fused kernels keep fewer intermediates, AOTAutograd's partitioner chooses
what the backward saves, and the generated wrapper reuses and frees buffers
itself. Answering it as the eager step would be a silent wrong answer (a
4-layer MLP block on the CPU: eager 36,704,264 bytes, compiled 30,412,808),
so every front end refuses it and says what is compiled, where:

- ``compiled_parts(model)``, before the step runs: a module made by
  ``torch.compile(module)`` (an ``OptimizedModule``, at the top or inside),
  a module that ``module.compile()`` compiled in place, and a ``forward``
  that is a compiled function (``@torch.compile`` on the method);
- ``compiled_regions_refused()``, while the eager front end records the
  step: any other compiled function the step calls (``torch.compile(fn)``
  used inside ``forward`` or the loss). Under the recording's dispatch mode
  Dynamo would skip the frame and run it eagerly without a word; entering
  it raises instead.
"""

from __future__ import annotations

import contextlib
import inspect
import sys
from typing import Any, Iterator

__all__ = ["CompiledStepError", "compiled_parts", "compiled_regions_refused", "refuse_compiled"]

_WHY = ("peakmem does not model torch.compile'd steps yet: Inductor's generated program fuses kernels, chooses "
        "what the backward saves and reuses buffers, so the eager step's memory is not the compiled step's")
_FIX = ("estimate the module before compiling it (the eager step's memory), or measure the compiled step on its "
        "device (torch.cuda.max_memory_allocated)")


class CompiledStepError(ValueError):
    """A training step that runs code compiled by ``torch.compile``."""


def _is_compiled_function(fn: Any) -> bool:
    # torch._dynamo.eval_frame: the wrapper torch.compile returns keeps the
    # function it compiles as `_torchdynamo_orig_callable`; torch._dynamo.disable
    # marks its wrapper `_torchdynamo_disable` (that one runs eagerly: not compiled).
    fn = getattr(fn, "__func__", fn)
    return hasattr(fn, "_torchdynamo_orig_callable") and not getattr(fn, "_torchdynamo_disable", False)


def compiled_parts(model: Any) -> list[str]:
    """What of `model` is compiled, each as ``"<module path>: how"`` (the
    top module's path is ``(top)``); empty when nothing is."""
    dynamo = sys.modules.get("torch._dynamo.eval_frame")
    if dynamo is None or not hasattr(model, "named_modules"):
        return []  # torch.compile imports Dynamo: nothing can be compiled without it
    found = []
    for path, module in model.named_modules():
        where = path or "(top)"
        if isinstance(module, dynamo.OptimizedModule):
            found.append(f"{where}: made by torch.compile ({type(module._orig_mod).__name__})")
        elif getattr(module, "_compiled_call_impl", None) is not None:
            found.append(f"{where}: {type(module).__name__}.compile() compiled it in place")
        elif _is_compiled_function(getattr(type(module), "forward", None)) or _is_compiled_function(
                module.__dict__.get("forward")):
            found.append(f"{where}: {type(module).__name__}.forward is a torch.compile'd function")
    return found


def refuse_compiled(model: Any) -> None:
    """CompiledStepError naming what of `model` is compiled, if anything is."""
    parts = compiled_parts(model)
    if parts:
        raise CompiledStepError(f"the model is compiled ({'; '.join(parts)}): {_WHY}; {_FIX}")


def _where(fn: Any) -> str:
    fn = getattr(fn, "__func__", fn)
    code = getattr(fn, "__code__", None)
    name = getattr(fn, "__qualname__", type(fn).__name__)
    return f"{name} ({code.co_filename}:{code.co_firstlineno})" if code is not None else name


@contextlib.contextmanager
def compiled_regions_refused(allowed: Any = None) -> Iterator[None]:
    """While inside: entering a torch.compile'd function raises
    CompiledStepError naming it and its source line, unless
    ``allowed(callback)`` says its Dynamo callback is one the step models
    (peakmem.step.inductor_replay's). It watches the one
    place every compiled call passes (torch/_dynamo/eval_frame.py,
    ``_TorchDynamoContext.__call__``'s ``compile_wrapper`` asks
    ``_callback_from_stance`` for Dynamo's frame callback before it calls
    the function); a Dynamo without that function is refused outright
    rather than left unwatched."""
    eval_frame = sys.modules.get("torch._dynamo.eval_frame")
    if eval_frame is None:
        yield  # Dynamo is not imported: nothing is compiled
        return
    original = getattr(eval_frame, "_callback_from_stance", None)
    if original is None:
        raise RuntimeError("this PyTorch's Dynamo has no _callback_from_stance: peakmem cannot tell whether the "
                           "step calls torch.compile'd code (it is written for PyTorch 2.13)")

    def refuse(callback: Any) -> Any:
        if callback in (None, False) or (allowed is not None and allowed(callback)):
            return original(callback)  # None, False: torch._dynamo.disable, or run-only: eager code
        caller = inspect.currentframe().f_back
        fn = caller.f_locals.get("fn") if caller is not None else None
        what = _where(fn) if fn is not None else "a compiled function"
        raise CompiledStepError(f"the step calls {what}, compiled by torch.compile: {_WHY}; {_FIX}")

    eval_frame._callback_from_stance = refuse
    try:
        yield
    finally:
        eval_frame._callback_from_stance = original
