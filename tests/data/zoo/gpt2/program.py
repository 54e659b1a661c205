"""GPT-2 as nanoGPT writes it: token and position embeddings, pre-LayerNorm
blocks with causal attention (scaled_dot_product_attention) and a GELU MLP,
a final LayerNorm, and the language-model head tied to the token embedding;
the forward returns the cross-entropy loss against the targets.

2 layers, n_embd 256, 4 heads, block 128, vocab 1024, batch 2, float32.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

BACKWARD = True

N_LAYER, N_EMBD, N_HEAD, BLOCK, VOCAB, BATCH = 2, 256, 4, 128, 1024, 2


class CausalSelfAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.c_attn = nn.Linear(N_EMBD, 3 * N_EMBD)
        self.c_proj = nn.Linear(N_EMBD, N_EMBD)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(N_EMBD, dim=2)
        q = q.view(B, T, N_HEAD, C // N_HEAD).transpose(1, 2)
        k = k.view(B, T, N_HEAD, C // N_HEAD).transpose(1, 2)
        v = v.view(B, T, N_HEAD, C // N_HEAD).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.c_fc = nn.Linear(N_EMBD, 4 * N_EMBD)
        self.c_proj = nn.Linear(4 * N_EMBD, N_EMBD)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1 = nn.LayerNorm(N_EMBD)
        self.attn = CausalSelfAttention()
        self.ln_2 = nn.LayerNorm(N_EMBD)
        self.mlp = MLP()

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(VOCAB, N_EMBD)
        self.wpe = nn.Embedding(BLOCK, N_EMBD)
        self.h = nn.ModuleList([Block() for _ in range(N_LAYER)])
        self.ln_f = nn.LayerNorm(N_EMBD)
        self.lm_head = nn.Linear(N_EMBD, VOCAB, bias=False)
        self.lm_head.weight = self.wte.weight  # weight tying, as GPT-2 does

    def forward(self, idx, targets):
        pos = torch.arange(0, idx.shape[1], dtype=torch.long, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, VOCAB), targets.view(-1))


def make_function():
    torch.manual_seed(0)
    return GPT()


def make_inputs():
    g = torch.Generator().manual_seed(0)
    idx = torch.randint(0, VOCAB, (BATCH, BLOCK), generator=g)
    targets = torch.randint(0, VOCAB, (BATCH, BLOCK), generator=g)
    return idx, targets
