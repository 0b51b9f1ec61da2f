"""Running one benchmark mode in a fresh process (torch keeps the first plan per problem for a process's life):
the benchmark script calls itself with worker arguments and reads the JSON line the worker prints last. And the
process's own host memory, for the benchmarks that watch it; and switching a model between torch's op and apply()
inside one process (the paired comparisons)."""
from __future__ import annotations

import ctypes
import gc
import json
import subprocess
import sys
import time


def run_worker(script: str, args: list[str], timeout: float) -> dict:
    """`python script *args` in a fresh process -> the last JSON line it printed, or {"error": its last stderr line}."""
    try:
        p = subprocess.run([sys.executable, script, *args], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    if p.returncode != 0 or not lines:
        err = p.stderr.strip().splitlines() or ["no output"]
        # the last line alone hides a CUDA error's message (it ends in torch's TORCH_USE_CUDA_DSA advice)
        named = next((ln for ln in reversed(err) if "Error" in ln), err[-1])
        return {"error": named[:300], "returncode": p.returncode, "stderr_tail": err[-40:]}
    return json.loads(lines[-1])


class GcClock:
    """Python's garbage collector in this process since the clock was made (gc.callbacks): seconds spent collecting,
    and how many collections of the oldest generation (the ones that walk every tracked object)."""

    def __init__(self):
        self.seconds, self.oldest = 0.0, 0
        self._t0 = 0.0
        gc.callbacks.append(self._callback)

    def _callback(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._t0 = time.perf_counter()
            return
        self.seconds += time.perf_counter() - self._t0
        self.oldest += info.get("generation") == 2

    def close(self) -> None:
        """Stops counting (the callback removed)."""
        if self._callback in gc.callbacks:
            gc.callbacks.remove(self._callback)


def parse_cpulist(text: str) -> set[int]:
    """sysfs's CPU list format ("0-3,8,10-11") -> the set of CPU numbers."""
    cpus: set[int] = set()
    for part in text.strip().split(","):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        cpus.update(range(int(lo), int(hi or lo) + 1))
    return cpus


def pin_to_gpu_cpus(device: int = 0) -> list[int] | None:
    """Pins this process to the CPUs local to `device` (its PCI device's NUMA node, read from sysfs) among those it
    may use, so that every mode's fresh process runs its host work on the same cores: a host-bound step's time moved
    by up to 40% between fresh processes of one mode on the H200 (fp16 ResNet-50 batch 32: 19.05 and 27.29 ms).
    Returns the CPUs, or None where sysfs or the device does not say (nothing changed)."""
    import os

    import torch

    try:
        p = torch.cuda.get_device_properties(device)
        bus = f"{p.pci_domain_id:04x}:{p.pci_bus_id:02x}:{p.pci_device_id:02x}.0"
        with open(f"/sys/bus/pci/devices/{bus}/local_cpulist") as f:
            local = parse_cpulist(f.read())
        cpus = sorted(local & os.sched_getaffinity(0))
        if not cpus:
            return None
        os.sched_setaffinity(0, cpus)
        return cpus
    except (AttributeError, OSError, ValueError, RuntimeError):
        return None


def rss_mb() -> float:
    """This process's resident set, MB."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def rss_kept_mb() -> float:
    """RSS after Python's cycle collector ran and glibc returned its free pages (malloc_trim): memory something still
    holds, not garbage waiting for a collection or free heap the allocator kept."""
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass
    return rss_mb()


def forward_switch(model):
    """After cudnn_algos.apply(model): a function use(applied) that gives the modules apply() patched their own
    forward back (False) or apply()'s again (True), touching neither the operator's plans nor its chooser."""
    patched = {m: m.__dict__["forward"] for m in model.modules() if "forward" in m.__dict__}

    def use(applied: bool) -> None:
        for m, f in patched.items():
            if applied:
                m.forward = f
            else:
                m.__dict__.pop("forward", None)

    return use


def block_order(blocks: int) -> list[bool]:
    """Paired blocks, `blocks` of them (a multiple of 4, at least 4): torch's op (False), apply (True), apply, torch,
    ... so each apply block has a torch block beside it and neither runs always first (paired_ratios pairs them)."""
    return [False, True, True, False] * max(1, blocks // 4)


def paired_ratios(torch_ms: list[float], apply_ms: list[float]) -> list[float]:
    """Blocks ran in block_order: each apply block over the torch block beside it (its pair)."""
    return [y / x for x, y in zip(torch_ms, apply_ms)]
