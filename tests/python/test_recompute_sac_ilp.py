"""peakmem's recomputation beside full activation checkpointing and
PyTorch's SAC ILP on 4-block GPT and Llama stacks (batch 4, sequence 128),
on each engine, every plan compared run and measured
(recompute_frontier.Frontier):

- eager: the steps as PyTorch runs them; peakmem's plans are the eager
  front end's (peakmem.step.eager_recompute), SAC ILP's run with
  PyTorch's selective checkpointing;
- thunder: the steps as ``thunder.jit`` runs them; peakmem's plans are the
  Thunder front end's (peakmem.recompute), SAC ILP's run by Thunder with
  peakmem's checkpoint lookaside (peakmem.step.thunder_checkpoint), which
  places the policies Thunder would otherwise ignore.

SAC ILP's choices are made once, on the eager step (sac_ilp_plans), at
budgets from 100 % down to 70 % of its own estimate of it; the same
choices run on both engines. On each engine, at every peak that
checkpointing the first k blocks reaches and at every SAC plan's measured
peak, peakmem's plan for that budget fits it with fewer added FLOPs than
checkpointing and no more than SAC's plan; every plan is measured equal to
its prediction (SAC's and checkpointing's too), its added FLOPs are
counted as the engine runs it (and equal what the planner predicts), and
the loss and gradients are bit-identical to the plain step's.

Long (docs/manual.md, "Longer checks"; scripts/test leaves it out): about 10
minutes for both models on each engine on 2 cores. Needs pulp and pwlf
(bench/requirements-sac-ilp.txt)."""

from __future__ import annotations

import pytest

from step_models import GPT, LlamaLM

BATCH, SEQ, LAYERS = 4, 128, 4
SHARES = [1.0, 0.9, 0.8, 0.75, 0.7]  # of SAC ILP's estimate of the unplanned step


def _inputs():
    import torch

    g = torch.Generator().manual_seed(0)
    return torch.randint(0, 512, (BATCH, SEQ), generator=g), torch.randint(0, 512, (BATCH, SEQ), generator=g)


def _maker(cls):
    def make():
        import torch

        torch.manual_seed(0)
        return cls(layers=LAYERS)

    return make


@pytest.mark.long
@pytest.mark.parametrize("frontend", ["eager", "thunder"])
@pytest.mark.parametrize("cls", [GPT, LlamaLM], ids=["gpt", "llama"])
def test_plans_against_checkpointing_and_sac_ilp(thunder, cls, frontend):
    import importlib.util

    from recompute_frontier import Frontier

    missing = [m for m in ("pulp", "pwlf") if importlib.util.find_spec(m) is None]
    assert not missing, f"{missing} missing: pip install -r bench/requirements-sac-ilp.txt"
    f = Frontier(_maker(cls), _inputs(), SHARES, frontend)
    assert len(f.sac) >= 2 and len(f.checkpointing) == LAYERS
    assert any(p.added_flops > 0 for p in f.sac)  # SAC ILP chose recomputation
    for p in f.rows():
        assert p.estimated == p.measured, p
        assert p.identical, p
    for q in f.peakmem:
        assert q.measured <= q.budget, q
        if frontend == "eager":
            assert q.plan.fits and q.plan.peak_after == q.measured, q
            assert q.plan.added_flops == q.added_flops, q
    for p in f.checkpointing:
        q = f.peakmem_at(p.measured)
        assert q.added_flops < p.added_flops, (p, q)
    for p in f.sac:
        q = f.peakmem_at(p.measured)
        assert q.added_flops <= p.added_flops, (p, q)
