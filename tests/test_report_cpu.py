"""CPU: model discovery (meta-device pass), the built-in ResNet-50, the engine-space report's arithmetic, rendering,
JSON round trip, figures, and (when present) a report recorded by a real H200 run (tests/fixtures/, see its README).
Hand-made reports claim nothing about cuDNN; the recorded one is checked for its own arithmetic."""
from pathlib import Path

import pytest
import torch

from cudnn_algos import load_json
from cudnn_algos.model import discover
from cudnn_algos.results import ModelReport
from cudnn_algos.builtin_models import resnet50, resnet50_convs

FIXTURES = Path(__file__).parent / "fixtures"
RECORDED = sorted(FIXTURES.glob("profile_*_engines.json*"))


def test_discover_builtin_resnet50_matches_the_table():
    uses = discover(resnet50(), torch.randn(32, 3, 224, 224))
    assert len(uses) == 53
    problems = {}
    for u in uses:
        problems.setdefault((u.spec, u.input_shape), []).append(u.name)
    table = {(spec, shape): count for _, spec, shape, count in resnet50_convs(32)}
    assert {k: len(v) for k, v in problems.items()} == table
    assert uses[0].name == "conv1" and uses[0].input_shape == (32, 3, 224, 224)
    assert any(u.name == "layer2.0.downsample.0" for u in uses)


def test_discover_sees_layout_dtype_and_reuse():
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Conv2d(4, 4, 3, padding=1)

        def forward(self, x):
            return self.a(self.a(x))  # one module, two calls

    x = torch.randn(2, 4, 8, 8, dtype=torch.float64).contiguous(memory_format=torch.channels_last)
    uses = discover(Net().double(), x)
    assert [u.name for u in uses] == ["a", "a"]
    assert uses[0].dtype == torch.float64 and uses[0].memory_format == "channels_last"


def test_discover_conv1d_and_3d_and_transposed():
    m = torch.nn.Sequential(torch.nn.Conv1d(80, 128, 5, padding=2), torch.nn.ReLU(), torch.nn.Conv1d(128, 128, 3),
                            torch.nn.ConvTranspose1d(128, 64, 4, stride=2))
    uses = discover(m, torch.randn(4, 80, 100))
    assert [u.input_shape for u in uses] == [(4, 80, 100), (4, 128, 100), (4, 128, 98)]
    assert uses[2].spec.transposed


def test_totals_add_up(make):
    r = make.model_report()
    t = r.totals()
    # forward: problem 0 (1 use): best eligible eng2 0.018 vs torch on 0.021, off 0.025;
    #          problem 1 (2 uses): eng2 0.018 vs torch on 0.040 (no off)
    assert t["forward"]["best_ms"] == pytest.approx(0.018 * 3) and t["forward"]["on_ms"] == pytest.approx(0.021 + 0.080)
    assert t["forward"]["ratio_on"] == pytest.approx(0.054 / 0.101)
    assert t["forward"]["off_ms"] == pytest.approx(0.025) and t["forward"]["ratio_off"] == pytest.approx(0.018 / 0.025)
    assert t["backward_data"]["ratio_on"] == pytest.approx(0.018 / 0.021)
    assert t["all"]["best_ms"] == pytest.approx(t["forward"]["best_ms"] + t["backward_data"]["best_ms"])
    assert t["forward"]["host_best_ms"] == pytest.approx(0.012 * 3) and t["forward"]["host_on_ms"] == pytest.approx(0.09)
    rows = r.layer_rows()
    assert len(rows) == 4 and [x.layer for x in rows] == ["a", "a", "b.0", "b.1"]
    assert rows[0].torch_on == "eng0" and rows[0].torch_off == "eng2" and rows[0].legacy_best == "IMPLICIT_PRECOMP_GEMM/tensor_op"
    assert rows[0].ratio_off == pytest.approx(0.018 / 0.025)


def test_text_report_and_e2e_sentence(make):
    text = str(make.model_report())
    assert "Net: 3 convolution calls, 2 distinct problems" in text
    assert "b.0 +1" in text and "\nforward (ms per call" in text and "0.857" in text and "0.720" in text
    assert "8>16 1x1" in text and "8>8 3x3 p1" in text
    assert max(len(line) for line in text.splitlines()) <= 120
    assert "benchmark mode: +5.0% per step (10.00 -> 10.50 ms, forward+backward, fresh processes), 11.50 s to warm up" in text
    assert "torch's benchmark-mode search of the same problems in this process: 0.1 s" in text


