"""Built-in layer tables (no torchvision needed)."""
from __future__ import annotations

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
