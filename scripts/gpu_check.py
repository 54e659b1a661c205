"""peakmem's predictions against a real CUDA GPU, in one table.

    scripts/gpu-check                      # on a machine with a CUDA GPU
    scripts/gpu-check --dry-run            # the same code on the CPU (no GPU needed)
    scripts/gpu-check --quick              # a few programs and steps
    scripts/gpu-check --wheelhouse DIR     # first install, offline, what DIR holds
    scripts/gpu-check --eager-steps all    # with every step-corpus entry on the eager front end

What is compared
----------------
Traces: every corpus and model-zoo program (tests/data/{corpus,zoo}, made
by scripts/make_corpus.py's loader and tracer) is traced by ``thunder.jit``
on the device, and each of its traces is predicted by ``peakmem.analyze(trace,
allocator="cuda-caching")`` and run by ``peakmem.measure`` on the device.
Rows: requested bytes (``peak_bytes``, ``final_bytes``; the measurement's
``torch.cuda.memory_stats`` ``requested_bytes``), the caching allocator's
allocated and reserved bytes (peak, final) and the segments it holds at the
end (``segment.all.current``, against the model's ``segments_final``).

Steps: every entry of the training-step corpus (tests/python/step_models.py)
on the device: ``peakmem.estimate_step(..., allocator="cuda-caching")``
against ``peakmem.measure_step``; requested peak and final, the
``StepReport.allocator`` figures of both and the segments held at the end.
The estimate's allocator holds the parameters and inputs before the step;
measure_step's figures are relative to the parameters, so the measured side
adds the parameters' allocated and reserved bytes, measured as the model is
moved onto the device (check_step says how the inputs are kept apart).
Steps run with Thunder's default executors whatever ``--executors`` says.

Eager steps: the same entries on the eager front end, estimated as a user
sizing the step for this GPU asks (``estimate_step(..., frontend="eager",
device=...)`` with the GPU's target: CUDA's optimizer implementation, op
scratch and dropout; peakmem.step.device_target), against
``measure_step(..., frontend="eager")``. The process's cuBLAS workspaces
exist before the step (the warm-up below made them), so the estimate is of
a warm process; the ``cuBLAS workspaces`` row compares the target's
workspaces with what the warm-up left allocated.

Every row whose two sides are known is compared exactly; any difference, or
a program that fails, makes the exit status 1. The table names each
difference; the notes under it say what the device did that the comparison
does not show (what was held when a call began, what a first call kept,
the segments' sizes in order where they differ from the model's).

On the CUDA device, a warm-up first runs matrix products inside a private
memory pool, so that the buffers CUDA libraries make on first use and keep
(cuBLAS's and cuBLASLt's workspaces, made through the caching allocator)
sit in segments no measured program can use. Each trace is then measured on
a clean allocator: the cache is emptied (``torch.cuda.empty_cache``) after
one unmeasured call of the same trace and before the compared one, so that
anything else a first call makes and keeps is held before the baseline
instead of counted; a note says how much that was.

``--dry-run`` runs the same code on the CPU: ``peakmem.measure``'s profiler
path is the truth for requested bytes; the allocator's predictions are shown
with "n/a" measured (a CPU has no caching allocator).

Exit status: 0 every compared row equal (or no GPU without --dry-run:
nothing to check), 1 a difference or a failed program, 3 the time budget ran
out before every program ran (none differed), 2 bad usage.
"""

from __future__ import annotations

import argparse
import gc
import importlib.metadata
import importlib.util
import json
import os
import subprocess
import sys
import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent

# --quick: one small program, an MLP with its backward, an attention block
# and a whole language model; three steps (plain, SGD over steps, Adam's
# foreach state).
QUICK_PROGRAMS = ("xyz", "mlp", "nanogpt_block", "gpt2")
QUICK_STEPS = ("mlp", "gpt_block_sgd_3_steps", "mlp_adamw_foreach_3_steps")
# The eager front end estimated for the GPU's target: CUDA's default
# optimizer (foreach AdamW), dropout's mask, attention (math on meta: its
# CUDA backends are not modelled, so a difference there is expected).
QUICK_EAGER_STEPS = ("mlp_adamw_3_steps", "gpt_block", "llama_block_bf16_adamw")
# (--eager-steps also takes tests/python/transformers_steps.py's hf_* entries:
# tiny GPT-2 and Llama, sdpa and eager attention, float32 and bf16 autocast,
# AdamW foreach, for-loop and fused; in the default and "all" sets where
# transformers is installed.)
QUICK_HF_STEPS = ("hf_llama_sdpa", "hf_gpt2_sdpa_bf16_autocast")

