"""CPU: the dataset's validation (cudnn_algos.dataset) rejects bad rows before anything is written, and the Parquet
it writes reads back with pandas, partitioned by environment. Rows are the test builders' long-form records (real
GPU rows come from a sweep on the device)."""
import pytest

from cudnn_algos.dataset import measured_problems, problem_errors, validate, write_parquet
from cudnn_algos.sweep import SweepStore


def _store(tmp_path, make):
    s = SweepStore(tmp_path / "s.sqlite")
    good = make.engine_result().to_records()
    s.put("good", "done", good, env="H200|cudnn 9.19")
    nan_free_bad = [dict(r, kernel_median_ms=-1.0) if i == 0 else r for i, r in enumerate(good)]
    s.put("negative", "done", nan_free_bad, env="H200|cudnn 9.19")
    s.put("no best", "done", [dict(r, status="NOT_SUPPORTED") for r in good], env="H200|cudnn 9.19")
    s.put("no status", "done", [dict(good[0], status=None)] + good[1:], env="H200|cudnn 9.19")
    s.put("failed", "failed", reason="CudnnError: CUDNN_STATUS_NOT_SUPPORTED", env="H200|cudnn 9.19")
    return s, good


def test_validation_keeps_whole_problems_and_names_why_the_others_are_left_out(tmp_path, make):
    s, good = _store(tmp_path, make)
    v = validate(s)
    assert v.kept == ("good",) and v.rows == len(good)
    assert "kernel_median_ms=-1.0" in v.rejected["negative"]
    assert "no best" in v.rejected["no best"]
    assert "has no status" in v.rejected["no status"]
    assert v.rejected["failed"].startswith("the sweep failed it: CudnnError")
    assert problem_errors([]) == ["no rows"]
    assert problem_errors([{"status": "SUCCESS", "kernel_median_ms": float("inf")}])[0].endswith("=inf")
    fast = {"status": "SUCCESS", "candidate": "eng1", "kernel_median_ms": 0.01, "kernel_calls": 4}
    estimate = {"status": "SUCCESS", "candidate": "eng0", "kernel_median_ms": 8.7, "kernel_calls": 0, "pruned": True}
    assert problem_errors([fast]) == [] and problem_errors([fast, dict(estimate, kernel_median_ms=None)]) == []
    assert problem_errors([fast, estimate]) == ["row 1 (eng0) has a kernel time from no kernel-clock call "
                                                "(kernel_calls 0)"]  # measure's Note [a first call is no time]


def test_measured_problems_read_once_are_what_the_validation_keeps(tmp_path, make):
    from cudnn_algos.sweep.tasks import repeat_key

    s, good = _store(tmp_path, make)
    s.put("good2", "done", [dict(r, kernel_median_ms=2.0) for r in good], env="H200|cudnn 9.19")
    s.put(repeat_key("good"), "done", good, env="H200|cudnn 9.19")  # the noise floor's second measurement: not kept
    alone = list(measured_problems(s))  # validated as it reads
    assert [k for k, _ in alone] == ["good", "good2"] and alone == list(measured_problems(s, validate(s)))
    assert alone[1][1] == [dict(r, kernel_median_ms=2.0) for r in good]


def test_parquet_round_trip_partitioned_by_environment(tmp_path, make):
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    s, good = _store(tmp_path, make)
    v = write_parquet(s, tmp_path / "ds")
    df = pd.read_parquet(tmp_path / "ds")
    assert len(df) == v.rows == len(good) and set(df.task) == {"good"}
    parts = [p.name for p in (tmp_path / "ds").iterdir()]
    assert len(parts) == 1 and parts[0].startswith("env_key=") and set(df.env_key.astype(str)) == {"H200|cudnn 9.19"}
    assert df.kernel_median_ms.dropna().ge(0).all() and list(df.kernel_samples_ms.dropna().iloc[0]) != []
    empty = SweepStore(tmp_path / "e.sqlite")
    with pytest.raises(ValueError, match="nothing to write"):
        write_parquet(empty, tmp_path / "none")


def test_cli_dataset(tmp_path, make):
    from conftest import run_cli

    s, _ = _store(tmp_path, make)
    s.close()
    r = run_cli("dataset", "validate", tmp_path / "s.sqlite")
    assert r.returncode == 0 and "1 problem-directions kept" in r.stdout and "4 left out" in r.stdout, r.stderr
    for args, says in ((("write", tmp_path / "s.sqlite"), "needs --out DIR"),
                       (("validate", tmp_path / "nope.sqlite"), "no such file"),
                       (("write", tmp_path / "s.sqlite", "--out", tmp_path / "s.sqlite"), "--out")):
        r = run_cli("dataset", *args)
        assert r.returncode == 2 and says in r.stderr and "Traceback" not in r.stderr, (args, r.stderr)
    pytest.importorskip("pyarrow")
    r = run_cli("dataset", "write", tmp_path / "s.sqlite", "--out", tmp_path / "ds")
    assert r.returncode == 0 and "wrote" in r.stdout and (tmp_path / "ds").is_dir(), r.stderr


