"""apply(unseen=...)'s choices checked layer by layer against float64: a small fp32 network (the GPU tests' 2-D one:
a 3x3 layer, a dilated grouped 3x3 and a strided 1x1) run under apply() from an empty database until every choice
is made (k="auto" also waits for the runtime-compiled candidates built later), then each convolution's forward
output under apply() against torch's float64 convolution of the same input, with the configuration the operator
ran for it. Then every configuration cuDNN's lists offer for each layer and direction, measured by find_engines
against float64: the rows whose relative error passes --tol, named (a wrong engine, or a wrong run of a right one).

    python benchmarks/unseen_numerics.py [--unseen measure_top_k] [--k auto] [--dtype float32] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def net():
    import torch

    return torch.nn.Sequential(torch.nn.Conv2d(8, 32, 3, padding=1), torch.nn.ReLU(),
                               torch.nn.Conv2d(32, 32, 3, padding=2, dilation=2, groups=4, bias=False),
                               torch.nn.ReLU(), torch.nn.Conv2d(32, 16, 1, stride=2))


def rel(a, b) -> float:
    return float((a.double() - b.double()).norm() / b.double().norm().clamp_min(1e-30))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--unseen", default="measure_top_k")
    ap.add_argument("--k", default="auto")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--tol", type=float, default=0.03)
    ap.add_argument("--no-scan", action="store_true", help="skip the find_engines scan")
    ap.add_argument("--json")
    a = ap.parse_args()
    import torch
    import torch.nn.functional as F

    import cudnn_algos

    k = a.k if a.k == "auto" else int(a.k)
    dtype = getattr(torch, a.dtype)
    torch.manual_seed(0)
    model = net().cuda().to(dtype)
    x = torch.randn(4, 8, 16, 16, device="cuda", dtype=dtype)
    convs = [m for m in model if isinstance(m, torch.nn.Conv2d)]
    out: dict = {"layers": [], "wrong_rows": []}
    with tempfile.TemporaryDirectory() as d, cudnn_algos.apply(model, Path(d) / "db.sqlite", unseen=a.unseen,
                                                               k=k) as h:
        for _ in range(3):  # choices made, later candidates built and timed, then run
            xi = x.detach().requires_grad_(True)
            model(xi).float().pow(2).mean().backward()
            h.wait(300)
        torch.cuda.synchronize()
        counts = {c["key"]: c for c in h.counts()}
        for dec in h.decisions():
            print(f"decision {dec.key}: origin={dec.origin} later={getattr(dec, 'later', 0)} "
                  f"offered={list(dec.offered)[:4]} timed_ms={[round(t, 4) if t else t for t in dec.timed_ms]}")
        for key, c in counts.items():
            print(f"count {key}: config={c['config']} origin={c['origin']} pinned={c['pinned']} "
                  f"fallback={c['fallback']} {c['reason']}")
        h.reset_counts()
        inp = x
        for i, m in enumerate(model):
            with torch.no_grad():
                y = m(inp)
                if isinstance(m, torch.nn.Conv2d):
                    ref = F.conv2d(inp.double(), m.weight.double(), None if m.bias is None else m.bias.double(),
                                   m.stride, m.padding, m.dilation, m.groups)
                    e = rel(y, ref)
                    ran = [c["config"] for c in h.counts() if c["pinned"] > 0]
                    h.reset_counts()
                    print(f"layer {i} {m}: forward rel err {e:.3g} ran {ran}")
                    out["layers"].append({"layer": i, "module": str(m), "rel_err": e, "ran": ran,
                                          "input_shape": list(inp.shape)})
            inp = y
    for lay, conv in zip(out["layers"], convs):  # a wrong layer's configuration alone, and its engines x knobs
        if lay["rel_err"] <= a.tol:
            continue
        for exhaustive, configs in ((False, lay["ran"]), (True, ())):
            try:
                res = cudnn_algos.find_engines(conv, tuple(lay["input_shape"]), dtype=dtype, measure=True, repeats=3,
                                               warmup=1, compare_torch=False, configs=configs,
                                               exhaustive=exhaustive,
                                               max_configs=400)
            except Exception as e:  # noqa: BLE001 (a diagnostic: the failure is printed)
                print(f"alone {configs} exhaustive={exhaustive}: {type(e).__name__}: {e}")
                continue
            errs = [(r.name, getattr(r.measured, "rel_err", None), r.status) for r in res.rows]
            wrong = [e for e in errs if e[1] is not None and e[1] > a.tol]
            print(f"alone {list(configs)} exhaustive={exhaustive}: {len(errs)} rows, "
                  f"{sum(e[1] is not None for e in errs)} measured, {len(wrong)} wrong: {wrong[:12]}")
            if configs:
                print(f"  its rows: {errs}")
    if not a.no_scan:
        inp_shapes = [lay["input_shape"] for lay in out["layers"]]
        for conv, shape in zip(convs, inp_shapes):
            for direction in ("forward", "backward_data", "backward_filter"):
                try:
                    res = cudnn_algos.find_engines(conv, tuple(shape), direction=direction, dtype=dtype,
                                                   measure=True, repeats=3, warmup=1, compare_torch=False,
                                                   runtime_compiled=True)
                except Exception as e:  # noqa: BLE001 (a diagnostic: the failure is printed)
                    print(f"scan {conv} {direction}: {type(e).__name__}: {e}")
                    continue
                n = 0
                for r in res.rows:
                    err = getattr(r.measured, "rel_err", None) if r.measured else None
                    if err is not None:
                        n += 1
                    if err is not None and err > a.tol:
                        print(f"WRONG {direction} {tuple(shape)} {conv}: {r.name} rel_err {err:.3g} "
                              f"notes {r.behavior_notes} {r.numerical_notes}")
                        out["wrong_rows"].append({"direction": direction, "shape": shape, "module": str(conv),
                                                  "config": r.name, "rel_err": err})
                print(f"scan {direction} {tuple(shape)} {conv}: {n} rows measured, "
                      f"{sum(1 for w in out['wrong_rows'] if w['direction'] == direction and w['shape'] == shape)}"
                      " wrong")
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1))
    bad = [lay for lay in out["layers"] if lay["rel_err"] > a.tol]
    print(f"summary: {len(bad)} of {len(out['layers'])} layers wrong under apply(); "
          f"{len(out['wrong_rows'])} wrong rows in the scan")
    return 0


if __name__ == "__main__":
    sys.exit(main())
