"""Recomputation that reaches what activation checkpointing reaches
(peakmem.recompute's expensive tier: regions that recompute matmuls and
softmax, tried when a budget demands them), proven by running the plans:
on 4-block GPT and Llama stacks, at the peak Thunder measures with
torch.utils.checkpoint over the first k blocks (k = 1 .. all), peakmem's
plan fits with fewer added FLOPs than those k blocks' forwards, Thunder
runs it and measures the predicted peak to the byte, and the loss and every
gradient are bit-identical."""

from __future__ import annotations

import pytest

from step_models import GPT, LlamaLM, checkpoint_first

BATCH, SEQ, LAYERS = 4, 128, 4


def gpt_checkpointing_flops(b: int = BATCH, t: int = SEQ, c: int = 256, layers: int = LAYERS) -> int:
    """The matmul FLOPs full checkpointing runs again: each block's forward
    once more. Per block (2 FLOPs a multiply-add): c_attn 2·bt·c·3c, c_proj
    2·bt·c·c, c_fc 2·bt·c·4c, c_proj2 2·bt·4c·c (24·bt·c² together); the
    attention's q·kᵀ and p·v, each 2·b·t·t·c over the heads. Pointwise ops,
    softmax and the norms are left out: a lower bound of what it adds."""
    return layers * (24 * b * t * c * c + 4 * b * t * t * c)


def llama_checkpointing_flops(b: int = BATCH, t: int = SEQ, c: int = 256, kv: int = 64, hidden: int = 704,
                              layers: int = LAYERS) -> int:
    """As gpt_checkpointing_flops for LlamaBlock: wq and wo 2·bt·c·c each,
    wk and wv 2·bt·c·kv each (kv = 2 heads of 32), w1 and w3 2·bt·c·hidden
    each, w2 2·bt·hidden·c; the attention 2·b·t·t·c twice (8 heads of 32
    after repeat_interleave)."""
    per_block = 2 * b * t * (2 * c * c + 2 * c * kv + 3 * c * hidden) + 4 * b * t * t * c
    return layers * per_block


def _inputs():
    import torch

    g = torch.Generator().manual_seed(0)
    return torch.randint(0, 512, (BATCH, SEQ), generator=g), torch.randint(0, 512, (BATCH, SEQ), generator=g)


def _model(cls):
    import torch

    torch.manual_seed(0)
    return cls(layers=LAYERS)


# Long (scripts/test leaves it out; docs/manual.md, "Longer checks"): per model, four
# checkpointed steps measured, four searches and four plans measured, about
# 5 minutes a case on 2 cores. test_cli_chooses_the_same_regions samples the
# regions in every run.
@pytest.mark.long
@pytest.mark.parametrize("plain, checkpointing_flops",
                         [(GPT, gpt_checkpointing_flops()), (LlamaLM, llama_checkpointing_flops())],
                         ids=["gpt", "llama"])
def test_meets_checkpointing_of_any_blocks_with_fewer_flops(thunder, plain, checkpointing_flops):
    import torch

    import peakmem
    from peakmem.recompute import recompute_transform

    idx, targets = _inputs()
    model = _model(plain)
    thunders = peakmem.estimate_step(model, idx, targets, frontend="thunder").peak_bytes
    for k in range(1, LAYERS + 1):
        budget = peakmem.measure_step(checkpoint_first(_model(plain), k), idx, targets,
                                      frontend="thunder").peak_bytes
        assert budget < thunders
        planned = peakmem.estimate_step(model, idx, targets, recompute=budget)
        rc = planned.recomputation
        assert rc.fits and planned.peak_bytes <= budget, (k, planned.peak_bytes, budget, rc)
        # checkpointing_flops: every block's matmuls, a lower bound of what
        # checkpointing all of them adds; k of the LAYERS blocks add k/LAYERS of it.
        assert 0 < rc.added_flops < checkpointing_flops * k // LAYERS, (k, rc.added_flops, checkpointing_flops)
        measured = peakmem.measure_step(model, idx, targets, recompute=rc.names)  # the plan as chosen, no search
        assert (measured.peak_bytes, measured.final_bytes) == (planned.peak_bytes, planned.final_bytes), k
    assert any(n.endswith("+") for n in rc.names)  # at all blocks' budget, pointwise values alone do not get there

    def run(transforms):
        model.zero_grad(set_to_none=True)
        loss = thunder.jit(model, transforms=transforms)(idx, targets)
        loss.backward()
        return loss.detach(), [p.grad.clone() for p in model.parameters()]

    loss, grads = run([])
    loss2, grads2 = run([recompute_transform(rc.names)])
    assert torch.equal(loss, loss2)
    assert all(torch.equal(a, b) for a, b in zip(grads, grads2))


def test_cli_chooses_the_same_regions(thunder, tmp_path):
    """`peakmem plan STEP.json --recompute --budget` on the exported step
    chooses what estimate_step(recompute=...) chooses, regions
    included, and its step file simulates to the same peak."""
    import json
    import subprocess

    import peakmem
    from conftest import cli

    idx, targets = _inputs()
    model = _model(GPT)
    step = tmp_path / "step.json"
    peakmem.export_step(model, idx, targets, path=str(step), frontend="thunder")
    # Half the unplanned peak: below what the cheap candidates reach (the
    # regions chosen below say so), above the lowest the regions reach
    # (bench/results/recompute_pareto.json: 46.5 % of it).
    budget = peakmem.estimate_step(model, idx, targets, frontend="thunder").peak_bytes // 2
    planned = peakmem.estimate_step(model, idx, targets, recompute=budget)
    short = planned.recomputation
    assert any(n.endswith("+") for n in short.names)
    out = tmp_path / "planned.json"
    run = subprocess.run([cli(), "plan", str(step), "--recompute", "--budget", f"{budget}B", "-o", str(out)],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    assert (f"-> {short.peak_after} bytes" in run.stderr and f"({', '.join(short.names)})" in run.stderr
            and f"added FLOPs {short.added_flops};" in run.stderr), run.stderr
    simulated = subprocess.run([cli(), "step", str(out), "--format", "json"], capture_output=True, text=True,
                               timeout=300)
    assert simulated.returncode == 0, simulated.stderr
    assert json.loads(simulated.stdout)["peak_bytes"] == planned.peak_bytes
