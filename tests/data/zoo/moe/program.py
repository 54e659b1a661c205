"""A mixture-of-experts feed-forward layer with top-k token routing: a
router scores every token against every expert, the top 2 experts per token
are kept (topk) and their softmaxed weights scattered into a dense gate
matrix (scatter); each expert's capacity-limited batch of tokens is chosen
by its gate (topk over tokens), gathered (index_select), run through the
expert's SwiGLU MLP, weighted (gather of the gates) and summed back into the
tokens (scatter_add; Thunder 0.2.6 has no gradient for index_add, whose
backward it uses for index_select's); a pre-LayerNorm and a residual.

dim 256, 4 experts of hidden 512, top-2, capacity 128 tokens per expert,
sequence 128, batch 2 (256 tokens), float32.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

BACKWARD = True

DIM, N_EXPERTS, HIDDEN, TOP_K, CAPACITY, SEQ, BATCH = 256, 4, 512, 2, 128, 128, 2


class Expert(nn.Module):
    def __init__(self):
        super().__init__()
        self.w1 = nn.Linear(DIM, HIDDEN, bias=False)
        self.w3 = nn.Linear(DIM, HIDDEN, bias=False)
        self.w2 = nn.Linear(HIDDEN, DIM, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class MoE(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(DIM)
        self.router = nn.Linear(DIM, N_EXPERTS, bias=False)
        self.experts = nn.ModuleList([Expert() for _ in range(N_EXPERTS)])

    def forward(self, x):
        B, T, D = x.shape
        tokens = self.norm(x).reshape(B * T, D)
        logits = self.router(tokens)
        top_values, top_experts = torch.topk(logits, TOP_K, dim=-1)
        gates = torch.zeros_like(logits).scatter(1, top_experts, F.softmax(top_values, dim=-1))
        out = torch.zeros_like(tokens)
        for e, expert in enumerate(self.experts):
            _, chosen = torch.topk(gates[:, e], CAPACITY)
            weight = torch.gather(gates[:, e], 0, chosen).unsqueeze(1)
            y = expert(tokens.index_select(0, chosen)) * weight
            out = out.scatter_add(0, chosen.unsqueeze(1).expand(-1, D), y)
        return x + out.reshape(B, T, D)


def make_function():
    torch.manual_seed(0)
    return MoE()


def make_inputs():
    g = torch.Generator().manual_seed(0)
    return (torch.randn(BATCH, SEQ, DIM, generator=g, requires_grad=True),)
