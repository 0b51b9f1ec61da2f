"""A search as a Chrome trace (chrome://tracing, https://ui.perfetto.dev): where the search's time went.

One process per search (problem and direction, named by the layer(s) in a model report), one thread per candidate
(legacy algorithm, engine configuration, torch's op), one slice per measuring phase the row went through — "first
call" (the first call, its accuracy check and for torch's op with benchmark on, its own search), "throughput" (warm-up
and the throughput/host samples) and "kernel clock" (its windows in the CUPTI session) — with the row's numbers in the
slice's args. Times are the host's (when each phase ran and how long the host spent in it), from the measurement's
``phases``; results saved before phases were recorded have no slices (only the metadata)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable

from .files import atomic_write
from .results import (EngineSearches, EngineSearchResult, Measurement, ModelReport, SearchResult, SearchResults,
                      format_ms)


def _searches(result: Any) -> Iterable[tuple[str, Any]]:
    """(process label, search) for every search a result holds."""
    if isinstance(result, ModelReport):
        for p in result.problems:
            layers = ", ".join(p.layers[:3]) + (f" +{len(p.layers) - 3}" if len(p.layers) > 3 else "")
            for d in result.directions:
                for kind, got in (("engines", p.engines.get(d)), ("legacy", p.legacy.get(d))):
                    if got is not None:
                        yield f"{layers} {d} ({kind})", got
    elif isinstance(result, (SearchResults, EngineSearches)):
        for r in result.results:
            yield f"{r.spec} {r.direction}", r
    elif isinstance(result, (SearchResult, EngineSearchResult)):
        yield f"{result.spec} {result.direction}", result
    else:
        raise TypeError(f"chrome_trace takes a search result or a model report, not {type(result).__name__}")


def _rows(search: Any) -> Iterable[tuple[str, Measurement | None]]:
    for row in search.rows:
        yield row.name, row.measured
    for t in getattr(search, "torch_runs", ()):
        yield f"torch's op ({t.mode.replace('_', ' ')})", t.measured


def _args(m: Measurement) -> dict[str, Any]:
    out = {}
    for name in ("kernel_ms", "throughput_ms", "host_ms"):
        st = getattr(m, name)
        if st is not None:
            out[name] = format_ms(st.median)
    for name in ("rel_err", "activities_per_call", "reference_kernel_ms"):
        v = getattr(m, name)
        if v is not None:
            out[name] = v
    if m.pruned:
        out["pruned"] = True
    if m.error:
        out["error"] = m.error
    return out


def chrome_trace(result: Any) -> dict[str, Any]:
    """The Chrome trace-event JSON (a dict with ``traceEvents``) of a search result or model report."""
    events: list[dict[str, Any]] = []
    for pid, (label, search) in enumerate(_searches(result), start=1):
        events.append({"name": "process_name", "ph": "M", "pid": pid, "args": {"name": label}})
        for tid, (name, m) in enumerate(_rows(search), start=1):
            events.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": name}})
            if m is None:
                continue
            args = _args(m)
            for phase, start, dur in m.phases:
                events.append({"name": phase, "cat": "cudnn_algos", "ph": "X", "pid": pid, "tid": tid,
                                "ts": start * 1e6, "dur": max(dur * 1e6, 0.001), "args": args})
    return {"traceEvents": events, "displayTimeUnit": "ms",
            "otherData": {"cudnn_algos": "search timeline (host side): one process per search, one thread per "
                                         "candidate, one slice per measuring phase"}}


def write_chrome_trace(result: Any, path: str | Path) -> int:
    """Writes :func:`chrome_trace` to `path`; returns how many phase slices it holds. ValueError (nothing written)
    when the result has none (saved before phases were recorded)."""
    t = chrome_trace(result)
    n = sum(1 for e in t["traceEvents"] if e["ph"] == "X")
    if not n:
        raise ValueError("this result has no recorded measuring phases (saved before they were recorded, or not "
                         "measured): no trace written")
    atomic_write(path, json.dumps(t))
    return n


__all__ = ["chrome_trace", "write_chrome_trace"]
