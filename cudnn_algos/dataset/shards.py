"""The dataset kept in the repository: a sweep store's problem-directions as compact Parquet shards.

A sweep store keeps every column of every row (raw samples, kernel names, the repro command: ~20 KB per
problem-direction gzipped), far over what a repository takes; what a lent GPU measured is lost with the machine
unless it lands somewhere that lasts. A shard keeps, of each row, the columns the report, the noise floor and the
selector read and what a reader needs to judge a time (its min, max and spread, host time, error against the
float64 reference, determinism, workspace): CORE_COLUMNS; the others are left out (they are recomputed from these,
or are raw samples). Times are stored as float32 (7 significant digits; the noise floor is ~0.5%).

Shards are written once and never changed (a new sweep's problem-directions go into a new shard), so a repository
grows by what was measured and no more. ``pack`` validates before it writes (dataset.problem_errors): a
problem-direction whose rows fail is left out, and named, so that the next sweep measures it again; one the sweep
failed is kept, as failed, with its reason. ``unpack`` puts shards back into a sweep store (the keys a sweep skips,
the rows dataset report and selector train read), skipping what the store already holds.

Reading needs pyarrow only; nothing is unpickled (plain Parquet columns; knobs as NAME=value,... text)."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

from ..configs import LISTS
from .measured import problem_errors
from ..results.tables import knobs_text
from ..sweep.store import StoredTask, SweepStore
from ..sweep.tasks import is_repeat

FORMAT = "cudnn_algos.shard"
VERSION = 1

# column -> Arrow type name: text, int, float32 (times and errors), float64, bool, list (of text)
CORE_COLUMNS: dict[str, str] = {
    # the problem
    "model": "text", "layers": "list", "uses": "int", "families": "list", "spec": "text", "input_shape": "text",
    "dtype": "text", "memory_format": "text", "math": "text", "direction": "text", "cudnn_direction": "text",
    # the candidate
    "candidate_kind": "text", "candidate": "text", "engine_id": "int", "knobs": "text", "algo": "text",
    "algo_id": "int", "math_type": "text", "status": "text", "stage": "text", "note": "text",
    "workspace_bytes": "int", "deterministic": "bool", "sources": "list", "heuristic_rank": "int",
    **{h.rank_column: "int" for h in LISTS}, **{h.query_column: "float32" for h in LISTS}, "torch_rank": "int",
    "torch_filter": "text", "torch_ran": "list", "first_call_ms": "float32",
    # its measurement
    "kernel_median_ms": "float32", "kernel_min_ms": "float32", "kernel_max_ms": "float32",
    "kernel_spread": "float32", "throughput_median_ms": "float32", "host_median_ms": "float32",
    "reference_kernel_ms": "float32", "rel_err": "float32", "max_abs_err": "float32", "kernel_calls": "int",
    "measured_rank": "int", "confirmed": "bool", "pruned": "bool", "host_bound": "bool", "measure_error": "text",
    # the environment
    "gpu": "text", "compute_capability": "text", "driver": "text", "cuda_runtime": "int", "cudnn": "text",
    "torch": "text", "package_version": "text", "git_commit": "text", "created": "text",
}
# each row's problem-direction and where, when and how it ran (StoredTask); `i` is the row's place in its
# problem-direction, null on the one row that stands for a problem-direction without rows (a failed one)
TASK_COLUMNS: dict[str, str] = {
    "task": "text", "task_status": "text", "task_reason": "text", "task_attempts": "int", "task_worker": "text",
    "task_seconds": "float64", "task_env": "text", "task_finished_at": "text", "i": "int",
}


@dataclass(frozen=True)
class Packed:
    """What pack wrote: problem-directions (done, failed), rows, and those left out with why."""

    path: str
    done: int  # measured, repeats included
    repeats: int  # second measurements of the noise floor's sample
    failed: int
    rows: int
    bytes: int
    left_out: dict[str, str] = field(default_factory=dict)

    def __str__(self) -> str:
        head = (f"wrote {self.path}: {self.done} problem-directions measured ({self.repeats} of them repeats), "
                f"{self.failed} failed (kept with their reasons), {self.rows} rows, {self.bytes / 1e6:.2f} MB; "
                f"{len(self.left_out)} left out")
        return "\n".join([head] + [f"  left out (a sweep measures it again): {k}: {why}"
                                   for k, why in list(self.left_out.items())[:10]])


def _arrow_type(kind: str):
    import pyarrow as pa

    return {"text": pa.string(), "int": pa.int64(), "float32": pa.float32(), "float64": pa.float64(),
            "bool": pa.bool_(), "list": pa.list_(pa.string())}[kind]


def schema():
    """The shards' Arrow schema, with the format's name and version in its metadata."""
    import pyarrow as pa

    cols = {**TASK_COLUMNS, **CORE_COLUMNS}
    return pa.schema([pa.field(c, _arrow_type(k)) for c, k in cols.items()],
                     metadata={"format": FORMAT, "version": str(VERSION)})


def _cell(kind: str, v: Any) -> Any:
    if v is None:
        return None
    if kind == "list":
        return [str(x) for x in v]
    if kind == "text":
        return v if isinstance(v, str) else str(v)
    if kind == "bool":
        return bool(v)
    if kind == "int":
        return int(v)
    return float(v)


def _shard_row(t: StoredTask, i: int | None, r: dict[str, Any]) -> dict[str, Any]:
    out = {"task": t.key, "task_status": t.status, "task_reason": t.reason, "task_attempts": t.attempts,
           "task_worker": t.worker, "task_seconds": t.seconds, "task_env": t.env, "task_finished_at": t.finished_at,
           "i": i}
    for c, kind in CORE_COLUMNS.items():
        v = r.get(c)
        if c == "knobs" and v is not None:
            v = knobs_text(v)
        out[c] = _cell(kind, v)
    return out


def pack(store: SweepStore, path: str | os.PathLike, keys: Iterable[str] | None = None,
         about: str = "") -> Packed:
    """Writes the store's problem-directions (of `keys`, when given; repeats included: they are the noise floor) as
    one new shard at `path` (which must not exist): rows that pass dataset.problem_errors, and failed ones as one row
    each. ValueError when there is nothing to write."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = str(path)
    if os.path.exists(path):
        raise ValueError(f"{path} exists: a shard is written once (pack into a new file)")
    wanted = None if keys is None else set(keys)
    recs: list[dict[str, Any]] = []
    left_out: dict[str, str] = {}
    done = failed = repeats = 0
    for t in store.tasks():
        if wanted is not None and t.key not in wanted:
            continue
        if t.status != "done":
            recs.append(_shard_row(t, None, {}))
            failed += 1
            continue
        rows = store.rows(t.key)
        errors = problem_errors(rows)
        if errors:
            left_out[t.key] = "; ".join(errors[:3])
            continue
        recs += [_shard_row(t, i, r) for i, r in enumerate(rows)]
        done += 1
        repeats += is_repeat(t.key)
    if not recs:
        raise ValueError(f"{store.path}: nothing to pack ({len(left_out)} problem-directions left out)")
    sch = schema()
    if about:
        sch = sch.with_metadata({**sch.metadata, b"about": about.encode()})
    table = pa.Table.from_pylist(recs, schema=sch)
    tmp = path + ".tmp"
    try:
        pq.write_table(table, tmp, compression="zstd", compression_level=15, use_dictionary=True)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    return Packed(path, done, repeats, failed, len(recs) - failed, os.path.getsize(path), left_out)


