"""The GPU parts of the reliability table: long runs, memory pressure, threads and streams. Each part prints one row:
what ran, errors, GPU memory and host RSS before/after, and the verdict; the summary table comes last.

    python benchmarks/reliability_gpu.py --parts long,pressure,threads --calls 10000 --json out/reliability.json

long      --calls calls each of run() (a legacy algorithm and an engine plan), of a pinned convolution (apply()), of
          find (or --find-calls) and of a measured search of two exact configurations inside cudnn_algos.cupti_held()
          (or --narrow-calls), and --search-calls of find_engines(measure=True), each kind in its own phase
          measured from after its first 10 calls (one-time costs such as CUPTI's buffers and torch's cuBLAS
          workspace are shown apart), at its half and its end: GPU memory flat, host RSS growth < 10 MB, no growth
          of plans held or of cuDNN handles made.
          RSS is read after gc.collect() and malloc_trim(0) (what is still held; the raw reading is printed beside
          it), and the measured search is also run in pieces (plans only, one CUPTI session, without torch's op)
          so that a growing phase says which piece grows.
pressure  the GPU filled to all but ~64 MB first: searches (legacy and engine, measured) and pinned execution still
          complete, candidates that cannot get a workspace are rows saying so, the process lives, allocated memory
          returns to its baseline; a problem too large for the memory left is a torch.OutOfMemoryError (from torch's
          allocator, or cuDNN's own allocation failing: CudnnOutOfMemoryError, which is both), and one over
          cuDNN's 32-bit fields a ValueError before any allocation.
threads   8 threads, each on its own stream, calling find, find_engines + run, and a pinned convolution at once
          (with a second GPU visible, half of them on it): no errors, outputs identical to a serial run on the same
          GPU (and, deterministic configurations on two GPUs of one kind, to each other); a second round of 8 new
          threads makes no new cuDNN handle.
"""
from __future__ import annotations

import argparse
import dataclasses
import contextlib
import json
import sys
import threading
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402

import cudnn_algos  # noqa: E402
from fresh import rss_kept_mb, rss_mb  # noqa: E402
from cudnn_algos import backend, measure  # noqa: E402
from cudnn_algos.configs import parse_config  # noqa: E402
from cudnn_algos.problem import make_problem  # noqa: E402
from cudnn_algos.tuning import problem_key  # noqa: E402

LAYER = torch.nn.Conv2d(64, 64, 3, padding=1, bias=False)
SHAPE = (8, 64, 28, 28)


def operands(dtype=torch.float16):
    x = torch.randn(SHAPE, device="cuda", dtype=dtype)
    w = torch.randn(64, 64, 3, 3, device="cuda", dtype=dtype)
    return x, w


def pinned_layer(dtype=torch.float16, device: int = 0):
    """LAYER on GPU `device` with apply(), its three directions pinned to the first engine configuration torch
    accepts (the keys hold no device: a second call pins the same winners again)."""
    layer = torch.nn.Conv2d(64, 64, 3, padding=1, bias=False).to(f"cuda:{device}", dtype)
    h = cudnn_algos.apply(layer, ":memory:")
    p = make_problem(LAYER, SHAPE, dtype=dtype)
    for d in cudnn_algos.DIRECTIONS:
        r = cudnn_algos.find_engines(LAYER, SHAPE, direction=d, dtype=dtype, runtime_compiled=False, device=device)
        ok = [row for row in r.rows if row.ok and not row.torch_filter]
        eid, knobs = parse_config(ok[0].name)
        backend.pinned_set(problem_key(p, d), eid, knobs)
    return layer, h


def mark() -> tuple[int, float, float]:
    """(GPU bytes allocated, RSS kept after collection and trim, RSS as it was before them)."""
    raw = rss_mb()
    return torch.cuda.memory_allocated(), rss_kept_mb(), raw


def clock_session(x, w) -> None:
    """One kernel-clock (CUPTI) session around one convolution, as a measured search opens two per call."""
    with measure.kernel_clock(x.device.index or 0) as s:
        s.window(lambda: (torch.nn.functional.conv2d(x, w, padding=1), torch.cuda.synchronize()))


