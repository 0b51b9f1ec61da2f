"""Where a sweep task's host time goes: N tasks of a corpus measured in this process (cudnn_algos.sweep.measure_task,
as a sweep worker runs them) under cProfile, after one warm-up task. Printed: the tasks' mean wall time and their
stages (measure_task's own split), then the functions that took the most time, by own time and by time including
what they call. Nothing is stored (the rows are dropped: profiling slows the host, so they are not the dataset's).

    python benchmarks/sweep_profile.py corpus.json.gz --n 20 [--skip 0] [--top 25] [--json out.json]
    python benchmarks/sweep_profile.py corpus.json.gz --n 20 --no-legacy --build-threads 4   # as the sampled sweeps
    python benchmarks/sweep_profile.py corpus.json.gz --n 5 --dry-run      # no GPU: the plumbing only
"""
from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def where(stats: pstats.Stats, key: str, top: int) -> list[dict]:
    """The `top` functions by `key` ("tottime": own time; "cumtime": with what they call), as plain rows."""
    rows = []
    for (path, line, name), (_, calls, tt, ct, _) in stats.stats.items():  # type: ignore[attr-defined]
        rows.append({"function": f"{os.path.basename(path)}:{line}({name})" if line else name, "calls": calls,
                     "own_s": tt, "with_callees_s": ct})
    rows.sort(key=lambda r: -r["own_s" if key == "tottime" else "with_callees_s"])
    return rows[:top]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("corpus")
    ap.add_argument("--n", type=int, default=20, help="tasks profiled (after one warm-up task)")
    ap.add_argument("--skip", type=int, default=0, help="start this many tasks into the corpus's order")
    ap.add_argument("--top", type=int, default=25, help="functions listed per ordering")
    ap.add_argument("--json", default=None)
    ap.add_argument("--dry-run", action="store_true", help="no GPU: dry-run tasks (the plumbing only)")
    ap.add_argument("--no-legacy", action="store_true", help="as `sweep --no-legacy`: no legacy searches")
    ap.add_argument("--build-threads", type=int, default=1, help="as `sweep --build-threads N`")
    ap.add_argument("--lean", action="store_true", help="as `sweep --lean`: a lean screen")
    ap.add_argument("--no-profile", action="store_true",
                    help="no cProfile: the tasks' wall time and stages alone (the rate a worker would see)")
    a = ap.parse_args()
    if a.n < 1 or a.skip < 0 or a.top < 1 or a.build_threads < 1:
        ap.error(f"--n {a.n}, --skip {a.skip}, --top {a.top} and --build-threads {a.build_threads}: --n, --top and "
                 "--build-threads at least 1, --skip at least 0")
    from cudnn_algos.corpus import Corpus
    from cudnn_algos.sweep.tasks import dry_run_measure, measure_task, tasks_of

    tasks = tasks_of(Corpus.load(a.corpus).problems)[a.skip:a.skip + a.n + 1]
    if len(tasks) < 2:
        ap.error(f"{a.corpus}: {len(tasks)} task(s) from --skip {a.skip}; need a warm-up task and one to profile")
    fn = dry_run_measure if a.dry_run else measure_task
    options = {"seconds": 0.01} if a.dry_run else {}
    options.update(legacy=not a.no_legacy, build_threads=a.build_threads, lean=a.lean)
    fn(tasks[0], options)  # warm-up: torch, CUDA and cuDNN loaded, first plans built
    prof = cProfile.Profile()
    stages: dict[str, float] = {}
    failed, walls = 0, []
    for t in tasks[1:]:
        t0 = time.perf_counter()
        if not a.no_profile:
            prof.enable()
        r = fn(t, options)
        if not a.no_profile:
            prof.disable()
        walls.append(time.perf_counter() - t0)
        failed += r.get("status") != "done"
        for k, v in (r.get("stages") or {}).items():
            stages[k] = stages.get(k, 0.0) + v
    n = len(walls)
    out = {"tasks": n, "failed": failed, "task_mean_s": sum(walls) / n, "options": options,
           "stages_mean_s": {k: v / n for k, v in stages.items()}, "profiled": not a.no_profile}
    if not a.no_profile:
        stats = pstats.Stats(prof, stream=io.StringIO())
        out.update(by_own_time=where(stats, "tottime", a.top), by_time_with_callees=where(stats, "cumtime", a.top))
    how = ", ".join(x for x in ("" if options["legacy"] else "no legacy", f"{options['build_threads']} build "
                                "thread(s)", "lean screen" if a.lean else "") if x)
    print(f"sweep profile: {n} tasks ({failed} failed) after one warm-up ({how}), {out['task_mean_s']:.3f} s a task"
          f"{'' if a.no_profile else ' under cProfile'} ({1 / out['task_mean_s']:.2f}/s in one process); stages (s a "
          "task): " + ", ".join(f"{k} {v:.3f}" for k, v in out["stages_mean_s"].items()))
    for title, key in (("own time", "by_own_time"), ("with what they call", "by_time_with_callees")):
        if key not in out:
            continue
        print(f"top {a.top} by {title} (s a task, calls a task):")
        for r in out[key]:
            s = r["own_s" if key == "by_own_time" else "with_callees_s"] / n
            print(f"  {s:8.4f}  {r['calls'] / n:9.1f}  {r['function']}"[:120])
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1))
    return 0 if failed < n else 1


if __name__ == "__main__":
    sys.exit(main())
