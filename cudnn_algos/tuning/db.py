"""The tuning database: one SQLite file (WAL) of stored winners and their measured candidates, per environment and
problem key; what tune() writes and apply() reads.

Nothing a user stored is lost here. Opening tells a damaged file from a passing failure and from a file that is
not a database: an SQLite file of ours whose pages are damaged is moved aside together with its -wal and -shm
files (never deleted), a fresh database is made and what still reads of the old one is copied into it (salvage.py,
with the counts of what came back and what did not); a file that does not begin with SQLite's header (another file
given as the database) and another program's SQLite database, or another schema of ours, are refused and never
moved or written; a lock held by another connection is waited for (with a warning, up to the timeout, also where
SQLite answers busy at once) and then refused, saying how long it waited; a directory, a path with no name, a
missing permission or no file descriptors left is refused. A database whose file or directory is read-only opens
read-only: reads work (a WAL database in a directory nobody may write in too), writes say so. Writes are one
transaction each (an import too: all of it or nothing), numbers must be finite, and an export is one consistent
snapshot written to a temporary file and renamed, never over the database itself.
"""
from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import time
import warnings
from pathlib import Path
from typing import Any, Callable, Sequence, TypeVar
from urllib.parse import quote

from ..errors import (TuningDBDamaged, TuningDBError, TuningDBForeign, TuningDBLocked, TuningDBReadOnly,
                     TuningDBUnavailable)
from ..files import atomic_write, check_distinct
from .policy import check_margin, reselected
from .salvage import Salvaged, salvage
from .entries import EXPORT_HEAD, SCHEMA, check_entry, read_export
from .winner import CANDIDATE_COLS, WINNER_COLS, Winner, now

ENV_VAR = "CUDNN_ALGOS_DB"
QUICK_CHECK_MAX_BYTES = 256 << 20  # PRAGMA quick_check on open up to this size (it reads every page)
T = TypeVar("T")
LOCK_NOTICE_S = 2.0  # a lock held longer than this is waited for with a warning

_TABLES = """
CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v TEXT);
CREATE TABLE IF NOT EXISTS winners (
  env TEXT, key TEXT, settings TEXT, direction TEXT, config TEXT, engine_id INTEGER, knobs TEXT,
  kernel_ms REAL, host_ms REAL, rel_err REAL, runner_up TEXT, runner_up_ms REAL, torch_on TEXT, torch_on_ms REAL,
  source TEXT, measured_at TEXT, environment TEXT, PRIMARY KEY (env, key, settings));
CREATE TABLE IF NOT EXISTS candidates (
  env TEXT, key TEXT, settings TEXT, direction TEXT, name TEXT, engine_id INTEGER, status TEXT, kernel_ms REAL,
  throughput_ms REAL, host_ms REAL, rel_err REAL, workspace_bytes INTEGER, torch_filter TEXT, sources TEXT,
  measured_at TEXT, PRIMARY KEY (env, key, settings, name));
"""


