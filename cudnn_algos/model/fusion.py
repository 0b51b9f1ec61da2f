"""The fusible chains of a model: a convolution and the pointwise ops that follow it (bias, an inference BatchNorm,
activations, a residual add), found on the model's traced graph (torch.fx), each with why it ends where it ends;
and the arithmetic that folds an inference BatchNorm into the convolution's weight and bias.

Note [fusible chains]: a chain starts at a convolution module's call and takes the next node while that node is the
only user of the value so far and is an epilogue op cuDNN's pointwise operations express (EPILOGUE_OPS): a
BatchNorm in eval mode right after the convolution (folded into its weight and bias, so it costs nothing in the
fused graph), an activation, an add of one other tensor of the same shape (the residual), in any order after that, at
most MAX_ACTIVATIONS activations and one add. Pass-through nodes (Identity, Dropout and stochastic depth in eval mode)
are stepped over. A node already taken by an earlier chain ends a later one (ResNet's downsample branch ends at the
add its block's last convolution took). Nothing here asks cuDNN: whether an engine fuses a chain for a shape, dtype
and layout is the fused search's answer (a row with its status); `Chain.stop` says only why the graph ends the
chain where it does."""
from __future__ import annotations

import operator
from dataclasses import dataclass, field
from typing import Any, Sequence

import torch

from ..epilogue import eager_kernels, not_in_graph
from ..spec import ConvSpec

# the epilogue ops a chain can hold, in cuDNN's pointwise terms: "bias" (ADD of a per-channel tensor), "bn" (an eval
# BatchNorm, folded), the activations (RELU_FWD; RELU_FWD with an upper clip; SWISH_FWD; GELU_FWD;
# GELU_APPROX_TANH_FWD; SIGMOID_FWD; TANH_FWD; hardsigmoid as relu6(x + 3) / 6 and hardswish as x * hardsigmoid(x):
# epilogue.COMPOSED), and
# "add" (ADD of a second tensor of the output's shape)
ACTIVATION_OPS = ("relu", "relu6", "silu", "gelu", "gelu_tanh", "sigmoid", "tanh", "hardswish", "hardsigmoid")
EPILOGUE_OPS = ("bias", "bn", *ACTIVATION_OPS, "add")
MAX_ACTIVATIONS = 2  # conv -> bn -> relu -> add -> relu is the longest chain the models above have

_ACT_MODULES: dict[type, str] = {torch.nn.ReLU: "relu", torch.nn.ReLU6: "relu6", torch.nn.SiLU: "silu",
                                 torch.nn.Sigmoid: "sigmoid", torch.nn.Tanh: "tanh", torch.nn.Hardswish: "hardswish",
                                 torch.nn.Hardsigmoid: "hardsigmoid"}
_ACT_FUNCTIONS: dict[Any, str] = {torch.relu: "relu", torch.nn.functional.relu: "relu",
                                  torch.nn.functional.relu6: "relu6", torch.nn.functional.silu: "silu",
                                  torch.sigmoid: "sigmoid", torch.nn.functional.sigmoid: "sigmoid",
                                  torch.tanh: "tanh", torch.nn.functional.tanh: "tanh",
                                  torch.nn.functional.hardswish: "hardswish",
                                  torch.nn.functional.hardsigmoid: "hardsigmoid"}
_ACT_METHODS = {"relu": "relu", "relu_": "relu", "sigmoid": "sigmoid", "tanh": "tanh"}
_ADDS = (operator.add, operator.iadd, torch.add)
_BATCHNORMS = (torch.nn.BatchNorm1d, torch.nn.BatchNorm2d, torch.nn.BatchNorm3d)
_FUNCTIONAL_CONVS = {getattr(torch.nn.functional, f"conv{t}{n}d") for t in ("", "_transpose") for n in (1, 2, 3)}
_PASS_MODULES = (torch.nn.Identity, torch.nn.Dropout, torch.nn.Dropout1d, torch.nn.Dropout2d, torch.nn.Dropout3d)


