"""CPU: nothing a user stored in the tuning database is lost. Damaged, foreign, locked, read-only and missing
files; a writer killed with committed searches in its WAL; imports all or nothing; exports strict and never over
the database; property-based export/import round trips. No GPU: entries are hand-made rows."""
import json
import math
import os
import signal
import sqlite3
from pathlib import Path
import subprocess
import sys
import textwrap
import time

import pytest
from conftest import run_cli

from cudnn_algos import cli
from cudnn_algos.tuning import db as tuningdb
from cudnn_algos.errors import (TuningDBDamaged, TuningDBForeign, TuningDBLocked, TuningDBReadOnly,
                                TuningDBUnavailable)
from cudnn_algos.tuning import TuningDB, read_export

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
AS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0  # root reads and writes read-only files anyway


def winner(i, env="E", settings="{}", **kw):
    return {"env": env, "key": f"forward k{i}", "settings": settings, "direction": "forward",
            "config": f"eng{i}{{TILE_SIZE=0}}", "engine_id": i, "knobs": "[[2, 0]]", "kernel_ms": 0.01 * (i + 1),
            "measured_at": "2026-12-01T00:00:00+00:00", **kw}


def cand(i, name="eng0", env="E", settings="{}", **kw):
    return {"env": env, "key": f"forward k{i}", "settings": settings, "direction": "forward", "name": name,
            "engine_id": 0, "status": "SUCCESS", "kernel_ms": 0.02, **kw}


def filled(path, n=3):
    with TuningDB(path) as db:
        for i in range(n):
            db.put(winner(i), [cand(i), cand(i, "eng1")])
    return path


