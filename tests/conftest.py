"""Tests marked `gpu` need a CUDA GPU with cuDNN; elsewhere they are skipped with the reason.

CPU tests (no marker) cover what needs no GPU: argument handling, specs from modules, result formatting and JSON,
the CLI, and that the extension builds and loads. They never claim anything about cuDNN's behaviour on a GPU.
"""
import pytest
import torch


def _gpu_reason() -> str | None:
    if not torch.cuda.is_available():
        return (f"no CUDA GPU visible (torch {torch.__version__}, CUDA {torch.version.cuda}): "
                "GPU tests run on the device machine via scripts/gpu-check")
    if not torch.backends.cudnn.is_available():
        return "torch reports cuDNN unavailable"
    return None


def pytest_collection_modifyitems(config, items):
    reason = _gpu_reason()
    if reason is None:
        return
    skip = pytest.mark.skip(reason=reason)
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
