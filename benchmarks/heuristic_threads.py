"""Can cuDNN's heuristic queries run in threads beside a model's own CUDA work (what apply()'s unseen-problem handler
does in the background)? Per what the threads do, a fresh process: --threads threads (default 3) ask one heuristic list
(build=False, nothing built or run) for every problem-direction of the model's shapes, round after round, while the main
thread runs the model's training steps with torch's own op (benchmark off) and synchronizes after each. The first error
either side meets ends that process; one line per run says who met it and what it was.

What the threads do: "idle" (sleep: the control), "handle" (their cuDNN handle and its stream, nothing asked),
"instant", "a", "b", "fallback" (one list), "all" (every list); "b-process", "all-process": the same asked through
apply()'s helper process (Note [lists in a helper process] in cudnn_algos/choose/lists_process.py), as the
unseen-problem handler asks them.

    python benchmarks/heuristic_threads.py --model retinanet --seconds 15 --json out/heuristic_threads.json
"""
from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from fresh import run_worker  # noqa: E402

from cudnn_algos.choices import DIRECTIONS  # noqa: E402

WHAT = ("idle", "handle", "instant", "a", "b", "fallback", "all", "b-process", "all-process")


def _problems(model, shapes) -> list:
    """Every distinct (direction, cuDNN problem) of the model's forward at each (batch, size), fp16 channels_last."""
    import torch

    from cudnn_algos import backend
    from cudnn_algos.model.discovery import discover, distinct_problems
    from cudnn_algos.problem import make_problem

    seen, out = set(), []
    for b, s in shapes:
        x = torch.empty(b, 3, s, s, device="meta").contiguous(memory_format=torch.channels_last)
        for spec, shape, dtype, fmt in distinct_problems(discover(model, x), torch.float16, "channels_last"):
            if (spec, shape) in seen:
                continue
            seen.add((spec, shape))
            cp = backend.conv_problem(make_problem(spec, shape, dtype, fmt))
            out += [(d, cp) for d in DIRECTIONS]
    return out


def worker(a) -> dict:
    """One `what` beside the model's training steps (varying_shapes.Training: fp16 channels_last, benchmark off,
    each step synchronised), in this (fresh) process."""
    from cudnn_algos import backend
    from varying_shapes import Training

    tr = Training(a.model, "fp16-nhwc", a.batches, a.sizes, benchmark=False)
    problems = _problems(tr.model, tr.cycle)
    lists = {"instant": ["instant"], "a": ["a"], "b": ["b"], "fallback": ["fallback"],
             "all": ["instant", "a", "b", "fallback"]}.get(a.worker.removesuffix("-process"), [])
    helper = None
    if a.worker.endswith("-process"):
        from cudnn_algos.choose.lists_process import ListsProcess

        helper = ListsProcess()
    stop, errors, queries = threading.Event(), [], [0]

    def ask() -> None:
        try:
            if a.worker == "handle":  # the thread's handle, made as the handler's first query makes it
                backend.engine_search("forward", problems[0][1], [], device=0, build=False)
            while not stop.is_set():
                for d, cp in problems:
                    if stop.is_set():
                        return
                    if helper is not None:
                        helper.ask(d, cp, lists, 0)
                        queries[0] += 1
                    elif lists:
                        backend.engine_search(d, cp, lists, device=0, build=False)
                        queries[0] += 1
                    else:
                        time.sleep(0.01)
        except Exception as e:  # noqa: BLE001 (reported: which side met an error is the answer)
            errors.append(f"thread: {type(e).__name__}: {str(e)[:240]}")
            stop.set()

    threads = [threading.Thread(target=ask, daemon=True) for _ in range(a.threads)]
    for t in threads:
        t.start()
    steps, t0 = 0, time.perf_counter()
    try:
        while not stop.is_set() and time.perf_counter() - t0 < a.seconds:
            tr.step(tr.cycle[steps % len(tr.cycle)])
            steps += 1
    except Exception as e:  # noqa: BLE001
        errors.append(f"main: {type(e).__name__}: {str(e).splitlines()[0][:240]}")
    stop.set()
    for t in threads:
        t.join(30)
    if helper is not None:
        helper.close()
    return {"what": a.worker, "problem_directions": len(problems), "queries": queries[0], "steps": steps,
            "seconds": round(time.perf_counter() - t0, 1), "errors": errors}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="retinanet", choices=["resnet50", "retinanet"])
    p.add_argument("--batches", default="2,4")
    p.add_argument("--sizes", default="512,576,640,704")
    p.add_argument("--threads", type=int, default=3)
    p.add_argument("--seconds", type=float, default=15.0)
    p.add_argument("--what", default=",".join(WHAT), help=f"comma-separated, of: {', '.join(WHAT)}")
    p.add_argument("--json")
    p.add_argument("--worker", choices=WHAT, help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.worker:
        print(json.dumps(worker(a)))
        return 0
    what = [w for w in a.what.split(",") if w]
    bad = [w for w in what if w not in WHAT]
    if bad:
        p.error(f"--what {','.join(bad)}: not one of {', '.join(WHAT)}")
    rows = []
    for w in what:
        r = run_worker(__file__, ["--worker", w, "--model", a.model, "--batches", a.batches, "--sizes", a.sizes,
                                  "--threads", str(a.threads), "--seconds", str(a.seconds)], a.seconds + 240)
        r.setdefault("what", w)
        rows.append(r)
        errs = r.get("errors") or ([r["error"]] if "error" in r else [])
        print(f"{w:>9}: {r.get('steps', '-')} steps, {r.get('queries', '-')} queries in {r.get('seconds', '-')} s "
              f"({r.get('problem_directions', '-')} problem-directions); "
              + ("clean" if not errs else "ERROR " + " | ".join(errs)), flush=True)
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
