"""The training-step corpus: real architectures as users write them, each
with the inputs, loss and setup of one entry (test_step.py measures and
estimates every entry). Widths are realistic but small enough for two CPUs.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
import torch.nn as nn
import torch.nn.functional as F


class MLP(nn.Module):
    def __init__(self, dim: int = 256, hidden: int = 1024) -> None:
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))


class GPTBlock(nn.Module):
    """nanoGPT's block: LayerNorm, causal self-attention, GELU MLP, residuals."""

    def __init__(self, dim: int = 256, heads: int = 4) -> None:
        super().__init__()
        self.heads = heads
        self.ln_1 = nn.LayerNorm(dim)
        self.c_attn = nn.Linear(dim, 3 * dim)
        self.c_proj = nn.Linear(dim, dim)
        self.ln_2 = nn.LayerNorm(dim)
        self.c_fc = nn.Linear(dim, 4 * dim)
        self.c_proj2 = nn.Linear(4 * dim, dim)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))
        return x + self.c_proj2(F.gelu(self.c_fc(self.ln_2(x))))


class GPT(nn.Module):
    """Token and position embeddings, stacked blocks, a tied-free LM head and
    cross-entropy: the loss inside the model."""

    def __init__(self, vocab: int = 512, dim: int = 256, layers: int = 2, seq: int = 128) -> None:
        super().__init__()
        self.wte = nn.Embedding(vocab, dim)
        self.wpe = nn.Embedding(seq, dim)
        self.blocks = nn.ModuleList(GPTBlock(dim) for _ in range(layers))
        self.ln_f = nn.LayerNorm(dim)
        self.lm_head = nn.Linear(dim, vocab, bias=False)

    def forward(self, idx, targets):
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.blocks:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def reset_parameters(self) -> None:
        # What Thunder's FSDP calls to make a `meta` module's own tensors.
        with torch.no_grad():
            self.weight.fill_(1.0)

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class LlamaBlock(nn.Module):
    """RMSNorm, rotary embeddings, grouped-query attention, SwiGLU."""

    def __init__(self, dim: int = 256, heads: int = 8, kv_heads: int = 2, hidden: int = 704,
                 seq: int = 128) -> None:
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, dim // heads
        self.attn_norm = RMSNorm(dim)
        self.wq = nn.Linear(dim, dim, bias=False)
        self.wk = nn.Linear(dim, kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(dim, kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(dim, dim, bias=False)
        self.ffn_norm = RMSNorm(dim)
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)
        self.w3 = nn.Linear(dim, hidden, bias=False)
        self.seq = seq
        cos, sin = self._rotary()
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)

    def _rotary(self, device=None):
        inv = 1.0 / (10000 ** (torch.arange(0, self.head_dim, 2, device=device).float() / self.head_dim))
        freqs = torch.outer(torch.arange(self.seq, device=device).float(), inv)
        return freqs.cos(), freqs.sin()

    def reset_parameters(self) -> None:
        # What Thunder's FSDP calls to make a `meta` module's own tensors
        # (its buffers; the Linear and RMSNorm children reset their own).
        cos, sin = self._rotary(self.cos.device)
        self.cos, self.sin = cos.to(self.cos.dtype), sin.to(self.sin.dtype)

    def rope(self, x):
        x1, x2 = x[..., 0::2], x[..., 1::2]
        cos, sin = self.cos[: x.shape[2]], self.sin[: x.shape[2]]
        return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2)

    def forward(self, x):
        B, T, C = x.shape
        h = self.attn_norm(x)
        q = self.wq(h).view(B, T, self.heads, self.head_dim).transpose(1, 2)
        k = self.wk(h).view(B, T, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.wv(h).view(B, T, self.kv_heads, self.head_dim).transpose(1, 2)
        q, k = self.rope(q), self.rope(k)
        rep = self.heads // self.kv_heads
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.wo(y.transpose(1, 2).reshape(B, T, C))
        h = self.ffn_norm(x)
        return x + self.w2(F.silu(self.w1(h)) * self.w3(h))


class LlamaLM(nn.Module):
    """A Llama-shaped language model: token embedding, stacked LlamaBlocks,
    a final RMSNorm, an untied head and cross-entropy (the loss inside).
    LlamaLM.seven_b() has Llama-2-7B's shapes (6.74e9 parameters)."""

    def __init__(self, vocab: int = 512, dim: int = 256, layers: int = 2, heads: int = 8,
                 kv_heads: int = 2, hidden: int = 704, seq: int = 128) -> None:
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.blocks = nn.ModuleList(LlamaBlock(dim, heads, kv_heads, hidden, seq)
                                    for _ in range(layers))
        self.norm = RMSNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)

    @classmethod
    def seven_b(cls, seq: int = 2048) -> "LlamaLM":
        return cls(vocab=32000, dim=4096, layers=32, heads=32, kv_heads=32, hidden=11008, seq=seq)

    def forward(self, idx, targets):
        x = self.tok(idx)
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.norm(x))
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))


