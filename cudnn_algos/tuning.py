"""Tune once, run fast in every later process: the tuning database, ``tune()`` and ``apply()``.

The database (SQLite, WAL; default ``$CUDNN_ALGOS_DB`` or ``$XDG_CACHE_HOME/cudnn_algos/tuning.sqlite``) keeps, per
environment (GPU, compute capability, driver, CUDA, cuDNN, torch) and problem key (direction, dtype, layout, shapes,
padding, stride, dilation, groups, cudnn.deterministic, allow_tf32 for float32 — the extension computes the key, so
the operator looks up exactly what was stored), the winner of an engine-space search (an engine configuration, or
torch's own op when nothing beat it), its runner-up and torch's choice with their times, and every measured candidate.

``tune(model, example)`` searches the problems the database lacks; ``apply(model)`` makes the model's convolution
modules call ``torch.ops.cudnn_algos.conv`` (transposed ones ``conv_transpose``; csrc/pinned.cpp), which runs the
stored winner's plan and falls back to torch's convolution for anything the database lacks (counted;
``Applied.counts()``).
"""
from __future__ import annotations

import json
import os
import statistics
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable, NamedTuple

import torch

from . import _ext
from .engines import find_engines, parse_config
from .errors import CudaError, CudaUnavailableError, CudnnError
from .problem import (DIRECTIONS, Environment, check_choice, device_index, environment, make_problem,
                      parse_dtype)
from .report import discover, distinct_problems
from .tuningdb import (ENV_VAR, SCHEMA, TORCH_WINNER, TuningDB, check_margin, default_path,  # noqa: F401 (API)
                       now, torch_wins)

def env_key(env: Environment) -> str:
    """What must match for a stored winner to be used: the GPU and every version that can change the answer."""
    return (f"{env.gpu_name}|sm{env.compute_capability}|driver {env.driver_version or env.cuda_driver_api}"
            f"|cuda {env.cuda_runtime}|cudnn {env.cudnn_runtime}|torch {env.torch_version}")


def _db(db: TuningDB | str | os.PathLike | None) -> tuple[TuningDB, bool]:
    return (db, False) if isinstance(db, TuningDB) else (TuningDB(db), True)


# ================================================================================================ tune
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


def problem_key(problem, direction: str, deterministic: bool | None = None, allow_tf32: bool | None = None) -> str:
    """The key a winner of `problem` and `direction` is stored under (the operator computes the same from tensors);
    the torch flags default to what is set now."""
    det = torch.backends.cudnn.deterministic if deterministic is None else deterministic
    tf32 = torch.backends.cudnn.allow_tf32 if allow_tf32 is None else allow_tf32
    return _ext.load().problem_key(problem.cudnn_direction(direction), problem.cudnn(), bool(det), bool(tf32))


# Note [torch's op as the winner]: torch's own op is stored as a problem's winner only when it beat the fastest
# configuration torch would accept by more than TORCH_MARGIN on the same clock. Within that margin the
# configuration is stored: in the ResNet-50 databases of the H200 runs (four configurations, 276 searches) torch's op
# won 42 problems outright, by at most 2.5% (median 0.2%), inside the ~3% that the same job moves between processes;
# and a call whose winner is torch's op runs torch's convolution under the process's own benchmark flag (so not
# necessarily the kernel that won) after the operator's own lookup, paying both host paths.
TORCH_MARGIN = 0.03


