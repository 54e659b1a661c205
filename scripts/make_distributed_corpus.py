"""Regenerates peakmem's distributed corpus: per-rank Thunder traces, measured.

Run from anywhere (CPU only, a few minutes; one process per rank):

    .venv/bin/python scripts/make_distributed_corpus.py

Each entry is one rank of one strategy on one world size, traced and run in
its own process under torch's fake process group
(``torch.testing._internal.distributed.fake_pg``): the process is rank r of
a world of W ranks, collectives return at once without moving data, and
everything rank r allocates is allocated for real, so its memory is
measured exactly as a single-process trace's is. The program and the
strategies are in ``tests/data/distributed/program.py``; the layout is as in
the single-process corpus (tests/data/corpus/README.md), one directory per
entry, ``<strategy>-ws<W>-rank<r>``:

    fw.trace, bw.trace, fw.json, bw.json, thunder.json, measured.json

``measured.json`` also records the world size and the rank. Strategies whose
traces Thunder prints identically to another's (FSDP's ZeRO-3 and bucketing
strategies in lightning-thunder 0.2.6) are not stored again:
``equivalent.json`` lists each with the entry its traces equal, and the
script fails if a trace differs from its stored twin without an entry of
its own (add the strategy to STORED then).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_corpus  # noqa: E402  (the single-process corpus's helpers)

REPO = make_corpus.REPO
CORPUS = REPO / "tests" / "data" / "distributed"
WORLD_SIZES = (2, 4, 8)
# Strategies stored as entries; every other strategy in program.STRATEGIES
# must print the same traces as the stored one it names.
STORED = ("fsdp-zero2", "ddp", "tp-column", "tp-row")
EQUIVALENT_TO = {
    "fsdp-zero3": "fsdp-zero2",
    "fsdp-zero2-layer": "fsdp-zero2",
    "fsdp-zero2-block": "fsdp-zero2",
    "fsdp-zero3-layer": "fsdp-zero2",
    "fsdp-zero3-block": "fsdp-zero2",
}


def entry_name(strategy: str, world_size: int, rank: int) -> str:
    return f"{strategy}-ws{world_size}-rank{rank}"


def ranks(world_size: int) -> tuple[int, ...]:
    return (0, world_size - 1)


def load_program():
    return make_corpus.load_module(CORPUS / "program.py", "tests/data/distributed/program.py", "peakmem_distributed")


def rank_traces(strategy: str, world_size: int, rank: int) -> dict[str, Any]:
    """In this process: rank `rank` of `world_size` under the fake process
    group; the strategy's forward and backward execution traces."""
    import torch
    import torch.distributed as dist
    from torch.testing._internal.distributed.fake_pg import FakeStore

    thunder = make_corpus.import_thunder()
    dist.init_process_group("fake", rank=rank, world_size=world_size, store=FakeStore())
    program = load_program()
    model = program.STRATEGIES[strategy](thunder.jit(program.make_model()), torch.device("cpu"))
    out = model(*program.make_inputs())
    out.backward(torch.ones_like(out))
    return {"fw": thunder.last_traces(model)[-1], "bw": thunder.last_backward_traces(model)[-1]}


def write_entry(strategy: str, world_size: int, rank: int, directory: Path) -> None:
    import peakmem
    import torch

    traces = rank_traces(strategy, world_size, rank)
    directory.mkdir(parents=True, exist_ok=True)
    measured: dict[str, Any] = {
        "versions": make_corpus.versions(),
        "device": "cpu",
        "num_threads": torch.get_num_threads(),
        "world_size": world_size,
        "rank": rank,
        "strategy": strategy,
    }
    estimates: dict[str, Any] = {}
    for kind, trc in traces.items():
        (directory / f"{kind}.trace").write_text(make_corpus.trace_text(trc))
        (directory / f"{kind}.json").write_text(peakmem.to_json_export(trc))
        estimates[kind] = make_corpus.thunder_estimate(trc)
        measured[kind] = make_corpus.measure_trace(trc)
    (directory / "thunder.json").write_text(make_corpus.dump_json(estimates))
    (directory / "measured.json").write_text(make_corpus.dump_json(measured))


def traces_only(strategy: str, world_size: int, rank: int, directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for kind, trc in rank_traces(strategy, world_size, rank).items():
        (directory / f"{kind}.trace").write_text(make_corpus.trace_text(trc))


def run_child(*args: str) -> None:
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    subprocess.run([sys.executable, __file__, "--child", *args], check=True, env=env)


def main(argv: list[str]) -> int:
    if argv and argv[0] == "--child":
        mode, strategy, world_size, rank, directory = argv[1:]
        job = write_entry if mode == "entry" else traces_only
        job(strategy, int(world_size), int(rank), Path(directory))
        return 0
    import tempfile

    program = load_program()
    unlisted = set(program.STRATEGIES) - set(STORED) - set(EQUIVALENT_TO)
    if unlisted:
        raise SystemExit(f"strategies neither stored nor declared equivalent: {sorted(unlisted)}")
    for strategy in STORED:
        for ws in WORLD_SIZES:
            for rank in ranks(ws):
                name = entry_name(strategy, ws, rank)
                run_child("entry", strategy, str(ws), str(rank), str(CORPUS / name))
                print(name, flush=True)
    equivalent: dict[str, str] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for strategy, twin in EQUIVALENT_TO.items():
            for ws in WORLD_SIZES:
                rank = 0
                out = Path(tmp) / entry_name(strategy, ws, rank)
                run_child("traces", strategy, str(ws), str(rank), str(out))
                stored = CORPUS / entry_name(twin, ws, rank)
                for kind in ("fw", "bw"):
                    if (out / f"{kind}.trace").read_text() != (stored / f"{kind}.trace").read_text():
                        raise SystemExit(f"{strategy} ws={ws}: its {kind} trace differs from {stored.name}'s")
                equivalent[entry_name(strategy, ws, rank)] = stored.name
                print(f"{entry_name(strategy, ws, rank)} = {stored.name}", flush=True)
    (CORPUS / "equivalent.json").write_text(json.dumps(equivalent, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    sys.exit(main(sys.argv[1:]))
