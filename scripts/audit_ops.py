"""The op audit: every op call of the corpus's and the model zoo's traces,
and single-op programs over a grid of shapes, dtypes, operand layouts and
thread counts, measured call by call on the CPU against the runtime model
(python/peakmem/op_audit.py says how). Writes the table of docs/op-audit.md.

    .venv/bin/python scripts/audit_ops.py            # the full run (a long run: ~20 min on 2 cores)
    .venv/bin/python scripts/audit_ops.py --small    # one shape, float32, two layouts, 2 threads
    .venv/bin/python scripts/audit_ops.py --small --no-traces --out -   # the grid only, to stdout

The traces audited are the corpus's and the model zoo's, and those of the
distributed and DTensor corpora (tests/data/{distributed,dtensor}) for the
ranks in DISTRIBUTED_RANKS, each rank re-traced in its own process under
torch's fake process group (``--child CORPUS STRATEGY WS RANK`` prints that
rank's audits as JSON), as their generators trace them.

Exits 1 when an op outside peakmem.op_audit.KNOWN_GAPS is inexact.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# (corpus, strategy, world size, rank): a rank of every distributed strategy
# stored (the collectives and the sharded layers' ops), and of the DTensor
# programs at two world sizes (even and uneven shards).
DISTRIBUTED_RANKS = [("distributed", s, 2, 1) for s in ("fsdp-zero2", "ddp", "tp-column", "tp-row")] + [
    ("dtensor", "", 2, 1), ("dtensor", "", 4, 3)]


def rank_audits(corpus: str, strategy: str, world_size: int, rank: int) -> list[dict]:
    """In this process (a fresh one: it joins the fake process group): each
    trace of the rank audited call by call, as JSON-ready dicts."""
    import dataclasses

    from peakmem import op_audit

    sys.path.insert(0, str(REPO / "scripts"))
    if corpus == "distributed":
        import make_distributed_corpus

        traces = make_distributed_corpus.rank_traces(strategy, world_size, rank).items()
        named = [(make_distributed_corpus.entry_name(strategy, world_size, rank), k, t) for k, t in traces]
    else:
        import make_dtensor_corpus

        named = [(entry, convention, t) for entry, convention, t in make_dtensor_corpus.rank_traces(world_size, rank)]
    return [{"where": where, "kind": kind, **dataclasses.asdict(op_audit.audit_trace(t))} for where, kind, t in named]


def distributed_audits(corpus: str, strategy: str, world_size: int, rank: int) -> list:
    """rank_audits run in a child process: (where, kind, TraceAudit) each."""
    import json
    import subprocess

    from peakmem import op_audit

    env = dict(os.environ, PYTHONWARNINGS="ignore")
    done = subprocess.run([sys.executable, __file__, "--child", corpus, strategy, str(world_size), str(rank)],
                          check=True, env=env, capture_output=True, text=True)

    def call(c: dict) -> op_audit.CallAudit:
        return op_audit.CallAudit(c["op"], c["line"], c["source"], tuple(c["measured"]), tuple(c["predicted"]))

    return [(a["where"], a["kind"], op_audit.TraceAudit([call(c) for c in a["calls"]],
                                                        [call(c) for c in a["unattributed"]]))
            for a in json.loads(done.stdout.strip().splitlines()[-1])]


def main(argv: list[str]) -> int:  # the audit's steps in order, then its table
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", action="store_true", help="the CI grid: one shape, float32, two layouts, 2 threads")
    parser.add_argument("--no-traces", action="store_true", help="skip the corpus and zoo traces")
    parser.add_argument("--out", default=str(REPO / "docs" / "op-audit.md"), help="the table's file ('-': stdout)")
    if argv and argv[0] == "--child":
        import json

        corpus, strategy, ws, rank = argv[1:]
        print(json.dumps(rank_audits(corpus, strategy, int(ws), int(rank))))
        return 0
    args = parser.parse_args(argv)

    sys.path.insert(0, str(REPO / "scripts"))
    import make_corpus
    import torch

    from peakmem import op_audit

    tallies: dict[str, op_audit.OpTally] = {}
    errors: list[str] = []
    programs = ranks = 0
    if not args.no_traces:
        for d in make_corpus.program_dirs():
            traces = make_corpus.jit_traces(make_corpus.load_program(d))
            op_audit.tally(((d.name, k, op_audit.audit_trace(t)) for k, t in traces.items()), False, tallies)
            programs += 1
            print(f"traces: {d.name}", file=sys.stderr, flush=True)
        for corpus, strategy, ws, rank in DISTRIBUTED_RANKS:
            op_audit.tally(distributed_audits(corpus, strategy, ws, rank), False, tallies)
            ranks += 1
            print(f"traces: {corpus} {strategy} ws{ws} rank{rank}", file=sys.stderr, flush=True)
    shapes = op_audit.SMALL_SHAPES if args.small else op_audit.FULL_SHAPES
    layouts = ("contiguous", "transposed") if args.small else tuple(op_audit.LAYOUTS)
    threads = (2,) if args.small else (1, 2)
    cases = 0
    for case in op_audit.GRID:
        for shape in shapes:
            for dtype in case.dtypes[:1] if args.small else case.dtypes:
                for layout in (l for l in layouts if l in case.layouts):
                    for n in threads:
                        for r in op_audit.audit_program(case, shape, dtype, layout, n):
                            cases += 1
                            if r.error:
                                errors.append(f"{case.op} {r.case}: {r.error}")
                            else:
                                op_audit.tally([(f"{case.op} {r.case}", r.kind, r.audit)], True, tallies)
        print(f"grid: {case.op}", file=sys.stderr, flush=True)

    lines = [
        "# Op audit",
        "",
        "Every op call the runtime model meets, measured alone on the CPU: each call of",
        "every trace of the corpus and the model zoo (`tests/data/{corpus,zoo}`) and of",
        "a rank of each distributed and DTensor program (`tests/data/{distributed,dtensor}`,",
        "under torch's fake process group), and",
        "single-op programs over shapes, dtypes, operand layouts (contiguous, transposed,",
        "expanded, sliced) and thread counts, forward and backward. A call is exact when",
        "the bytes it leaves allocated and the highest it climbs inside the op (its",
        "outputs plus the scratch its kernel frees before returning) both equal the",
        "runtime model's (`python/peakmem/op_audit.py`).",
        "",
        f"Made by `scripts/audit_ops.py{' --small' if args.small else ''}{' --no-traces' if args.no_traces else ''}` "
        f"(torch {torch.__version__}, {programs} programs, {ranks} distributed and DTensor ranks, "
        f"{cases} grid traces).",
        "",
        "| op | rule | trace calls exact | grid calls exact |",
        "|---|---|---:|---:|",
    ]
    failed = []
    for op in sorted(tallies):
        t = tallies[op]
        rule = t.rule or "not in the op registry"
        lines.append(f"| `{op}` | {rule} | {t.trace_exact} / {t.trace_calls} | {t.grid_exact} / {t.grid_calls} |")
        if t.first_miss and op not in op_audit.KNOWN_GAPS:
            failed.append(op)
    lines += ["", "## Not exact", ""]
    for op in sorted(tallies):
        t = tallies[op]
        if t.first_miss:
            why = op_audit.KNOWN_GAPS.get(op, "not explained: a defect")
            lines.append(f"- `{op}` ({why}); first: {t.first_miss}")
    if errors:
        lines += ["", "## Cases PyTorch or Thunder reject", ""] + [f"- {e}" for e in errors]
    text = "\n".join(lines) + "\n"
    if args.out == "-":
        sys.stdout.write(text)
    else:
        Path(args.out).write_text(text)
    if failed:
        print(f"inexact ops outside the known gaps: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    os.environ.setdefault("ONEDNN_MAX_CPU_ISA", "AVX2")
    sys.exit(main(sys.argv[1:]))
