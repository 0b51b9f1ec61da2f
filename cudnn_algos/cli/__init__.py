"""``cudnn-algos`` / ``python -m cudnn_algos``: info, find (one layer, legacy algorithms), engines (one layer, the
graph API's engine configurations), profile (a whole model), tune/db (the tuning database), show and compare (saved
results), corpus/sweep/dataset (the data pipeline: ``data_commands``) and selector (``selector_commands``).

Exit codes: 0 ok; 1 the GPU, cuDNN or the extension failed (one line on stderr, no traceback); 2 bad arguments;
3 profile or tune stopped at --budget-s as planned (what was done is kept: the same command again continues);
130 interrupted (Ctrl-C). Parsing (``parsing``) imports nothing heavy, so --help and --version answer at once;
each command (``commands``, ``data_commands``, ``selector_commands``; their shared checks in ``checks``) imports
what it needs when it runs.
"""
from .commands import COMMANDS
from .entry import main
from .parsing import (EXIT_FAILED, EXIT_INTERRUPTED, EXIT_BUDGET, EXIT_USAGE, FileError, UsageError, build_parser,
                      parse_conv, parse_shape)

__all__ = ["main", "build_parser", "parse_conv", "parse_shape", "UsageError", "FileError", "COMMANDS",
           "EXIT_FAILED", "EXIT_INTERRUPTED", "EXIT_BUDGET", "EXIT_USAGE"]
