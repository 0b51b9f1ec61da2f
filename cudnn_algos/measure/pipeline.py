"""The one measuring path every search and benchmark uses: ``measure_rows`` over Runnables.

Per runnable: accuracy against the float64 reference and a first timed call; `warmup` calls and `repeats`
throughput/host samples of K back-to-back calls with no CUPTI session open (its instrumentation costs host time
per launch); then one kernel-clock session samples every row; then (check_clock) the reference clock; FLOPs,
TFLOP/s, % of peak and ranks. Operands are fresh random tensors (never zeros); with ``l2="cold"`` calls rotate
through operand sets that together exceed three times the L2 cache. Method and numbers: docs/measuring.md.
"""
from __future__ import annotations

import contextlib
import functools
import statistics
import time
from contextlib import AbstractContextManager
from dataclasses import replace
from typing import Any, Callable, Sequence

import torch

from ..choices import L2_MODES
from ..errors import CudaContextLost, is_context_lost
from ..problem import Problem, check_choice, check_int
from ..results import NON_FINITE, MeasureConfig, Measurement, Stats
from .accuracy import error_stats, errors
from .clocks import KernelClockUnavailable, again_if_lost, kernel_clock, reference_kernel_ms
from .peak import peak_or_none
from .runnable import OutputCheckFailed, Runnable, check_counts, output_problem


TARGET_SAMPLE_MS = 1.0  # GPU work per throughput sample, which sets K (calls per sample)
MAX_CALLS = 20
MIN_CALLS = 2
KERNEL_CALLS = 5  # calls per kernel-clock sample (CUPTI records each call; a few back-to-back calls suffice)
PRUNE = 8.0  # with a screen: candidates whose first call is over 8x the fastest first call get one sample
# ... and a candidate whose accuracy call alone took over PRUNE x the fastest first call so far and this much more
# is not called again before its one kernel-clock sample: the slowest candidates (hundreds of ms per call) cost two
# calls, not three. A fast one whose accuracy call was slow for a one-time cost (loading its kernels' module) loses
# nothing but samples: its kernel-clock sample is its time in the ranking, and the fastest are confirmed after
ONE_CALL_SLACK_MS = 5.0
# a screen's kernel clock: one sample of every candidate, the rest only for those within 1.5x the fastest sample. A
# candidate beyond it is never a pick (the three fastest are confirmed on fresh operands; the selector's targets stop
# at 2 ** 0.5 = 1.41x the fastest, selector.train.TARGET_CAP), and one kernel-clock sample is its time
SCREEN_CLOSE = 1.5
# Note [a first call is no time]: a pruned row's first-call estimate (CUDA events) may hold a one-time cost (its
# module loaded at its first launch) and, on a GPU shared by sweep workers, others' kernels. Kept as the time of rows
# far over the fastest (`sweep --lean far`, removed), it was a median 52x their kernel time, and some of those rows
# were their problem's best (docs/results/2026-12-07-h100-lean-far-sweeps.md): every row gets a kernel-clock sample.
# Note [a lean screen]: with cfg.lean (a screen, find_engines(lean=True): what a sweep of thousands of problems asks),
# every runnable's accuracy call is enqueued after the last one's, with CUDA events around each call and its check's
# counts (guards, poison, errors against the reference) left on the GPU; one wait then reads them all. Each row is
# still checked before it is timed (a row that fails its check is never timed), but the host waits once instead of
# ~8 times per row, and the accuracy call's event time is the row's first-call estimate (for K and the prune): no
# separate first timed call, so a screened row has no host time. A first call's one-time costs (a module loaded
# before its first launch) can only raise an estimate: such a row may be pruned, but its kernel-clock sample still
# ranks it, and where that sample is close (SCREEN_CLOSE) it gets the rest of its samples as the others do. A fault
# that loses the context shows at the wait, after the calls enqueued behind it: the task fails as before, its reason
# naming the wait, not the row.


def check_config(repeats: Any, warmup: Any, l2: Any, reference: Any = "cuda") -> None:
    check_int("repeats", repeats, 1)
    check_int("warmup", warmup, 0)
    check_choice("l2", l2, L2_MODES)
    check_choice("reference", reference, ("cuda", "cpu"))


