"""The dataset kept in the repository: a sweep store's problem-directions as compact Parquet shards.

A sweep store keeps every column of every row (raw samples, kernel names, the repro command: ~20 KB per
problem-direction gzipped), far over what a repository takes; what a lent GPU measured is lost with the machine
unless it lands somewhere that lasts. A shard keeps, of each row, the columns the report, the noise floor and the
selector read and what a reader needs to judge a time (its min, max and spread, host time, error against the
float64 reference, determinism, workspace): CORE_COLUMNS; the others are left out (they are recomputed from these,
or are raw samples). Times are stored as float32 (7 significant digits; the noise floor is ~0.5%).

Note [shard version 2]: a row's knobs are not a column; they are read back from its candidate (an engine
configuration's name is `engN{NAME=value,...}`, knobs_text of its knobs; ``pack`` checks that it is before it
writes), and the float columns are written without a dictionary (measured times rarely repeat) and with Parquet's
byte-stream-split encoding, zstd at level 22: 27% smaller than version 1 on the same rows. ``read`` takes both
versions and gives the same rows; ``upgrade`` rewrites a version-1 shard as version 2 and checks that it reads back
the same before it replaces it.

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

from ..configs import LISTS, split_config_name
from .measured import problem_errors
from ..results.tables import knobs_text
from ..sweep.store import StoredTask, SweepStore
from ..sweep.tasks import is_repeat

FORMAT = "cudnn_algos.shard"
VERSION = 2
READS = (1, 2)  # the versions read() takes

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
DERIVED = ("knobs",)  # CORE_COLUMNS a version-2 shard reads from others (Note [shard version 2])


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
    """The shards' Arrow schema (this version's), with the format's name and version in its metadata."""
    import pyarrow as pa

    cols = {**TASK_COLUMNS, **{c: k for c, k in CORE_COLUMNS.items() if c not in DERIVED}}
    return pa.schema([pa.field(c, _arrow_type(k)) for c, k in cols.items()],
                     metadata={"format": FORMAT, "version": str(VERSION)})


def knobs_of(candidate_kind: str | None, candidate: str | None) -> str | None:
    """A row's knobs text as its candidate names them: `engN{NAME=value,...}`'s braces ("" where it has none) for
    an engine configuration, None for any other candidate. ValueError for an engine candidate not so named."""
    if candidate_kind != "engine":
        return None
    split = split_config_name(candidate)
    if split is None:
        raise ValueError(f"engine candidate {candidate!r} is not named engN{{NAME=value,...}}")
    return knobs_text(dict(split[1]))  # the one flat form the rows are checked against


