"""What still reads in a damaged tuning database, copied into the fresh one that replaces it.

Note [salvage by rowid]: damage in the middle of a file leaves most of its rows readable, but a plain ``SELECT *
FROM winners`` stops at the first damaged page (with an error, or with none: a page whose cell pointers are damaged
can end a scan early and silently), so a copy that reads table by table keeps nothing past it. Each table is read
instead in order of rowid (the table's own b-tree, not its indexes), a batch at a time; where a read fails or ends
early, the next rowid that reads is found by steps that double (up to SQLite's largest rowid: on a damaged file even
MAX(rowid) can answer wrong without an error), and the rowids skipped are read one at a time, so that only the rows
of damaged pages are lost (the reads are bounded). A row comes back only when it is a whole entry as put() takes it
(entries.check_entry), and a candidate only beside its winner. What did not come back is counted against the table's
own count where SQLite can still give it, else said to be unknown."""
from __future__ import annotations

import os
import shutil
import sqlite3
import tempfile
from dataclasses import dataclass
from typing import Any, Callable

from .entries import check_entry
from .winner import CANDIDATE_COLS, WINNER_COLS

MAX_READS = 200_000  # reads per table before the rest is given up
BATCH = 512  # rows a read asks for
_MAX_ROWID = 2**63 - 1  # SQLite's largest rowid: probes for the next row that reads go up to it


@dataclass(frozen=True)
class Salvaged:
    """What came back from a damaged database: winners and candidates copied into the fresh one, and those that
    did not (None: unknown, the table's count does not read either)."""

    winners: int
    candidates: int
    winners_lost: int | None
    candidates_lost: int | None

    def line(self) -> str:
        def lost(n: int | None) -> str:
            return "an unknown number" if n is None else str(n)

        return (f"{self.winners} winner(s) and {self.candidates} candidate(s) read back into the fresh database; "
                f"{lost(self.winners_lost)} winner(s) and {lost(self.candidates_lost)} candidate(s) did not")


def _entry(row: tuple, cols: tuple[str, ...], kind: str) -> dict[str, Any] | None:
    """The entry a row (rowid first) holds, or None where it is not a whole entry as put() takes it."""
    if len(row) != len(cols) + 1:
        return None
    e = {c: v for c, v in zip(cols, row[1:]) if v is not None}
    try:
        check_entry(kind, e)
    except ValueError:
        return None
    return e


def _scan(con: sqlite3.Connection, table: str, cols: tuple[str, ...], kind: str, after: int,
          limit: int) -> list[tuple[int, dict[str, Any]]] | None:
    """Up to `limit` (rowid, entry) of `table` with rowid > `after`, in order; None where the read fails. A row out of
    order, or not a whole entry (a damaged page read as if whole: its rowids can be anything), ends what is kept."""
    try:
        rows = con.execute(f"SELECT rowid, * FROM {table} WHERE rowid >= ? ORDER BY rowid LIMIT ?",
                           (after + 1, limit)).fetchall()  # >= after + 1: the seek lands on that rowid's own page
    except sqlite3.DatabaseError:
        return None
    keep: list[tuple[int, dict[str, Any]]] = []
    last = after
    for r in rows:
        e = _entry(r, cols, kind) if isinstance(r[0], int) and r[0] > last else None
        if e is None:
            break
        keep.append((r[0], e))
        last = r[0]
    return keep


def _rows(con: sqlite3.Connection, table: str, cols: tuple[str, ...],
          kind: str) -> tuple[list[dict[str, Any]], int | None]:
    """(the whole entries of `table` that read, Note [salvage by rowid]; its count where that reads, else None)."""
    try:
        if con.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)).fetchone() is None:
            return [], None
    except sqlite3.DatabaseError:  # the schema itself does not read: the table is tried all the same
        pass
    try:
        count = con.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
    except sqlite3.DatabaseError:
        count = None
    out: list[tuple[int, dict[str, Any]]] = []
    pos, reads, size = 0, 0, BATCH
    while reads < MAX_READS:
        got = _scan(con, table, cols, kind, pos, size)
        reads += 1
        if got is None and size > 1:  # a damaged page within the batch: smaller batches up to it
            size //= 2
            continue
        if got:
            out += got
            pos = got[-1][0]
            if len(got) == size:
                size = min(2 * size, BATCH)
                continue
        # cut short: the end of the table, an error, or a damaged page that ends a scan without one (or that
        # misleads MAX(rowid), so no upper bound is trusted): the next rowid that reads, by steps that double up to
        # the largest rowid, then the rowids below that step, one at a time
        step, nxt = 1, None
        while pos + step < _MAX_ROWID and reads < MAX_READS:
            probe = _scan(con, table, cols, kind, pos + step - 1, 1)
            reads += 1
            if probe:
                nxt = probe[0][0]
                break
            step *= 2
        if nxt is None:
            break
        for m in range(pos + 1, min(nxt, pos + step)):
            if reads >= MAX_READS:
                break
            one = _scan(con, table, cols, kind, m - 1, 1)
            reads += 1
            if one and one[0][0] == m:
                out.append(one[0])
        pos, size = nxt - 1, BATCH
    return [e for _, e in out], count


def salvage(aside: str, insert: Callable[[list, list], None]) -> Salvaged:
    """Reads what it can of the damaged database at `aside` and hands the whole winners and their candidates to
    `insert(winners, candidates)` (one transaction of the fresh database). Note [salvage by rowid]. It reads a copy
    of the file and its -wal, made in a temporary directory: SQLite may change (or remove) a -wal file it opens,
    and the files set aside stay as they were."""
    with tempfile.TemporaryDirectory(prefix="cudnn_algos-salvage-") as tmp:
        copy = os.path.join(tmp, "db.sqlite")
        try:
            shutil.copyfile(aside, copy)
            if os.path.exists(aside + "-wal"):
                shutil.copyfile(aside + "-wal", copy + "-wal")
            con = sqlite3.connect(copy, isolation_level=None)
        except (OSError, sqlite3.Error):
            return Salvaged(0, 0, None, None)
        try:
            w_rows, w_count = _rows(con, "winners", WINNER_COLS, "winner")
            c_rows, c_count = _rows(con, "candidates", CANDIDATE_COLS, "candidate")
        finally:
            con.close()
    winners = w_rows
    have = {(w["env"], w["key"], w["settings"]) for w in winners}
    cands = [c for c in c_rows if (c["env"], c["key"], c["settings"]) in have]
    insert(winners, cands)
    return Salvaged(len(winners), len(cands), None if w_count is None else max(w_count - len(winners), 0),
                    None if c_count is None else max(c_count - len(cands), 0))
