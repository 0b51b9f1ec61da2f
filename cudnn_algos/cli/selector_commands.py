"""The selector's commands: `selector train` (a model from measured problem-directions), `selector eval` (leave
one family or batch size out, or score a model file), `selector show` (what a model file holds)."""
from __future__ import annotations

import argparse
import os
import textwrap
from typing import Any

from .checks import check_outputs, dataset_paths, needs, open_dataset
from .parsing import EXIT_OK, FileError, UsageError


def _measured(path: str, command: str) -> list:
    """dataset.measured_problems of the store or shards at `path` (open_dataset's); shards are read straight, without a
    store in memory (shards.measured: the same problems, a third of the time)."""
    from ..dataset import measured_problems, shards

    paths = dataset_paths(path, command)
    try:
        if paths:  # (none in a directory: open_dataset says so)
            return shards.measured(paths)
        with open_dataset(path, command) as s:
            return list(measured_problems(s))
    except ValueError as e:
        raise FileError(f"{path}: {e}") from None


def _check_selector_args(a: argparse.Namespace) -> None:
    """Usage errors of `selector`'s options that need no file read."""
    if a.action in ("train", "eval"):
        needs(f"selector {a.action}", "sklearn")
        if a.learner == "lightgbm":
            needs(f"selector {a.action} --learner lightgbm", "lightgbm")
    if a.action == "train" and not a.out:
        raise UsageError("selector train needs --out PATH (the model file, .npz)")
    if a.plot and a.action != "eval":
        raise UsageError(f"--plot {a.plot}: only selector eval draws (the held-out regret CDF)")
    if a.evidence is not None and a.evidence < 0:
        raise UsageError(f"--evidence {a.evidence} must be >= 0 (0: no neighbour evidence)")
    if a.reach is not None and not a.reach > 0:
        raise UsageError(f"--reach {a.reach} must be > 0 (inf: the trees everywhere)")
    fits = {"regression": ("exact", "hist"), "rank": ("exact", "lightgbm")}[a.objective]
    if a.learner is not None and (a.action == "show" or a.model or a.learner not in fits):
        raise UsageError(f"--learner {a.learner}: only selector train and eval (leave-one-out) take it, hist with "
                         "--objective regression, lightgbm with --objective rank")
    a.learner = a.learner or ("hist" if a.objective == "regression" else "exact")  # the default fits the objective
    if a.leave_out is not None and a.action != "train":
        raise UsageError(f"--leave-out {a.leave_out}: only selector train takes it (eval leaves groups out with "
                         "--by and --hold-out)")
    if a.hold_out is not None and (a.action != "eval" or a.model):
        raise UsageError(f"--hold-out {a.hold_out}: only selector eval's leave-one-out takes it (not --model)")
    if a.reach is not None and a.action == "show":
        raise UsageError(f"--reach {a.reach}: only selector train and eval take it")
    for flag, given in (("--guard", a.guard), ("--guard-far", a.guard_far), ("--guard-cap", a.guard_cap)):
        if given is not None and a.action == "show":
            raise UsageError(f"{flag} {given}: only selector train and eval take it")
    if a.guard_cap is not None and a.model:
        raise UsageError(f"--guard-cap {a.guard_cap}: only selector train and eval's leave-one-out take it (a model "
                         "file keeps the guard trees it was trained with)")
    if a.target_cap is not None and (a.action == "show" or a.model or a.objective != "regression"):
        raise UsageError(f"--target-cap {a.target_cap}: only selector train and eval's leave-one-out take it, with "
                         "--objective regression")
    if a.target_cap is not None and not 0 < a.target_cap < float("inf"):
        raise UsageError(f"--target-cap {a.target_cap} must be > 0 (log2 of time over the fastest: 0.5 is 1.41x)")


