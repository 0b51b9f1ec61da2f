"""CPU: saved files under abuse. Loading a damaged, foreign or hostile file is one ResultFileError naming it (one
line from the CLI, no traceback); decompression is bounded; outputs are checked before any work and never written
over an input; writes are atomic. Hand-made results (conftest's builders), no GPU."""
import gzip
import json
import os
from pathlib import Path

import pytest
from conftest import run_cli

from cudnn_algos import load_json
from cudnn_algos.errors import ResultFileError
from cudnn_algos.files import atomic_write, read_text
from cudnn_algos.results.writers import WRITERS
from cudnn_algos.tuning import TuningDB

FIXTURES = Path(__file__).parent / "fixtures"
ROOT = FIXTURES.parent.parent
SHARD = sorted((ROOT / "data" / "sm_90-cudnn-9.19").glob("*.parquet"))[0]
CORPUS = sorted((ROOT / "data" / "corpora").glob("*.json.gz"))[0]
LAYER = ["--conv", "Conv2d(8, 8, 3)", "--input", "2,8,16,16"]


def out_cases(saved):
    """(argv with OUT where the output path goes) for every output file of every command. (Output directories,
    `--plot DIR` and `dataset write --out DIR`, are made with their parents, as `mkdir -p` would.)"""
    s = str(saved)
    return [
        ["find", *LAYER, "--json", "OUT"], ["engines", *LAYER, "--json", "OUT"],
        *(["show", s, f"--{w}", "OUT"] for w in WRITERS), ["compare", s, s, "--csv", "OUT"],
        ["profile", "resnet50", "--json", "OUT"], ["profile", "resnet50", "--store", "OUT"],
        *(["profile", "resnet50", f"--{w}", "OUT"] for w in WRITERS),
        ["tune", "resnet50", "--db", "OUT"],
        ["db", "export", "OUT", "--db", "DB"], ["db", "import", s, "--db", "OUT"], ["db", "clear", "--db", "OUT"],
        ["db", "reselect", "--torch-margin", "0", "--db", "OUT"],
        ["corpus", "--families", "decoders", "--json", "OUT"],
        ["sweep", str(CORPUS), "--store", "OUT", "--dry-run"],
        ["dataset", "keys", str(SHARD), "--out", "OUT"], ["dataset", "pack", str(SHARD), "--out", "OUT"],
        ["dataset", "report", str(SHARD), "--plot", "OUT"], ["dataset", "report", str(SHARD), "--map", "OUT"],
        ["dataset", "merge", "OUT", "--from", str(SHARD)],
        ["selector", "train", str(SHARD), "--out", "OUT"], ["selector", "eval", str(SHARD), "--plot", "OUT"],
    ]


def _run(*args, cwd=None):
    return run_cli(*args, cwd=cwd)


@pytest.fixture
def saved(make, tmp_path):
    p = tmp_path / "r.json"
    make.engine_result().to_json(str(p))
    return p


