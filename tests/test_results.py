"""CPU: every result type's formatting, best, DataFrame and JSON round trip (legacy searches, engine searches,
torch's run, model reports), and the schema check. The results are hand-made (conftest's builders); they claim
nothing about cuDNN (GPU results are in test_gpu_*)."""
import json
from dataclasses import replace

import pytest

from cudnn_algos import EngineSearches, SearchResults, load_json
from cudnn_algos.results import SCHEMA_VERSION, fidelity_table, format_ms


def test_best_is_fastest_success(make):
    r = make.legacy_result()
    assert r.best.algo == "IMPLICIT_PRECOMP_GEMM"
    assert [x.algo for x in r.succeeded] == ["IMPLICIT_PRECOMP_GEMM", "WINOGRAD_NONFUSED"]


def test_best_none_when_nothing_succeeded(make):
    r = make.legacy_result(rows=(make.algo_row("FFT", 4, status="NOT_SUPPORTED"),))
    assert r.best is None and "best: none succeeded" in str(r)


def test_heuristic_best_is_first_rank(make):
    r = make.legacy_result(mode="heuristic", rows=(make.algo_row("GEMM", 2, rank=1), make.algo_row("DIRECT", 3, rank=0)))
    assert r.best.algo == "DIRECT"


def test_table_text(make):
    lines = str(make.legacy_result()).splitlines()
    h = next(i for i, ln in enumerate(lines) if ln.startswith("algorithm "))
    title = " ".join(ln.strip() for ln in lines[:h])  # wrapped to 120 columns
    assert "Conv2d(64, 128, kernel_size=3, padding=1) forward" in title
    assert "float16 channels_last" in title and "cuDNN 9.19.0" in title and "sm_90" in title
    assert lines[h].split()[:3] == ["algorithm", "id", "status"]
    body = "\n".join(lines[h + 2:])
    for needle in ("IMPLICIT_PRECOMP_GEMM", "1.25x", "300.0 MiB", "NOT_SUPPORTED", "NOT_RETURNED", "1.0 MiB"):
        assert needle in body
    assert lines[-1].startswith("best: IMPLICIT_PRECOMP_GEMM (tensor_op) 0.2 (cuDNN's reported time)")


def test_measured_legacy_table_says_host_bound(make):
    r = make.legacy_result()
    rows = list(r.rows)
    rows[0] = replace(rows[0], measured=make.measurement(0.010, host=0.080))
    text = str(replace(r, rows=tuple(rows)))
    assert "host-bound" in text and "0.01 " in text and "0.08 " in text


def test_format_ms_keeps_significant_figures():
    assert format_ms(0.0073123) == "0.007312" and format_ms(0.01712) == "0.01712" and format_ms(12.3456) == "12.35"
    assert format_ms(None) == "-"


def test_html_escapes(make):
    h = make.legacy_result()._repr_html_()
    assert "<table>" in h and h.count("<tr>") == 5 and "cuDNN&#x27;s" in h


def test_dataframe_columns(make):
    pytest.importorskip("pandas")
    df = make.legacy_result().to_dataframe()
    assert len(df) == 4
    for col in ("algo", "status", "workspace_bytes", "deterministic", "math_type", "spec", "gpu", "candidate"):
        assert col in df.columns
    assert df.loc[df.algo == "FFT", "kernel_median_ms"].isna().all()


def test_every_result_type_has_one_long_form_table(make):
    """Results of any kind, from any run, concatenate: one row per (problem, direction, candidate), the same
    columns, raw samples and the environment included."""
    pd = pytest.importorskip("pandas")
    from cudnn_algos.results import LONG_FORM_COLUMNS

    legacy = make.legacy_result()
    legacy = replace(legacy, rows=(replace(legacy.rows[0], measured=make.measurement(0.1)),) + legacy.rows[1:])
    frames = [legacy.to_dataframe(), make.engine_result().to_dataframe(), make.model_report().to_dataframe(),
              SearchResults((legacy,)).to_dataframe(), EngineSearches((make.engine_result(),)).to_dataframe()]
    for df in frames:
        assert tuple(df.columns) == LONG_FORM_COLUMNS
    both = pd.concat(frames, ignore_index=True)
    assert set(both.candidate_kind) == {"legacy", "engine", "torch_on", "torch_off"}
    assert set(both.gpu) == {"Test GPU"} and "cudnn" in both and "package_version" in both
    r = make.model_report().to_dataframe()
    assert {tuple(v) for v in r.layers} == {("a",), ("b.0", "b.1")} and set(r.uses) == {1, 2}
    assert set(r.model) == {"Net"}
    one = frames[0].iloc[0]
    assert one.candidate == "IMPLICIT_PRECOMP_GEMM/tensor_op" and one.kernel_median_ms == 0.1


