"""GPU fuzzing: N valid problems from the seeded generator (tests/problem_gen.py: every layer kind, groups/depthwise,
dilation, strides, 'same'/'valid', padding modes, output_padding, dtypes, layouts) through find (legacy), find_engines
and run in all three directions, and through apply() (the first engine configuration torch would accept pinned per
direction) for every layer apply() runs (padding_mode zeros); every successful row's output against the layer
computed by torch in float64.

A row that fails to build or run is a row with its status (counted by status); a violation is an exception that
escapes (anything but a row status), a successful row whose error exceeds the dtype's tolerance, or an applied call
that did not run its pinned configuration. Prints a table last.

    python benchmarks/fuzz_gpu.py --n 500 --json out/fuzz_gpu.json
"""
from __future__ import annotations

import argparse
import collections
import copy
import json
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import torch  # noqa: E402

import cudnn_algos  # noqa: E402
from cudnn_algos import backend  # noqa: E402
from cudnn_algos.configs import parse_config  # noqa: E402
from cudnn_algos.problem import make_problem, parse_dtype  # noqa: E402
from cudnn_algos.tuning import module_args, problem_key  # noqa: E402
from problem_gen import case, torch_verdict, valid_extra  # noqa: E402
from reference import rel_err  # noqa: E402

# error against float64; fp32 allows TF32 (torch's default for cuDNN convolutions)
TOL = {torch.float32: 2e-2, torch.float16: 2e-2, torch.bfloat16: 6e-2, torch.float64: 1e-9}
ENGINE_ROWS = 6  # engine configurations run per problem and direction (the first ones built)


def references(m: torch.nn.Module, x: torch.Tensor, w: torch.Tensor, gy: torch.Tensor):
    """The layer in float64 (no bias): forward output, input gradient, weight gradient for grad_output gy."""
    m64 = copy.deepcopy(m).double().cuda()
    m64.bias = None
    m64.weight = torch.nn.Parameter(w.double())
    x64 = x.detach().double().requires_grad_(True)  # detach: for a float64 x, .double() is x itself
    y = m64(x64)
    gx, gw = torch.autograd.grad(y, (x64, m64.weight), gy.double())
    return {"forward": y.detach(), "backward_data": gx, "backward_filter": gw}


def operands(m, shape, dtype, fmt):
    p = make_problem(m, shape, dtype=dtype, memory_format=fmt)
    mf = {"channels_last": torch.channels_last, "channels_last_3d": torch.channels_last_3d}.get(p.memory_format)

    def t(s):
        v = torch.randn(s, device="cuda", dtype=p.dtype)
        return v.contiguous(memory_format=mf) if mf is not None else v

    return p, t(p.shapes.input_shape), t(p.shapes.weight_shape), t(p.shapes.output_shape)


def check_rows(tally, violations, label, layer, rows, direction, x, w, gy, ref, tol):
    for row in rows:
        if not row.ok:
            tally[f"{label} {row.status}"] += 1
            continue
        try:
            out = cudnn_algos.run(layer, row, direction=direction, input=x, weight=w, grad_output=gy)
        except (cudnn_algos.CudnnError, cudnn_algos.CudaError) as e:
            tally[f"{label} run failed: {getattr(e, 'status', type(e).__name__)}"] += 1
            continue
        err = rel_err(out, ref)
        tally[f"{label} ok"] += 1
        if not err <= tol:  # NaN too
            violations.append(f"{label} {row.name if hasattr(row, 'name') else row} {direction}: rel err {err:.3g}")


