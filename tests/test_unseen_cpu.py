"""CPU: apply(unseen=...)'s parts that need no GPU — argument checks, the shipped selector's lookup, the selector's
shortlist and reach rules on hand-made candidates, and the unseen-problem handler driven by a stand-in for cuDNN's
heuristic lists (backend.engine_search replaced by a function returning hand-made configurations, asked through the
helper process's own query and reply code in this process: no cuDNN, no GPU; what the handler answers is checked
against the selector's own ranking), and the helper process itself started for real (its answers on a machine with
no GPU are cuDNN's errors, which is what the test checks). The operator asking the handler, and the choices' outputs
against torch, are GPU tests (tests/test_gpu_apply.py)."""
import dataclasses
import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch

import cudnn_algos
from cudnn_algos import backend
from cudnn_algos.configs import config_name
from cudnn_algos.problem import make_problem
from cudnn_algos.selector import Selector, problem_features
from cudnn_algos.choose.model import (AUTO_MAX, AUTO_OUTSIDE, AUTO_PER_ENGINE, REACH, auto_parts, engines_first,
                                      heuristic_order, instant_first)
from cudnn_algos.choose import lists_process
from cudnn_algos.choose import unseen as unseen_mod
from cudnn_algos.choose.ranking import Candidate, with_known
from cudnn_algos.choose.unseen import UnseenHandler, candidates_of, query_problem

FAMILY = "sm_90-cudnn-9.19"


def _parts(a: backend.MissAnswer, built: bool = False) -> tuple:
    """An unseen-problem handler's answer as (configs, origin, why[, built])."""
    assert isinstance(a, backend.MissAnswer)
    return (list(a.configs), a.origin, a.why) + ((list(a.built),) if built else ())


def shipped():
    return Selector.shipped(FAMILY)


def test_the_package_ships_the_h200_selector_and_names_what_it_has_otherwise():
    sel = shipped()
    assert sel.family == FAMILY and sel.trained_on["problems"] > 100
    with pytest.raises(ValueError, match=r"no selector ships for sm_75-cudnn-9.1 \(shipped: sm_90-cudnn-9.19\)"):
        Selector.shipped("sm_75 cudnn 9.1")
    from conftest import ENV

    with pytest.raises(TypeError, match=r"family=<bound method .*selector_family"):  # the method, not its answer
        Selector.shipped(ENV.selector_family)


def test_environment_family():
    from conftest import ENV

    assert ENV.selector_family() == "sm_90-cudnn-9.19"


@pytest.mark.parametrize("kwargs, match", [
    (dict(unseen="bogus"), "unseen='bogus' must be one of: 'torch', 'predict', 'measure_top_k'"),
    (dict(unseen=None), "unseen=None must be one of"),
    (dict(unseen="measure_top_k", k=0), "k=0 must be an int >= 1"),
    (dict(unseen="measure_top_k", k=True), "k=True must be an int >= 1"),
    (dict(unseen="measure_top_k", k="Auto"), "k='Auto' must be an int >= 1 .* or 'auto'"),
    (dict(unseen="predict", selector="/nonexistent/sel.npz"), "selector='/nonexistent/sel.npz'"),
    (dict(unseen="predict", selector=3), "selector= must be a cudnn_algos.selector.Selector or its .npz file"),
])
def test_apply_checks_unseen_arguments_before_touching_the_model(kwargs, match, tmp_path):
    model = torch.nn.Conv2d(3, 4, 3)
    before = model.forward
    with pytest.raises(ValueError, match=match):
        cudnn_algos.apply(model, tmp_path / "t.sqlite", **kwargs)
    assert model.forward == before and "forward" not in model.__dict__


def test_apply_unseen_on_a_cpu_model_runs_torchs_op(tmp_path):
    """No GPU here: the operator's CPU kernel is torch's convolution; nothing is chosen, the output is torch's."""
    model = torch.nn.Conv2d(3, 4, 3)
    x = torch.randn(2, 3, 8, 8)
    ref = model(x)
    with cudnn_algos.apply(model, tmp_path / "t.sqlite", unseen="predict", selector=shipped()) as h:
        torch.testing.assert_close(model(x), ref)
        assert h.unseen == "predict" and h.decisions() == []


def _cand(e, a=None, b=None, knobs=None):
    return (e, knobs or {}, {"a": a, "b": b})


def test_heuristic_order_is_b_then_a_then_unlisted():
    cands = [_cand(1, a=0), _cand(2, a=1, b=2), _cand(3), _cand(4, b=0), _cand(5, a=3, b=1)]
    assert heuristic_order(cands) == [3, 4, 1, 0, 2]


def test_shortlist_holds_cudnns_first_beside_the_selectors_first_k_minus_1_and_instants_first():
    """k an int: the selector's first k - 1, cuDNN's first (B's), and INSTANT's first (torch's benchmark-off pick)
    after them where it is not among them; so k, or k + 1 with INSTANT's first added."""
    sel = shipped()
    feats = problem_features(cudnn_algos.ConvSpec(64, 64, (3, 3), padding=1), (32, 64, 56, 56), "float16",
                             "channels_last", "forward")
    cands = [_cand(e, a=i, b=(len(ENG) - 1 - i)) for i, e in enumerate(ENG)]
    order = sel.rank(feats, cands)
    anchor = heuristic_order(cands)[0]
    assert instant_first(cands) == [0] and anchor == len(ENG) - 1
    for k in (1, 2, 3, 5):
        short = sel.shortlist(feats, cands, k)
        assert len(set(short)) == len(short) and anchor in short and 0 in short
        assert short[:k - 1] == order[:k - 1] or anchor in order[:k - 1]
        assert len(short) == k + (0 not in short[:k]) and (short[-1] == 0 or 0 in short[:k])
    unlisted = [_cand(e) for e in ENG[:3]] + [_cand(9, b=0)]
    assert instant_first(unlisted) == [] and len(sel.shortlist(feats, unlisted, 2)) == 2


ENG = (0, 1, 9, 28, 47, 58, 62, 67)