def test_the_long_form_table_is_tidy(make):
    """CPU: one value per cell (lists as list columns, knobs as a dict), integers that may be missing as Int64,
    flags as nullable booleans, the environment as categories and in attrs, text missing as None (never ""); the
    CSV writes lists as space-separated values."""
    pd = pytest.importorskip("pandas")
    from cudnn_algos.results.tables import BOOL_COLUMNS, INT_COLUMNS, LIST_COLUMNS, csv_text

    frames = [make.model_report().to_dataframe(), make.legacy_result().to_dataframe()]
    df = pd.concat(frames, ignore_index=True)
    for f in frames:
        for c in INT_COLUMNS:
            assert str(f[c].dtype) == "Int64", c
        for c in BOOL_COLUMNS:
            assert str(f[c].dtype) == "boolean", c
        for c in LIST_COLUMNS:
            assert all(isinstance(v, list) for v in f[c]), c
        assert str(f.workspace_bytes.dtype) == "Int64" and str(f.gpu.dtype) == "category"
        assert f.attrs["environments"] == [{"gpu": "Test GPU", "compute_capability": "9.0", "driver": "580.1",
                                            "cuda_runtime": 13000, "cudnn": "9.19.0", "torch": "2.11.0",
                                            "package_version": None, "host": None, "git_commit": None}]
        text = f.select_dtypes(include="object")
        assert not any((v == "") for c in text for v in text[c] if isinstance(v, str)), "missing text is None"
    eng = df[df.candidate_kind == "engine"]
    assert all(isinstance(k, dict) for k in eng.knobs) and df[df.candidate_kind == "legacy"].knobs.isna().all()
    measured = df[df.kernel_median_ms.notna()]
    assert len(measured) and all(len(v) > 0 for v in measured.kernel_samples_ms)
    assert all(isinstance(x, float) for v in measured.kernel_samples_ms for x in v)
    csv = pd.read_csv(__import__("io").StringIO(csv_text(frames[0])))
    assert len(csv) == len(frames[0]) and csv.kernel_samples_ms.dropna().str.contains(" ").any() or \
        csv.kernel_samples_ms.dropna().map(float).notna().all()


@pytest.mark.parametrize("which", ["legacy", "legacy_measured", "legacy_set", "engine", "engine_set", "report",
                                   "report_no_e2e"])
def test_every_result_type_round_trips(make, which, tmp_path):
    legacy = make.legacy_result()
    measured = replace(legacy, rows=(replace(legacy.rows[0], measured=make.measurement(0.1, ref=0.099)),)
                       + legacy.rows[1:])
    obj = {"legacy": legacy, "legacy_measured": measured,
           "legacy_set": SearchResults((legacy, make.legacy_result(direction="backward_data"))),
           "engine": make.engine_result(),
           "engine_set": EngineSearches((make.engine_result(), make.engine_result("backward_filter"))),
           "report": make.model_report(), "report_no_e2e": make.model_report(e2e=False)}[which]
    text = obj.to_json()
    d = json.loads(text)
    assert d["schema"] == SCHEMA_VERSION and d["kind"] == type(obj).KIND
    assert load_json(text) == obj
    p = tmp_path / "r.json"
    obj.to_json(str(p))
    assert load_json(str(p)) == obj


def test_round_trip_with_pre_pad_and_string_padding(make):
    from cudnn_algos import ConvSpec

    spec = ConvSpec(8, 8, (4, 4), padding="same")
    r = replace(make.legacy_result(), spec=spec, shapes=spec.shapes((1, 8, 10, 10)))
    assert r.shapes.has_pre_pad and load_json(r.to_json()) == r


def test_engine_plans_are_not_saved(make):
    r = make.engine_result()
    r = replace(r, rows=(replace(r.rows[0], plan=object()),) + r.rows[1:])
    d = json.loads(r.to_json())
    assert "plan" not in d["rows"][0]
    assert load_json(r.to_json()).rows[0].plan is None


def test_results_set_lookup(make):
    rs = SearchResults((make.legacy_result(direction="forward"), make.legacy_result(direction="backward_data")))
    assert rs["backward_data"].direction == "backward_data"
    with pytest.raises(KeyError):
        rs["backward_filter"]
    assert set(rs.best) == {"forward", "backward_data"} and str(rs).count("best:") == 2


