"""CPU: workers sharing a GPU take turns on it (cudnn_algos.sweep.turns, Note [sharing a GPU]): the turn is exclusive
across processes, released when its holder is killed, and a dry-run sweep of two workers per GPU never has two
tasks' GPU parts at once while their other parts overlap. What it does to real timings is the device's to show
(benchmarks/sweep_scaling.py --per-gpu)."""
import multiprocessing as mp
import os
import re
import signal
import time

import pytest

from cudnn_algos.sweep import GpuTurn, worker_names


def _hold(directory, n, hold_s, out):
    turn = GpuTurn("0", directory)
    for _ in range(n):
        with turn:
            t0 = time.time()
            time.sleep(hold_s)
            out.put((os.getpid(), t0, time.time()))


def intervals_overlap(spans):
    spans = sorted(spans)
    return any(b0 < a1 - 1e-4 for (_, a1), (b0, _) in zip(spans, spans[1:]))


def test_a_turn_is_held_by_one_process_at_a_time(tmp_path):
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    ps = [ctx.Process(target=_hold, args=(str(tmp_path), 5, 0.03, q)) for _ in range(3)]
    for p in ps:
        p.start()
    got = [q.get(timeout=60) for _ in range(15)]
    for p in ps:
        p.join(timeout=30)
    assert len({pid for pid, _, _ in got}) == 3
    assert not intervals_overlap([(a, b) for _, a, b in got])
    # the same timeline without a turn does overlap: the check above can fail
    assert intervals_overlap([(0.0, 1.0), (0.5, 1.5)])


def _hold_forever(directory, ready):
    with GpuTurn("0", directory):
        ready.set()
        time.sleep(600)


def test_a_killed_holder_leaves_its_gpu_free_and_other_gpus_never_wait(tmp_path):
    ctx = mp.get_context("spawn")
    ready = ctx.Event()
    p = ctx.Process(target=_hold_forever, args=(str(tmp_path), ready))
    p.start()
    assert ready.wait(60)
    with GpuTurn("1", str(tmp_path)) as other:  # another GPU's turn: free while GPU 0's is held
        pass
    assert other.waited < 1
    os.kill(p.pid, signal.SIGKILL)
    p.join(timeout=30)
    turn = GpuTurn("0", str(tmp_path))
    with turn:
        pass
    assert turn.waited < 5 and turn.held >= 0
    with pytest.raises(RuntimeError, match="already held"):
        with turn:
            with turn:
                pass


def _shared_then_timed(directory, scope, n, start, out):
    turn = GpuTurn("0", directory, scope=scope)
    start.wait()
    for _ in range(n):
        with turn:
            t0 = time.time()
            time.sleep(0.06)  # untimed GPU work
            out.put((os.getpid(), "untimed", t0, time.time()))
            with turn.timing():
                assert turn.exclusive
                t0 = time.time()
                time.sleep(0.03)  # timed calls
                out.put((os.getpid(), "timed", t0, time.time()))
    out.put((os.getpid(), "totals", turn.timed, turn.held))


def _spans_of(directory, scope, procs=3, n=4):
    ctx = mp.get_context("spawn")
    q, start = ctx.Queue(), ctx.Barrier(procs)
    ps = [ctx.Process(target=_shared_then_timed, args=(directory, scope, n, start, q)) for _ in range(procs)]
    for p in ps:
        p.start()
    got = [q.get(timeout=60) for _ in range(procs * (2 * n + 1))]
    for p in ps:
        p.join(timeout=30)
    assert all(p.exitcode == 0 for p in ps)
    return [g for g in got if g[1] != "totals"], [g for g in got if g[1] == "totals"]


def _overlaps(a, b):
    return a[2] < b[3] - 1e-4 and b[2] < a[3] - 1e-4


def test_timing_turns_share_the_untimed_work_and_hold_the_gpu_alone_for_timed_calls(tmp_path):
    """Note [timing turns]: a timed span never overlaps another process's span of either kind, while untimed
    spans of different processes do overlap; with scope "whole" nothing overlaps (the first check can fail)."""
    spans, totals = _spans_of(str(tmp_path), "timing")
    others = [(a, b) for a in spans for b in spans if a[0] != b[0]]
    assert not any(_overlaps(a, b) for a, b in others if a[1] == "timed")
    assert any(_overlaps(a, b) for a, b in others if a[1] == b[1] == "untimed")
    assert all(0.1 < timed < held for _, _, timed, held in totals)
    spans, totals = _spans_of(str(tmp_path), "whole")
    assert not any(_overlaps(a, b) for a in spans for b in spans if a[0] != b[0])
    assert all(timed == held for _, _, timed, held in totals)
    with pytest.raises(ValueError, match="scope='both'"):
        GpuTurn("0", str(tmp_path), scope="both")


def test_a_timing_turn_taken_outside_a_hold_is_exclusive_and_released(tmp_path):
    """turn.timing() with no turn held (a sweep task's legacy find_ex) holds it alone for the block alone."""
    turn = GpuTurn("0", str(tmp_path), scope="timing")
    with turn.timing():
        assert turn.exclusive
    assert not turn.exclusive and turn.timed == turn.held > 0
    with turn, turn.timing():
        with pytest.raises(RuntimeError, match="already held"):
            with turn:
                pass