def test_the_automatic_shortlist_times_what_the_trees_leave_close_and_cudnns_first():
    """Note [the automatic shortlist]: within reach, the trees' first, cuDNN's first, and every candidate predicted
    within AUTO_SPREAD (0.3) of the trees' first (AUTO_MAX at most); outside the reach the same, and cuDNN's first
    AUTO_OUTSIDE after them."""
    sel = shipped()
    feats = problem_features(cudnn_algos.ConvSpec(64, 64, (3, 3), padding=1), (32, 64, 56, 56), "float16",
                             "channels_last", "forward")
    assert sel.within_reach(feats)
    cands = [_cand(e, a=i, b=(len(ENG) - 1 - i), knobs=kn) for i, (e, kn) in enumerate(
        [(e, {}) for e in ENG] + [(e, {"TILE_SIZE": t}) for e in (58, 65, 67) for t in (1, 4)])]
    anchor = heuristic_order(cands)[0]  # cuDNN's first: index 13 (B's position 0)
    # the rule on given predictions: 0 first, cuDNN's first, then 2 and 3 (within 0.3 of 0's); 4 at 0.31 is not
    predicted = np.array([0.0, 0.9, 0.1, 0.29, 0.31] + [1.0] * (len(cands) - 5))
    order = [int(i) for i in np.argsort(predicted, kind="stable")]
    assert sel.shortlist(feats, cands, "auto", order, predicted) == [0, anchor, 2, 3]
    ties = [0, anchor] + [i for i in range(len(cands)) if i not in (0, anchor)][:AUTO_MAX - 2]  # in index order
    assert sel.shortlist(feats, cands, "auto", order, predicted - predicted) == ties
    # auto_parts: a runtime-compiled addition (2 here) is left for later; one of its first two (0 here) is not
    short = sel.shortlist(feats, cands, "auto", order, predicted)
    assert auto_parts(short, lambda i: i == 2) == ([0, anchor, 3], [2])
    assert auto_parts(short, lambda i: i in (0, anchor)) == ([0, anchor, 2, 3], [])
    # the trees' own predictions: every candidate here is close, so AUTO_MAX of them, the trees' first leading
    # (predict's pick: the trees' first, or INSTANT's where the guard keeps it: Note [a guard against INSTANT's first])
    short = sel.shortlist(feats, cands, "auto")
    trees_first = int(np.argmin(sel.predict(feats, cands)))
    assert len(short) == AUTO_MAX == len(set(short)) and short[:2] == [trees_first, anchor]
    # predict's first: the trees' ranking with the guard trees' weight in it (Note [the guard trees in the ranking]),
    # or INSTANT's first (the guard)
    blended = sel.predict(feats, cands) + sel.blend * sel.guard_trees.predict(sel.rows(feats, cands))
    assert sel.rank(feats, cands)[0] in (int(np.argmin(blended)), instant_first(cands)[0])
    far = list(feats)
    far[0] = 40.0  # batch 2**40: beyond every training problem
    assert not sel.within_reach(far)
    h = heuristic_order(cands)
    # outside the reach the trees still shortlist (the order given, cuDNN's there, is not theirs), and cuDNN's first
    # AUTO_OUTSIDE join after them
    short = sel.shortlist(far, cands, "auto", h, predicted)
    assert short == [0, anchor, 2, 3] + [i for i in h[:AUTO_OUTSIDE] if i not in (0, anchor, 2, 3)]
    assert len(short) > 4 and auto_parts(short, lambda i: i == short[-1]) == (short[:-1], short[-1:])
    assert sel.shortlist(far, cands, "auto", h, predicted - predicted) == ties  # all close: AUTO_MAX of them
    own = sel.predict(far, cands)  # without predictions given: the trees' own, though predict's pick there is
    # h[0] without a guard, and with one the trees' first or INSTANT's (Note [a guard against INSTANT's first])
    short = sel.shortlist(far, cands, "auto")
    assert sel.unguarded.rank(far, cands)[0] == h[0] and short[0] == int(np.argmin(own)) and h[0] in short[:2]
    blended = own + sel.blend * sel.guard_trees.predict(sel.rows(far, cands))
    assert sel.rank(far, cands)[0] in (int(np.argmin(blended)), instant_first(cands)[0])


def test_outside_its_reach_the_selector_ranks_as_cudnn_does():
    sel = shipped()
    far = [50.0] * len(problem_features(cudnn_algos.ConvSpec(8, 8, (3, 3)), (1, 8, 8, 8), "float32", "contiguous",
                                        "forward"))
    cands = [_cand(e, a=i, b=(len(ENG) - 1 - i)) for i, e in enumerate(ENG)]
    assert not sel.within_reach(far) and sel.neighbours.distance(far) > REACH
    assert sel.unguarded.rank(far, cands) == heuristic_order(cands)  # with a guard the trees rank there too


def _plan(e, knobs=(), notes=(), status="NOT_BUILT", ranks=(), behavior=()):
    return backend.Plan(engine_id=e, knobs=tuple(knobs), numerical_notes=tuple(notes), behavior_notes=tuple(behavior),
                        sources=tuple(s for s, _ in ranks), heuristic_ranks=tuple(ranks), status=status, stage="plan",
                        workspace_bytes=-1, plan_json="")


def _query(dtype="float16", det=False):
    return SimpleNamespace(key="forward float16 x", direction="forward", problem=None, deterministic=det,
                           allow_tf32=True, device=0, x=[32, 64, 56, 56], w=[128, 64, 3, 3], padding=[1, 1],
                           stride=[1, 1], dilation=[1, 1], groups=1, dtype=dtype, channels_last=True)


def test_query_problem_reads_the_cudnn_problem():
    spec, shape, dtype, fmt, direction = query_problem(_query())
    assert (spec.in_channels, spec.out_channels, spec.kernel_size, spec.padding) == (64, 128, (3, 3), (1, 1))
    assert shape == (32, 64, 56, 56) and (dtype, fmt, direction) == ("float16", "channels_last", "forward")


def test_candidates_drop_what_torch_would_not_run_and_repeats():
    plans = [_plan(1, ranks=(("heuristic_a", 0),)),
             _plan(2, notes=(1,), ranks=(("heuristic_a", 1),)),  # 1: DOWN_CONVERT
             _plan(3, notes=(4,), ranks=(("heuristic_b", 0),)),  # 4: NONDETERMINISTIC
             _plan(1, ranks=(("heuristic_b", 3),)), _plan(5, status="NOT_SUPPORTED")]
    assert [c.engine_id for c in candidates_of(plans, "float16", False, True)] == [1, 3]
    assert [c.engine_id for c in candidates_of(plans, "float16", True, True)] == [1]
    assert candidates_of(plans, "float16", False, True)[0].encoded == (1, {}, {"a": 0})
    # cuDNN's behaviour note RUNTIME_COMPILATION (0) marks a candidate, and the mark survives the helper's reply
    plans = [_plan(1, ranks=(("heuristic_a", 0),)), _plan(2, behavior=(3, 0), ranks=(("heuristic_a", 1),))]
    cands = candidates_of(plans, "float16", False, True)
    assert [c.compiled for c in cands] == [False, True]
    assert [Candidate.from_row(c.row()) for c in cands] == cands
    # Note [few objects per reply]: a candidate travels as one flat tuple of plain values, and candidates read back
    # share their knobs' and positions' tuples (one new object per candidate)
    knobs, ranks = ((2, 0), (13, 1)), (("a", 0), ("b", 3))
    same = [Candidate(62, knobs, ranks), Candidate(62, tuple(list(knobs)), tuple(list(ranks)), True)]
    rows = [c.row() for c in same]
    assert rows[0] == (62, False, 2, 2, 0, 13, 1, "a", 0, "b", 3)
    assert all(isinstance(x, (int, str)) for r in rows for x in r)
    back = [Candidate.from_row(list(r)) for r in rows]
    assert [c.compiled for c in back] == [False, True] and [c.knobs for c in back] == [knobs] * 2
    assert back[0].knobs is back[1].knobs and back[0].ranks is back[1].ranks
    assert Candidate.from_row(Candidate(5, ()).row()) == Candidate(5, ())


class ListsHere:
    """ListsProcess's stand-in: each query answered in this process by the helper's own answer() and read back by
    ListsProcess's plans_of() / ranking_of(), with backend.engine_search (the tests replace it) as cuDNN and the
    selector read back from the bytes the handler gives it, as the helper reads it."""

    made = 0
    used: list = []  # which of ask() (the lists, ranked by the caller) and rank() (ranked by the helper) was called

    def __init__(self):
        ListsHere.made += 1
        self.selector = None

    def ask(self, direction, problem, lists, device):
        ListsHere.used.append("ask")
        return lists_process.plans_of(lists_process.answer((0, "lists", direction, problem, tuple(lists), device),
                                                            backend.engine_search))

    def set_selector(self, data):
        self.selector = Selector.from_bytes(data)

    def rank(self, direction, problem, lists, device, features, dtype, det, tf32, k=0, memory_format=""):
        ListsHere.used.append("rank")
        query = (0, "rank", direction, problem, tuple(lists), device, list(features), dtype, det, tf32, k,
                 memory_format)
        return lists_process.ranking_of(lists_process.answer(query, backend.engine_search, self.selector))

    def close(self):
        pass


@pytest.fixture
def lists_here(monkeypatch):
    monkeypatch.setattr(unseen_mod, "ListsProcess", ListsHere)