# The allocator figures compared, as both reports name them.
ALLOCATOR_KEYS = ("allocated_peak_bytes", "allocated_final_bytes", "reserved_peak_bytes", "reserved_final_bytes")

# A run on a GPU starts nothing after this many seconds, so that the whole
# check (its longest program included) stays under 8 minutes.
GPU_TIME_BUDGET = 360.0

# Exit statuses (argparse's own usage error is 2).
OK, DIFFERENT, INCOMPLETE = 0, 1, 3


@dataclass
class Row:
    """One quantity of one program: `predicted` against `measured` (None:
    not known on this side, shown as "n/a" and not compared)."""

    program: str
    quantity: str
    predicted: int | None
    measured: int | None

    @property
    def compared(self) -> bool:
        return self.predicted is not None and self.measured is not None

    @property
    def difference(self) -> int | None:
        """measured - predicted, when both are known."""
        return self.measured - self.predicted if self.compared else None

    @property
    def mismatch(self) -> bool:
        return self.compared and self.measured != self.predicted


@dataclass
class Result:
    """What one run checked."""

    device: str
    versions: dict[str, str]
    rows: list[Row] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    failures: list[tuple[str, str]] = field(default_factory=list)  # (program, what went wrong)
    not_run: list[str] = field(default_factory=list)  # left for the time budget
    held_before: tuple[int, int] | None = None  # the last measurement's, see check_trace
    seconds: float = 0.0
    # --keep: where the programs go, and each program's label -> how to
    # predict it again (a trace or step file's name in that folder, or
    # "eager ENTRY TARGET": the eager front end's estimate of a step-corpus
    # entry for that target in a warm process); tests/python/test_gpu_recorded.py
    # reads them.
    keep: Path | None = None
    kept: dict[str, str] = field(default_factory=dict)

    @property
    def mismatches(self) -> list[Row]:
        return [r for r in self.rows if r.mismatch]

    @property
    def status(self) -> int:
        if self.mismatches or self.failures:
            return DIFFERENT
        return INCOMPLETE if self.not_run else OK

    def to_json(self) -> dict[str, Any]:
        return {
            "device": self.device, "versions": self.versions, "seconds": round(self.seconds, 1),
            "status": self.status,
            "rows": [{**asdict(r), "difference": r.difference, "mismatch": r.mismatch} for r in self.rows],
            "notes": self.notes, "failures": [{"program": p, "error": e} for p, e in self.failures],
            "not_run": self.not_run, "kept": self.kept,
            # The steps measured where an entry names none: the steady state
            # (measure_step's default since the steady step), not one step.
            "steady_default": True,
        }


# ---------------------------------------------------------------------------
# The corpus builders (scripts/make_corpus.py, tests/python/step_models.py)


def _load(path: Path, name: str):
    """Imports `path` as module `name` once (the builders are scripts, not a package)."""
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def make_corpus():
    return _load(REPO / "scripts" / "make_corpus.py", "peakmem_make_corpus")


def step_models():
    return _load(REPO / "tests" / "python" / "step_models.py", "step_models")


def program_names() -> list[str]:
    return [d.name for d in make_corpus().program_dirs()]


def step_names() -> list[str]:
    return [e.name for e in step_models().ENTRIES]


def transformers_steps():
    """tests/python/transformers_steps.py (it imports step_models by name)."""
    step_models()
    return _load(REPO / "tests" / "python" / "transformers_steps.py", "transformers_steps")


def eager_step_names() -> list[str]:
    """The step corpus and, where transformers is installed, its tiny models' steps."""
    names = step_names()
    if importlib.util.find_spec("transformers") is not None:
        names += [e.name for e in transformers_steps().ENTRIES]
    return names


def _entry(name: str):
    entries = step_models().ENTRIES
    if name.startswith("hf_"):
        entries = transformers_steps().ENTRIES
    return next(e for e in entries if e.name == name)


# ---------------------------------------------------------------------------
# The device


# Private memory pools made by _private_pool, kept for the whole run: their
# segments (the inputs given to measure_step, the warm-up's library buffers)
# must outlive the measurements.
_POOLS: list = []


