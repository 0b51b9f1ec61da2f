"""The fused search's parts that need no GPU: the epilogue's names and arguments, its table agreeing with the
extension's (csrc/search/graph.h, kEpilogueOps), the operands it makes, the graph operands' shapes and layouts, the
folded BatchNorm, the float64 reference against torch's own ops in float64, a result's table, summary and JSON round
trip, and find_engines(epilogue=...)'s argument checks. CPU only; the fused graphs themselves are built, timed and
checked against torch by tests/test_fused_gpu.py."""
from __future__ import annotations

import math

import pytest
import torch

from cudnn_algos import epilogue as ep


def test_epilogue_names_parse_from_a_sequence_or_one_comma_separated_string():
    assert ep.parse_epilogue("bn,relu") == ("bn", "relu")
    assert ep.parse_epilogue(["bias", "add", "relu"]) == ("bias", "add", "relu")
    with pytest.raises(ValueError, match=r"epilogue=\['bn', 'swish'\]: 'swish' is not one of: bias, bn"):
        ep.parse_epilogue(["bn", "swish"])
    with pytest.raises(TypeError, match="epilogue=3 must be a sequence"):
        ep.parse_epilogue(3)
    with pytest.raises(TypeError, match="None is not an op name"):
        ep.parse_epilogue(["relu", None])
    with pytest.raises(ValueError, match="1 to 8 ops"):
        ep.parse_epilogue([])
    with pytest.raises(ValueError, match="1 to 8 ops"):
        ep.parse_epilogue(["relu"] * 9)


def test_bn_becomes_a_scale_and_a_bias_in_the_graph_and_hardswish_is_composed():
    assert ep.graph_ops(("bn", "add", "relu")) == ("scale", "bias", "add", "relu")
    assert ep.graph_ops(("bias", "silu")) == ("bias", "silu")
    assert ep.graph_ops(("bias", "hardsigmoid")) == ("bias", "bias", "relu6", "scale")
    assert ep.graph_ops(("bn", "add", "hardswish")) == ("scale", "bias", "add", "keep", "bias", "relu6", "scale",
                                                        "mul_kept")
    assert ep.not_in_graph(("bn", "relu")) == "" and ep.not_in_graph(("bias", "hardswish")) == ""
    # every composed op is made of graph ops; the two helper ops are not a user's
    assert {g for parts in ep.COMPOSED.values() for g, _ in parts} <= set(ep.GRAPH_OPS)
    assert set(ep.GRAPH_OPS) - {"keep", "mul_kept"} <= set(ep.OPS) and "keep" not in ep.OPS
    with pytest.raises(ValueError, match="'keep' is not one of"):
        ep.parse_epilogue("bias,keep")


def test_an_op_with_no_graph_form_is_named_and_graph_ops_refuses_it(monkeypatch):
    monkeypatch.setitem(ep.NOT_IN_GRAPH, "tanh", "tanh has no graph form here")
    assert ep.not_in_graph(("bias", "tanh")) == "tanh has no graph form here"
    with pytest.raises(ValueError, match="tanh has no graph form here"):
        ep.graph_ops(("tanh",))


def _run_graph_ops(gops, v, operands):
    """The graph ops these tests use, run as cuDNN is told them (keep marks the value, mul_kept multiplies by it),
    each operand-bearing op taking the next of `operands`; every operand must be used."""
    it, kept = iter(operands), None
    for g in gops:
        if g == "keep":
            kept = v
        elif g in ("bias", "add"):
            v = v + next(it)
        elif g == "scale":
            v = v * next(it)
        elif g == "relu6":
            v = v.clamp(0, 6)
        elif g == "mul_kept":
            v = v * kept
    assert next(it, None) is None, "every operand used"
    return v


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_the_composed_ops_compute_torchs_hardswish_and_hardsigmoid(dtype):
    """The COMPOSED sequences, evaluated op by op as the fused graph runs them (keep marks the value, mul_kept
    multiplies by it; constants per channel), equal torch's hardswish and hardsigmoid, across the kinks at -3 and 3."""
    x = torch.cat([torch.linspace(-5, 5, 101, dtype=dtype), torch.tensor([-3.0, 3.0, 0.0], dtype=dtype)])
    x = x.reshape(1, -1, 1, 1).repeat(2, 1, 3, 2)
    for name, torch_op in (("hardswish", torch.nn.functional.hardswish),
                           ("hardsigmoid", torch.nn.functional.hardsigmoid)):
        consts = ep.graph_operands((name,), [{}], tuple(x.shape), dtype, torch.contiguous_format)
        v = _run_graph_ops(ep.graph_ops((name,)), x, consts)
        torch.testing.assert_close(v, torch_op(x), rtol=1e-6 if dtype == torch.float32 else 1e-12, atol=0)


def test_residual_slot_counts_the_operands_before_the_add():
    assert ep.residual_slot(("bias", "relu")) is None
    assert ep.residual_slot(("bias", "add", "relu")) == 1
    assert ep.residual_slot(("bn", "add", "relu")) == 2
    assert ep.residual_slot(("bias", "hardswish", "add")) == 3  # the bias, then hardswish's 3 and 1/6
    c, shape = 4, (1, 4, 3, 3)
    ops = ("bias", "hardsigmoid", "add", "hardswish")
    o = ep.make_operands(ops, shape, torch.float32, torch.contiguous_format, "cpu")
    g = ep.graph_operands(ops, o, shape, torch.float32, torch.contiguous_format)
    at = ep.residual_slot(ops)
    assert g[at].shape == shape and [t.shape for t in g[:at]] == [(1, c, 1, 1)] * at
    assert [float(t.flatten()[0]) for t in g[1:at]] == [3.0, pytest.approx(1 / 6)]
    no_res = ep.graph_operands(ops, [d if "residual" not in d else {} for d in o], shape, torch.float32,
                               torch.contiguous_format)
    assert len(no_res) == len(g) - 1 and all(a is not g[at] for a in no_res)


