"""What each CLI command does once its arguments are parsed (``COMMANDS``: name -> function returning the exit
status). Each imports the parts of the package it needs when it runs."""
from __future__ import annotations

import argparse
import os
from typing import Any

from ..choices import DIRECTIONS, MAX_BUILD_THREADS
from .checks import as_flags, check_outputs, needs, stop_status
from .data_commands import cmd_corpus, cmd_dataset, cmd_sweep
from .selector_commands import cmd_selector
from .parsing import (EXIT_FAILED, EXIT_OK, FileError, UsageError, parse_conv, parse_layer,
                      parse_shape)

def _model_from_args(a: argparse.Namespace) -> tuple:
    """(model, example input, name, directions, memory format) from _add_model_args' arguments; UsageError naming
    the flag when one is wrong."""
    if a.batch <= 0:
        raise UsageError(f"--batch {a.batch} must be positive")
    directions = tuple(d for d in a.directions.split(",") if d)
    for d in directions:
        if d not in DIRECTIONS:
            raise UsageError(f"--directions: {d!r} is not one of {', '.join(DIRECTIONS)}")
    shape = parse_shape(a.input) if a.input else None  # usage errors before torch is imported
    from ..model_source import ModelSourceError, check_source, load_model

    try:
        check_source(a.model)
        model, example, name = load_model(a.model, batch=a.batch, input_shape=shape)
    except ModelSourceError as e:
        raise UsageError(str(e)) from None
    fmt = ("channels_last_3d" if example.dim() == 5 else "channels_last") if a.channels_last else None
    return model, example, name, directions, fmt


def cmd_tune(a: argparse.Namespace) -> int:
    if a.fuse:
        _fusion_flags_given(a, {"--quick": a.quick, "--predict": a.predict, "--budget-s": a.budget_s is not None,
                                "--torch-margin": a.torch_margin is not None,
                                "--directions": a.directions != ",".join(DIRECTIONS)})
    if a.predict and not os.path.isfile(a.predict):
        raise FileError(f"--predict {a.predict}: no such file")
    check_outputs({"--predict": a.predict}, {"--db": a.db})  # a --db given is made only in a folder that exists
    model, example, _, directions, fmt = _model_from_args(a)
    from ..problem import device_index
    from ..tuning import tune

    device_index(a.device)
    if a.fuse:
        return _tune_fused(a, model, example, fmt)
    search = "predict" if a.predict else "quick" if a.quick else "full"
    try:
        r = tune(model, example, a.db, directions=directions, dtype=a.dtype, memory_format=fmt, budget_s=a.budget_s,
                 search=search, progress=not a.no_progress, device=a.device, selector=a.predict,
                 **({} if a.torch_margin is None else {"torch_margin": a.torch_margin}))
    except (ValueError, TypeError) as e:
        raise UsageError(str(e)) from None
    print(r)
    if r.failed:
        return EXIT_FAILED
    if r.interrupted:
        return stop_status(r.stopped_by, f"{r.searched} of {r.todo} searches stored in {r.db}; the same command "
                                          "again continues with the rest")
    return EXIT_OK


def _tune_fused(a: argparse.Namespace, model, example, fmt) -> int:
    """`tune --fuse`: tune(fuse=True), after its flags are checked (the convolution search's own do not apply)."""
    from ..tuning import tune

    try:
        r = tune(model, example, a.db, dtype=a.dtype, memory_format=fmt, device=a.device, fuse=True)
    except (ValueError, TypeError) as e:
        raise UsageError(str(e)) from None
    print(r.summary())
    return EXIT_OK


