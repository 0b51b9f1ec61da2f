"""What building a search's plans on threads saves: the engine search of each problem-direction of a few corpus
families (the sweep's four heuristic lists; with --exhaustive N, every engine's knob choices up to N
configurations too), once with build_threads=1 and once with --threads, in alternating order, --reps times each;
the search's host ms per problem-direction (enumerating and finalizing; nothing timed on the GPU), median of each
and their ratio, and whether both built the same rows (configuration, list positions, status, workspace). GPU.

    python benchmarks/build_threads.py [--families decoders,torchvision-resnet] [--batch 1] [--threads 8] [--n 30]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def _rows(out) -> list[tuple]:
    return [(p.engine_id, p.knobs, p.sources, p.heuristic_ranks, p.status, p.stage, p.workspace_bytes)
            for p in out.plans]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--families", default="decoders,torchvision-resnet")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--config", default="fp16-nhwc", help="a corpus configuration (fp16-nhwc, bf16-nhwc, fp32)")
    p.add_argument("--threads", type=int, default=8)
    p.add_argument("--n", type=int, default=30, help="problems (the most used first), each in every direction")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--exhaustive", type=int, default=0, metavar="N")
    p.add_argument("--json")
    a = p.parse_args(argv)
    import torch

    from cudnn_algos import backend
    from cudnn_algos.choices import DIRECTIONS
    from cudnn_algos.corpus import build_corpus
    from cudnn_algos.problem import make_problem

    corpus = build_corpus(a.families.split(","), batches=(a.batch,), configs=(a.config,), progress=False)
    problems = sorted(corpus.problems, key=lambda q: -q.uses)[:a.n]
    dev = torch.cuda.current_device()
    ms = {1: [], a.threads: []}
    plans, differ = [], []
    for i, q in enumerate(problems):
        prob = make_problem(q.spec, q.input_shape, q.dtype, q.memory_format, None)
        for d in DIRECTIONS:
            cdir, cp = prob.cudnn_direction(d), backend.conv_problem(prob)
            seen = {}
            for r in range(a.reps):
                order = (1, a.threads) if (i + r) % 2 == 0 else (a.threads, 1)
                for t in order:
                    t0 = time.perf_counter()
                    out = backend.engine_search(cdir, cp, exhaustive=a.exhaustive > 0,
                                                max_configs=max(a.exhaustive, 64), device=dev, build_threads=t)
                    ms[t].append((time.perf_counter() - t0) * 1e3)
                    seen[t] = _rows(out)
            plans.append(len(seen[1]))
            if seen[1] != seen[a.threads]:
                differ.append(f"{q.spec} @ {q.input_shape} {d}")
    one, many = statistics.median(ms[1]), statistics.median(ms[a.threads])
    print(f"{len(plans)} problem-directions ({a.families}, batch {a.batch}, {a.config}"
          f"{', exhaustive ' + str(a.exhaustive) if a.exhaustive else ''}), {a.reps} searches each way, "
          f"{statistics.median(plans):.0f} configurations per search (median)")
    print(f"{'build threads':<14} {'median ms':>10} {'mean ms':>9}")
    for t in (1, a.threads):
        print(f"{t:<14} {statistics.median(ms[t]):>10.1f} {statistics.mean(ms[t]):>9.1f}")
    print(f"{a.threads} threads / 1: {many / one:.2f}x the host time (median); "
          f"rows the same in {len(plans) - len(differ)} of {len(plans)}")
    for x in differ[:5]:
        print("  rows differ:", x)
    if a.json:
        Path(a.json).write_text(json.dumps({"threads": a.threads, "ms_one": ms[1], "ms_many": ms[a.threads],
                                            "configurations": plans, "differ": differ}))
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