@pytest.fixture
def fake_lists(monkeypatch, lists_here):
    """backend.engine_search replaced: the heuristic lists answer these hand-made configurations (no cuDNN)."""
    plans = [_plan(e, knobs=((2, i % 3),), ranks=(("heuristic_a", i), ("heuristic_b", len(ENG) - 1 - i)))
             for i, e in enumerate(ENG)]
    calls = []

    def engine_search(direction, cp, heuristics=(), *a, build=True, **k):
        calls.append((direction, tuple(heuristics), build))
        return backend.EngineSearchOut(plans=tuple(plans), engine_count=len(plans), search_ms=0.1)

    monkeypatch.setattr(unseen_mod.backend, "engine_search", engine_search)
    return plans, calls


def test_predict_answers_the_selectors_order_without_building(fake_lists):
    plans, calls = fake_lists
    sel = shipped()
    h = UnseenHandler("predict", sel)
    configs, origin, why = _parts(h(_query()))
    assert calls == [("forward", ("a", "b"), False)]  # the lists queried, nothing built
    cands = with_known(candidates_of(plans, "float16", False, True),
                       sel.known_for("forward", "float16", "channels_last"))
    order = sel.rank(problem_features(*query_problem(_query())), [c.encoded for c in cands])
    assert cands[order[0]].listed  # (else it would have been built and checked: Note [a candidate's output checked])
    # the ranking, less the configurations no list offered after its first (the operator would build them unchecked)
    assert configs == [(cands[i].engine_id, tuple(cands[i].knobs)) for i in order
                       if i == order[0] or cands[i].listed]
    assert (origin, why) == ("predicted", "")
    d = h.decisions[0]
    assert d.origin == "predicted" and d.offered[0] == cands[order[0]].name and d.seconds >= 0


@pytest.mark.parametrize("in_helper", [True, False])
def test_known_configurations_are_ranked_beside_the_lists(fake_lists, in_helper):
    """Note [known configurations]: the selector's known configurations of the problem's class (direction, dtype,
    memory format) join the lists' candidates, once (one the lists name is not added again), in the helper or in
    this process; under cudnn.deterministic only those that were deterministic; float32 with allow_tf32 off none."""
    from dataclasses import replace

    class Mine(Selector):
        pass

    plans, _ = fake_lists
    sel = shipped()
    listed = candidates_of(plans, "float16", False, True)[0].name
    known = {"forward float16 channels_last": (("eng70{SPLIT_K_SLC=1}", False), (listed, True),
                                               ("eng71{SPLIT_K_SLC=1}", True)),
             "forward float32 contiguous": (("eng70{SPLIT_K_SLC=1}", True),)}
    sel = replace(sel, known=known) if in_helper else Mine(sel.vocabulary, sel.trees, sel.neighbours, sel.family,
                                                         sel.trained_on, sel.reach, known, sel.evidence)
    # what predict ranks (its answer leaves out the unlisted ones after its first: Note [a candidate's output checked])
    names = lambda q: {c.name for c in UnseenHandler("predict", sel).ranked(q)[0]}  # noqa: E731
    got = names(_query())
    assert len(got) == len(plans) + 2 and {"eng70{SPLIT_K_SLC=1}", "eng71{SPLIT_K_SLC=1}"} <= got
    got = names(_query(det=True))
    assert "eng71{SPLIT_K_SLC=1}" in got and "eng70{SPLIT_K_SLC=1}" not in got
    q = _query(dtype="float32")
    q.channels_last = False
    assert "eng70{SPLIT_K_SLC=1}" in names(q)
    q.allow_tf32 = False
    assert "eng70{SPLIT_K_SLC=1}" not in names(q)


def test_predict_in_the_background_answers_at_once_then_at_the_next_call(fake_lists, monkeypatch):
    """Note [choosing in the background]: the operator's call gets nothing (torch's op runs, the reason says why) and
    the problem is queued once; a thread queries and ranks (building nothing) and asks the registry to ask again;
    the problem's next call gets the selector's ranking, as the first-call handler answers it."""
    plans, calls = fake_lists
    sel = shipped()
    asked = []
    monkeypatch.setattr(unseen_mod.backend, "pinned_ask_again", asked.append)
    h = UnseenHandler("predict", sel, background=True)
    assert h(_query()) == backend.MissAnswer(why=unseen_mod.BACKGROUND_WHY)
    # asked again before the choice is in: queued once
    assert h(_query()) == backend.MissAnswer(why=unseen_mod.BACKGROUND_WHY)
    assert h.wait(10) and asked == ["forward float16 x"]
    assert calls == [("forward", ("a", "b"), False)]  # the lists queried once, on the thread, nothing built
    configs, origin, why = _parts(h(_query()))
    assert (configs, origin, why) == _parts(UnseenHandler("predict", sel)(_query()))  # the first-call handler's answer
    assert [d.origin for d in h.decisions] == ["predicted"] and h.decisions[0].offered
    h.close()
    stopped = "no stored winner; the selector's background threads were stopped"
    assert h(_query()) == backend.MissAnswer(why=stopped)


@pytest.mark.parametrize("k", [3, "auto"])
def test_measure_top_k_in_the_background_ranks_there_and_times_at_the_next_call(fake_lists, monkeypatch, k):
    """measure_top_k in the background: the thread queries and ranks and asks the registry to ask again; the
    problem's next call (the operator's thread) times the shortlist the thread made and answers the fastest first."""
    plans, calls = fake_lists
    sel = shipped()
    asked = []
    monkeypatch.setattr(unseen_mod.backend, "pinned_ask_again", asked.append)
    h = UnseenHandler("measure_top_k", sel, k=k, background=True, threads=2)
    timed_with = []

    def timed(q, ranked, short):  # stands in for the GPU timing: the shortlist's last is the fastest
        timed_with.append([c.name for c in short])
        return [short[-1]] + [c for c in ranked if c != short[-1]], [0.5], None, [], []

    monkeypatch.setattr(h, "timed", timed)
    assert h(_query()) == backend.MissAnswer(why=unseen_mod.BACKGROUND_WHY)
    assert h.wait(10) and asked == ["forward float16 x"] and timed_with == []  # ranked, nothing timed yet
    configs, origin, why = _parts(h(_query()))
    cands = with_known(candidates_of(plans, "float16", False, True),
                       sel.known_for("forward", "float16", "channels_last"))
    feats = problem_features(*query_problem(_query()))
    short = [cands[i] for i in sel.shortlist(feats, [c.encoded for c in cands], k)]
    assert timed_with == [[c.name for c in short]] and origin == "measured_top_k" and why == ""
    assert configs[0] == (short[-1].engine_id, tuple(short[-1].knobs))
    assert calls == [("forward", ("a", "b"), False)]  # the lists queried once, by the thread
    assert [d.origin for d in h.decisions] == ["measured_top_k"] and h.decisions[0].timed_ms == (0.5,)
    h.close()


def test_a_shortlists_plans_are_matched_to_its_candidates_by_configuration_not_position():
    """shortlist_clock.rows_for: an exact search lists a configuration named twice once, gives a knob not named its
    minimum and drops a knob the engine lacks, so its rows need not pair up with the candidates in order (pairing
    them so once timed nothing for a whole shortlist). Each candidate gets the row of its own configuration."""
    from cudnn_algos.choose.shortlist_clock import rows_for

    row = lambda e, knobs, status="SUCCESS": SimpleNamespace(engine_id=e, knobs=[list(k) for k in knobs],
                                                             status=status)
    a = Candidate(63, ((3, 2),))  # WORKSPACE=2: this problem's engine 63 takes no such value (no row of its own)
    b = Candidate(63, ((3, 1),))
    c = Candidate(78, ((9, 1), (7, 23)))
    d = Candidate(78, ((9, 1), (7, 23)))  # the same configuration as c, named again: one row
    e = Candidate(5, ())  # no knobs named: its engine's row, whatever knobs the search gave it
    rows = [row(78, ((9, 1), (7, 23), (4, 0))), row(5, ((1, 0),)), row(63, ((3, 1),)), row(12, (), "NOT_SUPPORTED")]
    got = rows_for([a, b, c, d, e, Candidate(12, ((1, 1),)), Candidate(12, ())], rows)
    assert got == {b: rows[2], c: rows[0], e: rows[1], Candidate(12, ()): rows[3]}


