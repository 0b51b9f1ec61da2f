"""measure_top_k's clock (choose/unseen.py): a shortlist's configurations built for the problem of a MissQuery, and
their plans timed on fresh random operands (CUDA events around back-to-back calls, as torch's benchmark mode times
its candidates, the stream held while the calls are queued: Note [a held stream]), on the query's device."""
from __future__ import annotations

import statistics
from typing import Any, Sequence

from .. import backend
from ..results import wrong_output
from ..spec import ConvSpec
from .ranking import Candidate

SKIPPED_RUNTIME_COMPILATION = "SKIPPED_RUNTIME_COMPILATION"  # a plan row's status: built with runtime_compiled=False


def query_problem(q: Any) -> tuple[ConvSpec, tuple[int, ...], str, str, str]:
    """The problem a MissQuery describes, as (spec, input shape, dtype, memory format, direction) of the convolution
    cuDNN runs (a transposed layer's problems read as the mirrored convolution's; a 1-d layer's as 2-d with height
    1: the operator passes cuDNN's lifted dims)."""
    x, w = list(q.x), list(q.w)
    nd = len(x) - 2
    spec = ConvSpec(in_channels=x[1], out_channels=w[0], kernel_size=tuple(w[2:]), stride=tuple(q.stride),
                    padding=tuple(q.padding), dilation=tuple(q.dilation), groups=int(q.groups))
    fmt = ("channels_last_3d" if nd == 3 else "channels_last") if q.channels_last else "contiguous"
    return spec, tuple(x), str(q.dtype), fmt, str(q.direction)


def build(q: Any, cands: Sequence[Candidate], runtime_compiled: bool, threads: int = 1) -> dict[Candidate, Any]:
    """Each candidate's plan row for the query's problem (engine_search's exact phase; its status says whether it
    built), finalized by up to `threads` threads. runtime_compiled=False: an engine that compiles at run time is not
    built (status SKIPPED_RUNTIME_COMPILATION). A candidate with no row of its own (rows_for) is left out."""
    if not cands:
        return {}
    out = backend.engine_search(q.direction, q.problem, (), device=q.device, runtime_compiled=runtime_compiled,
                                exact=[(c.engine_id, list(c.knobs)) for c in cands],
                                build_threads=max(1, min(threads, len(cands))))
    return rows_for(cands, out.plans)


def rows_for(cands: Sequence[Candidate], rows: Sequence[Any]) -> dict[Candidate, Any]:
    """Each candidate's row among an exact search's `rows`, matched by configuration, never by position: the row of
    its engine whose knobs include every knob the candidate names with the same value (the search sets only the
    knobs named, drops one the engine lacks, and lists a configuration named twice once: so rows and
    candidates need not pair up in order). A row goes to the first candidate it matches; one no row matches (a
    knob this problem's engine lacks, or a value it does not take) is left out."""
    out: dict[Candidate, Any] = {}
    taken: set[int] = set()
    for c in cands:
        for i, r in enumerate(rows):
            if i not in taken and r.engine_id == c.engine_id and set(c.knobs) <= set(map(tuple, r.knobs)):
                out[c] = r
                taken.add(i)
                break
    return out


# Note [a candidate's output checked]: cuDNN builds some configurations whose output is not the convolution (Note [a
# wrong output] in results/rows.py): a known configuration (Note [known configurations]) fastest on one problem was
# wrong by ~1.4 on a dilated grouped fp32 layer, and measure_top_k, which only timed its shortlist, kept it as the
# fastest. So every plan measure_top_k times is first run once on the same fresh operands, its output poisoned with
# NaN before (what it leaves unwritten reads as not finite), and compared with torch's result in float32 with TF32 off
# (a wrong output is ~1 away, rounding is 1e-3 away: float64 buys nothing here and costs more); a wrong one gets no
# time and is never answered. predict checks its first the same way where no heuristic list offered it
# (UnseenHandler._checked): cuDNN's lists vouch for the configurations they offer for this problem, a known one has
# been right only on the problems it was measured on.
def check_plans(q: Any, plans: Sequence[Any]) -> list[float | None]:
    """Note [a candidate's output checked]: per plan, its output's relative error against torch's (inf: not
    finite); None for a missing or unbuilt plan. One call each on the same fresh random operands."""
    return time_plans(q, plans, 0, 0)[1]


