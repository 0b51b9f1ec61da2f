"""CPU: the selector's parts (cudnn_algos.selector) — problem features and candidate encoding, trees exported from
scikit-learn giving sklearn's predictions, the model file's round trip (arrays only, no pickle), training on the
committed real sample, and leave-one-group-out evaluation on a hand-made table whose answer is known. What it is
worth on held-out families needs the dataset (docs/dataset.md) and runs where that is."""
import gzip
import io
import json
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from conftest import run_cli

from cudnn_algos.selector import PROBLEM_FEATURES, Selector, Vocabulary, problem_features
from cudnn_algos.spec import ConvSpec
from cudnn_algos.sweep import SweepStore

REAL = Path(__file__).parent / "fixtures" / "sweep_decoders_h200_sample.jsonl.gz"


def real_sample():
    return [(o["key"], o["rows"]) for o in (json.loads(x) for x in list(gzip.open(REAL, "rt"))[1:])]


@pytest.mark.parametrize("text", ["Conv2d(32, 64, kernel_size=3, padding=1)", "Conv1d(8, 8, kernel_size=5, groups=8)",
                                  "ConvTranspose2d(64, 32, kernel_size=4, stride=2, padding=1)",
                                  "Conv3d(3, 64, kernel_size=(3, 7, 7), stride=(1, 2, 2), padding=(1, 3, 3))"])
def test_a_printed_spec_reads_back(text):
    assert str(ConvSpec.parse(text)) == text


def test_spec_parse_refuses_what_is_not_a_layer():
    for bad in ("Linear(3, 4)", "Conv2d(3, 4, kernel_size=__import__('os'))", "not python", ""):
        with pytest.raises(ValueError):
            ConvSpec.parse(bad)


def test_problem_features():
    f = dict(zip(PROBLEM_FEATURES, problem_features(ConvSpec.parse("Conv2d(32, 64, kernel_size=3, padding=1)"),
                                                    (8, 32, 56, 56), "float16", "channels_last", "backward_data")))
    assert (f["log_batch"], f["log_in_channels"], f["log_out_channels"], f["kernel_h"], f["kernel_d"]) == (
        3, 5, 6, 3, 1)
    assert f["log_gflops"] == pytest.approx(np.log2(2 * 8 * 64 * 56 * 56 * 32 * 9 / 1e9))
    assert (f["float16"], f["float32"], f["channels_last"], f["backward_data"], f["forward"]) == (1, 0, 1, 1, 0)
    dw = dict(zip(PROBLEM_FEATURES, problem_features(ConvSpec.parse("Conv1d(8, 8, kernel_size=5, groups=8)"),
                                                     (2, 8, 100), "float32", "contiguous", "forward")))
    assert (dw["depthwise"], dw["conv1d"], dw["log_h"], dw["kernel_h"], dw["log_out_w"]) == (1, 1, 0, 1, np.log2(96))


def test_candidate_encoding():
    v = Vocabulary.of([(62, {"TILE_SIZE": 2}), (10, {"SPLIT_K": 4, "TILE_SIZE": 1})])
    assert v.engines == (10, 62) and v.knobs == ("SPLIT_K", "TILE_SIZE")
    assert v.encode(62, {"TILE_SIZE": 16}) == [0.0, 1.0, -1.0, 16.0, 64.0, 64.0]  # in no heuristic list given
    assert v.encode(7, {}) == [0.0, 0.0, -1.0, -1.0, 64.0, 64.0]  # an engine it never saw: no one-hot, knobs absent
    assert v.encode(62, {}, {"a": 3, "b": None})[-2:] == [3.0, 64.0]  # positions in heuristic A and B
    assert v.names == ("engine_10", "engine_62", "knob_SPLIT_K", "knob_TILE_SIZE", "rank_a", "rank_b")


def test_exported_trees_predict_what_sklearn_predicts():
    sk = pytest.importorskip("sklearn.ensemble")
    from cudnn_algos.choose.trees import Trees

    rng = np.random.default_rng(0)
    x = rng.normal(size=(400, 6))
    y = np.sin(x[:, 0]) + x[:, 1] * (x[:, 2] > 0) + rng.normal(scale=0.1, size=400)
    gbr = sk.GradientBoostingRegressor(n_estimators=40, max_depth=4, learning_rate=0.1, random_state=0).fit(x, y)
    t = Trees.from_sklearn(gbr)
    test = rng.normal(size=(100, 6))
    np.testing.assert_allclose(t.predict(test), gbr.predict(test), rtol=1e-9, atol=1e-9)
    assert t.predict(np.zeros((0, 6))).shape == (0,)


def test_exported_histogram_trees_predict_what_sklearn_predicts():
    sk = pytest.importorskip("sklearn.ensemble")
    from cudnn_algos.choose.trees import Trees

    rng = np.random.default_rng(1)
    x = rng.normal(size=(3000, 6))
    x[:, 5] = rng.integers(0, 4, size=3000)  # a few values: thresholds between them, as a one-hot or a knob has
    y = np.sin(x[:, 0]) + x[:, 1] * (x[:, 2] > 0) - 0.5 * (x[:, 5] == 2) + rng.normal(scale=0.1, size=3000)
    hgb = sk.HistGradientBoostingRegressor(max_iter=40, max_depth=5, max_leaf_nodes=None, learning_rate=0.1,
                                           early_stopping=False, random_state=0).fit(x, y)
    t = Trees.from_sklearn_hist(hgb)
    test = np.concatenate([rng.normal(size=(200, 6)), x[:50]])  # unseen rows and training rows (on the bins' edges)
    np.testing.assert_allclose(t.predict(test), hgb.predict(test), rtol=1e-9, atol=1e-9)
    assert t.rate == 1.0 and t.width == 6
    with pytest.raises(ValueError, match="learner='exact'"):
        Trees.from_sklearn_hist(sk.GradientBoostingRegressor(n_estimators=2).fit(x, y))


def test_the_histogram_learner_trains_a_selector_that_picks_like_the_exact_one(tmp_path):
    pytest.importorskip("sklearn")
    from cudnn_algos.selector.train import leave_one_out, train

    problems = [table_problem(i, fam) for fam in ("a", "b", "c") for i in range(6)]
    rs = leave_one_out(problems, by="family", learner="hist", params={"max_iter": 30, "max_depth": 3,
                                                                      "min_samples_leaf": 2})
    assert len(rs) == 18 and all(r.regret["selector"] == pytest.approx(0.0) for r in rs)
    sel = train(real_sample(), family="sm_90-cudnn-9.19", learner="hist")
    assert sel.trained_on["learner"] == "hist" and sel.trained_on["params"]["max_iter"] == 300
    sel.save(tmp_path / "h.npz")
    back = Selector.load(tmp_path / "h.npz")
    key, rows = real_sample()[0]
    from cudnn_algos.choose.features import row_features
    from cudnn_algos.selector.train import engine_candidates

    cands = [c.encoded for c in engine_candidates(rows)]
    np.testing.assert_allclose(back.predict(row_features(rows[0]), cands), sel.predict(row_features(rows[0]), cands))
    with pytest.raises(ValueError, match="learner='forest'"):
        train(problems, learner="forest")
    with pytest.raises(ValueError, match="learner='hist' does not fit objective='rank'"):
        train(problems, learner="hist", objective="rank")


