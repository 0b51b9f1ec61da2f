"""The data pipeline's CLI commands: corpus (the problems of model families), sweep (measured across GPUs into a
store), dataset (validate, write as Parquet, report), selector (train, evaluate, show)."""
from __future__ import annotations

import argparse
import os

from .checks import as_flags, check_outputs, needs, open_dataset, stop_status
from .parsing import EXIT_FAILED, EXIT_OK, FileError, UsageError

_CORPUS_FLAGS = {"families": "--families", "configs": "--configs", "batches": "--batches", "models": "--models"}


def cmd_corpus(a: argparse.Namespace) -> int:
    from ..corpus import BATCHES, CONFIGS, build_corpus

    check_outputs({"--from": a.source} if a.source else {}, {"--json": a.json})
    split = (lambda v: None if v is None else [x for x in v.split(",") if x])  # noqa: E731
    try:
        batches = list(BATCHES) if a.batches is None else [int(b) for b in split(a.batches)]
    except ValueError:
        raise UsageError(f"--batches {a.batches!r} must be comma-separated ints, e.g. 1,8,32,128") from None
    if a.sample is None and (a.seed or a.held_out):
        raise UsageError(f"{'--seed' if a.seed else '--held-out'} goes with --sample N")
    if a.sample is not None:
        given = [f for f, v in (("--families", a.families), ("--models", a.models), ("--configs", a.configs),
                                ("--batches", a.batches), ("--from", a.source)) if v]
        if given:
            raise UsageError(f"{', '.join(given)} with --sample: a sample draws its own (cudnn_algos.sampling.SPACE)")
        from ..sampling import sample_corpus

        try:
            corpus = sample_corpus(a.sample, a.seed, held_out=a.held_out == "only",
                                   exclude_held_out=a.held_out == "exclude")
        except (ValueError, TypeError) as e:
            raise UsageError(as_flags(str(e), {"n": "--sample", "seed": "--seed"})) from None
    elif a.source:
        given = [f for f, v in (("--families", a.families), ("--models", a.models), ("--configs", a.configs)) if v]
        if given:
            raise UsageError(f"{', '.join(given)} with --from {a.source}: the corpus file's are used")
        source = _load_corpus(a.source)
        try:
            corpus = source.at_batches(batches)
        except (ValueError, TypeError) as e:
            raise UsageError(as_flags(str(e), _CORPUS_FLAGS)) from None
    else:
        try:
            corpus = build_corpus(split(a.families), batches=batches, configs=split(a.configs or ','.join(CONFIGS)),
                                  models=split(a.models), progress=not a.no_progress)
        except (ValueError, TypeError) as e:
            raise UsageError(as_flags(str(e), _CORPUS_FLAGS)) from None
    print(corpus)
    if a.json:
        corpus.to_json(a.json)
        print(f"wrote {a.json}")
    return EXIT_OK if corpus.problems else EXIT_FAILED


def _load_corpus(path: str):
    """A corpus file (cudnn-algos corpus --json), or FileError naming it."""
    from ..corpus import Corpus

    try:
        return Corpus.load(path)
    except FileNotFoundError:
        raise FileError(f"{path}: no such file") from None
    except ValueError as e:
        raise FileError(f"{path}: {e}") from None


