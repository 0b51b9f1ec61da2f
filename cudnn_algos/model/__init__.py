"""Whole models: which convolutions they run (``discovery``), the profile of each in cuDNN's engine space beside
torch's op (``profiling``), benchmark mode end to end (``benchmark_mode``), torch's op with benchmark off in a fresh
process (``torch_off``) and the resumable results store (``store``)."""
from .discovery import ConvUse, discover, distinct_problems
from .benchmark_mode import end_to_end
from .profiling import load_report, profile
from .store import ResultStore
from .torch_off import torch_off_pass, torch_off_runs

__all__ = ["ConvUse", "discover", "distinct_problems", "end_to_end", "load_report", "profile", "ResultStore",
           "torch_off_pass", "torch_off_runs"]
