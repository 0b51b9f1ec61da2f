"""How well the kernel clock agrees with the independent clock (torch.profiler's CUPTI records): every
measurement with both, by kernel size class and row kind (``cudnn-algos show --fidelity``)."""
from __future__ import annotations

import statistics
from typing import Any, Iterable

from .model_report import ModelReport
from .rows import Measurement
from .searches import EngineSearches, EngineSearchResult, SearchResult, SearchResults
from .tables import format_ms, wrap_lines


SIZE_CLASSES = (("< 10 us", 0.0, 0.010), ("10-20 us", 0.010, 0.020), ("20-50 us", 0.020, 0.050),
                (">= 50 us", 0.050, float("inf")))


def fidelity_pairs(results: Iterable[Any]) -> list[dict[str, Any]]:
    """(row kind, kernel ms, reference ms) for every measurement that has both clocks: legacy rows, engine rows and
    torch's op, in searches and model reports."""
    out = []

    def add(kind: str, name: str, m: Measurement | None) -> None:
        if m is not None and m.kernel_ms is not None and m.reference_kernel_ms:
            out.append({"kind": kind, "name": name, "kernel_ms": m.kernel_ms.median, "reference_ms": m.reference_kernel_ms,
                        "events_ms": m.throughput_ms.median if m.throughput_ms else None,
                        "activities_per_call": m.activities_per_call})

    def visit(r: Any) -> None:
        if isinstance(r, (ModelReport, SearchResults, EngineSearches)):
            for s in (r.searches() if isinstance(r, ModelReport) else r.results):
                visit(s)
        elif isinstance(r, SearchResult):
            for row in r.rows:
                add("legacy", row.name, row.measured)
        elif isinstance(r, EngineSearchResult):
            for row in r.rows:
                add("engine", row.name, row.measured)
            for t in r.torch_runs:
                add("torch op", f"torch {t.mode}", t.measured)

    for r in results:
        visit(r)
    return out


def traced_high(p: dict[str, Any], tolerance: float = 0.05) -> bool:
    """The reference reads more than the same calls took with no CUPTI client attached (the events clock, back to back):
    no union of kernel intervals fits in more time than the calls' events window, so the tracing itself stretched the
    work (seen on candidates that launch hundreds of kernels per call; benchmarks/cupti_overhead.py measures it)."""
    return p.get("events_ms") is not None and p["reference_ms"] > p["events_ms"] * (1 + tolerance)


def fidelity_table(results: Iterable[Any], tolerance: float = 0.05) -> list[str]:
    """Agreement of the kernel clock with the independent clock (torch.profiler's CUPTI records), by kernel size
    class and by row kind: the share of rows within `tolerance`, the median |ratio - 1|, the worst. Rows whose
    reference reads above the uninstrumented events clock of the same calls (:func:`traced_high`) are counted apart,
    and the share over every row is printed too."""
    pairs = fidelity_pairs(results)
    if not pairs:
        return ["fidelity: no row has both clocks (measure with check_clock=True)"]
    traced = [p for p in pairs if traced_high(p, tolerance)]
    kept = [p for p in pairs if not traced_high(p, tolerance)]
    lines = [f"fidelity of the kernel clock against torch.profiler's CUPTI records (eager calls), {len(kept)} rows"
             + (f" ({len(traced)} more apart, below)" if traced else "")
             + f"; share within {100 * tolerance:.0f}% (target >= 95% in every class):",
             f"{'class':<10} " + " ".join(f"{k:>22}" for k in ("legacy", "engine", "torch op", "all"))]
    for label, lo, hi in SIZE_CLASSES:
        cells = []
        for kind in ("legacy", "engine", "torch op", None):
            dev = [abs(p["kernel_ms"] / p["reference_ms"] - 1) for p in kept
                   if lo <= p["reference_ms"] < hi and (kind is None or p["kind"] == kind)]
            cells.append(f"{100 * sum(d <= tolerance for d in dev) / len(dev):5.1f}% of {len(dev):4d}, "
                         f"med {100 * statistics.median(dev):4.1f}%" if dev else f"{'-':>22}")
        lines.append(f"{label:<10} " + " ".join(f"{c:>22}" for c in cells))

    def share(ps):
        return 100 * sum(abs(p["kernel_ms"] / p["reference_ms"] - 1) <= tolerance for p in ps) / len(ps)

    dev = sorted(kept, key=lambda p: -abs(p["kernel_ms"] / p["reference_ms"] - 1))
    if kept:
        lines.append(f"all: {share(kept):.1f}% within {100 * tolerance:.0f}%; worst: " + "; ".join(
            f"{p['kind']} {p['name']} {format_ms(p['kernel_ms'])} vs {format_ms(p['reference_ms'])}"
            for p in dev[:3]))
    if traced:
        acts = [p["activities_per_call"] for p in traced if p.get("activities_per_call")]
        lines.append(
            f"apart: {len(traced)} rows whose reference read above the events clock of the same calls with no CUPTI "
            f"client (median reference/events {statistics.median(p['reference_ms'] / p['events_ms'] for p in traced):.2f}"
            f", kernel clock/events {statistics.median(p['kernel_ms'] / p['events_ms'] for p in traced):.2f}"
            + (f", median {statistics.median(acts):.0f} GPU activities per call" if acts else "")
            + f"): tracing stretched them; counting them too, {share(pairs):.1f}% of {len(pairs)} rows agree")
    return wrap_lines(lines)  # names whole (a wrapped line breaks between words only)


