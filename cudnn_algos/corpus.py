"""A corpus of real convolution problems: every convolution that the models of whole families run, found by the
meta-device discovery (one forward pass per model, no compute, no GPU), deduplicated by problem, each keeping the
models and layers it came from and how many times they run it.

A problem is (layer spec, input shape, dtype, layout); its directions (forward, backward-data, backward-filter) are
what a sweep measures. Shapes are discovered once per model at batch 1 and scaled to each batch size (a
convolution's input shape changes only in N); each dtype/layout configuration (fp16 and bf16 channels_last, fp32
contiguous) makes its own problems. Families whose package is missing here (timm, torchaudio) are listed as such,
never guessed.
"""
from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

from .results.codec import Saved, register
from .spec import ConvSpec

CONFIGS = {"fp16-nhwc": ("float16", "channels_last"), "bf16-nhwc": ("bfloat16", "channels_last"),
           "fp32": ("float32", "contiguous")}
BATCHES = (1, 8, 32, 128)
DIRECTIONS_PER_PROBLEM = 3


@dataclass(frozen=True)
class Source:
    """Where a problem comes from: a model of a family, one of its layers, and how many calls of a forward pass run
    it there."""

    family: str
    model: str
    layer: str
    uses: int


@dataclass(frozen=True)
class CorpusProblem:
    spec: ConvSpec
    input_shape: tuple[int, ...]
    dtype: str
    memory_format: str
    sources: tuple[Source, ...]

    @property
    def key(self) -> tuple:
        return (self.spec, self.input_shape, self.dtype, self.memory_format)

    @property
    def families(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(s.family for s in self.sources))

    @property
    def uses(self) -> int:
        return sum(s.uses for s in self.sources)


