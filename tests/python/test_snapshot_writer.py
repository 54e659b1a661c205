"""The CLI's `--format snapshot` on the corpus, read by PyTorch's own tools.

For every corpus trace, `peakmem analyze TRACE --format snapshot -o FILE`
writes the pickle torch.cuda.memory._dump_snapshot() writes. It must load
with `pickle`, torch.cuda._memory_viz's text tools must run on it, and its
allocation entries, summed per step (time_us is the step + 1, 0 for the
arguments), must give the report's live bytes after every step
(`--format json` of the same run; those steps are checked against
measurement in test_corpus_runtime.py).

The CLI is $PEAKMEM_CLI, or build/peakmem in the checkout.
"""

from __future__ import annotations

import json
import pickle
import subprocess
from collections import defaultdict
from pathlib import Path

import pytest

from conftest import checked_json, cli

REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO / "tests" / "data" / "corpus"
TRACES = sorted(CORPUS.glob("*/*.trace"))


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([cli(), *args], capture_output=True, check=False)


def test_corpus_is_there():
    assert len(TRACES) >= 30


@pytest.mark.parametrize("trace", TRACES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_snapshot_of_corpus_trace(trace: Path, tmp_path: Path):
    from torch.cuda import _memory_viz

    out = tmp_path / "snapshot.pickle"
    written = run("analyze", str(trace), "--format", "snapshot", "-o", str(out))
    assert written.returncode == 0, written.stderr.decode()
    reported = run("analyze", str(trace), "--format", "json")
    assert reported.returncode == 0, reported.stderr.decode()
    report = checked_json(reported.stdout)

    with open(out, "rb") as f:
        snapshot = pickle.load(f)
    assert set(snapshot) >= {"segments", "device_traces"}

    # PyTorch's text views of a snapshot (the flamegraph ones with their
    # lines returned as they are, not handed to the flamegraph script).
    _memory_viz.trace(snapshot)
    _memory_viz.segsum(snapshot)
    _memory_viz.segments(snapshot, format_flamegraph=lambda lines: lines)
    _memory_viz.memory(snapshot, format_flamegraph=lambda lines: lines)
    assert "snapshot.pickle" in _memory_viz.trace_plot(snapshot)

    # Live bytes per step from the entries: allocs add, completed frees take away.
    delta = defaultdict(int)
    for entries in snapshot["device_traces"]:
        for e in entries:
            assert e["frames"] and {"filename", "line", "name"} <= set(e["frames"][0])
            if e["action"] == "alloc":
                delta[e["time_us"]] += e["size"]
            elif e["action"] == "free_completed":
                delta[e["time_us"]] -= e["size"]
    steps = report["steps"]
    assert steps, "the report has no steps"
    assert max(delta, default=0) <= len(steps)
    live = delta[0]
    assert live == steps[0]["live_bytes"] - steps[0]["delta_bytes"], "before the first statement"
    for step in steps:
        live += delta[step["index"] + 1]
        assert live == step["live_bytes"], f"after step {step['index']} ({step['source']})"

    # Each entry's frame names the statement's op and line.
    by_step = {s["index"] + 1: (s["op"], s["line"]) for s in steps}
    for entries in snapshot["device_traces"]:
        for e in entries:
            if e["time_us"] > 0:
                frame = e["frames"][0]
                assert (frame["name"], frame["line"]) == by_step[e["time_us"]]


@pytest.mark.parametrize("trace", TRACES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_snapshot_with_the_cuda_caching_allocator(trace: Path, tmp_path: Path):
    """With --allocator cuda-caching the snapshot is the allocator model's:
    its segments at the end sum to the reserved and allocated bytes the JSON
    report gives, and its trace, replayed, reaches the reported reserved and
    requested peaks and ends at the reported final bytes."""
    from torch.cuda import _memory_viz

    out = tmp_path / "snapshot.pickle"
    priced = ("--allocator", "cuda-caching")
    written = run("analyze", str(trace), "--format", "snapshot", "-o", str(out), *priced)
    assert written.returncode == 0, written.stderr.decode()
    reported = run("analyze", str(trace), "--format", "json", *priced)
    allocator = checked_json(reported.stdout)["allocator"]
    with open(out, "rb") as f:
        snapshot = pickle.load(f)
    _memory_viz.segsum(snapshot)
    _memory_viz.segments(snapshot, format_flamegraph=lambda lines: lines)
    _memory_viz.memory(snapshot, format_flamegraph=lambda lines: lines)
    _memory_viz.trace(snapshot)

    segments = snapshot["segments"]
    assert sum(s["total_size"] for s in segments) == allocator["reserved_final_bytes"]
    assert sum(s["allocated_size"] for s in segments) == allocator["allocated_final_bytes"]
    for s in segments:
        assert sum(b["size"] for b in s["blocks"]) == s["total_size"]
        assert [b["address"] for b in s["blocks"]] == sorted(b["address"] for b in s["blocks"])

    reserved = requested = reserved_peak = requested_peak = 0
    for entries in snapshot["device_traces"]:
        for e in entries:
            sign = {"segment_alloc": 1, "segment_free": -1}.get(e["action"], 0)
            reserved += sign * e["size"]
            sign = {"alloc": 1, "free_completed": -1}.get(e["action"], 0)
            requested += sign * e["size"]
            reserved_peak, requested_peak = max(reserved_peak, reserved), max(requested_peak, requested)
    assert (reserved, reserved_peak) == (allocator["reserved_final_bytes"], allocator["reserved_peak_bytes"])
    assert (requested, requested_peak) == (allocator["requested_final_bytes"], allocator["requested_peak_bytes"])


def test_snapshot_shows_where_the_allocator_runs_out(tmp_path: Path):
    trace = CORPUS / "llama_block" / "bw.trace"
    out = tmp_path / "snapshot.pickle"
    small = ("--allocator", "cuda-caching", "--device-memory", "1MiB")  # below one 2 MiB segment
    assert run("analyze", str(trace), "--format", "snapshot", "-o", str(out), *small).returncode == 0
    allocator = checked_json(run("analyze", str(trace), "--format", "json", *small).stdout)["allocator"]
    assert allocator["fits"] is False
    with open(out, "rb") as f:
        entries = [e for t in pickle.load(f)["device_traces"] for e in t]
    ooms = [e for e in entries if e["action"] == "oom"]
    assert ooms and ooms[0]["size"] == allocator["out_of_memory"]["rounded_bytes"]
    assert ooms[0]["time_us"] == allocator["out_of_memory"]["step"] + 1
