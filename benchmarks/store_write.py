"""How fast the sweep's driver can store results: SweepStore.put (one transaction per problem-direction) of
problem-directions of --rows rows each, every row a full long-form record (~2.8 KB of JSON, as a real sweep's), on
this machine's disk. The sweep's driver is its store's only writer, so this bounds how many GPUs one driver can keep
up with (docs/sweep.md, the 64-GPU plan).

    python benchmarks/store_write.py [--tasks 300] [--rows 80] [--dir /local/disk]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def long_form_row(i: int) -> dict:
    """A record shaped as a real sweep's: every long-form column, samples as lists, the environment's fields."""
    from cudnn_algos.results import LONG_FORM_COLUMNS

    r = dict.fromkeys(LONG_FORM_COLUMNS)
    r.update(spec="Conv2d(64, 64, kernel_size=3, padding=1)", input_shape="32x64x56x56", dtype="float16",
             memory_format="channels_last", direction="forward", cudnn_direction="forward", candidate_kind="engine",
             candidate=f"eng62{{TILE_SIZE={i % 32},TILEK=0,IDX_MODE=0,WORKSPACE=1,TILE_CGA_M=8,TILE_CGA_N=1}}",
             repro="cudnn-algos engines --conv 'Conv2d(64, 64, kernel_size=3, padding=1)' --input 32,64,56,56 "
                   "--dtype float16 --channels-last --config 'eng62{TILE_SIZE=2,TILEK=0}' --measure",
             engine_id=62, knobs={"TILE_SIZE": i % 32, "TILEK": 0, "IDX_MODE": 0, "WORKSPACE": 1}, status="SUCCESS",
             sources=["heuristic_a", "heuristic_b"], rank_a=i, kernels=["sm90_xmma_fprop_implicit_gemm_f16f16"],
             gpu="NVIDIA H200", compute_capability="9.0", driver="580.159.04", cuda_runtime=13000, cudnn="9.19.0",
             torch="2.11.0+cu130", package_version="0.2.0", host="gpu-node-17", git_commit="0123456789ab",
             created="2026-12-01T05:19:03+00:00", families=["torchvision-resnet"], uses=3)
    for k in ("kernel", "throughput", "host"):
        s = [0.0123 + 1e-5 * j + 1e-7 * i for j in range(5)]
        r.update({f"{k}_median_ms": s[2], f"{k}_min_ms": s[0], f"{k}_max_ms": s[-1], f"{k}_spread": 0.003,
                  f"{k}_samples_ms": s})
    return r


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tasks", type=int, default=300)
    p.add_argument("--rows", type=int, default=80, help="rows per problem-direction (a real sweep: ~80)")
    p.add_argument("--dir", default=None, help="where the store is written (default: a temporary directory)")
    p.add_argument("--json")
    a = p.parse_args(argv)
    from cudnn_algos.sweep import SweepStore

    rows = [long_form_row(i) for i in range(a.rows)]
    row_bytes = sum(len(json.dumps(r)) for r in rows) / len(rows)
    with tempfile.TemporaryDirectory(dir=a.dir) as d:
        path = os.path.join(d, "store.sqlite")
        with SweepStore(path) as s:
            t = time.perf_counter()
            for i in range(a.tasks):
                s.put(f"task {i}", "done", rows, worker="gpu0", seconds=1.0, env="bench")
            dt = time.perf_counter() - t
        size = os.path.getsize(path)
    out = {"tasks": a.tasks, "rows_per_task": a.rows, "row_json_bytes": row_bytes, "seconds": dt,
           "tasks_per_s": a.tasks / dt, "rows_per_s": a.tasks * a.rows / dt,
           "store_bytes_per_row": size / a.tasks / a.rows}
    print(f"SweepStore.put: {a.tasks} problem-directions x {a.rows} rows ({row_bytes:.0f} B of JSON each) in "
          f"{dt:.2f} s: {out['tasks_per_s']:.0f} problem-directions/s, {out['rows_per_s']:.0f} rows/s; "
          f"{out['store_bytes_per_row']:.0f} B per row on disk")
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