def test_a_turn_counts_its_exclusive_holds_and_their_seconds_by_the_search_step_that_asked(tmp_path):
    """The sweep's per-step figures (timed_<step>, wait_<step>): a hold asked for inside measure.steps.step(name)
    is counted under that name, one outside any under "other"; nothing is counted without a recording."""
    from cudnn_algos.measure.steps import current_step, recording, step

    turn = GpuTurn("0", str(tmp_path), scope="timing")
    with recording(), turn:
        with step("screen"):
            assert current_step() == "screen"
            with turn.timing():
                time.sleep(0.02)
            with turn.timing():
                pass
        with step("confirm"), step("torch_first_call"), turn.timing():
            time.sleep(0.01)
        assert current_step() == ""
    assert turn.holds == 3
    assert set(turn.timed_in) == {"screen", "torch_first_call"}
    assert turn.timed_in["screen"] >= 0.02 and turn.timed_in["torch_first_call"] >= 0.01
    assert abs(sum(turn.timed_in.values()) - turn.timed) < 1e-9
    assert set(turn.waited_in) == {"other", "screen", "torch_first_call"}
    with step("screen"):
        assert current_step() == ""


def _free(path):
    import fcntl

    with open(path, "a+") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        fcntl.flock(f, fcntl.LOCK_UN)
        return True


def test_a_turn_settles_the_gpu_before_each_release_and_frees_its_lock_on_errors(tmp_path):
    """Note [timing turns]: settle runs while the hold is still held (shared, exclusive, shared again); an error in
    the block is the one raised even when settle fails too, and the lock is free after either."""
    seen = []
    turn = GpuTurn("0", str(tmp_path), scope="timing", settle=lambda: seen.append((turn.exclusive, _free(turn.path))))
    with turn:
        with turn.timing():
            pass
    assert seen == [(False, False), (True, False), (False, False)] and _free(turn.path)

    gone = []

    def fails():
        if gone:
            raise RuntimeError("the GPU is gone")

    for scope in ("whole", "timing"):
        gone.clear()
        turn = GpuTurn("0", str(tmp_path), scope=scope, settle=fails)
        with pytest.raises(ValueError, match="the block's"):
            with turn, turn.timing():
                gone.append(True)
                raise ValueError("the block's error")
        assert _free(turn.path) and not turn.exclusive
        with pytest.raises(RuntimeError, match="the GPU is gone"):
            with turn:
                pass
        assert _free(turn.path)


def test_worker_names_place_workers_on_gpus():
    assert worker_names(2) == [("gpu0", 0), ("gpu1", 1)]
    assert worker_names(4, per_gpu=2) == [("gpu0.0", 0), ("gpu0.1", 0), ("gpu1.0", 1), ("gpu1.1", 1)]
    assert worker_names(2, gpus=False) == [("w0", None), ("w1", None)]
    with pytest.raises(ValueError, match="per_gpu=0"):
        worker_names(2, per_gpu=0)


def test_two_workers_per_gpu_overlap_everything_but_their_turns(tmp_path):
    """A dry-run sweep with two workers sharing the (one, unpinned) GPU: tasks whose dry run holds the turn for its
    `seconds` never hold it at once, yet both workers ran tasks."""
    pytest.importorskip("distributed")
    from cudnn_algos.corpus import build_corpus
    from cudnn_algos.sweep import SweepStore, sweep

    corpus = build_corpus(["decoders"], batches=(1,), configs=("fp32",), progress=False)

    def spans_of(per_gpu):
        db = tmp_path / f"s{per_gpu}.sqlite"
        r = sweep(corpus.problems, str(db), dry_run=True, n_workers=2, workers_per_gpu=per_gpu, progress=False,
                  limit=16, options={"seconds": 0.25, "turn_dir": str(tmp_path)})
        assert (r.done, r.failed) == (16, 0) and len(r.per_worker) == 2, r
        with SweepStore(db) as s:
            notes = [s.rows(t.key)[0]["note"] for t in s.tasks()]
        return [tuple(map(float, re.fullmatch(r"on the GPU ([\d.]+)-([\d.]+)", n).groups())) for n in notes]

    assert not intervals_overlap(spans_of(2))
    assert intervals_overlap(spans_of(1))  # two workers of their own GPUs: their "GPU parts" do overlap
    # Note [timing turns]: the timed parts never overlap each other nor another task's untimed part; untimed do
    r = sweep(corpus.problems, str(tmp_path / "t.sqlite"), dry_run=True, n_workers=2, workers_per_gpu=2,
              progress=False, limit=8, options={"seconds": 0.1, "shared_seconds": 0.3, "turn_dir": str(tmp_path),
                                                "turn_scope": "timing"})
    assert (r.done, r.failed) == (8, 0) and "taking turns for timed calls" in r.engine, r
    with SweepStore(tmp_path / "t.sqlite") as s:
        notes = [s.rows(t.key)[0]["note"] for t in s.tasks()]
    spans = [tuple(map(float, m)) for n in notes
             for m in [re.fullmatch(r"on the GPU ([\d.]+)-([\d.]+), untimed ([\d.]+)-([\d.]+)", n).groups()]]
    timed = [(a, b) for a, b, _, _ in spans]
    assert not intervals_overlap(timed)
    assert not any(t0 < u1 - 1e-4 and u0 < t1 - 1e-4 for i, (t0, t1, _, _) in enumerate(spans)
                   for j, (_, _, u0, u1) in enumerate(spans) if i != j)
    assert intervals_overlap([(u0, u1) for _, _, u0, u1 in spans])
    with pytest.raises(ValueError, match="turn_scope"):
        sweep(corpus.problems, str(tmp_path / "bad.sqlite"), dry_run=True, options={"turn_scope": "both"},
              progress=False)
    db = tmp_path / "s.sqlite"
    with pytest.raises(ValueError, match="workers_per_gpu=0"):
        sweep(corpus.problems, str(db), dry_run=True, workers_per_gpu=0, progress=False)
