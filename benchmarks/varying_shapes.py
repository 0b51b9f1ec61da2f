"""Does benchmark mode pay for itself when input sizes vary? ResNet-50 training steps (--model retinanet: a
detection-style model, RetinaNet's backbone with FPN and its heads; --model regnet: RegNet-Y-800MF, whose grouped
layers are where engines that compile at run time win) over a cycle of input shapes
(batch sizes x resolutions, as detection and segmentation training sees), with torch's benchmark mode off, on, and
apply() on a database tuned beforehand for every shape; with --selector, also apply() with no tuning at all
(``unseen="predict"``: a selector's pick among cuDNN's heuristic lists, built at each problem's first call;
``unseen="measure_top_k"``: the fastest of its first 3, timed at that call); each mode in its own fresh process.

Per mode: the time of every step (host wall, synchronised), cumulative; the first pass over the shapes (where
benchmark mode searches each new shape) and the steady cycle after every shape has been seen; for apply, how its
calls ran. With --plot, the cumulative time against steps for the three modes. With --why, every mode's process
also records, per step, the caching allocator's reserved bytes and the number of cudaMalloc retries (workspace
growth shows there), the seconds in Python's garbage collector, and in apply()'s modes the operator's host stages,
so the report can say where a steady-cycle or first-pass difference comes from. With --repeats N, each mode's first
pass as the median over N fresh processes, step by step beside benchmark off's.

    python benchmarks/varying_shapes.py --batches 16,32,48,64 --sizes 192,224 --cycles 4 --db out/t.sqlite \\
        --json out/varying.json --plot out/varying.png
(tune first: --tune runs tune() for every shape in a process of its own and reports its cost)

With --paired N, also N processes per benchmark flag (off, on) that compare apply(unseen=--paired-unseen) with
torch's op inside one process, once it has chosen for every problem: cycles alternating torch, apply, apply, torch,
the ratio of each apply cycle to the torch cycle beside it (separate processes' steady cycles differ by more than
the modes do on host-bound steps), on the host's wall clock and on the GPU's busy time (the kernel clock: what the
chosen plans cost the GPU, however host-bound the steps). `--modes= --paired 2` runs only these.
"""
from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from fresh import GcClock, block_order, forward_switch, paired_ratios, pin_to_gpu_cpus, run_worker  # noqa: E402
from varying_report import (AGAIN, added_line, first_pass_host_line, first_pass_line,  # noqa: E402
                            first_pass_steps_line, why_lines)

MODES = ("off", "on", "apply")
UNSEEN_MODES = ("predict", "measure_top_k")  # apply() on an empty database, with --selector
KEPT = "kept"  # apply() in a fresh process on what the measure_top_k process kept (Applied.keep): no choosing left


def shapes(batches: str, sizes: str) -> list[tuple[int, int]]:
    return [(int(b), int(s)) for b, s in itertools.product(batches.split(","), sizes.split(","))]


MODELS = {"resnet50": "ResNet-50", "retinanet": "RetinaNet's ResNet-50-FPN backbone and dense head",
          "regnet": "RegNet-Y-800MF (grouped 3x3 layers)",
          "inception": "Inception-v3 (1x7 and 7x1 kernels, odd channel counts and sizes; no corpus family has it)"}


def _model(cl: bool, name: str = "resnet50", device: str = "cuda"):
    """ResNet-50, RegNet-Y-800MF, Inception-v3 (no auxiliary head), or a detection-style model: RetinaNet's ResNet-50 backbone with FPN and its
    classification and box heads on every level (cudnn_algos.corpus.backbone_and_head, as the corpus's detection
    family)."""
    import torch

    torch.manual_seed(0)
    if name == "retinanet":
        from cudnn_algos.corpus import backbone_and_head

        model = backbone_and_head("retinanet_resnet50_fpn").to(device)
    elif name == "regnet":
        import torchvision

        model = torchvision.models.regnet_y_800mf().to(device)
    elif name == "inception":
        import torchvision

        model = torchvision.models.inception_v3(weights=None, aux_logits=False, init_weights=True).to(device)
    else:
        from cudnn_algos.builtin_models import BUILTIN_MODELS

        model = BUILTIN_MODELS["resnet50"][0]().to(device)
    return model.to(memory_format=torch.channels_last) if cl else model


