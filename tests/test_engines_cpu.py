"""CPU: the engine search's bookkeeping with hand-made rows (no cuDNN, no GPU): which configurations torch's benchmark
mode would time or never consider, matching torch's kernels to configurations, marking torch's runs, best and
best-eligible, the table, argument errors. What cuDNN and torch actually do is checked on the GPU
(test_gpu_engines.py)."""
from __future__ import annotations

import pytest
import torch

from cudnn_algos import find_engines
from cudnn_algos.configs import torch_filter
from cudnn_algos.engines import legacy_family, mark_torch_run, match_kernels, torch_candidates


def test_torch_filter_follows_torchs_rules():
    assert torch_filter(("DOWN_CONVERT_INPUTS",), "float16", False, True) == "down-converts inputs"
    assert torch_filter(("NONDETERMINISTIC",), "float16", False, True) == ""
    assert torch_filter(("NONDETERMINISTIC",), "float16", True, True) == "nondeterministic"
    assert torch_filter(("TENSOR_CORE",), "float32", False, True) == ""
    assert torch_filter(("TENSOR_CORE",), "float32", False, False) == "tensor cores, allow_tf32 off"
    assert torch_filter(("TENSOR_CORE",), "float16", False, False) == ""


def test_legacy_family():
    assert legacy_family(("TENSOR_CORE",)) == "IMPLICIT_GEMM"
    assert legacy_family(("FFT",)) == "FFT"
    assert legacy_family(("WINOGRAD", "WINOGRAD_TILE_4x4")) == "WINOGRAD"


def test_torch_candidates_are_instant_then_fallback_filtered_and_limited(make):
    row = make.engine_row
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


def test_match_kernels_exact_partial_none(make):
    row = make.engine_row
    rows = [row(0, kernels=("k_a",)), row(1, kernels=("k_b", "reduce")), row(2, kernels=("k_b", "reduce")),
            row(3, kernels=())]
    assert match_kernels(("k_b", "reduce"), rows) == ("exact", (1, 2))
    assert match_kernels(("k_a", "Memset (Device)"), rows) == ("exact", (0,))  # fills do not count
    assert match_kernels(("k_a", "nchwToNhwc"), rows) == ("partial", (0,))
    assert match_kernels(("other",), rows) == ("none", ())
    assert match_kernels((), rows) == ("none", ())


def test_mark_torch_run_marks_rows_and_keeps_one_run_per_mode(make):
    r = make.engine_result(torch_runs=())
    on = make.torch_run(kernels=("sm90_xmma_a",), matches=())
    r = mark_torch_run(r, on)
    assert r.torch.matches == ("eng0",) and r.torch.match == "exact"
    assert [x.name for x in r.rows if x.torch_ran] == ["eng0"]
    off = make.torch_run("benchmark_off", kernels=("nothing_here",), matches=(), where="fresh process")
    r = mark_torch_run(r, off)
    assert [t.mode for t in r.torch_runs] == ["benchmark_on", "benchmark_off"]
    assert r.torch_run("benchmark_off").match == "none" and r.torch.mode == "benchmark_on"
    r = mark_torch_run(r, make.torch_run(kernels=("x",), matches=()))  # a new on-run replaces the old one
    assert len(r.torch_runs) == 2 and not any(x.torch_ran for x in r.rows)


def test_best_eligible_skips_what_torch_would_not_run_and_prefers_confirmed(make):
    from dataclasses import replace

    r = make.engine_result()
    assert r.best.name == "eng1"  # fastest overall, but it down-converts its inputs
    assert r.best_eligible.name == "eng2" and r.torch_candidates == 1
    rows = list(r.rows)
    rows[0] = replace(rows[0], measured=replace(rows[0].measured, confirmed=True))  # only eng0 was re-measured
    r2 = replace(r, rows=tuple(rows))
    assert r2.best_eligible.name == "eng0" and r2.best.name == "eng0"


def test_table_marks_torchs_choice_and_compares(make):
    text = str(make.engine_result())
    assert "RAN(on) #0" in text and "never (down-converts inputs)" in text
    assert "torch (benchmark on) ran eng0 (this process)" in text
    assert "torch's benchmark mode times 1 of these configurations" in text and "its limit: 10" in text
    assert "eng2: kernel 0.018 (0.857x torch's)" in text
    pd = pytest.importorskip("pandas")
    df = make.engine_result().to_dataframe()
    assert isinstance(df, pd.DataFrame) and list(df["candidate_kind"]) == ["engine"] * 4 + ["torch_on"]
    assert list(df["torch_ran"][:4]) == [["benchmark_on"], [], [], []]  # a list column
    assert {"kernel_median_ms", "host_median_ms", "kernels", "host_bound", "spec", "gpu"} <= set(df.columns)


