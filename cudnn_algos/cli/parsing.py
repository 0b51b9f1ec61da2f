"""The CLI's argument parser: every command's flags, the layer and shape parsers, usage errors. Imports nothing
heavy (no torch), so --help, --version and a usage error answer at once."""
from __future__ import annotations

import argparse
import ast

from ..choices import DIRECTIONS, DTYPE_NAMES, L2_MODES, MATH_TYPES, MODES, TURN_SCOPES

DEFAULT_CONV = "Conv2d(64, 128, 3, padding=1)"
DEFAULT_INPUT = "32,64,56,56"

EXAMPLES = f"""examples:
  cudnn-algos profile resnet50 --batch 32 --dtype float16 --channels-last --plot out/
  cudnn-algos profile torchvision:mobilenet_v3_small --batch 64 --json report.json --csv report.csv
  cudnn-algos profile my_model.py:build --input 8,3,256,256 --directions forward
  cudnn-algos info
  cudnn-algos find                                   # {DEFAULT_CONV} on input {DEFAULT_INPUT}
  cudnn-algos find --conv "Conv2d(256, 256, 3, padding=1)" --input 32,256,14,14 --dtype float16 \\
      --channels-last
  cudnn-algos find --conv "Conv1d(80, 256, 5)" --input 8,80,1000 --direction all --json out.json
  cudnn-algos find --conv "ConvTranspose2d(64, 32, 4, stride=2, padding=1)" --input 8,64,32,32 --mode find_ex
  cudnn-algos engines --conv "Conv2d(256, 256, 3, padding=1)" --input 32,256,14,14 --dtype float16 \\
      --channels-last --measure --torch-benchmark on
  cudnn-algos engines --exhaustive 200 --direction backward_filter --json engines.json
  cudnn-algos engines --measure --refine 3 --torch-benchmark on      # search around the 3 fastest
  cudnn-algos engines --epilogue bn,add,relu --measure                # the fused graph beside eager torch
"""

_CONV_TYPES = ("Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d")


EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_BUDGET, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


class UsageError(Exception):
    """A bad argument: exit 2, the usage line, then the message."""

    show_usage = True


class FileError(UsageError):
    """A named input file that cannot be used (missing, damaged, not a result): exit 2, the message alone."""

    show_usage = False


def _conv_call(text: str) -> tuple[str, list, dict]:
    """--conv's call read without evaluating anything: (class name, positional and keyword literal arguments)."""
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
    return name, args, kwargs


# the constructors' positional parameters after the channels and kernel, as torch's modules order them
_CONV_POSITIONAL = ("stride", "padding", "dilation", "groups", "bias", "padding_mode")
_TRANSPOSE_POSITIONAL = ("stride", "padding", "output_padding", "groups", "bias", "dilation", "padding_mode")


def parse_layer(text: str, input_shape: tuple[int, ...] | None = None):
    """--conv (and --input's shape, when given) checked as a layer without importing torch: a ConvSpec, or a
    UsageError naming what is wrong, at once (a usage error must not wait seconds for torch). What torch's own
    constructor would refuse beyond ConvSpec's rules is still caught where the module is built (parse_conv)."""
    from ..spec import ConvSpec

    name, args, kwargs = _conv_call(text)
    transposed = name.startswith("ConvTranspose")
    nd = int(name[-2])
    names = ("in_channels", "out_channels", "kernel_size") + (_TRANSPOSE_POSITIONAL if transposed
                                                              else _CONV_POSITIONAL)
    if len(args) > len(names):
        raise UsageError(f"--conv {text!r}: {name} takes at most {len(names)} positional arguments")
    given = dict(zip(names, args))
    for k, v in kwargs.items():
        if k in given:
            raise UsageError(f"--conv {text!r}: {name} got {k} twice")
        given[k] = v
    given.pop("bias", None)  # the search is of the convolution; torch adds a bias apart
    unknown = sorted(set(given) - set(names))
    if unknown:
        raise UsageError(f"--conv {text!r}: {name} has no argument {unknown[0]!r}")
    ks = given.get("kernel_size")
    if isinstance(ks, int) and not isinstance(ks, bool):
        given["kernel_size"] = (ks,) * nd
    try:
        spec = ConvSpec(transposed=transposed, **given)
        if spec.ndim != nd:
            raise ValueError(f"kernel_size={ks!r} must have {nd} values for a {name}")
        if input_shape is not None:
            spec.shapes(input_shape)
    except (TypeError, ValueError) as e:
        raise UsageError(f"--conv {text!r}: {e}" if "input_shape" not in str(e) else str(e)) from None
    return spec


