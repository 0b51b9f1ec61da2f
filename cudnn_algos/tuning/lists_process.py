"""cuDNN's heuristic lists asked in a helper process, for apply()'s unseen-problem handler (tuning/unseen.py).

Note [lists in a helper process]: cuDNN's heuristic list B begins a CUDA stream capture inside its query. While the
capture is open, a synchronizing CUDA call on any other thread of the process (torch.cuda.synchronize, a
cudaMalloc, a blocking copy) fails with cudaErrorStreamCaptureUnsupported ("operation not permitted when stream is
capturing"), which ends the training step that made it. benchmarks/heuristic_threads.py shows it: threads asking B
beside a model's training steps failed the model's synchronize within seconds; threads asking INSTANT, A or
FALLBACK ran tens of thousands of queries beside it clean (docs/selector.md). A capture belongs to one process, so
the handler asks the lists in a helper process with a CUDA context of its own: the model's process never holds
B's capture. The helper is a plain ``python -c`` running main() below (not multiprocessing, whose spawn would
import the user's main script again), answering over a socket pair: a ConvProblem in (pickled as its
constructor's arguments), the configurations the lists name out (engine, knobs, status, notes, positions), nothing
built. It starts when the handler is made (apply()) and needs a few seconds to import torch; a query waits for it.
Its cost: one CUDA context on each GPU it is asked about (about 0.5 GB of GPU memory), while the handler lives.
The helper ends when the socket closes (the handler's close(), or the model's process ending)."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any, Sequence

_ENTRY = "import sys; from cudnn_algos.tuning.lists_process import main; sys.exit(main(sys.argv[1:]))"
START_TIMEOUT_S = 180.0  # the helper's start (torch's import) and its first answer
ASK_TIMEOUT_S = 60.0  # one query's answer, once started


class ListsProcessError(RuntimeError):
    """The helper process could not answer (it did not start, ended, or its query failed): the message says which."""


@dataclass(frozen=True)
class Listed:
    """One configuration a heuristic list named (what unseen.candidates_of reads of a backend.Plan)."""

    engine_id: int
    knobs: tuple[tuple[int, int], ...]
    status: str
    numerical_notes: tuple[int, ...]
    heuristic_ranks: tuple[tuple[str, int], ...]


class ListsProcess:
    """The helper process (Note [lists in a helper process]): ask() sends one query and waits for its answer;
    queries from several threads take turns. Started at construction; close() ends it."""

    def __init__(self, python: str | None = None):
        self._lock = threading.Lock()
        self._started_at = time.monotonic()
        self._answered = False
        self._closed = False
        ours, theirs = socket.socketpair()
        try:
            self._proc: subprocess.Popen | None = subprocess.Popen(
                [python or sys.executable, "-c", _ENTRY, str(theirs.fileno())],
                pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                env=_helper_env())
        except OSError as e:
            ours.close()
            raise ListsProcessError(f"the helper process did not start: {e}") from e
        finally:
            theirs.close()
        self._conn = Connection(ours.detach())

    def ask(self, direction: str, problem: Any, lists: Sequence[str], device: int) -> tuple[list[Listed], float]:
        """The configurations `lists` name for `problem` (a backend ConvProblem) in `direction` on GPU `device`, in
        the lists' order, and cuDNN's host ms for the query (ListsProcessError where the helper cannot answer)."""
        with self._lock:
            if self._closed or self._proc is None:
                raise ListsProcessError("the helper process was closed")
            timeout = ASK_TIMEOUT_S if self._answered else START_TIMEOUT_S - (time.monotonic() - self._started_at)
            try:
                self._conn.send(("ask", str(direction), problem, tuple(lists), int(device)))
                ready = self._conn.poll(max(timeout, 1.0))
                reply = self._conn.recv() if ready else None
            except (EOFError, OSError):
                reply = None
            if reply is None:
                why = self._ended_why() or f"no answer in {max(timeout, 1.0):.0f} s"
                self._stop()
                raise ListsProcessError(f"the helper process asking cuDNN's lists: {why}")
            self._answered = True
        return listed_of(reply)

    def _ended_why(self) -> str:
        """'it ended (exit status N)' where the helper has ended (waiting briefly: its socket closes as it exits)."""
        try:
            code = self._proc.wait(2) if self._proc is not None else None
        except subprocess.TimeoutExpired:
            code = None
        return "" if code is None else f"it ended (exit status {code})"

    def _stop(self) -> None:
        self._closed = True
        try:
            self._conn.close()
        except OSError:
            pass
        p, self._proc = self._proc, None
        if p is not None:
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(5)

    def close(self) -> None:
        """Ends the helper (its socket closed: it exits after the query it is answering)."""
        with self._lock:
            if not self._closed:
                self._stop()

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None


def _helper_env() -> dict[str, str]:
    """The model's environment (the same GPUs, by the same numbers), with the package importable from where this
    module was imported and no unseen-problem log (the model's process writes it)."""
    env = dict(os.environ)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.pop("CUDNN_ALGOS_UNSEEN_LOG", None)
    return env


def listed_of(reply: tuple) -> tuple[list[Listed], float]:
    """A reply of answer() as (configurations, host ms); ListsProcessError saying why for an error reply."""
    if reply[0] != "ok":
        raise ListsProcessError(f"cuDNN's lists in the helper process: {reply[1]}")
    return [Listed(int(e), tuple((int(t), int(v)) for t, v in kn), str(st), tuple(int(n) for n in nn),
                   tuple((str(s), int(r)) for s, r in rk)) for e, kn, st, nn, rk in reply[1]], float(reply[2])


def answer(query: tuple, engine_search: Any) -> tuple:
    """One query's reply: ("ok", rows, host ms) or ("error", why). engine_search: backend.engine_search's
    signature (the CPU tests give a stand-in)."""
    _, direction, problem, lists, device = query
    try:
        out = engine_search(direction, problem, list(lists), device=device, build=False)
        rows = [(p.engine_id, [tuple(k) for k in p.knobs], p.status, list(p.numerical_notes),
                 [tuple(r) for r in p.heuristic_ranks]) for p in out.plans]
        return "ok", rows, out.search_ms
    except Exception as e:  # noqa: BLE001 (the helper answers every query; the handler keeps the reason)
        first = (str(e).splitlines() or [""])[0]
        return "error", f"{type(e).__name__}: {first[:300]}"


def serve(conn: Connection, engine_search: Any) -> None:
    """The helper's loop: a query in, its answer out, until the socket closes."""
    while True:
        try:
            query = conn.recv()
        except (EOFError, OSError):
            return
        try:
            conn.send(answer(query, engine_search))
        except (BrokenPipeError, OSError):
            return


def main(argv: Sequence[str]) -> int:
    conn = Connection(int(argv[0]))
    from .. import backend  # torch and the extension: the helper's start

    serve(conn, backend.engine_search)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