def measure_rows(runnables: Sequence[Runnable], problem: Problem, cfg: MeasureConfig, ref: torch.Tensor | None,
                 device: int, peak: bool = True, timed: Callable[[], AbstractContextManager] | None = None
                 ) -> list[Measurement]:
    """Measures every runnable the same way: accuracy against `ref` (float64) and a first timed call; then
    `warmup` calls and `repeats` throughput/host samples of K back-to-back calls (no CUPTI session open; skipped
    when not cfg.throughput: K from the first call); then one kernel-clock session with `repeats` samples of
    min(K, KERNEL_CALLS) calls of each (with cfg.close, a screen's: one sample of each, then the rest only for those
    within cfg.close x the fastest); then (cfg.check_clock) the
    reference clock; FLOPs, TFLOP/s and % of peak; ranks by kernel median. With cfg.prune, a runnable whose first
    call took over `prune` times the fastest first call is sampled once per clock (``pruned``): it cannot be the
    best, and a slow candidate (milliseconds per call, as some depthwise engines are) would otherwise dominate the
    search's time. A runnable that fails is a Measurement with its error, never an exception. `timed`: a context
    manager around every call whose time is kept (first timed calls, throughput samples, the clocks' sessions; a
    sweep's exclusive turn on a shared GPU, Note [timing turns]); a lean screen's accuracy calls run outside it."""
    timed = timed or contextlib.nullcontext
    out: list[Measurement | None] = [None] * len(runnables)
    phases: dict[int, list[tuple[str, float, float]]] = {i: [] for i in range(len(runnables))}
    first: dict[int, float] = {}
    lean = cfg.lean and ref is not None and ref.is_cuda
    alone = [i for i, r in enumerate(runnables) if not (lean and r.guarded_output is not None)]
    # not lean: one hold for the first calls and the timed passes, as nothing untimed runs between them (each hold
    # asked for waits for the other workers' holds on a shared GPU); lean: a hold for each, the checks between
    each = timed if lean else contextlib.nullcontext
    with contextlib.nullcontext() if lean else timed():
        if alone:
            with each():
                for i in alone:  # the others: _checked_together below
                    cut = far_over(cfg.prune, min(first.values())) if cfg.prune and first else None
                    with _phase(phases[i], "first call"):
                        out[i], est = _first_call(runnables[i], ref, device, cut)
                    if est is not None:
                        first[i] = est
        if lean:
            together = [i for i, r in enumerate(runnables) if r.guarded_output is not None]
            for i, (m, est) in zip(together, _checked_together([runnables[i] for i in together], ref, device)):
                out[i] = m
                if est is not None:
                    first[i] = est
        if first:
            with each():
                _timed_passes(runnables, out, first, cfg, device, phases)
    _work_and_ranks(runnables, out, problem, device, peak)
    return [replace(m, phases=tuple(phases[i])) for i, m in enumerate(out)]


def far_over(prune: float, fastest_ms: float) -> float:
    """The first-call ms over which a row is far off the fastest (`fastest_ms`): over `prune` x it and
    ONE_CALL_SLACK_MS more. Such a row gets no second call, but still its kernel-clock sample: the first call's
    estimate is never its time (Note [a first call is no time])."""
    return max(prune * fastest_ms, fastest_ms + ONE_CALL_SLACK_MS)


def _timed_passes(runnables: Sequence[Runnable], out: list[Measurement], first: dict[int, float],
                  cfg: MeasureConfig, device: int, phases: dict[int, list]) -> None:
    """measure_rows's timing after the first calls (their GPU ms estimates in `first`): the prune, throughput
    samples, the kernel-clock pass(es) and the reference clock, into `out`."""
    fastest = min(first.values(), default=0.0)
    plan: dict[int, tuple[int, int]] = {}  # i -> (calls per sample, samples)
    for i, est in first.items():
        if cfg.prune and est > cfg.prune * fastest:
            out[i] = replace(out[i], pruned=True, calls_per_sample=1, throughput_ms=Stats.of([est]))
            plan[i] = (1, cfg.repeats if cfg.close else 1)  # close: the rest only where its sample is close
        elif not cfg.throughput:  # a screen ranks on the kernel clock alone (one call of a slow row is a sample)
            k = calls_per_sample(est, fewest=1)
            out[i] = replace(out[i], calls_per_sample=k)
            plan[i] = (k, cfg.repeats)
        else:
            with _nvtx(runnables[i], "throughput"), _phase(phases[i], "throughput"):
                out[i], k = _throughput(runnables[i], out[i], cfg, device)
            if k:
                plan[i] = (k, cfg.repeats)
    if cfg.close:
        _kernel_pass_close(runnables, out, plan, device, phases, cfg.close)
    else:
        _kernel_pass(runnables, out, plan, device, phases)
    if cfg.check_clock and plan:
        _reference_pass(runnables, out, plan, device)


