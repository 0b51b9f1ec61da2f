"""The cuDNN 9 graph API's search space: engines x knob choices (``find_engines``), measured like the legacy rows,
beside torch's own convolution (identified by the kernels it launches).

On cuDNN 9 the legacy algorithms are a thin view over these engines; torch's own convolution runs one of these
execution plans. Each configuration is a row: engine id, knob values, numerical and behaviour notes, the nearest
legacy family, determinism, workspace, status (a configuration that fails to build is a row saying where), and with
``measure=True`` the same timing and accuracy columns as legacy rows (cudnn_algos.measure).
"""
from __future__ import annotations

import contextlib
import datetime as _dt
import time
from contextlib import AbstractContextManager, nullcontext
from dataclasses import replace
from typing import Any, Callable, Iterator, Sequence

import torch

from . import backend
from .choices import MAX_BUILD_THREADS
from .configs import (SEARCH_LISTS, TORCH_LISTS, behavior_note_names, config_name, heuristic_list, named_knobs,
                      numerical_note_names, parse_config, torch_filter)
from .errors import CudaContextLost, is_context_lost
from .fused import find_fused
from .backend import environment
from .problem import Problem, check_choice, check_int, device_index, make_problem
from .results import EngineRow, EngineSearchResult, FusedSearchResult, MeasureConfig, Measurement, TorchRun
from .plans_ahead import Built, Listed, build_key, build_plans
from .measure.steps import step
from .measure import (PRUNE, SCREEN_CLOSE, check_config, cudnn_benchmark, first_call_ms, kernels_of, measure_rows,
                      operand_sets, plan_runnable, reference_output, torch_runnable)







def legacy_family(notes: Sequence[str]) -> str:
    """The nearest legacy algorithm family, from an engine's numerical notes."""
    if "FFT" in notes:
        return "FFT"
    if any(n.startswith("WINOGRAD") for n in notes):
        return "WINOGRAD"
    return "IMPLICIT_GEMM"




def torch_candidates(rows: Sequence[EngineRow], limit: int) -> dict[int, int]:
    """Row index -> position among the configurations torch's benchmark mode would time: heuristic INSTANT's
    list, then the fallback list, without the ones its filter drops (``torch_filter``) or that fail to build,
    the first ``limit`` (0: all). Torch also drops plans whose workspace exceeds the largest free block of its
    allocator; that depends on the moment and is not modelled here."""
    order: list[int] = []
    for src in (heuristic_list(n).source for n in TORCH_LISTS):
        ranked = sorted((r.rank(src), i) for i, r in enumerate(rows) if r.rank(src) is not None)
        order += [i for _, i in ranked if i not in order]
    out: dict[int, int] = {}
    for i in order:
        r = rows[i]
        if r.torch_filter or not (r.ok or r.status == "SKIPPED_RUNTIME_COMPILATION"):
            continue
        out[i] = len(out)
        if limit and len(out) >= limit:
            break
    return out


def match_kernels(torch_kernels: Sequence[str], rows: Sequence[EngineRow]) -> tuple[str, tuple[int, ...]]:
    """Which rows launched the kernels torch's call launched: ("exact", rows with exactly that set), else
    ("partial", rows whose kernels are all among torch's, the largest such sets), else ("none", ())."""
    def kset(names):  # copies and fills are not what tells configurations apart
        return frozenset(n for n in names if not n.startswith(("Memset", "Memcpy", "[Memset", "[Memcpy")))

    t = kset(torch_kernels)
    sets = {i: kset(r.kernels) for i, r in enumerate(rows) if kset(r.kernels)}
    exact = tuple(i for i, k in sets.items() if k == t)
    if exact and t:
        return "exact", exact
    sub = {i: k for i, k in sets.items() if k and k < t}
    if sub:
        most = max(len(k) for k in sub.values())
        return "partial", tuple(i for i, k in sub.items() if len(k) == most)
    return "none", ()










