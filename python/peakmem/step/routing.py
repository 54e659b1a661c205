"""A mixture-of-experts router's choice, assumed where the step cannot read it.

A mixture-of-experts layer routes each token to ``k`` of its ``E`` experts
by the top-k of its router's scores, then runs each expert on the tokens
routed to it (``transformers``' eager experts path: ``one_hot``,
``nonzero`` and ``where`` on the top-k indices). What the experts allocate
depends on how many tokens each one gets, and those counts come from
floating-point activations, which a step recorded on ``meta`` stand-ins
does not have (peakmem.step.shadow_values: such a value is a
DataDependentError naming the line). ``routing=`` assumes them instead:
each ``topk`` whose input has no real value gets indices with the assumed
per-expert counts, as a shadow beside its stand-in, so the experts' code
runs as it would on such a batch. Which token goes to which expert does not
change what is allocated; the counts do.

``routing`` is one of:

* ``"balanced"``: every expert gets ``N·k / E`` of the ``N`` tokens' ``N·k``
  choices (the first ``N·k mod E`` experts one more), what a load-balancing
  loss aims at;
* ``"worst"``: every token goes to the same ``k`` experts (the first ones),
  so each of them runs on all ``N`` tokens: the most one expert's
  temporaries can take;
* per-expert counts ``[c_0, ..., c_{E-1}]`` for every router call, or a
  list of such lists, one per ``topk`` call in the order the step makes
  them (each layer's router, forward only: the backward does not route),
  each summing to ``N·k`` with no count above ``N``.

Each assumption is stated in the report's diagnostics with the line of the
``topk`` it stood in for.

Where the model and the inputs are real and no ``routing=`` is given, the
routing is read off the model itself: one forward under ``no_grad``
(``observed_counts``; the random number generators and the buffers are put
back after it) gives each router call's counts, and the step is recorded
with them, as the diagnostics say.
"""

from __future__ import annotations

from typing import Any, Sequence

__all__ = ["Routing", "expert_counts", "routed_indices", "assumed_topk_indices", "observed_counts"]

ROUTINGS = ("balanced", "worst")


class Routing:
    """The assumption ``routing=`` names, checked on construction (ValueError
    naming what is wrong), and the calls it has answered so far."""

    def __init__(self, spec: Any, per_step: bool = False) -> None:
        """`per_step`: the counts given router call by router call are
        one step's, repeated in each step (a step run until its memory
        repeats, whose number of steps is not known beforehand); else they
        are every call of every step in order."""
        self.spec = spec
        self.per_step = per_step
        self.calls = 0
        self._step_began = 0  # self.calls when the current step began
        if isinstance(spec, str):
            if spec not in ROUTINGS:
                raise ValueError(f"routing must be 'balanced', 'worst' or per-expert token counts, got {spec!r}")
            self._counts: list[list[int]] | None = None
        elif isinstance(spec, Sequence) and spec and all(isinstance(c, int) and not isinstance(c, bool)
                                                         for c in spec):
            self._counts = [list(spec)]
        elif isinstance(spec, Sequence) and spec and all(
                isinstance(row, Sequence) and row and all(isinstance(c, int) and not isinstance(c, bool)
                                                          for c in row) for row in spec):
            self._counts = [list(row) for row in spec]
        else:
            raise ValueError("routing must be 'balanced', 'worst', a list of per-expert token counts or a list of "
                             f"such lists (one per router call), got {spec!r}")
        if self._counts is not None and any(c < 0 for row in self._counts for c in row):
            raise ValueError(f"routing: token counts cannot be negative, got {spec!r}")

    def counts(self, tokens: int, k: int, experts: int) -> list[int]:
        """The per-expert counts of the next router call (`tokens` tokens
        choosing `k` of `experts` each). ValueError where given counts do
        not fit the call."""
        call = self.calls
        self.calls += 1
        if self._counts is None:
            return expert_counts(self.spec, tokens, k, experts)
        if self.per_step:
            call -= self._step_began
        if len(self._counts) > 1 and call >= len(self._counts):
            raise ValueError(f"routing: counts were given for {len(self._counts)} router calls; the step makes "
                             f"more (call {call + 1})")
        row = self._counts[call if len(self._counts) > 1 else 0]
        if len(row) != experts:
            raise ValueError(f"routing: router call {call + 1} chooses among {experts} experts; its counts name "
                             f"{len(row)}")
        if sum(row) != tokens * k or max(row) > tokens:
            raise ValueError(f"routing: router call {call + 1} routes {tokens} tokens to {k} experts each: its "
                             f"counts must sum to {tokens * k} with none above {tokens}, got {row}")
        return row

    def new_step(self) -> None:
        """A step begins: with `per_step`, the counts start again (the
        step before used them all)."""
        if self.per_step:
            if self.calls > 0:
                self.check_all_used()
            self._step_began = self.calls

    def check_all_used(self) -> None:
        """ValueError where counts were given for more router calls than
        the step made (they describe another step)."""
        if self._counts is None or len(self._counts) == 1:
            return
        made = self.calls - self._step_began
        if made != len(self._counts):
            raise ValueError(f"routing: counts were given for {len(self._counts)} router calls; the step made "
                             f"{made}")

    def describe(self, counts: list[int]) -> str:
        name = self.spec if isinstance(self.spec, str) else "given counts"
        return f"{name}, tokens per expert {counts}"


