"""cudnn_algos: every cuDNN convolution algorithm and engine configuration for your layer — status, time,
workspace, determinism, math type, accuracy — beside what torch's own convolution runs.

    import torch, cudnn_algos
    res = cudnn_algos.find(torch.nn.Conv2d(64, 128, 3, padding=1), (32, 64, 56, 56))
    print(res); res.best; res.to_dataframe()

    cudnn_algos.tune(model, example)          # once: the winners into the tuning database
    with cudnn_algos.apply(model): ...        # every later process: the model runs them, no warm-up search

Importing needs no GPU; the C++ extension is loaded (or JIT-built from csrc/) by the first call that needs cuDNN.
"""
from .api import find, run
from .comparison import Comparison, compare
from .engines import find_engines, identify_torch
from .errors import CudaError, CudaUnavailableError, CudnnError, CudnnOutOfMemoryError, ExtensionUnavailableError
from .sysinfo import info
from .problem import DIRECTIONS, MATH_TYPES, MODES, Environment, default_math
from .report import load_report, profile
from .results import (AlgoResult, EndToEnd, EngineRow, EngineSearches, EngineSearchResult, Measurement, ModelReport,
                      SearchResult, SearchResults, Stats, TorchRun, fidelity_table, load_json)
from .spec import ConvShapes, ConvSpec
from .timing import cupti_held
from .trace import chrome_trace, write_chrome_trace
from .tuning import Applied, TuneResult, TuningDB, apply, tune

from ._version import __version__

__all__ = [
    "find", "run", "find_engines", "identify_torch", "profile", "info", "load_json", "load_report", "default_math",
    "fidelity_table", "compare", "Comparison", "ConvSpec", "ConvShapes", "SearchResult", "SearchResults", "AlgoResult", "EngineRow",
    "EngineSearchResult", "EngineSearches", "TorchRun", "ModelReport", "EndToEnd", "Measurement", "Stats",
    "Environment", "CudnnError", "CudnnOutOfMemoryError", "CudaError", "CudaUnavailableError",
    "ExtensionUnavailableError", "DIRECTIONS", "MODES", "MATH_TYPES", "__version__", "tune", "apply", "TuningDB",
    "TuneResult", "Applied",
    "chrome_trace", "write_chrome_trace", "cupti_held",
]
