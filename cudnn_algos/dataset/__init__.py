"""The dataset of measured candidates: a sweep store's rows validated, compared between runs and written as Parquet
(``measured``; its public names are here), the compact shards the repository keeps (``shards``), and the regret of
each way of choosing against the measured best (``regret``: ``cudnn-algos dataset report``)."""
from .measured import (Comparison, NoiseFloor, Transfer, Validation, compare, kept, measured_problems, noise_floor,
                       problem_errors, to_frame, validate, write_parquet)

__all__ = ["Comparison", "NoiseFloor", "Transfer", "Validation", "compare", "kept", "measured_problems", "noise_floor",
           "problem_errors", "to_frame", "validate", "write_parquet"]
