"""The sampled problem space: convolution problems drawn across what a user can run, not only the layers of known
models, for a selector that has to choose for shapes nobody searched.

``sample_corpus(n, seed)`` draws `n` distinct problems with a seeded generator (the same `n` and `seed` give the same
problems in the same order, on every machine) and returns them as a :class:`~cudnn_algos.corpus.Corpus` (family
``"sampled"``), so that ``cudnn-algos sweep`` measures them as it measures a model corpus. Each draw picks the
dimensionality, kernel, stride, dilation, groups, channels, spatial size, batch and dtype/layout from the weighted
choices of :data:`SPACE` (what the data card prints: ``space_lines()``), weighted toward what models use; a draw
whose output is empty or whose operands or multiply-adds exceed :data:`LIMITS` is drawn again.

Note [held-out ranges]: ``held_out=True`` draws from the same space but keeps only problems whose channel counts
(both) are odd and above 8 and whose spatial sizes are odd — values :data:`SPACE`'s model-like draws never give and
its log-uniform draws give rarely — so a held-out evaluation meets shapes unlike the training's. A training corpus
can leave those out (``exclude_held_out=True``) so that no held-out problem is in it.
"""
from __future__ import annotations

import math
import random
from typing import Any

from .corpus import CONFIGS, Corpus, CorpusProblem, Source
from .spec import ConvSpec

FAMILY = "sampled"

# the weighted choices of one draw; (value, weight) pairs, or ranges drawn log-uniformly. Written into the data card.
SPACE: dict[str, Any] = {
    "ndim": [(2, 0.80), (1, 0.10), (3, 0.10)],
    "transposed": [(False, 0.90), (True, 0.10)],
    "kernel": [(1, 0.28), (3, 0.36), (5, 0.08), (7, 0.07), (2, 0.04), (4, 0.04), (9, 0.03), (11, 0.03),
               ("1xk", 0.07)],  # "1xk": 1 x k or k x 1, k in 3, 5, 7 (2-d only; 1-d and 3-d draw again)
    "stride": [(1, 0.70), (2, 0.22), (3, 0.04), (4, 0.04)],
    "dilation": [(1, 0.88), (2, 0.06), (3, 0.03), (4, 0.03)],
    "groups": [("1", 0.75), ("depthwise", 0.12), ("divisor", 0.13)],  # depthwise: out = in x (1, 2 or 4);
    # divisor: 2, 4, ... 64 dividing in_channels, out_channels rounded to a multiple of it
    "channels": {"model_like": 0.5, "model_like_values": "8 to 2048, powers of two and multiples of 8 (log-uniform)",
                 "any": "1 to 2048, every integer (log-uniform)", "first_layer_3": 0.04},
    "spatial": {"1d": (1, 4096), "2d": (1, 512), "3d_depth": (1, 64), "3d_hw": (1, 128), "square": 0.8},
    "batch": {"round": [1, 2, 4, 8, 16, 32, 64, 128, 256], "round_share": 0.6, "any": (1, 256)},
    "padding": [("same", 0.70), ("zero", 0.20), ("any", 0.10)],  # same: dilation * (k - 1) // 2; any: 0 .. k - 1
    "configs": [("fp16-nhwc", 0.40), ("bf16-nhwc", 0.20), ("fp32", 0.40)],
}
LIMITS = {"operand_bytes": 1 << 30, "flops": 4 * 10**11, "tries": 1000}  # per problem: x + w + y bytes, 2 * MACs


def _pick(rng: random.Random, choices: list[tuple[Any, float]]) -> Any:
    values, weights = zip(*choices)
    return rng.choices(values, weights)[0]


def _log_int(rng: random.Random, lo: int, hi: int) -> int:
    return min(hi, max(lo, int(math.exp(rng.uniform(math.log(lo), math.log(hi + 1))))))


def _channels(rng: random.Random) -> int:
    if rng.random() < SPACE["channels"]["model_like"]:
        if rng.random() < 0.6:
            return 2 ** rng.randint(3, 11)
        return 8 * _log_int(rng, 1, 256)
    return _log_int(rng, 1, 2048)