def part_long(a) -> dict:
    x, w = operands()
    legacy = cudnn_algos.find(LAYER, SHAPE, dtype=torch.float16).best
    eng = cudnn_algos.find_engines(LAYER, SHAPE, dtype=torch.float16, runtime_compiled=False)
    engine_row = next(r for r in eng.rows if r.ok)
    layer, h = pinned_layer()
    for _ in range(50):  # warm: allocator pools, plans, lazily loaded kernels
        cudnn_algos.run(LAYER, legacy, input=x, weight=w)
        layer(x)
    torch.cuda.synchronize()
    mem0, rss0, plans0 = torch.cuda.memory_allocated(), rss_kept_mb(), backend.pinned_plans_built()
    handles0 = backend.cudnn_handles().created
    t0 = time.perf_counter()
    # a measured search of two exact configurations, without torch's op: the same path as find_engines(measure)
    # at a cost that lets --calls (10,000) of them fit a device call
    narrow = [r.name for r in eng.rows if r.ok and not r.torch_filter][:2]

    def measured(**kw):
        return lambda: cudnn_algos.find_engines(LAYER, SHAPE, dtype=torch.float16, runtime_compiled=False,
                                                measure=True, repeats=1, warmup=0, **kw)

    # each kind of call in its own phase, memory read at its half and its end: growth that stops after the first
    # half is a cache filling, growth in both halves a leak. (calls, the call, CUPTI held through the phase)
    phases = {
        "run legacy": (a.calls, lambda: cudnn_algos.run(LAYER, legacy, input=x, weight=w), False),
        "run engine": (a.calls, lambda: cudnn_algos.run(LAYER, engine_row, input=x, weight=w), False),
        "pinned conv": (a.calls, lambda: layer(x), False),
        "find": (a.find_calls or a.calls, lambda: cudnn_algos.find(LAYER, SHAPE, dtype=torch.float16), False),
        "measured 2 configs, held": (a.narrow_calls or a.calls, measured(configs=narrow, compare_torch=False), True),
        "find_engines measured": (a.search_calls, measured(screen=1, confirm=1), False),
        # the measured search taken apart, to say which piece grows: its plans, its CUPTI sessions, torch's op
        " plans only": (a.search_calls, lambda: cudnn_algos.find_engines(
            LAYER, SHAPE, dtype=torch.float16, runtime_compiled=False), False),
        " kernel-clock session": (a.search_calls, lambda: clock_session(x, w), False),
        " measured, no torch op": (a.search_calls, measured(screen=1, confirm=1, compare_torch=False), False),
        # the same with CUPTI kept attached between sessions (cudnn_algos.cupti_held): one attach for the phase
        " sessions, CUPTI held": (a.search_calls, lambda: clock_session(x, w), True),
        " measured, CUPTI held": (a.search_calls, measured(screen=1, confirm=1), True),
    }
    # the phases whose growth is libcupti's attach/finalize cycle (two sessions per measured search)
    cycling = {"find_engines measured", " kernel-clock session", " measured, no torch op"}
    deadline = time.perf_counter() + a.budget_s
    growth, last, skipped = {}, (mem0, rss0), []
    for name, (n, call, held) in phases.items():
        if time.perf_counter() > deadline:
            skipped.append(name)
            continue
        t_phase = time.perf_counter()
        with torch.no_grad(), (measure.cupti_held() if held else contextlib.nullcontext()):
            for _ in range(min(10, n)):  # the phase's one-time costs (CUPTI, cuBLAS's workspace) before its baseline
                call()
            torch.cuda.synchronize()
            marks = [mark()]
            for half in range(2):
                for _ in range(n // 2):
                    call()
                torch.cuda.synchronize()
                marks.append(mark())
            prev = last  # the previous phase's end
            g = growth[name] = {
                "calls": n, "seconds": round(time.perf_counter() - t_phase, 1), "cupti_held": held,
                "warm_gpu_mb": round((marks[0][0] - prev[0]) / 2**20, 2),
                "warm_rss_mb": round(marks[0][1] - prev[1], 1),
                "gpu_mb": [round((m[0] - marks[0][0]) / 2**20, 2) for m in marks[1:]],
                "rss_mb": [round(m[1] - marks[0][1], 1) for m in marks[1:]],
                "rss_raw_mb": [round(m[2] - marks[0][2], 1) for m in marks[1:]]}
            last = marks[-1]
        print(f"  phase {name.strip()}: {n} calls in {g['seconds']} s, GPU {g['gpu_mb']} MB, RSS {g['rss_mb']} MB",
              flush=True)
    h.undo()
    mem1, rss1, plans1 = torch.cuda.memory_allocated(), rss_kept_mb(), backend.pinned_plans_built()
    handles1 = backend.cudnn_handles().created
    # the verdict: after each phase's first calls, GPU memory flat and host RSS growing < 10 MB over its calls;
    # no plan held and no cuDNN handle made over the run
    within = {k: g["gpu_mb"][-1] <= 0 and g["rss_mb"][-1] < 10 for k, g in growth.items()}
    held_flat = plans1 == plans0 and handles1 == handles0 and not skipped
    ok = held_flat and all(within.values())
    return {"part": "long", "what": f"{a.calls} x (run legacy, run engine, pinned conv); {a.find_calls or a.calls} x "
            f"find; {a.narrow_calls or a.calls} x a measured search of 2 configurations with CUPTI held; "
            f"{a.search_calls} x find_engines measured and each of its pieces", "errors": 0,
            "ok_except_cupti_cycles": held_flat and all(
                v for k, v in within.items() if k not in cycling),
            "outside_target": [k.strip() for k, v in within.items() if not v], "skipped": skipped,
            "gpu_mem_mb": [mem0 / 2**20, mem1 / 2**20],
            "rss_mb": [rss0, rss1], "plans": [plans0, plans1], "handles_created": [handles0, handles1],
            "seconds": time.perf_counter() - t0, "ok": ok,
            "growth_by_phase": growth, "kernel_clock": dataclasses.asdict(backend.kernel_clock_stats())}


def _frames(ex: BaseException) -> str:
    return " <- ".join(f"{Path(f.filename).name}:{f.lineno} {f.name}"
                       for f in reversed(traceback.extract_tb(ex.__traceback__)[-6:]))


def part_pressure(a) -> dict:
    x, _ = operands()
    layer, h = pinned_layer()  # its plans built while memory is free; run below with none left
    torch.cuda.empty_cache()
    base = torch.cuda.memory_allocated()
    free, _ = torch.cuda.mem_get_info()
    hog = torch.empty(max(0, free - 64 * 2**20), dtype=torch.uint8, device="cuda")
    errors, notes = [], []

    def legacy():
        r = cudnn_algos.find(LAYER, SHAPE, dtype=torch.float16, measure=True, repeats=2)
        return f"{len(r.succeeded)} ok, statuses {sorted({row.status for row in r.rows})}"

    def engines():
        e = cudnn_algos.find_engines(LAYER, SHAPE, dtype=torch.float16, measure=True, repeats=2,
                                     runtime_compiled=False)
        bad = sorted({(row.measured.error if row.measured else row.status).splitlines()[0][:100] for row in e.rows
                      if not row.ok or (row.measured and row.measured.error)})
        return f"{len(e.succeeded)} built, {sum(r.kernel_ms is not None for r in e.rows)} timed, not ok: {bad[:3]}"

    def pinned():
        with torch.no_grad():
            layer(x)
        torch.cuda.synchronize()
        c = h.counts()
        return f"ran: {sum(r['pinned'] for r in c)} pinned, {sum(r['fallback'] for r in c)} fallback"

    # searches must complete (candidates without a workspace are rows saying so); the pinned call may be refused
    # only with torch's typed OutOfMemoryError, as torch's own convolution would be
    for name, fn, oom_ok in (("legacy search", legacy, False), ("engine search", engines, False),
                             ("pinned conv", pinned, True)):
        try:
            notes.append(f"{name}: {fn()}")
        except torch.OutOfMemoryError as ex:
            (notes if oom_ok else errors).append(f"{name}: {type(ex).__name__}: {str(ex).splitlines()[0][:100]}"
                                                 + ("" if oom_ok else f" at {_frames(ex)}"))
        except Exception as ex:  # noqa: BLE001
            errors.append(f"{name}: {type(ex).__name__}: {str(ex).splitlines()[0][:120]} at {_frames(ex)}")
    try:  # within cuDNN's 32-bit fields, but 411 MB of input with 64 MB left: torch's typed OutOfMemoryError
        cudnn_algos.find(torch.nn.Conv2d(256, 256, 3, padding=1), (64, 256, 112, 112), dtype=torch.float16)
        errors.append("a problem too large for the memory left did not raise")
    except torch.OutOfMemoryError as ex:  # torch's allocator's, or cuDNN's own (CudnnOutOfMemoryError)
        notes.append(f"too large for the memory left: {type(ex).__name__} {getattr(ex, 'status', '')}: "
                     f"{str(ex).splitlines()[0][:100]}")
    except Exception as ex:  # noqa: BLE001
        errors.append(f"too large for the memory left: {type(ex).__name__}: {str(ex)[:150]}")
    del hog
    h.undo()  # layer and x were allocated before the baseline
    torch.cuda.empty_cache()
    try:  # 8.6e9 elements: refused before any allocation (cuDNN's 32-bit fields)
        cudnn_algos.find(torch.nn.Conv2d(512, 512, 3, padding=1), (64, 512, 512, 512), dtype=torch.float16)
        errors.append("a problem over cuDNN's 32-bit fields did not raise")
    except ValueError as ex:
        notes.append(f"over 2^31 elements: ValueError: {str(ex)[:80]}")
    torch.cuda.empty_cache()
    after = torch.cuda.memory_allocated()
    return {"part": "pressure", "what": "searches with all but 64 MB taken; a problem too large to allocate",
            "errors": len(errors), "error_list": errors, "notes": notes,
            "gpu_mem_mb": [base / 2**20, after / 2**20], "ok": not errors and after <= base}


def part_threads(a) -> dict:
    """8 threads, each on its own stream; with a second GPU visible, the odd-numbered threads on that one (the same
    operands, configurations and weights copied there), each output compared with its device's serial run."""
    devices = list(range(min(2, torch.cuda.device_count())))
    x0, w0 = operands()
    eng = cudnn_algos.find_engines(LAYER, SHAPE, dtype=torch.float16, runtime_compiled=False)
    names = [r.name for r in eng.rows if r.ok and r.deterministic][:4]
    per_dev, handles = {}, []
    for d in devices:
        x, w = x0.to(f"cuda:{d}"), w0.to(f"cuda:{d}")
        # a row's plan runs on the GPU it was built on: the same configurations, built again by name on this one
        built = {r.name: r for r in cudnn_algos.find_engines(LAYER, SHAPE, dtype=torch.float16, configs=names,
                                                             device=d).rows if r.ok}
        if set(built) != set(names):
            raise RuntimeError(f"GPU {d} did not build the same configurations: {sorted(built)} for {names}")
        rows = [built[n] for n in names]
        layer, h = pinned_layer(device=d)
        with torch.no_grad():
            layer.weight.copy_(w0.to(layer.weight.device))
        handles.append(h)
        per_dev[d] = (x, w, layer, rows)
    serial = {}
    with torch.no_grad():
        for d, (x, w, layer, rows) in per_dev.items():
            with torch.cuda.device(d):
                serial[d] = [cudnn_algos.run(LAYER, r, input=x, weight=w) for r in rows] + [layer(x)]
            torch.cuda.synchronize(d)
    cross = all(torch.equal(a_.cpu(), b_.cpu()) for a_, b_ in zip(serial[devices[0]], serial[devices[-1]]))
    errors: list[str] = []
    mismatches = [0]

    def work(k: int) -> None:
        d = devices[k % len(devices)]
        x, w, layer, rows = per_dev[d]
        try:
            with torch.cuda.device(d):
                s = torch.cuda.Stream()
                with torch.cuda.stream(s), torch.no_grad():
                    for _ in range(a.thread_iters):
                        cudnn_algos.find(LAYER, SHAPE, dtype=torch.float16, mode="heuristic", device=d)
                        outs = [cudnn_algos.run(LAYER, r, input=x, weight=w) for r in rows] + [layer(x)]
                        s.synchronize()
                        for o, ref in zip(outs, serial[d]):
                            if not torch.equal(o, ref):
                                mismatches[0] += 1
        except Exception as ex:  # noqa: BLE001 (each one is a finding)
            errors.append(f"thread {k} (GPU {d}): {type(ex).__name__}: {ex}"[:200])

    # two rounds of 8 fresh threads: the second must make no cuDNN handle (the first round's ended threads gave
    # theirs back to the pool)
    created = []
    t0 = time.perf_counter()
    for _ in range(2):
        ts = [threading.Thread(target=work, args=(k,)) for k in range(8)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        created.append(backend.cudnn_handles().created)
    for h in handles:
        h.undo()
    return {"part": "threads", "what": f"2 rounds of 8 threads x {a.thread_iters} x (find, run of {len(names)} "
            f"deterministic configurations, pinned conv), each on its own stream, on GPU(s) {devices}",
            "errors": len(errors), "error_list": errors[:5], "mismatches": mismatches[0], "gpus": len(devices),
            "same_outputs_on_both_gpus": cross if len(devices) > 1 else None, "handles_created": created,
            "seconds": time.perf_counter() - t0,
            "ok": not errors and mismatches[0] == 0 and created[1] == created[0]}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--parts", default="long,pressure,threads")
    p.add_argument("--calls", type=int, default=10000)
    p.add_argument("--search-calls", type=int, default=200, help="calls of each measured-search phase")
    p.add_argument("--find-calls", type=int, default=None, help="calls of find (default: --calls)")
    p.add_argument("--narrow-calls", type=int, default=None,
                   help="calls of the 2-configuration measured search, CUPTI held (default: --calls)")
    p.add_argument("--budget-s", type=float, default=1e9, help="long: phases not started by then are skipped")
    p.add_argument("--thread-iters", type=int, default=20)
    p.add_argument("--json")
    a = p.parse_args(argv)
    parts = {"long": part_long, "pressure": part_pressure, "threads": part_threads}
    out = []
    for name in a.parts.split(","):
        try:
            out.append(parts[name](a))
        except Exception as ex:  # noqa: BLE001 (a part that crashes is a row saying so)
            out.append({"part": name, "ok": False, "errors": 1, "error_list": [f"{type(ex).__name__}: {ex}"[:300]]})
        print(json.dumps(out[-1], default=str)[:600], flush=True)
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1, default=str))
    print("reliability (GPU):")
    for r in out:
        print(f"  {r['part']:<9} {'ok' if r.get('ok') else 'FAILED':<7} errors {r.get('errors')}  "
              + "  ".join(f"{k} {r[k]}" for k in ("gpu_mem_mb", "rss_mb", "plans", "mismatches", "gpus",
                                                          "same_outputs_on_both_gpus", "handles_created", "notes",
                                                          "ok_except_cupti_cycles", "outside_target", "skipped")
                          if k in r)[:400])
        if "kernel_clock" in r:
            print(f"    kernel clock over the process: {r['kernel_clock']}")
        for k, g in r.get("growth_by_phase", {}).items():
            print(f"    {k:<26} {g['calls']:>6} calls {g['seconds']:>6} s  first 10 calls: GPU {g['warm_gpu_mb']} MB, "
                  f"RSS {g['warm_rss_mb']} MB; then at half / end: GPU {g['gpu_mb']} MB, RSS {g['rss_mb']} MB "
                  f"(before collection and trim {g['rss_raw_mb']})")
        for e in r.get("error_list", [])[:3]:
            print(f"    error: {e[:600]}")
    return 0 if all(r.get("ok") for r in out) else 1


if __name__ == "__main__":
    sys.exit(main())
