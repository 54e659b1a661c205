"""The vocabulary the optimizer's ``step()`` programs are written in
(peakmem.optimizer_program's single-tensor steps, peakmem.optimizer_foreach's
foreach steps): each parameter's description, the trace-text writer, the
printed types and numbers, and the arguments and first-step state both
implementations share."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["ParamInfo", "Writer", "adam_arguments", "dtype_attr", "num", "sgd_arguments", "type_of"]


@dataclass(frozen=True)
class ParamInfo:
    """A parameter the optimizer updates: its shape, dtype (torch.dtype) and
    device (as types print it: "cpu", "cuda:0", "meta"). A scalar the
    optimizer makes with ``device="cpu"`` (Adam's ``step`` counter, without
    ``capturable``) keeps the default."""

    shape: tuple[int, ...]
    dtype: Any
    device: str = "cpu"


class Writer:
    """Trace text in the printed form the text reader reads."""

    def __init__(self, spec: Any) -> None:
        # spec: peakmem.optimizer_program.OptimizerSpec (its name, group and step_dtype)
        self.spec = spec
        self.args: list[tuple[str, str]] = []
        self.body: list[str] = []
        self.returned: list[str] = []
        self.state: list[str] = []  # the state's names, as arguments or made
        self.count = 0
        self.owner: dict[str, int] = {}  # value -> the parameter it is made for
        self.current = -1  # the parameter being written

    def param(self, i: int) -> None:
        """What is written next is for parameter `i`."""
        self.current = i

    def arg(self, name: str, type_: str, state: bool = False) -> str:
        self.args.append((name, type_))
        self.owner[name] = self.current
        if state:
            self.state.append(name)
        return name

    def call(self, callee: str, *args: str, type_: str | None = None,
             state: str | None = None) -> str | None:
        """`callee(args)`; with `type_` its new output's name (`state`: a state
        tensor of that name, returned), else a bare call (in place)."""
        text = f"{callee}({', '.join(args)})"
        if type_ is None:
            self.body.append(text)
            return None
        if state is not None:
            name = state
            self.state.append(name)
            self.returned.append(name)
        else:
            name = f"t{self.count}"
            self.count += 1
        self.body.append(f"{name} = {text}  # {name}: \"{type_}\"")
        self.owner[name] = self.current
        return name

    def delete(self, *names: str | None) -> None:
        names = tuple(n for n in names if n is not None)
        if names:
            self.body.append(f"del {', '.join(names)}")

    def text(self) -> str:
        implementation = "foreach" if self.spec.group.get("foreach") else "single-tensor"
        head = [f"# peakmem: torch.optim.{self.spec.name}.step(), {implementation}",
                "import torch", "from torch import Tensor", "", "@torch.no_grad()",
                f"def optimizer_step({', '.join(n for n, _ in self.args)}):"]
        head += [f"  # {n}: \"{t}\"" for n, t in self.args]
        ret = f"  return ({', '.join(self.returned)}{',' if len(self.returned) == 1 else ''})"
        return "\n".join(head + [""] + [f"  {line}" for line in self.body] + [ret]) + "\n"


def type_of(p: ParamInfo) -> str:
    """The printed type: Thunder's own dtype short names (thunder.core.dtypes)."""
    from thunder.core import dtypes

    shape = ", ".join(str(d) for d in p.shape)
    return f"{p.device} {dtypes.to_dtype(p.dtype).shortname()}[{shape}]"


def num(x: Any) -> str:
    """A Python number as the program spells it: its kind (int, float) decides the wrapped dtype."""
    return repr(x)


def adam_arguments(w: Writer, group: dict, params: list[ParamInfo],
                   first: bool) -> list[tuple[str, str, list[str]]]:
    """Each parameter's (param, grad, [step, exp_avg, exp_avg_sq(, max_exp_avg_sq)])
    names: the arguments, and on the first step the state Adam._init_group
    makes (per parameter, step then the moments; the same for both
    implementations)."""
    names = []
    for i, info in enumerate(params):
        w.param(i)
        p = w.arg(f"p{i}", type_of(info))
        g = w.arg(f"g{i}", type_of(info))
        state = [f"s{i}", f"m{i}", f"v{i}"] + ([f"x{i}"] if group["amsgrad"] else [])
        if not first:
            w.arg(state[0], type_of(ParamInfo((), w.spec.step_dtype)), state=True)
            for n in state[1:]:
                w.arg(n, type_of(info), state=True)
        names.append((p, g, state))
    if first:
        for i, ((p, _g, state), info) in enumerate(zip(names, params)):
            w.param(i)
            # torch.tensor(0.0, dtype=_get_scalar_dtype(), device="cpu")
            w.call("torch.full", "()", "0.0", f"dtype={dtype_attr(w.spec.step_dtype)}",
                   type_=type_of(ParamInfo((), w.spec.step_dtype)), state=state[0])
            for n in state[1:]:
                w.call("torch.zeros_like", p, type_=type_of(info), state=n)
    return names


def dtype_attr(dtype: Any) -> str:
    return f"torch.{str(dtype).split('.')[-1]}"


def sgd_arguments(w: Writer, group: dict, params: list[ParamInfo],
                  first: bool) -> list[tuple[int, str, str, str | None]]:
    """Each parameter's (index, param, grad, momentum buffer) names; the buffer
    is an argument after the first step (None: no buffer yet, or no momentum)."""
    names = []
    for i, info in enumerate(params):
        w.param(i)
        p, g = w.arg(f"p{i}", type_of(info)), w.arg(f"g{i}", type_of(info))
        buf = w.arg(f"b{i}", type_of(info), state=True) if group["momentum"] != 0 and not first else None
        names.append((i, p, g, buf))
    return names
