#!/usr/bin/env python3
"""peakmem's FSDP2 ranks beside PyTorch's FSDPMemTracker in fake mode, on the same steps.

    ONEDNN_MAX_CPU_ISA=AVX2 .venv/bin/python bench/bench_fsdp_vs_memtracker.py [--json OUT] [--layers 80]

For each step of tests/python/fsdp_steps.py (FSDP2's fully_shard per block
and on the root, as the step's ``parallelize`` says) on 2 and 4 ranks, rank 0:

* truth: the rank measured as a gloo process (tests/data/fsdp/measured.json,
  scripts/measure_distributed_steps.py --strategy fsdp);
* peakmem: ``estimate_step(..., strategy="fsdp", world_size=, rank=0,
  frontend="eager", parallelize=)`` from the CPU model;
* FSDPMemTracker: ``torch.distributed._tools.fsdp2_mem_tracker`` around the
  same step under FakeTensorMode and torch's fake process group, as
  torchtitan's memory estimation runs it (the model built and sharded in
  the fake mode, the mesh made before it), its peak the ``Total`` of
  ``get_tracker_snapshot("peak")``.

Then two 70B ranks of 64, both tools' figures and seconds, with no truth
(it takes 64 GPUs): Llama-2-70B's shapes (tests/python/step_models.py's
LlamaLM: vocab 32,000, dim 8,192, 64 heads, 8 key-value heads, SwiGLU
28,672; bf16, AdamW, batch 1, sequence 2,048), each block and the root
sharded by FSDP2; and Llama-3-70B's (``transformers``, vocab 128,256,
sequence 8,192) with FSDP2 over 8 data-parallel ranks and tensor
parallelism of 8 on a 2-D mesh (llama3_70b_fsdp_tp). peakmem also answers
the first for an H100 (``device="cuda:h100"``: CUDA's optimizer and
kernels), which FSDPMemTracker answers only on a CUDA machine.

Printed per step: each tool's bytes off the measured peak and its seconds;
a tool that raises is a miss, listed with its error. The baseline is
FSDPMemTracker in the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "python"))


def memtracker_peak(make, world_size: int) -> tuple[int, float]:
    """FSDPMemTracker's peak of the step `make()` gives, rank 0 of
    `world_size`, in fake mode; and its seconds (the step under the tracker)."""
    import torch
    import torch.distributed as dist
    import torch.distributed.device_mesh as device_mesh_module
    import torch.distributed.fsdp._fully_shard._fully_shard as fully_shard_module
    from torch._subclasses.fake_tensor import FakeTensorMode, unset_fake_temporarily
    from torch.distributed._tools.fsdp2_mem_tracker import FSDPMemTracker
    from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
    from torch.testing._internal.distributed.fake_pg import FakeStore

    dist.init_process_group("fake", rank=0, world_size=world_size, store=FakeStore())
    default_mesh = fully_shard_module._init_default_mesh
    coordinate = DeviceMesh._compute_coordinate_on_dim

    def init_device_mesh_outside(*args, **kwargs):
        with unset_fake_temporarily():
            return init_device_mesh(*args, **kwargs)
    try:
        mesh = init_device_mesh("cpu", (world_size,))  # a mesh cannot be made inside the fake mode
        fully_shard_module._init_default_mesh = lambda: mesh
        # A step's own (2-D) mesh, made by its wrapping inside the fake mode,
        # is made outside it for the same reason.
        device_mesh_module.init_device_mesh = init_device_mesh_outside
        # fully_shard on a tensor-parallel module makes a mesh of the two
        # (DeviceMesh._concatenate), which finds the rank in it with nonzero:
        # under the fake mode that is a DynamicOutputShapeException, so the
        # mesh's own tensors are read outside it.
        def coordinate_outside_the_fake_mode(self):
            with unset_fake_temporarily():
                return coordinate(self)

        DeviceMesh._compute_coordinate_on_dim = coordinate_outside_the_fake_mode
        with FakeTensorMode(allow_non_fake_inputs=True):  # the mesh (made before it) holds real tensors
            model, inputs, options = make()
            options["parallelize"](model)
            optimizer = options["optimizer"](model.parameters())
            kwinputs = dict(options.get("kwinputs") or {})
            tracker = FSDPMemTracker(model, optimizer)
            tracker.track_inputs((*inputs, *kwinputs.values()))
            start = time.perf_counter()
            with tracker:
                out = model(*inputs, **kwinputs)
                (out.loss if hasattr(out, "loss") else out).backward()
                del out
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
            seconds = time.perf_counter() - start
        peak = tracker.get_tracker_snapshot("peak")
        return sum(v.get("Total", 0) for d, v in peak.items() if torch.device(d).type == "cpu"), seconds
    finally:
        fully_shard_module._init_default_mesh = default_mesh
        DeviceMesh._compute_coordinate_on_dim = coordinate
        device_mesh_module.init_device_mesh = init_device_mesh
        dist.destroy_process_group()


def llama_70b(layers: int, seq: int = 2048):
    """A maker of the 70B step on meta (bf16, AdamW), with its wrapping."""
    import torch

    from fsdp_steps import per_block
    from step_models import LlamaLM

    def make():
        # On meta for peakmem; inside FSDPMemTracker's fake mode, its fake tensors.
        faked = torch._C._get_dispatch_mode(torch._C._TorchDispatchModeKey.FAKE) is not None
        was = torch.get_default_dtype()
        torch.set_default_dtype(torch.bfloat16)  # made in bf16: Module.to cannot swap fake parameters
        try:
            with torch.device("cpu" if faked else "meta"):
                model = LlamaLM(vocab=32000, dim=8192, layers=layers, heads=64, kv_heads=8, hidden=28672, seq=seq)
                idx = torch.zeros(1, seq, dtype=torch.long)
        finally:
            torch.set_default_dtype(was)
        for block in model.blocks:  # its rotary tables are made in float32
            block.cos, block.sin = block.cos.to(torch.bfloat16), block.sin.to(torch.bfloat16)
        return model, (idx, idx), {"optimizer": torch.optim.AdamW, "parallelize": per_block(lambda m: m.blocks)}

    return make


def llama3_70b_fsdp_tp(layers: int, tp: int = 8, seq: int = 8192):
    """A maker of Llama-3-70B's step (``transformers``' LlamaForCausalLM:
    vocab 128,256, dim 8,192, 64 heads, 8 key-value heads, SwiGLU 28,672;
    bf16, AdamW, batch 1, sequence 8,192) with torchtitan's composition:
    tensor parallelism of `tp` on each block (fsdp_steps._llama_plan), FSDP2
    over the data-parallel ranks, on a 2-D mesh."""
    import torch
    import transformers

    from fsdp_steps import _llama_plan, two_d

    parallelize = two_d(lambda m: m.model.layers, _llama_plan, tp)

    def make():
        faked = torch._C._get_dispatch_mode(torch._C._TorchDispatchModeKey.FAKE) is not None
        config = transformers.LlamaConfig(hidden_size=8192, intermediate_size=28672, num_hidden_layers=layers,
                                          num_attention_heads=64, num_key_value_heads=8, vocab_size=128256)
        with torch.device("cpu" if faked else "meta"):
            model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
            ids = torch.zeros(1, seq, dtype=torch.long)
        return model, (), {"kwinputs": {"input_ids": ids, "labels": ids}, "optimizer": torch.optim.AdamW,
                           "parallelize": parallelize}

    return make


def _timed(fn) -> tuple[object, float]:
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def _estimate(make, world_size: int, **options):
    import peakmem

    model, inputs, step = make()
    return peakmem.estimate_step(model, *inputs, **step, **options, frontend="eager", strategy="fsdp",
                                 world_size=world_size, rank=0)


def _row(name: str, make, world_size: int, truth: int | None) -> dict:
    row: dict = {"step": name, "world_size": world_size, "measured": truth}
    for tool, run in (("peakmem", lambda: _estimate(make, world_size).peak_bytes),
                      ("memtracker", lambda: memtracker_peak(make, world_size))):
        try:
            out, seconds = _timed(run)
        except Exception as e:  # a miss, listed
            row[f"{tool}_error"] = f"{type(e).__name__}: {e}"[:200]
            continue
        if tool == "memtracker":
            out, seconds = out
        row[f"{tool}_peak"], row[f"{tool}_s"] = out, seconds
        if truth is not None:
            row[f"{tool}_off"] = out - truth
    return row


def _cell(row: dict, tool: str) -> str:
    if f"{tool}_error" in row:
        return "raised"
    return f"{row[tool + '_off']:,}" if f"{tool}_off" in row else f"{row[tool + '_peak']:,}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="write the rows here")
    parser.add_argument("--layers", type=int, default=80, help="the 70B model's layers (80)")
    args = parser.parse_args()
    import torch

    from fsdp_steps import STEPS, THREADS

    torch.set_num_threads(THREADS)
    with open(os.path.join(HERE, "..", "tests", "data", "fsdp", "measured.json")) as f:
        measured = {(r["name"], r["world_size"]): r["peak_bytes"] for r in json.load(f)["rows"] if r["rank"] == 0}
    h100, seconds = _timed(lambda: _estimate(llama_70b(args.layers), 64, device="cuda:h100"))
    h100_row = {"step": f"llama_70b_{args.layers}_layers on an H100", "world_size": 64,
                "peakmem_peak": h100.peak_bytes, "peakmem_s": seconds}
    print(f"70B rank on an H100 (peakmem): peak {h100.peak_bytes:,} bytes ({h100.peak_bytes / 2**30:.1f} GiB), "
          f"{seconds:.1f} s")
    rows = [h100_row]
    print(f"{'step':<28} {'ranks':>5} {'measured':>14} {'peakmem off':>16} {'s':>6} {'FSDPMemTracker off':>19} "
          f"{'s':>6}")
    # The 70B rank first: each process group made and destroyed in this
    # process leaves torch's logging a little deeper (its "[rank0]:"
    # prefixes pile up), and after a few dozen the 70B's stack overflows.
    wanted = [(f"llama_70b_{args.layers}_layers", 64), (f"llama3_70b_{args.layers}_layers_fsdp_tp8", 64)]
    wanted += [(n, w) for n in STEPS for w in (2, 4) if "parallelize" in STEPS[n]()[2]]
    for name, world_size in wanted:
        make = STEPS.get(name) or (llama3_70b_fsdp_tp(args.layers) if "tp8" in name else llama_70b(args.layers))
        row = _row(name, make, world_size, measured.get((name, world_size)))
        rows.append(row)
        truth = f"{row['measured']:,}" if row["measured"] is not None else "(64 GPUs)"
        print(f"{name:<28} {world_size:>5} {truth:>14} {_cell(row, 'peakmem'):>16} "
              f"{row.get('peakmem_s', float('nan')):>6.2f} {_cell(row, 'memtracker'):>19} "
              f"{row.get('memtracker_s', float('nan')):>6.2f}")
    from provenance import side_by_side_summary, write_rows

    side_by_side_summary(rows, "memtracker", "FSDPMemTracker")
    write_rows(args.json, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
