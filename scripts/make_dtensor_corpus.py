"""Regenerates peakmem's DTensor corpus: forward traces of DTensor programs, per rank.

Run from anywhere (CPU only, under a minute; one process per rank):

    .venv/bin/python scripts/make_dtensor_corpus.py

Each rank runs in its own process under torch's fake process group, with a
1-d CPU mesh of the world size. For every case below the function is
``thunder.jit``-ed on DTensors made by ``distribute_tensor``, and its
forward trace is measured with ``peakmem.measure`` on DTensor arguments of
the same global shape and placements, made inside the measured region from
their local shards (``DTensor.from_local``): what this rank holds. Thunder
prints DTensor types with their global shapes; the traces of every rank are
the same text, and the numbers differ where the shards do (uneven rows).

Writes ``tests/data/dtensor/<case>-ws<W>-rank<r>[-bw].trace`` and one
``measured.json`` ({entry: {"peak_bytes", "final_bytes", "input_bytes",
"world_size", "rank", "convention"}}, with the versions). Backward traces
(``-bw``) for the cases in BACKWARD, called as Thunder's autograd calls them,
their saved tensors and cotangent made as DTensors likewise: Thunder 0.2.6 has
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


# Cases Thunder 0.2.6 differentiates (its DTensor mul, exp, transpose have
# gradient rules; add and linear do not).
BACKWARD = ("mul-shard0", "mul-replicate", "exp-mul-shard1", "exp-mul-uneven", "transpose-shard0",
            "mixed-placements")


def cases():
    """name -> (function, [(global shape, placement) per argument])."""
    import torch
    from torch.distributed.tensor import Replicate, Shard

    return {
        "mul-shard0": (lambda a, b: a * b, [((16, 16), Shard(0)), ((16, 16), Shard(0))]),
        "mul-replicate": (lambda a, b: a * b, [((16, 16), Replicate()), ((16, 16), Replicate())]),
        "exp-mul-shard1": (lambda a, b: torch.exp(a) * b, [((16, 16), Shard(1)), ((16, 16), Shard(1))]),
        # 10 rows over 4 ranks: torch.chunk gives 3, 3, 3, 1.
        "exp-mul-uneven": (lambda a, b: torch.exp(a * b), [((10, 16), Shard(0)), ((10, 16), Shard(0))]),
        "transpose-shard0": (lambda a, b: torch.transpose(a, 0, 1) * b, [((16, 16), Shard(0)), ((16, 16), Shard(1))]),
        "linear-shard1": (lambda x, w: torch.nn.functional.linear(x, w), [((8, 16), Shard(1)), ((12, 16), Shard(1))]),
        "mixed-placements": (lambda a, b: a * b, [((16, 16), Shard(0)), ((16, 16), Replicate())]),
    }


def _dtensor_inputs(trace, mesh):
    """A callable making the trace's arguments as this rank holds them: a
    DTensor proxy becomes a DTensor of its global shape and placements built
    from a fresh local shard (torch's own rule for the shard's shape), any
    other tensor proxy a plain tensor, in the containers the arguments are."""
    import torch
    from torch.distributed.tensor import DTensor
    from torch.distributed.tensor._utils import compute_local_shape_and_global_offset

    from thunder.core.dtypes import to_torch_dtype as _torch_dtype

    def make(x):
        if type(x).__name__ == "CollectionProxy":
            x = x.collection()
        if isinstance(x, (list, tuple)):
            return type(x)(make(i) for i in x) if isinstance(x, tuple) else [make(i) for i in x]
        if type(x).__name__ == "DTensorProxy":
            spec = x.spec._o
            local, _ = compute_local_shape_and_global_offset(tuple(x.shape), spec.mesh, spec.placements)
            # The spec's own global strides: the backward checks a cotangent's
            # spec against the traced one (dtensor_utils.check_dtensor_cotangent_metadata).
            return DTensor.from_local(torch.randn(local, dtype=_torch_dtype(x.dtype)), spec.mesh, spec.placements,
                                      shape=torch.Size(x.shape), stride=tuple(spec.tensor_meta.stride))
        if hasattr(x, "shape") and hasattr(x, "dtype"):
            return torch.randn(tuple(x.shape), dtype=_torch_dtype(x.dtype))
        return x

    args = trace.args
    return lambda: [make(a) for a in args]


def rank_entries(world_size: int, rank: int) -> dict:
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, distribute_tensor
    from torch.testing._internal.distributed.fake_pg import FakeStore

    import peakmem

    thunder = make_corpus.import_thunder()
    dist.init_process_group("fake", rank=rank, world_size=world_size, store=FakeStore())
    mesh = init_device_mesh("cpu", (world_size,))
    out = {}
    for name, (fn, args) in cases().items():
        torch.manual_seed(0)
        grad = name in BACKWARD
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
            convention = "forward" if kind == "fw" else "backward"
            make_inputs = _dtensor_inputs(trace, mesh)
            first = peakmem.measure(trace, inputs=make_inputs, convention=convention)
            second = peakmem.measure(trace, inputs=make_inputs, convention=convention)
            if (first.peak_bytes, first.final_bytes) != (second.peak_bytes, second.final_bytes):
                raise RuntimeError(f"{entry}: two measurements differ")
            (CORPUS / f"{entry}.trace").write_text(make_corpus.trace_text(trace))
            out[entry] = {"world_size": world_size, "rank": rank, "convention": convention,
                          "peak_bytes": first.peak_bytes, "final_bytes": first.final_bytes,
                          "input_bytes": first.input_bytes}
    return out


def main(argv: list[str]) -> int:
    if argv and argv[0] == "--child":
        print(json.dumps(rank_entries(int(argv[1]), int(argv[2]))))
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
