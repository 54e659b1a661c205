"""FSDP2 (``fully_shard``) steps on the eager front end: the models, inputs,
step options and wrappings that scripts/measure_distributed_steps.py
measures as real gloo ranks and tests/python/test_fully_sharded.py
estimates in one process.

Each entry makes ``(model, inputs, options)`` on the CPU from seed 0 (every
rank the same model and batch); ``options["parallelize"]`` is the training
script's own wrapping, as FSDP2's documentation and torchtitan write it:
``fully_shard`` on each transformer block, then on the root."""

from __future__ import annotations

from typing import Callable

import torch
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

import eager_models
from step_models import GPT, MLP, _tokens, mse_loss

ADAMW = {"optimizer": torch.optim.AdamW}
# bf16 parameters in the forward and backward, gradients reduced in fp32.
BF16_FP32 = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)


def per_block(blocks: Callable, **options) -> Callable:
    """fully_shard on each of `blocks(model)`, then on the model."""
    def parallelize(model):
        for block in blocks(model):
            fully_shard(block, **options)
        fully_shard(model, **options)

    return parallelize


def _mlp(steps: int) -> Callable[[], tuple]:
    def make():
        torch.manual_seed(0)
        return MLP(), (torch.randn(64, 256),), {"loss_fn": mse_loss, **ADAMW, "steps": steps}

    return make


def _gpt(**fsdp) -> Callable[[], tuple]:
    def make():
        torch.manual_seed(0)
        return GPT(), _tokens(), {**ADAMW, "parallelize": per_block(lambda m: m.blocks, **fsdp)}

    return make


def _llama(**fsdp) -> Callable[[], tuple]:
    def make():
        model, kwargs = eager_models.llama("cpu")
        return model, (), {"kwinputs": kwargs, **ADAMW,
                           "parallelize": per_block(lambda m: m.model.layers, **fsdp)}

    return make


STEPS: dict[str, Callable[[], tuple]] = {
    # The root only (the MLP has no blocks): peakmem's default wrapping.
    "mlp_adamw": _mlp(1),
    "mlp_adamw_3_steps": _mlp(3),
    "gpt_lm_adamw": _gpt(),
    # Each block's parameters stay gathered from its forward to its backward.
    "gpt_lm_adamw_no_reshard": _gpt(reshard_after_forward=False),
    "gpt_lm_adamw_bf16_fp32": _gpt(mp_policy=BF16_FP32),
    "hf_llama_adamw": _llama(),
    "hf_llama_adamw_no_reshard": _llama(reshard_after_forward=False),
    "hf_llama_adamw_bf16_fp32": _llama(mp_policy=BF16_FP32),
}
WORLD_SIZES = (2, 4)
THREADS = 1  # each rank's intra-op threads (the CPU kernels' scratch depends on them)
