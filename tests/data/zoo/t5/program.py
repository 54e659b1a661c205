"""A T5-style decoder block over an encoder's output: T5's LayerNorm (root
mean square, no bias, no centring), causal self-attention with a learned
relative position bias (bucketed by distance, added to the scores), cross-
attention from the decoder to the encoder states, and a ReLU feed-forward,
each pre-norm with a residual; attention without the 1/sqrt(d) scaling, as
T5 does.

d_model 256, 4 heads of 64, d_ff 1024, decoder length 128, encoder length
128, batch 2, 32 relative-position buckets, float32.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

BACKWARD = True

D_MODEL, N_HEADS, D_FF, DEC_LEN, ENC_LEN, BATCH, BUCKETS = 256, 4, 1024, 128, 128, 2, 32
D_KV = D_MODEL // N_HEADS


class T5LayerNorm(nn.Module):
    def __init__(self, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(D_MODEL))
        self.eps = eps

    def forward(self, x):
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))


class T5Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.q = nn.Linear(D_MODEL, D_MODEL, bias=False)
        self.k = nn.Linear(D_MODEL, D_MODEL, bias=False)
        self.v = nn.Linear(D_MODEL, D_MODEL, bias=False)
        self.o = nn.Linear(D_MODEL, D_MODEL, bias=False)

    def heads(self, x):
        B, T, _ = x.shape
        return x.view(B, T, N_HEADS, D_KV).transpose(1, 2)

    def forward(self, x, kv, bias):
        q, k, v = self.heads(self.q(x)), self.heads(self.k(kv)), self.heads(self.v(kv))
        scores = torch.matmul(q, k.transpose(3, 2))
        if bias is not None:
            scores = scores + bias
        probs = F.softmax(scores.float(), dim=-1).type_as(scores)
        y = torch.matmul(probs, v).transpose(1, 2).contiguous()
        return self.o(y.view(x.shape[0], -1, D_MODEL))


def relative_buckets(query_len, key_len):
    """T5's causal bucketing: exact for distances below BUCKETS // 2, logarithmic above."""
    context = torch.arange(query_len)[:, None]
    memory = torch.arange(key_len)[None, :]
    distance = torch.clamp(context - memory, min=0)
    exact = BUCKETS // 2
    large = exact + (torch.log(distance.float().clamp(min=1) / exact) / torch.log(torch.tensor(128 / exact)) * (BUCKETS - exact)).long()
    return torch.where(distance < exact, distance, torch.clamp(large, max=BUCKETS - 1))


class DecoderBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.self_norm = T5LayerNorm()
        self.self_attention = T5Attention()
        self.relative_attention_bias = nn.Embedding(BUCKETS, N_HEADS)
        self.cross_norm = T5LayerNorm()
        self.cross_attention = T5Attention()
        self.ff_norm = T5LayerNorm()
        self.wi = nn.Linear(D_MODEL, D_FF, bias=False)
        self.wo = nn.Linear(D_FF, D_MODEL, bias=False)
        self.register_buffer("buckets", relative_buckets(DEC_LEN, DEC_LEN), persistent=False)
        causal = torch.triu(torch.full((DEC_LEN, DEC_LEN), float("-inf")), diagonal=1)
        self.register_buffer("causal", causal, persistent=False)

    def forward(self, x, encoder_states):
        bias = self.relative_attention_bias(self.buckets).permute(2, 0, 1).unsqueeze(0) + self.causal
        x = x + self.self_attention(self.self_norm(x), self.self_norm(x), bias)
        x = x + self.cross_attention(self.cross_norm(x), encoder_states, None)
        return x + self.wo(F.relu(self.wi(self.ff_norm(x))))


def make_function():
    torch.manual_seed(0)
    return DecoderBlock()


def make_inputs():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(BATCH, DEC_LEN, D_MODEL, generator=g, requires_grad=True)
    encoder_states = torch.randn(BATCH, ENC_LEN, D_MODEL, generator=g, requires_grad=True)
    return x, encoder_states