def test_each_timed_sample_runs_behind_a_hold_long_enough_to_queue_its_calls(monkeypatch):
    """Note [a held stream]: time_on holds the stream before every sample (twice the warm-up call's host time per
    call, at least HOLD_MIN_MS), doubles the hold for the next samples where one's launches outlasted it, and takes
    the median of the samples' event times per call; an unbuilt plan gets no time and no hold. (CPU: plans stand in
    for the extension's; the hold is recorded, not run.)"""
    from cudnn_algos.choose import shortlist_clock as sc

    log = []
    monkeypatch.setattr(sc, "hold", lambda ms: log.append(("hold", round(ms, 6))))

    class Plan:
        status = "SUCCESS"

        def __init__(self, host, gpu):
            self.host, self.gpu = list(host), list(gpu)

        def time_calls(self, x, w, y, calls):
            log.append(("calls", calls))
            return SimpleNamespace(host_ms=self.host.pop(0), gpu_ms=self.gpu.pop(0))

    ops = {"x": 1, "w": 2, "y": 3}
    slow = Plan([0.02, 0.1, 0.5, 0.1], [0.1, 0.5, 0.7, 0.6])  # the second sample's launches outlast its hold (0.2)
    tiny = Plan([0.001, 0.001, 0.001, 0.001], [0.01, 0.02, 0.01, 0.03])
    ms = sc.time_on([slow, None, SimpleNamespace(status="FAILED"), tiny], ops, calls=5, samples=3)
    assert ms == [pytest.approx(0.6 / 5), None, None, pytest.approx(0.02 / 5)]
    assert log == [("calls", 1), ("hold", 0.2), ("calls", 5), ("hold", 0.2), ("calls", 5), ("hold", 1.0), ("calls", 5),
                   ("calls", 1), ("hold", sc.HOLD_MIN_MS), ("calls", 5), ("hold", sc.HOLD_MIN_MS), ("calls", 5),
                   ("hold", sc.HOLD_MIN_MS), ("calls", 5)]


def test_the_automatic_shortlist_takes_other_engines_before_a_third_of_one():
    """Note [the automatic shortlist]: where more candidates are close than AUTO_MAX, an engine's configurations
    beyond AUTO_PER_ENGINE (those already shortlisted counted) wait behind the other engines' close ones, each part
    in the trees' order; where all fit, the same candidates as before."""
    cands = [_cand(e) for e in (67, 67, 67, 67, 9, 67, 28)]
    assert AUTO_PER_ENGINE == 2 and engines_first([1, 2, 3, 4, 5, 6], [0], cands) == [1, 4, 6, 2, 3, 5]
    assert engines_first([1, 2, 3], [], cands, per=1) == [1, 2, 3] and engines_first([], [0], cands) == []
    sel = shipped()
    feats = problem_features(cudnn_algos.ConvSpec(64, 64, (3, 3), padding=1), (32, 64, 56, 56), "float16",
                             "channels_last", "forward")
    # twelve configurations of engine 67 predicted closest, then four other engines (all within AUTO_SPREAD)
    many = [_cand(67, a=0 if t == 0 else None, b=0 if t == 0 else None, knobs={"TILE_SIZE": t}) for t in range(12)]
    cands = many + [_cand(e) for e in (1, 9, 28, 47)]
    predicted = np.array([0.01 * i for i in range(12)] + [0.2, 0.21, 0.22, 0.23])
    order = [int(i) for i in np.argsort(predicted, kind="stable")]
    short = sel.shortlist(feats, cands, "auto", order, predicted)
    assert len(short) == AUTO_MAX and short[:2] == [0, 1] and set(short[2:6]) == {12, 13, 14, 15}
    assert short[6:] == [2, 3, 4, 5]  # the rest of engine 67's, in the trees' order
    few = np.array([0.01 * i for i in range(12)] + [0.5] * 4)  # the others beyond the spread: as before
    assert sel.shortlist(feats, cands, "auto", order, few) == list(range(AUTO_MAX))


def test_auto_builds_runtime_compiled_candidates_later_and_swaps_in_a_faster_one(monkeypatch):
    """Note [runtime-compiled candidates later]: k="auto" builds and times its first two (runtime-compiled or not)
    and the additions not marked at once, answering the fastest with its plan; a marked addition, and one the build
    skipped for runtime compilation, are built by the later thread, the winner forgotten (pinned_ask_again with the
    handler's origin), and the next call times the winner beside them and answers the fastest, its decision
    replaced. (CPU: builds and timings stand in for cuDNN's.)"""
    c = [Candidate(e, (), (), compiled=e in (1, 3)) for e in range(6)]  # 1 (cuDNN's first) and 3 marked
    ranked, short = [c[0], c[2], c[1], c[3], c[4], c[5]], [c[0], c[1], c[2], c[3], c[4]]
    builds, asked = [], []
    ms = {0: 0.3, 1: 0.2, 2: 0.4, 3: 0.1, 4: 0.25}

    def build(q, cands, runtime_compiled, threads=1):
        builds.append(([x.engine_id for x in cands], runtime_compiled))
        skipped = {4} if not runtime_compiled else set()  # 4: a known one the lists did not mark
        return {x: SimpleNamespace(e=x.engine_id, live=("extension's plan", x.engine_id),
                                   status="SKIPPED_RUNTIME_COMPILATION" if x.engine_id in skipped else "SUCCESS")
                for x in cands}

    monkeypatch.setattr(unseen_mod, "build", build)
    monkeypatch.setattr(unseen_mod, "time_plans",
                        lambda q, plans, calls, samples: ([ms[p.e] for p in plans], [1e-3] * len(plans)))
    stored = iter([False, True])  # the operator has not stored the first answer yet when the build ends: again

    def ask_again(key, origin=""):
        asked.append((key, origin))
        return next(stored)

    monkeypatch.setattr(unseen_mod.backend, "pinned_ask_again", ask_again)
    h = UnseenHandler("measure_top_k", shipped(), k="auto", background=False)
    monkeypatch.setattr(h, "ranked", lambda q: (ranked, short, 0.0))
    configs, origin, why, plans = _parts(h(_query()), built=True)
    assert [e for e, _ in configs[:3]] == [1, 0, 2] and origin == "measured_top_k"
    assert plans == [("extension's plan", 1)]  # the binding takes the extension's object, not backend.Plan
    assert builds[:2] == [([0, 1], True), ([2, 4], False)]  # 3 is not built at once; 4 comes back skipped
    assert h.wait(10) and builds[2:] == [([3, 4], True)] and asked == [("forward float16 x", "measured_top_k")] * 2
    assert h.decisions[0].later == 0 and h.decisions[0].timed_ms == (0.2, 0.3, 0.4)
    # until then Applied.keep() stores the winner it ran (forgotten in the registry)
    assert h.forgotten() == [{"key": "forward float16 x", "origin": "measured_top_k", "config": c[1].name}]
    # the next call: the winner (1) timed beside 3 and 4; 3 is faster
    configs, origin, why, plans = _parts(h(_query()), built=True)
    assert [e for e, _ in configs[:3]] == [3, 1, 4] and plans == [("extension's plan", 3)]
    (d,) = h.decisions
    assert d.later == 2 and d.timed_ms == (0.1, 0.2, 0.25) and d.offered[0] == c[3].name
    # c[5], never timed and named by no list (these stand-ins carry no positions), is not offered: the operator
    # would build it unchecked (Note [a candidate's output checked])
    assert set(d.offered) == {x.name for x in c[:5]} and h.forgotten() == []
    h.close()