def _check(path: str, meta: dict[bytes, bytes] | None) -> None:
    meta = meta or {}
    if meta.get(b"format") != FORMAT.encode():
        raise ValueError(f"{path} is not a cudnn_algos dataset shard (no format {FORMAT!r} in its metadata)")
    if meta.get(b"version") != str(VERSION).encode():
        raise ValueError(f"{path} is a shard of version {meta.get(b'version', b'?').decode()}; this version reads "
                         f"{VERSION}")


def read(path: str | os.PathLike) -> list[tuple[StoredTask, list[dict[str, Any]]]]:
    """A shard's problem-directions, each with its rows (core columns; knobs back as a dict), in the order written.
    ValueError for a file that is not a shard of this version."""
    import pyarrow.parquet as pq

    path = str(path)
    try:
        table = pq.read_table(path)
    except (OSError, ValueError) as e:  # pyarrow's ArrowInvalid is a ValueError
        raise ValueError(f"{path}: not readable as Parquet: {str(e)[:200]}") from None
    _check(path, table.schema.metadata)
    out: list[tuple[StoredTask, list[dict[str, Any]]]] = []
    by_key: dict[str, int] = {}
    for rec in table.to_pylist():
        key = rec["task"]
        if key not in by_key:
            t = StoredTask(key, rec["task_status"], rec["task_reason"], rec["task_attempts"], rec["task_worker"],
                           rec["task_seconds"], rec["task_env"], 0, rec["task_finished_at"])
            by_key[key] = len(out)
            out.append((t, []))
        if rec["i"] is None:
            continue
        row = {c: rec[c] for c in CORE_COLUMNS}
        row["knobs"] = _knobs(row["knobs"])
        out[by_key[key]][1].append(row)
    return [(StoredTask(t.key, t.status, t.reason, t.attempts, t.worker, t.seconds, t.env, len(rows),
                        t.finished_at), rows) for t, rows in out]


