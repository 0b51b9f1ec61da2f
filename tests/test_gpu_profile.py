"""GPU (H200): profile() in cuDNN's engine space on real models: every convolution found once per distinct problem,
shapes right (checked against hooks on the real GPU forward pass), every direction searched, torch's choice (on,
and off in a fresh process) identified by its kernels, every reported best measured against a float64 reference,
totals add up, the report round-trips; the end-to-end check runs."""
import pytest
import torch

import cudnn_algos
from cudnn_algos import ModelReport

pytestmark = pytest.mark.gpu

FAST = dict(repeats=3, screen=2, confirm=2, refine=1, refine_max=8, progress=False)
TOL = {"float32": 3e-3, "float16": 1e-2, "bfloat16": 3e-2, "float64": 1e-9}


def _real_uses(model, x):
    """(name, input shape) of every conv call in a real forward pass on the GPU."""
    seen = []
    hs = [m.register_forward_pre_hook(lambda mod, a, n=n: seen.append((n, tuple(a[0].shape))))
          for n, m in model.named_modules() if isinstance(m, torch.nn.modules.conv._ConvNd)]
    with torch.no_grad():
        model.cuda()(x.cuda())
    for h in hs:
        h.remove()
    return seen


def _check(report: ModelReport, model, x, directions, torch_off=False):
    real = _real_uses(model, x)
    assert report.n_conv_calls == len(real)
    got = sorted((name, p.input_shape) for p in report.problems for name in p.layers)
    assert got == sorted(real), "every conv call appears exactly once, with its real input shape"
    keys = [(p.spec, p.input_shape, p.dtype, p.memory_format) for p in report.problems]
    assert len(keys) == len(set(keys)), "each distinct problem is searched once"
    for p in report.problems:
        assert set(p.engines) == set(directions)
        for d, r in p.engines.items():
            assert r.shapes.input_shape == p.input_shape and r.direction == d
            b = r.best_eligible
            assert b is not None, f"{p.spec} {d}: nothing built and measured"
            assert b.measured.confirmed and b.measured.rel_err is not None and b.measured.rel_err < TOL[p.dtype], b
            on = r.torch_run("benchmark_on")
            assert on is not None and on.kernels and on.kernel_ms, f"{p.spec} {d}: torch on not measured: {on}"
            if torch_off:
                off = r.torch_run("benchmark_off")
                assert off is not None and off.where == "fresh process" and off.kernel_ms, off
    t = report.totals()
    for key in ("best_ms", "on_ms", "layers"):
        assert t["all"][key] == pytest.approx(sum(v[key] for k, v in t.items() if k != "all"))
    assert t["all"]["layers"] == len(real) * len(directions)
    assert ModelReport.load(report.to_json()) == report


def test_resnet18_all_directions_with_torch_off_and_end_to_end():
    tv = pytest.importorskip("torchvision")
    model, x = tv.models.resnet18(), torch.randn(8, 3, 112, 112)
    r = cudnn_algos.profile(model, x, name="resnet18", **FAST)
    _check(r, model, x, cudnn_algos.DIRECTIONS, torch_off=True)
    e = r.e2e
    assert e is not None and e.backward and e.step_ms_off > 0 and e.step_ms_on > 0
    assert e.first_step_s_off is not None and e.first_step_s_on is not None, e.note
    assert "benchmark mode:" in str(r) and "best/on" in str(r)


def test_mobilenet_v3_small_fp16_channels_last_with_legacy_columns():
    """Its first five blocks (16 of the model's 41 problems: the stem, 1x1 with and without bias, 3x3 and 5x5
    depthwise, squeeze-excitation): every kind of layer the model has, in fewer problems to search."""
    tv = pytest.importorskip("torchvision")
    model = torch.nn.Sequential(*tv.models.mobilenet_v3_small().features[:5])
    x = torch.randn(4, 3, 96, 96)
    r = cudnn_algos.profile(model, x, dtype=torch.float16, memory_format=torch.channels_last, legacy=True,
                            torch_off=False, end_to_end_check=False, **FAST)
    _check(r, model, x, cudnn_algos.DIRECTIONS)
    assert any(p.spec.groups > 1 for p in r.problems), "depthwise layers are profiled"
    assert all(p.dtype == "float16" and p.memory_format == "channels_last" for p in r.problems)
    assert all(row.legacy_best_kernel_ms is not None for row in r.layer_rows())


def test_r3d_18_small_clip_forward():
    tv = pytest.importorskip("torchvision")
    model, x = tv.models.video.r3d_18(), torch.randn(1, 3, 8, 56, 56)
    r = cudnn_algos.profile(model, x, directions=("forward",), torch_off=False, end_to_end_check=False, **FAST)
    _check(r, model, x, ("forward",))
    assert all(p.spec.ndim == 3 for p in r.problems)


def test_conv1d_stack():
    model = torch.nn.Sequential(torch.nn.Conv1d(80, 256, 5, padding=2), torch.nn.ReLU(),
                                torch.nn.Conv1d(256, 256, 3, padding=1, groups=4), torch.nn.ReLU(),
                                torch.nn.Conv1d(256, 256, 3, padding=1, groups=4))
    x = torch.randn(4, 80, 1000)
    r = cudnn_algos.profile(model, x, torch_off=False, end_to_end_check=False, **FAST)
    _check(r, model, x, cudnn_algos.DIRECTIONS)
    assert len(r.problems) == 2 and r.problems[1].count == 2


class _Mixed(torch.nn.Module):
    """A module conv and a functional one (F.conv2d on a parameter inside forward), as many real models mix them."""

    def __init__(self):
        super().__init__()
        self.stem = torch.nn.Conv2d(3, 16, 3, padding=1)
        self.w = torch.nn.Parameter(torch.randn(32, 16, 3, 3) * 0.1)

    def forward(self, x):
        return torch.nn.functional.conv2d(self.stem(x).relu(), self.w, stride=2, padding=1)


def test_functional_convolution_is_profiled_under_its_module_with_nvtx_ranges_open():
    """F.conv2d inside a forward is found (aten level), named after the calling module, searched like the others;
    the NVTX ranges around every candidate's timing do not disturb the run."""
    model, x = _Mixed(), torch.randn(4, 3, 32, 32)
    torch.cuda.nvtx.range_push("user range")  # a user's own NVTX range around the whole profile
    try:
        r = cudnn_algos.profile(model, x, directions=("forward", "backward_data"), torch_off=False,
                                end_to_end_check=False, **FAST)
    finally:
        torch.cuda.nvtx.range_pop()
    assert r.n_conv_calls == 2 and len(r.problems) == 2
    names = sorted(n for p in r.problems for n in p.layers)
    assert names == ["<model>/F.conv2d", "stem"], names  # the functional call is named by its caller (the top here)
    fn = next(p for p in r.problems if "stem" not in p.layers)
    assert fn.input_shape == (4, 16, 32, 32) and fn.spec.stride == (2, 2)
    for p in r.problems:
        for d, e in p.engines.items():
            b = e.best_eligible
            assert b is not None and b.measured.rel_err < TOL[p.dtype], (p.spec, d, b)