@contextlib.contextmanager
def _phase(into: list[tuple[str, float, float]], name: str):
    """Appends (name, start as Unix time, duration s) of the block to `into` (for the Chrome trace of a search)."""
    start, t0 = time.time(), time.perf_counter()
    try:
        yield
    finally:
        into.append((name, start, time.perf_counter() - t0))


@contextlib.contextmanager
def _nvtx(r: Runnable, phase: str):
    """An NVTX range `cudnn_algos <phase> | <label>` around a runnable's timing (nsys/ncu --nvtx-include find one
    candidate's kernels by it); a no-op where NVTX is unavailable. Pushed with range_push (not nvtx.range, which
    str.format()s the message: engine labels hold braces)."""
    msg = f"cudnn_algos {phase} | {r.label or 'candidate'}"
    try:
        torch.cuda.nvtx.range_push(msg)
        pushed = True
    except Exception:  # noqa: BLE001 (NVTX missing: timing goes on without the range)
        pushed = False
    try:
        yield
    finally:
        if pushed:
            try:
                torch.cuda.nvtx.range_pop()
            except Exception:  # noqa: BLE001
                pass


def _add_error(m: Measurement, err: str) -> Measurement:
    return replace(m, error="; ".join(x for x in (m.error, err) if x))


def _failed(r: Runnable, e: Exception, device: int, stage: str) -> Measurement:
    """The row of a candidate whose `stage` raised: its error names the stage, the type and the message. A fault
    that lost the CUDA context is no row: CudaContextLost naming the candidate (Note [a lost context])."""
    lost = is_context_lost(e)
    try:
        torch.cuda.synchronize(device)
    except Exception as e2:  # the row already says what failed, unless the context is gone
        lost = lost or is_context_lost(e2)
    if lost:
        raise CudaContextLost.after(f"{r.label or 'a candidate'} ({stage})", e) from e
    return Measurement(kernel_ms=None, throughput_ms=None, host_ms=None, calls_per_sample=0, kernel_clock="none",
                       heuristic_rank=r.heuristic_rank, error=f"{stage}: {type(e).__name__}: {str(e)[:200]}")


def _output(r: Runnable, timed: bool) -> tuple[torch.Tensor, float | None]:
    """The accuracy call's output, and with `timed` its time between CUDA events around it (ms)."""
    if not timed:
        return r.output(), None
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    got = r.output()
    end.record()
    end.synchronize()
    return got, start.elapsed_time(end)


def _first_call(r: Runnable, ref: torch.Tensor | None, device: int, cut_ms: float | None = None
                ) -> tuple[Measurement, float | None]:
    """Accuracy (one call into a poisoned output) and one timed call: (measurement so far, its GPU ms or None).
    cut_ms: when the accuracy call (CUDA events around it) took longer, no timed call: its time is the estimate."""
    stage = "accuracy check"
    try:
        rel = mx = acc_ms = None
        err = ""
        if ref is not None:
            got, acc_ms = _output(r, timed=cut_ms is not None)
            rel, mx = errors(got, ref)  # OutputCheckFailed: outside its buffer or unwritten -> failed row
            if rel is None:
                err = NON_FINITE
        if acc_ms is not None and acc_ms > cut_ms:
            host, est = None, acc_ms
        else:
            stage = "first timed call"
            host, gpu = r.loop(1)
            host, est = Stats.of([host]), max(gpu, 1e-4)
        return Measurement(kernel_ms=None, throughput_ms=None, host_ms=host, calls_per_sample=0, kernel_clock="none",
                           rel_err=rel, max_abs_err=mx, heuristic_rank=r.heuristic_rank, error=err), est
    except Exception as e:  # a candidate that fails to run is a row saying so, never a crash
        return _failed(r, e, device, stage), None


