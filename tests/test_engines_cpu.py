"""CPU: the engine search's bookkeeping with hand-made rows (no cuDNN, no GPU): which configurations torch's benchmark
mode would time or never consider, matching torch's kernels to configurations, the table and JSON, and the
ResNet-50 benchmark's engine tables and sums. What cuDNN and torch actually do is checked on the GPU
(test_gpu_engines.py)."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from cudnn_algos import ConvSpec
from cudnn_algos.engines import (EngineRow, EngineSearchResult, TorchRun, match_kernels, torch_candidates,
                                 torch_filter)
from cudnn_algos.measure import Measurement, Stats
from cudnn_algos.profile import EndToEnd

from test_results import ENV


def row(eid, ranks=(), status="SUCCESS", notes=(), kernels=(), ms=None, name=None, **kw):
    m = None
    if ms is not None:
        st = Stats(median=ms, min=ms, max=ms, spread=0.0, n=3)
        m = Measurement(kernel_ms=st, kernel_clock="graph", throughput_ms=st, host_ms=st, cupti_kernel_ms=None,
                        calls_per_sample=4, rel_err=1e-4)
    return EngineRow(direction="forward", engine_id=eid, knobs=(), name=name or f"eng{eid}", numerical_notes=notes,
                     behavior_notes=(), family="IMPLICIT_GEMM", deterministic=True, status=status,
                     stage="" if status == "SUCCESS" else "plan", workspace_bytes=0, sources=("heuristic_a",),
                     heuristic_ranks=tuple(ranks), measured=m, kernels=tuple(kernels), **kw)


def test_torch_filter_follows_torchs_rules():
    assert torch_filter(("DOWN_CONVERT_INPUTS",), "float16", False, True) == "down-converts inputs"
    assert torch_filter(("NONDETERMINISTIC",), "float16", False, True) == ""
    assert torch_filter(("NONDETERMINISTIC",), "float16", True, True) == "nondeterministic"
    assert torch_filter(("TENSOR_CORE",), "float32", False, True) == ""
    assert torch_filter(("TENSOR_CORE",), "float32", False, False) == "tensor cores, allow_tf32 off"
    assert torch_filter(("TENSOR_CORE",), "float16", False, False) == ""


def test_torch_candidates_are_instant_then_fallback_filtered_and_limited():
    rows = [
        row(0, [("heuristic_instant", 2)]),
        row(1, [("heuristic_instant", 0)], torch_filter="down-converts inputs"),
        row(2, [("heuristic_instant", 1)], status="NOT_SUPPORTED"),
        row(3, [("fallback", 0), ("heuristic_instant", 3)]),  # in both lists: its instant rank counts
        row(4, [("fallback", 1)]),
        row(5, [("heuristic_a", 0)]),  # only in list A: torch never sees it
        row(6, [("fallback", 2)], status="SKIPPED_RUNTIME_COMPILATION"),  # torch would build it
    ]
    assert torch_candidates(rows, 0) == {0: 0, 3: 1, 4: 2, 6: 3}
    assert torch_candidates(rows, 2) == {0: 0, 3: 1}


def test_match_kernels_exact_partial_none():
    rows = [row(0, kernels=("k_a",)), row(1, kernels=("k_b", "reduce")), row(2, kernels=("k_b", "reduce")),
            row(3, kernels=())]
    assert match_kernels(("k_b", "reduce"), rows) == ("exact", (1, 2))
    # torch also ran a fill: copies and fills do not count
    assert match_kernels(("k_a", "Memset (Device)"), rows) == ("exact", (0,))
    assert match_kernels(("k_a", "nchwToNhwc"), rows) == ("partial", (0,))
    assert match_kernels(("other",), rows) == ("none", ())
    assert match_kernels((), rows) == ("none", ())


def _result(**kw):
    rows = (row(0, [("heuristic_instant", 0)], ms=0.020, torch_rank=0, torch_ran=("benchmark_on",),
                kernels=("sm90_xmma_a",)),
            row(1, [("heuristic_a", 3)], ms=0.015, notes=("DOWN_CONVERT_INPUTS",), torch_filter="down-converts inputs"),
            row(2, [("heuristic_b", 1)], ms=0.018),
            row(3, [("fallback", 0)], status="NOT_SUPPORTED"))
    spec = ConvSpec.from_module(__import__("torch").nn.Conv2d(8, 8, 3, padding=1, device="meta"))
    st = Stats(median=0.021, min=0.02, max=0.022, spread=0.01, n=3)
    tr = TorchRun(mode="benchmark_on", kernels=("sm90_xmma_a",), matches=("eng0",), match="exact", first_call_ms=50.0,
                  benchmark_limit=10, measured=Measurement(kernel_ms=st, kernel_clock="graph", throughput_ms=st,
                                                           host_ms=st, cupti_kernel_ms=0.02, calls_per_sample=4))
    return EngineSearchResult(rows=rows, spec=spec, shapes=spec.shapes((2, 8, 8, 8)), direction="forward",
                              cudnn_direction="forward", dtype="float16", memory_format="channels_last",
                              engine_count=60, search_ms=12.0, exhaustive=False, env=ENV, torch=tr, **kw)


def test_best_eligible_skips_what_torch_would_not_run():
    r = _result()
    assert r.best.name == "eng1"  # fastest overall, but it down-converts its inputs
    assert r.best_eligible.name == "eng2"
    assert r.torch_candidates == 1


def test_table_marks_torchs_choice_and_compares():
    text = str(_result())
    assert "RAN(on) #0" in text and "never (down-converts inputs)" in text
    assert "torch (benchmark on) ran eng0" in text
    assert "torch's benchmark mode times 1 of these configurations" in text and "its limit: 10" in text
    assert "eng2: kernel 0.0180 ms (0.857x torch's)" in text
    d = json.loads(_result().to_json())
    assert d["torch"]["matches"] == ["eng0"] and d["rows"][0]["torch_ran"] == ["benchmark_on"]
    df = pytest.importorskip("pandas") and _result().to_dataframe()
    assert list(df["torch_ran"]) == ["benchmark_on", "", "", ""]


def test_end_to_end_sentence_without_a_comparison():
    e = EndToEnd(backward=False, iterations=5, step_ms_off=3.0, step_ms_on=None, where="this process",
                 note="the model could not be saved for a fresh process (PicklingError)")
    assert e.step_change_pct is None and "not compared" in e.sentence() and "PicklingError" in e.sentence()
    e = EndToEnd(backward=True, iterations=5, step_ms_off=10.0, step_ms_on=9.0, first_step_s_off=1.0,
                 first_step_s_on=2.0)
    assert e.step_change_pct == pytest.approx(-10.0) and "pays for itself after 1,000 steps" in e.sentence()


def _bench():
    path = Path(__file__).resolve().parent.parent / "benchmarks" / "resnet50.py"
    spec = importlib.util.spec_from_file_location("bench_resnet50", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _entry(layer, d, count, eng, on, **kw):
    e = {"config": "fp16-nhwc", "layer": layer, "direction": d, "count": count, "engine_configs": 50,
         "engine_built": 40, "engine_count": 80, "engine_search_ms": 100.0, "torch_candidates": 10,
         "torch_benchmark_limit": 10, "torch_match": "exact", "torch_config": ["eng9"], "best_engine": "eng9",
         "best_engine_torch_rank": 0, "best_is_torch_choice": True, "engine_kernel": eng, "torch_on_kernel2": on,
         "engine_host": 0.01, "torch_on_host2": 0.03, "ours_host": 0.1, "torch_on_search_ms": 40.0}
    e.update(kw)
    e["engine_vs_on"] = eng / on
    return e


def test_benchmark_engine_sums_and_reasons():
    b = _bench()
    rows = [_entry("a", "forward", 3, 0.9, 1.0, best_is_torch_choice=False, best_engine="eng1",
                   best_engine_torch_rank=None),
            _entry("b", "forward", 1, 1.0, 1.0),
            _entry("b", "backward_data", 1, 2.0, 1.0, torch_match="none", torch_config=[], best_is_torch_choice=False)]
    for e in rows:
        e["why"] = b.why(e)
    assert rows[0]["why"] == "" and rows[1]["why"] == "same kernels as torch's choice"
    assert rows[2]["why"] == "torch's choice not among the searched configurations"
    sums = b.engine_sums("fp16-nhwc", rows)
    # forward: (0.9*3 + 1.0) / (1.0*3 + 1.0) = 3.7 / 4
    assert any(s.startswith("Σ engines fp16-nhwc forward:") and "ratio 0.925" in s for s in sums)
    assert any(s.startswith("Σ engines fp16-nhwc all:") and "ratio 1.140" in s for s in sums)  # 5.7 / 5
    table = b.engine_table("fp16-nhwc", rows)
    assert "| a | forward | 50 / 40 (80) | 10 | eng9 | eng1 (-) |" in table and "not found [none]" in table
    res = {"configs": ["fp16-nhwc"], "runs": [{"rows": rows, "fidelity": [], "search_costs": []}],
           "default_measure_cost": [], "repeats": 7}
    text = b.summary(res)
    assert "1 not found" in text and "outside torch's timed list in 1" in text and "engine path 0.0100" in text


@pytest.mark.parametrize("kwargs,match", [
    (dict(refine=2), "refine=2 needs measure=True"),
    (dict(refine=-1, measure=True), "refine=-1 must be an int >= 0"),
    (dict(refine=1, refine_max=0, measure=True), "refine_max=0 must be an int >= 1"),
    (dict(compare_torch="yes"), "compare_torch='yes' must be a bool"),
    (dict(heuristics=("a", "c")), "heuristics='c' is not one of"),
    (dict(direction="all"), "one direction at a time"),
])
def test_find_engines_argument_errors_before_any_gpu_work(kwargs, match):
    import torch

    from cudnn_algos import find_engines

    with pytest.raises((ValueError, TypeError), match=match):
        find_engines(torch.nn.Conv2d(8, 8, 3, device="meta"), (2, 8, 8, 8), **kwargs)


def test_ranked_orders_built_rows_and_ranks_the_measured():
    from cudnn_algos.engines import _ranked

    rows = [row(0, ms=0.3), row(1, status="NOT_SUPPORTED"), row(2), row(3, ms=0.1)]
    out = _ranked(rows)
    assert [r.engine_id for r in out] == [3, 0, 2, 1]
    assert [r.measured.measured_rank for r in out[:2]] == [0, 1] and out[2].measured is None
