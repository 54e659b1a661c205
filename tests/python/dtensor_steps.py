"""One rank's training step of each differentiable DTensor corpus program
(tests/data/dtensor/programs.py), estimated and measured in this process
(run as a script: the fake process group is one per process). Used by
tests/python/test_dtensor_step.py.

    python dtensor_steps.py WORLD_SIZE RANK [STEP_FILE]

Each program's first argument is the input, the second a parameter of a
module (``nn.Parameter`` of a DTensor made by ``distribute_tensor``). The
step is ``out = model(x); out.backward(torch.ones_like(out))``
(``gradient="ones"``: Thunder 0.2.6 traces no DTensor reduction, so no
scalar loss can be traced), then the optimizer. Prints one JSON line per
(program, optimizer, steps): the estimate's and the measurement's peak and
final bytes and the parameter and input bytes the estimate holds, or the
estimate's error. With STEP_FILE, also writes exp-mul-uneven's AdamW step
(2 steps) there with export_step, for ``peakmem step``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))
import make_dtensor_corpus  # noqa: E402  (the DTensor corpus's programs)

OPTIMIZERS = {"none": (None, None), "sgd": (torch.optim.SGD, {"lr": 0.1, "momentum": 0.9}),
              "adamw": (torch.optim.AdamW, None)}


class WithParameter(torch.nn.Module):
    """fn(x, weight) with `weight` a parameter."""

    def __init__(self, fn, weight) -> None:
        super().__init__()
        self.fn = fn
        self.weight = torch.nn.Parameter(weight)

    def forward(self, x):
        return self.fn(x, self.weight)


def main(world_size: int, rank: int, step_file: str | None = None) -> None:
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import distribute_tensor
    from torch.testing._internal.distributed.fake_pg import FakeStore

    import peakmem

    make_dtensor_corpus.make_corpus.import_thunder()
    dist.init_process_group("fake", rank=rank, world_size=world_size, store=FakeStore())
    mesh = init_device_mesh("cpu", (world_size,))
    programs = make_dtensor_corpus.load_programs()
    for name in programs.BACKWARD:
        fn, ((x_shape, x_placement), (w_shape, w_placement)) = programs.CASES[name]

        def model():
            torch.manual_seed(0)
            return WithParameter(fn, distribute_tensor(torch.randn(w_shape), mesh, [w_placement]))

        x = distribute_tensor(torch.randn(x_shape), mesh, [x_placement])
        for opt_name, (optimizer, kwargs) in OPTIMIZERS.items():
            for steps in (1, 2):
                common = dict(gradient="ones", optimizer=optimizer, optimizer_kwargs=kwargs, steps=steps)
                try:
                    estimate = peakmem.estimate_step(model(), x, **common, frontend="thunder")
                except ValueError as e:  # what the estimate does not model: said, never a number
                    print(json.dumps({"program": name, "optimizer": opt_name, "steps": steps, "error": str(e)}))
                    continue
                measured = peakmem.measure_step(model(), x, **common, frontend="thunder")
                if step_file and (name, opt_name, steps) == ("exp-mul-uneven", "adamw", 2):
                    peakmem.export_step(model(), x, path=step_file, **common, frontend="thunder")
                print(json.dumps({"program": name, "optimizer": opt_name, "steps": steps,
                                  "estimate": [estimate.peak_bytes, estimate.final_bytes],
                                  "measured": [measured.peak_bytes, measured.final_bytes],
                                  "parameters": estimate.by_category.get("parameters"),
                                  "inputs": estimate.by_category.get("inputs")}), flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] if len(sys.argv) > 3 else None)