def _private_pool(torch: Any, device: Any):
    """A context in which `device`'s allocations go to a new private memory
    pool, whose segments the default pool (what every measurement and every
    prediction is of) never uses; on the CPU, or a torch without
    ``torch.cuda.MemPool``, a context that changes nothing."""
    from contextlib import nullcontext

    if device.type != "cuda" or not hasattr(torch.cuda, "use_mem_pool"):
        return nullcontext()
    _POOLS.append(torch.cuda.MemPool())
    index = device.index if device.index is not None else torch.cuda.current_device()
    return torch.cuda.use_mem_pool(_POOLS[-1], index)  # it takes an index, not "cuda"


def warm_up(torch: Any, device: Any) -> tuple[int, int]:
    """Runs matrix products on `device` inside a private pool, so that the
    buffers CUDA libraries make on first use and keep (cuBLAS's and
    cuBLASLt's workspaces, made through the caching allocator) live in that
    pool's segments, not in a default-pool segment whose free part a
    measured program could use. Returns the (allocated, reserved) bytes they
    hold."""
    _clean(torch, device)
    before = _held(torch, device)
    with _private_pool(torch, device):
        for dtype in (torch.float32, torch.bfloat16):
            x = torch.ones(4, 8, 16, device=device, dtype=dtype)
            w = torch.ones(32, 16, device=device, dtype=dtype)
            b = torch.ones(32, device=device, dtype=dtype)
            outs = [torch.nn.functional.linear(x, w, b), torch.nn.functional.linear(x[0], w, b), x @ w.t(),
                    torch.bmm(x, x.transpose(1, 2))]
            torch.cuda.synchronize(device)
            del x, w, b, outs
    _clean(torch, device)
    after = _held(torch, device)
    return after[0] - before[0], after[1] - before[1]


def _clean(torch: Any, device: Any) -> None:
    """Frees what nothing holds and returns the cache's unused segments to
    the driver: the allocator then holds only live blocks."""
    gc.collect()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.empty_cache()


def _cuda_current(torch: Any, device: Any) -> dict[str, int]:
    s = torch.cuda.memory_stats(device)
    return {k: int(s.get(f"{k}.all.current", 0)) for k in ("allocated_bytes", "reserved_bytes", "segment")}


def _segments_made(snapshot: dict, index: int) -> list[int]:
    """Sizes of the segments the caching allocator got from the driver while
    history was recorded (its ``segment_alloc`` trace entries), in order."""
    traces = snapshot.get("device_traces") or []
    entries = traces[index] if index < len(traces) else []
    return [int(e["size"]) for e in entries if e.get("action") == "segment_alloc"]


def _predicted_segments(report: Any) -> list[int]:
    """Sizes of the segments the allocator model got from the driver, in
    order: the ``segment_alloc`` entries of the report's PyTorch snapshot."""
    import pickle

    snapshot = pickle.loads(report.write("snapshot"))
    return _segments_made(snapshot, 0)


def _record_history(torch: Any, **options: Any) -> None:
    """torch.cuda.memory._record_memory_history with the options this torch
    knows (clear_history, which drops what an earlier recording left in the
    trace, is recent)."""
    import inspect

    known = inspect.signature(torch.cuda.memory._record_memory_history).parameters
    torch.cuda.memory._record_memory_history(**{k: v for k, v in options.items() if k in known})


@dataclass
class Measured:
    """A trace's measurement, and on CUDA what the allocator did around it."""

    m: Any
    segments_final: int | None = None
    segments_made: list[int] | None = None
    first_call_kept: tuple[int, int] | None = None  # (allocated bytes, segments) a first call left held
    first_call_peak: int | None = None  # requested peak of that first call
    held_before: tuple[int, int] | None = None  # (allocated bytes, segments) held when the compared call began


def measure_trace(trace: Any, device: Any) -> Measured:
    import peakmem
    import torch

    if device.type != "cuda":
        return Measured(peakmem.measure(trace, device=str(device)))
    _clean(torch, device)
    before_first = _cuda_current(torch, device)
    first = peakmem.measure(trace, device=str(device))
    _clean(torch, device)
    before = _cuda_current(torch, device)
    kept = (before["allocated_bytes"] - before_first["allocated_bytes"], before["segment"] - before_first["segment"])
    index = device.index if device.index is not None else torch.cuda.current_device()
    _record_history(torch, enabled="all", context=None, stacks="python", max_entries=1_000_000, clear_history=True)
    try:
        m = peakmem.measure(trace, device=str(device))
        snapshot = torch.cuda.memory._snapshot()
    finally:
        torch.cuda.memory._record_memory_history(enabled=None)
    # measure() dropped its inputs and result after reading the statistics;
    # the segments they were in are still cached (nothing emptied the cache).
    after = _cuda_current(torch, device)
    return Measured(m, segments_final=after["segment"] - before["segment"],
                    segments_made=_segments_made(snapshot, index), first_call_kept=kept,
                    first_call_peak=first.peak_bytes, held_before=(before["allocated_bytes"], before["segment"]))