def test_report_round_trip_and_formats(make, tmp_path):
    r = make.model_report()
    assert ModelReport.load(r.to_json()) == r
    pytest.importorskip("pandas")
    df = r.summary_dataframe()
    assert list(df.layer) == ["a", "a", "b.0", "b.1"]
    assert {"ratio_on", "ratio_off", "dtype", "memory_format", "gpu", "cudnn", "best_source"} <= set(df.columns)
    r.to_csv(str(tmp_path / "r.csv"))
    assert (tmp_path / "r.csv").read_text().startswith("model,layers,uses,spec,input_shape")
    assert "<table>" in r.to_html(str(tmp_path / "r.html"))


def test_rich_table_renders(make):
    pytest.importorskip("rich")
    from rich.console import Console

    c = Console(record=True, width=200)
    c.print(make.model_report().rich_table())
    text = c.export_text()
    assert "eng2" in text and "0.857" in text


def test_figures_render_headless(make, tmp_path):
    pytest.importorskip("matplotlib")
    paths = make.model_report().plot(str(tmp_path), formats=("png", "svg"))
    assert len(paths) == 4 and all(Path(p).stat().st_size > 1000 for p in paths)


@pytest.mark.skipif(not RECORDED, reason="no recorded engine-space profile in tests/fixtures")
@pytest.mark.parametrize("path", RECORDED, ids=lambda p: p.name)
def test_recorded_real_profile(path, tmp_path):
    """A report recorded on the H200: it loads, round-trips, and its totals are the sums of its own rows."""
    r = load_json(str(path))
    assert isinstance(r, ModelReport) and r.env.gpu_name.startswith("NVIDIA")
    assert ModelReport.load(r.to_json()) == r
    rows = r.layer_rows()
    assert len(rows) == r.n_conv_calls * len(r.directions)
    t = r.totals()
    for d in r.directions:
        mine = [x for x in rows if x.direction == d and x.best_kernel_ms is not None and x.torch_on_kernel_ms]
        assert t[d]["best_ms"] == pytest.approx(sum(x.best_kernel_ms for x in mine))
        assert t[d]["on_ms"] == pytest.approx(sum(x.torch_on_kernel_ms for x in mine))
        assert t[d]["ratio_on"] == pytest.approx(t[d]["best_ms"] / t[d]["on_ms"])
    for p in r.problems:
        for d, s in p.engines.items():
            b = s.best_eligible
            if b is None:
                continue
            # the reported best was run and checked against a float64 reference, and beats or ties every
            # confirmed configuration torch would accept
            assert b.measured.rel_err is not None and b.measured.rel_err < 2e-2
            assert all(b.kernel_ms <= x.kernel_ms for x in s.succeeded
                       if x.measured and x.measured.confirmed and not x.torch_filter and x.kernel_ms)
            assert s.torch is not None and s.torch.kernels, f"torch's kernels were read for {p.spec} {d}"
    text = str(r)
    assert "total forward" in text and "best/on" in text
    assert max(len(line) for line in text.splitlines()) <= 120, "the main job's table fits an ordinary terminal"
    if pytest.importorskip("matplotlib"):
        assert len(r.plot(str(tmp_path), formats=("png",))) == 2


def test_builtin_resnet50_matches_torchvision_when_available():
    tv = pytest.importorskip("torchvision")
    ours = {n: (m.in_channels, m.out_channels, m.kernel_size, m.stride, m.padding)
            for n, m in resnet50().named_modules() if isinstance(m, torch.nn.Conv2d)}
    theirs = {n: (m.in_channels, m.out_channels, m.kernel_size, m.stride, m.padding)
              for n, m in tv.models.resnet50().named_modules() if isinstance(m, torch.nn.Conv2d)}
    assert ours == theirs


def test_builtin_resnet50_can_travel_to_a_fresh_process():
    import io

    buf = io.BytesIO()
    torch.save(resnet50(), buf)  # the end-to-end check pickles the model for a fresh process
    assert buf.getbuffer().nbytes > 50 * 2**20


