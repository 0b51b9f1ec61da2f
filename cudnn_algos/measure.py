"""Re-timing every successful algorithm ourselves, three ways, with accuracy and work per row.

Clocks (see README "What each number means"):
  kernel      the GPU's own time for the kernels one call launches: CUDA-graph replay of K captured calls, timed
              with events (``kernel_clock="graph"``); where capture fails, the sum of CUPTI kernel records
              (torch.profiler) per call (``kernel_clock="cupti"``).
  throughput  device events around K back-to-back calls (the launch loop runs in C++), per call: what a training
              loop sees. When the host is slower than the kernels this measures the host.
  host        host wall time of the same loop, per call: the CPU cost of one launch through the legacy API.
  cupti       the independent clock: CUPTI kernel records of K calls, the union of their [start, end) intervals
              (concurrent kernels counted once), per call (mean).
Each of kernel/throughput/host is sampled ``repeats`` times (after ``warmup`` calls); the headline is the median.
Operands are fresh random tensors (never zeros); with ``l2="cold"`` calls rotate through enough operand sets
that together exceed three times the L2 cache, so no call finds its tensors cache-resident.
"""
from __future__ import annotations

import contextlib
import functools
import math
import os
import statistics
import warnings
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:  # pragma: no cover
    from .api import _Problem
    from .results import SearchResult

L2_MODES = ("warm", "cold")
TARGET_SAMPLE_MS = 1.0  # GPU work per timed sample, which sets K (calls per sample)
MAX_CALLS = 20
MIN_CALLS = 2  # slow algorithms (ms per call) need few calls per sample; 2 keeps graph launch cost negligible


@dataclass(frozen=True)
class Stats:
    """Summary of timing samples, ms per call. ``spread`` is the inter-quartile range over the median."""

    median: float
    min: float
    max: float
    spread: float
    n: int

    @classmethod
    def of(cls, samples: list[float]) -> "Stats":
        s = sorted(samples)
        med = statistics.median(s)
        if len(s) >= 4:
            q = statistics.quantiles(s, n=4, method="inclusive")
            iqr = q[2] - q[0]
        else:
            iqr = s[-1] - s[0]
        return cls(median=med, min=s[0], max=s[-1], spread=iqr / med if med > 0 else 0.0, n=len(s))


@dataclass(frozen=True)
class MeasureConfig:
    repeats: int = 10
    warmup: int = 3
    l2: str = "warm"
    cupti: bool = False  # also read the independent clock (CUPTI kernel records, with kernel names) for every row
    reference: str = "cuda"  # where the float64 reference is computed: "cuda" or "cpu"
    buffer_sets: int = 1  # filled in: operand sets rotated through (> 1 for l2="cold")


@dataclass(frozen=True)
class Measurement:
    """What we measured for one row. Times are ms per call (see the module doc for each clock)."""

    kernel_ms: Stats | None
    kernel_clock: str  # "graph", "cupti" or "none"
    throughput_ms: Stats | None
    host_ms: Stats | None
    cupti_kernel_ms: float | None
    calls_per_sample: int
    kernels: tuple[str, ...] = ()
    rel_err: float | None = None  # ||y - ref|| / ||ref||, ref in float64
    max_abs_err: float | None = None
    tflops: float | None = None  # FLOPs / kernel median
    pct_peak: float | None = None  # of this device's measured matmul peak for the dtype and math
    heuristic_rank: int | None = None  # position in cudnnGet..._v7's list (same algorithm and math type)
    measured_rank: int | None = None  # position by kernel median among the measured rows (0 = fastest)
    error: str = ""  # why something could not be measured


class MeasuredRow:
    """What a result row (legacy algorithm or engine configuration) with `status` and `measured` offers."""

    status: str
    measured: "Measurement | None"

    @property
    def ok(self) -> bool:
        return self.status == "SUCCESS"

    @property
    def kernel_ms(self) -> float | None:
        """Median kernel time we measured, ms per call (None when not measured)."""
        m = self.measured
        return m.kernel_ms.median if m is not None and m.kernel_ms is not None else None


def check_config(repeats: Any, warmup: Any, l2: Any, reference: Any) -> None:
    for name, v, lo in (("repeats", repeats, 1), ("warmup", warmup, 0)):
        if isinstance(v, bool) or not isinstance(v, int):
            raise TypeError(f"{name}={v!r} must be an int")
        if v < lo:
            raise ValueError(f"{name}={v} must be >= {lo}")
    if l2 not in L2_MODES:
        raise ValueError(f"l2={l2!r} is not one of: {', '.join(L2_MODES)}")
    if reference not in ("cuda", "cpu"):
        raise ValueError(f"reference={reference!r} is not one of: cuda, cpu")


