"""apply(model, fuse=True): the model's fusible chains (model.fusion) each replaced, in a traced copy of the model, by
one ``FusedChain`` module that runs the chain as one cuDNN fused plan in inference, and torch's ops otherwise.

Note [running a chain fused]: a chain's BatchNorm is folded into the convolution's weight and bias once (float64,
model.fusion.fold_batchnorm), so the fused graph is the convolution, a per-channel bias, then the chain's activations
and residual add. A call runs the fused plan when the module is in eval mode, no gradient is asked for, the input is
a CUDA tensor of float16, bfloat16 or float32, the layer is not transposed, and cuDNN built a plan for that input's
shape, dtype and layout: the first configuration of its INSTANT list that builds (what torch itself takes with
benchmark off) unless tune(fuse=True) stored a winner for it (fused_tune.py), built at the shape's first call and
kept for the process. Every other call runs torch's ops on the
folded weights (the same arithmetic as the original modules in eval mode), and the chain's counts say why. The
original model is not changed: the fused model is a torch.fx GraphModule of its own (``Fused.model``).
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import torch

from ..epilogue import apply_torch, not_in_graph
from ..model.fusion import Chain, chains_of, fold_batchnorm, trace
from ..problem import MEMORY_FORMATS, conv_layout, make_problem
from .fused_tune import fused_key
from .keys import problem_key

FUSED_DTYPES = (torch.float16, torch.bfloat16, torch.float32)


class FusedChain(torch.nn.Module):
    """One chain: its convolution with the BatchNorm folded in, then its activations and residual add (Note
    [running a chain fused]). forward(x, residual=None)."""

    def __init__(self, chain: Chain, conv: torch.nn.modules.conv._ConvNd, bn: torch.nn.Module | None,
                 stored: dict[str, Any] | None = None):
        super().__init__()
        self._stored = stored or {}  # fused_key -> the tuned Winner (tune(fuse=True))
        self.chain, self.spec = chain, chain.spec
        ops = list(chain.ops)
        w, b = conv.weight.detach(), conv.bias.detach() if conv.bias is not None else None
        if "bn" in ops:
            w, b = fold_batchnorm(w, b, bn, chain.spec.transposed, chain.spec.groups)
        self.register_buffer("weight", w.clone())
        self.register_buffer("bias", None if b is None else b.clone())
        self.after = tuple(op for op in ops if op not in ("bias", "bn"))  # activations and add, in order
        self.epilogue = (("bias",) if b is not None else ()) + self.after  # the fused graph's ops
        self._args = dict(stride=conv.stride, padding=conv.padding, dilation=conv.dilation, groups=conv.groups,
                          output_padding=getattr(conv, "output_padding", 0))  # torch's path
        self._plans: dict[tuple, Any] = {}  # (shape, dtype, layout, device) -> backend.Plan, or why none
        self.counts: Counter = Counter()  # "fused", or "torch: <why>"

    def forward(self, x: torch.Tensor, residual: torch.Tensor | None = None) -> torch.Tensor:
        why = self._why_not(x)
        if not why:
            plan = self._plan(x)
            if isinstance(plan, str):
                why = plan
            else:
                self.counts["fused"] += 1
                return self._run(plan, x, residual)
        self.counts[f"torch: {why}"] += 1
        return self._torch(x, residual)

    def _why_not(self, x: torch.Tensor) -> str:
        if self.training:
            return "training mode"
        if torch.is_grad_enabled() and (x.requires_grad or self.weight.requires_grad):
            return "a gradient is asked for"
        if not x.is_cuda:
            return f"the input is on {x.device.type}, not CUDA"
        if x.dtype not in FUSED_DTYPES:
            return f"dtype {x.dtype} (fused: float16, bfloat16, float32)"
        if self.spec.transposed:
            return "a transposed convolution (its fused graph is not run yet)"
        return not_in_graph(self.after)

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

    def _plan(self, x: torch.Tensor) -> Any:
        key = (tuple(x.shape), x.dtype, conv_layout(x, self.weight), x.device.index)
        if key not in self._plans:
            self._plans[key] = _fused_plan(self.spec, x, key[2], self.epilogue, self._stored)
        return self._plans[key]

    def _run(self, plan: Any, x: torch.Tensor, residual: torch.Tensor | None) -> torch.Tensor:
        fmt = MEMORY_FORMATS[conv_layout(x, self.weight)]
        w = self.weight.to(x.dtype).contiguous(memory_format=fmt)
        shape = self.spec.shapes(tuple(x.shape)).output_shape
        y = torch.empty(shape, dtype=x.dtype, device=x.device, memory_format=fmt)
        operands = []
        if self.bias is not None:
            operands.append(self.bias.to(x.dtype).reshape([1, -1] + [1] * (x.dim() - 2)).contiguous())
        if "add" in self.after:
            operands.append(residual.contiguous(memory_format=fmt))
        plan.execute(x.contiguous(memory_format=fmt), w, y, operands)
        return y


def _fused_plan(spec, x: torch.Tensor, layout: str, epilogue: tuple[str, ...], stored: dict[str, Any]) -> Any:
    """The plan a chain runs for this input (Note [running a chain fused]): the tuned winner's configuration where
    tune(fuse=True) stored one (torch's ops where it stored TORCH_WINNER), else the first configuration of cuDNN's
    INSTANT list for the fused graph that builds; or why none."""
    from .. import backend
    from ..configs import parse_config

    if x.dim() not in (4, 5):
        return "a 1-d convolution (its fused graph is not run yet)"
    try:
        problem = make_problem(spec, tuple(x.shape), x.dtype, layout)
        cp, dev = backend.conv_problem(problem), x.device.index or 0
        w = stored.get(fused_key(problem_key(problem, "forward"), epilogue)) if stored else None
        if w is not None and w.is_torch:
            return "the tuned winner is torch's ops (no fused configuration beat the unfused sequence)"
        if w is not None:
            out = backend.engine_search("forward", cp, (), exact=[parse_config(w.config)], epilogue=epilogue,
                                        device=dev)
            ok = [p for p in out.plans if p.status == "SUCCESS"]
            if ok:
                return ok[0]
        out = backend.engine_search("forward", cp, ("instant",), epilogue=epilogue, device=dev)
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


def fuse_model(model: torch.nn.Module, stored: dict[str, Any] | None = None) -> Fused:
    """A traced copy of `model` in which each chain with something to fuse is one FusedChain module (Note [running a
    chain fused]); `model` itself is not changed. A model torch.fx cannot trace is returned as it is, with why.
    stored: the tuned fused winners by key (fused_tune.stored_fused)."""
    gm, error = trace(model)
    if gm is None:
        return Fused(model=model, error=error)
    scan = chains_of(gm)
    modules = dict(gm.named_modules())
    nodes = {n.name: n for n in gm.graph.nodes}
    out = Fused(model=gm)
    replaced: dict[str, Any] = {}  # a chain's last node's name -> the fused node now in its place
    for i, ch in enumerate(scan.chains):
        if not ch.ops or ch.ops == ("bias",):
            out.skipped[ch.conv] = "nothing to fuse after the convolution" if not ch.ops else "a bias alone"
            continue
        if why := not_in_graph(ch.ops):
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


__all__ = ["FusedChain", "Fused", "fuse_model", "FUSED_DTYPES"]
