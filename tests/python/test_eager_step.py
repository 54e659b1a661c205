"""The eager front end (peakmem.step.eager): a step recorded as eager PyTorch
runs it equals the step measured on the CPU to the byte, and the same
estimate comes from ``meta`` models.

The truth is ``measure_step(..., frontend="eager")``: the step run for real
on the CPU under the PyTorch profiler (peakmem.measure's walk), after a
warm-up step.
"""

from __future__ import annotations

import pytest
import torch

import peakmem
from eager_models import FAMILIES


def _estimate(model, kwargs, **options):
    return peakmem.estimate_step(model, kwinputs=kwargs, frontend="eager", **options)


# Every family with both optimizers: ViT's SGD step peaks inside the
# patch embedding's convolution_backward, whose grad_output arrives
# transposed (convolution_scratch.h: the copy oneDNN's backward makes).
STEPS = [(f, o) for f in sorted(FAMILIES) for o in ("adamw", "sgd")]
OPTIMIZERS = {"adamw": torch.optim.AdamW, "sgd": torch.optim.SGD}


@pytest.mark.parametrize("family,name", STEPS)
def test_a_transformers_step_is_exact_on_cpu_and_meta(family, name):
    optimizer = OPTIMIZERS[name]
    # AdamW's step peaks in the optimizer; plain SGD's in the backward,
    # where attention's saved tensors and autograd's frees decide the peak.
    model, kwargs = FAMILIES[family]("cpu")
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    estimate = _estimate(model, kwargs, optimizer=optimizer)
    # The estimate ran on meta stand-ins: the user's model is neither run nor changed.
    assert all(torch.equal(p, before[n]) and p.grad is None for n, p in model.named_parameters())
    measured = peakmem.measure_step(model, kwinputs=kwargs, optimizer=optimizer, frontend="eager")
    assert (estimate.peak_bytes, estimate.final_bytes) == (measured.peak_bytes, measured.final_bytes)
    meta_model, meta_kwargs = FAMILIES[family]("meta")
    on_meta = _estimate(meta_model, meta_kwargs, optimizer=optimizer)
    assert (on_meta.peak_bytes, on_meta.final_bytes) == (measured.peak_bytes, measured.final_bytes)
    # What the step holds before it runs, from torch: every distinct storage
    # of the parameters and buffers (GPT-2's head is its embedding), and the inputs.
    held = {p.untyped_storage().data_ptr(): p.untyped_storage().nbytes()
            for p in [*model.parameters(), *model.buffers()]}
    assert estimate.by_category["parameters"] == sum(held.values())
    assert sum(estimate.by_category.values()) == estimate.peak_bytes


def test_accumulated_steps_and_any_torch_optimizer_are_exact():
    # Two steps without zero_grad (the second adds into .grad) and RMSprop
    # with momentum, which Thunder's path does not model: the eager path
    # runs the optimizer itself.
    model, kwargs = FAMILIES["llama"]("cpu")
    options = dict(optimizer=torch.optim.RMSprop, optimizer_kwargs={"momentum": 0.9}, steps=2, zero_grad=False)
    estimate = _estimate(model, kwargs, **options)
    measured = peakmem.measure_step(model, kwinputs=kwargs, frontend="eager", **options)
    assert (estimate.peak_bytes, estimate.final_bytes) == (measured.peak_bytes, measured.final_bytes)
    # Left at the end: the parameters, their .grad and RMSprop's square_avg,
    # momentum_buffer and step for each, and the inputs.
    assert estimate.final_bytes > estimate.by_category["parameters"] * 3


def test_the_step_report_is_priced_and_written_like_a_traced_one():
    model, kwargs = FAMILIES["gpt2"]("meta")
    r = _estimate(model, kwargs, optimizer=torch.optim.AdamW, allocator="cuda-caching", budget="1GiB")
    assert r.fits and r.allocator["reserved_peak_bytes"] >= r.allocator["allocated_peak_bytes"] >= r.peak_bytes
    assert [p.name for p in r.report.phases] == ["forward", "backward", "optimizer"] * 2  # the steady state
    assert r.phase_at_peak in ("forward", "backward", "optimizer")
    html = r.write("html")
    assert 'class="phase"' in html and "aten.mm.default" in html
    text = r.write("text", at="peak")
    assert "optimizer_state" in text
    # A parameter's state and gradient are its module's.
    assert any(m.startswith("transformer.h.") for m in r.by_module)


