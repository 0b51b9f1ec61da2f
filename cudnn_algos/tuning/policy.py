"""Which measured configuration a problem stores as its winner: Note [torch's op as the winner], applied by
tune() (``winner_entry``) and again from stored data by TuningDB.reselect (``reselected``)."""
from __future__ import annotations

import json
from dataclasses import asdict, replace
from typing import Any

from ..configs import parse_config
from ..problem import Environment
from ..results import EngineSearchResult
from .winner import TORCH_WINNER, Winner, now

# Note [torch's op as the winner]: torch's own op is stored as a problem's winner only when it beat the fastest
# configuration torch would accept by more than TORCH_MARGIN on the same clock. Within that margin the
# configuration is stored: torch's op winning by a hair is inside what the same job moves between processes
# (docs/results/2026-11-30-h200.md has the ResNet-50 figures), and a call whose winner is torch's op runs torch's
# convolution under the process's own benchmark flag (so not necessarily the kernel that won) after the operator's
# own lookup, paying both host paths.
TORCH_MARGIN = 0.03


def torch_wins(torch_ms: float, best_ms: float, margin: float) -> bool:
    """Note [torch's op as the winner]: torch's op is stored only when faster than the best configuration by more
    than `margin` (tune() and TuningDB.reselect decide by this one rule)."""
    return torch_ms * (1 + margin) < best_ms


def check_margin(torch_margin: Any) -> None:
    if isinstance(torch_margin, bool) or not isinstance(torch_margin, (int, float)) or not 0 <= torch_margin < 1:
        raise ValueError(f"torch_margin={torch_margin!r} must be a number in [0, 1)")


def _torch_label(on: Any) -> str | None:
    if on is None:
        return None
    return ",".join(on.matches) if on.matches else f"({on.match})"


def winner_entry(result: EngineSearchResult, env: Environment, key: str, settings: str,
                 torch_margin: float = TORCH_MARGIN) -> tuple[Winner, list[dict[str, Any]]]:
    """The database rows of one measured engine search: the winner (the fastest configuration torch would accept,
    or torch's own op when it was faster on the same clock by more than `torch_margin`) and every candidate."""
    best = result.best_eligible
    on = result.torch_run("benchmark_on")
    ok = sorted((r for r in result.succeeded if r.right_ms is not None and not r.torch_filter),
                key=lambda r: r.kernel_ms)
    to_torch = best is None or (on is not None and on.kernel_ms is not None
                                and torch_wins(on.kernel_ms, best.kernel_ms, torch_margin))
    won = on if to_torch else best  # whose times are stored (None: nothing was timed)
    second = best if to_torch else (ok[1] if len(ok) > 1 else None)
    at = now()
    w = Winner(
        env=env.key(), key=key, settings=settings, direction=result.direction,
        config=TORCH_WINNER if to_torch else best.name, engine_id=-1 if to_torch else best.engine_id,
        knobs=json.dumps([] if to_torch else [list(k) for k in parse_config(best.name)[1]]),
        kernel_ms=won.kernel_ms if won else None, host_ms=won.host_ms if won else None,
        rel_err=won.measured.rel_err if won and won.measured else None,
        runner_up=second.name if second else None, runner_up_ms=second.kernel_ms if second else None,
        torch_on=_torch_label(on), torch_on_ms=on.kernel_ms if on else None,
        source=",".join(best.sources) if best else "", measured_at=at, environment=json.dumps(asdict(env)))
    cands = [{"env": w.env, "key": key, "settings": settings, "direction": result.direction, "name": r.name,
              "engine_id": r.engine_id, "status": r.status, "kernel_ms": r.kernel_ms,
              "throughput_ms": r.measured.throughput_ms.median if r.measured and r.measured.throughput_ms else None,
              "host_ms": r.host_ms, "rel_err": r.measured.rel_err if r.measured else None,
              "workspace_bytes": r.workspace_bytes, "torch_filter": r.torch_filter, "sources": ",".join(r.sources),
              "measured_at": at} for r in result.rows]
    return w, cands


def predicted_entry(result: EngineSearchResult, env: Environment, key: str, settings: str,
                    order: list[int]) -> tuple[Winner, list[dict[str, Any]]]:
    """The database rows of an unmeasured search whose candidates a selector ranked: `order` indexes
    ``result.rows``' buildable configurations torch would accept (``eligible_rows``), predicted fastest first. The
    winner is the first, marked ``source="predicted"``, with no times; ValueError when nothing is eligible."""
    rows = eligible_rows(result)
    if not rows or not order:
        raise ValueError(f"{key}: no configuration that built and that torch would accept to predict among")
    best = rows[order[0]]
    second = rows[order[1]] if len(order) > 1 else None
    at = now()
    w = Winner(env=env.key(), key=key, settings=settings, direction=result.direction, config=best.name,
               engine_id=best.engine_id, knobs=json.dumps([list(k) for k in parse_config(best.name)[1]]),
               kernel_ms=None, host_ms=None, rel_err=None, runner_up=second.name if second else None,
               runner_up_ms=None, torch_on=None, torch_on_ms=None, source="predicted", measured_at=at,
               environment=json.dumps(asdict(env)))
    cands = [{"env": w.env, "key": key, "settings": settings, "direction": result.direction, "name": r.name,
              "engine_id": r.engine_id, "status": r.status, "kernel_ms": None, "throughput_ms": None, "host_ms": None,
              "rel_err": None, "workspace_bytes": r.workspace_bytes, "torch_filter": r.torch_filter,
              "sources": ",".join(r.sources), "measured_at": at} for r in result.rows]
    return w, cands


def eligible_rows(result: EngineSearchResult) -> list[Any]:
    """The configurations of a search that built and that torch would accept (what a winner may be)."""
    return [r for r in result.rows if r.ok and not r.torch_filter]


def reselected(w: Winner, margin: float, eligible: list[dict[str, Any]]) -> Winner | None:
    """The stored winner `w` under another `margin` (TuningDB.reselect), or None where it stays as it is.
    `eligible`: its search's stored candidates torch would accept, timed, fastest first."""
    torch_ms = w.kernel_ms if w.is_torch else w.torch_on_ms
    best_name = w.runner_up if w.is_torch else w.config
    best_ms = w.runner_up_ms if w.is_torch else w.kernel_ms
    if torch_ms is None or best_name is None or best_ms is None:
        return None  # torch's op was not compared, or no configuration torch would accept was timed
    wins = torch_wins(torch_ms, best_ms, margin)
    settings = json.dumps({**json.loads(w.settings or "{}"), "torch_margin": margin}, sort_keys=True)
    if wins == w.is_torch:
        return None if settings == w.settings else replace(w, settings=settings)
    others = [c for c in eligible if c["name"] != best_name]
    if wins:
        return replace(w, settings=settings, config=TORCH_WINNER, engine_id=-1, knobs="[]", kernel_ms=torch_ms,
                       host_ms=None, rel_err=None, runner_up=best_name, runner_up_ms=best_ms)
    cand = next((c for c in eligible if c["name"] == best_name), {})
    engine_id, knobs = parse_config(best_name)
    return replace(w, settings=settings, config=best_name, engine_id=engine_id,
                   knobs=json.dumps([list(k) for k in knobs]), kernel_ms=best_ms, host_ms=cand.get("host_ms"),
                   rel_err=cand.get("rel_err"), runner_up=others[0]["name"] if others else None,
                   runner_up_ms=others[0]["kernel_ms"] if others else None, source=cand.get("sources", w.source))