def _loss(out, target):
    """ResNet-50: cross entropy on its logits; the detection-style model: the mean square of every head output (its
    convolutions' forward and backward are what is timed, not a detection loss)."""
    import torch

    if isinstance(out, torch.Tensor):
        return torch.nn.functional.cross_entropy(out.float(), target)

    def tensors(o):  # the heads answer a dict (RetinaNet) or lists per level (the R-CNNs' RPN head)
        if isinstance(o, torch.Tensor):
            yield o
        else:
            for v in o.values() if isinstance(o, dict) else o:
                yield from tensors(v)

    return sum(t.float().square().mean() for t in tensors(out))


def _input(b: int, s: int, cl: bool):
    import torch

    x = torch.randn(b, 3, s, s, device="cuda")
    return x.contiguous(memory_format=torch.channels_last) if cl else x


class Training:
    """Model `model` (MODELS), its optimizer and one input per shape of the cycle (batches x sizes) in `config`, in a
    process set up as every mode's (pinned to the GPU's cores, torch's benchmark flag as given); step() runs one
    synchronised training step and returns (host seconds until step() returned, wall seconds)."""

    def __init__(self, model: str, config: str, batches: str, sizes: str, benchmark: bool):
        import torch

        self.cl = config == "fp16-nhwc"  # fp16-nhwc: channels_last under float16 autocast; fp32: neither
        torch.backends.cudnn.benchmark = benchmark
        self.cpus = pin_to_gpu_cpus(0)  # every mode's process on the same (GPU-local) cores
        torch.zeros(1, device="cuda")
        self.model = _model(self.cl, model)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.01, momentum=0.9)
        self.cycle = shapes(batches, sizes)
        self.inputs = {(b, s): (_input(b, s, self.cl), torch.randint(0, 1000, (b,), device="cuda"))
                       for b, s in self.cycle}

    def step(self, shape: tuple[int, int]) -> tuple[float, float]:
        import torch

        x, t = self.inputs[shape]
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        self.opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.float16, enabled=self.cl):
            loss = _loss(self.model(x), t)
        loss.backward()
        self.opt.step()
        host = time.perf_counter() - t0
        torch.cuda.synchronize()
        return host, time.perf_counter() - t0

    def cycle_s(self) -> float:
        """One pass over every shape: the sum of its steps' wall seconds."""
        return sum(self.step(shape)[1] for shape in self.cycle)


def _k(text: str) -> int | str:
    """--k as apply() takes it: an int, or "auto"."""
    return text if text == "auto" else int(text)


def _unseen_db(a, mode: str) -> str:
    """apply(unseen=mode)'s database: one of its own beside --db, emptied (what it keeps: mode "kept")."""
    path = Path(a.db).with_suffix(f".{mode}.sqlite")
    for ext in ("", "-wal", "-shm"):
        Path(str(path) + ext).unlink(missing_ok=True)
    return str(path)


