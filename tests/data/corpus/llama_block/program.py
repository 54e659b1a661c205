"""A Llama-style transformer block, tiny: RMSNorm, rotary position embedding,
causal scaled_dot_product_attention, SwiGLU feed-forward.

dim 16, 2 heads of 8, sequence 8, batch 2, feed-forward hidden 32, float32.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

BACKWARD = True

DIM, N_HEADS, SEQ, BATCH, HIDDEN = 16, 2, 8, 2, 32
HEAD_DIM = DIM // N_HEADS


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        norm = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return norm * self.weight


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def apply_rope(x, cos, sin):  # x: [B, H, T, hd]; cos, sin: [T, hd]
    return x * cos + rotate_half(x) * sin


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.wq = nn.Linear(DIM, DIM, bias=False)
        self.wk = nn.Linear(DIM, DIM, bias=False)
        self.wv = nn.Linear(DIM, DIM, bias=False)
        self.wo = nn.Linear(DIM, DIM, bias=False)

    def forward(self, x, cos, sin):
        B, T, C = x.shape
        q = self.wq(x).view(B, T, N_HEADS, HEAD_DIM).transpose(1, 2)
        k = self.wk(x).view(B, T, N_HEADS, HEAD_DIM).transpose(1, 2)
        v = self.wv(x).view(B, T, N_HEADS, HEAD_DIM).transpose(1, 2)
        q = apply_rope(q, cos, sin)
        k = apply_rope(k, cos, sin)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        y = y.transpose(1, 2).reshape(B, T, C)
        return self.wo(y)


class FeedForward(nn.Module):
    def __init__(self):
        super().__init__()
        self.w1 = nn.Linear(DIM, HIDDEN, bias=False)
        self.w3 = nn.Linear(DIM, HIDDEN, bias=False)
        self.w2 = nn.Linear(HIDDEN, DIM, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.attention_norm = RMSNorm(DIM)
        self.attention = Attention()
        self.ffn_norm = RMSNorm(DIM)
        self.feed_forward = FeedForward()
        inv_freq = 1.0 / (10000 ** (torch.arange(0, HEAD_DIM, 2).float() / HEAD_DIM))
        freqs = torch.outer(torch.arange(SEQ).float(), inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        self.register_buffer("cos", emb.cos(), persistent=False)
        self.register_buffer("sin", emb.sin(), persistent=False)

    def forward(self, x):
        h = x + self.attention(self.attention_norm(x), self.cos, self.sin)
        return h + self.feed_forward(self.ffn_norm(h))


def make_function():
    torch.manual_seed(0)
    return Block()


def make_inputs():
    g = torch.Generator().manual_seed(0)
    return (torch.randn(BATCH, SEQ, DIM, generator=g, requires_grad=True),)