def _guard_of(text: str | None, default: Any, flag: str = "--guard") -> Any:
    """--guard's (or `flag`'s: --guard-far, --guard-cap) value: `default` where it is not given, None for 'none',
    else a number >= 0 (> 0 for --guard-cap; UsageError)."""
    if text is None:
        return default
    if text.strip().lower() == "none":
        return None
    try:
        m = float(text)
    except ValueError:
        m = float("nan")
    if not m >= 0 or m == float("inf") or (flag == "--guard-cap" and m == 0):
        what = "a cap > 0" if flag == "--guard-cap" else "a margin >= 0"
        raise UsageError(f"{flag} {text}: give {what} (log2 of time over the fastest: 0.2 is 15%) or 'none'")
    return m


def cmd_selector(a: argparse.Namespace) -> int:
    _check_selector_args(a)
    from ..choose.model import EVIDENCE_K, GUARD, GUARD_CAP, GUARD_FAR, REACH
    from ..selector.train import TARGET_CAP

    guard = _guard_of(a.guard, GUARD)
    guards = dict(guard=guard, guard_far=_guard_of(a.guard_far, GUARD_FAR, "--guard-far"),
                  guard_cap=_guard_of(a.guard_cap, GUARD_CAP, "--guard-cap"))
    target_cap = TARGET_CAP if a.target_cap is None else a.target_cap
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
        problems, left_out = _left_out(a, problems)
        try:
            if a.known is not None and a.known < 0:
                raise UsageError(f"--known {a.known} must be >= 0")
            sel = train(problems, family=a.family or _family_of(problems), objective=a.objective,
                        known_cap=KNOWN_CAP if a.known is None else a.known, evidence_k=evidence_k, reach=reach,
                        learner=a.learner, target_cap=target_cap, **guards)
        except ValueError as e:
            raise FileError(f"{a.file}: {e}") from None
        if left_out:
            sel.trained_on["left_out"] = left_out
        sel.save(a.out)
        print(f"trained on {sel.trained_on['problems']} problem-directions ({sel.trained_on['candidates']} timed "
              f"configurations) for {sel.family}; wrote {a.out} ({os.path.getsize(a.out) / 1e6:.2f} MB)")
        return EXIT_OK
    if a.model:
        return _selector_score(a.model, problems, a.by, a.plot, a.reach, _guard_of(a.guard, ...),
                               _guard_of(a.guard_far, ..., "--guard-far"))
    return _selector_leave_one_out(a, problems, evidence_k, reach, guards, target_cap)


def _left_out(a: argparse.Namespace, problems) -> tuple[list, str | None]:
    """`selector train --leave-out`: the problems outside those groups of --by, and the words the model file keeps
    for them ("batch 8"); all of them and None without it."""
    if a.leave_out is None:
        return problems, None
    from ..selector.train import outside

    names = [g for g in a.leave_out.split(",") if g]
    try:
        rest = outside(problems, a.by, names)
    except ValueError as e:
        raise UsageError(f"--leave-out {a.leave_out}: {str(e).split(': ', 1)[-1]}") from None
    if not rest:
        raise UsageError(f"--leave-out {a.leave_out}: every problem is in it (nothing left to train on)")
    return rest, f"{a.by} {', '.join(names)}"


