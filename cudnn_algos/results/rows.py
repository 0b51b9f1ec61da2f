"""The rows of every search: timing statistics, what was measured for one runnable row, a legacy algorithm
(``AlgoResult``), an engine configuration (``EngineRow``) and torch's own op (``TorchRun``). Frozen, no GPU needed."""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Any, Sequence

from ..configs import heuristic_list

# Note [a wrong output]: cuDNN builds some configurations (status SUCCESS) whose output is not the convolution. On the
# H100 and H200 with cuDNN 9.19, engines 70, 71 and 78 with SPLIT_K_SLC=1 and a KERNEL_CFG that suits other problems
# gave a relative error of ~1.4 (or overflowed) against float64 on grouped and dilated fp32 layers: 389 rows of the
# dataset, 13 of them the fastest of their problem-direction, while every other row was within 0.026 (bf16). A row
# whose output is farther than WRONG_REL_ERR from the float64 reference, or not finite, is wrong: it is shown with its
# error, and it is never a search's best, a tuned winner, a selector's training label or known configuration, or a
# choice of apply() (the unseen handler checks what it runs: Note [a candidate's output checked] in choose/).
WRONG_REL_ERR = 0.1
NON_FINITE = "output has non-finite values (overflow)"  # a measurement's error when its output is not finite


def wrong_output(rel_err: float | None, error: str = "") -> bool:
    """Note [a wrong output]: an output `rel_err` from float64 (None or NaN: not checked, or not finite, which
    `error` then says) is wrong."""
    if rel_err is None or (isinstance(rel_err, float) and math.isnan(rel_err)):
        return error == NON_FINITE
    return not rel_err <= WRONG_REL_ERR


@dataclass(frozen=True)
class Stats:
    """Summary of timing samples, ms per call. ``spread`` is the inter-quartile range over the median."""

    median: float
    min: float
    max: float
    spread: float
    n: int
    samples: tuple[float, ...] = ()  # the raw samples, in the order they were taken

    @classmethod
    def of(cls, samples: Sequence[float]) -> "Stats":
        s = sorted(samples)
        med = statistics.median(s)
        iqr = (lambda q: q[2] - q[0])(statistics.quantiles(s, n=4, method="inclusive")) if len(s) >= 4 else s[-1] - s[0]
        return cls(median=med, min=s[0], max=s[-1], spread=iqr / med if med > 0 else 0.0, n=len(s),
                   samples=tuple(float(v) for v in samples))


@dataclass(frozen=True)
class MeasureConfig:
    repeats: int = 10  # samples per clock
    warmup: int = 3  # calls before the first sample
    l2: str = "warm"  # "warm": one operand set; "cold": rotate sets totalling > 3x the L2 cache
    check_clock: bool = False  # also time every row with the independent clock (torch.profiler's CUPTI records)
    reference: str = "cuda"  # where the float64 reference is computed: "cuda" or "cpu"
    buffer_sets: int = 1  # filled in: operand sets rotated through
    prune: float = 0.0  # > 0: rows whose first call is over `prune` x the fastest first call get one sample
    throughput: bool = True  # False (a screen): kernel-clock samples only; host time is the first timed call's
    close: float = 0.0  # > 0 (a screen): one kernel-clock sample each first, the rest only for rows within close x
    # the fastest of those samples (measure_rows)
    lean: bool = False  # a screen's accuracy calls enqueued together, each its row's first-call estimate, one wait
    # for all, no separate first timed call (measure_rows; Note [a lean screen] in measure/pipeline.py)


@dataclass(frozen=True)
class Measurement:
    """What we measured for one runnable row (legacy algorithm, engine configuration, or torch's own op).

    kernel_ms: the kernel clock, CUPTI activity records of K eager back-to-back calls (kernels, memsets, copies;
        the union of their intervals) / K: what Nsight Systems shows for the same calls.
    throughput_ms: CUDA events around K back-to-back calls / K (what a training loop sees; the host's pace when the
        host is slower). host_ms: host wall time of that loop / K (the CPU cost of one call).
    reference_kernel_ms: the independent check (``check_clock``): torch.profiler's CUPTI records of K eager calls in
        a session of its own, union / K.
    """

    kernel_ms: Stats | None
    throughput_ms: Stats | None
    host_ms: Stats | None
    calls_per_sample: int
    kernel_clock: str = "cupti"  # "cupti", or "none" when the kernel clock could not run (error says why)
    kernel_calls: int = 0  # calls per kernel-clock sample
    kernels: tuple[str, ...] = ()  # kernels one call launched, as CUPTI names them (demangled)
    activities_per_call: float | None = None  # GPU activities (kernels, memsets, copies) per call
    reference_kernel_ms: float | None = None
    rel_err: float | None = None  # ||y - ref|| / ||ref||, ref in float64
    max_abs_err: float | None = None
    tflops: float | None = None  # FLOPs / kernel median
    pct_peak: float | None = None  # of this device's measured matmul peak for the dtype and math
    heuristic_rank: int | None = None
    measured_rank: int | None = None  # position by kernel median among the measured rows (0 = fastest)
    confirmed: bool = False  # re-measured on fresh operands after a screen (find_engines(screen=...))
    pruned: bool = False  # one sample per clock: its first call was over MeasureConfig.prune x the fastest
    error: str = ""  # why something could not be measured
    # where the search's time went for this row: (phase, start as Unix time s, duration s) for "first call",
    # "throughput" and "kernel clock" (host side; cudnn_algos.chrome_trace lays them out)
    phases: tuple[tuple[str, float, float], ...] = ()

    @property
    def wrong(self) -> bool:
        """Note [a wrong output]: its output was checked and is not the convolution."""
        return wrong_output(self.rel_err, self.error)

    @property
    def host_bound(self) -> bool:
        """A call costs more host time than GPU time: back-to-back calls leave the GPU idle."""
        return bool(self.host_ms and self.kernel_ms and self.host_ms.median > self.kernel_ms.median)