def test_a_writer_killed_with_commits_in_its_wal_then_a_failing_open_loses_nothing(tmp_path):
    """SIGKILL a writer after 50 committed searches (they are in the -wal file, not yet checkpointed), then open
    while another connection holds the file locked: the open is refused (locked), nothing is moved or deleted, and
    the next open sees all 50."""
    db = tmp_path / "t.sqlite"
    code = textwrap.dedent(f"""
        import os, signal, sys
        sys.path.insert(0, {ROOT!r})
        from cudnn_algos.tuning import TuningDB
        sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r})
        from test_tuningdb_cpu import winner
        d = TuningDB({str(db)!r})
        d.con.execute("PRAGMA wal_autocheckpoint=0")
        for i in range(50):
            d.put(winner(i))
        print("stored", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == -signal.SIGKILL and "stored" in p.stdout, p.stderr
    assert os.path.getsize(str(db) + "-wal") > 0, "the commits are still in the WAL"
    holder = sqlite3.connect(str(db), isolation_level=None)
    holder.execute("PRAGMA locking_mode=EXCLUSIVE")
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.warns(RuntimeWarning, match="locked by another connection; waiting up to 3 s"):
            with pytest.raises(TuningDBLocked, match=r"still locked by another connection after 3(\.\d)? s"):
                TuningDB(db, timeout=3)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert sorted(p.name for p in tmp_path.iterdir() if ".bad-" in p.name) == []
    with TuningDB(db) as again:
        assert len(again.winners()) == 50


def test_a_file_that_is_not_sqlite_is_refused_and_never_moved(tmp_path):
    """A file given as the database that does not begin with SQLite's header (here an export, as `--db x.jsonl`)
    is not a damaged database: TuningDBForeign naming it, and the CLI's one line and exit 2, for every db action;
    the file stays where it is, byte for byte. (It was renamed to .bad-<time> and an empty database made in its
    place, exit 0.)"""
    exp = tmp_path / "x.jsonl"
    with TuningDB(filled(tmp_path / "t.sqlite")) as d:
        d.export(exp)
    before = exp.read_bytes()
    with pytest.raises(TuningDBForeign, match=r"x.jsonl: is not an SQLite database .*nothing was moved or written"):
        TuningDB(exp)
    for args in (["reselect", "--torch-margin", "0"], ["info"], ["list"], ["clear", "--all"], ["export", "y.jsonl"],
                 ["import", str(exp)]):
        r = run_cli("db", *args, "--db", str(exp), cwd=tmp_path)
        assert r.returncode == 2 and r.stderr.count("\n") == 1, (args, r.stderr)
        assert "x.jsonl: is not an SQLite database" in r.stderr and "Traceback" not in r.stderr, (args, r.stderr)
    assert exp.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.sqlite", "x.jsonl"]


def _damage_page_holding(db: Path, needle: bytes) -> None:
    """Overwrites the cell pointers of the one page that holds `needle` (a checkpointed database)."""
    raw = bytearray(db.read_bytes())
    page = sqlite3.connect(db).execute("PRAGMA page_size").fetchone()[0]
    at = raw.index(needle)
    assert raw.find(needle, at + 1) == -1, "the needle must be on one page only"
    off = at // page * page
    raw[off + 8: off + 64] = b"\xff" * 56
    db.write_bytes(bytes(raw))


def test_a_damaged_database_is_moved_aside_and_what_reads_comes_back(tmp_path):
    """Damage in the middle of a database (one page of the winners table) whose latest commits are still in its
    -wal file (a writer killed before a checkpoint): the file is moved aside, never deleted, and every winner that
    still reads, those of the -wal included, is copied into the fresh database with its candidates; the warning
    says how many came back and how many did not, and they add up. (All were dropped while most still read in the
    copy set aside.)"""
    import re

    db = tmp_path / "t.sqlite"
    with TuningDB(db) as d:
        for i in range(400):
            d.put(winner(i, config=f"cfg-{i:04d}-" + "x" * 40), [cand(i), cand(i, "eng1")])
        d.con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        want = {w.key: w for w in d.winners()}
    pid = os.fork()
    if pid == 0:  # a writer whose last 20 commits stay in the -wal: it ends without closing (no checkpoint)
        try:
            d = TuningDB(db)
            d.con.execute("PRAGMA wal_autocheckpoint=0")
            for i in range(400, 420):
                d.put(winner(i), [cand(i)])
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    assert os.path.getsize(str(db) + "-wal") > 0
    _damage_page_holding(db, b"cfg-0200-")
    with pytest.warns(RuntimeWarning, match=r"is damaged \([^\n]*\); moved aside to t.sqlite.bad-") as w:
        fresh = TuningDB(db)
    came, cands, lost = map(int, re.search(r"(\d+) winner\(s\) and (\d+) candidate\(s\) read back into the fresh "
                                           r"database; (\d+) winner", str(w[0].message)).groups())
    got = {x.key: x for x in fresh.winners()}
    assert 380 < came < 420 and came + lost == 420 and len(got) == came == fresh.salvaged.winners
    assert "forward k200" not in got and all(got[k] == want[k] for k in got if k in want)
    assert all(f"forward k{i}" in got for i in range(400, 420))  # the commits of the -wal came back too
    assert cands == 2 * (came - 20) + 20 == len(fresh.candidates())
    aside = fresh.moved_aside
    fresh.close()
    assert aside.stat().st_size > 0 and b"cfg-0399-" in aside.read_bytes()


def test_damage_to_any_one_page_of_winners_loses_at_most_that_page(tmp_path):
    """Each leaf page of the winners table damaged in turn (its cell pointers overwritten): salvage reads back every
    winner but the page's own. (Damage to the table's last page made MAX(rowid) answer low without an error, and
    the salvage stopped there: 256 of 400.)"""
    from cudnn_algos.tuning.salvage import salvage

    db = tmp_path / "t.sqlite"
    with TuningDB(db) as d:
        for i in range(400):
            d.put(winner(i, config=f"cfg-{i:04d}-" + "x" * 40), [cand(i)])
        d.con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    raw = db.read_bytes()
    page = 4096
    leaves = [off for off in range(page, len(raw), page) if raw[off] == 0x0D and b"cfg-" in raw[off: off + page]]
    assert len(leaves) >= 10
    for off in leaves:
        bad = bytearray(raw)
        per_page = int.from_bytes(bad[off + 3: off + 5], "big")
        bad[off + 8: off + 64] = b"\xff" * 56
        (tmp_path / "bad.sqlite").write_bytes(bytes(bad))
        got = []
        s = salvage(str(tmp_path / "bad.sqlite"), lambda w, c: got.extend(w))
        assert len(got) == s.winners >= 400 - per_page, (off // page, len(got), per_page)
        assert s.winners_lost in (None, 400 - s.winners)


def test_damage_inside_the_file_is_found_on_open_and_on_read_never_a_raw_sqlite_error(tmp_path, monkeypatch):
    db = filled(tmp_path / "t.sqlite", n=200)
    with TuningDB(db) as d:
        d.con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    raw = bytearray(db.read_bytes())
    page = 4096
    for off in range(2 * page, len(raw) - page, page):  # header intact, pages overwritten
        raw[off + 8: off + 200] = b"\xff" * 192
    db.write_bytes(bytes(raw))
    with pytest.warns(RuntimeWarning, match="is damaged .*moved aside"):
        d = TuningDB(db)  # quick_check on open
    assert d.winners() == [] and d.moved_aside is not None
    d.close()
    # a file too large for the check on open (here: the limit set to 0): reads raise the typed error with the path
    # and what happens next, never sqlite3's own
    db2 = filled(tmp_path / "u.sqlite", n=200)
    with TuningDB(db2) as d2:
        d2.con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con = sqlite3.connect(db2)  # the root page of every table and index but meta's (what opening reads)
    page = con.execute("PRAGMA page_size").fetchone()[0]
    roots = [r for (r,) in con.execute("SELECT rootpage FROM sqlite_master WHERE tbl_name != 'meta' AND rootpage > 1")]
    con.close()
    raw = bytearray(db2.read_bytes())
    for root in roots:  # data pages only, whichever way this SQLite laid them out: it opens
        off = (root - 1) * page
        raw[off + 8: off + 200] = b"\xff" * 192
    db2.write_bytes(bytes(raw))
    monkeypatch.setattr(tuningdb, "QUICK_CHECK_MAX_BYTES", 0)
    with TuningDB(db2) as d2:
        for read in (d2.winners, d2.info, d2.candidates):
            with pytest.raises(TuningDBDamaged, match="u.sqlite: is damaged .*opening it again moves it aside"):
                read()


def test_a_directory_or_a_path_with_no_name_is_refused_and_left_alone(tmp_path):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "keep.txt").write_text("x")
    with pytest.raises(TuningDBUnavailable, match="is a directory: give a file path such as .*nothing was moved"):
        TuningDB(mine)
    assert (mine / "keep.txt").read_text() == "x" and [p.name for p in tmp_path.iterdir()] == ["mine"]
    for bad in (".", "..", ""):
        with pytest.raises(TuningDBUnavailable, match="names no file|is a directory"):
            TuningDB(bad)


def test_another_programs_sqlite_file_is_refused_never_written(tmp_path):
    other = tmp_path / "theirs.sqlite"
    con = sqlite3.connect(other)
    con.execute("CREATE TABLE meta (key TEXT, value TEXT)")
    con.execute("INSERT INTO meta VALUES ('owner', 'them')")
    con.commit()
    con.close()
    before = other.read_bytes()
    with pytest.raises(TuningDBForeign, match="not a cudnn_algos tuning database .*refused, nothing written"):
        TuningDB(other)
    assert other.read_bytes() == before and not os.path.exists(str(other) + "-wal")
    newer = tmp_path / "newer.sqlite"
    filled(newer)
    con = sqlite3.connect(newer)
    con.execute("UPDATE meta SET v = '99' WHERE k = 'schema'")
    con.commit()
    con.close()
    with pytest.raises(TuningDBForeign, match="holds schema 99; this cudnn_algos reads schema 1"):
        TuningDB(newer)


@pytest.mark.skipif(AS_ROOT, reason="root writes read-only files anyway (CI runs as root: see the next test)")
def test_a_read_only_database_reads_and_refuses_writes_in_one_line(tmp_path):
    db = filled(tmp_path / "t.sqlite")
    os.chmod(db, 0o444)
    with TuningDB(db) as d:
        assert d.read_only and len(d.winners()) == 3
        with pytest.raises(TuningDBReadOnly, match="read-only"):
            d.clear()


def test_read_only_opening_reads_and_refuses_every_write(tmp_path):
    db = filled(tmp_path / "t.sqlite")
    with TuningDB(db, read_only=True) as d:
        assert d.read_only and d.info()["winners"] == 3 and len(d.candidates()) == 6
        for write in (d.clear, lambda: d.put(winner(9)), lambda: d.reselect(0.1),
                      lambda: d.import_(tmp_path / "x")):
            with pytest.raises(TuningDBReadOnly, match="read-only here.*reads work, this write was refused"):
                write()
        assert d.export(tmp_path / "x.jsonl") == 3  # an export is a read
    with pytest.raises(TuningDBUnavailable, match="does not exist"):
        TuningDB(tmp_path / "none.sqlite", read_only=True)


class _BusyAtOnce:
    """A connection that answers "database is locked" at once to its next `n` BEGINs, as SQLite does for some waits
    of a WAL database that its busy timeout does not cover (Note [a lock wait that waits], tuning/db.py)."""

    def __init__(self, con, n):
        self.con, self.n = con, n

    def execute(self, sql, *args):
        if sql.startswith("BEGIN") and self.n > 0:
            self.n -= 1
            raise sqlite3.OperationalError("database is locked")
        return self.con.execute(sql, *args)

    def __getattr__(self, name):
        return getattr(self.con, name)


def test_a_lock_answered_at_once_is_waited_for_and_the_message_says_how_long(tmp_path):
    """A put, a read and an export that SQLite answers "locked" at once are tried again until the lock is gone; one
    that stays locked past the timeout says how long it waited. (A put under 8 writers and 4 readers failed ~2-10 s
    into the run saying "after 60 s", and was lost.)"""
    d = TuningDB(filled(tmp_path / "t.sqlite"), timeout=5)
    d.con = _BusyAtOnce(d.con, 5)
    d.put(winner(7))
    assert d.con.n == 0 and d.winner("E", "forward k7") is not None
    d.con.n = 3
    assert d.export(tmp_path / "x.jsonl") == 4 and d.con.n == 0
    d.con.n, d.timeout = 10**9, 0.3
    t0 = time.monotonic()
    with pytest.raises(TuningDBLocked, match=r"still locked by another connection after 0\.[3-9] s"):
        d.put(winner(8))
    assert 0.3 <= time.monotonic() - t0 < 5
    d.con = d.con.con
    assert d.winner("E", "forward k8") is None  # nothing half-written
    d.close()


def test_a_database_in_a_directory_the_user_cannot_write_reads(tmp_path):
    """`db info` and `db list` of a (WAL) database in a directory the user may not write in: the reads work, exit
    0, and a write is refused in one line. Run as another user when the tests run as root (root may write
    anywhere), with the directory's permissions as they are. (Reads were refused: "this write was refused".)"""
    import tempfile

    from cudnn_algos.tuning import db as _db  # noqa: F401  (imported before the user changes)

    base = Path(tempfile.mkdtemp(dir="/tmp" if os.path.isdir("/tmp") else None))
    try:
        os.chmod(base, 0o755)
        ro = base / "ro"
        ro.mkdir()
        filled(ro / "t.sqlite")
        os.chmod(ro / "t.sqlite", 0o644)
        os.chmod(ro, 0o555)
        assert not os.path.exists(ro / "t.sqlite-wal")  # closed cleanly: a WAL database with no -wal or -shm left
        run_cli("db", "info", "--db", str(ro / "t.sqlite"))  # every module the commands import, imported here
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: another user where this is root, then the CLI's reads and a write
            code = 1
            try:
                os.close(r)
                if AS_ROOT:
                    os.setgid(65534)
                    os.setuid(65534)
                out = [run_cli("db", a, "--db", str(ro / "t.sqlite")) for a in ("info", "list")]
                out.append(run_cli("db", "clear", "--all", "--db", str(ro / "t.sqlite")))
                os.write(w, json.dumps([[x.returncode, x.stdout, x.stderr] for x in out]).encode())
                code = 0
            finally:
                os._exit(code)
        os.close(w)
        with os.fdopen(r) as f:
            got = f.read()
        assert os.waitpid(pid, 0)[1] == 0, got
        (ic, io_, ie), (lc, lo, le), (cc, co, ce) = json.loads(got)
        assert ic == 0 and "3 winners" in io_ and ie == "", (io_, ie)
        assert lc == 0 and "forward k2" in lo and le == "", (lo, le)
        assert cc == 1 and "read-only here" in ce and ce.count("\n") == 1, ce
    finally:
        os.chmod(base / "ro", 0o755)
        import shutil

        shutil.rmtree(base)