def test_lightgbm_trees_export_to_arrays_that_predict_what_lightgbm_predicts():
    """Trees.from_lightgbm: LightGBM's lambdarank trees (rank.fit_lightgbm) as plain arrays predict its scores,
    negated (lower is better), on unseen rows and on training rows (thresholds between their values); a hand-made
    dump with a stump and a one-leaf tree walks as written."""
    lightgbm = pytest.importorskip("lightgbm")
    from cudnn_algos.selector.rank import LIGHTGBM_LEVELS, fit_lightgbm, relevance
    from cudnn_algos.choose.trees import Trees

    rng = np.random.default_rng(1)
    x = rng.normal(size=(1200, 5))
    x[:, 4] = rng.integers(0, 3, size=1200)
    ms = np.exp(np.sin(x[:, 0]) + 0.5 * x[:, 1] * (x[:, 4] == 1)) + 0.01
    groups = [list(ms[i:i + 12]) for i in range(0, 1200, 12)]
    t = fit_lightgbm(x, groups, {"n_estimators": 40})
    ranker = lightgbm.LGBMRanker(objective="lambdarank", n_estimators=40, max_depth=6, num_leaves=63,
                                 learning_rate=0.1, min_child_samples=20, random_state=0, verbose=-1,
                                 label_gain=[2.0 ** i - 1 for i in range(LIGHTGBM_LEVELS + 1)])
    ranker.fit(x, np.concatenate([relevance(g) for g in groups]), group=[12] * 100)
    test = np.concatenate([rng.normal(size=(300, 5)), x[:60]])
    np.testing.assert_allclose(t.predict(test), -ranker.predict(test), rtol=1e-9, atol=1e-9)
    assert relevance([1.0, 1.07, 2.0, 4.0]) == [LIGHTGBM_LEVELS, LIGHTGBM_LEVELS - 1, LIGHTGBM_LEVELS - 10, 0]
    dump = {"tree_info": [{"tree_structure": {"split_feature": 1, "threshold": 0.5, "decision_type": "<=",
                                              "missing_type": "None", "left_child": {"leaf_value": 2.0},
                                              "right_child": {"leaf_value": -1.0}}},
                          {"tree_structure": {"leaf_value": 0.25}}]}
    hand = Trees.from_lightgbm(dump)
    np.testing.assert_allclose(hand.predict(np.array([[9.0, 0.5], [9.0, 0.6]])), [2.25, -0.75])
    bad = {"tree_info": [{"tree_structure": {**dump["tree_info"][0]["tree_structure"], "decision_type": "=="}}]}
    with pytest.raises(ValueError, match="categorical splits"):
        Trees.from_lightgbm(bad)


def test_a_lightgbm_ranked_selector_saves_and_loads_without_lightgbm_code(tmp_path):
    pytest.importorskip("lightgbm")
    pytest.importorskip("sklearn")
    from cudnn_algos.choose.features import row_features
    from cudnn_algos.selector.train import engine_candidates, train

    sel = train(real_sample(), family="sm_90-cudnn-9.19", objective="rank", learner="lightgbm",
                params={"n_estimators": 30})
    assert sel.trained_on["learner"] == "lightgbm" and sel.trained_on["objective"] == "rank"
    sel.save(tmp_path / "l.npz")
    back = Selector.load(tmp_path / "l.npz")
    key, rows = real_sample()[0]
    cands = [c.encoded for c in engine_candidates(rows)]
    np.testing.assert_allclose(back.predict(row_features(rows[0]), cands), sel.predict(row_features(rows[0]), cands))
    assert type(back.trees).__module__ == "cudnn_algos.choose.trees"
    with pytest.raises(ValueError, match="learner='lightgbm' does not fit objective='regression'"):
        train(real_sample(), learner="lightgbm")


def test_trained_on_the_real_sample_the_file_round_trips_without_pickle(tmp_path):
    pytest.importorskip("sklearn")
    from cudnn_algos.selector.train import choose, engine_candidates, train
    from cudnn_algos.choose.features import row_features

    problems = real_sample()
    sel = train(problems, family="sm_90 cudnn 9.19")
    assert sel.trained_on["problems"] == 17 and sel.trained_on["families"] == ["decoders"]
    path = tmp_path / "sel.npz"
    sel.save(path)
    assert path.stat().st_size < 5 << 20
    with np.load(path, allow_pickle=False) as z:  # plain arrays: nothing needs unpickling
        assert all(z[k].dtype != object for k in z.files)
    back = Selector.load(path)
    assert back.family == "sm_90-cudnn-9.19" and back.vocabulary == sel.vocabulary  # given as "sm_90 cudnn 9.19"
    from cudnn_algos.environment import selector_family

    assert selector_family("9.0", "9.19.2") == "sm_90-cudnn-9.19" == Selector.shipped("sm_90 cudnn 9.19").family
    key, rows = problems[0]
    cands = [c.encoded for c in engine_candidates(rows)]
    np.testing.assert_allclose(back.predict(row_features(rows[0]), cands), sel.predict(row_features(rows[0]), cands))
    # in-sample, the trees' pick beats INSTANT's by far (a model that learned nothing would not); held-out numbers
    # need the dataset
    from cudnn_algos.dataset.regret import picks

    ours, instant = [], []
    for _, rows in problems:
        times = {c.name: c.ms for c in engine_candidates(rows)}
        ours.append(times[choose(sel, rows)["selector"]] / min(times.values()) - 1)
        instant.append(times[picks(rows)["instant"][0]] / min(times.values()) - 1)
    assert np.mean(ours) < np.mean(instant) / 2
    bad = tmp_path / "bad.npz"
    np.savez(bad, header=np.frombuffer(json.dumps({"format": 99}).encode(), dtype=np.uint8))
    with pytest.raises(ValueError, match="train it again"):
        Selector.load(bad)


def test_the_trees_targets_are_log2_time_over_the_fastest_capped():
    from cudnn_algos.selector.train import TARGET_CAP, targets

    assert targets([2.0, 1.0, 1.2]) == pytest.approx([TARGET_CAP, 0.0, np.log2(1.2)])
    assert targets([1.0, 8.0], cap=5.0) == [0.0, 3.0]


def slow_tail_problems():
    """Six table problems whose engine 6 takes 4x the fastest's time, and the first one's features and candidates."""
    from cudnn_algos.choose.features import row_features
    from cudnn_algos.selector.train import engine_candidates

    ps = [table_problem(i, "a") for i in range(6)]
    for p in ps:
        p[1][-1]["kernel_median_ms"] = 4 * min(r["kernel_median_ms"] for r in p[1])
    rows = ps[0][1]
    return ps, row_features(rows[0]), [c.encoded for c in engine_candidates(rows)]


