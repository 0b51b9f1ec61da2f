"""What a sweep runs: one task per problem-direction (a JSON-able dict with its key), and the functions a worker runs
on a task. ``measure_task`` measures on the worker's GPU (engine configurations beside torch's op, the long-form
records of cudnn_algos.results); ``dry_run_measure`` returns rows made from the task alone, no GPU, to check that a
cluster is wired (and for the tests). Either returns its outcome; a candidate or a problem that fails is data
(status "failed" with the reason), only a worker's death is left to the scheduler (the task runs again elsewhere)."""
from __future__ import annotations

import hashlib
import json
import os
import signal
import time
from contextlib import nullcontext
from typing import Any, Iterable

from ..choices import DIRECTIONS
from ..configs import SEARCH_LISTS
from .turns import GpuTurn

DIE_ONCE_ENV = "CUDNN_ALGOS_SWEEP_DIE_ONCE"  # dry runs: a file whose first reader deletes it and kills its worker
NOT_RUN = "not run"  # a task's status when its worker's CUDA context was lost before it: the driver runs it again
_LOST: dict[str, str] = {}  # this process's lost CUDA context, once a task lost it: {"reason": ...}
_HELD: list[Any] = []  # the cupti_held() block a lean task entered in this process, never left (_hold_cupti)


def _hold_cupti() -> None:
    """A lean sweep's worker keeps CUPTI attached between its searches' kernel-clock sessions for the rest of its
    life (measure.cupti_held: entered once, never left): one attach instead of one per session (five a task), and
    no host memory kept by each attach/finalize cycle over thousands of tasks. The idle CUPTI slows launches a
    little: that reaches the confirmed rows' throughput and host samples, not the kernel clock."""
    if not _HELD:
        from ..measure import cupti_held

        held = cupti_held()
        held.__enter__()
        _HELD.append(held)


def _context_lost(base: dict[str, Any], e: BaseException, t0: float) -> dict[str, Any]:
    """The task whose run lost this process's CUDA context: failed with the reason (what faulted), flagged so that
    the driver restarts the worker; later tasks here are not run (Note [a lost context])."""
    _LOST.setdefault("reason", f"{type(e).__name__}: {str(e)[:300]}")
    return {**base, "status": "failed", "rows": [], "reason": f"{type(e).__name__}: {str(e)[:400]}",
            "seconds": time.perf_counter() - t0, "context_lost": True}


def _after_loss(base: dict[str, Any]) -> dict[str, Any] | None:
    """A task given to a worker whose context an earlier task lost: not run, for the driver to run it elsewhere."""
    if not _LOST:
        return None
    return {**base, "status": NOT_RUN, "rows": [], "context_lost": True,
            "reason": f"this worker's CUDA context was lost by an earlier task ({_LOST['reason'][:200]})"}


def task_key(spec: Any, input_shape: Iterable[int], dtype: str, memory_format: str, direction: str) -> str:
    """The problem-direction's key: stable text, the same in every process and run."""
    return json.dumps({"spec": str(spec), "input_shape": list(input_shape), "dtype": dtype,
                       "memory_format": memory_format, "direction": direction}, sort_keys=True)


def tasks_of(problems: Iterable[Any], directions: Iterable[str] = DIRECTIONS) -> list[dict[str, Any]]:
    """One task per problem (cudnn_algos.corpus.CorpusProblem) and direction, most used problems first."""
    out = []
    for p in sorted(problems, key=lambda p: -p.uses):
        for d in directions:
            out.append({"key": task_key(p.spec, p.input_shape, p.dtype, p.memory_format, d), "spec": p.spec.to_dict(),
                        "input_shape": list(p.input_shape), "dtype": p.dtype, "memory_format": p.memory_format,
                        "direction": d, "uses": p.uses, "families": list(p.families)})
    return out


REPEAT = " #repeat"  # a repeat's key: the problem-direction's key and this


def repeat_key(key: str) -> str:
    return key + REPEAT


