"""The sweep's store: one SQLite file that only the driver writes (SQLite's locking does not span hosts, so workers
return rows and the driver appends them), one transaction per problem-direction: its status, where and how long it
ran, and its measured rows (long-form records, JSON). A re-run skips what the store holds; a problem-direction is
stored once (a second put of the same key is refused, never merged)."""
from __future__ import annotations

import json
import os
import sqlite3
from dataclasses import dataclass
from typing import Any, Sequence

from ..tuning.winner import now

SCHEMA = 1
_TABLES = """
CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v TEXT);
CREATE TABLE IF NOT EXISTS tasks (
  key TEXT PRIMARY KEY, status TEXT NOT NULL, reason TEXT, attempts INTEGER, worker TEXT, seconds REAL, env TEXT,
  rows INTEGER, finished_at TEXT);
CREATE TABLE IF NOT EXISTS rows (key TEXT, i INTEGER, row TEXT, PRIMARY KEY (key, i));
"""
STATUSES = ("done", "failed")


@dataclass(frozen=True)
class StoredTask:
    key: str
    status: str  # "done" (measured) or "failed" (with `reason`)
    reason: str | None
    attempts: int
    worker: str | None
    seconds: float | None
    env: str | None
    rows: int
    finished_at: str


class SweepStore:
    """The store at `path` (created when missing; its directory must exist)."""

    def __init__(self, path: str | os.PathLike):
        self.path = str(path)
        if os.path.isdir(self.path):
            raise ValueError(f"{self.path} is a directory: give the sweep store a file path")
        self.con = sqlite3.connect(self.path, timeout=60, isolation_level=None)
        # tables and schema row in one transaction (as TuningDB makes its file): a second sweep opening a new store
        # at the same moment waits, then finds both
        self.con.execute("BEGIN IMMEDIATE")
        try:
            for statement in filter(str.strip, _TABLES.split(";")):
                self.con.execute(statement)
            self.con.execute("INSERT OR IGNORE INTO meta VALUES ('schema', ?)", (str(SCHEMA),))
            got = self.con.execute("SELECT v FROM meta WHERE k = 'schema'").fetchone()
            self.con.execute("COMMIT")
        except BaseException:
            self.con.execute("ROLLBACK")
            self.con.close()
            raise
        if got[0] != str(SCHEMA):
            self.con.close()
            raise ValueError(f"{self.path} is a sweep store of schema {got[0]}; this version reads {SCHEMA}")

    def close(self) -> None:
        self.con.close()

    def __enter__(self) -> "SweepStore":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def keys(self) -> set[str]:
        """Every problem-direction stored (done or failed): what a re-run skips."""
        return {k for (k,) in self.con.execute("SELECT key FROM tasks")}

    def put(self, key: str, status: str, rows: Sequence[dict[str, Any]] = (), *, reason: str | None = None,
            attempts: int = 1, worker: str | None = None, seconds: float | None = None, env: str | None = None) -> None:
        """One problem-direction and its rows, in one transaction; ValueError when `key` is already stored."""
        if not self.restore(StoredTask(key, status, reason, attempts, worker, seconds, env, len(rows), now()), rows):
            raise ValueError(f"{key} is already stored: a problem-direction is stored once")

    def merge(self, other: "SweepStore", keys: set[str] | None = None) -> tuple[int, int]:
        """Copies from `other` each problem-direction (of `keys`, when given) this store lacks, with its rows and
        where it ran, one transaction each: stores filled by sweeps on different machines become one. Returns
        (copied, already here: left as they are). ValueError, nothing copied, where one to copy lacks rows its task
        counts (a keys-only store's tasks: keys_only())."""
        have = self.keys()
        held = dict(other.con.execute("SELECT key, COUNT(*) FROM rows GROUP BY key").fetchall())
        asked = [t for t in other.tasks() if keys is None or t.key in keys]
        todo = [t for t in asked if t.key not in have]
        short = [t.key for t in todo if held.get(t.key, 0) < t.rows]
        if short:
            raise ValueError(f"{other.path}: {len(short)} problem-directions to copy lack their rows (a keys-only "
                             f"store's?), e.g. {short[0]}; nothing copied")
        copied, already = 0, len(asked) - len(todo)
        for t in todo:
            self._insert(t, [r for (r,) in other.con.execute("SELECT row FROM rows WHERE key = ? ORDER BY i",
                                                              (t.key,))])
            copied += 1
        return copied, already

    def restore(self, task: StoredTask, rows: Sequence[dict[str, Any]]) -> bool:
        """One problem-direction with where, when and how it ran as `task` says (put's, or one kept elsewhere: a
        dataset shard, cudnn_algos.dataset.shards), in one transaction. Returns False, nothing written, when its key is
        already stored."""
        if task.status not in STATUSES:
            raise ValueError(f"status={task.status!r} is not one of {', '.join(STATUSES)}")
        text = [json.dumps(r, allow_nan=False, default=_plain) for r in rows]  # checked before anything is written
        return self._insert(task, text)

    def _insert(self, t: StoredTask, text: list[str]) -> bool:
        self.con.execute("BEGIN IMMEDIATE")
        try:
            if self.con.execute("SELECT 1 FROM tasks WHERE key = ?", (t.key,)).fetchone():
                self.con.execute("ROLLBACK")
                return False
            self.con.execute("INSERT INTO tasks VALUES (?,?,?,?,?,?,?,?,?)",
                             (t.key, t.status, t.reason, t.attempts, t.worker, t.seconds, t.env, len(text),
                              t.finished_at))
            self.con.executemany("INSERT INTO rows VALUES (?,?,?)", [(t.key, i, r) for i, r in enumerate(text)])
            self.con.execute("COMMIT")
        except BaseException:
            self.con.execute("ROLLBACK")
            raise
        return True

    def keys_only(self, path: str | os.PathLike) -> int:
        """Writes a new store at `path` (which must not exist) holding every task of this one and none of their rows:
        what a sweep on another machine needs to skip them (a fraction of the size, for carrying to it); what it
        measures there is merged back from the keys it adds. Returns how many tasks it holds."""
        if os.path.exists(path):
            raise ValueError(f"{path} exists: keys_only writes a new store")
        with SweepStore(path) as out:
            out.con.execute("BEGIN IMMEDIATE")
            try:
                out.con.executemany("INSERT INTO tasks VALUES (?,?,?,?,?,?,?,?,?)",
                                    self.con.execute("SELECT * FROM tasks").fetchall())
                out.con.execute("INSERT OR REPLACE INTO meta VALUES ('keys_only', '1')")
                out.con.execute("COMMIT")
            except BaseException:
                out.con.execute("ROLLBACK")
                raise
            return len(out.keys())

    def tasks(self) -> list[StoredTask]:
        return [StoredTask(*r) for r in self.con.execute("SELECT * FROM tasks ORDER BY finished_at, key")]

    def rows(self, key: str | None = None) -> list[dict[str, Any]]:
        q, a = ("SELECT row FROM rows WHERE key = ? ORDER BY i", (key,)) if key else ("SELECT row FROM rows", ())
        return [json.loads(t) for (t,) in self.con.execute(q, a)]

    def counts(self) -> dict[str, int]:
        out = dict.fromkeys(STATUSES, 0)
        out.update(dict(self.con.execute("SELECT status, COUNT(*) FROM tasks GROUP BY status").fetchall()))
        out["rows"] = self.con.execute("SELECT COUNT(*) FROM rows").fetchone()[0]
        return out


def _plain(v: Any) -> Any:
    """JSON for what records hold beyond JSON's types (tuples are lists already)."""
    if hasattr(v, "item"):  # numpy / torch scalars
        return v.item()
    raise TypeError(f"{type(v).__name__} is not JSON")