def test_mistakes_are_named():
    model, kwargs = FAMILIES["gpt2"]("meta")
    with pytest.raises(TypeError, match="pass its class"):
        _estimate(model, kwargs, optimizer=torch.optim.AdamW(torch.nn.Linear(2, 2).parameters()))
    with pytest.raises(ValueError, match="need Thunder"):
        _estimate(model, kwargs, transform=lambda jm: jm)
    with pytest.raises(ValueError, match="needs frontend='eager'"):
        peakmem.estimate_step(model, kwinputs=kwargs, frontend="thunder")
    with pytest.raises(ValueError, match="frontend must be"):
        peakmem.estimate_step(model, kwinputs=kwargs, frontend="jax")


def test_a_7b_llama_from_transformers_on_meta():
    # Llama-2-7B's configuration (transformers' LlamaConfig defaults are its
    # shapes: 32 layers, hidden 4096, MLP 11008, 32 heads, vocab 32000),
    # float32 on meta, one AdamW step on a 2048-token sequence: 27 GB of
    # parameters nothing here allocates.
    import transformers

    transformers.logging.set_verbosity_error()
    config = transformers.LlamaConfig(max_position_embeddings=2048)
    with torch.device("meta"):
        model = transformers.LlamaForCausalLM(config)
    ids = torch.zeros(1, 2048, dtype=torch.int64, device="meta")
    r = _estimate(model, {"input_ids": ids, "labels": ids}, optimizer=torch.optim.AdamW)
    parameters = sum(p.numel() * p.element_size() for p in model.parameters())
    assert parameters == 6_738_415_616 * 4  # Llama-2-7B's parameter count, float32
    held = sum(b.untyped_storage().nbytes() for b in model.buffers()) + parameters
    assert r.by_category["parameters"] == held
    # At the peak, inside AdamW's step(): every gradient, and the state:
    # exp_avg and exp_avg_sq like each parameter, and a float32 0-d `step`
    # per parameter (torch/optim/adamw.py; 291 parameter tensors).
    assert r.phase_at_peak == "optimizer"
    assert r.by_category["gradients"] == parameters
    n = len(list(model.parameters()))
    assert r.by_category["optimizer_state"] == 2 * parameters + 4 * n
    assert r.peak_bytes > 4 * parameters


def test_a_model_thunder_cannot_trace_gets_thunders_reason_and_the_way_out():
    # transformers 5.25's GPT-2 is one of them (Thunder 0.2.6).
    model, kwargs = FAMILIES["gpt2"]("meta")

    class LanguageModelLoss(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, ids):
            return self.model(input_ids=ids, labels=ids).loss

    with pytest.raises(RuntimeError) as e:
        peakmem.estimate_step(LanguageModelLoss(), kwargs["input_ids"], optimizer=torch.optim.AdamW,
                              frontend="thunder")
    message = str(e.value)
    assert message.startswith("Thunder 0.2.6 could not trace the step: ")
    assert "while tracing LanguageModelLoss." in message and "frontend='eager'" in message
    assert len(message) < 400  # the module's repr is not in it


def test_the_largest_batch_of_an_eager_step():
    # GPT-2 on meta with AdamW: the largest batch whose step fits the peak
    # measured on the CPU at batch 3 is 3 (the peak grows with the batch:
    # the activations and the logits do), and a budget a byte smaller is 2.
    cpu_model, _ = FAMILIES["gpt2"]("cpu")
    ids = torch.zeros(3, 16, dtype=torch.int64)
    measured = peakmem.measure_step(cpu_model, kwinputs={"input_ids": ids, "labels": ids},
                                    optimizer=torch.optim.AdamW, frontend="eager").peak_bytes
    model, _ = FAMILIES["gpt2"]("meta")

    def batch(b):  # a fresh storage per size (a slice would hold the whole tensor's)
        tokens = torch.zeros(b, 16, dtype=torch.int64, device="meta")
        return {"input_ids": tokens, "labels": tokens}

    lines = []
    options = dict(optimizer=torch.optim.AdamW, frontend="eager", progress=lines.append)
    r = peakmem.max_batch_size(model, batch, measured, **options)
    assert (r.batch_size, r.report.peak_bytes, r.traces) == (3, measured, 0)
    assert any("recorded eagerly" in line for line in lines)
    smaller = peakmem.max_batch_size(model, batch, measured - 1, **options)
    assert smaller.batch_size == 2