def test_the_target_cap_reaches_the_trees_the_model_file_and_the_cli(tmp_path):
    """CPU: train(target_cap=C) fits targets capped at C (a 4x slower candidate is learned as 2, not 0.5), keeps C in
    the model file, and refuses a cap that is not a positive number; the CLI passes --target-cap and names a bad one."""
    pytest.importorskip("sklearn")
    from cudnn_algos.selector.train import train

    ps, feats, enc = slow_tail_problems()
    slowest = {}
    for cap in (0.5, 2.0):
        sel = train(ps, family="t", learner="hist", target_cap=cap, evidence_k=0,
                    params={"min_samples_leaf": 1, "max_iter": 100, "learning_rate": 0.3})
        assert sel.trained_on["target_cap"] == cap
        slowest[cap] = float(sel.predict(feats, enc)[-1])
        sel.save(tmp_path / f"m{cap}.npz")
        assert Selector.load(tmp_path / f"m{cap}.npz").trained_on["target_cap"] == cap
    assert slowest[0.5] == pytest.approx(0.5, abs=0.05) and slowest[2.0] == pytest.approx(2.0, abs=0.1), slowest
    for bad in (0, -1.0, float("inf"), float("nan"), True, "2"):
        with pytest.raises(ValueError, match="target_cap="):
            train(ps, target_cap=bad)
    store = tmp_path / "s.sqlite"
    with SweepStore(store) as s:
        for key, r in ps:
            s.put(key, "done", r, env="H200")
    model = tmp_path / "c.npz"
    r = run_cli("selector", "train", store, "--out", model, "--learner", "hist", "--target-cap", "2")
    assert r.returncode == 0 and "target cap 2)" in run_cli("selector", "show", model).stdout, r.stderr
    for args, says in ((("train", store, "--out", model, "--target-cap", "0"), "--target-cap 0.0 must be > 0"),
                       (("eval", store, "--model", model, "--target-cap", "2"), "only selector train and eval's"),
                       (("train", store, "--out", model, "--objective", "rank", "--target-cap", "2"), "--objective "
                        "regression")):
        r = run_cli("selector", *args)
        assert r.returncode == 2 and says in r.stderr and "Traceback" not in r.stderr, (args, r.stderr)


def test_the_guard_trees_and_the_far_margin_reach_the_model_file_and_the_cli(tmp_path):
    """CPU: train(guard_cap=C) fits the guard's own trees with targets capped at C (a 4x slower candidate learned as
    2 by them while the ranking trees keep 0.5) and keeps them, guard_far and the cap in the model file; no guard
    means no guard trees; the CLI passes --guard-far/--guard-cap, shows them and names bad values."""
    pytest.importorskip("sklearn")
    from cudnn_algos.selector.train import train

    ps, feats, enc = slow_tail_problems()
    fit = {"min_samples_leaf": 1, "max_iter": 100, "learning_rate": 0.3}
    sel = train(ps, family="t", learner="hist", evidence_k=0, params=fit, guard=0.2, guard_far=0.4, guard_cap=2.0)
    assert (sel.guard, sel.guard_far, sel.trained_on["guard_cap"]) == (0.2, 0.4, 2.0)
    ranking = float(sel.predict(feats, enc)[-1])
    assert ranking == pytest.approx(0.5, abs=0.05)
    sel.save(tmp_path / "g.npz")
    back = Selector.load(tmp_path / "g.npz")
    assert (back.guard, back.guard_far) == (0.2, 0.4)
    x = back.rows(feats, enc)
    np.testing.assert_allclose(back.guard_trees.predict(x), sel.guard_trees.predict(x))
    # the guard trees (the same learner and params) see the 4x candidate as slower than the ranking trees can
    assert float(back.guard_trees.predict(x)[-1]) > ranking + 0.3
    bare = train(ps, family="t", learner="hist", evidence_k=0, params=fit, guard=None)
    assert bare.guard is None and bare.guard_far is None and bare.guard_trees is None
    with pytest.raises(ValueError, match="guard_cap="):
        train(ps, guard_cap=0)
    with pytest.raises(ValueError, match="guard_far="):
        replace(sel, guard_far=-1.0)
    store = tmp_path / "s.sqlite"
    with SweepStore(store) as s:
        for key, r in ps:
            s.put(key, "done", r, env="H200")
    model = tmp_path / "c.npz"
    r = run_cli("selector", "train", store, "--out", model, "--learner", "hist", "--guard-far", "0.5", "--guard-cap",
                "3")
    shown = run_cli("selector", "show", model).stdout
    assert r.returncode == 0 and "guard 0.2, 0.5 beyond the reach, read from its own trees (cap 3)" in shown, (
        r.stderr, shown)
    r = run_cli("selector", "train", store, "--out", model, "--learner", "hist", "--guard-cap", "none")
    assert r.returncode == 0 and "own trees" not in run_cli("selector", "show", model).stdout
    for args, says in ((("train", store, "--out", model, "--guard-cap", "0"), "--guard-cap 0: give a cap > 0"),
                       (("train", store, "--out", model, "--guard-far", "-1"), "--guard-far -1: give a margin"),
                       (("eval", store, "--model", model, "--guard-cap", "2"), "keeps the guard trees"),
                       (("show", model, "--guard-far", "0.3"), "only selector train and eval")):
        r = run_cli("selector", *args)
        assert r.returncode == 2 and says in r.stderr and "Traceback" not in r.stderr, (args, r.stderr)


def table_problem(i, family, fast=5, batch=8):
    """A problem whose engine `fast` is twice as fast as the others; INSTANT ranks engine 1 first."""
    rows = [{"candidate_kind": "engine", "candidate": f"eng{e}", "engine_id": e, "knobs": {"K": e % 2},
             "status": "SUCCESS", "kernel_median_ms": (0.01 if e == fast else 0.02) * (1 + i / 10),
             "rank_instant": 0 if e == 1 else e + 1} for e in range(1, 7)]
    for r in rows:
        r.update(families=[family], dtype="float16", memory_format="channels_last", direction="forward", uses=1,
                 spec=f"Conv2d({8 * (i + 1)}, 16, kernel_size=3, padding=1)",
                 input_shape=f"{batch}x{8 * (i + 1)}x32x32")
    return (f"{family}{i}", rows)


def test_leave_one_family_out_on_a_table_with_a_known_answer():
    pytest.importorskip("sklearn")
    from cudnn_algos.dataset.regret import summarize
    from cudnn_algos.selector.train import leave_one_out

    problems = [table_problem(i, fam) for fam in ("a", "b", "c") for i in range(6)]
    rs = leave_one_out(problems, by="family", params={"n_estimators": 30, "max_depth": 3})
    assert len(rs) == 18 and {r.family for r in rs} == {"a", "b", "c"}
    s = {x.method: x for x in summarize(rs, (), methods=("selector", "nearest", "instant"))}
    assert s["selector"].mean == pytest.approx(0.0) and s["nearest"].mean == pytest.approx(0.0)
    assert s["instant"].mean == pytest.approx(1.0) and s["instant"].share_big == 1.0
    ranked = leave_one_out(problems, by="family", objective="rank", params={"n_estimators": 30, "max_depth": 3,
                                                                          "min_samples_leaf": 2})
    assert summarize(ranked, (), methods=("selector",))[0].mean == pytest.approx(0.0)
    with pytest.raises(ValueError, match="objective='lambda'"):
        leave_one_out(problems, objective="lambda")
    one = leave_one_out(problems, by="family", params={"n_estimators": 30, "max_depth": 3}, only=["b"])
    assert len(one) == 6 and {r.family for r in one} == {"b"}  # b held out alone, trained on a and c
    assert [r.regret["selector"] for r in one] == [r.regret["selector"] for r in rs if r.family == "b"]
    with pytest.raises(ValueError, match=r"only=\['d'\]: d is not a family of these problems \(they have: a, b, c\)"):
        leave_one_out(problems, only=["d"])