# ------------------------------------------------------------------------------------------- work and peak
def conv_flops(problem: "_Problem") -> int:
    """2 * N * K * prod(out spatial) * (C / groups) * prod(kernel): one multiply-add per filter tap per output
    element of the cross-correlation cuDNN runs (dilation spaces the taps but does not add any; padded taps are
    counted). Backward-data and backward-filter are convolutions with the same multiply-adds, so the same count."""
    y = problem.shapes.y_shape
    w = problem.shapes.w_shape
    return 2 * math.prod(y) * math.prod(w[1:])


def _tensor_math(dtype: torch.dtype, math_type: str | None) -> bool:
    return dtype in (torch.float16, torch.bfloat16) or (dtype == torch.float32 and math_type != "fma")


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


def peak_label(dtype: torch.dtype, tf32: bool) -> str:
    name = str(dtype).replace("torch.", "")
    if dtype == torch.float32:
        return f"{name} matmul ({'TF32 allowed' if tf32 else 'no TF32'})"
    return f"{name} matmul"


# ------------------------------------------------------------------------------------------- reference
def reference_output(problem: "_Problem", cdir: str, ops: dict[str, torch.Tensor], where: str) -> torch.Tensor:
    """The float64 result of cuDNN's direction `cdir` on these (lifted, cuDNN-role) operands, computed by torch."""
    s = problem.spec
    lift = (lambda v, fill: [fill, *v]) if s.ndim == 1 else (lambda v, fill: list(v))
    stride, pad, dil = lift(s.stride, 1), lift(problem.shapes.padding, 0), lift(s.dilation, 1)
    dev = ops["x"].device if where == "cuda" else torch.device("cpu")
    x, w, y = (ops[r].to(device=dev, dtype=torch.float64) for r in "xwy")
    conv = torch.nn.functional.conv2d if x.dim() == 4 else torch.nn.functional.conv3d
    with torch.no_grad(), torch.backends.cudnn.flags(enabled=True, deterministic=True, benchmark=False):
        if cdir == "forward":
            return conv(x, w, None, stride, pad, dil, s.groups)
        mask = [cdir == "backward_data", cdir == "backward_filter", False]
        gx, gw, _ = torch.ops.aten.convolution_backward(
            y, x, w, None, stride, pad, dil, False, [0] * len(stride), s.groups, mask)
        return gx if cdir == "backward_data" else gw


def torch_call(problem: "_Problem", cdir: str, sets: list[dict[str, torch.Tensor]]):
    """call(i) -> output: torch's own convolution for cuDNN direction `cdir` on cuDNN-role operand set i, via the ops a
    model's forward and autograd run (aten.convolution / aten.convolution_backward), so torch picks its cuDNN plan
    exactly as it would in a model (cudnn.benchmark, deterministic and allow_tf32 as currently set).

    torch keeps the first plan it picks for a problem for the life of the process, whatever cudnn.benchmark says
    later (its plan cache key has no benchmark flag): to see benchmark mode's choice, the first call of a shape in
    a process must run with benchmark on."""
    s = problem.spec
    lift = (lambda v, fill: [fill, *v]) if s.ndim == 1 else (lambda v, fill: list(v))
    stride, pad, dil = lift(s.stride, 1), lift(problem.shapes.padding, 0), lift(s.dilation, 1)
    zeros = [0] * len(stride)
    n = len(sets)
    if cdir == "forward":
        def call(i: int) -> torch.Tensor:
            o = sets[i % n]
            return torch.ops.aten.convolution(o["x"], o["w"], None, stride, pad, dil, False, zeros, s.groups)
    else:
        mask = [cdir == "backward_data", cdir == "backward_filter", False]

        def call(i: int) -> torch.Tensor:
            o = sets[i % n]
            gx, gw, _ = torch.ops.aten.convolution_backward(o["y"], o["x"], o["w"], None, stride, pad, dil, False,
                                                            zeros, s.groups, mask)
            return gx if mask[0] else gw
    return call


def errors(out: torch.Tensor, ref: torch.Tensor) -> tuple[float | None, float | None]:
    o = out.to(device=ref.device, dtype=torch.float64)
    if not torch.isfinite(o).all():
        return None, None
    d = o - ref
    return float(d.norm() / ref.norm().clamp_min(1e-300)), float(d.abs().max())