def test_a_healthy_database_in_an_unwritable_directory_opens_read_only(tmp_path, monkeypatch):
    """The directory is reported unwritable (os.access, as for a user without write permission; root writes
    anyway, so the permission itself is not what is tested): the database opens read-only, reads work, a write
    is one TuningDBReadOnly, and nothing is moved aside."""
    db = filled(tmp_path / "t.sqlite")
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, m: False if str(p) == str(tmp_path) and m == os.W_OK else real(p, m))
    with TuningDB(db) as d:
        assert d.read_only and d.info()["winners"] == 3 and d.moved_aside is None
        with pytest.raises(TuningDBReadOnly, match="read-only here"):
            d.clear()
    assert cli.main(["db", "info", "--db", str(db)]) == 0
    assert cli.main(["db", "clear", "--all", "--db", str(db)]) == 1
    assert [p.name for p in tmp_path.iterdir() if ".bad-" in p.name] == []


def test_no_database_in_an_unwritable_directory_is_one_clear_error(tmp_path, monkeypatch):
    ro = tmp_path / "ro"
    ro.mkdir()
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, m: False if str(p) == str(ro) and m == os.W_OK else real(p, m))
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # and no "moved aside" for a file that never existed
        with pytest.raises(TuningDBUnavailable, match="does not exist, and its directory .* is not writable"):
            TuningDB(ro / "t.sqlite")