def test_a_recorded_step_file_runs_in_the_cli(tmp_path):
    # export_step(frontend="eager") writes the record; `peakmem step` reads
    # it without Python and gives the measured step's numbers.
    import json
    import subprocess

    from conftest import cli

    model, kwargs = FAMILIES["llama"]("cpu")
    path = tmp_path / "llama.json"
    peakmem.export_step(model, kwinputs=kwargs, optimizer=torch.optim.SGD, frontend="eager", path=str(path))
    measured = peakmem.measure_step(model, kwinputs=kwargs, optimizer=torch.optim.SGD, frontend="eager")
    out = subprocess.run([cli(), "step", str(path), "--format", "json"], capture_output=True, text=True,
                         check=True).stdout
    report = json.loads(out)
    assert (report["peak_bytes"], report["final_bytes"]) == (measured.peak_bytes, measured.final_bytes)
    assert report["phase_at_peak"] == "backward"
    refused = subprocess.run([cli(), "step", str(path), "--steps", "2"], capture_output=True, text=True)
    assert refused.returncode == 1 and "fixed when it was recorded" in refused.stderr


_FIRST_IN_A_PROCESS = """
import json, torch, peakmem
class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = torch.nn.Linear(16, 32), torch.nn.Linear(32, 16)
    def forward(self, x):
        return self.b(torch.relu(self.a(x)) * 2.0)
torch.manual_seed(0)
model, x = torch.nn.Sequential(Block(), Block()), torch.randn(8, 16)
loss = lambda out, x: out.sum()
first = peakmem.estimate_step(model, x, loss_fn=loss, frontend="eager")
measured = peakmem.measure_step(model, x, loss_fn=loss, frontend="eager")
print(json.dumps([first.peak_bytes, first.final_bytes, measured.peak_bytes, measured.final_bytes]))
"""


def test_the_first_estimate_in_a_process_is_the_measured_step():
    # A fresh process, where torch._dynamo is not imported yet: the first
    # call of a function torch wraps with _disable_dynamo imports it, and
    # that import kept the call's arguments alive in a reference cycle, so
    # the first recording freed two addmm outputs late (2,048 bytes too
    # high). The truth is the measured step, after its warm-up.
    import json
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", _FIRST_IN_A_PROCESS], capture_output=True, text=True, check=True)
    peak, final, measured_peak, measured_final = json.loads(out.stdout.strip().splitlines()[-1])
    assert (peak, final) == (measured_peak, measured_final)


class _CheckpointedBlock(torch.nn.Module):
    """Two linears under torch.utils.checkpoint (non-reentrant), plain or
    with a selective-checkpoint policy that saves the matmuls' outputs."""

    def __init__(self, selective: bool):
        super().__init__()
        self.a, self.b = torch.nn.Linear(16, 32), torch.nn.Linear(32, 16)
        self.selective = selective

    def inner(self, x):
        return self.b(torch.relu(self.a(x)).sin())

    def forward(self, x):
        import functools

        from torch.utils.checkpoint import CheckpointPolicy, checkpoint, create_selective_checkpoint_contexts

        if not self.selective:
            return checkpoint(self.inner, x, use_reentrant=False)

        def policy(_ctx, op, *_args, **_kwargs):
            return CheckpointPolicy.MUST_SAVE if op == torch.ops.aten.addmm.default else CheckpointPolicy.PREFER_RECOMPUTE

        context = functools.partial(create_selective_checkpoint_contexts, policy)
        return checkpoint(self.inner, x, use_reentrant=False, context_fn=context)


@pytest.mark.parametrize("selective", [False, True], ids=["checkpoint", "selective"])
def test_a_checkpointed_step_is_the_measured_step(selective):
    # Checkpoint keeps the CPU generator's state (5,056 bytes here) from each
    # checkpointed call to its recomputation, and fork_rng takes another
    # around the recomputation: tensors made without an ATen call, which the
    # recording now takes in (on meta, fork_rng forks nothing, so it is run
    # as the CPU runs it). Before, the estimate was 7,828 bytes under the
    # measurement. The truth is the measured step.
    torch.manual_seed(0)
    model = torch.nn.Sequential(_CheckpointedBlock(selective), _CheckpointedBlock(selective))
    x = torch.randn(8, 16)

    def loss(out, x):
        return out.sum()

    estimate = peakmem.estimate_step(model, x, loss_fn=loss, frontend="eager")
    measured = peakmem.measure_step(model, x, loss_fn=loss, frontend="eager")
    assert (estimate.peak_bytes, estimate.final_bytes) == (measured.peak_bytes, measured.final_bytes)