def _knobs(text: str | None) -> dict[str, Any] | None:
    if text is None:
        return None
    out: dict[str, Any] = {}
    for part in filter(None, text.split(",")):
        k, _, v = part.partition("=")
        try:
            out[k] = int(v)
        except ValueError:
            out[k] = v
    return out


def unpack(paths: Sequence[str | os.PathLike], store: SweepStore) -> tuple[int, int]:
    """Puts every problem-direction of the shards at `paths` that `store` lacks into it (one transaction each).
    Returns (put, already there: left as they were)."""
    put = already = 0
    for p in paths:
        for t, rows in read(p):
            if store.restore(t, rows):
                put += 1
            else:
                already += 1
    return put, already


def measured(paths: Sequence[str | os.PathLike]) -> list[tuple[str, list[dict[str, Any]]]]:
    """What dataset.measured_problems(open_store(...)) gives for these shards — (key, rows) of each problem-direction
    kept by the dataset's validation, repeats left out, a key in two shards taken from the first, in the store's
    order (finished_at, then key) — read straight from the shards, without the JSON round trip of a store."""
    from .measured import kept

    seen: dict[str, tuple[StoredTask, list[dict[str, Any]]]] = {}
    for p in paths:
        for t, rows in read(p):
            seen.setdefault(t.key, (t, rows))
    order = sorted(seen.values(), key=lambda tr: (tr[0].finished_at is not None, tr[0].finished_at or 0, tr[0].key))
    return list(kept((t, lambda rows=rows: rows) for t, rows in order))


def shard_paths(path: str | os.PathLike) -> list[str] | None:
    """The shards `path` names: itself (a .parquet file), or every .parquet file under it (a directory, such as
    data/sm_90-cudnn-9.19), sorted; None when it names a sweep store instead."""
    path = str(path)
    if os.path.isdir(path):
        return sorted(os.path.join(d, f) for d, _, fs in os.walk(path) for f in fs if f.endswith(".parquet"))
    return [path] if path.endswith(".parquet") else None


def open_store(path: str | os.PathLike) -> SweepStore:
    """A sweep store to read: the one at `path`, or the shards `path` names put into a store in memory (what
    `dataset report`, `selector train` and the like read, without a merge first). ValueError naming the path when
    a directory holds no shard."""
    paths = shard_paths(path)
    if paths is None:
        return SweepStore(path)
    if not paths:
        raise ValueError(f"{path}: no dataset shard (.parquet) in it")
    store = SweepStore(":memory:")
    try:
        unpack(paths, store)
    except BaseException:
        store.close()
        raise
    return store


def summary(paths: Sequence[str | os.PathLike]) -> dict[str, Any]:
    """Counts over shards: problem-directions measured (first measurements), repeats, failed, rows, bytes, and
    any key stored in more than one shard (none, when they were packed from one store's new keys each)."""
    seen: dict[str, str] = {}
    twice: list[str] = []
    done = repeats = failed = rows = 0
    for p in paths:
        for t, rs in read(p):
            if t.key in seen:
                twice.append(t.key)
                continue
            seen[t.key] = str(p)
            rows += len(rs)
            if t.status != "done":
                failed += 1
            elif is_repeat(t.key):
                repeats += 1
            else:
                done += 1
    return {"shards": len(paths), "measured": done, "repeats": repeats, "failed": failed, "rows": rows,
            "bytes": sum(os.path.getsize(p) for p in paths), "in_two_shards": twice}


__all__ = ["CORE_COLUMNS", "FORMAT", "Packed", "TASK_COLUMNS", "VERSION", "measured", "open_store", "pack", "read",
           "schema", "shard_paths", "summary", "unpack"]