def test_the_extension_names_the_same_graph_ops_in_the_same_order():
    from cudnn_algos import _ext

    try:
        ext = _ext.load()
    except Exception as e:  # noqa: BLE001  (what importing the built extension raises here is the skip's reason)
        pytest.skip(f"the extension cannot be imported here: {type(e).__name__}: {e}")
    assert list(ext.Epilogue.__members__) == list(ep.GRAPH_OPS)


@pytest.mark.parametrize("fmt,shape", [(torch.contiguous_format, (2, 6, 5, 7)), (torch.channels_last, (2, 6, 5, 7)),
                                       (torch.channels_last_3d, (1, 4, 3, 5, 2))])
def test_operands_are_random_in_range_and_graph_operands_have_the_graph_shapes(fmt, shape):
    ops = ("bias", "bn", "scale", "relu", "add")
    g = torch.Generator().manual_seed(0)
    o = ep.make_operands(ops, shape, torch.float32, fmt, "cpu", generator=g)
    c = shape[1]
    assert [sorted(d) for d in o] == [["bias"], ["bias", "mean", "var", "weight"], ["scale"], [], ["residual"]]
    assert o[0]["bias"].shape == (c,) and bool((o[0]["bias"] != 0).all())
    assert bool((o[1]["var"] >= 0.5).all()) and bool((o[1]["weight"] >= 0.5).all())
    assert bool(((o[2]["scale"] >= 0.5) & (o[2]["scale"] < 1.5)).all())
    assert o[4]["residual"].shape == shape and o[4]["residual"].is_contiguous(memory_format=fmt)
    g_ops = ep.graph_operands(ops, o, shape, torch.float16, fmt)
    per_channel = (1, c) + (1,) * (len(shape) - 2)
    # bias; bn's scale and shift; scale; the residual — the graph's order (graph_ops)
    assert [tuple(t.shape) for t in g_ops] == [per_channel] * 4 + [shape]
    assert all(t.dtype == torch.float16 for t in g_ops)
    assert all(t.stride(1) == 1 for t in g_ops[:4])  # channels innermost in either layout: what cuDNN is told
    assert g_ops[4].is_contiguous(memory_format=fmt)


def test_folded_batchnorm_factors_match_torchs_batch_norm_in_float64():
    g = torch.Generator().manual_seed(1)
    o = ep.make_operands(("bn",), (3, 5, 4, 4), torch.float64, torch.contiguous_format, "cpu", generator=g)[0]
    x = torch.randn(3, 5, 4, 4, dtype=torch.float64, generator=g)
    scale, shift = ep.bn_factors(o)
    want = torch.nn.functional.batch_norm(x, o["mean"], o["var"], o["weight"], o["bias"], False, 0.0, ep.BN_EPS)
    got = x * scale.view(1, -1, 1, 1) + shift.view(1, -1, 1, 1)
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("ops", [("bias", "relu"), ("bn", "relu"), ("bn", "add", "relu"), ("bias", "silu"),
                                 ("scale", "gelu"), ("bias", "gelu_tanh"), ("bn", "relu6"), ("bias", "sigmoid"),
                                 ("add", "tanh"), ("bn", "hardswish"), ("bias", "hardsigmoid"), ("relu", "add")])
def test_the_float64_reference_is_torchs_eager_sequence_in_float64(ops):
    shape = (2, 6, 5, 5)
    g = torch.Generator().manual_seed(2)
    o = ep.make_operands(ops, shape, torch.float64, torch.contiguous_format, "cpu", generator=g)
    x = 3 * torch.randn(shape, dtype=torch.float64, generator=g)  # values past relu6's clip and deep in the tails
    torch.testing.assert_close(ep.apply_reference(ops, x, o), ep.apply_torch(ops, x, o), rtol=1e-12, atol=1e-12)
    assert ep.eager_kernels(ops) == len(ops)


def test_a_fused_result_renders_summarises_and_round_trips_through_json():
    from dataclasses import replace

    from conftest import ENV, measurement
    from cudnn_algos.problem import make_problem
    from cudnn_algos.results import FusedRow, FusedSearchResult, load_json

    def m(ms, err=1e-3):
        return replace(measurement(ms), rel_err=err, max_abs_err=err)

    p = make_problem(torch.nn.Conv2d(64, 64, 3, padding=1), (8, 64, 28, 28), "float16", "channels_last")
    rows = (FusedRow(kind="fused", name="eng12{TILE_SIZE=3}", status="SUCCESS", engine_id=12,
                     knobs=(("TILE_SIZE", 3),), behavior_notes=("RUNTIME_COMPILATION",), workspace_bytes=0,
                     build_ms=850.0, sources=("heuristic_instant",), measured=m(0.050)),
            FusedRow(kind="fused", name="eng40", status="NOT_SUPPORTED", stage="plan", engine_id=40),
            FusedRow(kind="fused", name="eng41", status="SUCCESS", engine_id=41, measured=m(0.040, 0.5)),  # wrong
            FusedRow(kind="unfused", name="eng0{TILE_SIZE=1} + torch", status="SUCCESS", engine_id=0,
                     measured=m(0.070)),
            FusedRow(kind="torch", name="torch eager", status="SUCCESS", measured=m(0.080)))
    res = FusedSearchResult(rows=rows, spec=p.spec, shapes=p.shapes, cudnn_direction="forward",
                            epilogue=("bn", "relu"), graph_ops=("scale", "bias", "relu"), dtype="float16",
                            memory_format="channels_last", engine_count=60, search_ms=900.0,
                            env=ENV, flops=p.flops())
    assert res.best.name == "eng12{TILE_SIZE=3}"  # eng41 is faster but wrong
    assert res.best_unfused.name.startswith("eng0") and res.torch_eager.name == "torch eager"
    assert math.isclose(res.speedup("torch"), 0.080 / 0.050) and math.isclose(res.speedup("unfused"), 0.070 / 0.050)
    assert res.best.runtime_compiled
    text = str(res)
    assert "+ bn,relu" in text and "NOT_SUPPORTED" in text and "fused 1.60x vs torch eager" in res.summary()
    back = load_json(res.to_json())
    assert isinstance(back, FusedSearchResult) and back == res
    df = res.to_dataframe()
    assert list(df["kind"]) == ["fused", "fused", "fused", "unfused", "torch"]
    assert df.loc[0, "build_ms"] == 850.0 and bool(df.loc[0, "runtime_compiled"])


