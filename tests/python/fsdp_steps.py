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


def _gpt(accumulation_steps: int = 1, **fsdp) -> Callable[[], tuple]:
    def make():
        torch.manual_seed(0)
        return GPT(), _tokens(), {**ADAMW, "parallelize": per_block(lambda m: m.blocks, **fsdp),
                                  "accumulation_steps": accumulation_steps}

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
    # Gradient accumulation: set_requires_gradient_sync(False) but for the
    # last micro-batch, whose reduce-scatter makes the sharded gradients;
    # the unsharded ones are kept in between.
    "gpt_lm_adamw_accumulating_2": _gpt(accumulation_steps=2),
    "gpt_lm_adamw_accumulating_4": _gpt(accumulation_steps=4),
    "gpt_lm_adamw_bf16_fp32": _gpt(mp_policy=BF16_FP32),
    "hf_llama_adamw": _llama(),
    "hf_llama_adamw_no_reshard": _llama(reshard_after_forward=False),
    "hf_llama_adamw_bf16_fp32": _llama(mp_policy=BF16_FP32),
}
WORLD_SIZES = (2, 4)
THREADS = 1  # each rank's intra-op threads (the CPU kernels' scratch depends on them)


def _llama_plan():
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel

    # torchtitan's plan for a Llama block: the attention heads and the MLP's
    # hidden units split across the tensor-parallel ranks.
    return {"self_attn.q_proj": ColwiseParallel(), "self_attn.k_proj": ColwiseParallel(),
            "self_attn.v_proj": ColwiseParallel(), "self_attn.o_proj": RowwiseParallel(),
            "mlp.gate_proj": ColwiseParallel(), "mlp.up_proj": ColwiseParallel(),
            "mlp.down_proj": RowwiseParallel()}


def _gpt_plan():
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel

    # Megatron's MLP split: the hidden units across the tensor-parallel
    # ranks. (The block's attention projects q, k and v in one fused
    # Linear that its forward splits by the model width: a column split of
    # it would split that width, so it stays whole on every rank.)
    return {"c_fc": ColwiseParallel(), "c_proj2": RowwiseParallel()}


def two_d(blocks: Callable, plan: Callable, tp: int) -> Callable:
    """FSDP2 over the data-parallel ranks and tensor parallelism of `tp`
    by `plan()` on each of `blocks(model)`, on a 2-D mesh (world size / tp
    by tp), as torchtitan composes them."""
    def parallelize(model):
        import torch.distributed as dist
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.tensor.parallel import parallelize_module

        mesh = init_device_mesh("cpu", (dist.get_world_size() // tp, tp), mesh_dim_names=("dp", "tp"))
        for block in blocks(model):
            parallelize_module(block, mesh["tp"], plan())
            fully_shard(block, mesh=mesh["dp"])
        fully_shard(model, mesh=mesh["dp"])

    return parallelize


def _llama_2d(tp: int):
    def make():
        model, kwargs = eager_models.llama("cpu")
        return model, (), {"kwinputs": kwargs, **ADAMW,
                           "parallelize": two_d(lambda m: m.model.layers, _llama_plan, tp)}

    return make


def _gpt_2d(tp: int):
    def make():
        torch.manual_seed(0)
        return GPT(), _tokens(), {**ADAMW, "parallelize": two_d(lambda m: m.blocks, _gpt_plan, tp)}

    return make


STEPS["gpt_lm_adamw_fsdp_tp2"] = _gpt_2d(2)
STEPS["hf_llama_adamw_fsdp_tp2"] = _llama_2d(2)
