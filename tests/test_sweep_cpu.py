"""CPU: the sweep's logic over a real Dask LocalCluster of worker processes, with the dry-run measure (rows made
from the task, no GPU): every problem-direction stored once by the driver, a re-run skipping what is stored, a
worker SIGKILLed mid-sweep costing only its task (run again elsewhere: nothing lost, nothing stored twice), the time
budget, the in-process fallback without Dask, the store refusing duplicates and non-finite numbers, and the CLI.
What a GPU measures is the device's to show (scripts/gpu-check)."""
import hashlib
import json
import sys
import time
from dataclasses import replace
from types import SimpleNamespace

import pytest
from conftest import run_cli

from cudnn_algos.corpus import build_corpus
from cudnn_algos.sweep import DIE_ONCE_ENV, NO_DASK, SweepStore, sweep, tasks_of

pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def corpus():
    return build_corpus(["decoders"], batches=(1,), configs=("fp32",), progress=False)  # 16 problems


def test_two_workers_store_every_task_once_and_a_rerun_skips_them(corpus, tmp_path):
    db = tmp_path / "s.sqlite"
    r = sweep(corpus.problems, str(db), dry_run=True, n_workers=2, progress=False)
    assert (r.done, r.failed, r.skipped, r.left) == (48, 0, 0, 0) and sum(r.per_worker.values()) == 48
    # each worker's resident memory after its first and its last task, in the summary (is it bounded?)
    assert set(r.memory) == set(r.per_worker) and all(0 < a <= 1 << 20 and 0 < b for a, b in r.memory.values())
    assert "; resident memory per worker, first -> last task: " in str(r)
    with SweepStore(db) as s:
        assert s.keys() == {t["key"] for t in tasks_of(corpus.problems)}
        assert s.counts()["done"] == 48 and s.counts()["rows"] == len(s.rows())
    again = sweep(corpus.problems, str(db), dry_run=True, n_workers=2, progress=False, repeat_fraction=0)
    assert (again.done, again.skipped) == (0, 48)


def test_a_later_sweep_measures_the_noise_floors_sample_again_once(corpus, tmp_path):
    """The noise floor: a sample of what an earlier sweep stored is measured again by the next sweep's processes,
    under repeat keys, once; the dataset leaves repeats out and pairs them with their first measurements."""
    from cudnn_algos.dataset import noise_floor, validate
    from cudnn_algos.sweep.tasks import chosen_for_repeat, is_repeat

    db = tmp_path / "s.sqlite"
    first = sweep(corpus.problems, str(db), dry_run=True, n_workers=1, progress=False, repeat_fraction=0.25)
    assert first.repeats == 0 and first.done == 48  # nothing stored before: nothing to repeat
    sample = {t["key"] for t in tasks_of(corpus.problems) if chosen_for_repeat(t["key"], 0.25)}
    assert 0 < len(sample) < 48
    second = sweep(corpus.problems, str(db), dry_run=True, n_workers=1, progress=False, repeat_fraction=0.25)
    assert (second.repeats, second.done, second.skipped) == (len(sample), len(sample), 48)
    third = sweep(corpus.problems, str(db), dry_run=True, n_workers=1, progress=False, repeat_fraction=0.25)
    assert (third.repeats, third.done) == (0, 0)
    with SweepStore(db) as s:
        assert {k[: -len(" #repeat")] for k in s.keys() if is_repeat(k)} == sample
        assert len(validate(s).kept) == 48  # repeats are not dataset rows
        nf = noise_floor(s)
    # the dry run's rows are the same every time: no change, the same best everywhere
    assert (nf.pairs, nf.same_best, nf.median_abs_change, nf.best_within) == (len(sample), len(sample), 0.0, 0.0)
    assert "measured twice" in str(nf)