def default_path() -> Path:
    """$CUDNN_ALGOS_DB, else $XDG_CACHE_HOME/cudnn_algos/tuning.sqlite (~/.cache when XDG_CACHE_HOME is unset)."""
    if os.environ.get(ENV_VAR):
        return Path(os.environ[ENV_VAR]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "cudnn_algos" / "tuning.sqlite"


class _Damaged(Exception):
    """The file is not SQLite, or SQLite found its pages damaged."""


def _is_damage(e: sqlite3.DatabaseError) -> bool:
    text = str(e).lower()
    return "malformed" in text or "not a database" in text or "file is encrypted" in text


class TuningDB:
    """The tuning database at `path` (default: :func:`default_path`). Several processes may read and write it at
    once (SQLite WAL, one transaction per stored search). `timeout`: seconds to wait for a lock another connection
    holds (a warning says so after LOCK_NOTICE_S) before TuningDBLocked. `read_only`: open for reading only (also
    chosen by itself when the file or its directory is not writable). Raises the TuningDBError kinds of
    cudnn_algos.errors; see the module's docstring for what happens to a damaged file."""

    def __init__(self, path: str | os.PathLike | None = None, *, timeout: float = 60.0, read_only: bool = False):
        self.path = _checked_path(path)
        self.timeout = float(timeout)
        self.read_only = bool(read_only)
        self.moved_aside: Path | None = None  # where a damaged file went, when this open moved it
        self.salvaged: Salvaged | None = None  # what of it was read back into the fresh database
        self.con = self._open()

    # ---- opening
    def _open(self) -> sqlite3.Connection:
        p = self.path
        if not p.exists() or p.stat().st_size == 0:
            self._prepare_new()
        else:
            if not self.read_only and not (os.access(p, os.W_OK) and os.access(p.parent, os.W_OK)):
                self.read_only = True  # reads work; writes say read-only
            if not _looks_like_sqlite(p):  # another file given as the database: never moved or written
                raise TuningDBForeign(str(p), "is not an SQLite database (it does not begin with SQLite's header, "
                                              "so it is not a damaged tuning database either): refused, nothing "
                                              "was moved or written; give the tuning database's path, or a new one")
        try:
            return self._connect_checked()
        except _Damaged as e:
            return self._aside_and_fresh(f"is damaged ({e})")

    def _prepare_new(self) -> None:
        p = self.path
        if self.read_only:
            raise TuningDBUnavailable(str(p), "does not exist (opened read-only)")
        try:
            p.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise TuningDBUnavailable(str(p), f"its directory cannot be made ({e.strerror or e})") from None
        if not os.access(p.parent, os.W_OK):
            raise TuningDBUnavailable(str(p), f"does not exist, and its directory {p.parent} is not writable")

    def _connect_checked(self) -> sqlite3.Connection:
        """A connection whose file is ours (or new and now ours). A lock is waited for up to the timeout, with a
        warning once it has lasted LOCK_NOTICE_S, and tried again where SQLite answered busy at once (Note [a lock
        wait that waits], at _retry)."""
        start = time.monotonic()
        warned = False
        delay = 0.002
        while True:
            waited = time.monotonic() - start
            left = self.timeout - waited
            try:
                return self._connect(max(min(left, LOCK_NOTICE_S), 0.0))
            except TuningDBLocked as e:
                waited = time.monotonic() - start
                if waited >= self.timeout:
                    raise TuningDBLocked(str(self.path), e.reason.replace(
                        e.reason.split(" (", 1)[0], f"still locked by another connection after {_seconds(waited)}",
                        1)) from None
                if not warned and waited >= LOCK_NOTICE_S:
                    warnings.warn(f"tuning database {self.path} is locked by another connection; waiting up to "
                                  f"{self.timeout:.0f} s", RuntimeWarning, stacklevel=4)
                    warned = True
                time.sleep(min(delay, max(self.timeout - waited, 0.0)))
                delay = min(2 * delay, 0.1)

    def _connect(self, timeout: float, immutable: bool = False) -> sqlite3.Connection:
        try:
            if self.read_only:
                con = sqlite3.connect(f"file:{quote(str(self.path))}?mode=ro{'&immutable=1' if immutable else ''}",
                                      uri=True, timeout=timeout, isolation_level=None)
            else:
                con = sqlite3.connect(str(self.path), timeout=timeout, isolation_level=None)
        except sqlite3.Error as e:
            raise _translate(e, self.path, timeout) from None
        try:
            con.execute(f"PRAGMA busy_timeout={int(timeout * 1000)}")
            self._check_schema(con)  # before anything is written: another program's file stays as it was
            if not self.read_only:
                con.execute("PRAGMA journal_mode=WAL")
        except BaseException as e:
            con.close()
            if isinstance(e, sqlite3.DatabaseError) and _is_damage(e):
                raise _Damaged(str(e)) from None
            wal = str(self.path) + "-wal"
            if isinstance(e, sqlite3.Error) and self.read_only and not immutable and _cannot_make_shm(e) \
                    and (not os.path.exists(wal) or os.path.getsize(wal) == 0):
                # a WAL database in a directory we cannot write: SQLite cannot make its -shm file to read it; with
                # no WAL content left, the main file is the whole database and can be read as it is
                return self._connect(timeout, immutable=True)
            if isinstance(e, sqlite3.Error):
                raise _translate(e, self.path, timeout) from None
            raise
        return con

    def _check_schema(self, con: sqlite3.Connection) -> None:
        size = self.path.stat().st_size if self.path.exists() else 0  # (":memory:" has no file)
        if 0 < size <= QUICK_CHECK_MAX_BYTES:  # damage first: a damaged meta looks foreign
            res = con.execute("PRAGMA quick_check").fetchone()
            if not res or res[0] != "ok":
                found = [x for x in (res[0] if res else "no answer").splitlines() if not x.startswith("***")]
                raise _Damaged(f"quick_check: {found[0] if found else res[0]}"
                               + (f" and {len(found) - 1} more" if len(found) > 1 else ""))
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if not tables:
            if self.read_only:
                raise TuningDBUnavailable(str(self.path), "is an empty database (opened read-only)")
            if self._create(con):
                return
            tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        ours = {"meta", "winners", "candidates"}
        cols = {t: [r[1] for r in con.execute(f"PRAGMA table_info({t})")] for t in tables & ours}
        schema = None
        if cols.get("meta") == ["k", "v"]:
            row = con.execute("SELECT v FROM meta WHERE k='schema'").fetchone()
            schema = row[0] if row else None
        if tables - ours or schema is None or (cols.get("winners") and tuple(cols["winners"]) != WINNER_COLS) \
                or (cols.get("candidates") and tuple(cols["candidates"]) != CANDIDATE_COLS):
            raise TuningDBForeign(str(self.path), f"is an SQLite database but not a cudnn_algos tuning database "
                                                  f"(tables {sorted(tables)}): refused, nothing written; give "
                                                  "another --db path")
        if schema != str(SCHEMA):
            raise TuningDBForeign(str(self.path), f"holds schema {schema}; this cudnn_algos reads schema {SCHEMA}: "
                                                  "use the version that wrote it, or another --db path")
        if tables != ours and not self.read_only:  # a creator killed between its statements
            con.executescript(_TABLES)

    @staticmethod
    def _create(con: sqlite3.Connection) -> bool:
        """Makes the tables and the schema row in one transaction, so that a process opening the file at the same
        moment sees no tables or all of them with their schema (never tables without it, which read as another
        program's database). False when another process created them first (then they are checked as any file)."""
        con.execute("PRAGMA journal_mode=WAL")
        con.execute("BEGIN IMMEDIATE")  # one creator at a time: the others wait here, then find it made
        try:
            made = con.execute("SELECT 1 FROM sqlite_master WHERE type='table'").fetchone() is None
            if made:
                for stmt in filter(str.strip, _TABLES.split(";")):
                    con.execute(stmt)
                con.execute("INSERT INTO meta VALUES ('schema', ?)", (str(SCHEMA),))
                con.execute("INSERT INTO meta VALUES ('created', ?)", (now(),))
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
        return made

    def _aside_and_fresh(self, why: str) -> sqlite3.Connection:
        """Moves the damaged file and its -wal/-shm aside (never deletes them), opens a fresh database, copies into
        it what still reads of the old one (Note [salvage by rowid], salvage.py) and warns with the counts."""
        p = self.path
        if self.read_only:
            raise TuningDBDamaged(str(p), f"{why}; it is read-only here, so it was left as it is")
        aside = p.with_name(f"{p.name}.bad-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}")
        try:
            for suffix in ("", "-wal", "-shm"):
                if os.path.exists(str(p) + suffix):
                    os.replace(str(p) + suffix, str(aside) + suffix)
        except OSError as e:
            raise TuningDBUnavailable(str(p), f"{why}, and it cannot be moved aside ({e.strerror or e}); nothing "
                                              "was changed") from None
        self.moved_aside = aside
        self._prepare_new()
        self.con = self._connect_checked()
        self.salvaged = salvage(str(aside), lambda ws, cs: self._transaction(lambda: self._insert(ws, cs)))
        warnings.warn(f"tuning database {p} {why}; moved aside to {aside.name} (with its -wal and -shm files) and "
                      f"a fresh one started: {self.salvaged.line()}", RuntimeWarning, stacklevel=4)
        return self.con

    def close(self) -> None:
        self.con.close()

    def __enter__(self) -> "TuningDB":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ---- reading
    def _retry(self, step: Callable[[], T]) -> T:
        """`step` run until it gets past a lock or the timeout ends. Note [a lock wait that waits]: SQLite's busy
        timeout does not cover every wait of a WAL database (a lock taken while another connection changes the
        journal mode, a reader's snapshot during a checkpoint): some statements answer SQLITE_BUSY at once. Such an
        answer is tried again here, with a growing sleep, until `timeout` seconds have passed since the first try;
        TuningDBLocked then says how long it waited. Damage and other errors are translated at once."""
        start = time.monotonic()
        delay = 0.002
        while True:
            try:
                return step()
            except sqlite3.DatabaseError as e:
                waited = time.monotonic() - start
                if _is_damage(e):
                    raise TuningDBDamaged(str(self.path), f"is damaged ({e}); opening it again moves it aside (with "
                                                          "its -wal and -shm files), salvages what reads and starts "
                                                          "again") from None
                if not (_is_busy(e) and waited < self.timeout):
                    raise _translate(e, self.path, waited) from None
                time.sleep(min(delay, self.timeout - waited))
                delay = min(2 * delay, 0.1)

    def _query(self, sql: str, args: Sequence[Any] = ()) -> list[tuple]:
        return self._retry(lambda: self.con.execute(sql, args).fetchall())

    def winners(self, env: str | None = None) -> list[Winner]:
        """Stored winners (of one environment key, or all), newest first per (env, key)."""
        q = "SELECT * FROM winners" + (" WHERE env = ?" if env is not None else "") + " ORDER BY measured_at DESC"
        return [Winner.from_row(r) for r in self._query(q, (env,) if env is not None else ())]

    def winner(self, env: str, key: str) -> Winner | None:
        r = self._query("SELECT * FROM winners WHERE env = ? AND key = ? ORDER BY measured_at DESC LIMIT 1",
                        (env, key))
        return Winner.from_row(r[0]) if r else None

    def candidates(self, env: str | None = None) -> list[dict[str, Any]]:
        q = "SELECT * FROM candidates" + (" WHERE env = ?" if env is not None else "")
        return [dict(zip(CANDIDATE_COLS, r)) for r in self._query(q, (env,) if env is not None else ())]

    def info(self) -> dict[str, Any]:
        envs = dict(self._query("SELECT env, COUNT(*) FROM winners GROUP BY env"))
        n = self._query("SELECT COUNT(*) FROM candidates")[0][0]
        return {"path": str(self.path), "schema": SCHEMA, "winners": sum(envs.values()), "candidates": n,
                "environments": envs, "read_only": self.read_only}

    # ---- writing
    def _transaction(self, body: Callable[[], T], *, write: bool = True) -> T:
        """`body` inside one transaction (BEGIN IMMEDIATE for a write: a concurrent writer waits), committed, or
        rolled back on any error; a lock is waited for as _retry says, the whole transaction tried again."""
        if write:
            self._check_writable()

        def once() -> T:
            self.con.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            try:
                out = body()
                self.con.execute("COMMIT")
                return out
            except BaseException:
                with contextlib.suppress(sqlite3.Error):
                    self.con.execute("ROLLBACK")
                raise

        return self._retry(once)

    def _check_writable(self) -> None:
        if self.read_only:
            raise TuningDBReadOnly(str(self.path), "is read-only here (the file or its directory is not writable): "
                                                   "reads work, this write was refused")

    def put(self, winner: Winner | dict[str, Any], candidates: Sequence[dict[str, Any]] = ()) -> None:
        """One search's winner and its candidates, in one transaction (a crash keeps all of it or none). Numbers
        must be finite (ValueError naming the field)."""
        if isinstance(winner, Winner):
            winner = winner.as_dict()
        check_entry("winner", winner)
        for c in candidates:
            check_entry("candidate", c)
        self._transaction(lambda: self._insert([winner], candidates))

    def _insert(self, winners: Sequence[Winner | dict[str, Any]], candidates: Sequence[dict[str, Any]]) -> None:
        self.con.executemany(f"INSERT OR REPLACE INTO winners VALUES ({','.join('?' * len(WINNER_COLS))})",
                             [[w.get(c) for c in WINNER_COLS] for w in winners])
        self.con.executemany(f"INSERT OR REPLACE INTO candidates VALUES ({','.join('?' * len(CANDIDATE_COLS))})",
                             [[c.get(k) for k in CANDIDATE_COLS] for c in candidates])

    def clear(self, env: str | None = None) -> int:
        """Deletes the winners and candidates (of one environment key, or all); returns the winners deleted."""
        where, args = (" WHERE env = ?", (env,)) if env is not None else ("", ())

        def body() -> int:
            n = self.con.execute("DELETE FROM winners" + where, args).rowcount
            self.con.execute("DELETE FROM candidates" + where, args)
            return n

        return self._transaction(body)

    def reselect(self, torch_margin: float, env: str | None = None) -> dict[str, int]:
        """Applies Note [torch's op as the winner] again with another `torch_margin`, from what is stored (no GPU):
        a problem whose winner is torch's op gets its best configuration (the stored runner-up) where torch's op was
        not faster by more than the margin, and a configuration gives way to torch's op where it was. The winner's
        times, error, runner-up and settings follow (a new runner-up from the stored candidates; torch's host time
        and error, which are stored only when it won, are None). Problems searched without torch's op (quick
        tuning) keep their winner, and so does a search whose new settings would equal those of another search of
        the same problem already stored (nothing stored is overwritten). Returns counts: to_config, to_torch,
        unchanged, skipped (those)."""
        check_margin(torch_margin)
        where, args = (" WHERE env = ?", (env,)) if env is not None else ("", ())

        def body() -> dict[str, int]:
            counts = {"to_config": 0, "to_torch": 0, "unchanged": 0, "skipped": 0}
            for row in self.con.execute("SELECT * FROM winners" + where, args).fetchall():
                w = Winner.from_row(row)
                new = reselected(w, torch_margin, self._eligible(w))
                if new is not None and new.settings != w.settings and self.con.execute(
                        "SELECT 1 FROM winners WHERE env = ? AND key = ? AND settings = ?",
                        (w.env, w.key, new.settings)).fetchone():
                    counts["skipped"] += 1  # another search of this problem is stored under those settings
                    continue
                if new is None or new.config == w.config:
                    counts["unchanged"] += 1
                    if new is None:
                        continue  # (else: the same winner, its settings now naming the margin)
                else:
                    counts["to_torch" if new.is_torch else "to_config"] += 1
                self.con.execute("DELETE FROM winners WHERE env = ? AND key = ? AND settings = ?",
                                 (w.env, w.key, w.settings))
                self._insert([new], [])
                self.con.execute("UPDATE OR REPLACE candidates SET settings = ? WHERE env = ? AND key = ? AND "
                                 "settings = ?", (new.settings, w.env, w.key, w.settings))
            return counts

        return self._transaction(body)

    def _eligible(self, w: Winner) -> list[dict[str, Any]]:
        """The stored candidates of `w`'s search that torch would accept and that were timed, fastest first."""
        rows = self.con.execute("SELECT * FROM candidates WHERE env = ? AND key = ? AND settings = ? AND "
                                "status = 'SUCCESS' AND kernel_ms IS NOT NULL AND (torch_filter IS NULL OR "
                                "torch_filter = '') ORDER BY kernel_ms", (w.env, w.key, w.settings))
        return [dict(zip(CANDIDATE_COLS, r)) for r in rows]

    # ---- moving between machines
    def export(self, path: str | os.PathLike) -> int:
        """Writes every winner and candidate as strict JSON lines (to share with machines of the same kind): one
        consistent snapshot (one read transaction), to a temporary file renamed over `path`. Refuses a `path`
        that is this database (or its -wal/-shm). Returns the winners written."""
        check_distinct({"--db": self.path}, {"export": path})
        ws, cs = self._transaction(lambda: (
            [Winner.from_row(r).as_dict() for r in self.con.execute("SELECT * FROM winners")],
            [dict(zip(CANDIDATE_COLS, r)) for r in self.con.execute("SELECT * FROM candidates")]), write=False)
        lines = [json.dumps({EXPORT_HEAD: SCHEMA})]
        lines += [json.dumps({"winner": w}, allow_nan=False) for w in ws]
        lines += [json.dumps({"candidate": c}, allow_nan=False) for c in cs]
        atomic_write(path, "\n".join(lines) + "\n")
        return len(ws)

    def import_(self, path: str | os.PathLike) -> "ImportCount":
        """Reads what :meth:`export` wrote, all of it or nothing: every entry is checked first (ValueError naming
        the file, the line and what is wrong), then one transaction. A candidate whose winner is neither in the
        file nor here (an export taken while another process wrote) is left out and counted. Returns the counts
        (an int-like: the winners imported; an entry already here is replaced)."""
        self._check_writable()
        winners, candidates = read_export(path)

        def body() -> ImportCount:
            have = {(w["env"], w["key"], w["settings"]) for w in winners}
            keep, orphans = [], 0
            for c in candidates:
                k = (c["env"], c["key"], c["settings"])
                if k in have or self.con.execute("SELECT 1 FROM winners WHERE env = ? AND key = ? AND settings = ?",
                                                 k).fetchone():
                    keep.append(c)
                else:
                    orphans += 1
            self._insert(winners, keep)
            return ImportCount(len(winners), len(keep), orphans)

        return self._transaction(body)


class ImportCount(int):
    """The winners an import stored (an int), with ``candidates`` stored and ``orphans`` left out."""

    def __new__(cls, winners: int, candidates: int, orphans: int):
        obj = super().__new__(cls, winners)
        obj.candidates, obj.orphans = candidates, orphans
        return obj


def _checked_path(path: str | os.PathLike | None) -> Path:
    if path is not None and not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"db={path!r} must be a file path (str or os.PathLike), a TuningDB or None")
    p = Path(path).expanduser() if path is not None else default_path()
    if p.name in ("", ".", ".."):
        raise TuningDBUnavailable(str(path), "names no file: give a file path such as ./tuning.sqlite")
    if p.is_dir():
        raise TuningDBUnavailable(str(p), "is a directory: give a file path such as "
                                          f"{p / 'tuning.sqlite'}; nothing was moved or written")
    return p


