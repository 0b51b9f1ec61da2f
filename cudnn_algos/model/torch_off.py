"""torch's own op with cudnn.benchmark off, for a profile: measured in one fresh process (this process may already
hold plans for the problems, and torch keeps the first plan per problem), like every other row (measure_rows).
The fresh process runs ``python -m cudnn_algos.model.torch_off PROBLEMS OUT DEVICE``."""
from __future__ import annotations

import json
import os
import sys
import tempfile

import torch

from ..measure import first_call_ms, measure_rows, operand_sets, reference_output, torch_runnable
from ..problem import make_problem
from ..results import MeasureConfig, Measurement, TorchRun, decode, encode
from ..spec import ConvSpec
from .fresh import Waiting, run_fresh


def torch_off_pass(problems_file: str, out_file: str, device: int) -> None:
    """(Run in a fresh process by torch_off_runs.) torch's own op with cudnn.benchmark off for every problem and
    direction in `problems_file`, each measured by measure_rows like our rows; writes `out_file`."""
    with open(problems_file) as f:
        todo = json.load(f)
    out = []
    torch.backends.cudnn.benchmark = False
    for item in todo:
        problem = make_problem(ConvSpec.from_dict(item["spec"]), tuple(item["input_shape"]), item["dtype"],
                               item["memory_format"], None)
        cdir = problem.cudnn_direction(item["direction"])
        cfg = MeasureConfig(repeats=item["repeats"], check_clock=item["check_clock"])
        with torch.cuda.device(device):
            sets = operand_sets(problem, "warm", device)
            ref = reference_output(problem, cdir, sets[0], "cuda")
            run = torch_runnable(problem, cdir, sets)
            first = first_call_ms(run.call, device)
            (m,) = measure_rows([run], problem, cfg, ref, device, peak=False)
            del sets, ref
        out.append({"key": item["key"], "first_call_ms": first, "measured": encode(m)})
    with open(out_file, "w") as f:
        json.dump(out, f)


def torch_off_runs(items: list[dict], device: int, timeout: float = 900, waiting: Waiting | None = None
                   ) -> tuple[dict[str, TorchRun], str]:
    """torch's op with benchmark off for these problems, in one fresh process (this process may already hold plans
    for them, and torch keeps the first plan per problem): key -> TorchRun (its kernels, measured); and an error.
    waiting: that process, started before (fresh.Waiting for this module)."""
    with tempfile.TemporaryDirectory() as d:
        pin, pout = os.path.join(d, "problems.json"), os.path.join(d, "runs.json")
        with open(pin, "w") as f:
            json.dump(items, f)
        r = run_fresh("cudnn_algos.model.torch_off", [pin, pout, int(device)], timeout, waiting)
        if r.returncode != 0 or not os.path.exists(pout):
            tail = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else f"exit {r.returncode}"
            return {}, f"torch benchmark-off pass failed: {tail[:200]}"
        with open(pout) as f:
            got = json.load(f)
    limit = int(torch.backends.cudnn.benchmark_limit or 0)
    runs = {}
    for g in got:
        m = decode(Measurement, g["measured"])
        runs[g["key"]] = TorchRun(mode="benchmark_off", kernels=m.kernels, matches=(), match="none",
                                  first_call_ms=g["first_call_ms"], benchmark_limit=limit, measured=m,
                                  where="fresh process", error=m.error)
    return runs, ""


def _main(argv: list[str]) -> None:
    """The fresh process: PROBLEMS_FILE OUT_FILE DEVICE."""
    torch_off_pass(argv[0], argv[1], int(argv[2]))


if __name__ == "__main__":
    _main(sys.argv[1:])