@register
@dataclass(frozen=True)
class Corpus(Saved):
    """Distinct problems of the models of some families, at some batch sizes and configurations."""

    problems: tuple[CorpusProblem, ...]
    models: dict[str, tuple[str, ...]]  # family -> the models discovered
    missing: dict[str, str] = field(default_factory=dict)  # family or model -> why it is not in the corpus
    batches: tuple[int, ...] = BATCHES
    configs: tuple[str, ...] = tuple(CONFIGS)
    seconds: float = 0.0

    KIND = "corpus"

    def per_family(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for p in self.problems:
            for f in p.families:
                out[f] = out.get(f, 0) + 1
        return dict(sorted(out.items()))

    def overlap(self) -> dict[int, int]:
        """How many problems n families share, per n (1: found in one family only)."""
        out: dict[int, int] = {}
        for p in self.problems:
            n = len(p.families)
            out[n] = out.get(n, 0) + 1
        return dict(sorted(out.items()))

    def summary_lines(self) -> list[str]:
        n = len(self.problems)
        lines = [f"corpus: {n} distinct problems, {n * DIRECTIONS_PER_PROBLEM} problem-directions, from "
                 f"{sum(map(len, self.models.values()))} models of {len(self.models)} families; batches "
                 f"{self._batches_text()}; {', '.join(self.configs)} ({self.seconds:.0f} s to discover)"]
        fam_models = {f: len(m) for f, m in self.models.items()}
        lines += [f"  {f:<34} {c:6d} problems  ({fam_models.get(f, 0)} models)" for f, c in self.per_family().items()]
        lines.append("shared: " + ", ".join(f"{c} problems in {k} famil{'y' if k == 1 else 'ies'}"
                                            for k, c in self.overlap().items()))
        lines += [f"not in the corpus: {k}: {why}" for k, why in self.missing.items()]
        return lines

    def __str__(self) -> str:
        return "\n".join(self.summary_lines())

    def _batches_text(self) -> str:
        b = self.batches
        return ",".join(map(str, b)) if len(b) <= 8 else f"{min(b)} to {max(b)} ({len(b)} sizes)"

    def at_batches(self, batches: Sequence[int]) -> "Corpus":
        """The same layers at other batch sizes, no discovery: a convolution's input shape changes only in N, so
        each distinct (layer, input shape less N, dtype, layout) of this corpus becomes one problem per batch size,
        in this corpus's order (first seen), with its sources (merged where the corpus had it at several batch
        sizes). A sweep of the result runs the same task list in the same order wherever it is made."""
        from .problem import check_int

        if not batches:
            raise ValueError("batches=() must name at least one batch size")
        for b in batches:
            check_int("batches", b, 1)
        base: dict[tuple, list[Source]] = {}
        for p in self.problems:
            src = base.setdefault((p.spec, p.input_shape[1:], p.dtype, p.memory_format), [])
            src += [s for s in p.sources if s not in src]
        problems = tuple(CorpusProblem(spec, (b, *rest), dtype, fmt, tuple(src))
                         for b in dict.fromkeys(batches) for (spec, rest, dtype, fmt), src in base.items())
        return Corpus(problems=problems, models=dict(self.models), missing=dict(self.missing),
                      batches=tuple(dict.fromkeys(batches)), configs=self.configs, seconds=0.0)


# ================================================================================================ the families
def _tv(name: str, **kw) -> Callable[[], Any]:
    def build():
        import torchvision

        return torchvision.models.get_model(name, weights=None, **kw)
    return build


def _unet(base: int = 32) -> Any:
    """A small UNet (two downs, two transposed-convolution ups): the decoders' transposed convolutions."""
    import torch.nn as nn

    def block(i, o):
        return nn.Sequential(nn.Conv2d(i, o, 3, padding=1), nn.ReLU(), nn.Conv2d(o, o, 3, padding=1), nn.ReLU())

    class UNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.d1, self.d2, self.mid = block(3, base), block(base, 2 * base), block(2 * base, 4 * base)
            self.pool = nn.MaxPool2d(2)
            self.u2 = nn.ConvTranspose2d(4 * base, 2 * base, 2, stride=2)
            self.c2 = block(4 * base, 2 * base)
            self.u1 = nn.ConvTranspose2d(2 * base, base, 2, stride=2)
            self.c1 = block(2 * base, base)
            self.out = nn.Conv2d(base, 2, 1)

        def forward(self, x):
            import torch

            a = self.d1(x)
            b = self.d2(self.pool(a))
            m = self.mid(self.pool(b))
            y = self.c2(torch.cat([self.u2(m), b], 1))
            return self.out(self.c1(torch.cat([self.u1(y), a], 1)))

    return UNet()


def _dcgan(nz: int = 100, ngf: int = 64) -> Any:
    """DCGAN's generator: a latent vector to a 64x64 image through strided transposed convolutions."""
    import torch.nn as nn

    return nn.Sequential(
        nn.ConvTranspose2d(nz, ngf * 8, 4, 1, 0, bias=False), nn.BatchNorm2d(ngf * 8), nn.ReLU(),
        nn.ConvTranspose2d(ngf * 8, ngf * 4, 4, 2, 1, bias=False), nn.BatchNorm2d(ngf * 4), nn.ReLU(),
        nn.ConvTranspose2d(ngf * 4, ngf * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(ngf * 2), nn.ReLU(),
        nn.ConvTranspose2d(ngf * 2, ngf, 4, 2, 1, bias=False), nn.BatchNorm2d(ngf), nn.ReLU(),
        nn.ConvTranspose2d(ngf, 3, 4, 2, 1, bias=False), nn.Tanh())


IMAGE = (3, 224, 224)
# family -> {model: (builder, input shape without the batch dim)}; torchvision's detection models run as their
# backbone with FPN at a fixed 512x512 input (their heads' convolutions run on the FPN levels; anchors and NMS are
# not convolutions)
FAMILIES: dict[str, dict[str, tuple[Callable[[], Any], tuple[int, ...]]]] = {
    "torchvision-resnet": {m: (_tv(m), IMAGE) for m in (
        "resnet18", "resnet34", "resnet50", "resnet101", "resnet152", "resnext50_32x4d", "resnext101_32x8d",
        "wide_resnet50_2")},
    "torchvision-mobile": {m: (_tv(m), IMAGE) for m in (
        "mobilenet_v2", "mobilenet_v3_small", "mobilenet_v3_large", "mnasnet0_5", "mnasnet1_0",
        "shufflenet_v2_x0_5", "shufflenet_v2_x1_0", "squeezenet1_0", "squeezenet1_1")},
    "torchvision-efficientnet": {m: (_tv(m), IMAGE) for m in (
        "efficientnet_b0", "efficientnet_b1", "efficientnet_b2", "efficientnet_b3", "efficientnet_v2_s")},
    "torchvision-regnet": {m: (_tv(m), IMAGE) for m in (
        "regnet_x_400mf", "regnet_x_800mf", "regnet_x_1_6gf", "regnet_y_400mf", "regnet_y_800mf", "regnet_y_1_6gf",
        "regnet_y_3_2gf")},
    "torchvision-classic": {m: (_tv(m), IMAGE) for m in (
        "vgg11", "vgg16", "densenet121", "densenet169", "googlenet", "alexnet", "convnext_tiny", "convnext_small")},
    "torchvision-segmentation": {m: (_tv(m, weights_backbone=None, aux_loss=False), (3, 512, 512)) for m in (
        "fcn_resnet50", "deeplabv3_resnet50", "deeplabv3_mobilenet_v3_large", "lraspp_mobilenet_v3_large")},
    "torchvision-detection": {m: (lambda m=m: backbone_and_head(m), (3, 512, 512)) for m in (
        "fasterrcnn_resnet50_fpn", "retinanet_resnet50_fpn", "fcos_resnet50_fpn", "maskrcnn_resnet50_fpn")},
    "torchvision-video": {**{m: (_tv(m), (3, 16, 112, 112)) for m in ("r3d_18", "mc3_18", "r2plus1d_18")},
                          "s3d": (_tv("s3d"), (3, 16, 224, 224))},
    "decoders": {"unet": (_unet, (3, 256, 256)), "dcgan_generator": (_dcgan, (100, 1, 1))},
    "timm": {m: (lambda m=m: _timm(m), IMAGE) for m in (
        "resnet50d", "resnest14d", "efficientnet_b0", "mobilenetv3_large_100", "ghostnet_100", "mixnet_s",
        "rexnet_100", "regnetz_b16", "convnext_nano", "dla34", "cspresnet50", "dpn68", "hrnet_w18_small",
        "tf_efficientnetv2_s", "repvgg_a2", "res2net50_26w_4s", "selecsls42b", "tinynet_a", "lcnet_100",
        "efficientvit_b0")},
    "torchaudio": {"wav2vec2_base.feature_extractor": (lambda: _audio("wav2vec2"), (16000,)),
                   "conformer": (lambda: _audio("conformer"), (200, 80))},
}


def _timm(name: str) -> Any:
    import timm

    return timm.create_model(name, pretrained=False)


def _audio(which: str) -> Any:
    """torchaudio's 1-d convolutions: wav2vec2's feature extractor on a waveform (batch, samples), or a Conformer's
    depthwise convolution modules on features (batch, frames, 80)."""
    import torch.nn as nn
    import torchaudio

    if which == "wav2vec2":
        fe = torchaudio.models.wav2vec2_base().feature_extractor

        class Features(nn.Module):
            def __init__(self):
                super().__init__()
                self.fe = fe

            def forward(self, x):
                return self.fe(x, None)[0]

        return Features()
    conformer = torchaudio.models.Conformer(input_dim=80, num_heads=4, ffn_dim=256, num_layers=2,
                                            depthwise_conv_kernel_size=31)

    class Frames(nn.Module):
        def __init__(self):
            super().__init__()
            self.c = conformer

        def forward(self, x):  # Conformer.forward's layers with no padding mask: every sequence is whole, and the
            x = x.transpose(0, 1)  # mask from lengths needs .item(), which meta tensors (discovery) do not have
            for layer in self.c.conformer_layers:
                x = layer(x, None)
            return x.transpose(0, 1)

    return Frames()


def backbone_and_head(name: str) -> Any:
    """A detection model's convolutions on a fixed input: its backbone with FPN, then its dense head on every FPN
    level (the RPN head for the R-CNNs, the classification and box heads for RetinaNet and FCOS)."""
    import torch.nn as nn
    import torchvision

    det = torchvision.models.get_model(name, weights=None, weights_backbone=None)

    class BackboneAndHead(nn.Module):
        def __init__(self):
            super().__init__()
            self.backbone = det.backbone
            self.head = det.rpn.head if hasattr(det, "rpn") else det.head

        def forward(self, x):
            feats = list(self.backbone(x).values())
            return self.head(feats)

    return BackboneAndHead()


# ================================================================================================ discovery
def _discover_one(build: Callable[[], Any], shape: tuple[int, ...]) -> list[tuple[str, ConvSpec, tuple[int, ...]]]:
    """(layer, spec, input shape at batch 1) of every convolution call of one model's forward pass, on the meta
    device."""
    import torch

    from .model import discover

    try:
        with torch.device("meta"):
            model = build().eval()
    except (NotImplementedError, RuntimeError):  # a constructor that reads tensor data (RegNet's): built for real
        model = build().eval()
    with torch.no_grad():
        uses = discover(model, torch.empty((1, *shape), device="meta"))
    return [(u.name, u.spec, u.input_shape) for u in uses]


def build_corpus(families: Iterable[str] | None = None, *, batches: Sequence[int] = BATCHES,
                 configs: Sequence[str] = tuple(CONFIGS), models: Iterable[str] | None = None,
                 progress: bool = True) -> Corpus:
    """Discovers the convolutions of every model of `families` (default: all of FAMILIES; `models` keeps only the
    models named) and returns them as distinct problems at each batch size and configuration."""
    from .problem import check_choice, check_int
    from .progress import Progress

    fams = list(FAMILIES) if families is None else list(families)
    for f in fams:
        check_choice("families", f, tuple(FAMILIES))
    for c in configs:
        check_choice("configs", c, tuple(CONFIGS))
    for b in batches:
        check_int("batches", b, 1)
    keep = None if models is None else set(models)
    known = {m for f in fams for m in FAMILIES[f]}
    for m in sorted(keep or ()):
        if m not in known:
            raise ValueError(f"models={m!r} is not a model of {', '.join(fams)}")
    t0 = time.perf_counter()
    todo = [(f, m, *FAMILIES[f][m]) for f in fams for m in FAMILIES[f] if keep is None or m in keep]
    found: dict[tuple, list[Source]] = {}
    done: dict[str, list[str]] = {}
    missing: dict[str, str] = {}
    with Progress(len(todo), progress, "discovering", unit="model") as bar:
        for family, name, build, shape in todo:
            try:
                calls = _discover_one(build, shape)
            except ImportError as e:
                missing[family] = f"{e.name or e} is not installed here"
                bar.update(name)
                continue
            except Exception as e:  # noqa: BLE001 (one model that does not build is a line of the summary)
                missing[f"{family}/{name}"] = f"{type(e).__name__}: {str(e)[:120]}"
                bar.update(name)
                continue
            done.setdefault(family, []).append(name)
            first: dict[tuple, str] = {}  # (spec, shape) -> the first layer that runs it
            uses_of: Counter = Counter()
            for layer, spec, shape1 in calls:
                first.setdefault((spec, shape1), layer)
                uses_of[(spec, shape1)] += 1
            for (spec, shape1), layer in first.items():
                uses = uses_of[(spec, shape1)]
                for b in batches:
                    for c in configs:
                        dtype, fmt = CONFIGS[c]
                        if fmt == "channels_last":  # the layout of the layer's rank (1-d layers are contiguous)
                            fmt = {4: "channels_last", 5: "channels_last_3d"}.get(len(shape1), "contiguous")
                        key = (spec, (b, *shape1[1:]), dtype, fmt)
                        found.setdefault(key, []).append(Source(family, name, layer, uses))
            bar.update(name)
    problems = tuple(CorpusProblem(spec, shape, dtype, fmt, tuple(src))
                     for (spec, shape, dtype, fmt), src in found.items())
    return Corpus(problems=problems, models={f: tuple(m) for f, m in done.items()}, missing=missing,
                  batches=tuple(batches), configs=tuple(configs), seconds=time.perf_counter() - t0)


__all__ = ["Corpus", "CorpusProblem", "Source", "build_corpus", "FAMILIES", "CONFIGS", "BATCHES"]
