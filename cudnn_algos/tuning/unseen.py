"""``apply(model, unseen=...)``: what the pinned operator runs for a problem the tuning database lacks (Note [unseen
problems] in csrc/pinned/pinned.h). "torch": torch's own op (counted as a fallback). "predict": a selector ranks the
configurations of cuDNN's heuristic lists (queried, not built) and the first of its ranking that builds runs from
then on: one plan built, nothing timed. "measure_top_k": the selector's shortlist of k (its first k - 1 and cuDNN's
own first, Selector.shortlist; k="auto": as many as its predictions leave close) is built and timed on fresh random
operands (CUDA events around back-to-back calls, as torch's benchmark mode times its candidates), the fastest kept.
The lists are queried in a helper process (Note [lists in a helper process] in lists_process.py) and ranked in
background threads while torch's op runs the problem's first call (Note [choosing in the background], the default),
or all at that first call. Either way the choice is made once per problem and process; ``Applied.decisions()`` lists
them (``Applied.keep()`` stores them in a tuning database)."""
from __future__ import annotations

import atexit
import os
import queue
import statistics
import threading
import time
from dataclasses import dataclass
from typing import Any, Sequence

from .. import backend
from ..selector import Selector
from ..selector.features import RANKED_LISTS
from ..selector.model import AUTO, AUTO_FIRST
from ..spec import ConvSpec
from .lists_process import ListsProcess, ListsProcessError, helper_threads
from .ranking import Candidate, candidates_of, rank

UNSEEN = ("torch", "predict", "measure_top_k")
CANDIDATE_LISTS = RANKED_LISTS  # the heuristic lists queried for candidates (the selector's position features)


@dataclass(frozen=True)
class Decision:
    """One unseen problem's choice: its key, the configurations in the order they were offered to the operator,
    how they were chosen, the seconds it took, and (measure_top_k) the ms each timed candidate took per call."""

    key: str
    offered: tuple[str, ...]
    origin: str
    seconds: float
    timed_ms: tuple[float | None, ...] = ()
    why: str = ""
    query_ms: float = 0.0  # of `seconds`: cuDNN's heuristic queries (graph built, lists asked), host ms


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


# Note [choosing in the background]: cuDNN's heuristic list B, whose positions the selector's ranking leans on,
# costs ~10-20 ms of host time per problem-direction on the H200 (A ~1.5 ms; docs/selector.md), several times what
# torch's op spends on a new problem with benchmark off. Asked at the first call, it made predict's first pass over
# new shapes 5x benchmark off's. So by default the handler answers the operator at once with nothing ("choosing in
# the background": the call runs torch's op, counted as a fallback with that reason) and queues the problem, once;
# as many threads as the helper answers queries at once (lists_process.helper_threads()) have the helper process
# ask the lists and rank (Note [lists in a helper process] in lists_process.py: B's query opens a CUDA stream
# capture, which fails the model's own synchronizing calls if it happens in the model's process; Note [ranking in
# the helper]: ranking here took the GIL from the model's steps),
# keep the ranking (and measure_top_k's shortlist) and ask the registry to ask again (backend.pinned_ask_again;
# until then the problem's calls take torch's op without asking again: Note [asked again] in csrc/pinned). The
# problem's next call gets the answer on the operator's own thread: predict's ranking, whose first that builds the
# registry builds and runs; measure_top_k's shortlist timed there, on its GPU, the fastest kept. No thread builds a
# plan. What a thread cannot rank stays on torch's op, the decision saying why. $CUDNN_ALGOS_UNSEEN_LOG names a
# file that gets a line per answer, flushed before the operator runs it (the last line before a crash names the
# problem and configuration). wait() blocks until nothing is queued;
# close() stops the threads and the helper (undo(), the next apply(), and at exit, so that no thread is inside
# cuDNN when the interpreter goes).
BACKGROUND_WHY = "no stored winner; the selector is choosing in the background (torch's op meanwhile)"


