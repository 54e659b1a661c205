"""Pricing a trace with the CUDA caching allocator (`allocator="cuda-caching"`).

The allocator model's own rules are unit-tested in C++ against hand-derived
sequences, PyTorch's test numbers and an independent reference model
(src/allocators/*_test.cc). Here: the Python API and the CLI carry its
figures, and on every corpus trace the allocated bytes agree with a
derivation from the allocation events alone. Every corpus storage is a
small-pool request (at most 1 MiB: checked), and a small-pool block is
always split to exactly its rounded size (the remainder is a multiple of
512, so either 0 or >= 512: should_split), so the allocated bytes at any
moment are the sum over live storages of their size rounded up to 512
(round_size), zero-byte storages taking no block. The events are the
snapshot writer's alloc / free_completed entries, in order.
"""

from __future__ import annotations

import pickle
import subprocess
from pathlib import Path

import pytest

import peakmem
from conftest import checked_json, cli

REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO / "tests" / "data" / "corpus"
TRACES = sorted(CORPUS.glob("*/*.trace"))
REFERENCE = REPO / "tests" / "data" / "nvfusion_broadcast_fw.trace"
SMALL_SIZE = 1 << 20  # kSmallSize


def test_reference_trace_in_python():
    # a, b, t14, t15: 16 bytes each on cuda:0 (t15 a stride-0 broadcast), all
    # held to the end; each a 512-byte block of one 2 MiB small segment.
    r = peakmem.analyze(REFERENCE, allocator="cuda-caching")
    assert r.peak_bytes == 64
    a = r.allocator
    assert a["device"] == "cuda:0"
    assert (a["allocated_peak_bytes"], a["allocated_final_bytes"]) == (2048, 2048)
    assert (a["reserved_peak_bytes"], a["reserved_final_bytes"]) == (2 << 20, 2 << 20)
    assert a["fits"] is None and a["out_of_memory"] is None
    assert r.allocator is a, "converted once, then the same dict"
    assert checked_json(r.to_json())["allocator"] == a


def test_device_memory_in_python():
    r = peakmem.analyze(REFERENCE, allocator="cuda-caching", device_memory="1 MiB")
    oom = r.allocator["out_of_memory"]
    assert r.allocator["fits"] is False
    assert (oom["step"], oom["requested_bytes"], oom["segment_bytes"]) == (-1, 16, 2 << 20)
    fits = peakmem.analyze(REFERENCE.read_text(), allocator="cuda-caching", device_memory="3MiB")
    assert fits.allocator["fits"] is True
    assert fits.allocator["headroom_bytes"] == (3 << 20) - (2 << 20)


def test_requested_has_no_allocator_section():
    r = peakmem.analyze(REFERENCE)
    assert r.allocator is None
    assert "allocator" not in checked_json(r.to_json())


def test_bad_allocator_settings_are_value_errors():
    with pytest.raises(ValueError, match="unknown allocator 'cuda'"):
        peakmem.analyze(REFERENCE, allocator="cuda")
    with pytest.raises(ValueError, match="device_memory: cannot read the size '80XB'"):
        peakmem.analyze(REFERENCE, allocator="cuda-caching", device_memory="80XB")
    with pytest.raises(ValueError, match="alloc_conf: .*max_split_size_mb"):
        peakmem.analyze(REFERENCE, allocator="cuda-caching", alloc_conf="max_split_size_mb:5")
    with pytest.raises(ValueError, match="need the cuda-caching allocator"):
        peakmem.analyze(REFERENCE, device_memory="80GiB")


def round_size(size: int) -> int:
    return max(512, (size + 511) // 512 * 512)


@pytest.mark.parametrize("trace", TRACES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_allocated_bytes_follow_from_the_events(trace: Path, tmp_path: Path):
    snapshot_path = tmp_path / "s.pickle"
    written = subprocess.run(
        [cli(), "analyze", str(trace), "--format", "snapshot", "-o", str(snapshot_path)],
        capture_output=True, check=False)
    assert written.returncode == 0, written.stderr.decode()
    with open(snapshot_path, "rb") as f:
        snapshot = pickle.load(f)
    live = peak = 0
    for entries in snapshot["device_traces"]:
        for e in entries:
            if e["size"] == 0 or e["action"] not in ("alloc", "free_completed"):
                continue
            assert e["size"] <= SMALL_SIZE, "the derivation above holds for small requests only"
            live += round_size(e["size"]) if e["action"] == "alloc" else -round_size(e["size"])
            peak = max(peak, live)

    priced = subprocess.run(
        [cli(), "analyze", str(trace), "--allocator", "cuda-caching", "--format", "json"],
        capture_output=True, check=False)
    assert priced.returncode == 0, priced.stderr.decode()
    report = checked_json(priced.stdout)
    a = report["allocator"]
    assert a["device"] == "all"  # the corpus runs on the CPU
    assert a["requested_peak_bytes"] == report["peak_bytes"]
    assert a["allocated_peak_bytes"] == peak
    assert a["allocated_final_bytes"] == live
    # Reserved: whole 2 MiB small segments, at least enough for the blocks.
    assert a["reserved_peak_bytes"] % (2 << 20) == 0
    assert a["reserved_peak_bytes"] >= a["allocated_peak_bytes"]
    # Python reads the same.
    assert peakmem.analyze(trace, allocator="cuda-caching").allocator == a
