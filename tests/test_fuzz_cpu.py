"""CPU fuzzing of argument handling against torch's own verdict (issue: reliability). A seeded generator of
convolution layers and inputs — every layer kind, groups/depthwise, dilation, strides, 'same'/'valid', padding modes,
output_padding, odd input_shape types (lists, torch.Size, numpy integers, floats, strings, wrong lengths), dtypes,
layouts — is run through torch (constructing the module, then its forward on small CPU tensors) and through
cudnn_algos.problem.make_problem. Valid in torch -> accepted, with torch's output shape; invalid in torch ->
ValueError or TypeError naming an argument; never another exception type. No GPU needed (problems are validated
before any GPU work); what the GPU does with valid ones is in the GPU tests."""
import random

import numpy as np
import pytest
import torch

from cudnn_algos.problem import device_index, make_problem

N_PROBLEMS = 3000
KINDS = {1: (torch.nn.Conv1d, torch.nn.ConvTranspose1d), 2: (torch.nn.Conv2d, torch.nn.ConvTranspose2d),
         3: (torch.nn.Conv3d, torch.nn.ConvTranspose3d)}
NAMES = ("input_shape", "in_channels", "out_channels", "kernel_size", "stride", "padding", "dilation", "groups",
         "output_padding", "padding_mode", "dtype", "memory_format", "transposed", "channels", "layer")


def _per_dim(rng: random.Random, nd: int, lo: int, hi: int):
    """An int, a tuple of nd ints, or (rarely) a wrong-length tuple."""
    r = rng.random()
    if r < 0.5:
        return rng.randint(lo, hi)
    if r < 0.95:
        return tuple(rng.randint(lo, hi) for _ in range(nd))
    return tuple(rng.randint(lo, hi) for _ in range(nd + 1))


def _case(rng: random.Random) -> dict:
    nd = rng.choice((1, 2, 3))
    transposed = rng.random() < 0.25
    groups = rng.choice((1, 1, 1, 2, 3, 4, 8))
    cin = groups * rng.randint(1, 4) if rng.random() < 0.9 else rng.randint(1, 9)
    cout = groups * rng.randint(1, 4) if rng.random() < 0.9 else rng.randint(1, 9)
    if rng.random() < 0.15:  # depthwise
        cin = cout = groups = rng.choice((4, 8))
    kw = {"kernel_size": _per_dim(rng, nd, 0 if rng.random() < 0.03 else 1, 5),
          "stride": _per_dim(rng, nd, 0 if rng.random() < 0.03 else 1, 3),
          "dilation": _per_dim(rng, nd, 0 if rng.random() < 0.03 else 1, 3), "groups": groups}
    p = rng.random()
    kw["padding"] = ("same" if p < 0.15 else "valid" if p < 0.25 else _per_dim(rng, nd, -1 if p > 0.97 else 0, 3))
    if transposed:
        kw["output_padding"] = _per_dim(rng, nd, 0, 2)
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


def _torch_verdict(c: dict):
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


def _ours(c: dict, m):
    conv = m if m is not None else None
    if conv is None:  # torch refused to build the module: give ours the same numbers as a ConvSpec
        from cudnn_algos.spec import ConvSpec

        kw = dict(c["kw"])
        ks = kw.pop("kernel_size")
        kernel = (ks,) * c["nd"] if isinstance(ks, int) else ks
        conv = ConvSpec(c["cin"], c["cout"], kernel, transposed=c["cls"].__name__.startswith("ConvT"), **kw)
    return make_problem(conv, c["shape"], dtype=c["dtype"], memory_format=c["fmt"])