def test_export_never_writes_over_the_database_and_is_strict_json(tmp_path):
    db = filled(tmp_path / "c.sqlite")
    before = db.read_bytes()
    with TuningDB(db) as d:
        for target in (db, str(db) + "-wal"):
            with pytest.raises(ValueError, match="would be written over --db"):
                d.export(target)
    assert TuningDB(db).info()["winners"] == 3 and db.read_bytes()[:100] == before[:100]
    r = run_cli("db", "export", str(db), "--db", str(db))
    assert r.returncode == 2 and "would be written over --db" in r.stderr and "Traceback" not in r.stderr
    with TuningDB(db) as d:
        with pytest.raises(ValueError, match="kernel_ms=nan must be a finite number"):
            d.put(winner(7, kernel_ms=float("nan")))
        with pytest.raises(ValueError, match="runner_up_ms=inf must be a finite number"):
            d.put(winner(7, runner_up_ms=math.inf))
        d.export(tmp_path / "x.jsonl")
    for line in (tmp_path / "x.jsonl").read_text().splitlines():
        json.loads(line, parse_constant=lambda c: pytest.fail(f"non-JSON constant {c}"))


def test_import_is_all_or_nothing_and_names_the_file_and_line(tmp_path):
    src = filled(tmp_path / "a.sqlite", n=30)
    with TuningDB(src) as a:
        a.export(tmp_path / "x.jsonl")
    lines = (tmp_path / "x.jsonl").read_text().splitlines()
    lines.insert(16, json.dumps({"winner": {**winner(99), "kernel_ms": "fast"}}))
    (tmp_path / "bad.jsonl").write_text("\n".join(lines) + "\n")
    with TuningDB(tmp_path / "b.sqlite") as b:
        with pytest.raises(ValueError, match=r"bad.jsonl line 17: the winner's kernel_ms='fast' must be a finite"):
            b.import_(tmp_path / "bad.jsonl")
        assert b.info()["winners"] == 0, "nothing of a file with a bad entry is imported"
        n = b.import_(tmp_path / "x.jsonl")
        assert n == 30 and n.candidates == 60 and n.orphans == 0


