"""The clocks and the one measuring path every search and benchmark uses (``measure_rows``).

Clocks (docs/measuring.md):
  kernel      CUPTI activity records (kernels, memsets, copies) of K eager back-to-back calls, the union of their
              intervals / K, read by the extension's own CUPTI session (csrc/kernel_clock.cpp): what Nsight Systems
              shows for the same calls. The kernels' names come with it (how torch's choice is identified).
  throughput  CUDA events around K back-to-back calls / K: what a training loop sees (the host's pace when the host
              is slower than the GPU).
  host        host wall time of that loop / K: the CPU cost of one call.
  reference   (check_clock) the independent check of the kernel clock: torch.profiler's CUPTI records of K eager
              calls in a session of its own, union / K.
Throughput and host are sampled with no CUPTI session open (its instrumentation costs host time per launch); the
kernel clock then samples every row in one session. Operands are fresh random tensors (never zeros); with
``l2="cold"`` calls rotate through operand sets that together exceed three times the L2 cache.
"""
from __future__ import annotations

import contextlib
import functools
import math
import os
import statistics
import threading
import time
import warnings
from dataclasses import dataclass, replace
from typing import Any, Callable, Sequence

import torch

from . import _ext
from .problem import OUTPUT_OPERAND, Problem, check_choice, check_int
from .results import MeasureConfig, Measurement, Stats

L2_MODES = ("warm", "cold")
TARGET_SAMPLE_MS = 1.0  # GPU work per throughput sample, which sets K (calls per sample)
MAX_CALLS = 20
MIN_CALLS = 2
KERNEL_CALLS = 5  # calls per kernel-clock sample (CUPTI records each call; a few back-to-back calls suffice)


PRUNE = 8.0  # with a screen: candidates whose first call is over 8x the fastest first call get one sample


def check_config(repeats: Any, warmup: Any, l2: Any, reference: Any = "cuda") -> None:
    check_int("repeats", repeats, 1)
    check_int("warmup", warmup, 0)
    check_choice("l2", l2, L2_MODES)
    check_choice("reference", reference, ("cuda", "cpu"))


# ------------------------------------------------------------------------------------------- runnable rows
@dataclass
class Runnable:
    """Something to time: a legacy algorithm, an engine plan, or torch's own op, on the search's operand sets.

    call(i): one call on operand set i. loop(k): k back-to-back calls -> (host ms, device-event ms) for the loop
    (in C++ for our rows). output(): one call on set 0 returning its output, for the accuracy check (our rows write a
    NaN-poisoned buffer first, so an unwritten element shows)."""

    call: Callable[[int], Any]
    loop: Callable[[int], tuple[float, float]]
    output: Callable[[], torch.Tensor]
    heuristic_rank: int | None = None
    tensor_math: bool = True  # for % of peak: the dtype's tensor-core matmul rate (fp32: TF32) or plain fp32
    label: str = ""  # problem, direction and candidate: the NVTX range its timing runs in


REDZONE = 4096  # elements of guard before and after an output buffer in the accuracy call (8-16 KB: alignment kept)
REDZONE_VALUE = 1337.0


class OutputCheckFailed(RuntimeError):
    """A candidate wrote outside its output buffer, or left part of it unwritten: a row saying so, never timed."""


