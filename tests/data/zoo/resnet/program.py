"""A ResNet-style CNN in training mode: a 3x3 stem convolution with batch
norm (batch statistics, running statistics updated in place), ReLU and 3x3
max pooling; two stages of basic residual blocks (the second downsampling by
a strided convolution with a 1x1 projection shortcut); global average
pooling and a linear classifier.

Channels 64 and 128, 64x64 RGB images, batch 4, 10 classes, float32.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

BACKWARD = True

WIDTHS, IMAGE, BATCH, CLASSES = (64, 128), 64, 4, 10


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = None
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride=stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + (x if self.shortcut is None else self.shortcut(x)))


class ResNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, WIDTHS[0], 3, padding=1, bias=False)
        self.stem_bn = nn.BatchNorm2d(WIDTHS[0])
        self.stage1 = BasicBlock(WIDTHS[0], WIDTHS[0], 1)
        self.stage2 = BasicBlock(WIDTHS[0], WIDTHS[1], 2)
        self.fc = nn.Linear(WIDTHS[1], CLASSES)

    def forward(self, images):
        x = F.max_pool2d(F.relu(self.stem_bn(self.stem(images))), 3, stride=2, padding=1)
        x = self.stage2(self.stage1(x))
        return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))


def make_function():
    torch.manual_seed(0)
    return ResNet().train()


def make_inputs():
    g = torch.Generator().manual_seed(0)
    return (torch.randn(BATCH, 3, IMAGE, IMAGE, generator=g),)
