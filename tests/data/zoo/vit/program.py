"""A Vision Transformer: the image cut into 16x16 patches by a strided
convolution, a learned class token and position embedding, pre-LayerNorm
encoder blocks (attention with fused qkv through scaled_dot_product_attention,
GELU MLP), and a classification head on the class token.

2 layers, hidden 256, 4 heads, MLP 1024, 128x128 RGB images (64 patches + 1),
batch 2, 10 classes, float32.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

BACKWARD = True

N_LAYER, HIDDEN, N_HEADS, MLP_DIM, IMAGE, PATCH, BATCH, CLASSES = 2, 256, 4, 1024, 128, 16, 2, 10
N_PATCHES = (IMAGE // PATCH) ** 2


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(HIDDEN, 3 * HIDDEN)
        self.proj = nn.Linear(HIDDEN, HIDDEN)

    def forward(self, x):
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, N_HEADS, C // N_HEADS).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        y = F.scaled_dot_product_attention(q, k, v)
        return self.proj(y.transpose(1, 2).reshape(B, N, C))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm1 = nn.LayerNorm(HIDDEN, eps=1e-6)
        self.attn = Attention()
        self.norm2 = nn.LayerNorm(HIDDEN, eps=1e-6)
        self.fc1 = nn.Linear(HIDDEN, MLP_DIM)
        self.fc2 = nn.Linear(MLP_DIM, HIDDEN)

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.fc2(F.gelu(self.fc1(self.norm2(x))))


class ViT(nn.Module):
    def __init__(self):
        super().__init__()
        self.patch_embed = nn.Conv2d(3, HIDDEN, kernel_size=PATCH, stride=PATCH)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, HIDDEN))
        self.pos_embed = nn.Parameter(torch.randn(1, N_PATCHES + 1, HIDDEN) * 0.02)
        self.blocks = nn.ModuleList([Block() for _ in range(N_LAYER)])
        self.norm = nn.LayerNorm(HIDDEN, eps=1e-6)
        self.head = nn.Linear(HIDDEN, CLASSES)

    def forward(self, images):
        x = self.patch_embed(images).flatten(2).transpose(1, 2)
        x = torch.cat((self.cls_token.expand(x.shape[0], -1, -1), x), dim=1) + self.pos_embed
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x)[:, 0])


def make_function():
    torch.manual_seed(0)
    return ViT()


def make_inputs():
    g = torch.Generator().manual_seed(0)
    return (torch.randn(BATCH, 3, IMAGE, IMAGE, generator=g),)