def check_trace(result: Result, label: str, trace: Any, device: Any) -> None:
    """Adds `trace`'s rows (and notes) to `result`."""
    import peakmem

    report = peakmem.analyze(trace, allocator="cuda-caching")
    a = report.allocator
    if result.keep is not None:
        name = label.replace(" ", "_") + ".trace"
        (result.keep / name).write_text(str(trace))
        result.kept[label] = name
    got = measure_trace(trace, device)
    m = got.m
    result.rows += [
        Row(label, "requested peak", report.peak_bytes, m.peak_bytes),
        Row(label, "requested final", report.final_bytes, m.final_bytes),
        Row(label, "allocated peak", a["allocated_peak_bytes"], m.allocated_peak_bytes),
        Row(label, "allocated final", a["allocated_final_bytes"], m.allocated_final_bytes),
        Row(label, "reserved peak", a["reserved_peak_bytes"], m.reserved_peak_bytes),
        Row(label, "reserved final", a["reserved_final_bytes"], m.reserved_final_bytes),
        Row(label, "segments final", a["segments_final"], got.segments_final),
    ]
    if got.first_call_kept is not None and (got.first_call_kept[0] or got.first_call_peak != m.peak_bytes):
        result.notes.append(
            f"{label}: the first call's requested peak was {got.first_call_peak:,} bytes (compared call: "
            f"{m.peak_bytes:,}); it left {got.first_call_kept[0]:,} bytes allocated in {got.first_call_kept[1]} "
            "segment(s) that later calls find held (CUDA libraries' own buffers, cuBLAS's workspace among them)")
    if got.held_before is not None and got.held_before != result.held_before:
        result.held_before = got.held_before
        result.notes.append(f"{label} and after: {got.held_before[0]:,} bytes in {got.held_before[1]} segment(s) "
                            "were held when each compared call began (not in its figures: they are relative "
                            "to it; what CUDA libraries keep, such as cuBLAS's workspace, is held there)")
    if got.segments_made is not None:
        predicted = _predicted_segments(report)
        if predicted != got.segments_made:
            result.notes.append(f"{label}: segments made, in order: predicted {_runs(predicted)}; "
                                f"measured {_runs(got.segments_made)}")


def _runs(sizes: list[int]) -> str:
    """Sizes in order, each run of equal ones as one: "3 x 2,097,152, 20,971,520"."""
    from itertools import groupby

    parts = [(len(list(g)), size) for size, g in groupby(sizes)]
    return ", ".join(f"{n} x {size:,}" if n > 1 else f"{size:,}" for n, size in parts) or "none"


def check_program(result: Result, name: str, device: Any, executors: str) -> None:
    corpus = make_corpus()
    (directory,) = corpus.program_dirs([name])
    module = corpus.load_program(directory)
    chosen = None
    if executors == "torch":
        from thunder.extend import get_executor

        chosen = [get_executor("torch")]
    traces = corpus.jit_traces(module, device=str(device), executors=chosen)
    for kind, trace in traces.items():
        check_trace(result, f"{name} {kind}", trace, device)


def _on_device(x: Any, device: Any) -> Any:
    return make_corpus()._on_device(x, device)


def _held(torch: Any, device: Any) -> tuple[int, int] | None:
    """(allocated, reserved) bytes `device` holds now; None on the CPU."""
    if device.type != "cuda":
        return None
    current = _cuda_current(torch, device)
    return current["allocated_bytes"], current["reserved_bytes"]