def worker(a) -> dict:
    import torch

    import cudnn_algos

    tr = Training(a.model, a.config, a.batches, a.sizes, a.mode == "on")
    model, cycle, cpus = tr.model, tr.cycle, tr.cpus
    handle = None
    if a.mode == "apply":
        handle = cudnn_algos.apply(model, a.db)
    elif a.mode in UNSEEN_MODES:  # nothing tuned
        handle = cudnn_algos.apply(model, _unseen_db(a, a.mode), unseen=a.mode, k=_k(a.k),
                                   selector=None if a.selector == "shipped" else a.selector,
                                   background={"on": True, "off": False}.get(a.background))
    elif a.mode == KEPT:
        handle = cudnn_algos.apply(model, str(Path(a.db).with_suffix(".measure_top_k.sqlite")))
    if a.settle:  # every mode alike: apply()'s helper process (unseen modes) starts before the first step
        time.sleep(a.settle)
    times, host, mem, busy = [], [], [], []
    collector = GcClock() if a.why else None
    if a.why and handle is not None:
        handle.time_host(True)  # the operator's host stages (resolve: the lookup, a plan's build; torch_op) per step
    for step in range(a.cycles * len(cycle)):
        h, w = tr.step(cycle[step % len(cycle)])
        host.append(h)
        times.append(w)
        busy.append(handle is not None and not handle.wait(0))  # predict's background thread still choosing
        if a.why:
            st = torch.cuda.memory_stats()
            mem.append({"reserved": st.get("reserved_bytes.all.current", 0),
                        "retries": st.get("num_alloc_retries", 0),
                        "cuda_mallocs": st.get("num_device_alloc", 0), "cuda_frees": st.get("num_device_free", 0),
                        "gc_s": collector.seconds, "gc_oldest": collector.oldest,
                        "stages_us": handle.host_stages()["us"] if handle is not None else {}})
    n = len(cycle)
    until = max((i + 1 for i, b in enumerate(busy) if b), default=0)
    out = {"mode": a.mode, "cpus": cpus, "step_s": times, "host_s": host, "first_pass_s": sum(times[:n]),
           "steady_cycle_ms": 1e3 * statistics.median(sum(times[i:i + n]) for i in range(n, len(times) - n + 1, n))
           if len(times) >= 2 * n else None, "memory": mem, "choosing_until_step": until,
           **converged(times, n, until)}
    if handle is not None:
        c = handle.counts()
        out["calls"] = {k: sum(x[k] for x in c) for k in ("pinned", "torch_winner", "fallback")}
        d = handle.decisions()
        if d:
            out["decisions"] = {"problems": len(d), "chosen": sum(1 for x in d if x.origin),
                                "built_later": sum(x.later for x in d), "problems_later": sum(1 for x in d if x.later),
                                "seconds": sum(x.seconds for x in d),
                                "cudnn_query_seconds": sum(x.query_ms for x in d) / 1e3,
                                "why_not": sorted({x.why for x in d if not x.origin})[:3], "kept": handle.keep()}
    return out


PAIRED = ("paired_off", "paired_on")  # apply(unseen=...) against torch's op in one process, the flag off / on


def paired_worker(a) -> dict:
    """apply(unseen=--paired-unseen) against torch's op in one process (a.mode "paired_off" or "paired_on": torch's
    benchmark flag): a cycle of torch's op over every shape first (with the flag on, its search; torch keeps those
    plans for the process's life), then apply() with nothing tuned and cycles until it has chosen for every problem
    (at most --paired-max-cycles) and one more (the last choices built, or timed, at their next call); then blocks
    of one cycle each alternate torch's op and apply() in the order torch, apply, apply, torch (a linear drift of
    the machine cancels), the modules switched between their own forward and apply()'s without touching the
    operator's plans or its chooser. Each block's cycle time; the ratio of each apply block to the torch block
    beside it."""
    import cudnn_algos

    tr = Training(a.model, a.config, a.batches, a.sizes, a.mode == "paired_on")
    first_torch_s = tr.cycle_s()
    handle = cudnn_algos.apply(tr.model, _unseen_db(a, a.paired_unseen), unseen=a.paired_unseen, k=_k(a.k),
                               selector=None if a.selector in (None, "shipped") else a.selector)
    use = forward_switch(tr.model)

    t0, choosing = time.perf_counter(), 0
    while choosing < a.paired_max_cycles:
        tr.cycle_s()
        choosing += 1
        if handle.wait(0):
            break
    chose_all = handle.wait(0)
    tr.cycle_s()
    choose_s = time.perf_counter() - t0
    handle.reset_counts()
    ms: dict[bool, list[float]] = {False: [], True: []}
    for applied in block_order(a.blocks):
        use(applied)
        ms[applied].append(1e3 * tr.cycle_s())
    gpu = gpu_blocks(tr, use, a.blocks)
    c, d = handle.counts(), handle.decisions()
    handle.undo()
    return {"mode": a.mode, "unseen": a.paired_unseen, "cpus": tr.cpus, "first_torch_cycle_s": first_torch_s, **gpu,
            "choosing_cycles": choosing, "chose_all": chose_all, "choosing_s": choose_s,
            "chosen": sum(1 for x in d if x.origin), "problems": len(d), "torch_ms": ms[False], "apply_ms": ms[True],
            "ratios": paired_ratios(ms[False], ms[True]),
            "calls": {k: sum(x[k] for x in c) for k in ("pinned", "torch_winner", "fallback")}}


