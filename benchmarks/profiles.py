"""Whole-model profiles in cuDNN's engine space, beside torch, with the kernel clock checked against CUPTI.

For each job (a model and a configuration) runs ``cudnn_algos.profile`` (engine space: heuristic lists + refine,
the best confirmed beside torch's op with benchmark on in this process and off in a fresh one) and writes the report
to DIR/profile_<job>.json; prints per job the Σ kernel-time ratios against torch (per direction) and the search's
cost beside torch's benchmark-mode search; with --check-clock every measured row (engine, legacy with --legacy, and
torch's op) is also timed by the independent clock (torch.profiler's CUPTI records, eager calls) and one fidelity
table covers all jobs, by kernel size class and row kind.

    python benchmarks/profiles.py --jobs resnet50:fp16-nhwc,resnet50:fp32 --check-clock --out out
    python benchmarks/profiles.py --jobs torchvision:mobilenet_v3_large:fp16-nhwc:8 --legacy --check-clock

A job is MODEL:CONFIG[:BATCH[:DIRECTIONS]], MODEL as `cudnn-algos profile` takes it (a FILE.py:factory's example
input sets its batch), CONFIG fp16-nhwc | fp32 | bf16-nhwc, DIRECTIONS e.g. forward+backward_data (default: all
three). Prints a summary last.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

import cudnn_algos  # noqa: E402
from cudnn_algos.model_source import load_model  # noqa: E402
from cudnn_algos.results import fidelity_table  # noqa: E402

CONFIGS = {"fp16-nhwc": (torch.float16, True), "fp32": (torch.float32, False), "bf16-nhwc": (torch.bfloat16, True)}


def parse_job(text: str) -> dict:
    parts = text.split(":")
    if parts[0] == "torchvision" or parts[0].endswith(".py"):  # torchvision:NAME, FILE.py:factory
        parts = [parts[0] + ":" + parts[1]] + parts[2:]
    model, config = parts[0], parts[1] if len(parts) > 1 else "fp16-nhwc"
    if config not in CONFIGS:
        raise SystemExit(f"job {text!r}: config {config!r} is not one of {', '.join(CONFIGS)}")
    batch = int(parts[2]) if len(parts) > 2 and parts[2] else 32
    dirs = tuple(parts[3].split("+")) if len(parts) > 3 else cudnn_algos.DIRECTIONS
    return {"model": model, "config": config, "batch": batch, "directions": dirs,
            "label": f"{model.rsplit(':', 1)[-1]}_{config}_b{batch}"}


def run_job(job: dict, args) -> tuple[cudnn_algos.ModelReport, float]:
    dtype, cl = CONFIGS[job["config"]]
    model, example, name = load_model(job["model"], batch=job["batch"])
    fmt = ("channels_last_3d" if example.dim() == 5 else "channels_last") if cl and example.dim() in (4, 5) else None
    t = time.perf_counter()
    r = cudnn_algos.profile(model, example, directions=job["directions"], dtype=dtype, memory_format=fmt,
                            repeats=args.repeats, screen=args.screen, refine=args.refine, refine_max=args.refine_max,
                            legacy=args.legacy, check_clock=args.check_clock, end_to_end_check=args.e2e,
                            progress=True, name=f"{name} {job['config']} batch {job['batch']}",
                            budget_s=args.budget_s, store=str(Path(args.out) / f"profile_{job['label']}.searches.jsonl"))
    return r, time.perf_counter() - t


def summary_lines(job: dict, r: cudnn_algos.ModelReport, wall: float) -> list[str]:
    out = []
    for d, t in r.totals().items():
        if t["ratio_on"] is None:
            continue
        off = f", vs torch off {t['best_off_ms']:.3f}/{t['off_ms']:.3f} = {t['ratio_off']:.3f}" if t["ratio_off"] else ""
        out.append(f"Σ {job['label']} {d}: best {t['best_ms']:.3f} ms vs torch on {t['on_ms']:.3f} ms = "
                   f"{t['ratio_on']:.3f}{off} ({int(t['layers'] - t['missing'])} layer uses)")
    out.append(f"cost {job['label']}: profile {wall:.0f} s wall ({r.search_s:.0f} s searching"
               f"{', with the reference clock' if r.measure and r.measure.check_clock else ''}); torch's benchmark-"
               f"mode search of the same problems {r.torch_search_ms / 1e3:.1f} s in-process"
               + (f"; its end-to-end warm-up {r.e2e.warmup_cost_s:.1f} s" if r.e2e and r.e2e.warmup_cost_s else ""))
    if r.e2e is not None:
        out.append(f"e2e {job['label']}: {r.e2e.sentence()}")
    rows = r.layer_rows()
    same = sum(1 for x in rows if x.torch_on and x.best and x.torch_on.split(" ")[0] == x.best)
    found = sum(1 for x in rows if x.torch_on and not x.torch_on.startswith("("))
    out.append(f"torch {job['label']}: torch's choice (on) found among the configurations in {found} of "
               f"{len(rows)} layer uses; our best is torch's own in {same}")
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--jobs", default="resnet50:fp16-nhwc,resnet50:fp32")
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--screen", type=int, default=3)
    p.add_argument("--refine", type=int, default=3)
    p.add_argument("--refine-max", type=int, default=32)
    p.add_argument("--legacy", action="store_true", help="also the legacy algorithms (rows for the fidelity table)")
    p.add_argument("--check-clock", action="store_true", help="time every row with the reference clock too")
    p.add_argument("--e2e", action="store_true", help="the end-to-end benchmark-mode check (fresh processes)")
    p.add_argument("--budget-s", type=float, default=None,
                   help="per job: start no new search after this many seconds (the report says it stopped)")
    p.add_argument("--out", default="out")
    args = p.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    jobs = [parse_job(j) for j in args.jobs.split(",") if j]
    reports, lines = [], []
    for job in jobs:
        r, wall = run_job(job, args)
        r.to_json(str(out / f"profile_{job['label']}.json"))
        (out / f"profile_{job['label']}.txt").write_text(str(r) + "\n")
        reports.append(r)
        new = summary_lines(job, r, wall)
        lines += new
        print("\n".join(new), flush=True)
    if args.check_clock:
        lines += fidelity_table(reports)
    (out / "profiles_summary.txt").write_text("\n".join(lines) + "\n")
    print("\n=============== profiles summary ===============")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