def _groups(rng: random.Random, cin: int, cout: int) -> tuple[int, int]:
    """(groups, out_channels): depthwise sets out_channels to a multiple of in_channels (1x mostly), a divisor
    group count rounds out_channels to a multiple of it."""
    kind = _pick(rng, SPACE["groups"])
    if kind == "depthwise" and cin > 1:
        return cin, cin * rng.choice((1, 1, 1, 2, 4))
    if kind == "divisor":
        common = [g for g in (2, 4, 8, 16, 32, 64) if cin % g == 0 and g < cin]
        if common:
            g = rng.choice(common)
            return g, max(g, cout // g * g)
    return 1, cout


def _spatial(rng: random.Random, nd: int) -> tuple[int, ...]:
    sp = SPACE["spatial"]
    if nd == 1:
        return (_log_int(rng, *sp["1d"]),)
    if nd == 3:
        return (_log_int(rng, *sp["3d_depth"]), *([_log_int(rng, *sp["3d_hw"])] * 2))
    h = _log_int(rng, *sp["2d"])
    return (h, h) if rng.random() < sp["square"] else (h, _log_int(rng, *sp["2d"]))


def _batch(rng: random.Random) -> int:
    b = SPACE["batch"]
    return rng.choice(b["round"]) if rng.random() < b["round_share"] else _log_int(rng, *b["any"])


def draw(rng: random.Random) -> tuple[ConvSpec, tuple[int, ...], str]:
    """One problem (spec, input shape, configuration name), not yet checked against LIMITS."""
    nd = _pick(rng, SPACE["ndim"])
    transposed = _pick(rng, SPACE["transposed"])
    k = _pick(rng, SPACE["kernel"])
    while k == "1xk" and nd != 2:
        k = _pick(rng, SPACE["kernel"])
    if k == "1xk":
        n = rng.choice((3, 5, 7))
        kernel = (1, n) if rng.random() < 0.5 else (n, 1)
    else:
        kernel = (k,) * nd
    stride = _pick(rng, SPACE["stride"])
    dilation = _pick(rng, SPACE["dilation"]) if not transposed or rng.random() < 0.5 else 1
    cin = 3 if rng.random() < SPACE["channels"]["first_layer_3"] else _channels(rng)
    cout = _channels(rng)
    groups, cout = _groups(rng, cin, cout)
    pad_kind = _pick(rng, SPACE["padding"])
    padding = tuple(0 if pad_kind == "zero" else dilation * (kk - 1) // 2 if pad_kind == "same"
                    else rng.randint(0, kk - 1) for kk in kernel)
    output_padding = 0
    if transposed and stride > 1 and rng.random() < 0.3:
        output_padding = rng.randint(0, min(stride, dilation * 2) - 1) if max(stride, dilation) > 1 else 0
    spec = ConvSpec(cin, cout, kernel, stride=stride, padding=padding, dilation=dilation, groups=groups,
                    transposed=transposed, output_padding=output_padding)
    return spec, (_batch(rng), cin, *_spatial(rng, nd)), _pick(rng, SPACE["configs"])


def within_limits(spec: ConvSpec, shape: tuple[int, ...], config: str) -> bool:
    """Whether the problem has an output and fits LIMITS (operand bytes at its dtype, multiply-adds)."""
    try:
        s = spec.shapes(shape)
    except ValueError:
        return False
    size = 4 if CONFIGS[config][0] == "float32" else 2
    nbytes = size * sum(math.prod(t) for t in (s.x_shape, s.w_shape, s.y_shape))
    return nbytes <= LIMITS["operand_bytes"] and 2 * math.prod(s.y_shape) * math.prod(s.w_shape[1:]) <= LIMITS["flops"]


def is_held_out(spec: ConvSpec, shape: tuple[int, ...]) -> bool:
    """Note [held-out ranges]."""
    odd_big = lambda c: c > 8 and c % 2 == 1  # noqa: E731
    return odd_big(spec.in_channels) and odd_big(spec.out_channels) and all(v % 2 == 1 for v in shape[2:])


def sample_corpus(n: int, seed: int = 0, *, held_out: bool = False, exclude_held_out: bool = False) -> Corpus:
    """`n` distinct sampled problems (module docstring): a Corpus of family "sampled", model ``seed<seed>``, each
    problem's layer named ``s<i>`` (its draw's index). held_out / exclude_held_out: Note [held-out ranges]."""
    from .problem import check_int

    check_int("n", n, 1)
    check_int("seed", seed, 0)
    if held_out and exclude_held_out:
        raise ValueError("held_out=True and exclude_held_out=True exclude each other")
    rng = random.Random(f"cudnn_algos-sample-{seed}-{'held-out' if held_out else 'train'}")
    model = f"seed{seed}" + ("-held-out" if held_out else "")
    seen: set[tuple] = set()
    problems: list[CorpusProblem] = []
    tries = 0
    while len(problems) < n:
        tries += 1
        if tries > LIMITS["tries"] * n:
            raise RuntimeError(f"sampling: {n} problems not found in {tries - 1} draws")
        spec, shape, config = draw(rng)
        if not within_limits(spec, shape, config) or is_held_out(spec, shape) != held_out and (
                held_out or exclude_held_out):
            continue
        dtype, fmt = CONFIGS[config]
        if fmt == "channels_last":
            fmt = {4: "channels_last", 5: "channels_last_3d"}.get(len(shape), "contiguous")
        key = (spec, shape, dtype, fmt)
        if key in seen:
            continue
        seen.add(key)
        problems.append(CorpusProblem(spec, shape, dtype, fmt, (Source(FAMILY, model, f"s{len(problems)}", 1),)))
    batches = tuple(sorted({p.input_shape[0] for p in problems}))
    return Corpus(problems=tuple(problems), models={FAMILY: (model,)}, batches=batches,
                  configs=tuple(c for c, _ in SPACE["configs"]), seconds=0.0)


def space_lines() -> list[str]:
    """The sampled space's weights and ranges, for the data card."""
    return [f"  {k}: {v}" for k, v in SPACE.items()] + [f"  limits: {LIMITS}"]


__all__ = ["SPACE", "LIMITS", "sample_corpus", "draw", "within_limits", "is_held_out", "space_lines"]