def gpu_blocks(tr: Training, use, blocks: int) -> dict:
    """The same alternation of blocks once more on the kernel clock (the extension's CUPTI session, a window per
    block): each block's GPU busy ms (the union of every kernel and copy its cycle launched), which the host's pace
    does not move; the ratio of each apply block to the torch block beside it."""
    from cudnn_algos.measure import again_if_lost, kernel_clock

    order = block_order(blocks)

    def session() -> list[float]:
        with kernel_clock(0) as s:
            for applied in order:
                use(applied)
                s.window(tr.cycle_s)
        return [busy for busy, _, _ in s.results]

    busy = again_if_lost(session)
    ms: dict[bool, list[float]] = {False: [], True: []}
    for applied, b in zip(order, busy):
        ms[applied].append(b)
    return {"gpu_torch_ms": ms[False], "gpu_apply_ms": ms[True], "gpu_ratios": paired_ratios(ms[False], ms[True])}


def paired_lines(runs: dict[str, list[dict]]) -> list[str]:
    """Per flag: the median over processes of each process's median ratio (apply / torch), each process's, and the
    cycles and calls behind them."""
    out = []
    for flag in PAIRED:
        rs = [r for r in runs.get(flag, []) if "ratios" in r]
        errs = [r["error"] for r in runs.get(flag, []) if "error" in r]
        if not rs:
            out += [f"{flag}: " + ("; ".join(errs) if errs else "not run")]
            continue
        per = [statistics.median(r["ratios"]) for r in rs]
        torch_ms = statistics.median(x for r in rs for x in r["torch_ms"])
        apply_ms = statistics.median(x for r in rs for x in r["apply_ms"])
        out.append(f"{flag}: apply(unseen={rs[0]['unseen']}) / torch's op per cycle in one process "
                   f"{statistics.median(per):.3f} ({len(rs)} processes: {'; '.join(f'{x:.3f}' for x in per)}); "
                   f"cycles torch {torch_ms:.1f} ms, apply {apply_ms:.1f} ms; chose {rs[0]['chosen']} of "
                   f"{rs[0]['problems']} in {rs[0]['choosing_cycles']} cycles ({rs[0]['choosing_s']:.1f} s, all: "
                   f"{all(r['chose_all'] for r in rs)}); torch's first cycle {rs[0]['first_torch_cycle_s']:.2f} s; "
                   f"apply's calls {rs[0]['calls']}" + (f"; errors: {'; '.join(errs)}" if errs else ""))
        gs = [r for r in rs if r.get("gpu_ratios")]
        if gs:
            per = [statistics.median(r["gpu_ratios"]) for r in gs]
            out.append(f"{flag}: GPU busy per cycle (kernel clock), apply / torch's op {statistics.median(per):.3f} "
                       f"({'; '.join(f'{x:.3f}' for x in per)}); torch "
                       f"{statistics.median(x for r in gs for x in r['gpu_torch_ms']):.1f} ms, apply "
                       f"{statistics.median(x for r in gs for x in r['gpu_apply_ms']):.1f} ms")
    return out


