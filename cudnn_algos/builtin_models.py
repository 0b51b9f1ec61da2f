"""Built-in layer tables (no torchvision needed)."""
from __future__ import annotations

import torch.nn as nn

from .spec import ConvSpec


def resnet50_convs(batch: int = 32, resolution: int = 224) -> list[tuple[str, ConvSpec, tuple[int, ...], int]]:
    """The unique convolutions of torchvision's ResNet-50 (v1.5: stride on the 3x3), as
    (name, spec, input shape, how many times the model uses it), in model order. 23 unique layers, 53 in all."""
    r = resolution
    out: dict[tuple, list] = {}

    def add(name, cin, cout, k, stride, pad, hw):
        spec = ConvSpec(cin, cout, (k, k), stride=stride, padding=pad)
        key = (spec, hw)
        if key in out:
            out[key][3] += 1
        else:
            out[key] = [name, spec, (batch, cin, hw, hw), 1]

    add("conv1", 3, 64, 7, 2, 3, r)
    hw = r // 4  # after the stem and the max-pool
    cin = 64
    for stage, (width, blocks, stride) in enumerate([(64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)], start=1):
        for b in range(blocks):
            s = stride if b == 0 else 1
            p = f"layer{stage}.{b}"
            add(f"{p}.conv1", cin, width, 1, 1, 0, hw)
            add(f"{p}.conv2", width, width, 3, s, 1, hw)
            hw_out = hw // s
            add(f"{p}.conv3", width, width * 4, 1, 1, 0, hw_out)
            if b == 0:
                add(f"{p}.downsample", cin, width * 4, 1, s, 0, hw)
            cin, hw = width * 4, hw_out
    return [tuple(v) for v in out.values()]


# ------------------------------------------------------------------------------------------------ models
class Bottleneck(nn.Module):
    """torchvision's ResNet v1.5 bottleneck (stride on the 3x3), module names included."""

    def __init__(self, cin: int, width: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, width * 4, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(width * 4)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = None
        if stride != 1 or cin != width * 4:
            self.downsample = nn.Sequential(nn.Conv2d(cin, width * 4, 1, stride=stride, bias=False),
                                            nn.BatchNorm2d(width * 4))

    def forward(self, x):
        idt = x if self.downsample is None else self.downsample(x)
        y = self.relu(self.bn1(self.conv1(x)))
        y = self.relu(self.bn2(self.conv2(y)))
        return self.relu(self.bn3(self.conv3(y)) + idt)


def resnet50(num_classes: int = 1000):
    """ResNet-50 v1.5 (stride on the 3x3, as torchvision's), randomly initialised, built without torchvision.
    Its module names match torchvision's (conv1, layer1.0.conv2, layer2.0.downsample.0, ...)."""

    layers = [nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False), nn.BatchNorm2d(64), nn.ReLU(inplace=True),
              nn.MaxPool2d(3, stride=2, padding=1)]
    model = nn.Sequential()
    for name, m in zip(("conv1", "bn1", "relu", "maxpool"), layers):
        model.add_module(name, m)
    cin = 64
    for i, (width, blocks, stride) in enumerate([(64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)], start=1):
        stage = nn.Sequential(*[Bottleneck(cin if b == 0 else width * 4, width, stride if b == 0 else 1)
                                for b in range(blocks)])
        cin = width * 4
        model.add_module(f"layer{i}", stage)
    model.add_module("avgpool", nn.AdaptiveAvgPool2d(1))
    model.add_module("flatten", nn.Flatten())
    model.add_module("fc", nn.Linear(2048, num_classes))
    return model


BUILTIN_MODELS = {"resnet50": (resnet50, (3, 224, 224))}