def is_repeat(key: str) -> bool:
    return key.endswith(REPEAT)


def chosen_for_repeat(key: str, fraction: float) -> bool:
    """Whether problem-direction `key` is in the sample measured twice (the noise floor): a stable choice by the
    key's hash, the same in every process and run, about `fraction` of all keys."""
    if fraction <= 0:
        return False
    return int(hashlib.sha1(key.encode()).hexdigest()[:8], 16) < fraction * 0x100000000


def repeats_of(tasks: Iterable[dict[str, Any]], stored: set[str], fraction: float) -> list[dict[str, Any]]:
    """The noise floor's tasks: for each task of the sample (chosen_for_repeat) whose first measurement is already
    stored (so by an earlier sweep's process, never this one's), the same measurement again under its repeat key,
    unless that is stored too."""
    return [{**t, "key": repeat_key(t["key"]), "repeat_of": t["key"]} for t in tasks
            if t["key"] in stored and repeat_key(t["key"]) not in stored and chosen_for_repeat(t["key"], fraction)]


def worker_name() -> str:
    """The Dask worker's name where there is one (the GPU it is pinned to), else this process."""
    try:
        from distributed import get_worker

        return str(get_worker().name)
    except (ImportError, ValueError):
        return f"pid {os.getpid()}"


def resident_mb() -> float | None:
    """This process's resident memory in MB (Linux's /proc/self/statm), or None where it cannot be read: each task
    reports it, so a sweep's summary shows whether a long-running worker's memory grows."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        return None


def measure_task(task: dict[str, Any], options: dict[str, Any] | None = None) -> dict[str, Any]:
    """Measures one problem-direction on this process's GPU: find_engines with every heuristic list (plus, with
    options["exhaustive"] N, every engine's knob choices up to N configurations; options["build_threads"]: threads
    building the plans; options["known"], {problem class: configuration names} (selector Note [known
    configurations]): those of the task's class built and timed too, source "exact"; options["share_gpu"]: other
    workers share this GPU, so everything after building the plans waits for this GPU's turn, turns.py, and
    options["turn_scope"] says what is exclusive ("whole" or "timing": Note [timing turns]); options["lean"]: the
    screen's accuracy calls enqueued together, find_engines(lean=True), and CUPTI held attached for the worker's
    life, _hold_cupti), screened,
    refined, confirmed beside torch's op (benchmark on); with options["legacy"] (default) also the legacy
    algorithms, measured (find_ex), and the legacy heuristic's ranking (cudnnGet..._v7, rows of candidate_kind
    "legacy" with heuristic_rank). Returns its long-form records; a legacy search that fails is a row saying so."""
    import torch

    from ..api import find
    from ..backend import environment
    from ..errors import CudaContextLost, CudaError, CudnnError, is_context_lost
    from ..spec import ConvSpec

    opts = {"repeats": 5, "screen": 3, "refine": 2, "exhaustive": 0, "legacy": True, "build_threads": 1,
            "share_gpu": False, "lean": False, **(options or {})}
    t0 = time.perf_counter()
    base = {"worker": worker_name(), "env": None}
    if (skip := _after_loss(base)) is not None:
        return skip
    # host seconds per step of this task (the sweep prints their sums): engine_build, engine_timing, legacy_find_ex,
    # legacy_heuristic, disjoint; gpu_wait (sharing a GPU) is the part of the timing steps spent waiting for a turn,
    # gpu_timed the part held alone, gpu_shared the part held shared (Note [timing turns]: untimed GPU work, which
    # still keeps the others' timed calls waiting), gpu_holds how many holds alone; wait_<step>, timed_<step>: both
    # by search step
    stages: dict[str, float] = {}
    # workers sharing a GPU take turns on it for everything but building plans (turns.py, Note [sharing a GPU])
    turn = _turn(opts)
    try:
        spec = ConvSpec.from_dict(task["spec"])
        r, steps = _engine_search(spec, task, opts, turn)
        # disjoint steps: building every plan (the refine's neighbours too), then everything else find_engines did
        # (screen, refine's timing, confirm, torch's op); measure_s alone would count the refine's building twice
        build_s = r.search_ms / 1e3
        stages.update(engine_build=build_s, engine_timing=max(0.0, time.perf_counter() - t0 - build_s))
        # within engine_build: the plans cuDNN compiled at run time (NVRTC), summed over the build threads' clocks
        stages["build_rtc"] = sum((row.plan.build_ms or 0.0) for row in r.rows
                                  if row.plan is not None and "RUNTIME_COMPILATION" in row.behavior_notes) / 1e3
        # within the timing (not disjoint from it: the refine's step holds its building): the search's own steps
        stages.update({f"step_{k}": v for k, v in steps.items()})
        context = dict(uses=task.get("uses", 1), families=task.get("families", []))
        rows = r.to_records(**context)
        if opts["legacy"]:
            args = dict(direction=task["direction"], dtype=task["dtype"], memory_format=task["memory_format"])
            for mode, measure in (("find_ex", True), ("heuristic", False)):
                t1 = time.perf_counter()
                try:
                    with turn.timing() if turn is not None and measure else nullcontext():  # heuristic: host
                        r_legacy = find(spec, tuple(task["input_shape"]), mode=mode, measure=measure,
                                        repeats=opts["repeats"], **args)
                    rows += r_legacy.to_records(**context, stage=mode)
                except CudaContextLost:
                    raise
                except (CudnnError, CudaError, torch.OutOfMemoryError) as e:
                    status = getattr(e, "status", "")
                    rows.append({"candidate_kind": "legacy", "candidate": f"legacy {mode}", "status": "FAILED",
                                 "stage": mode, "note": f"{type(e).__name__}{' ' + status if status else ''}: "
                                                        f"{str(e)[:300]}"})
                stages[f"legacy_{mode}"] = time.perf_counter() - t1
        if turn is not None:  # waiting for turns, and holding one exclusively (every turn, or the timed calls')
            stages.update(gpu_wait=turn.waited, gpu_timed=turn.timed, gpu_shared=max(0.0, turn.held - turn.timed),
                          gpu_holds=float(turn.holds))
            stages.update({f"wait_{k}": v for k, v in turn.waited_in.items()})
            stages.update({f"timed_{k}": v for k, v in turn.timed_in.items()})
        return {**base, "status": "done", "rows": rows, "env": environment(torch.cuda.current_device()).key(),
                "seconds": time.perf_counter() - t0, "stages": stages, "rss_mb": resident_mb()}
    except CudaContextLost as e:
        return _context_lost(base, e, t0)
    except (CudnnError, CudaError, torch.OutOfMemoryError, ValueError, TypeError) as e:
        return {**base, "status": "failed", "rows": [], "reason": f"{type(e).__name__}: {str(e)[:300]}",
                "seconds": time.perf_counter() - t0}
    except Exception as e:  # torch's AcceleratorError after a fault outside find_engines' own calls
        if is_context_lost(e):
            return _context_lost(base, e, t0)
        raise


def _turn(opts: dict[str, Any]) -> GpuTurn | None:
    """The task's turn on its GPU where options["share_gpu"] says other workers share it, else None; released only
    once this process's GPU work has finished (settle: torch.cuda.synchronize where CUDA is up; a dry run has none)."""
    if not opts.get("share_gpu"):
        return None
    return GpuTurn(directory=opts.get("turn_dir"), scope=opts.get("turn_scope", "whole"), settle=_settle)


