"""One ATen call as the eager recording prices it: its arguments as
``_core.aten_scratch`` takes them, the scratch events its kernel adds, and
how the call is printed in a statement (eager.py's dispatch mode)."""

from __future__ import annotations

from typing import Any, Callable

from .cpu_foreach import foreach_scratch

# torch dtypes by the registry's short names (peakmem/ir/value_type.h).
_DTYPE_NAMES = {
    "bool": "b8", "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64", "uint8": "ui8",
    "uint64": "ui64", "bfloat16": "bf16", "float16": "f16", "float32": "f32", "float64": "f64",
    "complex32": "c32", "complex64": "c64", "complex128": "c128", "float8_e5m2": "f8_e5m2",
    "float8_e4m3fn": "f8_e4m3fn", "float8_e5m2fnuz": "f8_e5m2fnuz", "float8_e4m3fnuz": "f8_e4m3fnuz",
}
# The arguments ATen wraps a Python number in (aten_ops.h).
_WRAPPED_ARGUMENTS = ("self", "other")


def _dtype_name(dtype: Any, op: str) -> str:
    name = str(dtype).removeprefix("torch.")
    try:
        return _DTYPE_NAMES[name]
    except KeyError:
        raise ValueError(f"{op}: the dtype {dtype} has no size rule in peakmem's registry") from None


def _number_kind(x: Any) -> str | None:
    if isinstance(x, bool):
        return "bool"
    if isinstance(x, int):
        return "int"
    if isinstance(x, float):
        return "float"
    if isinstance(x, complex):
        return "complex"
    return None


def _arguments(func: Any, args: tuple, kwargs: dict, op: str, known: Callable[[Any], bool]) -> tuple[list, bool]:
    """The call's arguments as ``_core.aten_scratch`` takes them (name,
    value) in schema order, and whether it wraps a number: a Python number
    in its self/other arguments, or a 0-d CPU tensor the recording never saw
    made (``known``), which ATen's C++ made with wrapped_scalar_tensor
    before calling (a backward formula's ``grad * 2``), whatever the other
    operands' device."""
    import torch

    out, wraps = [], False
    for i, argument in enumerate(func._schema.arguments):
        if i < len(args):
            value = args[i]
        elif argument.name in kwargs:
            value = kwargs[argument.name]
        else:
            continue
        if isinstance(value, torch.Tensor):
            wrapped = value.dim() == 0 and value.device.type == "cpu" and not known(value)
            wraps = wraps or wrapped
            value = ("tensor", _dtype_name(value.dtype, op), list(value.shape), list(value.stride()), wrapped)
        elif _number_kind(value) is not None:
            wraps = wraps or argument.name in _WRAPPED_ARGUMENTS
        elif isinstance(value, (list, tuple)) and all(type(v) in (int, bool) for v in value):
            value = [int(v) for v in value]  # sizes, strides, an output_mask
        elif isinstance(value, torch.dtype):
            value = _DTYPE_NAMES.get(str(value).removeprefix("torch."))
        else:
            value = None
        out.append((argument.name, value))
    return out, wraps


def _describe(x: Any) -> str:
    import torch

    if isinstance(x, torch.Tensor):
        return f"{str(x.dtype).removeprefix('torch.')}{list(x.shape)}"
    if isinstance(x, (list, tuple)):
        return "[" + ", ".join(_describe(v) for v in x) + "]"
    return repr(x)


def _scratch_events(recorder: Any, func: Any, call: tuple, priced: tuple, price_on_the_cpu: Callable,
                    device: str, events: list) -> None:
    """`events` (one call's) with the scratch its kernel allocates before
    its outputs and with them (`priced`: aten_scratch's answer; a CPU
    foreach op priced by its per-tensor calls' rules), and a CUDA target's
    library workspaces at its first matrix product; what is not modelled
    named in the diagnostics."""
    op = str(func)
    before, with_outputs, why_not, known = priced
    if not known and not recorder.target.cuda:  # a CPU foreach op: its per-tensor calls' rules
        known, before, with_outputs = foreach_scratch(func, *call, price_on_the_cpu)
    if not known and func.namespace == "aten":
        recorder.unknown_ops.add(op)
    statement = f"statement {len(recorder.record.statements)} ({op})"
    # A CPU convolution outside the rules: its two scratch storages sized
    # once the recording has finished, by asking the kernel (cpu_kernel_probe.py).
    deferred = recorder.probes.deferred_because(op, why_not, recorder.target.cuda)
    if deferred:  # the rule's figures, if any, are for another instruction set
        before = with_outputs = 0
    if why_not and not deferred:
        recorder.record.diagnostics.append(f"{statement}: what it allocates inside the op is not counted: {why_not}")
    scratch = [-1, -1]
    if before or deferred:
        scratch[0] = recorder.scratch(before, op, device)
        events[:0] = [scratch[0], -1 - scratch[0]]
    if with_outputs or deferred:
        scratch[1] = recorder.scratch(with_outputs, op, device)
        events += [scratch[1], -1 - scratch[1]]
    if deferred:
        recorder.probes.defer(func, *call, (scratch[0], scratch[1]), statement, deferred)
    events += recorder.library_workspaces(op)