def test_a_held_out_batch_size_is_outside_the_default_reach_and_reach_inf_lets_the_trees_rank(tmp_path):
    """Note [the selector's reach] held out by batch size: trained at one batch size, every problem at another is
    farther than the default reach (log_batch alone is 4 units away), so it gets cuDNN's order (engine 1 first,
    regret 1.0); with reach=inf the trees rank it (engine 5, regret 0). The reach travels in the model file."""
    pytest.importorskip("sklearn")
    import math

    from cudnn_algos.dataset.regret import summarize
    from cudnn_algos.selector.train import leave_one_out, train

    problems = [table_problem(i, "a", batch=b) for b in (8, 128) for i in range(6)]
    params = {"n_estimators": 30, "max_depth": 3}
    mean = lambda rs: summarize(rs, (), methods=("selector",))[0].mean  # noqa: E731
    assert mean(leave_one_out(problems, by="batch", params=params)) == pytest.approx(1.0)
    assert mean(leave_one_out(problems, by="batch", params=params, reach=math.inf)) == pytest.approx(0.0)
    sel = train(problems[:6], params=params, reach=math.inf)
    path = tmp_path / "inf.npz"
    sel.save(path)
    assert Selector.load(path).reach == math.inf and Selector.load(path).within_reach([99.0] * len(PROBLEM_FEATURES))
    for bad in (0, -1.0, "2", True):
        with pytest.raises(ValueError, match=f"reach={bad!r} must be a number > 0"):
            train(problems[:6], params=params, reach=bad)


def test_cli_selector_reach(tmp_path):
    pytest.importorskip("sklearn")
    store = tmp_path / "s.sqlite"
    with SweepStore(store) as s:
        for i in range(6):
            for b in (8, 128):
                key, rows = table_problem(i, "a", batch=b)
                s.put(f"{key}-{b}", "done", rows, env="H200")
    model = tmp_path / "m.npz"
    r = run_cli("selector", "train", store, "--out", model, "--reach", "inf")
    shown = run_cli("selector", "show", model).stdout
    assert r.returncode == 0 and "reach inf" in shown and "regression trees (hist: " in shown, r.stderr  # the default
    exact = tmp_path / "x.npz"
    r = run_cli("selector", "train", store, "--out", exact, "--learner", "exact")
    assert r.returncode == 0 and "regression trees (exact: " in run_cli("selector", "show", exact).stdout, r.stderr
    r = run_cli("selector", "eval", store, "--by", "batch", "--reach", "inf")
    assert r.returncode == 0 and "reach inf" in r.stdout, r.stdout + r.stderr
    r = run_cli("selector", "eval", store, "--model", model, "--reach", "1.5")
    assert r.returncode == 0 and "reach 1.5" in r.stdout, r.stdout + r.stderr
    for bad in ("0", "-2", "nan"):
        r = run_cli("selector", "eval", store, "--reach", bad)
        assert r.returncode == 2 and f"--reach {float(bad)} must be > 0" in r.stderr and "Traceback" not in r.stderr
    r = run_cli("selector", "show", model, "--reach", "3")
    assert r.returncode == 2 and "only selector train and eval" in r.stderr, r.stderr
    hist = tmp_path / "h.npz"
    r = run_cli("selector", "train", store, "--out", hist, "--learner", "hist")
    assert r.returncode == 0 and "regression trees (hist: " in run_cli("selector", "show", hist).stdout, r.stderr
    r = run_cli("selector", "eval", store, "--by", "batch", "--learner", "hist", "--reach", "inf")
    assert r.returncode == 0 and "regression trees (hist, target cap 0.5)" in r.stdout, r.stdout + r.stderr
    r8 = run_cli("selector", "eval", store, "--by", "batch", "--learner", "hist", "--hold-out", "8")
    groups = [ln.split()[0] for ln in r8.stdout.splitlines() if ln.split()[1:2] == ["selector"]]
    assert r8.returncode == 0 and groups == ["8", "all"], r8.stdout + r8.stderr
    for args, says in ((("--hold-out", "9"), "--hold-out 9: 9 is not a batch of these problems (they have: 128, 8)"),
                       (("--hold-out", "8", "--model", model), "only selector eval's leave-one-out")):
        bad = run_cli("selector", "eval", store, "--by", "batch", *args)
        assert bad.returncode == 2 and says in bad.stderr and "Traceback" not in bad.stderr, bad.stderr
    cost = r.stdout[r.stdout.index("choosing costs"):]
    assert re.search(r"\n  predict: ranking [0-9.e-]+ \(this CPU\)", cost) and "INSTANT" not in cost, cost  # no queries
    for args in (("eval", store, "--model", model, "--learner", "hist"),
                 ("train", store, "--out", tmp_path / "r.npz", "--objective", "rank", "--learner", "hist")):
        r = run_cli("selector", *args)
        assert r.returncode == 2 and "--learner hist: only" in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_offered_is_the_fastest_listed_candidate_a_floor_no_ranking_beats():
    """choose()'s "offered": the fastest configuration the lists name (a perfect ranker's pick); a faster one no list
    names (found by the sweep's refine) sets the regret every ranking of the lists' candidates has at least."""
    pytest.importorskip("sklearn")
    from cudnn_algos.dataset.regret import problem_regrets
    from cudnn_algos.selector.train import choose, train, with_selector

    problems = [table_problem(i, "a") for i in range(6)]
    sel = train(problems, params={"n_estimators": 20, "max_depth": 3})
    key, rows = table_problem(3, "b")
    for r in rows:  # lists A and B name engines 1-4 (eng2 first); eng5, the fastest, is the refine's find alone
        r.update(rank_a=r["engine_id"] - 1 if r["engine_id"] <= 4 else None, rank_b=None)
    rows[2]["kernel_median_ms"] = rows[4]["kernel_median_ms"] * 1.5  # eng3: the fastest listed
    assert choose(sel, rows)["offered"] == "eng3"
    (p,) = with_selector(problem_regrets, sel, key, rows)
    assert p.regret["offered"] == pytest.approx(0.5)
    assert min(v for m, v in p.regret.items() if m.startswith("selector") and v is not None) >= 0.5 - 1e-9


