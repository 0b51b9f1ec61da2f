"""The data pipeline's CLI commands: corpus (the problems of model families), sweep (measured across GPUs into a
store), dataset (validate, write as Parquet, report), selector (train, evaluate, show)."""
from __future__ import annotations

import argparse
import os

from .checks import as_flags, check_outputs, needs, stop_status
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
    if a.source:
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
    except ValueError as e:
        raise UsageError(str(e)) from None
    corpus = _load_corpus(a.corpus)
    from ..sweep import sweep

    options = {"exhaustive": a.exhaustive, "build_threads": a.build_threads}
    if a.known:
        options["known"] = _known_of(a.known)
    r = sweep(corpus.problems, a.store, directions=directions, scheduler=a.scheduler, n_workers=a.workers,
              allowed_failures=a.allowed_failures, budget_s=a.budget_s, progress=not a.no_progress,
              dry_run=a.dry_run, options=options, repeat_fraction=a.repeat_fraction, limit=a.limit,
              workers_per_gpu=a.workers_per_gpu)
    print(r)
    if r.stopped_by:
        return stop_status(r.stopped_by, f"{r.done + r.failed} problem-directions stored in {a.store}; the same "
                                          "command again continues")
    return EXIT_OK


def cmd_dataset(a: argparse.Namespace) -> int:
    from ..dataset import noise_floor, validate, write_parquet
    from ..regret import GROUPS

    if a.action in ("write", "keys", "pack") and not a.out:
        raise UsageError(f"dataset {a.action} needs --out {'DIR' if a.action == 'write' else 'PATH'}")
    if a.action == "merge":
        return _dataset_merge(a.store, a.sources)
    if a.action == "keys":
        return _dataset_keys(a.store, a.out)
    if a.action == "pack":
        return _dataset_pack(a.store, a.out, a.sources, a.about)
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
        with _open(a.store, f"dataset {a.action}") as s:
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


def _open(path: str, command: str):
    """The sweep store at `path`, or the dataset shards it names (a .parquet file or a directory of them, put into a
    store in memory: cudnn_algos.shards.open_store)."""
    from .. import shards

    if not os.path.exists(path):
        raise FileError(f"{path}: no such file")
    if shards.shard_paths(path) is not None:
        needs(f"{command} on dataset shards", "pyarrow")
    elif os.path.isdir(path):
        raise FileError(f"{path} is a directory: give a sweep store or a directory of dataset shards (.parquet)")
    try:
        return shards.open_store(path)
    except ValueError as e:
        raise FileError(str(e)) from None


def _measured(path: str, command: str) -> list:
    """dataset.measured_problems of the store or shards at `path` (_open's); shards are read straight, without a
    store in memory (shards.measured: the same problems, a third of the time)."""
    from .. import shards
    from ..dataset import measured_problems

    paths = shards.shard_paths(path) if os.path.isdir(path) or path.endswith(".parquet") else None
    try:
        if paths and os.path.exists(path):
            needs(f"{command} on dataset shards", "pyarrow")
            return shards.measured(paths)
        with _open(path, command) as s:
            return list(measured_problems(s))
    except ValueError as e:
        raise FileError(f"{path}: {e}") from None


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
    from .. import shards
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