@pytest.mark.parametrize("entry,match", [
    ('{"winner": {"env": "E", "key": "k", "settings": "{}", "config": [1], "engine_id": 1}}', "config=\\[1\\] must"),
    ('{"winner": 5}', "a winner is a JSON object, not int"),
    ('42', "an entry is"), ('[1, 2, 3]', "an entry is"), ('null', "an entry is"),
    ('{"candidate": {"env": "E", "key": "k", "settings": "{}"}}', "the candidate has no name"),
    ('{"winner": {"env": "E", "key": "k", "settings": "{}", "config": "c", "engine_id": 1000000000000000000000000000000}}',
     "must be an integer that fits 64 bits"),
    ('{"winner": {"env": "E", "key": "k", "settings": "{}", "config": "c", "engine_id": 1, "kernel_ms": NaN}}',
     "not JSON"),
    ('{"winner": {"env": "E", "key": "k", "settings": "oops", "config": "c", "engine_id": 1}}',
     "settings is not JSON text"),
    ('{"winner": {"env": "E", "key": "k"}}', "the winner has no settings"),
    ('{"winner": {"env": "E", "key": "k", "settings": "{}", "config": "c", "engine_id": 1, "x": 1}}',
     "a field 'x' that is not one of"),
    ('{"winner": ' * 100000 + '1' + '}' * 100000, "not JSON"),
])
def test_import_of_a_wrong_entry_is_one_value_error(tmp_path, entry, match):
    f = tmp_path / "x.jsonl"
    f.write_text('{"cudnn_algos_tuning_export": 1}\n' + entry + "\n")
    with TuningDB(tmp_path / "b.sqlite") as b:
        with pytest.raises(ValueError, match=match) as e:
            b.import_(f)
        assert "x.jsonl line 2" in str(e.value) and b.info()["winners"] == 0


