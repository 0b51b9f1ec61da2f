"""CPU tests of cudnn_algos.dataset.shards (the dataset the repository keeps: compact Parquet shards of a sweep store): the
round trip on real rows, validation before writing, refusals, the CLI, and the committed shards against their data
card. No GPU involved."""
import gzip
import json
import math
import re
from pathlib import Path

import pytest

pytest.importorskip("pyarrow", reason="the dataset's shards are Parquet (pip install pyarrow)")

from conftest import run_cli  # noqa: E402

from cudnn_algos.dataset import shards  # noqa: E402
from cudnn_algos.sweep import SweepStore  # noqa: E402

ROOT = Path(__file__).parent.parent
REAL = Path(__file__).parent / "fixtures" / "sweep_decoders_h200_sample.jsonl.gz"
DATA = ROOT / "data"


def real_problems():
    lines = [json.loads(x) for x in gzip.open(REAL, "rt")]
    return [(o["key"], o["env"], o["rows"]) for o in lines[1:]]


def a_store(path):
    """The real sample's 17 problem-directions, one more the sweep failed, and one whose rows fail validation."""
    s = SweepStore(path)
    problems = real_problems()
    for key, env, rows in problems:
        s.put(key, "done", rows, worker="gpu0", seconds=1.5, env=env)
    s.put("failed one", "failed", reason="CudnnError CUDNN_STATUS_NOT_SUPPORTED", attempts=3, worker="gpu1")
    bad = [dict(r, kernel_median_ms=-1.0) for r in problems[0][2]]
    s.put("bad one", "done", bad, worker="gpu0", env=problems[0][1])
    return s, problems


def test_a_store_round_trips_through_a_shard_on_the_core_columns(tmp_path):
    s, problems = a_store(tmp_path / "s.sqlite")
    packed = shards.pack(s, tmp_path / "a.parquet", about="the decoders sample")
    assert (packed.done, packed.failed) == (17, 1)
    assert list(packed.left_out) == ["bad one"] and "kernel_median_ms=-1.0" in packed.left_out["bad one"]
    assert packed.rows == sum(len(r) for _, _, r in problems)

    back = SweepStore(tmp_path / "back.sqlite")
    assert shards.unpack([tmp_path / "a.parquet"], back) == (18, 0)
    assert shards.unpack([tmp_path / "a.parquet"], back) == (0, 18)  # a second time: nothing twice
    assert back.keys() == s.keys() - {"bad one"}  # left out: the next sweep measures it again
    tasks = {t.key: t for t in back.tasks()}
    assert tasks["failed one"].status == "failed" and tasks["failed one"].attempts == 3
    assert tasks["failed one"].reason.endswith("NOT_SUPPORTED") and back.rows("failed one") == []
    original = {t.key: t for t in s.tasks()}
    for key, env, rows in problems:
        t = tasks[key]
        assert (t.status, t.worker, t.seconds, t.env, t.finished_at) == \
            ("done", "gpu0", 1.5, env, original[key].finished_at)
        got = back.rows(key)
        assert len(got) == len(rows)
        for a, b in zip(rows, got):
            for c in shards.CORE_COLUMNS:
                va, vb = a.get(c), b[c]
                if isinstance(va, float):
                    assert vb == pytest.approx(va, rel=1e-6)  # float32
                elif isinstance(va, tuple):
                    assert vb == list(va)
                else:
                    assert vb == va, (c, va, vb)
    # what is left out of a row is what CORE_COLUMNS does not name
    assert "repro" not in got[0] and "kernel_samples_ms" not in got[0]


def test_pack_only_the_keys_asked_for_and_never_over_a_file(tmp_path):
    s, problems = a_store(tmp_path / "s.sqlite")
    keys = {problems[0][0], problems[1][0]}
    assert shards.pack(s, tmp_path / "a.parquet", keys).done == 2
    with pytest.raises(ValueError, match="exists: a shard is written once"):
        shards.pack(s, tmp_path / "a.parquet")
    with pytest.raises(ValueError, match="nothing to pack"):
        shards.pack(s, tmp_path / "b.parquet", {"bad one"})


def test_a_parquet_file_that_is_not_a_shard_is_refused_by_name(tmp_path):
    pd = pytest.importorskip("pandas")
    p = tmp_path / "other.parquet"
    pd.DataFrame({"x": [1, 2]}).to_parquet(p)
    with pytest.raises(ValueError, match=r"other\.parquet is not a cudnn_algos dataset shard"):
        shards.read(p)
    (tmp_path / "junk.parquet").write_bytes(b"not parquet")
    with pytest.raises(ValueError, match=r"junk\.parquet: not readable as Parquet"):
        shards.read(tmp_path / "junk.parquet")