class CheckpointedLlamaLM(LlamaLM):
    """LlamaLM with every block under activation checkpointing
    (torch.utils.checkpoint): the backward recomputes each block's forward
    instead of keeping its activations."""

    def forward(self, idx, targets):
        import torch.utils.checkpoint as cp

        x = self.tok(idx)
        for block in self.blocks:
            x = cp.checkpoint(block, x, use_reentrant=False)
        logits = self.head(self.norm(x))
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))


def checkpoint_first(model: nn.Module, k: int) -> nn.Module:
    """`model` with its first `k` repeated blocks (peakmem's
    eager_recompute.repeated_blocks) under torch.utils.checkpoint
    (non-reentrant, no policy): activation checkpointing of k blocks, as
    eager PyTorch and Thunder (its checkpoint lookaside) both run it."""
    from torch.utils.checkpoint import checkpoint

    from peakmem.step.eager_recompute import repeated_blocks

    modules = dict(model.named_modules())
    for name in repeated_blocks(model)[:k]:
        module = modules[name]
        module.forward = functools.partial(checkpoint, module.forward, use_reentrant=False)
    return model


class ViTBlock(nn.Module):
    """Patch embedding by unfold and a linear layer, a pre-norm encoder block,
    mean pooling and a classifier head."""

    def __init__(self, patch: int = 8, dim: int = 256, classes: int = 10) -> None:
        super().__init__()
        self.patch = patch
        self.embed = nn.Linear(3 * patch * patch, dim)
        self.ln_1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.ln_2 = nn.LayerNorm(dim)
        self.mlp1 = nn.Linear(dim, 2 * dim)
        self.mlp2 = nn.Linear(2 * dim, dim)
        self.head = nn.Linear(dim, classes)

    def forward(self, images, labels=None):  # (labels: for the loss, which gets every input)
        patches = F.unfold(images, self.patch, stride=self.patch).transpose(1, 2)
        x = self.embed(patches)
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln_1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, 4, C // 4).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v)
        x = x + self.proj(y.transpose(1, 2).reshape(B, T, C))
        x = x + self.mlp2(F.gelu(self.mlp1(self.ln_2(x))))
        return self.head(x.mean(dim=1))


class MixerBlock(nn.Module):
    """MLP-Mixer: token mixing across the sequence, channel mixing across features."""

    def __init__(self, tokens: int = 128, dim: int = 256) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(dim)
        self.tok1 = nn.Linear(tokens, 2 * tokens)
        self.tok2 = nn.Linear(2 * tokens, tokens)
        self.ln_2 = nn.LayerNorm(dim)
        self.ch1 = nn.Linear(dim, 2 * dim)
        self.ch2 = nn.Linear(2 * dim, dim)

    def forward(self, x):
        y = self.ln_1(x).transpose(1, 2)
        x = x + self.tok2(F.gelu(self.tok1(y))).transpose(1, 2)
        return x + self.ch2(F.gelu(self.ch1(self.ln_2(x))))


