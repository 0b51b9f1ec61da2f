"""cudnn_algos: every cuDNN convolution algorithm for your layer — status, time, workspace, determinism, math type.

    import torch, cudnn_algos
    res = cudnn_algos.find(torch.nn.Conv2d(64, 128, 3, padding=1), (32, 64, 56, 56))
    print(res); res.best; res.to_dataframe()

Importing needs no GPU; the C++ extension is loaded (or JIT-built from csrc/) by the first call that needs cuDNN.
"""
from .api import MATH_TYPES, MODES, default_math, find, run
from .engines import EngineRow, EngineSearchResult, TorchRun, find_engines, identify_torch
from .errors import CudaError, CudaUnavailableError, CudnnError, ExtensionUnavailableError
from .info import info
from .profile import EndToEnd, ModelReport, load_report, profile
from .results import DIRECTIONS, AlgoResult, Environment, SearchResult, SearchResults, load_json
from .spec import ConvShapes, ConvSpec

__version__ = "0.1.0"

__all__ = [
    "find", "run", "find_engines", "identify_torch", "TorchRun", "EngineRow", "EngineSearchResult", "info", "load_json", "default_math", "profile", "ModelReport", "EndToEnd", "load_report",
    "ConvSpec", "ConvShapes", "SearchResult", "SearchResults", "AlgoResult", "Environment",
    "CudnnError", "CudaError", "CudaUnavailableError", "ExtensionUnavailableError",
    "DIRECTIONS", "MODES", "MATH_TYPES", "__version__",
]