def test_known_configurations_reach_the_fastest_no_list_names(tmp_path, monkeypatch):
    """Note [known configurations]: the training problems' fastest configurations per class ride in the model file
    and are ranked beside the lists' candidates; a held-out problem whose fastest (eng5) no list names gets it from
    them ("known", "offered_known"), where the lists alone cannot ("offered" is slower). Where the trees would pick
    one the problem has no time for, choose() says so (known_untimed) and scores the first timed one."""
    pytest.importorskip("sklearn")
    from cudnn_algos.dataset.regret import problem_regrets
    from cudnn_algos.selector.train import (AUTO_K, AUTO_LATER, AUTO_TORCH_K, KNOWN_UNTIMED, choose, runtime_compiled,
                                            train, with_selector)

    problems = [table_problem(i, "a") for i in range(6)]
    for _, rows in problems:
        for r in rows:
            r["deterministic"] = r["engine_id"] != 5
            r["knobs"] = {}  # a name and its knobs agree, as the dataset's do (Note [known configurations first])
    sel = train(problems, params={"n_estimators": 20, "max_depth": 3})
    cls = "forward float16 channels_last"
    assert sel.known == {cls: (("eng5", False),)}
    assert sel.known_for("forward", "float16", "channels_last") == ("eng5",)
    assert sel.known_for("forward", "float16", "channels_last", deterministic=True) == ()
    assert sel.known_for("backward_data", "float16", "channels_last") == ()
    path = tmp_path / "m.npz"
    sel.save(path)
    assert Selector.load(path).known == sel.known
    from cudnn_algos.selector.train import class_of  # a transposed layer's forward: cuDNN's backward data
    row = {"direction": "forward", "cudnn_direction": "backward_data", "dtype": "float16",
           "memory_format": "contiguous"}
    assert class_of(row) == "backward_data float16 contiguous"

    key, rows = table_problem(3, "b")
    for r in rows:  # lists A and B name engines 1-4; eng5, the fastest, only the known configurations
        r.update(rank_a=r["engine_id"] - 1 if r["engine_id"] <= 4 else None, rank_b=None, knobs={})
    c = choose(sel, rows)
    assert c["offered"] != "eng5" and c["offered_known"] == "eng5" and c["known"] == "eng5"
    assert not c["known_untimed"]
    (p,) = with_selector(problem_regrets, sel, key, rows)
    assert p.regret["known"] == pytest.approx(0.0) and p.regret["offered"] == pytest.approx(1.0)
    assert p.regret[KNOWN_UNTIMED] == 0.0
    # k="auto" times the trees' first (eng5 here) and cuDNN's first, and more where predictions are close
    assert c["known_auto"][0] == "eng5" and len(c["known_auto"]) >= 2 and p.regret["known_auto"] == pytest.approx(0.0)
    assert p.regret[AUTO_K] == len(c["known_auto"])
    # known_auto_torch: k="auto"'s shortlist and benchmark mode's own candidates (torch_rank order), each once
    ranked = {r["candidate"]: r for r in rows}
    ranked["eng2"]["torch_rank"], ranked["eng5"]["torch_rank"], ranked["eng1"]["torch_rank"] = 0, 1, 2
    t = choose(sel, rows)
    assert t["known_auto_torch"] == list(dict.fromkeys(t["known_auto"] + ["eng2", "eng5", "eng1"]))
    (pt,) = with_selector(problem_regrets, sel, key, rows)
    assert pt.regret[AUTO_TORCH_K] == len(t["known_auto_torch"]) and pt.regret["known_auto_torch"] == pytest.approx(0.0)
    for r in rows:
        r.pop("torch_rank", None)
    # ...and times at once none of the additions whose notes say it compiles at run time: with every row so noted,
    # only its first two at once ("known_auto_first"), the rest later (in "known_auto", scored once they are timed)
    monkeypatch.setattr("cudnn_algos.choose.model.AUTO_SPREAD", 10.0)  # every candidate close: more than two
    c = choose(sel, rows)
    assert c["known_auto_first"] == c["known_auto"]  # no notes: all at once
    for r in rows:
        r["note"] = "TENSOR_CORE,RUNTIME_COMPILATION"
    assert runtime_compiled(rows) == {r["candidate"] for r in rows}
    noted = choose(sel, rows)
    assert len(c["known_auto"]) > 2 and noted["known_auto"] == c["known_auto"]
    assert noted["known_auto_first"] == c["known_auto"][:2]
    (p,) = with_selector(problem_regrets, sel, key, rows)
    assert p.regret[AUTO_LATER] == len(c["known_auto"]) - 2
    times = {r["candidate"]: r["kernel_median_ms"] for r in rows}
    assert p.regret["known_auto_first"] == pytest.approx(min(times[n] for n in c["known_auto"][:2]) / p.best_ms - 1)
    monkeypatch.undo()
    untimed = [r for r in rows if r["engine_id"] != 5]  # eng5 never timed for this problem
    c = choose(sel, untimed)
    assert c["known_untimed"] and c["known"] != "eng5" and c["offered_known"] == c["offered"]


def test_a_known_configuration_goes_first_only_near_a_training_problem_it_won(monkeypatch):
    """Note [known configurations first]: eng5, no list's, won every training problem (batch 8); the same layer at
    batch 8 (distance 0) gets it first, at batch 16 (farther than KNOWN_NEAR, within the reach) the trees' first
    listed candidate goes ahead of it and it stays second (measure_top_k's k=3 still times it). Without the rule
    (KNOWN_NEAR infinite) eng5 would be first there too."""
    pytest.importorskip("sklearn")
    from cudnn_algos.choose.features import row_features
    from cudnn_algos.choose.model import listed
    from cudnn_algos.configs import name_key
    from cudnn_algos.selector.train import train

    assert name_key("eng63{SPLIT_K_SLC=13,SPLIT_K_BUF=18}") == "63,SPLIT_K_BUF=18,SPLIT_K_SLC=13"
    assert name_key("eng5") == "5"
    assert name_key("legacy:IMPLICIT_GEMM") == "legacy:IMPLICIT_GEMM"
    problems = [table_problem(i, "a") for i in range(6)]
    for _, rows in problems:
        for r in rows:
            r["knobs"] = {}
    sel = train(problems, params={"n_estimators": 20, "max_depth": 3})
    cands = [(e, {}, {"a": e - 1, "b": None}) for e in range(1, 5)] + [(5, {}, {})]  # eng5 in no list
    assert [listed(c) for c in cands] == [True] * 4 + [False]
    near = row_features(table_problem(3, "b")[1][0])
    far = row_features(table_problem(3, "b", batch=16)[1][0])
    assert sel.neighbours.distance(near) == pytest.approx(0.0) and 0.5 < sel.neighbours.distance(far) <= sel.reach
    monkeypatch.setattr("cudnn_algos.choose.model.KNOWN_NEAR", 0.5)
    assert sel.rank(near, cands)[0] == 4
    order, predicted = sel.ranked(far, cands)
    assert int(np.argmin(predicted)) == 4  # the trees put eng5 first...
    assert listed(cands[order[0]]) and order[1] == 4  # ...the rule puts a listed one ahead of it
    assert 4 in sel.shortlist(far, cands, 3, order)
    monkeypatch.setattr("cudnn_algos.choose.model.KNOWN_NEAR", float("inf"))
    assert sel.rank(far, cands)[0] == 4


