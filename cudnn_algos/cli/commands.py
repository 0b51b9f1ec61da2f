"""What each CLI command does once its arguments are parsed (``COMMANDS``: name -> function returning the exit
status). Each imports the parts of the package it needs when it runs."""
from __future__ import annotations

import argparse
import os
import sys

from .parsing import (EXIT_BUDGET, EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, FileError,
                      UsageError, parse_conv, parse_shape)

def _check_outputs(inputs: dict, outputs: dict, dirs: dict | None = None) -> None:
    """Before any work: no output over an input or over another output, each output's directory there and
    writable, a figures directory not an existing file. UsageError naming the flag."""
    from ..files import check_distinct, writable_dir, writable_dir_of

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


def _model_from_args(a: argparse.Namespace) -> tuple:
    """(model, example input, name, directions, memory format) from _add_model_args' arguments; UsageError naming
    the flag when one is wrong."""
    from ..models import ModelSourceError, load_model
    from ..problem import DIRECTIONS

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


def cmd_tune(a: argparse.Namespace) -> int:
    from ..problem import device_index
    from ..tuning import tune

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


def cmd_db(a: argparse.Namespace) -> int:
    from ..files import check_distinct
    from ..tuning import TuningDB, default_path

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
            _print_winners(ws)
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
                from ..backend import environment
                from ..problem import device_index

                env = environment(device_index(None)).key()
            print(f"cleared {db.clear(env)} winners" + ("" if a.all else f" of {env}"))
    return 0


def _needs(flag: str, module: str) -> None:
    """An optional package a flag needs, checked before any GPU work (a missing one must not cost a whole run)."""
    import importlib.util

    if importlib.util.find_spec(module) is None:
        raise UsageError(f"{flag} needs the {module} package: pip install {module}")


def cmd_profile(a: argparse.Namespace) -> int:
    from ..problem import device_index
    from ..model import profile

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
        from ..results import fidelity_table

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
    from ..errors import ResultFileError
    from ..results import load_json

    try:
        return load_json(path)
    except FileNotFoundError:
        raise FileError(f"{path}: no such file") from None
    except ResultFileError as e:  # names the file itself
        raise FileError(str(e)) from None
    except (ValueError, KeyError, TypeError) as e:  # not JSON, another schema, not a result
        raise FileError(f"{path}: {e}") from None


def cmd_show(a: argparse.Namespace) -> int:
    from ..files import atomic_write
    from ..results import ModelReport, fidelity_table
    from ..results.tables import csv_text

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
        atomic_write(a.csv, csv_text(obj.to_dataframe()))
        print(f"wrote {a.csv}")
    if a.html:
        html = obj.to_html() if isinstance(obj, ModelReport) else f"<html><body>{obj._repr_html_()}</body></html>"
        atomic_write(a.html, html)
        print(f"wrote {a.html}")
    if a.plot:
        for path in obj.plot(a.plot):
            print(f"wrote {path}")
    if a.trace:
        from ..trace import write_chrome_trace

        try:
            n = write_chrome_trace(obj, a.trace)
        except ValueError as e:
            raise UsageError(f"--trace: {e}") from None
        print(f"wrote {a.trace} ({n} phase slices)")
    return 0


def cmd_compare(a: argparse.Namespace) -> int:
    _needs("compare", "pandas")
    from ..comparison import compare

    if a.top < 0:
        raise UsageError(f"--top {a.top} must be >= 0")
    _check_outputs({"A": a.a, "B": a.b}, {"--csv": a.csv})
    try:
        c = compare(_load(a.a), _load(a.b), floor=a.floor)
    except ValueError as e:
        raise UsageError(f"--floor: {e}") from None
    print("\n".join(c.summary_lines(top=a.top)))
    if a.csv:
        from ..files import atomic_write

        atomic_write(a.csv, c.table.to_csv(index=False))
        print(f"wrote {a.csv}")
    return 0


def _layer(a: argparse.Namespace):
    """(module, input shape, memory format) from --conv, --input and --channels-last."""
    conv, shape = parse_conv(a.conv), parse_shape(a.input)
    fmt = ("channels_last_3d" if len(shape) == 5 else "channels_last") if a.channels_last else None
    return conv, shape, fmt


def cmd_find(a: argparse.Namespace) -> int:
    from ..api import find, validate

    _check_outputs({}, {"--json": a.json})
    conv, shape, fmt = _layer(a)
    kwargs = dict(direction=a.direction, dtype=a.dtype, memory_format=fmt, math=a.math, mode=a.mode,
                  workspace_limit=a.workspace_limit, device=a.device)
    try:
        if a.measure:  # argument checks first; validate() ends with the check that a GPU is usable
            from ..measure import check_config

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