def _selector_leave_one_out(a: argparse.Namespace, problems, evidence_k: int, reach: float,
                            guards: dict[str, Any], target_cap: float) -> int:
    """`selector eval STORE` without --model: each group (of --by; --hold-out's alone) held out in turn, the table
    of the held-out problems' regrets per method, the legend, the choosing costs and, with --plot, the CDF."""
    from ..dataset.regret import METHODS, TOP1_LEGEND, present, summarize, table
    from ..selector.evaluation import choosing_costs, half_of_best, plot_selector, worse_than_off
    from ..selector.train import KNOWN_UNTIMED, MEASURE_K, SELECTOR_METHODS, leave_one_out

    only = [g for g in a.hold_out.split(",") if g] if a.hold_out is not None else None
    try:
        rs = leave_one_out(problems, by=a.by, objective=a.objective, evidence_k=evidence_k, reach=reach,
                           learner=a.learner, only=only, target_cap=target_cap, **guards)
    except ValueError as e:
        if not str(e).startswith("only="):
            raise
        raise UsageError(f"--hold-out {a.hold_out}: {str(e).split(': ', 1)[-1]}") from None
    if not rs:
        raise FileError(f"{a.file}: leave-one-{a.by}-out needs problems from at least two groups")
    methods = present(rs, SELECTOR_METHODS + METHODS)
    seen = f"neighbour evidence of the {evidence_k} nearest" if evidence_k else "no neighbour evidence"
    trees = f"{a.objective} trees" + (f" ({a.learner}, target cap {target_cap:g})" if a.objective == "regression"
                                      else "")
    guarded = _guard_words(**guards)
    print(f"leave one {a.by} out ({trees}, {seen}, reach {reach:g},\n  {guarded}):\n"
          "regret against the measured best (pick / best - 1, %) of the held-out problems")
    print(table(summarize(rs, (a.by,), methods), ("held-out " + a.by,)))
    print(table(summarize(rs, (), methods), ()))
    untimed = sum(p.regret.get(KNOWN_UNTIMED) or 0 for p in rs)
    print(f"predict: what unseen='predict' pins (INSTANT's first unless the trees predict theirs faster by the "
          f"guard above)\nselector: the trees' first without the guard (cuDNN's order outside their reach, "
          f"{reach:g})\n"
          f"selector_top{MEASURE_K}: unseen='measure_top_k' (the fastest of the trees' first {MEASURE_K - 1} and "
          f"cuDNN's first)\nnearest: the nearest training problem's fastest\noffered: the fastest configuration the "
          f"selector is offered (a perfect ranker's pick: what its candidates allow)\n"
          f"known_auto: unseen='measure_top_k' with k='auto' (with known configurations; how many it timed: the "
          f"choosing costs),\n  once the runtime-compiled candidates it builds later are timed; known_auto_first: "
          f"what it times at once;\n  known_auto_torch: k='auto' and the candidates benchmark mode would time\n"
          f"known, known_top{MEASURE_K}, offered_known: the same with the training problems' fastest configurations "
          f"of the class\n  added (those this problem has a time for); the trees ranked one without a time first "
          f"in {untimed:.0f} of {len(rs)}\n  ({100 * untimed / len(rs):.0f}%): there known's pick is the first "
          f"timed one below it\n{TOP1_LEGEND}")
    print(half_of_best(summarize(rs, (a.by,), methods), a.by))
    print(worse_than_off(rs))
    print(choosing_costs(problems, rs))
    if a.plot:
        plot_selector(rs, a.plot, f"held out by {a.by} ({trees}, reach {reach:g}): {len(rs)} {a.by} rows")
    return EXIT_OK


def _selector_score(model: str, problems, by: str, plot: str | None = None, reach: float | None = None,
                    guard: float | None = ..., guard_far: float | None = ...) -> int:
    """`selector eval STORE --model FILE|shipped`: a trained model's regrets on the store's problems, those it was
    trained on apart from those it was not; `reach` (--reach), `guard` and `guard_far` (--guard, --guard-far; ...:
    not given) in place of the model's own."""
    from dataclasses import replace

    from ..choose.model import Selector
    from ..dataset.regret import METHODS, TOP1_LEGEND, present, summarize, table
    from ..selector.evaluation import choosing_costs, plot_selector, worse_than_off
    from ..selector.train import SELECTOR_METHODS, score

    try:
        sel = Selector.shipped(_family_of(problems)) if model == "shipped" else Selector.load(model)
    except (OSError, KeyError, ValueError) as e:
        raise FileError(f"--model {model}: {str(e)[:300]}") from None
    sel = sel if reach is None else replace(sel, reach=float(reach))
    sel = sel if guard is ... else replace(sel, guard=guard)
    sel = sel if guard_far is ... else replace(sel, guard_far=guard_far)
    seen, new = score(sel, problems)
    methods = present(seen + new, SELECTOR_METHODS + METHODS)
    print(f"the selector {model} ({sel.family}, trained on {sel.trained_on.get('problems', '?')} problem-directions) "
          f"on {len(problems)} problem-directions, reach {sel.reach:g}, "
          f"{_guard_text(sel)}: regret against the measured best "
          "(pick / best - 1, %)")
    for what, rs in (("not trained on (held out)", new), ("trained on (the same problem measured again)", seen)):
        print(f"\n{what}: {len(rs)} rows")
        if rs:
            print(table(summarize(rs, (by,), methods), (by,)))
            print(table(summarize(rs, (), methods), ()))
    print(f"\n{TOP1_LEGEND}")
    if new:
        print(worse_than_off(new))
    print(choosing_costs(problems, seen + new))
    if plot:  # what it was not trained on, where there is any: the figure a reader takes for held out
        rs, what = (new, "not trained on (held out)") if new else (seen, "trained on (none held out)")
        plot_selector(rs, plot, f"the selector {model} on {len(problems)} problem-directions: {what}, {len(rs)} "
                                 f"{by} rows")
    return EXIT_OK


