"""cuDNN's heuristic lists asked in a helper process, for apply()'s unseen-problem handler (choose/unseen.py).

Note [lists in a helper process]: cuDNN's heuristic list B begins a CUDA stream capture inside its query. While the
capture is open, a synchronizing CUDA call on any other thread of the process (torch.cuda.synchronize, a cudaMalloc, a
blocking copy) fails with cudaErrorStreamCaptureUnsupported ("operation not permitted when stream is capturing"), which
ends the training step that made it. benchmarks/heuristic_threads.py shows it: threads asking B beside a model's
training steps failed the model's synchronize within seconds; threads asking INSTANT, A or FALLBACK ran tens of
thousands of queries beside it clean (docs/results/selector-2026-12-01-to-03.md). A capture belongs to one process, so
the handler asks the lists in a helper process with a CUDA context of its own: the model's process never holds B's
capture. The helper is a plain ``python -c`` running main() below (not multiprocessing, whose spawn would import the
user's main script again), answering over a socket pair, $CUDNN_ALGOS_LISTS_THREADS queries at once (default 3), each a
numbered query in (the ConvProblem pickled as its constructor's arguments), the configurations the lists name out with
that number (a backend.Plan's fields, none built; or ranked: below). It starts when the handler is made (apply()) and
needs a few seconds to import torch; a query waits for it. Its cost: one CUDA context on each GPU it is asked about
(about 0.5 GB of GPU memory), while the handler lives. The helper ends when the socket closes (the handler's close(), or
the model's process ending).

Note [ranking in the helper]: the selector's ranking of a problem's candidates (choose/ranking.py) costs 1-2 ms of CPU
with the GIL held (benchmarks/selector_speed.py); in the model's process, background threads ranking while a host-bound
training step runs took that time from the step (docs/results/selector-2026-12-01-to-03.md). So the handler gives the
helper its selector once (its arrays, as the .npz file holds them: set_selector) and asks "rank" queries: the helper
asks the lists, ranks, and replies the ranking and measure_top_k's shortlist as plain rows. The model's process then
only sends, waits (the GIL released) and reads a short reply. A selector the file cannot carry (a subclass, a stand-in)
ranks in the model's
process as before."""
from __future__ import annotations

import os
import queue
import socket
import subprocess
import sys
import threading
import time
from multiprocessing.connection import Connection
from typing import Any, Sequence

from .model import AUTO

_ENTRY = "import sys; from cudnn_algos.choose.lists_process import main; sys.exit(main(sys.argv[1:]))"
START_TIMEOUT_S = 180.0  # the helper's start (torch's import) and its first answer
ASK_TIMEOUT_S = 60.0  # one query's answer, once started
# Queries the helper answers at once: $CUDNN_ALGOS_LISTS_THREADS, default 3 (on the H200 three at once took cuDNN
# the same ~24 ms each as one at a time: docs/results/selector-2026-12-01-to-03.md).
THREADS_ENV = "CUDNN_ALGOS_LISTS_THREADS"
DEFAULT_THREADS = 3


def helper_threads() -> int:
    """$CUDNN_ALGOS_LISTS_THREADS as a count >= 1 (DEFAULT_THREADS where unset, 1 where not a positive integer)."""
    try:
        return max(1, int(os.environ.get(THREADS_ENV, str(DEFAULT_THREADS))))
    except ValueError:
        return 1


class ListsProcessError(RuntimeError):
    """The helper process could not answer (it did not start, ended, or its query failed): the message says which."""


