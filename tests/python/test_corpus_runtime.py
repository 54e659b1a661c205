"""The `runtime` model against measurement, on every trace of the corpus and
of the model zoo.

For each stored trace (tests/data/{corpus,zoo}/<program>/{fw,bw}.{trace,json}) the
runtime model's peak and final bytes must equal the CPU numbers measured by
`peakmem.measure` (stored in measured.json, see tests/data/corpus/README.md),
from the printed text and from the JSON export alike; and the live trace,
re-traced now, must predict what `peakmem.measure` measures now.

Every exception is listed in EXCEPTIONS with the measured difference and its
reason, and its test fails when the difference changes.
"""

from __future__ import annotations

import json

import pytest

import peakmem
from conftest import corpus_programs, program_dir

PROGRAMS = corpus_programs()
TRACES = [(p, k) for p in PROGRAMS for k in ("fw", "bw") if (program_dir(p) / f"{k}.trace").exists()]

# (program, kind, form) -> (measured - predicted peak, measured - predicted final, reason).
# Empty: every trace is exact.
EXCEPTIONS: dict[tuple[str, str, str], tuple[int, int, str]] = {}


def measured(program: str, key: str) -> tuple[int, int]:
    m = json.loads((program_dir(program) / "measured.json").read_text())[key]
    return m["peak_bytes"], m["final_bytes"]


@pytest.mark.parametrize("form", ["trace", "json"])
@pytest.mark.parametrize("program,kind", TRACES, ids=[f"{p}-{k}" for p, k in TRACES])
def test_stored_trace_matches_measurement(program, kind, form):
    # Predicted for the threads the measurement ran on (a kernel's scratch can be per thread).
    threads = json.loads((program_dir(program) / "measured.json").read_text())["num_threads"]
    report = peakmem.analyze(program_dir(program) / f"{kind}.{form}", memory_model="runtime", torch_threads=threads)
    want = measured(program, kind)
    got = (report.peak_bytes, report.final_bytes)
    exception = EXCEPTIONS.get((program, kind, form))
    if exception is not None:
        assert (want[0] - got[0], want[1] - got[1]) == exception[:2], exception[2]
    else:
        assert got == want, f"{program} {kind}.{form}: predicted {got}, measured {want}"
    # The report is internally consistent: the peak is the highest step peak
    # (or the inputs alone), and no step ends above its own peak.
    assert all(s.live_bytes <= s.peak_bytes <= report.peak_bytes for s in report.statements)
    assert report.tensor_peak_bytes <= report.peak_bytes


@pytest.mark.parametrize("program", PROGRAMS)
def test_live_trace_matches_fresh_measurement(program, live_corpus):
    traces = live_corpus(program)
    for kind, trace in traces.items():
        if trace is None:
            continue
        m = peakmem.measure(trace)
        report = peakmem.analyze(trace, memory_model="runtime")
        exception = EXCEPTIONS.get((program, kind, "trace"))
        if exception is not None:
            got = (m.peak_bytes - report.peak_bytes, m.final_bytes - report.final_bytes)
            assert got == exception[:2], exception[2]
            continue
        assert (report.peak_bytes, report.final_bytes) == (m.peak_bytes, m.final_bytes), (
            f"{program} {kind}: predicted {(report.peak_bytes, report.final_bytes)}, "
            f"measured {(m.peak_bytes, m.final_bytes)}"
        )