class Timed:
    """What anything with a `measured` Measurement offers: its medians."""

    measured: Measurement | None

    @property
    def kernel_ms(self) -> float | None:
        """Median kernel time (the kernel clock), ms per call; None when not measured."""
        m = self.measured
        return m.kernel_ms.median if m is not None and m.kernel_ms is not None else None

    @property
    def host_ms(self) -> float | None:
        m = self.measured
        return m.host_ms.median if m is not None and m.host_ms is not None else None


class MeasuredRow(Timed):
    """A result row (legacy algorithm or engine configuration): a status and, when measured, a Measurement."""

    status: str

    @property
    def ok(self) -> bool:
        return self.status == "SUCCESS"

    @property
    def wrong(self) -> bool:
        """Ran, and its output is not the convolution (Note [a wrong output])."""
        return self.measured is not None and self.measured.wrong

    @property
    def right_ms(self) -> float | None:
        """Its kernel median where it ran and its output is right (what a best is chosen by), else None."""
        return None if not self.ok or self.wrong else self.kernel_ms


# ============================================================================================ legacy searches
@dataclass(frozen=True)
class AlgoResult(MeasuredRow):
    """One legacy algorithm under one math type, in one search.

    ``time_ms``: what cuDNN's search reported (ms; on cuDNN 9 it includes host-side set-up per call); None in
    heuristic mode and for failures. ``rank``: position in cuDNN's returned list (0 = its first choice).
    ``status``: cuDNN's status without ``CUDNN_STATUS_``, or ``NOT_RETURNED`` / ``WORKSPACE_LIMIT_EXCEEDED``.
    """

    direction: str  # cuDNN's direction
    algo: str
    algo_id: int
    status: str
    time_ms: float | None
    workspace_bytes: int | None
    deterministic: bool | None
    math_type: str | None
    rank: int | None
    note: str = ""
    status_code: int = -1  # cuDNN's numeric status; -1 for our own statuses
    measured: Measurement | None = None
    memory_format: str = ""  # the layout it was searched in (run() uses it)

    @property
    def name(self) -> str:
        return f"{self.algo}/{self.math_type}"


@dataclass(frozen=True)
class EngineRow(MeasuredRow):
    """One engine configuration. ``name`` is stable across runs: ``eng<id>`` plus its knob values."""

    direction: str  # cuDNN's direction
    engine_id: int
    knobs: tuple[tuple[str, int], ...]
    name: str
    numerical_notes: tuple[str, ...]
    behavior_notes: tuple[str, ...]
    family: str
    deterministic: bool
    status: str
    stage: str  # where a failed configuration stopped: engine, config or plan
    workspace_bytes: int | None
    sources: tuple[str, ...]  # heuristic_instant / heuristic_a / heuristic_b / fallback / exhaustive / refine
    heuristic_ranks: tuple[tuple[str, int], ...]
    measured: Measurement | None = None
    torch_rank: int | None = None  # position among the configurations torch's benchmark mode times (None: not)
    torch_filter: str = ""  # why torch's convolution would never consider this configuration ("" if it would)
    torch_ran: tuple[str, ...] = ()  # "benchmark_on" / "benchmark_off": torch's own call ran these kernels
    memory_format: str = ""  # the layout its plan was built for (run() uses it)
    plan: Any = field(default=None, compare=False, repr=False, metadata={"saved": False})  # live plan, this process

    def rank(self, source: str) -> int | None:
        """Position in a heuristic list, by the source its rows carry (configs.LISTS: "heuristic_a", ...)."""
        return next((r for s, r in self.heuristic_ranks if s == source), None)

    @property
    def rank_a(self) -> int | None:
        return self.rank(heuristic_list("a").source)

    @property
    def kernels(self) -> tuple[str, ...]:
        return self.measured.kernels if self.measured is not None else ()


@dataclass(frozen=True)
class TorchRun(Timed):
    """What torch's own cuDNN convolution ran for this problem, identified by its kernels, and what it cost."""

    mode: str  # "benchmark_on" or "benchmark_off": cudnn.benchmark for torch's calls
    kernels: tuple[str, ...]  # kernels one call of torch's op launched (the kernel clock's records)
    matches: tuple[str, ...]  # names of the configurations that launched exactly these kernels (or, see match)
    match: str  # "exact", "partial" (a configuration's kernels are a subset of torch's), or "none"
    first_call_ms: float | None  # host ms of torch's first call of the shape (benchmark on: its search)
    benchmark_limit: int  # torch.backends.cudnn.benchmark_limit
    measured: Measurement | None = None  # torch's op timed like the rows, with its error against float64
    where: str = "this process"  # or "fresh process" (benchmark off, for a profile)
    error: str = ""

    def describe(self) -> str:
        what = {"exact": "ran", "partial": "ran (its kernels include those of)",
                "none": "ran none of these configurations' kernels"}[self.match]
        names = ", ".join(self.matches[:3]) + (f" (+{len(self.matches) - 3} with the same kernels)"
                                               if len(self.matches) > 3 else "")
        return f"torch ({self.mode.replace('_', ' ')}) {what}{' ' + names if self.matches else ''}"