def check_step(result: Result, name: str, device: Any, frontend: str = "thunder") -> None:
    """Adds the rows of step-corpus entry `name` run by `frontend`:
    estimate_step against measure_step on `device`. The eager front end's
    estimate is for the device's target (``device=``, as a user sizing the
    step for this GPU would ask), in a process whose CUDA libraries already
    hold their workspaces (the warm-up made them:
    DeviceTarget.libraries_warm); the ``workspaces`` row compares those with
    the warm-up's measurement.

    The estimate's allocator figures are of an allocator that holds the
    parameters and then the inputs before the step; measure_step's are
    relative to the parameters (its inputs are copied inside its region).
    So the measured side adds the parameters' own allocated and reserved
    bytes, measured as the model is moved onto the device (after the cache
    is emptied), and the inputs given to measure_step are made in a private
    memory pool whose segments the step cannot use (its copies of them are
    made in the default pool, as the estimate's inputs are)."""
    import peakmem
    import torch

    entry = _entry(name)
    torch.manual_seed(0)
    model, inputs, setup = entry.make(), entry.inputs(), dict(entry.setup)
    _clean(torch, device)
    with _private_pool(torch, device):
        inputs = _on_device(inputs, device)
        if "kwinputs" in setup:
            setup["kwinputs"] = _on_device(setup["kwinputs"], device)
    before = _cuda_current(torch, device) if device.type == "cuda" else None
    model = model.to(device)
    after = _cuda_current(torch, device) if device.type == "cuda" else None
    target = None
    if frontend == "eager":
        from peakmem.step.device_target import device_target

        target = device_target(None, model)
        if target.cuda:
            target = target.libraries_warm()
    estimated = peakmem.estimate_step(model, *inputs, loss_fn=entry.loss_fn, allocator="cuda-caching",
                                      **setup, frontend=frontend, device=target)
    label = f"step {name}" if frontend == "thunder" else f"eager {name}"
    if result.keep is not None and frontend == "thunder":
        file = f"step_{name}.step.json"
        peakmem.export_step(model, *inputs, loss_fn=entry.loss_fn, **setup, frontend=frontend,
                            path=str(result.keep / file))
        result.kept[label] = file
    elif result.keep is not None:
        result.kept[label] = f"eager {name} {target.name}"
    _clean(torch, device)
    measured = peakmem.measure_step(model, *inputs, loss_fn=entry.loss_fn, **setup, frontend=frontend)
    # The segments now: the parameters' and those the measured steps made
    # (measure_step emptied the cache before them, and nothing has since).
    segments = None if before is None else _cuda_current(torch, device)["segment"] - before["segment"]
    result.rows += [
        Row(label, "requested peak", estimated.peak_bytes, measured.peak_bytes),
        Row(label, "requested final", estimated.final_bytes, measured.final_bytes),
    ]
    predicted = estimated.allocator or {}
    got = dict(measured.allocator or {})
    if got and before is not None:
        params_allocated = after["allocated_bytes"] - before["allocated_bytes"]
        params_reserved = after["reserved_bytes"] - before["reserved_bytes"]
        for key in got:
            got[key] += params_allocated if key.startswith("allocated") else params_reserved
        result.notes.append(f"{label}: measured allocator figures include the parameters' {params_allocated:,} "
                            f"allocated and {params_reserved:,} reserved bytes (measured as the model was "
                            "moved to the device)")
    for key in ALLOCATOR_KEYS:
        result.rows.append(Row(label, key.removesuffix("_bytes").replace("_", " "), predicted.get(key), got.get(key)))
    if estimated.allocator is not None:
        result.rows.append(Row(label, "segments final", estimated.allocator.get("segments_final"), segments))


# ---------------------------------------------------------------------------
# The table


def _bytes(n: int | None) -> str:
    return "n/a" if n is None else f"{n:,}"


def table_lines(result: Result, markdown: bool = False) -> list[str]:
    """The table: program, quantity, predicted, measured, difference
    (measured - predicted; "DIFFERS" marks a compared row that is not equal)."""
    header = ("program", "quantity", "predicted", "measured", "difference")
    body = []
    for r in result.rows:
        diff = "" if not r.compared else ("0" if not r.mismatch else f"{r.difference:+,}  DIFFERS")
        body.append((r.program, r.quantity, _bytes(r.predicted), _bytes(r.measured), diff))
    if markdown:
        lines = ["| " + " | ".join(header) + " |", "|---|---|--:|--:|--:|"]
        return lines + ["| " + " | ".join(cells) + " |" for cells in body]
    widths = [max(len(row[i]) for row in [header, *body]) for i in range(len(header))]

    def line(cells: tuple) -> str:
        return "  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    return [line(header), line(tuple("-" * w for w in widths)), *map(line, body)]


