"""The distributed corpus's program: two pre-norm MLP blocks and a head.

Block: x + fc2(gelu(fc1(layer_norm(x)))), dim 128, hidden 256; head
Linear(128, 30), whose 30 rows do not divide by 4 or 8, so FSDP pads its
shard (thunder/distributed/__init__.py `_shard_tensor`, allow_padding_for_fsdp).
Input [4, 32, 128]. 136,222 parameters (544,888 bytes in f32): per block
LayerNorm 256, fc1 128*256 + 256, fc2 256*128 + 128; head 128*30 + 30.

STRATEGIES maps each entry's strategy name to the transform applied to the
``thunder.jit`` module, as Thunder's docs apply them.
"""

import torch
import torch.nn as nn

DIM, HIDDEN, CLASSES = 128, 256, 30


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(DIM)
        self.fc1 = nn.Linear(DIM, HIDDEN)
        self.fc2 = nn.Linear(HIDDEN, DIM)

    def forward(self, x):
        return x + self.fc2(torch.nn.functional.gelu(self.fc1(self.norm(x))))


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([Block(), Block()])
        self.head = nn.Linear(DIM, CLASSES)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def make_model():
    torch.manual_seed(0)
    return Model()


def make_inputs():
    g = torch.Generator().manual_seed(0)
    return (torch.randn(4, 32, DIM, generator=g),)


def _fsdp(sharding, bucketing):
    def apply(jitted, device):
        import thunder.distributed as td

        return td.fsdp(
            jitted,
            device=device,
            sharding_strategy=getattr(td.FSDPType, sharding),
            bucketing_strategy=getattr(td.FSDPBucketingStrategy, bucketing),
        )

    return apply


def _ddp(jitted, device):
    import thunder.distributed as td

    return td.ddp(jitted)


STRATEGIES = {
    "fsdp-zero2": _fsdp("ZERO2", "NONE"),
    "fsdp-zero3": _fsdp("ZERO3", "NONE"),
    "fsdp-zero2-layer": _fsdp("ZERO2", "LAYER"),
    "fsdp-zero2-block": _fsdp("ZERO2", "BLOCK"),
    "fsdp-zero3-layer": _fsdp("ZERO3", "LAYER"),
    "fsdp-zero3-block": _fsdp("ZERO3", "BLOCK"),
    "ddp": _ddp,
}
