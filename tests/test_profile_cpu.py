"""CPU: model discovery (meta-device pass), the built-in ResNet-50, report rendering, JSON round trip, figures.

Reports here are assembled from hand-made search results (formatting only) or loaded from a fixture saved by a
real H200 run (tests/fixtures/, see its README); nothing here claims GPU behaviour."""
import json
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from cudnn_algos.profile import EndToEnd, ModelReport, ProblemEntry, discover
from cudnn_algos.zoo import resnet50, resnet50_convs

from test_results import ENV, make

FIXTURES = Path(__file__).parent / "fixtures"


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


def _report(measured=False, e2e=True):
    spec_result = make()
    fwd = replace(spec_result, heuristic_choice="WINOGRAD_NONFUSED/default")
    bwd = replace(make(direction="backward_data"), heuristic_choice="IMPLICIT_PRECOMP_GEMM/tensor_op")
    p0 = ProblemEntry(spec=fwd.spec, input_shape=fwd.shapes.input_shape, dtype="float16",
                      memory_format="channels_last", layers=("layer1.conv", "layer2.conv"),
                      results={"forward": fwd, "backward_data": bwd})
    e = EndToEnd(backward=True, iterations=10, step_ms_off=10.0, step_ms_on=9.0, first_step_s_off=1.0,
                 first_step_s_on=3.0) if e2e else None
    return ModelReport(model="toy", problems=(p0,), directions=("forward", "backward_data"), measured=measured,
                       env=ENV, e2e=e2e and e, search_s=1.5, wall_s=4.0, n_conv_calls=2, created="2026-11-29")


def test_totals_add_up():
    r = _report()
    t = r.totals()
    # forward: best 0.20 (IMPLICIT_PRECOMP_GEMM), heuristic WINOGRAD_NONFUSED 0.25; two layer uses
    assert t["forward"]["best_ms"] == pytest.approx(0.40) and t["forward"]["heuristic_ms"] == pytest.approx(0.50)
    assert t["forward"]["saving_pct"] == pytest.approx(20.0)
    assert t["all"]["best_ms"] == pytest.approx(t["forward"]["best_ms"] + t["backward_data"]["best_ms"])
    assert len(r.layer_rows()) == 4


def test_text_report_and_e2e_sentence():
    text = str(_report())
    assert "toy: 2 convolution calls, 1 distinct problems" in text
    assert "layer1.conv +1" in text and "fwd best" in text and "1.2x" in text
    assert "benchmark mode: -10.0% per step (10.00 -> 9.00 ms, forward+backward, fresh processes), 2.00 s to warm up" in text
    assert "pays for itself after 2,000 steps" in text


def test_report_json_round_trip_and_formats(tmp_path):
    r = _report()
    again = ModelReport.load(r.to_json())
    assert again == r
    pytest.importorskip("pandas")
    df = r.to_dataframe()
    assert list(df.layer) == ["layer1.conv", "layer2.conv", "layer1.conv", "layer2.conv"]
    r.to_csv(str(tmp_path / "r.csv"))
    assert (tmp_path / "r.csv").read_text().startswith("layer,problem,direction")
    assert "<table>" in r.to_html(str(tmp_path / "r.html"))


def test_rich_table_renders():
    rich = pytest.importorskip("rich")
    from rich.console import Console

    c = Console(record=True, width=200)
    c.print(_report().rich_table())
    assert "IMPLICIT_PRECOMP_GEMM" in c.export_text()
    assert rich


def test_figures_render_headless(tmp_path):
    pytest.importorskip("matplotlib")
    paths = _report().plot(str(tmp_path), formats=("png", "svg"))
    assert len(paths) == 6 and all(Path(p).stat().st_size > 1000 for p in paths)


@pytest.mark.skipif(not (FIXTURES / "profile_resnet50_fp16.json").exists(), reason="fixture not present")
def test_fixture_from_a_real_h200_run(tmp_path):
    r = ModelReport.load(str(FIXTURES / "profile_resnet50_fp16.json"))
    assert r.env.gpu_name.startswith("NVIDIA") and r.measured
    assert len(r.problems) == 23 and r.n_conv_calls == 53
    assert ModelReport.from_dict(json.loads(r.to_json())) == r
    text = str(r)
    assert "total forward" in text and "benchmark mode:" in text
    t = r.totals()
    assert t["all"]["best_ms"] <= t["all"]["heuristic_ms"] + 1e-9
    if pytest.importorskip("matplotlib"):
        assert len(r.plot(str(tmp_path), formats=("png",))) == 3


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
