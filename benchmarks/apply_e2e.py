"""Training steps with torch's benchmark mode off, on, and apply() on a database tuned beforehand: the first step and
the steady step, each mode in its own fresh process (torch keeps the first plan per problem for a process's life).

Per CONFIG (fp16-nhwc: autocast float16 + channels_last; fp32: float32 NCHW) and batch: tune() in a process of its
own (its cost in seconds; a warm database skips it), then one fresh process per mode runs --steps SGD training steps
(forward, backward, optimizer), each timed on the host with a synchronize (what a training loop sees): the first
step (benchmark on: its search) and the median of the steps after --warmup (each mode in --rounds fresh processes,
interleaved: the medians over them, with their spread), the host's share of a step (until step()
returned) and the GPU's (busy time on CUPTI, 5 more steps). apply's process prints how its calls ran (stored
configuration / torch's op as the stored winner / fallback) and where its operator's host time goes, by stage.

    python benchmarks/apply_e2e.py --configs fp16-nhwc:32,fp32:32 --db out/tuning.sqlite --json out/apply.json
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from fresh import block_order, forward_switch, paired_ratios, pin_to_gpu_cpus, run_worker  # noqa: E402

CONFIGS = {"fp16-nhwc": ("float16", True), "fp32": ("float32", False)}
MODES = ("off", "on", "apply")


def _model(name: str, batch: int, cl: bool):
    import torch

    from cudnn_algos.model_source import load_model

    torch.manual_seed(0)  # the same weights and data in every mode's process: the loss curves are comparable
    model, x, _ = load_model(name, batch=batch)
    model = model.cuda()
    x = x.cuda()
    if cl:
        model, x = model.to(memory_format=torch.channels_last), x.contiguous(memory_format=torch.channels_last)
    return model, x


def _training(a, benchmark: bool):
    """This (fresh) process pinned to the GPU's local CPUs, torch's benchmark flag set, the model, its batch and
    one SGD training step as a function: (model, step, cpus)."""
    import torch

    dtype, cl = CONFIGS[a.config]
    torch.backends.cudnn.benchmark = benchmark
    torch.cuda.init()
    cpus = pin_to_gpu_cpus(0)  # every mode's process on the same (GPU-local) cores
    torch.zeros(1, device="cuda")  # the CUDA context exists before the first step is timed
    model, x = _model(a.model, a.batch, cl)
    target = torch.randint(0, 1000, (a.batch,), device="cuda")
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    amp = torch.autocast("cuda", dtype=torch.float16, enabled=dtype == "float16")

    def step():
        opt.zero_grad(set_to_none=True)
        with amp:
            loss = torch.nn.functional.cross_entropy(model(x).float(), target)
        loss.backward()
        opt.step()
        return loss

    return model, step, cpus


def _timed_step(step) -> float:
    """One step's wall seconds, synchronized before and after."""
    import torch

    torch.cuda.synchronize()
    t = time.perf_counter()
    step()
    torch.cuda.synchronize()
    return time.perf_counter() - t


def paired_worker(a) -> dict:
    """apply() against torch's op in one process (a.mode "paired_off" or "paired_on": torch's benchmark flag):
    torch's op runs --warmup steps first (with the flag on, its search; torch keeps those plans for the process's
    life), then apply() and --warmup steps of it, then blocks of --block steps alternate torch's op and apply()
    in the order torch, apply, apply, torch (a linear drift of the machine cancels), the modules switched between
    their own forward and apply()'s without touching the operator's plans. Each block's median step; the ratio
    of each apply block to the torch block beside it."""
    import cudnn_algos

    model, step, cpus = _training(a, a.mode == "paired_on")
    for _ in range(a.warmup):
        step()
    handle = cudnn_algos.apply(model, a.db)
    use = forward_switch(model)

    for _ in range(a.warmup):
        step()
    handle.reset_counts()
    medians: dict[bool, list[float]] = {False: [], True: []}
    for applied in block_order(a.blocks):
        use(applied)
        medians[applied].append(1e3 * statistics.median(_timed_step(step) for _ in range(a.block)))
    c = handle.counts()
    return {"mode": a.mode, "cpus": cpus, "torch_ms": medians[False], "apply_ms": medians[True],
            "ratios": paired_ratios(medians[False], medians[True]),
            "calls": {k: sum(x[k] for x in c) for k in ("pinned", "torch_winner", "fallback")}}