def _looks_like_sqlite(p: Path) -> bool:
    try:
        with open(p, "rb") as f:
            return f.read(16) == b"SQLite format 3\x00"
    except OSError as e:
        raise TuningDBUnavailable(str(p), f"cannot be read ({e.strerror or e})") from None


def _cannot_make_shm(e: sqlite3.Error) -> bool:
    """A read-only connection to a WAL database refused because its -shm file cannot be made: "unable to open", or
    SQLITE_READONLY_DIRECTORY ("attempt to write a readonly database", a user without write permission there)."""
    text = str(e).lower()
    return "unable to open" in text or getattr(e, "sqlite_errorname", "") == "SQLITE_READONLY_DIRECTORY" or (
        "readonly database" in text)


def _is_busy(e: sqlite3.Error) -> bool:
    low = str(e).lower()
    return "locked" in low or "busy" in low


def _translate(e: sqlite3.Error, path: Path, waited: float) -> TuningDBError:
    """sqlite3's error as the TuningDBError kind it means (`waited`: the seconds a lock was waited for)."""
    text = str(e)
    low = text.lower()
    if _is_busy(e):
        return TuningDBLocked(str(path), f"still locked by another connection after {_seconds(waited)} ({text}); "
                                         "nothing was changed: try again when it is free")
    if "readonly" in low or "read-only" in low:
        return TuningDBReadOnly(str(path), f"is read-only here ({text}): reads work, this write was refused")
    if "unable to open" in low or "disk i/o" in low or "cannot open" in low:
        return TuningDBUnavailable(str(path), f"cannot be opened ({text}): no permission, a missing directory, or "
                                              "no file descriptors left")
    return TuningDBError(str(path), f"{type(e).__name__}: {text}")


def _seconds(s: float) -> str:
    return f"{s:.0f} s" if s >= 10 else f"{s:.1f} s"


def open_db(db: "TuningDB | str | os.PathLike | None") -> tuple[TuningDB, bool]:
    """(the database, whether the caller opened it and must close it): `db` itself when it is one, else the
    database at that path (None: default_path())."""
    return (db, False) if isinstance(db, TuningDB) else (TuningDB(db), True)


__all__ = ["TuningDB", "ImportCount", "default_path", "open_db", "ENV_VAR"]
