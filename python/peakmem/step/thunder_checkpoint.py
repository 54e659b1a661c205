"""Selective activation checkpointing under Thunder: ``torch.utils.checkpoint``
with a ``context_fn`` from ``create_selective_checkpoint_contexts`` (SAC),
honoured by ``thunder.jit``.

Thunder 0.2.6 runs a checkpointed function through its own lookaside
(thunder/core/jit_ext.py, ``_general_jit_torch_checkpoint_lookaside``): it
tags every tensor the function makes, but its inputs and outputs, to be
recomputed in the backward, and ignores ``context_fn`` with a warning. So a
SAC policy (PyTorch's SAC ILP's choice, a hand-written "save the matmuls")
has no effect under Thunder: every checkpointed block is recomputed whole.

Inside ``selective_checkpointing()`` (or after ``install()``) the lookaside
is this module's instead, which asks the policy as PyTorch's SAC does and
tags only what it recomputes:

1. the function runs once more, eagerly, on fake CPU tensors of the
   proxies' shapes and dtypes (nothing allocated), under a dispatch mode
   that asks the policy about every ATen operator as
   ``_CachingTorchDispatchMode`` asks it in the forward
   (``SelectiveCheckpointContext(is_recompute=False)``, the operators in
   ``SAC_IGNORED_OPS`` left out, so that a policy that counts its calls
   counts as it does under PyTorch), and under a function mode that groups
   the operators by the torch-level call that made them;
2. Thunder interprets the function as its own lookaside does; each
   top-level symbol it records is one of those torch-level calls (the calls
   Thunder maps to its own symbols, in the same order; a function whose
   calls differ between the two runs is refused, naming the first that
   differs);
3. a call's outputs are tagged ``RECOMPUTE_IN_BACKWARD`` unless the policy
   saves (``MUST_SAVE`` or ``PREFER_SAVE``) one of its operators; the
   function's inputs and outputs are never tagged, as in Thunder's.

Thunder then saves what its own backward rules need of every untagged value
and recomputes the tagged ones in the backward, so the step run is
Thunder's, with the policy's choice of what to save: the memory is Thunder's
(its decompositions' residuals, not ATen's), estimated and measured by the
Thunder front end like any Thunder step.

The lookaside is Thunder's global registration: it is in force for every
``thunder.jit`` traced while installed, the user's own runs included, which
is what makes the estimate the run's.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator

__all__ = ["install", "selective_checkpointing", "uninstall"]

_SAVED_POLICIES = ("MUST_SAVE", "PREFER_SAVE")


def _policies_by_call(function: Callable, args: tuple, context_fn: Callable) -> list[tuple[Any, bool]]:
    """Step 1: (torch-level function, whether the policy saves one of its
    operators) for each call `function` makes that Thunder maps to a
    symbol of its own, in order."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.overrides import TorchFunctionMode
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils.checkpoint import SAC_IGNORED_OPS, CheckpointPolicy, SelectiveCheckpointContext

    from thunder.core.dtypes import to_torch_dtype
    from thunder.core.proxies import TensorProxy
    from thunder.torch import _torch_to_thunder_function_map

    from .cpu_attention import cpu_attention

    forward_context, _ = context_fn()
    policy_fn = getattr(forward_context, "policy_fn", None)
    if policy_fn is None:
        raise TypeError("peakmem's Thunder checkpoint lookaside: context_fn must come from "
                        "torch.utils.checkpoint.create_selective_checkpoint_contexts (its forward context has "
                        f"no policy_fn: {type(forward_context).__name__})")
    calls: list[list] = []

    class Calls(TorchFunctionMode):
        def __torch_function__(self, func, types, a=(), kw=None):
            calls.append([func, False])
            return func(*a, **(kw or {}))

    class Policy(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, a=(), kw=None):
            kw = kw or {}
            out = func(*a, **kw)
            if func in SAC_IGNORED_OPS:
                return out
            policy = policy_fn(SelectiveCheckpointContext(is_recompute=False), func, *a, **kw)
            if isinstance(policy, bool):
                policy = CheckpointPolicy.MUST_SAVE if policy else CheckpointPolicy.PREFER_RECOMPUTE
            if calls and policy.name in _SAVED_POLICIES:
                calls[-1][1] = True
            return out

    def fake(x: Any) -> Any:
        if isinstance(x, TensorProxy):
            t = torch.empty(tuple(x.shape), dtype=to_torch_dtype(x.dtype), device=x.device.device_str())
            return t.requires_grad_(x.requires_grad) if t.is_floating_point() else t
        return x

    with FakeTensorMode(allow_non_fake_inputs=True), cpu_attention():
        given = torch.utils._pytree.tree_map(fake, args)
        with Policy(), Calls():
            function(*given)
    return [(f, saved) for f, saved in calls if f in _torch_to_thunder_function_map]