def worker(a) -> dict:
    """One mode in this (fresh) process."""
    import torch

    import cudnn_algos

    model, step, cpus = _training(a, a.mode == "on")
    handle = cudnn_algos.apply(model, a.db) if a.mode == "apply" else None

    times, host, losses = [], [], []
    for _ in range(a.steps):
        torch.cuda.synchronize()
        t = time.perf_counter()
        losses.append(step())
        host.append(time.perf_counter() - t)  # the host's share: step() returned, the GPU may still be working
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t)
    out = {"mode": a.mode, "cpus": cpus, "first_step_s": times[0],
           "steady_ms": 1e3 * statistics.median(times[a.warmup:]),
           "steady_min_ms": 1e3 * min(times[a.warmup:]), "host_ms": 1e3 * statistics.median(host[a.warmup:]),
           "loss_first": float(losses[0]), "loss_last": float(losses[-1]), "losses": [float(v) for v in losses]}
    if handle is not None:
        c = handle.counts()
        out["calls"] = {k: sum(x[k] for x in c) for k in ("pinned", "torch_winner", "fallback")}
    if not a.diagnostics:  # a repeat process: the step times and calls only
        return out
    if handle is not None:
        out["fallback_reasons"] = sorted({x["reason"] for x in c if x["fallback"]})[:5]
        out["winners"] = handle.winners
        # where the operator's own host time goes (Note [host stages] in csrc/pinned/ops.cpp), per step
        n = 10
        handle.time_host(True)
        for _ in range(n):
            step()
        torch.cuda.synchronize()
        st = handle.host_stages()
        handle.time_host(False)
        out["op_host_ms_per_step"] = {k: v / 1e3 / n for k, v in st["us"].items()}
        out["op_calls_per_step"] = (st["forward_calls"] + st["backward_calls"]) / n
        # cudnnBackendExecute's host time per call by the winners' engines, beside the same configurations' host
        # time per call measured alone by tune() (back-to-back calls of one problem)
        out["execute_by_engine"] = [{**r, "calls": r["calls"] / n} for r in handle.execute_by_config()]
    # GPU busy per step on CUPTI (the extension's kernel clock: union of kernel intervals), before torch.profiler:
    # measured after it, busy read above the step's wall time (fp32 b32: 35 ms of a 21 ms step)
    try:
        from cudnn_algos.measure import kernel_clock

        with kernel_clock(0) as s:
            for _ in range(5):
                s.window(lambda: (step(), torch.cuda.synchronize()))
        out["gpu_busy_ms"] = statistics.median(r[0] for r in s.results)
        out["kernels_per_step"] = statistics.median(r[1] for r in s.results)
    except Exception as e:  # the report says it is missing rather than losing the run
        out["gpu_busy_error"] = f"{type(e).__name__}: {e}"
    # host time inside the convolution ops and their autograd nodes, per step (torch.profiler, CPU only: the same
    # instrumentation in every mode, so the modes compare; absolute values include the profiler's own cost)
    from torch.profiler import ProfilerActivity, profile

    n = 5
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(n):
            step()
        torch.cuda.synchronize()
    ops = {}
    for e in prof.key_averages():
        k = e.key.lower()
        if "conv" in k and ("backward" in k or "::" in k or "node" in k):
            ops[e.key[:80]] = (e.cpu_time_total / 1e3 / n, e.count / n)
    out["conv_ops_cpu_ms_per_step"] = ops
    return out


def tune_worker(a) -> dict:
    import torch

    import cudnn_algos

    dtype, cl = CONFIGS[a.config]
    model, x = _model(a.model, a.batch, cl)
    t = time.perf_counter()
    r = cudnn_algos.tune(model, x, a.db, dtype=dtype, memory_format="channels_last" if cl else None,
                         budget_s=a.tune_budget_s, search=a.tune_search, progress=False)
    return {"tune_s": time.perf_counter() - t, "build_s": r.build_s, "store_s": r.store_s,
            "searched": r.searched, "already": r.already,
            "failed": len(r.failed), "interrupted": r.interrupted, "torch": torch.__version__}


