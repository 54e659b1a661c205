"""One training step of a 70B Llama-shaped model, estimated per rank from
`meta` inputs: FSDP (ZeRO-3 asked) on a world of 64 ranks, and on one
device, bf16, AdamW, batch 1, sequence 2048. Nothing is allocated.

    .venv/bin/python scripts/estimate_llama70b_fsdp.py [--world-size 64] [--layers 80]

About 7 minutes a configuration on 2 CPUs, nearly all of it Thunder tracing
80 layers; peakmem's part is under a second. The model is
tests/python/step_models.py's LlamaLM with Llama-2-70B's shapes (vocab
32,000, dim 8,192, 80 layers, 64 heads, 8 key-value heads, SwiGLU 28,672:
68,976,648,192 parameters). Rank 0 of the world is this process, under
torch's fake process group.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests" / "python"))
sys.path.insert(0, str(REPO / "scripts"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--world-size", type=int, default=64, help="1: one device, no FSDP")
    parser.add_argument("--layers", type=int, default=80)
    parser.add_argument("--seq", type=int, default=2048)
    args = parser.parse_args()

    import make_corpus

    make_corpus.import_thunder()
    import torch
    import torch.distributed as dist
    import thunder.distributed as td
    from torch.testing._internal.distributed.fake_pg import FakeStore

    import peakmem
    from step_models import LlamaLM

    dist.init_process_group("fake", rank=0, world_size=args.world_size, store=FakeStore())
    start = time.time()
    with torch.device("meta"):
        model = LlamaLM(vocab=32000, dim=8192, layers=args.layers, heads=64, kv_heads=8, hidden=28672,
                        seq=args.seq).to(torch.bfloat16)
    parameters = sum(p.numel() for p in model.parameters())
    idx = torch.zeros(1, args.seq, dtype=torch.long, device="meta")
    targets = torch.zeros(1, args.seq, dtype=torch.long, device="meta")
    transform = None
    if args.world_size > 1:
        def transform(jm):
            return td.fsdp(jm, device=torch.device("meta"), sharding_strategy=td.FSDPType.ZERO3)
    report = peakmem.estimate_step(model, idx, targets, optimizer=torch.optim.AdamW, transform=transform,
                                   frontend="thunder")
    print(json.dumps({"parameters": parameters, "world_size": args.world_size, "layers": args.layers,
                      "seq": args.seq, "peak_bytes": report.peak_bytes, "final_bytes": report.final_bytes,
                      "phase_at_peak": report.phase_at_peak, "by_category": report.by_category,
                      "seconds": round(time.time() - start)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