def _dataset_merge(store: str, sources: list[str]) -> int:
    from .. import shards
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
                if p.endswith(".parquet"):  # a dataset shard (cudnn_algos.shards)
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
    from ..regret import (TOP1_LEGEND, plot_cdf, plot_map, present, problem_regrets, search_costs, summarize,
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




def _check_selector_args(a: argparse.Namespace) -> None:
    """Usage errors of `selector`'s options that need no file read."""
    if a.action in ("train", "eval"):
        needs(f"selector {a.action}", "sklearn")
    if a.action == "train" and not a.out:
        raise UsageError("selector train needs --out PATH (the model file, .npz)")
    if a.plot and a.action != "eval":
        raise UsageError(f"--plot {a.plot}: only selector eval draws (the held-out regret CDF)")
    if a.evidence is not None and a.evidence < 0:
        raise UsageError(f"--evidence {a.evidence} must be >= 0 (0: no neighbour evidence)")
    if a.reach is not None and not a.reach > 0:
        raise UsageError(f"--reach {a.reach} must be > 0 (inf: the trees everywhere)")
    if a.learner != "exact" and (a.action == "show" or a.model or a.objective != "regression"):
        raise UsageError(f"--learner {a.learner}: only selector train and eval (leave-one-out) of the regression "
                         "objective take it")
    if a.hold_out is not None and (a.action != "eval" or a.model):
        raise UsageError(f"--hold-out {a.hold_out}: only selector eval's leave-one-out takes it (not --model)")
    if a.reach is not None and a.action == "show":
        raise UsageError(f"--reach {a.reach}: only selector train and eval take it")


def cmd_selector(a: argparse.Namespace) -> int:
    _check_selector_args(a)
    from ..selector.model import EVIDENCE_K, REACH

    evidence_k = EVIDENCE_K if a.evidence is None else a.evidence
    reach = REACH if a.reach is None else a.reach
    check_outputs({"FILE": a.file}, {k: v for k, v in (("--out", a.out), ("--plot", a.plot)) if v})
    if a.action == "show":
        if not os.path.isfile(a.file):
            raise FileError(f"{a.file}: no such file")
        return _selector_show(a.file)
    from ..selector.train import KNOWN_CAP, train

    problems = _measured(a.file, f"selector {a.action}")
    if not problems:
        raise FileError(f"{a.file}: no measured problem-direction to learn from")
    if a.action == "train":
        try:
            if a.known is not None and a.known < 0:
                raise UsageError(f"--known {a.known} must be >= 0")
            sel = train(problems, family=a.family or _family_of(problems), objective=a.objective,
                        known_cap=KNOWN_CAP if a.known is None else a.known, evidence_k=evidence_k, reach=reach,
                        learner=a.learner)
        except ValueError as e:
            raise FileError(f"{a.file}: {e}") from None
        sel.save(a.out)
        print(f"trained on {sel.trained_on['problems']} problem-directions ({sel.trained_on['candidates']} timed "
              f"configurations) for {sel.family}; wrote {a.out} ({os.path.getsize(a.out) / 1e6:.2f} MB)")
        return EXIT_OK
    if a.model:
        return _selector_score(a.model, problems, a.by, a.plot, a.reach)
    return _selector_leave_one_out(a, problems, evidence_k, reach)


def _selector_leave_one_out(a: argparse.Namespace, problems, evidence_k: int, reach: float) -> int:
    """`selector eval STORE` without --model: each group (of --by; --hold-out's alone) held out in turn, the table
    of the held-out problems' regrets per method, the legend, the choosing costs and, with --plot, the CDF."""
    from ..regret import METHODS, TOP1_LEGEND, present, summarize, table
    from ..selector.train import KNOWN_UNTIMED, MEASURE_K, SELECTOR_METHODS, leave_one_out

    only = [g for g in a.hold_out.split(",") if g] if a.hold_out is not None else None
    try:
        rs = leave_one_out(problems, by=a.by, objective=a.objective, evidence_k=evidence_k, reach=reach,
                           learner=a.learner, only=only)
    except ValueError as e:
        if not str(e).startswith("only="):
            raise
        raise UsageError(f"--hold-out {a.hold_out}: {str(e).split(': ', 1)[-1]}") from None
    if not rs:
        raise FileError(f"{a.file}: leave-one-{a.by}-out needs problems from at least two groups")
    methods = present(rs, SELECTOR_METHODS + METHODS)
    seen = f"neighbour evidence of the {evidence_k} nearest" if evidence_k else "no neighbour evidence"
    trees = f"{a.objective} trees" + (f" ({a.learner})" if a.objective == "regression" else "")
    print(f"leave one {a.by} out ({trees}, {seen}, reach {reach:g}):\n"
          "regret against the measured best (pick / best - 1, %) of the held-out problems")
    print(table(summarize(rs, (a.by,), methods), ("held-out " + a.by,)))
    print(table(summarize(rs, (), methods), ()))
    untimed = sum(p.regret.get(KNOWN_UNTIMED) or 0 for p in rs)
    print(f"selector: unseen='predict' (the trees' first; cuDNN's order outside their reach, {reach:g})\n"
          f"selector_top{MEASURE_K}: unseen='measure_top_k' (the fastest of the trees' first {MEASURE_K - 1} and "
          f"cuDNN's first)\nnearest: the nearest training problem's fastest\noffered: the fastest configuration the "
          f"selector is offered (a perfect ranker's pick: what its candidates allow)\n"
          f"known, known_top{MEASURE_K}, offered_known: the same with the training problems' fastest configurations "
          f"of the class\n  added (those this problem has a time for); the trees ranked one without a time first "
          f"in {untimed:.0f} of {len(rs)}\n  ({100 * untimed / len(rs):.0f}%): there known's pick is the first "
          f"timed one below it\n{TOP1_LEGEND}")
    print(_choosing_costs(problems, rs))
    if a.plot:
        _plot_selector(rs, a.plot, f"held out by {a.by} ({trees}, reach {reach:g}): {len(rs)} {a.by} rows")
    return EXIT_OK


def _choosing_costs(problems, rs) -> str:
    """What each method's choice costs, host ms per problem-direction (median): the lists' queries and torch's
    benchmark-mode first call as the rows recorded them on the GPU machine (regret.search_costs), and the
    selector's ranking as timed here (with_selector's RANK_MS), after lists A and B are asked."""
    from ..regret import quantile, search_costs
    from ..selector.train import MEASURE_K, RANK_MS

    cost = search_costs(problems)
    rank = quantile([p.regret[RANK_MS] for p in rs if p.regret.get(RANK_MS) is not None], 0.5)
    names = {"instant": "INSTANT", "a": "A", "b": "B", "fallback": "fallback", "torch_on": "torch benchmark on"}
    lines = ["choosing costs, host ms per problem-direction (median):"]
    recorded = [f"{names[m]} {cost[m]:.3g}" for m in names if cost.get(m) is not None]
    if recorded:
        lines.append("  as the rows recorded them: " + ", ".join(recorded))
    if rank is not None:
        lists = f"lists A and B {cost['a+b']:.3g} + " if cost.get("a+b") is not None else ""
        lines.append(f"  predict: {lists}ranking {rank:.3g} (this CPU)")
        lines.append(f"  measure_top_k: predict's + building and timing {MEASURE_K} on the GPU (not in the rows)")
    return "\n".join(lines if len(lines) > 1 else lines + ["  none recorded"])


def _plot_selector(rs, path: str, title: str) -> None:
    """The regret CDF of `rs` (selector rows: with_selector's) per method a user chooses between (no search, a
    short one, cuDNN's heuristics, torch's benchmark mode) and the candidates' floor, written to `path`."""
    from ..regret import plot_cdf, present
    from ..selector.train import MEASURE_K

    labels = {"known": "predict", f"known_top{MEASURE_K}": f"measure_top_k (k={MEASURE_K})",
              "nearest": "nearest neighbour", "offered_known": "floor: the fastest offered",
              "instant": "INSTANT (torch, benchmark off)", "b": "heuristic B", "legacy_heuristic": "legacy heuristic",
              "torch_on": "torch, benchmark on"}
    plot_cdf(rs, path, present(rs, tuple(labels)), title=title, labels=labels)
    print(f"wrote {path}")


def _selector_score(model: str, problems, by: str, plot: str | None = None, reach: float | None = None) -> int:
    """`selector eval STORE --model FILE|shipped`: a trained model's regrets on the store's problems, those it was
    trained on apart from those it was not; `reach` (--reach) in place of the model's own."""
    from dataclasses import replace

    from ..regret import METHODS, TOP1_LEGEND, present, summarize, table
    from ..selector import Selector
    from ..selector.train import SELECTOR_METHODS, score

    try:
        sel = Selector.shipped(_family_of(problems)) if model == "shipped" else Selector.load(model)
    except (OSError, KeyError, ValueError) as e:
        raise FileError(f"--model {model}: {str(e)[:300]}") from None
    sel = sel if reach is None else replace(sel, reach=float(reach))
    seen, new = score(sel, problems)
    methods = present(seen + new, SELECTOR_METHODS + METHODS)
    print(f"the selector {model} ({sel.family}, trained on {sel.trained_on.get('problems', '?')} problem-directions) "
          f"on {len(problems)} problem-directions, reach {sel.reach:g}: regret against the measured best (pick / best "
          "- 1, %)")
    for what, rs in (("not trained on (held out)", new), ("trained on (the same problem measured again)", seen)):
        print(f"\n{what}: {len(rs)} rows")
        if rs:
            print(table(summarize(rs, (by,), methods), (by,)))
            print(table(summarize(rs, (), methods), ()))
    print(f"\n{TOP1_LEGEND}")
    print(_choosing_costs(problems, seen + new))
    if plot:  # what it was not trained on, where there is any: the figure a reader takes for held out
        rs, what = (new, "not trained on (held out)") if new else (seen, "trained on (none held out)")
        _plot_selector(rs, plot, f"the selector {model} on {len(problems)} problem-directions: {what}, {len(rs)} "
                                 f"{by} rows")
    return EXIT_OK


def _known_of(model: str) -> dict[str, list[str]]:
    """`sweep --known MODEL`: the known configurations' names per problem class of the shipped selector of this
    GPU ("shipped", which needs the GPU to name its family) or of a model file."""
    from ..selector import Selector

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


def _family_of(problems) -> str:
    """The environment family of the rows (GPU architecture x cuDNN major.minor), where they say."""
    from ..environment import selector_family

    r = problems[0][1][0]
    cc, cudnn = r.get("compute_capability"), r.get("cudnn")
    return selector_family(cc, cudnn) if cc and cudnn else "unknown"


def _selector_show(path: str) -> int:
    from ..selector import Selector

    try:
        sel = Selector.load(path)
    except (ValueError, OSError, KeyError) as e:
        raise FileError(f"{path}: not a cudnn_algos selector ({str(e)[:200]})") from None
    t = sel.trained_on
    print(f"selector for {sel.family}: trained on {t.get('problems')} problem-directions, {t.get('candidates')} "
          f"timed configurations, families {', '.join(t.get('families', [])) or '?'}, at {t.get('trained_at')}")
    learner = f"{t['learner']}: " if t.get("learner") else ""
    print(f"{len(sel.trees.offset)} {t.get('objective', 'regression')} trees ({learner}{len(sel.trees.feature)} "
          "nodes), "
          f"{len(sel.vocabulary.engines)} engines, "
          f"{len(sel.vocabulary.knobs)} knobs; nearest-neighbour baseline over {len(sel.neighbours.best)} problems; "
          f"{os.path.getsize(path) / 1e6:.2f} MB; reach {sel.reach:g} (Note [the selector's reach])")
    n = sum(len(v) for v in sel.known.values())
    print(f"known configurations: {n} in {len(sel.known)} problem class{'es' if len(sel.known) != 1 else ''} "
          "(Note [known configurations])")
    ev = sel.evidence
    print("neighbour evidence: none (trained without it)" if ev is None else
          f"neighbour evidence: {len(ev.value)} timed configurations of {len(ev.configs)} kinds, the {ev.k} nearest "
          "(Note [neighbour evidence])")
    return EXIT_OK