@pytest.mark.parametrize("kwargs,match", [
    (dict(refine=2), "refine and screen need measure=True"),
    (dict(screen=3), "refine and screen need measure=True"),
    (dict(refine=-1, measure=True), "refine=-1 must be >= 0"),
    (dict(refine=1, refine_max=0, measure=True), "refine_max=0 must be >= 1"),
    (dict(screen=0, measure=True), "screen=0 must be >= 1"),
    (dict(compare_torch="yes"), "compare_torch='yes' must be a bool"),
    (dict(heuristics=("a", "c")), "heuristics='c' is not one of"),
    (dict(heuristics="a"), "must be a sequence of names"),
    (dict(direction="all"), "one direction at a time"),
    (dict(max_configs=0), "max_configs=0"),
    (dict(build_threads=0), "build_threads=0 must be >= 1"),
    (dict(build_threads=65), "build_threads=65 must be <= 64"),
    (dict(build_threads=2.0), "build_threads=2.0 must be an int"),
])
def test_find_engines_argument_errors_before_any_gpu_work(kwargs, match):
    with pytest.raises((ValueError, TypeError), match=match):
        find_engines(torch.nn.Conv2d(8, 8, 3, device="meta"), (2, 8, 8, 8), **kwargs)


def test_configuration_names_parse_back_to_engine_and_knobs():
    from cudnn_algos.configs import KNOBS, parse_config

    assert parse_config("eng62{TILE_SIZE=0,TILEK=1,WORKSPACE=2}") == (
        62, [(KNOBS.index("TILE_SIZE"), 0), (KNOBS.index("TILEK"), 1), (KNOBS.index("WORKSPACE"), 2)])
    assert parse_config("eng63") == (63, [])
    assert parse_config("eng7{KNOB_99=3}") == (7, [(99, 3)])
    for bad, match in (("engine62", "not an engine configuration name"), ("eng1{NOPE=1}", "knob 'NOPE'"),
                       ("eng1{TILEK=x}", "integer value")):
        with pytest.raises(ValueError, match=match):
            parse_config(bad)
    with pytest.raises(ValueError, match="configs: 'nope'"):
        find_engines(torch.nn.Conv2d(8, 8, 3, device="meta"), (2, 8, 8, 8), configs=["nope"])


def test_every_row_carries_the_command_that_measures_it_again(make):
    import shlex

    from cudnn_algos import cli

    recs = make.engine_result().to_records() + make.legacy_result().to_records()
    cmds = {}
    for r in recs:
        cmds.setdefault(r["candidate_kind"], r["repro"])
    assert cmds["engine"].startswith("cudnn-algos engines --conv 'Conv2d(8, 8, kernel_size=3, padding=1)' "
                                     "--input 2,8,8,8 --dtype float16 --channels-last --direction forward --measure")
    assert "--config eng0" in cmds["engine"] and "--torch-benchmark on" in cmds["torch_on"]
    assert cmds["legacy"].startswith("cudnn-algos find ") and "--math tensor_op" in cmds["legacy"]
    for cmd in cmds.values():  # every command parses, and its --conv builds the same layer
        argv = shlex.split(cmd)[1:]
        a = cli.build_parser().parse_args(argv)
        assert cli.parse_conv(a.conv).kernel_size == (3, 3) and tuple(map(int, a.input.split(","))) in (
            (2, 8, 8, 8), (32, 64, 56, 56))


def test_an_exhaustive_search_needs_no_heuristic_list():
    """CPU: find_engines's checks accept heuristics=() with exhaustive=True (every engine's knobs, no list), and
    refuse a search with nothing to enumerate."""
    from cudnn_algos.engines import validate_engines

    layer = torch.nn.Conv2d(8, 8, 3)
    try:
        validate_engines(layer, (2, 8, 8, 8), heuristics=(), exhaustive=True)
    except Exception as e:  # past the argument checks, only the missing GPU may stop it here
        assert type(e).__name__ == "CudaUnavailableError", e
    with pytest.raises(ValueError, match="nothing to search"):
        validate_engines(layer, (2, 8, 8, 8), heuristics=())