def _checking(monkeypatch, errs):
    """build and check_plans stand in for cuDNN's: every candidate builds; its output's error is errs[engine id]."""
    builds = []

    def build(q, cands, runtime_compiled, threads=1):
        builds.append([x.engine_id for x in cands])
        return {x: SimpleNamespace(e=x.engine_id, live=("plan", x.engine_id), status="SUCCESS") for x in cands}

    monkeypatch.setattr(unseen_mod, "build", build)
    monkeypatch.setattr(unseen_mod, "check_plans", lambda q, plans: [errs[p.e] for p in plans])
    monkeypatch.setattr(unseen_mod, "time_plans", lambda q, plans, calls, samples: (
        [None if errs[p.e] > 0.1 else 0.1 * p.e for p in plans], [errs[p.e] for p in plans]))
    return builds


def test_predict_checks_a_first_no_list_offered_and_passes_over_a_wrong_one(monkeypatch):
    """Note [a candidate's output checked]: predict's first, where no heuristic list offered it (a known
    configuration), is built and its output checked before it is answered: a wrong one (error 1.4, or not finite) is
    passed over and named in the decision; the first right one is answered with its plan (built once); unlisted ones
    after it are left out; a listed first is answered unbuilt. (CPU: builds and errors stand in for cuDNN's.)"""
    listed = lambda e: Candidate(e, (), (("a", e),))  # noqa: E731
    known = lambda e: Candidate(e, ())  # noqa: E731
    builds = _checking(monkeypatch, {1: 1.4, 2: math.inf, 3: 2e-4, 4: 1e-3, 5: 1e-3, 6: 1e-3})
    h = UnseenHandler("predict", shipped(), background=False)
    monkeypatch.setattr(h, "ranked", lambda q: ([known(1), known(2), known(3), listed(4), known(5), listed(6)], [],
                                                0.0))
    configs, origin, why, plans = _parts(h(_query()), built=True)
    assert [e for e, _ in configs] == [3, 4, 6] and plans == [("plan", 3)] and origin == "predicted"
    assert builds == [[1], [2], [3]] and h.decisions[0].wrong == ("eng1", "eng2")
    # a listed first: nothing built, nothing checked; the unlisted after it left out
    builds.clear()
    monkeypatch.setattr(h, "ranked", lambda q: ([listed(4), known(1), listed(6)], [], 0.0))
    configs, _, _, plans = _parts(h(_query()), built=True)
    assert [e for e, _ in configs] == [4, 6] and plans == [] and builds == []
    # every unlisted first wrong, and no listed one: torch's op, the decision saying why
    monkeypatch.setattr(h, "ranked", lambda q: ([known(1), known(2)], [], 0.0))
    a = h(_query())
    assert not a.configs and "computed a wrong output (eng1, eng2" in a.why and h.decisions[-1].why == a.why


def test_measure_top_k_never_answers_a_candidate_whose_output_is_wrong(monkeypatch):
    """Note [a candidate's output checked]: the shortlist's wrong candidate gets no time, is not answered even where
    it would be the fastest, is left out of the answer and named in the decision. (CPU stand-ins.)"""
    c = [Candidate(e, (), (("a", e),)) for e in range(4)]
    _checking(monkeypatch, {0: 1.4, 1: 1e-3, 2: 1e-3, 3: 1e-3})  # 0 would be the fastest (0 ms)
    h = UnseenHandler("measure_top_k", shipped(), k=3, background=False)
    monkeypatch.setattr(h, "ranked", lambda q: (c, c[:3], 0.0))
    configs, origin, _, plans = _parts(h(_query()), built=True)
    assert [e for e, _ in configs] == [1, 2, 3] and plans == [("plan", 1)] and origin == "measured_top_k"
    (d,) = h.decisions
    assert d.wrong == ("eng0",) and d.timed_ms == (0.1, 0.2) and "eng0" not in d.offered


def test_apply_checks_background(tmp_path):
    model = torch.nn.Conv2d(3, 4, 3)
    with pytest.raises(ValueError, match="background=True is for unseen='predict' or 'measure_top_k', not unseen="):
        cudnn_algos.apply(model, tmp_path / "t.sqlite", unseen="torch", background=True)
    with pytest.raises(ValueError, match="background='yes' must be True, False or None"):
        cudnn_algos.apply(model, tmp_path / "t.sqlite", unseen="predict", background="yes")
    assert "forward" not in model.__dict__


def test_a_failing_selector_is_an_answer_saying_why_never_an_exception(fake_lists):
    class Broken:
        def rank(self, *a):
            raise RuntimeError("model file damaged")

    h = UnseenHandler("predict", Broken())
    assert h(_query()) == backend.MissAnswer(why="predict failed: RuntimeError: model file damaged")
    assert h.decisions[0].why.endswith("model file damaged") and not h.decisions[0].origin


def test_nothing_torch_would_run_is_an_empty_answer(monkeypatch, lists_here):
    monkeypatch.setattr(unseen_mod.backend, "engine_search", lambda *a, **k: backend.EngineSearchOut(
        plans=(_plan(1, notes=(1,), ranks=(("heuristic_a", 0),)),), engine_count=1, search_ms=0.1))
    configs, origin, why = _parts(UnseenHandler("predict", shipped())(_query()))
    assert configs == [] and origin == "" and "that torch would accept" in why


def test_the_miss_handler_binding_takes_a_callable_and_none():
    backend.pinned_set_miss_handler(lambda q: backend.MissAnswer(why="unused"))
    backend.pinned_set_miss_handler(None)
    backend.pinned_set("forward float16 k", 62, [(2, 1)], "predicted")  # a winner chosen elsewhere, with its origin
    assert backend.pinned_ask_again("forward float16 k") is False  # asked again; no winner forgotten
    assert backend.pinned_ask_again("never met") is False
    # forget_origin forgets a winner of that origin only (Note [runtime-compiled candidates later]), once
    assert backend.pinned_ask_again("forward float16 k", "measured_top_k") is False  # another origin: kept
    assert backend.pinned_ask_again("forward float16 k", "predicted") is True
    assert backend.pinned_ask_again("forward float16 k", "predicted") is False  # gone
    backend.pinned_clear()
    assert all(math.isfinite(c.engine_id) for c in backend.pinned_counts())


def test_ranking_speed_is_a_benchmark_not_a_test():
    """(the speed of ranking lives in benchmarks/selector_speed.py; here: ranking is deterministic)"""
    sel = shipped()
    feats = problem_features(cudnn_algos.ConvSpec(64, 64, (3, 3), padding=1), (32, 64, 56, 56), "float16",
                             "channels_last", "forward")
    cands = [_cand(e, a=i, b=i) for i, e in enumerate(ENG)]
    assert sel.rank(feats, cands) == sel.rank(feats, cands)
    assert np.all(np.isfinite(sel.predict(feats, cands)))


def test_keep_stores_the_choices_as_winners_a_later_apply_loads(tmp_path, monkeypatch):
    """The operator's counts stand in (backend.pinned_counts replaced: no GPU here): two problems chosen by the
    selector, one stored winner, one fallback; keep() stores exactly the two chosen, marked by origin, no times."""
    from conftest import ENV

    from cudnn_algos.tuning import TuningDB, patching

    counts = [backend.PinnedCount("forward float16 p1", 3, 0, 0, "", 0, 0, "predicted", 62, ((2, 0), (13, 1))),
              backend.PinnedCount("backward_data float16 p1", 3, 0, 0, "", 0, 0, "measured_top_k", 28, ()),
              backend.PinnedCount("forward float16 p2", 3, 0, 0, "", 0, 0, "stored", 1, ()),
              backend.PinnedCount("forward float16 p3", 0, 0, 3, "no stored winner", 0, 0, "", -1, ())]
    monkeypatch.setattr(patching.backend, "pinned_counts", lambda: counts)
    monkeypatch.setattr(patching, "environment", lambda device=None: ENV)
    monkeypatch.setattr(patching, "device_index", lambda device=None: 0)
    db = tmp_path / "t.sqlite"
    h = patching.Applied(modules=[], skipped={}, winners=0, db=str(db), unseen="predict")
    assert h.keep() == 2
    with TuningDB(db) as store:
        ws = {w.key: w for w in store.winners(ENV.key())}
    assert set(ws) == {"forward float16 p1", "backward_data float16 p1"}
    w = ws["forward float16 p1"]
    assert (w.config, w.engine_id, w.source, w.kernel_ms, w.direction) == (
        "eng62{TILE_SIZE=0,TILEK=1}", 62, "predicted", None, "forward")
    assert ws["backward_data float16 p1"].source == "measured_top_k"


