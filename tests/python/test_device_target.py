"""estimate_step(..., device="cuda"): a step sized for the GPU from a
laptop (peakmem.step.device_target). Each figure below is derived by hand
from the model's shapes and PyTorch's CUDA code paths, in its comment; the
cuBLAS workspaces are the H200 run's measurement (docs/gpu-check.md)."""

from __future__ import annotations

import pytest
import torch

import peakmem

# 8 Linear(1024, 1024) layers: 8 * (1024 * 1024 + 1024) float32 elements.
PARAM_BYTES = 8 * (1024 * 1024 + 1024) * 4  # 33,587,200
LOSS_BYTES = 4  # the 0-d float32 loss, alive until the step returns
# cuBLAS's sm90 workspace (4096 KiB * 8) and cuBLASLt's 1 MiB, kept from the
# first matrix product: 34,603,008 bytes allocated after an H200 warm-up.
WORKSPACES = 33_554_432 + 1_048_576


def _mlp():
    return torch.nn.Sequential(*[torch.nn.Linear(1024, 1024) for _ in range(8)]).to("meta")


def _estimate(device=None, **optimizer_kwargs):
    x = torch.empty(64, 1024, device="meta")
    return peakmem.estimate_step(_mlp(), x, loss_fn=lambda out, x: out.sum(), optimizer=torch.optim.AdamW,
                                 optimizer_kwargs=optimizer_kwargs or None, frontend="eager", device=device,
                                 steps=1)  # the first step's figures, derived by hand below


def test_a_cuda_target_runs_foreach_adamw_and_keeps_cublas_workspaces():
    cpu = _estimate()
    cuda = _estimate("cuda:h100")
    assert (cpu.device, cuda.device) == ("cpu", "cuda:h100")
    # On the CPU (and meta) AdamW runs its for-loop: one parameter's
    # temporaries at a time. On CUDA PyTorch picks foreach, whose
    # _foreach_sqrt(exp_avg_sqs) makes one tensor per parameter before the
    # kernel runs: every parameter's bytes at once, beside the loss.
    assert cuda.by_category["temporaries"] == PARAM_BYTES + LOSS_BYTES
    assert cpu.by_category["temporaries"] < PARAM_BYTES // 2
    # exp_avg and exp_avg_sq per parameter on the device; Adam's step
    # counters are CPU tensors on CUDA (not capturable, not fused).
    assert cuda.by_category["optimizer_state"] == 2 * PARAM_BYTES
    assert cpu.by_category["optimizer_state"] == 2 * PARAM_BYTES + 16 * 4
    assert cuda.by_category["workspaces"] == WORKSPACES and cpu.by_category["workspaces"] == 0
    assert any("host memory" in d for d in cuda.report.diagnostics)
    # The rest of the step is the same on both: parameters, the input,
    # gradients, no activations at the peak (the optimizer's).
    for key in ("parameters", "inputs", "gradients", "activations"):
        assert cuda.by_category[key] == cpu.by_category[key]
    assert cuda.peak_bytes == sum(cuda.by_category.values())
    # What stays allocated after the step: parameters, input, state and
    # the workspaces (gradients set to None).
    assert cuda.final_bytes == PARAM_BYTES + 64 * 1024 * 4 + 2 * PARAM_BYTES + WORKSPACES


def test_the_users_choice_of_implementation_holds_on_cuda():
    # foreach=False: the for-loop's temporaries, as on the CPU, less the
    # number its `exp_avg_sq.sqrt() / bias_correction2_sqrt` wraps on the
    # CPU (a double, 8 bytes, cast to float32, 4) and CUDA does not.
    loop = _estimate("cuda", foreach=False)
    assert loop.by_category["temporaries"] == _estimate().by_category["temporaries"] - 12
    # fused=True (refused by torch on meta, accepted for a CUDA target): the
    # fused kernel allocates nothing but the loss stays; its step counters
    # are device tensors, 4 bytes each.
    fused = _estimate("cuda", fused=True)
    assert fused.by_category["temporaries"] == LOSS_BYTES
    assert fused.by_category["optimizer_state"] == 2 * PARAM_BYTES + 16 * 4


def test_an_unknown_device_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown device 'tpu'.*cuda:h100"):
        _estimate("tpu")


