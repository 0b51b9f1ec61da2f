"""A seeded generator of convolution problems and torch's verdict on each (shared by tests/test_fuzz_cpu.py and
benchmarks/fuzz_gpu.py): every layer kind, groups/depthwise, dilation, strides, 'same'/'valid', padding modes,
output_padding, odd input_shape types, dtypes, layouts."""
import random

import numpy as np
import torch

from cudnn_algos.problem import make_problem

N_PROBLEMS = 3000
KINDS = {1: (torch.nn.Conv1d, torch.nn.ConvTranspose1d), 2: (torch.nn.Conv2d, torch.nn.ConvTranspose2d),
         3: (torch.nn.Conv3d, torch.nn.ConvTranspose3d)}
NAMES = ("input_shape", "in_channels", "out_channels", "kernel_size", "stride", "padding", "dilation", "groups",
         "output_padding", "padding_mode", "dtype", "memory_format", "transposed", "channels", "layer")


def per_dim(rng: random.Random, nd: int, lo: int, hi: int):
    """An int, a tuple of nd ints, or (rarely) a wrong-length tuple."""
    r = rng.random()
    if r < 0.5:
        return rng.randint(lo, hi)
    if r < 0.95:
        return tuple(rng.randint(lo, hi) for _ in range(nd))
    return tuple(rng.randint(lo, hi) for _ in range(nd + 1))


def case(rng: random.Random) -> dict:
    nd = rng.choice((1, 2, 3))
    transposed = rng.random() < 0.25
    groups = rng.choice((1, 1, 1, 2, 3, 4, 8))
    cin = groups * rng.randint(1, 4) if rng.random() < 0.9 else rng.randint(1, 9)
    cout = groups * rng.randint(1, 4) if rng.random() < 0.9 else rng.randint(1, 9)
    if rng.random() < 0.15:  # depthwise
        cin = cout = groups = rng.choice((4, 8))
    kw = {"kernel_size": per_dim(rng, nd, 0 if rng.random() < 0.03 else 1, 5),
          "stride": per_dim(rng, nd, 0 if rng.random() < 0.03 else 1, 3),
          "dilation": per_dim(rng, nd, 0 if rng.random() < 0.03 else 1, 3), "groups": groups}
    p = rng.random()
    kw["padding"] = ("same" if p < 0.15 else "valid" if p < 0.25 else per_dim(rng, nd, -1 if p > 0.97 else 0, 3))
    if transposed:
        kw["output_padding"] = per_dim(rng, nd, 0, 2)
        if isinstance(kw["padding"], str) and rng.random() < 0.8:
            kw["padding"] = 0
    elif rng.random() < 0.25:
        kw["padding_mode"] = rng.choice(("reflect", "replicate", "circular"))
    spatial = [rng.randint(1, 12) for _ in range(nd)]
    shape: object = [rng.choice((1, 2, 3)), cin if rng.random() < 0.93 else cin + 1, *spatial]
    t = rng.random()
    if t < 0.08:
        shape = shape[:-1]  # wrong rank
    elif t < 0.12:
        shape[-1] = float(shape[-1]) if rng.random() < 0.5 else float("nan")
    elif t < 0.14:
        shape = "x".join(map(str, shape))
    elif t < 0.2:
        shape = [np.int64(v) for v in shape]
    elif t < 0.25:
        shape = torch.Size(shape)
    elif t < 0.27:
        shape[-1] = 0
    else:
        shape = tuple(shape)
    dtype = rng.choice(("float32", "float16", "bfloat16", "float64", torch.float16, None) if rng.random() < 0.9
                       else ("int8", "float8", torch.int32, 3))
    fmt = (rng.choice((None, "contiguous", {1: "contiguous", 2: "channels_last", 3: "channels_last_3d"}[nd]))
           if rng.random() < 0.9 else rng.choice(("channels_last_3d" if nd < 3 else "channels_last", "sideways", 1)))
    return {"nd": nd, "cls": KINDS[nd][transposed], "cin": cin, "cout": cout, "kw": kw, "shape": shape,
            "dtype": dtype, "fmt": fmt}


def torch_verdict(c: dict):
    """(module or None, torch's output shape or None, why torch refused)."""
    try:
        m = c["cls"](c["cin"], c["cout"], **c["kw"])
    except Exception as e:  # noqa: BLE001 (any refusal counts: we only need torch's yes/no)
        return None, None, f"constructor: {type(e).__name__}"
    shape = c["shape"]
    try:
        x = torch.randn(tuple(int(v) for v in shape) if not isinstance(shape, str) else shape)
        if isinstance(shape, (list, tuple, torch.Size)) and any(isinstance(v, float) for v in shape):
            raise TypeError("float dims")  # torch.empty((.., 8.0)) refuses floats too
        with torch.no_grad():
            y = m(x)  # on the CPU: torch's meta kernels skip some checks (kernel size 0, output_padding, channels)
    except Exception as e:  # noqa: BLE001
        return m, None, f"forward: {type(e).__name__}"
    if y.numel() == 0:  # torch returns an empty output; there is nothing to convolve, and it is refused here
        return m, None, "empty output"
    return m, tuple(y.shape), ""


def ours_problem(c: dict, m):
    conv = m if m is not None else None
    if conv is None:  # torch refused to build the module: give ours the same numbers as a ConvSpec
        from cudnn_algos.spec import ConvSpec

        kw = dict(c["kw"])
        ks = kw.pop("kernel_size")
        kernel = (ks,) * c["nd"] if isinstance(ks, int) else ks
        conv = ConvSpec(c["cin"], c["cout"], kernel, transposed=c["cls"].__name__.startswith("ConvT"), **kw)
    return make_problem(conv, c["shape"], dtype=c["dtype"], memory_format=c["fmt"])


def valid_extra(c: dict) -> bool:
    """What torch's meta forward does not check but the problem must: a dtype cuDNN convolves, a layout that
    exists for this rank, output_padding below stride, and one value per spatial dim (torch's modules do not check
    tuple lengths: a Conv1d with kernel_size=(1, 5) builds a 4-d weight and runs; such a spec is refused here, naming
    the argument)."""
    lengths_ok = all(not isinstance(v, tuple) or len(v) == c["nd"] for v in c["kw"].values())
    # input_shape includes the batch dim (torch also takes unbatched inputs); a dilation of 0 (torch's transposed
    # convolution runs it; cuDNN's descriptors refuse it): both refused here, naming the argument
    batched = isinstance(c["shape"], str) or len(c["shape"]) != c["nd"] + 1
    dil = c["kw"]["dilation"]
    dilation_ok = all(v > 0 for v in ((dil,) if isinstance(dil, int) else dil))
    dtype_ok = c["dtype"] in ("float32", "float16", "bfloat16", "float64", torch.float16, None)
    fmt_ok = c["fmt"] in (None, "contiguous") or (c["fmt"] == "channels_last" and c["nd"] in (1, 2)) or (
        c["fmt"] == "channels_last_3d" and c["nd"] == 3)
    # output_padding >= stride (torch takes it when below dilation): cuDNN's mirrored convolution cannot express it
    # (found by the GPU fuzz: cuDNN's output dims disagree); refused here, naming output_padding
    op, st = c["kw"].get("output_padding", 0), c["kw"]["stride"]
    n = c["nd"]
    ops = (op,) * n if isinstance(op, int) else op
    sts = (st,) * n if isinstance(st, int) else st
    op_ok = not c["cls"].__name__.startswith("ConvTranspose") or len(ops) != len(sts) or all(
        o < s for o, s in zip(ops, sts))
    return dtype_ok and fmt_ok and lengths_ok and batched and dilation_ok and op_ok