def test_a_worker_killed_mid_sweep_costs_only_its_task(corpus, tmp_path, monkeypatch):
    flag = tmp_path / "die"
    flag.write_text("")
    monkeypatch.setenv(DIE_ONCE_ENV, str(flag))  # the first task to see it SIGKILLs its worker
    db = tmp_path / "s.sqlite"
    r = sweep(corpus.problems, str(db), dry_run=True, n_workers=2, progress=False, allowed_failures=2)
    assert not flag.exists(), "a worker was killed"
    assert (r.done, r.failed, r.left) == (48, 0, 0)
    with SweepStore(db) as s:
        keys = [t.key for t in s.tasks()]
        assert len(keys) == len(set(keys)) == 48  # 0 lost, 0 twice
    # the summary names the worker that died and the task it was running (it said nothing of either)
    assert sum(r.died.values()) == 1 and set(r.died) <= {"w0", "w1"} and len(r.retried) == 1, (r.died, r.retried)
    assert r.retried[0] in keys
    assert f"worker(s) died: {next(iter(r.died))}; 1 task(s) they were running were run again: " in str(r)


def test_the_budget_stops_submitting_and_a_rerun_continues(corpus, tmp_path):
    db = tmp_path / "s.sqlite"
    r = sweep(corpus.problems, str(db), dry_run=True, n_workers=1, progress=False, budget_s=0.3,
              options={"seconds": 0.1})
    assert r.stopped_by == "budget" and r.left > 0 and r.done + r.left == 48
    rest = sweep(corpus.problems, str(db), dry_run=True, n_workers=2, progress=False, repeat_fraction=0)
    assert rest.skipped == r.done and rest.done == 48 - r.done and not rest.stopped_by


def test_the_tasks_running_when_the_budget_ends_finish_and_are_stored(corpus, tmp_path):
    # Note [the budget's end]: cancelling a running task threw its measurement away (the worker ran on); a task a
    # worker took between the driver's look at what was running and its cancel was lost so (CI, under load)
    started = tmp_path / "started"
    started.mkdir()
    db = tmp_path / "s.sqlite"
    r = sweep(corpus.problems, str(db), dry_run=True, n_workers=2, progress=False, budget_s=0.5,
              options={"seconds": 0.4, "started_dir": str(started)})
    ran = {p.name for p in started.iterdir()}
    with SweepStore(db) as s:
        stored = {hashlib.sha1(k.encode()).hexdigest() for k in s.keys()}
    assert r.stopped_by == "budget" and 0 < r.done < 48 and r.done + r.left == 48
    assert ran == stored and len(stored) == r.done  # every task that started is kept, none cut off


def test_without_dask_it_runs_in_process_and_says_how_to_get_more(corpus, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)  # import distributed -> ImportError
    with pytest.warns(RuntimeWarning, match="Dask is not installed"):
        r = sweep(corpus.problems[:2], str(tmp_path / "s.sqlite"), dry_run=True, progress=False)
    assert r.engine == "in-process" and r.done == 6 and "pip install 'cudnn_algos[sweep]'" in NO_DASK


def test_the_store_refuses_a_second_put_and_non_finite_numbers(tmp_path):
    with SweepStore(tmp_path / "s.sqlite") as s:
        s.put("k", "done", [{"kernel_median_ms": 0.1}])
        with pytest.raises(ValueError, match="already stored"):
            s.put("k", "done", [])
        with pytest.raises(ValueError):
            s.put("j", "done", [{"kernel_median_ms": float("nan")}])
        with pytest.raises(ValueError, match="status='maybe'"):
            s.put("j", "maybe")
        assert s.keys() == {"k"} and s.rows("k") == [{"kernel_median_ms": 0.1}]
    (tmp_path / "d").mkdir()
    with pytest.raises(ValueError, match="is a directory"):
        SweepStore(tmp_path / "d")


