"""Models the dataset's corpus (cudnn_algos.corpus.FAMILIES) does not hold, as `cudnn-algos profile` and
benchmarks/profiles.py take them (FILE:factory): the shipped selector's picks beside a profile of layers it was not
trained on (`cudnn-algos show REPORT.json --selector shipped`).

    python benchmarks/profiles.py --jobs benchmarks/unseen_models.py:inception_v3:fp16-nhwc:32 --budget-s 180

Each factory returns (model, example input at batch 32); a job's batch does not change it.
"""
from __future__ import annotations


def inception_v3():
    """torchvision's Inception v3 (1x7, 7x1, 1x3 and 3x1 kernels: no model of the corpus has them) at 299x299,
    without the auxiliary classifier (its 5x5 convolution needs the 299 input and runs only in training)."""
    import torch
    import torchvision

    return torchvision.models.inception_v3(weights=None, aux_logits=False, init_weights=False), torch.randn(
        32, 3, 299, 299)


def efficientnet_b4():
    """torchvision's EfficientNet-B4 (the corpus has B0-B3 and V2-S: new widths and resolutions) at 380x380."""
    import torch
    import torchvision

    return torchvision.models.efficientnet_b4(weights=None), torch.randn(32, 3, 380, 380)
