"""What the tuning database takes in and gives out as text: one winner or candidate checked (``check_entry``: the
fields, text where text goes, ints in range, finite numbers), and an export file read back, every entry checked
(``read_export``)."""
from __future__ import annotations

import json
import math
import os
from typing import Any

from .winner import CANDIDATE_COLS, WINNER_COLS

SCHEMA = 1  # of the database (cudnn_algos.tuning.db) and of its exports
EXPORT_HEAD = "cudnn_algos_tuning_export"
_REAL = {"kernel_ms", "host_ms", "rel_err", "runner_up_ms", "torch_on_ms", "throughput_ms"}
_INT = {"engine_id", "workspace_bytes"}
_REQUIRED = {"winner": ("env", "key", "settings", "config", "engine_id"), "candidate": ("env", "key", "settings",
                                                                                        "name")}
_INT64 = 2**63


def check_entry(kind: str, e: Any, where: str = "") -> None:
    """One winner or candidate as put() and import take it: a JSON object with the required fields, text where
    text goes, ints in range, finite numbers. ValueError naming `where`, the field and the value."""
    at = f"{where}: " if where else ""
    if not isinstance(e, dict):
        raise ValueError(f"{at}a {kind} is a JSON object, not {type(e).__name__}")
    cols = WINNER_COLS if kind == "winner" else CANDIDATE_COLS
    for f in _REQUIRED[kind]:
        if e.get(f) is None:
            raise ValueError(f"{at}the {kind} has no {f}")
    for f, v in e.items():
        if f not in cols:
            raise ValueError(f"{at}the {kind} has a field {f!r} that is not one of {', '.join(cols)}")
        if v is None:
            continue
        if f in _REAL:
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise ValueError(f"{at}the {kind}'s {f}={v!r} must be a finite number or null")
        elif f in _INT:
            if isinstance(v, bool) or not isinstance(v, int) or not -_INT64 <= v < _INT64:
                raise ValueError(f"{at}the {kind}'s {f}={v!r} must be an integer that fits 64 bits")
        elif not isinstance(v, str):
            raise ValueError(f"{at}the {kind}'s {f}={v!r} must be text")
    if kind == "winner":
        for f in ("settings", "knobs", "environment"):
            if isinstance(e.get(f), str) and e[f]:
                try:
                    json.loads(e[f])
                except ValueError:
                    raise ValueError(f"{at}the winner's {f} is not JSON text: {e[f][:80]!r}") from None


def read_export(path: str | os.PathLike) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The winners and candidates of an export file, every entry checked (check_entry); ValueError naming the
    file and line of the first bad one."""
    p = str(path)
    if os.path.isdir(p):
        raise ValueError(f"{p} is a directory, not a tuning export")
    winners, candidates = [], []
    with open(p, "rb") as f:
        for n, raw in enumerate(f, 1):
            where = f"{p} line {n}"
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError:
                hint = " (gzip-compressed: gunzip it first)" if raw[:2] == b"\x1f\x8b" else ""
                raise ValueError(f"{where}: not UTF-8 text{hint}: not a cudnn_algos tuning export") from None
            if not line.strip():
                continue
            try:
                d = json.loads(line, parse_constant=_no_constant)
            except (ValueError, RecursionError) as e:
                raise ValueError(f"{where}: not JSON ({str(e)[:100]})") from None
            if n == 1:
                if not isinstance(d, dict) or d.get(EXPORT_HEAD) != SCHEMA:
                    raise ValueError(f"{where}: not a cudnn_algos tuning export of schema {SCHEMA} (it begins "
                                     f"{line.strip()[:80]!r})")
                continue
            if not isinstance(d, dict) or len(d) != 1 or next(iter(d)) not in ("winner", "candidate"):
                raise ValueError(f"{where}: an entry is {{\"winner\": {{...}}}} or {{\"candidate\": {{...}}}}, not "
                                 f"{line.strip()[:80]!r}")
            kind, entry = next(iter(d.items()))
            check_entry(kind, entry, where)
            (winners if kind == "winner" else candidates).append(entry)
    if not winners and not candidates and os.path.getsize(p) == 0:
        raise ValueError(f"{p} is empty: not a cudnn_algos tuning export")
    return winners, candidates


def _no_constant(name: str):
    raise ValueError(f"{name} is not a number JSON allows")
