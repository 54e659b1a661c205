"""Tensors a step makes without a device (a causal mask from
``torch.ones(T, T, dtype=torch.bool).triu(1)``, positions from
``torch.arange(T)``) are on the model's device in a CPU step, so the eager
front end makes them on ``meta`` with the model's stand-ins: the estimate
equals the step run for real (measure_step, the profiler on the CPU), on
the CPU model and on its meta copy."""

from __future__ import annotations

import math

import torch

import peakmem


class Block(torch.nn.Module):
    def __init__(self, d: int = 128, heads: int = 4):
        super().__init__()
        self.qkv, self.proj, self.heads = torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d), heads
        self.ln = torch.nn.LayerNorm(d)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(C // self.heads)
        att = att.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf")).softmax(-1)
        return x + self.proj((att @ v).transpose(1, 2).reshape(B, T, C))


class LM(torch.nn.Module):
    def __init__(self, vocab: int = 256, d: int = 128, blocks: int = 4):
        super().__init__()
        self.emb, self.head = torch.nn.Embedding(vocab, d), torch.nn.Linear(d, vocab)
        self.pos = torch.nn.Parameter(torch.zeros(64, d))
        self.blocks = torch.nn.Sequential(*[Block(d) for _ in range(blocks)])

    def forward(self, ids):
        return self.head(self.blocks(self.emb(ids) + self.pos[torch.arange(ids.shape[1])]))


def _loss(out, ids):
    return torch.nn.functional.cross_entropy(out.flatten(0, 1), ids.flatten())


def test_a_mask_made_without_a_device_is_estimated_as_the_step_runs():
    torch.manual_seed(0)
    model, ids = LM(), torch.randint(0, 256, (4, 64))
    step = {"loss_fn": _loss, "optimizer": torch.optim.AdamW, "frontend": "eager"}
    measured = peakmem.measure_step(model, ids, **step)
    estimated = peakmem.estimate_step(model, ids, **step)
    assert (estimated.peak_bytes, estimated.final_bytes) == (measured.peak_bytes, measured.final_bytes)
    on_meta = peakmem.estimate_step(model.to("meta"), ids.to("meta"), **step)
    assert (on_meta.peak_bytes, on_meta.final_bytes) == (measured.peak_bytes, measured.final_bytes)