def _checked_together(runnables: Sequence[Runnable], ref: torch.Tensor, device: int
                      ) -> list[tuple[Measurement, float | None]]:
    """Note [a lean screen]: each runnable's accuracy call (guarded_output) between two CUDA events, its check's
    counts and errors left on the GPU, all enqueued before one wait: (measurement so far, its call's GPU ms or None)
    per runnable, as _first_call's (no host time)."""
    ref_norm = ref.norm()
    pending: list[tuple[int, Any, Any, torch.Tensor, int]] = []
    got: list[tuple[Measurement, float | None] | None] = [None] * len(runnables)
    for j, r in enumerate(runnables):
        try:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            out, guards = r.guarded_output()
            end.record()
            pending.append((j, start, end, torch.cat([check_counts(out, guards).to(torch.float64),
                                                      error_stats(out, ref, ref_norm)]), out.numel()))
            del out, guards
        except Exception as e:  # a call that raises at once (a cuDNN status): its row says so
            got[j] = (_failed(r, e, device, "accuracy check"), None)
    try:
        counts = torch.stack([c for _, _, _, c, _ in pending]).tolist() if pending else []
    except Exception as e:  # a fault seen at the wait: the context is gone (Note [a lean screen])
        if is_context_lost(e):
            raise CudaContextLost.after(f"the lean screen's {len(pending)} accuracy calls", e) from e
        raise
    for (j, start, end, _, numel), (before, after, unwritten, finite, rel, mx) in zip(pending, counts):
        r = runnables[j]
        wrong = output_problem(int(before), int(after), int(unwritten), numel)
        if wrong:
            got[j] = (_failed(r, OutputCheckFailed(wrong), device, "accuracy check"), None)
            continue
        ok = bool(finite)
        got[j] = (Measurement(kernel_ms=None, throughput_ms=None, host_ms=None, calls_per_sample=0,
                              kernel_clock="none", rel_err=float(rel) if ok else None,
                              max_abs_err=float(mx) if ok else None, heuristic_rank=r.heuristic_rank,
                              error="" if ok else NON_FINITE),
                  max(start.elapsed_time(end), 1e-4))
    return got


def _throughput(r: Runnable, m: Measurement, cfg: MeasureConfig, device: int) -> tuple[Measurement, int]:
    """Warm-up and the throughput/host samples of one runnable: (measurement so far, K), K = 0 on failure."""
    try:
        n = max(cfg.warmup, 1)
        _, gpu0 = r.loop(n)
        k = calls_per_sample(gpu0 / n)
        thr, host = [], []
        for _ in range(cfg.repeats):
            h, g = r.loop(k)
            thr.append(g / k)
            host.append(h / k)
        return replace(m, throughput_ms=Stats.of(thr), host_ms=Stats.of(host), calls_per_sample=k), k
    except Exception as e:
        return _failed(r, e, device, "throughput samples"), 0


def calls_per_sample(est_ms: float, fewest: int = MIN_CALLS) -> int:
    """K, the back-to-back calls per sample, for a call estimated at `est_ms` of GPU time: TARGET_SAMPLE_MS of work,
    within [fewest, MAX_CALLS]. A throughput sample needs MIN_CALLS (back to back, so that launches overlap); a
    kernel-clock sample alone (a screen's, fewest=1) does not: CUPTI records each kernel's own duration, so one call
    of a candidate slower than TARGET_SAMPLE_MS is a whole sample, and a second call would only double its GPU time
    (the screen's slowest rows are most of a sweep's timed GPU time)."""
    return int(min(MAX_CALLS, max(fewest, round(TARGET_SAMPLE_MS / max(est_ms, 1e-3)))))


def _kernel_pass(runnables: Sequence[Runnable], out: list[Measurement], plan: dict[int, tuple[int, int]],
                 device: int, phases: dict[int, list]) -> None:
    """One kernel-clock session: per runnable, its samples as windows of min(K, KERNEL_CALLS) back-to-back calls."""
    if not plan:
        return
    try:
        s, wins, failed = again_if_lost(lambda: _kernel_session(runnables, plan, device, phases))
    except KernelClockUnavailable as e:
        for i in plan:
            out[i] = _add_error(out[i], f"kernel clock unavailable: {str(e)[:150]}")
        return
    for i, err in failed.items():
        out[i] = _add_error(out[i], err)
    for i, ws in wins.items():
        kc = min(plan[i][0], KERNEL_CALLS)
        res = [s.results[w] for w in ws]
        acts = statistics.median(n / kc for _, n, _ in res)
        if acts == 0:
            out[i] = _add_error(out[i], "the kernel clock saw no GPU activity")
            continue
        out[i] = replace(out[i], kernel_ms=Stats.of([busy / kc for busy, _, _ in res]), kernel_clock="cupti",
                         kernel_calls=kc, kernels=max((k for _, _, k in res), key=len), activities_per_call=acts)