def summary_lines(result: Result) -> list[str]:
    compared = sum(r.compared for r in result.rows)
    lines = [f"{len(result.rows)} rows, {compared} compared, {len(result.mismatches)} differ, "
             f"{len(result.failures)} failed, {len(result.not_run)} not run ({result.seconds:.0f} s)"]
    differing: dict[str, list[str]] = {}
    for r in result.mismatches:
        differing.setdefault(r.program, []).append(f"{r.quantity} {r.difference:+,}")
    lines += [f"DIFFERS: {p}: {', '.join(q)}" for p, q in differing.items()]
    lines += [f"FAILED: {p}: {e}" for p, e in result.failures]
    if result.not_run:
        lines.append(f"NOT RUN (time budget): {', '.join(result.not_run)}")
    return lines


def report_text(result: Result, markdown: bool = False) -> str:
    head = [f"peakmem gpu-check on {result.device}: " + ", ".join(f"{k} {v}" for k, v in result.versions.items())]
    notes = [f"note: {n}" for n in result.notes]
    if markdown:
        return "\n".join(["# " + head[0], "", *table_lines(result, True), "",
                          *(f"- {x}" for x in summary_lines(result) + notes)]) + "\n"
    return "\n".join([*head, "", *table_lines(result), "", *notes, *summary_lines(result)]) + "\n"


def write_output(result: Result, path: Path) -> None:
    """`path` ending in .json: the result as JSON; otherwise markdown."""
    text = json.dumps(result.to_json(), indent=1) if path.suffix == ".json" else report_text(result, True)
    path.write_text(text)


# ---------------------------------------------------------------------------
# The run