class SmallCNN(nn.Module):
    """A ResNet-style CNN: a convolution stem with batch norm (training mode:
    batch statistics, running statistics updated in place) and max pooling,
    a residual block of two 3x3 convolutions, a strided stage with a 1x1
    projection shortcut, global average pooling and a classifier."""

    def __init__(self, width: int = 32, classes: int = 10) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, width, 3, padding=1, bias=False)
        self.bn0 = nn.BatchNorm2d(width)
        self.conv1 = nn.Conv2d(width, width, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.down = nn.Conv2d(width, 2 * width, 3, stride=2, padding=1, bias=False)
        self.bn3 = nn.BatchNorm2d(2 * width)
        self.shortcut = nn.Conv2d(width, 2 * width, 1, stride=2, bias=False)
        self.head = nn.Linear(2 * width, classes)

    def forward(self, images):
        x = F.max_pool2d(F.relu(self.bn0(self.stem(images))), 2)
        x = F.relu(x + self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x))))))
        x = F.relu(self.bn3(self.down(x)) + self.shortcut(x))
        return self.head(F.adaptive_avg_pool2d(x, 1).flatten(1))


def class_zero_loss(output, images):
    # Cross-entropy against class 0 for every image: the images are the only
    # input (Thunder 0.2.6 cannot trace an in-place buffer update, batch
    # norm's running statistics, with two meta inputs: see docs/manual.md, "A training step").
    return F.cross_entropy(output, torch.zeros(output.shape[0], dtype=torch.long, device=output.device))


def mse_loss(output, x):
    return output.pow(2).mean()


def sum_loss(output, x):
    return output.sum()


def classify_loss(output, images, labels):
    return F.cross_entropy(output, labels)


@dataclass
class Entry:
    """One step-corpus entry: a model, its inputs and how the step runs."""

    name: str
    make: Callable[[], nn.Module]
    inputs: Callable[[], tuple]
    loss_fn: Callable | None = None
    setup: dict[str, Any] = field(default_factory=dict)


SGD = {"optimizer": torch.optim.SGD, "optimizer_kwargs": {"lr": 0.01}}
ADAMW = {"optimizer": torch.optim.AdamW}  # its defaults: lr 1e-3, weight decay 1e-2 (decoupled)


def _tokens(batch: int = 2, seq: int = 128, vocab: int = 512) -> tuple:
    g = torch.Generator().manual_seed(0)
    return (torch.randint(0, vocab, (batch, seq), generator=g),
            torch.randint(0, vocab, (batch, seq), generator=g))


