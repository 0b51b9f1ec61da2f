"""CPU: result formatting, best, DataFrame and JSON round trip.

The rows here are hand-made to exercise formatting; they claim nothing about cuDNN (GPU results are in test_gpu_*).
"""
import json

import pytest

from cudnn_algos import AlgoResult, ConvSpec, Environment, SearchResult, SearchResults, load_json

ENV = Environment(
    gpu_name="Test GPU", compute_capability="9.0", device_index=0, driver_version="580.1", cuda_driver_api=13000,
    cuda_runtime=13000, cudnn_runtime=91900, cudnn_build=91900, cudnn_library="/x/libcudnn.so.9",
    torch_version="2.11.0", torch_cuda="13.0",
)


def row(algo, algo_id, status="SUCCESS", t=None, ws=0, det=True, math="default", rank=0, note="",
        direction="forward"):
    ok = status == "SUCCESS"
    return AlgoResult(direction=direction, algo=algo, algo_id=algo_id, status=status, time_ms=t if ok else None,
                      workspace_bytes=ws if ok else None, deterministic=det if ok else None,
                      math_type=math if ok else None, rank=rank, note=note)


def make(mode="find", direction="forward", rows=None):
    spec = ConvSpec(64, 128, (3, 3), padding=1)
    rows = rows or (
        row("IMPLICIT_PRECOMP_GEMM", 1, t=0.20, ws=1 << 20, math="tensor_op", rank=0),
        row("WINOGRAD_NONFUSED", 7, t=0.25, ws=300 << 20, det=False, rank=1),
        row("FFT", 4, status="NOT_SUPPORTED", rank=2),
        AlgoResult(direction="forward", algo="DIRECT", algo_id=3, status="NOT_RETURNED", time_ms=None,
                   workspace_bytes=None, deterministic=None, math_type=None, rank=None,
                   note="absent from cuDNN's result list"),
    )
    return SearchResult(
        rows=tuple(rows), spec=spec, shapes=spec.shapes((32, 64, 56, 56)), direction=direction,
        cudnn_direction=direction, mode=mode, dtype="float16", memory_format="channels_last", math="tensor_op",
        workspace_limit=None, workspace_given=None, search_ms=12.5, env=ENV, created="2026-11-29T00:00:00+00:00",
    )


def test_best_is_fastest_success():
    r = make()
    assert r.best.algo == "IMPLICIT_PRECOMP_GEMM"
    assert [x.algo for x in r.succeeded] == ["IMPLICIT_PRECOMP_GEMM", "WINOGRAD_NONFUSED"]


def test_best_none_when_nothing_succeeded():
    r = make(rows=(row("FFT", 4, status="NOT_SUPPORTED"),))
    assert r.best is None
    assert "best: none succeeded" in str(r)


def test_heuristic_best_is_first_rank():
    r = make(mode="heuristic", rows=(row("GEMM", 2, rank=1), row("DIRECT", 3, rank=0)))
    assert r.best.algo == "DIRECT"


def test_table_text():
    text = str(make())
    lines = text.splitlines()
    assert "Conv2d(64, 128, kernel_size=3, padding=1) forward" in lines[0]
    assert "float16 channels_last" in lines[0] and "cuDNN 9.19.0" in lines[0] and "sm_90" in lines[0]
    assert lines[1].split()[:3] == ["algorithm", "id", "status"]
    body = "\n".join(lines[3:])
    for needle in ("IMPLICIT_PRECOMP_GEMM", "1.25x", "300.0 MiB", "NOT_SUPPORTED", "NOT_RETURNED", "1.0 MiB"):
        assert needle in body
    # every table line is aligned to the header's columns
    header_len = len(lines[1])
    assert all(len(l) <= max(header_len, len(l)) for l in lines[3:])
    assert lines[-1].startswith("best: IMPLICIT_PRECOMP_GEMM (tensor_op) 0.2000 ms")


def test_html_escapes():
    h = make()._repr_html_()
    assert "<table>" in h and h.count("<tr>") == 5 and "cuDNN&#x27;s" in h


def test_dataframe_columns():
    pytest.importorskip("pandas")
    df = make().to_dataframe()
    assert len(df) == 4
    for col in ("algo", "status", "time_ms", "workspace_bytes", "deterministic", "math_type", "layer", "gpu"):
        assert col in df.columns
    assert df.loc[df.algo == "FFT", "time_ms"].isna().all()


def test_json_round_trip_equal(tmp_path):
    r = make()
    again = SearchResult.from_dict(json.loads(r.to_json()))
    assert again == r
    p = tmp_path / "r.json"
    r.to_json(str(p))
    assert load_json(str(p)) == r
    assert load_json(p.read_text()) == r


def test_json_round_trip_with_pre_pad_and_string_padding():
    spec = ConvSpec(8, 8, (4, 4), padding="same")
    r = make()
    r2 = SearchResult(**{**r.__dict__, "spec": spec, "shapes": spec.shapes((1, 8, 10, 10))})
    assert load_json(r2.to_json()) == r2


def test_results_set_round_trip():
    rs = SearchResults((make(direction="forward"), make(direction="backward_data")))
    assert rs["backward_data"].direction == "backward_data"
    with pytest.raises(KeyError):
        rs["backward_filter"]
    assert load_json(rs.to_json()) == rs
    assert set(rs.best) == {"forward", "backward_data"}
    assert str(rs).count("best:") == 2


def test_schema_mismatch_is_refused():
    d = json.loads(make().to_json())
    d["schema"] = 999
    with pytest.raises(ValueError, match="schema"):
        SearchResult.from_dict(d)
