"""apply(model, fuse=True): the model's fusible chains (model.fusion) each replaced, in a traced copy of the model, by
one ``FusedChain`` module that runs the chain as one cuDNN fused plan in inference, and torch's ops otherwise.

Note [running a chain fused]: a chain's BatchNorm is folded into the convolution's weight and bias once (float64,
model.fusion.fold_batchnorm), so the fused graph is the convolution, a per-channel bias, then the chain's activations
and residual add. A call runs the fused plan when the module is in eval mode, no gradient is asked for, the input is
a CUDA tensor of float16, bfloat16 or float32, and cuDNN built a plan for that input's shape, dtype and layout: the
first configuration of its INSTANT list that builds (what torch itself takes with benchmark off) unless
tune(fuse=True) stored a winner for it (fused_tune.py), built at the shape's first call and kept for the process;
untuned, a convolution reading fewer than MIN_UNTUNED_CHANNELS input channels per group runs torch's ops. A
transposed layer's graph is cuDNN's backward data with the epilogue after it (the layer's input in cuDNN's y, its
output in x); a 1-d layer runs lifted to 2-d (H = 1). Every other call runs torch's ops on the
folded weights (the same arithmetic as the original modules in eval mode), and the chain's counts say why. The
original model is not changed: the fused model is a torch.fx GraphModule of its own (``Fused.model``). A call after
an input's first takes the fast path (Note [the fast path] in FusedChain.forward).
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import torch

from ..epilogue import apply_torch, graph_operands, graph_ops, residual_slot
from ..model.fusion import Chain, chains_of, fold_batchnorm, trace, why_not_fused
from ..problem import MEMORY_FORMATS, conv_layout, make_problem
from .fused_tune import FusedStore, fused_key
from .keys import problem_key

FUSED_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
# an untuned chain whose convolution reads fewer input channels per group runs torch's ops: on such a layer (a
# 3-channel stem) cuDNN's fused engines ran slower than the unfused sequence (docs/results/2026-12-06-h200-fused.md)
MIN_UNTUNED_CHANNELS = 8


class FusedChain(torch.nn.Module):
    """One chain: its convolution with the BatchNorm folded in, then its activations and residual add (Note
    [running a chain fused]). forward(x, residual=None)."""

    def __init__(self, chain: Chain, conv: torch.nn.modules.conv._ConvNd, bn: torch.nn.Module | None,
                 stored: FusedStore | None = None):
        super().__init__()
        self._stored = stored or FusedStore()  # the tuned winners (tune(fuse=True)) and their serialized plans
        self.chain, self.spec = chain, chain.spec
        w, b = conv.weight.detach(), conv.bias.detach() if conv.bias is not None else None
        if "bn" in chain.ops:
            w, b = fold_batchnorm(w, b, bn, chain.spec.transposed, chain.spec.groups)
        self.register_buffer("weight", w.clone())
        self.register_buffer("bias", None if b is None else b.clone())
        self.epilogue = chain.fused_ops  # the fused graph's ops: a bias (the folded one) where there is one, then...
        self.after = tuple(op for op in self.epilogue if op != "bias")  # ... the activations and the add, in order
        self._args = dict(stride=conv.stride, padding=conv.padding, dilation=conv.dilation, groups=conv.groups,
                          output_padding=getattr(conv, "output_padding", 0))  # torch's path
        # per input (shape, strides, dtype, device): the prepared fused call, or why torch's ops run it
        self._ready: dict[tuple, _Ready | str] = {}
        self._fused = 0  # calls that ran fused (an int: the fast path adds one and nothing else)
        self._why: Counter = Counter()  # calls that ran torch's ops, by why

    @property
    def counts(self) -> Counter:
        """Calls that ran fused ("fused") and those that ran torch's ops ("torch: <why>")."""
        out = Counter({f"torch: {why}": n for why, n in self._why.items()})
        if self._fused:
            out["fused"] = self._fused
        return out

    def forward(self, x: torch.Tensor, residual: torch.Tensor | None = None) -> torch.Tensor:
        # Note [the fast path]: an input met before, in eval mode without gradients, is one dict lookup, one
        # allocation and the extension's execute; everything else (the checks, the plan, the prepared operands) was
        # done at that input's first call
        if not self.training and not (x.requires_grad and torch.is_grad_enabled()):
            run = self._ready.get((x.shape, x.stride(), x.dtype, x.device))
            if run.__class__ is _Ready:
                if run.lifted:  # a 1-d convolution runs as a 2-d one with H = 1 (Problem.lift)
                    x = x.unsqueeze(2)
                    residual = None if residual is None else residual.unsqueeze(2)
                y = torch.empty_strided(run.shape, run.strides, dtype=x.dtype, device=x.device)
                if residual is None:
                    run.execute(x, run.w, y, run.operands)
                else:
                    if residual.stride() != run.strides:
                        residual = residual.contiguous(memory_format=run.fmt)
                    at = run.residual_at  # its place among the graph's operands (epilogue.residual_slot)
                    run.execute(x, run.w, y, [*run.operands[:at], residual, *run.operands[at:]])
                self._fused += 1
                return y.squeeze(2) if run.lifted else y
        return self._first(x, residual)

    def _first(self, x: torch.Tensor, residual: torch.Tensor | None) -> torch.Tensor:
        """A call the fast path does not take: the reason torch's ops run it, or the fused call prepared and run."""
        key = (x.shape, x.stride(), x.dtype, x.device)
        ready = self._ready.get(key)
        why = self._why_not(x) or (ready if isinstance(ready, str) else "")
        if not why and ready is None:
            ready = self._ready[key] = self._prepare(x)
            why = ready if isinstance(ready, str) else ""
        if why:
            self._why[why] += 1
            return self._torch(x, residual)
        return self.forward(x, residual)

    def _why_not(self, x: torch.Tensor) -> str:
        if self.training:
            return "training mode"
        if torch.is_grad_enabled() and (x.requires_grad or self.weight.requires_grad):
            return "a gradient is asked for"
        if not x.is_cuda:
            return f"the input is on {x.device.type}, not CUDA"
        if x.dtype not in FUSED_DTYPES:
            return f"dtype {x.dtype} (fused: float16, bfloat16, float32)"
        return ""

    def _torch(self, x: torch.Tensor, residual: torch.Tensor | None) -> torch.Tensor:
        a, f = self._args, torch.nn.functional
        w, b = self.weight.to(x.dtype), None if self.bias is None else self.bias.to(x.dtype)
        nd = self.spec.ndim
        if self.spec.transposed:
            y = getattr(f, f"conv_transpose{nd}d")(x, w, b, a["stride"], a["padding"], a["output_padding"],
                                                   a["groups"], a["dilation"])
        else:
            y = getattr(f, f"conv{nd}d")(x, w, b, a["stride"], a["padding"], a["dilation"], a["groups"])
        operands = [{"residual": residual} if op == "add" else {} for op in self.after]
        return apply_torch(self.after, y, operands)

    def _prepare(self, x: torch.Tensor) -> "_Ready | str":
        """The fused call for inputs like `x`: its plan, the weight and bias in the input's dtype and layout, the
        output's shape and strides; or why there is none."""
        layout = conv_layout(x, self.weight)
        fmt = MEMORY_FORMATS[layout]
        if not x.is_contiguous(memory_format=fmt):
            return f"the input is not packed in its layout ({layout})"
        plan = _fused_plan(self.spec, x, layout, self.epilogue, self._stored)
        if isinstance(plan, str):
            return plan
        lifted = x.dim() == 3  # cuDNN's tensors are 4-d at least: a 1-d chain's are lifted (Problem.lift)
        shape = tuple(self.spec.shapes(tuple(x.shape)).output_shape)
        if lifted:
            shape = shape[:2] + (1,) + shape[2:]
        strides = torch.empty(shape, dtype=x.dtype, device="meta", memory_format=fmt).stride()
        # the graph's operands but the residual (each call's own): the folded bias, composed ops' constants
        operands = graph_operands(self.epilogue, [{"bias": self.bias} if op == "bias" else {} for op in self.epilogue],
                                  shape, x.dtype, fmt, x.device)
        at = residual_slot(self.epilogue)
        w = self.weight.to(device=x.device, dtype=x.dtype)
        w = (w.unsqueeze(2) if lifted else w).contiguous(memory_format=fmt)
        execute = plan.live.execute  # execute(x, w, y, operands) in cuDNN's roles (x, w, y of y = conv(x, w))
        if self.spec.transposed:  # cuDNN's backward data: the layer's input is its y, the layer's output its x
            def execute(inp, w, out, ops, _run=plan.live.execute):
                _run(out, w, inp, ops)
        return _Ready(execute, w, operands, torch.Size(shape), strides, fmt, len(operands) if at is None else at,
                      lifted)