@dataclass(frozen=True)
class Chain:
    """One convolution and its fusible epilogue. `conv`: the convolution module's name (as named_modules names it);
    `node`: its call's node in the traced graph (a module called twice has two chains); `ops`: the epilogue in
    order (EPILOGUE_OPS; "bias" first where the convolution has one); `nodes`: the graph nodes the chain takes,
    the convolution's first; `residual`: the add's other operand's node, or ""; `stop`: why the chain ends where it
    does (plain words; "" where the graph's output follows)."""

    conv: str
    node: str
    spec: ConvSpec
    ops: tuple[str, ...]
    nodes: tuple[str, ...]
    residual: str = ""
    stop: str = ""

    @property
    def fused_ops(self) -> tuple[str, ...]:
        """What a fused graph runs after the convolution once the BatchNorm is folded (folded_epilogue)."""
        return folded_epilogue(self.ops)

    @property
    def eager_kernels(self) -> int:
        """Kernels torch's eager mode launches after the convolution for this epilogue (one per op; the bias too:
        torch adds it after cuDNN's convolution)."""
        return eager_kernels(self.ops)

    def bytes_saved(self, output_elements: int, itemsize: int) -> int:
        """Memory traffic one fused call saves over eager: each eager epilogue kernel reads the activation and
        writes it again (the residual's read happens either way)."""
        return 2 * self.eager_kernels * output_elements * itemsize


@dataclass
class FusionScan:
    """A model's chains (model order) and the convolutions no chain could start from, by name, with why (a
    functional convolution, a model torch.fx cannot trace: `error`)."""

    chains: list[Chain] = field(default_factory=list)
    not_chained: dict[str, str] = field(default_factory=dict)
    error: str = ""

    def with_epilogue(self) -> list[Chain]:
        """The chains that have something to fuse."""
        return [c for c in self.chains if c.ops]


def _activation(node: Any, modules: dict[str, torch.nn.Module]) -> str | None:
    if node.op == "call_module":
        m = modules.get(node.target)
        if isinstance(m, torch.nn.GELU):
            return "gelu_tanh" if m.approximate == "tanh" else "gelu"
        return _ACT_MODULES.get(type(m))
    if node.op == "call_function":
        if node.target is torch.nn.functional.gelu:
            return "gelu_tanh" if node.kwargs.get("approximate", "none") == "tanh" else "gelu"
        return _ACT_FUNCTIONS.get(node.target)
    if node.op == "call_method":
        return _ACT_METHODS.get(node.target)
    return None


def _passes_through(node: Any, modules: dict[str, torch.nn.Module]) -> bool:
    """Identity, and dropout or stochastic depth that do nothing (eval mode)."""
    if node.op == "call_module":
        m = modules.get(node.target)
        if isinstance(m, _PASS_MODULES):
            return not (m.training and getattr(m, "p", 0))
        return type(m).__name__ == "StochasticDepth" and not m.training
    if node.op == "call_function" and getattr(node.target, "__name__", "") in ("dropout", "stochastic_depth"):
        training = node.kwargs.get("training", node.args[3] if len(node.args) > 3 else True)
        return training is False
    return False


def _other_operand(node: Any, cur: Any) -> Any:
    """The add's operand that is not `cur`, where the node adds `cur` and one other graph value (no alpha);
    else None."""
    if not (node.op == "call_function" and node.target in _ADDS) and not (
            node.op == "call_method" and node.target in ("add", "add_")):
        return None
    if node.kwargs.get("alpha", 1) != 1 or len(node.args) != 2:
        return None
    a, b = node.args
    other = b if a is cur else a if b is cur else None
    return other if hasattr(other, "op") and other is not cur else None


