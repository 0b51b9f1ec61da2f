"""ResNet-50's unique convolutions (batch 32): our measured best legacy algorithm against torch's own convolution
with cudnn.benchmark off and on, timed the same three ways in the same process on the same inputs; plus the
fidelity of our kernel clock (graph replay) against CUPTI kernel records for every algorithm, and run-to-run spread.

    python benchmarks/resnet50.py [--batch 32] [--runs 2] [--configs fp32-nchw,fp16-nhwc] [--out DIR]

Writes DIR/resnet50.json (every number) and DIR/resnet50.md (the tables); prints the summary last.
Clocks: kernel = CUDA-graph replay of K calls / K (both sides); throughput = device events around K back-to-back
calls / K (ours: the loop runs in C++ through the legacy API; torch: a Python loop over its op); host = host wall
time of that loop / K. Medians of --repeats samples after warm-up.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import cudnn_algos  # noqa: E402
from cudnn_algos.api import _CUDNN_DIRECTION, _problem, environment  # noqa: E402
from cudnn_algos.measure import operand_sets, plan_timer, python_loop, row_timer, time_three_ways  # noqa: E402
from cudnn_algos.zoo import resnet50_convs  # noqa: E402

CONFIGS = {
    "fp32-nchw": (torch.float32, "contiguous"),
    "fp16-nhwc": (torch.float16, "channels_last"),
}


def torch_op(problem, cdir, sets):
    """torch's own convolution for cuDNN direction `cdir` on cuDNN-role operand set i (what autograd calls)."""
    s = problem.spec
    stride, pad, dil = list(s.stride), list(problem.shapes.padding), list(s.dilation)
    n = len(sets)
    if cdir == "forward":
        def call(i):
            o = sets[i % n]
            torch.nn.functional.conv2d(o["x"], o["w"], None, stride, pad, dil, s.groups)
    else:
        mask = [cdir == "backward_data", cdir == "backward_filter", False]

        def call(i):
            o = sets[i % n]
            torch.ops.aten.convolution_backward(o["y"], o["x"], o["w"], None, stride, pad, dil, False,
                                                [0, 0], s.groups, mask)
    return call


def time_torch(problem, cdir, sets, benchmark: bool, repeats: int, device: int):
    torch.backends.cudnn.benchmark = benchmark
    call = torch_op(problem, cdir, sets)
    t0 = time.perf_counter()
    call(0)  # with benchmark on, this first call runs torch's search for the shape
    torch.cuda.synchronize(device)
    first_ms = (time.perf_counter() - t0) * 1e3
    t = time_three_ways(call, python_loop(call, device), repeats, 3, device)
    return t, first_ms


def med(st):
    return None if st is None else st.median


