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
from typing import Any

from .problem import Environment
from .results import SCHEMA_VERSION, from_dict, to_dict


def _env_key(env: Environment) -> list:
    return [env.gpu_name, env.compute_capability, env.cudnn_runtime, env.torch_version, env.driver_version]


class ResultStore:
    """Searches keyed by what changes their answer, appended one JSON line each to `path` (created if missing)."""

    def __init__(self, path: str, env: Environment):
        self.path, self.env = path, env
        self.results: dict[str, Any] = {}
        self.skipped = 0  # lines not reused: cut short, another schema, another environment
        if os.path.exists(path):
            self._read()

    @staticmethod
    def key(**parts: Any) -> str:
        return json.dumps(parts, sort_keys=True, default=str)

    def _read(self) -> None:
        with open(self.path) as f:
            for line in f:
                if not line.strip():
                    continue
                try:
                    d = json.loads(line)
                    if d.get("schema") != SCHEMA_VERSION or d.get("env") != _env_key(self.env):
                        self.skipped += 1
                        continue
                    self.results[d["key"]] = from_dict(d["result"])
                except (ValueError, KeyError, TypeError):  # a line cut short by a kill, or not ours
                    self.skipped += 1

    def get(self, key: str) -> Any:
        return self.results.get(key)

    def add(self, key: str, result: Any) -> None:
        """Appends one line and flushes it to disk before returning."""
        line = json.dumps({"schema": SCHEMA_VERSION, "key": key, "env": _env_key(self.env),
                           "result": to_dict(result)}, allow_nan=False)
        with open(self.path, "a") as f:
            f.write(line + "\n")
            f.flush()
            os.fsync(f.fileno())
        self.results[key] = result

    def __len__(self) -> int:
        return len(self.results)