def _walk(conv_node: Any, modules: dict[str, torch.nn.Module], taken: set[str]) -> tuple[list[str], list[Any],
                                                                                           str, str]:
    """(ops, nodes after the convolution's, residual, stop) of the chain from `conv_node`."""
    conv = modules[conv_node.target]
    ops = ["bias"] if conv.bias is not None else []
    nodes: list[Any] = []
    residual, cur = "", conv_node
    while True:
        users = list(cur.users)
        if not users or users[0].op == "output":
            return ops, nodes, residual, ""
        if len(users) > 1:
            return ops, nodes, residual, f"{cur.name}'s value is used by {len(users)} nodes"
        n = users[0]
        if n.name in taken:
            return ops, nodes, residual, f"{n.name} is in an earlier chain"
        if _passes_through(n, modules):
            nodes.append(n)
            cur = n
            continue
        m = modules.get(n.target) if n.op == "call_module" else None
        act = _activation(n, modules)
        if isinstance(m, _BATCHNORMS):
            if m.training or m.running_mean is None:
                return ops, nodes, residual, f"{n.target} normalises with batch statistics (training mode): " \
                                             "it does not fold"
            if ops not in ([], ["bias"]):
                return ops, nodes, residual, f"{n.target} follows {ops[-1]}: only a BatchNorm right after the " \
                                             "convolution folds"
            ops.append("bn")
        elif act is not None:
            if sum(op in ACTIVATION_OPS for op in ops) >= MAX_ACTIVATIONS:
                return ops, nodes, residual, f"more than {MAX_ACTIVATIONS} activations"
            ops.append(act)
        elif (other := _other_operand(n, cur)) is not None:
            if "add" in ops:
                return ops, nodes, residual, "a second add"
            ops.append("add")
            residual = other.name
        else:
            what = n.target if isinstance(n.target, str) else getattr(n.target, "__name__", str(n.target))
            return ops, nodes, residual, f"{n.name} ({what}) is not an epilogue op cuDNN fuses"
        nodes.append(n)
        cur = n


def folded_epilogue(ops: Sequence[str]) -> tuple[str, ...]:
    """A chain's fused-graph ops once its BatchNorm is folded into the convolution: a bias where the convolution has
    one or a BatchNorm follows it, then the activations and the add in order."""
    after = tuple(op for op in ops if op not in ("bias", "bn"))
    return (("bias",) if ("bias" in ops or "bn" in ops) else ()) + after


def why_not_fused(ops: Sequence[str]) -> str:
    """Why a chain with these ops has no fused graph ("" when it has one)."""
    return "nothing to fuse after the convolution" if not ops else not_in_graph(ops)


def chain_calls(chains: Sequence[Chain], calls: Sequence[Any]) -> list[tuple[Chain, Any]]:
    """Each chain with the forward pass's call of its convolution (discovery's ConvUse, matched by module name: a
    module's k-th chain is its k-th call), or None where the pass did not call it."""
    by_module: dict[str, list] = {}
    for c in calls:
        by_module.setdefault(c.name, []).append(c)
    seen: dict[str, int] = {}
    out = []
    for ch in chains:
        k = seen.get(ch.conv, 0)
        seen[ch.conv] = k + 1
        mine = by_module.get(ch.conv, [])
        out.append((ch, mine[k] if k < len(mine) else None))
    return out


def scan_in_eval(model: torch.nn.Module, example_input: Any) -> tuple[FusionScan, list[tuple[Chain, Any]], list]:
    """The chains of `model` in eval mode (it is left in the mode it was in), each with its call in one forward pass
    on `example_input` (chain_calls), and the pass's calls."""
    from .discovery import discover

    was = model.training
    model.eval()
    try:
        scan = find_chains(model)
        calls = discover(model, example_input)
    finally:
        model.train(was)
    return scan, chain_calls(scan.chains, calls), calls