ENTRIES = [
    Entry("mlp", MLP, lambda: (torch.randn(64, 256),), mse_loss),
    Entry("mlp_sgd_3_steps_accumulating", MLP, lambda: (torch.randn(64, 256),), mse_loss,
          {**SGD, "steps": 3, "zero_grad": False}),
    Entry("gpt_block", GPTBlock, lambda: (torch.randn(2, 128, 256),), sum_loss),
    Entry("gpt_block_sgd_3_steps", GPTBlock, lambda: (torch.randn(2, 128, 256),), sum_loss,
          {**SGD, "steps": 3}),
    Entry("gpt_lm_loss_inside", GPT, _tokens, None),
    Entry("gpt_lm_sgd_accumulating", GPT, _tokens, None, {**SGD, "steps": 2, "zero_grad": False}),
    Entry("llama_block", LlamaBlock, lambda: (torch.randn(2, 128, 256),), mse_loss, SGD),
    Entry("vit_block", ViTBlock,
          lambda: (torch.randn(4, 3, 64, 64), torch.randint(0, 10, (4,))), classify_loss),
    Entry("mixer_block", MixerBlock, lambda: (torch.randn(2, 128, 256),), mse_loss,
          {**SGD, "steps": 3}),
    Entry("mixer_block_no_zero_grad", MixerBlock, lambda: (torch.randn(2, 128, 256),), mse_loss,
          {"steps": 1, "zero_grad": False}),
    # The optimizer's peak: Adam's state (two moments and a step per parameter)
    # is made in the first step, and each parameter's denominator is alive
    # with the next one's.
    Entry("mlp_adamw_3_steps", MLP, lambda: (torch.randn(64, 256),), mse_loss,
          {**ADAMW, "steps": 3}),
    Entry("mlp_adam_weight_decay_amsgrad", MLP, lambda: (torch.randn(64, 256),), mse_loss,
          {"optimizer": torch.optim.Adam,
           "optimizer_kwargs": {"weight_decay": 0.1, "amsgrad": True}, "steps": 2}),
    Entry("gpt_lm_adamw_2_steps", GPT, _tokens, None, {**ADAMW, "steps": 2}),
    Entry("llama_block_bf16_adamw", lambda: LlamaBlock().to(torch.bfloat16),
          lambda: (torch.randn(2, 128, 256, dtype=torch.bfloat16),), mse_loss,
          {**ADAMW, "steps": 2}),
    Entry("mixer_block_sgd_nesterov_accumulating", MixerBlock,
          lambda: (torch.randn(2, 128, 256),), mse_loss,
          {"optimizer": torch.optim.SGD,
           "optimizer_kwargs": {"lr": 0.01, "momentum": 0.9, "nesterov": True,
                                "weight_decay": 1e-4},
           "steps": 2, "zero_grad": False}),
    Entry("llama_lm_3_layers_adamw", lambda: LlamaLM(layers=3), _tokens, None, ADAMW),
    Entry("cnn_sgd_momentum_2_steps", SmallCNN,
          lambda: (torch.randn(8, 3, 32, 32),), class_zero_loss,
          {"optimizer": torch.optim.SGD, "optimizer_kwargs": {"lr": 0.01, "momentum": 0.9}, "steps": 2}),
    Entry("vit_block_adam_maximize", ViTBlock,
          lambda: (torch.randn(4, 3, 64, 64), torch.randint(0, 10, (4,))), classify_loss,
          {"optimizer": torch.optim.Adam, "optimizer_kwargs": {"maximize": True}}),
    # foreach=True (CUDA's default): an out-of-place _foreach_* op's outputs
    # are alive together (the maximized or decayed gradients, Adam's
    # exp_avg_sq_sqrt), so the optimizer's peak is above the single-tensor
    # step's. With zero_grad=False the backward's new gradients beside the
    # kept ones are the larger.
    Entry("mlp_adamw_foreach_3_steps", MLP, lambda: (torch.randn(64, 256),), mse_loss,
          {**ADAMW, "optimizer_kwargs": {"foreach": True}, "steps": 3}),
    Entry("gpt_lm_1_layer_adam_foreach_amsgrad_maximize", lambda: GPT(layers=1),
          lambda: _tokens(batch=1, seq=64), None,
          {"optimizer": torch.optim.Adam,
           "optimizer_kwargs": {"foreach": True, "amsgrad": True, "maximize": True, "weight_decay": 0.1},
           "steps": 2}),
    Entry("gpt_block_sgd_foreach_nesterov_2_steps", GPTBlock, lambda: (torch.randn(2, 32, 256),), sum_loss,
          {"optimizer": torch.optim.SGD,
           "optimizer_kwargs": {"foreach": True, "lr": 0.01, "momentum": 0.9, "nesterov": True,
                                "weight_decay": 1e-4},
           "steps": 2}),
    Entry("mlp_sgd_foreach_momentum_maximize_accumulating", MLP, lambda: (torch.randn(64, 256),), mse_loss,
          {"optimizer": torch.optim.SGD,
           "optimizer_kwargs": {"foreach": True, "lr": 0.01, "momentum": 0.9, "dampening": 0.1,
                                "maximize": True},
           "steps": 3, "zero_grad": False}),
]