def _fusion_flags_given(a: argparse.Namespace, flags: dict[str, Any]) -> None:
    """UsageError naming the flags given that a fused search does not take ({flag: given?})."""
    given = [f for f, v in flags.items() if v]
    if given:
        raise UsageError(f"{a.command} of fused chains: these flags do not apply: {', '.join(given)}")


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
        check_outputs({}, {"export FILE": a.file})
    if not os.path.exists(path):
        if a.action in ("info", "list"):
            print(f"no tuning database at {path} yet (cudnn-algos tune ... makes it)")
            return EXIT_OK
        if a.action != "import":  # export, clear, reselect: nothing to read, and no database is made for them
            raise FileError(f"--db {path}: no tuning database there (cudnn-algos tune ... makes it)")
        if a.db:
            check_outputs({"import FILE": a.file}, {"--db": a.db})
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


def cmd_profile(a: argparse.Namespace) -> int:
    if a.build_threads is not None and not 1 <= a.build_threads <= MAX_BUILD_THREADS:
        raise UsageError(f"--build-threads {a.build_threads} must be in [1, {MAX_BUILD_THREADS}]")
    for flag, given, module in (("--rich", a.rich, "rich"), ("--plot", a.plot, "matplotlib")):
        if given:
            needs(flag, module)
    if a.fusion:
        _fusion_flags_given(a, {"--repeats": a.repeats != 7, "--screen": a.screen != 3, "--refine": a.refine != 3,
                                "--refine-max": a.refine_max != 32, "--legacy": a.legacy,
                                "--no-runtime-compiled": a.no_runtime_compiled, "--build-threads": a.build_threads,
                                "--no-torch-off": a.no_torch_off, "--check-clock": a.check_clock,
                                "--budget-s": a.budget_s is not None, "--store": a.store, "--plot": a.plot,
                                "--rich": a.rich, "--directions": a.directions != ",".join(DIRECTIONS)})
    outputs = _writer_outputs(a)
    store = None if a.fusion else a.store or (a.json + ".searches.jsonl" if a.json else None)
    check_outputs({"model": a.model.rsplit(":", 1)[0] if a.model.endswith(".py") or ".py:" in a.model else None},
                   {"--json": a.json, **outputs, "--store": store}, {"--plot": a.plot})
    model, example, name, directions, fmt = _model_from_args(a)
    from ..model import profile
    from ..problem import device_index

    device_index(a.device)  # a usable GPU? (CudaUnavailableError: exit 1 with one line)
    if a.fusion:
        return _profile_fusion(a, model, example, name, fmt, outputs)
    try:
        report = profile(model, example, directions=directions, dtype=a.dtype, memory_format=fmt, repeats=a.repeats,
                         screen=a.screen, refine=a.refine, refine_max=a.refine_max, legacy=a.legacy,
                         runtime_compiled=not a.no_runtime_compiled,
                         torch_off=not a.no_torch_off, check_clock=a.check_clock, end_to_end_check=not a.no_e2e,
                         progress=not a.no_progress, device=a.device, name=name,
                         store=store, budget_s=a.budget_s, build_threads=a.build_threads)
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
    _write_outputs(report, outputs)
    if a.plot:
        for p in report.plot(a.plot):
            print(f"wrote {p}")
    if not report.interrupted:
        return EXIT_OK
    return stop_status(report.stopped_by, f"{len(report.problems)} problem(s) searched; " + (
        f"they are kept in {store}: the same command again continues with the rest" if store else
        "nothing was kept for a re-run: add --store PATH (or --json PATH) to make the next run resumable"))


def _profile_fusion(a: argparse.Namespace, model, example, name, fmt, outputs: dict[str, str]) -> int:
    """`profile --fusion`: the model's fusible chains, each searched by find_fused (a FusionReport)."""
    from ..model import profile

    try:
        report = profile(model, example, dtype=a.dtype, memory_format=fmt, progress=not a.no_progress,
                         device=a.device, name=name, fusion=True)
    except (ValueError, TypeError) as e:
        raise UsageError(str(e)) from None
    if a.json:
        report.to_json(a.json)
    print(report)
    if a.json:
        print(f"wrote {a.json}")
    _write_outputs(report, outputs)
    return EXIT_OK


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
    from ..results import ModelReport, fidelity_table

    if a.plot:
        needs("--plot", "matplotlib")
    outputs = _writer_outputs(a)
    check_outputs({"FILE": a.file}, outputs, {"--plot": a.plot})
    obj = _load(a.file)
    for flag, given in (("--plot", a.plot), ("--selector", a.selector)):
        if given and not isinstance(obj, ModelReport):
            raise UsageError(f"{flag} reads model reports; {a.file} holds a {type(obj).__name__}")
    sel = _selector_for(a.selector, obj) if a.selector else None
    print(obj)
    if sel is not None:
        from ..selector.report import selector_lines, selector_picks

        print("\n".join(selector_lines(selector_picks(obj, sel), sel)))
    if a.fidelity:
        print("\n".join(fidelity_table([obj])))
    _write_outputs(obj, outputs)
    if a.plot:
        for path in obj.plot(a.plot):
            print(f"wrote {path}")
    return 0


