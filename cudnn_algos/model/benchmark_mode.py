"""Benchmark mode on a whole model: the step time with cudnn.benchmark off and on, each in a fresh process (torch
keeps the first cuDNN plan it picks for each shape for a process's life, so one process cannot compare the two),
and each mode's first step (its warm-up: benchmark mode's search of every new shape).

The fresh process runs this module (``python -m cudnn_algos.model.benchmark_mode``) and times its steps with the same
``step_times`` as the in-process measurement."""
from __future__ import annotations

import copy
import os
import statistics
import sys
import tempfile
import time
from typing import Any

import torch

from ..measure import cudnn_benchmark
from ..results import EndToEnd
from .fresh import Waiting, run_fresh


def example_to(example_input: Any, device: str, dtype: torch.dtype | None, fmt: str | None):
    """The example input on `device`, floating tensors in `dtype`, 4-/5-d tensors in layout `fmt`."""
    def conv(x):
        if isinstance(x, torch.Tensor):
            x = x.to(device=device, dtype=dtype if (dtype and x.is_floating_point()) else x.dtype)
            if fmt and fmt != "contiguous" and x.dim() in (4, 5):
                x = x.contiguous(memory_format=torch.channels_last if x.dim() == 4 else torch.channels_last_3d)
            return x
        if isinstance(x, tuple):
            return tuple(conv(v) for v in x)
        return x

    return conv(example_input)


def model_to(model: torch.nn.Module, device: str, dtype: torch.dtype | None, fmt: str | None):
    """A copy of `model` on `device`, in `dtype` and layout `fmt`."""
    m = copy.deepcopy(model).to(device=device)
    if dtype is not None:
        m = m.to(dtype=dtype)
    if fmt and fmt != "contiguous":
        m = m.to(memory_format=torch.channels_last if fmt == "channels_last" else torch.channels_last_3d)
    return m


def step(model, inp, backward: bool) -> None:
    """One forward (and with `backward`, backward of the output's sum) pass; gradients dropped after."""
    with torch.enable_grad() if backward else torch.no_grad():
        out = model(*inp) if isinstance(inp, tuple) else model(inp)
        if backward:
            out = out[0] if isinstance(out, (tuple, list)) else out
            out.float().sum().backward()
    model.zero_grad(set_to_none=True)


def step_times(model, inp, backward: bool, iterations: int, device: int, warmup: int = 2) -> tuple[float, float]:
    """(seconds of the first step, median event-timed ms of `iterations` steps after `warmup` more) under the
    benchmark flag as set."""
    torch.cuda.synchronize(device)
    t0 = time.perf_counter()
    step(model, inp, backward)
    torch.cuda.synchronize(device)
    first = time.perf_counter() - t0
    for _ in range(warmup):
        step(model, inp, backward)
    torch.cuda.synchronize(device)
    times = []
    for _ in range(iterations):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        step(model, inp, backward)
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e))
    return first, statistics.median(times)


def time_steps(model, inp, backward: bool, iterations: int, benchmark: bool, device: int) -> float:
    """Median step time (ms) with cudnn.benchmark set, after 3 warm-up steps (the first one runs any search)."""
    with cudnn_benchmark(benchmark):
        return step_times(model, inp, backward, iterations, device)[1]


def steps_fresh_process(model_file: str, input_file: str, backward: bool, benchmark: bool, device: int,
                        iterations: int = 10, timeout: float = 600, waiting: Waiting | None = None
                        ) -> tuple[float, float]:
    """(seconds for the first step, median ms of the next `iterations` steps after 2 more warm-up steps) in a fresh
    python process (cuDNN loading included in the first step) with cudnn.benchmark set from the start; `waiting`:
    that process, started before (fresh.Waiting for this module)."""
    r = run_fresh("cudnn_algos.model.benchmark_mode", [model_file, input_file, int(backward), int(benchmark),
                                                       int(device), int(iterations)], timeout, waiting)
    got = {}
    for line in r.stdout.splitlines():
        k, _, v = line.partition(" ")
        if k in ("FIRST_STEP_S", "STEP_MS"):
            got[k] = float(v)
    if len(got) != 2:
        raise RuntimeError("fresh-process steps failed: "
                           f"{r.stderr.strip().splitlines()[-1] if r.stderr.strip() else r.returncode}")
    return got["FIRST_STEP_S"], got["STEP_MS"]


def end_to_end(model, example_input, *, backward: bool, dtype, fmt, device: int, iterations: int = 10,
               fresh_process: bool = True, waiting: tuple[Waiting | None, Waiting | None] = (None, None)
               ) -> EndToEnd:
    """Benchmark mode off vs on for the whole model, each in its own fresh process (`waiting`: the two, off and on,
    started before). Without a fresh process (or a model that cannot be saved for one), only the step time with
    benchmark off is measured here: this process cannot run benchmark mode's choice for shapes torch has already
    planned."""
    dev = f"cuda:{device}"

    def in_process(note: str) -> EndToEnd:
        m, inp = model_to(model, dev, dtype, fmt), example_to(example_input, dev, dtype, fmt)
        off = time_steps(m, inp, backward, iterations, torch.backends.cudnn.benchmark, device)
        mode = "on" if torch.backends.cudnn.benchmark else "off"
        return EndToEnd(backward=backward, iterations=iterations, step_ms_off=off if mode == "off" else None,
                        step_ms_on=off if mode == "on" else None, where="this process",
                        note=f"{note}; measured in this process with benchmark {mode} only")

    if not fresh_process:
        return in_process("fresh-process measurement disabled")
    with tempfile.TemporaryDirectory() as d:
        mf, xf = os.path.join(d, "model.pt"), os.path.join(d, "input.pt")
        try:
            torch.save(model_to(model, "cpu", dtype, fmt), mf)
            torch.save(example_to(example_input, "cpu", dtype, fmt), xf)
        except Exception as ex:  # e.g. a model class defined in __main__ or a lambda inside
            return in_process(f"the model could not be saved for a fresh process ({type(ex).__name__})")
        try:
            first_off, off = steps_fresh_process(mf, xf, backward, False, device, iterations, waiting=waiting[0])
            first_on, on = steps_fresh_process(mf, xf, backward, True, device, iterations, waiting=waiting[1])
        except Exception as ex:
            return in_process(str(ex)[:200])
    return EndToEnd(backward=backward, iterations=iterations, step_ms_off=off, step_ms_on=on,
                    first_step_s_off=first_off, first_step_s_on=first_on)


def _main(argv: list[str]) -> None:
    """The fresh process: MODEL_FILE INPUT_FILE BACKWARD BENCHMARK DEVICE ITERATIONS (flags as 0/1)."""
    model_file, input_file, backward, benchmark, device, iterations = argv
    torch.backends.cudnn.benchmark = bool(int(benchmark))
    dev = int(device)
    m = torch.load(model_file, weights_only=False)
    x = torch.load(input_file, weights_only=False)
    torch.zeros(1, device=f"cuda:{dev}")  # the CUDA context exists before the clock starts
    torch.cuda.synchronize(dev)
    m = m.to(f"cuda:{dev}")
    x = tuple(v.to(f"cuda:{dev}") for v in x) if isinstance(x, tuple) else x.to(f"cuda:{dev}")
    first, steady = step_times(m, x, bool(int(backward)), int(iterations), dev)
    print("FIRST_STEP_S", first)
    print("STEP_MS", steady)


if __name__ == "__main__":
    _main(sys.argv[1:])
