"""CPU: CLI parsing, usage errors (exit 2, naming the flag), no-GPU handling (exit 1, one line, no traceback)."""
import subprocess
from pathlib import Path
import sys

import pytest
import torch

import cudnn_algos
from cudnn_algos import cli
from conftest import run_cli


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
    return run_cli(*args)


def _run_process(*args):
    """The real entry point (python -m cudnn_algos) in a process of its own."""
    return subprocess.run([sys.executable, "-m", "cudnn_algos", *args], capture_output=True, text=True, timeout=120)


def test_help_has_examples():
    r = _run_process("find", "--help")  # the installed entry point itself, once
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
    r = _run_process("find")  # a process of its own: the exit status is what a shell sees
    assert r.returncode == 1
    assert r.stderr.strip().count("\n") == 0 and "no CUDA GPU is visible" in r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize(
    "args,match",
    [
        (("--heuristics", "a,zz"), "--heuristics='zz' is not one of"),
        (("--heuristics", ","), "--heuristics is empty"),
        (("--exhaustive", "-3"), "--exhaustive -3 must be >= 0"),
        (("--build-threads", "0"), "--build-threads=0 must be >= 1"),
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
        cli.checks.needs("--rich", "rich")


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


FIXTURES = __import__("pathlib").Path(__file__).parent / "fixtures"
R50_A = FIXTURES / "profile_resnet50_fp16-nhwc_b32_engines.json.gz"
R50_B = FIXTURES / "profile_resnet50_fp16-nhwc_b32_fwd_bwd-data_legacy_engines.json.gz"


def test_show_renders_a_saved_report_without_a_gpu(tmp_path):
    pytest.importorskip("pandas")
    r = _run("show", str(R50_A), "--fidelity", "--csv", str(tmp_path / "r.csv"), "--html", str(tmp_path / "r.html"))
    assert r.returncode == 0, r.stderr
    assert "resnet50 fp16-nhwc batch 32: 53 convolution calls" in r.stdout and "best/on" in r.stdout
    assert "fidelity of the kernel clock" in r.stdout
    assert (tmp_path / "r.csv").read_text().startswith("model,layers,uses")
    assert "<table>" in (tmp_path / "r.html").read_text()


def test_every_output_format_is_a_flag_and_parquet_holds_the_csv_rows(tmp_path):
    """results.writers.WRITERS: each format is a --<name> flag of show and profile (the registry is the one place);
    show --parquet writes the same long-form rows as --csv, typed."""
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    from cudnn_algos.cli.parsing import build_parser
    from cudnn_algos.results.writers import WRITERS

    parser = build_parser()
    for command in (["show", "F"], ["profile", "resnet50"]):
        for name in WRITERS:
            assert getattr(parser.parse_args(command + [f"--{name}", "P"]), name) == "P"
    r = _run("show", str(R50_A), "--csv", str(tmp_path / "r.csv"), "--parquet", str(tmp_path / "r.parquet"))
    assert r.returncode == 0, r.stderr
    csv, pq = pd.read_csv(tmp_path / "r.csv"), pd.read_parquet(tmp_path / "r.parquet")
    assert len(pq) == len(csv) > 100 and list(pq.columns) == list(csv.columns)
    assert pq.kernel_median_ms.dtype.kind == "f" and f"wrote {tmp_path / 'r.parquet'} ({len(pq)} rows)" in r.stdout


def test_show_usage_errors(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text('{"schema": 1, "model": "old"}')
    r = _run("show", str(bad))
    assert r.returncode == 2 and "schema 1" in r.stderr and "Traceback" not in r.stderr
    r = _run("show", str(tmp_path / "missing.json"))
    assert r.returncode == 2 and "no such file" in r.stderr


def test_compare_two_real_runs(tmp_path):
    pytest.importorskip("pandas")
    r = _run("compare", str(R50_A), str(R50_B), "--top", "3", "--csv", str(tmp_path / "c.csv"))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("A: NVIDIA H200") and lines[1].startswith("B: NVIDIA H200")
    text = " ".join(lines[2:4])  # the summary, wrapped to 120 columns
    assert "candidates in both runs" in lines[2] and "beyond both runs' spread and 3%" in text
    assert any(l.startswith("torch's op (torch on): B/A median") for l in lines)
    assert max(map(len, lines)) <= 120 and any(l.startswith("  B/A      A ms") for l in lines)  # a header, units above
    legend = [l for l in lines if l.startswith("[")]
    assert all("{" in l or "(" in l for l in legend)  # whole names under the table, pasteable
    import pandas as pd

    t = pd.read_csv(tmp_path / "c.csv")
    assert len(t) > 1000 and {"ratio", "beyond_spread", "kernel_a_ms", "kernel_b_ms"} <= set(t.columns)
    assert (t.ratio - t.kernel_b_ms / t.kernel_a_ms).abs().max() < 1e-9
    assert 0.95 < t.ratio.median() < 1.05  # the same GPU and software, another process: mostly the same times


@pytest.mark.parametrize("stopped_by,status,says", [("budget", 3, "stopped at the time budget (--budget-s) as planned"),
                                                     ("ctrl-c", 130, "interrupted")])
def test_a_stop_at_the_budget_has_its_own_exit_status_and_says_how_to_resume(monkeypatch, capsys, make, tmp_path,
                                                                             stopped_by, status, says):
    """CPU (profile and tune replaced by fakes): a planned, resumable stop at --budget-s exits 3, not Ctrl-C's 130,
    and the last line says how to continue."""
    import dataclasses

    from cudnn_algos import model, problem, tuning

    monkeypatch.setattr(problem, "device_index", lambda d: 0)
    rep = dataclasses.replace(make.model_report(), interrupted=True, stopped_by=stopped_by)
    monkeypatch.setattr(model, "profile", lambda *a, **k: rep)
    store = tmp_path / "run.jsonl"
    assert cli.main(["profile", "resnet50", "--batch", "1", "--budget-s", "5", "--store", str(store)]) == status
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert says in last and f"kept in {store}: the same command again continues" in last
    assert cli.main(["profile", "resnet50", "--batch", "1", "--budget-s", "5"]) == status
    assert "add --store PATH" in capsys.readouterr().err.strip().splitlines()[-1]

    done = tuning.TuneResult(searched=4, already=0, unsupported=0, failed={}, seconds=5.0, interrupted=True,
                             db=str(tmp_path / "t.sqlite"), stopped_by=stopped_by, todo=9)
    monkeypatch.setattr(tuning, "tune", lambda *a, **k: done)
    assert cli.main(["tune", "resnet50", "--batch", "1", "--budget-s", "5", "--db", done.db]) == status
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert says in last and "4 of 9 searches stored" in last and "the same command again continues" in last


@pytest.mark.parametrize("args", [["find", "--input=--"], ["find", "--input", ""], ["find", "--conv=--"],
                                  ["engines", "--input=--"], ["find", "--workspace-limit", str(2**63)],
                                  ["find", "--workspace-limit", "-1"], ["find", "--repeats", "0", "--measure"]])
def test_odd_argument_values_are_usage_errors_without_a_traceback(args):
    r = _run(*args)
    assert r.returncode == 2 and "Traceback" not in r.stderr and "error:" in r.stderr, r.stderr


def test_a_misspelled_top_level_option_is_named_with_the_nearest_one():
    r = _run("--versoin")
    assert r.returncode == 2 and "unrecognized option '--versoin' (did you mean --version?)" in r.stderr
    assert _run("--version").stdout.startswith("cudnn-algos ")


def test_a_usage_error_prints_the_commands_own_usage():
    r = _run("find", "--conv", "Conv2d(3, 8, 3)", "--input", "1,4,8,8")
    assert r.returncode == 2 and r.stderr.startswith("usage: cudnn-algos find ")


def test_info_writes_cuda_versions_as_people_do():
    from cudnn_algos.installation import _cuda_version

    assert _cuda_version(13000) == "13.0" and _cuda_version(12080) == "12.8" and _cuda_version(0) == "none (no driver)"


FIXTURE = "tests/fixtures/profile_resnet50_fp16-nhwc_b32_engines.json.gz"


LAYER_ERRORS = [  # argument errors of the commands that take a layer or a model (each took 5-8 s importing torch)
    ["find", "--conv", "Conv2d(8, 8, 3)", "--input", "2,9,16,16"],
    ["engines", "--conv", "Conv2d(8, 8, 3, groups=3)", "--input", "2,8,16,16"],
    ["find", "--conv", "Conv2d(8, 8, 3, nope=1)"], ["engines", "--conv", "Conv2d(8, 8, (3,))"],
    ["find", "--conv", "Conv2d(8, 8, 3)", "--input", "2,8,2,2"], ["engines", "--input", "2,x,y"],
    ["engines", "--exhaustive", "-1"], ["profile", "resnet50", "--batch", "0"],
    ["profile", "resnet50", "--directions", "fwd"], ["tune", "resnet50", "--input", "2,3,a"],
    ["tune", "nosuchmodel"], ["profile", "missing.py:make"], ["profile", "resnet50", "--build-threads", "0"],
]


@pytest.mark.parametrize("argv", [f.split() for f in ["--help", "--version", "find --help", "--versoin",
                                                        f"show {FIXTURE}", f"show {FIXTURE} --fidelity",
                                                        "db --help"]] + LAYER_ERRORS)
def test_help_version_usage_errors_and_show_do_not_import_torch(argv):
    """CPU: parsing imports nothing heavy, so --help, --version and a usage error answer without torch (seconds to
    import): also a wrong --conv, --input, --batch or model, checked without torch before the command imports it;
    saved results load and print without it; a command that needs torch imports it when it runs."""
    import subprocess
    import sys

    code = ("import sys\nfrom cudnn_algos.cli import main\ntry:\n    rc = main(sys.argv[1:])\nexcept SystemExit as e:\n"
            "    rc = e.code\nprint('TORCH', 'torch' in sys.modules, 'RC', rc)")
    r = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, timeout=60,
                       cwd=Path(__file__).parent.parent)
    assert "TORCH False" in r.stdout and "Traceback" not in r.stderr, r.stdout[-2000:] + r.stderr[-2000:]
    if argv in LAYER_ERRORS:
        assert "RC 2" in r.stdout and r.stderr.strip().splitlines()[-1].startswith("cudnn-algos: error: "), r.stderr


def test_the_builtin_model_names_are_the_zoos():
    from cudnn_algos.choices import BUILTIN_MODEL_NAMES
    from cudnn_algos.builtin_models import BUILTIN_MODELS

    assert tuple(BUILTIN_MODELS) == BUILTIN_MODEL_NAMES


def test_every_repro_command_parses_with_the_cli(make):
    """CPU: the long-form tables' `repro` column (cudnn_algos.repro) names only flags the CLI's parser has, for
    every kind of candidate (engine configuration, legacy algorithm, torch's op on and off): a renamed flag fails
    here, not in a user's shell."""
    import shlex

    from cudnn_algos.repro import CANDIDATE_KINDS

    recs = make.model_report().to_records()
    seen = {r["candidate_kind"] for r in recs}
    assert {"engine", "torch_on"} <= seen
    lines = {r["repro"] for r in recs}
    from cudnn_algos.repro import repro_command

    spec = cudnn_algos.ConvSpec.from_module(torch.nn.Conv1d(4, 8, 3, padding=1, groups=2))
    lines |= {repro_command(k, "eng1{TILE_SIZE=2}" if k == "engine" else "IMPLICIT_GEMM", spec=spec,
                            input_shape=(2, 4, 16), dtype="bfloat16", memory_format="channels_last",
                            direction="backward_data", math_type="tensor_op" if k == "legacy" else None)
              for k in CANDIDATE_KINDS}
    parser = cli.build_parser()
    for line in sorted(lines):
        argv = shlex.split(line)
        assert argv[0] == "cudnn-algos"
        a = parser.parse_args(argv[1:])  # SystemExit on any unknown flag or bad choice
        assert a.command in ("engines", "find") and cli.parse_conv(a.conv) is not None
        assert cli.parse_shape(a.input) and a.measure