# each command's API argument names -> its flags (the same name can be another flag elsewhere: configs)
_ENGINES_FLAGS = {"heuristics": "--heuristics", "refine_max": "--refine-max", "refine": "--refine",
                  "screen": "--screen", "repeats": "--repeats", "configs": "--config", "max_configs": "--exhaustive",
                  "measure=True": "--measure", "exhaustive is off": "--exhaustive is not given"}
_CORPUS_FLAGS = {"families": "--families", "configs": "--configs", "batches": "--batches", "models": "--models"}


def _as_flags(message: str, flags: dict[str, str]) -> str:
    """An API argument check's message in the CLI's words: `heuristics='zz'` -> `--heuristics='zz'`."""
    import re

    return re.sub(r"(?<![\w-])(" + "|".join(map(re.escape, flags)) + r")(?![\w])", lambda m: flags[m.group(1)],
                  message)


def cmd_engines(a: argparse.Namespace) -> int:
    from ..engines import find_engines, validate_engines
    from ..problem import DIRECTIONS
    from ..results import EngineSearches

    _check_outputs({}, {"--json": a.json})
    conv, shape, fmt = _layer(a)
    if a.exhaustive < 0:
        raise UsageError(f"--exhaustive {a.exhaustive} must be >= 0")
    heur = None if a.heuristics is None else tuple(h for h in a.heuristics.split(",") if h)
    kwargs = dict(dtype=a.dtype, memory_format=fmt, heuristics=heur, exhaustive=a.exhaustive > 0,
                  max_configs=a.exhaustive or 64,
                  measure=a.measure, repeats=a.repeats, l2=a.l2,
                  compare_torch=None if a.torch is None else a.torch == "yes",
                  torch_benchmark={"on": True, "off": False, "current": None}[a.torch_benchmark], refine=a.refine,
                  refine_max=a.refine_max, screen=a.screen, configs=tuple(a.config), device=a.device)
    directions = DIRECTIONS if a.direction == "all" else (a.direction,)
    try:  # find_engines's own checks, before any search
        for d in directions:
            validate_engines(conv, shape, direction=d, **kwargs)
    except (ValueError, TypeError) as e:
        raise UsageError(_as_flags(str(e), _ENGINES_FLAGS)) from None
    kwargs.update(runtime_compiled=not a.no_runtime_compiled, check_clock=a.check_clock)
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
        from ..results import fidelity_table

        print("\n".join(fidelity_table(results)))
    return 0


def _print_winners(ws) -> None:
    """`db list`: per environment, one row per stored winner in 120 columns (long names keyed, written whole below)."""
    from ..results import fit_table, format_ms, wrap_lines

    for env in dict.fromkeys(w.env for w in ws):
        rows = [[w.config, format_ms(w.kernel_ms), format_ms(w.torch_on_ms), w.key] for w in ws if w.env == env]
        print("\n".join(wrap_lines([f"environment {env}: {len(rows)} winner(s); kernel clock, ms per call"])))
        print("\n".join(fit_table(("winner", "kernel", "torch on", "problem key"), rows, right={1, 2},
                                   legend={0: 32, 3: 60})))


def cmd_corpus(a: argparse.Namespace) -> int:
    from ..corpus import build_corpus

    _check_outputs({}, {"--json": a.json})
    split = (lambda v: None if v is None else [x for x in v.split(",") if x])  # noqa: E731
    try:
        batches = [int(b) for b in split(a.batches)]
    except ValueError:
        raise UsageError(f"--batches {a.batches!r} must be comma-separated ints, e.g. 1,8,32,128") from None
    try:
        corpus = build_corpus(split(a.families), batches=batches, configs=split(a.configs), models=split(a.models),
                              progress=not a.no_progress)
    except (ValueError, TypeError) as e:
        raise UsageError(_as_flags(str(e), _CORPUS_FLAGS)) from None
    print(corpus)
    if a.json:
        corpus.to_json(a.json)
        print(f"wrote {a.json}")
    return EXIT_OK if corpus.problems else EXIT_FAILED


