"""CPU: the dataset report's arithmetic (cudnn_algos.dataset.regret) on hand-made long-form rows whose answers are known:
each method's pick (the first configuration of a heuristic list that built, the legacy heuristic's first algorithm
timed by the legacy search, cudnnFind's first, torch's op), regrets against the measured best, occurrence-weighted
summaries, and `cudnn-algos dataset report` on a store. Real rows come from a sweep on the device."""
import gzip
import json
from pathlib import Path

import pytest
from conftest import run_cli

from cudnn_algos.dataset.regret import (BIG, TOP1, Summary, against_best_heuristic, picks, problem_regrets, summarize,
                                 table, worst)
from cudnn_algos.sweep import SweepStore


def eng(name, ms, status="SUCCESS", **ranks):
    return {"candidate_kind": "engine", "candidate": name, "status": status, "kernel_median_ms": ms,
            **{f"rank_{k}": v for k, v in ranks.items()}}


def legacy(name, stage, rank, ms=None):
    return {"candidate_kind": "legacy", "candidate": name, "status": "SUCCESS", "stage": stage,
            "heuristic_rank": rank, "kernel_median_ms": ms}


def problem(scale=1.0, family="resnet", direction="forward", uses=1):
    rows = [eng("eng0", 0.020 * scale, instant=0), eng("eng1", 0.015 * scale, a=0),
            eng("eng2", 0.010 * scale, b=0, instant=1), eng("eng3", None, "NOT_SUPPORTED", fallback=0),
            eng("eng4", 0.030 * scale, fallback=1),
            legacy("IMPLICIT_GEMM", "find_ex", 0, 0.012 * scale), legacy("FFT", "find_ex", 1, 0.011 * scale),
            legacy("FFT", "heuristic", 0), legacy("GEMM", "heuristic", 1),
            {"candidate_kind": "torch_on", "candidate": "torch benchmark_on", "status": "SUCCESS",
             "kernel_median_ms": 0.0105 * scale}]
    for r in rows:
        r.update(families=[family], dtype="float16", direction=direction, uses=uses, spec="Conv2d(8, 8, 3)",
                 input_shape="2x8x8x8")
    return rows


def test_each_methods_pick_and_regret():
    p = picks(problem())
    assert p["best"] == ("eng2", 0.010)
    assert p["instant"] == ("eng0", 0.020)  # rank 0 of INSTANT built; eng2 is only its second
    assert p["fallback"] == ("eng4", 0.030)  # fallback's rank 0 did not build: its first that did
    assert p["legacy_heuristic"] == ("FFT", 0.011)  # cudnnGet's first, timed by the legacy search
    assert p["legacy_find"] == ("IMPLICIT_GEMM", 0.012)  # cudnnFind's first (its own timing), timed by us
    (r,) = problem_regrets([("k", problem())])
    want = {"instant": 1.0, "a": 0.5, "b": 0.0, "fallback": 2.0, "torch_off": 1.0, "legacy_heuristic": 0.1,
            "legacy_find": 0.2, "torch_on": 0.05}
    assert r.regret == pytest.approx(want) and r.best_ms == 0.010
    assert (r.channels, r.spatial) == (8, 64)  # input 2x8x8x8: where the regret map puts it


def test_missing_picks_are_missing_not_zero_and_summaries_weigh_occurrences():
    no_torch = [x for x in problem() if x["candidate_kind"] != "torch_on"]
    rs = problem_regrets([("k1", problem(uses=3)), ("k2", no_torch), ("k3", problem(direction="backward_data"))])
    assert rs[1].regret["torch_on"] is None
    s = {(x.group, x.method): x for x in summarize(rs, ("direction",))}
    fwd = s[(("forward",), "torch_on")]
    assert (fwd.n, fwd.missing) == (1, 1) and fwd.mean == pytest.approx(0.05)
    # a: the same regret everywhere; weights change nothing there. Mixed regrets: weighted by uses
    rs2 = problem_regrets([("k1", problem(uses=3)), ("k2", [dict(x, kernel_median_ms=(0.02 if x["candidate"] == "eng1"
                                                                                        else x["kernel_median_ms"]))
                                                            for x in problem(uses=1)])])
    (a,) = [x for x in summarize(rs2, ()) if x.method == "a"]
    assert a.mean == pytest.approx((0.5 + 1.0) / 2) and a.weighted == pytest.approx((3 * 0.5 + 1.0) / 4)
    assert a.share_big == 1.0 and a.p95 == pytest.approx(1.0) and a.top1 == 0.0
    (b,) = [x for x in summarize(rs2, ()) if x.method == "b"]  # b picks the best in both: top-1 in both
    assert b.mean == pytest.approx(0.0) and b.top1 == 1.0 and b.share_big == 0.0
    assert worst(rs2, "a", 1)[0].key == "k2"
    text = table(summarize(rs, ("direction",)), ("direction",))
    assert "torch_on" in text and "top-1" in text and max(map(len, text.splitlines())) <= 120


