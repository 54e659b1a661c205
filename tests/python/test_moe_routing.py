"""A mixture-of-experts step on meta, with its routing assumed
(peakmem.step.routing), against the same step run for real on the CPU
(measure_step, the profiler) with that routing made so: the estimate equals
the measurement to the byte.

The model is transformers' Mixtral with its eager experts path, which
routes by the top-k of the router's floating-point scores and runs each
expert on the tokens it gets (one_hot, nonzero, where): on meta those
scores have no values. Its 256 tokens (2 x 128) choose 2 of 4 experts
each, 512 choices. No optimizer: the step's peak then lies in the forward
and backward, where the routing decides what the experts allocate."""

from __future__ import annotations

import pytest
import torch

import peakmem
from eager_models import _built, _ids, _quiet_transformers

TOKENS, K, EXPERTS = 256, 2, 4


def mixtral(device: str, zero_router: bool = False):
    tf = _quiet_transformers()
    cfg = tf.MixtralConfig(num_hidden_layers=2, hidden_size=64, intermediate_size=1024, num_attention_heads=4,
                           num_key_value_heads=2, vocab_size=64, max_position_embeddings=128,
                           num_local_experts=EXPERTS, num_experts_per_tok=K, pad_token_id=0,
                           experts_implementation="eager")
    model = _built(device, lambda: tf.MixtralForCausalLM(cfg))
    if zero_router:
        with torch.no_grad():
            for layer in model.model.layers:
                layer.mlp.gate.weight.zero_()
    ids = _ids(device, 64, (2, 128))
    return model, {"input_ids": ids, "labels": ids}


def _estimate(routing, zero_router: bool = False):
    model, kwargs = mixtral("meta", zero_router)
    return peakmem.estimate_step(model, kwinputs=kwargs, frontend="eager", routing=routing)


def _measure(model, kwargs) -> tuple[int, int]:
    measured = peakmem.measure_step(model, kwinputs=kwargs, frontend="eager")
    return measured.peak_bytes, measured.final_bytes


def test_balanced_routing_is_a_real_step_routed_evenly():
    model, kwargs = mixtral("cpu")
    # Token t's choices are experts 2t mod 4 and 2t+1 mod 4: 128 tokens each.
    even = torch.arange(TOKENS * K).reshape(TOKENS, K) % EXPERTS
    assert torch.bincount(even.flatten()).tolist() == [128] * EXPERTS
    for layer in model.model.layers:
        gate, original = layer.mlp.gate, layer.mlp.gate.forward

        def forward(hidden_states, original=original):
            logits, scores, _ = original(hidden_states)
            # The router's own indices stay alive as long (autograd saves
            # them for topk's backward); `even` was made before the step.
            return logits, scores, even

        gate.forward = forward
    estimate = _estimate("balanced")
    assert (estimate.peak_bytes, estimate.final_bytes) == _measure(model, kwargs)
    assert sum("routing assumed (balanced, tokens per expert [128, 128, 128, 128])" in d
               for d in estimate.report.diagnostics) == 2  # one router per layer
    # The assumption decides the figure: routing every token to two experts is another step.
    assert _estimate("worst").peak_bytes != estimate.peak_bytes


def test_worst_routing_is_a_router_that_cannot_tell_experts_apart():
    # A zero router scores every expert alike; the CPU's topk then gives
    # every token the same two experts (2 and 3): 256 tokens each, the
    # worst case (which two does not matter: the experts are alike in size).
    model, kwargs = mixtral("cpu", zero_router=True)
    estimate = _estimate("worst", zero_router=True)
    assert (estimate.peak_bytes, estimate.final_bytes) == _measure(model, kwargs)
    assert any("routing assumed (worst, tokens per expert [256, 256, 0, 0])" in d for d in estimate.report.diagnostics)


def test_given_counts_are_each_router_calls_own():
    model, kwargs = mixtral("cpu")
    counts = []  # what each layer's router chose in the real forward
    hooks = [layer.mlp.gate.register_forward_hook(
        lambda _m, _i, out: counts.append(torch.bincount(out[2].flatten(), minlength=EXPERTS).tolist()))
        for layer in model.model.layers]
    with torch.no_grad():
        model(**kwargs)
    for h in hooks:
        h.remove()
    assert len(counts) == 2 and all(sum(c) == TOKENS * K for c in counts)
    estimate = _estimate(counts)
    assert (estimate.peak_bytes, estimate.final_bytes) == _measure(model, kwargs)


def test_a_step_that_reads_its_routing_names_the_router_without_an_assumption():
    model, kwargs = mixtral("meta")
    with pytest.raises(ValueError, match=r"(?s)aten.nonzero.*modeling_mixtral.py:\d+.*top-k at .*"
                                         r"modeling_mixtral.py:\d+ \(router_top_value.*routing='balanced'"):
        peakmem.estimate_step(model, kwinputs=kwargs, frontend="eager")


@pytest.mark.parametrize("routing, steps, message", [
    ("uniform", 1, "routing must be 'balanced', 'worst' or per-expert token counts, got 'uniform'"),
    ([1.5, 2], 1, "routing must be 'balanced', 'worst', a list of per-expert token counts"),
    ([128, 128, 128], 1, "router call 1 chooses among 4 experts; its counts name 3"),
    ([512, 0, 0, 0], 1, r"counts must sum to 512 with none above 256, got \[512, 0, 0, 0\]"),
    ([[128] * 4] * 2, 2, r"counts were given for 2 router calls; the step makes more \(call 3\)"),
    ([[128] * 4] * 3, 1, "counts were given for 3 router calls; the step made 2"),
])
def test_a_routing_that_does_not_fit_is_a_clear_error(routing, steps, message):
    model, kwargs = mixtral("meta")
    with pytest.raises(ValueError, match=message):
        peakmem.estimate_step(model, kwinputs=kwargs, frontend="eager", routing=routing, steps=steps)


def test_routing_is_the_eager_front_ends():
    with pytest.raises(ValueError, match="routing= assumes a mixture-of-experts router's choice on the eager"):
        peakmem.estimate_step(torch.nn.Linear(4, 4), torch.ones(2, 4), loss_fn=lambda out, x: out.sum(),
                              frontend="thunder", routing="balanced")


def test_a_real_model_is_recorded_with_the_routing_it_takes():
    # No routing=: the CPU model's own forward, under no_grad, gives each
    # router call's counts (and leaves the random generator as it was).
    model, kwargs = mixtral("cpu")
    rng = torch.get_rng_state()
    estimate = peakmem.estimate_step(model, kwinputs=kwargs, frontend="eager")
    assert torch.equal(torch.get_rng_state(), rng)
    assert (estimate.peak_bytes, estimate.final_bytes) == _measure(model, kwargs)
    assert estimate.report.diagnostics[0] == "routing read from one real forward of the model (2 router calls)"


def test_a_measured_step_routes_as_it_does():
    model, kwargs = mixtral("cpu")
    with pytest.raises(ValueError, match="measure_step runs the model's own router"):
        peakmem.measure_step(model, kwinputs=kwargs, frontend="eager", routing="balanced")
