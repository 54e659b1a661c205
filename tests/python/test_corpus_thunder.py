"""peakmem's `thunder` model is a drop-in for Thunder's get_alloc_memory, on
every trace of the corpus (tests/data/corpus, made by scripts/make_corpus.py).

(a) live: each program is re-traced with thunder.jit now, and
    peakmem.thunder.get_alloc_memory(trace) must equal
    thunder.examine.memory_calculation.get_alloc_memory(trace): the peak and
    the whole breakdown, key order included.
(b) stored: the stored fw/bw trace text and JSON export, read back through
    peakmem.thunder.get_alloc_memory(path), must equal the stored
    thunder.json. Printed text does not type every output (multi-output
    calls such as `(t10,) = update_aliases((dst,))` have no type comment);
    where the reader rejects a text trace for that reason, the test checks
    that the name it names really has no type in the text.
(c) the stored trace text is what this Thunder prints for program.py today,
    so (b) tests current traces.
"""

from __future__ import annotations

import json
import re

import pytest

import peakmem
import peakmem.thunder
from conftest import corpus_programs, program_dir, venv_free

PROGRAMS = corpus_programs()
TRACES = [(p, k) for p in PROGRAMS for k in ("fw", "bw") if (program_dir(p) / f"{k}.trace").exists()]


def first_difference(got: dict, want: dict) -> str:
    g, w = list(got.items()), list(want.items())
    for i, (a, b) in enumerate(zip(g, w)):
        if a != b:
            return f"entry {i}: peakmem {a!r}, Thunder {b!r}"
    if len(g) != len(w):
        n = min(len(g), len(w))
        return f"entry {n}: peakmem {g[n:n + 1]!r}, Thunder {w[n:n + 1]!r}"
    return "none"


def assert_same(got: tuple[int, dict], want: tuple[int, dict], where: str) -> None:
    assert got[0] == want[0] and list(got[1].items()) == list(want[1].items()), (
        f"{where}: peakmem peak {got[0]}, Thunder peak {want[0]}; "
        f"first difference at {first_difference(got[1], want[1])}"
    )


def stored_estimate(program: str, kind: str) -> tuple[int, dict]:
    data = json.loads((program_dir(program) / "thunder.json").read_text())[kind]
    return data["peak"], {k: v for k, v in data["breakdown"]}


def test_corpus_size():
    # At least 20 traces, forward and backward counted apart.
    assert len(TRACES) >= 20
    assert sum(k == "bw" for _, k in TRACES) >= 10


@pytest.mark.parametrize("program", PROGRAMS)
def test_live_trace_matches_thunder(program, live_corpus, thunder):
    from thunder.examine.memory_calculation import get_alloc_memory

    traces = live_corpus(program)
    for kind, trace in traces.items():
        assert_same(peakmem.thunder.get_alloc_memory(trace), get_alloc_memory(trace), f"{program}/{kind} (live)")


@pytest.mark.parametrize("program", PROGRAMS)
def test_live_drop_in_agrees_with_full_read_and_second_call(program, live_corpus, thunder):
    # The drop-in reads the TraceCtx in the live reader's lean form (a call's
    # arguments as Thunder's flat_proxy_args; attributes gathered from
    # CPython's storage a block at a time): it must agree with Thunder, with
    # the thunder model on the full form (analyze with steps), and again on a
    # second call (Thunder's cached properties move bound-symbol attributes
    # into a __dict__ once used).
    from thunder.examine.memory_calculation import get_alloc_memory

    for kind, trace in live_corpus(program).items():
        where = f"{program}/{kind} (drop-in)"
        got = peakmem.thunder.get_alloc_memory(trace)
        assert_same(got, get_alloc_memory(trace), where)
        full = peakmem._core.analyze_live(trace, "thunder", "auto", True, steps=True)
        assert_same(got, (full.peak_bytes, full.breakdown), f"{where} vs the full read")
        assert_same(peakmem.thunder.get_alloc_memory(trace), got, f"{where}, second call")


@pytest.mark.parametrize("program", PROGRAMS[:4])
def test_live_reader_reads_every_attribute_layout(program, make_corpus, thunder):
    # The live reader reads bound symbols' and tensor proxies' attributes from
    # CPython 3.11's storage: an instance's values array, a __dict__ that
    # still shares the type's keys, or one with its own table (whose entries
    # it expects in the type's order, and looks up otherwise). Traced afresh
    # (the objects are changed here), with every layout mixed in one trace:
    # the drop-in must agree with Thunder on the same trace.
    from thunder.core.proxies import TensorProxy
    from thunder.examine.memory_calculation import get_alloc_memory

    traces = make_corpus.jit_traces(make_corpus.load_program(program_dir(program)))
    for kind, trace in traces.items():
        for i, bsym in enumerate(trace.bound_symbols):
            outs = [bsym.output] if isinstance(bsym.output, TensorProxy) else []
            for obj in [bsym] + outs:
                if i % 3 == 0:
                    vars(obj)  # a __dict__ made (sharing the type's keys, unless made before)
                elif i % 3 == 1:
                    d = vars(obj)  # the dict rebuilt in reverse order: its own table, other entries in the slots
                    items = list(d.items())
                    d.clear()
                    d.update(reversed(items))
        where = f"{program}/{kind} (attribute layouts)"
        assert_same(peakmem.thunder.get_alloc_memory(trace), get_alloc_memory(trace), where)


@pytest.mark.parametrize("program, kind", TRACES)
def test_stored_json_matches_thunder(program, kind):
    path = program_dir(program) / f"{kind}.json"
    assert_same(peakmem.thunder.get_alloc_memory(str(path)), stored_estimate(program, kind), str(path))


@pytest.mark.parametrize("program, kind", TRACES)
def test_stored_text_matches_thunder(program, kind):
    path = program_dir(program) / f"{kind}.trace"
    try:
        got = peakmem.thunder.get_alloc_memory(str(path))
    except peakmem.TraceError as err:
        m = re.search(r"cannot determine the size of '([^']+)'", err.message)
        if m is None:
            raise
        # The reader may only give up on a name the text leaves untyped: no
        # `# name: "..."` type comment anywhere in the trace.
        name = m.group(1)
        text = path.read_text()
        assert not re.search(rf'#\s*{re.escape(name)}: "', text), f"{path}: {name} is typed, yet: {err}"
        assert err.line_text.strip() and name in err.line_text
        return
    assert_same(got, stored_estimate(program, kind), str(path))


@pytest.mark.parametrize("program", PROGRAMS)
def test_stored_traces_are_current(program, live_corpus, make_corpus):
    traces = live_corpus(program)
    stored = sorted(k for k in ("fw", "bw") if (program_dir(program) / f"{k}.trace").exists())
    assert sorted(traces) == stored
    for kind, trace in traces.items():
        assert venv_free(make_corpus.trace_text(trace)) == venv_free(
            (program_dir(program) / f"{kind}.trace").read_text()
        ), (
            f"{program}/{kind}.trace is stale: rerun scripts/make_corpus.py"
        )
        assert peakmem.to_json_export(trace) == (program_dir(program) / f"{kind}.json").read_text(), (
            f"{program}/{kind}.json is stale: rerun scripts/make_corpus.py"
        )
