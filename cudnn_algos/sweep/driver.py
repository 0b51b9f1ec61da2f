"""``sweep(problems, store)``: every problem-direction a store lacks, measured across GPUs by Dask.distributed
workers (one process per GPU, pinned by CUDA_VISIBLE_DEVICES, one thread each), or on an existing Dask cluster
(``scheduler="tcp://host:8786"``), or in this process when Dask is not installed. The driver is the store's only
writer: one transaction per problem-direction as results arrive. A worker that dies costs its task only: the
scheduler runs it again on another worker, up to `allowed_failures` times, then the driver stores it as failed with
the reason. Resumable (a re-run skips what the store holds), a time budget, Ctrl-C stops cleanly."""
from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from ..choices import TURN_SCOPES
from ..progress import Progress
from .store import SweepStore
from .tasks import NOT_RUN, dry_run_measure, measure_task, repeats_of, tasks_of

WORKERS_UP_S = 120.0  # the longest wait for a local cluster's workers to start before the first tasks go
RESTART_S = 120.0  # the longest wait for a worker restarted after it lost its CUDA context
FORGET_S = 5.0  # the longest wait for the scheduler to release a faulted task's result before its worker restarts
NOT_RUN_MAX = 3  # times a task is handed back unrun (its worker's context was lost) before it is stored as failed
DRAIN_S = 120.0  # at the budget's end, the longest wait for the tasks in flight then (Note [the budget's end])
NO_DASK = ("Dask is not installed: measuring in this process on one GPU. For every GPU of this machine or a "
           "cluster: pip install 'cudnn_algos[sweep]' (dask[distributed])")


UNITS = {"gpu_holds": ""}  # a task stage's unit in the summary where it is not seconds: holds of the GPU are counted


@dataclass(frozen=True)
class SweepResult:
    """What a sweep did: problem-directions stored as done and as failed, skipped (already in the store), left
    (not run: budget or Ctrl-C), per worker how many it measured, the wall seconds and problems per second."""

    done: int
    failed: int
    skipped: int
    left: int
    seconds: float
    per_worker: dict[str, int] = field(default_factory=dict)
    stopped_by: str = ""  # "budget", "ctrl-c" or "context-lost" (in-process: a kernel faulted)
    engine: str = ""  # "dask (N workers)", "dask at tcp://...", "in-process"
    repeats: int = 0  # of the problem-directions run, those measured a second time (the noise floor's sample)
    stages: dict[str, float] = field(default_factory=dict)  # per step, summed over tasks (measure_task's):
    # seconds, or what UNITS says
    died: dict[str, int] = field(default_factory=dict)  # worker -> how often it died (SIGKILL, a crash, OOM)
    retried: tuple[str, ...] = ()  # the tasks running on a worker when it died (run again; failed past the limit)
    restarted: dict[str, int] = field(default_factory=dict)  # worker -> restarts after a task lost its CUDA context
    memory: dict[str, tuple[float, float]] = field(default_factory=dict)  # worker -> resident MB after its first and
    # its last task (measure_task's rss_mb): whether a long-running worker's memory grows
    recycled: dict[str, int] = field(default_factory=dict)  # worker -> restarts at the memory cap (worker_memory_mb)
    memory_cap_mb: float | None = None

    @property
    def rate(self) -> float:
        return (self.done + self.failed) / self.seconds if self.seconds > 0 else 0.0

    def __str__(self) -> str:
        per = ", ".join(f"{w}: {n}" for w, n in sorted(self.per_worker.items()))
        stop = {"budget": "; stopped: the time budget ran out (the same command continues)",
                "ctrl-c": "; stopped: Ctrl-C (the same command continues)",
                "context-lost": "; stopped: a kernel faulted and this process's CUDA context is lost (the same "
                                "command continues in a fresh process)"}.get(self.stopped_by, "")
        rep = f" ({self.repeats} of them again, for the noise floor)" if self.repeats else ""
        n = self.done + self.failed
        steps = ("; per problem-direction: " + ", ".join(f"{k} {v / n:.2f}{UNITS.get(k, ' s')}"
                                                         for k, v in self.stages.items()) if self.stages and n else "")
        return (f"sweep ({self.engine}): {self.done} measured{rep}, {self.failed} failed, {self.skipped} already "
                f"stored, {self.left} left; {self.seconds:.1f} s, {self.rate:.2f} problem-directions/s"
                + (f"; per worker: {per}" if per else "") + steps + self._memory() + self._deaths()
                + self._restarts() + stop)

    def _memory(self) -> str:
        if not self.memory:
            return ""
        out = "; resident memory per worker, first -> last task: " + ", ".join(
            f"{w} {a / 1024:.2f} -> {b / 1024:.2f} GB" for w, (a, b) in sorted(self.memory.items()))
        if self.recycled:
            out += (f" (restarted past {self.memory_cap_mb / 1024:.2f} GB: " + ", ".join(
                f"{w} {n}x" for w, n in sorted(self.recycled.items())) + ")")
        return out

    def _restarts(self) -> str:
        if not self.restarted:
            return ""
        who = ", ".join(f"{w}" + (f" ({n} times)" if n > 1 else "") for w, n in sorted(self.restarted.items()))
        return (f"; worker(s) restarted after a kernel fault lost their CUDA context: {who} (the faulting tasks are "
                "stored failed, saying what ran)")

    def _deaths(self) -> str:
        if not self.died:
            return ""
        who = ", ".join(f"{w}" + (f" ({n} times)" if n > 1 else "") for w, n in sorted(self.died.items()))
        shown = "; ".join(self.retried[:3]) + (f"; and {len(self.retried) - 3} more" if len(self.retried) > 3 else "")
        return (f"; worker(s) died: {who}; {len(self.retried)} task(s) they were running were run again"
                + (f": {shown}" if shown else ""))


