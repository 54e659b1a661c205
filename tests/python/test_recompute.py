"""Recomputation (peakmem.recompute): saved tensors the backward makes again
instead of keeping, chosen by the step simulation and proven by running
them: the planned step, executed by Thunder with the rewritten traces, is
measured (measure_step) and must equal the estimate to the byte, and
compute bit-identical losses and gradients."""

from __future__ import annotations

import pytest

from step_models import ENTRIES, GPT, Entry


def _entry(name: str) -> Entry:
    return next(e for e in ENTRIES if e.name == name)


def _fresh(entry: Entry):
    import torch

    torch.manual_seed(0)
    return entry.make(), entry.inputs()


@pytest.mark.parametrize("name", ["gpt_lm_loss_inside", "llama_block", "mlp_adamw_3_steps"])
def test_recomputed_step_is_measured_as_estimated(thunder, name: str):
    import peakmem

    entry = _entry(name)
    model, inputs = _fresh(entry)
    plain = peakmem.estimate_step(model, *inputs, loss_fn=entry.loss_fn, **entry.setup)
    planned = peakmem.estimate_step(model, *inputs, loss_fn=entry.loss_fn, plan={"recompute": True},
                                    **entry.setup)
    rc = planned.recomputation
    assert rc.peak_before == plain.peak_bytes and rc.peak_after == planned.peak_bytes
    assert planned.peak_bytes <= plain.peak_bytes
    if name != "mlp_adamw_3_steps":  # its peak is the optimizer's: nothing to recompute there
        assert planned.peak_bytes < plain.peak_bytes and rc.names and rc.added_flops > 0
    measured = peakmem.measure_step(model, *inputs, loss_fn=entry.loss_fn, plan={"recompute": True},
                                    **entry.setup)
    assert (measured.peak_bytes, measured.final_bytes) == (planned.peak_bytes, planned.final_bytes)


def test_recomputation_computes_the_same_loss_and_gradients(thunder):
    import torch

    import peakmem
    from peakmem.recompute import recompute_transform

    entry = _entry("gpt_lm_loss_inside")
    model, inputs = _fresh(entry)
    names = peakmem.estimate_step(model, *inputs, plan={"recompute": True}).recomputation.names
    assert names

    def run(transforms):
        model.zero_grad(set_to_none=True)
        loss = thunder.jit(model, transforms=transforms)(*inputs)
        loss.backward()
        return loss.detach(), [p.grad.clone() for p in model.parameters()]

    loss, grads = run([])
    loss2, grads2 = run([recompute_transform(names)])
    assert torch.equal(loss, loss2)
    assert all(torch.equal(a, b) for a, b in zip(grads, grads2))


def test_budget_mode_is_monotone_in_the_budget(thunder):
    import peakmem

    entry = _entry("gpt_lm_loss_inside")
    model, inputs = _fresh(entry)
    full = peakmem.estimate_step(model, *inputs, plan={"recompute": True}).recomputation
    lowest, highest = full.peak_after, full.peak_before
    budgets = [lowest, (lowest + highest) // 2, highest]
    results = [peakmem.estimate_step(model, *inputs, plan={"budget": b}).recomputation for b in budgets]
    assert not full.time_budget_reached and not full.simulation_limit_reached
    for b, r in zip(budgets, results):
        assert r.fits and r.peak_after <= b
    flops = [r.added_flops for r in results]
    assert flops == sorted(flops, reverse=True)  # more room, less recomputation
    assert results[-1].names == () and results[-1].added_flops == 0
    # One sequence of choices: a larger budget stops earlier along it.
    assert [s[0] for s in results[1].steps] == [s[0] for s in results[0].steps][: len(results[1].steps)]
    # Below what recomputation reaches, it says it does not fit.
    below = peakmem.estimate_step(model, *inputs, plan={"budget": lowest - 1}).recomputation
    assert below.fits is False and below.peak_after == lowest


def test_recompute_bad_options_and_plans_are_errors(thunder):
    import torch

    import peakmem
    from peakmem.recompute import recompute_transform

    model, inputs = GPT(), (torch.randint(0, 512, (2, 128)), torch.randint(0, 512, (2, 128)))
    with pytest.raises(ValueError, match="do not apply with recompute"):
        peakmem.estimate_step(model, *inputs, plan={"recompute": True, "scratch": False})
    with pytest.raises(Exception, match="cannot recompute t_nope"):
        thunder.jit(model, transforms=[recompute_transform(["t_nope"])])(*inputs)


def test_search_frees_are_thunders_own(thunder):
    """The search places frees itself (recompute.Frees, reusing its del
    statements); they must be exactly where Thunder's del_last_used puts
    them, in the forward and in the backward (with collections cleared)."""
    from thunder.executors.passes import del_last_used

    from peakmem import recompute

    def statements(trace):
        return [(b.sym.name, [p.name for p in b.flat_proxy_outs], [p.name for p in b.flat_proxy_args])
                for b in trace.bound_symbols]

    entry = _entry("gpt_lm_loss_inside")
    model, inputs = _fresh(entry)
    jm = thunder.jit(model)
    jm(*inputs)
    fw, bw = thunder.last_traces(jm)[-1], thunder.last_backward_traces(jm)[-1]
    pool = recompute.candidates(fw)
    assert len(pool) >= 3
    frees = recompute.Frees()
    for names in ([], [pool[0].name], [c.name for c in pool[:3]], [c.name for c in pool]):
        ours = recompute.rewrite(fw, bw, names, frees=frees)
        kept, order = recompute._plan(fw, names)
        thunders = (recompute.rewrite_forward(fw, kept, del_last_used),
                    recompute.rewrite_backward(fw, bw, kept, order, del_last_used))
        for a, b in zip(ours, thunders):
            assert any(s[0] == "python_del" for s in statements(a))
            assert statements(a) == statements(b)
