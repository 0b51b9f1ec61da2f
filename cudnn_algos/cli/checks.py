"""Checks the CLI's commands share: outputs before any work, optional packages, how an early stop exits, an API
check's message in the CLI's words, and opening a sweep store or dataset shards."""
from __future__ import annotations

import os
import sys

from .parsing import EXIT_BUDGET, EXIT_FAILED, EXIT_INTERRUPTED, FileError, UsageError


def check_outputs(inputs: dict, outputs: dict, dirs: dict | None = None) -> None:
    """Before any work: no output over an input or over another output, each output's directory there and
    writable, a figures directory not an existing file. UsageError naming the flag."""
    from ..files import check_distinct, writable_dir, writable_dir_of

    try:
        check_distinct(inputs, outputs)
        for flag, path in outputs.items():
            writable_dir_of(flag, path)
        for flag, path in (dirs or {}).items():
            writable_dir(flag, path)
    except ValueError as e:
        raise UsageError(str(e)) from None


def stop_status(stopped_by: str, resume: str) -> int:
    """The exit status of a run that stopped early, with its last line saying so (on stderr, so that a --json or
    table on stdout stays clean)."""
    if stopped_by == "context-lost":
        print(f"cudnn-algos: stopped: a kernel faulted and this process's CUDA context is lost (the failed search "
              f"says where): {resume}", file=sys.stderr)
        return EXIT_FAILED
    if stopped_by == "budget":
        print(f"cudnn-algos: stopped at the time budget (--budget-s) as planned: {resume}", file=sys.stderr)
        return EXIT_BUDGET
    print(f"cudnn-algos: interrupted: {resume}", file=sys.stderr)
    return EXIT_INTERRUPTED


# each optional module a command checks for: (the package pip installs, the cudnn_algos extra that holds it); the
# README's install line installs every extra named here (tests/test_install_cpu.py keeps the two together)
OPTIONAL = {"pandas": ("pandas", "report"), "matplotlib": ("matplotlib", "report"), "rich": ("rich", "report"),
            "pyarrow": ("pyarrow", "sweep"), "distributed": ("dask[distributed]", "sweep"),
            "sklearn": ("scikit-learn", "selector"), "lightgbm": ("lightgbm", "selector")}


def needs(flag: str, module: str) -> None:
    """An optional package a flag needs, checked before any GPU work (a missing one must not cost a whole run)."""
    import importlib.util

    package, extra = OPTIONAL[module]
    if importlib.util.find_spec(module) is None:
        raise UsageError(f"{flag} needs the {package} package, in the [{extra}] and [all] extras: pip install "
                         f"'{package}' (or, in a checkout, pip install --no-build-isolation -e '.[all]')")


def as_flags(message: str, flags: dict[str, str]) -> str:
    """An API argument check's message in the CLI's words: `heuristics='zz'` -> `--heuristics='zz'`."""
    import re

    return re.sub(r"(?<![\w-])(" + "|".join(map(re.escape, flags)) + r")(?![\w])", lambda m: flags[m.group(1)],
                  message)


def dataset_paths(path: str, command: str) -> list[str] | None:
    """The dataset shards `path` names (shards.shard_paths), None for a sweep store; FileError when it does not
    exist or is a directory of neither, and pyarrow asked for when it names shards."""
    from ..dataset import shards

    if not os.path.exists(path):
        raise FileError(f"{path}: no such file")
    paths = shards.shard_paths(path)
    if paths is not None:
        needs(f"{command} on dataset shards", "pyarrow")
    elif os.path.isdir(path):
        raise FileError(f"{path} is a directory: give a sweep store or a directory of dataset shards (.parquet)")
    return paths


def open_dataset(path: str, command: str):
    """The sweep store at `path`, or the dataset shards it names (a .parquet file or a directory of them, put into a
    store in memory: cudnn_algos.dataset.shards.open_store)."""
    from ..dataset import shards

    dataset_paths(path, command)
    try:
        return shards.open_store(path)
    except ValueError as e:
        raise FileError(str(e)) from None
