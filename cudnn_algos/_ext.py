"""Loads the C++ extension cudnn_algos._C, building it from csrc/ on first use when it is not installed.

Nothing here runs at package import: ``load()`` is called by the first function that needs cuDNN.
"""
from __future__ import annotations

import os
import sys
import threading
import time
import warnings
from pathlib import Path
from types import ModuleType

from .errors import ExtensionUnavailableError

_lock = threading.Lock()
_module: ModuleType | None = None
_how: str = ""


def _jit_build() -> ModuleType:
    from torch.utils.cpp_extension import load as cpp_load

    from . import _build

    root = Path(__file__).resolve().parent.parent
    if not (root / "csrc").is_dir():
        raise ExtensionUnavailableError(
            "cudnn_algos._C is not built and no csrc/ folder is beside the package to build it from; "
            "reinstall with `pip install --no-build-isolation .`"
        )
    cfg = _build.find_build_config()
    build_dir = root / "build" / "jit"
    build_dir.mkdir(parents=True, exist_ok=True)
    return cpp_load(
        name="cudnn_algos_C",
        sources=_build.sources(root),
        extra_cflags=["-O2", "-fvisibility=hidden", *cfg.defines()],
        extra_include_paths=cfg.include_dirs(),
        extra_ldflags=cfg.ldflags(),
        build_directory=str(build_dir),
        verbose=bool(os.environ.get("CUDNN_ALGOS_VERBOSE_BUILD")),
    )


def load() -> ModuleType:
    """The extension module; imports the built one, else JIT-builds it from csrc/ (once per process)."""
    global _module, _how
    if _module is not None:
        return _module
    with _lock:
        if _module is not None:
            return _module
        import torch  # noqa: F401  (loads libtorch, CUDA and cuDNN first, so _C binds to the same libraries)

        try:
            if os.environ.get("CUDNN_ALGOS_FORCE_JIT"):
                raise ImportError("CUDNN_ALGOS_FORCE_JIT is set")
            from . import _C as mod  # type: ignore[attr-defined]

            _how = "installed"
        except ImportError as first:
            if os.environ.get("CUDNN_ALGOS_NO_JIT"):
                raise ExtensionUnavailableError(f"cudnn_algos._C is not built ({first}); CUDNN_ALGOS_NO_JIT is set")
            print("cudnn_algos: the C++ extension is not installed; building it from csrc/ for this torch "
                  "(first use only; about a minute)...", file=sys.stderr, flush=True)
            t0 = time.perf_counter()
            try:
                mod = _jit_build()
            except ExtensionUnavailableError:
                raise
            except Exception as e:  # compiler missing, headers missing, ...
                raise ExtensionUnavailableError(f"cudnn_algos._C is not built and building it failed: {e}") from e
            print(f"cudnn_algos: built in {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
            _how = "jit"
        _check_versions(mod)
        _module = mod
        return mod


def how_loaded() -> str:
    """'installed', 'jit', or '' if not loaded yet."""
    return _how


def _check_versions(mod: ModuleType) -> None:
    import torch

    v = mod.versions()  # the bound struct (csrc/bind/problem.cpp); backend.Versions is its typed face
    built, run = v.cudnn_build, v.cudnn_runtime
    if built // 10000 != run // 10000:
        raise ExtensionUnavailableError(
            f"cudnn_algos._C was built against cuDNN {built} but cuDNN {run} is loaded: rebuild the extension"
        )
    if v.torch_build != torch.__version__:
        warnings.warn(
            f"cudnn_algos._C was built with torch {v.torch_build} but torch {torch.__version__} is running; "
            "rebuild it (pip install --no-build-isolation -e .) if anything misbehaves",
            RuntimeWarning,
            stacklevel=3,
        )
