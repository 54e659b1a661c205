"""Which ``nn.Module`` each tensor of a training step belongs to: the
breakdown of the step's peak by module (``StepReport.by_module``).

Thunder's traces do not name the module an op came from (a bound symbol's
header is the source line, shared by every instance of a module class), but
they name the parameters: a forward argument ``t_h_0_attn_c_attn_weight`` is
the parameter ``h.0.attn.c_attn.weight``. The attribution follows the data:

* a parameter, its gradient and its optimizer state belong to the
  parameter's module (``h.0.attn.c_attn``); a buffer to its module;
* a tensor the forward or backward makes belongs to the module of the
  parameters its op reads (their longest common path when several); an op
  that reads none takes the deepest module among its inputs' (the last such
  input on a tie), so activations follow the layer that made their input;
* the backward's gradient of a parameter belongs to the parameter's module;
* the inputs, the loss, the cotangent and what nothing attributes belong to
  the top (``""``).
"""

from __future__ import annotations

from typing import Any

__all__ = ["module_of_path", "argument_modules", "tied_arguments", "value_modules", "held_tensors"]


def module_of_path(path: str) -> str:
    """The module of a parameter path: ``h.0.attn.c_attn.weight`` -> ``h.0.attn.c_attn``."""
    return path.rsplit(".", 1)[0] if "." in path else ""


def _thunder_name(path: str) -> str:
    # thunder's proxy names for module parameters (thunder/core/jit_ext.py:
    # the attribute path with dots as underscores, prefixed "t_").
    return "t_" + path.replace(".", "_")


def argument_modules(holder: Any) -> dict[str, str]:
    """The forward's argument names for `holder`'s parameters and buffers -> their modules."""
    out: dict[str, str] = {}
    for path, _ in [*holder.named_parameters(), *holder.named_buffers()]:
        out[_thunder_name(path)] = module_of_path(path)
    return out


def tied_arguments(holder: Any, flat_args: list[str], inputs: tuple = ()) -> dict[str, str]:
    """Each of the forward's arguments (`flat_args`) that is the same tensor
    as an earlier one -> that one: tied weights (one parameter under two
    module paths, which the trace takes once per path) and an input tensor
    passed twice (``model(ids, labels=ids)``). The trace names the inputs'
    arguments after the code's own parameters and puts them first: they are
    matched to the tensors of `inputs` in order, where the counts agree."""
    import torch

    tensor_of = {_thunder_name(path): id(t) for path, t in [*holder.named_parameters(remove_duplicate=False),
                                                            *holder.named_buffers(remove_duplicate=False)]}
    given = [x for x in inputs if isinstance(x, torch.Tensor)]
    others = [name for name in flat_args if name not in tensor_of]
    if len(others) == len(given):
        tensor_of.update({name: id(x) for name, x in zip(others, given)})
    first: dict[int, str] = {}
    out: dict[str, str] = {}
    for name in flat_args:
        key = tensor_of.get(name)
        if key is None:
            continue
        if key in first:
            out[name] = first[key]
        else:
            first[key] = name
    return out


def _common(paths: list[str]) -> str:
    parts = [p.split(".") if p else [] for p in paths]
    common: list[str] = []
    for items in zip(*parts):
        if any(x != items[0] for x in items):
            break
        common.append(items[0])
    return ".".join(common)


def _depth(path: str) -> int:
    return path.count(".") + 1 if path else 0


def _tensor_names(xs: Any) -> list[str]:
    return [x.name for x in xs if hasattr(x, "name") and hasattr(x, "shape")]


def value_modules(traces: list[Any], arguments: dict[str, str],
                  gradients: dict[str, str]) -> dict[str, str]:
    """Every tensor value of `traces` (the forward, then the backward) -> its
    module, by the module docstring's rules. `arguments`: the parameters'
    and buffers' names -> modules (argument_modules); `gradients`: the
    backward's gradient names -> their parameters' modules."""
    out: dict[str, str] = dict(arguments)
    for trace in traces:
        for bsym in trace.bound_symbols:
            if bsym.sym.name in ("return", "python_return", "python_del", "del"):
                continue
            ins = _tensor_names(bsym.flat_args)
            direct = [arguments[n] for n in ins if n in arguments]
            if direct:
                module = _common(direct)
            else:
                module = ""
                for n in ins:
                    m = out.get(n)
                    if m is not None and _depth(m) >= _depth(module):
                        module = m
            for n in _tensor_names(bsym.flat_outs):
                out.setdefault(n, module)
    out.update(gradients)
    return out


def held_tensors(holder: Any, storage_key: Any, storage_bytes: Any) -> list[tuple[str, int, bool]]:
    """(module, bytes, trainable) for each distinct storage of `holder`'s
    parameters and buffers, parameters first in the optimizer's order.
    `storage_key(t)` identifies a tensor's storage, `storage_bytes(t)` its size."""
    seen: set[Any] = set()
    out: list[tuple[str, int, bool]] = []
    named = [(p, t, t.requires_grad) for p, t in holder.named_parameters()]
    named += [(p, t, False) for p, t in holder.named_buffers()]
    for path, t, trainable in named:
        key = storage_key(t)
        if key in seen:
            continue
        seen.add(key)
        out.append((module_of_path(path), storage_bytes(t), trainable))
    return out
