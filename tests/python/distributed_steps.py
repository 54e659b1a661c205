"""One rank's training step under a distributed transform, estimated and
measured in this process (run as a script: the fake process group is one
per process). Used by tests/python/test_distributed_step.py.

    python distributed_steps.py STRATEGY WORLD_SIZE RANK

prints one JSON line per (optimizer, steps): the estimate's and the
measurement's peak and final bytes, and the estimate on `meta` inputs.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))
import make_distributed_corpus  # noqa: E402  (the distributed corpus's program)

OPTIMIZERS = {"none": (None, None), "sgd": (torch.optim.SGD, {"lr": 0.1, "momentum": 0.9}),
              "adamw": (torch.optim.AdamW, None)}


def sum_loss(output, x):
    return output.sum()


def main(strategy: str, world_size: int, rank: int) -> None:
    import torch.distributed as dist
    from torch.testing._internal.distributed.fake_pg import FakeStore

    import peakmem

    make_distributed_corpus.make_corpus.import_thunder()
    dist.init_process_group("fake", rank=rank, world_size=world_size, store=FakeStore())
    program = make_distributed_corpus.load_program()
    transform = lambda jm: program.STRATEGIES[strategy](jm, torch.device("cpu"))  # noqa: E731
    (x,) = program.make_inputs()
    for name, (optimizer, kwargs) in OPTIMIZERS.items():
        for steps in (1, 2):
            common = dict(loss_fn=sum_loss, optimizer=optimizer, optimizer_kwargs=kwargs, steps=steps,
                          transform=transform)
            estimate = peakmem.estimate_step(program.make_model(), x, **common, frontend="thunder")
            measured = peakmem.measure_step(program.make_model(), x, **common, frontend="thunder")
            with torch.device("meta"):
                meta_model = program.make_model()
            meta = peakmem.estimate_step(meta_model, x.to("meta"), **dict(
                common, transform=lambda jm: program.STRATEGIES[strategy](jm, torch.device("meta"))),
                frontend="thunder")
            print(json.dumps({"optimizer": name, "steps": steps,
                              "estimate": [estimate.peak_bytes, estimate.final_bytes],
                              "measured": [measured.peak_bytes, measured.final_bytes],
                              "meta": [meta.peak_bytes, meta.final_bytes],
                              "parameters": estimate.by_category.get("parameters")}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
