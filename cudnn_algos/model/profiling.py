"""Whole models: ``profile(model, example_input)`` searches every distinct convolution of a model once per direction
in cuDNN 9's engine space (heuristic lists + refine, as ``find_engines`` does) and reports, per problem and
direction, what torch runs with benchmark off (a fresh process) and on (this process), identified by its kernels,
the best configuration found and its source, the ratio to each, host time per call of each path, and sums over the
model; plus the end-to-end benchmark-mode check (per-step time off vs on, and its warm-up, in fresh processes).
"""
from __future__ import annotations

import datetime as _dt
import os
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from typing import Any, Iterable

import torch

from ..api import find
from ..backend import environment
from ..choices import MAX_BUILD_THREADS
from ..engines import find_engines, list_ahead, mark_torch_run
from ..errors import CudaContextLost, CudaError, CudnnError
from ..measure import check_config
from ..plans_ahead import Built, Listed
from ..problem import (DIRECTIONS, check_choice, check_int, check_module, device_index, fused_call, parse_dtype,
                       parse_memory_format)
from ..progress import Progress
from ..results import FusionReport, MeasureConfig, ModelReport, ProblemEntry, TorchRun
from .discovery import discover, distinct_problems
from .benchmark_mode import end_to_end
from .fresh import Prestarted, Waiting
from .fusion_profile import profile_fusion
from .store import ResultStore
from .torch_off import torch_off_runs


def _check_profile_args(model, directions, repeats, screen, confirm, refine, refine_max, budget_s, build_threads
                        ) -> tuple[str, ...]:
    if budget_s is not None and (isinstance(budget_s, bool) or not isinstance(budget_s, (int, float))
                                 or not budget_s > 0):
        raise ValueError(f"budget_s={budget_s!r} must be a positive number of seconds (None: no budget)")
    check_module("model", model)
    directions = tuple([directions] if isinstance(directions, str) else directions)
    for d in directions:
        check_choice("direction", d, DIRECTIONS)
    if not directions:
        raise ValueError("directions must name at least one of: " + ", ".join(DIRECTIONS))
    check_config(repeats, 3, "warm")
    check_int("screen", screen, 1)
    check_int("confirm", confirm, 1)
    check_int("refine", refine, 0)
    check_int("refine_max", refine_max, 1)
    if build_threads is not None:
        check_int("build_threads", build_threads, 1)
        if build_threads > MAX_BUILD_THREADS:
            raise ValueError(f"build_threads={build_threads} must be <= {MAX_BUILD_THREADS}")
    return directions


def default_build_threads() -> int:
    """Threads that build a profile's plans unless told: this machine's cores, at most 8."""
    return max(1, min(8, os.cpu_count() or 1))