def _write(table, path: str) -> None:
    """Writes `table` at `path` through a temporary file (Note [shard version 2]'s encodings)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    floats = [f.name for f in table.schema if pa.types.is_floating(f.type)]
    tmp = path + ".tmp"
    try:
        pq.write_table(table, tmp, compression="zstd", compression_level=22,
                       use_dictionary=[c for c in table.column_names if c not in floats],
                       use_byte_stream_split=floats)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


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
        if c not in DERIVED:
            out[c] = _cell(kind, r.get(c))
    knobs = r.get("knobs")
    if r and (None if knobs is None else knobs_text(knobs)) != knobs_of(r.get("candidate_kind"), r.get("candidate")):
        raise ValueError(f"{t.key}: row {i}'s knobs {knobs!r} are not what its candidate {r.get('candidate')!r} "
                         "names (a shard reads them from it)")
    return out


def pack(store: SweepStore, path: str | os.PathLike, keys: Iterable[str] | None = None,
         about: str = "") -> Packed:
    """Writes the store's problem-directions (of `keys`, when given; repeats included: they are the noise floor) as
    one new shard at `path` (which must not exist): rows that pass dataset.problem_errors, and failed ones as one row
    each. ValueError when there is nothing to write."""
    import pyarrow as pa

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
    _write(pa.Table.from_pylist(recs, schema=sch), path)
    return Packed(path, done, repeats, failed, len(recs) - failed, os.path.getsize(path), left_out)


def _check(path: str, meta: dict[bytes, bytes] | None) -> int:
    """The shard's version. ValueError naming the file where it is no shard or one of a version read() can't take."""
    meta = meta or {}
    if meta.get(b"format") != FORMAT.encode():
        raise ValueError(f"{path} is not a cudnn_algos dataset shard (no format {FORMAT!r} in its metadata)")
    v = meta.get(b"version", b"?").decode()
    if v not in {str(x) for x in READS}:
        raise ValueError(f"{path} is a shard of version {v}; this version reads {', '.join(map(str, READS))}")
    return int(v)


def read(path: str | os.PathLike) -> list[tuple[StoredTask, list[dict[str, Any]]]]:
    """A shard's problem-directions, each with its rows (core columns; knobs back as a dict), in the order written.
    ValueError for a file that is not a shard of this version."""
    import pyarrow.parquet as pq

    path = str(path)
    try:
        table = pq.read_table(path)
    except (OSError, ValueError) as e:  # pyarrow's ArrowInvalid is a ValueError
        raise ValueError(f"{path}: not readable as Parquet: {str(e)[:200]}") from None
    version = _check(path, table.schema.metadata)
    out: list[tuple[StoredTask, list[dict[str, Any]]]] = []
    by_key: dict[str, int] = {}
    cols = table.to_pydict()  # column by column: a third of to_pylist's time
    names = list(cols)
    knobs: dict[tuple[Any, ...], dict[str, Any] | None] = {}  # parsed once per distinct candidate
    for values in zip(*cols.values()):
        rec = dict(zip(names, values))
        key = rec["task"]
        if key not in by_key:
            t = StoredTask(key, rec["task_status"], rec["task_reason"], rec["task_attempts"], rec["task_worker"],
                           rec["task_seconds"], rec["task_env"], 0, rec["task_finished_at"])
            by_key[key] = len(out)
            out.append((t, []))
        if rec["i"] is None:
            continue
        src = (rec["knobs"],) if version == 1 else (rec["candidate_kind"], rec["candidate"])
        if src not in knobs:
            knobs[src] = _knobs(src[0] if version == 1 else knobs_of(*src))
        k = knobs[src]
        rec["knobs"] = None if k is None else dict(k)  # each row its own dict
        out[by_key[key]][1].append({c: rec[c] for c in CORE_COLUMNS})  # CORE_COLUMNS' order in both versions
    return [(StoredTask(t.key, t.status, t.reason, t.attempts, t.worker, t.seconds, t.env, len(rows),
                        t.finished_at), rows) for t, rows in out]


def upgrade(path: str | os.PathLike) -> tuple[int, int]:
    """Rewrites a version-1 shard at `path` as this version (Note [shard version 2]), in place, once read() gives the
    same problem-directions and rows from the new file as from the old; its `about` is kept. Returns the sizes in
    bytes (before, after). ValueError where it is no shard, is already of this version, or would read back
    differently (then the old file stays)."""
    import pyarrow.parquet as pq

    path = str(path)
    try:
        old = pq.read_table(path)
    except (OSError, ValueError) as e:
        raise ValueError(f"{path}: not readable as Parquet: {str(e)[:200]}") from None
    if _check(path, old.schema.metadata) == VERSION:
        raise ValueError(f"{path} is already a shard of version {VERSION}")
    for kind, cand, knobs in zip(*(old.column(c).to_pylist() for c in ("candidate_kind", "candidate", "knobs"))):
        if knobs != knobs_of(kind, cand):
            raise ValueError(f"{path}: knobs {knobs!r} are not what candidate {cand!r} names")
    sch = schema()
    about = (old.schema.metadata or {}).get(b"about")
    if about is not None:
        sch = sch.with_metadata({**sch.metadata, b"about": about})
    new = path + ".v2"
    try:
        _write(old.select(sch.names).cast(sch), new)
        if read(new) != read(path):
            raise ValueError(f"{path}: the rewritten shard reads back differently; left as it was")
        before = os.path.getsize(path)
        os.replace(new, path)
    finally:
        if os.path.exists(new):
            os.remove(new)
    return before, os.path.getsize(path)


def keys_store(paths: Sequence[str | os.PathLike], out: str | os.PathLike) -> int:
    """A new store at `out` (which must not exist) of the shards' problem-directions alone, no rows (what
    SweepStore.keys_only writes, read from the task columns only: seconds for a dataset that takes minutes to
    unpack): what a sweep needs to skip them and to choose its repeats. Returns how many it holds."""
    import pyarrow.parquet as pq

    if os.path.exists(out):
        raise ValueError(f"{out} exists: keys_store writes a new store")
    seen: dict[str, StoredTask] = {}
    for p in paths:
        try:
            t = pq.read_table(str(p), columns=[c for c in TASK_COLUMNS if c != "i"])
        except (OSError, ValueError) as e:
            raise ValueError(f"{p}: not readable as Parquet: {str(e)[:200]}") from None
        _check(str(p), pq.read_schema(str(p)).metadata)
        for r in t.to_pylist():
            seen.setdefault(r["task"], StoredTask(r["task"], r["task_status"], r["task_reason"], r["task_attempts"],
                                                  r["task_worker"], r["task_seconds"], r["task_env"], 0,
                                                  r["task_finished_at"]))
    with SweepStore(":memory:") as mem:
        for t in seen.values():
            mem.restore(t, [])
        return mem.keys_only(out)


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


__all__ = ["CORE_COLUMNS", "DERIVED", "FORMAT", "Packed", "READS", "TASK_COLUMNS", "VERSION", "keys_store", "knobs_of",
           "measured", "open_store", "pack", "read", "schema", "shard_paths", "summary", "unpack", "upgrade"]