@pytest.mark.skipif(not RECORDED, reason="no recorded engine-space profile in tests/fixtures")
def test_recorded_runs_fidelity_table():
    """The recorded H200 runs carry both clocks for every measured row: the table computed from them (what the
    device script printed) holds >= 95% within 5% in every size class and row kind with 20 or more rows."""
    from cudnn_algos.results import SIZE_CLASSES, fidelity_pairs

    pairs = fidelity_pairs([load_json(str(p)) for p in RECORDED])
    assert len(pairs) > 1000 and {p["kind"] for p in pairs} == {"legacy", "engine", "torch op"}
    for _, lo, hi in SIZE_CLASSES:
        for kind in ("legacy", "engine", "torch op"):
            dev = [abs(p["kernel_ms"] / p["reference_ms"] - 1) for p in pairs
                   if p["kind"] == kind and lo <= p["reference_ms"] < hi]
            if len(dev) >= 20:  # a class of a dozen rows is decided by one outlier
                assert sum(d <= 0.05 for d in dev) / len(dev) >= 0.95, (kind, lo, hi, len(dev))


def test_a_failed_search_is_reported_not_fatal(make):
    from dataclasses import replace

    r = make.model_report()
    p1 = r.problems[1]
    p1 = replace(p1, engines={}, errors={"forward": "CudnnError: CUDNN_STATUS_NOT_SUPPORTED [convolution: ...]"})
    r = replace(r, problems=(r.problems[0], p1))
    text = str(r)
    assert "1 search(es) failed and are left out of the totals: #1 forward: CudnnError" in text
    assert ModelReport.load(r.to_json()) == r
    assert [x.layer for x in r.layer_rows()] == ["a", "a"]  # the failed problem's uses have no rows


class _Mixed(torch.nn.Module):
    """A module convolution, a functional one inside a submodule's forward, a functional transposed one at the top."""

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(8, 2, 3, 3))

        def forward(self, x):
            return torch.nn.functional.conv2d(x, self.w, padding=1, groups=4)

    def __init__(self):
        super().__init__()
        self.stem = torch.nn.Conv2d(3, 8, 3, padding="same", padding_mode="reflect")
        self.block = self.Block()
        self.up = torch.nn.Parameter(torch.randn(8, 4, 2, 2))

    def forward(self, x):
        y = self.block(self.stem(x))
        return torch.nn.functional.conv_transpose2d(y, self.up, stride=2)


def test_discover_finds_functional_and_module_convolutions():
    uses = discover(_Mixed(), torch.randn(2, 3, 16, 16))
    assert [u.name for u in uses] == ["stem", "block/F.conv2d", "<model>/F.conv_transpose2d"]
    stem, block, up = uses
    assert not stem.functional and stem.spec.padding_mode == "reflect" and stem.input_shape == (2, 3, 16, 16)
    assert block.functional and block.spec.groups == 4 and block.spec.in_channels == 8 and block.spec.padding == (1, 1)
    assert up.spec.transposed and up.spec.out_channels == 4 and up.spec.stride == (2, 2)
    # the specs describe the same convolutions torch ran: output shapes agree with a real forward pass
    assert up.spec.shapes(up.input_shape).output_shape == (2, 4, 32, 32)
    assert block.spec.shapes(block.input_shape).output_shape == (2, 8, 16, 16)


def test_discover_reads_channels_last_from_the_weight_where_the_meta_pass_loses_it():
    """On the meta device a convolution's output comes out contiguous: the next layer's layout is read from its
    weight as torch's cuDNN path reads it (a 1x1 filter by its exact strides)."""
    from cudnn_algos.model import discover

    m = torch.nn.Sequential(torch.nn.Conv2d(8, 32, 3, padding=1), torch.nn.ReLU(),
                            torch.nn.Conv2d(32, 32, 3, padding=1, groups=4), torch.nn.Conv2d(32, 16, 1, stride=2))
    x = torch.randn(2, 8, 16, 16)
    assert [u.memory_format for u in discover(m, x)] == ["contiguous"] * 3
    m = m.to(memory_format=torch.channels_last)
    x = x.contiguous(memory_format=torch.channels_last)
    assert [u.memory_format for u in discover(m, x)] == ["channels_last"] * 3