def test_analyze_predicts_a_cpu_trace_for_a_gpu():
    # torch.mul(a, 2.0) on f32[4]: the CPU wraps the number (8 bytes) and
    # casts it (4) inside the op, beside a and the output (16 each): 44.
    # CUDA keeps the number on the host: 32.
    text = ('def f(a):\n  # a: "cpu f32[4]"\n  t0 = torch.mul(a, 2.0)  # t0: "cpu f32[4]"\n  return t0\n')
    assert peakmem.analyze(text, convention="forward").peak_bytes == 44
    assert peakmem.analyze(text, convention="forward", device="cuda").peak_bytes == 32
    with pytest.raises(ValueError, match="unknown device"):
        peakmem.analyze(text, device="gpu")


def test_a_7b_llama_sized_for_an_h100_from_meta():
    # Llama-2-7B's shapes on meta, one AdamW step at sequence 2048, for an
    # H100. By hand, with P the trainable parameters' bytes (float32):
    # gradients P; optimizer state 2P (exp_avg, exp_avg_sq; the step
    # counters are host memory); at the optimizer's peak foreach's
    # _foreach_sqrt holds P more (one (device, dtype) group), beside the
    # 4-byte loss; cuBLAS's and cuBLASLt's workspaces from the first matmul.
    transformers = pytest.importorskip("transformers")
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(transformers.LlamaConfig())
    trainable = sum(p.numel() * p.element_size() for p in model.parameters() if p.requires_grad)
    ids = torch.zeros(1, 2048, dtype=torch.int64, device="meta")
    r = peakmem.estimate_step(model, kwinputs={"input_ids": ids, "labels": ids}, optimizer=torch.optim.AdamW,
                              frontend="eager", device="cuda:h100", steps=1)
    assert r.phase_at_peak.startswith("optimizer")
    at_peak = r.by_category
    assert at_peak["gradients"] == trainable
    assert at_peak["optimizer_state"] == 2 * trainable
    assert at_peak["temporaries"] == trainable + LOSS_BYTES
    assert at_peak["workspaces"] == WORKSPACES
    assert r.peak_bytes == sum(at_peak.values())
    # float32 attention without a mask on an H100: cuDNN and flash take
    # fp16/bf16 only, so the memory-efficient kernel, in every layer; its
    # workspaces are named as not counted.
    assert any("scaled_dot_product_attention (32 on efficient)" in d for d in r.report.diagnostics)


def _saved(record) -> list[tuple[int, str]]:
    """(bytes, what made it) of the recording's storages the forward saved."""
    from peakmem.step.eager import CATEGORIES

    return [(s[0], s[1]) for s in record.storages if CATEGORIES[s[2]] == "activations"]


def test_dropout_saves_cudas_bool_mask_on_a_cuda_target():
    # Dropout(0.1) on a float32 [64, 256] (65,536 bytes) in training: the
    # CPU's _dropout_impl saves its noise in float32 (65,536 bytes, made by
    # empty_like and filled by bernoulli_); CUDA's native_dropout saves a
    # bool mask (16,384 bytes). Both save the output the next layer reads.
    from peakmem.step.device_target import device_target
    from peakmem.step.eager import record_step

    model = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.Dropout(0.1), torch.nn.Linear(256, 256)).to("meta")
    x = torch.empty(64, 256, device="meta")
    cpu = _saved(record_step(model, x, loss_fn=lambda out, x: out.sum(), target=device_target("cpu", model)))
    cuda = _saved(record_step(model, x, loss_fn=lambda out, x: out.sum(), target=device_target("cuda", model)))
    assert (65536, "1: aten.empty_like.default") in cpu
    assert not any("native_dropout" in what for _, what in cpu)
    assert sorted(b for b, what in cuda if "native_dropout" in what) == [16384, 65536]
    assert not any("empty_like" in what for _, what in cuda)


def test_what_a_cuda_target_does_not_model_yet_is_named():
    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = torch.nn.RMSNorm(64)

        def forward(self, q):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                y = torch.nn.functional.scaled_dot_product_attention(q, q, q)
            return self.norm(y)

    q = torch.empty(1, 2, 16, 64, device="meta", requires_grad=True)
    with pytest.warns(UserWarning):  # torch: autocast("cuda") is off without CUDA
        r = peakmem.estimate_step(Block().to("meta"), q, loss_fn=lambda out, q: out.sum(), frontend="eager",
                                  device="cuda", steps=1)
    said = "\n".join(r.report.diagnostics)
    assert "scaled_dot_product_attention (1 on efficient)" in said
    assert "F.rms_norm (1 calls)" in said
    assert "torch.autocast('cuda') (1 regions)" in said


def _qkv(dtype=torch.bfloat16, b=2, h=4, s=256, d=64, hk=None):
    q = torch.empty(b, h, s, d, device="meta", dtype=dtype, requires_grad=True)
    k = torch.empty(b, hk or h, s, d, device="meta", dtype=dtype, requires_grad=True)
    return q, k, torch.empty_like(k, requires_grad=True)


