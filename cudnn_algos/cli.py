"""``cudnn-algos`` / ``python -m cudnn_algos``: info, find (one layer, legacy algorithms), engines (one layer, the
graph API's engine configurations) and profile (a whole model).

Exit codes: 0 ok; 1 the GPU, cuDNN or the extension failed (one line on stderr, no traceback); 2 bad arguments;
3 profile or tune stopped at --budget-s as planned (what was done is kept: the same command again continues);
130 interrupted (Ctrl-C).
"""
from __future__ import annotations

import argparse
import ast
import os
import sys
from typing import Sequence

DEFAULT_CONV = "Conv2d(64, 128, 3, padding=1)"
DEFAULT_INPUT = "32,64,56,56"

EXAMPLES = f"""examples:
  cudnn-algos profile resnet50 --batch 32 --dtype float16 --channels-last --plot out/
  cudnn-algos profile torchvision:mobilenet_v3_small --batch 64 --json report.json --csv report.csv
  cudnn-algos profile my_model.py:build --input 8,3,256,256 --directions forward
  cudnn-algos info
  cudnn-algos find                                   # {DEFAULT_CONV} on input {DEFAULT_INPUT}
  cudnn-algos find --conv "Conv2d(256, 256, 3, padding=1)" --input 32,256,14,14 --dtype float16 --channels-last
  cudnn-algos find --conv "Conv1d(80, 256, 5)" --input 8,80,1000 --direction all --json out.json
  cudnn-algos find --conv "ConvTranspose2d(64, 32, 4, stride=2, padding=1)" --input 8,64,32,32 --mode find_ex
  cudnn-algos engines --conv "Conv2d(256, 256, 3, padding=1)" --input 32,256,14,14 --dtype float16 \
      --channels-last --measure --torch-benchmark on
  cudnn-algos engines --exhaustive 200 --direction backward_filter --json engines.json
  cudnn-algos engines --measure --refine 3 --torch-benchmark on      # search around the 3 fastest
"""

_CONV_TYPES = ("Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d")


EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_BUDGET, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


class UsageError(Exception):
    """A bad argument: exit 2, the usage line, then the message."""

    show_usage = True


class FileError(UsageError):
    """A named input file that cannot be used (missing, damaged, not a result): exit 2, the message alone."""

    show_usage = False


def _check_outputs(inputs: dict, outputs: dict, dirs: dict | None = None) -> None:
    """Before any work: no output over an input or over another output, each output's directory there and
    writable, a figures directory not an existing file. UsageError naming the flag."""
    from .files import check_distinct, writable_dir, writable_dir_of

    try:
        check_distinct(inputs, outputs)
        for flag, path in outputs.items():
            writable_dir_of(flag, path)
        for flag, path in (dirs or {}).items():
            writable_dir(flag, path)
    except ValueError as e:
        raise UsageError(str(e)) from None


def _stop_status(stopped_by: str, resume: str) -> int:
    """The exit status of a run that stopped early, with its last line saying so (on stderr, so that a --json or
    table on stdout stays clean)."""
    if stopped_by == "budget":
        print(f"cudnn-algos: stopped at the time budget (--budget-s) as planned: {resume}", file=sys.stderr)
        return EXIT_BUDGET
    print(f"cudnn-algos: interrupted: {resume}", file=sys.stderr)
    return EXIT_INTERRUPTED


