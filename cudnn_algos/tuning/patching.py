"""``apply(model)``: the model's convolution modules call ``torch.ops.cudnn_algos.conv`` (transposed ones
``conv_transpose``; csrc/pinned), which runs the stored winner's plan; for anything the database lacks, torch's
convolution (counted; ``Applied.counts()``) or, with ``unseen=``, a selector's choice (choose/unseen.py)."""
from __future__ import annotations

import os
import statistics
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import torch

from .. import backend
from ..backend import environment
from ..errors import CudaUnavailableError
from ..problem import check_module, device_index, fused_call
from ..spec import same_padding
from .db import TuningDB, open_db
from .fused_tune import is_fused_key, stored_fused
from .fusing import Fused, fuse_model
from ..choose.unseen import Decision, UnseenHandler, check_unseen


CONV_TYPES = (torch.nn.Conv1d, torch.nn.Conv2d, torch.nn.Conv3d)
TRANSPOSED_TYPES = (torch.nn.ConvTranspose1d, torch.nn.ConvTranspose2d, torch.nn.ConvTranspose3d)


class ModuleArgs(NamedTuple):
    """What the operator takes besides the tensors; output_padding only for a transposed layer (None otherwise)."""

    stride: list[int]
    padding: list[int]
    dilation: list[int]
    groups: int
    output_padding: list[int] | None = None


def module_args(m: torch.nn.Module) -> ModuleArgs | str:
    """The arguments the operator takes for a convolution module, or why it cannot run it."""
    if not isinstance(m, CONV_TYPES + TRANSPOSED_TYPES):
        return "not a Conv1d/2d/3d or ConvTranspose1d/2d/3d"
    if type(m).forward not in tuple(c.forward for c in CONV_TYPES + TRANSPOSED_TYPES):
        return f"{type(m).__name__} has its own forward"
    if m.padding_mode != "zeros":
        return f"padding_mode={m.padding_mode!r} (torch pads explicitly first)"
    if isinstance(m.padding, str):
        if m.padding == "valid":
            pad = [0] * len(m.kernel_size)
        else:  # 'same': the operator pads symmetrically, so only where torch's split is even
            lr = same_padding(m.kernel_size, m.dilation)
            if any(lo != hi for lo, hi in lr):
                return "padding='same' with an even kernel (asymmetric padding)"
            pad = [lo for lo, _ in lr]
    else:
        pad = list(m.padding)
    op = list(m.output_padding) if isinstance(m, TRANSPOSED_TYPES) else None
    return ModuleArgs(list(m.stride), pad, list(m.dilation), int(m.groups), op)