def time_plans(q: Any, plans: Sequence[Any], calls: int, samples: int
               ) -> tuple[list[float | None], list[float | None]]:
    """Per plan, (its ms per call (time_on), its output's relative error against torch's (Note [a candidate's output
    checked]; inf: not finite)), every plan on the same fresh random operands for the query's problem; None for a
    missing or unbuilt plan, and no time for one whose output is wrong. calls=0: checked, not timed."""
    import torch

    from ..measure import errors, operand_sets, reference_output
    from ..problem import OUTPUT_OPERAND, make_problem

    n = len(plans)
    if not any(p is not None and p.status == "SUCCESS" for p in plans):
        return [None] * n, [None] * n
    spec, shape, dtype, fmt, cdir = query_problem(q)
    problem = make_problem(spec, shape, dtype, fmt)
    role = OUTPUT_OPERAND[cdir]
    sets = operand_sets(problem, "warm", int(q.device))
    s = sets[0]
    errs: list[float | None] = []
    with torch.cuda.device(int(q.device)):
        ref = reference_output(problem, cdir, s, "cuda", torch.float32)
        for p in plans:
            if p is None or p.status != "SUCCESS":
                errs.append(None)
                continue
            s[role].fill_(float("nan"))
            p.time_calls([s["x"]], [s["w"]], [s["y"]], 1)
            rel, _ = errors(s[role], ref)
            errs.append(float("inf") if rel is None else rel)
        del ref
        ms = [None] * n if calls <= 0 else time_on(
            [p if e is not None and not wrong_output(e) else None for p, e in zip(plans, errs)], s, calls, samples)
    del sets, s
    return ms, errs


def wrong_names(cands: Sequence[Candidate], errs: Sequence[float | None]) -> list[str]:
    """The names of the candidates whose checked output (time_plans's errors, in the same order) is wrong."""
    return [c.name for c, e in zip(cands, errs) if e is not None and wrong_output(e)]


# Note [a held stream]: events around back-to-back calls time the host, not the GPU, wherever a call's launch (cuDNN's
# execute: tens of microseconds of host time) outlasts its kernels, as on the small layers of batch-1 and batch-8
# models. There the shortlist's fastest was whichever launched fastest: on an H100, 5 of 24 held-out real layers pinned
# a configuration 11-80% slower on the kernel clock than predict's pick, which it held (benchmarks/heldout_picks.py;
# docs/results/2026-12-07-h100-heldout-through-apply.md; torch's benchmark mode, timed the same way, did likewise). So
# each sample first holds the stream with a spin kernel (hold: torch's own) long enough for the host to queue all its
# calls: the start event runs after the spin, the calls back to back behind it, and the events time the kernels (with
# the gaps between them), not the launches. The hold is twice the warm-up call's host time times `calls` (at least
# HOLD_MIN_MS), and twice a sample's launch time for the next samples where that outlasted it.
HOLD_MIN_MS = 0.05
HOLD_CYCLES_PER_MS = 2_000_000  # the spin's clock cycles per ms at 2 GHz: SMs clock no faster, so it lasts at least so


def hold(ms: float) -> None:
    """Note [a held stream]: a spin kernel of at least `ms` on the current stream (nothing where torch has no spin
    kernel or no GPU)."""
    import torch

    sleep = getattr(torch.cuda, "_sleep", None)
    if sleep is not None and torch.cuda.is_available():
        sleep(int(ms * HOLD_CYCLES_PER_MS))


def time_on(plans: Sequence[Any], operands: dict[str, Any], calls: int, samples: int) -> list[float | None]:
    """Per plan, its ms per call on `operands` (an operand set: x, w, y): the median over `samples` runs of `calls`
    back-to-back calls (device events), each behind a hold of the stream (Note [a held stream]), after one warm-up
    call; None for a missing or unbuilt plan."""
    s = operands
    ms: list[float | None] = []
    for p in plans:
        if p is None or p.status != "SUCCESS":
            ms.append(None)
            continue
        warm = p.time_calls([s["x"]], [s["w"]], [s["y"]], 1)
        held = max(HOLD_MIN_MS, 2 * calls * warm.host_ms)
        per_sample = []
        for _ in range(samples):
            hold(held)
            t = p.time_calls([s["x"]], [s["w"]], [s["y"]], calls)
            per_sample.append(t.gpu_ms)
            if t.host_ms > held:
                held = 2 * t.host_ms
        ms.append(statistics.median(per_sample) / calls)
    return ms


def fastest_first(cands: Sequence[Candidate], ms: Sequence[float | None]) -> tuple[list[Candidate], list[float]]:
    """The candidates that have a time, fastest first, and their times."""
    order = sorted((i for i, m in enumerate(ms) if m is not None), key=lambda i: ms[i])
    return [cands[i] for i in order], [ms[i] for i in order]  # type: ignore[misc]


__all__ = ["SKIPPED_RUNTIME_COMPILATION", "HOLD_MIN_MS", "hold", "query_problem", "build", "rows_for", "check_plans",
           "time_plans", "time_on", "fastest_first", "wrong_names"]