def profile(
    model: torch.nn.Module,
    example_input: Any,
    *,
    directions: Iterable[str] = DIRECTIONS,
    dtype: torch.dtype | str | None = None,
    memory_format: torch.memory_format | str | None = None,
    repeats: int = 7,
    screen: int = 3,
    confirm: int = 3,
    refine: int = 3,
    refine_max: int = 32,
    runtime_compiled: bool = True,
    legacy: bool = False,
    torch_off: bool = True,
    check_clock: bool = False,
    end_to_end_check: bool = True,
    fresh_process: bool = True,
    progress: bool = True,
    device: int | str | torch.device | None = None,
    name: str | None = None,
    store: str | None = None,
    budget_s: float | None = None,
    build_threads: int | None = None,
    fusion: bool = False,
) -> ModelReport | FusionReport:
    """Searches every distinct convolution of `model` (as one forward pass on `example_input` meets them) in cuDNN's
    engine space, once per direction, beside torch's own convolution, and returns a :class:`ModelReport`.

    dtype / memory_format: override what the layers receive (default: what they receive in the forward pass).
    Per problem and direction: ``find_engines(measure=True, screen, repeats, confirm, refine, refine_max,
    compare_torch=True, torch_benchmark=True)``: every configuration of the four lists screened, one-knob neighbours
    of the fastest added, the ``confirm`` fastest torch would accept re-measured beside torch's op (benchmark on) on
    fresh operands in one kernel-clock session. torch_off: torch's op with benchmark off, measured the same way in
    one fresh process. runtime_compiled: also build the engines that compile at run time (NVRTC), as torch does.
    legacy: also search the legacy algorithms (columns legacy_best). check_clock: every row also timed with the
    independent clock (torch.profiler), for the fidelity table. end_to_end_check: the whole model's step with
    benchmark off and on, each in a fresh process. Ctrl-C stops the search and returns what was done
    (``interrupted=True``). store: a JSON-lines file each finished search is appended to as soon as it is measured;
    a re-run with the same store (same GPU, cuDNN, torch and settings) takes what it holds and searches the rest.
    budget_s: start no new search after this many seconds of searching; the report then covers what was done
    (``interrupted=True``, ``stopped_by="budget"``; Ctrl-C: ``"ctrl-c"``), and with a store a re-run continues.
    build_threads: threads that build each search's plans (the same rows, sooner); default: cores, at most 8.
    fusion: the model's fusible chains instead, each searched by find_fused: a FusionReport (model.fusion_profile)."""
    if fused_call(profile, locals(), "fusion", ("dtype", "memory_format", "progress", "device", "name")):
        return profile_fusion(model, example_input, dtype=dtype, memory_format=memory_format, device=device, name=name,
                              progress=progress)
    directions = _check_profile_args(model, directions, repeats, screen, confirm, refine, refine_max, budget_s,
                                     build_threads)
    dt = parse_dtype(dtype) if dtype is not None else None
    t_start = time.perf_counter()
    uses = discover(model, example_input)
    if not uses:
        raise ValueError(f"{name or type(model).__name__} ran no convolution on this input: nothing to profile")
    keyed = distinct_problems(uses, dt, memory_format)
    dev = device_index(device)
    bar = Progress(len(keyed) * len(directions), progress, f"searching {name or type(model).__name__}",
                   unit="search")
    t_search = time.perf_counter()
    store = ResultStore(store, environment(dev)) if store else None
    # the fresh processes of the passes after the search import torch while it runs (fresh.py)
    with Prestarted(_fresh_processes(torch_off, end_to_end_check and fresh_process)) as pre:
        problems, torch_search, stopped_by = _search_problems(
            keyed, directions, bar, dev, legacy, check_clock,
            dict(repeats=repeats, screen=screen, confirm=confirm, refine=refine, refine_max=refine_max,
                 runtime_compiled=runtime_compiled), store, None if budget_s is None else t_search + budget_s,
            build_threads or default_build_threads())
        if torch_off and problems and not stopped_by:
            problems = _add_torch_off(problems, directions, repeats, check_clock, dev, pre.take("torch_off"))
        search_s = time.perf_counter() - t_search
        e2e = None
        if end_to_end_check and not stopped_by:
            e2e, stopped_by = _whole_step(model, example_input, directions, dt, memory_format, uses[0].spec.ndim,
                                          dev, fresh_process, (pre.take("e2e_off"), pre.take("e2e_on")))
    return ModelReport(
        model=name or type(model).__name__, problems=tuple(problems), directions=directions, env=environment(dev),
        e2e=e2e, interrupted=bool(stopped_by), stopped_by=stopped_by, search_s=search_s, torch_search_ms=torch_search,
        wall_s=time.perf_counter() - t_start, n_conv_calls=len(uses),
        created=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        measure=MeasureConfig(repeats=repeats, check_clock=check_clock))


def _whole_step(model, example_input, directions, dt, memory_format, ndim: int, dev: int, fresh_process: bool,
                waiting: tuple[Waiting | None, Waiting | None] = (None, None)):
    """The end-to-end benchmark-mode check: (its result or None, "ctrl-c" when interrupted else "")."""
    try:
        fmt = None if memory_format is None else parse_memory_format(memory_format, ndim)
        return end_to_end(model, example_input, backward=any(d != "forward" for d in directions), dtype=dt, fmt=fmt,
                          device=dev, fresh_process=fresh_process, waiting=waiting), ""
    except KeyboardInterrupt:
        return None, "ctrl-c"


