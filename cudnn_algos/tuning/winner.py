"""What the tuning database stores per problem: the ``Winner`` of one search (an engine configuration, or torch's
own op when nothing beat it) with its runner-up and torch's choice, and the columns of its measured candidates."""
from __future__ import annotations

import datetime as _dt
import json
from dataclasses import asdict, dataclass, fields
from typing import Any, Sequence

TORCH_WINNER = "torch"  # the stored winner is torch's own op: nothing measured beat it


@dataclass(frozen=True)
class Winner:
    """One stored winner: per environment key (``Environment.key()``), problem key and search settings, the
    configuration to run (``engine_id`` -1: torch's op) and what it was measured against. Also readable as a
    mapping (``w["config"]``), as database rows were before this type."""

    env: str
    key: str
    settings: str  # JSON: the search's options and torch_margin
    direction: str | None
    config: str  # eng<id>{KNOB=v,...}, or TORCH_WINNER
    engine_id: int
    knobs: str | None  # JSON [[knob type, value], ...]
    kernel_ms: float | None
    host_ms: float | None
    rel_err: float | None
    runner_up: str | None
    runner_up_ms: float | None
    torch_on: str | None  # what torch's benchmark mode ran (configuration names, by kernels)
    torch_on_ms: float | None
    source: str | None  # the heuristic lists the winner came from
    measured_at: str | None
    environment: str | None  # JSON of the full Environment

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> "Winner":
        return cls(*row)

    @classmethod
    def of(cls, d: "Winner | dict[str, Any]") -> "Winner":
        return d if isinstance(d, Winner) else cls(**{c: d.get(c) for c in WINNER_COLS})

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def is_torch(self) -> bool:
        return self.engine_id < 0

    def knob_list(self) -> list[tuple[int, int]]:
        return [(int(t), int(v)) for t, v in json.loads(self.knobs or "[]")]

    def __getitem__(self, name: str) -> Any:
        if name not in WINNER_COLS:
            raise KeyError(name)
        return getattr(self, name)

    def get(self, name: str, default: Any = None) -> Any:
        return getattr(self, name) if name in WINNER_COLS else default


WINNER_COLS = tuple(f.name for f in fields(Winner))
CANDIDATE_COLS = ("env", "key", "settings", "direction", "name", "engine_id", "status", "kernel_ms",
                  "throughput_ms", "host_ms", "rel_err", "workspace_bytes", "torch_filter", "sources", "measured_at")


def now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