def expert_counts(kind: str, tokens: int, k: int, experts: int) -> list[int]:
    """Per-expert counts of `tokens` tokens choosing `k` of `experts`:
    ``"balanced"`` spreads the ``tokens·k`` choices evenly (the first
    ``tokens·k mod experts`` one more), ``"worst"`` gives the first `k`
    experts every token."""
    if kind == "worst":
        return [tokens if e < k else 0 for e in range(experts)]
    share, extra = divmod(tokens * k, experts)
    return [share + (1 if e < extra else 0) for e in range(experts)]


def routed_indices(counts: list[int], tokens: int, k: int) -> Any:
    """A ``tokens x k`` int64 tensor of expert indices with `counts` per
    expert and no expert twice in a token's row: the choices listed expert
    by expert fill the rows column by column (choice s is token ``s mod
    tokens``'s ``s // tokens``-th), so an expert's run of at most `tokens`
    choices never meets the same token twice."""
    import torch

    experts = torch.repeat_interleave(torch.arange(len(counts)), torch.tensor(counts, dtype=torch.long))
    return experts.reshape(k, tokens).t().contiguous()


def assumed_topk_indices(routing: Routing, values: Any, k: int, dim: int) -> tuple[Any, list[int]]:
    """The indices ``topk(values, k, dim)`` returns under `routing` (a CPU
    int64 tensor of that call's output shape), and the per-expert counts
    they hold: the `dim` axis of `values` is the experts, the others the
    tokens."""
    dim = dim % values.dim()
    experts = values.shape[dim]
    tokens = values.numel() // experts if experts else 0
    counts = routing.counts(tokens, k, experts)
    chosen = routed_indices(counts, tokens, k)
    rest = [n for i, n in enumerate(values.shape) if i != dim]
    return chosen.reshape(*rest, k).movedim(-1, dim).contiguous(), counts


def observed_counts(model: Any, forward: Any) -> list[list[int]]:
    """Each router call's per-expert counts in one real forward of `model`
    (``forward()``, under ``no_grad``): every ``topk`` of floating-point
    values, in call order, its indices counted along its ``dim``. The
    model's buffers and the random number generators are as they were
    after it."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    counts: list[list[int]] = []

    class Observe(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            if func is torch.ops.aten.topk.default and args[0].is_floating_point():
                dim = (args[2] if len(args) > 2 else kwargs.get("dim", -1)) % args[0].dim()
                counts.append(torch.bincount(out[1].flatten(), minlength=args[0].shape[dim]).tolist())
            return out

    buffers = {name: b.detach().clone() for name, b in model.named_buffers()}
    with torch.random.fork_rng(devices=[]), torch.no_grad(), Observe():
        forward()
    with torch.no_grad():
        for name, b in model.named_buffers():
            if name in buffers:
                b.copy_(buffers[name])
    return counts