def test_cli_pack_and_merge_from_a_shard(tmp_path):
    s, _ = a_store(tmp_path / "s.sqlite")
    s.close()
    out = tmp_path / "a.parquet"
    r = run_cli("dataset", "pack", tmp_path / "s.sqlite", "--out", out, "--about", "sample")
    assert r.returncode == 0, r.stderr
    assert "17 problem-directions measured (0 of them repeats), 1 failed" in r.stdout
    assert "left out (a sweep measures it again): bad one" in r.stdout
    r = run_cli("dataset", "pack", tmp_path / "s.sqlite", "--out", out)
    assert r.returncode == 2 and "exists: a shard is written once" in r.stderr
    r = run_cli("dataset", "merge", tmp_path / "m.sqlite", "--from", out)
    assert r.returncode == 0 and "18 problem-directions copied, 0 already" in r.stdout, r.stderr
    r = run_cli("dataset", "validate", tmp_path / "m.sqlite")
    assert r.returncode == 0 and "17 problem-directions kept" in r.stdout, r.stderr


def committed():
    return sorted(DATA.glob("*/*.parquet"))


def card_line(card: str, path) -> str | None:
    """The row of docs/dataset.md's shard tables that lists `path`: the table whose header names the shard's folder
    (`data/ENV/` or `data/again/ENV/`), the row naming its file."""
    folder = f"`{path.parent.relative_to(ROOT).as_posix()}/`"
    inside = False
    for x in card.splitlines():
        if x.startswith("|") and folder in x:
            inside = True
        elif not x.startswith("|"):
            inside = False
        elif inside and f"`{path.name}`" in x:
            return x
    return None


def test_the_committed_shards_validate_and_their_data_card_counts_them():
    """Every shard under data/ reads back, holds no problem-direction another shard holds, every measured one has a
    best and finite times, and docs/dataset.md lists each shard with its counts."""
    from cudnn_algos.dataset import problem_errors

    paths = committed()
    assert paths, "no shard under data/"
    card = (ROOT / "docs" / "dataset.md").read_text()
    total = shards.summary(paths)
    assert total["in_two_shards"] == []
    for p in paths:
        one = shards.summary([p])
        line = card_line(card, p)
        assert line is not None, f"docs/dataset.md does not list {p.relative_to(ROOT)}"
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert [int(c.replace(",", "")) for c in cells[1:4]] == [one["measured"], one["repeats"], one["rows"]], line
        for t, rows in shards.read(p):
            if t.status == "done":
                assert problem_errors(rows) == [], t.key
                assert all(math.isfinite(r["kernel_median_ms"]) for r in rows if r["kernel_median_ms"] is not None)
    m = re.search(r"in all: ([\d,]+) problem-directions measured", card)
    assert m and int(m.group(1).replace(",", "")) == total["measured"]


def test_measured_straight_from_shards_is_what_a_store_of_them_gives(tmp_path):
    from cudnn_algos.dataset import measured_problems
    from cudnn_algos.sweep.tasks import repeat_key

    s, problems = a_store(tmp_path / "s.sqlite")
    s.put(repeat_key(problems[3][0]), "done", problems[3][2], worker="gpu1", env=problems[3][1])  # not kept
    keys = sorted(s.keys())
    d = tmp_path / "shards"
    d.mkdir()
    shards.pack(s, d / "a.parquet", keys[:12])
    shards.pack(s, d / "b.parquet", keys[8:])  # four keys in both shards: each read once
    paths = shards.shard_paths(d)
    got = shards.measured(paths)
    with shards.open_store(d) as back:
        assert got == list(measured_problems(back))
    assert sorted(k for k, _ in got) == sorted(k for k, _, _ in problems) and len(got) == 17  # no repeat, failed, bad
    assert [k for k, _ in got] == [k for k, _ in measured_problems(s)]  # the store's order (finished_at, key)


def test_report_validate_and_selector_read_shards_directly(tmp_path):
    """dataset validate/report and selector eval take shards (a file or a directory of them) where they take a
    store: the same answers as on the store the shards came from."""
    s, _ = a_store(tmp_path / "s.sqlite")
    d = tmp_path / "shards"
    d.mkdir()
    shards.pack(s, d / "a.parquet", [k for k in s.keys()][:10])
    shards.pack(s, d / "b.parquet", [k for k in s.keys()][10:])
    s.close()
    # the store less its left-out problem-direction: what the shards hold
    ref = tmp_path / "ref.sqlite"
    assert run_cli("dataset", "merge", ref, "--from", d / "a.parquet", "--from", d / "b.parquet").returncode == 0
    for args in (("dataset", "validate"), ("dataset", "report", "--by", "")):
        a, b = run_cli(*args, d), run_cli(*args, ref)
        assert a.returncode == 0 and a.stdout == b.stdout and "17 problem-directions" in a.stdout, a.stderr
    one = run_cli("dataset", "validate", d / "a.parquet")
    assert one.returncode == 0 and "problem-directions kept" in one.stdout
    empty = tmp_path / "empty"
    empty.mkdir()
    r = run_cli("dataset", "report", empty)
    assert r.returncode != 0 and "no dataset shard" in r.stderr and "Traceback" not in r.stderr