def check_apply(tally, violations, m, x, w, problem, engine_rows, ref_model_tol):
    """Pins the first configuration torch would accept per direction and runs the module through apply()."""
    tol = ref_model_tol
    layer = copy.deepcopy(m).cuda().to(problem.dtype)
    layer.weight = torch.nn.Parameter(w.clone())
    if isinstance(module_args(layer), str):
        return
    ref = copy.deepcopy(layer).double()
    x64 = x.detach().double().requires_grad_(True)  # detach: for a float64 x, .double() is x itself
    y64 = ref(x64)
    y64.float().pow(2).mean().backward()
    h = cudnn_algos.apply(layer, ":memory:")
    try:
        for d, r in engine_rows.items():
            ok = [row for row in r if row.ok and not row.torch_filter]
            if ok:
                eid, knobs = parse_config(ok[0].name)
                backend.pinned_set(problem_key(problem, d), eid, knobs)
        h.reset_counts()
        xx = x.detach().clone().requires_grad_(True)
        y = layer(xx)
        y.float().pow(2).mean().backward()
        counts = h.counts()
    finally:
        h.undo()
    tally["apply calls pinned"] += sum(c["pinned"] for c in counts)
    tally["apply calls fallback"] += sum(c["fallback"] for c in counts)
    for name, ours, exact in (("output", y, y64), ("input grad", xx.grad, x64.grad),
                              ("weight grad", layer.weight.grad, ref.weight.grad)):
        err = rel_err(ours, exact)
        if not err <= tol:
            violations.append(f"apply {name}: rel err {err:.3g} ({problem.describe('forward')})")
    bad = [c for c in counts if c["fallback"] and c["reason"] != "no stored winner"]
    for c in bad:
        violations.append(f"apply fallback: {c['reason']}: {c['key']}")


def one_problem(tally, violations, c, m):
    dtype = parse_dtype(c["dtype"])
    p, x, w, gy = operands(m, c["shape"], c["dtype"], c["fmt"])
    refs = references(m, x, w, gy)
    tol = TOL[dtype]
    engine_rows = {}
    for d in cudnn_algos.DIRECTIONS:
        try:
            legacy = cudnn_algos.find(m, c["shape"], direction=d, dtype=dtype, memory_format=c["fmt"])
            check_rows(tally, violations, "legacy", m, legacy.rows, d, x, w, gy, refs[d], tol)
        except (cudnn_algos.CudnnError, torch.OutOfMemoryError) as e:
            tally[f"legacy search failed: {getattr(e, 'status', type(e).__name__)}"] += 1
        try:
            eng = cudnn_algos.find_engines(m, c["shape"], direction=d, dtype=dtype, memory_format=c["fmt"],
                                           runtime_compiled=False)
            rows = [r for r in eng.rows if r.ok][:ENGINE_ROWS] + [r for r in eng.rows if not r.ok]
            engine_rows[d] = rows
            check_rows(tally, violations, "engine", m, rows, d, x, w, gy, refs[d], tol)
        except (cudnn_algos.CudnnError, torch.OutOfMemoryError) as e:
            tally[f"engine search failed: {getattr(e, 'status', type(e).__name__)}"] += 1
    if p.spec.padding_mode == "zeros" and engine_rows:
        check_apply(tally, violations, m, x, w, p, engine_rows, tol)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=500, help="valid problems to run")
    ap.add_argument("--seed", type=int, default=20261201)
    ap.add_argument("--budget-s", type=float, default=None)
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    rng = random.Random(a.seed)
    tally: collections.Counter = collections.Counter()
    violations: list[str] = []
    done, t0 = 0, time.perf_counter()
    while done < a.n and (a.budget_s is None or time.perf_counter() - t0 < a.budget_s):
        c = case(rng)
        m, shape, _ = torch_verdict(c)
        if shape is None or not valid_extra(c):
            continue
        try:
            one_problem(tally, violations, c, m)
        except Exception as e:  # noqa: BLE001 (the point: nothing may escape; each one is a violation)
            violations.append(f"exception {type(e).__name__}: {str(e)[:200]} for {c}")
        done += 1
        torch.cuda.empty_cache()
    leaked = torch.cuda.memory_allocated()
    if a.json:
        Path(a.json).write_text(json.dumps({"problems": done, "tally": tally, "violations": violations,
                                            "allocated_after": leaked}, indent=1, default=str))
    print(f"GPU fuzz: {done} valid problems (seed {a.seed}) in {time.perf_counter() - t0:.0f} s; "
          f"allocated after: {leaked} bytes")
    for k, v in sorted(tally.items()):
        print(f"  {v:7d}  {k}")
    print(f"violations: {len(violations)}")
    for v in violations[:15]:
        print(f"  {v}")
    return 0 if not violations else 1


if __name__ == "__main__":
    sys.exit(main())