def _writer_outputs(a: argparse.Namespace) -> dict[str, str]:
    """The output formats asked for (results.writers.WRITERS: one flag each), as {flag: path}; a package one needs
    checked now, before any work."""
    from ..results.writers import WRITERS

    out = {}
    for w in WRITERS.values():
        path = getattr(a, w.name, None)
        if path:
            for module in w.needs:
                needs(f"--{w.name}", module)
            out[f"--{w.name}"] = path
    return out


def _write_outputs(result, outputs: dict[str, str]) -> None:
    """Each asked-for format of `result` written (_writer_outputs' {flag: path}); a format the result cannot give is
    a usage error naming the flag."""
    from ..results.writers import WRITERS

    for flag, path in outputs.items():
        try:
            note = WRITERS[flag[2:]].write(result, path)
        except ValueError as e:
            raise UsageError(f"{flag}: {e}") from None
        print(f"wrote {path}" + (f" ({note})" if note else ""))


def _selector_for(given: str, report):
    """show --selector: a model file, or 'shipped' (the package's for the report's environment family)."""
    from ..choose.model import Selector

    try:
        if given == "shipped":
            if report.env is None:
                raise ValueError("the report names no GPU")
            return Selector.shipped(report.env.selector_family())
        return Selector.coerce(given, "--selector")
    except ValueError as e:
        raise UsageError(str(e) if str(e).startswith("--selector") else f"--selector: {e}") from None


def cmd_compare(a: argparse.Namespace) -> int:
    needs("compare", "pandas")
    from ..comparison import compare

    if a.top < 0:
        raise UsageError(f"--top {a.top} must be >= 0")
    check_outputs({"A": a.a, "B": a.b}, {"--csv": a.csv})
    try:
        c = compare(_load(a.a), _load(a.b), floor=a.floor)
    except ValueError as e:
        raise UsageError(f"--floor: {e}") from None
    except TypeError as e:  # a kind of result compare does not line up ("a: ..." or "b: ...")
        which, _, why = str(e).partition(": ")
        raise FileError(f"{a.a if which == 'a' else a.b}: {why}") from None
    print("\n".join(c.summary_lines(top=a.top)))
    if a.csv:
        from ..files import atomic_write

        atomic_write(a.csv, c.table.to_csv(index=False))
        print(f"wrote {a.csv}")
    return 0


def _layer(a: argparse.Namespace):
    """(module, input shape, memory format) from --conv, --input and --channels-last."""
    shape = parse_shape(a.input)
    parse_layer(a.conv, shape)  # a wrong layer or shape is a usage error at once, before torch is imported
    conv = parse_conv(a.conv)
    fmt = ("channels_last_3d" if len(shape) == 5 else "channels_last") if a.channels_last else None
    return conv, shape, fmt


def cmd_find(a: argparse.Namespace) -> int:
    check_outputs({}, {"--json": a.json})
    conv, shape, fmt = _layer(a)
    from ..api import find, validate

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
                  "measure=True": "--measure", "exhaustive is off": "--exhaustive is not given",
                  "build_threads": "--build-threads"}