def plot_losses(results: list[dict], path: str) -> None:
    """Training loss against step, one panel per config, the three modes overlaid (the same weights and batch in
    every mode's process)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(results), figsize=(5 * len(results), 3.6), squeeze=False)
    for ax, r in zip(axes[0], results):
        for m in MODES:
            if r.get(m, {}).get("losses"):
                ax.plot(r[m]["losses"], label=f"benchmark {m}" if m != "apply" else "apply()", alpha=0.8)
        ax.set_title(f"{r['config']} batch {r['batch']}")
        ax.set_xlabel("training step")
        ax.set_ylabel("loss")
        ax.set_yscale("log")
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def print_paired(r: dict) -> None:
    """The in-process comparison of one config: per flag, the median ratio apply / torch's op over every block
    pair of its processes (with their range), the blocks' median step times, and apply's calls."""
    for flag in ("paired_off", "paired_on"):
        runs = [x for x in r.get(flag, []) if "ratios" in x]
        errors = [x["error"] for x in r.get(flag, []) if "error" in x]
        name = f"{r['config']}:{r['batch']} benchmark {flag.split('_')[1]}"
        if not runs:
            print(f"{name}: in-process pairs failed: {errors[:1]}")
            continue
        ratios = [v for x in runs for v in x["ratios"]]
        t_ms = statistics.median(v for x in runs for v in x["torch_ms"])
        a_ms = statistics.median(v for x in runs for v in x["apply_ms"])
        calls = {k: sum(x["calls"][k] for x in runs) for k in ("pinned", "torch_winner", "fallback")}
        per = "; ".join(f"{statistics.median(x['ratios']):.3f}" for x in runs)
        print(f"{name}: apply / torch's op in one process {statistics.median(ratios):.3f} (block pairs "
              f"{min(ratios):.3f}-{max(ratios):.3f}, {len(ratios)} pairs in {len(runs)} processes: {per}); "
              f"steps torch {t_ms:.2f} ms, apply {a_ms:.2f} ms; apply's calls {calls}")


def _sub(args: list[str], timeout: float) -> dict:
    return run_worker(__file__, args, timeout)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="resnet50")
    p.add_argument("--configs", default="fp16-nhwc:32")
    p.add_argument("--db", default="tuning.sqlite")
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--tune-budget-s", type=float, default=None)
    p.add_argument("--tune-search", default="full", choices=["full", "quick"], help="tune()'s search (default full)")
    p.add_argument("--rounds", type=int, default=2, help="fresh processes per mode, interleaved (default 2): "
                   "the steady and first step reported are their medians, with the spread")
    p.add_argument("--paired", type=int, default=0, metavar="N",
                   help="also N processes each with the flag off and on, alternating torch's op and apply() in "
                        "blocks inside the process (paired_worker); --rounds 0 runs only these")
    p.add_argument("--block", type=int, default=10, help="--paired: steps per block")
    p.add_argument("--blocks", type=int, default=8, help="--paired: blocks per process (a multiple of 4)")
    p.add_argument("--json")
    p.add_argument("--plot", help="a figure of every config's loss curve, off / on / apply (e.g. with --steps 200)")
    p.add_argument("--worker", choices=MODES + ("tune", "paired_off", "paired_on"), help=argparse.SUPPRESS)
    p.add_argument("--mode", help=argparse.SUPPRESS)
    p.add_argument("--config", help=argparse.SUPPRESS)
    p.add_argument("--batch", type=int, help=argparse.SUPPRESS)
    p.add_argument("--diagnostics", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.worker:
        a.mode = a.worker
        run = {"tune": tune_worker, "paired_off": paired_worker, "paired_on": paired_worker}.get(a.worker, worker)
        print(json.dumps(run(a)))
        return 0
    results = []
    for job in a.configs.split(","):
        config, _, batch = job.partition(":")
        common = ["--model", a.model, "--config", config, "--batch", batch or "32", "--db", a.db,
                  "--steps", str(a.steps), "--warmup", str(a.warmup), "--tune-search", a.tune_search]
        tuned = _sub(["--worker", "tune", *common] + (["--tune-budget-s", str(a.tune_budget_s)]
                                                      if a.tune_budget_s else []), 600)
        row = {"config": config, "batch": int(batch or 32), "tune": tuned}
        for i in range(a.paired):  # in-process pairs, the flag off and on interleaved
            for flag in ("paired_off", "paired_on"):
                row.setdefault(flag, []).append(_sub(["--worker", flag, *common, "--block", str(a.block),
                                                      "--blocks", str(a.blocks)], 300))
        for rnd in range(a.rounds):  # the modes interleaved, each round's processes fresh; diagnostics in the first
            for mode in MODES:
                r = _sub(["--worker", mode, *common] + (["--diagnostics"] if rnd == 0 else []), 300)
                if rnd == 0:
                    row[mode] = r
                row[mode].setdefault("rounds", []).append({k: r.get(k) for k in ("steady_ms", "first_step_s")})
        # paired: each round's apply against that round's off and on (processes run back to back), so that a drift
        # of the machine between rounds cancels; the median of these ratios is the comparison to read
        paired = [r3["steady_ms"] / min(r1["steady_ms"], r2["steady_ms"])
                  for r1, r2, r3 in zip(*(row.get(m, {}).get("rounds", []) for m in MODES))
                  if all(x.get("steady_ms") for x in (r1, r2, r3))]
        if paired:
            row["paired_ratios"] = paired
        for mode in (m for m in MODES if m in row):  # the reported steady and first step: medians over rounds
            rs = row[mode].get("rounds", [])
            for k in ("steady_ms", "first_step_s"):
                v = [x[k] for x in rs if x.get(k) is not None]
                if v:
                    row[mode][k] = statistics.median(v)
                    row[mode][k + "_spread"] = (min(v), max(v))
        results.append(row)
    if a.json:
        Path(a.json).write_text(json.dumps(results, indent=1))
    if a.plot:
        try:
            plot_losses(results, a.plot)
        except Exception as e:  # noqa: BLE001 (the JSON is written; a figure that fails loses nothing)
            print(f"loss figure not written: {type(e).__name__}: {e}")
    print(f"{a.model} training steps ({a.steps} steps; steady = median after {a.warmup}), each mode in a fresh "
          "process:")
    print(f"{'config':<16} {'tune':>14} {'first off':>10} {'first on':>9} {'first apply':>11} {'steady off':>11} "
          f"{'on':>8} {'apply':>8}  apply/min(off,on)  apply's calls")
    for r in results:
        t = r["tune"]
        print_paired(r)
        if "apply" not in r:  # --rounds 0: the in-process pairs only
            continue
        tune = ("failed" if "tune_s" not in t else f"{t['tune_s']:.0f} s ({t['searched']})" if t["searched"]
                else f"warm ({t['already']})")
        f = {m: r[m].get("first_step_s") for m in MODES}
        s = {m: r[m].get("steady_ms") for m in MODES}
        ratio = (s["apply"] / min(s["off"], s["on"])) if all(s.values()) else None
        calls = r["apply"].get("calls", r["apply"].get("error", ""))
        print(f"{r['config'] + ':' + str(r['batch']):<16} {tune:>14} "
              + " ".join(f"{v:9.2f}s" if v is not None else f"{'-':>10}" for v in f.values()) + " "
              + " ".join(f"{v:7.2f}ms" if v is not None else f"{'-':>9}" for v in s.values())
              + f"  {ratio:.3f}" * (ratio is not None) + f"  {calls}")
        for m in MODES:
            if "error" in r[m]:
                print(f"  {m}: {r[m]['error']}")
        cpus = {str(r[m].get("cpus")) for m in MODES}
        print(f"  processes pinned to the GPU's local CPUs: {cpus.pop()}" if len(cpus) == 1 and "None" not in cpus
              else f"  CPU pinning: {sorted(cpus)}")
        sp = {m: r[m].get("steady_ms_spread") for m in MODES}
        if all(sp.values()):
            print(f"  steady over {len(r['off'].get('rounds', []))} fresh processes each (min-max): "
                  + ", ".join(f"{m} {lo:.2f}-{hi:.2f} ms" for m, (lo, hi) in sp.items()))
        if r.get("paired_ratios"):
            pr = r["paired_ratios"]
            print(f"  apply/min(off,on) round by round: {', '.join(f'{x:.3f}' for x in pr)} "
                  f"(median {statistics.median(pr):.3f})")
        if t.get("searched"):
            print(f"  tune: {t['tune_s']:.1f} s for {t['searched']} searches: {t.get('build_s', 0):.1f} s building "
                  f"plans, {t.get('store_s', 0):.1f} s storing, the rest measuring")
        if r["apply"].get("fallback_reasons"):
            print(f"  apply fallbacks: {r['apply']['fallback_reasons']}")
        print("  loss first/last: " + ", ".join(f"{m} {r[m].get('loss_first', float('nan')):.3f}/"
                                                 f"{r[m].get('loss_last', float('nan')):.3f}" for m in MODES))
    print("where a steady step's time goes (ms per step): wall = synchronized step; host = until step() returned; "
          "GPU = busy on CUPTI; apply's operator: its CUDA kernels' host time by stage")
    for r in (r for r in results if "apply" in r):
        cells = []
        for m in MODES:
            x = r[m]
            if "steady_ms" in x:
                cells.append(f"{m} wall {x['steady_ms']:.2f} host {x.get('host_ms', float('nan')):.2f} "
                             f"GPU {x.get('gpu_busy_ms', float('nan')):.2f}")
        print(f"{r['config'] + ':' + str(r['batch']):<16} " + " | ".join(cells))
        for m in MODES:
            ops = r[m].get("conv_ops_cpu_ms_per_step") or {}
            top = sorted(ops.items(), key=lambda kv: -kv[1][0])[:4]
            if top:
                print(f"{'':<16} {m} (torch.profiler, CPU total per step): "
                      + ", ".join(f"{k} {v[0]:.2f} ms x{v[1]:.0f}" for k, v in top))
        st = r["apply"].get("op_host_ms_per_step")
        if st:
            print(f"{'':<16} apply's operator, {r['apply']['op_calls_per_step']:.0f} kernel calls per step: "
                  f"{sum(st.values()):.2f} ms = " + ", ".join(f"{k} {v:.2f}" for k, v in st.items()))
        eng = r["apply"].get("execute_by_engine")
        if eng:
            print(f"{'':<16} cudnnBackendExecute host us/call in the model (alone in tune()), by engine: "
                  + ", ".join(f"{e['engine']} x{e['calls']:.0f} {e['us_per_call']:.1f}"
                              + (f" ({e['alone_us']:.1f})" if e.get("alone_us") else "") for e in eng[:8]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