def _rows(times, on=None, filtered=()):
    """A hand-made problem-direction: engine configurations (legacy ones named ALGO_*) with these kernel times,
    torch's benchmark-mode candidate at `on`, and `filtered` configurations torch would not accept."""
    rows = [{"candidate_kind": "legacy" if n.startswith("ALGO") else "engine", "candidate": n, "stage": "find",
             "status": "SUCCESS", "kernel_median_ms": t, "torch_filter": "rejected" if n in filtered else None}
            for n, t in times.items()]
    if on is not None:
        rows.append({"candidate_kind": "torch_on", "candidate": "torch benchmark_on", "status": "SUCCESS",
                     "kernel_median_ms": on})
    return rows


def test_compare_counts_the_noise_and_the_regret_of_one_runs_bests_in_the_other(tmp_path):
    """dataset.compare on a hand-made pair: torch's own candidate is no configuration (not compared, never the
    best), a configuration torch rejects is compared but never the best, and each run's best is priced in the
    other's times."""
    from cudnn_algos.dataset import compare

    a, b = SweepStore(tmp_path / "a.sqlite"), SweepStore(tmp_path / "b.sqlite")
    a.put("p1", "done", _rows({"e1": 1.0, "e2": 1.1, "ALGO_1": 1.2, "e0": 0.9}, on=0.5, filtered={"e0"}), env="X")
    b.put("p1", "done", _rows({"e1": 1.05, "e2": 1.0, "ALGO_1": 1.2, "e0": 0.9}, on=2.0, filtered={"e0"}), env="Y")
    a.put("p2", "done", _rows({"e1": 2.0, "e2": 3.0}), env="X")
    b.put("p2", "done", _rows({"e1": 2.0, "e2": 3.3}), env="Y")
    a.put("p3", "done", _rows({"e1": 1.0}), env="X")  # only in the first
    c = compare(a, b, ("A", "B"))
    assert (c.only_first, c.only_second, c.first_envs, c.second_envs) == (1, 0, ("X",), ("Y",))
    f = c.floor
    assert (f.pairs, f.configs, f.same_best) == (2, 6, 1)  # p1's bests differ (e1 in A, e2 in B)
    assert f.p95_abs_change == pytest.approx(0.1) and f.best_within == pytest.approx(0.0)
    assert (c.there.n, c.there.over_top1) == (2, 1)
    assert c.there.mean == pytest.approx(0.025) and c.there.worst == pytest.approx(0.05)  # e1 in B: 1.05 / 1.0
    assert c.back.mean == pytest.approx(0.05) and c.back.worst == pytest.approx(0.1)  # e2 in A: 1.1 / 1.0
    text = str(c)
    assert "2 problem-directions in both (1 only in the first, 0 only in the second)" in text
    assert "the first's fastest run in the second, regret: mean 2.50%" in text


def test_cli_dataset_compare(tmp_path):
    from conftest import run_cli

    for name, t in (("a", 1.0), ("b", 1.2)):
        with SweepStore(tmp_path / f"{name}.sqlite") as s:
            s.put("p", "done", _rows({"e1": t, "e2": 1.1}), env="H200")
    r = run_cli("dataset", "compare", tmp_path / "a.sqlite", "--from", tmp_path / "b.sqlite")
    assert r.returncode == 0, r.stderr
    assert "1 problem-directions in both" in r.stdout and "same fastest configuration in 0 of 1" in r.stdout
    assert "in the second, regret: mean 9.09%" in r.stdout  # a's best e1 in b: 1.2 / 1.1
    assert "in the first, regret: mean 10.00%" in r.stdout  # b's best e2 in a: 1.1 / 1.0
    r = run_cli("dataset", "compare", tmp_path / "a.sqlite")
    assert r.returncode == 2 and "needs one --from OTHER" in r.stderr
    with SweepStore(tmp_path / "c.sqlite") as s:
        s.put("q", "done", _rows({"e1": 1.0}), env="H200")
    r = run_cli("dataset", "compare", tmp_path / "a.sqlite", "--from", tmp_path / "c.sqlite")
    assert r.returncode == 2 and "no whole problem-direction in common" in r.stderr