@dataclass
class Applied:
    """Handle returned by :func:`apply`: ``undo()`` (or leaving the ``with`` block) restores every module exactly;
    ``counts()`` says, per problem the operator met, how many calls ran the stored configuration, torch's op as
    the stored winner, or torch's op as a fallback (and why)."""

    modules: list[str]
    skipped: dict[str, str]
    winners: int
    db: str
    configs: dict[str, str] = field(default_factory=dict, repr=False)  # problem key -> stored winner's config
    host_ms: dict[str, float] = field(default_factory=dict, repr=False)  # ... -> its host ms per call in tune()
    unseen: str = "torch"  # what runs a problem the database lacks (choose/unseen.py)
    _saved: list[tuple[torch.nn.Module, Any]] = field(default_factory=list, repr=False)
    _handler: UnseenHandler | None = field(default=None, repr=False)

    def undo(self) -> None:
        for m, old in reversed(self._saved):
            if old is _MISSING:
                m.__dict__.pop("forward", None)
            else:
                m.forward = old
        self._saved.clear()
        if self._handler is not None:
            backend.pinned_set_miss_handler(None)
            self._handler.close()
            self._handler = None

    def wait(self, timeout: float | None = None) -> bool:
        """Choosing in the background: blocks until every unseen problem met so far is ranked, its choice then made
        at its next call (True), or `timeout` seconds passed (False). Otherwise True at once."""
        return self._handler.wait(timeout) if self._handler is not None else True

    def decisions(self) -> list[Decision]:
        """With ``unseen="predict"`` or ``"measure_top_k"``: per problem the database lacked, what was offered to
        the operator (the selector's order; measure_top_k: the timed ones fastest first), how, and in how many
        seconds; a problem with no choice says why (it ran torch's op)."""
        return list(self._handler.decisions) if self._handler is not None else []

    def __enter__(self) -> "Applied":
        return self

    def __exit__(self, *exc) -> None:
        self.undo()

    @staticmethod
    def counts() -> list[dict[str, Any]]:
        """Per problem key the operator met: calls that ran the stored configuration (``pinned``), torch's op as
        the stored winner, torch's op as a fallback (with the last ``reason``); and, while host stages are timed
        (:meth:`time_host`), ``execute_us`` (cudnnBackendExecute's host time) over ``timed_calls`` pinned calls."""
        from ..configs import config_name

        return [{"key": c.key, "pinned": c.pinned, "torch_winner": c.torch, "fallback": c.fallback,
                 "reason": c.reason, "execute_us": c.execute_ns / 1e3, "timed_calls": c.timed_calls,
                 "origin": c.origin, "config": config_name(c.engine_id, c.knobs) if c.engine_id >= 0 else None}
                for c in backend.pinned_counts()]

    def execute_by_config(self) -> list[dict[str, Any]]:
        """cudnnBackendExecute's host time per call while host stages were timed, grouped by the stored winner's
        engine (``eng63{...}`` -> ``eng63``): which engines cost the most host time inside the model. Rows
        ``engine``, ``calls``, ``us_per_call``, ``problems``, and ``alone_us`` (the median over those problems of
        the host time per call tune() measured for the same plans in back-to-back calls; None where not stored),
        most host time first."""
        acc: dict[str, list] = {}
        for c in self.counts():
            if not c["timed_calls"]:
                continue
            a = acc.setdefault(self.configs.get(c["key"], "?").split("{")[0], [0, 0.0, 0, []])
            a[0] += c["timed_calls"]
            a[1] += c["execute_us"]
            a[2] += 1
            if self.host_ms.get(c["key"]) is not None:
                a[3].append(1e3 * self.host_ms[c["key"]])
        rows = [{"engine": e, "calls": n, "us_per_call": us / n, "problems": k,
                 "alone_us": statistics.median(alone) if alone else None} for e, (n, us, k, alone) in acc.items()]
        return sorted(rows, key=lambda r: -r["us_per_call"] * r["calls"])

    def keep(self, db: TuningDB | str | os.PathLike | None = None, *, device: int | str | torch.device | None = None
             ) -> int:
        """Stores the configurations chosen for unseen problems in this process (``unseen="predict"`` or
        ``"measure_top_k"``) as winners in the tuning database (default: the one apply() read), ``source`` saying
        how they were chosen and no times (choosing timed nothing, or on another clock than tune()'s): a later
        apply() runs them from its first call without choosing again. Returns how many it stored."""
        import json
        from dataclasses import asdict

        from ..configs import parse_config
        from .winner import Winner, now

        chosen = [c for c in self.counts() if c["origin"] not in ("", "stored") and c["config"]]
        # a winner forgotten until its next call times the candidates built later (Note [runtime-compiled
        # candidates later] in choose/unseen.py): the one it ran until then
        have = {c["key"] for c in chosen}
        chosen += [c for c in (self._handler.forgotten() if self._handler is not None else []) if c["key"] not in have]
        if not chosen:
            return 0
        env = environment(device_index(device))
        offered = {d.key: d.offered for d in self.decisions()}
        store, own = open_db(self.db if db is None else db)
        try:
            for c in chosen:
                rest = [o for o in offered.get(c["key"], ()) if o != c["config"]]
                store.put(Winner(
                    env=env.key(), key=c["key"], settings=json.dumps({"search": c["origin"]}, sort_keys=True),
                    direction=c["key"].split(" ", 1)[0], config=c["config"], engine_id=parse_config(c["config"])[0],
                    knobs=json.dumps([list(k) for k in parse_config(c["config"])[1]]), kernel_ms=None, host_ms=None,
                    rel_err=None, runner_up=rest[0] if rest else None, runner_up_ms=None, torch_on=None,
                    torch_on_ms=None, source=c["origin"], measured_at=now(), environment=json.dumps(asdict(env))))
        finally:
            if own:
                store.close()
        return len(chosen)

    @staticmethod
    def reset_counts() -> None:
        backend.pinned_reset_counts()

    @staticmethod
    def time_host(on: bool = True) -> None:
        """Starts (zeroing the sums) or stops timing the host steps of the operator's CUDA kernels
        (:meth:`host_stages`). Off by default; on, each call reads the host clock a few times."""
        backend.pinned_stage_timing(bool(on))

    @staticmethod
    def host_stages() -> dict[str, Any]:
        """Host time the operator's CUDA kernels spent per step since :meth:`time_host`: ``forward_calls``,
        ``backward_calls`` and ``us`` (stage -> total microseconds): operands (checks, layout), resolve (the
        per-call lookup; the first call of a problem also builds its plan), alloc (the output), handle (device guard,
        the thread's cuDNN handle set to the current stream), workspace (from torch's caching allocator),
        variant_pack (created and finalized per call), cudnn_execute (cudnnBackendExecute: the launch), count,
        torch_op (torch's convolution where it runs instead), bias."""
        t = backend.pinned_stage_times()
        return {"forward_calls": t.forward_calls, "backward_calls": t.backward_calls,
                "us": {k: v / 1e3 for k, v in t.ns.items()}}

    def summary(self) -> str:
        c = self.counts()
        tot = {k: sum(x[k] for x in c) for k in ("pinned", "torch_winner", "fallback")}
        chosen = sum(1 for x in c if x["origin"] not in ("", "stored"))
        lines = [f"apply: {len(self.modules)} modules, {self.winners} stored winners loaded from {self.db}; calls: "
                 f"{tot['pinned']} ran a stored configuration, {tot['torch_winner']} torch's op (stored winner), "
                 f"{tot['fallback']} fell back to torch's op"
                 + (f"; unseen={self.unseen}: {chosen} problems chosen" if self._handler else "")]
        lines += [f"  fallback x{x['fallback']}: {x['reason']}: {x['key']}" for x in c if x["fallback"]]
        lines += [f"  not chosen: {d.why}: {d.key}" for d in self.decisions() if not d.origin]
        lines += [f"  not applied: {n}: {why}" for n, why in self.skipped.items()]
        return "\n".join(lines)