def cmd_sweep(a: argparse.Namespace) -> int:
    from ..choices import DIRECTIONS, MAX_BUILD_THREADS
    from ..problem import check_choice

    check_outputs({"CORPUS": a.corpus}, {"--store": a.store})
    directions = [d for d in a.directions.split(",") if d]
    try:
        for d in directions:
            check_choice("--directions", d, DIRECTIONS)
        if a.workers is not None and a.workers < 1:
            raise ValueError(f"--workers {a.workers} must be >= 1")
        if a.workers_per_gpu < 1:
            raise ValueError(f"--workers-per-gpu {a.workers_per_gpu} must be >= 1")
        if a.allowed_failures < 0 or a.exhaustive < 0 or (a.limit is not None and a.limit < 0):
            raise ValueError("--allowed-failures, --exhaustive and --limit must be >= 0")
        if not 1 <= a.build_threads <= MAX_BUILD_THREADS:
            raise ValueError(f"--build-threads {a.build_threads} must be in [1, {MAX_BUILD_THREADS}]")
        if not 0 <= a.repeat_fraction <= 1:
            raise ValueError(f"--repeat-fraction {a.repeat_fraction} must be in [0, 1]")
        if a.budget_s is not None and not a.budget_s > 0:
            raise ValueError(f"--budget-s {a.budget_s} must be a positive number of seconds")
        if a.worker_memory_gb is not None and not a.worker_memory_gb > 0:
            raise ValueError(f"--worker-memory-gb {a.worker_memory_gb} must be a positive number of GB")
    except ValueError as e:
        raise UsageError(str(e)) from None
    corpus = _load_corpus(a.corpus)
    from ..sweep import sweep

    options = {"exhaustive": a.exhaustive, "build_threads": a.build_threads, "legacy": not a.no_legacy,
               "lean": a.lean, "turn_scope": a.turns}
    if a.known:
        options["known"] = _known_of(a.known)
    r = sweep(corpus.problems, a.store, directions=directions, scheduler=a.scheduler, n_workers=a.workers,
              allowed_failures=a.allowed_failures, budget_s=a.budget_s, progress=not a.no_progress,
              dry_run=a.dry_run, options=options, repeat_fraction=a.repeat_fraction, limit=a.limit,
              workers_per_gpu=a.workers_per_gpu,
              worker_memory_mb=None if a.worker_memory_gb is None else a.worker_memory_gb * 1024)
    print(r)
    if r.stopped_by:
        return stop_status(r.stopped_by, f"{r.done + r.failed} problem-directions stored in {a.store}; the same "
                                          "command again continues")
    return EXIT_OK


def cmd_dataset(a: argparse.Namespace) -> int:
    from ..dataset import noise_floor, validate, write_parquet
    from ..dataset.regret import GROUPS

    if a.action in ("write", "keys", "pack") and not a.out:
        raise UsageError(f"dataset {a.action} needs --out {'DIR' if a.action == 'write' else 'PATH'}")
    if a.action == "merge":
        return _dataset_merge(a.store, a.sources)
    if a.action == "keys":
        return _dataset_keys(a.store, a.out)
    if a.action == "pack":
        return _dataset_pack(a.store, a.out, a.sources, a.about)
    if a.action == "compare":
        return _dataset_compare(a.store, a.sources)
    if a.action == "write":
        needs("dataset write", "pyarrow")
    by = tuple(x for x in a.by.split(",") if x)
    for f in by:
        if f not in GROUPS:
            raise UsageError(f"--by {f!r} is not one of {', '.join(GROUPS)}")
    figures = {flag: path for flag, path in (("--plot", a.plot), ("--map", a.map)) if path}
    for flag in figures:
        needs(f"dataset report {flag}", "matplotlib")
    check_outputs({"STORE": a.store}, figures, {"--out": a.out} if a.out else None)
    try:
        with open_dataset(a.store, f"dataset {a.action}") as s:
            if a.action == "report":
                return _dataset_report(s, by, a.plot, a.map)
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


def _dataset_keys(store: str, out: str) -> int:
    from ..sweep import SweepStore

    check_outputs({"STORE": store}, {"--out": out})
    if not os.path.isfile(store):
        raise FileError(f"{store}: no such file")
    if os.path.exists(out):
        raise UsageError(f"--out {out} exists: dataset keys writes a new store")
    try:
        with SweepStore(store) as s:
            n = s.keys_only(out)
    except ValueError as e:
        raise FileError(str(e)) from None
    print(f"wrote {out}: {n} problem-directions, no rows (a sweep given it skips them; merge back what it adds)")
    return EXIT_OK


def _dataset_pack(store: str, out: str, sources: list[str], about: str) -> int:
    """`dataset pack`: the store's whole problem-directions (of --from STORE's keys) as a new shard."""
    from ..dataset import shards
    from ..sweep import SweepStore

    needs("dataset pack", "pyarrow")
    check_outputs({"STORE": store, **{f"--from {p}": p for p in sources}}, {"--out": out})
    for p in [store, *sources]:
        if not os.path.isfile(p):
            raise FileError(f"{p}: no such file")
    if os.path.exists(out):
        raise UsageError(f"--out {out} exists: a shard is written once (pack into a new file)")
    try:
        keys = None
        for p in sources:
            with SweepStore(p) as s:
                keys = (keys or set()) | s.keys()
        with SweepStore(store) as s:
            print(shards.pack(s, out, keys, about=about))
    except ValueError as e:
        raise FileError(str(e)) from None
    return EXIT_OK