def test_import_of_files_that_are_not_exports(tmp_path):
    import gzip

    cases = {"t.txt": b"hello\n", "t.gz": gzip.compress(b'{"cudnn_algos_tuning_export": 1}\n'), "e.jsonl": b"",
             "r.json": b'{"schema": 3, "kind": "engine_search"}\n'}
    with TuningDB(tmp_path / "b.sqlite") as b:
        for name, data in cases.items():
            (tmp_path / name).write_bytes(data)
            with pytest.raises(ValueError, match=f"{name}.*(not a cudnn_algos tuning export|not JSON|gunzip)"):
                b.import_(tmp_path / name)
        with pytest.raises(ValueError, match="is a directory"):
            b.import_(tmp_path)


def test_candidates_whose_winner_is_missing_are_counted_not_dropped_silently(tmp_path):
    f = tmp_path / "x.jsonl"
    f.write_text('{"cudnn_algos_tuning_export": 1}\n' + json.dumps({"winner": winner(1)}) + "\n"
                 + json.dumps({"candidate": cand(1)}) + "\n" + json.dumps({"candidate": cand(2)}) + "\n")
    with TuningDB(tmp_path / "b.sqlite") as b:
        n = b.import_(f)
        assert (int(n), n.candidates, n.orphans) == (1, 1, 1)
    r = run_cli("db", "import", str(f), "--db", str(tmp_path / "c.sqlite"))
    assert r.returncode == 0 and "1 candidate(s) whose winner is in neither" in r.stdout, r.stdout + r.stderr


def test_import_is_linear(tmp_path):
    """2,000 winners x 20 candidates: one transaction, candidates grouped (the old import was quadratic)."""
    f = tmp_path / "x.jsonl"
    with open(f, "w") as out:
        out.write('{"cudnn_algos_tuning_export": 1}\n')
        for i in range(2000):
            out.write(json.dumps({"winner": winner(i)}) + "\n")
            for j in range(20):
                out.write(json.dumps({"candidate": cand(i, f"eng{j}")}) + "\n")
    t0 = time.perf_counter()
    with TuningDB(tmp_path / "b.sqlite") as b:
        n = b.import_(f)
    assert n == 2000 and n.candidates == 40000
    assert time.perf_counter() - t0 < 60  # the quadratic import took 136 s here; this is not a timing target


def test_cli_db_errors_are_one_line(tmp_path):
    def run(*args):
        return run_cli(*args)

    d = tmp_path / "d"
    d.mkdir()
    r = run("db", "info", "--db", str(d))
    assert r.returncode == 1 and "is a directory" in r.stderr and "Traceback" not in r.stderr and d.is_dir()
    r = run("db", "info", "--db", ".")
    assert r.returncode == 1 and "names no file" in r.stderr and "Traceback" not in r.stderr
    other = tmp_path / "o.sqlite"
    con = sqlite3.connect(other)
    con.execute("CREATE TABLE meta (key TEXT, value TEXT)")
    con.commit()
    con.close()
    r = run("db", "list", "--db", str(other))
    assert r.returncode == 2 and "not a cudnn_algos tuning database" in r.stderr and "Traceback" not in r.stderr
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"cudnn_algos_tuning_export": 1}\n{"winner": 5}\n')
    r = run("db", "import", str(bad), "--db", str(tmp_path / "t.sqlite"))
    assert r.returncode == 2 and "bad.jsonl line 2" in r.stderr and "Traceback" not in r.stderr


hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

TEXT = st.text(min_size=1, max_size=12)
NUM = st.one_of(st.none(), st.floats(allow_nan=False, allow_infinity=False, width=64))