def test_cli_sweep(corpus, tmp_path):
    corpus.to_json(str(tmp_path / "c.json"))
    r = run_cli("sweep", tmp_path / "c.json", "--store", tmp_path / "s.sqlite", "--dry-run", "--workers", "2",
                "--no-progress", "--directions", "forward")
    assert r.returncode == 0 and "16 measured, 0 failed" in r.stdout, r.stdout + r.stderr
    for args, says in (((tmp_path / "nope.json", "--store", tmp_path / "s.sqlite"), "no such file"),
                       ((tmp_path / "c.json", "--store", tmp_path / "s.sqlite", "--directions", "up"),
                        "--directions='up' is not one of"),
                       ((tmp_path / "c.json", "--store", tmp_path / "s.sqlite", "--workers", "0"), "--workers 0"),
                       ((tmp_path / "c.json", "--store", tmp_path / "s.sqlite", "--build-threads", "0"),
                        "--build-threads 0 must be in [1, 64]"),
                       ((tmp_path / "c.json", "--store", tmp_path / "s.sqlite", "--worker-memory-gb", "0"),
                        "--worker-memory-gb 0.0 must be a positive number of GB"),
                       ((tmp_path / "c.json", "--store", tmp_path / "s.sqlite", "--known", tmp_path / "c.json"),
                        "--known " + str(tmp_path / "c.json")),
                       ((tmp_path / "c.json", "--store", tmp_path / "no" / "s.sqlite"), "does not exist")):
        r = run_cli("sweep", *args)
        assert r.returncode == 2 and says in r.stderr and "Traceback" not in r.stderr, (args, r.stderr)

    import cudnn_algos.sweep

    asked = {}
    with pytest.MonkeyPatch.context() as mp:  # --no-legacy reaches the task's options (measure_task's "legacy")
        mp.setattr(cudnn_algos.sweep, "sweep", lambda *a, **k: asked.update(k["options"], cap=k["worker_memory_mb"])
                   or SimpleNamespace(stopped_by=""))
        for flags, legacy, cap in (((), True, None), (("--no-legacy", "--worker-memory-gb", "1.5"), False, 1536)):
            assert run_cli("sweep", tmp_path / "c.json", "--store", tmp_path / "t.sqlite", *flags).returncode == 0
            assert asked["legacy"] is legacy and asked["cap"] == cap
        for flags, lean in (((), False), (("--lean",), True)):  # a bool: `--lean far` is gone (measure's Note [a
            # first call is no time])
            assert run_cli("sweep", tmp_path / "c.json", "--store", tmp_path / "t.sqlite", *flags).returncode == 0
            assert asked["lean"] is lean
    r = run_cli("sweep", tmp_path / "c.json", "--store", tmp_path / "t.sqlite", "--lean", "far")
    assert r.returncode == 2 and "far" in r.stderr and "Traceback" not in r.stderr
    (tmp_path / "x.json").write_text(json.dumps({"schema": 3, "kind": "engine_search"}))
    r = run_cli("sweep", tmp_path / "x.json", "--store", tmp_path / "s.sqlite")
    assert r.returncode == 2 and "x.json" in r.stderr


