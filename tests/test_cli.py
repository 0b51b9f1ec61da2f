"""CPU: CLI parsing, usage errors (exit 2, naming the flag), no-GPU handling (exit 1, one line, no traceback)."""
import subprocess
import sys

import pytest
import torch

from cudnn_algos import cli


def test_parse_conv_builds_the_module_on_meta():
    m = cli.parse_conv("Conv2d(64, 128, 3, padding=1)")
    assert isinstance(m, torch.nn.Conv2d) and m.weight.device.type == "meta" and m.padding == (1, 1)
    t = cli.parse_conv("nn.ConvTranspose2d(64, 32, 4, stride=2, padding=1)")
    assert t.transposed and t.stride == (2, 2)


@pytest.mark.parametrize(
    "text,match",
    [
        ("Linear(3, 4)", "Linear is not one of"),
        ("Conv2d(64, 128", "is not of the form"),
        ("Conv2d(64, x)", "arguments must be literals"),
        ("__import__('os').system('true')", "is not one of"),
        ("Conv2d(64, 128, 3, groups=5)", "groups"),
        ("64", "must be a call"),
    ],
)
def test_parse_conv_errors(text, match):
    with pytest.raises(cli.UsageError, match=match):
        cli.parse_conv(text)


def test_parse_shape():
    assert cli.parse_shape("32,64,56,56") == (32, 64, 56, 56)
    assert cli.parse_shape("32x64x56x56") == (32, 64, 56, 56)
    with pytest.raises(cli.UsageError, match="--input"):
        cli.parse_shape("32,a")


def _run(*args):
    return subprocess.run([sys.executable, "-m", "cudnn_algos", *args], capture_output=True, text=True, timeout=120)


def test_help_has_examples():
    r = _run("find", "--help")
    assert r.returncode == 0 and "examples:" in r.stdout and "--channels-last" in r.stdout


def test_bad_flag_value_is_usage_error():
    r = _run("find", "--dtype", "int8")
    assert r.returncode == 2 and "--dtype" in r.stderr


def test_bad_input_names_input_shape():
    r = _run("find", "--conv", "Conv2d(3, 8, 3)", "--input", "1,4,8,8")
    assert r.returncode == 2
    assert "input_shape=(1, 4, 8, 8) has 4 channels but the layer expects 3" in r.stderr
    assert "Traceback" not in r.stderr


def test_info_runs_anywhere():
    r = _run("info")
    assert r.returncode == 0, r.stderr
    assert "cudnn_algos" in r.stdout and "libcudnn" in r.stdout and "extension" in r.stdout


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU path; a GPU is visible")
def test_find_without_gpu_is_one_line_exit_1():
    r = _run("find")
    assert r.returncode == 1
    assert r.stderr.strip().count("\n") == 0 and "no CUDA GPU is visible" in r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize(
    "args,match",
    [
        (("--heuristics", "a,zz"), "--heuristics='zz' is not one of"),
        (("--heuristics", ","), "--heuristics is empty"),
        (("--exhaustive", "-3"), "--exhaustive -3 must be >= 0"),
        (("--measure", "--repeats", "0"), "repeats=0 must be >= 1"),
        (("--conv", "Conv2d(3, 8, 3)", "--input", "1,4,8,8"), "has 4 channels but the layer expects 3"),
    ],
)
def test_engines_usage_errors(args, match):
    r = _run("engines", *args)
    assert r.returncode == 2 and match in r.stderr and "Traceback" not in r.stderr, r.stderr


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU path; a GPU is visible")
def test_engines_without_gpu_is_one_line_exit_1():
    r = _run("engines", "--measure")
    assert r.returncode == 1 and "no CUDA GPU is visible" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.parametrize("args,match", [
    (("--directions", "forward,sideways"), "--directions: 'sideways' is not one of"),
    (("--batch", "0"), "--batch 0 must be positive"),
    (("--screen", "x"), "--screen"),
])
def test_profile_usage_errors(args, match):
    r = _run("profile", "resnet50", *args)
    assert r.returncode == 2 and match in r.stderr, r.stderr


def test_profile_checks_optional_packages_before_any_gpu_work(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "rich" else real(name, *a))
    with pytest.raises(cli.UsageError, match="--rich needs the rich package"):
        cli._needs("--rich", "rich")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CLI where no GPU is visible")
def test_profile_without_gpu_is_one_line_exit_1():
    r = _run("profile", "resnet50", "--batch", "2", "--no-e2e")
    assert r.returncode == 1 and len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr


def test_version_and_info_name_the_extension_file():
    r = _run("--version")
    assert r.returncode == 0 and r.stdout.startswith("cudnn-algos ")
    from cudnn_algos import info

    i = info()
    assert i.extension.startswith(("installed (", "jit (")) and "_C" in i.extension