def one_run(args, device: int, run_idx: int) -> dict:
    rows = []
    fidelity = []
    search_costs = []
    layers = resnet50_convs(batch=args.batch)
    if args.layers:
        layers = layers[: args.layers]
    for cfg_name in args.configs:
        dtype, fmt = CONFIGS[cfg_name]
        for name, spec, shape, count in layers:
            t_layer = time.perf_counter()
            res = cudnn_algos.find(spec, shape, direction="all", dtype=dtype, memory_format=fmt, mode="find",
                                   measure=True, repeats=args.repeats, cupti=True)
            search_costs.append({"config": cfg_name, "layer": name,
                                 "measure_all_dirs_s": time.perf_counter() - t_layer})
            problem = _problem(spec, shape, dtype, fmt, None)
            for r in res:
                for row in r.succeeded:
                    m = row.measured
                    if m and m.kernel_ms is not None and m.cupti_kernel_ms:
                        fidelity.append({"config": cfg_name, "layer": name, "direction": r.direction,
                                         "algo": row.algo, "math": row.math_type, "clock": m.kernel_clock,
                                         "kernel_ms": m.kernel_ms.median, "cupti_ms": m.cupti_kernel_ms,
                                         "ratio": m.kernel_ms.median / m.cupti_kernel_ms})
                best = r.best
                cdir = _CUDNN_DIRECTION[(False, r.direction)]
                sets = operand_sets(problem, "warm", device)
                entry = {"config": cfg_name, "layer": name, "spec": str(spec), "input": list(shape), "count": count,
                         "direction": r.direction, "flops": r.flops, "n_rows": len(r.rows),
                         "n_success": len(r.succeeded), "heuristic_regret": r.heuristic_regret,
                         "heuristic_choice": r.heuristic_choice}
                if best is not None and best.measured is not None:
                    call, loop = row_timer(problem, cdir, best.algo_id, best.math_type, sets, -1, device)
                    ours = time_three_ways(call, loop, args.repeats, 3, device)
                    entry.update(best_algo=f"{best.algo}/{best.math_type}", best_cudnn_ms=best.time_ms,
                                 ours_kernel=med(ours.kernel_ms), ours_thr=med(ours.throughput_ms),
                                 ours_host=med(ours.host_ms), ours_clock=ours.kernel_clock,
                                 best_rel_err=best.measured.rel_err)
                if args.engines:  # the graph API's best configuration, timed the same way on the same inputs
                    eng = cudnn_algos.find_engines(spec, shape, direction=r.direction, dtype=dtype,
                                                   memory_format=fmt, runtime_compiled=False)
                    best_eng, best_t = None, None
                    ranked = sorted(eng.succeeded, key=lambda x: (x.rank_a is None, x.rank_a or 0))
                    for row in ranked[: args.engine_top]:
                        call, loop = plan_timer(row.plan, sets)
                        t = time_three_ways(call, loop, args.repeats, 3, device)
                        if t.kernel_ms is not None and (best_t is None or t.kernel_ms.median < best_t.kernel_ms.median):
                            best_eng, best_t = row, t
                    entry.update(engine_configs=len(eng.rows), engine_built=len(eng.succeeded),
                                 engine_count=eng.engine_count, engine_search_ms=eng.search_ms)
                    if best_eng is not None:
                        entry.update(best_engine=best_eng.name, engine_kernel=med(best_t.kernel_ms),
                                     engine_thr=med(best_t.throughput_ms), engine_host=med(best_t.host_ms))
                for label, bench in (("off", False), ("on", True)):
                    t, first = time_torch(problem, cdir, sets, bench, args.repeats, device)
                    entry.update({f"torch_{label}_kernel": med(t.kernel_ms), f"torch_{label}_thr": med(t.throughput_ms),
                                  f"torch_{label}_host": med(t.host_ms), f"torch_{label}_first_call_ms": first})
                torch.backends.cudnn.benchmark = False
                if entry.get("engine_kernel") and entry.get("torch_on_kernel"):
                    entry["engine_vs_on"] = entry["engine_kernel"] / entry["torch_on_kernel"]
                if entry.get("ours_kernel") and entry.get("torch_on_kernel"):
                    entry["ratio_vs_on"] = entry["ours_kernel"] / entry["torch_on_kernel"]
                if entry.get("ours_kernel") and entry.get("torch_off_kernel"):
                    entry["ratio_vs_off"] = entry["ours_kernel"] / entry["torch_off_kernel"]
                rows.append(entry)
                del sets
            print(f"run {run_idx} {cfg_name} {name}: {time.perf_counter() - t_layer:.1f}s", flush=True)
    return {"rows": rows, "fidelity": fidelity, "search_costs": search_costs}


def fmt_ms(v):
    return "-" if v is None else f"{v:.4f}"