def parse_conv(text: str):
    """'Conv2d(64, 128, 3, padding=1)' -> that torch module, built on the meta device. Only literal arguments are
    accepted (nothing is evaluated)."""
    name, args, kwargs = _conv_call(text)
    import torch

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
    p.add_argument("--dtype", default="float32", choices=DTYPE_NAMES)
    p.add_argument("--channels-last", action="store_true", help="channels_last (2-d) / channels_last_3d (3-d) layout")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="cudnn-algos",
        description="See every cuDNN convolution algorithm and engine configuration for a layer or a model, beside\n"
                    "what torch runs: status, time, workspace, determinism, math, accuracy.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    from .. import __version__

    p.add_argument("--version", action="version", version=f"cudnn-algos {__version__}")
    p.add_argument("--debug", action="store_true", help="show the traceback of an unexpected error")
    sub = p.add_subparsers(dest="command",
                           metavar="{info,find,engines,profile,tune,db,show,compare,corpus,sweep,dataset,selector}")
    p.set_defaults(_commands=sub.choices)  # each command's own parser, for its usage line
    sub.required = True
    sub.add_parser("info", help="what the package sees: GPUs, versions, cuDNN library, extension state")
    f = sub.add_parser("find", help="search every algorithm of one layer and print the table",
                       epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    _add_layer_args(f)
    f.add_argument("--direction", default="all", choices=[*DIRECTIONS, "all"],
                   help="the layer's direction (default: all)")
    f.add_argument("--mode", default="find", choices=MODES)
    f.add_argument("--math", default=None, choices=MATH_TYPES,
                   help="cuDNN math type (default: what torch uses)")
    f.add_argument("--workspace-limit", type=int, default=None, metavar="BYTES")
    f.add_argument("--device", type=int, default=None)
    f.add_argument("--json", metavar="PATH", help="also write the result as JSON")
    f.add_argument("--measure", action="store_true", help="re-time every algorithm ourselves (kernel/throughput/host)")
    f.add_argument("--repeats", type=int, default=10, help="timing samples per algorithm with --measure")
    f.add_argument("--l2", default="warm", choices=L2_MODES, help="L2 mode with --measure")
    f.add_argument("--check-clock", action="store_true", help="with --measure: also the independent clock")

    e = sub.add_parser("engines", help="the graph API's engine configurations of one layer, beside torch's choice",
                       epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    _add_layer_args(e)
    e.add_argument("--direction", default="forward", choices=[*DIRECTIONS, "all"])
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
    e.add_argument("--build-threads", type=int, default=1, metavar="N",
                   help="threads that build the plans (each its own cuDNN handle; default 1): the same rows, "
                        "sooner where there are many (--exhaustive)")
    e.add_argument("--measure", action="store_true", help="time and check every built plan (and torch's op)")
    e.add_argument("--repeats", type=int, default=10, help="timing samples per configuration with --measure")
    e.add_argument("--screen", type=int, default=None, metavar="N",
                   help="with --measure: screen every configuration with N samples, then re-measure the fastest")
    e.add_argument("--check-clock", action="store_true", help="with --measure: also the independent clock")
    e.add_argument("--l2", default="warm", choices=L2_MODES, help="L2 mode with --measure")
    e.add_argument("--torch", default=None, choices=["yes", "no"],
                   help="run torch's own op and mark the configuration it ran (default: with --measure)")
    e.add_argument("--torch-benchmark", default="current", choices=["on", "off", "current"],
                   help="cudnn.benchmark for torch's op (default: as torch has it: off)")
    e.add_argument("--epilogue", default=None, metavar="OPS",
                   help="pointwise ops after the forward convolution, e.g. bn,relu or bias,add,relu: cuDNN's fused "
                        "graph, beside the unfused sequence and torch's eager ops (ops: bias, bn, scale, add, relu, "
                        "relu6, silu, gelu, gelu_tanh, sigmoid, tanh)")
    e.add_argument("--device", type=int, default=None)
    e.add_argument("--json", metavar="PATH", help="also write the result(s) as JSON")

    _add_profile_parser(sub)
    _add_tuning_parsers(sub)
    _add_corpus_parser(sub)
    _add_saved_parsers(sub)
    return p


def add_writer_flags(parser: argparse.ArgumentParser) -> None:
    """One --<format> PATH flag per output format of results.writers.WRITERS."""
    from ..results.writers import WRITERS

    for w in WRITERS.values():
        parser.add_argument(f"--{w.name}", metavar="PATH", help=w.help)


def _add_saved_parsers(sub) -> None:
    """show and compare: saved results, no GPU."""
    sh = sub.add_parser("show", help="render a saved result (any kind; .json or .json.gz) without a GPU")
    sh.add_argument("file")
    add_writer_flags(sh)
    sh.add_argument("--plot", metavar="DIR", help="figures (model reports)")
    sh.add_argument("--fidelity", action="store_true", help="the kernel clock against the reference clock")
    sh.add_argument("--selector", metavar="FILE", help="model reports: what a selector (.npz, or 'shipped': the "
                    "package's for the report's GPU) would pick, beside the best and INSTANT")
    cp = sub.add_parser("compare", help="two saved results side by side, per problem, direction and candidate")
    cp.add_argument("a")
    cp.add_argument("b")
    cp.add_argument("--top", type=int, default=10, help="how many of the largest changes to list (default 10)")
    cp.add_argument("--floor", type=float, default=0.03,
                    help="flag a change only beyond both runs' spread and this fraction (default 0.03)")
    cp.add_argument("--csv", metavar="PATH", help="every shared candidate with both times and the ratio")


def _add_model_args(p, dtype_help: str) -> None:
    """The model and example-input arguments `profile` and `tune` share (read back by _model_from_args)."""
    p.add_argument("model", help="resnet50 (built in), torchvision:<name>, or path/file.py:factory")
    p.add_argument("--batch", type=int, default=32, help="batch size of the example input (default 32)")
    p.add_argument("--input", default=None, help="example input shape N,C,... (overrides --batch)")
    p.add_argument("--dtype", default=None, choices=DTYPE_NAMES, help=dtype_help)
    p.add_argument("--channels-last", action="store_true")
    p.add_argument("--directions", default="forward,backward_data,backward_filter")


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
    pr.add_argument("--build-threads", type=int, default=None, metavar="N",
                    help="threads that build each search's plans: the same rows, sooner (default: cores, at most 8)")
    pr.add_argument("--no-torch-off", action="store_true", help="skip torch with benchmark off (a fresh process)")
    pr.add_argument("--check-clock", action="store_true",
                    help="also time every row with the independent clock (torch.profiler) and print the fidelity")
    pr.add_argument("--no-e2e", action="store_true", help="skip the whole-model benchmark-mode check")
    pr.add_argument("--fusion", action="store_true",
                    help="the model's conv -> bn -> activation [-> add] chains as cuDNN's fused graphs instead: fused, "
                         "unfused and torch eager per chain, in eval mode (profile(fusion=True))")
    pr.add_argument("--budget-s", type=float, default=None, metavar="S",
                    help="start no new search after S seconds; report what was done (a --store re-run continues)")
    pr.add_argument("--json", metavar="PATH")
    pr.add_argument("--store", metavar="PATH",
                    help="append each finished search to this JSON-lines file; a re-run with it resumes "
                         "(default with --json: PATH.searches.jsonl beside it)")
    add_writer_flags(pr)
    pr.add_argument("--plot", metavar="DIR", help="write the figures (PNG and SVG) into DIR")
    pr.add_argument("--rich", action="store_true", help="print a rich table (needs rich)")
    pr.add_argument("--no-progress", action="store_true")
    pr.add_argument("--device", type=int, default=None)


def _add_corpus_parser(sub) -> None:
    from ..corpus import BATCHES, CONFIGS, FAMILIES

    c = sub.add_parser("corpus", help="the distinct convolution problems of whole model families (no GPU)",
                       description="Discovers every convolution the models of each family run (one forward pass on "
                                   "the meta device each), at each batch size and configuration, and prints the "
                                   "distinct problems per family and how families share them.")
    c.add_argument("--families", default=None, help=f"comma-separated (default: all): {', '.join(FAMILIES)}")
    c.add_argument("--models", default=None, help="comma-separated model names: only these (e.g. resnet50,unet)")
    c.add_argument("--batches", default=None,
                   help=f"comma-separated batch sizes (default: {','.join(map(str, BATCHES))})")
    c.add_argument("--configs", default=None, help=f"comma-separated (default: all): {', '.join(CONFIGS)}")
    c.add_argument("--json", metavar="PATH", help="write the corpus (gzip for .gz) for a sweep")
    c.add_argument("--from", dest="source", metavar="CORPUS",
                   help="no discovery: the layers of a corpus file at --batches (e.g. data/corpora/...batch1... at "
                        "32); --families, --models and --configs are the file's")
    c.add_argument("--sample", type=int, default=None, metavar="N",
                   help="no discovery: N problems drawn across the space a user can run (cudnn_algos.sampling: "
                        "channels, sizes, batch, kernels, stride, dilation, groups, transposed, dtype, weighted "
                        "toward what models use)")
    c.add_argument("--seed", type=int, default=0, help="with --sample: the draw's seed (the same N and seed, the same "
                                                       "problems)")
    c.add_argument("--held-out", choices=("only", "exclude"), default=None,
                   help="with --sample: only the held-out ranges (odd channel counts above 8, odd sizes), or none of "
                        "them (a training set)")
    c.add_argument("--no-progress", action="store_true", help="no progress bar")
    w = sub.add_parser("sweep", help="measure a corpus's problem-directions across GPUs (Dask) into a store",
                       description="Measures every problem-direction of a corpus (cudnn-algos corpus --json) that the "
                                   "store lacks: one Dask worker per visible GPU, or an existing Dask cluster "
                                   "(--scheduler); the driver alone writes the store. The same command again "
                                   "continues where it stopped.")
    w.add_argument("corpus", help="a corpus file (cudnn-algos corpus --json PATH)")
    w.add_argument("--store", required=True, metavar="PATH", help="the sweep's SQLite store (created if missing)")
    w.add_argument("--scheduler", default=None, help="an existing Dask scheduler, e.g. tcp://host:8786")
    w.add_argument("--workers", type=int, default=None,
                   help="local workers (default: one per visible GPU, times --workers-per-gpu)")
    w.add_argument("--workers-per-gpu", type=int, default=1, metavar="N",
                   help="workers sharing each GPU: one builds its plans while another times (they take turns on "
                        "the GPU for all else; docs/sweep.md); default 1")
    w.add_argument("--turns", choices=TURN_SCOPES, default="whole",
                   help="with --workers-per-gpu above 1, what a worker holds the GPU alone for: all its GPU work "
                        "(whole, the default) or only the calls whose times are kept (timing: the rest overlaps; "
                        "docs/sweep.md)")
    w.add_argument("--worker-memory-gb", type=float, default=None, metavar="G",
                   help="restart a worker whose resident memory after a task exceeds G GB (a long sweep's workers "
                        "grow: docs/sweep.md); default: never")
    w.add_argument("--directions", default=",".join(DIRECTIONS), help="comma-separated directions")
    w.add_argument("--budget-s", type=float, default=None,
                   help="after this many seconds start nothing new (the running tasks finish and are kept)")
    w.add_argument("--limit", type=int, default=None, metavar="N",
                   help="measure at most N problem-directions this run (the most used first)")
    w.add_argument("--allowed-failures", type=int, default=2, help="worker deaths one task may cause (default 2)")
    w.add_argument("--exhaustive", type=int, default=0, metavar="N",
                   help="also every engine's knob choices, up to N configurations per problem-direction")
    w.add_argument("--build-threads", type=int, default=1, metavar="N",
                   help="threads that build each task's plans, before any is timed (default 1; docs/sweep.md)")
    w.add_argument("--no-legacy", action="store_true",
                   help="no legacy search per task (find_ex's timing and the legacy heuristic's ranking: about a "
                        "third of a task's time; a selector's data needs neither, the regret report's legacy "
                        "columns do)")
    w.add_argument("--lean", action="store_true",
                   help="a lean screen: each configuration's accuracy check enqueued with the others' and one wait "
                        "for all, no separate first timed call (screened rows have no host time), and CUPTI kept "
                        "attached for each worker's life (docs/sweep.md)")
    w.add_argument("--known", default=None, metavar="MODEL",
                   help="also time the known configurations of this selector ('shipped' or a .npz) for each "
                        "problem's class, so `selector eval` can score them (Note [known configurations])")
    w.add_argument("--repeat-fraction", type=float, default=0.05, metavar="F",
                   help="the noise floor's sample: this share of what earlier sweeps stored is measured again "
                        "(default 0.05)")
    w.add_argument("--dry-run", action="store_true", help="rows made from the tasks alone, no GPU: checks the wiring")
    w.add_argument("--no-progress", action="store_true", help="no progress bar")
    _add_data_parsers(sub)


def _add_data_parsers(sub) -> None:
    ds = sub.add_parser("dataset", help="validate, merge, report a sweep store; write its rows as Parquet",
                        description="validate: which problem-directions of a sweep store are whole (a status on "
                                    "every row, finite non-negative times, a best) and why the others are not, and "
                                    "the noise floor (the sample measured twice); write: the whole ones as Parquet "
                                    "partitioned by environment; report: the regret of cuDNN's heuristics, the legacy "
                                    "searches and torch's benchmark mode against the measured best; merge: the "
                                    "problem-directions of other stores or dataset shards (--from) that this one "
                                    "lacks copied in; keys: a new store (--out) of the problem-directions alone, no "
                                    "rows, for a sweep elsewhere to skip them; pack: the whole ones (and the failed "
                                    "ones) as a new compact shard (--out FILE.parquet: the core columns, the form "
                                    "the repository keeps under data/), only those of --from STORE's keys when "
                                    "given; compare: the problem-directions this one and --from OTHER both hold "
                                    "(two runs, two GPUs, two cuDNN versions): how far the same configurations' "
                                    "times move, whether the same one is fastest, and the regret of running one's "
                                    "fastest in the other.")
    ds.add_argument("action", choices=["validate", "write", "report", "merge", "keys", "pack", "compare"])
    ds.add_argument("store", help="a sweep store (cudnn-algos sweep --store); validate, write, report, compare: also "
                                  "dataset shards (a .parquet file or a directory of them, e.g. "
                                  "data/sm_90-cudnn-9.19)")
    ds.add_argument("--out", metavar="PATH",
                    help="write: the Parquet directory; keys: the new store; pack: the new shard (.parquet)")
    ds.add_argument("--from", dest="sources", action="append", default=[], metavar="STORE",
                    help="merge: a store or a shard (.parquet) to copy from (repeatable); pack: only the keys of "
                         "this store; compare: the other dataset (a store, a shard or a directory of them; once)")
    ds.add_argument("--about", default="", help="pack: a line saying what the shard holds (kept in its metadata)")
    ds.add_argument("--by", default="family,dtype,direction",
                    help="report: comma-separated groups among family, dtype, direction, batch ('' for one "
                         "overall group)")
    ds.add_argument("--plot", metavar="PATH", help="report: the regret CDF per method as an image")
    ds.add_argument("--map", metavar="PATH",
                    help="report: where torch's picks lose, regret over input channels x spatial size, as an image")
    se = sub.add_parser("selector", help="train, evaluate or show a selector that needs no search",
                        description="train: a selector (gradient-boosted trees and a nearest-neighbour baseline) from "
                                    "a sweep store, written as arrays (.npz); eval: leave one family (or batch size) "
                                    "out, train on the rest, regret of the held-out problems beside cuDNN's "
                                    "heuristics and torch's benchmark mode; show: what a model file holds.")
    se.add_argument("action", choices=["train", "eval", "show"])
    se.add_argument("file", help="train/eval: a sweep store or dataset shards (.parquet, or a directory of them); "
                                 "show: a model file")
    se.add_argument("--out", metavar="PATH", help="train: the model file to write (.npz)")
    se.add_argument("--family", help="train: the environment family it is for (default: from the rows)")
    se.add_argument("--by", default="family", choices=["family", "batch"], help="eval: the groups left out in turn")
    se.add_argument("--hold-out", metavar="G[,G...]",
                    help="eval: hold out only these groups (families or batch sizes), each in turn; default: all")
    se.add_argument("--leave-out", metavar="G[,G...]", help="train: without these groups' problems (families, or "
                    "batch sizes with --by batch): a model to score them with through apply() (heldout_picks.py)")
    se.add_argument("--model", metavar="FILE",
                    help="eval: score this trained model (.npz, or 'shipped': the package's for the rows' GPU and "
                         "cuDNN) on the store instead of leaving groups out; problems it was trained on apart")
    se.add_argument("--objective", default="regression", choices=["regression", "rank"],
                    help="train/eval: what the trees are fitted to: each candidate's log time relative to its "
                         "problem's fastest (regression, the shipped model's), or the order of each problem's "
                         "candidates (rank: LambdaMART)")
    se.add_argument("--learner", default=None, choices=["exact", "hist", "lightgbm"],
                    help="train/eval: regression with scikit-learn's HistGradientBoostingRegressor (hist, the "
                         "default and the shipped model's: features binned, minutes on a large dataset) or "
                         "GradientBoostingRegressor (exact, many times slower); rank with our LambdaMART (exact, "
                         "its default) or LightGBM's lambdarank (lightgbm, needs lightgbm to train, not to load)")
    se.add_argument("--plot", metavar="PATH",
                    help="eval: the held-out problems' regret CDF per method (the selector's picks beside cuDNN's "
                         "heuristics and torch's benchmark mode) as an image")
    se.add_argument("--known", type=int, default=None, metavar="N",
                    help="train: keep at most N known configurations per problem class, ranked beside the lists' "
                         "by apply(unseen=...) (default 64; 0: none)")
    se.add_argument("--evidence", type=int, default=None, metavar="K",
                    help="train/eval: the trees also see what each candidate measured on the K nearest training "
                         "problems of its class (default 5; 0: not; Note [neighbour evidence])")
    se.add_argument("--reach", type=float, default=None, metavar="R",
                    help="train/eval: the model's reach: a problem farther than R (standardized features) from every "
                         "training problem is ranked in cuDNN's order, not the trees' (default 2; inf: the trees "
                         "everywhere; Note [the selector's reach])")
    _add_guard_args(se)
    se.add_argument("--target-cap", type=float, default=None, metavar="C",
                    help="train/eval (regression): the trees learn log2(time / the problem's fastest) capped at C "
                         "(default 0.5: 1.41x; a higher cap lets them see how far behind a slow configuration is)")


def _add_guard_args(se) -> None:
    """`selector train|eval`'s guard options (Note [a guard against INSTANT's first])."""
    se.add_argument("--guard", default=None, metavar="M",
                    help="train/eval: predict takes INSTANT's first (torch's pick with benchmark off) unless the trees "
                         "predict their first at least M faster (log2 of time: 0.2 is 15%%); default 0.2, 'none': no "
                         "guard (Note [a guard against INSTANT's first])")
    se.add_argument("--guard-far", default=None, metavar="M",
                    help="train/eval: the guard's margin for problems beyond the reach (default 0.4; 'none': --guard's "
                         "everywhere)")
    se.add_argument("--guard-cap", default=None, metavar="C",
                    help="train/eval (leave-one-out): the guard reads its margin from trees of its own, trained with "
                         "the target capped at C (default 2; 'none': from the ranking trees)")


def _add_tuning_parsers(sub) -> None:
    t = sub.add_parser("tune", help="search a model's convolutions the tuning database lacks and store the winners",
                       epilog="  cudnn-algos tune resnet50 --batch 32 --dtype float16 --channels-last\n"
                              "  then, in your script: cudnn_algos.apply(model)",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    _add_model_args(t, "what the layers receive when the model runs (float16 for autocast; default: the model's)")
    t.add_argument("--db", metavar="PATH", help="the tuning database (default: $CUDNN_ALGOS_DB or the user cache)")
    t.add_argument("--budget-s", type=float, default=None, metavar="S", help="start no new search after S seconds")
    how = t.add_mutually_exclusive_group()
    how.add_argument("--quick", action="store_true",
                     help="search only torch's own candidate lists, fewer samples, no refine (a cheaper tune)")
    how.add_argument("--predict", metavar="SELECTOR", help="time nothing: store a selector's picks (its .npz file, "
                                                          "cudnn-algos selector train)")
    t.add_argument("--fuse", action="store_true",
                   help="store the fusible chains' fused winners instead, for apply(model, fuse=True) (inference)")
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


def misspelled_option(args: list[str], parser: argparse.ArgumentParser) -> str:
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
