"""tune(model, example_input, fuse=True): each fusible chain's fused graph searched (find_fused, BatchNorm folded as
apply(fuse=True) runs it) and its winner stored in the tuning database, which apply(model, fuse=True) then builds.

Note [fused winners in the database]: a fused winner is a row of the ``winners`` table whose key is the
convolution's problem key (forward) followed by ``|fused:`` and the graph's ops (``fused_key``): the extension's
registry never meets such a key (the operator computes keys from tensors), so a version of the package that does not
know fused winners loads them as dead entries and runs what it ran before, and the schema is unchanged. The row's
config is the fastest right fused configuration where it beat the fastest unfused sequence, else TORCH_WINNER (the
chain then runs torch's ops); runner_up is the unfused best, torch_on the eager sequence, source "fused". The
winner's built plan is kept serialized beside the database (tuning/plans.py, Note [serialized plans]).
"""
from __future__ import annotations

import datetime as _dt
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Sequence

import torch

from ..backend import environment, serialize_plan
from ..fused import find_fused
from ..model.fusion import scan_in_eval, why_not_fused
from ..problem import check_module, device_index, make_problem, parse_dtype, parse_memory_format
from .db import TuningDB, default_path, open_db
from .plans import plans_dir, read_plan, write_plan
from .keys import problem_key
from .winner import TORCH_WINNER, Winner, now

FUSED_MARK = "|fused:"
FUSED_SOURCE = "fused"


def fused_key(key: str, epilogue: Sequence[str]) -> str:
    """The winners-table key of a chain's fused graph (Note [fused winners in the database])."""
    return f"{key}{FUSED_MARK}{','.join(epilogue)}"


def is_fused_key(key: str) -> bool:
    return FUSED_MARK in key


def fused_winner(res: Any, env: Any, key: str) -> Winner:
    """The winner row of one fused search (a FusedSearchResult) for environment `env` under `key` (fused_key)."""
    b, u, t = res.best, res.best_unfused, res.torch_eager
    fused_wins = b is not None and (u is None or b.kernel_ms <= u.kernel_ms)
    knobs = None
    if fused_wins:
        from ..configs import parse_config

        knobs = json.dumps([list(k) for k in parse_config(b.name)[1]])
    return Winner(
        env=env.key(), key=key, settings=json.dumps({"search": FUSED_SOURCE, "epilogue": list(res.epilogue)},
                                                    sort_keys=True),
        direction="forward", config=b.name if fused_wins else TORCH_WINNER,
        engine_id=b.engine_id if fused_wins else -1, knobs=knobs,
        kernel_ms=b.kernel_ms if fused_wins else (t.kernel_ms if t else None),
        host_ms=b.host_ms if fused_wins else (t.host_ms if t else None),
        rel_err=(b.measured.rel_err if fused_wins else (t.measured.rel_err if t and t.measured else None)),
        runner_up=u.name if u else None, runner_up_ms=u.kernel_ms if u else None,
        torch_on="torch eager" if t else None, torch_on_ms=t.kernel_ms if t else None, source=FUSED_SOURCE,
        measured_at=now(), environment=json.dumps(asdict(env)))


@dataclass
class FusedTuneResult:
    """What tune(fuse=True) did: per chain (by its convolution's name) the stored winner's config, or why nothing was
    stored; ``stored`` counts the rows written, ``kept`` those the database already had."""

    db: str
    chains: dict[str, str] = field(default_factory=dict)
    stored: int = 0
    kept: int = 0
    error: str = ""

    def summary(self) -> str:
        lines = [f"fused tuning into {self.db}: {self.stored} winners stored, {self.kept} already there"]
        lines += [f"  {name}: {what}" for name, what in self.chains.items()]
        if self.error:
            lines.append(f"  not traced: {self.error}")
        return "\n".join(lines)


def tune_fused(model: torch.nn.Module, example_input: Any, db: TuningDB | str | os.PathLike | None = None, *,
               dtype: Any = None, memory_format: Any = None, repeats: int = 5,
               heuristics: tuple[str, ...] = ("instant", "a", "b", "fallback"), device: Any = None) -> FusedTuneResult:
    """Searches each distinct fusible chain of `model` (eval mode, as apply(fuse=True) runs it) the database lacks
    and stores its fused winner (Note [fused winners in the database])."""
    check_module("model", model)
    scan, todo, _ = scan_in_eval(model, example_input)
    dev = device_index(device)
    env = environment(dev)
    dt = parse_dtype(dtype) if dtype is not None else None
    store, own = open_db(db)
    out = FusedTuneResult(db=str(store.path), error=scan.error)
    try:
        for ch, use in todo:
            ops = ch.fused_ops
            why = why_not_fused(ops) or ("not called by the forward pass" if use is None else "")
            if why:
                out.chains[ch.conv] = f"not tuned: {why}"
                continue
            dtype_k = dt or use.dtype
            fmt = parse_memory_format(memory_format, use.spec.ndim) if memory_format is not None else use.memory_format
            key = fused_key(problem_key(make_problem(ch.spec, use.input_shape, dtype_k, fmt), "forward"), ops)
            have = store.winner(env.key(), key)
            if have is not None:
                out.kept += 1
                out.chains[ch.conv] = f"kept {have.config}"
                continue
            res = find_fused(ch.spec, use.input_shape, ops, dtype=dtype_k, memory_format=fmt, heuristics=heuristics,
                             repeats=repeats, device=dev)
            w = fused_winner(res, env, key)
            store.put(w)
            if not w.is_torch and str(store.path) != ":memory:":  # Note [serialized plans]: kept beside it
                write_plan(plans_dir(store.path), env.key(), key, serialize_plan(res.best.plan))
            out.stored += 1
            out.chains[ch.conv] = f"stored {w.config}" + (f" ({res.speedup('torch'):.2f}x eager)"
                                                           if res.speedup("torch") else "")
    finally:
        if own:
            store.close()
    return out


@dataclass
class FusedStore:
    """The tuned fused winners apply(fuse=True) builds: this environment's by key, and where their serialized plans
    are (tuning/plans.py; None: nowhere)."""

    winners: dict[str, Winner] = field(default_factory=dict)
    plans: Path | None = None
    env_key: str = ""

    def plan_json(self, key: str) -> bytes:
        return read_plan(self.plans, self.env_key, key)


def stored_fused(db: TuningDB | str | os.PathLike | None, device: Any = None) -> FusedStore:
    """This environment's fused winners by key, newest first per key (none without a GPU, and none when `db` is None
    and the default database does not exist: nothing is created for a lookup)."""
    from ..errors import CudaUnavailableError

    if db is None and not default_path().exists():
        return FusedStore()
    store, own = open_db(db)
    try:
        try:
            env_key = environment(device_index(device)).key()
        except CudaUnavailableError:
            return FusedStore()
        ws = store.winners(env_key)
        path = str(store.path)
    finally:
        if own:
            store.close()
    out = FusedStore(plans=None if path == ":memory:" else plans_dir(path), env_key=env_key)
    for w in ws:
        if is_fused_key(w.key) and w.key not in out.winners:
            out.winners[w.key] = w
    return out


__all__ = ["FUSED_MARK", "FUSED_SOURCE", "fused_key", "is_fused_key", "fused_winner",
           "FusedTuneResult", "FusedStore", "tune_fused", "stored_fused"]
