"""CPU fuzzing of argument handling against torch's own verdict (issue: reliability). A seeded generator of
convolution layers and inputs — every layer kind, groups/depthwise, dilation, strides, 'same'/'valid', padding modes,
output_padding, odd input_shape types (lists, torch.Size, numpy integers, floats, strings, wrong lengths), dtypes,
layouts — is run through torch (constructing the module, then its forward on small CPU tensors) and through
cudnn_algos.problem.make_problem. Valid in torch -> accepted, with torch's output shape; invalid in torch ->
ValueError or TypeError naming an argument; never another exception type. No GPU needed (problems are validated
before any GPU work); what the GPU does with valid ones is in the GPU tests."""
import random

import pytest
import torch

from cudnn_algos.problem import device_index
from problem_gen import N_PROBLEMS, NAMES, case, ours_problem, torch_verdict, valid_extra

def test_fuzzed_problems_agree_with_torch_and_fail_only_with_value_or_type_errors():
    rng = random.Random(20261130)
    tally = {"valid": 0, "invalid": 0}
    disagreements = []
    for i in range(N_PROBLEMS):
        c = case(rng)
        m, torch_shape, why = torch_verdict(c)
        torch_ok = torch_shape is not None and valid_extra(c)
        try:
            p = ours_problem(c, m)
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
