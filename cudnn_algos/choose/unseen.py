"""``apply(model, unseen=...)``: what the pinned operator runs for a problem the tuning database lacks (Note [unseen
problems] in csrc/pinned/pinned.h). "torch": torch's own op (counted as a fallback). "predict": a selector ranks the
configurations of cuDNN's heuristic lists (queried, not built) and the first of its ranking that builds runs from
then on: one plan built, nothing timed. "measure_top_k": the selector's shortlist of k (its first k - 1 and cuDNN's
own first, and INSTANT's first where it is neither, Selector.shortlist; k="auto": as many as its predictions leave
close) is built and timed on fresh random operands (CUDA events around back-to-back calls, as torch's benchmark mode
times its candidates), the fastest kept.
The lists are queried in a helper process (Note [lists in a helper process] in lists_process.py) and ranked in
background threads while torch's op runs the problem's first call (Note [choosing in the background], the default),
or all at that first call. Either way the choice is made once per problem and process; ``Applied.decisions()`` lists
them (``Applied.keep()`` stores them in a tuning database)."""
from __future__ import annotations

import atexit
import os
import queue
import threading
import time
from dataclasses import dataclass, replace
from typing import Any, Sequence

from .. import backend
from .model import Selector
from .features import RANKED_LISTS
from .model import AUTO, AUTO_FIRST, auto_parts
from .lists_process import ListsProcess, ListsProcessError, helper_threads
from .ranking import Candidate, candidates_of, rank
from ..results import wrong_output
from .shortlist_clock import (SKIPPED_RUNTIME_COMPILATION, build, check_plans, fastest_first, query_problem,
                              time_plans, wrong_names)

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
    # k="auto": of the timed, how many runtime-compiled candidates were built off the operator's thread and timed at
    # a later call (Note [runtime-compiled candidates later]); `timed_ms` is then that later timing's
    later: int = 0
    # Note [a candidate's output checked]: the configurations passed over because their output was wrong
    wrong: tuple[str, ...] = ()


# Note [choosing in the background]: cuDNN's heuristic list B, whose positions the selector's ranking leans on, costs
# ~10-20 ms of host time per problem-direction on the H200 (A ~1.5 ms; docs/results/selector-2026-12-01-to-03.md),
# several times what torch's op spends on a new problem with benchmark off. Asked at the first call, it made predict's
# first pass over new shapes 5x benchmark off's. So by default the handler answers the operator at once with nothing
# ("choosing in the background": the call runs torch's op, counted as a fallback with that reason) and queues the
# problem, once; as many threads as the helper answers queries at once (lists_process.helper_threads()) have the helper
# process ask the lists and rank (Note [lists in a helper process] in lists_process.py: B's query opens a CUDA stream
# capture, which fails the model's own synchronizing calls if it happens in the model's process; Note [ranking in the
# helper]: ranking here took the GIL from the model's steps), keep the ranking (and measure_top_k's shortlist) and ask
# the registry to ask again (backend.pinned_ask_again; until then the problem's calls take torch's op without asking
# again: Note [asked again] in csrc/pinned). The problem's next call gets the answer on the operator's own thread:
# predict's ranking, whose first that builds the registry builds and runs; measure_top_k's shortlist timed there, on its
# GPU, the fastest kept. No thread builds a plan. What a thread cannot rank stays on torch's op, the decision saying
# why. $CUDNN_ALGOS_UNSEEN_LOG names a file that gets a line per answer, flushed before the operator runs it (the last
# line before a crash names the problem and configuration). wait() blocks until nothing is queued; close() stops the
# threads and the helper (undo(), the next apply(), and at exit, so that no thread is inside cuDNN when the interpreter
# goes).
BACKGROUND_WHY = "no stored winner; the selector is choosing in the background (torch's op meanwhile)"

