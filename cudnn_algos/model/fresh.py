"""Fresh processes started ahead of their work. A profile needs three fresh python processes after its search (torch's
op with benchmark off, and the whole model's step with benchmark off and on); each spends seconds importing torch
before it touches the GPU. Started when the profile starts, they import while the search runs and then wait, having
made no CUDA call, for one line on stdin: the arguments of their module's ``_main``. What they measure is what a fresh
process measures: importing torch creates no CUDA context and no cuDNN plan.

    python -m cudnn_algos.model.fresh MODULE      # imports MODULE, reads one JSON list, runs MODULE._main(list)
"""
from __future__ import annotations

import importlib
import json
import subprocess
import sys

# what a pre-started process may run (a line on its stdin names no module: the module is fixed at its start)
MODULES = ("cudnn_algos.model.torch_off", "cudnn_algos.model.benchmark_mode")


class Waiting:
    """One python process that imported `module` and waits for its arguments (``run``). ``close`` ends it unused."""

    def __init__(self, module: str):
        if module not in MODULES:
            raise ValueError(f"module must be one of {MODULES}, got {module!r}")
        self.module = module
        self.proc = subprocess.Popen([sys.executable, "-m", __name__, module], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def run(self, argv: list[str], timeout: float) -> subprocess.CompletedProcess:
        """Hands the process its arguments and waits for it to finish (killed after `timeout` s, which raises
        subprocess.TimeoutExpired as subprocess.run does)."""
        try:
            out, err = self.proc.communicate(json.dumps([str(a) for a in argv]) + "\n", timeout=timeout)
        except subprocess.TimeoutExpired:
            self.close()
            raise
        except (BrokenPipeError, OSError):  # it died while waiting (killed, out of memory): say how it ended
            out, err = "", f"the pre-started process ended before its work (exit {self.proc.wait()})"
        return subprocess.CompletedProcess(self.proc.args, self.proc.returncode, out, err)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


def run_fresh(module: str, argv: list[str], timeout: float, waiting: Waiting | None = None
              ) -> subprocess.CompletedProcess:
    """``python -m module *argv`` in a fresh process, or in `waiting` (started before, for this module)."""
    if waiting is None:
        return subprocess.run([sys.executable, "-m", module, *map(str, argv)], capture_output=True, text=True,
                              timeout=timeout)
    if waiting.module != module:
        raise ValueError(f"the waiting process was started for {waiting.module}, not {module}")
    return waiting.run(argv, timeout)


class Prestarted:
    """Named waiting processes (name -> module), started together; ``take(name)`` hands one over (or None where
    none was started); leaving the ``with`` block ends those never taken (and any left running)."""

    def __init__(self, wanted: dict[str, str]):
        self._waiting: dict[str, Waiting] = {}
        self._taken: list[Waiting] = []
        try:
            for name, module in wanted.items():
                self._waiting[name] = Waiting(module)
        except BaseException:
            self.close()
            raise

    def take(self, name: str) -> Waiting | None:
        w = self._waiting.pop(name, None)
        if w is not None:
            self._taken.append(w)
        return w

    def close(self) -> None:
        for w in [*self._waiting.values(), *self._taken]:
            w.close()
        self._waiting.clear()
        self._taken.clear()

    def __enter__(self) -> "Prestarted":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _main(argv: list[str]) -> int:
    if len(argv) != 1 or argv[0] not in MODULES:
        print(f"usage: python -m {__name__} MODULE (one of {', '.join(MODULES)})", file=sys.stderr)
        return 2
    mod = importlib.import_module(argv[0])
    line = sys.stdin.readline()
    if not line.strip():  # closed unused
        return 0
    mod._main(json.loads(line))
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
