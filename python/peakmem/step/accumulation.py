"""Gradient accumulation in autograd's input buffers, as the plain step does it.

When a tensor is used more than once, autograd sums the gradients its uses
send back in the input buffer of the node that made it
(torch/csrc/autograd/input_buffer.cpp, ``accumulate``): with grad mode off
(a plain ``backward()``), if the buffer holds the last reference to the
gradient so far (``use_count`` and its storage's both one) and it is a
dense, non-overlapping, stock tensor, the sum is written into it in place
(``old_var.add_(var)``); else it is ``old_var + var``, a new tensor. The
check ``can_accumulate_inplace`` counts any tensor as subclass-like while a
TorchDispatchMode is on (``at::isTensorSubclassLike`` asks
``c10::impl::dispatch_mode_enabled()``), so under the recording's mode
every sum is out of place, and a step that sums many gradients of slices
(a mixture of experts' ``weight[expert]``, ``w[i]`` in a loop) would hold
one more gradient per sum than the plain step.

So the recording tells the engine's sums apart from the backward formulas'
own additions, and rewrites the ones the plain step does in place:

* which calls are the engine's: the profiler's RecordFunction ranges nest
  each node's formula inside its node (``MulBackward0``); the engine's
  sums are made after the node returns, directly inside
  ``autograd::engine::evaluate_function: ...``
  (torch/csrc/autograd/engine.cpp, ``Engine::thread_main`` and
  ``Node::operator()``). The backward runs under the CPU profiler, and the
  ``aten::add`` ranges outside the recording mode's own calls are matched
  one to one, in order, with the ``add`` calls the mode saw.
* which of them the plain step does in place: the first operand's storage
  is freed as soon as the call returns (the buffer held its last
  reference), it is not a view (a view's autograd meta holds its base, so
  its storage has two references: ``as_view`` in
  torch/csrc/autograd/VariableTypeUtils.h, even under no-grad), it is
  dense and non-overlapping, and the sum has its shape and dtype. Then the sum *is* that storage: its allocation costs nothing
  and the first operand's storage lives until the sum's is freed.

Where the profiler cannot run (one is already on) or the calls do not
match, nothing is rewritten and the report says so.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any, Iterator

__all__ = ["Accumulations", "EngineSum"]

_ENGINE = "autograd::engine::evaluate_function"
_MODE = "PythonDispatchMode"


@dataclass
class EngineSum:
    """An ``add`` call the recording saw in the backward: its statement, the
    storage indices of its first operand and of its output (None where
    either was not a new dense storage), and whether it could be written in
    place (shapes, dtypes and layout)."""

    statement: int
    first: int | None
    output: int | None
    fits_in_place: bool


@dataclass
class Accumulations:
    """The backward's ``add`` calls as recorded, and the rewrites that make
    the engine's in-place sums the plain step's."""

    calls: list[EngineSum] = field(default_factory=list)
    recording: bool = False
    # output storage index -> the storage it is (its first operand's, followed through chains)
    alias: dict[int, int] = field(default_factory=dict)

    def root(self, index: int) -> int:
        while index in self.alias:
            index = self.alias[index]
        return index

    def note(self, statement: int, args: tuple, out: Any, index_of: Any) -> None:
        """One ``aten.add`` call the mode saw while the backward runs."""
        import torch
        from torch._prims_common import is_non_overlapping_and_dense_or_false

        if not self.recording:
            return
        first = args[0] if args and isinstance(args[0], torch.Tensor) else None
        # A view is never written in place: its autograd meta holds its
        # base (as_view, torch/csrc/autograd/VariableTypeUtils.h), so its
        # storage has a second reference.
        fits = (first is not None and isinstance(out, torch.Tensor) and not first._is_view()
                and first.shape == out.shape and first.dtype == out.dtype
                and is_non_overlapping_and_dense_or_false(first))
        self.calls.append(EngineSum(statement, index_of(first) if first is not None else None,
                                    index_of(out) if isinstance(out, torch.Tensor) else None, bool(fits)))

    @contextlib.contextmanager
    def during_backward(self, diagnostics: list[str]) -> Iterator[list[bool]]:
        """Runs the backward under the CPU profiler; the yielded list is
        filled, on exit, with whether each ``add`` call the mode saw was the
        engine's (empty, with a diagnostic, where that could not be told)."""
        import torch
        # The legacy profiler: its RecordFunction ranges are the same, and
        # it prints nothing (Kineto logs each start and stop to stderr).
        from torch.autograd.profiler_legacy import profile

        engine: list[bool] = []
        self.calls.clear()  # this backward's calls only
        if torch._C._autograd._profiler_enabled():
            diagnostics.append("a profiler was already running, so gradient sums in autograd's input buffers are "
                               "counted out of place, as the recording observes them (the plain step may sum in "
                               "place)")
            yield engine
            return
        self.recording = True
        try:
            with profile() as prof:
                yield engine
        finally:
            self.recording = False
        found = _engine_adds(prof.function_events)
        if len(found) != len(self.calls):
            diagnostics.append(f"the backward's {len(self.calls)} add calls did not match the profiler's "
                               f"{len(found)}: gradient sums in autograd's input buffers are counted out of place")
            self.calls.clear()
            return
        engine.extend(found)

    def rewrite(self, statements: list, storages: list, engine: list[bool]) -> None:
        """The engine's sums the plain step makes in place, rewritten in
        `statements` (their event lists) and `storages`: the sum's
        allocation weighs nothing, its first operand's free right after the
        call is dropped, and each later free of the sum frees that operand's
        storage too (``alias``; live sums are followed by the recorder)."""
        consumed: set[int] = set()
        made: set[int] = set()  # this backward's sums (an earlier one's frees already name their storage)
        for call, by_engine in zip(self.calls, engine):
            if not (by_engine and call.fits_in_place and call.first is not None and call.output is not None):
                continue
            following = statements[call.statement + 1][2] if call.statement + 1 < len(statements) else []
            leading_frees = []
            for e in following:
                if e >= 0:
                    break
                leading_frees.append(-1 - e)
            if call.first not in leading_frees:
                continue  # another reference held it: the plain step adds out of place too
            consumed.add(call.first)
            self.alias[call.output] = self.root(call.first)
            made.add(call.output)
            storages[call.output][0] = 0
        if not consumed:
            return
        first_statement = min(call.statement for call in self.calls)
        for i in range(first_statement, len(statements)):
            op, source, events = statements[i]
            rewritten = []
            for e in events:
                if e < 0 and -1 - e in consumed:
                    continue
                rewritten.append(e)
                if e < 0 and -1 - e in made:
                    rewritten.append(-1 - self.root(-1 - e))
            statements[i] = (op, source, rewritten)


def _engine_adds(events: Any) -> list[bool]:
    """For each ``aten::add`` range outside the recording mode's own calls,
    in the order they began: whether the engine made it (directly inside
    an ``evaluate_function`` range, not inside a node's formula)."""
    out = []
    for e in sorted(events, key=lambda e: e.time_range.start):
        if e.name != "aten::add":
            continue
        parent, inside_mode = e.cpu_parent, False
        while parent is not None:
            if parent.name == _MODE:
                inside_mode = True
                break
            parent = parent.cpu_parent
        if not inside_mode:
            out.append(e.cpu_parent is not None and e.cpu_parent.name.startswith(_ENGINE))
    return out