# Note [runtime-compiled candidates later]: k="auto"'s shortlist (Note [the automatic shortlist]) may add engines
# that compile at run time (cuDNN's behaviour note RUNTIME_COMPILATION: NVRTC and a module load per plan, ~0.1-1 s
# of host time each); built with the rest on the operator's thread they made a model's first cycles 10x longer. So
# the operator's thread builds and times the shortlist without them (auto_parts; a known configuration the lists
# did not mark is built with runtime compilation off, and one that comes back SKIPPED_RUNTIME_COMPILATION joins
# them) and answers its fastest at once; one more thread of this process ("cudnn_algos-later") builds them, one
# problem at a time (its candidates compiled by up to LATER_BUILD_THREADS threads), with the GIL released. When one
# built, the problem's winner is forgotten (backend.pinned_ask_again with forget_origin) and its next call, on the
# operator's thread, times the winner's plan and theirs on the same fresh operands and answers the fastest, every
# plan already built (Note [plans the handler built] in csrc/pinned/pinned.h): the decision is replaced by that one
# (Decision.later). A later candidate that does not build is dropped; the winner stays. wait() waits for these
# builds too.
LATER_THREAD = "cudnn_algos-later"
LATER_BUILD_THREADS = 4  # a problem's later candidates are compiled by up to this many threads at once
CHECKED_TRIES = 3  # Note [a candidate's output checked]: predict's unlisted firsts built and checked, at most
FORGET_TRIES = 200  # x 10 ms: how long the later thread waits for the operator to store the first answer
MEASURED = "measured_top_k"  # the origin of measure_top_k's answers (the registry's winners, the decisions)


LOG_ENV = "CUDNN_ALGOS_UNSEEN_LOG"


