"""Regenerates peakmem's DTensor corpus: traces of DTensor programs, per rank, measured.

Run from anywhere (CPU only, under a minute; one process per rank):

    .venv/bin/python scripts/make_dtensor_corpus.py

Each rank runs in its own process under torch's fake process group, with a
1-d CPU mesh of the world size. For every case of
``tests/data/dtensor/programs.py`` (loaded under that file name, which the
traces' source comments print) the function is
``thunder.jit``-ed on DTensors made by ``distribute_tensor``, and its
traces are measured with ``peakmem.measure``, which makes each DTensor
argument inside the measured region from this rank's local shard
(``DTensor.from_local``): what this rank holds. Thunder
prints DTensor types with their global shapes; the traces of every rank are
the same text, and the numbers differ where the shards do (uneven rows).

Writes ``tests/data/dtensor/<case>-ws<W>-rank<r>[-bw].trace`` (``--child WS
RANK OUT_DIR``: one rank's traces into OUT_DIR, its numbers on stdout) and one
``measured.json`` ({entry: {"peak_bytes", "final_bytes", "input_bytes",
"world_size", "rank", "convention"}}, with the versions). Backward traces
(``-bw``) for the cases in programs.BACKWARD, called as Thunder's autograd calls them,
their saved tensors and cotangent DTensors likewise: Thunder 0.2.6 has
no gradient rules for the other DTensor prims (dtensor_add_prim,
dtensor_linear_prim, ...).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_corpus  # noqa: E402

CORPUS = make_corpus.REPO / "tests" / "data" / "dtensor"
WORLD_SIZES = (2, 4)


def load_programs():
    return make_corpus.load_module(CORPUS / "programs.py", "tests/data/dtensor/programs.py", "peakmem_dtensor")


def rank_traces(world_size: int, rank: int):
    """In this process: rank `rank` of `world_size` under the fake process
    group, on a 1-d CPU mesh; yields (entry name, convention, trace) for
    every case's forward and, for programs.BACKWARD, backward trace."""
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import distribute_tensor
    from torch.testing._internal.distributed.fake_pg import FakeStore

    thunder = make_corpus.import_thunder()
    dist.init_process_group("fake", rank=rank, world_size=world_size, store=FakeStore())
    mesh = init_device_mesh("cpu", (world_size,))
    programs = load_programs()
    for name, (fn, args) in programs.CASES.items():
        torch.manual_seed(0)
        grad = name in programs.BACKWARD
        inputs = [distribute_tensor(torch.randn(shape), mesh, [placement]).requires_grad_(grad)
                  for shape, placement in args]
        jfn = thunder.jit(fn)
        if grad:
            result = jfn(*inputs)
            result.backward(torch.ones_like(result))
            del result
        else:
            with torch.no_grad():
                jfn(*inputs)
        traces = {"fw": thunder.last_traces(jfn)[-1]}
        if grad:
            traces["bw"] = thunder.last_backward_traces(jfn)[-1]
        del inputs
        for kind, trace in traces.items():
            entry = f"{name}-ws{world_size}-rank{rank}" + ("-bw" if kind == "bw" else "")
            yield entry, "forward" if kind == "fw" else "backward", trace


def rank_entries(world_size: int, rank: int, out_dir: Path = CORPUS) -> dict:
    import peakmem

    out = {}
    for entry, convention, trace in rank_traces(world_size, rank):
        # peakmem.measure makes a DTensor proxy's argument from this
        # rank's shard (its saved tensors and cotangents too).
        first = peakmem.measure(trace, convention=convention)
        second = peakmem.measure(trace, convention=convention)
        if (first.peak_bytes, first.final_bytes) != (second.peak_bytes, second.final_bytes):
            raise RuntimeError(f"{entry}: two measurements differ")
        (out_dir / f"{entry}.trace").write_text(make_corpus.trace_text(trace))
        out[entry] = {"world_size": world_size, "rank": rank, "convention": convention,
                      "peak_bytes": first.peak_bytes, "final_bytes": first.final_bytes,
                      "input_bytes": first.input_bytes}
    return out


def main(argv: list[str]) -> int:
    if argv and argv[0] == "--child":  # --child WS RANK [OUT_DIR]
        out_dir = Path(argv[3]) if len(argv) > 3 else CORPUS
        print(json.dumps(rank_entries(int(argv[1]), int(argv[2]), out_dir)))
        return 0
    measured: dict = {"versions": make_corpus.versions(), "device": "cpu", "entries": {}}
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    for ws in WORLD_SIZES:
        for rank in (0, ws - 1):
            done = subprocess.run([sys.executable, __file__, "--child", str(ws), str(rank)], check=True,
                                  env=env, capture_output=True, text=True)
            measured["entries"].update(json.loads(done.stdout.strip().splitlines()[-1]))
            print(f"ws={ws} rank={rank}", flush=True)
    measured["entries"] = dict(sorted(measured["entries"].items()))
    (CORPUS / "measured.json").write_text(make_corpus.dump_json(measured))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    sys.exit(main(sys.argv[1:]))