def cmd_sweep(a: argparse.Namespace) -> int:
    from ..choices import DIRECTIONS
    from ..corpus import Corpus
    from ..problem import check_choice

    _check_outputs({"CORPUS": a.corpus}, {"--store": a.store})
    directions = [d for d in a.directions.split(",") if d]
    try:
        for d in directions:
            check_choice("--directions", d, DIRECTIONS)
        if a.workers is not None and a.workers < 1:
            raise ValueError(f"--workers {a.workers} must be >= 1")
        if a.allowed_failures < 0 or a.exhaustive < 0:
            raise ValueError("--allowed-failures and --exhaustive must be >= 0")
        if not 0 <= a.repeat_fraction <= 1:
            raise ValueError(f"--repeat-fraction {a.repeat_fraction} must be in [0, 1]")
        if a.budget_s is not None and not a.budget_s > 0:
            raise ValueError(f"--budget-s {a.budget_s} must be a positive number of seconds")
    except ValueError as e:
        raise UsageError(str(e)) from None
    try:
        corpus = Corpus.load(a.corpus)
    except FileNotFoundError:
        raise FileError(f"{a.corpus}: no such file") from None
    except ValueError as e:
        raise FileError(f"{a.corpus}: {e}") from None
    from ..sweep import sweep

    r = sweep(corpus.problems, a.store, directions=directions, scheduler=a.scheduler, n_workers=a.workers,
              allowed_failures=a.allowed_failures, budget_s=a.budget_s, progress=not a.no_progress,
              dry_run=a.dry_run, options={"exhaustive": a.exhaustive}, repeat_fraction=a.repeat_fraction)
    print(r)
    if r.stopped_by:
        return _stop_status(r.stopped_by, f"{r.done + r.failed} problem-directions stored in {a.store}; the same "
                                          "command again continues")
    return EXIT_OK


def cmd_dataset(a: argparse.Namespace) -> int:
    from ..dataset import noise_floor, validate, write_parquet
    from ..regret import GROUP_BY
    from ..sweep import SweepStore

    if a.action == "write" and not a.out:
        raise UsageError("dataset write needs --out DIR")
    if a.action == "write":
        _needs("dataset write", "pyarrow")
    by = tuple(x for x in a.by.split(",") if x)
    for f in by:
        if f not in GROUP_BY:
            raise UsageError(f"--by {f!r} is not one of {', '.join(GROUP_BY)}")
    if a.plot:
        _needs("dataset report --plot", "matplotlib")
    _check_outputs({"STORE": a.store}, {"--plot": a.plot} if a.plot else {}, {"--out": a.out} if a.out else None)
    if not os.path.isfile(a.store):
        raise FileError(f"{a.store}: no such file")
    try:
        with SweepStore(a.store) as s:
            if a.action == "report":
                return _dataset_report(s, by, a.plot)
            v = validate(s)
            if a.action == "validate":
                print(v)
                print(noise_floor(s))
                return EXIT_OK
            v = write_parquet(s, a.out)
    except ValueError as e:
        raise FileError(str(e)) from None
    print(v)
    print(f"wrote {a.out}")
    return EXIT_OK


def _dataset_report(store, by: tuple[str, ...], plot: str | None) -> int:
    """`dataset report`: regret per method by group and overall, the noise floor, where the heuristic loses most."""
    from ..dataset import measured_problems, noise_floor, validate
    from ..regret import plot_cdf, problem_regrets, search_costs, summarize, table, worst

    v = validate(store)
    regrets = problem_regrets(measured_problems(store, v))
    if not regrets:
        raise FileError(f"{store.path}: no measured problem-direction with a best to report on ({v})")
    print(f"regret against the measured best (pick / best - 1, %), {len(v.kept)} problem-directions "
          f"({len(regrets)} counting each family a problem is in):")
    if by:
        print(table(summarize(regrets, by), by))
    print(table(summarize(regrets, ()), ()))
    print("torch_off: torch's benchmark-off rule on the lists (INSTANT, else FALLBACK); torch_on: its benchmark "
          "mode;\nlegacy_find: cudnnFind's first; a, b, fallback: those lists' first configuration that built")
    cost = search_costs(measured_problems(store, v))
    if cost:
        print("choosing costs (host ms per problem-direction, median): "
              + ", ".join(f"{m} {ms:.3g}" for m, ms in cost.items()))
    print(noise_floor(store))
    for m in ("instant", "torch_on"):
        w = worst(regrets, m, 3)
        if w:
            print(f"largest {m} regrets:")
            for p in w:
                print(f"  {100 * p.regret[m]:.0f}% {p.direction} {p.dtype} {p.shape}"[:120])
    if plot:
        plot_cdf(regrets, plot)
        print(f"wrote {plot}")
    return EXIT_OK


def cmd_info(a: argparse.Namespace) -> int:
    from ..sysinfo import info

    print(info())
    return 0


COMMANDS = {"info": cmd_info, "find": cmd_find, "engines": cmd_engines, "profile": cmd_profile, "tune": cmd_tune,
            "db": cmd_db, "show": cmd_show, "compare": cmd_compare, "corpus": cmd_corpus,
            "sweep": cmd_sweep, "dataset": cmd_dataset}