def find_chains(model: torch.nn.Module) -> FusionScan:
    """The fusible chains of `model` as it is (eval mode is the caller's: a BatchNorm in training mode ends a chain)
    on its torch.fx graph (symbolic tracing: no input, no GPU). A model that cannot be traced gives no chains and
    `error` says why; a functional convolution is named in `not_chained`. Note [fusible chains]."""
    gm, error = trace(model)
    return chains_of(gm) if gm is not None else FusionScan(error=error)


def trace(model: torch.nn.Module) -> tuple[Any, str]:
    """(`model`'s torch.fx GraphModule, "") or (None, why it could not be traced)."""
    import torch.fx

    try:
        return torch.fx.symbolic_trace(model), ""
    except Exception as e:  # torch.fx raises what the model's Python raises on a Proxy: any type
        return None, (f"torch.fx could not trace {type(model).__name__}: {type(e).__name__}: "
                      f"{str(e).splitlines()[0][:200] if str(e) else ''}")


def chains_of(gm: Any) -> FusionScan:
    """The fusible chains of a traced GraphModule (find_chains; the nodes are `gm`'s, by name)."""
    modules = dict(gm.named_modules())
    scan = FusionScan()
    taken: set[str] = set()
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target in _FUNCTIONAL_CONVS:
            scan.not_chained[node.name] = "a functional convolution: no module holds its weight"
            continue
        if node.op != "call_module" or not isinstance(modules.get(node.target), torch.nn.modules.conv._ConvNd):
            continue
        conv = modules[node.target]
        if conv.padding_mode != "zeros":
            scan.not_chained[node.target] = f"padding_mode={conv.padding_mode!r}: torch pads before the convolution"
            continue
        ops, nodes, residual, stop = _walk(node, modules, taken)
        taken.update(n.name for n in nodes)
        scan.chains.append(Chain(node.target, node.name, ConvSpec.from_module(conv), tuple(ops),
                                 (node.name, *(n.name for n in nodes)), residual, stop))
    return scan


def fold_batchnorm(weight: torch.Tensor, bias: torch.Tensor | None, bn: torch.nn.modules.batchnorm._BatchNorm,
                   transposed: bool = False, groups: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    """The weight and bias of one convolution that computes `bn(conv(x))` for an eval-mode BatchNorm `bn`:
    scale = gamma / sqrt(running_var + eps) per output channel, weight * scale along the output channels, bias
    (conv bias - running_mean) * scale + beta. Computed in float64 and returned in the weight's dtype. A transposed
    convolution's weight is (in, out / groups, ...): its output channels are the second dim within each group."""
    if bn.running_mean is None or bn.running_var is None:
        raise ValueError(f"bn={bn!r} has no running statistics (track_running_stats=False): it does not fold")
    w = weight.detach().double()
    mean, var = bn.running_mean.double(), bn.running_var.double()
    gamma = bn.weight.detach().double() if bn.weight is not None else torch.ones_like(mean)
    beta = bn.bias.detach().double() if bn.bias is not None else torch.zeros_like(mean)
    scale = gamma / torch.sqrt(var + bn.eps)
    out_channels = w.shape[1] * groups if transposed else w.shape[0]
    if scale.numel() != out_channels:
        raise ValueError(f"bn has {scale.numel()} channels but the convolution has {out_channels} output channels")
    if transposed:
        per_group = scale.view(groups, 1, w.shape[1], *([1] * (w.dim() - 2)))
        w = (w.view(groups, w.shape[0] // groups, *w.shape[1:]) * per_group).view(w.shape)
    else:
        w = w * scale.view(-1, *([1] * (w.dim() - 1)))
    b = bias.detach().double() if bias is not None else torch.zeros_like(mean)
    return w.to(weight.dtype), ((b - mean) * scale + beta).to(weight.dtype)


__all__ = ["EPILOGUE_OPS", "ACTIVATION_OPS", "MAX_ACTIVATIONS", "Chain", "FusionScan", "find_chains", "trace",
           "chains_of", "fold_batchnorm", "folded_epilogue", "why_not_fused", "chain_calls", "scan_in_eval"]