def _lookaside(function: Callable, *args: Any, context_fn: Callable | None = None, **kwargs: Any) -> Any:
    """Thunder's checkpoint lookaside, but for a selective-checkpoint
    ``context_fn`` (steps 2 and 3 of the module docstring)."""
    from thunder.core.interpreter import INTERPRETER_SIGNALS, unwrap
    from thunder.core.jit_ext import get_jit_ctx
    from thunder.core.proxies import Proxy, ProxyTag
    from torch.utils._pytree import tree_map

    if unwrap(context_fn) is None:
        return _THUNDERS(function, *args, **kwargs)
    if unwrap(kwargs.pop("use_reentrant", False)):
        raise NotImplementedError("torch.utils.checkpoint: use_reentrant=True is not supported in Thunder")
    for ignored in ("debug", "determinism_check", "preserve_rng_state"):
        kwargs.pop(ignored, None)  # Thunder ignores them (its lookaside warns)
    if kwargs:
        raise NotImplementedError(f"torch.utils.checkpoint under Thunder: keyword arguments to the checkpointed "
                                  f"function ({', '.join(kwargs)}) are not supported (nor are they by Thunder's own)")
    fn, plain_args = unwrap(function), tuple(unwrap(a) for a in args)
    calls = _policies_by_call(fn, plain_args, unwrap(context_fn))

    jit_ctx = get_jit_ctx()
    jit_ctx.computation_trace.push_scope([])
    ends: set[str] = set()

    def note(p: Any) -> None:
        if isinstance(p, Proxy):
            ends.add(p.name)

    tree_map(note, plain_args)
    res = _interpret_call()(function, *args)
    if res is INTERPRETER_SIGNALS.EXCEPTION_RAISED:
        jit_ctx.computation_trace.bound_symbols.extend(jit_ctx.computation_trace.pop_scope())
        return res
    tree_map(note, unwrap(res))
    recorded = jit_ctx.computation_trace.pop_scope()
    jit_ctx.computation_trace.bound_symbols.extend(recorded)

    differs = [i for i, ((f, _), b) in enumerate(zip(calls, recorded)) if _call_name(f) != b.sym.name]
    if differs or len(recorded) != len(calls):
        i = differs[0] if differs else min(len(calls), len(recorded))
        eager = _call_name(calls[i][0]) if i < len(calls) else "nothing"
        traced = recorded[i].sym.name if i < len(recorded) else "nothing"
        raise RuntimeError(
            f"peakmem's Thunder checkpoint lookaside: {getattr(fn, '__qualname__', fn)} makes different calls "
            f"under Thunder and eagerly, so its selective-checkpoint policy cannot be placed: call {i} is "
            f"{traced} under Thunder and {eager} eagerly ({len(recorded)} and {len(calls)} calls)")
    for (_, saved), bsym in zip(calls, recorded):
        if saved:
            continue
        for o in bsym.flat_proxy_outs:
            if o.name not in ends:
                o.tags.add(ProxyTag.RECOMPUTE_IN_BACKWARD)
    return res


def _call_name(f: Any) -> str:
    """A torch-level function's name as Thunder's symbol for it is named
    (``Tensor.__getitem__`` is ``getitem``)."""
    return getattr(f, "__name__", str(f)).strip("_")


def _interpret_call() -> Callable:
    from thunder.core.interpreter import _interpret_call as interpret

    return interpret


def _registry() -> dict:
    import torch.utils.checkpoint

    from .._thunder_compat import import_thunder

    import_thunder()
    from thunder.core.jit_ext import _general_jit_lookaside_map

    return _general_jit_lookaside_map


_THUNDERS: Any = None  # Thunder's own lookaside while ours is installed


def install() -> None:
    """Installs the lookaside for every later ``thunder.jit`` trace (until ``uninstall()``)."""
    import torch.utils.checkpoint

    global _THUNDERS
    registry = _registry()
    if registry.get(torch.utils.checkpoint.checkpoint) is _lookaside:
        return
    _THUNDERS = registry[torch.utils.checkpoint.checkpoint]
    registry[torch.utils.checkpoint.checkpoint] = _lookaside


def uninstall() -> None:
    """Gives Thunder its own checkpoint lookaside back."""
    import torch.utils.checkpoint

    global _THUNDERS
    registry = _registry()
    if registry.get(torch.utils.checkpoint.checkpoint) is _lookaside:
        registry[torch.utils.checkpoint.checkpoint] = _THUNDERS
        _THUNDERS = None


@contextlib.contextmanager
def selective_checkpointing() -> Iterator[None]:
    """``install()`` for the block; Thunder's own lookaside again after it.
    A ``thunder.jit`` function traced inside keeps what was traced (Thunder
    caches the trace)."""
    installed_before = _registry().get(__import__("torch").utils.checkpoint.checkpoint) is _lookaside
    install()
    try:
        yield
    finally:
        if not installed_before:
            uninstall()
