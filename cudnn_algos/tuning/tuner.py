"""``tune(model, example)``: searches the problems the tuning database lacks and stores each winner (policy) with
every candidate as soon as it is measured; resumable, with a time budget and Ctrl-C kept."""
from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from typing import Any, Iterable

import torch

from ..backend import environment
from ..configs import TORCH_LISTS
from ..engines import find_engines
from ..errors import CudaError, CudnnError
from ..model import discover, distinct_problems
from ..problem import DIRECTIONS, check_choice, check_module, device_index, fused_call, make_problem, parse_dtype
from ..progress import Progress
from .db import TuningDB, open_db
from .fused_tune import FusedTuneResult, tune_fused
from .keys import problem_key
from .policy import TORCH_MARGIN, check_margin, eligible_rows, predicted_entry, winner_entry


@dataclass(frozen=True)
class TuneResult:
    """What tune() did: searches run, problems the database already had, failures (problem key -> reason)."""

    searched: int
    already: int
    unsupported: int
    failed: dict[str, str]
    seconds: float
    interrupted: bool
    db: str
    build_s: float = 0.0  # of `seconds`: cuDNN enumerating configurations and building their plans
    store_s: float = 0.0  # of `seconds`: writing to the database
    stopped_by: str = ""  # with interrupted: "budget" (budget_s ran out; a re-run continues) or "ctrl-c"
    todo: int = 0  # searches the database lacked when tune() began

    def __str__(self) -> str:
        where = (f" ({self.build_s:.1f} s building plans, {self.store_s:.1f} s storing, the rest measuring)"
                 if self.searched else "")
        s = (f"tune: {self.searched} searches run, {self.already} already in the database, {self.unsupported} "
             f"problem(s) apply() does not run (padding_mode other than zeros), {len(self.failed)} failed; "
             f"{self.seconds:.1f} s{where}"
             f"{self._stopped()}; database {self.db}")
        return s + "".join(f"\n  failed: {k}: {v}" for k, v in self.failed.items())

    def _stopped(self) -> str:
        if not self.interrupted:
            return ""
        return {"budget": " (stopped: the time budget ran out)", "ctrl-c": " (stopped: Ctrl-C)"}.get(
            self.stopped_by, " (stopped: time budget or Ctrl-C)")


# the find_engines options of each kind of tuning search, from tune()'s (repeats, screen, refine, refine_max,
# runtime_compiled)
SEARCHES = {
    "full": lambda repeats, screen, refine, refine_max, rtc: dict(
        compare_torch=True, torch_benchmark=True, repeats=repeats, screen=screen, refine=refine,
        refine_max=refine_max, runtime_compiled=rtc),
    "quick": lambda repeats, screen, refine, refine_max, rtc: dict(
        heuristics=TORCH_LISTS, compare_torch=False, repeats=min(repeats, 3), screen=1, confirm=1,
        refine=0, runtime_compiled=rtc),
    # the heuristic lists' configurations built, nothing timed: a selector ranks them (predicted_entry)
    "predict": lambda repeats, screen, refine, refine_max, rtc: dict(compare_torch=False, runtime_compiled=rtc),
}