def test_measure_task_returns_storable_rows_and_failures_as_data(make, monkeypatch, tmp_path):
    """CPU (the search replaced by the test builders' result): measure_task's outcome is what the store takes — the
    long-form records of the search, JSON-storable — and a cuDNN failure is a failed outcome with its reason."""
    import torch

    from cudnn_algos import api, backend, engines
    from cudnn_algos.errors import CudnnError
    from cudnn_algos.sweep import measure_task

    corpus = build_corpus(["decoders"], batches=(1,), configs=("fp32",), progress=False)
    task = tasks_of(corpus.problems[:1], ("forward",))[0]
    monkeypatch.setattr(engines, "find_engines", lambda *a, **k: make.engine_result())
    monkeypatch.setattr(api, "find", lambda *a, mode, **k: make.legacy_result(mode=mode))
    monkeypatch.setattr(backend, "environment", lambda dev: make.env)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    n_legacy = len(make.legacy_result().to_records())
    out = measure_task(task, {"legacy": False})
    assert out["status"] == "done" and out["env"] == make.env.key() and len(out["rows"]) == 5
    asked = {}
    monkeypatch.setattr(engines, "find_engines", lambda *a, **k: asked.update(k) or make.engine_result())
    measure_task(task, {"legacy": False, "build_threads": 8})  # the sweep's --build-threads reaches the search
    assert asked["build_threads"] == 8 and asked["measure"] is True
    assert asked["configs"] == () and asked["heuristics"] == ("instant", "a", "b", "fallback")
    cls = f"forward {task['dtype']} {task['memory_format']}"  # --known: the task's class's configurations built too
    measure_task(task, {"legacy": False, "known": {cls: ["eng70{SPLIT_K_SLC=1}"], "backward_data x y": ["eng1"]}})
    assert asked["configs"] == ("eng70{SPLIT_K_SLC=1}",) and asked["heuristics"] == ("instant", "a", "b", "fallback")
    out = measure_task(task)  # the legacy algorithms measured (find_ex) and the legacy heuristic's ranking
    legacy = [r for r in out["rows"] if r["candidate_kind"] == "legacy"]
    assert len(out["rows"]) == 5 + 2 * n_legacy and {r["stage"] for r in legacy} == {"find_ex", "heuristic"}

    def slow_search(*a, **k):  # 50 ms in all, of which cuDNN's building (search_ms) 20 ms, 12 ms of it NVRTC's
        time.sleep(0.05)
        r = make.engine_result()
        rows = list(r.rows)
        rows[0] = replace(rows[0], behavior_notes=("RUNTIME_COMPILATION",), plan=SimpleNamespace(build_ms=12.0))
        rows[1] = replace(rows[1], behavior_notes=(), plan=SimpleNamespace(build_ms=5.0))  # not compiled: not counted
        return replace(r, rows=tuple(rows), search_ms=20.0)

    monkeypatch.setattr(engines, "find_engines", slow_search)
    out = measure_task(task)
    st = out["stages"]  # the steps are disjoint: building is not counted again in the timing
    assert set(st) == {"engine_build", "build_rtc", "engine_timing", "legacy_find_ex", "legacy_heuristic"}, st
    assert st["engine_build"] == 0.02 and 0.03 <= st["engine_timing"] < 0.2, st
    assert st["build_rtc"] == pytest.approx(0.012), st  # within engine_build, so left out of the sum below
    assert sum(v for k, v in st.items() if k != "build_rtc") <= out["seconds"], (st, out["seconds"])

    def legacy_fails(*a, mode, **k):
        raise CudnnError("cudnnFindConvolutionForwardAlgorithmEx failed", "CUDNN_STATUS_BAD_PARAM", 2000)

    monkeypatch.setattr(api, "find", legacy_fails)
    out = measure_task(task)  # the engine rows are kept; each failed legacy search is a row with its reason
    failed = [r for r in out["rows"] if r["status"] == "FAILED"]
    assert out["status"] == "done" and len(out["rows"]) == 7 and len(failed) == 2
    assert "CUDNN_STATUS_BAD_PARAM" in failed[0]["note"]
    with SweepStore(tmp_path / "s.sqlite") as s:
        s.put(task["key"], out["status"], out["rows"], worker=out["worker"], env=out["env"])
        assert s.rows(task["key"])[0]["candidate"] == out["rows"][0]["candidate"]

    def fails(*a, **k):
        raise CudnnError("cudnnBackendFinalize failed", "CUDNN_STATUS_NOT_SUPPORTED", 3000)

    monkeypatch.setattr(engines, "find_engines", fails)
    out = measure_task(task)
    assert out["status"] == "failed" and out["reason"].startswith("CudnnError") and out["rows"] == []


def test_sweeps_opening_a_new_store_at_once_all_find_it_whole(tmp_path):
    """Eight processes open one new store at the same moment: each finds the tables and the schema row (made in one
    transaction), none fails, one schema row."""
    import sqlite3
    import subprocess

    path = tmp_path / "s.sqlite"
    code = ("import sys; from cudnn_algos.sweep import SweepStore; s = SweepStore(sys.argv[1]); "
            "s.put(sys.argv[2], 'done', [{'status': 'SUCCESS'}]); s.close()")
    procs = [subprocess.Popen([sys.executable, "-c", code, str(path), f"k{i}"], stderr=subprocess.PIPE, text=True)
             for i in range(8)]
    errs = [p.communicate(timeout=120)[1] for p in procs]
    assert [p.returncode for p in procs] == [0] * 8, errs
    with sqlite3.connect(path) as con:
        assert con.execute("SELECT COUNT(*) FROM meta WHERE k = 'schema'").fetchone()[0] == 1
    with SweepStore(path) as s:
        assert s.counts()["done"] == 8


def test_limit_runs_the_first_tasks_of_the_list_and_leaves_the_rest(corpus, tmp_path):
    from cudnn_algos.sweep import todo_of

    db = tmp_path / "s.sqlite"
    r = sweep(corpus.problems, str(db), dry_run=True, n_workers=1, progress=False, limit=5)
    assert (r.done, r.left, r.skipped) == (5, 43, 0)
    with SweepStore(db) as s:
        assert s.keys() == {t["key"] for t in todo_of(corpus.problems, set(), ("forward", "backward_data",
                                                                               "backward_filter"), 0)[2][:5]}
    again = sweep(corpus.problems, str(db), dry_run=True, n_workers=1, progress=False, limit=50, repeat_fraction=0)
    assert (again.done, again.left, again.skipped) == (43, 0, 5)
    with pytest.raises(ValueError, match="limit=-1"):
        sweep(corpus.problems, str(db), dry_run=True, limit=-1)