def _rows(plans: Sequence[backend.Plan], cdir: str, problem: Problem) -> list[EngineRow]:
    """Rows of these plans, each with why torch's convolution would never run it (as torch is set now)."""
    det, tf32 = torch.backends.cudnn.deterministic, torch.backends.cudnn.allow_tf32
    out = []
    for plan in plans:
        knobs = named_knobs(plan.knobs)
        nn = numerical_note_names(plan.numerical_notes)
        bn = behavior_note_names(plan.behavior_notes)
        name = config_name(plan.engine_id, plan.knobs)
        out.append(EngineRow(
            direction=cdir, engine_id=plan.engine_id, knobs=knobs, name=name, numerical_notes=nn, behavior_notes=bn,
            family=legacy_family(nn), deterministic="NONDETERMINISTIC" not in nn, status=plan.status,
            stage=plan.stage, workspace_bytes=plan.workspace_bytes if plan.workspace_bytes >= 0 else None,
            sources=tuple(plan.sources), heuristic_ranks=tuple(plan.heuristic_ranks), plan=plan,
            torch_filter=torch_filter(nn, problem.dtype_name, det, tf32), memory_format=problem.memory_format))
    return out


def _check_args(heuristics, max_configs, measure, repeats, warmup, l2, refine, refine_max, screen, confirm,
                compare_torch, torch_benchmark, direction, build_threads=1, lean=False) -> None:
    if direction == "all":
        raise ValueError("find_engines searches one direction at a time: forward, backward_data or backward_filter")
    if isinstance(heuristics, str):
        raise TypeError(f"heuristics={heuristics!r} must be a sequence of names, e.g. ('instant', 'fallback')")
    for h in heuristics:
        check_choice("heuristics", h, SEARCH_LISTS)
    check_int("max_configs", max_configs, 1)
    if measure:
        check_config(repeats, warmup, l2)
    check_int("refine", refine, 0)
    check_int("refine_max", refine_max, 1)
    check_int("confirm", confirm, 0)
    if check_int("build_threads", build_threads, 1) > MAX_BUILD_THREADS:
        raise ValueError(f"build_threads={build_threads} must be <= {MAX_BUILD_THREADS}")
    if screen is not None:
        check_int("screen", screen, 1)
    if (refine or screen) and not measure:
        raise ValueError("refine and screen need measure=True (they work on measured configurations)")
    if not isinstance(lean, bool):
        raise TypeError(f"lean={lean!r} must be a bool")
    if lean and screen is None:
        raise ValueError("lean=True needs screen (it changes how a screen's first calls are made)")
    for name, v in (("compare_torch", compare_torch), ("torch_benchmark", torch_benchmark)):
        if v is not None and not isinstance(v, bool):
            raise TypeError(f"{name}={v!r} must be a bool")


def validate_engines(
    conv, input_shape, *, direction: str = "forward", dtype=None, memory_format=None,
    heuristics: Sequence[str] | None = None, exhaustive: bool = False, max_configs: int = 64, measure: bool = False,
    repeats: int = 10, warmup: int = 3, l2: str = "warm", compare_torch: bool | None = None, torch_benchmark: bool | None = None,
    refine: int = 0, refine_max: int = 64, screen: int | None = None, confirm: int = 3, configs: Sequence[str] = (),
    device=None, build_threads: int = 1, lean: bool = False,
) -> tuple[Problem, tuple[str, ...], list, int]:
    """All of find_engines's argument checks, in the order it makes them, with no GPU work but the final check that
    CUDA is usable (the CLI calls it before any search). Returns (problem, the heuristic lists, the exact
    configurations parsed, the device index); ValueError / TypeError naming the argument, or
    CudaUnavailableError."""
    if isinstance(configs, str):
        configs = (configs,)
    exact = [parse_config(c) for c in configs]
    if heuristics is None:
        heuristics = () if exact else SEARCH_LISTS
    if not heuristics and not exact and not exhaustive:
        raise ValueError("nothing to search: heuristics is empty, configs is empty and exhaustive is off")
    _check_args(heuristics, max_configs, measure, repeats, warmup, l2, refine, refine_max, screen, confirm,
                measure if compare_torch is None else compare_torch, torch_benchmark, direction, build_threads, lean)
    problem = make_problem(conv, input_shape, dtype, memory_format, None)
    return problem, tuple(heuristics), exact, device_index(device)