def _fresh_processes(torch_off: bool, e2e: bool) -> dict[str, str]:
    """The fresh processes the passes after the search will run (name -> module), to start before it."""
    return {**({"torch_off": "cudnn_algos.model.torch_off"} if torch_off else {}),
            **({"e2e_off": "cudnn_algos.model.benchmark_mode", "e2e_on": "cudnn_algos.model.benchmark_mode"}
               if e2e else {})}


class _BudgetSpent(Exception):
    """The time budget ran out between two searches."""


def _search_problems(keyed: dict[tuple, list[str]], directions, bar, dev: int, legacy: bool, check_clock: bool,
                     options: dict, store: ResultStore | None, deadline: float | None = None,
                     build_threads: int = 1) -> tuple[list[ProblemEntry], float, str]:
    """Each distinct problem and direction searched (find_engines, and find with legacy), or taken from `store`
    when it holds it: (entries, Σ torch's benchmark-on first calls in ms, what stopped it early: "" (nothing),
    "ctrl-c", "budget" (the `deadline`, perf_counter: no new search starts after it), or "context-lost" (a kernel
    faulted: the failed search's error says where, Note [a lost context])). `options` are
    find_engines's settings that shape the results (and key the store); build_threads only changes how fast."""
    problems: list[ProblemEntry] = []
    torch_search = 0.0
    stopped_by = ""
    # the next search's plans are built while one is timed (not beside the legacy search: what cuDNN's legacy find asks
    # inside is not known, so no other thread of this process runs CUDA work then; Note [building ahead])
    order = [(k, d) for k in keyed for d in directions]
    after = {o: ([] if legacy else order[i + 1:i + 2]) for i, o in enumerate(order)}  # the search built ahead of o
    ahead = _Ahead(dev, build_threads, options["runtime_compiled"],
                   lambda k, d: store is not None and _stored(store, "engines", *k, d, options, check_clock))
    try:
        for key, names in keyed.items():
            spec, shape, dname, fmt = key
            engines, legacy_res, errors = {}, {}, {}
            try:
                for d in directions:
                    if deadline is not None and time.perf_counter() > deadline:
                        raise _BudgetSpent  # stop as Ctrl-C does, keeping what was done
                    try:
                        engines[d] = _search(store, "engines", spec, shape, dname, fmt, d, options, check_clock,
                                             lambda: _without_plans(find_engines(
                                                 spec, shape, direction=d, dtype=dname, memory_format=fmt,
                                                 measure=True, compare_torch=True, torch_benchmark=True,
                                                 check_clock=check_clock, device=dev, build_threads=build_threads,
                                                 built=ahead.take((key, d), after[(key, d)]), **options)))
                        torch_search += (engines[d].torch.first_call_ms or 0.0) if engines[d].torch else 0.0
                        if legacy:
                            legacy_res[d] = _search(store, "legacy", spec, shape, dname, fmt, d, options, check_clock,
                                                    lambda: find(spec, shape, direction=d, dtype=dname,
                                                                 memory_format=fmt, measure=True,
                                                                 repeats=options["repeats"], check_clock=check_clock,
                                                                 device=dev))
                    except CudaContextLost as e:  # no more GPU work in this process: stop with what was done
                        errors[d] = f"{type(e).__name__}: {str(e)[:400]}"
                        stopped_by = "context-lost"
                        break
                    except (CudnnError, CudaError, torch.OutOfMemoryError) as e:  # one problem; the model goes on
                        errors[d] = f"{type(e).__name__}: {str(e)[:300]}"
                    bar.update(f"{spec} {d}")
            except KeyboardInterrupt:
                stopped_by = "ctrl-c"
            except _BudgetSpent:
                stopped_by = "budget"
            if engines or legacy_res or errors:
                problems.append(ProblemEntry(spec=spec, input_shape=shape, dtype=dname, memory_format=fmt,
                                             layers=tuple(names), engines=engines, legacy=legacy_res, errors=errors))
            if stopped_by:
                break
    finally:
        ahead.close()
        bar.close()
    return problems, torch_search, stopped_by