def _bad_files(saved: Path, tmp: Path) -> dict[str, tuple[bytes | None, str]]:
    good = saved.read_bytes()
    d = json.loads(good)
    listed = dict(d, rows=5)
    stringy = json.loads(good)
    stringy["rows"][0]["measured"]["kernel_ms"]["median"] = "fast"
    return {
        "cut.json.gz": (gzip.compress(good)[:-40], "damaged gzip stream"),
        "cut.json": (good[: len(good) // 2], "is not JSON"),
        "plain.json.gz": (good, None),  # plain JSON named .gz: read as it is
        "list.json": (b"[1, 2, 3]", "holds a JSON list, not a saved result"),
        "rows-not-a-list.json": (json.dumps(listed).encode(), "not a valid saved engine_search"),
        "median-as-text.json": (json.dumps(stringy).encode(), None),  # kept as it is written (a str median)
        "latin1.json": ("{\"x\": \"\xe9\"}".encode("latin-1"), "is not UTF-8"),
        "deep.json": (b"[" * 100000 + b"]" * 100000, "nested too deeply|not JSON"),
        "trace.json": (json.dumps({"traceEvents": []}).encode(), "Chrome trace"),
        "foreign.json": (b'{"hello": "world"}', "schema None"),
    }


def test_every_bad_file_is_one_result_file_error_naming_it(saved, tmp_path):
    for name, (data, match) in _bad_files(saved, tmp_path).items():
        p = tmp_path / name
        p.write_bytes(data)
        if match is None:
            load_json(str(p))
            continue
        with pytest.raises(ResultFileError, match=match) as e:
            load_json(str(p))
        assert e.value.path == str(p) and str(p) in str(e.value), name
    with pytest.raises(ResultFileError, match="is a directory"):
        load_json(str(tmp_path))


def test_show_and_compare_print_one_line_for_each_bad_file(saved, tmp_path):
    for name, (data, match) in _bad_files(saved, tmp_path).items():
        if match is None:
            continue
        p = tmp_path / name
        p.write_bytes(data)
        for args in (["show", str(p)], ["compare", str(p), str(saved)]):
            r = _run(*args)
            assert r.returncode in (1, 2) and "Traceback" not in r.stderr, (args, r.stderr)
            assert len(r.stderr.strip().splitlines()) <= 2 and name in r.stderr, (args, r.stderr)


def test_decompression_is_bounded(tmp_path):
    bomb = tmp_path / "bomb.json.gz"
    bomb.write_bytes(gzip.compress(b"{" + b" " * (60 << 20) + b"}"))  # 60 MiB of JSON in ~60 KiB
    assert bomb.stat().st_size < 200_000
    with pytest.raises(ResultFileError, match="inflates past .* refused"):
        read_text(bomb)
    r = _run("show", str(bomb))
    assert r.returncode == 2 and "inflates past" in r.stderr and "Traceback" not in r.stderr


def test_outputs_are_checked_before_any_work_and_never_over_an_input(saved, tmp_path):
    cases = [
        (["show", str(saved), "--html", str(saved)], "would be written over FILE"),
        (["show", str(saved), "--trace", str(tmp_path / "no" / "t.json")], "does not exist"),
        (["show", str(saved), "--html", str(tmp_path)], "is a directory"),
        (["show", str(saved), "--plot", str(saved)], "would be written over|is a file"),
        (["compare", str(saved), str(saved), "--csv", str(saved)], "would be written over A"),
        (["find", "--json", str(tmp_path / "missing" / "x.json")], "does not exist"),
        (["profile", "resnet50", "--json", str(tmp_path / "a.json"), "--html", str(tmp_path / "a.json")],
         "would be written over --json"),
        (["profile", "resnet50", "--json", str(tmp_path / "a.json"), "--store", str(tmp_path / "a.json")],
         "would be written over --json"),
    ]
    before = saved.read_bytes()
    for args, match in cases:
        r = _run(*args)
        assert r.returncode == 2 and "Traceback" not in r.stderr, (args, r.stderr)
        assert __import__("re").search(match, r.stderr), (args, r.stderr)
    assert saved.read_bytes() == before


def test_every_output_path_in_a_missing_folder_is_one_usage_line(saved, tmp_path):
    """Every output path of every command (a --db a command would make included), given in a folder that does not
    exist: exit 2 and one line naming the folder, before any work, and no folder made. (`db export` into one was an
    "unexpected FileNotFoundError" naming a hidden temporary file; `db import`/`clear`/`reselect` made the folders.)"""
    bad = []
    for argv in out_cases(saved):
        out = tmp_path / "nodir" / "sub" / "x.out"
        db = tmp_path / "t.sqlite"
        if not db.exists():
                    TuningDB(db).close()
        r = run_cli(*[str(out) if a == "OUT" else str(db) if a == "DB" else a for a in argv])
        ok = r.returncode == 2 and str(out.parent) in r.stderr and "unexpected" not in r.stderr
        if not ok:
            bad.append((argv, r.returncode, r.stderr.strip()[-300:]))
        if (tmp_path / "nodir").exists():
            bad.append((argv, "made the folder"))
            __import__("shutil").rmtree(tmp_path / "nodir")
    assert not bad, "\n".join(map(str, bad))


def test_atomic_write_into_a_missing_folder_names_the_path_not_its_temporary_file(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"the directory .*nodir does not exist: '.*nodir/x.jsonl'"):
        atomic_write(tmp_path / "nodir" / "x.jsonl", "x")


def test_show_trace_of_a_result_without_phases_is_refused(saved, tmp_path):
    r = _run("show", str(saved), "--trace", str(tmp_path / "t.json"))
    assert r.returncode == 2 and "no recorded measuring phases" in r.stderr and not (tmp_path / "t.json").exists()


def test_atomic_write_leaves_the_old_file_when_it_fails(tmp_path, monkeypatch):
    p = tmp_path / "x.json"
    p.write_text("old")

    def boom(*a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", boom)
    with pytest.raises(OSError, match="No space"):
        atomic_write(p, "new")
    assert p.read_text() == "old" and [q.name for q in tmp_path.iterdir()] == ["x.json"]
    monkeypatch.undo()
    atomic_write(tmp_path / "y.json.gz", "hello")
    assert gzip.decompress((tmp_path / "y.json.gz").read_bytes()) == b"hello"


def test_atomic_write_gives_a_new_file_opens_permissions_and_keeps_a_replaced_ones(tmp_path):
    """A new file gets what open() would give it under the process's umask (not the temporary file's 0600: a corpus
    or report written for others to read stays readable); a file it replaces keeps its own mode."""
    old = os.umask(0o022)
    try:
        atomic_write(tmp_path / "new.json", "{}")
        assert (tmp_path / "new.json").stat().st_mode & 0o777 == 0o644
        os.umask(0o077)
        atomic_write(tmp_path / "private.json.gz", "{}")
        assert (tmp_path / "private.json.gz").stat().st_mode & 0o777 == 0o600
        os.chmod(tmp_path / "new.json", 0o640)
        atomic_write(tmp_path / "new.json", "[]")
        assert (tmp_path / "new.json").stat().st_mode & 0o777 == 0o640 and read_text(tmp_path / "new.json") == "[]"
    finally:
        os.umask(old)


def test_loading_a_large_profile_is_quick():
    """The committed ResNet-50 profile (10 MB of JSON): type hints resolved once per class, not per object.
    (Not a timing target: a guard against the per-object resolution coming back, 12.5 s here before.)"""
    import time

    t0 = time.perf_counter()
    r = load_json(str(FIXTURES / "profile_resnet50_fp16-nhwc_b32_engines.json.gz"))
    assert r.problems and time.perf_counter() - t0 < 6
