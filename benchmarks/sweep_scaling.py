"""The sweep across GPUs, measured: the same list of problem-directions swept by 1 worker and by N workers (one per
GPU, each warmed up first so the rate is measuring, not start-up), then the kill test: a sweep of the next problem-
directions with every worker, one worker SIGKILLed while it runs a task. Printed: problem-directions per second per
worker count and the speed-up; for the kill test, the task the dead worker held, whether it was stored after running
again elsewhere, and the store's counts (stored, failed, duplicates, lost).

The stores start as copies of --store; --keep writes the N-worker store (the list measured once more, as the noise
floor's repeats from the 1-worker run, and the kill test's problem-directions) for the next sweep to continue; with
--per-gpu above 1, the 1-worker store instead (workers sharing a GPU are measured here, not yet trusted).

    python benchmarks/sweep_scaling.py corpus.json.gz --store sweep.sqlite --n 100 --workers 1,2 --kill-n 40 \\
        --keep grown.sqlite --json scaling.json
    python benchmarks/sweep_scaling.py corpus.json.gz --store s.sqlite --n 40 --dry-run --task-s 0.2   # no GPU
    python benchmarks/sweep_scaling.py corpus.json.gz --store s.sqlite --n 100 --workers 1,2 --per-gpu 2 --kill-n 0
        # two workers taking turns on one GPU against one alone: the rate, and their timings against each other
        # (the noise floor between the two runs: it should read like the sweep's own)
    python benchmarks/sweep_scaling.py corpus.json.gz --store s.sqlite --n 50 --workers 1,2 --both-orders --kill-n 0
        # the pair twice: the counts in order on N problem-directions, then in reverse on the next N, so that
        # neither count always runs second (a second run of the same problems builds its plans faster)
    python benchmarks/sweep_scaling.py ... --no-legacy --build-threads 4 --lean   # as the sampled sweeps run
    python benchmarks/sweep_scaling.py ... --per-gpu 4 --turns timing   # four a GPU, alone only for timed calls
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cudnn_algos.choices import DIRECTIONS  # noqa: E402


def warm_worker(dry_run: bool) -> int:
    """On a worker: torch, CUDA and cuDNN loaded and one small problem measured, so the timed sweep measures."""
    if not dry_run:
        from cudnn_algos.spec import ConvSpec
        from cudnn_algos.sweep import measure_task

        spec = ConvSpec(8, 8, (3, 3), padding=1)
        for direction in DIRECTIONS:
            measure_task({"key": "warm-up", "spec": spec.to_dict(), "input_shape": [2, 8, 16, 16], "dtype": "float16",
                          "memory_format": "channels_last", "direction": direction}, {"legacy": True})
    return os.getpid()


def cluster(n_workers: int, dry_run: bool, per_gpu: int = 1):
    """A local cluster (cudnn_algos.sweep.local_cluster) that lets a task's worker die twice, its client, and the
    workers warmed."""
    import dask
    from distributed import Client

    from cudnn_algos.sweep import local_cluster

    with dask.config.set({"distributed.scheduler.allowed-failures": 2}):
        c = local_cluster(n_workers, gpus=not dry_run, per_gpu=per_gpu)
    client = Client(c)
    client.wait_for_workers(n_workers)
    client.run(warm_worker, dry_run)
    return c, client


def timed_sweep(problems, store: str, n: int, workers: int, options: dict, dry_run: bool, per_gpu: int = 1) -> dict:
    """n problem-directions the store lacks, swept by `workers` warmed workers (per_gpu to a GPU): the rate."""
    from cudnn_algos.sweep import sweep

    per_gpu = min(per_gpu, workers)
    c, client = cluster(workers, dry_run, per_gpu)
    try:
        r = sweep(problems, store, scheduler=c.scheduler_address, limit=n, repeat_fraction=0, progress=False,
                  dry_run=dry_run, options=options, workers_per_gpu=per_gpu)
    finally:
        client.close()
        c.close()
    print(f"  {workers} worker(s): {r}")
    return {"workers": workers, "done": r.done, "failed": r.failed, "seconds": r.seconds, "rate": r.rate,
            "per_worker": r.per_worker}


def kill_test(problems, store: str, n: int, workers: int, after_s: float, options: dict, dry_run: bool) -> dict:
    """n more problem-directions swept by `workers` workers; `after_s` seconds in, the worker running a task is
    SIGKILLed (its nanny starts another). Returns what was killed and what the store holds afterwards."""
    from cudnn_algos.sweep import SweepStore, dask_key, sweep, todo_of

    with SweepStore(store) as s:
        before = s.keys()
    todo = todo_of(problems, before, DIRECTIONS, 0)[2][:n]  # the list sweep() runs below
    by_dask_key = {dask_key(i): t["key"] for i, t in enumerate(todo)}
    c, client = cluster(workers, dry_run)
    killed: dict = {}

    def killer():
        time.sleep(after_s)
        for _ in range(200):  # a worker holding one of this sweep's tasks
            for addr, keys in client.processing().items():
                held = [k for k in keys if str(k) in by_dask_key]
                if held:
                    pid = client.run(os.getpid, workers=[addr])[addr]
                    name = str(client.scheduler_info()["workers"].get(addr, {}).get("name", addr))
                    os.kill(pid, signal.SIGKILL)
                    killed.update(worker=name, pid=pid, dask_key=str(held[0]), task=by_dask_key[str(held[0])],
                                  at_s=round(time.perf_counter() - t0, 1))
                    return
            time.sleep(0.05)

    t0 = time.perf_counter()
    th = threading.Thread(target=killer, daemon=True)
    th.start()
    try:
        r = sweep(problems, store, scheduler=c.scheduler_address, limit=n, repeat_fraction=0, progress=False,
                  dry_run=dry_run, options=options)
    finally:
        th.join(timeout=5)
        client.close()
        c.close()
    with SweepStore(store) as s:
        tasks = [t for t in s.tasks() if t.key not in before]
        rows_per_key = dict(s.con.execute("SELECT key, COUNT(*) FROM rows GROUP BY key").fetchall())
    keys = [t.key for t in tasks]
    wanted = {t["key"] for t in todo}
    status = {t.key: t.status for t in tasks}
    out = {"n": n, "killed": killed, "stored": len(keys), "done": sum(t.status == "done" for t in tasks),
           "failed": sum(t.status == "failed" for t in tasks), "duplicates": len(keys) - len(set(keys)),
           "lost": len(wanted - set(keys)), "extra": len(set(keys) - wanted),
           "rows_match": all(rows_per_key.get(t.key, 0) == t.rows for t in tasks),
           "killed_task_status": status.get(killed.get("task")), "seconds": r.seconds, "per_worker": r.per_worker}
    print(f"  kill test: {r}")
    return out


def new_keys(store: str, base: str) -> set[str]:
    """The problem-directions `store` holds that `base` (its starting copy; may not exist) does not."""
    from cudnn_algos.sweep import SweepStore

    with SweepStore(store) as s:
        keys = s.keys()
    if not os.path.exists(base):
        return keys
    with SweepStore(base) as b:
        return keys - b.keys()


def add_repeats(into: str, other: str, keys: set[str]) -> int:
    """The problem-directions `keys` that store `other` measured (in other processes) stored in `into` under their
    repeat keys: pairs for the noise floor. Returns how many."""
    from cudnn_algos.sweep import SweepStore
    from cudnn_algos.sweep.tasks import repeat_key

    n = 0
    with SweepStore(other) as src, SweepStore(into) as dst:
        have = dst.keys()
        for t in src.tasks():
            if t.key in keys and t.key in have and repeat_key(t.key) not in have:
                dst.put(repeat_key(t.key), t.status, src.rows(t.key), reason=t.reason, attempts=t.attempts,
                        worker=t.worker, seconds=t.seconds, env=t.env)
                n += 1
    return n


def agreement(top: str, other: str, keys: set[str]) -> str:
    """The noise floor between two runs of the same problem-directions `keys` (dataset.noise_floor on a store of
    the top run's rows with the other run's as repeats): with --per-gpu, whether workers sharing a GPU time what a
    worker alone times."""
    from cudnn_algos.dataset import noise_floor
    from cudnn_algos.sweep import SweepStore

    path = str(Path(top).with_suffix(".pairs.sqlite"))
    with SweepStore(top) as src, SweepStore(path) as dst:
        for t in src.tasks():
            if t.key in keys:
                dst.put(t.key, t.status, src.rows(t.key), env=t.env)
    add_repeats(path, other, keys)
    with SweepStore(path) as s:
        return str(noise_floor(s))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("corpus")
    ap.add_argument("--store", required=True, help="the store the runs start from (copied; not changed)")
    ap.add_argument("--n", type=int, default=100, help="problem-directions per timed sweep")
    ap.add_argument("--workers", default="1,2", help="worker counts to time, comma-separated")
    ap.add_argument("--per-gpu", type=int, default=1,
                    help="workers sharing a GPU in the runs of more than one worker (taking turns on it)")
    ap.add_argument("--both-orders", action="store_true",
                    help="then the counts again in reverse order on the next --n problem-directions; the rate of each "
                         "count over both lists")
    ap.add_argument("--kill-n", type=int, default=40, help="problem-directions of the kill test (0: none)")
    ap.add_argument("--kill-after", type=float, default=10.0, help="seconds into the kill test's sweep")
    ap.add_argument("--keep", default=None, help="write the largest worker count's store, grown, here")
    ap.add_argument("--json", default=None)
    ap.add_argument("--dry-run", action="store_true", help="no GPU: dry-run tasks of --task-s seconds each")
    ap.add_argument("--task-s", type=float, default=0.2, help="--dry-run: seconds per task")
    ap.add_argument("--no-legacy", action="store_true", help="as `sweep --no-legacy` (the sampled sweeps' setting)")
    ap.add_argument("--build-threads", type=int, default=1, help="as `sweep --build-threads N`")
    ap.add_argument("--lean", action="store_true", help="as `sweep --lean`: a lean screen")
    ap.add_argument("--turns", choices=("whole", "timing"), default="whole",
                    help="as `sweep --turns`: what workers sharing a GPU hold it alone for (Note [timing turns])")
    a = ap.parse_args()
    from cudnn_algos.corpus import Corpus

    problems = Corpus.load(a.corpus).problems
    counts = [int(w) for w in a.workers.split(",") if w]
    options = {"seconds": a.task_s} if a.dry_run else {}
    options.update(legacy=not a.no_legacy, build_threads=a.build_threads, lean=a.lean, turn_scope=a.turns)
    tmp = Path(tempfile.mkdtemp(prefix="sweep_scaling_"))
    out: dict = {"n": a.n, "runs": [], "dry_run": a.dry_run}
    print(f"sweep scaling: {a.n} problem-directions the store lacks, swept by {counts} warmed worker(s)"
          + (f", then the next {a.n} in reverse order" if a.both_orders else ""))
    top, low = max(counts), min(counts)
    base = last_top = a.store
    for pass_, order in enumerate([counts, counts[::-1]][:2 if a.both_orders else 1], start=1):
        stores = {}
        for w in order:
            stores[w] = str(tmp / f"p{pass_}w{w}.sqlite")
            if os.path.exists(base):
                shutil.copyfile(base, stores[w])
            out["runs"].append({**timed_sweep(problems, stores[w], a.n, w, options, a.dry_run, a.per_gpu),
                                "pass": pass_})
        keys = new_keys(stores[low], base)
        if len(counts) > 1:  # the same list measured by the fewest workers and by the most
            out.setdefault("agreements", []).append(agreement(stores[top], stores[low], keys))
            if a.per_gpu == 1:  # what the fewest workers measured is a second measurement of the top run's list
                out["repeats_added"] = out.get("repeats_added", 0) + add_repeats(stores[top], stores[low], keys)
        # until the agreement says otherwise, only a GPU's lone worker's rows are kept (and continued)
        base, last_top = (stores[low] if a.per_gpu > 1 else stores[top]), stores[top]
    if "agreements" in out:
        out["agreement"] = out["agreements"][0]
    if a.kill_n:
        out["kill"] = kill_test(problems, last_top, a.kill_n, top, a.kill_after, options, a.dry_run)
    if a.keep:
        shutil.copyfile(base, a.keep)
    rate = {}  # each count's problem-directions per second over every list it swept
    for w in counts:
        done = sum(r["done"] for r in out["runs"] if r["workers"] == w)
        secs = sum(r["seconds"] for r in out["runs"] if r["workers"] == w)
        rate[w] = done / secs if secs else 0.0
    out["rate"] = rate
    both = " over both lists" if a.both_orders else ""
    lines = [f"{w} worker(s): {rate[w]:.3f} problem-directions/s{both}" + (
        f" ({rate[w] / rate[low]:.2f}x {low} worker)" if w != low and rate[low] else "") for w in counts]
    for i, agreed in enumerate(out.get("agreements", []), start=1):
        lines.append(f"{top} workers ({min(a.per_gpu, top)} per GPU) against {low}, the same problem-directions"
                     + (f" (list {i})" if a.both_orders else "") + f", {agreed}")
    if "kill" in out:
        k = out["kill"]
        lines.append(f"kill test: SIGKILLed {k['killed'].get('worker')} at {k['killed'].get('at_s')} s while it ran "
                     f"{k['killed'].get('dask_key')}; that task stored as {k['killed_task_status']}; of {k['n']}: "
                     f"{k['stored']} stored ({k['done']} done, {k['failed']} failed), {k['duplicates']} duplicates, "
                     f"{k['lost']} lost, rows whole: {k['rows_match']}")
    if "repeats_added" in out:
        lines.append(f"{out['repeats_added']} of the {low}-worker runs' problem-directions kept as repeats")
    print("\n".join(lines))
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1))
    shutil.rmtree(tmp, ignore_errors=True)
    ok = "kill" not in out or (out["kill"]["killed"] and out["kill"]["duplicates"] == 0 and out["kill"]["lost"] == 0)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