class ListsProcess:
    """The helper process (Note [lists in a helper process]): ask() (the lists) or rank() (the lists ranked by the
    selector set_selector() gave: Note [ranking in the helper]) sends one query and waits for its answer; the helper
    answers up to `threads` queries at once, each reply matched to its query by number. Started at construction;
    close() ends it."""

    def __init__(self, python: str | None = None, threads: int | None = None, conn: Connection | None = None):
        """Starts the helper (`python`: that interpreter, default this one; `threads`: queries it answers at once,
        default helper_threads()); conn: no process, answers from whatever serves the other end of this connection
        (the CPU tests: serve() in a thread)."""
        self._lock = threading.Lock()  # the state below; sending (one sender at a time on the socket)
        self._started_at = time.monotonic()
        self._answered = False
        self._ended = ""  # why the helper can answer no more ("" while it can)
        self._next = 0
        self._waiting: dict[int, list] = {}  # query number -> [Event, reply]
        self._proc: subprocess.Popen | None = None
        self._conn_open = True  # until the reader closes it (Note [the reader closes])
        self._shut = False  # _end() shuts the socket down once
        if conn is not None:
            self._conn = conn
        else:
            self._conn = self._start(python, helper_threads() if threads is None else threads)
        self._reader = threading.Thread(target=self._read, name="cudnn_algos-lists-reader", daemon=True)
        self._reader.start()

    def _start(self, python: str | None, threads: int) -> Connection:
        ours, theirs = socket.socketpair()
        try:
            self._proc = subprocess.Popen(
                [python or sys.executable, "-c", _ENTRY, str(theirs.fileno()), str(max(1, int(threads)))],
                pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                env=_helper_env())
        except OSError as e:
            ours.close()
            raise ListsProcessError(f"the helper process did not start: {e}") from e
        finally:
            theirs.close()
        return Connection(ours.detach())

    def ask(self, direction: str, problem: Any, lists: Sequence[str], device: int) -> tuple[list[Any], float]:
        """The configurations `lists` name for `problem` (a backend ConvProblem) in `direction` on GPU `device`, in
        the lists' order (backend.Plan rows, none built), and cuDNN's host ms for the query (ListsProcessError where
        the helper cannot answer)."""
        return plans_of(self._request(("lists", str(direction), problem, tuple(lists), int(device))))

    def set_selector(self, data: bytes) -> None:
        """Gives the helper the selector that rank() ranks with (Selector.to_bytes: its arrays, nothing pickled)."""
        with self._lock:
            if not self._ended:
                try:
                    self._conn.send(("selector", bytes(data)))
                except OSError:
                    pass  # the reader sees the helper gone; the next query says why

    def rank(self, direction: str, problem: Any, lists: Sequence[str], device: int, features: Sequence[float],
             dtype: str, deterministic: bool, allow_tf32: bool, shortlist_k: int | str = 0, memory_format: str = ""
             ) -> tuple[list[Any], list[Any], float]:
        """Note [ranking in the helper]: the lists' configurations torch would accept (ranking.candidates_of) and
        the selector's known configurations of the problem's class (Note [known configurations]; memory_format
        names the class), in the order of the selector set_selector() gave, the shortlist of shortlist_k (0:
        none; "auto": Note [the automatic shortlist]), as ranking.Candidate, and cuDNN's host ms for the lists
        (ListsProcessError where the helper cannot answer)."""
        reply = self._request(("rank", str(direction), problem, tuple(lists), int(device),
                               [float(f) for f in features], str(dtype), bool(deterministic), bool(allow_tf32),
                               shortlist_k if shortlist_k == AUTO else int(shortlist_k), str(memory_format)))
        return ranking_of(reply)

    def _request(self, query: tuple) -> tuple:
        """Sends `query` numbered, waits for its reply (ListsProcessError where none comes)."""
        with self._lock:
            if self._ended:
                raise ListsProcessError(f"the helper process asking cuDNN's lists: {self._ended}")
            n, self._next = self._next, self._next + 1
            slot = self._waiting[n] = [threading.Event(), None]
            timeout = ASK_TIMEOUT_S if self._answered else START_TIMEOUT_S - (time.monotonic() - self._started_at)
            try:
                self._conn.send((n, *query))
            except OSError:
                pass  # the reader sees the helper gone and wakes every query with the reason
        timeout = max(timeout, 1.0)
        if not slot[0].wait(timeout):
            self._end(f"no answer in {timeout:.0f} s")
        with self._lock:
            self._waiting.pop(n, None)
            reply = slot[1]
            if reply is None:
                raise ListsProcessError(f"the helper process asking cuDNN's lists: {self._ended}")
            self._answered = True
        return reply

    def _read(self) -> None:
        """The reader thread: each reply to the query waiting for it; at the socket's end, the socket closed (Note
        [the reader closes]) and every query woken."""
        while True:
            try:
                n, reply = self._conn.recv()
            except (EOFError, OSError, TypeError, ValueError):
                break
            with self._lock:
                slot = self._waiting.get(n)
                if slot is not None:
                    slot[1] = reply
                    slot[0].set()
        with self._lock:  # (under the lock: _end() shuts down a descriptor still open, never one reused)
            self._conn_open = False
            try:
                self._conn.close()
            except OSError:
                pass
        self._end(self._ended_why() or "its answers stopped")

    def _ended_why(self) -> str:
        """'it ended (exit status N)' where the helper has ended (waiting briefly: its socket closes as it exits)."""
        p = self._proc
        try:
            code = p.wait(2) if p is not None else None
        except subprocess.TimeoutExpired:
            code = None
        return "" if code is None else f"it ended (exit status {code})"

    # Note [the reader closes]: the socket's descriptor is closed by the reader thread alone, after its last recv.
    # Closed from another thread (close(), a query's timeout) while the reader was between two reads of a message, the
    # descriptor number could be reused at once (the next file this process opens), and the reader's next read took
    # that file's bytes (a selector's .npz read beside it failed its CRC in the CPU tests under pytest-xdist). _end()
    # only shuts the socket down, once: that wakes the reader's recv (its end of the socket then reads as ended), and
    # the helper sees the end too; the reader then closes.
    def _end(self, why: str) -> None:
        """No more queries (the first reason kept): the socket shut down (the reader closes it), waiting queries
        woken, the helper ended."""
        with self._lock:
            if not self._ended:
                self._ended = why
            for slot in self._waiting.values():
                slot[0].set()
            p, self._proc = self._proc, None
            if self._conn_open and not self._shut:
                self._shut = True
                try:
                    sock = socket.socket(fileno=os.dup(self._conn.fileno()))
                    try:
                        sock.shutdown(socket.SHUT_RDWR)
                    finally:
                        sock.close()
                except OSError:
                    pass
        if p is not None:
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(5)

    def close(self) -> None:
        """Ends the helper (its socket shut down: it exits after the queries it is answering) and waits briefly for
        the reader to close the socket."""
        self._end("it was closed")
        if threading.current_thread() is not self._reader:
            self._reader.join(5)

    @property
    def pid(self) -> int | None:
        p = self._proc
        return p.pid if p is not None else None