def test_merge_copies_what_the_store_lacks_and_keeps_what_it_has(tmp_path):
    """Stores filled on different machines become one: merge copies the other's problem-directions this one lacks
    (rows and where they ran), leaves the ones it has as they are, and takes a key filter; the CLI does the same."""
    a, b = SweepStore(tmp_path / "a.sqlite"), SweepStore(tmp_path / "b.sqlite")
    a.put("k1", "done", [{"x": 1}], worker="gpu0")
    b.put("k1", "done", [{"x": 99}, {"x": 98}], worker="gpu1")
    b.put("k2", "failed", reason="OOM", worker="gpu1")
    b.put("k3", "done", [{"x": 3}])
    assert a.merge(b, keys={"k1", "k2"}) == (1, 1)
    assert a.rows("k1") == [{"x": 1}] and [(t.key, t.status, t.reason, t.worker) for t in a.tasks()
                                            if t.key == "k2"] == [("k2", "failed", "OOM", "gpu1")]
    assert a.merge(b) == (1, 2) and a.rows("k3") == [{"x": 3}] and a.counts() == {"done": 2, "failed": 1, "rows": 2}
    a.close()
    b.close()
    p = run_cli("dataset", "merge", str(tmp_path / "c.sqlite"), "--from", str(tmp_path / "b.sqlite"))
    assert p.returncode == 0 and "3 problem-directions copied, 0 already" in p.stdout, p.stdout + p.stderr
    p = run_cli("dataset", "merge", str(tmp_path / "c.sqlite"))
    assert p.returncode == 2 and "needs --from" in p.stderr


def test_a_keys_only_store_carries_what_to_skip_and_merges_back_what_it_adds(corpus, tmp_path):
    """dataset keys: a store of the problem-directions alone (no rows). A sweep given it skips them and stores the
    rest; what it added merges back into the full store by its keys; merging its rowless tasks is refused, nothing
    copied."""
    from cudnn_algos.sweep import todo_of

    full = tmp_path / "full.sqlite"
    first = sweep(corpus.problems, str(full), dry_run=True, n_workers=1, progress=False, limit=5)
    p = run_cli("dataset", "keys", str(full), "--out", str(tmp_path / "keys.sqlite"))
    assert p.returncode == 0 and "5 problem-directions, no rows" in p.stdout, p.stdout + p.stderr
    keys = tmp_path / "keys.sqlite"
    with SweepStore(keys) as k, SweepStore(full) as f:
        assert k.keys() == f.keys() and k.counts()["rows"] == 0 and f.counts()["rows"] > 0
        start = k.keys()
    elsewhere = sweep(corpus.problems, str(keys), dry_run=True, n_workers=1, progress=False, repeat_fraction=0)
    assert (first.done, elsewhere.done, elsewhere.skipped) == (5, 43, 5)
    with SweepStore(full) as f, SweepStore(keys) as k:
        with pytest.raises(ValueError, match="5 problem-directions to copy lack their rows"):
            SweepStore(tmp_path / "empty.sqlite").merge(k)
        assert f.merge(k, k.keys() - start) == (43, 0)
        all_keys = {t["key"] for t in todo_of(corpus.problems, set(), ("forward", "backward_data",
                                                                      "backward_filter"), 0)[0]}
        assert f.keys() == all_keys and all(f.rows(key) for key in all_keys)
        assert SweepStore(tmp_path / "empty.sqlite").counts()["done"] == 0  # the refused merge copied nothing
    p = run_cli("dataset", "keys", str(full), "--out", str(keys))
    assert p.returncode == 2 and "exists" in p.stderr


