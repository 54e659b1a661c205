"""The CPU's foreach ops, as the per-tensor calls their kernels make.

On the CPU every ``aten._foreach_*`` op runs its slow kernel
(aten/src/ATen/native/ForeachOpsKernels.cpp: ``FOREACH_BINARY_OP_SCALAR``,
``FOREACH_BINARY_OP_SCALARLIST``, ``FOREACH_BINARY_OP_LIST``,
``FOREACH_POINTWISE_OP_SCALAR``/``_SCALARLIST``/``_TENSOR``,
``FOREACH_UNARY_OP`` and their ``*_slow`` functions): a loop calling the
single-tensor op on each tensor in turn, with the scalar (or the list's i-th
scalar, or the other list's i-th tensor). Each call's scratch (the numbers
ATen wraps into 0-d tensors, the casts TensorIterator makes) is allocated and
freed inside it, so the foreach op's scratch is the largest of its calls'.
On meta, the foreach op's meta kernel runs as one call: ``per_tensor_calls``
gives the calls the CPU would make, for the registry's rules of the
single-tensor op (eager.py prices them).

Only the CPU: CUDA's fast foreach kernels (ForeachBinaryOpScalar.cu, ...)
are one multi-tensor launch with no per-tensor op.
"""

from __future__ import annotations

from typing import Any, Callable

__all__ = ["foreach_scratch", "per_tensor_calls"]

# The single-tensor overload each foreach overload calls, where the name
# differs: a list of scalars or of tensors gives one of them per call; the
# pointwise ops (addcdiv, addcmul) take the scalar as their `value`.
_OVERLOADS = {"List": "Tensor", "ScalarList": "Scalar", "ScalarAndTensor": "Tensor"}
_POINTWISE = ("addcdiv", "addcdiv_", "addcmul", "addcmul_")


def _single_op(func: Any) -> Any:
    """The single-tensor OpOverload `func`'s slow kernel calls (None: none known)."""
    import torch

    name = func._schema.name.removeprefix("aten::")
    if not name.startswith("_foreach_"):
        return None
    base = name.removeprefix("_foreach_")
    packet = getattr(torch.ops.aten, base, None)
    if packet is None:
        return None
    overload = func._overloadname or "default"
    if base in _POINTWISE:
        overload = "default"
    else:
        overload = _OVERLOADS.get(overload, overload)
    return getattr(packet, overload, None) if overload in packet.overloads() else None


def per_tensor_calls(func: Any, args: tuple, kwargs: dict) -> list[tuple[Any, tuple, dict]] | None:
    """The calls (single op, args, kwargs) `func`, a foreach op, makes on the
    CPU, one per tensor of its first list; None when `func` is not a foreach
    op whose single-tensor op is known."""
    single = _single_op(func)
    if single is None:
        return None
    schema = func._schema.arguments
    values = {a.name: (args[i] if i < len(args) else kwargs[a.name])
              for i, a in enumerate(schema) if i < len(args) or a.name in kwargs}
    first = values.get(schema[0].name)
    if not isinstance(first, (list, tuple)):
        return None
    single_names = [a.name for a in single._schema.arguments]
    pointwise = func._schema.name.removeprefix("aten::_foreach_") in _POINTWISE
    calls = []
    for i in range(len(first)):
        call: dict[str, Any] = {}
        for k, a in enumerate(schema):
            if a.name not in values:
                continue
            v = values[a.name]
            element = v[i] if isinstance(v, (list, tuple)) else v
            # The foreach schema's names: self/other, tensor1/tensor2, and the
            # scalar(s), which the single op takes as `other` (binary) or
            # `value` (pointwise).
            if a.name in single_names:
                call[a.name] = element
            elif a.name in ("scalar", "scalars"):
                call["value" if pointwise else "other"] = element
            elif k == 1 and len(single_names) > 1:
                call[single_names[1]] = element
        if not all(n in call or a.has_default_value() for n, a in zip(single_names, single._schema.arguments)):
            return None
        calls.append((single, (), call))  # by name: what the registry's rules read
    return calls


def foreach_scratch(func: Any, args: tuple, kwargs: dict,
                    price: Callable[[Any, dict], tuple[int, int, str, bool]]) -> tuple[bool, int, int]:
    """(known, scratch before the outputs, scratch with them) of `func`, a
    CPU foreach op: the largest of its per-tensor calls' scratch (one call's
    is freed before the next starts), each call priced by `price(single op,
    its arguments by name)`, which gives the registry's (before, with
    outputs, why not counted, known). Unknown (False, 0, 0) when `func` is
    no foreach op or a call has no rule that counts it."""
    calls = per_tensor_calls(func, args, kwargs)
    if not calls:
        return False, 0, 0
    before = with_outputs = 0
    for single, _, call_kwargs in calls:
        b, w, why_not, known = price(single, call_kwargs)
        if not known or why_not:
            return False, 0, 0
        before, with_outputs = max(before, b), max(with_outputs, w)
    return True, before, with_outputs