def worker_names(n_workers: int, gpus: bool = True, per_gpu: int = 1) -> list[tuple[str, int | None]]:
    """(name, GPU) of each local worker: worker i on GPU i // per_gpu (when `gpus`), named gpuG, or gpuG.J where
    several share GPU G (Note [sharing a GPU]); without GPUs wI."""
    if per_gpu < 1:
        raise ValueError(f"per_gpu={per_gpu!r} must be >= 1")
    if not gpus:
        return [(f"w{i}", None) for i in range(n_workers)]
    return [(f"gpu{i // per_gpu}" + (f".{i % per_gpu}" if per_gpu > 1 else ""), i // per_gpu)
            for i in range(n_workers)]


def local_cluster(n_workers: int, gpus: bool = True, per_gpu: int = 1):
    """A Dask cluster on this machine: worker i a process with CUDA_VISIBLE_DEVICES=i // per_gpu (when `gpus`) and
    one thread (a worker measures one problem at a time), named by its GPU (worker_names)."""
    from distributed import Nanny, Scheduler, SpecCluster

    workers = {name: {"cls": Nanny, "options": {
        "nthreads": 1, "env": {"CUDA_VISIBLE_DEVICES": str(gpu)} if gpu is not None else {}, "name": name,
        "silence_logs": 40}}
        for name, gpu in worker_names(n_workers, gpus, per_gpu)}
    return SpecCluster(workers=workers, scheduler={"cls": Scheduler, "options": {"dashboard_address": None}},
                       silence_logs=40)


def sweep(problems: Iterable[Any], store: SweepStore | str, *, directions: Iterable[str] | None = None,
          measure: Callable[..., dict[str, Any]] | None = None, options: dict[str, Any] | None = None,
          scheduler: str | None = None, n_workers: int | None = None, allowed_failures: int = 2,
          budget_s: float | None = None, progress: bool = True, dry_run: bool = False,
          repeat_fraction: float = 0.05, limit: int | None = None, workers_per_gpu: int = 1,
          worker_memory_mb: float | None = None) -> SweepResult:
    """Measures every problem-direction of `problems` (CorpusProblems) that `store` lacks. Long because: it is
    the driver's one loop (submit, collect, store, stop) with its three engines side by side.

    measure: the task function (default measure_task; dry_run=True: dry_run_measure, no GPU). n_workers: local
    workers (default: the visible GPUs). scheduler: an existing Dask cluster's address instead. allowed_failures:
    worker deaths one task may cause before it is stored as failed. budget_s: after it, nothing more starts and
    the tasks running then finish and are stored (Note [the budget's end]).
    repeat_fraction: the noise floor's sample (tasks.chosen_for_repeat): each of its problem-directions that an
    earlier sweep stored is measured again, in this sweep's processes, under its repeat key (dataset.noise_floor).
    limit: run at most this many problem-directions (the first of what `todo_of` lists), the rest left.
    workers_per_gpu: local workers per GPU (n_workers by default: the visible GPUs times it); above 1 the workers
    of a GPU take turns on it for everything but building plans (options["share_gpu"], Note [sharing a GPU]), or
    with options["turn_scope"] "timing" for the timed calls alone (Note [timing turns]); with
    `scheduler`, says that the cluster's workers share their GPUs so. worker_memory_mb: a Dask worker whose
    resident memory after a task exceeds it is restarted (Note [a worker's memory]).
    """
    from ..choices import DIRECTIONS

    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise ValueError(f"limit={limit!r} must be a whole number >= 0")
    if isinstance(workers_per_gpu, bool) or not isinstance(workers_per_gpu, int) or workers_per_gpu < 1:
        raise ValueError(f"workers_per_gpu={workers_per_gpu!r} must be a whole number >= 1")
    if worker_memory_mb is not None and (isinstance(worker_memory_mb, bool)
                                         or not isinstance(worker_memory_mb, (int, float)) or not worker_memory_mb > 0):
        raise ValueError(f"worker_memory_mb={worker_memory_mb!r} must be a number > 0")
    if workers_per_gpu > 1:
        options = {**(options or {}), "share_gpu": True}
    if (options or {}).get("turn_scope", "whole") not in TURN_SCOPES:
        raise ValueError(f"options['turn_scope']={options['turn_scope']!r} must be one of {', '.join(TURN_SCOPES)}")
    own = not isinstance(store, SweepStore)
    db = SweepStore(store) if own else store
    fn = measure or (dry_run_measure if dry_run else measure_task)
    t0 = time.perf_counter()
    deadline = None if budget_s is None else t0 + budget_s
    all_tasks, repeats, todo = todo_of(problems, db.keys(), tuple(directions or DIRECTIONS), repeat_fraction)
    left_out = 0 if limit is None else max(len(todo) - limit, 0)  # listed, not run: counted as left
    todo = todo[: len(todo) - left_out]
    counts: Counter = Counter()
    per_worker: Counter = Counter()
    stages: Counter = Counter()
    memory: dict[str, tuple[float, float]] = {}
    stopped = ""
    bar = Progress(len(todo), progress, "sweeping", unit="task")

    def record(task: dict[str, Any], out: dict[str, Any], attempts: int = 1) -> None:
        db.put(task["key"], out["status"], out.get("rows", ()), reason=out.get("reason"), attempts=attempts,
               worker=out.get("worker"), seconds=out.get("seconds"), env=out.get("env"))
        counts[out["status"]] += 1
        per_worker[out.get("worker") or "?"] += 1
        stages.update({"task": out.get("seconds") or 0.0, **(out.get("stages") or {})})
        if isinstance(out.get("rss_mb"), (int, float)):
            w = out.get("worker") or "?"
            memory[w] = (memory.get(w, (out["rss_mb"],))[0], float(out["rss_mb"]))
        elapsed = time.perf_counter() - t0
        bar.update(f"{counts['done']} done, {counts['failed']} failed, {sum(counts.values()) / elapsed:.2f}/s")

    deaths = Deaths(worker_memory_mb)
    try:
        engine, stopped = _run(todo, fn, options, record, scheduler, n_workers, allowed_failures, deadline, dry_run,
                               workers_per_gpu, deaths)
    finally:
        bar.close()
        if own:
            db.close()
    left = len(todo) + left_out - counts["done"] - counts["failed"]
    return SweepResult(done=counts["done"], failed=counts["failed"],
                       skipped=len(all_tasks) - len(todo) - left_out + len(repeats),
                       left=left, repeats=min(len(repeats), len(todo)),
                       seconds=time.perf_counter() - t0, per_worker=dict(per_worker), stopped_by=stopped,
                       engine=engine, stages=dict(stages), died=dict(deaths.died), retried=tuple(deaths.retried),
                       restarted=dict(deaths.restarted), memory=memory, recycled=dict(deaths.recycled),
                       memory_cap_mb=worker_memory_mb)


def todo_of(problems: Iterable[Any], stored: set[str], directions: Iterable[str],
            repeat_fraction: float) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """What a sweep over `problems` runs, in order, given the keys a store holds: (every task, the noise floor's
    repeats, the list to run: repeats first, then each task the store lacks). Task i of that list is Dask's key
    ``cudnn-algos-{i}``."""
    all_tasks = tasks_of(problems, tuple(directions))
    repeats = repeats_of(all_tasks, stored, repeat_fraction)  # first: few, and their first run was another process's
    return all_tasks, repeats, repeats + [t for t in all_tasks if t["key"] not in stored]


def _run(todo, fn, options, record, scheduler, n_workers, allowed_failures, deadline, dry_run,
         per_gpu=1, deaths: Deaths | None = None) -> tuple[str, str]:
    """Runs the tasks on Dask (or in this process without it); returns (engine, what stopped it early or ""); the
    workers that died on the way go into `deaths`."""
    try:
        import dask
        from distributed import Client
    except ImportError:
        if scheduler:
            raise ImportError("scheduler= needs Dask: pip install 'cudnn_algos[sweep]'") from None
        import warnings

        warnings.warn(NO_DASK, RuntimeWarning, stacklevel=3)
        return "in-process", _in_process(todo, fn, options, record, deadline)
    if not todo:
        return "dask (nothing to run)", ""
    with dask.config.set({"distributed.scheduler.allowed-failures": allowed_failures}):
        if scheduler:
            client, cluster, engine = Client(scheduler), None, f"dask at {scheduler}"
        else:
            n = n_workers or (_visible_gpus() or 1) * per_gpu
            cluster = local_cluster(n, gpus=not dry_run, per_gpu=per_gpu)
            turns = " for timed calls" if (options or {}).get("turn_scope") == "timing" else ""
            client, engine = Client(cluster), f"dask, {n} local worker(s)" + (
                f", {per_gpu} per GPU taking turns{turns}" if per_gpu > 1 else "")
            try:  # every local worker up before the first window of tasks is sized (one per worker thread)
                client.wait_for_workers(n, timeout=WORKERS_UP_S)
            except TimeoutError:
                pass  # the window grows as workers join
        watch = deaths if deaths is not None else Deaths()
        watch.names(client)
        try:
            return engine, _collect(client, todo, fn, options, record, deadline, watch)
        finally:
            watch.read(client, todo)
            client.close()
            if cluster is not None:
                cluster.close()


def dask_key(i: int) -> str:
    """The Dask key of task i of a sweep's list (todo_of): how an observer of the cluster names a running task."""
    return f"cudnn-algos-{i}"


def _collect(client, todo, fn, options, record, deadline, deaths: Deaths) -> str:
    """Note [the budget's end]: the tasks go to the scheduler a window at a time, as many as the cluster has worker
    threads, topped up as each one finishes; so a task submitted is a task a worker runs now. When the budget is
    spent nothing more is submitted and the tasks in flight (at most one per worker thread) finish and are stored,
    waiting up to DRAIN_S for them. Everything was submitted at once before: at the budget's end the tasks not
    running were cancelled, but a worker could take one between the driver asking which were running and the
    cancel, and cancelling a running task threw its measurement away (the worker ran on); closing the cluster under
    a busy worker left its heartbeat failing against the closed scheduler."""
    from distributed import as_completed

    queue = iter(enumerate(todo))
    again: list[tuple[int, dict[str, Any]]] = []  # handed back unrun (Note [a lost context]): first to go again
    unrun: Counter = Counter()
    flying = as_completed()
    key_of: dict[Any, tuple[int, dict[str, Any]]] = {}

    def top_up() -> None:
        window = max(sum(client.nthreads().values()), 1)
        while flying.count() < window:
            nxt = again.pop(0) if again else next(queue, None)
            if nxt is None:
                return
            fut = client.submit(fn, nxt[1], options, key=f"{dask_key(nxt[0])}-again{unrun[nxt[0]]}"
                                if unrun[nxt[0]] else dask_key(nxt[0]), pure=False)
            key_of[fut] = nxt
            flying.add(fut)

    def take(fut) -> None:
        i, task = key_of.pop(fut)
        out = _outcome(fut)
        fut.release()  # a result the cluster still held would be computed again if its worker went (a restart)
        if out.get("status") == NOT_RUN and unrun[i] < NOT_RUN_MAX:
            unrun[i] += 1
            again.append((i, task))
        else:
            record(task, {**out, "status": "failed"} if out.get("status") == NOT_RUN else out)
        if out.get("context_lost"):  # the task that faulted, or one its poisoned worker handed back
            _restart(client, out.get("worker"), deaths, fut.key)
        elif deaths.over_cap(out):
            _restart(client, out.get("worker"), deaths, fut.key, deaths.recycled)

    try:
        top_up()
        for fut in flying:
            over = deadline is not None and time.perf_counter() > deadline
            take(fut)
            if not over:
                top_up()
            deaths.names(client, every_s=1.0)
            if over:
                _drain(client, key_of, take)
                return "budget"
    except KeyboardInterrupt:
        client.cancel(list(key_of))
        return "ctrl-c"
    return ""


# Note [a worker's memory]: a sweep worker's resident memory grows with the problems it has measured (on the GPU
# machine ~1 GB per 200 problem-directions: each problem's plans stay cached, torch's among them, for the process's
# life). Nothing of one problem is needed by the next, so a worker past the cap (sweep's worker_memory_mb, the CLI's
# --worker-memory-gb) is restarted between tasks, as a worker whose context was lost is: a fresh process. Its
# restart is the driver's own, not counted as a death; its next tasks pay the start (CUDA context, CUPTI) once.


class Deaths:
    """The workers that died during a sweep and the tasks they were running, from the scheduler's own event log
    (each unexpected "remove-worker" event names the worker's address and the keys it was processing), with the
    workers' names as the scheduler listed them while they lived; and the restarts the driver asked for."""

    def __init__(self, memory_cap_mb: float | None = None) -> None:
        self.since = time.time()
        self.name_of: dict[str, str] = {}
        self._looked = 0.0
        self.died: Counter = Counter()
        self.retried: list[str] = []
        self.restarted: Counter = Counter()  # worker name -> restarts the driver asked for (not deaths)
        self.recycled: Counter = Counter()  # worker name -> restarts at the memory cap (Note [a worker's memory])
        self.memory_cap_mb = memory_cap_mb

    def over_cap(self, out: dict[str, Any]) -> bool:
        """Whether the worker that returned `out` is past the memory cap (Note [a worker's memory])."""
        rss = out.get("rss_mb")
        return (self.memory_cap_mb is not None and bool(out.get("worker")) and isinstance(rss, (int, float))
                and rss > self.memory_cap_mb)

    def names(self, client, every_s: float = 0.0) -> None:
        now = time.perf_counter()
        if now - self._looked < every_s:
            return
        self._looked = now
        try:
            workers = client.scheduler_info(n_workers=-1).get("workers", {})
        except Exception:  # noqa: BLE001 (names are a courtesy: the address stands in)
            return
        self.name_of.update({a: str(w.get("name", a)) for a, w in workers.items()})

    def read(self, client, todo: list[dict[str, Any]]) -> None:
        try:
            events = client.get_events("all")
        except Exception:  # noqa: BLE001 (a scheduler that is gone: nothing more is known)
            return
        index = {dask_key(i): t for i, t in enumerate(todo)}
        restarts = Counter(self.restarted) + Counter(self.recycled)
        for stamp, msg in events:
            if (stamp < self.since or not isinstance(msg, dict) or msg.get("action") != "remove-worker"
                    or msg.get("expected")):
                continue
            keys = [str(k).split("-again")[0] for k in msg.get("processing-tasks", ())]  # a task handed back: its own
            mine = [index[k] for k in keys if k in index]
            if not mine and msg.get("worker") not in self.name_of:
                continue  # another client's worker, on a shared scheduler
            name = self.name_of.get(msg.get("worker"), msg.get("worker", "?"))
            if restarts[name] > 0:  # a restart the driver asked for: counted there
                restarts[name] -= 1
                continue
            self.died[name] += 1
            self.retried += [t["key"] for t in mine]


def _outcome(fut) -> dict[str, Any]:
    """A finished future's result as the store keeps it: a task that raised, or whose workers all died, is failed
    with the reason."""
    from distributed import KilledWorker

    try:
        return fut.result()
    except KilledWorker as e:  # its worker died allowed-failures + 1 times
        return {"status": "failed", "reason": f"its worker died each time it ran it ({e})"}
    except Exception as e:  # noqa: BLE001 (an exception the task function raised: stored with it)
        return {"status": "failed", "reason": f"{type(e).__name__}: {str(e)[:300]}"}


def _restart(client, worker: str | None, deaths: Deaths, key: str, counter: Counter | None = None) -> None:
    """Restarts the worker (by name) whose task lost its CUDA context (or that is past the memory cap): a fresh
    process has a fresh context. First the scheduler must have forgotten that task (released): a result it still
    wants when its worker goes is computed again on another worker, which would fault there too. Counted in
    `counter` (default deaths.restarted)."""
    if not worker:
        return
    until = time.perf_counter() + FORGET_S
    while time.perf_counter() < until:
        try:
            if not client.run_on_scheduler(_scheduler_has, key):
                break
        except Exception:  # noqa: BLE001 (the restart goes ahead; a second fault is handled the same way)
            break
        time.sleep(0.02)
    try:
        client.restart_workers([worker], timeout=RESTART_S, raise_for_error=False)
    except Exception:  # noqa: BLE001 (a worker that cannot restart hands its tasks back unrun; the sweep goes on)
        return
    (deaths.restarted if counter is None else counter)[worker] += 1


def _scheduler_has(key: str, dask_scheduler=None) -> bool:
    return key in dask_scheduler.tasks


def _drain(client, key_of, take, grace_s: float = DRAIN_S) -> None:
    """The tasks in flight at the budget's end finish and are stored; those still running after `grace_s` are
    cancelled (Note [the budget's end])."""
    from distributed import wait

    pending = list(key_of)
    try:
        wait(pending, timeout=grace_s)
    except TimeoutError:
        pass
    for fut in pending:
        if fut.done():
            take(fut)
    if key_of:
        client.cancel(list(key_of))


def _in_process(todo, fn, options, record, deadline) -> str:
    try:
        for task in todo:
            if deadline is not None and time.perf_counter() > deadline:
                return "budget"
            out = fn(task, options)
            if out.get("status") == NOT_RUN:  # this process lost its context before: nothing more runs here
                return "context-lost"
            record(task, out)
            if out.get("context_lost"):
                return "context-lost"
    except KeyboardInterrupt:
        return "ctrl-c"
    return ""


def _visible_gpus() -> int:
    try:
        import torch

        return torch.cuda.device_count()
    except ImportError:
        return 0