def test_show_selector_beside_a_saved_profile(tmp_path):
    """A committed H200 profile (ResNet-50 fp16 channels_last, batch 32) read back: the selector's picks are among
    its measured rows, so each sum is at least the best's; measure_top_k's shortlist holds cuDNN's first, so it is
    never above INSTANT's where INSTANT's first is what B or A ranks first (checked per row below)."""
    from conftest import run_cli

    from cudnn_algos.results import load_json
    from cudnn_algos.selector.report import selector_lines, selector_picks

    path = "tests/fixtures/profile_resnet50_fp16-nhwc_b32_engines.json.gz"
    rep = load_json(path)
    picks = selector_picks(rep, shipped())
    assert len(picks) == sum(len(p.engines) for p in rep.problems)
    # the shortlist holds the selector's first; where that is a known configuration the profile did not time, the
    # pick is the next timed one, which the shortlist of 3 may not hold
    assert all(x.pick_ms >= x.best_ms * 0.999 and (x.shortlist_ms <= x.pick_ms or x.untimed_first) for x in picks)
    # k="auto"'s shortlist: timed rows of the profile; the best is the fastest confirmed row (best_eligible), and a
    # row the screen alone timed can read under it within the noise (0.2% in one row of this profile)
    assert all(x.auto_ms >= x.best_ms * 0.99 for x in picks)
    lines = selector_lines(picks, shipped())
    assert lines[-1].lstrip().startswith("all") and max(map(len, lines)) <= 120
    r = run_cli("show", path, "--selector", "shipped")
    assert r.returncode == 0 and "measure_top_3" in r.stdout and "k=auto" in r.stdout, r.stderr
    r = run_cli("show", path, "--selector", str(tmp_path / "none.npz"))
    assert r.returncode == 2 and r.stderr.strip().splitlines()[-1].count("--selector") == 1, r.stderr


def test_show_selector_ranks_the_known_configurations_as_apply_does():
    """selector_picks ranks the lists' rows and the selector's known configurations together (apply()'s candidates):
    a known configuration the profile timed (a refined row no list named) that the selector ranks first is the pick;
    one it did not time, ranked first, is flagged and the next timed one counted. A stand-in selector's rank puts
    the known ones first (no GPU: the committed profile's rows)."""

    from cudnn_algos.results import load_json
    from cudnn_algos.choose.features import positions
    from cudnn_algos.choose.model import listed
    from cudnn_algos.selector.report import selector_picks

    rep = load_json("tests/fixtures/profile_resnet50_fp16-nhwc_b32_engines.json.gz")
    p = rep.problems[0]
    d, r = sorted(p.engines.items())[0]
    refined = next(row for row in r.rows if row.ok and not row.torch_filter and row.kernel_ms is not None
                   and not any(v is not None for v in positions(row.rank).values()))
    untimed = "eng9999{TILE_SIZE=1}"

    @dataclasses.dataclass(frozen=True)
    class KnownFirst(Selector):
        names: tuple = ()

        def known_for(self, *a, **k):
            return self.names

        def rank(self, problem, candidates):  # the ones no list names (the known ones) first, in their order
            return sorted(range(len(candidates)), key=lambda i: (listed(candidates[i]), i))

    base = {f.name: getattr(shipped(), f.name) for f in dataclasses.fields(Selector)}
    one = [x for x in selector_picks(rep, KnownFirst(**base, names=(refined.name,))) if x.problem == 0]
    assert one[0].direction == d and one[0].pick == refined.name and not one[0].untimed_first
    two = [x for x in selector_picks(rep, KnownFirst(**base, names=(untimed, refined.name))) if x.problem == 0]
    assert two[0].pick == refined.name and two[0].untimed_first
    plain = [x for x in selector_picks(rep, shipped()) if x.problem == 0]
    assert plain[0].pick != refined.name or refined.name in shipped().known_for(d, p.dtype, p.memory_format)


def test_the_answer_log_names_each_answer_before_it_runs(fake_lists, monkeypatch, tmp_path):
    """$CUDNN_ALGOS_UNSEEN_LOG: a line per answer (key, origin, first configurations), on disk at once (to find the
    problem and configuration a crashed process ran last)."""
    log = tmp_path / "unseen.log"
    monkeypatch.setenv(unseen_mod.LOG_ENV, str(log))
    configs, origin, _ = _parts(UnseenHandler("predict", shipped())(_query()))
    line = log.read_text().splitlines()
    assert len(line) == 1 and line[0].split("\t")[1:3] == ["predicted", "forward float16 x"]
    assert line[0].split("\t")[3].startswith(f"eng{configs[0][0]}")


def test_the_handler_asks_in_one_helper_started_once(fake_lists):
    plans, calls = fake_lists
    ListsHere.made = 0
    h = UnseenHandler("predict", shipped())
    h.start()
    a = h(_query())
    assert ListsHere.made == 1 and h(_query()) == a and ListsHere.made == 1  # one helper, asked per problem
    assert len(calls) == 2  # each problem's call asked it
    h.close()


def test_a_helper_that_cannot_answer_is_a_decision_saying_why(monkeypatch):
    class Dead:
        def ask(self, *a):
            raise lists_process.ListsProcessError("the helper process asking cuDNN's lists: it ended (exit status -9)")

        rank = ask

        def set_selector(self, data):
            pass

        def close(self):
            pass

    monkeypatch.setattr(unseen_mod, "ListsProcess", Dead)
    configs, origin, why = _parts(UnseenHandler("predict", shipped())(_query()))
    assert configs == [] and origin == "" and why.endswith("it ended (exit status -9)")


def test_the_helper_replies_rows_the_handler_reads_back():
    """answer() and plans_of(): a configuration's fields survive the reply; an error reply raises saying why."""
    plan = _plan(7, knobs=((2, 1), (5, 0)), notes=(3,), ranks=(("heuristic_a", 2),))

    def search(direction, problem, lists, device, build):
        assert (direction, lists, device, build) == ("backward_data", ["a", "b"], 1, False)
        return backend.EngineSearchOut(plans=(plan,), engine_count=1, search_ms=2.5)

    rows, ms = lists_process.plans_of(lists_process.answer((0, "lists", "backward_data", None, ("a", "b"), 1),
                                                           search))
    assert ms == 2.5 and rows == [plan]
    assert candidates_of(rows, "float16", False, True)[0].encoded == (7, {"TILE_SIZE": 1, "KBLOCK": 0}, {"a": 2})

    def broken(*a, **k):
        raise RuntimeError("CUDNN_STATUS_BAD_PARAM\nmore lines")

    with pytest.raises(lists_process.ListsProcessError, match="RuntimeError: CUDNN_STATUS_BAD_PARAM$"):
        lists_process.plans_of(lists_process.answer((0, "lists", "forward", None, ("a",), 0), broken))


