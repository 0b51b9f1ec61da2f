"""cuDNN's fused graphs against the unfused sequence and torch's eager ops, layer by layer: for a set of convolution
+ epilogue chains (ResNet-50's, MobileNetV3's and EfficientNet's kinds: bn+relu, bn+add+relu, bn+silu, bn+relu6,
bias+gelu) at fp16 channels_last, batch 1 and 32, find_fused's fastest right fused configuration, the fastest unfused
sequence (a configuration of the convolution alone, then torch's epilogue kernels) and torch's eager ops, all on the
kernel clock in one session per layer (find_fused, Note [fused against unfused]); the fused best's plan build time
(runtime compilation) beside it. Prints one table, sums over the layers last.

    python benchmarks/fused_layers.py [--batches 1,32] [--lists instant,a] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

# (name, Conv2d args, input channels-first shape without the batch, epilogue)
LAYERS = [
    ("r50 stem 7x7s2", (3, 64, 7, 2, 3), (3, 224, 224), "bn,relu"),
    ("r50 1x1 64->64", (64, 64, 1, 1, 0), (64, 56, 56), "bn,relu"),
    ("r50 3x3 64", (64, 64, 3, 1, 1), (64, 56, 56), "bn,relu"),
    ("r50 1x1 64->256 +res", (64, 256, 1, 1, 0), (64, 56, 56), "bn,add,relu"),
    ("r50 3x3 128 s2", (128, 128, 3, 2, 1), (128, 56, 56), "bn,relu"),
    ("r50 1x1 512->128", (512, 128, 1, 1, 0), (512, 28, 28), "bn,relu"),
    ("r50 3x3 256", (256, 256, 3, 1, 1), (256, 14, 14), "bn,relu"),
    ("r50 1x1 256->1024 +res", (256, 1024, 1, 1, 0), (256, 14, 14), "bn,add,relu"),
    ("r50 3x3 512", (512, 512, 3, 1, 1), (512, 7, 7), "bn,relu"),
    ("effnet 1x1 96->24 bn", (96, 24, 1, 1, 0), (96, 56, 56), "bn"),
    ("effnet 1x1 24->144 silu", (24, 144, 1, 1, 0), (24, 56, 56), "bn,silu"),
    ("mbv3 1x1 40->120 relu6", (40, 120, 1, 1, 0), (40, 28, 28), "bn,relu6"),
    ("convnext-ish 1x1 gelu", (96, 384, 1, 1, 0), (96, 56, 56), "bias,gelu"),
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", default="1,32")
    ap.add_argument("--lists", default="instant,a")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--json", default="")
    ap.add_argument("--budget-s", type=float, default=240.0)
    a = ap.parse_args()

    import torch

    import cudnn_algos

    t_end = time.perf_counter() + a.budget_s
    out, lines = [], []
    hdr = f"{'layer':26} {'b':>3} {'epilogue':12} {'fused':>8} {'unfused':>8} {'eager':>8} {'xeager':>6} " \
          f"{'xunf':>5} {'build ms':>8} {'fused cfgs':>10}"
    print(hdr, flush=True)
    for b in (int(x) for x in a.batches.split(",")):
        for name, (cin, cout, k, s, p), shape, epi in LAYERS:
            if time.perf_counter() > t_end:
                print(f"(budget of {a.budget_s:.0f} s spent: stopped before {name} b{b})", flush=True)
                break
            conv = torch.nn.Conv2d(cin, cout, k, stride=s, padding=p, bias=epi.startswith("bias"))
            try:
                r = cudnn_algos.find_fused(conv, (b, *shape), epi, dtype=torch.float16,
                                           memory_format=torch.channels_last, heuristics=tuple(a.lists.split(",")),
                                           repeats=a.repeats)
            except Exception as e:  # noqa: BLE001  (a layer that fails is a line saying so, the rest still run)
                print(f"{name:26} {b:>3} {epi:12} failed: {type(e).__name__}: {str(e)[:120]}", flush=True)
                out.append({"layer": name, "batch": b, "epilogue": epi, "error": f"{type(e).__name__}: {e}"})
                continue
            f, u, t = r.best, r.best_unfused, r.torch_eager
            fused = r.of_kind("fused")
            rec = {"layer": name, "batch": b, "epilogue": epi, "fused_ms": f and f.kernel_ms,
                   "fused_name": f and f.name, "fused_build_ms": f and f.build_ms,
                   "unfused_ms": u and u.kernel_ms, "unfused_name": u and u.name,
                   "eager_ms": t and t.kernel_ms, "fused_configs": len(fused),
                   "fused_built": sum(x.ok for x in fused), "statuses": sorted({x.status for x in fused}),
                   "fused_rel_err": f and f.measured.rel_err, "eager_rel_err": t and t.measured and t.measured.rel_err}
            out.append(rec)

            def ms(v):
                return f"{v:8.4f}" if v is not None else f"{'-':>8}"

            sx, su = r.speedup("torch"), r.speedup("unfused")
            line = (f"{name:26} {b:>3} {epi:12} {ms(rec['fused_ms'])} {ms(rec['unfused_ms'])} {ms(rec['eager_ms'])} "
                    f"{(f'{sx:.2f}' if sx else '-'):>6} {(f'{su:.2f}' if su else '-'):>5} "
                    f"{(f'{f.build_ms:.0f}' if f and f.build_ms is not None else '-'):>8} "
                    f"{rec['fused_built']:>4}/{len(fused):<5}")
            print(line, flush=True)
            lines.append(line)
    done = [r for r in out if r.get("fused_ms") and r.get("eager_ms") and r.get("unfused_ms")]
    for b in sorted({r["batch"] for r in done}):
        rs = [r for r in done if r["batch"] == b]
        sf, su, se = (sum(r[k] for r in rs) for k in ("fused_ms", "unfused_ms", "eager_ms"))
        print(f"SUM batch {b}: {len(rs)} layers fused {sf:.4f} ms, unfused {su:.4f} ms, eager {se:.4f} ms: fused "
              f"{se / sf:.2f}x eager, {su / sf:.2f}x unfused", flush=True)
    none = [f"{r['layer']} b{r['batch']}" for r in out if not r.get("fused_ms")]
    print(f"no fused configuration ran: {', '.join(none) or 'none'}")
    if a.json:
        import cudnn_algos.backend as backend

        Path(a.json).write_text(json.dumps({"rows": out, "env": str(backend.environment(0))}, indent=1, default=str))


if __name__ == "__main__":
    main()