def _settle() -> None:
    """This process's enqueued GPU work finished, where it has started CUDA (Note [timing turns])."""
    import torch

    if torch.cuda.is_initialized():
        torch.cuda.synchronize()


def _engine_search(spec: Any, task: dict[str, Any], opts: dict[str, Any], turn: Any) -> tuple[Any, dict[str, float]]:
    """measure_task's find_engines call (with options["known"], the known configurations of the task's class too)
    and the host seconds of its steps (measure.steps)."""
    from ..choose.model import problem_class
    from ..engines import find_engines
    from ..measure.steps import recording
    from ..problem import CUDNN_DIRECTION

    cdir = CUDNN_DIRECTION[(spec.transposed, task["direction"])]  # the class's direction: the one cuDNN runs
    known = (opts.get("known") or {}).get(problem_class(cdir, task["dtype"], task["memory_format"]), ())
    if opts["lean"]:
        _hold_cupti()
    with recording() as steps:
        r = find_engines(spec, tuple(task["input_shape"]), direction=task["direction"], dtype=task["dtype"],
                         memory_format=task["memory_format"], measure=True, compare_torch=True, torch_benchmark=True,
                         repeats=opts["repeats"], screen=opts["screen"], refine=opts["refine"],
                         exhaustive=opts["exhaustive"] > 0, max_configs=max(opts["exhaustive"], 64),
                         build_threads=opts["build_threads"], configs=tuple(known), heuristics=SEARCH_LISTS,
                         gpu_turn=turn, lean=bool(opts["lean"]))
    return r, steps


