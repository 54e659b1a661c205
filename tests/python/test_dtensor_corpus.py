"""DTensor programs per rank (tests/data/dtensor, made by
scripts/make_dtensor_corpus.py under the fake process group): Thunder prints
a DTensor's global shape, mesh and placements; peakmem reads the shard the
given rank holds, and predicts what that rank measured, to the byte.

Forward traces, and backward traces (`-bw`) called as Thunder's autograd
calls them. Operands placed differently (`mixed-placements`: Shard(0) times
Replicate) make DTensor copy the replicated operand's local chunk inside the
op (torch/distributed/tensor/placement_types.py, Replicate -> Shard), which
the runtime model counts; other mixes are diagnosed (below).
"""

from __future__ import annotations

import json

import pytest

import peakmem
from conftest import REPO

DTENSOR = REPO / "tests" / "data" / "dtensor"
MEASURED = json.loads((DTENSOR / "measured.json").read_text())["entries"]
ENTRIES = sorted(MEASURED)


@pytest.mark.parametrize("entry", ENTRIES)
def test_each_rank_is_predicted_to_the_byte(entry):
    want = MEASURED[entry]
    report = peakmem.analyze(DTENSOR / f"{entry}.trace", rank=want["rank"])
    assert report.convention == want["convention"]
    assert (report.peak_bytes, report.final_bytes) == (want["peak_bytes"], want["final_bytes"])
    assert not report.diagnostics


def test_the_replicated_operands_chunk_is_what_mixed_placements_add():
    # Shard(0) x Replicate on 2 ranks, [16, 16] f32: a, b's local 8 x 16 and
    # 16 x 16 (512 + 1024), the result's shard 512, and the chunk of b copied
    # to Shard(0), 512, alive with the result: peak 2560, final 2048.
    report = peakmem.analyze(DTENSOR / "mixed-placements-ws2-rank0.trace")
    assert (report.peak_bytes, report.final_bytes) == (2560, 2048)
    assert report.tensor_peak_bytes == 2048  # without the op's scratch


def test_a_mix_peakmem_does_not_size_is_diagnosed():
    # Shard(0) x Shard(1): DTensor all-gathers one operand first.
    text = (DTENSOR / "mixed-placements-ws2-rank0.trace").read_text().replace(
        "placements=(Replicate(),)", "placements=(Shard(dim=1),)")
    report = peakmem.analyze(text)
    (diagnostic,) = [str(d) for d in report.diagnostics]
    assert "placed differently" in diagnostic and "Shard(dim=1)" in diagnostic and "does not model" in diagnostic


def test_uneven_shards_differ_by_rank():
    # exp(a * b) on [10, 16] f32 split in rows over 4 ranks: torch.chunk
    # gives 3, 3, 3, 1 rows. Rank 0: a, b, t = a * b and exp(t), 3 * 16 * 4
    # = 192 bytes each, all four alive when exp returns (peak 768); `del t`
    # leaves a, b and the result (final 576). Rank 3: 64 bytes each.
    trace = DTENSOR / "exp-mul-uneven-ws4-rank0.trace"
    assert trace.read_text() == (DTENSOR / "exp-mul-uneven-ws4-rank3.trace").read_text()
    r0 = peakmem.analyze(trace, rank=0)
    r3 = peakmem.analyze(trace, rank=3)
    assert (r0.peak_bytes, r0.final_bytes) == (768, 576)
    assert (r3.peak_bytes, r3.final_bytes) == (256, 192)


def test_a_rank_outside_the_mesh_is_named_with_the_value_and_line():
    with pytest.raises(peakmem.TraceError) as e:
        peakmem.analyze(DTENSOR / "mul-shard0-ws2-rank0.trace", rank=2)
    message = str(e.value)
    assert "rank 2 is not in its mesh of 2 ranks" in message
    assert "'a'" in message or "'b'" in message


def test_an_older_dtensor_type_without_mesh_is_an_error_naming_the_value():
    text = (DTENSOR / "mul-shard0-ws2-rank0.trace").read_text()
    old = text.replace(" mesh=DeviceMesh((2,), 'cpu', stride=(1,)), placements=(Shard(dim=0),)", "")
    assert old != text
    with pytest.raises(peakmem.TraceError, match="names no mesh and placements"):
        peakmem.analyze(old)


@pytest.mark.parametrize("entry", [e for e in ENTRIES if e.startswith(("mul-shard0-", "exp-mul-uneven-"))])
def test_an_older_printers_trace_with_its_layout_given_is_the_measured_rank(entry):
    # The older printer writes `DTensor cpu f32[10, 16]` and no layout: the
    # same trace with every layout removed, read with the one layout its
    # values share given, is the rank measured.
    import re

    want = MEASURED[entry]
    text = (DTENSOR / f"{entry}.trace").read_text()
    layouts = set(re.findall(r'(?<=\]) mesh=DeviceMesh\(.*?\), placements=\(.*?\)(?=")', text))
    assert len(layouts) == 1, layouts
    (layout,) = layouts
    old = text.replace(layout, "")
    assert "mesh=" not in old
    report = peakmem.analyze(old, rank=want["rank"], dtensor_layout=layout)
    assert (report.peak_bytes, report.final_bytes) == (want["peak_bytes"], want["final_bytes"])


def test_a_rank_retraced_and_measured_now_matches_the_corpus(tmp_path):
    import subprocess
    import sys

    from conftest import venv_free

    done = subprocess.run([sys.executable, str(REPO / "scripts" / "make_dtensor_corpus.py"), "--child", "4", "3",
                           str(tmp_path)], check=True, capture_output=True, text=True)
    now = json.loads(done.stdout.strip().splitlines()[-1])
    assert sorted(now) == sorted(e for e in ENTRIES if "-ws4-rank3" in e)
    for entry, numbers in now.items():
        assert venv_free((tmp_path / f"{entry}.trace").read_text()) == venv_free((DTENSOR / f"{entry}.trace").read_text())
        assert numbers == MEASURED[entry]
        report = peakmem.analyze(tmp_path / f"{entry}.trace", rank=3)
        assert (report.peak_bytes, report.final_bytes) == (numbers["peak_bytes"], numbers["final_bytes"])
