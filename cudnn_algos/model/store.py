"""A run that is never lost: ``ResultStore`` appends each finished search to a JSON-lines file as soon as it is
measured, so a crash, a kill or Ctrl-C keeps everything measured so far, and a re-run with the same store takes
what it holds instead of measuring it again.

Each line is one search: its key (the problem, direction, search kind and settings), the environment it was
measured in, and the result as ``to_dict`` writes it. A line from another GPU, cuDNN or torch is never reused; a
line cut short by a kill (the last one) or written by another schema is skipped and counted.
"""
from __future__ import annotations

import json
import os
import warnings
from typing import Any

from ..errors import ResultFileError
from ..environment import Environment
from ..results import SCHEMA_VERSION, from_dict, to_dict


def _same_env(saved: Any, env: Environment) -> bool:
    """A line's environment is this one: its Environment.key(), or — a line of a store written before the key was
    the tuning database's — the list of fields it was then."""
    return saved == env.key() or saved == [env.gpu_name, env.compute_capability, env.cudnn_runtime,
                                           env.torch_version, env.driver_version]


class ResultStore:
    """Searches keyed by what changes their answer, appended one JSON line each to `path` (created if missing).

    Reading never fails on a line: one that is cut short, not UTF-8, not a JSON object, nested too deeply or not a
    result is skipped and counted (``damaged``), and so is one from another environment or schema (``other``,
    expected when a store is shared); a warning says how many of each. A last line cut short by a kill is left as
    it is and the next append starts on a new line, so it never glues onto it."""

    def __init__(self, path: str, env: Environment, warn: bool = True):
        self.path, self.env = str(path), env
        self.results: dict[str, Any] = {}
        self.damaged = 0  # lines that are not a stored search (cut short, not JSON, not ours)
        self.other = 0  # searches of another environment or schema: not reused
        self._needs_newline = False
        if os.path.isdir(self.path):
            raise ResultFileError(self.path, "is a directory: give the results store a file path")
        if os.path.exists(self.path):
            self._read()
            if warn and (self.damaged or self.other):
                warnings.warn(f"results store {self.path}: reusing {len(self.results)} search(es); skipped "
                              f"{self.damaged} damaged line(s) (cut short by a kill, or not a stored search) and "
                              f"{self.other} from another GPU, cuDNN, torch or schema", RuntimeWarning, stacklevel=2)

    @property
    def skipped(self) -> int:
        """Lines not reused, for any reason (damaged + other)."""
        return self.damaged + self.other

    @staticmethod
    def key(**parts: Any) -> str:
        return json.dumps(parts, sort_keys=True, default=str)

    def _read(self) -> None:
        with open(self.path, "rb") as f:
            data = f.read()
        self._needs_newline = bool(data) and not data.endswith(b"\n")
        for raw in data.split(b"\n"):
            if not raw.strip():
                continue
            try:
                d = json.loads(raw.decode("utf-8"))
                if not isinstance(d, dict) or "key" not in d or "result" not in d:
                    raise ValueError("not a stored search")
                if d.get("schema") != SCHEMA_VERSION or not _same_env(d.get("env"), self.env):
                    self.other += 1
                    continue
                self.results[d["key"]] = from_dict(d["result"])
            except (ValueError, KeyError, TypeError, AttributeError, RecursionError):  # UnicodeDecodeError too
                self.damaged += 1

    def get(self, key: str) -> Any:
        return self.results.get(key)

    def add(self, key: str, result: Any) -> None:
        """Appends one line (on a line of its own) and flushes it to disk before returning."""
        line = json.dumps({"schema": SCHEMA_VERSION, "key": key, "env": self.env.key(),
                           "result": to_dict(result)}, allow_nan=False)
        with open(self.path, "a") as f:
            f.write(("\n" if self._needs_newline else "") + line + "\n")
            f.flush()
            os.fsync(f.fileno())
        self._needs_newline = False
        self.results[key] = result

    def __len__(self) -> int:
        return len(self.results)