def cmd_engines(a: argparse.Namespace) -> int:
    check_outputs({}, {"--json": a.json})
    if a.exhaustive < 0:
        raise UsageError(f"--exhaustive {a.exhaustive} must be >= 0")
    conv, shape, fmt = _layer(a)
    from ..engines import find_engines, validate_engines
    from ..problem import DIRECTIONS
    from ..results import EngineSearches

    heur = None if a.heuristics is None else tuple(h for h in a.heuristics.split(",") if h)
    if a.epilogue is not None:
        return _fused_engines(a, conv, shape, fmt, heur)
    kwargs = dict(dtype=a.dtype, memory_format=fmt, heuristics=heur, exhaustive=a.exhaustive > 0,
                  max_configs=a.exhaustive or 64,
                  measure=a.measure, repeats=a.repeats, l2=a.l2,
                  compare_torch=None if a.torch is None else a.torch == "yes",
                  torch_benchmark={"on": True, "off": False, "current": None}[a.torch_benchmark], refine=a.refine,
                  refine_max=a.refine_max, screen=a.screen, configs=tuple(a.config), device=a.device,
                  build_threads=a.build_threads)
    directions = DIRECTIONS if a.direction == "all" else (a.direction,)
    try:  # find_engines's own checks, before any search
        for d in directions:
            validate_engines(conv, shape, direction=d, **kwargs)
    except (ValueError, TypeError) as e:
        raise UsageError(as_flags(str(e), _ENGINES_FLAGS)) from None
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


def _fused_engines(a: argparse.Namespace, conv, shape, fmt, heur) -> int:
    """`engines --epilogue OPS`: find_fused, its flags checked first (the plain search's own do not apply)."""
    from ..fused import find_fused, validate_fused

    given = [f for f, v in (("--direction", a.direction != "forward"), ("--refine", a.refine), ("--screen", a.screen),
                            ("--config", a.config), ("--torch", a.torch), ("--l2", a.l2 != "warm"),
                            ("--torch-benchmark", a.torch_benchmark != "current")) if v]
    if given:
        raise UsageError(f"--epilogue searches the forward pass's fused graph; these flags do not apply: "
                         f"{', '.join(given)}")
    kwargs = dict(dtype=a.dtype, memory_format=fmt, heuristics=heur, exhaustive=a.exhaustive > 0,
                  max_configs=a.exhaustive or 64, measure=a.measure, repeats=a.repeats, device=a.device,
                  build_threads=a.build_threads)
    try:
        validate_fused(conv, shape, a.epilogue, **kwargs)
    except (ValueError, TypeError) as e:
        raise UsageError(as_flags(str(e), {**_ENGINES_FLAGS, "epilogue": "--epilogue"})) from None
    res = find_fused(conv, shape, a.epilogue, runtime_compiled=not a.no_runtime_compiled, check_clock=a.check_clock,
                     **kwargs)
    print(res)
    if a.json:
        res.to_json(a.json)
        print(f"wrote {a.json}")
    return 0


def _print_winners(ws) -> None:
    """`db list`: per environment, one row per stored winner in 120 columns (long names keyed, written whole below)."""
    from ..results import fit_table, format_ms, wrap_lines

    for env in dict.fromkeys(w.env for w in ws):
        rows = [[w.config, format_ms(w.kernel_ms), format_ms(w.torch_on_ms), w.key] for w in ws if w.env == env]
        print("\n".join(wrap_lines([f"environment {env}: {len(rows)} winner(s); kernel clock, ms per call"])))
        print("\n".join(fit_table(("winner", "kernel", "torch on", "problem key"), rows, right={1, 2},
                                   legend={0: 32, 3: 60})))


def cmd_info(a: argparse.Namespace) -> int:
    from ..installation import info

    print(info())
    return 0


COMMANDS = {"info": cmd_info, "find": cmd_find, "engines": cmd_engines, "profile": cmd_profile, "tune": cmd_tune,
            "db": cmd_db, "show": cmd_show, "compare": cmd_compare, "corpus": cmd_corpus,
            "sweep": cmd_sweep, "dataset": cmd_dataset, "selector": cmd_selector}
