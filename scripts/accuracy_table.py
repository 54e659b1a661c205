#!/usr/bin/env python3
"""Prints the manual's accuracy tables (docs/manual.md): every corpus and model-zoo trace, measured vs predicted.

    .venv/bin/python scripts/accuracy_table.py            # print the table
    .venv/bin/python scripts/accuracy_table.py --check    # exit 1 if docs/manual.md differs

Measured numbers are the stored CPU measurements (tests/data/{corpus,zoo}/*/measured.json,
made by peakmem.measure); predictions are made now from the stored JSON traces.
Error = predicted - measured, in bytes. The zoo's table adds each model's
parameter count (its program.py's make_function(), built now).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import peakmem

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO / "tests" / "data" / "corpus"
ZOO = REPO / "tests" / "data" / "zoo"
BEGIN = "<!-- accuracy-table:begin (scripts/accuracy_table.py) -->"
END = "<!-- accuracy-table:end -->"


def rows(root: Path):
    for program in sorted(p.parent.name for p in root.glob("*/program.py")):
        measured = json.loads((root / program / "measured.json").read_text())
        for kind in ("fw", "bw"):
            path = root / program / f"{kind}.json"
            if not path.exists():
                continue
            m = measured[kind]
            # for the threads the measurement ran on (some kernels' scratch is per thread)
            r = peakmem.analyze(path, memory_model="runtime", torch_threads=measured["num_threads"])
            t = peakmem.analyze(path, memory_model="thunder")
            yield program, kind, m, r, t


def parameters(program: str) -> int:
    sys.path.insert(0, str(REPO / "scripts"))
    import make_corpus

    model = make_corpus.load_program(ZOO / program).make_function()
    return sum(p.numel() for p in model.parameters())


def table(root: Path = CORPUS) -> str:
    zoo = root == ZOO
    out = [
        ("| trace | parameters " if zoo else "| trace ")
        + "| measured peak / final | runtime peak / final | runtime error | thunder peak / final | thunder error |",
        "|---|---|---|---|---|---|" + ("---|" if zoo else ""),
    ]
    exact = total = 0
    for program, kind, m, r, t in rows(root):
        total += 1
        mp, mf = m["peak_bytes"], m["final_bytes"]
        re_ = (r.peak_bytes - mp, r.final_bytes - mf)
        te = (t.peak_bytes - mp, t.final_bytes - mf)
        exact += re_ == (0, 0)
        fmt = lambda e: "exact" if e == (0, 0) else f"{e[0]:+} / {e[1]:+}"
        params = f" {parameters(program):,} |" if zoo else ""
        out.append(
            f"| `{program}` {kind} |{params} {mp} / {mf} | {r.peak_bytes} / {r.final_bytes} | {fmt(re_)} "
            f"| {t.peak_bytes} / {t.final_bytes} | {fmt(te)} |"
        )
    out.append("")
    what = "model-zoo" if zoo else "corpus"
    out.append(f"runtime model: {exact} of {total} {what} traces exact (peak and final, to the byte).")
    return "\n".join(out)


def main() -> int:
    text = table(CORPUS) + "\n\n" + table(ZOO)
    if "--check" in sys.argv:
        readme = (REPO / "docs" / "manual.md").read_text()
        start, end = readme.find(BEGIN), readme.find(END)
        current = readme[start + len(BEGIN):end].strip() if start >= 0 and end > start else None
        if current != text.strip():
            print("docs/manual.md's accuracy table is out of date; run scripts/accuracy_table.py", file=sys.stderr)
            return 1
        return 0
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