@st.composite
def entries(draw):
    ws = {}
    for i in range(draw(st.integers(0, 6))):
        w = {"env": draw(TEXT), "key": f"k{i}", "settings": json.dumps({"s": draw(TEXT)}),
             "direction": draw(st.sampled_from(["forward", "backward_data"])), "config": draw(TEXT),
             "engine_id": draw(st.integers(-1, 2**62)), "knobs": "[]", "kernel_ms": draw(NUM),
             "host_ms": draw(NUM), "runner_up": draw(st.one_of(st.none(), TEXT)), "measured_at": draw(TEXT)}
        ws[(w["env"], w["key"], w["settings"])] = w
    cs = {}
    for w in ws.values():
        for j in range(draw(st.integers(0, 3))):
            c = {"env": w["env"], "key": w["key"], "settings": w["settings"], "name": f"eng{j}",
                 "engine_id": draw(st.integers(0, 100)), "status": "SUCCESS", "kernel_ms": draw(NUM),
                 "workspace_bytes": draw(st.one_of(st.none(), st.integers(0, 2**62)))}
            cs[(c["env"], c["key"], c["settings"], c["name"])] = c
    return list(ws.values()), list(cs.values())


@settings(max_examples=60, deadline=None)
@given(entries())
def test_export_then_import_round_trips_exactly(tmp_path_factory, data):
    ws, cs = data
    tmp = tmp_path_factory.mktemp("rt")
    with TuningDB(tmp / "a.sqlite") as a:
        for w in ws:
            a.put(w, [c for c in cs if (c["env"], c["key"], c["settings"]) == (w["env"], w["key"], w["settings"])])
        assert a.export(tmp / "x.jsonl") == len(ws)
        got_w, got_c = read_export(tmp / "x.jsonl")
        with TuningDB(tmp / "b.sqlite") as b:
            n = b.import_(tmp / "x.jsonl")
            assert (int(n), n.candidates, n.orphans) == (len(ws), len(cs), 0)
            key = lambda r: json.dumps(r if isinstance(r, dict) else r.as_dict(), sort_keys=True)  # noqa: E731
            assert sorted(map(key, b.winners())) == sorted(map(key, a.winners())) == sorted(map(key, got_w))
            assert sorted(map(key, b.candidates())) == sorted(map(key, a.candidates())) == sorted(map(key, got_c))


def test_cli_main_catches_the_database_errors(tmp_path, capsys):
    d = tmp_path / "d"
    d.mkdir()
    assert cli.main(["db", "info", "--db", str(d)]) == 1
    assert "TuningDBUnavailable" in capsys.readouterr().err


def test_files_of_the_previous_layout_open_unchanged(make, tmp_path):
    """CPU: a tuning database, its export and a results store written by the package before the split into
    subpackages (tests/fixtures/*layout1*) read the same here: the same winners (now Winner rows) under the same
    environment key, their candidates, and every stored search reused."""
    import shutil

    from cudnn_algos.model import ResultStore
    from cudnn_algos.tuning import Winner

    fixtures = Path(__file__).parent / "fixtures"
    shutil.copy(fixtures / "tuning_layout1.sqlite", tmp_path / "t.sqlite")
    with TuningDB(tmp_path / "t.sqlite") as db:
        ws = db.winners(make.env.key())
        assert sorted(w.config for w in ws) == ["eng2", "torch"] and all(isinstance(w, Winner) for w in ws)
        fwd = db.winner(make.env.key(), "forward k-conv")
        assert fwd.engine_id == 2 and fwd.knob_list() == [] and fwd["runner_up"] == "eng0" and not fwd.is_torch
        assert db.winner(make.env.key(), "backward_data k-conv").is_torch
        assert len(db.candidates()) == 8
        winners, cands = read_export(fixtures / "tuning_layout1_export.jsonl")
        assert sorted(winners, key=lambda w: w["key"]) == sorted((w.as_dict() for w in db.winners()),
                                                                 key=lambda w: w["key"])
        assert len(cands) == 8
    shutil.copy(fixtures / "results_store_layout1.jsonl", tmp_path / "s.jsonl")
    store = ResultStore(str(tmp_path / "s.jsonl"), make.env)
    assert len(store) == 2 and store.skipped == 0
    assert store.get(ResultStore.key(kind="engines", n=1)) == make.engine_result()
