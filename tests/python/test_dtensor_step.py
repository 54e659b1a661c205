"""One rank's training step of DTensor programs: the DTensor corpus's
differentiable programs (tests/data/dtensor/programs.py) with their second
argument a DTensor parameter, estimated by
peakmem.estimate_step(gradient="ones") and measured by measure_step in the
same process under torch's fake process group
(tests/python/dtensor_steps.py, one process per rank): equal to the byte,
peak and final, for no optimizer, SGD with momentum and AdamW over 1 and 2
steps. DTensor values are read as the rank's shards, by the CLI too
(`peakmem step` on export_step's file, which carries the rank).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import cli

HERE = Path(__file__).resolve().parent


def run(world_size: int, rank: int, step_file: Path) -> list[dict]:
    done = subprocess.run([sys.executable, str(HERE / "dtensor_steps.py"), str(world_size), str(rank),
                           str(step_file)], check=True, capture_output=True, text=True)
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


# Ranks 0 of 2 and 1 of 2 and 0 of 4 run alike: `python tests/python/dtensor_steps.py W R`.
@pytest.mark.parametrize("world_size,rank", [(4, 3)])
def test_a_dtensor_ranks_step_is_estimated_to_the_byte(world_size, rank, tmp_path):
    step_file = tmp_path / "step.json"
    results = run(world_size, rank, step_file)
    assert len(results) == 6 * 6  # programs x (optimizer, steps)
    exact = [r for r in results if "error" not in r]
    for r in exact:
        assert r["estimate"] == r["measured"], r
    # Shard(0)/Shard(1) of a 16 x 16 f32 parameter: 1024 / W bytes on every
    # rank; Replicate: all 1024. 10 x 16 over 4 ranks: torch.chunk's rows are
    # 3, 3, 3, 1; distribute_tensor pads every shard to 3 rows and keeps the
    # 1-row view of it, so rank 3's parameter holds a 192-byte storage (and
    # its gradient 64 bytes); over 2 ranks 5 rows, 320 bytes.
    held = {r["program"]: r["parameters"] for r in exact}
    sharded = 1024 // world_size
    assert held == {"mul-shard0": sharded, "mul-replicate": 1024, "exp-mul-shard1": sharded,
                    "exp-mul-uneven": 192 if world_size == 4 else 320, "transpose-shard0": sharded,
                    "mixed-placements": 1024}
    # The one thing not modelled is said, never a number: Thunder's DTensor
    # mul gives the Replicate operand a Shard(0) gradient, which DTensor
    # redistributes inside the optimizer's ops.
    errors = [r for r in results if "error" in r]
    assert {(r["program"], r["optimizer"]) for r in errors} == {("mixed-placements", "sgd"),
                                                               ("mixed-placements", "adamw")}
    assert all("'weight' is placed (Replicate(),) and its gradient (Shard(dim=0),)" in r["error"]
               for r in errors)
    # The step file carries the rank: the CLI reads rank 3's shards (the
    # 1-row one of exp-mul-uneven) and gives the estimate's numbers.
    exported = json.loads(step_file.read_text())
    assert (exported["rank"], exported["world_size"]) == (rank, world_size)
    out = subprocess.run([cli(), "step", str(step_file), "--format", "json"], capture_output=True, text=True,
                         check=True)
    report = json.loads(out.stdout)
    (want,) = [r for r in exact if (r["program"], r["optimizer"], r["steps"]) == ("exp-mul-uneven", "adamw", 2)]
    assert [report["peak_bytes"], report["final_bytes"]] == want["measured"]