def test_half_of_the_best_heuristic_is_judged_per_group_against_its_lowest_mean():
    """A hand-made table: in group x the best heuristic mean is b's 0.10, in y a's 0.04 (instant's 0.02 is missing
    there: no timed pick), in z none is timed. "sel" at 0.05 meets half of x's best exactly and misses y's 0.02;
    "other" has no pick in x; z is in neither list."""
    def row(g, m, mean):
        return Summary((g,), m, 0 if mean is None else 1, 0, mean, mean, mean, 0.0, 0.0)

    table_ = [row("x", "instant", 0.30), row("x", "a", 0.20), row("x", "b", 0.10), row("x", "sel", 0.05),
              row("x", "other", None),
              row("y", "instant", None), row("y", "a", 0.04), row("y", "b", 0.08), row("y", "sel", 0.03),
              row("y", "other", 0.019),
              row("z", "sel", 0.0)]
    got = against_best_heuristic(table_, ["sel", "other"])
    assert got == {"sel": ([("x",)], [("y",)]), "other": ([("y",)], [])}
    assert against_best_heuristic(table_, ["sel"], share=1.0)["sel"] == ([("x",), ("y",)], [])


@pytest.mark.parametrize("regret, top1", [(0.0, True), (TOP1, True), (TOP1 + 0.001, False), (BIG, False)])
def test_top1_is_a_pick_within_the_noise_floor_of_the_best(regret, top1):
    """top-1: the share of picks within TOP1 of the best (a pick closer than the noise floor is as good as the
    best); a pick at 5% is neither top-1 nor above BIG."""
    rows = [dict(x, kernel_median_ms=0.010 * (1 + regret)) if x["candidate"] == "eng0" else x for x in problem()]
    (r,) = problem_regrets([("k", rows)])
    assert r.regret["instant"] == pytest.approx(regret)
    (s,) = [x for x in summarize([r], ()) if x.method == "instant"]
    assert s.top1 == (1.0 if top1 else 0.0) and s.share_big == 0.0


def test_a_problem_in_two_families_counts_in_each():
    rows = problem()
    for r in rows:
        r["families"] = ["resnet", "regnet"]
    rs = problem_regrets([("k", rows)])
    assert sorted(r.family for r in rs) == ["regnet", "resnet"]


def test_cli_dataset_report(tmp_path):
    path = tmp_path / "s.sqlite"
    with SweepStore(path) as s:
        s.put("k1", "done", problem(), env="H200")
        s.put("k2", "done", problem(2.0, family="decoders", uses=4), env="H200")
    png, where = tmp_path / "cdf.png", tmp_path / "map.png"
    r = run_cli("dataset", "report", path, "--plot", png, "--map", where)
    assert r.returncode == 0, r.stderr
    assert where.stat().st_size > 0 and f"wrote {where}" in r.stdout
    assert "2 problem-directions" in r.stdout and "instant" in r.stdout and "100.0%" in r.stdout
    assert "decoders / float16 / forward" in r.stdout and png.stat().st_size > 0
    assert max(map(len, r.stdout.splitlines())) <= 120
    r = run_cli("dataset", "report", path, "--by", "batch,direction")
    assert r.returncode == 0 and "batch / direction" in r.stdout and "2 / forward" in r.stdout, r.stderr
    r = run_cli("dataset", "report", path, "--by", "model")
    assert r.returncode == 2 and "--by 'model' is not one of family, dtype, direction, batch" in r.stderr
    with SweepStore(tmp_path / "e.sqlite"):
        pass
    r = run_cli("dataset", "report", tmp_path / "e.sqlite")
    assert r.returncode != 0 and "nothing" not in r.stdout and "no measured problem-direction" in r.stderr