def versions(device: Any) -> dict[str, str]:
    import torch

    out = {"torch": torch.__version__}
    for dist in ("lightning-thunder", "peakmem"):
        try:
            out[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            out[dist] = "?"
    if device.type == "cuda":
        out["gpu"] = torch.cuda.get_device_name(device)
    else:
        out["threads"] = str(torch.get_num_threads())
    return out


def card_rows(torch: Any, device: Any) -> list[Row]:
    """The card against peakmem's GPU catalog (semantics/execution_context.h):
    its ``total_memory`` and the CUDA context the process holds outside the
    caching allocator after the warm-up (cudaMemGetInfo's used bytes less
    the allocator's reserved ones: valid only with no other process on the
    card), each beside the catalog entry of the same name; a card the
    catalog does not name is measured with nothing to compare."""
    import peakmem

    name = torch.cuda.get_device_properties(device).name
    free, total = torch.cuda.mem_get_info(device)
    context = (total - free) - torch.cuda.memory_reserved(device)
    entry = next((g for g in peakmem.gpu_catalog() if g["description"].split(" (")[0] == name), None)
    label = f"card {entry['name'] if entry else name}"
    return [Row(label, "total_memory", entry["total_memory_bytes"] if entry else None,
                torch.cuda.get_device_properties(device).total_memory),
            Row(label, "CUDA context", entry["context_bytes"] if entry else None, context)]


def run(device: Any, programs: list[str], steps: list[str], *, executors: str = "default",
        time_budget: float | None = None, outputs: tuple[Path, ...] = (), log: Any = sys.stderr,
        eager_steps: list[str] = (), keep: Path | None = None) -> Result:
    """Checks `programs` (corpus names), then `steps` (step-corpus names,
    Thunder's front end), then `eager_steps` (the same entries on the eager
    front end) on `device`; stops starting new ones once `time_budget`
    seconds have gone.
    Writes `outputs` after every program, so a run cut short leaves what it did."""
    from peakmem._thunder_compat import import_thunder

    start = time.monotonic()
    import_thunder()
    result = Result(device=str(device), versions=versions(device), keep=keep)
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
    if device.type == "cuda":
        import torch

        kept = warm_up(torch, device)
        result.notes.append(f"a warm-up's matrix products left {kept[0]:,} bytes allocated in {kept[1]:,} reserved "
                            "(CUDA libraries' workspaces), in a private pool apart from every measurement")
        from peakmem.step.device_target import cuda_target_name, device_target

        target = device_target(cuda_target_name(device), None)
        result.rows.append(Row("cuBLAS workspaces", "allocated", target.cublas_workspace_bytes +
                               target.cublas_lt_workspace_bytes, kept[0]))
        result.rows.extend(card_rows(torch, device))
    work = ([("program", n) for n in programs] + [("step", n) for n in steps] +
            [("eager", n) for n in eager_steps])
    for i, (kind, name) in enumerate(work):
        if time_budget is not None and time.monotonic() - start > time_budget:
            result.not_run = [f"{k} {n}" for k, n in work[i:]]
            break
        began = time.monotonic()
        try:
            if kind == "program":
                check_program(result, name, device, executors)
            else:
                check_step(result, name, device, "thunder" if kind == "step" else "eager")
        except Exception as e:  # a program that fails is a row of the report, not the end of the run
            result.failures.append((f"{kind} {name}", f"{type(e).__name__}: {e}"))
            traceback.print_exc(file=log)
        print(f"[{time.monotonic() - start:6.1f} s] {kind} {name}: {time.monotonic() - began:.1f} s", file=log,
              flush=True)
        result.seconds = time.monotonic() - start
        for path in outputs:
            write_output(result, path)
    result.seconds = time.monotonic() - start
    return result


def _names(given: str | None, quick: tuple[str, ...], every: list[str], is_quick: bool, what: str) -> list[str]:
    """The names to check, in order. By default every one, the quick ones
    first: a run the time budget cuts short has checked those."""
    if given is None:
        return list(quick) if is_quick else [*quick, *(n for n in every if n not in quick)]
    if given == "none":
        return []
    if given == "all":
        return every
    names = [n for n in given.split(",") if n]
    unknown = sorted(set(names) - set(every))
    if unknown:
        raise SystemExit(f"gpu-check: no such {what}: {', '.join(unknown)} (known: {', '.join(every)})")
    return names


# ---------------------------------------------------------------------------
# --wheelhouse: an offline install


def _dist_name(wheel: Path) -> str:
    """A wheel file's distribution name, normalized (PEP 427 names the file
    ``{distribution}-{version}-...whl``; PEP 503 normalizes the name)."""
    return wheel.name.split("-")[0].lower().replace("_", "-").replace(".", "-")


def _installed_version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _unsatisfied(dist: str) -> set[str]:
    """The requirements of installed `dist` whose installed versions do not
    satisfy it (normalized names): a package the machine has, too old."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    out = set()
    for text in importlib.metadata.requires(dist) or ():
        req = Requirement(text)
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        have = _installed_version(req.name)
        if have is not None and not req.specifier.contains(have, prereleases=True):
            out.add(canonicalize_name(req.name))
    return out


def install_wheelhouse(wheelhouse: Path, target: Path, log: Any = sys.stderr) -> None:
    """Installs, with no network, the wheels in `wheelhouse` whose
    distributions this Python lacks (and every peakmem-*.whl there) into
    `target`, and puts `target` first on sys.path; then, where a
    requirement of lightning-thunder or peakmem is installed at a version
    that does not satisfy it, the wheelhouse's version too. pip's resolver
    is not used (it cannot see this Python's packages from a --target
    install): the wheelhouse (scripts/gpu-check-wheelhouse) holds every
    requirement. pip is the wheelhouse's (pip runs from its own wheel), else
    this Python's."""
    wheels = {_dist_name(w): w for w in sorted(wheelhouse.glob("*.whl"))}
    if not wheels:
        raise SystemExit(f"gpu-check: no wheels in {wheelhouse}")
    pip = [sys.executable, str(wheels["pip"] / "pip")] if "pip" in wheels else [sys.executable, "-m", "pip"]
    sys.path.insert(0, str(target))

    def install(names: list[str]) -> None:
        if not names:
            return
        print(f"gpu-check: installing {', '.join(wheels[n].name for n in names)} into {target}", file=log, flush=True)
        subprocess.run([*pip, "install", "--no-index", "--no-deps", "--disable-pip-version-check", "--root-user-action=ignore", "--quiet",
                        "--upgrade", "--target", str(target), *(str(wheels[n]) for n in names)], check=True)
        importlib.invalidate_caches()

    install([n for n in wheels if n != "pip" and (n == "peakmem" or _installed_version(n) is None)])
    stale = set()
    for dist in ("lightning-thunder", "peakmem"):
        if _installed_version(dist) is not None:
            stale |= _unsatisfied(dist)
    missing = sorted(stale - wheels.keys())
    if missing:
        raise SystemExit(f"gpu-check: installed too old and not in {wheelhouse}: {', '.join(missing)}")
    install(sorted(stale))


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="gpu-check", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dry-run", action="store_true",
                   help="run on the CPU: requested bytes compared, allocator figures predicted only")
    p.add_argument("--quick", action="store_true",
                   help=f"programs {', '.join(QUICK_PROGRAMS)} and steps {', '.join(QUICK_STEPS)}")
    p.add_argument("--programs", metavar="NAMES", help="comma-separated corpus programs, 'all' or 'none'")
    p.add_argument("--steps", metavar="NAMES", help="comma-separated step-corpus entries, 'all' or 'none'")
    p.add_argument("--eager-steps", metavar="NAMES",
                   help="step-corpus entries on the eager front end (estimated for this GPU's target), 'all' or 'none'")
    p.add_argument("--executors", choices=("default", "torch"), default="default",
                   help="thunder.jit's executors: Thunder's defaults, or the torch executor alone")
    p.add_argument("--device", default="cuda", help="the CUDA device (default: cuda)")
    p.add_argument("--time-budget", type=float, metavar="SECONDS",
                   help=f"start no program after this many seconds (default {GPU_TIME_BUDGET:.0f} on a GPU, "
                        "none in a dry run); 0: no limit")
    p.add_argument("--output", type=Path, action="append", default=[], metavar="PATH",
                   help="also write the table (after every program): PATH.json as JSON, else markdown; repeatable")
    p.add_argument("--keep", type=Path, metavar="DIR",
                   help="keep each program checked in DIR (its trace or step file) and the table as DIR/table.json, "
                        "so that CI predicts the rows again (tests/python/test_gpu_recorded.py); on a GPU the "
                        "default is tests/data/gpu/DATE-GPU")
    p.add_argument("--wheelhouse", type=Path, metavar="DIR",
                   help="first install, offline, the wheels in DIR this Python lacks (and peakmem-*.whl)")
    p.add_argument("--site", type=Path, default=REPO / "build" / "gpu-check-site", metavar="DIR",
                   help="where --wheelhouse installs (default build/gpu-check-site)")
    p.add_argument("--list", action="store_true", help="list the programs and steps, and exit")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    # The dry run's CPU measurements are compared like the tests': with
    # oneDNN's AVX2 kernels (tests/python/conftest.py says why). Set before
    # torch loads oneDNN.
    os.environ.setdefault("ONEDNN_MAX_CPU_ISA", "AVX2")
    if args.wheelhouse is not None:
        install_wheelhouse(args.wheelhouse, args.site)
    missing = [name for name in ("torch", "peakmem", "thunder") if importlib.util.find_spec(name) is None]
    if missing:
        print(f"gpu-check: this Python ({sys.executable}) lacks {', '.join(missing)}: install them, or pass "
              "--wheelhouse DIR (scripts/gpu-check-wheelhouse DIR, and a peakmem-*.whl for this Python in DIR)",
              file=sys.stderr)
        return DIFFERENT
    if args.list:
        print("programs:", " ".join(program_names()))
        print("steps (Thunder's and the eager front end's):", " ".join(step_names()))
        print("eager steps only:", " ".join(n for n in eager_step_names() if n not in step_names()))
        return OK
    import torch

    if args.dry_run:
        device = torch.device("cpu")
    elif not torch.cuda.is_available():
        print("gpu-check: no CUDA GPU here, nothing checked (scripts/gpu-check --dry-run runs the same "
              "code on the CPU)")
        return OK
    else:
        device = torch.device(args.device)
        if device.index is None:  # some of torch.cuda's calls take only an indexed device
            device = torch.device(device.type, torch.cuda.current_device())
    programs = _names(args.programs, QUICK_PROGRAMS, program_names(), args.quick, "program")
    steps = _names(args.steps, QUICK_STEPS, step_names(), args.quick, "step")
    every_eager = eager_step_names()
    quick_eager = QUICK_EAGER_STEPS + tuple(n for n in QUICK_HF_STEPS if n in every_eager)
    eager_steps = _names(args.eager_steps, quick_eager, every_eager, args.quick, "step")
    budget = args.time_budget if args.time_budget is not None else None if args.dry_run else GPU_TIME_BUDGET
    keep = args.keep
    if keep is None and device.type == "cuda":
        gpu = torch.cuda.get_device_name(device).replace("NVIDIA ", "").replace(" ", "-").lower()
        keep = REPO / "tests" / "data" / "gpu" / f"{time.strftime('%Y-%m-%d')}-{gpu}"
    outputs = [*args.output, *([keep / "table.json"] if keep is not None else [])]
    result = run(device, programs, steps, executors=args.executors, time_budget=budget or None,
                 outputs=outputs, eager_steps=eager_steps, keep=keep)
    print(report_text(result), end="")
    for path in outputs:
        write_output(result, path)
    return result.status


if __name__ == "__main__":
    sys.exit(main())