def test_the_shards_measured_again_hold_only_problems_the_dataset_holds():
    """data/again/ENV/*.parquet: the same problem-directions measured again in a later process (what `dataset
    compare` reads against the dataset); none is new to the dataset, and the data card lists each with its counts."""
    again = sorted(DATA.glob("again/*/*.parquet"))
    assert again, "no shard under data/again/"
    card = (ROOT / "docs" / "dataset.md").read_text()
    for p in again:
        held = {t.key for q in sorted((DATA / p.parent.name).glob("*.parquet")) for t, _ in shards.read(q)}
        keys = {t.key for t, _ in shards.read(p)}
        assert keys and keys <= held, sorted(keys - held)[:3]
        one = shards.summary([p])
        line = card_line(card, p)
        assert line is not None and f"| {one['measured']} | {one['repeats']} | {one['rows']:,} |" in line, line


def as_version_1(src, dst):
    """The shard at `src` written as version 1 wrote it: a knobs column, version 1 in its metadata."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    t = pq.read_table(src)
    knobs = [shards.knobs_of(k, c) for k, c in zip(t.column("candidate_kind").to_pylist(),
                                                    t.column("candidate").to_pylist())]
    t = t.append_column("knobs", pa.array(knobs, pa.string()))
    pq.write_table(t.replace_schema_metadata({**t.schema.metadata, b"version": b"1"}), dst)


def test_a_version_1_shard_reads_the_same_and_upgrades_in_place(tmp_path):
    s, _ = a_store(tmp_path / "s.sqlite")
    shards.pack(s, tmp_path / "a.parquet", about="the decoders sample")
    import pyarrow.parquet as pq

    assert "knobs" not in pq.read_schema(tmp_path / "a.parquet").names  # read from the candidate instead
    as_version_1(tmp_path / "a.parquet", tmp_path / "v1.parquet")
    new = shards.read(tmp_path / "a.parquet")
    assert shards.read(tmp_path / "v1.parquet") == new
    assert any(r["knobs"] for _, rows in new for r in rows)  # some engine configurations have knobs
    before, after = shards.upgrade(tmp_path / "v1.parquet")
    assert after < before
    meta = pq.read_schema(tmp_path / "v1.parquet").metadata
    assert meta[b"version"] == b"2" and meta[b"about"] == b"the decoders sample"
    assert shards.read(tmp_path / "v1.parquet") == new
    with pytest.raises(ValueError, match="already a shard of version 2"):
        shards.upgrade(tmp_path / "v1.parquet")


def test_knobs_are_read_from_the_candidate_and_pack_refuses_rows_where_they_differ(tmp_path):
    assert shards.knobs_of("engine", "eng73{TILE_SIZE=16,TILEK=1}") == "TILE_SIZE=16,TILEK=1"
    assert shards.knobs_of("engine", "eng5") == ""
    assert shards.knobs_of("legacy", "IMPLICIT_GEMM") is None and shards.knobs_of(None, None) is None
    with pytest.raises(ValueError, match="not named engN"):
        shards.knobs_of("engine", "IMPLICIT_GEMM")
    key, env, rows = real_problems()[0]
    i = next(j for j, r in enumerate(rows) if r.get("knobs"))
    rows = [dict(r) for r in rows]
    rows[i]["knobs"] = dict(rows[i]["knobs"], EXTRA=1)
    s = SweepStore(tmp_path / "s.sqlite")
    s.put(key, "done", rows, worker="gpu0", env=env)
    with pytest.raises(ValueError, match="knobs .* are not what its candidate"):
        shards.pack(s, tmp_path / "a.parquet")
    assert not (tmp_path / "a.parquet").exists()


def test_a_shard_of_an_unknown_version_is_refused_by_name(tmp_path):
    import pyarrow.parquet as pq

    s, _ = a_store(tmp_path / "s.sqlite")
    shards.pack(s, tmp_path / "a.parquet")
    t = pq.read_table(tmp_path / "a.parquet")
    pq.write_table(t.replace_schema_metadata({**t.schema.metadata, b"version": b"3"}), tmp_path / "v3.parquet")
    with pytest.raises(ValueError, match=r"v3\.parquet is a shard of version 3; this version reads 1, 2"):
        shards.read(tmp_path / "v3.parquet")


def test_keys_store_holds_every_problem_direction_of_the_shards_and_no_row(tmp_path):
    s, _ = a_store(tmp_path / "s.sqlite")
    keys = sorted(s.keys())
    shards.pack(s, tmp_path / "a.parquet", keys[:10])
    shards.pack(s, tmp_path / "b.parquet", keys[6:])  # four in both: once
    n = shards.keys_store([tmp_path / "a.parquet", tmp_path / "b.parquet"], tmp_path / "k.sqlite")
    with SweepStore(tmp_path / "k.sqlite") as k:
        assert n == len(keys) - 1 and k.keys() == set(keys) - {"bad one"}  # bad one: left out by pack
        assert k.counts()["rows"] == 0 and {t.key: t.status for t in k.tasks()}["failed one"] == "failed"
    with pytest.raises(ValueError, match="exists: keys_store writes a new store"):
        shards.keys_store([tmp_path / "a.parquet"], tmp_path / "k.sqlite")
