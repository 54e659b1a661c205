"""DistributedDataParallel steps on the eager front end: the models, inputs
and step options that scripts/measure_distributed_steps.py --strategy ddp measures as real gloo
ranks and tests/python/test_data_parallel.py estimates in one process.

Each entry makes ``(model, inputs, options)`` on the CPU from seed 0 (every
rank the same model and, here, the same batch: DDP's memory does not
depend on the batch's values)."""

from __future__ import annotations

from typing import Callable

import torch

import eager_models
from step_models import GPT, MLP, _tokens, mse_loss

ADAMW = {"optimizer": torch.optim.AdamW}


def _mlp(steps: int) -> Callable[[], tuple]:
    def make():
        torch.manual_seed(0)
        return MLP(), (torch.randn(64, 256),), {"loss_fn": mse_loss, **ADAMW, "steps": steps}

    return make


def _gpt(**more) -> Callable[[], tuple]:
    def make():
        torch.manual_seed(0)
        return GPT(), _tokens(), {**ADAMW, **more}

    return make


def _hf(family: str, options: dict) -> Callable[[], tuple]:
    def make():
        model, kwargs = getattr(eager_models, family)("cpu")
        return model, (), {"kwinputs": kwargs, **options}

    return make


STEPS: dict[str, Callable[[], tuple]] = {
    "mlp_adamw": _mlp(1),
    # The second step rebuilds the buckets in the order the gradients came
    # (reducer.cpp rebuild_buckets): two buckets (the first capped at 1 MiB)
    # in place of the constructor's one.
    "mlp_adamw_3_steps": _mlp(3),
    "gpt_lm_adamw": _gpt(),
    # Gradient accumulation: the first micro-batches in no_sync(), their
    # gradients kept in .grad; the last one's reduced through the buckets.
    "gpt_lm_adamw_accumulating_2": _gpt(accumulation_steps=2),
    "gpt_lm_adamw_accumulating_4": _gpt(accumulation_steps=4),
    "hf_llama_adamw": _hf("llama", ADAMW),
    # GPT-2's head is tied to its embedding: one parameter, one bucket slot.
    "hf_gpt2_sgd_momentum": _hf("gpt2", {"optimizer": torch.optim.SGD,
                                         "optimizer_kwargs": {"lr": 0.01, "momentum": 0.9}}),
}
WORLD_SIZES = (2, 4)
THREADS = 1  # each rank's intra-op threads (the CPU kernels' scratch depends on them)