_MISSING = object()
_ACTIVE: UnseenHandler | None = None  # the unseen-problem handler the registry holds (apply() closes it first)


def _forward(m: torch.nn.Module, a: ModuleArgs):
    """The forward apply() gives module `m`: the operator called through a BoundConv (its arguments bound now, Note
    [the Python call] in csrc/pinned.h), or through torch.ops where torch.compile traces it or a __torch_function__
    override must see the call."""
    transposed = a.output_padding is not None
    bound = backend.bound_conv(a.stride, a.padding, a.output_padding or [], a.dilation, a.groups, transposed)
    compiling = torch.compiler.is_compiling
    overridden = torch.overrides.has_torch_function
    if not transposed:
        op = torch.ops.cudnn_algos.conv.default  # the overload itself: no overload resolution per call

        def forward(x: torch.Tensor) -> torch.Tensor:
            w, b = m.weight, m.bias
            if compiling() or overridden((x, w, b) if b is not None else (x, w)):
                return op(x, w, b, a.stride, a.padding, a.dilation, a.groups)
            return bound(x, w, b)

        return forward
    op_t = torch.ops.cudnn_algos.conv_transpose.default

    def forward_transposed(x: torch.Tensor, output_size: list[int] | None = None) -> torch.Tensor:
        w, b = m.weight, m.bias
        if output_size is None and not compiling() and not overridden((x, w, b) if b is not None else (x, w)):
            return bound(x, w, b)
        pad = a.output_padding if output_size is None else m._output_padding(  # noqa: SLF001 (torch's own rule)
            x, output_size, a.stride, a.padding, list(m.kernel_size), len(m.kernel_size), a.dilation)
        return op_t(x, w, b, a.stride, a.padding, list(pad), a.dilation, a.groups)

    return forward_transposed