def markdown(result: dict) -> str:
    run = result["runs"][0]
    out = []
    for cfg in result["configs"]:
        out.append(f"\n### {cfg} (batch {result['batch']}): per-call ms, medians; kernel = graph replay\n")
        out.append("| layer | dir | best legacy algo | ours kernel | ours thrpt | ours host | torch off kernel/thrpt/host "
                   "| torch on kernel/thrpt/host | ours/on kernel |")
        out.append("|---|---|---|---:|---:|---:|---:|---:|---:|")
        tot = {"ours": 0.0, "off": 0.0, "on": 0.0}
        for e in run["rows"]:
            if e["config"] != cfg:
                continue
            d = e["direction"].replace("backward_", "bwd_")
            ratio = f"{e['ratio_vs_on']:.2f}" if e.get("ratio_vs_on") else "-"
            off = " / ".join(fmt_ms(e.get(f"torch_off_{k}")) for k in ("kernel", "thr", "host"))
            on = " / ".join(fmt_ms(e.get(f"torch_on_{k}")) for k in ("kernel", "thr", "host"))
            out.append(f"| {e['layer']} | {d} | {e.get('best_algo', '-')} | {fmt_ms(e.get('ours_kernel'))} "
                       f"| {fmt_ms(e.get('ours_thr'))} | {fmt_ms(e.get('ours_host'))} | {off} | {on} | {ratio} |")
            if e.get("ours_kernel") and e.get("torch_on_kernel") and e.get("torch_off_kernel"):
                tot["ours"] += e["ours_kernel"] * e["count"]
                tot["on"] += e["torch_on_kernel"] * e["count"]
                tot["off"] += e["torch_off_kernel"] * e["count"]
        eng_rows = [e for e in run["rows"] if e["config"] == cfg and e.get("engine_kernel")]
        if eng_rows:
            out.append(f"\n#### {cfg}: graph-API engines (best of heuristic A's first {result.get('engine_top', '?')} "
                       "configurations; runtime-compiled engines skipped)\n")
            out.append("| layer | dir | best engine config | configs built / listed (engines) | kernel | thrpt | host "
                       "| torch on kernel | engine/on |")
            out.append("|---|---|---|---:|---:|---:|---:|---:|---:|")
            se = so = 0.0
            for e in eng_rows:
                ratio = f"{e['engine_vs_on']:.2f}" if e.get("engine_vs_on") else "-"
                out.append(f"| {e['layer']} | {e['direction'].replace('backward_', 'bwd_')} | {e['best_engine']} "
                           f"| {e['engine_built']} / {e['engine_configs']} ({e['engine_count']}) "
                           f"| {fmt_ms(e['engine_kernel'])} | {fmt_ms(e['engine_thr'])} | {fmt_ms(e['engine_host'])} "
                           f"| {fmt_ms(e.get('torch_on_kernel'))} | {ratio} |")
                if e.get("torch_on_kernel"):
                    se += e["engine_kernel"] * e["count"]
                    so += e["torch_on_kernel"] * e["count"]
            if so:
                out.append(f"\nΣ engines: best engine {se:.3f} ms vs torch benchmark on {so:.3f} ms: "
                           f"ratio {se / so:.3f} (target <= 0.97)\n")
        if tot["on"]:
            out.append(f"\nΣ over the model's 53 convolutions (each unique layer × its count), kernel time: ours "
                       f"{tot['ours']:.3f} ms, torch benchmark off {tot['off']:.3f} ms, on {tot['on']:.3f} ms; "
                       f"ours/on = {tot['ours'] / tot['on']:.3f}, ours/off = {tot['ours'] / tot['off']:.3f}\n")
    return "\n".join(out)


