"""cudnn_algos: every cuDNN convolution algorithm and engine configuration for your layer — status, time,
workspace, determinism, math type, accuracy — beside what torch's own convolution runs.

    import torch, cudnn_algos
    res = cudnn_algos.find(torch.nn.Conv2d(64, 128, 3, padding=1), (32, 64, 56, 56))
    print(res); res.best; res.to_dataframe()

    cudnn_algos.tune(model, example)          # once: the winners into the tuning database
    with cudnn_algos.apply(model): ...        # every later process: the model runs them, no warm-up search

Importing needs no GPU and does not import torch (names load on first use); the C++ extension is loaded (or JIT-built from csrc/) by the first call that needs cuDNN.
"""
from typing import TYPE_CHECKING, Any

from ._version import __version__

# public name -> the module that defines it; imported on first use (PEP 562), so `import cudnn_algos` and the
# CLI's --help and --version do not import torch
_WHERE = {
    "find": "api", "run": "api", "compare": "comparison", "Comparison": "comparison",
    "find_engines": "engines", "identify_torch": "engines", "find_fused": "fused", "info": "installation",
    "CudaError": "errors", "CudaUnavailableError": "errors", "CudnnError": "errors",
    "CudnnOutOfMemoryError": "errors", "ExtensionUnavailableError": "errors",
    "DIRECTIONS": "choices", "MATH_TYPES": "choices", "MODES": "choices", "Environment": "environment",
    "default_math": "problem", "Direction": "choices", "Mode": "choices", "MathType": "choices",
    "load_report": "model", "profile": "model",
    "AlgoResult": "results", "EndToEnd": "results", "EngineRow": "results", "EngineSearches": "results",
    "EngineSearchResult": "results", "Measurement": "results", "ModelReport": "results", "SearchResult": "results",
    "SearchResults": "results", "Stats": "results", "TorchRun": "results", "fidelity_table": "results",
    "FusedRow": "results", "FusedSearchResult": "results",
    "load_json": "results", "ConvShapes": "spec", "ConvSpec": "spec", "cupti_held": "measure",
    "chrome_trace": "trace", "write_chrome_trace": "trace", "Applied": "tuning", "TuneResult": "tuning",
    "TuningDB": "tuning", "Winner": "tuning", "apply": "tuning", "tune": "tuning",
}

__all__ = ["__version__", *_WHERE]


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        import importlib

        value = getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)
        globals()[name] = value  # the next access is a plain attribute
        return value
    raise AttributeError(f"module 'cudnn_algos' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE))


if TYPE_CHECKING:  # what type checkers and IDEs see
    from .api import find, run
    from .comparison import Comparison, compare
    from .engines import find_engines, identify_torch
    from .fused import find_fused
    from .errors import (CudaError, CudaUnavailableError, CudnnError, CudnnOutOfMemoryError,
                         ExtensionUnavailableError)
    from .measure import cupti_held
    from .model import load_report, profile
    from .choices import Direction, MathType, Mode
    from .choices import DIRECTIONS, MATH_TYPES, MODES
    from .environment import Environment
    from .problem import default_math
    from .results import (AlgoResult, EndToEnd, EngineRow, EngineSearches, EngineSearchResult, Measurement,
                          ModelReport, SearchResult, SearchResults, Stats, TorchRun, fidelity_table, load_json,
                          FusedRow, FusedSearchResult)
    from .spec import ConvShapes, ConvSpec
    from .installation import info
    from .trace import chrome_trace, write_chrome_trace
    from .tuning import Applied, TuneResult, TuningDB, Winner, apply, tune
