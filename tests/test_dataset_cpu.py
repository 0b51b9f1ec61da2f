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
