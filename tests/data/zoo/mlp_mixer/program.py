"""An MLP-Mixer: non-overlapping patches cut by reshape and permute and
projected by a linear layer, mixer layers alternating a token-mixing MLP
(applied across patches, through a transpose) and a channel-mixing MLP, each
pre-LayerNorm with GELU and a residual, then mean pooling over patches and a
classifier.

2 layers, hidden 256, 8x8 patches of 64x64 RGB images (64 tokens), token MLP
128, channel MLP 1024, batch 2, 10 classes, float32.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

BACKWARD = True

N_LAYER, HIDDEN, IMAGE, PATCH, TOKEN_MLP, CHANNEL_MLP, BATCH, CLASSES = 2, 256, 64, 8, 128, 1024, 2, 10
N_TOKENS = (IMAGE // PATCH) ** 2


class MlpBlock(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))


class MixerLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm1 = nn.LayerNorm(HIDDEN)
        self.token_mixing = MlpBlock(N_TOKENS, TOKEN_MLP)
        self.norm2 = nn.LayerNorm(HIDDEN)
        self.channel_mixing = MlpBlock(HIDDEN, CHANNEL_MLP)

    def forward(self, x):  # x: [B, tokens, hidden]
        x = x + self.token_mixing(self.norm1(x).transpose(1, 2)).transpose(1, 2)
        return x + self.channel_mixing(self.norm2(x))


class Mixer(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Linear(3 * PATCH * PATCH, HIDDEN)
        self.layers = nn.ModuleList([MixerLayer() for _ in range(N_LAYER)])
        self.norm = nn.LayerNorm(HIDDEN)
        self.head = nn.Linear(HIDDEN, CLASSES)

    def forward(self, images):
        B, C, H, W = images.shape
        p = images.reshape(B, C, H // PATCH, PATCH, W // PATCH, PATCH).permute(0, 2, 4, 1, 3, 5)
        x = self.stem(p.reshape(B, N_TOKENS, C * PATCH * PATCH))
        for layer in self.layers:
            x = layer(x)
        return self.head(self.norm(x).mean(dim=1))


def make_function():
    torch.manual_seed(0)
    return Mixer()


def make_inputs():
    g = torch.Generator().manual_seed(0)
    return (torch.randn(BATCH, 3, IMAGE, IMAGE, generator=g),)