def test_cli_selector(tmp_path):
    pytest.importorskip("sklearn")
    store = tmp_path / "s.sqlite"
    with SweepStore(store) as s:
        for fam in ("a", "b"):
            for i in range(5):
                key, rows = table_problem(i, fam, batch=16 if i % 2 else 8)
                s.put(key, "done", rows, env="H200")
    model = tmp_path / "m.npz"
    r = run_cli("selector", "train", store, "--out", model)
    assert r.returncode == 0 and model.stat().st_size > 0, r.stderr
    r = run_cli("selector", "show", model)
    assert r.returncode == 0 and "10 problem-directions" in r.stdout and "a, b" in r.stdout, r.stderr
    assert "regression trees" in r.stdout and "neighbour evidence: " in r.stdout and "the 5 nearest" in r.stdout
    r = run_cli("selector", "eval", store, "--evidence", "-1")
    assert r.returncode == 2 and "--evidence -1 must be >= 0" in r.stderr, r.stderr
    r = run_cli("selector", "train", store, "--out", model, "--objective", "rank")
    assert r.returncode == 0 and "rank trees" in run_cli("selector", "show", model).stdout, r.stderr
    fig = tmp_path / "cdf.png"
    r = run_cli("selector", "eval", store, "--plot", fig)
    assert r.returncode == 0 and "selector" in r.stdout and "nearest" in r.stdout, r.stderr
    assert f"wrote {fig}" in r.stdout and fig.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "offered" in r.stdout and "a perfect ranker's pick" in r.stdout
    assert "offered_known" in r.stdout and "ranked one without a time first in" in r.stdout
    assert "known_auto: unseen='measure_top_k' with k='auto'" in r.stdout
    assert re.search(r"at most half of the best heuristic's mean \(instant, a, b, legacy_heuristic\), per held-out "
                     r"family:\n  predict: \d+ of \d+", r.stdout), r.stdout
    assert re.search(r"building and timing 3 \(k='auto': \d+\.\d\d on average, at most \d+;\n    of them \d+\.\d{3} "
                     r"runtime-compiled, built later\) on the GPU", r.stdout)
    r = run_cli("selector", "train", store, "--out", model, "--plot", fig)
    assert r.returncode == 2 and "--plot" in r.stderr and "only selector eval" in r.stderr, r.stderr
    r = run_cli("selector", "eval", store, "--plot", store)  # the figure over its own input: refused before work
    assert r.returncode == 2 and "--plot" in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert "known configurations: 1 in 1 problem class" in run_cli("selector", "show", model).stdout
    r = run_cli("selector", "train", store, "--out", model, "--known", "0")
    assert r.returncode == 0 and "known configurations: 0" in run_cli("selector", "show", model).stdout, r.stderr
    r = run_cli("selector", "train", store, "--out", model, "--evidence", "0")
    assert r.returncode == 0 and "neighbour evidence: none" in run_cli("selector", "show", model).stdout, r.stderr
    r = run_cli("selector", "eval", store, "--by", "batch")  # the held-out groups are the batch sizes
    groups = [ln.split()[0] for ln in r.stdout.splitlines() if ln.split()[1:2] == ["selector"]]
    assert r.returncode == 0 and "held-out batch" in r.stdout and groups == ["8", "16", "all"], r.stdout + r.stderr
    assert max(map(len, r.stdout.splitlines())) <= 120
    r = run_cli("selector", "show", store)
    assert r.returncode == 2 and "not a cudnn_algos selector" in r.stderr and "Traceback" not in r.stderr
    # a trained model scored on a store without training: what it was trained on apart from the rest
    part = tmp_path / "part.sqlite"
    with SweepStore(part) as s:
        for i in range(3):  # family b's problems are the same layers as a's: i 3 and 4 of both are held out
            key, rows = table_problem(i, "a", batch=16 if i % 2 else 8)
            s.put(key, "done", rows, env="H200")
    run_cli("selector", "train", part, "--out", model)
    r = run_cli("selector", "eval", store, "--model", model)
    assert r.returncode == 0, r.stderr
    assert "not trained on (held out): 4 rows" in r.stdout and "trained on (the same problem measured again): 6 rows" \
        in r.stdout, r.stdout
    fig.unlink()
    r = run_cli("selector", "eval", store, "--model", model, "--plot", fig)
    assert r.returncode == 0 and fig.stat().st_size > 0 and f"wrote {fig}" in r.stdout, r.stderr
    r = run_cli("selector", "eval", store, "--model", tmp_path / "nothing.npz")
    assert r.returncode != 0 and "--model" in r.stderr and "Traceback" not in r.stderr


def test_channel_alignment_features():
    """Channels a tensor-core kernel must pad (ShuffleNet's 116: a multiple of 4, not 8) read apart from aligned
    ones."""
    f = dict(zip(PROBLEM_FEATURES, problem_features(ConvSpec(116, 64, (1, 1)), (32, 116, 14, 14), "float16",
                                                    "channels_last", "forward")))
    assert (f["align_in"], f["align_out"]) == (2.0, 4.0)
    g = dict(zip(PROBLEM_FEATURES, problem_features(ConvSpec(96, 96, (3, 3), groups=96), (8, 96, 28, 28), "float32",
                                                    "contiguous", "backward_data")))
    assert (g["log_group_in"], g["log_group_out"], g["depthwise"]) == (0.0, 0.0, 1.0)


def test_ranking_gradients_push_the_fastest_up_and_sum_to_zero():
    from cudnn_algos.selector.rank import _Groups, gains

    assert gains([2.0, 1.0, 4.0], power=1) == [0.5, 1.0, 0.25]
    ms = [[2.0, 1.0, 4.0], [1.0, 1.0], [3.0, 1.5, 1.0, 6.0]]
    g = np.concatenate([gains(m, 8.0) for m in ms])
    lam, hess = _Groups([len(m) for m in ms], g, block=2).gradients(np.zeros(9), 9, sigma=1.0, truncation=0)
    assert lam[1] > 0 > lam[2] and lam[7] > 0 > lam[8]  # toward a higher score: the fastest up, the slowest down
    assert lam[3] == lam[4] == 0  # two equal times: no pair to order
    for a, b in ((0, 3), (3, 5), (5, 9)):
        assert lam[a:b].sum() == pytest.approx(0.0, abs=1e-12)
    assert (hess >= 0).all() and hess[1] > 0
    # already in the right order by a wide margin: little left to push
    settled, _ = _Groups([3], gains(ms[0], 8.0)).gradients(np.array([0.0, 20.0, -20.0]), 3, 1.0, 0)
    assert np.abs(settled).max() < 1e-6 < np.abs(lam[:3]).max()


def test_lambdamart_learns_which_engine_is_fastest_where():
    pytest.importorskip("sklearn")
    from cudnn_algos.selector.rank import fit

    rng = np.random.default_rng(0)

    def problems(n):
        p = rng.uniform(0, 1, n)  # a problem feature; engine e is fastest near p = e / 3
        x = np.array([[pi, float(e == k), float(k)] for pi in p for e in range(4) for k in [e]])
        ms = [[1.0 + abs(e / 3 - pi) + rng.uniform(0, 0.01) for e in range(4)] for pi in p]
        return x, ms

    x, ms = problems(200)
    trees = fit(x, ms, {"n_estimators": 40, "max_depth": 3, "min_samples_leaf": 5})
    xt, mt = problems(100)
    pred = trees.predict(xt).reshape(100, 4)  # lower is better
    hits = np.mean([np.argmin(p) == np.argmin(m) for p, m in zip(pred, mt)])
    assert hits > 0.8  # chance: 0.25