def test_every_output_format_writes_a_fused_result_or_says_why(tmp_path):
    """results.writers on a FusedSearchResult (made up, no GPU): CSV, Parquet and HTML written; the trace (no
    timeline in a fused search) a ValueError, the writers' contract, never another exception."""
    from conftest import ENV, measurement
    from cudnn_algos.problem import make_problem
    from cudnn_algos.results import FusedRow, FusedSearchResult
    from cudnn_algos.results.writers import WRITERS

    p = make_problem(torch.nn.Conv2d(8, 8, 3, padding=1), (2, 8, 8, 8), "float16", "channels_last")
    res = FusedSearchResult(rows=(FusedRow(kind="fused", name="eng4<&>", status="SUCCESS", engine_id=4,
                                           measured=measurement(0.02)),
                                  FusedRow(kind="torch", name="torch eager", status="SUCCESS",
                                           measured=measurement(0.03))),
                            spec=p.spec, shapes=p.shapes, cudnn_direction="forward", epilogue=("bias", "relu"),
                            graph_ops=("bias", "relu"), dtype="float16", memory_format="channels_last",
                            engine_count=1, search_ms=1.0, env=ENV, flops=p.flops())
    for name, w in WRITERS.items():
        path = tmp_path / f"out.{name}"
        if name == "parquet":
            pytest.importorskip("pyarrow")
        if name == "trace":
            with pytest.raises(ValueError, match="FusedSearchResult"):
                w.write(res, str(path))
            assert not path.exists()
            continue
        w.write(res, str(path))
        assert path.stat().st_size > 0
    page = (tmp_path / "out.html").read_text()
    assert "eng4&lt;&amp;&gt;" in page and "<pre>" in page  # its text, escaped
    # compare lines up searches and model reports: a fused result is a typed error naming the file, not a KeyError
    from conftest import run_cli
    from cudnn_algos.comparison import compare

    with pytest.raises(TypeError, match="a: a FusedSearchResult has no"):
        compare(res, res)
    res.to_json(str(tmp_path / "f.json"))
    r = run_cli("compare", str(tmp_path / "f.json"), str(tmp_path / "f.json"))
    assert r.returncode == 2 and f"{tmp_path / 'f.json'}: a FusedSearchResult has no" in r.stderr, r.stderr


def test_a_result_with_no_graph_says_why_and_has_no_speedup():
    from conftest import ENV
    from cudnn_algos.problem import make_problem
    from cudnn_algos.results import FusedRow, FusedSearchResult

    p = make_problem(torch.nn.Conv2d(8, 8, 1), (1, 8, 4, 4), "float16", "channels_last")
    why = "hardswish has no pointwise mode (a stand-in reason: every op has a graph form today)"
    res = FusedSearchResult(rows=(FusedRow(kind="fused", name="fused graph", status="NOT_SUPPORTED", stage="graph",
                                           note=why),), spec=p.spec, shapes=p.shapes, cudnn_direction="forward",
                            epilogue=("hardswish",), graph_ops=(), dtype="float16", memory_format="channels_last",
                            engine_count=0, search_ms=0.0, env=ENV, note=why)
    assert res.best is None and res.speedup() is None
    assert "fused: none ran (hardswish has no pointwise mode" in res.summary()


def test_find_engines_with_an_epilogue_checks_what_does_not_apply_before_any_gpu_work():
    import cudnn_algos

    conv = torch.nn.Conv2d(8, 8, 3)
    with pytest.raises(ValueError, match="these arguments do not apply to it: refine, screen"):
        cudnn_algos.find_engines(conv, (1, 8, 8, 8), epilogue="bn,relu", refine=2, screen=3, measure=True)
    with pytest.raises(ValueError, match="direction='backward_data': an epilogue follows the forward pass"):
        cudnn_algos.find_engines(conv, (1, 8, 8, 8), epilogue="relu", direction="backward_data")
    with pytest.raises(ValueError, match="'mish' is not one of"):
        cudnn_algos.find_fused(conv, (1, 8, 8, 8), "bn,mish")
    with pytest.raises(ValueError, match="max_configs"):
        cudnn_algos.find_fused(conv, (1, 8, 8, 8), "relu", max_configs=0)
    with pytest.raises(ValueError, match="heuristics"):
        cudnn_algos.find_fused(conv, (1, 8, 8, 8), "relu", heuristics=("c",))
    with pytest.raises(ValueError, match="input_shape"):
        cudnn_algos.find_fused(conv, (1, 7, 8, 8), "relu")


class _Block(torch.nn.Module):
    """conv-bn-relu, conv-bn (+ the block's input) -relu twice over, a hardswish layer, a bare conv and a functional
    one: every kind of row profile(fusion=True) writes."""

    def __init__(self):
        super().__init__()
        self.c1, self.b1 = torch.nn.Conv2d(8, 8, 3, padding=1, bias=False), torch.nn.BatchNorm2d(8)
        self.c2, self.b2 = torch.nn.Conv2d(8, 8, 3, padding=1, bias=False), torch.nn.BatchNorm2d(8)
        self.c3, self.b3 = torch.nn.Conv2d(8, 8, 3, padding=1, bias=False), torch.nn.BatchNorm2d(8)
        self.c4, self.b4 = torch.nn.Conv2d(8, 8, 3, padding=1, bias=False), torch.nn.BatchNorm2d(8)
        self.hs = torch.nn.Sequential(torch.nn.Conv2d(8, 8, 1), torch.nn.Hardswish())
        self.last = torch.nn.Conv2d(8, 4, 1)
        self.w = torch.nn.Parameter(torch.randn(4, 4, 1, 1))

    def forward(self, x):
        y = torch.relu(self.b1(self.c1(x)))
        y = torch.relu(self.b2(self.c2(y)) + x)
        z = torch.relu(self.b3(self.c3(y)))
        z = torch.relu(self.b4(self.c4(z)) + y)
        return torch.nn.functional.conv2d(self.last(self.hs(z)), self.w)