def test_a_task_that_loses_its_cuda_context_fails_alone_and_its_worker_is_restarted(corpus, tmp_path):
    """CPU (dry runs; the fault stands in for a kernel's illegal memory access: dry_run_measure's lose_context).
    A fault poisons the worker process's CUDA context for its life: a sweep on an H200 stored 437 later tasks of
    that worker as failed with the same error. Now the faulting task alone is stored failed, saying what ran, the
    worker is restarted (a fresh process, a fresh context), and every other task is measured."""
    key = tasks_of(corpus.problems)[7]["key"]
    db = tmp_path / "s.sqlite"
    r = sweep(corpus.problems, str(db), dry_run=True, n_workers=2, progress=False,
              options={"lose_context": key, "seconds": 0.02})
    assert (r.done, r.failed, r.left) == (47, 1, 0), str(r)
    with SweepStore(db) as s:
        failed = [t for t in s.tasks() if t.status == "failed"]
    assert [t.key for t in failed] == [key]
    assert "CUDA context is lost" in failed[0].reason and "illegal memory access" in failed[0].reason
    assert sum(r.restarted.values()) == 1 and not r.died, (r.restarted, r.died)
    assert "restarted after a kernel fault lost their CUDA context" in str(r) and "died" not in str(r)


def test_a_worker_past_the_memory_cap_is_restarted_between_tasks(corpus, tmp_path):
    """CPU (dry runs, whose workers report their own resident memory): Note [a worker's memory]. With a cap below
    what a worker holds, each worker is restarted after each task it returns: every task is still measured once,
    the restarts are not deaths, and the summary says so; a cap it never reaches restarts nothing."""
    r = sweep(corpus.problems, str(tmp_path / "s.sqlite"), dry_run=True, n_workers=1, progress=False, limit=3,
              worker_memory_mb=1.0, options={"seconds": 0.01})
    assert (r.done, r.failed) == (3, 0) and r.recycled == {"w0": 3} and not r.died, str(r)
    assert "restarted past 0.00 GB: w0 3x" in str(r) and "died" not in str(r)
    r = sweep(corpus.problems, str(tmp_path / "t.sqlite"), dry_run=True, n_workers=1, progress=False, limit=3,
              worker_memory_mb=1e9)
    assert r.done == 3 and not r.recycled and "restarted past" not in str(r)
    with pytest.raises(ValueError, match="worker_memory_mb=0 must be a number > 0"):
        sweep(corpus.problems, str(tmp_path / "u.sqlite"), dry_run=True, worker_memory_mb=0)


def test_after_a_lost_context_a_worker_hands_tasks_back_and_in_process_sweeps_stop(corpus, tmp_path, monkeypatch):
    """CPU: the tasks a poisoned process is given after its fault come back unrun (the driver runs them again
    elsewhere), and a sweep without Dask stops at the fault with what it stored (the same command continues)."""
    from cudnn_algos.sweep import driver, tasks

    monkeypatch.setattr(tasks, "_LOST", {})
    all_tasks = tasks_of(corpus.problems)
    opts = {"lose_context": all_tasks[2]["key"]}
    assert tasks.dry_run_measure(all_tasks[1], opts)["status"] == "done"
    lost = tasks.dry_run_measure(all_tasks[2], opts)
    assert lost["status"] == "failed" and lost["context_lost"]
    later = tasks.dry_run_measure(all_tasks[3], opts)
    assert later["status"] == tasks.NOT_RUN and "lost by an earlier task" in later["reason"]
    monkeypatch.setattr(tasks, "_LOST", {})
    stored = []
    stop = driver._in_process(all_tasks, tasks.dry_run_measure, opts, lambda t, o: stored.append((t["key"], o)),
                              None)
    assert stop == "context-lost" and [k for k, _ in stored] == [t["key"] for t in all_tasks[:3]]
    assert stored[-1][1]["status"] == "failed"
    assert "stopped: a kernel faulted and this process's CUDA context is lost" in str(
        driver.SweepResult(2, 1, 0, 45, 1.0, stopped_by="context-lost"))


def test_the_summary_gives_seconds_per_step_and_holds_as_a_count():
    """CPU: the sweep's summary averages each task stage over the problem-directions run; holds of the GPU are a
    count, the rest seconds."""
    from cudnn_algos.sweep import driver

    r = driver.SweepResult(3, 1, 0, 0, 2.0, stages={"engine_build": 2.0, "gpu_holds": 10.0, "timed_screen": 0.4})
    assert "engine_build 0.50 s, gpu_holds 2.50, timed_screen 0.10 s" in str(r)