def test_the_helper_process_starts_answers_and_ends():
    """The real helper: a ConvProblem pickled to it, cuDNN's answer (on a machine with no GPU, its error) back; a
    helper killed is an error naming its exit status, then and after."""
    import os
    import pickle
    import signal

    cp = backend.conv_problem(make_problem(torch.nn.Conv2d(8, 4, 3), (2, 8, 5, 5), "float16",
                                                       "channels_last"))
    assert pickle.loads(pickle.dumps(cp)).describe() == cp.describe()
    lp = lists_process.ListsProcess()
    try:
        if torch.cuda.is_available():
            rows, ms = lp.ask("forward", cp, ["a"], 0)
            assert rows and ms > 0
        else:
            with pytest.raises(lists_process.ListsProcessError, match="cuDNN's lists in the helper process: "):
                lp.ask("forward", cp, ["a"], 0)
        os.kill(lp.pid, signal.SIGKILL)
        with pytest.raises(lists_process.ListsProcessError, match=r"it ended \(exit status -9\)"):
            lp.ask("forward", cp, ["a"], 0)
        lp.close()
        with pytest.raises(lists_process.ListsProcessError, match=r"it ended \(exit status -9\)"):  # the first reason
            lp.ask("forward", cp, ["a"], 0)
    finally:
        lp.close()


def test_the_helper_answers_queries_at_once_each_to_its_asker():
    """serve() with six threads behind a ListsProcess, six queries asked from six threads at once: three of them
    answer only when all three are being answered together (a barrier: one at a time would break it), and each
    asker gets its own problem's answer."""
    import socket
    import threading
    from multiprocessing.connection import Connection

    together = threading.Barrier(3, timeout=20)

    def search(direction, problem, lists, device, build):
        if problem < 3:
            together.wait()
        return backend.EngineSearchOut(plans=(_plan(problem),), engine_count=1, search_ms=float(problem))

    a, b = socket.socketpair()
    server = threading.Thread(target=lists_process.serve, args=(Connection(b.detach()), search, 6), daemon=True)
    server.start()
    lp = lists_process.ListsProcess(conn=Connection(a.detach()))
    got = {}

    def ask(i):
        got[i] = lp.ask("forward", i, ["a"], 0)

    askers = [threading.Thread(target=ask, args=(i,)) for i in range(6)]
    for t in askers:
        t.start()
    for t in askers:
        t.join(30)
    assert {i: (rows[0].engine_id, ms) for i, (rows, ms) in got.items()} == {i: (i, float(i)) for i in range(6)}
    lp.close()
    with pytest.raises(lists_process.ListsProcessError, match="it was closed"):
        lp.ask("forward", 1, ["a"], 0)
    server.join(5)
    assert not server.is_alive()  # the helper's loop ends with the socket


def test_the_helpers_socket_is_closed_by_the_reader_alone_after_its_last_read():
    """Note [the reader closes]: close() from several threads while the reader waits in recv: the socket is shut down
    (which wakes the reader) and closed once, by the reader, after its last read. Closed by another thread, its
    number could be reused by a file this process opens next, and the reader's next read took that file's bytes (a
    selector's .npz failed its CRC); closed twice, the second close could hit another socket."""
    import socket
    import threading

    events = []
    ours, theirs = socket.socketpair()

    class Conn:  # the reader's recv on a real socket: it reads the end once the socket is shut down
        def fileno(self):
            return ours.fileno()

        def recv(self):
            data = ours.recv(1)
            events.append(("recv", threading.current_thread().name, data))
            raise EOFError

        def close(self):
            events.append(("close", threading.current_thread().name))
            ours.close()

    lp = lists_process.ListsProcess(conn=Conn())
    enders = [threading.Thread(target=lp.close) for _ in range(4)]
    for t in enders:
        t.start()
    for t in enders:
        t.join(10)
    theirs.close()
    assert not lp._reader.is_alive()  # noqa: SLF001 (close() waited for it)
    reader = "cudnn_algos-lists-reader"
    assert events == [("recv", reader, b""), ("close", reader)], events
    with pytest.raises(lists_process.ListsProcessError, match="it was closed"):
        lp.ask("forward", None, ["a"], 0)


@pytest.mark.parametrize("value, threads", [(None, 3), ("1", 1), ("5", 5), ("0", 1), ("many", 1)])
def test_the_helpers_threads_come_from_the_environment(monkeypatch, value, threads):
    if value is None:
        monkeypatch.delenv(lists_process.THREADS_ENV, raising=False)
    else:
        monkeypatch.setenv(lists_process.THREADS_ENV, value)
    assert lists_process.helper_threads() == threads


def test_a_helper_that_cannot_start_leaves_apply_working_and_says_why_per_problem(monkeypatch, tmp_path):
    """start() (what apply() calls) never raises; each problem's decision names why nothing was chosen."""
    def popen(*a, **k):
        raise OSError("no such interpreter")

    monkeypatch.setattr(lists_process.subprocess, "Popen", popen)
    h = UnseenHandler("predict", shipped())
    h.start()
    configs, origin, why = _parts(h(_query()))
    assert configs == [] and why.endswith("the helper process did not start: no such interpreter")
    h.close()


def test_selector_bytes_round_trip_ranks_the_same():
    sel = shipped()
    again = Selector.from_bytes(sel.to_bytes())
    feats = problem_features(*query_problem(_query()))
    cands = [(e, {}, {"a": i, "b": 9 - i}) for i, e in enumerate(ENG)]
    assert again.family == sel.family and np.allclose(again.predict(feats, cands), sel.predict(feats, cands))


@pytest.mark.parametrize("mode, k", [("predict", 0), ("measure_top_k", 3), ("measure_top_k", "auto")])
def test_the_helper_ranks_as_the_models_process_would(mode, k):
    """Note [ranking in the helper]: serve() in a thread behind a real socket pair, given the shipped selector as
    bytes, answers a "rank" query with the ranking (and shortlist) that ranking.rank makes of the same lists in this
    process; before a selector is given, or given one that does not load, a rank query is an error saying so."""
    import socket
    import threading
    from multiprocessing.connection import Connection

    from cudnn_algos.choose.ranking import rank

    plans = [_plan(e, knobs=((2, i % 3),), ranks=(("heuristic_a", i), ("heuristic_b", len(ENG) - 1 - i)))
             for i, e in enumerate(ENG)]

    def search(direction, problem, lists, device, build):
        return backend.EngineSearchOut(plans=tuple(plans), engine_count=len(plans), search_ms=3.0)

    a, b = socket.socketpair()
    server = threading.Thread(target=lists_process.serve, args=(Connection(b.detach()), search, 2), daemon=True)
    server.start()
    lp = lists_process.ListsProcess(conn=Connection(a.detach()))
    feats = problem_features(*query_problem(_query()))
    args = ("forward", None, ["a", "b"], 0, feats, "float16", False, True, k)
    try:
        with pytest.raises(lists_process.ListsProcessError, match="given no selector"):
            lp.rank(*args)
        lp.set_selector(b"not a selector")
        with pytest.raises(lists_process.ListsProcessError, match="the selector given to the helper did not load"):
            lp.rank(*args)
        lp.set_selector(shipped().to_bytes())
        ranked, short, ms = lp.rank(*args)
    finally:
        lp.close()
    want, want_short = rank(candidates_of(plans, "float16", False, True), shipped(), feats, k)
    assert ms == 3.0 and ranked == want and short == want_short and len(ranked) > 2
    # k, and INSTANT's first after them where they do not hold it (Selector.shortlist)
    assert k <= len(short) <= k + 1 if k != "auto" else 2 <= len(short) <= AUTO_MAX