def test_neighbour_distances_and_repeated_candidates_give_the_direct_answers():
    """The nearest-neighbour distances (one product, not a table-sized difference) equal the direct sum of squares,
    with the same order; a candidate encoded once and remembered predicts what a fresh encoding predicts."""
    from cudnn_algos.choose.model import Neighbours

    rng = np.random.default_rng(3)
    f = rng.normal(size=(200, len(PROBLEM_FEATURES))) * 3
    nb = Neighbours(f, tuple(f"eng{i}" for i in range(200)), rng.normal(size=f.shape[1]),
                    rng.uniform(0.5, 2, size=f.shape[1]))
    for p in [rng.normal(size=f.shape[1]) for _ in range(5)] + [f[7] * nb.scale + nb.mean]:
        z = (p - nb.mean) / nb.scale
        direct = ((f - z) ** 2).sum(axis=1)
        assert nb._squared(p) == pytest.approx(direct, abs=1e-9)
        assert list(nb.order(p)[:5]) == list(np.argsort(direct, kind="stable")[:5])
    assert nb.distance(f[7] * nb.scale + nb.mean) == pytest.approx(0, abs=1e-6)

    sel = Selector.shipped("sm_90-cudnn-9.19")
    prob = problem_features(ConvSpec.parse("Conv2d(64, 64, kernel_size=3, padding=1)"), (8, 64, 56, 56), "float16",
                            "channels_last", "forward")
    cands = [(e, {}, {"b": i + 1}) for i, e in enumerate(sel.vocabulary.engines[:6])]
    first = sel.predict(prob, cands)
    sel._memo.clear()
    fresh = sel.predict(prob, cands[::-1])[::-1]
    assert first == pytest.approx(fresh, abs=1e-12) and sel.predict(prob, cands) == pytest.approx(first, abs=1e-12)


def test_neighbour_evidence_is_what_the_nearest_training_problems_of_the_class_measured():
    """Note [neighbour evidence] on a hand-made set: a configuration's evidence is the mean over the K nearest
    training problems of the same class that timed it, the nearest one's value and distance; absent where none of
    the class timed it; a problem's own entry left out when asked (training rows)."""
    from cudnn_algos.choose.model import EVIDENCE_ABSENT, Evidence

    points = np.array([[0.0], [1.0], [2.0], [3.0], [10.0]])
    entries = [[("1", 0.0), ("2", 0.5)], [("1", 0.2)], [("1", 0.4), ("2", 0.0)], [("1", 0.3)], [("3", 0.1)]]
    ev = Evidence.of(entries, klass=[0, 0, 0, 0, 1], k=2)
    got = ev.features(np.array([0.9]), 0, ["1", "2", "3", "9"], points)
    step = 1 / 2048  # values are kept in steps (evidence.VALUE_STEP)
    assert got[0] == pytest.approx([(0.2 + 0.0) / 2, 0.2, 0.1], abs=step)  # problems 1 (0.1 away) and 0 (0.9 away)
    assert got[1] == pytest.approx([(0.5 + 0.0) / 2, 0.5, 0.9], abs=step)  # problems 0 and 2 timed it
    assert list(got[2]) == list(EVIDENCE_ABSENT) and list(got[3]) == list(EVIDENCE_ABSENT)  # "3": another class
    mine = ev.features(np.array([1.0]), 0, ["1"], points, exclude=1)
    assert mine[0] == pytest.approx([(0.0 + 0.4) / 2, 0.0, 1.0], abs=step)  # itself left out: problems 0 and 2
    assert ev.features(np.array([10.0]), 1, ["3"], points)[0] == pytest.approx([0.1, 0.1, 0.0], abs=step)


