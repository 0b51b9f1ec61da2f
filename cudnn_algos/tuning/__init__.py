"""Tune once, run fast in every later process: the tuning database (``db``: SQLite, WAL; default
``$CUDNN_ALGOS_DB`` or ``$XDG_CACHE_HOME/cudnn_algos/tuning.sqlite``), what it stores per environment and problem
key (``winner``, ``keys``), which winner a search stores (``policy``), ``tune()`` and ``apply()``."""
from .patching import CONV_TYPES, TRANSPOSED_TYPES, Applied, ModuleArgs, apply, module_args
from .db import ENV_VAR, ImportCount, TuningDB, default_path, open_db
from .entries import SCHEMA, check_entry, read_export
from .keys import env_key, problem_key
from .policy import TORCH_MARGIN, check_margin, reselected, torch_wins, winner_entry
from .tuner import SEARCHES, TuneResult, tune
from .winner import CANDIDATE_COLS, TORCH_WINNER, WINNER_COLS, Winner

__all__ = ["TuningDB", "TuneResult", "Applied", "Winner", "tune", "apply", "default_path", "open_db", "env_key",
           "problem_key", "TORCH_MARGIN", "TORCH_WINNER", "winner_entry", "reselected", "torch_wins", "check_margin",
           "module_args", "ModuleArgs", "CONV_TYPES", "TRANSPOSED_TYPES", "ImportCount", "check_entry",
           "read_export", "ENV_VAR", "SCHEMA", "SEARCHES", "WINNER_COLS", "CANDIDATE_COLS"]