def list_ahead(conv, input_shape, *, direction: str = "forward", dtype=None, memory_format=None,
               heuristics: Sequence[str] | None = None, exhaustive: bool = False, max_configs: int = 64,
               runtime_compiled: bool = True, configs: Sequence[str] = (), device=None) -> Listed:
    """The configurations find_engines would build for these arguments (the same names and defaults), listed now
    and built later by ``.build()`` (Note [building ahead]); ``find_engines(..., built=listed.build())`` with the
    same arguments takes those plans instead of building."""
    problem, heuristics, exact, dev = validate_engines(
        conv, input_shape, direction=direction, dtype=dtype, memory_format=memory_format, heuristics=heuristics,
        exhaustive=exhaustive, max_configs=max_configs, configs=configs, device=device)
    cdir = problem.cudnn_direction(direction)
    return Listed(build_key(problem, cdir, heuristics, exhaustive, max_configs, runtime_compiled, exact, dev),
                  build_plans(problem, cdir, heuristics, exhaustive, max_configs, runtime_compiled, exact, dev, 1,
                              build=False),
                  dev)


def find_engines(
    conv, input_shape, *, direction: str = "forward", dtype=None, memory_format=None,
    heuristics: Sequence[str] | None = None, exhaustive: bool = False, max_configs: int = 64,
    runtime_compiled: bool = True, measure: bool = False, repeats: int = 10, warmup: int = 3, l2: str = "warm",
    compare_torch: bool | None = None, torch_benchmark: bool | None = None, refine: int = 0, refine_max: int = 64,
    screen: int | None = None, confirm: int = 3, check_clock: bool = False, configs: Sequence[str] = (),
    device=None, build_threads: int = 1, gpu_turn: AbstractContextManager | None = None,
    built: Built | None = None, lean: bool = False, epilogue: Any = None,
) -> EngineSearchResult | FusedSearchResult:
    """Enumerates the graph API's engine configurations of one convolution direction and builds their plans.

    heuristics: which of cuDNN's ranked lists to take configurations from ("instant", "a", "b", "fallback"; torch
        uses "instant" then "fallback"). Default: all four, or none when ``configs`` is given.
    configs: configurations to build exactly, by their stable names (``eng62{TILE_SIZE=0,...}``, as rows name
        them; source "exact"): to time one row again, alone, in another process or on another day.
    exhaustive: also every engine x every knob combination (in rounds over the engines) until ``max_configs``
        configurations exist in all; engines that reject the problem are rows that do not count.
    runtime_compiled: build plans of engines that compile at run time (slow to build) too.
    measure: time and check every built plan (kernel/throughput/host clocks, accuracy), like find(measure=True).
    screen: with measure, time every configuration with this many kernel-clock samples first (no throughput or
        host samples: a screened row's host time is its first timed call's), then re-measure the ``confirm``
        fastest ones torch would accept (and torch's op) with ``repeats`` samples of every clock on fresh operands,
        in one kernel-clock session: the picks are not flattered by the minimum of many noisy screens. A screen
        samples once a configuration whose first call takes over timing.PRUNE (8) times the fastest's (``pruned``).
    lean: with screen, its accuracy calls enqueued together with one wait, each its row's first-call estimate (every
        row still checked before it is timed; screened rows have no host time): for sweeps (Note [a lean screen]).
    compare_torch: run torch's own convolution on the same operands, identify the configuration it ran by its kernels
        (CUPTI records), and with ``measure`` time it in the same session as our best (default: = measure).
    torch_benchmark: cudnn.benchmark for torch's calls (default: as set; torch keeps its first plan per problem
        for the process's life: benchmark mode's choice shows only for a problem torch has not run yet here).
    refine: with measure, build and measure every one-knob neighbour of the ``refine`` fastest configurations torch
        would accept, up to ``refine_max`` new ones (source "refine"); check_clock: the independent clock too.
    build_threads: threads that finalize the plans (each with its own cuDNN handle; at most 64): the same rows,
        less host time where there are many (a sweep); every plan is built before any is timed.
    gpu_turn: held for all GPU work after the plans are built (sweep.turns, Note [sharing a GPU]; the refine builds
        outside it); its ``timing()``, where it has one, around the calls whose times are kept (Note [timing turns]).
    built: the plans ``list_ahead(...).build()`` built for this problem and lists (Note [building ahead]).
    epilogue: pointwise ops after the forward convolution, e.g. ("bn", "relu"): find_fused's search instead.
    Every row also says whether torch's benchmark mode would time it (``torch_rank``) or never consider it
    (``torch_filter``).
    """
    if epilogue is not None:
        return _fused(dict(locals()))
    problem, heuristics, exact, dev = validate_engines(
        conv, input_shape, direction=direction, dtype=dtype, memory_format=memory_format, heuristics=heuristics,
        exhaustive=exhaustive, max_configs=max_configs, measure=measure, repeats=repeats, warmup=warmup, l2=l2,
        compare_torch=compare_torch, torch_benchmark=torch_benchmark, refine=refine, refine_max=refine_max,
        screen=screen, confirm=confirm, configs=configs, device=device, build_threads=build_threads, lean=lean)
    compare_torch = measure if compare_torch is None else compare_torch
    cdir = problem.cudnn_direction(direction)
    settings = (heuristics, exhaustive, max_configs, runtime_compiled, exact, dev)
    if built is not None and built.key != build_key(problem, cdir, *settings):
        raise ValueError(f"built= holds the plans of another search ({built.key[:6]}), not of "
                         f"{problem.describe(direction)} with these lists")
    out = built.out if built is not None else build_plans(problem, cdir, *settings, build_threads)
    rows = _rows(out.plans, cdir, problem)
    for i, pos in torch_candidates(rows, int(torch.backends.cudnn.benchmark_limit or 0)).items():
        rows[i] = replace(rows[i], torch_rank=pos)
    result = EngineSearchResult(
        rows=tuple(rows), spec=problem.spec, shapes=problem.shapes, direction=direction, cudnn_direction=cdir,
        dtype=problem.dtype_name, memory_format=problem.memory_format, engine_count=out.engine_count,
        search_ms=out.search_ms, exhaustive=exhaustive, env=environment(dev), flops=problem.flops(),
        heuristic_query_ms=out.heuristic_query_ms,
        created=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"))
    if not (measure or compare_torch):
        return result
    bench = torch.backends.cudnn.benchmark if torch_benchmark is None else torch_benchmark
    try:
        with gpu_turn or nullcontext(), torch.cuda.device(dev):
            if not measure:
                return _identify(result, problem, bench, dev)
            cfg = MeasureConfig(repeats=repeats, warmup=warmup, l2=l2, check_clock=check_clock)
            return _measured(result, problem, cfg, screen, confirm, refine, refine_max, runtime_compiled,
                             compare_torch, bench, dev, build_threads, lean, gpu_turn)
    except CudaContextLost:
        raise
    except Exception as e:  # a fault reported outside a candidate's own calls (operands, torch's op, ...)
        if is_context_lost(e):
            raise CudaContextLost.after(f"{problem.describe(direction)} (the search's own calls)", e) from e
        raise


_FUSED_ARGS = ("dtype", "memory_format", "heuristics", "exhaustive", "max_configs", "runtime_compiled", "measure",
               "repeats", "warmup", "check_clock", "device", "build_threads")


def _fused(a: dict[str, Any]) -> FusedSearchResult:
    """find_engines(epilogue=...) with find_engines's arguments `a`: find_fused with those it takes (a FusedSearchResult;
    beside the fused configurations, the unfused sequences and torch's eager ops); the others must be unset."""
    if a["direction"] != "forward":
        raise ValueError(f"direction={a['direction']!r}: an epilogue follows the forward pass; use direction='forward'")
    given = [k for k in ("refine", "screen", "configs", "built", "lean") if a[k] not in (0, None, (), False)]
    if given:
        raise ValueError(f"epilogue= searches the fused graph; these arguments do not apply to it: "
                         f"{', '.join(given)}")
    return find_fused(a["conv"], a["input_shape"], a["epilogue"], **{k: a[k] for k in _FUSED_ARGS})


def _measured(result: EngineSearchResult, problem: Problem, cfg: MeasureConfig, screen: int | None, confirm: int,
              refine: int, refine_max: int, runtime_compiled: bool, compare_torch: bool, bench: bool, dev: int,
              build_threads: int = 1, lean: bool = False, gpu_turn: AbstractContextManager | None = None
              ) -> EngineSearchResult:
    """Screen (or measure) every built plan, refine around the fastest, then confirm the fastest beside torch."""
    t0 = time.perf_counter()
    cdir = result.cudnn_direction
    timed = getattr(gpu_turn, "timing", None) or nullcontext  # Note [timing turns]
    with step("operands"):
        sets = operand_sets(problem, cfg.l2, dev)
        ref = reference_output(problem, cdir, sets[0], "cuda")  # once per search
    cfg = replace(cfg, buffer_sets=len(sets))
    screen_cfg = (replace(cfg, repeats=screen, prune=PRUNE, throughput=False, close=SCREEN_CLOSE, lean=lean)
                  if screen else cfg)
    with step("screen" if screen else "measure"):
        result = _measure(result, problem, sorted(i for i, r in enumerate(result.rows) if r.ok), sets, ref,
                          screen_cfg, dev, timed)
    if refine:
        with step("refine"):
            result = _refine(result, problem, sets, ref, screen_cfg, refine, refine_max, runtime_compiled, dev,
                             build_threads, gpu_turn, timed)
    del sets
    with step("confirm"):
        result = _confirm(result, problem, ref, cfg, confirm if (screen or compare_torch) else 0, compare_torch,
                          bench, dev, timed)
    return replace(result, measure=cfg, measure_s=time.perf_counter() - t0)


def _measure(result: EngineSearchResult, problem: Problem, idx: Sequence[int], sets, ref, cfg: MeasureConfig,
             dev: int, timed: Callable[[], AbstractContextManager] | None = None) -> EngineSearchResult:
    """The rows at `idx` measured by measure_rows (`timed`: its); the rows re-ordered fastest first."""
    cdir = result.cudnn_direction
    runs = [plan_runnable(problem, cdir, result.rows[i].plan, sets, result.rows[i].rank_a,
                          f"{problem.describe(result.direction)} | {result.rows[i].name}") for i in idx]
    ms = measure_rows(runs, problem, cfg, ref, dev, timed=timed)
    rows = list(result.rows)
    for i, m in zip(idx, ms):
        rows[i] = replace(rows[i], measured=m)
    return replace(result, rows=_ranked(rows))


def _ranked(rows: Sequence[EngineRow]) -> tuple[EngineRow, ...]:
    """Built rows fastest first (confirmed ones first, measured_rank set), then the others."""
    def key(r):
        conf = r.measured is not None and r.measured.confirmed
        return (not conf, r.kernel_ms is None, r.kernel_ms or 0.0)

    ok = sorted((r for r in rows if r.ok), key=key)
    out, rank = [], 0
    for r in ok:
        if r.kernel_ms is not None:
            r = replace(r, measured=replace(r.measured, measured_rank=rank))
            rank += 1
        out.append(r)
    return tuple(out + [r for r in rows if not r.ok])


def _refine(result: EngineSearchResult, problem: Problem, sets, ref, cfg: MeasureConfig, seeds_n: int, cap: int,
            runtime_compiled: bool, dev: int, build_threads: int = 1, gpu_turn: AbstractContextManager | None = None,
            timed: Callable[[], AbstractContextManager] | None = None) -> EngineSearchResult:
    """Builds every one-knob neighbour of the `seeds_n` fastest measured configurations torch would accept (up to
    `cap` new configurations), measures them like the others and merges them in. The building is host work: it
    runs outside `gpu_turn` (left and entered again around it), as the first plans' building does."""
    seeds = sorted((r for r in result.succeeded if r.right_ms is not None and not r.torch_filter),
                   key=lambda r: r.kernel_ms)[:seeds_n]
    if not seeds:
        return result
    with _left(gpu_turn):
        out = backend.engine_search(result.cudnn_direction, backend.conv_problem(problem), (), False, cap,
                                    runtime_compiled, dev, seeds=[(r.engine_id, r.plan.knobs) for r in seeds],
                                    build_threads=build_threads)
    have = {(r.engine_id, r.knobs) for r in result.rows}
    new = [r for r in _rows(out.plans, result.cudnn_direction, problem) if (r.engine_id, r.knobs) not in have]
    merged = replace(result, rows=result.rows + tuple(new), refined=len(new),
                     search_ms=result.search_ms + out.search_ms)
    n0 = len(result.rows)
    return _measure(merged, problem, [n0 + j for j, r in enumerate(new) if r.ok], sets, ref, cfg, dev, timed)


@contextlib.contextmanager
def _left(turn: AbstractContextManager | None) -> Iterator[None]:
    """The block outside `turn` (a held GPU turn: sweep Note [sharing a GPU]), which is entered again after it; a
    no-op without one. The turn must be one that can be entered again once left (sweep.GpuTurn can)."""
    if turn is None:
        yield
        return
    turn.__exit__(None, None, None)
    try:
        yield
    finally:
        turn.__enter__()


def _torch_first_call(problem: Problem, cdir: str, sets, bench: bool, dev: int) -> tuple[float | None, object, str]:
    """torch's first call of the problem here (with benchmark mode: its search, unless it planned it before):
    (its host ms, torch's runnable, why it failed or "")."""
    run = torch_runnable(problem, cdir, sets)
    with cudnn_benchmark(bench):
        try:
            return first_call_ms(run.call, dev), run, ""
        except Exception as e:  # torch's own convolution failed here: the search still stands, the run says why
            torch.cuda.synchronize(dev)
            return None, run, f"torch's call failed: {type(e).__name__}: {str(e)[:200]}"


def _torch_run(bench: bool, kernels, first_ms: float | None, measured: Measurement | None, error: str) -> TorchRun:
    return TorchRun(mode="benchmark_on" if bench else "benchmark_off", kernels=tuple(kernels or ()), matches=(),
                    match="none", first_call_ms=first_ms, measured=measured,
                    benchmark_limit=int(torch.backends.cudnn.benchmark_limit or 0),
                    error=error or ("" if kernels else "no kernels seen"))


def _confirm(result: EngineSearchResult, problem: Problem, ref, cfg: MeasureConfig, confirm: int,
             compare_torch: bool, bench: bool, dev: int, timed: Callable[[], AbstractContextManager] | None = None
             ) -> EngineSearchResult:
    """On fresh operands, in one kernel-clock session: the `confirm` fastest configurations torch would accept and
    (compare_torch) torch's own op; then torch's choice identified by its kernels. `timed`: held once around torch's
    first call (benchmark mode's search times) and measure_rows's calls."""
    timed = timed or nullcontext
    if not confirm and not compare_torch:
        return result
    cdir = result.cudnn_direction
    sets = operand_sets(problem, cfg.l2, dev)
    ref2 = reference_output(problem, cdir, sets[0], cfg.reference)
    idx = [i for i, r in enumerate(result.rows) if r.ok and r.kernel_ms is not None and not r.torch_filter][:confirm]
    runs = [plan_runnable(problem, cdir, result.rows[i].plan, sets, result.rows[i].rank_a,
                          f"{problem.describe(result.direction)} | {result.rows[i].name} (confirm)") for i in idx]
    first_ms, first_err = None, ""
    with timed():  # one hold for torch's search and the confirm's timing (nothing untimed runs between them)
        if compare_torch:
            with step("torch_first_call"):
                first_ms, trun, first_err = _torch_first_call(problem, cdir, sets, bench, dev)
            runs.append(trun)
        with cudnn_benchmark(bench):
            ms = measure_rows(runs, problem, cfg, ref2, dev)  # inside the hold already
    del sets, ref2
    rows = list(result.rows)
    for i, m in zip(idx, ms):
        rows[i] = replace(rows[i], measured=replace(m, confirmed=True))
    result = replace(result, rows=_ranked(rows))
    if not compare_torch:
        return result
    m = replace(ms[-1], confirmed=True)
    return mark_torch_run(result, _torch_run(bench, m.kernels, first_ms, m, first_err or m.error))


def mark_torch_run(result: EngineSearchResult, run: TorchRun) -> EngineSearchResult:
    """Marks the rows whose kernels are torch's (``torch_ran``) and records the run (replacing one of its mode)."""
    how, idx = match_kernels(run.kernels, result.rows)
    rows = [replace(r, torch_ran=tuple(m for m in r.torch_ran if m != run.mode)) for r in result.rows]
    for i in idx:
        rows[i] = replace(rows[i], torch_ran=rows[i].torch_ran + (run.mode,))
    run = replace(run, matches=tuple(rows[i].name for i in idx), match=how)
    runs = tuple(t for t in result.torch_runs if t.mode != run.mode) + (run,)
    return replace(result, rows=tuple(rows), torch_runs=runs)


def _identify(result: EngineSearchResult, problem: Problem, bench: bool, dev: int) -> EngineSearchResult:
    """Without measuring: torch's op and every built plan called once each in one kernel-clock session; torch's
    kernels matched to the plans'."""
    cdir = result.cudnn_direction
    sets = operand_sets(problem, "warm", dev)
    first_ms, trun, first_err = _torch_first_call(problem, cdir, sets, bench, dev)
    idx = [i for i, r in enumerate(result.rows) if r.ok and r.plan is not None]
    runs = [trun] + [plan_runnable(problem, cdir, result.rows[i].plan, sets) for i in idx]
    with cudnn_benchmark(bench):
        ks = kernels_of(runs, dev)
    rows = list(result.rows)
    for i, k in zip(idx, ks[1:]):
        if k is not None and rows[i].measured is None:
            rows[i] = replace(rows[i], measured=Measurement(kernel_ms=None, throughput_ms=None, host_ms=None,
                                                            calls_per_sample=0, kernel_clock="none", kernels=k))
    result = replace(result, rows=tuple(rows))
    return mark_torch_run(result, _torch_run(bench, ks[0], first_ms, None,
                                             first_err or ("" if ks[0] else "torch's call launched nothing")))


def identify_torch(result: EngineSearchResult, *, torch_benchmark: bool | None = None) -> EngineSearchResult:
    """Marks, in a search result whose plans are alive (this process), the configuration(s) whose kernels torch's own
    convolution launches for the problem now (``torch_ran``; ``result.torch``). torch keeps the first plan it picked
    for the problem in this process; with ``torch_benchmark`` (default: cudnn.benchmark as set) it picks one if it
    has not yet."""
    problem = make_problem(result.spec, result.shapes.input_shape, result.dtype, result.memory_format, None)
    bench = torch.backends.cudnn.benchmark if torch_benchmark is None else torch_benchmark
    dev = result.env.device_index
    with torch.cuda.device(dev):
        return _identify(result, problem, bench, dev)


__all__ = ["find_engines", "validate_engines", "identify_torch", "mark_torch_run", "legacy_family", "torch_candidates",
           "match_kernels"]
