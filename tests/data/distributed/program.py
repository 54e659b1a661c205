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


def _tensor_parallel(kind):
    """Thunder's column_parallel / row_parallel (thunder/distributed/
    tensor_parallel/column_wise.py, row_wise.py) as those functions apply
    them, on `device`: their transform sets its device to cuda:rank in
    __post_init__ whatever the caller wants (common.py), so it is set to
    `device` after. Column-wise shards each block's fc1 (its output
    all-gathered), row-wise each block's fc2 (its output all-reduced),
    wherever the model sits in the jitted module (a step's loss wraps it)."""

    def apply(jitted, device):
        import re

        from thunder.core.transforms import add_transform
        from thunder.distributed import copy_default_process_group
        from thunder.distributed.tensor_parallel.column_wise import TransformForColumnWiseParallel
        from thunder.distributed.tensor_parallel.row_wise import TransformForRowWiseParallel
        from thunder.transforms import MaterializationTransform
        import torch.distributed as dist

        group = copy_default_process_group()
        cls, layer = ((TransformForColumnWiseParallel, "fc1") if kind == "column"
                      else (TransformForRowWiseParallel, "fc2"))
        transform = cls(rank=dist.get_rank(group), world_size=dist.get_world_size(group), process_group=group,
                        target_modules=[n for n, _ in jitted._model.named_modules()
                                        if re.search(rf"(^|\.)blocks\.\d+\.{layer}$", n)])
        transform.device = device
        materialize = MaterializationTransform(device=device,
                                               init=MaterializationTransform.init_from_original_module_init())
        return add_transform(jitted, transform=[transform, materialize])

    return apply


STRATEGIES = {
    "fsdp-zero2": _fsdp("ZERO2", "NONE"),
    "fsdp-zero3": _fsdp("ZERO3", "NONE"),
    "fsdp-zero2-layer": _fsdp("ZERO2", "LAYER"),
    "fsdp-zero2-block": _fsdp("ZERO2", "BLOCK"),
    "fsdp-zero3-layer": _fsdp("ZERO3", "LAYER"),
    "fsdp-zero3-block": _fsdp("ZERO3", "BLOCK"),
    "ddp": _ddp,
    "tp-column": _tensor_parallel("column"),
    "tp-row": _tensor_parallel("row"),
}
