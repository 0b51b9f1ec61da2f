"""Running one benchmark mode in a fresh process (torch keeps the first plan per problem for a process's life):
the benchmark script calls itself with worker arguments and reads the JSON line the worker prints last."""
from __future__ import annotations

import json
import subprocess
import sys


def run_worker(script: str, args: list[str], timeout: float) -> dict:
    """`python script *args` in a fresh process -> the last JSON line it printed, or {"error": its last stderr line}."""
    try:
        p = subprocess.run([sys.executable, script, *args], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    if p.returncode != 0 or not lines:
        return {"error": (p.stderr.strip().splitlines() or ["no output"])[-1][:300]}
    return json.loads(lines[-1])