def winner_entry(result, env: Environment, key: str, settings: str,
                 torch_margin: float = TORCH_MARGIN) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The database rows of one measured engine search: the winner (the fastest configuration torch would accept, or
    torch's own op when it was faster on the same clock by more than `torch_margin`: Note [torch's op as the
    winner]) and every candidate."""
    best = result.best_eligible
    on = result.torch_run("benchmark_on")
    ok = sorted((r for r in result.succeeded if r.kernel_ms is not None and not r.torch_filter),
                key=lambda r: r.kernel_ms)
    runner = ok[1] if len(ok) > 1 else None
    to_torch = best is None or (on is not None and on.kernel_ms is not None
                                and torch_wins(on.kernel_ms, best.kernel_ms, torch_margin))
    at = now()
    w = {"env": env_key(env), "key": key, "settings": settings, "direction": result.direction,
         "config": TORCH_WINNER if to_torch else best.name, "engine_id": -1 if to_torch else best.engine_id,
         "knobs": json.dumps([] if to_torch else [list(k) for k in parse_config(best.name)[1]]),
         "kernel_ms": (on.kernel_ms if to_torch and on else best.kernel_ms if best else None),
         "host_ms": (on.host_ms if to_torch and on else best.host_ms if best else None),
         "rel_err": (on.measured.rel_err if to_torch and on and on.measured else
                     best.measured.rel_err if best and best.measured else None),
         "runner_up": (best.name if to_torch and best else runner.name if runner else None),
         "runner_up_ms": (best.kernel_ms if to_torch and best else runner.kernel_ms if runner else None),
         "torch_on": ",".join(on.matches) if on and on.matches else (f"({on.match})" if on else None),
         "torch_on_ms": on.kernel_ms if on else None, "source": ",".join(best.sources) if best else "",
         "measured_at": at, "environment": json.dumps(asdict(env))}
    cands = [{"env": w["env"], "key": key, "settings": settings, "direction": result.direction, "name": r.name,
              "engine_id": r.engine_id, "status": r.status, "kernel_ms": r.kernel_ms,
              "throughput_ms": r.measured.throughput_ms.median if r.measured and r.measured.throughput_ms else None,
              "host_ms": r.host_ms, "rel_err": r.measured.rel_err if r.measured else None,
              "workspace_bytes": r.workspace_bytes, "torch_filter": r.torch_filter, "sources": ",".join(r.sources),
              "measured_at": at} for r in result.rows]
    return w, cands


# the find_engines options of each kind of tuning search, from tune()'s (repeats, screen, refine, refine_max,
# runtime_compiled)
SEARCHES = {
    "full": lambda repeats, screen, refine, refine_max, rtc: dict(
        compare_torch=True, torch_benchmark=True, repeats=repeats, screen=screen, refine=refine,
        refine_max=refine_max, runtime_compiled=rtc),
    "quick": lambda repeats, screen, refine, refine_max, rtc: dict(
        heuristics=("instant", "fallback"), compare_torch=False, repeats=min(repeats, 3), screen=1, confirm=1,
        refine=0, runtime_compiled=rtc),
}


def tune(model: torch.nn.Module, example_input: Any, db: TuningDB | str | os.PathLike | None = None, *,
         directions: Iterable[str] = DIRECTIONS, dtype: torch.dtype | str | None = None,
         memory_format: torch.memory_format | str | None = None, budget_s: float | None = None,
         repeats: int = 7, screen: int = 3, refine: int = 3, refine_max: int = 32, runtime_compiled: bool = True,
         search: str = "full", torch_margin: float = TORCH_MARGIN, progress: bool = True,
         device: int | str | torch.device | None = None) -> TuneResult:
    """Fills the tuning database with the winners of `model`'s convolutions (as one forward pass on `example_input`
    meets them), searching only the problems and directions it lacks: per problem, ``find_engines`` as ``profile``
    runs it (heuristic lists screened, refine, the fastest confirmed beside torch's op with benchmark on), stored
    with every candidate as soon as it is measured (Ctrl-C or `budget_s` keeps what was stored; a re-run resumes;
    a problem another process stored meanwhile is not searched again).

    dtype / memory_format: what the layers will receive when the model runs (e.g. torch.float16 for a model run
    under autocast; default: what they receive in the example pass). The winners are stored under
    cudnn.deterministic and allow_tf32 as set now: apply() uses them when the flags are the same.

    search: "full" (as above) or "quick": only the lists torch's benchmark mode times (heuristics instant and
    fallback), one screening sample, the fastest re-measured with `repeats` (at most 3) samples, no refine and no
    torch comparison (its winner is still at least torch's benchmark pick on our clock, as that is among the
    candidates) — for a cost nearer torch's own warm-up (measured on the H200: 0.31 s per problem and direction).

    torch_margin: torch's own op is stored as the winner only when it was faster than the best configuration by more
    than this fraction (Note [torch's op as the winner]; 0 stores it whenever it was faster at all)."""
    dirs = tuple(directions)
    for d in dirs:
        check_choice("directions", d, DIRECTIONS)
    check_choice("search", search, SEARCHES)
    check_margin(torch_margin)
    dev = device_index(device)
    env = environment(dev)
    ekey = env_key(env)
    options = SEARCHES[search](repeats, screen, refine, refine_max, runtime_compiled)
    settings = json.dumps({"search": search, "torch_margin": torch_margin, **options}, sort_keys=True)
    store, own = _db(db)
    t0 = time.perf_counter()
    searched = already = unsupported = 0
    build_s = store_s = 0.0
    failed: dict[str, str] = {}
    interrupted, stopped_by, todo = False, "", []
    bar = None
    try:
        todo, already, unsupported = _tuning_todo(model, example_input, dtype, memory_format, dirs, store, ekey)
        bar = _bar(len(todo), progress)
        for spec, shape, dname, fmt, d, key in todo:
            if budget_s is not None and time.perf_counter() - t0 > budget_s:
                interrupted, stopped_by = True, "budget"
                break
            if store.winner(ekey, key) is not None:  # stored meanwhile by another process tuning into this file
                already += 1
                if bar is not None:
                    bar.update(1)
                continue
            try:
                r = find_engines(spec, shape, direction=d, dtype=dname, memory_format=fmt, measure=True,
                                 device=dev, **options)
                build_s += r.search_ms / 1e3
                t_store = time.perf_counter()
                store.put(*winner_entry(r, env, key, settings, torch_margin))
                store_s += time.perf_counter() - t_store
                searched += 1
            except (CudnnError, CudaError, torch.OutOfMemoryError, ValueError) as e:
                failed[key] = f"{type(e).__name__}: {str(e)[:200]}"
            if bar is not None:
                bar.update(1)
    except KeyboardInterrupt:
        interrupted, stopped_by = True, "ctrl-c"
    finally:
        if bar is not None:
            bar.close()
        if own:
            store.close()
    return TuneResult(searched, already, unsupported, failed, time.perf_counter() - t0, interrupted, str(store.path),
                      build_s, store_s, stopped_by, len(todo))


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


def _bar(total: int, enabled: bool):
    if not enabled or total == 0:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return None
    return tqdm(total=total, desc="tuning", unit="search")


# ================================================================================================ apply
CONV_TYPES = (torch.nn.Conv1d, torch.nn.Conv2d, torch.nn.Conv3d)
TRANSPOSED_TYPES = (torch.nn.ConvTranspose1d, torch.nn.ConvTranspose2d, torch.nn.ConvTranspose3d)


class ModuleArgs(NamedTuple):
    """What the operator takes besides the tensors; output_padding only for a transposed layer (None otherwise)."""

    stride: list[int]
    padding: list[int]
    dilation: list[int]
    groups: int
    output_padding: list[int] | None = None


def module_args(m: torch.nn.Module) -> ModuleArgs | str:
    """The arguments the operator takes for a convolution module, or why it cannot run it."""
    if not isinstance(m, CONV_TYPES + TRANSPOSED_TYPES):
        return "not a Conv1d/2d/3d or ConvTranspose1d/2d/3d"
    if type(m).forward not in tuple(c.forward for c in CONV_TYPES + TRANSPOSED_TYPES):
        return f"{type(m).__name__} has its own forward"
    if m.padding_mode != "zeros":
        return f"padding_mode={m.padding_mode!r} (torch pads explicitly first)"
    if isinstance(m.padding, str):
        if m.padding == "valid":
            pad = [0] * len(m.kernel_size)
        else:  # 'same': symmetric only when every dilation*(k-1) is even
            total = [d * (k - 1) for d, k in zip(m.dilation, m.kernel_size)]
            if any(t % 2 for t in total):
                return "padding='same' with an even kernel (asymmetric padding)"
            pad = [t // 2 for t in total]
    else:
        pad = list(m.padding)
    op = list(m.output_padding) if isinstance(m, TRANSPOSED_TYPES) else None
    return ModuleArgs(list(m.stride), pad, list(m.dilation), int(m.groups), op)


@dataclass
class Applied:
    """Handle returned by :func:`apply`: ``undo()`` (or leaving the ``with`` block) restores every module exactly;
    ``counts()`` says, per problem the operator met, how many calls ran the stored configuration, torch's op as
    the stored winner, or torch's op as a fallback (and why)."""

    modules: list[str]
    skipped: dict[str, str]
    winners: int
    db: str
    configs: dict[str, str] = field(default_factory=dict, repr=False)  # problem key -> stored winner's config
    host_ms: dict[str, float] = field(default_factory=dict, repr=False)  # ... -> its host ms per call in tune()
    _saved: list[tuple[torch.nn.Module, Any]] = field(default_factory=list, repr=False)

    def undo(self) -> None:
        for m, old in reversed(self._saved):
            if old is _MISSING:
                m.__dict__.pop("forward", None)
            else:
                m.forward = old
        self._saved.clear()

    def __enter__(self) -> "Applied":
        return self

    def __exit__(self, *exc) -> None:
        self.undo()

    @staticmethod
    def counts() -> list[dict[str, Any]]:
        """Per problem key the operator met: calls that ran the stored configuration (``pinned``), torch's op as
        the stored winner, torch's op as a fallback (with the last ``reason``); and, while host stages are timed
        (:meth:`time_host`), ``execute_us`` (cudnnBackendExecute's host time) over ``timed_calls`` pinned calls."""
        return [{"key": k, "pinned": p, "torch_winner": t, "fallback": f, "reason": r, "execute_us": ns / 1e3,
                 "timed_calls": n}
                for k, p, t, f, r, ns, n in _ext.load().pinned_counts()]

    def execute_by_config(self) -> list[dict[str, Any]]:
        """cudnnBackendExecute's host time per call while host stages were timed, grouped by the stored winner's
        engine (``eng63{...}`` -> ``eng63``): which engines cost the most host time inside the model. Rows
        ``engine``, ``calls``, ``us_per_call``, ``problems``, and ``alone_us`` (the median over those problems of
        the host time per call tune() measured for the same plans in back-to-back calls; None where not stored),
        most host time first."""
        acc: dict[str, list] = {}
        for c in self.counts():
            if not c["timed_calls"]:
                continue
            a = acc.setdefault(self.configs.get(c["key"], "?").split("{")[0], [0, 0.0, 0, []])
            a[0] += c["timed_calls"]
            a[1] += c["execute_us"]
            a[2] += 1
            if self.host_ms.get(c["key"]) is not None:
                a[3].append(1e3 * self.host_ms[c["key"]])
        rows = [{"engine": e, "calls": n, "us_per_call": us / n, "problems": k,
                 "alone_us": statistics.median(alone) if alone else None} for e, (n, us, k, alone) in acc.items()]
        return sorted(rows, key=lambda r: -r["us_per_call"] * r["calls"])

    @staticmethod
    def reset_counts() -> None:
        _ext.load().pinned_reset_counts()

    @staticmethod
    def time_host(on: bool = True) -> None:
        """Starts (zeroing the sums) or stops timing the host steps of the operator's CUDA kernels
        (:meth:`host_stages`). Off by default; on, each call reads the host clock a few times."""
        _ext.load().pinned_stage_timing(bool(on))

    @staticmethod
    def host_stages() -> dict[str, Any]:
        """Host time the operator's CUDA kernels spent per step since :meth:`time_host`: ``forward_calls``,
        ``backward_calls`` and ``us`` (stage -> total microseconds): operands (checks, layout), resolve (the
        per-call lookup; the first call of a problem also builds its plan), alloc (the output), handle (device guard,
        the thread's cuDNN handle set to the current stream), workspace (from torch's caching allocator),
        variant_pack (created and finalized per call), cudnn_execute (cudnnBackendExecute: the launch), count,
        torch_op (torch's convolution where it runs instead), bias."""
        t = _ext.load().pinned_stage_times()
        return {"forward_calls": t["forward_calls"], "backward_calls": t["backward_calls"],
                "us": {k: v / 1e3 for k, v in t["ns"].items()}}

    def summary(self) -> str:
        c = self.counts()
        tot = {k: sum(x[k] for x in c) for k in ("pinned", "torch_winner", "fallback")}
        lines = [f"apply: {len(self.modules)} modules, {self.winners} stored winners loaded from {self.db}; calls: "
                 f"{tot['pinned']} ran a stored configuration, {tot['torch_winner']} torch's op (stored winner), "
                 f"{tot['fallback']} fell back to torch's op"]
        lines += [f"  fallback x{x['fallback']}: {x['reason']}: {x['key']}" for x in c if x["fallback"]]
        lines += [f"  not applied: {n}: {why}" for n, why in self.skipped.items()]
        return "\n".join(lines)


_MISSING = object()


def _forward(m: torch.nn.Module, a: ModuleArgs):
    """The forward apply() gives module `m`: the operator called through a BoundConv (its arguments bound now, Note
    [the Python call] in csrc/pinned.h), or through torch.ops where torch.compile traces it or a __torch_function__
    override must see the call."""
    transposed = a.output_padding is not None
    bound = _ext.load().BoundConv(a.stride, a.padding, a.output_padding or [], a.dilation, a.groups, transposed)
    compiling = torch.compiler.is_compiling
    overridden = torch.overrides.has_torch_function
    if not transposed:
        op = torch.ops.cudnn_algos.conv.default  # the overload itself: no overload resolution per call

        def forward(x: torch.Tensor) -> torch.Tensor:
            w, b = m.weight, m.bias
            if compiling() or overridden((x, w, b) if b is not None else (x, w)):
                return op(x, w, b, a.stride, a.padding, a.dilation, a.groups)
            return bound(x, w, b)

        return forward
    op_t = torch.ops.cudnn_algos.conv_transpose.default

    def forward_transposed(x: torch.Tensor, output_size: list[int] | None = None) -> torch.Tensor:
        w, b = m.weight, m.bias
        if output_size is None and not compiling() and not overridden((x, w, b) if b is not None else (x, w)):
            return bound(x, w, b)
        pad = a.output_padding if output_size is None else m._output_padding(  # noqa: SLF001 (torch's own rule)
            x, output_size, a.stride, a.padding, list(m.kernel_size), len(m.kernel_size), a.dilation)
        return op_t(x, w, b, a.stride, a.padding, list(pad), a.dilation, a.groups)

    return forward_transposed


def apply(model: torch.nn.Module, db: TuningDB | str | os.PathLike | None = None, *,
          device: int | str | torch.device | None = None) -> Applied:
    """Makes `model`'s Conv1d/2d/3d and ConvTranspose1d/2d/3d modules run the tuning database's winners for this GPU
    and versions (loaded into the extension's registry now): each module's forward calls
    ``torch.ops.cudnn_algos.conv`` (``conv_transpose`` for a transposed layer, whose forward is cuDNN's backward-data
    of the mirrored convolution), a C++ operator with autograd (each of the other two directions runs its own stored
    winner), autocast, meta (torch.compile) and CPU kernels; a problem the database lacks runs torch's own
    convolution. Returns an :class:`Applied` handle
    (also a context manager) whose ``undo()`` restores the modules exactly."""
    store, own = _db(db)
    try:
        try:
            winners = store.winners(env_key(environment(device_index(device))))
        except CudaUnavailableError:  # no GPU: the modules still run (the operator's CPU kernel is torch's)
            winners = []
    finally:
        if own:
            store.close()
    ext = _ext.load()
    ext.pinned_clear()  # the registry holds exactly this database's winners (one database per process at a time)
    seen = set()
    configs: dict[str, str] = {}
    host_ms: dict[str, float] = {}
    for w in winners:  # newest first: the first entry per key wins
        if w["key"] in seen:
            continue
        seen.add(w["key"])
        configs[w["key"]], host_ms[w["key"]] = w["config"], w["host_ms"]
        ext.pinned_set(w["key"], int(w["engine_id"]), [tuple(k) for k in json.loads(w["knobs"] or "[]")])
    handle = Applied(modules=[], skipped={}, winners=len(seen), db=str(store.path), configs=configs,
                     host_ms=host_ms)
    for name, m in model.named_modules():
        if not isinstance(m, CONV_TYPES + TRANSPOSED_TYPES):
            continue
        args = module_args(m)
        if isinstance(args, str):
            handle.skipped[name or "<model>"] = args
            continue
        handle._saved.append((m, m.__dict__.get("forward", _MISSING)))
        m.forward = _forward(m, args)
        handle.modules.append(name or "<model>")
    return handle


__all__ = ["TuningDB", "TuneResult", "Applied", "tune", "apply", "default_path", "env_key", "TORCH_MARGIN",
           "problem_key", "winner_entry", "module_args", "ModuleArgs"]