def _valid_extra(c: dict) -> bool:
    """What torch's meta forward does not check but the problem must: a dtype cuDNN convolves, a layout that
    exists for this rank, and one value per spatial dim (torch's modules do not check tuple lengths: a Conv1d with
    kernel_size=(1, 5) builds a 4-d weight and runs; such a spec is refused here, naming the argument)."""
    lengths_ok = all(not isinstance(v, tuple) or len(v) == c["nd"] for v in c["kw"].values())
    # input_shape includes the batch dim (torch also takes unbatched inputs); a dilation of 0 (torch's transposed
    # convolution runs it; cuDNN's descriptors refuse it): both refused here, naming the argument
    batched = isinstance(c["shape"], str) or len(c["shape"]) != c["nd"] + 1
    dil = c["kw"]["dilation"]
    dilation_ok = all(v > 0 for v in ((dil,) if isinstance(dil, int) else dil))
    dtype_ok = c["dtype"] in ("float32", "float16", "bfloat16", "float64", torch.float16, None)
    fmt_ok = c["fmt"] in (None, "contiguous") or (c["fmt"] == "channels_last" and c["nd"] in (1, 2)) or (
        c["fmt"] == "channels_last_3d" and c["nd"] == 3)
    return dtype_ok and fmt_ok and lengths_ok and batched and dilation_ok


def test_fuzzed_problems_agree_with_torch_and_fail_only_with_value_or_type_errors():
    rng = random.Random(20261130)
    tally = {"valid": 0, "invalid": 0}
    disagreements = []
    for i in range(N_PROBLEMS):
        c = _case(rng)
        m, torch_shape, why = _torch_verdict(c)
        torch_ok = torch_shape is not None and _valid_extra(c)
        try:
            p = _ours(c, m)
            ours, err = p.shapes.output_shape, None
        except (ValueError, TypeError) as e:
            ours, err = None, e
        except Exception as e:  # noqa: BLE001 (the point of the test: nothing else may escape)
            pytest.fail(f"case {i}: {type(e).__name__}: {e} for {c}")
        if torch_ok:
            tally["valid"] += 1
            if ours != torch_shape:
                disagreements.append((i, "torch accepts", torch_shape, ours, str(err)[:100], c))
        else:
            tally["invalid"] += 1
            if err is None:
                disagreements.append((i, f"torch refuses ({why or 'dtype/layout'})", None, ours, "", c))
            elif not any(n in str(err) for n in NAMES):
                disagreements.append((i, "message names no argument", None, None, str(err)[:100], c))
    assert tally["valid"] > 600 and tally["invalid"] > 600, tally  # both sides well covered
    assert not disagreements, f"{len(disagreements)} of {N_PROBLEMS}: " + "\n".join(map(str, disagreements[:8]))


@pytest.mark.parametrize("device", ["cpu", -1, "cuda:abc", "meta", 1.5, True, [0], torch.device("cpu")])
def test_bad_devices_are_value_or_type_errors_naming_device(device):
    with pytest.raises((ValueError, TypeError), match="device"):
        device_index(device)


def test_cli_never_tracebacks_on_odd_conv_and_input_strings(capsys):
    """Random --conv / --input strings (nesting, huge numbers, junk): a usage error (2) or, for a valid layer on a
    machine without a GPU, one line (1); never an exception."""
    from cudnn_algos.cli import main

    rng = random.Random(7)
    pieces = ["Conv2d(", "Conv1d(", "ConvTranspose3d(", ")", "(", "[", "]", ",", "3", "-1", "0", "1e309", "2**40",
              "padding='same'", "stride=0", "groups=2", "x", "'", "None", "99999999999999999999", " ", "=", "lambda:0"]
    for i in range(300):
        conv = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 40)))
        if i % 10 == 0:
            conv = "Conv2d(" * rng.randint(50, 400) + ")" * rng.randint(0, 400)
        shape = ",".join(rng.choice(["1", "3", "8", "-2", "0", "x", "1.5", "", "999999999999"])
                         for _ in range(rng.randint(0, 6)))
        try:
            rc = main(["find", "--conv", conv, "--input", shape])
        except SystemExit as e:  # argparse's own usage error (e.g. a value that starts with '-')
            rc = e.code
        assert rc in (1, 2), (conv, shape, rc)
    capsys.readouterr()