# ------------------------------------------------------------------------------------------- timing
def _graph_kernel_ms(run_call, n_calls: int, repeats: int, device: int) -> list[float]:
    """CUDA-graph capture of n_calls calls, replayed `repeats` times between events: ms per call."""
    cur = torch.cuda.current_stream(device)
    side = torch.cuda.Stream(device)
    side.wait_stream(cur)
    with torch.cuda.stream(side):
        run_call(0)  # warm-up outside capture, on the side stream (torch's recipe)
    cur.wait_stream(side)
    g = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(g):
            for i in range(n_calls):
                run_call(i)
        g.replay()
        torch.cuda.synchronize(device)
        out = []
        for _ in range(repeats):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            g.replay()
            e.record()
            e.synchronize()
            out.append(s.elapsed_time(e) / n_calls)
        return out
    finally:
        del g


def _cupti_teardown() -> None:
    """Unless the user decided (TEARDOWN_CUPTI set), have torch's profiler finalize CUPTI at the end of each session.
    Left attached (kineto's default), CUPTI's kernel instrumentation stays on every later kernel of the process:
    on the H200, small convolutions timed after one profiler session ran up to 18% slower (median +5.7%), and no
    slower with teardown (benchmarks/profiler_effect.py). torch itself disables teardown before CUDA 12.6 (it
    crashed with CUDA graphs there); so do we."""
    cuda = torch.version.cuda or "0"
    try:
        new_enough = tuple(int(v) for v in cuda.split(".")[:2]) >= (12, 6)
    except ValueError:
        new_enough = False
    if new_enough:
        os.environ.setdefault("TEARDOWN_CUPTI", "1")