def dry_run_measure(task: dict[str, Any], options: dict[str, Any] | None = None) -> dict[str, Any]:
    """Rows made from the task alone (no GPU, no torch): a cluster check. With $CUDNN_ALGOS_SWEEP_DIE_ONCE naming a
    file, the first task to find it deletes it and kills its own worker (SIGKILL), as a crash would.
    options["seconds"]: how long its timed part takes (options["shared_seconds"]: an untimed part before it, in
    the turn; each sleep stands for that GPU work, and the rows' notes say when each ran); options["started_dir"]:
    a folder where each task, as it starts, leaves a file named by its key's SHA-1 (which tasks ran, stored or not);
    options["lose_context"]: a task whose key holds this text fails as a faulted kernel would, and its worker runs
    no more tasks (NOT_RUN) until restarted."""
    die = os.environ.get(DIE_ONCE_ENV)
    if die:
        try:
            os.remove(die)
        except FileNotFoundError:
            pass
        else:
            os.kill(os.getpid(), signal.SIGKILL)
    opts = options or {}
    base = {"worker": worker_name(), "env": "dry run"}
    if (skip := _after_loss(base)) is not None:
        return skip
    if opts.get("lose_context") and opts["lose_context"] in task["key"]:  # a fault, as a kernel's would be
        from ..errors import CudaContextLost

        return _context_lost(base, CudaContextLost.after(f"dry run of {task['key']}", RuntimeError(
            "CUDA error: an illegal memory access was encountered")), time.perf_counter())
    if opts.get("started_dir"):
        open(os.path.join(opts["started_dir"], hashlib.sha1(task["key"].encode()).hexdigest()), "w").close()
    delay, shared = float(opts.get("seconds", 0.0)), float(opts.get("shared_seconds", 0.0))
    turn = _turn(opts)
    with turn or nullcontext():  # with share_gpu, the sleeps stand for a task's GPU work: its turn's times say when
        s_on = time.time()
        time.sleep(shared)  # untimed GPU work (shared in turn_scope "timing", Note [timing turns])
        s_off = time.time()
        with turn.timing() if turn is not None else nullcontext():  # timed calls
            t_on = time.time()
            if delay:
                time.sleep(delay)
            t_off = time.time()
    n = 1 + sum(task["input_shape"]) % 3
    note = f"on the GPU {t_on:.6f}-{t_off:.6f}" + (f", untimed {s_on:.6f}-{s_off:.6f}" if shared else "")
    rows = [{"key": task["key"], "candidate_kind": "engine", "candidate": f"eng{i}", "status": "SUCCESS",
             "kernel_median_ms": 0.01 * (i + 1), "note": note} for i in range(n)]
    return {"status": "done", "rows": rows, "worker": worker_name(), "env": "dry run", "seconds": delay,
            "rss_mb": resident_mb()}
