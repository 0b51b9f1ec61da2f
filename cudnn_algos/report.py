"""Whole models: ``profile(model, example_input)`` searches every distinct convolution of a model once per direction
in cuDNN 9's engine space (heuristic lists + refine, as ``find_engines`` does) and reports, per problem and
direction, what torch runs with benchmark off (a fresh process) and on (this process), identified by its kernels,
the best configuration found and its source, the ratio to each, host time per call of each path, and sums over the
model; plus the end-to-end benchmark-mode check (per-step time off vs on, and its warm-up, in fresh processes).
"""
from __future__ import annotations

import copy
import datetime as _dt
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from typing import Any, Iterable

import torch

from .api import find
from .engines import find_engines, mark_torch_run
from .errors import CudaError, CudnnError
from .problem import (DIRECTIONS, DTYPES, MEMORY_FORMATS, check_choice, check_int, conv_layout, device_index,
                      environment, layout_of, make_problem, parse_dtype, parse_memory_format)
from .results import EndToEnd, MeasureConfig, Measurement, ModelReport, ProblemEntry, TorchRun, decode, encode
from .spec import ConvSpec
from .store import ResultStore
from .timing import (check_config, first_call_ms, measure_rows, operand_sets, reference_output,
                     torch_runnable)


# ------------------------------------------------------------------------------------------------ discovery
@dataclass
class ConvUse:
    """One convolution call of a forward pass: who made it, its spec, and what it received. A convolution module's
    call is named by the module and keeps the module's spec (padding modes as written); a functional call
    (``F.conv2d`` inside some module's forward) is named ``<calling module>/F.conv2d`` and described as the
    convolution torch runs (explicit padding already applied to its input)."""

    name: str
    spec: ConvSpec
    input_shape: tuple[int, ...]
    dtype: torch.dtype
    memory_format: str
    functional: bool = False


def _functional_use(scope: str, args: tuple) -> ConvUse:
    """A ConvUse from aten.convolution's arguments (input, weight, bias, stride, padding, dilation, transposed,
    output_padding, groups)."""
    x, w, _, stride, padding, dilation, transposed, output_padding, groups = args[:9]
    nd = w.dim() - 2
    if transposed:
        cin, cout = w.shape[0], w.shape[1] * groups
    else:
        cin, cout = x.shape[1], w.shape[0]
    spec = ConvSpec(int(cin), int(cout), tuple(int(k) for k in w.shape[2:]), stride=tuple(stride),
                    padding=tuple(padding), dilation=tuple(dilation), groups=int(groups), transposed=bool(transposed),
                    output_padding=tuple(output_padding) if transposed else 0)
    op = f"F.conv{'_transpose' if transposed else ''}{nd}d"
    return ConvUse(f"{scope or '<model>'}/{op}", spec, tuple(x.shape), x.dtype, conv_layout(x, w), functional=True)