def test_k_auto_ranks_and_shortlists_from_one_prediction_a_subclass_rank_still_asked(monkeypatch):
    """ranking.rank with k="auto": within the reach the trees predict once for both the order and the shortlist
    (the same answer as ranking and shortlisting apart); a subclass that overrides rank has its own rank asked."""
    from cudnn_algos.choose.ranking import rank
    from cudnn_algos.choose.trees import Trees

    sel = shipped()
    plans = [_plan(e, knobs=((2, i % 3),), ranks=(("heuristic_a", i), ("heuristic_b", len(ENG) - 1 - i)))
             for i, e in enumerate(ENG)]
    cands = candidates_of(plans, "float16", False, True)
    feats = problem_features(*query_problem(_query()))
    assert sel.within_reach(feats)
    enc = [c.encoded for c in cands]
    order = sel.rank(feats, enc)
    want = ([cands[i] for i in order], [cands[i] for i in sel.shortlist(feats, enc, "auto", order)])
    calls = []
    real = Trees.predict  # the ranking trees' own predictions (the guard trees' weigh in too, Note [the guard
    # trees in the ranking]), counted
    monkeypatch.setattr(Trees, "predict", lambda self, x: calls.append(self is sel.trees) or real(self, x))
    assert rank(cands, sel, feats, "auto") == want and sum(calls) == 1

    class Reversed(Selector):
        def rank(self, problem, candidates):
            return list(reversed(range(len(candidates))))

    mine = Reversed(sel.vocabulary, sel.trees, sel.neighbours, sel.family, sel.trained_on, sel.reach, sel.known,
                    sel.evidence)
    ranked, short = rank(cands, mine, feats, "auto")
    assert ranked == list(reversed(cands)) and short[0] == want[1][0]  # k="auto" still goes by the predictions


def test_a_selector_ranks_in_the_helper_a_stand_in_in_this_process(fake_lists):
    """The shipped Selector travels to the helper as bytes and the helper ranks; a subclass (whose own rank the
    bytes cannot carry) has the lists asked and ranks in this process; both answer the same here."""
    class Mine(Selector):
        pass

    sel = shipped()
    ListsHere.used = []
    a = UnseenHandler("predict", sel)(_query())
    assert ListsHere.used == ["rank"]
    mine = Mine(**{f.name: getattr(sel, f.name) for f in dataclasses.fields(Selector)})
    assert UnseenHandler("predict", mine)(_query()) == a and ListsHere.used == ["rank", "ask"]


def test_the_guard_takes_the_trees_first_only_where_they_predict_a_clear_win_over_cudnns_first():
    """selector.train.guarded (selector eval's guard_M methods): the trees' first where their prediction puts it at
    least the margin below cuDNN's first, else cuDNN's first; without predictions (outside the reach: the order is
    cuDNN's already) the order's first; where both are the same candidate, that one."""
    from cudnn_algos.selector.train import guarded

    predicted = np.array([0.0, 0.25, 0.05, 1.0])
    order = [0, 2, 1, 3]
    cudnn = [1, 0, 2, 3]
    assert guarded(order, predicted, cudnn, 0.1) == 0  # 0.25 below: confident
    assert guarded(order, predicted, cudnn, 0.3) == 1  # not 0.3 below: cuDNN's first
    assert guarded(order, predicted, [2, 0], 0.1) == 2 and guarded(order, predicted, [2, 0], 0.05) == 0
    assert guarded(cudnn, None, cudnn, 0.3) == 1 and guarded(order, predicted, [0, 1], 0.3) == 0


def test_the_guard_against_instants_first_falls_back_to_it_where_there_are_no_predictions():
    """Note [a guard against INSTANT's first]: the reference is INSTANT's first (torch's benchmark-off pick); with no
    predictions (outside the reach) the fallback's first, not the order's; confident and not confident as above."""
    from cudnn_algos.choose.model import instant_first
    from cudnn_algos.selector.train import guarded

    cands = [(1, {}, {"b": 0}), (2, {}, {"a": 1, "b": 1}), (3, {}, {"a": 0}), (4, {}, {})]
    inst = instant_first(cands)
    assert inst == [2]
    predicted = np.array([0.0, 0.3, 0.4, 0.9])
    order = [0, 1, 2, 3]
    assert guarded(order, predicted, inst, 0.3, fallback=inst) == 0  # 0.4 ahead of INSTANT's first: confident
    assert guarded(order, predicted, inst, 0.5, fallback=inst) == 2  # not 0.5 ahead: INSTANT's first
    assert guarded(order, None, inst, 0.0, fallback=inst) == 2  # outside the reach: INSTANT's first, not B's
    assert guarded(order, None, inst, 0.0) == 0  # no fallback: the order's first (guard_M's behaviour)


def test_a_guarded_selector_runs_instants_first_unless_its_trees_are_sure():
    """Note [a guard against INSTANT's first]: with a guard the trees rank everywhere (the reach aside) and their first
    goes first only where they predict it at least the guard below INSTANT's first; otherwise INSTANT's first leads
    and the rest keep the trees' order. Without a guard, outside the reach: cuDNN's order. The guard survives the
    file; a negative or non-numeric one is a ValueError naming it."""
    @dataclasses.dataclass(frozen=True)
    class Fixed(Selector):
        scores: tuple = ()

        def predict(self, problem, candidates):
            return np.array(self.scores[:len(candidates)], dtype=float)

    base = {**{f.name: getattr(shipped(), f.name) for f in dataclasses.fields(Selector)}, "guard_far": None,
            "guard_trees": None, "blend": 0.0}  # the margin read from `scores` everywhere; the first two set below
    # (blend: the ranking by `scores` alone, Note [the guard trees in the ranking] has its own test)
    nb = shipped().neighbours
    near = list(nb.features[0] * nb.scale + nb.mean)  # a training problem: inside the reach
    far = [99.0] * len(near)
    cands = [(1, {}, {"b": 0}), (2, {}, {"a": 0, "b": 1}), (3, {}, {"a": 1, "b": 2})]  # INSTANT's first: index 1
    sure = Fixed(**{**base, "guard": 0.1}, scores=(0.0, 0.3, 0.5))
    unsure = Fixed(**{**base, "guard": 0.1}, scores=(0.25, 0.3, 0.5))
    for problem in (near, far):
        order, predicted = sure.ranked(problem, cands)
        assert order == [0, 1, 2] and predicted is not None
        assert unsure.ranked(problem, cands)[0] == [1, 0, 2]
    bare = Fixed(**{**base, "guard": None}, scores=(0.25, 0.3, 0.5))
    assert bare.guard is None and bare.ranked(near, cands)[0] == [0, 1, 2]
    assert bare.ranked(far, cands) == ([0, 1, 2], None)  # cuDNN's order (B's first): no predictions
    assert unsure.unguarded.guard is None and unsure.unguarded.ranked(near, cands)[0] == [0, 1, 2]
    # Note [a guard against INSTANT's first]: beyond the reach the margin is guard_far; with guard trees, theirs
    # (INSTANT's first, then the trees' first) is the margin's reading, not the ranking trees'
    far_guard = Fixed(**{**base, "guard": 0.1, "guard_far": 0.4}, scores=(0.0, 0.3, 0.5))  # 0.3 ahead
    assert far_guard.ranked(near, cands)[0] == [0, 1, 2] and far_guard.ranked(far, cands)[0] == [1, 0, 2]

    class Reads:  # guard trees that answer fixed values for (INSTANT's first, the trees' first)
        def __init__(self, ahead):
            self.ahead = ahead

        def predict(self, x):
            assert len(x) == 2
            return np.array([self.ahead, 0.0])

    assert Fixed(**{**base, "guard": 0.1, "guard_trees": Reads(0.05)}, scores=(0.0, 0.3, 0.5)).ranked(
        near, cands)[0] == [1, 0, 2]  # the ranking trees are sure; the guard trees are not
    assert Fixed(**{**base, "guard": 0.1, "guard_trees": Reads(0.5)}, scores=(0.25, 0.3, 0.5)).ranked(
        near, cands)[0] == [0, 1, 2]  # and the other way round
    assert Selector.from_bytes(dataclasses.replace(shipped(), guard=0.2).to_bytes()).guard == 0.2
    assert Selector.from_bytes(shipped().to_bytes()).guard == shipped().guard
    for bad in (-0.1, "0.1", float("nan"), True):
        with pytest.raises(ValueError, match="guard="):
            dataclasses.replace(shipped(), guard=bad)