@pytest.mark.parametrize("edit", [{"schema": 2}, {"schema": 999}, {"kind": "mystery"}, {"kind": None}])
def test_another_schema_is_refused_with_a_clear_message(make, edit):
    d = json.loads(make.legacy_result().to_json())
    d.update(edit)
    with pytest.raises(ValueError, match="schema .* re-run"):
        load_json(json.dumps(d))


def test_old_report_fixture_is_refused_clearly():
    from pathlib import Path

    old = Path(__file__).parent / "fixtures" / "profile_resnet50_fp16_legacy_v1.json"
    if not old.exists():
        pytest.skip("no old fixture")
    with pytest.raises(ValueError, match="schema 1"):
        load_json(str(old))


def test_fidelity_table_by_size_and_kind(make):
    rows = (make.engine_row(0, ms=0.0050, ref=0.0049), make.engine_row(1, ms=0.0150, ref=0.0100),  # 50% off
            make.engine_row(2, ms=0.030, ref=0.0301), make.engine_row(3, ms=0.20, ref=0.199))
    tr = make.torch_run()
    tr = replace(tr, measured=replace(tr.measured, reference_kernel_ms=0.0212))
    r = make.engine_result(rows=rows, torch_runs=(tr,))
    text = "\n".join(fidelity_table([r]))
    assert "5 rows" in text
    lines = {l.split()[0] + (l.split()[1] if l.startswith(("<", ">=")) else ""): l for l in text.splitlines() if l.startswith(("<", "10", "20", ">="))}
    assert "100.0% of    1" in lines["<10"]  # the 5 us engine row
    assert "0.0% of    1" in lines["10-20"]  # 15 vs 10 us: outside 5%
    assert "80.0% within 5%" in text and "worst: engine eng1" in text


def test_fidelity_rows_whose_reference_exceeds_the_uninstrumented_events_clock_are_counted_apart(make):
    """A reference above the events clock of the same calls (no CUPTI client) cannot be a union of those calls'
    kernels: the row is shown apart, and the share over every row is printed beside."""
    ok = make.engine_row(0, ms=0.100, ref=0.101)
    traced = make.engine_row(1, ms=2.0, ref=3.0)  # events (throughput) 2.0: the reference reads 1.5x the window
    traced = replace(traced, measured=replace(traced.measured, activities_per_call=432.0))
    text = "\n".join(fidelity_table([make.engine_result(rows=(ok, traced))]))
    assert "1 rows (1 more apart, below)" in text
    assert "100.0% within 5%" in text
    assert "apart: 1 rows whose reference read above the events clock" in text and "reference/events 1.50" in text
    assert "432 GPU activities per call" in text and "50.0% of 2 rows agree" in text


def test_compare_flags_only_changes_beyond_both_spreads_and_the_floor(make):
    pytest.importorskip("pandas")
    from cudnn_algos import compare

    a = make.engine_result()

    def scaled(r, f):
        rows = tuple(replace(x, measured=replace(x.measured, kernel_ms=replace(
            x.measured.kernel_ms, median=x.measured.kernel_ms.median * f))) if x.measured and x.measured.kernel_ms
            else x for x in r.rows)
        return replace(r, rows=rows)

    assert not compare(a, scaled(a, 1.02)).table.beyond_spread.any()  # 2%: under the 3% floor
    assert compare(a, scaled(a, 1.02), floor=0.0).table.beyond_spread.any()  # spread alone (1%) would flag it
    c = compare(a, scaled(a, 1.10))
    t = c.table
    assert t[t.candidate_kind == "engine"].beyond_spread.all() and not t[t.candidate_kind != "engine"].beyond_spread.any()
    assert "beyond both runs' spread and 3%" in " ".join(str(c).split())  # (wrapped to 120 columns)
    with pytest.raises(ValueError, match="floor"):
        compare(a, a, floor=1.5)


def _table_lines(text: str) -> list[str]:
    """Every line but a legend line that is one unbroken name ("[3] eng62{...}"): those may be wider, whole."""
    return [ln for ln in text.splitlines() if not (ln.startswith("[") and " " not in ln.split(" ", 1)[1])]


@pytest.mark.parametrize("fixture", ["profile_r3d_18_fp32_b1_engines.json.gz",
                                     "profile_resnet50_fp16-nhwc_b32_fwd_bwd-data_legacy_engines.json.gz"])