def test_profile_fusion_rows_dedup_totals_and_round_trip(monkeypatch):
    """The report's plumbing with a stand-in for find_fused (no GPU result is claimed: the numbers are made up): one
    search per distinct chain, rows in model order with why where nothing fuses, totals times uses."""
    from conftest import ENV, measurement
    from cudnn_algos.model import fusion_profile
    from cudnn_algos.results import FusedRow, FusedSearchResult, FusionReport, load_json

    calls = []

    def fake(spec, shape, ops, **kw):
        calls.append((spec, tuple(shape), ops))
        rows = [FusedRow(kind="unfused", name="eng0 + torch", status="SUCCESS", measured=measurement(0.03)),
                FusedRow(kind="torch", name="torch eager", status="SUCCESS", measured=measurement(0.04))]
        if "add" in ops:  # say cuDNN fuses the residual chains and not the others
            rows.insert(0, FusedRow(kind="fused", name="eng12", status="SUCCESS", build_ms=500.0,
                                    measured=measurement(0.02)))
        else:
            rows.insert(0, FusedRow(kind="fused", name="fused graph", status="NOT_SUPPORTED", stage="graph"))
        p = __import__("cudnn_algos.problem", fromlist=["make_problem"]).make_problem(spec, shape)
        return FusedSearchResult(rows=tuple(rows), spec=p.spec, shapes=p.shapes, cudnn_direction="forward",
                                 epilogue=tuple(ops), graph_ops=(), dtype="float32", memory_format="contiguous",
                                 engine_count=1, search_ms=1.0, env=ENV)

    monkeypatch.setitem(ep.NOT_IN_GRAPH, "hardswish", "hardswish has no pointwise mode (a stand-in)")
    monkeypatch.setattr(fusion_profile, "find_fused", fake)
    monkeypatch.setattr(fusion_profile, "environment", lambda dev: ENV)
    monkeypatch.setattr(fusion_profile, "device_index", lambda d: 0)
    model = _Block().train()
    rep = fusion_profile.profile_fusion(model, torch.randn(2, 8, 16, 16), progress=False, name="block")
    assert model.training  # left as it was
    assert [c.conv for c in rep.chains] == ["c1", "c2", "c3", "c4", "hs.0", "last"]
    assert [c.ops for c in rep.chains] == [("bn", "relu"), ("bn", "add", "relu"), ("bn", "relu"),
                                           ("bn", "add", "relu"), ("bias", "hardswish"), ("bias",)]
    # c1/c3 and c2/c4 are the same problem and epilogue: one search each; hardswish (no graph form, as patched here)
    # is never searched
    assert len(calls) == 3 and sum("add" in c[2] for c in calls) == 1
    c1, c2, _, _, hs, last = rep.chains
    assert c1.fused_ms is None and "no fused configuration ran right (statuses: NOT_SUPPORTED)" in c1.why
    assert c1.best_ms == 0.03 and c2.fused and c2.best_ms == 0.02 and c2.fused_build_ms == 500.0
    assert c2.bytes_saved == 2 * 3 * (2 * 8 * 16 * 16) * 4  # three eager kernels after the conv, fp32
    assert "hardswish has no pointwise mode" in hs.why and hs.eager_ms is None
    assert last.eager_ms == 0.04  # a bias alone is still a chain: conv then one add
    t = rep.totals()
    assert t["chains"] == 5 and math.isclose(t["eager_ms"], 5 * 0.04)
    assert math.isclose(t["best_ms"], 3 * 0.03 + 2 * 0.02)
    assert t["fused_chains"] == 2 and t["bytes_saved"] == 2 * c2.bytes_saved
    assert rep.not_chained == (("conv2d", "a functional convolution: no module holds its weight"),)
    text = " ".join(str(rep).split())
    assert "sums over 5 chains" in text and "2 chains fused" in text and "not chained: conv2d" in text
    assert load_json(rep.to_json()) == rep and isinstance(rep, FusionReport)
    assert list(rep.to_dataframe()["conv"]) == ["c1", "c2", "c3", "c4", "hs.0", "last"]


def test_the_cli_checks_epilogue_flags_before_any_search():
    from conftest import run_cli

    layer = ("engines", "--conv", "Conv2d(64, 64, 3, padding=1)", "--input", "8,64,28,28")
    r = run_cli(*layer, "--epilogue", "bn,mish")
    assert r.returncode == 2 and "--epilogue='bn,mish': 'mish' is not one of" in r.stderr
    r = run_cli(*layer, "--epilogue", "bn,relu", "--refine", "2", "--direction", "backward_data")
    assert r.returncode == 2 and "these flags do not apply: --direction, --refine" in r.stderr
    r = run_cli(*layer, "--epilogue", "relu", "--heuristics", "zz")
    assert r.returncode == 2 and "--heuristics='zz'" in r.stderr


def test_the_cli_checks_profile_fusion_and_tune_fuse_flags_before_any_work():
    from conftest import run_cli

    r = run_cli("profile", "resnet50", "--fusion", "--legacy", "--refine", "2", "--directions", "forward")
    assert r.returncode == 2
    assert "profile of fused chains: these flags do not apply: --refine, --legacy, --directions" in r.stderr
    r = run_cli("tune", "resnet50", "--fuse", "--quick", "--torch-margin", "0.1")
    assert r.returncode == 2 and "tune of fused chains: these flags do not apply: --quick, --torch-margin" in r.stderr
    for flag in ("--fusion", "--fuse"):
        r = run_cli("profile" if flag == "--fusion" else "tune", "resnet50", flag, "--batch", "0")
        assert r.returncode == 2 and "--batch 0 must be positive" in r.stderr


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU path; a GPU is visible")
def test_profile_fusion_and_tune_fuse_on_the_cli_without_a_gpu_say_so(tmp_path):
    from conftest import run_cli

    for args in (("profile", "resnet50", "--fusion", "--batch", "1", "--json", str(tmp_path / "f.json")),
                 ("tune", "resnet50", "--fuse", "--batch", "1", "--db", str(tmp_path / "t.sqlite"))):
        r = run_cli(*args)
        assert r.returncode == 1 and "CudaUnavailableError" in r.stderr, r.stderr
    assert not (tmp_path / "f.json").exists() and not (tmp_path / "t.sqlite").exists()