@dataclass
class _Ready:
    """One input's prepared fused call (Note [the fast path])."""

    execute: Any  # execute(the layer's input, weight, its output, operands): the extension's plan.execute
    w: torch.Tensor
    operands: list[torch.Tensor]
    shape: torch.Size
    strides: tuple[int, ...]
    fmt: torch.memory_format
    residual_at: int  # where a residual goes among `operands` at a call
    lifted: bool = False  # a 1-d chain: its input, residual and output are viewed with H = 1 around the call


def _fused_plan(spec, x: torch.Tensor, layout: str, epilogue: tuple[str, ...], stored: FusedStore) -> Any:
    """The plan a chain runs for this input (Note [running a chain fused]): the tuned winner's where tune(fuse=True)
    stored one — from its serialized plan where that finalizes (Note [serialized plans]), else built — (torch's ops
    where it stored TORCH_WINNER), else the first configuration of cuDNN's INSTANT list for the fused graph that
    builds; or why none."""
    from .. import backend
    from ..configs import parse_config

    try:
        problem = make_problem(spec, tuple(x.shape), x.dtype, layout)
        cp, dev = backend.conv_problem(problem), x.device.index or 0
        cdir = problem.cudnn_direction("forward")  # a transposed layer's forward is cuDNN's backward data
        key = fused_key(problem_key(problem, "forward"), epilogue) if stored.winners else ""
        w = stored.winners.get(key) if key else None
        if w is not None and w.is_torch:
            return "the tuned winner is torch's ops (no fused configuration beat the unfused sequence)"
        if w is None and spec.in_channels // spec.groups < MIN_UNTUNED_CHANNELS:
            return (f"untuned, and {spec.in_channels // spec.groups} input channels per group: cuDNN's fused engines "
                    "can be slower than the unfused sequence here (tune(fuse=True) measures it)")
        gops = graph_ops(epilogue)
        if w is not None and (data := stored.plan_json(key)):
            p = backend.plan_from_json(cdir, cp, gops, data, dev)
            if p.status == "SUCCESS":
                return p
        if w is not None:
            out = backend.engine_search(cdir, cp, (), exact=[parse_config(w.config)], epilogue=gops, device=dev)
            ok = [p for p in out.plans if p.status == "SUCCESS"]
            if ok:
                return ok[0]
        out = backend.engine_search(cdir, cp, ("instant",), epilogue=gops, device=dev)
    except (ValueError, RuntimeError) as e:
        return f"the fused graph failed: {type(e).__name__}: {str(e).splitlines()[0][:120]}"
    ok = [p for p in out.plans if p.status == "SUCCESS"]
    if not ok:
        return f"no fused plan built ({', '.join(sorted({p.status for p in out.plans})) or 'none listed'})"
    return ok[0]