def guarded_like(t: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """A tensor with t's shape, strides and dtype inside a larger buffer whose REDZONE elements before and after are
    filled with a known value: (the tensor, [guard before, guard after])."""
    span = 1 + sum((n - 1) * st for n, st in zip(t.shape, t.stride())) if t.numel() else 0
    buf = torch.empty(REDZONE + span + REDZONE, dtype=t.dtype, device=t.device)
    buf[:REDZONE].fill_(REDZONE_VALUE)
    buf[REDZONE + span:].fill_(REDZONE_VALUE)
    return buf.as_strided(t.shape, t.stride(), REDZONE), [buf[:REDZONE], buf[REDZONE + span:]]


def check_output(out: torch.Tensor, guards: Sequence[torch.Tensor]) -> None:
    """OutputCheckFailed when a guard changed (a write outside the buffer) or a NaN poison survived (unwritten)."""
    for where, g in zip(("before", "after"), guards):
        changed = int((g != torch.full((), REDZONE_VALUE, dtype=g.dtype)).sum())  # as stored (bf16 rounds it)
        if changed:
            raise OutputCheckFailed(f"wrote outside its output buffer: {changed} of {REDZONE} guard elements "
                                    f"{where} it changed")
    unwritten = int(torch.isnan(out).sum())
    if unwritten:
        raise OutputCheckFailed(f"left {unwritten} of {out.numel()} output elements unwritten (still the NaN poison)")


def _own_output(problem: Problem, cdir: str, sets: list[dict[str, torch.Tensor]], call: Callable[[int], Any]):
    """output(): one call into a NaN-poisoned output placed between two guards (redzones), checked after."""
    role = OUTPUT_OPERAND[cdir]

    def output() -> torch.Tensor:
        orig = sets[0][role]
        out, guards = guarded_like(orig)
        out.fill_(float("nan"))
        sets[0][role] = out
        try:
            call(0)
        finally:
            sets[0][role] = orig
        check_output(out, guards)
        return out

    return output


def legacy_runnable(problem: Problem, cdir: str, algo_id: int, math_type: str, sets, limit: int,
                    label: str = "") -> Runnable:
    """One legacy algorithm under one math type; its loop runs in C++ through the legacy API."""
    ext = _ext.load()
    cp = problem.cudnn()
    xs, ws, ys = ([s[r] for s in sets] for r in "xwy")
    n = len(sets)

    def call(i: int) -> None:
        s = sets[i % n]
        ext.execute(cdir, cp, algo_id, math_type, s["x"], s["w"], s["y"], limit)

    def loop(k: int) -> tuple[float, float]:
        t = ext.time_calls(cdir, cp, algo_id, math_type, xs, ws, ys, k, limit)
        return t["host_ms"], t["gpu_ms"]

    return Runnable(call, loop, _own_output(problem, cdir, sets, call),
                    tensor_math=tensor_math(problem.dtype, math_type), label=label)


def plan_runnable(problem: Problem, cdir: str, plan, sets, heuristic_rank: int | None = None,
                  label: str = "") -> Runnable:
    """One graph-API execution plan; its loop runs in C++ (cudnnBackendExecute)."""
    xs, ws, ys = ([s[r] for s in sets] for r in "xwy")
    n = len(sets)

    def call(i: int) -> None:
        s = sets[i % n]
        plan.execute(s["x"], s["w"], s["y"])

    def loop(k: int) -> tuple[float, float]:
        t = plan.time_calls(xs, ws, ys, k)
        return t["host_ms"], t["gpu_ms"]

    return Runnable(call, loop, _own_output(problem, cdir, sets, call), heuristic_rank=heuristic_rank,
                    tensor_math=tensor_math(problem.dtype, problem.math), label=label)


def torch_runnable(problem: Problem, cdir: str, sets) -> Runnable:
    """torch's own convolution for cuDNN direction `cdir`, through the ops a model's forward and autograd run
    (aten.convolution / aten.convolution_backward), so it picks its cuDNN plan as it would in a model (cudnn.benchmark,
    deterministic and allow_tf32 as set when it first meets the problem). Its loop is a Python loop, as a model's.

    torch keeps the first plan it picks for a problem for the life of the process, whatever cudnn.benchmark says
    later (its plan cache key has no benchmark flag): to see benchmark mode's choice, the first call of a shape in a
    process must run with benchmark on."""
    call = torch_call(problem, cdir, sets)
    return Runnable(call, python_loop(call, sets[0]["x"].device.index), lambda: call(0),
                    tensor_math=tensor_math(problem.dtype, problem.math),
                    label=f"{problem.describe(cdir)} | torch's op")


def torch_call(problem: Problem, cdir: str, sets) -> Callable[[int], torch.Tensor]:
    stride, pad, dil = problem.conv_args()
    zeros, groups, n = [0] * len(stride), problem.spec.groups, len(sets)
    if cdir == "forward":
        def call(i: int) -> torch.Tensor:
            o = sets[i % n]
            return torch.ops.aten.convolution(o["x"], o["w"], None, stride, pad, dil, False, zeros, groups)
    else:
        mask = [cdir == "backward_data", cdir == "backward_filter", False]

        def call(i: int) -> torch.Tensor:
            o = sets[i % n]
            gx, gw, _ = torch.ops.aten.convolution_backward(o["y"], o["x"], o["w"], None, stride, pad, dil, False,
                                                            zeros, groups, mask)
            return gx if mask[0] else gw
    return call


def python_loop(call: Callable[[int], Any], device: int) -> Callable[[int], tuple[float, float]]:
    """loop(k) for an operation called from Python: host wall and device events around k calls."""
    def loop(k: int) -> tuple[float, float]:
        stream = torch.cuda.current_stream(device)
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record(stream)
        t0 = time.perf_counter()
        for i in range(k):
            call(i)
        t1 = time.perf_counter()
        e.record(stream)
        e.synchronize()
        return (t1 - t0) * 1e3, s.elapsed_time(e)

    return loop


def tensor_math(dtype: torch.dtype, math_type: str | None) -> bool:
    """Whether a row of this dtype and math type may use tensor cores (fp32: TF32), for its % of peak."""
    return dtype in (torch.float16, torch.bfloat16) or (dtype == torch.float32 and math_type != "fma")


# ------------------------------------------------------------------------------------------- operands, reference
def operand_sets(problem: Problem, l2: str, device: int) -> list[dict[str, torch.Tensor]]:
    """Fresh random cuDNN-role operands: one set (warm L2), or enough to exceed 3x the L2 cache (cold)."""
    n_sets = 1
    if l2 == "cold":
        per_set = problem.nbytes
        l2_bytes = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0) or 60 * 2**20
        free, _ = torch.cuda.mem_get_info(device)
        n_sets = max(2, min(64, math.ceil(3 * l2_bytes / per_set) + 1, int(0.25 * free // max(per_set, 1))))
    return [problem.operands(device, "measure") for _ in range(n_sets)]


def reference_output(problem: Problem, cdir: str, ops: dict[str, torch.Tensor], where: str) -> torch.Tensor:
    """The float64 result of cuDNN's direction `cdir` on these (lifted, cuDNN-role) operands, computed by torch; on
    the CPU instead (with a warning) when the GPU has no memory left for it: a search run while the GPU is nearly full
    still checks every row's output (on the H200, torch's float64 convolution failed there with a CUDA
    out-of-memory AcceleratorError, not the allocator's OutOfMemoryError)."""
    if where == "cuda":
        try:
            return _reference(problem, cdir, ops, "cuda")
        except RuntimeError as e:
            if not _freed_after_oom(e):
                raise
            warnings.warn(f"{problem.describe(cdir)}: the float64 reference did not fit on the GPU "
                          f"({type(e).__name__}); computing it on the CPU", RuntimeWarning, stacklevel=2)
    return _reference(problem, cdir, ops, "cpu")


def _freed_after_oom(e: RuntimeError) -> bool:
    """Whether `e` says the GPU ran out of memory — the allocator's OutOfMemoryError or a CUDA runtime
    AcceleratorError, both RuntimeErrors — and if so, torch's cached blocks handed back for what runs next."""
    if "out of memory" not in str(e):
        return False
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    return True


def _reference(problem: Problem, cdir: str, ops: dict[str, torch.Tensor], where: str) -> torch.Tensor:
    stride, pad, dil = problem.conv_args()
    dev = ops["x"].device if where == "cuda" else torch.device("cpu")
    x, w, y = (ops[r].to(device=dev, dtype=torch.float64) for r in "xwy")
    conv = torch.nn.functional.conv2d if x.dim() == 4 else torch.nn.functional.conv3d
    with torch.no_grad(), torch.backends.cudnn.flags(enabled=True, deterministic=True, benchmark=False):
        if cdir == "forward":
            return conv(x, w, None, stride, pad, dil, problem.spec.groups)
        mask = [cdir == "backward_data", cdir == "backward_filter", False]
        gx, gw, _ = torch.ops.aten.convolution_backward(y, x, w, None, stride, pad, dil, False, [0] * len(stride),
                                                        problem.spec.groups, mask)
        return gx if cdir == "backward_data" else gw


def errors(out: torch.Tensor, ref: torch.Tensor) -> tuple[float | None, float | None]:
    """(||out - ref|| / ||ref||, max |out - ref|); (None, None) when out has a non-finite element."""
    o = out.to(device=ref.device, dtype=torch.float64)
    if not torch.isfinite(o).all():
        return None, None
    d = o - ref
    return float(d.norm() / ref.norm().clamp_min(1e-300)), float(d.abs().max())


# ------------------------------------------------------------------------------------------- work and peak
@functools.lru_cache(maxsize=None)
def peak_tflops(device: int, dtype: torch.dtype, tf32: bool) -> float:
    """This device's dense matmul rate through torch for the dtype (fp32: with or without TF32), TFLOP/s: median of
    10 event-timed 8192^3 products after 3 warm-ups, on random data. Measured once per process."""
    n = 8192 if dtype != torch.float64 else 4096
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        old = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = tf32
    try:
        with torch.cuda.device(device):
            a = torch.randn(n, n, device=f"cuda:{device}", dtype=dtype)
            b = torch.randn(n, n, device=f"cuda:{device}", dtype=dtype)
            for _ in range(3):
                a @ b
            times = []
            for _ in range(10):
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s.record()
                a @ b
                e.record()
                e.synchronize()
                times.append(s.elapsed_time(e))
            del a, b
    finally:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.backends.cuda.matmul.allow_tf32 = old
    return 2 * n**3 / (statistics.median(times) * 1e-3) / 1e12


def peak_or_none(device: int, dtype: torch.dtype, tf32: bool) -> float | None:
    """peak_tflops, or None (with a warning) when the GPU has no room for its two 8192^2 operands (128 MiB each in
    fp16): a search run while the GPU is nearly full completes without its rows' % of peak (on the H200 this was
    the only allocation of a measured engine search that failed with 64 MB free). Not cached: a later call with
    memory free measures it."""
    try:
        return peak_tflops(device, dtype, tf32)
    except RuntimeError as e:
        if not _freed_after_oom(e):
            raise
        warnings.warn(f"the {peak_label(dtype, tf32)} peak did not fit on cuda:{device} ({type(e).__name__}); "
                      "rows have no % of peak", RuntimeWarning, stacklevel=2)
        return None


def peak_label(dtype: torch.dtype, tf32: bool) -> str:
    name = str(dtype).replace("torch.", "")
    if dtype == torch.float32:
        return f"{name} matmul ({'TF32 allowed' if tf32 else 'no TF32'})"
    return f"{name} matmul"


# ------------------------------------------------------------------------------------------- the kernel clock
class KernelClockUnavailable(RuntimeError):
    """The kernel clock could not open its CUPTI session (no GPU, another CUPTI client active, ...)."""


class KernelClockLost(KernelClockUnavailable):
    """Another CUPTI client finalized CUPTI during a session and its records are gone (torch.profiler with
    TEARDOWN_CUPTI=1 does so on the process's next CUDA call: Note [kineto's deferred teardown] in
    csrc/kernel_clock.cpp). A session run again right after is whole."""


def _profiler_active() -> bool:
    try:
        return bool(torch.autograd.profiler._is_profiler_enabled)  # noqa: SLF001 (torch's own flag)
    except AttributeError:
        return False


@contextlib.contextmanager
def kernel_clock(device: int, own_timestamps: bool = True):
    """A CUPTI session of the extension's kernel clock. Yields window(loop_fn): runs loop_fn between two CUPTI
    timestamps and returns the window's index. After the block, ``session.results[i]`` is (busy ms, activities,
    kernel names) of window i. The session stamps records with its own nanosecond source; own_timestamps=False
    keeps whatever source another CUPTI client left registered (torch.profiler's counts TSC ticks: Note [whose
    timestamps] in csrc/kernel_clock.cpp) and exists only to show that difference."""
    ext = _ext.load()
    if _profiler_active():
        raise KernelClockUnavailable("a torch.profiler session is open: CUPTI has one client at a time")
    try:
        ext.kernel_clock_begin(own_timestamps)
    except RuntimeError as e:
        raise KernelClockUnavailable(str(e)) from e
    session = _Session(ext)
    try:
        yield session
    except BaseException:
        ext.kernel_clock_abort()
        raise
    try:
        got = ext.kernel_clock_end(device, session.windows)
    except RuntimeError as e:
        if "session lost" in str(e):
            raise KernelClockLost(str(e)) from None
        raise
    session.results = [(busy / 1e6, n, tuple(k)) for busy, n, k in got]
    if session.results and not any(n for _, n, _ in session.results):  # every window launched GPU work
        raise KernelClockLost("kernel clock: session lost: no window saw any GPU activity (CUPTI was finalized "
                              "before its first record)")


_held = [0]
_held_lock = threading.Lock()


@contextlib.contextmanager
def cupti_held():
    """Inside the block the kernel clock's sessions leave CUPTI attached (recording off) instead of finalizing it
    after each one; it is finalized once, when the outermost block ends. Public as ``cudnn_algos.cupti_held()``.

    Why: on the H200 (CUDA 13.0, libcupti 13) every attach/finalize cycle keeps ~71 KB of host memory that nothing
    returns (14 MB over 200 sessions, every activity buffer of ours handed back), and a measured search opens
    two sessions, so a loop of thousands of measured searches grows without bound; held, 200 sessions kept 0.06
    MB and 200 measured searches 0.0 MB (benchmarks/cupti_attach.py, benchmarks/reliability_gpu.py).
    Why not always: an attached CUPTI, even idle, slows every launch. Launch-bound calls of a small convolution
    (back-to-back, ~30-50 us each; torch's op and an engine plan) took 11-22% longer on the events and host clocks
    while it was held than after a finalized session (medians of alternating rounds, two runs), and those clocks
    are measured between the kernel clock's sessions. So searches finalize by default (truthful clocks), and this
    block is for long loops of measured searches where memory matters more than microseconds of host time per
    launch."""
    ext = _ext.load()
    with _held_lock:
        _held[0] += 1
        if _held[0] == 1:
            ext.kernel_clock_keep_attached(True)
    try:
        yield
    finally:
        with _held_lock:
            _held[0] -= 1
            if _held[0] == 0:
                ext.kernel_clock_keep_attached(False)


class _Session:
    def __init__(self, ext):
        self.ext, self.windows, self.results = ext, [], []

    def window(self, run: Callable[[], Any]) -> int:
        t0 = self.ext.kernel_clock_now()
        run()
        self.windows.append((t0, self.ext.kernel_clock_now()))
        return len(self.windows) - 1


def kernels_of(runnables: Sequence[Runnable], device: int) -> list[tuple[str, ...] | None]:
    """The kernels one call of each runnable launches (one kernel-clock session, one call each; None where the call
    failed)."""
    def session():
        idx: list[int | None] = []
        with kernel_clock(device) as s:
            for r in runnables:
                try:
                    idx.append(s.window(lambda r=r: (r.call(0), torch.cuda.synchronize(device))))
                except Exception:
                    idx.append(None)
        return [None if i is None else s.results[i][2] for i in idx]

    return again_if_lost(session)


# ------------------------------------------------------------------------------------------- the reference clock
def _cupti_teardown() -> None:
    """Unless the user decided (TEARDOWN_CUPTI set), have torch's profiler finalize CUPTI after its session: left
    attached, CUPTI's instrumentation slowed later kernels (docs/HISTORY.md has the measurement). kineto finalizes on
    the process's next CUDA call, which the kernel clock makes before it opens a session (Note [kineto's deferred
    teardown] in csrc/kernel_clock.cpp). torch disables teardown before CUDA 12.6 (it crashed with CUDA graphs)."""
    cuda = torch.version.cuda or "0"
    try:
        new_enough = tuple(int(v) for v in cuda.split(".")[:2]) >= (12, 6)
    except ValueError:
        new_enough = False
    if new_enough:
        os.environ.setdefault("TEARDOWN_CUPTI", "1")


def reference_kernel_ms(jobs: Sequence[tuple[int, Callable[[], Any], int]], device: int) -> dict[int, float]:
    """The independent clock: one torch.profiler session; job (key, fn, calls) runs its calls inside a named range
    followed by a synchronize, so every GPU activity it launched starts inside that range. Returns per key the union
    of its device activities' intervals (kernels, memsets, copies) / calls, ms."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile, record_function

    _cupti_teardown()
    names = {}
    with warnings.catch_warnings():  # "Profiler clears events at the end of each cycle": one cycle here
        warnings.filterwarnings("ignore", message="Profiler clears events")
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for key, fn, _ in jobs:
                name = f"cudnn_algos_ref_{key}"
                names[name] = key
                with record_function(name):
                    fn()
                    torch.cuda.synchronize(device)
        events = prof.events()
    ranges = sorted((e.time_range.start, e.time_range.end, names[e.name]) for e in events if e.name in names)
    spans: dict[int, list[tuple[float, float]]] = {k: [] for _, _, k in ranges}
    starts = [lo for lo, _, _ in ranges]
    import bisect

    for e in events:
        # device-side activity only; kineto also mirrors each named range onto the GPU timeline: not a kernel
        if e.device_type != DeviceType.CUDA or e.name in names:
            continue
        i = bisect.bisect_right(starts, e.time_range.start) - 1
        if i >= 0 and e.time_range.start <= ranges[i][1]:
            spans[ranges[i][2]].append((e.time_range.start, e.time_range.end))
    calls = {k: c for k, _, c in jobs}
    return {k: union_length(v) / 1000.0 / calls[k] for k, v in spans.items() if v}


def union_length(intervals: Sequence[tuple[float, float]]) -> float:
    """Length of the union of [start, end) intervals (concurrent activities counted once)."""
    total, lo, hi = 0.0, None, None
    for s, e in sorted(intervals):
        if hi is None or s > hi:
            if hi is not None:
                total += hi - lo
            lo, hi = s, e
        else:
            hi = max(hi, e)
    return total + (hi - lo if hi is not None else 0.0)


# ------------------------------------------------------------------------------------------- measure_rows
def measure_rows(runnables: Sequence[Runnable], problem: Problem, cfg: MeasureConfig, ref: torch.Tensor | None,
                 device: int, peak: bool = True) -> list[Measurement]:
    """Measures every runnable the same way: accuracy against `ref` (float64) and a first timed call; then
    `warmup` calls and `repeats` throughput/host samples of K back-to-back calls (no CUPTI session open); then one
    kernel-clock session with `repeats` samples of min(K, KERNEL_CALLS) calls of each; then (cfg.check_clock) the
    reference clock; FLOPs, TFLOP/s and % of peak; ranks by kernel median. With cfg.prune, a runnable whose first
    call took over `prune` times the fastest first call is sampled once per clock (``pruned``): it cannot be the
    best, and a slow candidate (milliseconds per call, as some depthwise engines are) would otherwise dominate the
    search's time. A runnable that fails is a Measurement with its error, never an exception."""
    out: list[Measurement | None] = [None] * len(runnables)
    phases: dict[int, list[tuple[str, float, float]]] = {i: [] for i in range(len(runnables))}
    first: dict[int, float] = {}
    for i, r in enumerate(runnables):
        with _phase(phases[i], "first call"):
            out[i], est = _first_call(r, ref, device)
        if est is not None:
            first[i] = est
    fastest = min(first.values(), default=0.0)
    plan: dict[int, tuple[int, int]] = {}  # i -> (calls per sample, samples)
    for i, est in first.items():
        if cfg.prune and est > cfg.prune * fastest:
            out[i] = replace(out[i], pruned=True, calls_per_sample=1, throughput_ms=Stats.of([est]))
            plan[i] = (1, 1)
        else:
            with _nvtx(runnables[i], "throughput"), _phase(phases[i], "throughput"):
                out[i], k = _throughput(runnables[i], out[i], cfg, device)
            if k:
                plan[i] = (k, cfg.repeats)
    _kernel_pass(runnables, out, plan, device, phases)
    if cfg.check_clock and plan:
        _reference_pass(runnables, out, plan, device)
    _work_and_ranks(runnables, out, problem, device, peak)
    return [replace(m, phases=tuple(phases[i])) for i, m in enumerate(out)]


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
    """The row of a candidate whose `stage` raised: its error names the stage, the type and the message."""
    try:
        torch.cuda.synchronize(device)
    except Exception:  # noqa: S110 (the row already says what failed)
        pass
    return Measurement(kernel_ms=None, throughput_ms=None, host_ms=None, calls_per_sample=0, kernel_clock="none",
                       heuristic_rank=r.heuristic_rank, error=f"{stage}: {type(e).__name__}: {str(e)[:200]}")


def _first_call(r: Runnable, ref: torch.Tensor | None, device: int) -> tuple[Measurement, float | None]:
    """Accuracy (one call into a poisoned output) and one timed call: (measurement so far, its GPU ms or None)."""
    stage = "accuracy check"
    try:
        rel = mx = None
        err = ""
        if ref is not None:
            rel, mx = errors(r.output(), ref)  # OutputCheckFailed: outside its buffer or unwritten -> failed row
            if rel is None:
                err = "output has non-finite values (overflow)"
        stage = "first timed call"
        host, gpu = r.loop(1)
        return Measurement(kernel_ms=None, throughput_ms=None, host_ms=Stats.of([host]), calls_per_sample=0,
                           kernel_clock="none", rel_err=rel, max_abs_err=mx, heuristic_rank=r.heuristic_rank,
                           error=err), max(gpu, 1e-4)
    except Exception as e:  # a candidate that fails to run is a row saying so, never a crash
        return _failed(r, e, device, stage), None


def _throughput(r: Runnable, m: Measurement, cfg: MeasureConfig, device: int) -> tuple[Measurement, int]:
    """Warm-up and the throughput/host samples of one runnable: (measurement so far, K), K = 0 on failure."""
    try:
        n = max(cfg.warmup, 1)
        _, gpu0 = r.loop(n)
        est = max(gpu0 / n, 1e-3)
        k = int(min(MAX_CALLS, max(MIN_CALLS, round(TARGET_SAMPLE_MS / est))))
        thr, host = [], []
        for _ in range(cfg.repeats):
            h, g = r.loop(k)
            thr.append(g / k)
            host.append(h / k)
        return replace(m, throughput_ms=Stats.of(thr), host_ms=Stats.of(host), calls_per_sample=k), k
    except Exception as e:
        return _failed(r, e, device, "throughput samples"), 0


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
                torch.cuda.synchronize(device)
                failed[i] = f"kernel clock: {type(e).__name__}: {str(e)[:150]}"
    return s, wins, failed


def again_if_lost(session: Callable[[], Any]) -> Any:
    """session() (a function that opens a kernel-clock session and returns what it read), run once more if another
    CUPTI client finalized CUPTI under it (KernelClockLost); a second loss is raised."""
    try:
        return session()
    except KernelClockLost:
        return session()


def _reference_pass(runnables: Sequence[Runnable], out: list[Measurement], plan: dict[int, tuple[int, int]],
                    device: int) -> None:
    """The independent clock over the same calls (one window of min(K, KERNEL_CALLS) calls each)."""
    jobs = [(i, functools.partial(runnables[i].loop, min(k, KERNEL_CALLS)), min(k, KERNEL_CALLS))
            for i, (k, _) in plan.items()]
    try:
        ref_ms = reference_kernel_ms(jobs, device)
    except Exception as e:  # the profiler is unavailable: say so on every row
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


# ------------------------------------------------------------------------------------------- torch's first call
@contextlib.contextmanager
def cudnn_benchmark(flag: bool):
    """torch.backends.cudnn.benchmark set to `flag` inside, restored after (torch's own cudnn.flags() would also
    reset deterministic and allow_tf32 to their defaults)."""
    old = torch.backends.cudnn.benchmark
    torch.backends.cudnn.benchmark = flag
    try:
        yield
    finally:
        torch.backends.cudnn.benchmark = old


def first_call_ms(call: Callable[[int], Any], device: int) -> float:
    """Host ms of one call(0), synchronised on both sides: for torch's op, the call where it plans a new problem
    (with cudnn.benchmark: its search)."""
    torch.cuda.synchronize(device)
    t0 = time.perf_counter()
    call(0)
    torch.cuda.synchronize(device)
    return (time.perf_counter() - t0) * 1e3