def _kernel_pass_close(runnables: Sequence[Runnable], out: list[Measurement], plan: dict[int, tuple[int, int]],
                       device: int, phases: dict[int, list], close: float) -> None:
    """The kernel pass in two sessions: one sample of every runnable, then the rest of their samples only for those
    within `close` x the fastest first sample (their samples merged); the others keep their one."""
    _kernel_pass(runnables, out, {i: (k, 1) for i, (k, _) in plan.items()}, device, phases)
    first = {i: out[i].kernel_ms for i in plan if out[i].kernel_ms is not None}
    if not first:
        return
    fastest = min(st.median for st in first.values())
    more = {i: (k, n - 1) for i, (k, n) in plan.items() if n > 1 and i in first and first[i].median <= close * fastest}
    # a pruned row whose sample is close after all (its first call's estimate was high: a module loaded, or another
    # worker's kernels on a shared GPU, sweep Note [timing turns]): its samples as the others', K from its sample
    pruned = {i for i in more if out[i].pruned}
    more.update({i: (calls_per_sample(first[i].median, fewest=1), more[i][1]) for i in pruned})
    _kernel_pass(runnables, out, more, device, phases)
    for i in more:
        if out[i].kernel_ms is not first[i]:  # the second session timed it: its samples join the first's
            out[i] = replace(out[i], kernel_ms=Stats.of(list(first[i].samples) + list(out[i].kernel_ms.samples)))
        if i in pruned:
            out[i] = replace(out[i], pruned=False, calls_per_sample=more[i][0], throughput_ms=None)


def _kernel_session(runnables: Sequence[Runnable], plan: dict[int, tuple[int, int]], device: int,
                    phases: dict[int, list]) -> tuple[Any, dict[int, list[int]], dict[int, str]]:
    """The kernel pass's session: (the session, runnable -> its windows, runnable -> why it failed)."""
    wins: dict[int, list[int]] = {}
    failed: dict[int, str] = {}
    with kernel_clock(device) as s:
        for i, (k, n) in plan.items():
            try:
                with _nvtx(runnables[i], "kernel clock"), _phase(phases[i], "kernel clock"):
                    wins[i] = [s.window(functools.partial(runnables[i].loop, min(k, KERNEL_CALLS)))
                               for _ in range(n)]
            except Exception as e:
                if is_context_lost(e):
                    raise CudaContextLost.after(f"{runnables[i].label or 'a candidate'} (kernel clock)", e) from e
                torch.cuda.synchronize(device)
                failed[i] = f"kernel clock: {type(e).__name__}: {str(e)[:150]}"
    return s, wins, failed


def _reference_pass(runnables: Sequence[Runnable], out: list[Measurement], plan: dict[int, tuple[int, int]],
                    device: int) -> None:
    """The independent clock over the same calls (one window of min(K, KERNEL_CALLS) calls each)."""
    jobs = [(i, functools.partial(runnables[i].loop, min(k, KERNEL_CALLS)), min(k, KERNEL_CALLS))
            for i, (k, _) in plan.items()]
    try:
        ref_ms = reference_kernel_ms(jobs, device)
    except Exception as e:  # the profiler is unavailable: say so on every row
        if is_context_lost(e):
            raise CudaContextLost.after("the reference clock's pass", e) from e
        for i in plan:
            out[i] = _add_error(out[i], f"reference clock failed: {type(e).__name__}: {str(e)[:100]}")
        return
    for i, ms in ref_ms.items():
        out[i] = replace(out[i], reference_kernel_ms=ms)


def _work_and_ranks(runnables: Sequence[Runnable], out: list[Measurement], problem: Problem, device: int,
                    peak: bool) -> None:
    flops = problem.flops()
    peaks: dict[bool, float | None] = {}  # per tensor-math flag, asked once per search (a miss is a warning)
    for i, m in enumerate(out):
        if m.kernel_ms is not None:
            tf = flops / (m.kernel_ms.median * 1e-3) / 1e12
            pct = None
            if peak:
                tc = runnables[i].tensor_math
                if tc not in peaks:
                    peaks[tc] = peak_or_none(device, problem.dtype, tc and problem.dtype == torch.float32)
                pct = None if peaks[tc] is None else 100.0 * tf / peaks[tc]
            out[i] = replace(m, tflops=tf, pct_peak=pct)
    order = sorted((i for i, m in enumerate(out) if m.kernel_ms is not None), key=lambda i: out[i].kernel_ms.median)
    for rank, i in enumerate(order):
        out[i] = replace(out[i], measured_rank=rank)
