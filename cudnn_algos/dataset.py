"""The dataset of every measured candidate: a sweep store's rows, validated, written as Parquet partitioned by
environment (pandas, polars or duckdb read it in one line), with the environment in every row.

Validation comes before anything is written: every row has a known status, a measured time is finite and not
negative, and every problem-direction measured as done has a best (a successful row with a kernel time). A
problem-direction that fails is left out of the dataset and listed with the reason (never silently kept); the sweep
can measure it again.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Any, Iterable

from .sweep.store import SweepStore

TIME_COLUMNS = ("kernel_median_ms", "kernel_min_ms", "kernel_max_ms", "throughput_median_ms", "host_median_ms",
                "reference_kernel_ms")


@dataclass(frozen=True)
class Validation:
    """Problem-directions kept and left out (key -> why), and the rows kept."""

    kept: tuple[str, ...]
    rejected: dict[str, str] = field(default_factory=dict)
    rows: int = 0

    def __str__(self) -> str:
        head = f"{len(self.kept)} problem-directions kept ({self.rows} rows), {len(self.rejected)} left out"
        return "\n".join([head] + [f"  left out: {k}: {why}" for k, why in list(self.rejected.items())[:10]])


def problem_errors(rows: Iterable[dict[str, Any]]) -> list[str]:
    """What is wrong with one problem-direction's rows (empty: nothing)."""
    rows = list(rows)
    errors = []
    if not rows:
        return ["no rows"]
    for i, r in enumerate(rows):
        if not r.get("status"):
            errors.append(f"row {i} ({r.get('candidate')}) has no status")
        for c in TIME_COLUMNS:
            v = r.get(c)
            if v is not None and (not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v)
                                  or v < 0):
                errors.append(f"row {i} ({r.get('candidate')}) has {c}={v!r}")
    if not any(r.get("status") == "SUCCESS" and r.get("kernel_median_ms") is not None for r in rows):
        errors.append("no successful row with a kernel time: no best")
    return errors


def validate(store: SweepStore) -> Validation:
    """The store's done problem-directions whose rows pass problem_errors; the others with their reasons (failed
    ones with the sweep's reason)."""
    kept, rejected, n = [], {}, 0
    for t in store.tasks():
        if t.status != "done":
            rejected[t.key] = f"the sweep failed it: {t.reason}"
            continue
        rows = store.rows(t.key)
        errors = problem_errors(rows)
        if errors:
            rejected[t.key] = "; ".join(errors[:3])
        else:
            kept.append(t.key)
            n += len(rows)
    return Validation(tuple(kept), rejected, n)


def to_frame(store: SweepStore, validation: Validation | None = None):
    """The kept rows as one DataFrame with the problem-direction's key and environment key on every row (lists stay
    list columns; knobs as NAME=value,...)."""
    import pandas as pd

    v = validation or validate(store)
    env = {t.key: t.env for t in store.tasks()}
    recs = []
    for key in v.kept:
        for r in store.rows(key):
            recs.append({**r, "knobs": ",".join(f"{k}={x}" for k, x in (r.get("knobs") or {}).items()) or None,
                         "task": key, "env_key": env[key] or "unknown"})
    return pd.DataFrame.from_records(recs)


def write_parquet(store: SweepStore, out_dir: str | os.PathLike) -> Validation:
    """Validates the store, then writes the kept rows as Parquet under `out_dir`, partitioned by environment
    (``env_key=.../part-0.parquet``). Returns the validation (what was left out and why)."""
    v = validate(store)
    if not v.kept:
        raise ValueError(f"{store.path}: nothing to write: {v}")
    df = to_frame(store, v)
    df.to_parquet(str(out_dir), partition_cols=["env_key"], index=False)
    return v


__all__ = ["Validation", "problem_errors", "validate", "to_frame", "write_parquet", "TIME_COLUMNS"]