def parse_conv(text: str):
    """'Conv2d(64, 128, 3, padding=1)' -> that torch module, built on the meta device. Only literal arguments are
    accepted (nothing is evaluated)."""
    import torch

    if not isinstance(text, str) or not text.strip():  # argparse hands `--conv=--` over as a list
        raise UsageError(f"--conv {text!r}: give a call such as Conv2d(64, 128, 3, padding=1)")
    if len(text) > 1000:
        raise UsageError(f"--conv is {len(text)} characters long: give a call such as Conv2d(64, 128, 3, padding=1)")
    try:
        node = ast.parse(text.strip(), mode="eval").body
    except (SyntaxError, RecursionError, MemoryError, ValueError):
        raise UsageError(f"--conv {text!r} is not of the form Conv2d(64, 128, 3, padding=1)") from None
    if not isinstance(node, ast.Call):
        raise UsageError(f"--conv {text!r} must be a call such as Conv2d(64, 128, 3)")
    name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
    if name not in _CONV_TYPES:
        raise UsageError(f"--conv {text!r}: {name or '?'} is not one of {', '.join(_CONV_TYPES)}")
    try:
        args = [ast.literal_eval(a) for a in node.args]
        kwargs = {k.arg: ast.literal_eval(k.value) for k in node.keywords}
    except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
        raise UsageError(f"--conv {text!r}: arguments must be literals") from None
    kwargs.setdefault("bias", False)
    try:
        return getattr(torch.nn, name)(*args, device="meta", **kwargs)
    except (TypeError, ValueError, RuntimeError, OverflowError, ZeroDivisionError, RecursionError) as e:
        raise UsageError(f"--conv {text!r}: {e}") from None


def parse_shape(text: str, flag: str = "--input") -> tuple[int, ...]:
    if not isinstance(text, str):  # argparse hands `--input=--` over as a list
        raise UsageError(f"{flag} {text!r} must be comma-separated ints, e.g. {DEFAULT_INPUT}")
    if len(text) > 1000:
        raise UsageError(f"{flag} is {len(text)} characters long: give a shape such as {DEFAULT_INPUT}")
    try:
        shape = tuple(int(v) for v in text.replace("x", ",").split(",") if v.strip())
    except ValueError:
        raise UsageError(f"{flag} {text!r} must be comma-separated ints, e.g. {DEFAULT_INPUT}") from None
    if not shape:
        raise UsageError(f"{flag} {text!r} is empty")
    return shape