def _answer(ranked: Sequence[Candidate], origin: str, plan: Any = None) -> backend.MissAnswer:
    """The operator's answer: configurations most preferred first, origin, and where the first's plan is built (a
    backend.Plan) its extension object (Note [plans the handler built])."""
    configs = [(c.engine_id, c.knobs) for c in ranked]  # the knobs' shared tuples (Note [few objects per reply])
    return backend.MissAnswer(configs, origin, built=() if plan is None else [getattr(plan, "live", plan)])


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
        self._workers: list[threading.Thread] = []  # the choosing threads (background)
        # Note [runtime-compiled candidates later]: what the later thread builds, and what it built for a next call
        self._later: queue.Queue = queue.Queue()
        self._later_worker: threading.Thread | None = None
        self._at_exit = False  # close() registered at exit (with the first thread)
        self._later_ready: dict[str, tuple[list[Candidate], Any, list[tuple[Candidate, Any]], float]] = {}
        self._closed = False

    def __call__(self, q: Any) -> backend.MissAnswer:
        """Configurations, origin and why, and where measure_top_k built the first configuration's plan, that plan
        (Note [plans the handler built] in csrc/pinned/pinned.h: not built again)."""
        t0 = time.perf_counter()
        with self._lock:
            built_later = self._later_ready.pop(q.key, None)
        if built_later is not None:
            return self._answer_later(q, built_later, t0)
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
                return backend.MissAnswer(why=self._not_chosen(q, t0, self._nothing_why()))
            origin, timed, plan, later = "predicted", (), None, []
            if self.mode == "measure_top_k":
                ranked, timed, plan, later, wrong = self.timed(q, ranked, short)
                origin = MEASURED
            else:
                ranked, plan, wrong = self._checked(q, ranked)
            if not ranked:
                return backend.MissAnswer(why=self._not_chosen(q, t0, self._all_wrong_why(wrong)))
        except Exception as e:  # noqa: BLE001 (the operator's call must go on: torch's op runs, the reason kept)
            return backend.MissAnswer(why=self._not_chosen(q, t0, self._failed_why(e)))
        self.decisions.append(Decision(q.key, tuple(c.name for c in ranked), origin, time.perf_counter() - t0,
                                       tuple(timed), query_ms=query_ms, wrong=tuple(wrong)))
        if later:
            self._defer(q, ranked, plan, later)
        _log_answer(q.key, origin, ranked)
        return _answer(ranked, origin, plan)

    def _not_chosen(self, q: Any, t0: float, why: str) -> str:
        """A problem left on torch's op: its decision says why (returned)."""
        self.decisions.append(Decision(q.key, (), "", time.perf_counter() - t0, why=why))
        return why

    def _nothing_why(self) -> str:
        return f"no configuration of the heuristic lists {'/'.join(self.lists)} that torch would accept"

    @staticmethod
    def _all_wrong_why(wrong: Sequence[str]) -> str:
        if not wrong:
            return "no configuration offered that a heuristic list named or that was built and checked"
        return (f"every configuration tried computed a wrong output ({', '.join(wrong)}; Note [a candidate's output "
                "checked])")

    def _checked(self, q: Any, ranked: list[Candidate]) -> tuple[list[Candidate], Any, list[str]]:
        """Note [a candidate's output checked] (shortlist_clock.py): predict's first, where no heuristic list offered
        it, built and its output checked before it is answered; one that is wrong, does not build or cannot be
        checked is passed over (at most CHECKED_TRIES of them, then only listed ones remain). Configurations no list
        offered are left out after the answered first (the operator would build them unchecked were the first to
        fail). Returns (the ranking answered, the first's plan where it was built here, the wrong ones' names)."""
        wrong: list[str] = []
        for _ in range(CHECKED_TRIES):
            if not ranked or ranked[0].listed:
                break
            c, ranked = ranked[0], ranked[1:]
            try:
                plan = build(q, [c], True).get(c)
                err = check_plans(q, [plan])[0] if plan is not None and plan.status == "SUCCESS" else None
            except Exception:  # noqa: BLE001 (a configuration that cannot be checked is not run)
                plan, err = None, None
            if err is not None and not wrong_output(err):
                return [c] + [x for x in ranked if x.listed], plan, wrong
            if err is not None:
                wrong.append(c.name)
        return [x for x in ranked if x.listed], None, wrong

    def _failed_why(self, e: Exception) -> str:
        return f"{self.mode} failed: {type(e).__name__}: {str(e)[:200]}"

    def _enqueue(self, q: Any) -> backend.MissAnswer:
        """Note [choosing in the background]: queued once per problem; the operator's call runs torch's op."""
        with self._lock:
            if self._closed:
                return backend.MissAnswer(why="no stored winner; the selector's background threads were stopped")
            if q.key not in self._queued:
                self._queued.add(q.key)
                self._queue.put(q)
                if not self._workers:
                    self._workers = [self._start(self._queue, self._choose, f"cudnn_algos-selector-{i}")
                                     for i in range(self.threads)]
        return backend.MissAnswer(why=BACKGROUND_WHY)

    def _start(self, qu: queue.Queue, fn: Any, name: str) -> threading.Thread:
        """A daemon thread serving `qu` with fn (self._lock held); the first one registers close() at exit, so that
        no thread is inside cuDNN when the interpreter goes."""
        if not self._at_exit:
            self._at_exit = True
            atexit.register(self.close)
        t = threading.Thread(target=self._serve, args=(qu, fn), name=name, daemon=True)
        t.start()
        return t

    @staticmethod
    def _serve(qu: queue.Queue, fn: Any) -> None:
        """A worker thread's loop: fn(item) for each item of `qu`, until a None."""
        while True:
            item = qu.get()
            try:
                if item is None:
                    return
                fn(item)
            finally:
                qu.task_done()

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

    def _defer(self, q: Any, ranked: list[Candidate], plan: Any, later: list[Candidate]) -> None:
        """Note [runtime-compiled candidates later]: `later` queued for the later thread (started once)."""
        with self._lock:
            if self._closed:
                return
            self._later.put((q, ranked, plan, later))
            if self._later_worker is None:
                self._later_worker = self._start(self._later, lambda it: self._build_later(*it), LATER_THREAD)

    def _build_later(self, q: Any, ranked: list[Candidate], plan: Any, later: list[Candidate]) -> None:
        """The later candidates built (runtime compilation on); where one built, the problem's winner forgotten so
        that its next call asks again (and _answer_later times them)."""
        t0 = time.perf_counter()
        try:
            built = [(c, p) for c, p in build(q, later, True, LATER_BUILD_THREADS).items() if p.status == "SUCCESS"]
        except Exception:  # noqa: BLE001 (what did not build is dropped: the winner stays)
            return
        with self._lock:
            if self._closed or not built:
                return
            self._later_ready[q.key] = (ranked, plan, built, time.perf_counter() - t0)
        # the operator stores the first answer after the handler returned: a build that finished before that
        # finds no winner to forget yet (its next call would not ask), so it tries again for a while
        for _ in range(FORGET_TRIES):
            if backend.pinned_ask_again(q.key, MEASURED) or self._closed:
                return
            time.sleep(0.01)

    def _answer_later(self, q: Any, later: tuple, t0: float) -> backend.MissAnswer:
        """The problem's winner (ranked[0], its plan) and the later candidates' plans timed on the same operands,
        the fastest answered; its decision replaced. Timing that fails answers the winner as before."""
        ranked, plan, built, build_s = later
        cands = [ranked[0]] + [c for c, _ in built]
        plans = [plan] + [p for _, p in built]
        try:
            ms, errs = time_plans(q, plans, self.calls, self.samples)
            fastest, ms = fastest_first(cands, ms)
        except Exception:  # noqa: BLE001 (the operator's call must go on)
            fastest, ms, errs = [], [], []
        if not fastest:
            return _answer(ranked, MEASURED, plan)
        wrong = wrong_names(cands, errs)
        order = fastest + [c for c in ranked if c not in fastest and c.name not in wrong]
        with self._lock:
            i = max((i for i, d in enumerate(self.decisions) if d.key == q.key), default=None)
            if i is not None:
                d = self.decisions[i]
                self.decisions[i] = replace(d, offered=tuple(c.name for c in order), timed_ms=tuple(ms),
                                            seconds=d.seconds + build_s + time.perf_counter() - t0, later=len(built),
                                            wrong=tuple(dict.fromkeys(d.wrong + tuple(wrong))))
        _log_answer(q.key, MEASURED, order)
        return _answer(order, MEASURED, plans[cands.index(fastest[0])])

    def forgotten(self) -> list[dict[str, Any]]:
        """The problems whose winner is forgotten until their next call times the candidates built later, as
        Applied.counts() rows of the winner they ran until then (key, origin, config)."""
        with self._lock:
            return [{"key": k, "origin": MEASURED, "config": v[0][0].name} for k, v in self._later_ready.items()]

    def wait(self, timeout: float | None = None) -> bool:
        """Blocks until every queued problem is ranked, its choice made at its next call, and every runtime-compiled
        candidate left for later is built (Note [runtime-compiled candidates later]) (True), or `timeout` seconds
        passed (False)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self._queue.unfinished_tasks or self._later.unfinished_tasks:
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
            later, self._later_worker = self._later_worker, None
            self._ready.clear()
            self._later_ready.clear()
            helper, self._helper = self._helper, None
        if helper is not None:
            helper.close()
        for qu, ws in ((self._queue, workers), (self._later, [later] if later else [])):
            while True:  # what is still queued is dropped
                try:
                    qu.get_nowait()
                    qu.task_done()
                except queue.Empty:
                    break
            for _ in ws:
                qu.put(None)
        for t in workers + ([later] if later else []):
            t.join(timeout)

    def ranked(self, q: Any) -> tuple[list[Candidate], list[Candidate], float]:
        """The heuristic lists' configurations torch would accept, the selector's predicted fastest first; the
        shortlist measure_top_k times (Selector.shortlist: its first k - 1, cuDNN's first and INSTANT's); cuDNN's
        host ms.
        Ranked in the helper process where it holds the selector (Note [ranking in the helper])."""
        from .features import problem_features

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

    def timed(self, q: Any, ranked: list[Candidate], top: list[Candidate]
              ) -> tuple[list[Candidate], list[float], Any, list[Candidate], list[str]]:
        """The shortlist `top` built, checked and timed (shortlist_clock: median over `samples` of `calls`
        back-to-back calls, device events, fresh random operands): (the timed fastest first, then the rest in the
        selector's order but those that were wrong (Note [a candidate's output checked]); their ms; the fastest's
        plan or None; the candidates left for later; the wrong ones' names). With k="auto" the runtime-compiled
        additions are left for later (Note [runtime-compiled candidates later])."""
        if self.k == AUTO:
            now, later = auto_parts(top, lambda c: c.compiled)
            built = {**build(q, now[:AUTO_FIRST], True), **build(q, now[AUTO_FIRST:], False)}
            skipped = [c for c in now if getattr(built.get(c), "status", "") == SKIPPED_RUNTIME_COMPILATION]
            now, later = [c for c in now if c not in skipped], later + skipped
        else:
            now, later, built = top, [], build(q, top, True)
        ms, errs = time_plans(q, [built.get(c) for c in now], self.calls, self.samples)
        fastest, ms = fastest_first(now, ms)
        wrong = wrong_names(now, errs)
        plan = built.get(fastest[0]) if fastest else None
        rest = [c for c in ranked if c not in fastest and c.listed and c.name not in wrong]  # as predict's
        return fastest + rest, ms, plan, later, wrong


def check_unseen(unseen: Any, k: Any) -> None:
    """apply()'s unseen and k arguments (ValueError naming the argument and value)."""
    if not isinstance(unseen, str) or unseen not in UNSEEN:
        raise ValueError(f"unseen={unseen!r} must be one of: {', '.join(map(repr, UNSEEN))}")
    if k != AUTO and (isinstance(k, bool) or not isinstance(k, int) or k < 1):
        raise ValueError(f"k={k!r} must be an int >= 1 (how many predicted configurations measure_top_k times) or "
                         "'auto' (as many as the selector's predictions leave close: Note [the automatic shortlist])")


__all__ = ["UNSEEN", "CANDIDATE_LISTS", "Candidate", "Decision", "UnseenHandler", "query_problem", "candidates_of",
           "check_unseen", "LATER_THREAD"]