class _Acts(torch.nn.Module):
    """Biased convolutions with relu6, silu, gelu and a sigmoid; a hardswish one (a composed graph)."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Sequential(torch.nn.Conv2d(8, 8, 3, padding=1), torch.nn.ReLU6())
        self.b = torch.nn.Sequential(torch.nn.Conv2d(8, 8, 1), torch.nn.BatchNorm2d(8), torch.nn.SiLU())
        self.c = torch.nn.Sequential(torch.nn.Conv2d(8, 8, 3, padding="same"), torch.nn.GELU(), torch.nn.Sigmoid())
        self.d = torch.nn.Sequential(torch.nn.Conv2d(8, 8, 1), torch.nn.Hardswish())

    def forward(self, x):
        return self.d(self.c(self.b(self.a(x))))


def _randomised(m):
    for mod in m.modules():
        if isinstance(mod, torch.nn.BatchNorm2d):
            with torch.no_grad():
                mod.running_mean.normal_()
                mod.running_var.uniform_(0.5, 2.0)
                mod.weight.uniform_(0.5, 1.5)
                mod.bias.normal_()
    return m


@pytest.mark.parametrize("model_cls", [_Block, _Acts])
def test_apply_fuse_on_the_cpu_runs_torchs_ops_on_folded_weights_and_says_why(model_cls, tmp_path):
    import cudnn_algos

    torch.manual_seed(0)
    model = _randomised(model_cls()).double().eval()
    x = torch.randn(2, 8, 16, 16, dtype=torch.float64)
    with torch.no_grad():
        want = model(x)
    h = cudnn_algos.apply(model, tmp_path / "t.sqlite", fuse=True)
    assert h.model is not model and type(model) is model_cls  # the original is left as it was
    with torch.no_grad():
        got = h.model(x)
    torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-10)
    counts = h.counts()
    assert counts and all(c == {"torch: the input is on cpu, not CUDA": 1} for c in counts.values())
    text = h.summary()
    assert f"{len(h.chains)} chains fused in the traced model" in text and "0 fused; 1 torch: the input is on cpu" in text
    if model_cls is _Acts:
        assert [m.chain.ops for m in h.chains.values()] == [("bias", "relu6"), ("bias", "bn", "silu"),
                                                           ("bias", "gelu", "sigmoid"), ("bias", "hardswish")]
        assert not h.skipped
    else:
        # a bias alone is a fused graph too (conv + bias in one kernel); hardswish is a composed one
        assert len(h.chains) == 6 and not h.skipped
        assert [m.epilogue for m in h.chains.values()] == ([("bias", "relu"), ("bias", "add", "relu")] * 2
                                                           + [("bias", "hardswish"), ("bias",)])


def test_a_fused_chain_says_why_it_runs_torchs_ops_in_training_or_with_gradients(tmp_path):
    import cudnn_algos

    model = _randomised(_Block()).eval()
    h = cudnn_algos.apply(model, tmp_path / "t.sqlite", fuse=True)
    x = torch.randn(1, 8, 8, 8, requires_grad=True)
    h.model(x).sum().backward()  # gradients flow through torch's ops
    assert x.grad is not None
    assert all(c == {"torch: a gradient is asked for": 1} for c in h.counts().values())
    h.model.train()
    with torch.no_grad():
        h.model(x)
    assert all(c.get("torch: training mode") == 1 for c in h.counts().values())


def test_a_model_torch_fx_cannot_trace_is_returned_as_it_is_with_why(tmp_path):
    import cudnn_algos

    class Branchy(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.c = torch.nn.Conv2d(3, 3, 1)

        def forward(self, x):
            return self.c(x) if x.sum() > 0 else x

    m = Branchy()
    h = cudnn_algos.apply(m, tmp_path / "t.sqlite", fuse=True)
    assert h.model is m and not h.chains and "torch.fx could not trace Branchy" in h.error
    assert "not traced: torch.fx could not trace" in h.summary()


def test_apply_fuse_keeps_torchvision_resnet18_exact_on_the_cpu(tmp_path):
    tv = pytest.importorskip("torchvision")
    import cudnn_algos

    torch.manual_seed(0)
    model = _randomised(tv.models.resnet18(num_classes=10)).double().eval()
    x = torch.randn(1, 3, 64, 64, dtype=torch.float64)
    h = cudnn_algos.apply(model, tmp_path / "t.sqlite", fuse=True)
    with torch.no_grad():
        torch.testing.assert_close(h.model(x), model(x), rtol=1e-10, atol=1e-10)
    assert len(h.chains) == 20  # every convolution: stem, 16 in the blocks, 3 downsamples (conv -> bn)


def _search_result(fused_ms, unfused_ms=0.07, eager_ms=0.08, ops=("bias", "add", "relu")):
    from dataclasses import replace

    from conftest import ENV, measurement
    from cudnn_algos.problem import make_problem
    from cudnn_algos.results import FusedRow, FusedSearchResult

    p = make_problem(torch.nn.Conv2d(64, 64, 3, padding=1), (8, 64, 28, 28), "float16", "channels_last")
    rows = (FusedRow(kind="fused", name="eng12{TILE_SIZE=3}", status="SUCCESS", engine_id=12,
                     knobs=(("TILE_SIZE", 3),), measured=replace(measurement(fused_ms), rel_err=2e-4)),
            FusedRow(kind="unfused", name="eng0 + torch", status="SUCCESS", engine_id=0, measured=measurement(unfused_ms)),
            FusedRow(kind="torch", name="torch eager", status="SUCCESS", measured=measurement(eager_ms)))
    return FusedSearchResult(rows=rows, spec=p.spec, shapes=p.shapes, cudnn_direction="forward", epilogue=ops,
                             graph_ops=ops, dtype="float16", memory_format="channels_last", engine_count=9,
                             search_ms=1.0, env=ENV)


def test_fused_winners_round_trip_through_the_database_and_export(tmp_path):
    """Note [fused winners in the database]: a fused winner is a winners row under the problem key + "|fused:" + the
    graph's ops; it is written, read back, exported and imported unchanged; an unfused sequence that was faster
    stores TORCH_WINNER (the chain runs torch's ops)."""
    from conftest import ENV
    from cudnn_algos.tuning import TORCH_WINNER, TuningDB
    from cudnn_algos.model.fusion import folded_epilogue
    from cudnn_algos.tuning.fused_tune import fused_key, fused_winner, is_fused_key

    assert folded_epilogue(("bn", "add", "relu")) == ("bias", "add", "relu")
    assert folded_epilogue(("bias", "bn", "silu")) == ("bias", "silu") and folded_epilogue(("relu",)) == ("relu",)
    key = fused_key("fwd|x=(8,64,28,28)", ("bias", "add", "relu"))
    assert key == "fwd|x=(8,64,28,28)|fused:bias,add,relu" and is_fused_key(key) and not is_fused_key("fwd|x=1")
    win = fused_winner(_search_result(0.05), ENV, key)
    assert (win.config, win.engine_id, win.knob_list()) == ("eng12{TILE_SIZE=3}", 12, [(2, 3)])
    assert (win.runner_up, win.runner_up_ms, win.torch_on_ms, win.source) == ("eng0 + torch", 0.07, 0.08, "fused")
    lose = fused_winner(_search_result(0.09), ENV, key + "x")
    assert lose.config == TORCH_WINNER and lose.is_torch and lose.kernel_ms == 0.08
    with TuningDB(tmp_path / "a.sqlite") as db:
        db.put(win)
        db.put(lose)
        assert {w.key: w for w in db.winners(ENV.key())} == {key: win, key + "x": lose}
        db.export(tmp_path / "t.jsonl")
    with TuningDB(tmp_path / "b.sqlite") as db2:
        db2.import_(tmp_path / "t.jsonl")
        assert db2.winner(ENV.key(), key) == win


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU path; a GPU is visible")
def test_tune_fuse_without_a_gpu_is_a_typed_error_and_apply_fuse_creates_no_database(tmp_path, monkeypatch):
    import cudnn_algos
    from cudnn_algos.errors import CudaUnavailableError

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("CUDNN_ALGOS_DB", raising=False)
    with pytest.raises(CudaUnavailableError):
        cudnn_algos.tune(_Block().eval(), torch.randn(1, 8, 8, 8), tmp_path / "t.sqlite", fuse=True)
    h = cudnn_algos.apply(_Block().eval(), fuse=True)
    assert h.chains and not (tmp_path / "cache").exists()


def test_fuzzed_epilogue_arguments_fail_only_with_typed_errors_naming_the_argument():
    """Seeded junk for epilogue= (and the search's other arguments): accepted when every op is a name of OPS, else
    a ValueError or TypeError naming the argument; never another exception, never a crash. CPU only: the checks run
    before any GPU work (the call then stops at the missing GPU: CudaUnavailableError)."""
    import random

    import cudnn_algos
    from cudnn_algos.errors import CudaUnavailableError

    rng = random.Random(20261206)
    pool = list(ep.OPS) + ["", "RELU", "relu ", "swish", "bn,", None, 3, 1.5, b"relu", ("relu",), "add,add"]
    conv = torch.nn.Conv2d(8, 8, 3)
    for _ in range(300):
        n = rng.choice([0, 1, 2, 3, 9])
        parts = [rng.choice(pool) for _ in range(n)]
        epi = rng.choice([parts, tuple(parts), ",".join(map(str, parts)), rng.choice(pool)])
        kw = rng.choice([{}, {"max_configs": rng.choice([0, -1, "3", 2])}, {"repeats": rng.choice([0, 2, None])},
                         {"heuristics": rng.choice([("a",), "a", ("zz",), ()])}, {"build_threads": rng.choice([0, 65])}])
        try:
            cudnn_algos.find_fused(conv, (1, 8, 8, 8), epi, **kw)
        except CudaUnavailableError:
            ok = ep.parse_epilogue(epi)  # got past every check: the epilogue was valid
            assert all(op in ep.OPS for op in ok)
        except (ValueError, TypeError) as e:
            assert any(a in str(e) for a in ("epilogue", "max_configs", "repeats", "heuristics", "build_threads")), e
        except Exception as e:  # noqa: BLE001 (the point of the test: nothing else may escape)
            pytest.fail(f"{type(e).__name__}: {e} for epilogue={epi!r} {kw}")


def test_the_fast_path_prepares_each_input_once_and_runs_the_extensions_execute(monkeypatch, tmp_path):
    """Note [the fast path], with a stand-in for the plan (its execute writes torch's result; no GPU result is
    claimed): the first call of an input builds and prepares, later ones only allocate and execute; another shape is
    prepared again; a residual in another layout is made packed; training runs torch's ops and says why."""
    import cudnn_algos
    from cudnn_algos.tuning import fusing

    built, calls = [], []

    def plan_for(spec, x, layout, epilogue, stored):
        built.append((tuple(x.shape), layout, epilogue))

        def execute(x_, w, y, operands):
            calls.append(len(operands))
            out = torch.nn.functional.conv2d(x_, w, None, 1, 1) + operands[0]
            if len(operands) > 1:
                out = out + operands[1]
            y.copy_(torch.relu(out))
        return type("P", (), {"live": type("L", (), {"execute": staticmethod(execute)})})()

    monkeypatch.setattr(fusing, "_fused_plan", plan_for)
    monkeypatch.setattr(fusing.FusedChain, "_why_not", lambda self, x: "training mode" if self.training else "")
    model = _randomised(_Block()).eval().to(memory_format=torch.channels_last)
    h = cudnn_algos.apply(model, tmp_path / "t.sqlite", fuse=True)
    c2 = h.chains["fused_1"]  # c2 -> bn -> add -> relu
    x = torch.randn(2, 8, 16, 16).contiguous(memory_format=torch.channels_last)
    r = torch.randn(2, 8, 16, 16)  # contiguous: not the output's layout
    with torch.no_grad():
        want = torch.relu(model.b2(model.c2(x)) + r)
        for _ in range(3):
            torch.testing.assert_close(c2(x, r), want, rtol=1e-5, atol=1e-5)
        c2(torch.randn(1, 8, 16, 16).contiguous(memory_format=torch.channels_last), r[:1])
    assert built == [((2, 8, 16, 16), "channels_last", ("bias", "add", "relu")),
                     ((1, 8, 16, 16), "channels_last", ("bias", "add", "relu"))]
    assert calls == [2, 2, 2, 2] and c2.counts == {"fused": 4}
    c2.train()
    c2(x, r)
    assert c2.counts == {"fused": 4, "torch: training mode": 1}


class _ResidualHardswish(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.c, self.b = torch.nn.Conv2d(8, 8, 3, padding=1, bias=False), torch.nn.BatchNorm2d(8)

    def forward(self, x):
        return torch.nn.functional.hardswish(self.b(self.c(x)) + x)


def test_a_composed_chain_passes_its_constants_and_the_residual_in_the_graphs_order(monkeypatch, tmp_path):
    """conv -> bn -> add -> hardswish with a stand-in plan (no GPU result is claimed) that runs the graph's ops as
    cuDNN is told them (epilogue.graph_ops) on the operands in the order it gets them: the folded bias, the
    residual at its slot, then hardswish's constants 3 and 1/6; its output is the eval model's."""
    import cudnn_algos
    from cudnn_algos.tuning import fusing

    seen = []

    def plan_for(spec, x, layout, epilogue, stored):
        gops = ep.graph_ops(epilogue)

        def execute(x_, w, y, operands):
            seen.append([tuple(t.shape) for t in operands])
            y.copy_(_run_graph_ops(gops, torch.nn.functional.conv2d(x_, w, None, 1, 1), operands))
        return type("P", (), {"live": type("L", (), {"execute": staticmethod(execute)})})()

    monkeypatch.setattr(fusing, "_fused_plan", plan_for)
    monkeypatch.setattr(fusing.FusedChain, "_why_not", lambda self, x: "")
    model = _randomised(_ResidualHardswish()).double().eval()
    h = cudnn_algos.apply(model, tmp_path / "t.sqlite", fuse=True)
    (chain,) = h.chains.values()
    assert chain.epilogue == ("bias", "add", "hardswish")
    x = torch.randn(2, 8, 6, 6, dtype=torch.float64)
    with torch.no_grad():
        want = model(x)
        for _ in range(2):  # the first call prepares, the second takes the fast path
            torch.testing.assert_close(h.model(x), want, rtol=1e-12, atol=1e-12)
    assert seen == [[(1, 8, 1, 1), (2, 8, 6, 6), (1, 8, 1, 1), (1, 8, 1, 1)]] * 2
    assert chain.counts == {"fused": 2}


class _Block1d(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.c, self.b = torch.nn.Conv1d(8, 8, 3, padding=1, bias=False), torch.nn.BatchNorm1d(8)

    def forward(self, x):
        return torch.relu(self.b(self.c(x)) + x)


def test_a_1d_chain_runs_its_plan_lifted_to_2d_and_returns_the_1d_output(monkeypatch, tmp_path):
    """A 1-d chain (conv1d -> bn -> add -> relu) with a stand-in plan (no GPU result is claimed) that checks what
    cuDNN would be given: the input, weight, residual and output lifted to 4-d with H = 1 (Problem.lift); the call
    returns the 1-d output, equal to the eval model's."""
    import cudnn_algos
    from cudnn_algos.tuning import fusing

    shapes = []

    def plan_for(spec, x, layout, epilogue, stored):
        def execute(x_, w, y, operands):
            shapes.append((tuple(x_.shape), tuple(w.shape), tuple(y.shape), [tuple(t.shape) for t in operands]))
            v = torch.nn.functional.conv2d(x_, w, None, 1, (0, 1)) + operands[0] + operands[1]
            y.copy_(torch.relu(v))
        return type("P", (), {"live": type("L", (), {"execute": staticmethod(execute)})})()

    monkeypatch.setattr(fusing, "_fused_plan", plan_for)
    monkeypatch.setattr(fusing.FusedChain, "_why_not", lambda self, x: "")
    model = _randomised(_Block1d()).double().eval()
    with torch.no_grad():
        model.b.running_mean.normal_()
        model.b.running_var.uniform_(0.5, 2.0)
    h = cudnn_algos.apply(model, tmp_path / "t.sqlite", fuse=True)
    (chain,) = h.chains.values()
    x = torch.randn(2, 8, 20, dtype=torch.float64)
    with torch.no_grad():
        want = model(x)
        for _ in range(2):  # prepared, then the fast path
            got = h.model(x)
            assert got.shape == (2, 8, 20)
            torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
    assert shapes == [((2, 8, 1, 20), (8, 8, 1, 3), (2, 8, 1, 20), [(1, 8, 1, 1), (2, 8, 1, 20)])] * 2
    assert chain.counts == {"fused": 2}


class _UpBlock(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.c = torch.nn.ConvTranspose2d(8, 4, 4, stride=2, padding=1, output_padding=0)
        self.b = torch.nn.BatchNorm2d(4)

    def forward(self, x):
        return torch.relu(self.b(self.c(x)))


def test_a_transposed_chain_runs_cudnns_backward_data_plan_with_the_roles_swapped(monkeypatch, tmp_path):
    """ConvTranspose2d -> bn -> relu with a stand-in plan (no GPU result is claimed): the plan is asked for cuDNN's
    backward-data graph, and its execute gets cuDNN's roles (x: the layer's output, y: the layer's input); the call
    returns the eval model's output."""
    import cudnn_algos
    from cudnn_algos import backend
    from cudnn_algos.tuning import fusing

    asked = []
    monkeypatch.setattr(backend, "conv_problem", lambda p: "cp")
    monkeypatch.setattr(backend, "engine_search", lambda d, cp, lists, **kw: asked.append((d, lists, kw["epilogue"]))
                        or type("O", (), {"plans": []})())
    spec = cudnn_algos.spec.ConvSpec.coerce(_UpBlock().c)
    why = fusing._fused_plan(spec, torch.randn(1, 8, 5, 5), "contiguous", ("bias", "relu"), fusing.FusedStore())
    assert asked == [("backward_data", ("instant",), ("bias", "relu"))] and why.startswith("no fused plan built")

    roles = []

    def plan_for(spec, x, layout, epilogue, stored):
        def execute(x_role, w, y_role, operands):  # cuDNN's backward data: x_role is written from y_role
            roles.append((tuple(x_role.shape), tuple(y_role.shape)))
            v = torch.nn.functional.conv_transpose2d(y_role, w, None, 2, 1) + operands[0]
            x_role.copy_(torch.relu(v))
        return type("P", (), {"live": type("L", (), {"execute": staticmethod(execute)})})()

    monkeypatch.setattr(fusing, "_fused_plan", plan_for)
    monkeypatch.setattr(fusing.FusedChain, "_why_not", lambda self, x: "")
    model = _randomised(_UpBlock()).double().eval()
    h = cudnn_algos.apply(model, tmp_path / "t.sqlite", fuse=True)
    x = torch.randn(2, 8, 5, 5, dtype=torch.float64)
    with torch.no_grad():
        want = model(x)
        for _ in range(2):
            torch.testing.assert_close(h.model(x), want, rtol=1e-12, atol=1e-12)
    assert roles == [((2, 4, 10, 10), (2, 8, 5, 5))] * 2
    assert list(h.counts().values()) == [{"fused": 2}]


def test_serialized_plans_are_kept_beside_the_database_one_file_per_environment_and_key(tmp_path):
    """Note [serialized plans]: the file layout and its limits (cuDNN's own serialization is the GPU tests'): a plan
    is written atomically under <database>.plans/, read back byte for byte, found by environment and key, and a
    missing, empty or oversized one reads as b"" (the plan is then built as before)."""
    from cudnn_algos.tuning import plans

    d = plans.plans_dir(tmp_path / "tuning.sqlite")
    assert d == tmp_path / "tuning.sqlite.plans"
    data = b'{"engine": 4, "knobs": [[2, 3]], "kernel": "' + b"x" * 5000 + b'"}'
    path = plans.write_plan(d, "env-a", "fwd|x=(1,8)|fused:bias,relu", data)
    assert path.parent == d and path.suffix == ".json"
    assert plans.read_plan(d, "env-a", "fwd|x=(1,8)|fused:bias,relu") == data
    assert plans.read_plan(d, "env-b", "fwd|x=(1,8)|fused:bias,relu") == b""  # another environment's is not it
    assert plans.read_plan(None, "env-a", "k") == b"" and plans.read_plan(tmp_path / "none", "env-a", "k") == b""
    assert plans.write_plan(d, "env-a", "k", b"") is None
    big = plans.plan_file(d, "env-a", "big")
    with open(big, "wb") as f:
        f.truncate(plans.MAX_PLAN_BYTES + 1)
    assert plans.read_plan(d, "env-a", "big") == b""


def test_stored_fused_finds_this_environments_fused_winners_and_their_plans(tmp_path, monkeypatch):
    from conftest import ENV
    from cudnn_algos.tuning import TuningDB, fused_tune, plans
    from cudnn_algos.tuning.fused_tune import fused_key, fused_winner

    key = fused_key("fwd|x=(8,64,28,28)", ("bias", "add", "relu"))
    db = tmp_path / "t.sqlite"
    with TuningDB(db) as t:
        t.put(fused_winner(_search_result(0.05), ENV, key))
    plans.write_plan(plans.plans_dir(db), ENV.key(), key, b'{"plan": 1}')
    monkeypatch.setattr(fused_tune, "environment", lambda dev: ENV)
    monkeypatch.setattr(fused_tune, "device_index", lambda d: 0)
    got = fused_tune.stored_fused(db)
    assert list(got.winners) == [key] and got.plans == plans.plans_dir(db)
    assert got.plan_json(key) == b'{"plan": 1}' and got.plan_json(key + "x") == b""


def test_an_untuned_chain_with_few_input_channels_per_group_runs_torchs_ops():
    """No plan is asked for (nothing reaches cuDNN): the reason names the channels and the way to measure it."""
    from cudnn_algos.spec import ConvSpec
    from cudnn_algos.tuning import fusing
    from cudnn_algos.tuning.fused_tune import FusedStore

    x = torch.randn(2, 3, 32, 32).contiguous(memory_format=torch.channels_last)
    why = fusing._fused_plan(ConvSpec(3, 64, (7, 7), stride=2, padding=3), x, "channels_last", ("bias", "relu"),
                             FusedStore())
    assert why.startswith("untuned, and 3 input channels per group") and "tune(fuse=True)" in why
    dw = torch.randn(2, 32, 16, 16).contiguous(memory_format=torch.channels_last)
    why = fusing._fused_plan(ConvSpec(32, 32, (3, 3), padding=1, groups=32), dw, "channels_last", ("bias", "relu6"),
                             FusedStore())
    assert why.startswith("untuned, and 1 input channels per group")