def _cupti_per_row(jobs: list[tuple[int, Any]], n_calls: dict[int, int], device: int
                   ) -> dict[int, tuple[float, tuple[str, ...]]]:
    """One profiler session: each job runs its calls inside a named range followed by a synchronize, so every
    kernel it launched starts inside that range. Returns per job: (mean kernel ms per call, kernel names)."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile, record_function

    _cupti_teardown()
    names = {}
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Profiler clears events")
        prof = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])
    with prof:
        for idx, fn in jobs:
            name = f"cudnn_algos_row_{idx}"
            names[name] = idx
            with record_function(name):
                fn()
                torch.cuda.synchronize(device)
    events = prof.events()
    ranges = [(e.time_range.start, e.time_range.end, names[e.name]) for e in events if e.name in names]
    spans: dict[int, list[tuple[float, float]]] = {i: [] for _, _, i in ranges}
    kernels: dict[int, dict[str, None]] = {i: {} for _, _, i in ranges}
    for e in events:
        # device-side activity only; kineto also mirrors each named range onto the GPU timeline as an annotation
        # spanning its kernels (and the gaps between them): that is not a kernel, so skip it
        if e.device_type != DeviceType.CUDA or e.name in names:
            continue
        start = e.time_range.start
        for lo, hi, idx in ranges:
            if lo <= start <= hi:
                spans[idx].append((e.time_range.start, e.time_range.end))
                kernels[idx][e.name] = None
                break
    return {i: (_busy_us(spans[i]) / 1000.0 / n_calls[i], tuple(kernels[i])) for i in spans}


def _busy_us(intervals: list[tuple[float, float]]) -> float:
    """Length of the union of [start, end) intervals: the time the GPU was running at least one of these kernels.
    (A plain sum over-counts kernels that run concurrently, as cuDNN's FFT paths' kernels do: seen on the H200.)"""
    total, cur_lo, cur_hi = 0.0, None, None
    for lo, hi in sorted(intervals):
        if cur_hi is None or lo > cur_hi:
            if cur_hi is not None:
                total += cur_hi - cur_lo
            cur_lo, cur_hi = lo, hi
        else:
            cur_hi = max(cur_hi, hi)
    if cur_hi is not None:
        total += cur_hi - cur_lo
    return total


@dataclass(frozen=True)
class Timing:
    kernel_ms: Stats | None
    kernel_clock: str
    throughput_ms: Stats
    host_ms: Stats
    calls_per_sample: int
    error: str = ""


def time_three_ways(call, loop, repeats: int, warmup: int, device: int) -> Timing:
    """Times one operation the three ways, the same for our rows and for torch's own ops.

    call(i): one call on operand set i (captured into a CUDA graph for the kernel clock).
    loop(k): k back-to-back calls; returns (host ms, device-event ms) for the whole loop.
    K, the calls per sample, is chosen so a sample holds about TARGET_SAMPLE_MS of GPU work.
    """
    host0, gpu0 = loop(max(warmup, 1))  # warm-up, and a first estimate of the per-call GPU time
    est = max(gpu0 / max(warmup, 1), 1e-3)
    k = int(min(MAX_CALLS, max(MIN_CALLS, round(TARGET_SAMPLE_MS / est))))
    thr, host = [], []
    for _ in range(repeats):
        h, g = loop(k)
        thr.append(g / k)
        host.append(h / k)
    kernel, clock, err = None, "none", ""
    try:
        kernel = Stats.of(_graph_kernel_ms(call, k, repeats, device))
        clock = "graph"
    except Exception as e:  # capture refused: the caller may fall back to CUPTI
        err = f"graph capture failed ({type(e).__name__}: {str(e)[:120]})"
        torch.cuda.synchronize(device)
    return Timing(kernel, clock, Stats.of(thr), Stats.of(host), k, err)


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


def first_call_ms(call, device: int) -> float:
    """Host ms of one call(0), synchronised on both sides: for torch's op, the call where it plans a new problem
    (with cudnn.benchmark: its search)."""
    import time

    torch.cuda.synchronize(device)
    t0 = time.perf_counter()
    call(0)
    torch.cuda.synchronize(device)
    return (time.perf_counter() - t0) * 1e3


def python_loop(call, device: int):
    """loop(k) for an operation called from Python (torch's own ops): host wall and device events around k calls."""
    import time

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


def row_timer(problem: "_Problem", cdir: str, algo_id: int, math_type: str, sets: list[dict[str, torch.Tensor]],
              limit: int, device: int):
    """(call, loop) for one legacy algorithm on these operand sets; the loop runs in C++ (no Python per call)."""
    from . import _ext

    ext = _ext.load()
    cp = problem.cudnn(ext)
    xs, ws, ys = ([s[r] for s in sets] for r in "xwy")
    n = len(sets)

    def call(i: int) -> None:
        s = sets[i % n]
        ext.execute(cdir, cp, algo_id, math_type, s["x"], s["w"], s["y"], limit)

    def loop(k: int) -> tuple[float, float]:
        t = ext.time_calls(cdir, cp, algo_id, math_type, xs, ws, ys, k, limit)
        return t["host_ms"], t["gpu_ms"]

    return call, loop


def plan_timer(plan, sets: list[dict[str, torch.Tensor]]):
    """(call, loop) for one graph-API execution plan on these operand sets; the loop runs in C++."""
    xs, ws, ys = ([s[r] for s in sets] for r in "xwy")
    n = len(sets)

    def call(i: int) -> None:
        s = sets[i % n]
        plan.execute(s["x"], s["w"], s["y"])

    def loop(k: int) -> tuple[float, float]:
        t = plan.time_calls(xs, ws, ys, k)
        return t["host_ms"], t["gpu_ms"]

    return call, loop


def operand_sets(problem: "_Problem", l2: str, device: int) -> list[dict[str, torch.Tensor]]:
    """Fresh random cuDNN-role operands: one set (warm L2), or enough to exceed 3x the L2 cache (cold)."""
    from .api import _nbytes

    per_set = _nbytes(problem)
    n_sets = 1
    if l2 == "cold":
        l2_bytes = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0) or 60 * 2**20
        free, _ = torch.cuda.mem_get_info(device)
        n_sets = max(2, min(64, math.ceil(3 * l2_bytes / per_set) + 1, int(0.25 * free // max(per_set, 1))))
    return [{r: problem.random_operand(r, device) for r in "xwy"} for _ in range(n_sets)]


def measure_search(result: "SearchResult", problem: "_Problem", cfg: MeasureConfig, device: int) -> "SearchResult":
    """Returns `result` with every successful row measured (and failed rows untouched)."""
    from . import _ext
    from .api import _OUTPUT_OPERAND
    from .errors import CudnnError

    ext = _ext.load()
    cdir = result.cudnn_direction
    cp = problem.cudnn(ext)
    out_role = _OUTPUT_OPERAND[cdir]
    limit = -1 if result.workspace_limit is None else result.workspace_limit

    sets = operand_sets(problem, cfg.l2, device)
    n_sets = len(sets)
    cfg = replace(cfg, buffer_sets=n_sets)
    ref = reference_output(problem, cdir, sets[0], cfg.reference)

    heur: dict[tuple[int, str | None], int] = {}  # (algo, math) -> rank in cudnnGet..._v7's list
    heur_first = None  # its first successful entry: what a heuristic-only choice would run
    try:
        h = ext.search(cdir, cp, "heuristic", workspace_limit=limit, device=device)
        for r in sorted((r for r in h["rows"] if r["rank"] is not None), key=lambda r: r["rank"]):
            heur.setdefault((r["algo_id"], r["math_type"]), r["rank"])
            if heur_first is None and r["status"] == "SUCCESS":
                heur_first = (r["algo_id"], r["math_type"])
    except CudnnError:
        pass

    flops = conv_flops(problem)
    measured: dict[int, Measurement] = {}
    cupti_jobs = []
    n_calls_of: dict[int, int] = {}
    for i, row in enumerate(result.rows):
        if not row.ok:
            continue
        math_t = row.math_type or problem.math
        err = ""
        try:
            # accuracy on set 0, into a poisoned output
            sets[0][out_role].fill_(float("nan"))
            ext.execute(cdir, cp, row.algo_id, math_t, sets[0]["x"], sets[0]["w"], sets[0]["y"], limit)
            rel, mx = errors(sets[0][out_role], ref)
            if rel is None:
                err = "output has non-finite values (unwritten or overflow)"
            call, loop = row_timer(problem, cdir, row.algo_id, math_t, sets, limit, device)
            t = time_three_ways(call, loop, cfg.repeats, cfg.warmup, device)
            k = t.calls_per_sample
            if t.error:
                err = (err + "; " if err else "") + t.error
            measured[i] = Measurement(
                kernel_ms=t.kernel_ms, kernel_clock=t.kernel_clock, throughput_ms=t.throughput_ms,
                host_ms=t.host_ms, cupti_kernel_ms=None, calls_per_sample=k, rel_err=rel, max_abs_err=mx,
                error=err, heuristic_rank=heur.get((row.algo_id, row.math_type)),
            )
            n_calls_of[i] = k
            cupti_jobs.append((i, functools.partial(loop, k)))
        except (CudnnError, RuntimeError, ValueError) as e:
            measured[i] = Measurement(kernel_ms=None, kernel_clock="none", throughput_ms=None, host_ms=None,
                                      cupti_kernel_ms=None, calls_per_sample=0,
                                      error=f"{type(e).__name__}: {str(e)[:200]}")

    need_cupti = cfg.cupti or any(m.kernel_clock == "none" and m.calls_per_sample for m in measured.values())
    if cupti_jobs and need_cupti:
        try:
            cupti = _cupti_per_row(cupti_jobs, n_calls_of, device)
        except Exception as e:  # profiler unavailable: leave the independent clock empty, say why
            cupti = {}
            for i in n_calls_of:
                measured[i] = replace(measured[i], error=(measured[i].error + "; " if measured[i].error else "")
                                      + f"CUPTI failed: {type(e).__name__}")
        for i, (ms, names) in cupti.items():
            m = replace(measured[i], cupti_kernel_ms=ms, kernels=names)
            if m.kernel_ms is None and ms > 0:
                m = replace(m, kernel_ms=Stats(ms, ms, ms, 0.0, 1), kernel_clock="cupti")
            measured[i] = m

    # work, peak, ranks
    peaks = {}
    for i, m in measured.items():
        if m.kernel_ms is None:
            continue
        tf32 = _tensor_math(problem.dtype, result.rows[i].math_type)
        if tf32 not in peaks:
            peaks[tf32] = peak_tflops(device, problem.dtype, tf32 if problem.dtype == torch.float32 else False)
        tflops = flops / (m.kernel_ms.median * 1e-3) / 1e12
        measured[i] = replace(m, tflops=tflops, pct_peak=100.0 * tflops / peaks[tf32])
    order = sorted((i for i, m in measured.items() if m.kernel_ms is not None),
                   key=lambda i: measured[i].kernel_ms.median)
    for rank, i in enumerate(order):
        measured[i] = replace(measured[i], measured_rank=rank)

    rows = tuple(replace(r, measured=measured.get(i)) for i, r in enumerate(result.rows))
    del sets, ref
    # the heuristic's first choice among the measured rows, and what it costs against the measured best
    regret, choice = None, None
    if heur_first is not None and order:
        first = heur_first
        cands = [i for i in measured if (rows[i].algo_id, rows[i].math_type) == first and rows[i].measured
                 and rows[i].measured.kernel_ms is not None]
        name = ext.algo_names(cdir)[first[0]]
        choice = f"{name}/{first[1]}"
        if cands:
            regret = rows[cands[0]].measured.kernel_ms.median / rows[order[0]].measured.kernel_ms.median
    return replace(result, rows=rows, measure=cfg, flops=flops, heuristic_choice=choice, heuristic_regret=regret,
                   peak_tflops={peak_label(problem.dtype, k): v for k, v in peaks.items()})