@dataclass
class Fused:
    """What apply(model, fuse=True) returns: ``model``, the fused GraphModule (call it instead of the original);
    ``chains``, the FusedChain modules by name; ``skipped``, the chains left as they were and why; ``summary()``,
    per chain the calls that ran fused and those that ran torch's ops, with why."""

    model: torch.nn.Module
    chains: dict[str, FusedChain] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    error: str = ""

    def counts(self) -> dict[str, dict[str, int]]:
        return {name: dict(m.counts) for name, m in self.chains.items()}

    def summary(self) -> str:
        lines = [f"{len(self.chains)} chains fused in the traced model, {len(self.skipped)} left as they were"]
        for name, m in self.chains.items():
            c = m.counts
            lines.append(f"  {name} ({m.chain.conv}: {','.join(m.chain.ops)}): {c.get('fused', 0)} fused"
                         + "".join(f"; {n} {why}" for why, n in sorted(c.items()) if why != "fused"))
        lines += [f"  left: {name}: {why}" for name, why in self.skipped.items()]
        if self.error:
            lines.append(f"  not traced: {self.error}")
        return "\n".join(lines)

    def __enter__(self) -> "Fused":
        return self

    def __exit__(self, *exc: Any) -> None:
        return None


def fuse_model(model: torch.nn.Module, stored: FusedStore | None = None) -> Fused:
    """A traced copy of `model` in which each chain with something to fuse is one FusedChain module (Note [running a
    chain fused]); `model` itself is not changed. A model torch.fx cannot trace is returned as it is, with why.
    stored: the tuned fused winners and their plans (fused_tune.stored_fused)."""
    gm, error = trace(model)
    if gm is None:
        return Fused(model=model, error=error)
    scan = chains_of(gm)
    modules = dict(gm.named_modules())
    nodes = {n.name: n for n in gm.graph.nodes}
    out = Fused(model=gm)
    replaced: dict[str, Any] = {}  # a chain's last node's name -> the fused node now in its place
    for i, ch in enumerate(scan.chains):
        if why := why_not_fused(ch.ops):
            out.skipped[ch.conv] = why
            continue
        chain_nodes = [nodes[n] for n in ch.nodes]
        bn = next((modules[n.target] for n in chain_nodes[1:] if n.op == "call_module"
                   and isinstance(modules.get(n.target), torch.nn.modules.batchnorm._BatchNorm)), None)
        name = f"fused_{i}"
        mod = FusedChain(ch, modules[ch.conv], bn, stored).train(model.training)  # a new module is in training mode
        gm.add_submodule(name, mod)
        last = chain_nodes[-1]
        residual = replaced.get(ch.residual, nodes.get(ch.residual)) if ch.residual else None
        with gm.graph.inserting_before(last):
            new = gm.graph.call_module(name, (chain_nodes[0].args[0],) + ((residual,) if residual else ()))
        last.replace_all_uses_with(new)
        replaced[last.name] = new
        for n in reversed(chain_nodes):
            gm.graph.erase_node(n)
        out.chains[name] = mod
    gm.graph.lint()
    gm.recompile()
    gm.train(model.training)
    return out


__all__ = ["FusedChain", "Fused", "fuse_model", "FUSED_DTYPES", "MIN_UNTUNED_CHANNELS"]