def test_a_selector_with_evidence_round_trips_and_a_format_2_file_still_loads(tmp_path):
    """Trained with evidence, the file (format 5) holds it (and the guard's trees) as plain arrays, its values as
    two-byte steps, and predicts the same after loading; a format-4 file (float32 values) still loads, the same;
    evidence_k=0 trains without it, and a format-2 file (no evidence) still loads and predicts;
    trees trained with evidence refuse rows without it (they would read past a row's end); the shipped file loads
    and predicts."""
    pytest.importorskip("sklearn")
    from cudnn_algos.choose.features import row_features
    from cudnn_algos.choose.model import EVIDENCE_FEATURES, FORMAT
    from cudnn_algos.selector.train import engine_candidates, train

    problems = real_sample()
    sel = train(problems, family="sm_90-cudnn-9.19", params={"n_estimators": 40, "max_depth": 4})
    assert FORMAT == 5 and sel.evidence is not None and len(sel.evidence.klass) == 17
    assert sel.guard_trees is not None
    sel.save(tmp_path / "s.npz")
    with np.load(tmp_path / "s.npz", allow_pickle=False) as z:
        assert all(z[k].dtype != object for k in z.files) and z["ev_steps"].dtype == np.uint16
        arrays = {k: z[k] for k in z.files}
    back = Selector.load(tmp_path / "s.npz")
    np.testing.assert_array_equal(back.evidence.value, sel.evidence.value)  # exact: the values are steps
    np.testing.assert_array_equal(back.evidence.config, sel.evidence.config)
    header = json.loads(bytes(arrays.pop("header")).decode())
    arrays["ev_value"] = sel.evidence.value
    arrays["ev_config"] = sel.evidence.config
    del arrays["ev_steps"]
    np.savez_compressed(tmp_path / "f4.npz", header=np.frombuffer(json.dumps({**header, "format": 4}).encode(),
                                                                  dtype=np.uint8), **arrays)
    _, rows = problems[3]
    feats, cands = row_features(rows[0]), [c.encoded for c in engine_candidates(rows)]
    np.testing.assert_allclose(back.predict(feats, cands), sel.predict(feats, cands))
    np.testing.assert_array_equal(Selector.load(tmp_path / "f4.npz").predict(feats, cands), sel.predict(feats, cands))
    x = sel.rows(feats, cands)
    assert x.shape[1] == len(feats) + len(sel.vocabulary.names) + len(EVIDENCE_FEATURES)
    assert (x[:, -1] == 0).any()  # a training problem's own evidence is at distance 0 unless it is left out
    assert not (sel.rows(feats, cands, exclude=3)[:, -1] == 0).all()
    plain = train(problems, params={"n_estimators": 10, "max_depth": 3}, evidence_k=0)
    assert plain.evidence is None and plain.rows(feats, cands).shape[1] == len(feats) + len(plain.vocabulary.names)
    with np.load(io.BytesIO(plain.to_bytes()), allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    header = json.loads(bytes(arrays["header"]).decode())
    arrays["header"] = np.frombuffer(json.dumps({**header, "format": 2}).encode(), dtype=np.uint8)
    np.savez_compressed(tmp_path / "f2.npz", **arrays)
    old = Selector.load(tmp_path / "f2.npz")
    assert old.evidence is None and (old.predict(feats, cands) == plain.predict(feats, cands)).all()
    with pytest.raises(ValueError, match="without its evidence"):
        replace(sel, evidence=None).predict(feats, cands)
    shipped = Selector.shipped("sm_90-cudnn-9.19")
    assert len(shipped.predict(feats, cands)) == len(cands)


def test_neighbour_evidence_scanning_the_nearest_first_answers_as_a_whole_scan(monkeypatch):
    """Evidence.features scans the nearest HEAD training problems first and the whole class only for the
    configurations that found fewer than K there: on random problems it answers what a direct reading does (the
    K nearest that timed each configuration), whatever HEAD is."""
    from cudnn_algos.choose.model import EVIDENCE_ABSENT, Evidence

    rng = np.random.default_rng(5)
    points = rng.normal(size=(300, 4))
    entries = [[(str(c), round(rng.uniform(0, 0.5) * 2048) / 2048) for c in range(12) if rng.uniform() < (0.9 if c < 6 else 0.03)]
               for _ in range(300)]
    klass = rng.integers(0, 2, size=300)
    ev = Evidence.of(entries, klass=klass, k=5)
    keys = [str(c) for c in range(12)] + ["none"]

    def direct(z, cls, exclude=None):
        d = np.sqrt(((points - z) ** 2).sum(axis=1))
        out = []
        for key in keys:
            near = sorted((d[i], v) for i, es in enumerate(entries) if klass[i] == cls and i != exclude
                          for k_, v in es if k_ == key)[:5]
            out.append([np.mean([v for _, v in near]), near[0][1], near[0][0]] if near else list(EVIDENCE_ABSENT))
        return np.array(out)

    for head in (64, 8, 3):
        monkeypatch.setattr(Evidence, "HEAD", head)
        for j in range(6):
            z = rng.normal(size=4)
            np.testing.assert_allclose(ev.features(z, j % 2, keys, points), direct(z, j % 2), rtol=1e-6)
        i = 17
        np.testing.assert_allclose(ev.features(points[i], int(klass[i]), keys, points, exclude=i),
                                   direct(points[i], int(klass[i]), exclude=i), rtol=1e-6)


def test_evidence_values_are_kept_in_steps_and_refused_outside_what_two_bytes_hold():
    """Evidence.of rounds values to VALUE_STEP and sorts entries by problem, then configuration (stable: a problem's
    repeated configuration keeps its order); quantized() refuses negative, non-finite and too large values."""
    from cudnn_algos.choose.evidence import VALUE_STEP, Evidence, quantized

    ev = Evidence.of([[("b", 0.30001), ("a", 0.1)], [("a", 0.0), ("b", 0.5)]], [0, 0])
    assert ev.configs == ("a", "b") and ev.problem.tolist() == [0, 0, 1, 1] and ev.config.tolist() == [0, 1, 0, 1]
    assert ev.value.tolist() == [round(0.1 / VALUE_STEP) * VALUE_STEP, round(0.30001 / VALUE_STEP) * VALUE_STEP,
                                 0.0, 0.5]
    for bad in ([-0.01], [float("nan")], [40.0]):
        with pytest.raises(ValueError, match="evidence values"):
            quantized(np.array(bad))


def test_the_guard_trees_weigh_in_the_ranking_by_the_selectors_blend(tmp_path):
    """Note [the guard trees in the ranking]: with guard trees, ranked() orders by the ranking trees' prediction plus
    blend x the guard trees' (0: the ranking trees' alone) and still returns the ranking trees' predictions (the
    guard and k="auto" read those); blend is saved and loaded (a file without it: 0), and a negative or non-finite
    blend is refused."""
    pytest.importorskip("sklearn")
    from cudnn_algos.choose.features import row_features
    from cudnn_algos.choose.model import BLEND
    from cudnn_algos.selector.train import engine_candidates, train

    problems = real_sample()
    sel = train(problems, family="sm_90-cudnn-9.19", params={"n_estimators": 40, "max_depth": 4}, guard=None,
                guard_cap=2.0)
    assert sel.guard_trees is None and sel.blend == 0.0, "no guard: no guard trees, nothing to blend"
    sel = train(problems, family="sm_90-cudnn-9.19", params={"n_estimators": 40, "max_depth": 4})
    assert sel.blend == BLEND > 0 and sel.guard_trees is not None
    plain = replace(sel, blend=0.0, guard=None, reach=float("inf"))
    heavy = replace(plain, blend=50.0)
    moved = 0
    for _, rows in problems:
        feats, cands = row_features(rows[0]), [c.encoded for c in engine_candidates(rows)]
        pred = plain.predict(feats, cands)
        g = plain.guard_trees.predict(plain.rows(feats, cands))
        order, got = heavy.ranked(feats, cands)
        np.testing.assert_array_equal(got, pred)
        want = heavy.known_first(feats, cands, [int(i) for i in np.argsort(pred + 50.0 * g, kind="stable")])
        assert order == want
        assert plain.ranked(feats, cands)[0] == plain.known_first(
            feats, cands, [int(i) for i in np.argsort(pred, kind="stable")])
        moved += order[0] != plain.ranked(feats, cands)[0][0]
    assert moved > 0, "a heavy blend changes some first pick"
    sel.save(tmp_path / "s.npz")
    assert Selector.load(tmp_path / "s.npz").blend == BLEND
    with np.load(tmp_path / "s.npz", allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    header = json.loads(bytes(arrays.pop("header")).decode())
    del header["blend"]
    np.savez_compressed(tmp_path / "old.npz", header=np.frombuffer(json.dumps(header).encode(), dtype=np.uint8),
                        **arrays)
    assert Selector.load(tmp_path / "old.npz").blend == 0.0
    for bad in (-0.5, float("nan"), True):
        with pytest.raises(ValueError, match="blend"):
            replace(sel, blend=bad)


def test_train_leaving_groups_out(tmp_path):
    """`selector train --leave-out`: a model trained without a batch size's (or a family's) problems, for an
    evaluation through apply() on them; the file says what was left out; a group no problem has, or leaving out
    everything, is a usage error naming it (CPU: hand-made problems)."""
    pytest.importorskip("sklearn")
    from cudnn_algos.selector.train import outside

    problems = [table_problem(i, fam, batch=b) for fam in ("a", "b") for b in (8, 128) for i in range(3)]
    assert [k for k, _ in outside(problems, "batch", [8])] == ["a0", "a1", "a2", "b0", "b1", "b2"]
    assert {rows[0]["input_shape"].split("x")[0] for _, rows in outside(problems, "batch", ["8"])} == {"128"}
    assert {rows[0]["families"][0] for _, rows in outside(problems, "family", ["a"])} == {"b"}
    assert outside(problems, "family", ["a", "b"]) == []
    with pytest.raises(ValueError, match=r"groups=\['9'\]: 9 is not a batch of these problems \(they have: 128, 8\)"):
        outside(problems, "batch", [9])
    store = tmp_path / "s.sqlite"
    with SweepStore(store) as s:
        for n, (key, rows) in enumerate(problems):
            s.put(f"{key}-{n}", "done", rows, env="H200")
    model = tmp_path / "m.npz"
    r = run_cli("selector", "train", store, "--out", model, "--learner", "hist", "--by", "batch", "--leave-out", "8")
    assert r.returncode == 0 and "trained on 6 problem-directions" in r.stdout, r.stdout + r.stderr
    shown = run_cli("selector", "show", model).stdout
    assert "left out: batch 8" in shown, shown
    for args, says in ((("--by", "batch", "--leave-out", "9"), "--leave-out 9: 9 is not a batch of these problems"),
                       (("--leave-out", "a,b"), "--leave-out a,b: every problem is in it")):
        bad = run_cli("selector", "train", store, "--out", tmp_path / "x.npz", "--learner", "hist", *args)
        assert bad.returncode == 2 and says in bad.stderr and "Traceback" not in bad.stderr, bad.stderr
    bad = run_cli("selector", "eval", store, "--leave-out", "8")
    assert bad.returncode == 2 and "only selector train takes it" in bad.stderr, bad.stderr