def test_torch_filtered_configurations_are_not_the_best_nor_torchs_pick_with_benchmark_off():
    rows = problem() + [dict(eng("eng9", 0.001, a=5), torch_filter="down-converts inputs")]
    assert picks(rows)["best"] == ("eng2", 0.010)
    # torch with benchmark off: INSTANT's first that built and that torch accepts, else FALLBACK's
    rows = [dict(r, torch_filter="down-converts inputs") if r["candidate"] == "eng0" else r for r in problem()]
    assert picks(rows)["torch_off"] == ("eng2", 0.010)
    rows = [dict(r, rank_instant=None) for r in problem()]
    assert picks(rows)["torch_off"] == ("eng4", 0.030)


REAL = Path(__file__).parent / "fixtures" / "sweep_decoders_h200_sample.jsonl.gz"


def real_sample():
    """A committed real sample: 17 problem-directions the sweep measured on an H200 (rows cut to what the report
    reads; its first line says where it came from)."""
    lines = [json.loads(x) for x in gzip.open(REAL, "rt")]
    assert lines[0]["environment"]["gpu"] == "NVIDIA H200"
    return [(o["key"], o["rows"]) for o in lines[1:]]


def test_the_report_on_a_real_sample():
    problems = real_sample()
    rs = problem_regrets(problems)
    assert len(rs) == 17 and all(r.family == "decoders" for r in rs)
    # torch's benchmark mode, checked by a direct computation over the rows: its time over the fastest timed
    # legacy algorithm or engine configuration torch would accept, less one
    direct = []
    for _, rows in problems:
        ok = [r["kernel_median_ms"] for r in rows if r["status"] == "SUCCESS" and r["kernel_median_ms"]
              and r["candidate_kind"] in ("engine", "legacy") and r.get("stage") != "heuristic"
              and not r.get("torch_filter")]
        on = next(r["kernel_median_ms"] for r in rows if r["candidate_kind"] == "torch_on")
        direct.append(on / min(ok) - 1)
    assert [r.regret["torch_on"] for r in rs] == pytest.approx(direct)
    s = {x.method: x for x in summarize(rs, ())}
    # what this sample says (pinned: a change of the arithmetic shows here)
    assert s["instant"].mean == pytest.approx(0.148765, abs=1e-6) and s["instant"].share_big == pytest.approx(9 / 17)
    assert s["torch_on"].mean == pytest.approx(0.052221, abs=1e-6)
    assert s["torch_on"].weighted == pytest.approx(0.053405, abs=1e-6)
    assert all(s[m].missing == 0 for m in s)
    # a list's pick is one of the candidates the best is taken over: never below the best
    assert min(r.regret[m] for r in rs for m in ("instant", "a", "b", "fallback", "legacy_find")) >= 0


def test_what_choosing_costs_is_the_median_over_problems():
    from cudnn_algos.dataset.regret import search_costs

    def costed(q, first):
        rows = problem()
        for r in rows:
            r.update(query_instant_ms=q, query_a_ms=10 * q)
            if r["candidate_kind"] == "torch_on":
                r["first_call_ms"] = first
        return rows

    cost = search_costs([("k1", costed(0.1, 50.0)), ("k2", costed(0.3, 70.0)), ("k3", costed(0.2, 900.0))])
    assert cost == pytest.approx({"instant": 0.2, "a": 2.0, "torch_on": 70.0})
    assert search_costs([("k", problem())]) == {}  # not recorded: no cost claimed

    def both(a, b):
        rows = problem()
        for r in rows:
            r.update(query_a_ms=a, query_b_ms=b)
        return rows

    # lists A and B asked one after the other: the median of the sums, not the sum of the medians (5 + 5 = 10)
    cost = search_costs([("k1", both(1.0, 9.0)), ("k2", both(5.0, 5.0)), ("k3", both(9.0, 1.0))])
    assert cost == pytest.approx({"a": 5.0, "b": 5.0, "a+b": 10.0})
    cost = search_costs([("k1", both(1.0, 1.0)), ("k2", both(5.0, 9.0)), ("k3", both(9.0, 5.0))])
    assert cost["a+b"] == pytest.approx(14.0) and cost["a"] + cost["b"] == pytest.approx(10.0)