def test_plans_built_ahead_keep_what_the_lists_said_and_take_what_the_build_made(monkeypatch):
    """plans_ahead.Listed.build (Note [building ahead]): only the listed configurations not yet built go to the
    extension's build_listed, each once, with the build threads and the device; each such row keeps its sources and
    list positions and takes the build's status, stage, workspace and plan; rows the lists already ended (not
    supported, skipped) are untouched; the host ms add up; nothing to build asks nothing. The extension is a
    stand-in here (no GPU): its plan objects are mutable records, as the extension's are."""
    from types import SimpleNamespace

    from cudnn_algos import _ext, backend, plans_ahead

    def live(e, knobs, status, sources=("a",), ranks=(("a", 0),)):
        return SimpleNamespace(engine_id=e, knobs=list(knobs), numerical_notes=[], behavior_notes=[],
                               sources=list(sources), heuristic_ranks=list(ranks), status=status,
                               stage="" if status == "SUCCESS" else "plan", workspace_bytes=-1, plan_json="",
                               build_ms=None, operand_dims=[])

    lives = [live(62, ((1, 0),), "NOT_BUILT", ("a", "b"), (("a", 0), ("b", 1))), live(28, (), "NOT_SUPPORTED"),
             live(1, ((2, 4),), "NOT_BUILT", ("b",), (("b", 0),)), live(5, (), "SKIPPED_RUNTIME_COMPILATION")]
    asked = []

    def fake_build_listed(plans, threads, device):
        asked.append(([(p.engine_id, p.status) for p in plans], threads, device))
        plans[0].status, plans[0].stage, plans[0].workspace_bytes = "SUCCESS", "", 4096
        plans[1].status = "NOT_SUPPORTED"
        return 30.0

    monkeypatch.setattr(_ext, "load", lambda: SimpleNamespace(build_listed=fake_build_listed))
    listed_plans = tuple(backend.Plan.of(x) for x in lives)
    out = backend.EngineSearchOut(plans=listed_plans, engine_count=81, search_ms=12.0, heuristic_query_ms=(("b", 9.0),))
    built = plans_ahead.Listed(("k",), out, 1).build(3)
    assert asked == [([(62, "NOT_BUILT"), (1, "NOT_BUILT")], 3, 1)]
    p62, p28, p1, p5 = built.out.plans
    assert (p62.status, p62.stage, p62.workspace_bytes, p62.live, p62.sources, p62.heuristic_ranks) == (
        "SUCCESS", "", 4096, lives[0], ("a", "b"), (("a", 0), ("b", 1)))
    assert (p1.status, p1.sources) == ("NOT_SUPPORTED", ("b",)) and p28 == listed_plans[1] and p5 == listed_plans[3]
    assert built.key == ("k",) and built.out.search_ms == 42.0 and built.out.engine_count == 81
    assert built.out.heuristic_query_ms == (("b", 9.0),)
    asked.clear()
    nothing = plans_ahead.Listed(("k",), _with_plans(out, (p28, p5)), 0).build()
    assert asked == [] and nothing.out.plans == (p28, p5)


def _with_plans(out, plans):
    from dataclasses import replace

    return replace(out, plans=tuple(plans))


def test_the_refines_building_runs_outside_the_gpu_turn(make, monkeypatch):
    """sweep Note [sharing a GPU]: building is host work and runs outside a worker's GPU turn, the refine's building
    too: _refine leaves the held turn for its engine search and enters it again before measuring what it built.
    Stand-ins for the turn and for the extension's search (no GPU)."""
    from dataclasses import replace
    from types import SimpleNamespace

    from cudnn_algos import backend, engines
    from cudnn_algos.problem import make_problem
    from cudnn_algos.results import MeasureConfig

    events = []

    class Turn:
        def __enter__(self):
            events.append("enter")
            return self

        def __exit__(self, *exc):
            events.append("exit")

    def search(*a, **k):
        events.append("build")
        return backend.EngineSearchOut(plans=(), engine_count=0, search_ms=1.0)

    monkeypatch.setattr(backend, "engine_search", search)
    monkeypatch.setattr(backend, "conv_problem", lambda problem: None)
    monkeypatch.setattr(engines, "_measure", lambda result, *a: events.append("measure") or result)
    result = make.engine_result()  # rows with a stand-in plan: the refine reads the seeds' knobs from it
    result = replace(result, rows=tuple(replace(r, plan=SimpleNamespace(knobs=())) for r in result.rows))
    problem = make_problem(result.spec, (2, 8, 8, 8), torch.float16, torch.channels_last)
    out = engines._refine(result, problem, [], None, MeasureConfig(), 2, 8, True, 0, 1, Turn())
    assert events == ["exit", "build", "enter", "measure"] and out.refined == 0
    events.clear()
    engines._refine(result, problem, [], None, MeasureConfig(), 2, 8, True, 0, 1, None)
    assert events == ["build", "measure"]