LOG_ENV = "CUDNN_ALGOS_UNSEEN_LOG"


def _log_answer(key: str, origin: str, ranked: Sequence[Candidate]) -> None:
    """With $CUDNN_ALGOS_UNSEEN_LOG set: one line per answer (problem key, origin, its first three configurations),
    on disk before the operator builds and runs it."""
    path = os.environ.get(LOG_ENV)
    if not path:
        return
    try:
        with open(path, "a") as f:
            f.write(f"{time.time():.3f}\t{origin}\t{key}\t{' | '.join(c.name for c in ranked[:3])}\n")
            f.flush()
            os.fsync(f.fileno())
    except OSError:
        pass  # a log that cannot be written never stops the model's call


class UnseenHandler:
    """The callable apply() gives the operator's registry (backend.pinned_set_miss_handler): a MissQuery in,
    (configurations most preferred first, origin, why) out. It never raises into the operator: a failure is an
    empty answer saying why (the call runs torch's op, counted as a fallback with that reason). background=True:
    Note [choosing in the background]."""

    def __init__(self, mode: str, selector: Any, k: int | str = 3, lists: Sequence[str] = CANDIDATE_LISTS,
                 calls: int = 5, samples: int = 3, background: bool = False, threads: int | None = None):
        self.mode, self.selector, self.k, self.lists = mode, selector, k, tuple(lists)
        self._helper: ListsProcess | None = None  # Note [lists in a helper process]
        # Note [ranking in the helper]: a Selector itself travels as its arrays; a subclass or stand-in ranks here
        self._ranks_in_helper = type(selector) is Selector
        self.calls, self.samples = calls, samples
        self.decisions: list[Decision] = []
        self.background = background
        # background threads: each waits for the helper's answer to one problem, so as many as it answers at once
        self.threads = helper_threads() if threads is None else max(1, int(threads))
        self._queued: set[str] = set()
        self._ready: dict[str, tuple[list[Candidate], list[Candidate], float, float]] = {}  # ranked, for next call
        self._lock = threading.Lock()
        self._queue: queue.Queue = queue.Queue()
        self._workers: list[threading.Thread] = []
        self._closed = False

    def __call__(self, q: Any) -> tuple[list[tuple[int, list[tuple[int, int]]]], str, str]:
        t0 = time.perf_counter()
        if self.background:
            with self._lock:
                ready = self._ready.pop(q.key, None)
            if ready is None:
                return self._enqueue(q)
        try:  # per call, no state on self but the decisions (two threads may ask at once: the GIL is released in C++)
            if self.background:  # the ranking a background thread made
                ranked, short, query_ms, t0 = ready[0], ready[1], ready[2], t0 - ready[3]
            else:
                ranked, short, query_ms = self.ranked(q)
            if not ranked:
                return [], "", self._not_chosen(q, t0, self._nothing_why())
            origin, timed = "predicted", ()
            if self.mode == "measure_top_k":
                ranked, timed = self.timed(q, ranked, short)
                origin = "measured_top_k"
        except Exception as e:  # noqa: BLE001 (the operator's call must go on: torch's op runs, the reason kept)
            return [], "", self._not_chosen(q, t0, self._failed_why(e))
        self.decisions.append(Decision(q.key, tuple(c.name for c in ranked), origin, time.perf_counter() - t0,
                                       tuple(timed), query_ms=query_ms))
        _log_answer(q.key, origin, ranked)
        return [(c.engine_id, [tuple(k) for k in c.knobs]) for c in ranked], origin, ""

    def _not_chosen(self, q: Any, t0: float, why: str) -> str:
        """A problem left on torch's op: its decision says why (returned)."""
        self.decisions.append(Decision(q.key, (), "", time.perf_counter() - t0, why=why))
        return why

    def _nothing_why(self) -> str:
        return f"no configuration of the heuristic lists {'/'.join(self.lists)} that torch would accept"

    def _failed_why(self, e: Exception) -> str:
        return f"{self.mode} failed: {type(e).__name__}: {str(e)[:200]}"

    def _enqueue(self, q: Any) -> tuple[list, str, str]:
        """Note [choosing in the background]: queued once per problem; the operator's call runs torch's op."""
        with self._lock:
            if self._closed:
                return [], "", "no stored winner; the selector's background threads were stopped"
            if q.key not in self._queued:
                self._queued.add(q.key)
                self._queue.put(q)
                if not self._workers:
                    for i in range(self.threads):
                        t = threading.Thread(target=self._work, name=f"cudnn_algos-selector-{i}", daemon=True)
                        t.start()
                        self._workers.append(t)
                    atexit.register(self.close)  # no thread inside cuDNN when the interpreter goes
        return [], "", BACKGROUND_WHY

    def _work(self) -> None:
        while True:
            q = self._queue.get()
            try:
                if q is None:
                    return
                self._choose(q)
            finally:
                self._queue.task_done()

    def _choose(self, q: Any) -> None:
        """One queued problem on a background thread: ranked, the ranking kept for the problem's next call (which
        builds predict's pick, or times measure_top_k's shortlist, on the operator's thread)."""
        t0 = time.perf_counter()
        try:
            ranked, short, query_ms = self.ranked(q)
            if not ranked:
                self._not_chosen(q, t0, self._nothing_why())
                return
            with self._lock:
                if self._closed:  # undo() or another apply() meanwhile: the registry is no longer this handler's
                    return
                self._ready[q.key] = (ranked, short, query_ms, time.perf_counter() - t0)
            backend.pinned_ask_again(q.key)
        except Exception as e:  # noqa: BLE001 (a thread's failure is a decision saying why; torch's op stays)
            if not self._closed:  # closing ends the helper under a query: not the problem's failure
                self._not_chosen(q, t0, self._failed_why(e))

    def wait(self, timeout: float | None = None) -> bool:
        """Blocks until every queued problem is ranked, its choice made at its next call (True), or `timeout`
        seconds passed (False)."""
        if not self.background:
            return True
        deadline = None if timeout is None else time.monotonic() + timeout
        while self._queue.unfinished_tasks:
            if deadline is not None and time.monotonic() > deadline:
                return False
            time.sleep(0.005)
        return True

    def start(self) -> None:
        """Starts the helper process that asks cuDNN's lists (Note [lists in a helper process]) now, so that it is
        ready by the first unseen problem. Never raises: a helper that cannot start is tried again at each problem,
        whose decision then says why."""
        try:
            self._lists_process()
        except ListsProcessError:
            pass

    def _lists_process(self) -> ListsProcess:
        with self._lock:
            if self._closed:
                raise ListsProcessError("the handler was closed")
            if self._helper is None:
                self._helper = ListsProcess()
                if self._ranks_in_helper:
                    self._helper.set_selector(self.selector.to_bytes())
            return self._helper

    def close(self, timeout: float = 10.0) -> None:
        """Stops the background threads after the problems they are choosing (nothing more is stored) and ends the
        helper process."""
        with self._lock:
            self._closed = True
            workers, self._workers = self._workers, []
            self._ready.clear()
            helper, self._helper = self._helper, None
        if helper is not None:
            helper.close()
        if workers:
            while True:  # what is still queued is dropped
                try:
                    self._queue.get_nowait()
                    self._queue.task_done()
                except queue.Empty:
                    break
            for _ in workers:
                self._queue.put(None)
            for t in workers:
                t.join(timeout)

    def ranked(self, q: Any) -> tuple[list[Candidate], list[Candidate], float]:
        """The heuristic lists' configurations torch would accept, the selector's predicted fastest first; the
        shortlist measure_top_k times (Selector.shortlist: its first k - 1 and cuDNN's first); cuDNN's host ms.
        Ranked in the helper process where it holds the selector (Note [ranking in the helper])."""
        from ..selector import problem_features

        helper = self._lists_process()
        problem = query_problem(q)
        feats = problem_features(*problem)
        k = self.k if self.mode == "measure_top_k" else 0
        dtype, det, tf32, fmt = str(q.dtype), bool(q.deterministic), bool(q.allow_tf32), problem[3]
        if self._ranks_in_helper:
            return helper.rank(str(q.direction), q.problem, self.lists, int(q.device), feats, dtype, det, tf32, k,
                               fmt)
        plans, search_ms = helper.ask(str(q.direction), q.problem, self.lists, int(q.device))
        known_for = getattr(self.selector, "known_for", None)  # a stand-in selector may have none
        known = known_for(str(q.direction), dtype, fmt, det, tf32) if known_for else ()
        ranked, short = rank(candidates_of(plans, dtype, det, tf32), self.selector, feats, k, known)
        return ranked, short, search_ms

    def timed(self, q: Any, ranked: list[Candidate], top: list[Candidate]) -> tuple[list[Candidate],
                                                                                   list[float | None]]:
        """The shortlist `top` built and timed (median over `samples` of `calls` back-to-back calls, device
        events, fresh random operands); the fastest first, then the rest in the selector's order. With k="auto" what
        the shortlist adds beyond its first AUTO_FIRST is built without runtime compilation (Note [the automatic
        shortlist]: a known configuration the lists did not mark is held to it here)."""
        import torch

        from ..measure import operand_sets
        from ..problem import make_problem

        first = AUTO_FIRST if self.k == AUTO else len(top)
        built: dict[Candidate, Any] = {}
        for part, compiled in ((top[:first], True), (top[first:], False)):
            if part:
                out = backend.engine_search(q.direction, q.problem, (), device=q.device, runtime_compiled=compiled,
                                            exact=[(c.engine_id, list(c.knobs)) for c in part])
                # one plan row per configuration asked for, in order (engine_search's exact phase)
                built.update(zip(part, out.plans) if len(out.plans) == len(part) else ())
        spec, shape, dtype, fmt, _ = query_problem(q)
        sets = operand_sets(make_problem(spec, shape, dtype, fmt), "warm", int(q.device))
        s = sets[0]
        ms: list[float | None] = []
        with torch.cuda.device(int(q.device)):
            for c in top:
                p = built.get(c)
                if p is None or p.status != "SUCCESS":
                    ms.append(None)
                    continue
                p.time_calls([s["x"]], [s["w"]], [s["y"]], 1)  # warm-up
                ms.append(statistics.median(p.time_calls([s["x"]], [s["w"]], [s["y"]], self.calls).gpu_ms
                                            for _ in range(self.samples)) / self.calls)
        del sets, s
        order = sorted((i for i, m in enumerate(ms) if m is not None), key=lambda i: ms[i])
        fastest = [top[i] for i in order]
        return fastest + [c for c in ranked if c not in fastest], [ms[i] for i in order]


def check_unseen(unseen: Any, k: Any) -> None:
    """apply()'s unseen and k arguments (ValueError naming the argument and value)."""
    if not isinstance(unseen, str) or unseen not in UNSEEN:
        raise ValueError(f"unseen={unseen!r} must be one of: {', '.join(map(repr, UNSEEN))}")
    if k != AUTO and (isinstance(k, bool) or not isinstance(k, int) or k < 1):
        raise ValueError(f"k={k!r} must be an int >= 1 (how many predicted configurations measure_top_k times) or "
                         "'auto' (as many as the selector's predictions leave close: Note [the automatic shortlist])")


__all__ = ["UNSEEN", "CANDIDATE_LISTS", "Candidate", "Decision", "UnseenHandler", "query_problem", "candidates_of",
           "check_unseen"]