@pytest.mark.parametrize("case, arch, expected", [
    # By torch 2.13's select_sdp_backend (peakmem.step.cuda_attention):
    # sm90 tries cuDNN first; bf16 without a mask qualifies.
    ("bf16", 90, "cudnn"),
    # sm80 keeps the default order: flash first.
    ("bf16", 80, "flash"),
    # float32: neither cuDNN nor flash (fp16/bf16 only); memory-efficient.
    ("f32", 90, "efficient"),
    # float32 head dim 6: not a multiple of 4, so not memory-efficient either.
    ("f32 d6", 90, "math"),
    # A 3-D mask: cuDNN takes 2-D or 4-D ones, flash none: memory-efficient.
    ("bf16 mask3d", 90, "efficient"),
    # Grouped heads with a mask on an A100: flash takes no mask, 2.13's
    # memory-efficient kernel no grouped heads: math.
    ("bf16 gqa mask", 80, "math"),
])
def test_the_attention_backend_is_cudas(case, arch, expected):
    from peakmem.step.cuda_attention import backend

    q, k, v = _qkv(torch.float32 if case.startswith("f32") else torch.bfloat16, d=6 if "d6" in case else 64,
                   hk=2 if "gqa" in case else None)
    mask = None
    if "mask3d" in case:
        mask = torch.empty(4, 256, 256, device="meta", dtype=torch.bool)
    if "gqa mask" in case:
        mask = torch.empty(256, 256, device="meta", dtype=torch.bool)
    assert backend(q, k, v, mask, 0.0, False, "gqa" in case, arch) == expected


def test_fused_attention_saves_no_attention_matrix_on_a_cuda_target():
    # A causal float32 attention, q/k/v [2, 4, 256, 64] from one Linear:
    # the memory-efficient kernel saves its output (2*256*4*64*4 = 524,288
    # bytes) and log-sum-exp [2, 4, ceil(256/32)*32] in float32 (8,192);
    # its philox seed and offset are CPU tensors (host memory). The math
    # kernel, which meta would run, saves the [2, 4, 256, 256] float32
    # attention (2,097,152 bytes) instead.
    from peakmem.step.device_target import device_target
    from peakmem.step.eager import record_step

    class Attention(torch.nn.Module):
        def __init__(self, d=256, heads=4):
            super().__init__()
            self.qkv, self.heads = torch.nn.Linear(d, 3 * d), heads

        def forward(self, x):
            B, T, C = x.shape
            q, k, v = self.qkv(x).split(C, 2)
            q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)

    model, x = Attention().to("meta"), torch.empty(2, 256, 256, device="meta")
    record = record_step(model, x, loss_fn=lambda out, x: out.sum(), target=device_target("cuda", model))
    saved = _saved(record)
    attention = sorted(b for b, what in saved if "efficient_attention" in what)
    assert attention == [0, 0, 8192, 524288]
    assert not any(b == 2_097_152 for b, _ in saved)


def test_fused_adamw_on_the_cpu_is_estimated_as_it_runs():
    # The CPU has fused AdamW kernels; meta, which the recording runs on,
    # had none, and torch refused fused=True there. Now the estimate runs
    # it as the CPU does: equal to the step measured on the CPU.
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
    step = {"loss_fn": lambda out, x: out.sum(), "optimizer": torch.optim.AdamW,
            "optimizer_kwargs": {"fused": True}, "frontend": "eager", "steps": 2}
    x = torch.randn(16, 64)
    estimated, measured = peakmem.estimate_step(model, x, **step), peakmem.measure_step(model, x, **step)
    assert (estimated.peak_bytes, estimated.final_bytes) == (measured.peak_bytes, measured.final_bytes)


def test_thunders_optimizer_program_is_cudas_choice_on_a_cuda_target():
    # torch.optim.optimizer._default_to_fused_or_foreach: CUDA parameters
    # get foreach unless the user chose (foreach=False) or differentiable.
    from peakmem.optimizer_program import resolve_optimizer

    assert resolve_optimizer(torch.optim.AdamW, {}, cuda=True).group["foreach"] is True
    assert resolve_optimizer(torch.optim.AdamW, {}).group["foreach"] is None  # the CPU: the for-loop
    assert resolve_optimizer(torch.optim.AdamW, {"foreach": False}, cuda=True).group["foreach"] is False
    assert resolve_optimizer(torch.optim.SGD, {"lr": 0.1}, cuda=True).group["foreach"] is True