def test_every_search_of_a_saved_profile_prints_within_120_columns(fixture):
    """CPU, on H200 profiles: engine and measured legacy tables fit 120 columns, keep every row, print each long
    configuration name whole (pasteable into --config) in the legend, and list rows fastest first."""
    from pathlib import Path

    report = load_json(str(Path(__file__).parent / "fixtures" / fixture))
    searches = [r for p in report.problems for r in (*p.engines.values(), *(p.legacy or {}).values())]
    assert any(type(r).__name__ == "SearchResult" for r in searches) or "legacy" not in fixture
    for r in searches:
        text = str(r)
        assert max(map(len, _table_lines(text))) <= 120, text
        for row in r.rows:
            name = getattr(row, "algo", None) or row.name
            assert name in text, (name, text)  # every row is printed; a long name whole, in the legend
        timed = [row for row in r.rows if row.ok and row.kernel_ms is not None]
        if timed:  # the first data row (two lines after the header) is the fastest
            body = text.splitlines()
            fastest = min(timed, key=lambda x: x.kernel_ms)
            header = next(i for i, ln in enumerate(body) if ln.startswith(("config ", "algorithm ")))
            label = fastest.algo if hasattr(fastest, "algo") else f"eng{fastest.engine_id}"
            assert body[header + 2].startswith(label), (body[header + 2], fastest)


def test_engine_table_is_in_kernel_time_order_with_failures_last(make):
    rows = (make.engine_row(3, [("fallback", 0)], status="NOT_SUPPORTED"),
            make.engine_row(7, [("heuristic_a", 0)], ms=0.030),
            make.engine_row(5, [("heuristic_a", 1)], ms=0.010,
                            name="eng5{TILE_SIZE=12,TILEK=2,STAGES=3,IDX_MODE=1,LDGC=2,SPECFILT=0,SPLIT_K=4}"))
    text = str(make.engine_result(rows=rows))
    lines = text.splitlines()
    header = next(i for i, ln in enumerate(lines) if ln.startswith("config "))
    assert [ln.split()[0] for ln in lines[header + 2:header + 5]] == ["eng5[1]", "eng7", "eng3"]
    assert "[1] eng5{TILE_SIZE=12,TILEK=2,STAGES=3,IDX_MODE=1,LDGC=2,SPECFILT=0,SPLIT_K=4}" in lines
    assert max(map(len, lines)) <= 120
    df = make.engine_result(rows=rows).to_dataframe()  # the full names stay in the data
    assert "eng5{TILE_SIZE=12,TILEK=2,STAGES=3,IDX_MODE=1,LDGC=2,SPECFILT=0,SPLIT_K=4}" in set(df["candidate"])


def test_a_row_whose_output_is_wrong_is_shown_and_never_the_best(make):
    """Note [a wrong output]: a row farther than WRONG_REL_ERR from float64 (or not finite) keeps its time and shows
    its error, but is never best or best_eligible; a dataset row likewise has no time for the regret report and
    training (dataset.regret.timed_ms)."""
    from cudnn_algos.dataset.regret import timed_ms
    from cudnn_algos.results import NON_FINITE, WRONG_REL_ERR, wrong_output

    fast = make.engine_row(5, [("heuristic_b", 0)], ms=0.001, name="eng71{SPLIT_K_SLC=1,KERNEL_CFG=28}")
    fast = replace(fast, measured=replace(fast.measured, rel_err=1.4))
    r = make.engine_result(rows=make.engine_result().rows + (fast,))
    assert fast.wrong and fast.kernel_ms == 0.001 and fast.right_ms is None
    assert r.best.name == "eng1" and r.best_eligible.name == "eng2"  # (eng1, 0.015 ms, is torch-filtered)
    assert "WRONG OUTPUT: 1.4 from float64" in "\n".join(r.text_table())
    assert [wrong_output(e) for e in (0.0, WRONG_REL_ERR, 0.11, float("inf"), None, float("nan"))] == [
        False, False, True, True, False, False]
    assert wrong_output(None, NON_FINITE) and wrong_output(float("nan"), NON_FINITE)
    row = {"status": "SUCCESS", "kernel_median_ms": 0.5, "rel_err": 2e-3, "measure_error": None}
    assert timed_ms(row) == 0.5
    assert timed_ms({**row, "rel_err": 1.4}) is None
    assert timed_ms({**row, "rel_err": float("nan"), "measure_error": NON_FINITE}) is None
    legacy = make.legacy_result()
    bad = replace(legacy.rows[0], measured=make.measurement(0.1))
    bad = replace(bad, measured=replace(bad.measured, rel_err=0.9))
    assert replace(legacy, rows=(bad,) + legacy.rows[1:]).best.algo == "WINOGRAD_NONFUSED"