def _helper_env() -> dict[str, str]:
    """The model's environment (the same GPUs, by the same numbers), with the package importable from where this
    module was imported and no unseen-problem log (the model's process writes it)."""
    env = dict(os.environ)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.pop("CUDNN_ALGOS_UNSEEN_LOG", None)
    return env


def plans_of(reply: tuple) -> tuple[list[Any], float]:
    """A reply of answer() as (backend.Plan rows, none built; host ms); ListsProcessError saying why for an error
    reply."""
    from .. import backend

    if reply[0] != "ok":
        raise ListsProcessError(f"cuDNN's lists in the helper process: {reply[1]}")
    return [backend.Plan(engine_id=int(e), knobs=tuple((int(t), int(v)) for t, v in kn),
                         numerical_notes=tuple(int(n) for n in nn), behavior_notes=tuple(int(n) for n in bn),
                         sources=tuple(str(x) for x in src), heuristic_ranks=tuple((str(x), int(r)) for x, r in rk),
                         status=str(st), stage=str(sg), workspace_bytes=int(ws), plan_json="")
            for e, kn, nn, bn, src, rk, st, sg, ws in reply[1]], float(reply[2])


def ranking_of(reply: tuple) -> tuple[list[Any], list[Any], float]:
    """A reply of answer() to a "rank" query as (ranked, shortlist: ranking.Candidate; host ms); ListsProcessError
    saying why for an error reply."""
    from .ranking import Candidate

    if reply[0] != "ok":
        raise ListsProcessError(f"cuDNN's lists in the helper process: {reply[1]}")
    return [Candidate.from_row(r) for r in reply[1]], [Candidate.from_row(r) for r in reply[2]], float(reply[3])


