"""Report.statements, .breakdown and .live_at_peak: their values, and their cost per read.

The trace is a chain of `neg`s on a 16-byte tensor (f32[4]), each
intermediate deleted once the next is made; the caller holds the argument
`x`. By hand, the runtime model's live bytes are: 16 (x) before any
statement; 32 after the first `neg`; then 48 after each later `neg` and 32
after each `del`; 32 at the return (x and the returned tensor). A step's peak
is the higher of the live bytes before and after it (the `del`'s tensor is
alive until the `del`).

A table is made into Python objects once per report: reading `statements[i]` in a
loop must cost next to nothing once the table was read, not a conversion of
every row per read (which made 100 reads on a 10^5-statement trace take
seconds). The test compares, in one run, 1,000 indexed reads against one full
conversion, so that the machine's speed cancels out.
"""

from __future__ import annotations

import time

import peakmem

TENSOR = 16  # f32[4]


def chain_trace(n: int) -> str:
    lines = [
        "import torch",
        "",
        "@torch.no_grad()",
        "def computation(x):",
        '  # x: "cpu f32[4]"',
        '  t0 = torch.neg(x)  # t0: "cpu f32[4]"',
    ]
    for i in range(1, n):
        lines.append(f'  t{i} = torch.neg(t{i - 1})  # t{i}: "cpu f32[4]"')
        lines.append(f"  del t{i - 1}")
    lines.append(f"  return t{n - 1}")
    return "\n".join(lines) + "\n"


def expected_steps(n: int) -> list[tuple[int, int, str, str, int, int, int]]:
    """(index, line, op, source, delta, live, peak) per statement, by hand."""
    first_line = 6  # the line of `t0 = torch.neg(x)`
    rows = [(0, first_line, "neg", 't0 = torch.neg(x)  # t0: "cpu f32[4]"', TENSOR, 2 * TENSOR, 2 * TENSOR)]
    for i in range(1, n):
        index = 2 * i - 1
        rows.append((index, first_line + index, "neg", f't{i} = torch.neg(t{i - 1})  # t{i}: "cpu f32[4]"',
                     TENSOR, 3 * TENSOR, 3 * TENSOR))
        rows.append((index + 1, first_line + index + 1, "python_del", f"del t{i - 1}",
                     -TENSOR, 2 * TENSOR, 3 * TENSOR))
    index = 2 * n - 1
    rows.append((index, first_line + index, "python_return", f"return t{n - 1}", 0, 2 * TENSOR, 2 * TENSOR))
    return rows


def expected_breakdown(n: int) -> list[tuple[str, int]]:
    items = [("argument x", TENSOR), ("neg t0", TENSOR)]
    for i in range(1, n):
        items += [(f"neg t{i}", TENSOR), (f"python_del t{i - 1}", -TENSOR)]
    return items


def row(s) -> tuple:
    return (s.index, s.line, s.op, s.source, s.delta_bytes, s.live_bytes, s.peak_bytes)


def test_tables_hold_the_hand_derived_values():
    n = 40
    report = peakmem.analyze(chain_trace(n))
    assert (report.peak_bytes, report.final_bytes) == (3 * TENSOR, 2 * TENSOR)
    want = expected_steps(n)
    assert [row(s) for s in report.statements] == want
    # Read again, by index, and after the other tables: the same values.
    assert [row(report.statements[i]) for i in range(len(want))] == want
    assert list(report.breakdown.items()) == expected_breakdown(n)
    assert list(report.breakdown.items()) == expected_breakdown(n)
    # At the peak (the first `neg` after t0): x, t0 and t1.
    live = [(t.name, t.bytes, t.role) for t in report.live_at_peak]
    assert sorted(live) == [("t0", TENSOR, "intermediate"), ("t1", TENSOR, "intermediate"),
                            ("x", TENSOR, "argument")]
    # The tables outlive the report they came from.
    steps, breakdown = report.statements, report.breakdown
    del report
    assert [row(s) for s in steps] == want
    assert list(breakdown.items()) == expected_breakdown(n)


def test_indexed_reads_do_not_convert_the_whole_table():
    n = 50_000  # 100,000 statements
    text = chain_trace(n)
    want = expected_steps(n)
    indices = [(k * 7919) % len(want) for k in range(1000)]

    report = peakmem.analyze(text)
    start = time.perf_counter()
    steps = report.statements  # one full conversion
    convert = time.perf_counter() - start
    assert len(steps) == len(want)

    start = time.perf_counter()
    got = [report.statements[i] for i in indices]
    reads = time.perf_counter() - start
    assert [row(s) for s in got] == [want[i] for i in indices]
    # Converting per read would make this ~1000 (one conversion per read).
    assert reads < convert, f"1000 reads {reads:.4f} s, one conversion {convert:.4f} s"

    report = peakmem.analyze(text)
    start = time.perf_counter()
    breakdown = report.breakdown
    convert = time.perf_counter() - start
    items = expected_breakdown(n)
    assert len(breakdown) == len(items)
    keys = [items[i % len(items)][0] for i in indices]
    start = time.perf_counter()
    values = [report.breakdown[k] for k in keys]
    reads = time.perf_counter() - start
    assert values == [items[i % len(items)][1] for i in indices]
    assert reads < convert, f"1000 reads {reads:.4f} s, one conversion {convert:.4f} s"


def test_the_old_spellings_warn_and_give_the_same_values():
    # Report.steps and .peak_step are spelled .statements and .peak_statement
    # (a "step" is a training iteration); the old names work for one release.
    import pytest

    report = peakmem.analyze(chain_trace(3))
    with pytest.warns(DeprecationWarning, match="Report.steps is deprecated .*: Report.statements") as caught:
        old = report.steps
    assert caught[0].filename == __file__  # at the user's line
    assert old is report.statements
    with pytest.warns(DeprecationWarning, match="Report.peak_step is deprecated .*: Report.peak_statement"):
        assert report.peak_step == report.peak_statement == 1  # the second `neg`, by hand
    with pytest.warns(DeprecationWarning, match="peakmem.Step is deprecated .*: peakmem.Statement"):
        assert peakmem.Step is peakmem.Statement