def apply(model: torch.nn.Module, db: TuningDB | str | os.PathLike | None = None, *,
          device: int | str | torch.device | None = None, unseen: str = "torch", selector: Any = None,
          k: int | str = 3, background: bool | None = None, fuse: bool = False) -> Applied | Fused:
    """Makes `model`'s Conv1d/2d/3d and ConvTranspose1d/2d/3d modules run the tuning database's winners for this GPU and
    versions (loaded into the extension's registry now): each module's forward calls ``torch.ops.cudnn_algos.conv``
    (``conv_transpose`` for a transposed layer, whose forward is cuDNN's backward-data of the mirrored convolution), a
    C++ operator with autograd (each of the other two directions runs its own stored winner), autocast, meta
    (torch.compile) and CPU kernels; a problem the database lacks runs torch's own convolution, or with
    ``unseen="predict"`` the first configuration `selector` (a cudnn_algos.selector.Selector or its .npz file) ranks
    fastest among cuDNN's heuristic lists (built at the problem's first call, nothing timed), or with
    ``unseen="measure_top_k"`` the fastest of its shortlist of `k` (its first k - 1, cuDNN's own first and INSTANT's
    first; k="auto": Note [the automatic shortlist] in choose/model.py) timed at that call (choose/unseen.py). selector
    None: the one the package ships for this GPU architecture and cuDNN version (ValueError where it ships none).
    cuDNN's lists are asked in a helper process (one more CUDA context while the handle lives: Note [lists in a helper
    process] in choose/lists_process.py). background (default True): the lists are asked and ranked in background
    threads while torch's op runs the problem's first calls (Note [choosing in the background] in choose/unseen.py;
    ``Applied.wait()`` waits for them), predict's pick then runs from the next call; False: all of it at the problem's
    first call. Returns an :class:`Applied` handle (also a context manager) whose ``undo()`` restores the modules
    exactly. fuse=True: a traced copy whose chains run as fused plans in inference (tuning/fusing.py)."""
    check_module("model", model)
    if fused_call(apply, locals(), "fuse", ("db", "device")):
        return fuse_model(model, stored_fused(db, device))
    check_unseen(unseen, k)
    if background is not None and not isinstance(background, bool):
        raise ValueError(f"background={background!r} must be True, False or None")
    if background and unseen == "torch":
        raise ValueError("background=True is for unseen='predict' or 'measure_top_k', not unseen='torch'")
    global _ACTIVE
    if _ACTIVE is not None:  # the registry is the process's: an earlier apply()'s chooser stores nothing more
        _ACTIVE.close()
        _ACTIVE = None
    handler = None
    if unseen != "torch":
        from ..choose.model import Selector

        if selector is not None:
            sel = Selector.coerce(selector)
        else:
            try:
                family = environment(device_index(device)).selector_family()
            except CudaUnavailableError:  # no GPU: the operator's CPU kernel is torch's, nothing is chosen
                family = None
            sel = Selector.shipped(family) if family else None
        bg = True if background is None else background  # Note [choosing in the background]
        handler = UnseenHandler(unseen, sel, k, background=bg) if sel is not None else None
        if handler is not None:
            handler.start()  # the helper process imports torch while the model gets ready
        _ACTIVE = handler
    store, own = open_db(db)
    try:
        try:
            winners = store.winners(environment(device_index(device)).key())
        except CudaUnavailableError:  # no GPU: the modules still run (the operator's CPU kernel is torch's)
            winners = []
    finally:
        if own:
            store.close()
    backend.pinned_clear()  # the registry holds exactly this database's winners (one database per process at a time)
    backend.pinned_set_miss_handler(handler)
    seen, configs, host_ms = set(), {}, {}  # keys met; per key the stored configuration and host ms
    for w in winners:  # newest first: the first entry per key wins
        if w.key in seen or is_fused_key(w.key):  # a chain's fused winner is apply(fuse=True)'s
            continue
        seen.add(w.key)
        configs[w.key], host_ms[w.key] = w.config, w.host_ms
        backend.pinned_set(w.key, w.engine_id, w.knob_list())
    handle = Applied(modules=[], skipped={}, winners=len(seen), db=str(store.path), configs=configs,
                     host_ms=host_ms, unseen=unseen, _handler=handler)
    for name, m in model.named_modules():
        if not isinstance(m, CONV_TYPES + TRANSPOSED_TYPES):
            continue
        args = module_args(m)
        if isinstance(args, str):
            handle.skipped[name or "<model>"] = args
            continue
        handle._saved.append((m, m.__dict__.get("forward", _MISSING)))
        m.forward = _forward(m, args)
        handle.modules.append(name or "<model>")
    return handle
