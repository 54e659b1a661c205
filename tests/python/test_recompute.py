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
def test_recomputed_step_is_measured_as_estimated(thunder, monkeypatch, name: str):
    """The search's choice, estimated, then given by its names
    (recompute=names: no search again) to estimate_step, which simulates
    the same step, and to measure_step, which runs it."""
    import peakmem
    from peakmem import recompute

    entry = _entry(name)
    model, inputs = _fresh(entry)
    plain = peakmem.estimate_step(model, *inputs, loss_fn=entry.loss_fn, **entry.setup, frontend="thunder")
    planned = peakmem.estimate_step(model, *inputs, loss_fn=entry.loss_fn, recompute=True,
                                    **entry.setup, frontend="thunder")
    rc = planned.recomputation
    assert rc.peak_before == plain.peak_bytes and rc.peak_after == planned.peak_bytes
    assert planned.peak_bytes <= plain.peak_bytes
    if name != "mlp_adamw_3_steps":  # its peak is the optimizer's: nothing to recompute there
        assert planned.peak_bytes < plain.peak_bytes and rc.names and rc.added_flops > 0

    def no_search(*args, **kwargs):
        raise AssertionError("recompute=names searched")

    monkeypatch.setattr(recompute, "search", no_search)
    given = peakmem.estimate_step(model, *inputs, loss_fn=entry.loss_fn, recompute=list(rc.names),
                                  **entry.setup, frontend="thunder")
    assert (given.peak_bytes, given.final_bytes) == (planned.peak_bytes, planned.final_bytes)
    g = given.recomputation
    assert (g.names, g.added_flops, g.peak_before, g.peak_after) == (rc.names, rc.added_flops, rc.peak_before,
                                                                     rc.peak_after)
    measured = peakmem.measure_step(model, *inputs, loss_fn=entry.loss_fn, recompute=rc.names,
                                    **entry.setup, frontend="thunder")
    assert (measured.peak_bytes, measured.final_bytes) == (planned.peak_bytes, planned.final_bytes)