def _as_on_gpu(out: torch.Tensor, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """A convolution's output laid out as torch's cuDNN path lays it out on the GPU (channels-last when the input or
    the weight is): on the meta device it comes out contiguous, and the next layer's layout would be misread."""
    fmt = conv_layout(x, w)
    if out.device.type != "meta" or fmt == "contiguous" or layout_of(out) == fmt or out.dim() not in (4, 5):
        return out
    return torch.empty(out.shape, dtype=out.dtype, device=out.device, memory_format=MEMORY_FORMATS[fmt])


def _run_recording(m: torch.nn.Module, inp: Any) -> list[ConvUse]:
    """One forward pass of `m` under a dispatch mode that sees every aten.convolution, with hooks that keep the
    stack of modules being called (so a call is named by its module)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    uses: list[ConvUse] = []
    stack: list[tuple[str, torch.nn.Module]] = []

    class Recorder(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func is torch.ops.aten.convolution.default:
                top = stack[-1][1] if stack else None
                if not isinstance(top, torch.nn.modules.conv._ConvNd):  # a module's own call is recorded by its hook
                    uses.append(_functional_use(stack[-1][0] if stack else "", args))
                return _as_on_gpu(func(*args, **(kwargs or {})), args[0], args[1])
            return func(*args, **(kwargs or {}))

    def pre(module, args, _name=""):
        stack.append((_name, module))
        if isinstance(module, torch.nn.modules.conv._ConvNd):
            x = args[0]
            uses.append(ConvUse(_name, ConvSpec.from_module(module), tuple(x.shape), x.dtype,
                                conv_layout(x, module.weight)))

    def post(module, args, out):
        stack.pop()

    handles = []
    for name, mod in m.named_modules():
        handles.append(mod.register_forward_pre_hook(lambda mod_, a, _n=name: pre(mod_, a, _n)))
        handles.append(mod.register_forward_hook(post))
    try:
        with torch.no_grad(), Recorder():
            m(*inp) if isinstance(inp, tuple) else m(inp)
    finally:
        for h in handles:
            h.remove()
    return uses


def discover(model: torch.nn.Module, example_input: Any) -> list[ConvUse]:
    """Every convolution call of one forward pass — convolution modules and functional calls alike — with the real
    input it received (shape, dtype, layout), in call order.

    The pass runs on the meta device (no compute, no GPU) on a copy of the model; where the model cannot run on
    meta, it runs as given under torch.no_grad()."""
    def to_meta(x):
        if isinstance(x, torch.Tensor):
            return torch.empty_strided(x.shape, x.stride(), dtype=x.dtype, device="meta")
        if isinstance(x, tuple):
            return tuple(to_meta(v) for v in x)
        return x

    try:
        meta_model = copy.deepcopy(model).to("meta")
        return _run_recording(meta_model, to_meta(example_input))
    except Exception:
        return _run_recording(model, example_input)


# ------------------------------------------------------------------------------------------------ progress
class _Progress:
    def __init__(self, total: int, enabled: bool, desc: str):
        self.bar = None
        if not enabled:
            return
        try:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=total, desc=desc, unit="problem", file=sys.stderr)
        except ImportError:
            self.bar = None

    def update(self, text: str) -> None:
        if self.bar is not None:
            self.bar.set_postfix_str(text, refresh=False)
            self.bar.update(1)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


# ------------------------------------------------------------------------------------------------ end to end
def _example_to(example_input: Any, device: str, dtype: torch.dtype | None, fmt: str | None):
    def conv(x):
        if isinstance(x, torch.Tensor):
            x = x.to(device=device, dtype=dtype if (dtype and x.is_floating_point()) else x.dtype)
            if fmt and fmt != "contiguous" and x.dim() in (4, 5):
                x = x.contiguous(memory_format=torch.channels_last if x.dim() == 4 else torch.channels_last_3d)
            return x
        if isinstance(x, tuple):
            return tuple(conv(v) for v in x)
        return x

    return conv(example_input)


def _model_to(model: torch.nn.Module, device: str, dtype: torch.dtype | None, fmt: str | None):
    m = copy.deepcopy(model).to(device=device)
    if dtype is not None:
        m = m.to(dtype=dtype)
    if fmt and fmt != "contiguous":
        m = m.to(memory_format=torch.channels_last if fmt == "channels_last" else torch.channels_last_3d)
    return m


def _step(model, inp, backward: bool):
    out = model(*inp) if isinstance(inp, tuple) else model(inp)
    if backward:
        out = out[0] if isinstance(out, (tuple, list)) else out
        out.float().sum().backward()


def time_steps(model, inp, backward: bool, iterations: int, benchmark: bool, device: int) -> float:
    """Median step time (ms) with cudnn.benchmark set, after 3 warm-up steps (the first one runs any search)."""
    old = torch.backends.cudnn.benchmark
    torch.backends.cudnn.benchmark = benchmark
    try:
        ctx = torch.enable_grad() if backward else torch.no_grad()
        with ctx:
            for _ in range(3):
                _step(model, inp, backward)
            torch.cuda.synchronize(device)
            times = []
            for _ in range(iterations):
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s.record()
                _step(model, inp, backward)
                e.record()
                e.synchronize()
                times.append(s.elapsed_time(e))
        return statistics.median(times)
    finally:
        torch.backends.cudnn.benchmark = old
        model.zero_grad(set_to_none=True)


def steps_fresh_process(model_file: str, input_file: str, backward: bool, benchmark: bool, device: int,
                        iterations: int = 10, timeout: float = 600) -> tuple[float, float]:
    """(seconds for the first step, median ms of the next `iterations` steps after 2 more warm-up steps) in a fresh
    python process (cuDNN loading included in the first step) with cudnn.benchmark set from the start."""
    code = (
        "import sys, time, statistics, torch\n"
        "m = torch.load(sys.argv[1], weights_only=False); x = torch.load(sys.argv[2], weights_only=False)\n"
        f"torch.backends.cudnn.benchmark = {benchmark!r}\n"
        f"dev = 'cuda:{device}'\n"
        "torch.zeros(1, device=dev); torch.cuda.synchronize()\n"  # CUDA context before the clock starts
        "m = m.to(dev); x = tuple(v.to(dev) for v in x) if isinstance(x, tuple) else x.to(dev)\n"
        "def step():\n"
        f"    with torch.{'enable_grad' if backward else 'no_grad'}():\n"
        "        out = m(*x) if isinstance(x, tuple) else m(x)\n"
        f"        if {backward!r}:\n"
        "            out = out[0] if isinstance(out, (tuple, list)) else out\n"
        "            out.float().sum().backward()\n"
        "    m.zero_grad(set_to_none=True)\n"
        "t = time.perf_counter(); step(); torch.cuda.synchronize()\n"
        "print('FIRST_STEP_S', time.perf_counter() - t)\n"
        "step(); step(); torch.cuda.synchronize()\n"
        "ts = []\n"
        f"for _ in range({int(iterations)}):\n"
        "    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)\n"
        "    s.record(); step(); e.record(); e.synchronize(); ts.append(s.elapsed_time(e))\n"
        "print('STEP_MS', statistics.median(ts))\n"
    )
    r = subprocess.run([sys.executable, "-c", code, model_file, input_file], capture_output=True, text=True,
                       timeout=timeout)
    got = {}
    for line in r.stdout.splitlines():
        k, _, v = line.partition(" ")
        if k in ("FIRST_STEP_S", "STEP_MS"):
            got[k] = float(v)
    if len(got) != 2:
        raise RuntimeError("fresh-process steps failed: "
                           f"{r.stderr.strip().splitlines()[-1] if r.stderr.strip() else r.returncode}")
    return got["FIRST_STEP_S"], got["STEP_MS"]


def end_to_end(model, example_input, *, backward: bool, dtype, fmt, device: int, iterations: int = 10,
               fresh_process: bool = True) -> EndToEnd:
    """Benchmark mode off vs on for the whole model, each in its own fresh process. Without a fresh process (or a
    model that cannot be saved for one), only the step time with benchmark off is measured here: this process
    cannot run benchmark mode's choice for shapes torch has already planned."""
    dev = f"cuda:{device}"

    def in_process(note: str) -> EndToEnd:
        m, inp = _model_to(model, dev, dtype, fmt), _example_to(example_input, dev, dtype, fmt)
        off = time_steps(m, inp, backward, iterations, torch.backends.cudnn.benchmark, device)
        mode = "on" if torch.backends.cudnn.benchmark else "off"
        return EndToEnd(backward=backward, iterations=iterations, step_ms_off=off if mode == "off" else None,
                        step_ms_on=off if mode == "on" else None, where="this process",
                        note=f"{note}; measured in this process with benchmark {mode} only")

    if not fresh_process:
        return in_process("fresh-process measurement disabled")
    with tempfile.TemporaryDirectory() as d:
        mf, xf = os.path.join(d, "model.pt"), os.path.join(d, "input.pt")
        try:
            torch.save(_model_to(model, "cpu", dtype, fmt), mf)
            torch.save(_example_to(example_input, "cpu", dtype, fmt), xf)
        except Exception as ex:  # e.g. a model class defined in __main__ or a lambda inside
            return in_process(f"the model could not be saved for a fresh process ({type(ex).__name__})")
        try:
            first_off, off = steps_fresh_process(mf, xf, backward, False, device, iterations)
            first_on, on = steps_fresh_process(mf, xf, backward, True, device, iterations)
        except Exception as ex:
            return in_process(str(ex)[:200])
    return EndToEnd(backward=backward, iterations=iterations, step_ms_off=off, step_ms_on=on,
                    first_step_s_off=first_off, first_step_s_on=first_on)


# ------------------------------------------------------------------------------------------------ torch, benchmark off
def torch_off_pass(problems_file: str, out_file: str, device: int) -> None:
    """(Run in a fresh process by torch_off_runs.) torch's own op with cudnn.benchmark off for every problem and
    direction in `problems_file`, each measured by timing.measure_rows like our rows; writes `out_file`."""
    with open(problems_file) as f:
        todo = json.load(f)
    out = []
    torch.backends.cudnn.benchmark = False
    for item in todo:
        problem = make_problem(ConvSpec.from_dict(item["spec"]), tuple(item["input_shape"]), item["dtype"],
                               item["memory_format"], None)
        cdir = problem.cudnn_direction(item["direction"])
        cfg = MeasureConfig(repeats=item["repeats"], check_clock=item["check_clock"])
        with torch.cuda.device(device):
            sets = operand_sets(problem, "warm", device)
            ref = reference_output(problem, cdir, sets[0], "cuda")
            run = torch_runnable(problem, cdir, sets)
            first = first_call_ms(run.call, device)
            (m,) = measure_rows([run], problem, cfg, ref, device, peak=False)
            del sets, ref
        out.append({"key": item["key"], "first_call_ms": first, "measured": encode(m)})
    with open(out_file, "w") as f:
        json.dump(out, f)


def torch_off_runs(items: list[dict], device: int, timeout: float = 900) -> tuple[dict[str, TorchRun], str]:
    """torch's op with benchmark off for these problems, in one fresh process (this process may already hold plans
    for them, and torch keeps the first plan per problem): key -> TorchRun (its kernels, measured); and an error."""
    with tempfile.TemporaryDirectory() as d:
        pin, pout = os.path.join(d, "problems.json"), os.path.join(d, "runs.json")
        with open(pin, "w") as f:
            json.dump(items, f)
        code = "import sys; from cudnn_algos.report import torch_off_pass; torch_off_pass(sys.argv[1], sys.argv[2], " \
               f"{int(device)})"
        r = subprocess.run([sys.executable, "-c", code, pin, pout], capture_output=True, text=True, timeout=timeout)
        if r.returncode != 0 or not os.path.exists(pout):
            tail = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else f"exit {r.returncode}"
            return {}, f"torch benchmark-off pass failed: {tail[:200]}"
        with open(pout) as f:
            got = json.load(f)
    limit = int(torch.backends.cudnn.benchmark_limit or 0)
    runs = {}
    for g in got:
        m = decode(Measurement, g["measured"])
        runs[g["key"]] = TorchRun(mode="benchmark_off", kernels=m.kernels, matches=(), match="none",
                                  first_call_ms=g["first_call_ms"], benchmark_limit=limit, measured=m,
                                  where="fresh process", error=m.error)
    return runs, ""


# ------------------------------------------------------------------------------------------------ profile
def _check_profile_args(model, directions, repeats, screen, confirm, refine, refine_max, budget_s
                        ) -> tuple[str, ...]:
    if budget_s is not None and (isinstance(budget_s, bool) or not isinstance(budget_s, (int, float))
                                 or not budget_s > 0):
        raise ValueError(f"budget_s={budget_s!r} must be a positive number of seconds (None: no budget)")
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, not {type(model).__name__}")
    directions = tuple([directions] if isinstance(directions, str) else directions)
    for d in directions:
        check_choice("direction", d, DIRECTIONS)
    if not directions:
        raise ValueError("directions must name at least one of: " + ", ".join(DIRECTIONS))
    check_config(repeats, 3, "warm")
    check_int("screen", screen, 1)
    check_int("confirm", confirm, 1)
    check_int("refine", refine, 0)
    check_int("refine_max", refine_max, 1)
    return directions


def distinct_problems(uses: list[ConvUse], dtype, memory_format) -> dict[tuple, list[str]]:
    """(spec, input shape, dtype name, layout) -> the layer names that run it, in model order."""
    keyed: dict[tuple, list[str]] = {}
    for u in uses:
        fmt = parse_memory_format(memory_format, u.spec.ndim) if memory_format is not None else u.memory_format
        keyed.setdefault((u.spec, u.input_shape, DTYPES[dtype or u.dtype], fmt), []).append(u.name)
    return keyed


def profile(
    model: torch.nn.Module,
    example_input: Any,
    *,
    directions: Iterable[str] = DIRECTIONS,
    dtype: torch.dtype | str | None = None,
    memory_format: torch.memory_format | str | None = None,
    repeats: int = 7,
    screen: int = 3,
    confirm: int = 3,
    refine: int = 3,
    refine_max: int = 32,
    runtime_compiled: bool = True,
    legacy: bool = False,
    torch_off: bool = True,
    check_clock: bool = False,
    end_to_end_check: bool = True,
    fresh_process: bool = True,
    progress: bool = True,
    device: int | str | torch.device | None = None,
    name: str | None = None,
    store: str | None = None,
    budget_s: float | None = None,
) -> ModelReport:
    """Searches every distinct convolution of `model` (as one forward pass on `example_input` meets them) in cuDNN's
    engine space, once per direction, beside torch's own convolution, and returns a :class:`ModelReport`.

    dtype / memory_format: override what the layers receive (default: what they receive in the forward pass).
    Per problem and direction: ``find_engines(measure=True, screen=screen, repeats=repeats, confirm=confirm,
    refine=refine, refine_max=refine_max, compare_torch=True, torch_benchmark=True)``: every configuration from
    heuristics instant, A, B and fallback screened, one-knob neighbours of the fastest added, the ``confirm``
    fastest torch would accept re-measured beside torch's op (benchmark on: its first call of the problem in this
    process is its search) on fresh operands in one kernel-clock session. torch_off: torch's op with benchmark off,
    measured the same way in one fresh process (torch keeps the first plan per problem for a process's life).
    runtime_compiled: also build the engines that compile at run time (NVRTC), as torch's benchmark mode does: on
    depthwise layers torch's choice can be one of them (a MobileNetV3 profile without them: torch's op up to 4.4x
    faster than every candidate on depthwise stride-2 backward-data, its kernel in none of them).
    legacy: also search the legacy algorithms (columns legacy_best). check_clock: every row also timed with the
    independent clock (torch.profiler), for the fidelity table. end_to_end_check: the whole model's step with
    benchmark off and on, each in a fresh process. Ctrl-C stops the search and returns what was done
    (``interrupted=True``). store: a JSON-lines file each finished search is appended to as soon as it is measured;
    a re-run with the same store (same GPU, cuDNN, torch and settings) takes what it holds and searches the rest.
    budget_s: start no new search after this many seconds of searching; the report then covers what was done
    (``interrupted=True``, ``stopped_by="budget"``; Ctrl-C: ``"ctrl-c"``), and with a store a re-run continues.
    """
    directions = _check_profile_args(model, directions, repeats, screen, confirm, refine, refine_max, budget_s)
    dt = parse_dtype(dtype) if dtype is not None else None
    t_start = time.perf_counter()
    uses = discover(model, example_input)
    if not uses:
        raise ValueError(f"{name or type(model).__name__} ran no convolution on this input: nothing to profile")
    keyed = distinct_problems(uses, dt, memory_format)
    dev = device_index(device)
    bar = _Progress(len(keyed) * len(directions), progress, f"searching {name or type(model).__name__}")
    t_search = time.perf_counter()
    store = ResultStore(store, environment(dev)) if store else None
    problems, torch_search, stopped_by = _search_problems(
        keyed, directions, bar, dev, legacy, check_clock,
        dict(repeats=repeats, screen=screen, confirm=confirm, refine=refine, refine_max=refine_max,
             runtime_compiled=runtime_compiled), store, None if budget_s is None else t_search + budget_s)
    interrupted = bool(stopped_by)
    if torch_off and problems and not interrupted:
        problems = _add_torch_off(problems, directions, repeats, check_clock, dev)
    search_s = time.perf_counter() - t_search
    e2e = None
    if end_to_end_check and not interrupted:
        try:
            fmt = None if memory_format is None else parse_memory_format(memory_format, uses[0].spec.ndim)
            e2e = end_to_end(model, example_input, backward=any(d != "forward" for d in directions), dtype=dt,
                             fmt=fmt, device=dev, fresh_process=fresh_process)
        except KeyboardInterrupt:
            interrupted, stopped_by = True, "ctrl-c"
    return ModelReport(
        model=name or type(model).__name__, problems=tuple(problems), directions=directions, env=environment(dev),
        e2e=e2e, interrupted=interrupted, stopped_by=stopped_by, search_s=search_s, torch_search_ms=torch_search,
        wall_s=time.perf_counter() - t_start, n_conv_calls=len(uses),
        created=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        measure=MeasureConfig(repeats=repeats, check_clock=check_clock))


class _BudgetSpent(Exception):
    """The time budget ran out between two searches."""


def _search_problems(keyed: dict[tuple, list[str]], directions, bar, dev: int, legacy: bool, check_clock: bool,
                     options: dict, store: ResultStore | None, deadline: float | None = None
                     ) -> tuple[list[ProblemEntry], float, str]:
    """Each distinct problem and direction searched (find_engines, and find with legacy), or taken from `store`
    when it holds it: (entries, Σ torch's benchmark-on first calls in ms, what stopped it early: "" (nothing),
    "ctrl-c", or "budget" (the `deadline`, perf_counter: no new search starts after it))."""
    problems: list[ProblemEntry] = []
    torch_search = 0.0
    stopped_by = ""
    try:
        for (spec, shape, dname, fmt), names in keyed.items():
            engines, legacy_res, errors = {}, {}, {}
            try:
                for d in directions:
                    if deadline is not None and time.perf_counter() > deadline:
                        raise _BudgetSpent  # stop as Ctrl-C does, keeping what was done
                    try:
                        engines[d] = _search(store, "engines", spec, shape, dname, fmt, d, options, check_clock,
                                             lambda: _without_plans(find_engines(
                                                 spec, shape, direction=d, dtype=dname, memory_format=fmt,
                                                 measure=True, compare_torch=True, torch_benchmark=True,
                                                 check_clock=check_clock, device=dev, **options)))
                        torch_search += (engines[d].torch.first_call_ms or 0.0) if engines[d].torch else 0.0
                        if legacy:
                            legacy_res[d] = _search(store, "legacy", spec, shape, dname, fmt, d, options, check_clock,
                                                    lambda: find(spec, shape, direction=d, dtype=dname,
                                                                 memory_format=fmt, measure=True,
                                                                 repeats=options["repeats"], check_clock=check_clock,
                                                                 device=dev))
                    except (CudnnError, CudaError, torch.OutOfMemoryError) as e:  # one problem; the model goes on
                        errors[d] = f"{type(e).__name__}: {str(e)[:300]}"
                    bar.update(f"{spec} {d}")
            except KeyboardInterrupt:
                stopped_by = "ctrl-c"
            except _BudgetSpent:
                stopped_by = "budget"
            if engines or legacy_res or errors:
                problems.append(ProblemEntry(spec=spec, input_shape=shape, dtype=dname, memory_format=fmt,
                                             layers=tuple(names), engines=engines, legacy=legacy_res, errors=errors))
            if stopped_by:
                break
    finally:
        bar.close()
    return problems, torch_search, stopped_by


def _search(store: ResultStore | None, kind: str, spec, shape, dtype: str, fmt: str, direction: str, options: dict,
            check_clock: bool, run):
    """`run()`'s result, or the store's when it has this search; a new result is stored as soon as it exists."""
    if store is None:
        return run()
    key = ResultStore.key(kind=kind, spec=spec.to_dict(), input_shape=list(shape), dtype=dtype, memory_format=fmt,
                          direction=direction, options=options if kind == "engines" else {"repeats": options["repeats"]},
                          check_clock=check_clock)
    got = store.get(key)
    if got is None:
        got = run()
        store.add(key, got)
    return got


def _without_plans(r):
    """The search result as kept in a report: plans dropped (a report outlives the process and pickles)."""
    return replace(r, rows=tuple(replace(x, plan=None) for x in r.rows))


def _add_torch_off(problems: list[ProblemEntry], directions, repeats: int, check_clock: bool, dev: int
                   ) -> list[ProblemEntry]:
    items = [{"key": f"{pi}|{d}", "spec": p.spec.to_dict(), "input_shape": list(p.input_shape), "dtype": p.dtype,
              "memory_format": p.memory_format, "direction": d, "repeats": repeats, "check_clock": check_clock}
             for pi, p in enumerate(problems) for d in directions if d in p.engines]
    runs, err = torch_off_runs(items, dev)
    out = []
    for pi, p in enumerate(problems):
        eng = dict(p.engines)
        for d, r in eng.items():
            run = runs.get(f"{pi}|{d}")
            if run is None:
                run = TorchRun(mode="benchmark_off", kernels=(), matches=(), match="none", first_call_ms=None,
                               benchmark_limit=0, where="fresh process", error=err or "not measured")
            eng[d] = mark_torch_run(r, run)
        out.append(replace(p, engines=eng))
    return out


def load_report(source: str) -> ModelReport:
    """Reads what ModelReport.to_json wrote (a JSON string or a path)."""
    return ModelReport.load(source)


__all__ = ["profile", "discover", "distinct_problems", "ConvUse", "end_to_end", "load_report", "torch_off_runs", "torch_off_pass"]
