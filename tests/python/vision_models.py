"""Convolutional models people train, beside the `transformers` zoo:
torchvision's ResNet-50, and a small U-Net (two levels, batch norm,
transposed-convolution upsampling, skip connections concatenated), as
its paper draws it.

torchvision's PyPI wheel is built against CUDA torch: its C++ operators
(``torchvision::nms`` and the other detection ops) do not load beside the
CPU torch the tests pin, and its import then fails registering a fake
kernel for ``nms`` and ``qnms`` (torchvision/_meta_registrations.py, the
two registrations not guarded by ``extension._has_ops()``). So it is
installed beside .venv, in build/torchvision (scripts/install-torchvision,
which scripts/setup-python runs): in .venv, transformers would import it
for every model. ``import_torchvision`` puts it on the path and defines
those two schemas first, so the import goes on without its C++ operators,
which no model here calls (they are the detection heads' ops; calling one
raises PyTorch's "no kernel" error)."""

from __future__ import annotations

import importlib.util
import sys
import warnings
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn


BESIDE = Path(__file__).resolve().parents[2] / "build" / "torchvision"


def import_torchvision():
    """torchvision, importable beside the CPU torch (see the module
    docstring)."""
    if importlib.util.find_spec("torchvision") is None:
        assert (BESIDE / ".complete").exists(), (
            f"{BESIDE} is missing: scripts/install-torchvision installs it (scripts/setup-python runs it)")
        sys.path.append(str(BESIDE))
    for name in ("nms", "qnms"):
        if not _defined(f"torchvision::{name}"):
            torch.library.define(f"torchvision::{name}", "(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Failed to load image Python extension": the C++ operators
        import torchvision
    return torchvision


def _defined(qualified: str) -> bool:
    namespace, name = qualified.split("::")
    try:
        getattr(getattr(torch.ops, namespace), name)
    except (AttributeError, RuntimeError):
        return False
    return True


def _block(inputs: int, outputs: int) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(inputs, outputs, 3, padding=1, bias=False), nn.BatchNorm2d(outputs),
                         nn.ReLU(inplace=True), nn.Conv2d(outputs, outputs, 3, padding=1, bias=False),
                         nn.BatchNorm2d(outputs), nn.ReLU(inplace=True))


class UNet(nn.Module):
    """Two levels down (double 3x3 convolutions, 2x2 max pooling), a
    bottom, two up (2x2 stride-2 transposed convolutions, the skip
    concatenated, double convolutions) and a 1x1 classifier per pixel."""

    def __init__(self, channels: int = 3, classes: int = 2, widths: tuple[int, int, int] = (8, 16, 32)) -> None:
        super().__init__()
        a, b, c = widths
        self.downs = nn.ModuleList([_block(channels, a), _block(a, b)])
        self.bottom = _block(b, c)
        self.ups = nn.ModuleList([nn.ConvTranspose2d(c, b, 2, stride=2), nn.ConvTranspose2d(b, a, 2, stride=2)])
        self.decoders = nn.ModuleList([_block(c, b), _block(b, a)])
        self.classify = nn.Conv2d(a, classes, 1)

    def forward(self, x):
        skips = []
        for down in self.downs:
            x = down(x)
            skips.append(x)
            x = F.max_pool2d(x, 2)
        x = self.bottom(x)
        for up, decoder, skip in zip(self.ups, self.decoders, reversed(skips)):
            x = decoder(torch.cat([up(x), skip], dim=1))
        return self.classify(x)


def resnet50(device: str) -> tuple[nn.Module, tuple]:
    """ResNet-50 (10 classes) and a batch of two 64x64 images with labels."""
    torch.manual_seed(0)
    with torch.device(device):
        model = import_torchvision().models.resnet50(num_classes=10)
    g = torch.Generator().manual_seed(1)
    return model, (torch.randn(2, 3, 64, 64, generator=g).to(device), torch.randint(0, 10, (2,), generator=g).to(device))


def unet(device: str) -> tuple[nn.Module, tuple]:
    """The U-Net and a batch of two 32x32 images with per-pixel labels."""
    torch.manual_seed(0)
    with torch.device(device):
        model = UNet()
    g = torch.Generator().manual_seed(1)
    return model, (torch.randn(2, 3, 32, 32, generator=g).to(device),
                   torch.randint(0, 2, (2, 32, 32), generator=g).to(device))


MODELS = {"resnet50": resnet50, "unet": unet}
