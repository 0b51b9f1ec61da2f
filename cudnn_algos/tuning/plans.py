"""Serialized fused plans beside the tuning database (Note [serialized plans] in csrc/search/engine_search.h): the
JSON cuDNN gives for a tuned fused winner's built plan, one file per environment and key in ``<database>.plans/``,
so that apply(fuse=True) in a later process finalizes it from that instead of building (and, for a runtime-compiled
engine, compiling) it again. A file, not a table: the database's schema stays as it is (an older version reads the
database unchanged). A file that is missing, unreadable or refused by cuDNN only means the plan is built as before."""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

from ..files import atomic_write

MAX_PLAN_BYTES = 64 << 20  # a plan's JSON larger than this is neither written nor read


def plans_dir(db_path: str | os.PathLike) -> Path:
    """Where the serialized plans of the database at `db_path` live."""
    p = Path(db_path)
    return p.with_name(p.name + ".plans")


def plan_file(directory: str | os.PathLike, env_key: str, key: str) -> Path:
    """The file of one environment's plan for one winners-table key (a digest of both: keys hold any character)."""
    return Path(directory) / (hashlib.sha256(f"{env_key}\n{key}".encode()).hexdigest()[:32] + ".json")


def write_plan(directory: str | os.PathLike, env_key: str, key: str, data: bytes) -> Path | None:
    """Writes a plan's JSON atomically; None (nothing written) when it is empty or over MAX_PLAN_BYTES."""
    if not data or len(data) > MAX_PLAN_BYTES:
        return None
    path = plan_file(directory, env_key, key)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, data)
    return path


def read_plan(directory: str | os.PathLike | None, env_key: str, key: str) -> bytes:
    """The plan's JSON, or b"" when there is none (no directory, no file, unreadable, too large)."""
    if directory is None:
        return b""
    path = plan_file(directory, env_key, key)
    try:
        if path.stat().st_size > MAX_PLAN_BYTES:
            return b""
        return path.read_bytes()
    except OSError:
        return b""


__all__ = ["MAX_PLAN_BYTES", "plans_dir", "plan_file", "write_plan", "read_plan"]