def answer(query: tuple, engine_search: Any, selector: Any = None) -> tuple:
    """One query's reply. ("lists", direction, problem, lists, device) after its number: ("ok", rows, host ms);
    ("rank", ..., features, dtype, deterministic, allow_tf32, shortlist k): ("ok", ranked rows, shortlist rows,
    host ms), ranked by `selector`; either ("error", why) where it fails. engine_search: backend.engine_search's
    signature (the CPU tests give a stand-in)."""
    _, kind, direction, problem, lists, device = query[:6]  # the first: the query's number
    try:
        out = engine_search(direction, problem, list(lists), device=device, build=False)
        if kind == "rank":
            from .ranking import candidates_of, rank

            features, dtype, deterministic, allow_tf32, k, fmt = query[6:]
            if selector is None or isinstance(selector, Exception):
                raise selector or ValueError("the helper was given no selector to rank with")
            known = selector.known_for(direction, dtype, fmt, deterministic, allow_tf32)
            ranked, short = rank(candidates_of(out.plans, dtype, deterministic, allow_tf32), selector, features, k,
                                 known)
            return "ok", [c.row() for c in ranked], [c.row() for c in short], out.search_ms
        rows = [(p.engine_id, [tuple(k) for k in p.knobs], list(p.numerical_notes), list(p.behavior_notes),
                 list(p.sources), [tuple(r) for r in p.heuristic_ranks], p.status, p.stage, p.workspace_bytes)
                for p in out.plans]
        return "ok", rows, out.search_ms
    except Exception as e:  # noqa: BLE001 (the helper answers every query; the handler keeps the reason)
        first = (str(e).splitlines() or [""])[0]
        return "error", f"{type(e).__name__}: {first[:300]}"


def serve(conn: Connection, engine_search: Any, threads: int = 1) -> None:
    """The helper's loop: queries in (numbered), `threads` threads answering them, each answer out with its number,
    until the socket closes. A ("selector", bytes) message sets the selector later "rank" queries use (read in
    order with the queries: every query sent after it sees it)."""
    todo: queue.Queue = queue.Queue()
    send = threading.Lock()

    def work() -> None:
        while True:
            item = todo.get()
            if item is None:
                return
            query, selector = item
            reply = answer(query, engine_search, selector)
            try:
                with send:
                    conn.send((query[0], reply))
            except OSError:
                return

    workers = [threading.Thread(target=work, daemon=True) for _ in range(max(1, threads))]
    for t in workers:
        t.start()
    selector = None
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            break
        if msg[0] == "selector":
            selector = _selector_of(msg[1])
            continue
        todo.put((msg, selector))
    for _ in workers:
        todo.put(None)
    for t in workers:
        t.join(ASK_TIMEOUT_S)


def _selector_of(data: bytes) -> Any:
    """The selector a ("selector", bytes) message carries, or the error a "rank" query then answers with."""
    from .model import Selector

    try:
        return Selector.from_bytes(data)
    except Exception as e:  # noqa: BLE001 (the helper keeps answering; each rank query says why)
        return ValueError(f"the selector given to the helper did not load: {type(e).__name__}: {e}")


def main(argv: Sequence[str]) -> int:
    conn = Connection(int(argv[0]))
    from .. import backend  # torch and the extension: the helper's start

    serve(conn, backend.engine_search, int(argv[1]) if len(argv) > 1 else 1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
