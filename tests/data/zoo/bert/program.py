"""A BERT-style encoder: word, position and token-type embeddings summed and
LayerNorm'd, post-LayerNorm encoder layers with bidirectional attention under
an additive padding mask (built from an attention_mask of ones and zeros),
a GELU intermediate layer, and the tanh pooler over the first token.

2 layers, hidden 256, 4 heads, intermediate 1024, sequence 128, batch 2,
vocab 1024, 2 token types, float32; the second sequence is padded after 96.
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

BACKWARD = True

N_LAYER, HIDDEN, N_HEADS, INTERMEDIATE, SEQ, BATCH, VOCAB, TYPES = 2, 256, 4, 1024, 128, 2, 1024, 2
HEAD_DIM = HIDDEN // N_HEADS


class SelfAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.query = nn.Linear(HIDDEN, HIDDEN)
        self.key = nn.Linear(HIDDEN, HIDDEN)
        self.value = nn.Linear(HIDDEN, HIDDEN)

    def heads(self, x):
        B, T, _ = x.shape
        return x.view(B, T, N_HEADS, HEAD_DIM).permute(0, 2, 1, 3)

    def forward(self, x, mask):
        q, k, v = self.heads(self.query(x)), self.heads(self.key(x)), self.heads(self.value(x))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(HEAD_DIM) + mask
        probs = F.softmax(scores, dim=-1)
        ctx = torch.matmul(probs, v).permute(0, 2, 1, 3).contiguous()
        return ctx.view(x.shape)


class Layer(nn.Module):
    def __init__(self):
        super().__init__()
        self.attention = SelfAttention()
        self.attention_output = nn.Linear(HIDDEN, HIDDEN)
        self.attention_norm = nn.LayerNorm(HIDDEN, eps=1e-12)
        self.intermediate = nn.Linear(HIDDEN, INTERMEDIATE)
        self.output = nn.Linear(INTERMEDIATE, HIDDEN)
        self.output_norm = nn.LayerNorm(HIDDEN, eps=1e-12)

    def forward(self, x, mask):
        x = self.attention_norm(x + self.attention_output(self.attention(x, mask)))
        return self.output_norm(x + self.output(F.gelu(self.intermediate(x))))


class Bert(nn.Module):
    def __init__(self):
        super().__init__()
        self.word_embeddings = nn.Embedding(VOCAB, HIDDEN, padding_idx=0)
        self.position_embeddings = nn.Embedding(SEQ, HIDDEN)
        self.token_type_embeddings = nn.Embedding(TYPES, HIDDEN)
        self.embedding_norm = nn.LayerNorm(HIDDEN, eps=1e-12)
        self.layers = nn.ModuleList([Layer() for _ in range(N_LAYER)])
        self.pooler = nn.Linear(HIDDEN, HIDDEN)

    def forward(self, input_ids, token_type_ids, attention_mask):
        positions = torch.arange(input_ids.shape[1], device=input_ids.device).unsqueeze(0)
        x = self.word_embeddings(input_ids) + self.position_embeddings(positions)
        x = self.embedding_norm(x + self.token_type_embeddings(token_type_ids))
        mask = (1.0 - attention_mask[:, None, None, :].to(x.dtype)) * torch.finfo(x.dtype).min
        for layer in self.layers:
            x = layer(x, mask)
        return x, torch.tanh(self.pooler(x[:, 0]))


def make_function():
    torch.manual_seed(0)
    return Bert()


def make_inputs():
    g = torch.Generator().manual_seed(0)
    input_ids = torch.randint(1, VOCAB, (BATCH, SEQ), generator=g)
    token_type_ids = torch.zeros(BATCH, SEQ, dtype=torch.long)
    token_type_ids[:, SEQ // 2 :] = 1
    attention_mask = torch.ones(BATCH, SEQ, dtype=torch.long)
    attention_mask[1, 96:] = 0
    return input_ids, token_type_ids, attention_mask