@pytest.mark.parametrize("selective", [False, True], ids=["checkpoint", "selective"])
def test_checkpointed_attention_blocks_are_the_measured_step(selective):
    # GPT blocks whose forward runs under torch.utils.checkpoint: the
    # recomputation inside loss.backward() must take the attention kernel
    # the forward took (the CPU's flash kernel). Before, it took ATen's math
    # kernel on meta there, and checkpoint refused the recomputed tensors
    # (selective checkpointing: "aten.mul.Scalar encountered during
    # backward but not found in storage"). The truth is the measured step.
    import functools

    from step_models import GPT
    from torch.utils.checkpoint import CheckpointPolicy, checkpoint, create_selective_checkpoint_contexts

    def policy(_ctx, op, *_args, **_kwargs):
        saved = (torch.ops.aten.addmm.default, torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default)
        return CheckpointPolicy.MUST_SAVE if op in saved else CheckpointPolicy.PREFER_RECOMPUTE

    torch.manual_seed(0)
    model = GPT(vocab=64, dim=32, layers=2, seq=16)
    for block in model.blocks:
        context = functools.partial(create_selective_checkpoint_contexts, policy) if selective else None
        options = {"context_fn": context} if context else {}
        block.forward = functools.partial(checkpoint, block.forward, use_reentrant=False, **options)
    g = torch.Generator().manual_seed(0)
    idx, targets = (torch.randint(0, 64, (2, 16), generator=g) for _ in range(2))
    estimate = peakmem.estimate_step(model, idx, targets, frontend="eager")
    measured = peakmem.measure_step(model, idx, targets, frontend="eager")
    assert (estimate.peak_bytes, estimate.final_bytes) == (measured.peak_bytes, measured.final_bytes)


def test_attention_with_a_learned_bias_takes_the_kernel_the_cpu_takes():
    # A mask that requires grad (a learned attention bias, as T5's relative
    # positions): the CPU's flash kernel takes none, so the step runs the
    # math kernel. The stand-ins the choice is asked on carry requires_grad,
    # so the recording takes it too (it raised "not differentiable with
    # respect to argument 'attn_mask'" before), and the bias gets its grad.
    from peakmem.step.eager import record_step

    class Biased(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = torch.nn.Linear(64, 192)
            self.bias = torch.nn.Parameter(torch.zeros(1, 4, 32, 32))

        def forward(self, x):
            B, T, C = x.shape
            q, k, v = (t.view(B, T, 4, 16).transpose(1, 2) for t in self.qkv(x).split(C, 2))
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=self.bias).sum()

    record = record_step(Biased(), torch.randn(2, 32, 64))
    ops = [op for op, _, _ in record.statements]
    assert "aten._safe_softmax.default" in ops  # the math kernel's softmax
    assert not any("flash_attention" in op for op in ops)
    assert any(name == "grad of bias" for _, name, *_ in record.storages)


class _MaskedAtFirstCall(torch.nn.Module):
    """Makes its mask at its first call and keeps it (not a buffer): the
    training loop's steps hold it from then on."""

    def __init__(self):
        super().__init__()
        self.lin, self.mask = torch.nn.Linear(64, 64), None

    def forward(self, x):
        if self.mask is None:
            self.mask = torch.ones(x.shape[-2], x.shape[-2], device=x.device).triu(1)
        return (self.mask @ self.lin(x)).sum()


@pytest.mark.parametrize("optimizer", [None, torch.optim.AdamW])
def test_a_cache_made_at_the_first_call_is_held_by_the_step(optimizer):
    # The estimate records the first call, which makes the 32 x 32 float
    # mask (4,096 bytes) and keeps it; measure_step's warm-up step makes it
    # and the measured steps hold it: counted (it was 4,096 bytes under,
    # peak and final, while the warm-up's leftovers were not counted).
    torch.manual_seed(0)
    x = torch.randn(4, 32, 64)
    estimate = peakmem.estimate_step(_MaskedAtFirstCall(), x, optimizer=optimizer, frontend="eager")
    measured = peakmem.measure_step(_MaskedAtFirstCall(), x, optimizer=optimizer, frontend="eager")
    assert (estimate.peak_bytes, estimate.final_bytes) == (measured.peak_bytes, measured.final_bytes)
    # The same net making its mask at every call and dropping it: 4,096
    # bytes fewer held after the step.
    fresh = _MaskedAtFirstCall()
    fresh.forward = lambda x: (torch.ones(32, 32).triu(1) @ fresh.lin(x)).sum()
    dropped = peakmem.measure_step(fresh, x, optimizer=optimizer, frontend="eager")
    assert measured.final_bytes - dropped.final_bytes == 32 * 32 * 4
