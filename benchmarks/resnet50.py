"""ResNet-50's unique convolutions (batch 32): our measured best legacy algorithm and (--engines) the best graph-API
engine configuration against torch's own convolution with cudnn.benchmark on (same process, same inputs, same
timers) and off (a separate process: torch keeps the first plan it picks for a shape for the life of a process, so
"off" and "on" cannot share one); plus the fidelity of our kernel clock (graph replay) against CUPTI kernel
records for every algorithm, and run-to-run spread.

    python benchmarks/resnet50.py [--batch 32] [--runs 2] [--configs fp32-nchw,fp16-nhwc] [--out DIR]
    python benchmarks/resnet50.py --engines --legacy find --runs 1      # the engine columns, cheaper legacy part

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
from cudnn_algos.measure import (cudnn_benchmark, first_call_ms, operand_sets, plan_timer, python_loop, row_timer,  # noqa: E402
                                 time_three_ways, torch_call)
from cudnn_algos.zoo import resnet50_convs  # noqa: E402

CONFIGS = {
    "fp32-nchw": (torch.float32, "contiguous"),
    "fp16-nhwc": (torch.float16, "channels_last"),
}


def time_torch(problem, cdir, sets, benchmark: bool, repeats: int, device: int):
    """torch's own op, timed like ours. Its first call here plans the shape (with benchmark on: the search, if this
    process has not planned the shape before); returns (timing, that first call's host ms)."""
    with cudnn_benchmark(benchmark):
        call = torch_call(problem, cdir, sets)
        first_ms = first_call_ms(call, device)
        t = time_three_ways(call, python_loop(call, device), repeats, 3, device)
    return t, first_ms


def med(st):
    return None if st is None else st.median


def layers_of(args):
    layers = resnet50_convs(batch=args.batch)
    return layers[: args.layers] if args.layers else layers


def torch_off_pass(args, device: int) -> dict:
    """(In its own process.) torch's op with benchmark off for every layer and direction; then, for the same shape,
    one call with benchmark on: its host time shows whether torch searched again (it does not: the plan it picked
    with benchmark off is kept)."""
    out = {}
    for cfg_name in args.configs:
        dtype, fmt = CONFIGS[cfg_name]
        for name, spec, shape, count in layers_of(args):
            problem = _problem(spec, shape, dtype, fmt, None)
            for d in ("forward", "backward_data", "backward_filter"):
                cdir = _CUDNN_DIRECTION[(False, d)]
                sets = operand_sets(problem, "warm", device)
                t, first = time_torch(problem, cdir, sets, False, args.repeats, device)
                with cudnn_benchmark(True):
                    on_after = first_call_ms(torch_call(problem, cdir, sets), device)
                out[f"{cfg_name}|{name}|{d}"] = {
                    "torch_off_kernel": med(t.kernel_ms), "torch_off_thr": med(t.throughput_ms),
                    "torch_off_host": med(t.host_ms), "torch_off_first_call_ms": first,
                    "torch_on_after_off_first_call_ms": on_after}
                del sets
    return out


def run_torch_off(args) -> dict:
    """torch with benchmark off, in a fresh process (see torch_off_pass)."""
    import subprocess

    path = Path(args.out) / "torch_off.json"
    cmd = [sys.executable, str(Path(__file__).resolve()), "--torch-off-pass", "--out", str(args.out),
           "--batch", str(args.batch), "--repeats", str(args.repeats), "--layers", str(args.layers),
           "--configs", ",".join(args.configs)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    if r.returncode != 0 or not path.exists():
        print(f"torch-off pass failed (rc={r.returncode}): {r.stderr[-800:]}", flush=True)
        return {}
    d = json.loads(path.read_text())
    path.unlink()
    return d


def engine_columns(args, spec, shape, dtype, fmt, direction, problem, cdir, device):
    """The graph API's configurations of one problem: every built one screened (kernel clock, few repeats), the
    fastest one torch would also accept re-timed on fresh operands beside torch's op (benchmark on: its first call
    of the shape in this process is here). No profiler here (see identify): returns (columns, the search result)."""
    eng = cudnn_algos.find_engines(spec, shape, direction=direction, dtype=dtype, memory_format=fmt,
                                   runtime_compiled=False, exhaustive=args.exhaustive > 0,
                                   max_configs=args.exhaustive or 64, measure=True, repeats=args.screen_repeats,
                                   compare_torch=False, refine=args.refine, refine_max=args.refine_max)
    e = {"engine_configs": len(eng.rows), "engine_built": len(eng.succeeded), "engine_count": eng.engine_count,
         "engine_refined": eng.refined, "best_engine_source": None, "engine_search_ms": eng.search_ms,
         "torch_candidates": eng.torch_candidates, "torch_benchmark_limit": int(torch.backends.cudnn.benchmark_limit)}
    sets = operand_sets(problem, "warm", device)  # fresh operands: the winner's re-timing is independent of its pick
    tt, first = time_torch(problem, cdir, sets, True, args.repeats, device)  # torch's search happens here
    e.update(torch_on_search_ms=first, torch_on_kernel2=med(tt.kernel_ms), torch_on_thr2=med(tt.throughput_ms),
             torch_on_host2=med(tt.host_ms))
    best = eng.best_eligible
    if best is not None:
        call, loop = plan_timer(best.plan, sets)
        bt = time_three_ways(call, loop, args.repeats, 3, device)
        e.update(best_engine=best.name, best_engine_family=best.family, best_engine_torch_rank=best.torch_rank,
                 best_engine_source=",".join(best.sources), best_engine_rel_err=best.measured.rel_err,
                 engine_kernel=med(bt.kernel_ms), engine_thr=med(bt.throughput_ms), engine_host=med(bt.host_ms),
                 engine_screen_kernel=best.kernel_ms)
        if e["engine_kernel"] and e["torch_on_kernel2"]:
            e["engine_vs_on"] = e["engine_kernel"] / e["torch_on_kernel2"]
    e["engine_screen"] = [{"name": r.name, "kernel": r.kernel_ms, "torch_rank": r.torch_rank,
                           "torch_filter": r.torch_filter, "sources": list(r.sources),
                           "rel_err": r.measured.rel_err if r.measured else None} for r in eng.succeeded]
    del sets
    return e, eng


def identify(entry: dict, eng) -> None:
    """After all timing (a profiler session leaves CUPTI's instrumentation on later kernels): which configuration
    torch ran, by its kernels; torch's configuration re-timed through our engine path is not needed for the why."""
    res = cudnn_algos.identify_torch(eng, torch_benchmark=True)
    t = res.torch
    best = next((r for r in res.rows if r.name == entry.get("best_engine")), None)
    entry.update(torch_match=t.match, torch_config=list(t.matches), torch_kernels=list(t.kernels),
                 torch_identify_error=t.error, best_is_torch_choice=bool(best and best.torch_ran),
                 torch_config_torch_rank=[r.torch_rank for r in res.rows if r.torch_ran],
                 best_engine_kernels=list(best.kernels) if best else [])
    if entry.get("engine_vs_on"):
        entry["why"] = why(entry)


def why(e: dict) -> str:
    """Why a layer's best engine configuration does not beat torch by 3% (or '' when it does)."""
    if e["engine_vs_on"] <= 0.97:
        return ""
    if e.get("best_is_torch_choice"):
        return "same kernels as torch's choice"
    if e.get("torch_match") == "none":
        return "torch's choice not among the searched configurations"
    if e.get("best_engine_torch_rank") is not None:
        return "torch times this configuration too; no faster one found"
    return "no faster configuration found"


def one_run(args, device: int, run_idx: int) -> dict:
    rows = []
    fidelity = []
    search_costs = []
    truncated = []
    pending = []  # (entry, engine search result): torch's choice is identified after all timing
    for cfg_name in args.configs:
        dtype, fmt = CONFIGS[cfg_name]
        for name, spec, shape, count in layers_of(args):
            if args.budget_s and time.perf_counter() - args.t_start > args.budget_s:
                truncated.append(f"{cfg_name} {name}")
                continue
            t_layer = time.perf_counter()
            measure = args.legacy == "measure"
            res = cudnn_algos.find(spec, shape, direction="all", dtype=dtype, memory_format=fmt, mode="find",
                                   measure=measure, repeats=args.repeats, cupti=measure)
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
                best = r.best  # measured best (legacy=measure) or cuDNN Find's first (legacy=find)
                cdir = _CUDNN_DIRECTION[(False, r.direction)]
                entry = {"config": cfg_name, "layer": name, "spec": str(spec), "input": list(shape), "count": count,
                         "direction": r.direction, "flops": r.flops, "n_rows": len(r.rows),
                         "n_success": len(r.succeeded), "heuristic_regret": r.heuristic_regret,
                         "heuristic_choice": r.heuristic_choice, "legacy": args.legacy}
                if args.engines:  # first: torch's first call of this shape here must run with benchmark on
                    cols, eng = engine_columns(args, spec, shape, dtype, fmt, r.direction, problem, cdir, device)
                    entry.update(cols)
                    pending.append((entry, eng))
                sets = operand_sets(problem, "warm", device)
                if best is not None:
                    call, loop = row_timer(problem, cdir, best.algo_id, best.math_type, sets, -1, device)
                    ours = time_three_ways(call, loop, args.repeats, 3, device)
                    entry.update(best_algo=f"{best.algo}/{best.math_type}", best_cudnn_ms=best.time_ms,
                                 ours_kernel=med(ours.kernel_ms), ours_thr=med(ours.throughput_ms),
                                 ours_host=med(ours.host_ms), ours_clock=ours.kernel_clock,
                                 best_rel_err=best.measured.rel_err if best.measured else None)
                t, first = time_torch(problem, cdir, sets, True, args.repeats, device)
                entry.update({"torch_on_kernel": med(t.kernel_ms), "torch_on_thr": med(t.throughput_ms),
                              "torch_on_host": med(t.host_ms), "torch_on_first_call_ms": first})
                if entry.get("ours_kernel") and entry.get("torch_on_kernel"):
                    entry["ratio_vs_on"] = entry["ours_kernel"] / entry["torch_on_kernel"]
                rows.append(entry)
                del sets
            print(f"run {run_idx} {cfg_name} {name}: {time.perf_counter() - t_layer:.1f}s", flush=True)
    t_id = time.perf_counter()
    for entry, eng in pending:
        identify(entry, eng)
    pending.clear()
    if truncated:
        print(f"budget of {args.budget_s:.0f}s spent: {len(truncated)} layer(s) not run: {', '.join(truncated)}")
    if args.engines:
        print(f"identification of torch's choices (profiler, after all timing): {time.perf_counter() - t_id:.1f}s")
    return {"rows": rows, "fidelity": fidelity, "search_costs": search_costs, "not_run": truncated}


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
            if e.get("ours_kernel") and e.get("torch_on_kernel"):
                tot["ours"] += e["ours_kernel"] * e["count"]
                tot["on"] += e["torch_on_kernel"] * e["count"]
                tot["off"] = tot["off"] + e["torch_off_kernel"] * e["count"] if (
                    tot["off"] is not None and e.get("torch_off_kernel")) else None
        eng_rows = [e for e in run["rows"] if e["config"] == cfg and "engine_configs" in e]
        if eng_rows:
            out.append(engine_table(cfg, eng_rows))
        if tot["on"]:
            off = (f"torch benchmark off {tot['off']:.3f} ms (own process), " if tot["off"] else "")
            which = ("measured best legacy algorithm" if result.get("legacy", "measure") == "measure" else
                     "cuDNN Find's first legacy algorithm (ranked by its own times, host overhead included)")
            out.append(f"\nΣ legacy {cfg} over the model's 53 convolutions x 3 directions (each unique layer × its "
                       f"count), kernel time: ours ({which}) {tot['ours']:.3f} ms, {off}torch benchmark on "
                       f"{tot['on']:.3f} ms; "
                       f"ours/on = {tot['ours'] / tot['on']:.3f}"
                       + (f", ours/off = {tot['ours'] / tot['off']:.3f}" if tot["off"] else "") + "\n")
    return "\n".join(out)


def engine_table(cfg: str, eng_rows: list[dict]) -> str:
    refined = sum(e.get("engine_refined") or 0 for e in eng_rows)
    out = [f"\n#### {cfg}: graph-API engine configurations (heuristics instant+A+B+fallback"
           f"{f', + {refined} one-knob neighbours of the fastest (refine)' if refined else ''}; runtime-compiled "
           "engines skipped) against torch benchmark on, same process, same fresh operands, kernel = graph replay\n",
           "| layer | dir | configs listed / built (engines) | torch times | torch ran | best engine (its # in torch's "
           "list) | engine kernel | torch on kernel | engine/on | host: engine / torch / legacy | why not <= 0.97 |",
           "|---|---|---:|---:|---|---|---:|---:|---:|---:|---|"]
    for e in eng_rows:
        d = e["direction"].replace("backward_", "bwd_")
        ran = (e["torch_config"][0] + (f" (+{len(e['torch_config']) - 1})" if len(e["torch_config"]) > 1 else "")
               + ("" if e["torch_match"] == "exact" else f" [{e['torch_match']}]")) if e["torch_config"] else \
            f"not found [{e['torch_match']}]"
        rank = e.get("best_engine_torch_rank")
        best = f"{e.get('best_engine', '-')} ({'-' if rank is None else '#' + str(rank)})"
        if "refine" in (e.get("best_engine_source") or ""):
            best += " [refine]"
        ratio = f"{e['engine_vs_on']:.3f}" if e.get("engine_vs_on") else "-"
        host = " / ".join(fmt_ms(e.get(k)) for k in ("engine_host", "torch_on_host2", "ours_host"))
        out.append(f"| {e['layer']} | {d} | {e['engine_configs']} / {e['engine_built']} ({e['engine_count']}) "
                   f"| {e['torch_candidates']} | {ran} | {best} | {fmt_ms(e.get('engine_kernel'))} "
                   f"| {fmt_ms(e.get('torch_on_kernel2'))} | {ratio} | {host} | {e.get('why', '')} |")
    for line in engine_sums(cfg, eng_rows):
        out.append("\n" + line)
    return "\n".join(out)


def engine_sums(cfg: str, eng_rows: list[dict]) -> list[str]:
    lines = []
    dirs = ("forward", "backward_data", "backward_filter")
    for d in dirs + ("all",):
        es = [e for e in eng_rows if (d == "all" or e["direction"] == d) and e.get("engine_vs_on")]
        if not es:
            continue
        se = sum(e["engine_kernel"] * e["count"] for e in es)
        so = sum(e["torch_on_kernel2"] * e["count"] for e in es)
        n_conv = sum(e["count"] for e in es)
        lines.append(f"Σ engines {cfg} {d}: best engine {se:.3f} ms vs torch benchmark on {so:.3f} ms over {len(es)} "
                     f"problems ({n_conv} convolutions): ratio {se / so:.3f} (target <= 0.97)")
    return lines


def engine_summary(result: dict) -> list[str]:
    rows = [e for e in result["runs"][0]["rows"] if "engine_configs" in e]
    if not rows:
        return []
    lines = [line for cfg in result["configs"] for line in engine_sums(cfg, [e for e in rows if e["config"] == cfg])]
    listed = sorted(e["engine_configs"] for e in rows)
    built = sorted(e["engine_built"] for e in rows)
    cands = sorted(e["torch_candidates"] for e in rows)
    lim = rows[0].get("torch_benchmark_limit")
    lines.append(f"engines: configurations per problem ({len(rows)} problems): listed median {statistics.median(listed):.0f} "
                 f"(min {listed[0]}, max {listed[-1]}), built median {statistics.median(built):.0f} (min {built[0]}, "
                 f"max {built[-1]}); torch's benchmark mode times median {statistics.median(cands):.0f} "
                 f"(max {cands[-1]}, its limit {lim})")
    m = {k: sum(e["torch_match"] == k for e in rows) for k in ("exact", "partial", "none")}
    same = sum(bool(e.get("best_is_torch_choice")) for e in rows)
    outside = sum(e.get("best_engine_torch_rank") is None and bool(e.get("best_engine")) for e in rows)
    ref = [e.get("engine_refined") or 0 for e in rows]
    if any(ref):
        won = sum("refine" in (e.get("best_engine_source") or "") for e in rows)
        lines.append(f"engines: refine added median {statistics.median(ref):.0f} configurations per problem (max "
                     f"{max(ref)}); the best one came from refine in {won} of {len(rows)} problems")
    amb = sum(len(e.get("torch_config") or []) > 1 for e in rows)
    lines.append(f"engines: torch's choice identified by its kernels: {m['exact']} exact, {m['partial']} partial, "
                 f"{m['none']} not found ({amb} of them shared by several configurations: knobs that leave the "
                 f"kernel's name alone); our best runs torch's kernels in {same}, is outside torch's timed list in "
                 f"{outside}")
    hs = [(e["engine_host"], e["torch_on_host2"], e.get("ours_host")) for e in rows
          if e.get("engine_host") and e.get("torch_on_host2")]
    if hs:
        leg = [h[2] for h in hs if h[2]]
        lines.append(f"engines: host ms per call, median over problems: engine path {statistics.median(h[0] for h in hs):.4f}, "
                     f"torch {statistics.median(h[1] for h in hs):.4f}"
                     + (f", legacy path {statistics.median(leg):.4f}" if leg else ""))
    srch = [e["torch_on_search_ms"] for e in rows if e.get("torch_on_search_ms")]
    if srch:
        lines.append(f"engines: torch's benchmark-mode first call (its search) median {statistics.median(srch):.1f} ms; "
                     f"our engine search (enumerate + build) median "
                     f"{statistics.median(e['engine_search_ms'] for e in rows):.1f} ms, before timing")
    return lines


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
    off_after = [e["torch_on_after_off_first_call_ms"] for e in result["runs"][0]["rows"]
                 if e.get("torch_on_after_off_first_call_ms") is not None]
    on_first = [e.get("torch_on_search_ms") or e["torch_on_first_call_ms"] for e in result["runs"][0]["rows"]
                if e.get("torch_on_search_ms") or e.get("torch_on_first_call_ms")]
    if off_after and on_first:
        lines.append(f"torch plan cache: first benchmark-on call of a shape already run with benchmark off: median "
                     f"{statistics.median(off_after):.2f} ms (no new search); first call with benchmark on in a process "
                     f"that had not run the shape: median {statistics.median(on_first):.2f} ms")
    not_run = [x for r in result["runs"] for x in r.get("not_run", [])]
    if not_run:
        lines.append(f"NOT RUN (time budget): {len(not_run)} layer(s): {', '.join(not_run)}")
    lines += engine_summary(result)
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
                   help="also the graph API's engine configurations per problem (find_engines: all built ones "
                        "screened, the best re-timed beside torch benchmark on, torch's choice identified)")
    p.add_argument("--exhaustive", type=int, default=0, metavar="N",
                   help="with --engines: also engine x knob combinations, up to N configurations per problem")
    p.add_argument("--refine", type=int, default=0, metavar="K",
                   help="with --engines: also every one-knob neighbour of the K fastest configurations per problem")
    p.add_argument("--refine-max", type=int, default=64, metavar="N",
                   help="with --refine: at most N more configurations per problem (default 64)")
    p.add_argument("--screen-repeats", type=int, default=3,
                   help="with --engines: timing samples per configuration when screening (default 3)")
    p.add_argument("--legacy", default="measure", choices=["measure", "find"],
                   help="legacy best: re-time every algorithm with CUPTI (measure, default) or take cuDNN Find's "
                        "first (find: cheaper, no fidelity numbers)")
    p.add_argument("--budget-s", type=float, default=0,
                   help="start no new layer after this many seconds (0: no budget); the tables say what was left out")
    p.add_argument("--torch-off-pass", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--out", default=os.environ.get("OUT", "out"))
    args = p.parse_args(argv)
    args.t_start = time.perf_counter()
    args.configs = [c for c in args.configs.split(",") if c]
    for c in args.configs:
        if c not in CONFIGS:
            p.error(f"--configs: {c!r} is not one of {', '.join(CONFIGS)}")
    cudnn_algos.api.require_cuda()
    device = torch.cuda.current_device()
    if args.torch_off_pass:  # the child process of run_torch_off
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / "torch_off.json").write_text(json.dumps(torch_off_pass(args, device)))
        return 0
    t_off = time.perf_counter()
    torch_off = run_torch_off(args)  # first, and in its own process: see torch_off_pass
    t_off = time.perf_counter() - t_off
    # warm the process: cuDNN's first call loads its engines (hundreds of ms), not part of any number below
    # (no profiler session unless the legacy fidelity part needs one: CUPTI stays attached to later kernels)
    cudnn_algos.find(torch.nn.Conv2d(8, 8, 3), (1, 8, 8, 8), measure=True, repeats=2, cupti=args.legacy == "measure")
    # the cost of a default measure=True search of one layer's three directions (no CUPTI), after warm-up
    cost = []
    for name, spec, shape, _ in (resnet50_convs(batch=args.batch)[:: max(1, 23 // 6)] if args.legacy == "measure" else []):
        for dtype, fmt in (CONFIGS[c] for c in args.configs):
            t = time.perf_counter()
            cudnn_algos.find(spec, shape, direction="all", dtype=dtype, memory_format=fmt, measure=True)
            cost.append({"layer": name, "dtype": str(dtype), "s": time.perf_counter() - t})
    t0 = time.perf_counter()
    env = environment(device)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    result = {"batch": args.batch, "configs": args.configs, "repeats": args.repeats, "runs": [],
              "default_measure_cost": cost, "engines": args.engines, "exhaustive": args.exhaustive,
              "refine": args.refine, "refine_max": args.refine_max,
              "screen_repeats": args.screen_repeats, "legacy": args.legacy, "torch_off_pass_s": t_off,
              "env": env.__dict__, "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())}
    for i in range(args.runs):
        run = one_run(args, device, i)
        for e in run["rows"]:  # torch with benchmark off, from its own process
            e.update(torch_off.get(f"{e['config']}|{e['layer']}|{e['direction']}", {}))
            if e.get("ours_kernel") and e.get("torch_off_kernel"):
                e["ratio_vs_off"] = e["ours_kernel"] / e["torch_off_kernel"]
        result["runs"].append(run)
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
