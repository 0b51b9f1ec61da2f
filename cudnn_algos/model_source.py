"""Where a model comes from, for the CLI and for fresh processes: one string names it.

    resnet50                      the built-in ResNet-50 (no torchvision needed), input (B, 3, 224, 224)
    torchvision:<name>            torchvision.models.get_model(<name>, weights=None), input (B, 3, 224, 224)
                                  (video models such as r3d_18: (B, 3, 16, 112, 112))
    path/to/file.py:factory       factory() -> model, or (model, example_input)
"""
from __future__ import annotations

import importlib.util
import os
from typing import TYPE_CHECKING, Any

from .choices import BUILTIN_MODEL_NAMES

if TYPE_CHECKING:
    import torch

_VIDEO = ("r3d_18", "mc3_18", "r2plus1d_18", "s3d", "mvit_v1_b", "mvit_v2_s", "swin3d_t", "swin3d_s", "swin3d_b")


class ModelSourceError(ValueError):
    pass


def check_source(source: str) -> None:
    """ModelSourceError where `source` names no model of any of the three kinds (no torch needed: a usage error
    answers at once); a file's factory is looked at only when it is loaded."""
    if source in BUILTIN_MODEL_NAMES or source.startswith("torchvision:"):
        return
    if ":" in source:
        path = source.rsplit(":", 1)[0]
        if not os.path.isfile(path):
            raise ModelSourceError(f"{source!r}: no file {path!r}")
        return
    raise ModelSourceError(
        f"model {source!r} is not one of: {', '.join(BUILTIN_MODEL_NAMES)}, torchvision:<name>, path/file.py:factory")


def load_model(source: str, batch: int = 32, input_shape: tuple[int, ...] | None = None
               ) -> tuple["torch.nn.Module", Any, str]:
    """(model, example input on the CPU, display name). `input_shape` (without batch... or with) overrides."""
    if input_shape is not None and len(input_shape) >= 3:
        shape = tuple(input_shape)
    else:
        shape = None
    import torch

    from .builtin_models import BUILTIN_MODELS

    if source in BUILTIN_MODELS:
        factory, chw = BUILTIN_MODELS[source]
        model = factory()
        shape = shape or (batch, *chw)
        return model, torch.randn(shape), source
    if source.startswith("torchvision:"):
        name = source.split(":", 1)[1]
        try:
            import torchvision
        except ImportError:
            raise ModelSourceError(f"{source!r} needs torchvision, which is not installed") from None
        try:
            model = torchvision.models.get_model(name, weights=None)
        except (ValueError, KeyError) as e:
            raise ModelSourceError(f"{source!r}: torchvision has no model {name!r} ({e})") from None
        default = (batch, 3, 16, 112, 112) if name in _VIDEO else (batch, 3, 224, 224)
        return model, torch.randn(shape or default), name
    if ":" in source:
        path, factory_name = source.rsplit(":", 1)
        if not os.path.isfile(path):
            raise ModelSourceError(f"{source!r}: no file {path!r}")
        spec = importlib.util.spec_from_file_location(os.path.splitext(os.path.basename(path))[0], path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        factory = getattr(mod, factory_name, None)
        if not callable(factory):
            raise ModelSourceError(f"{source!r}: {path} has no callable {factory_name!r}")
        made = factory()
        if isinstance(made, tuple) and len(made) == 2:
            model, example = made
            if shape is not None:
                example = torch.randn(shape)
        else:
            model = made
            if shape is None:
                raise ModelSourceError(f"{source!r} returns only a model: give --input N,C,...")
            example = torch.randn(shape)
        if not isinstance(model, torch.nn.Module):
            raise ModelSourceError(f"{source!r}: {factory_name}() did not return a torch.nn.Module")
        return model, example, factory_name
    check_source(source)
    raise ModelSourceError(f"model {source!r}: no model of that name")  # (check_source refuses what reaches here)