def converged(times: list[float], n: int, until: int) -> dict:
    """The cycles (of n steps, after the first pass) that began once nothing was left to choose (step `until`):
    how many, and their median in ms (None where none did)."""
    start = max(n, -(-until // n) * n)
    cycles = [sum(times[i:i + n]) for i in range(start, len(times) - n + 1, n)]
    return {"converged_cycles": len(cycles),
            "converged_cycle_ms": 1e3 * statistics.median(cycles) if cycles else None}


def tune_worker(a) -> dict:
    import torch

    import cudnn_algos

    cl = a.config == "fp16-nhwc"
    model = _model(cl, a.model)
    t0 = time.perf_counter()
    total = {"searched": 0, "already": 0, "failed": 0, "interrupted": False, "build_s": 0.0}
    for b, s in shapes(a.batches, a.sizes):
        left = None if a.tune_budget_s is None else max(0.0, a.tune_budget_s - (time.perf_counter() - t0))
        r = cudnn_algos.tune(model, _input(b, s, cl), a.db, dtype=torch.float16 if cl else None,
                             memory_format="channels_last" if cl else None, progress=False, search=a.tune_search,
                             budget_s=left)
        total = {"searched": total["searched"] + r.searched, "already": total["already"] + r.already,
                 "failed": total["failed"] + len(r.failed), "interrupted": total["interrupted"] or r.interrupted,
                 "build_s": total["build_s"] + r.build_s}
    return {"tune_s": time.perf_counter() - t0, **total}


def _sub(args: list[str], timeout: float) -> dict:
    return run_worker(__file__, args, timeout)


def plot(results: dict, path: str) -> bool:
    """The modes' cumulative step times, written to `path`; False (nothing written) when no mode has steps (a
    run of the paired measurement alone)."""
    drawn = [m for m in MODES + UNSEEN_MODES + (KEPT,) if "step_s" in results.get(m, {})]
    if not drawn:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    labels = {"off": "benchmark off", "on": "benchmark on", "apply": "apply() (tuned beforehand)",
              "predict": "apply(unseen='predict'), no tuning",
              "measure_top_k": "apply(unseen='measure_top_k'), no tuning",
              KEPT: "apply() of what measure_top_k kept, next process"}
    for mode in drawn:
        ax.plot(list(itertools.accumulate(results[mode]["step_s"])), label=labels[mode])
    ax.set_xlabel("training step (shapes cycled)")
    ax.set_ylabel("cumulative time (s)")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    return True


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="resnet50", choices=sorted(MODELS),
                   help="resnet50, regnet (RegNet-Y-800MF), inception (Inception-v3: outside the corpus), or "
                   "retinanet (a detection-style model: try --batches 2,4 --sizes 512,576,640,704)")
    p.add_argument("--config", default="fp16-nhwc", choices=["fp16-nhwc", "fp32"])
    p.add_argument("--batches", default="16,32,48,64")
    p.add_argument("--sizes", default="192,224")
    p.add_argument("--cycles", type=int, default=4)
    p.add_argument("--db", default="tuning.sqlite")
    p.add_argument("--tune", action="store_true", help="tune every shape first (a process of its own)")
    p.add_argument("--tune-search", default="full", choices=["full", "quick"], help="tune()'s search (default full)")
    p.add_argument("--tune-budget-s", type=float, default=None, help="tune: start no search after this many seconds "
                   "(problems left untuned run torch's op under apply(), counted as fallbacks)")
    p.add_argument("--why", action="store_true", help="record per step the allocator's reserved bytes and retries, "
                   "the garbage collector's seconds and the operator's host stages")
    p.add_argument("--background", choices=["default", "on", "off"], default="default",
                   help="predict / measure_top_k: choose in background threads or at the first call (default: apply's)")
    p.add_argument("--selector", help="a selector (.npz), or 'shipped' (the package's for this GPU): also the modes "
                   "predict and measure_top_k (apply() with no tuning)")
    p.add_argument("--modes", help="comma-separated: only these modes (default: off,on,apply, and with --selector "
                   "predict,measure_top_k); --tune runs only when apply is among them")
    p.add_argument("--paired", type=int, default=0, metavar="N",
                   help="also N processes per benchmark flag comparing apply(unseen=--paired-unseen) with torch's op "
                   "in alternating cycles inside the process (paired_worker); --modes '' runs only these")
    p.add_argument("--paired-unseen", default="predict", choices=UNSEEN_MODES)
    p.add_argument("--k", default="3", help="measure_top_k's k: an int, or 'auto' (Note [the automatic shortlist])")
    p.add_argument("--repeats", type=int, default=1, metavar="N",
                   help="N fresh processes per mode but 'on' (one), in turn (off, predict, ..., off, predict, ...): "
                   "each mode's first pass as the median over its processes")
    p.add_argument("--settle", type=float, default=0.0, metavar="S",
                   help="each mode's process waits S seconds after apply() before its first step (in the unseen modes "
                   "the helper process has started by then: what its start costs the first pass)")
    p.add_argument("--paired-max-cycles", type=int, default=40, help="--paired: cycles to wait for the choosing")
    p.add_argument("--blocks", type=int, default=8, help="--paired: blocks (cycles) per process, a multiple of 4")
    p.add_argument("--json")
    p.add_argument("--plot")
    p.add_argument("--worker", choices=MODES + UNSEEN_MODES + (KEPT, "tune") + PAIRED, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.k != "auto" and not (a.k.isdigit() and int(a.k) >= 1):
        p.error(f"--k {a.k}: an int >= 1 or 'auto'")
    if a.worker:
        a.mode = a.worker
        run = tune_worker if a.worker == "tune" else paired_worker if a.worker in PAIRED else worker
        print(json.dumps(run(a)))
        return 0
    common = ["--model", a.model, "--config", a.config, "--batches", a.batches, "--sizes", a.sizes,
              "--cycles", str(a.cycles),
              "--db", a.db, "--tune-search", a.tune_search, "--background", a.background, "--settle", str(a.settle)
              ] + (["--why"] if a.why else [])
    tune_args = ["--tune-budget-s", str(a.tune_budget_s)] if a.tune_budget_s is not None else []
    modes = (tuple(m for m in a.modes.split(",") if m) if a.modes is not None
             else MODES + (UNSEEN_MODES if a.selector else ()))
    bad = [m for m in modes if m not in MODES + UNSEEN_MODES + (KEPT,) or (m in UNSEEN_MODES and not a.selector)
           or (m == KEPT and "measure_top_k" not in modes[:modes.index(m)])]
    if bad:
        p.error(f"--modes: {', '.join(bad)} (modes: {', '.join(MODES + UNSEEN_MODES + (KEPT,))}; predict and "
                "measure_top_k need --selector, kept comes after measure_top_k)")
    results = {"tune": _sub(["--worker", "tune", *common, *tune_args], 1800) if a.tune and "apply" in modes
               else None}
    sel = (["--selector", a.selector] if a.selector else []) + ["--k", a.k]
    for mode in modes:
        results[mode] = _sub(["--worker", mode, *common] + sel, 900)
    for _ in range(a.repeats - 1):  # the modes but on again, in turn: the first passes' spread between processes
        for mode in (m for m in modes if m != "on"):
            results.setdefault(f"{mode}{AGAIN}", []).append(_sub(["--worker", mode, *common] + sel, 900))
    paired_args = ["--paired-unseen", a.paired_unseen, "--paired-max-cycles", str(a.paired_max_cycles),
                   "--blocks", str(a.blocks)]
    for _ in range(a.paired):  # the flag off and on interleaved, a fresh process each
        for flag in PAIRED:
            results.setdefault(flag, []).append(_sub(["--worker", flag, *common, *sel, *paired_args], 900))
    if a.json:
        Path(a.json).write_text(json.dumps(results, indent=1))
    if a.plot and not plot(results, a.plot):
        print(f"--plot {a.plot}: no mode ran training steps (only the paired measurement); nothing drawn")
    n = len(shapes(a.batches, a.sizes))
    print(f"varying shapes: {MODELS[a.model]} {a.config}, {n} shapes (batch {a.batches} x size {a.sizes}), "
          f"{a.cycles} cycles, fresh "
          f"process per mode:")
    if results["tune"]:
        print(f"tune: {results['tune']}")
    for mode in modes:
        r = results[mode]
        if "error" in r:
            print(f"{mode:>13}: {r['error']} (exit status {r.get('returncode')}); its stderr ended:")
            print("\n".join(f"{'':>15}{ln[:200]}" for ln in r.get("stderr_tail", [])[-8:]))
            continue
        steady = f"{r['steady_cycle_ms']:.1f} ms" if r["steady_cycle_ms"] else "-"
        print(f"{mode:>13}: first pass over the shapes {r['first_pass_s']:.2f} s, steady cycle {steady}, total "
              f"{sum(r['step_s']):.2f} s" + (f", calls {r['calls']}" if "calls" in r else "")
              + (f", unseen problems {r['decisions']}" if "decisions" in r else "")
              + (f", the background thread chose until step {r['choosing_until_step']} of "
                 f"{len(r['step_s'])}; the {r.get('converged_cycles', 0)} cycles after it: median "
                 + (f"{r['converged_cycle_ms']:.1f} ms" if r.get("converged_cycle_ms") else "-")
                 if r.get("choosing_until_step") else ""))
    print(why_lines(results, n))
    if a.repeats > 1:
        print(first_pass_line(results, modes))
        print(first_pass_steps_line(results, modes, n))
    if a.why:
        print(first_pass_host_line(results, modes, n))
    if "off" in results and "step_s" in results["off"]:
        print(added_line(results))
    if a.paired:
        print("\n".join(paired_lines(results)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