def _guard_text(sel: Any) -> str:
    """A selector's guard in words (_guard_words), and its trees' weight in the ranking where it has one."""
    words = _guard_words(sel.guard, sel.guard_far, sel.trained_on.get("guard_cap"), sel.guard_trees is not None)
    return words + (f", which weigh {sel.blend:g} in the ranking" if sel.blend and sel.guard_trees is not None else "")


def _guard_words(guard: float | None, guard_far: float | None, guard_cap: float | None,
                 own_trees: bool | None = None) -> str:
    """'no guard', or the margin, the margin beyond the reach and the cap of the guard's own trees (`own_trees`:
    whether it has them; None: where a cap is given)."""
    if guard is None:
        return "no guard"
    far = "" if guard_far is None else f", {guard_far:g} beyond the reach"
    own = guard_cap is not None if own_trees is None else own_trees
    trees = f", read from its own trees{f' (cap {guard_cap:g})' if guard_cap else ''}" if own else ""
    return f"guard {guard:g}{far}{trees}"


def _family_of(problems) -> str:
    """The environment family of the rows (GPU architecture x cuDNN major.minor), where they say."""
    from ..environment import selector_family

    r = problems[0][1][0]
    cc, cudnn = r.get("compute_capability"), r.get("cudnn")
    return selector_family(cc, cudnn) if cc and cudnn else "unknown"


def _selector_show(path: str) -> int:
    from ..choose.model import Selector

    try:
        sel = Selector.load(path)
    except (ValueError, OSError, KeyError) as e:
        raise FileError(f"{path}: not a cudnn_algos selector ({str(e)[:200]})") from None
    t = sel.trained_on
    print(textwrap.fill(f"selector for {sel.family}: trained on {t.get('problems')} problem-directions, "
                        f"{t.get('candidates')} timed configurations, families "
                        f"{', '.join(t.get('families', [])) or '?'}, at {t.get('trained_at')}"
                        + (f"; left out: {t['left_out']}" if t.get("left_out") else ""), 120,
                        subsequent_indent="  ", break_on_hyphens=False))
    learner = f"{t['learner']}: " if t.get("learner") else ""
    cap = f", target cap {t['target_cap']:g}" if t.get("target_cap") is not None else ""
    print(f"{len(sel.trees.offset)} {t.get('objective', 'regression')} trees ({learner}{len(sel.trees.feature)} "
          f"nodes{cap}), "
          f"{len(sel.vocabulary.engines)} engines, "
          f"{len(sel.vocabulary.knobs)} knobs; {os.path.getsize(path) / 1e6:.2f} MB\n"
          f"nearest-neighbour baseline over {len(sel.neighbours.best)} problems; reach {sel.reach:g} (Note [the "
          "selector's reach])")
    print(_guard_text(sel) + ("" if sel.guard is None else " (Note [a guard against INSTANT's first])"))
    n = sum(len(v) for v in sel.known.values())
    print(f"known configurations: {n} in {len(sel.known)} problem class{'es' if len(sel.known) != 1 else ''} "
          "(Note [known configurations])")
    ev = sel.evidence
    print("neighbour evidence: none (trained without it)" if ev is None else
          f"neighbour evidence: {len(ev.value)} timed configurations of {len(ev.configs)} kinds, the {ev.k} nearest "
          "(Note [neighbour evidence])")
    return EXIT_OK