def summary(result: dict) -> str:
    lines = []
    fid = result["runs"][0]["fidelity"]
    if fid:
        dev = [abs(f["ratio"] - 1) for f in fid]
        within = sum(d <= 0.05 for d in dev) / len(dev)
        lines.append(f"fidelity: {len(fid)} algorithm rows; kernel clock (graph replay) vs CUPTI kernel records: "
                     f"{100 * within:.1f}% within 5% (target >= 95%); median |ratio-1| {100 * statistics.median(dev):.2f}%, "
                     f"worst {100 * max(dev):.1f}%")
        for lo, hi in ((0.05, None), (0.02, 0.05), (0.0, 0.02)):
            part = [abs(f["ratio"] - 1) for f in fid if f["kernel_ms"] >= lo and (hi is None or f["kernel_ms"] < hi)]
            if part:
                label = f">= {lo * 1e3:.0f} us" if hi is None else f"{lo * 1e3:.0f}-{hi * 1e3:.0f} us"
                lines.append(f"  kernels {label}: {len(part)} rows, {100 * sum(d <= 0.05 for d in part) / len(part):.1f}% "
                             f"within 5%, median |ratio-1| {100 * statistics.median(part):.2f}%")
        worst = sorted(fid, key=lambda f: -abs(f["ratio"] - 1))[:3]
        for f in worst:
            lines.append(f"  worst: {f['config']} {f['layer']} {f['direction']} {f['algo']}/{f['math']}: graph "
                         f"{f['kernel_ms']:.4f} vs CUPTI {f['cupti_ms']:.4f} ms")
    if len(result["runs"]) >= 2:
        a = {(e["config"], e["layer"], e["direction"]): e for e in result["runs"][0]["rows"]}
        sp = []
        for e in result["runs"][1]["rows"]:
            k = (e["config"], e["layer"], e["direction"])
            if k in a and a[k].get("ours_kernel") and e.get("ours_kernel"):
                sp.append(abs(e["ours_kernel"] - a[k]["ours_kernel"]) / a[k]["ours_kernel"])
        if sp:
            lines.append(f"run-to-run spread of the best algorithm's kernel median (2 full runs): median "
                         f"{100 * statistics.median(sp):.2f}% (target <= 3%), p90 "
                         f"{100 * sorted(sp)[int(0.9 * (len(sp) - 1))]:.2f}%")
    costs = [c["s"] for c in result.get("default_measure_cost", [])]
    if costs:
        lines.append(f"cost of a default find(measure=True) of one layer's three directions, after warm-up "
                     f"({len(costs)} layer/dtype samples): median {statistics.median(costs):.2f}s, "
                     f"max {max(costs):.2f}s")
    costs = [c["measure_all_dirs_s"] for c in result["runs"][-1]["search_costs"]]
    if costs:
        lines.append(f"  with CUPTI and repeats={result['repeats']} as in this benchmark: median "
                     f"{statistics.median(costs):.2f}s, max {max(costs):.2f}s")
    regrets = [e["heuristic_regret"] for e in result["runs"][0]["rows"] if e.get("heuristic_regret")]
    if regrets:
        lines.append(f"heuristic regret (Get_v7's first choice / measured best, kernel time): median "
                     f"{statistics.median(regrets):.2f}x, max {max(regrets):.2f}x over {len(regrets)} problems")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--runs", type=int, default=2)
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--layers", type=int, default=0, help="only the first N unique layers (0: all 23)")
    p.add_argument("--configs", default="fp32-nchw,fp16-nhwc")
    p.add_argument("--engines", action="store_true",
                   help="also time the graph API's heuristic engine configurations (find_engines) per layer")
    p.add_argument("--engine-top", type=int, default=8,
                   help="with --engines: time this many configurations, in heuristic A's order (default 8)")
    p.add_argument("--out", default=os.environ.get("OUT", "out"))
    args = p.parse_args(argv)
    args.configs = [c for c in args.configs.split(",") if c]
    for c in args.configs:
        if c not in CONFIGS:
            p.error(f"--configs: {c!r} is not one of {', '.join(CONFIGS)}")
    cudnn_algos.api.require_cuda()
    device = torch.cuda.current_device()
    # warm the process: cuDNN's first call loads its engines (hundreds of ms), not part of any number below
    cudnn_algos.find(torch.nn.Conv2d(8, 8, 3), (1, 8, 8, 8), measure=True, repeats=2, cupti=True)
    # the cost of a default measure=True search of one layer's three directions (no CUPTI), after warm-up
    cost = []
    for name, spec, shape, _ in resnet50_convs(batch=args.batch)[:: max(1, 23 // 6)]:
        for dtype, fmt in (CONFIGS[c] for c in args.configs):
            t = time.perf_counter()
            cudnn_algos.find(spec, shape, direction="all", dtype=dtype, memory_format=fmt, measure=True)
            cost.append({"layer": name, "dtype": str(dtype), "s": time.perf_counter() - t})
    t0 = time.perf_counter()
    env = environment(device)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    result = {"batch": args.batch, "configs": args.configs, "repeats": args.repeats, "runs": [],
              "default_measure_cost": cost, "engine_top": args.engine_top if args.engines else None,
              "env": env.__dict__, "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())}
    for i in range(args.runs):
        result["runs"].append(one_run(args, device, i))
        result["wall_s"] = time.perf_counter() - t0
        (out / "resnet50.json").write_text(json.dumps(result, indent=1))  # after each run: partial results survive
    md = (f"# ResNet-50 convolutions on {env.gpu_name}\n\n{result['date']}; driver {env.driver_version}; CUDA "
          f"runtime {env.cuda_runtime}; cuDNN {env.version_str(env.cudnn_runtime)}; torch {env.torch_version}\n"
          + markdown(result) + "\n\n" + summary(result) + "\n")
    (out / "resnet50.md").write_text(md)
    print(md)
    print(f"benchmark wall time {result['wall_s']:.0f}s for {args.runs} run(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
