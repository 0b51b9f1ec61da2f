"""Checks the CLI's commands share: outputs before any work, optional packages, how an early stop exits, and
an API check's message in the CLI's words."""
from __future__ import annotations

import sys

from .parsing import EXIT_BUDGET, EXIT_INTERRUPTED, UsageError


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
    if stopped_by == "budget":
        print(f"cudnn-algos: stopped at the time budget (--budget-s) as planned: {resume}", file=sys.stderr)
        return EXIT_BUDGET
    print(f"cudnn-algos: interrupted: {resume}", file=sys.stderr)
    return EXIT_INTERRUPTED


def needs(flag: str, module: str) -> None:
    """An optional package a flag needs, checked before any GPU work (a missing one must not cost a whole run)."""
    import importlib.util

    if importlib.util.find_spec(module) is None:
        raise UsageError(f"{flag} needs the {module} package: pip install {module}")


def as_flags(message: str, flags: dict[str, str]) -> str:
    """An API argument check's message in the CLI's words: `heuristics='zz'` -> `--heuristics='zz'`."""
    import re

    return re.sub(r"(?<![\w-])(" + "|".join(map(re.escape, flags)) + r")(?![\w])", lambda m: flags[m.group(1)],
                  message)