class _Ahead:
    """The next search's plans built on a thread of its own while this one is timed, for the searches `stored(key,
    direction)` does not rule out; its lists asked here, on the timing thread, between two searches (engines Note
    [building ahead]: list B's query must not run beside other CUDA work of the process)."""

    def __init__(self, dev: int, build_threads: int, runtime_compiled: bool, stored):
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="cudnn_algos-build-ahead")
        self._pending: dict[tuple, Future] = {}
        self._dev, self._threads, self._rtc = dev, build_threads, runtime_compiled
        self._stored = stored

    def take(self, this: tuple, after: list[tuple]) -> Built | None:
        """`this` search's plans: those built ahead, or (none were) its lists asked and its plans built here, the
        other thread idle; an error building them is raised here. Then the lists of the search `after` holds (none
        when empty) are asked and its plans started on the other thread. None where `this` search's lists could not
        be asked here: find_engines asks them itself, with the other thread still idle."""
        fut = self._pending.pop(this, None)
        listed = self._listed(this) if fut is None else None
        if fut is None and listed is None:
            return None
        try:
            return fut.result() if fut is not None else listed.build(self._threads)
        finally:  # the other thread is idle: its one job has ended, or it had none
            self._start(after)

    def _listed(self, nxt: tuple) -> Listed | None:
        (spec, shape, dname, fmt), d = nxt
        try:
            return list_ahead(spec, shape, direction=d, dtype=dname, memory_format=fmt, runtime_compiled=self._rtc,
                              device=self._dev)
        except (CudnnError, CudaError):  # that search asks and builds itself, and fails there as it would have
            return None

    def _start(self, after: list[tuple]) -> None:
        for nxt in after:
            if nxt in self._pending or self._stored(nxt[0], nxt[1]):
                continue
            listed = self._listed(nxt)
            if listed is not None:
                self._pending[nxt] = self._pool.submit(listed.build, self._threads)

    def close(self) -> None:
        for f in self._pending.values():
            f.cancel()
        self._pool.shutdown(wait=True)


def _search(store: ResultStore | None, kind: str, spec, shape, dtype: str, fmt: str, direction: str, options: dict,
            check_clock: bool, run):
    """`run()`'s result, or the store's when it has this search; a new result is stored as soon as it exists."""
    if store is None:
        return run()
    key = _store_key(kind, spec, shape, dtype, fmt, direction, options, check_clock)
    got = store.get(key)
    if got is None:
        got = run()
        store.add(key, got)
    return got


def _store_key(kind: str, spec, shape, dtype: str, fmt: str, direction: str, options: dict, check_clock: bool) -> str:
    return ResultStore.key(kind=kind, spec=spec.to_dict(), input_shape=list(shape), dtype=dtype, memory_format=fmt,
                           direction=direction,
                           options=options if kind == "engines" else {"repeats": options["repeats"]},
                           check_clock=check_clock)


def _stored(store: ResultStore, kind: str, spec, shape, dtype: str, fmt: str, direction: str, options: dict,
            check_clock: bool) -> bool:
    return store.get(_store_key(kind, spec, shape, dtype, fmt, direction, options, check_clock)) is not None


def _without_plans(r):
    """The search result as kept in a report: plans dropped (a report outlives the process and pickles)."""
    return replace(r, rows=tuple(replace(x, plan=None) for x in r.rows))


def _add_torch_off(problems: list[ProblemEntry], directions, repeats: int, check_clock: bool, dev: int,
                   waiting: Waiting | None = None) -> list[ProblemEntry]:
    items = [{"key": f"{pi}|{d}", "spec": p.spec.to_dict(), "input_shape": list(p.input_shape), "dtype": p.dtype,
              "memory_format": p.memory_format, "direction": d, "repeats": repeats, "check_clock": check_clock}
             for pi, p in enumerate(problems) for d in directions if d in p.engines]
    runs, err = torch_off_runs(items, dev, waiting=waiting)
    out = []
    for pi, p in enumerate(problems):
        eng = dict(p.engines)
        for d, r in eng.items():
            run = runs.get(f"{pi}|{d}")
            if run is None:
                run = TorchRun(mode="benchmark_off", kernels=(), matches=(), match="none", first_call_ms=None,
                               benchmark_limit=0, where="fresh process", error=err or "not measured")
            eng[d] = mark_torch_run(r, run)
        out.append(replace(p, engines=eng))
    return out


def load_report(source: str) -> ModelReport:
    """Reads what ModelReport.to_json wrote (a JSON string or a path)."""
    return ModelReport.load(source)