def _dataset_compare(store: str, sources: list[str]) -> int:
    """`dataset compare STORE --from OTHER`: dataset.compare of the two, each a store or shards."""
    from ..dataset import compare

    if len(sources) != 1:
        raise UsageError(f"dataset compare needs one --from OTHER (given {len(sources)})")
    with open_dataset(store, "dataset compare") as first, open_dataset(sources[0], "dataset compare") as second:
        c = compare(first, second, (store, sources[0]))
    print(c)
    if not c.floor.pairs:
        raise FileError(f"{store} and {sources[0]} hold no whole problem-direction in common: nothing to compare")
    return EXIT_OK


def _dataset_merge(store: str, sources: list[str]) -> int:
    from ..dataset import shards
    from ..sweep import SweepStore

    if not sources:
        raise UsageError("dataset merge needs --from STORE (one or more)")
    check_outputs({f"--from {p}": p for p in sources}, {"STORE": store})
    for p in sources:
        if not os.path.isfile(p):
            raise FileError(f"--from {p}: no such file")
    if any(p.endswith(".parquet") for p in sources):
        needs("dataset merge --from SHARD", "pyarrow")
    try:
        with SweepStore(store) as into:
            for p in sources:
                if p.endswith(".parquet"):  # a dataset shard (cudnn_algos.dataset.shards)
                    copied, already = shards.unpack([p], into)
                else:
                    with SweepStore(p) as other:
                        copied, already = into.merge(other)
                print(f"{p}: {copied} problem-directions copied, {already} already in {store} (kept as they were)")
            print(f"{store}: {into.counts()}")
    except ValueError as e:
        raise FileError(str(e)) from None
    return EXIT_OK


def _dataset_report(store, by: tuple[str, ...], plot: str | None, where: str | None = None) -> int:
    """`dataset report`: regret per method by group and overall, the noise floor, where the heuristic loses most."""
    from ..dataset import measured_problems, noise_floor, validate
    from ..dataset.regret import (TOP1_LEGEND, plot_cdf, plot_map, present, problem_regrets, search_costs, summarize,
                          table, worst)

    v = validate(store)
    problems = list(measured_problems(store, v))  # the rows, read once
    regrets = problem_regrets(problems)
    if not regrets:
        raise FileError(f"{store.path}: no measured problem-direction with a best to report on ({v})")
    print(f"regret against the measured best (pick / best - 1, %), {len(v.kept)} problem-directions "
          f"({len(regrets)} counting each family a problem is in):")
    if by:
        print(table(summarize(regrets, by, present(regrets)), by))
    print(table(summarize(regrets, (), present(regrets)), ()))
    print("torch_off: torch's benchmark-off rule on the lists (INSTANT, else FALLBACK); torch_on: its benchmark "
          "mode;\nlegacy_find: cudnnFind's first; a, b, fallback: those lists' first configuration that built\n"
          + TOP1_LEGEND)
    cost = search_costs(problems)
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
    if where:
        plot_map(regrets, where)
        print(f"wrote {where}")
    return EXIT_OK


def _known_of(model: str) -> dict[str, list[str]]:
    """`sweep --known MODEL`: the known configurations' names per problem class of the shipped selector of this
    GPU ("shipped", which needs the GPU to name its family) or of a model file."""
    from ..choose.model import Selector

    try:
        if model == "shipped":
            import torch

            from ..backend import environment

            if not torch.cuda.is_available():
                raise ValueError("--known shipped needs a GPU (the selector is this GPU's); pass a model file")
            sel = Selector.shipped(environment(torch.cuda.current_device()).selector_family())
        else:
            sel = Selector.load(model)
    except (OSError, KeyError, ValueError) as e:
        raise UsageError(f"--known {model}: {str(e)[:300]}") from None
    return {c: [n for n, _ in v] for c, v in sel.known.items()}