def _add_layer_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--conv", default=DEFAULT_CONV, help=f"the layer, as torch writes it (default: {DEFAULT_CONV})")
    p.add_argument("--input", default=DEFAULT_INPUT, help=f"input shape N,C,... (default: {DEFAULT_INPUT})")
    p.add_argument("--dtype", default="float32", choices=["float32", "float16", "bfloat16", "float64"])
    p.add_argument("--channels-last", action="store_true", help="channels_last (2-d) / channels_last_3d (3-d) layout")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="cudnn-algos",
        description="See every cuDNN convolution algorithm and engine configuration for a layer or a model, beside "
                    "what torch runs: status, time, workspace, determinism, math, accuracy.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    from . import __version__

    p.add_argument("--version", action="version", version=f"cudnn-algos {__version__}")
    p.add_argument("--debug", action="store_true", help="show the traceback of an unexpected error")
    sub = p.add_subparsers(dest="command", metavar="{info,find,engines,profile,tune,db,show,compare}")
    p.set_defaults(_commands=sub.choices)  # each command's own parser, for its usage line
    sub.required = True
    sub.add_parser("info", help="what the package sees: GPUs, versions, cuDNN library, extension state")
    f = sub.add_parser("find", help="search every algorithm of one layer and print the table",
                       epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    _add_layer_args(f)
    f.add_argument("--direction", default="all", choices=["forward", "backward_data", "backward_filter", "all"],
                   help="the layer's direction (default: all)")
    f.add_argument("--mode", default="find", choices=["find", "find_ex", "heuristic"])
    f.add_argument("--math", default=None, choices=["default", "tensor_op", "tensor_op_allow_conversion", "fma"],
                   help="cuDNN math type (default: what torch uses)")
    f.add_argument("--workspace-limit", type=int, default=None, metavar="BYTES")
    f.add_argument("--device", type=int, default=None)
    f.add_argument("--json", metavar="PATH", help="also write the result as JSON")
    f.add_argument("--measure", action="store_true", help="re-time every algorithm ourselves (kernel/throughput/host)")
    f.add_argument("--repeats", type=int, default=10, help="timing samples per algorithm with --measure")
    f.add_argument("--l2", default="warm", choices=["warm", "cold"], help="L2 mode with --measure")
    f.add_argument("--check-clock", action="store_true", help="with --measure: also the independent clock")

    e = sub.add_parser("engines", help="the graph API's engine configurations of one layer, beside torch's choice",
                       epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    _add_layer_args(e)
    e.add_argument("--direction", default="forward", choices=["forward", "backward_data", "backward_filter", "all"])
    e.add_argument("--heuristics", default=None,
                   help="cuDNN's ranked lists to take configurations from (default: instant,a,b,fallback; none "
                        "with --config)")
    e.add_argument("--config", action="append", default=[], metavar="NAME",
                   help="build exactly this configuration, by its name as rows give it (repeatable)")
    e.add_argument("--exhaustive", type=int, default=0, metavar="N",
                   help="also every engine x knob combination, up to N configurations in all (default: off)")
    e.add_argument("--refine", type=int, default=0, metavar="K",
                   help="with --measure: build every one-knob neighbour of the K fastest configurations (default 0)")
    e.add_argument("--refine-max", type=int, default=64, metavar="N", help="at most N configurations from --refine")
    e.add_argument("--no-runtime-compiled", action="store_true", help="skip engines that compile at run time")
    e.add_argument("--measure", action="store_true", help="time and check every built plan (and torch's op)")
    e.add_argument("--repeats", type=int, default=10, help="timing samples per configuration with --measure")
    e.add_argument("--screen", type=int, default=None, metavar="N",
                   help="with --measure: screen every configuration with N samples, then re-measure the fastest")
    e.add_argument("--check-clock", action="store_true", help="with --measure: also the independent clock")
    e.add_argument("--l2", default="warm", choices=["warm", "cold"], help="L2 mode with --measure")
    e.add_argument("--torch", default=None, choices=["yes", "no"],
                   help="run torch's own op and mark the configuration it ran (default: with --measure)")
    e.add_argument("--torch-benchmark", default="current", choices=["on", "off", "current"],
                   help="cudnn.benchmark for torch's op (default: as torch has it: off)")
    e.add_argument("--device", type=int, default=None)
    e.add_argument("--json", metavar="PATH", help="also write the result(s) as JSON")

    _add_profile_parser(sub)
    _add_tuning_parsers(sub)
    sh = sub.add_parser("show", help="render a saved result (any kind; .json or .json.gz) without a GPU")
    sh.add_argument("file")
    sh.add_argument("--csv", metavar="PATH", help="the long-form table as CSV")
    sh.add_argument("--html", metavar="PATH")
    sh.add_argument("--plot", metavar="DIR", help="figures (model reports)")
    sh.add_argument("--fidelity", action="store_true", help="the kernel clock against the reference clock")
    sh.add_argument("--trace", metavar="PATH", help="the search's timeline as a Chrome trace (chrome://tracing, Perfetto)")
    cp = sub.add_parser("compare", help="two saved results side by side, per problem, direction and candidate")
    cp.add_argument("a")
    cp.add_argument("b")
    cp.add_argument("--top", type=int, default=10, help="how many of the largest changes to list (default 10)")
    cp.add_argument("--floor", type=float, default=0.03,
                    help="flag a change only beyond both runs' spread and this fraction (default 0.03)")
    cp.add_argument("--csv", metavar="PATH", help="every shared candidate with both times and the ratio")
    return p


def _add_model_args(p, dtype_help: str) -> None:
    """The model and example-input arguments `profile` and `tune` share (read back by _model_from_args)."""
    p.add_argument("model", help="resnet50 (built in), torchvision:<name>, or path/file.py:factory")
    p.add_argument("--batch", type=int, default=32, help="batch size of the example input (default 32)")
    p.add_argument("--input", default=None, help="example input shape N,C,... (overrides --batch)")
    p.add_argument("--dtype", default=None, choices=["float32", "float16", "bfloat16", "float64"], help=dtype_help)
    p.add_argument("--channels-last", action="store_true")
    p.add_argument("--directions", default="forward,backward_data,backward_filter")


def _model_from_args(a: argparse.Namespace) -> tuple:
    """(model, example input, name, directions, memory format) from _add_model_args' arguments; UsageError naming
    the flag when one is wrong."""
    from .models import ModelSourceError, load_model
    from .problem import DIRECTIONS

    if a.batch <= 0:
        raise UsageError(f"--batch {a.batch} must be positive")
    directions = tuple(d for d in a.directions.split(",") if d)
    for d in directions:
        if d not in DIRECTIONS:
            raise UsageError(f"--directions: {d!r} is not one of {', '.join(DIRECTIONS)}")
    try:
        model, example, name = load_model(a.model, batch=a.batch,
                                          input_shape=parse_shape(a.input) if a.input else None)
    except ModelSourceError as e:
        raise UsageError(str(e)) from None
    fmt = ("channels_last_3d" if example.dim() == 5 else "channels_last") if a.channels_last else None
    return model, example, name, directions, fmt


def _add_profile_parser(sub) -> None:
    pr = sub.add_parser("profile", help="every distinct convolution of a model in cuDNN's engine space, beside torch",
                        epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    _add_model_args(pr, "dtype of the searches and of the end-to-end check (default: the model's)")
    pr.add_argument("--repeats", type=int, default=7, help="samples per clock for the confirmed rows (default 7)")
    pr.add_argument("--screen", type=int, default=3, help="samples per clock when screening (default 3)")
    pr.add_argument("--refine", type=int, default=3, metavar="K", help="one-knob neighbours of the K fastest (3)")
    pr.add_argument("--refine-max", type=int, default=32, metavar="N", help="at most N configurations from refine")
    pr.add_argument("--legacy", action="store_true", help="also search the legacy algorithms (legacy_best columns)")
    pr.add_argument("--no-runtime-compiled", action="store_true",
                    help="skip engines that compile at run time (torch's benchmark mode tries them)")
    pr.add_argument("--no-torch-off", action="store_true", help="skip torch with benchmark off (a fresh process)")
    pr.add_argument("--check-clock", action="store_true",
                    help="also time every row with the independent clock (torch.profiler) and print the fidelity")
    pr.add_argument("--no-e2e", action="store_true", help="skip the whole-model benchmark-mode check")
    pr.add_argument("--budget-s", type=float, default=None, metavar="S",
                    help="start no new search after S seconds; report what was done (a --store re-run continues)")
    pr.add_argument("--json", metavar="PATH")
    pr.add_argument("--store", metavar="PATH",
                    help="append each finished search to this JSON-lines file; a re-run with it resumes "
                         "(default with --json: PATH.searches.jsonl beside it)")
    pr.add_argument("--csv", metavar="PATH")
    pr.add_argument("--html", metavar="PATH")
    pr.add_argument("--plot", metavar="DIR", help="write the figures (PNG and SVG) into DIR")
    pr.add_argument("--rich", action="store_true", help="print a rich table (needs rich)")
    pr.add_argument("--no-progress", action="store_true")
    pr.add_argument("--device", type=int, default=None)


def _add_tuning_parsers(sub) -> None:
    t = sub.add_parser("tune", help="search a model's convolutions the tuning database lacks and store the winners",
                       epilog="  cudnn-algos tune resnet50 --batch 32 --dtype float16 --channels-last\n"
                              "  then, in your script: cudnn_algos.apply(model)",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    _add_model_args(t, "what the layers receive when the model runs (float16 for autocast; default: the model's)")
    t.add_argument("--db", metavar="PATH", help="the tuning database (default: $CUDNN_ALGOS_DB or the user cache)")
    t.add_argument("--budget-s", type=float, default=None, metavar="S", help="start no new search after S seconds")
    t.add_argument("--quick", action="store_true",
                   help="search only torch's own candidate lists, fewer samples, no refine (a cheaper tune)")
    t.add_argument("--torch-margin", type=float, default=None, metavar="F",
                   help="store torch's own op as a winner only when faster than the best configuration by more than "
                        "this fraction (default 0.03)")
    t.add_argument("--no-progress", action="store_true")
    t.add_argument("--device", type=int, default=None)
    d = sub.add_parser("db", help="the tuning database: info | list | export FILE | import FILE | clear | "
                                  "reselect --torch-margin F")
    d.add_argument("action", choices=["info", "list", "export", "import", "clear", "reselect"])
    d.add_argument("file", nargs="?", help="for export/import: a JSON-lines file")
    d.add_argument("--db", metavar="PATH", help="the tuning database (default: $CUDNN_ALGOS_DB or the user cache)")
    d.add_argument("--all", action="store_true", help="clear: every environment (default: this GPU's only)")
    d.add_argument("--torch-margin", type=float, default=None, metavar="F",
                   help="reselect: the stored winners again under this torch_margin, from the stored measurements "
                        "(no GPU; every environment)")


def _cmd_tune(a: argparse.Namespace) -> int:
    from .problem import device_index
    from .tuning import tune

    model, example, _, directions, fmt = _model_from_args(a)
    device_index(a.device)
    try:
        r = tune(model, example, a.db, directions=directions, dtype=a.dtype, memory_format=fmt, budget_s=a.budget_s,
                 search="quick" if a.quick else "full", progress=not a.no_progress, device=a.device,
                 **({} if a.torch_margin is None else {"torch_margin": a.torch_margin}))
    except (ValueError, TypeError) as e:
        raise UsageError(str(e)) from None
    print(r)
    if r.failed:
        return EXIT_FAILED
    if r.interrupted:
        return _stop_status(r.stopped_by, f"{r.searched} of {r.todo} searches stored in {r.db}; the same command "
                                          "again continues with the rest")
    return EXIT_OK


def _cmd_db(a: argparse.Namespace) -> int:
    from .files import check_distinct
    from .tuningdb import TuningDB, default_path

    if a.action in ("export", "import") and not a.file:
        raise UsageError(f"db {a.action} needs a FILE")
    if (a.action == "reselect") != (a.torch_margin is not None):
        raise UsageError("--torch-margin goes with db reselect, and db reselect needs it")
    path = a.db or default_path()
    if a.action == "export":
        try:
            check_distinct({"--db": path}, {"export FILE": a.file})
        except ValueError as e:
            raise UsageError(str(e)) from None
    if a.action in ("info", "list") and not os.path.exists(path):
        print(f"no tuning database at {path} yet (cudnn-algos tune ... makes it)")
        return EXIT_OK
    with TuningDB(a.db, read_only=a.action in ("info", "list", "export")) as db:
        if a.action == "info":
            i = db.info()
            print(f"tuning database {i['path']} (schema {i['schema']}): {i['winners']} winners, "
                  f"{i['candidates']} measured candidates")
            for env, n in i["environments"].items():
                print(f"  {n:6d}  {env}")
        elif a.action == "list":
            ws = db.winners()
            if not ws:
                print(f"no winners stored in {db.path} (cudnn-algos tune ... stores them)")
            for w in ws:
                t = f"{w['kernel_ms']:.4g} ms" if w["kernel_ms"] is not None else "-"
                on = f" (torch {w['torch_on_ms']:.4g} ms)" if w["torch_on_ms"] is not None else ""
                print(f"{w['config']:<48} {t}{on}  {w['key']}  [{w['env']}]")
        elif a.action == "export":
            print(f"exported {db.export(a.file)} winners (and their candidates) to {a.file}")
        elif a.action == "import":
            try:
                n = db.import_(a.file)
            except FileNotFoundError:
                raise UsageError(f"{a.file}: no such file") from None
            except (OSError, ValueError) as e:
                raise UsageError(str(e)) from None
            print(f"imported {n} winners and {n.candidates} candidates from {a.file}" + (
                f"; left out {n.orphans} candidate(s) whose winner is in neither the file nor the database (an "
                "export taken while another process was writing?)" if n.orphans else ""))
        elif a.action == "reselect":
            try:
                c = db.reselect(a.torch_margin)
            except ValueError as e:
                raise UsageError(str(e)) from None
            print(f"torch_margin {a.torch_margin}: {c['to_config']} winners now a configuration instead of torch's "
                  f"op, {c['to_torch']} now torch's op, {c['unchanged']} unchanged"
                  + (f", {c['skipped']} left alone (another search of the problem is stored under that margin)"
                     if c["skipped"] else ""))
        else:
            env = None
            if not a.all:
                from .problem import device_index, environment
                from .tuning import env_key

                env = env_key(environment(device_index(None)))
            print(f"cleared {db.clear(env)} winners" + ("" if a.all else f" of {env}"))
    return 0


def _needs(flag: str, module: str) -> None:
    """An optional package a flag needs, checked before any GPU work (a missing one must not cost a whole run)."""
    import importlib.util

    if importlib.util.find_spec(module) is None:
        raise UsageError(f"{flag} needs the {module} package: pip install {module}")


def _cmd_profile(a: argparse.Namespace) -> int:
    from .problem import device_index
    from .report import profile

    for flag, given, module in (("--rich", a.rich, "rich"), ("--csv", a.csv, "pandas"),
                                ("--plot", a.plot, "matplotlib")):
        if given:
            _needs(flag, module)
    store = a.store or (a.json + ".searches.jsonl" if a.json else None)
    _check_outputs({"model": a.model.rsplit(":", 1)[0] if a.model.endswith(".py") or ".py:" in a.model else None},
                   {"--json": a.json, "--csv": a.csv, "--html": a.html, "--store": store}, {"--plot": a.plot})
    model, example, name, directions, fmt = _model_from_args(a)
    device_index(a.device)  # a usable GPU? (CudaUnavailableError: exit 1 with one line)
    try:
        report = profile(model, example, directions=directions, dtype=a.dtype, memory_format=fmt, repeats=a.repeats,
                         screen=a.screen, refine=a.refine, refine_max=a.refine_max, legacy=a.legacy,
                         runtime_compiled=not a.no_runtime_compiled,
                         torch_off=not a.no_torch_off, check_clock=a.check_clock, end_to_end_check=not a.no_e2e,
                         progress=not a.no_progress, device=a.device, name=name,
                         store=store, budget_s=a.budget_s)
    except (ValueError, TypeError) as e:
        raise UsageError(str(e)) from None
    if a.json:  # the primary file first: a report that fails later must not lose the run
        report.to_json(a.json)
    if a.rich:
        from rich.console import Console

        Console(width=max(120, Console().width)).print(report.rich_table())
    else:
        print(report)
    if a.check_clock:
        from .results import fidelity_table

        print("\n".join(fidelity_table([report])))
    if a.json:
        print(f"wrote {a.json}")
    for path, write in ((a.csv, report.to_csv), (a.html, report.to_html)):
        if path:
            write(path)
            print(f"wrote {path}")
    if a.plot:
        for p in report.plot(a.plot):
            print(f"wrote {p}")
    if not report.interrupted:
        return EXIT_OK
    return _stop_status(report.stopped_by, f"{len(report.problems)} problem(s) searched; " + (
        f"they are kept in {store}: the same command again continues with the rest" if store else
        "nothing was kept for a re-run: add --store PATH (or --json PATH) to make the next run resumable"))


def _load(path: str):
    from .errors import ResultFileError
    from .results import load_json

    try:
        return load_json(path)
    except FileNotFoundError:
        raise FileError(f"{path}: no such file") from None
    except ResultFileError as e:  # names the file itself
        raise FileError(str(e)) from None
    except (ValueError, KeyError, TypeError) as e:  # not JSON, another schema, not a result
        raise FileError(f"{path}: {e}") from None


def _cmd_show(a: argparse.Namespace) -> int:
    from .files import atomic_write
    from .results import ModelReport, fidelity_table

    for flag, given, module in (("--csv", a.csv, "pandas"), ("--plot", a.plot, "matplotlib")):
        if given:
            _needs(flag, module)
    _check_outputs({"FILE": a.file}, {"--csv": a.csv, "--html": a.html, "--trace": a.trace}, {"--plot": a.plot})
    obj = _load(a.file)
    if a.plot and not isinstance(obj, ModelReport):
        raise UsageError(f"--plot draws model reports; {a.file} holds a {type(obj).__name__}")
    print(obj)
    if a.fidelity:
        print("\n".join(fidelity_table([obj])))
    if a.csv:
        atomic_write(a.csv, obj.to_dataframe().to_csv(index=False))
        print(f"wrote {a.csv}")
    if a.html:
        html = obj.to_html() if isinstance(obj, ModelReport) else f"<html><body>{obj._repr_html_()}</body></html>"
        atomic_write(a.html, html)
        print(f"wrote {a.html}")
    if a.plot:
        for path in obj.plot(a.plot):
            print(f"wrote {path}")
    if a.trace:
        from .trace import write_chrome_trace

        try:
            n = write_chrome_trace(obj, a.trace)
        except ValueError as e:
            raise UsageError(f"--trace: {e}") from None
        print(f"wrote {a.trace} ({n} phase slices)")
    return 0


def _cmd_compare(a: argparse.Namespace) -> int:
    _needs("compare", "pandas")
    from .comparison import compare

    if a.top < 0:
        raise UsageError(f"--top {a.top} must be >= 0")
    _check_outputs({"A": a.a, "B": a.b}, {"--csv": a.csv})
    try:
        c = compare(_load(a.a), _load(a.b), floor=a.floor)
    except ValueError as e:
        raise UsageError(f"--floor: {e}") from None
    print("\n".join(c.summary_lines(top=a.top)))
    if a.csv:
        from .files import atomic_write

        atomic_write(a.csv, c.table.to_csv(index=False))
        print(f"wrote {a.csv}")
    return 0


def _layer(a: argparse.Namespace):
    """(module, input shape, memory format) from --conv, --input and --channels-last."""
    conv, shape = parse_conv(a.conv), parse_shape(a.input)
    fmt = ("channels_last_3d" if len(shape) == 5 else "channels_last") if a.channels_last else None
    return conv, shape, fmt


def _cmd_find(a: argparse.Namespace) -> int:
    from .api import find, validate

    _check_outputs({}, {"--json": a.json})
    conv, shape, fmt = _layer(a)
    kwargs = dict(direction=a.direction, dtype=a.dtype, memory_format=fmt, math=a.math, mode=a.mode,
                  workspace_limit=a.workspace_limit, device=a.device)
    try:
        if a.measure:  # argument checks first; validate() ends with the check that a GPU is usable
            from .timing import check_config

            check_config(a.repeats, 3, a.l2, "cuda")
        validate(conv, shape, **kwargs)
    except (ValueError, TypeError) as e:  # only argument errors are usage errors
        raise UsageError(str(e)) from None
    res = find(conv, shape, measure=a.measure, repeats=a.repeats, l2=a.l2, check_clock=a.check_clock, **kwargs)
    print(res)
    if a.json:
        res.to_json(a.json)
        print(f"wrote {a.json}")
    return 0


def _cmd_engines(a: argparse.Namespace) -> int:
    from .api import validate
    from .engines import HEURISTICS, find_engines, parse_config
    from .problem import DIRECTIONS, check_choice
    from .results import EngineSearches

    _check_outputs({}, {"--json": a.json})
    conv, shape, fmt = _layer(a)
    if a.exhaustive < 0:
        raise UsageError(f"--exhaustive {a.exhaustive} must be >= 0")
    heur = (() if a.config else ("instant", "a", "b", "fallback")) if a.heuristics is None else \
        tuple(h for h in a.heuristics.split(",") if h)
    kwargs = dict(dtype=a.dtype, memory_format=fmt, heuristics=heur, exhaustive=a.exhaustive > 0,
                  max_configs=a.exhaustive or 64, runtime_compiled=not a.no_runtime_compiled, measure=a.measure,
                  repeats=a.repeats, l2=a.l2, compare_torch=None if a.torch is None else a.torch == "yes",
                  torch_benchmark={"on": True, "off": False, "current": None}[a.torch_benchmark], refine=a.refine,
                  refine_max=a.refine_max, screen=a.screen, check_clock=a.check_clock, configs=tuple(a.config),
                  device=a.device)
    directions = DIRECTIONS if a.direction == "all" else (a.direction,)
    try:
        if not heur and not a.config:
            raise ValueError("--heuristics is empty")
        for c in a.config:
            parse_config(c)
        if a.refine < 0 or a.refine_max < 1:
            raise ValueError(f"--refine {a.refine} must be >= 0 and --refine-max {a.refine_max} >= 1")
        if (a.refine or a.screen) and not a.measure:
            raise ValueError("--refine and --screen need --measure (they work on measured configurations)")
        for h in heur:
            check_choice("--heuristics", h, HEURISTICS)
        if a.measure:
            from .timing import check_config

            check_config(a.repeats, 3, a.l2, "cuda")
        validate(conv, shape, direction=a.direction, dtype=a.dtype, memory_format=fmt, device=a.device)
    except (ValueError, TypeError) as e:
        raise UsageError(str(e)) from None
    results = []
    for d in directions:
        res = find_engines(conv, shape, direction=d, **kwargs)
        print(res, end="\n\n" if d != directions[-1] else "\n")
        results.append(res)
    if a.json:
        out = results[0] if len(results) == 1 else EngineSearches(tuple(results))
        out.to_json(a.json)
        print(f"wrote {a.json}")
    if a.check_clock:
        from .results import fidelity_table

        print("\n".join(fidelity_table(results)))
    return 0


def _misspelled_option(args: list[str], parser: argparse.ArgumentParser) -> str:
    """An option before the command that is not one of the top level's (``--versoin``): argparse would only say that
    a command is required; this names the option and the nearest real one. "" when there is none."""
    import difflib

    if not args or not args[0].startswith("-"):
        return ""
    top = [s for act in parser._actions for s in act.option_strings]  # noqa: SLF001 (argparse's own list)
    opt = args[0].split("=", 1)[0]
    if opt in top:
        return ""
    near = difflib.get_close_matches(opt, top, n=1)
    return f"unrecognized option {opt!r}" + (f" (did you mean {near[0]}?)" if near else "; give a command first")


def main(argv: Sequence[str] | None = None) -> int:
    from .errors import (CudaError, CudaUnavailableError, CudnnError, ExtensionUnavailableError, ResultFileError,
                         TuningDBError)

    parser = build_parser()
    args = list(sys.argv[1:] if argv is None else argv)
    misspelled = _misspelled_option(args, parser)
    if misspelled:
        parser.print_usage(sys.stderr)
        print(f"cudnn-algos: error: {misspelled}", file=sys.stderr)
        return EXIT_USAGE
    a = parser.parse_args(args)
    try:
        if a.command == "info":
            from .sysinfo import info

            print(info())
            return 0
        if a.command == "profile":
            return _cmd_profile(a)
        if a.command == "engines":
            return _cmd_engines(a)
        if a.command == "show":
            return _cmd_show(a)
        if a.command == "tune":
            return _cmd_tune(a)
        if a.command == "db":
            return _cmd_db(a)
        if a.command == "compare":
            return _cmd_compare(a)
        return _cmd_find(a)
    except UsageError as e:
        if e.show_usage:  # the command's own usage line, not the top-level one
            a._commands.get(a.command, parser).print_usage(sys.stderr)
        print(f"cudnn-algos: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except (CudaUnavailableError, CudnnError, CudaError, ExtensionUnavailableError, TuningDBError,
            ResultFileError) as e:
        print(f"cudnn-algos: {type(e).__name__}: {e}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        print("cudnn-algos: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as e:  # torch.OutOfMemoryError and anything unexpected: one line, no traceback
        if type(e).__name__ == "OutOfMemoryError":
            print(f"cudnn-algos: out of GPU memory: {(str(e).splitlines() or [''])[0]}", file=sys.stderr)
            return EXIT_FAILED
        if a.debug:
            raise
        print(f"cudnn-algos: unexpected {type(e).__name__}: {(str(e).splitlines() or [''])[0][:300]} (run again "
              "with --debug before the command for the traceback)", file=sys.stderr)
        return EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