def tune(model: torch.nn.Module, example_input: Any, db: TuningDB | str | os.PathLike | None = None, *,
         directions: Iterable[str] = DIRECTIONS, dtype: torch.dtype | str | None = None,
         memory_format: torch.memory_format | str | None = None, budget_s: float | None = None,
         repeats: int = 7, screen: int = 3, refine: int = 3, refine_max: int = 32, runtime_compiled: bool = True,
         search: str = "full", torch_margin: float = TORCH_MARGIN, progress: bool = True, fuse: bool = False,
         device: int | str | torch.device | None = None, selector: Any = None) -> TuneResult | FusedTuneResult:
    """Fills the tuning database with the winners of `model`'s convolutions (as one forward pass on `example_input`
    meets them), searching only the problems and directions it lacks: per problem, ``find_engines`` as ``profile``
    runs it (heuristic lists screened, refine, the fastest confirmed beside torch's op with benchmark on), stored
    with every candidate as soon as it is measured (Ctrl-C or `budget_s` keeps what was stored; a re-run resumes;
    a problem another process stored meanwhile is not searched again).

    dtype / memory_format: what the layers will receive when the model runs (default: what they receive in the
    example pass). Stored under cudnn.deterministic and allow_tf32 as set now (apply() matches them).

    search: "full" (as above) or "quick": only the lists torch's benchmark mode times (instant and fallback), one
    screening sample, the fastest re-measured with `repeats` (at most 3) samples, no refine and no torch comparison
    (its winner is still at least torch's benchmark pick on our clock) — a cost nearer torch's own warm-up.

    search="predict" (with `selector`, a Selector or its file): nothing is timed; the selector's first pick among
    the lists' configurations torch would accept is stored, ``source="predicted"``, without times.

    torch_margin: torch's op is stored only when faster than the best configuration by more than this fraction
    (Note [torch's op as the winner] in tuning/policy.py). fuse=True: the fusible chains' fused winners instead."""
    check_module("model", model)
    if fused_call(tune, locals(), "fuse", ("db", "dtype", "memory_format", "device")):
        return tune_fused(model, example_input, db, dtype=dtype, memory_format=memory_format, device=device)
    dirs = tuple(directions)
    for d in dirs:
        check_choice("directions", d, DIRECTIONS)
    check_choice("search", search, SEARCHES)
    check_margin(torch_margin)
    if search == "predict":
        selector = _selector(selector)
    dev = device_index(device)
    env = environment(dev)
    ekey = env.key()
    options = SEARCHES[search](repeats, screen, refine, refine_max, runtime_compiled)
    settings = json.dumps({"search": search, "torch_margin": torch_margin, **options,
                           **({"selector": selector.family} if search == "predict" else {})}, sort_keys=True)
    store, own = open_db(db)
    t0 = time.perf_counter()
    searched = already = unsupported = 0
    build_s = store_s = 0.0
    failed: dict[str, str] = {}
    interrupted, stopped_by, todo = False, "", []
    bar = Progress(0, False, "")
    try:
        todo, already, unsupported = _tuning_todo(model, example_input, dtype, memory_format, dirs, store, ekey)
        bar = Progress(len(todo), progress, "tuning", unit="search")
        for spec, shape, dname, fmt, d, key in todo:
            if budget_s is not None and time.perf_counter() - t0 > budget_s:
                interrupted, stopped_by = True, "budget"
                break
            if store.winner(ekey, key) is not None:  # stored meanwhile by another process tuning into this file
                already += 1
                bar.update()
                continue
            try:
                r = find_engines(spec, shape, direction=d, dtype=dname, memory_format=fmt,
                                 measure=search != "predict", device=dev, **options)
                build_s += r.search_ms / 1e3
                t_store = time.perf_counter()
                if search == "predict":
                    store.put(*predicted_entry(r, env, key, settings, _rank(selector, r, spec, shape, dname, fmt, d)))
                else:
                    store.put(*winner_entry(r, env, key, settings, torch_margin))
                store_s += time.perf_counter() - t_store
                searched += 1
            except (CudnnError, CudaError, torch.OutOfMemoryError, ValueError) as e:
                failed[key] = f"{type(e).__name__}: {str(e)[:200]}"
            bar.update()
    except KeyboardInterrupt:
        interrupted, stopped_by = True, "ctrl-c"
    finally:
        bar.close()
        if own:
            store.close()
    return TuneResult(searched, already, unsupported, failed, time.perf_counter() - t0, interrupted, str(store.path),
                      build_s, store_s, stopped_by, len(todo))


def _selector(selector: Any):
    """tune(search="predict")'s selector: a Selector, or the file of one (ValueError naming the argument)."""
    from ..choose.model import Selector

    if selector is None:
        raise ValueError("search='predict' needs selector= (a Selector or its .npz file), not None")
    return Selector.coerce(selector)


def _rank(selector, result, spec, shape, dname: str, fmt: str | None, direction: str) -> list[int]:
    """The selector's order of the search's eligible configurations (policy.eligible_rows), fastest first."""
    from ..choose.features import problem_features
    from ..choose.features import positions

    feats = problem_features(spec, shape, dname, fmt or "contiguous", direction)
    return selector.rank(feats, [(r.engine_id, dict(r.knobs), positions(r.rank)) for r in eligible_rows(result)])


def _tuning_todo(model, example_input, dtype, memory_format, dirs, store: TuningDB, ekey: str):
    """tune()'s searches to run: (spec, shape, dtype name, layout, direction, key) of every distinct problem and
    direction `store` lacks; and how many it has, and how many problems apply() does not run."""
    todo, already, unsupported = [], 0, 0
    dt = parse_dtype(dtype) if dtype is not None else None
    for (spec, shape, dname, fmt), _names in distinct_problems(discover(model, example_input), dt,
                                                                memory_format).items():
        if spec.padding_mode != "zeros":  # apply() leaves such modules to torch (it pads explicitly first)
            unsupported += 1
            continue
        problem = make_problem(spec, shape, dname, fmt)
        for d in dirs:
            key = problem_key(problem, d)
            if store.winner(ekey, key) is not None:
                already += 1
            else:
                todo.append((spec, shape, dname, fmt, d, key))
    return todo, already, unsupported