def test_recomputation_computes_the_same_loss_and_gradients(thunder):
    import torch

    import peakmem
    from peakmem.recompute import recompute_transform

    entry = _entry("gpt_lm_loss_inside")
    model, inputs = _fresh(entry)
    names = peakmem.estimate_step(model, *inputs, recompute=True, frontend="thunder").recomputation.names
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
    full = peakmem.estimate_step(model, *inputs, recompute=True, frontend="thunder").recomputation
    lowest, highest = full.peak_after, full.peak_before
    budgets = [lowest, (lowest + highest) // 2, highest]
    results = [peakmem.estimate_step(model, *inputs, recompute=b,
                                     frontend="thunder").recomputation for b in budgets]
    assert not full.time_budget_reached and not full.simulation_limit_reached
    for b, r in zip(budgets, results):
        assert r.fits and r.peak_after <= b
    flops = [r.added_flops for r in results]
    assert flops == sorted(flops, reverse=True)  # more room, less recomputation
    assert results[-1].names == () and results[-1].added_flops == 0
    # One sequence of choices: a larger budget stops earlier along it.
    assert [s[0] for s in results[1].steps] == [s[0] for s in results[0].steps][: len(results[1].steps)]
    # Below what the cheap candidates reach, the rounds go on over the
    # regions too (recompute_search.h's expensive tier), after the same
    # cheap choices.
    below = peakmem.estimate_step(model, *inputs, recompute=lowest - 1, frontend="thunder").recomputation
    assert below.fits and below.peak_after < lowest
    assert [s[0] for s in below.steps][: len(full.steps)] == [s[0] for s in full.steps]
    assert below.steps[len(full.steps)][0].endswith("+")
    # Below what any recomputation reaches, it says it does not fit.
    floor = peakmem.estimate_step(model, *inputs, recompute=1, frontend="thunder").recomputation
    assert floor.fits is False and floor.peak_after <= below.peak_after


def test_recompute_bad_options_and_plans_are_errors(thunder):
    import torch

    import peakmem
    from peakmem.recompute import recompute_transform

    model, inputs = GPT(), (torch.randint(0, 512, (2, 128)), torch.randint(0, 512, (2, 128)))
    with pytest.raises(ValueError, match="do not apply with recompute"):
        peakmem.estimate_step(model, *inputs, plan={"recompute": True, "scratch": False}, frontend="thunder")
    with pytest.raises(Exception, match="cannot recompute t_nope"):
        thunder.jit(model, transforms=[recompute_transform(["t_nope"])])(*inputs)
    with pytest.raises(ValueError, match="cannot recompute t_nope"):
        peakmem.estimate_step(model, *inputs, recompute=["t_nope"], frontend="thunder")


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


def _statements(text: str, backward: bool) -> list[str]:
    """A printed trace's statements (no comments or blank lines), with the
    names Thunder's printer gives objects it cannot print (numbered per
    printing) made equal; for a backward, without its prologue's lines for
    saved_for_backward and C1, which Thunder's own backward orders otherwise
    than recompute.rewrite_backward builds it."""
    import re

    out = []
    for line in text.splitlines():
        s = line.strip()
        if not s or s.startswith("#") or (backward and ("C1" in s or "saved_for_backward" in s)):
            continue
        out.append(re.sub(r"\b(_[A-Za-z_]+?)_\d+\b", r"\1_N", s))
    return out


@pytest.mark.parametrize("name, measure", [("gpt_lm_loss_inside", False), ("llama_block", True)])
def test_cli_recompute_is_the_estimates_recomputation(thunder, tmp_path, monkeypatch, name: str, measure: bool):
    """`peakmem plan STEP.json --recompute` on an exported step chooses what
    estimate_step(recompute=True) chooses (one search, in C++,
    judged by the same simulation: the CLI's of the rewritten printed
    traces, Python's of the rewritten TraceCtx's), writes the statements
    Python's rewrite makes, and its step file simulates to the peak
    measure_step measures running the plan."""
    import json
    import subprocess

    import peakmem
    from conftest import cli
    from peakmem import recompute

    entry = _entry(name)
    model, inputs = _fresh(entry)
    step, planned_step = tmp_path / "step.json", tmp_path / "planned.json"
    peakmem.export_step(model, *inputs, path=str(step), loss_fn=entry.loss_fn, **entry.setup, frontend="thunder")
    run = subprocess.run([cli(), "plan", str(step), "--recompute", "-o", str(planned_step)],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    traces = []
    search = recompute.search

    def keeping_traces(*args, **kwargs):
        out = search(*args, **kwargs)
        traces.append(out[1:])
        return out

    monkeypatch.setattr(recompute, "search", keeping_traces)
    planned = peakmem.estimate_step(model, *inputs, loss_fn=entry.loss_fn, recompute=True, **entry.setup,
                                    frontend="thunder")
    rc = planned.recomputation
    assert rc.names
    assert (f"step peak {rc.peak_before} -> {rc.peak_after} bytes" in run.stderr
            and f"recomputed {len(rc.names)} values ({', '.join(rc.names)}), added FLOPs {rc.added_flops}; "
                f"{rc.simulations} simulations" in run.stderr), run.stderr
    for (n, peak, flops) in rc.steps:
        assert f"  {n:<14} peak {peak} bytes, +{flops} FLOPs" in run.stderr
    written = json.loads(planned_step.read_text())
    (fw, bw), = traces
    assert _statements(written["forward"]["trace"], False) == _statements(str(fw), False)
    assert _statements(written["backward"]["trace"], True) == _statements(str(bw), True)
    simulated = subprocess.run([cli(), "step", str(planned_step), "--format", "json"], capture_output=True, text=True,
                               timeout=300)
    assert simulated.returncode == 0, simulated.stderr
    assert json.loads(simulated.stdout)["peak_bytes"] == rc.peak_after == planned.peak_bytes
    if measure:
        measured = peakmem.measure_step(model, *inputs, loss_fn=entry.loss_fn, recompute=rc.names,
                                        **entry.setup, frontend="thunder")
        assert measured.peak_bytes == rc.peak_after
    # With a budget between the two peaks: the same shorter choice.
    budget = (rc.peak_before + rc.peak_after) // 2
    short = peakmem.estimate_step(model, *inputs, loss_fn=entry.loss_fn, recompute=budget,
                                  **entry.setup, frontend="thunder").recomputation
    run = subprocess.run([cli(), "plan", str(step), "--recompute", "--budget", f"{budget}B", "-o",
                          str(planned_step)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert f"-> {short.peak_after} bytes" in run.stderr and f"({', '.join(short.names)})" in run.stderr, run.stderr
    assert f"budget {budget} bytes: fits" in run.stderr
    # export_step(recompute=...) writes the step file the CLI wrote: the same statements and saved tensors.
    exported = peakmem.export_step(model, *inputs, loss_fn=entry.loss_fn, recompute=budget, **entry.setup,
                                   frontend="thunder")
    written = json.loads(planned_step.read_text())
    assert exported["forward"]["saved"] == written["forward"]["saved"]
    for part, backward in (("forward", False), ("backward", True)):
        assert _statements(exported[part]["trace"], backward) == _statements(written[part]["trace"], backward)
