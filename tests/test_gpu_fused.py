"""GPU: cuDNN's fused graphs (a convolution and its pointwise epilogue) through find_fused: every fused configuration
that builds is run and its output checked against the float64 reference (the epilogue applied to torch's float64
convolution), within the dtype's tolerance or a small multiple of torch's own eager sequence's error on the same
operands; a graph no engine runs is a row with its status; and one fused plan run by hand against torch's eval-mode
modules (Conv2d, BatchNorm2d, ReLU and a residual add)."""
from __future__ import annotations

import pytest
import torch

import cudnn_algos
from cudnn_algos import epilogue as ep

from reference import ERR_FACTOR, TOL, rel_err

pytestmark = [pytest.mark.gpu]
CL, CL3, C = torch.channels_last, torch.channels_last_3d, torch.contiguous_format

LAYERS = {
    "2d": (torch.nn.Conv2d(64, 64, 3, padding=1), (8, 64, 28, 28), torch.float16, CL),
    "1d": (torch.nn.Conv1d(64, 128, 5, padding=2), (4, 64, 200), torch.float16, C),
    "3d": (torch.nn.Conv3d(32, 32, 3, padding=1), (2, 32, 8, 16, 16), torch.float16, CL3),
    "2d-fp32": (torch.nn.Conv2d(32, 64, 3, padding=1), (4, 32, 28, 28), torch.float32, C),
    "convT2d": (torch.nn.ConvTranspose2d(64, 32, 4, stride=2, padding=1), (4, 64, 16, 16), torch.float16, CL),
}
# ten epilogues with a graph form on the 2-d layer; a few on the others
EPILOGUES = ["bias,relu", "bn,relu", "bn,add,relu", "bias,silu", "bn,relu6", "bias,gelu", "bias,gelu_tanh",
             "bn,sigmoid", "scale,tanh", "add,relu"]
# hardswish and hardsigmoid are composed (epilogue.COMPOSED; hardswish reads the value twice): a configuration that
# builds must compute them; whether cuDNN builds one is what the run shows
COMPOSED_CASES = [("2d", "bn,hardswish"), ("2d", "bias,hardsigmoid"), ("2d", "bn,add,hardswish"),
                  ("2d-fp32", "bn,hardswish")]
CASES = [("2d", e) for e in EPILOGUES] + [("1d", "bias,relu"), ("1d", "bn,add,relu"), ("3d", "bias,relu"),
                                          ("3d", "bn,silu"), ("2d-fp32", "bn,relu"), ("convT2d", "bias,relu")]
CASES += COMPOSED_CASES
# what a model's chains most often are: cuDNN fuses these on every GPU this package measures
MUST_FUSE = {("2d", "bias,relu"), ("2d", "bn,relu"), ("2d", "bn,add,relu")}


@pytest.mark.parametrize("layer,epi", CASES, ids=[f"{a}-{b}" for a, b in CASES])
def test_fused_configurations_that_build_compute_the_convolution_and_its_epilogue(layer, epi):
    module, shape, dtype, fmt = LAYERS[layer]
    lists = ("instant", "a") if (layer, epi) in MUST_FUSE else ("instant",)  # runtime compilation takes seconds
    res = cudnn_algos.find_fused(module, shape, epi, dtype=dtype, memory_format=fmt, heuristics=lists, repeats=2,
                                 warmup=1, unfused=False)
    fused = res.of_kind("fused")
    assert fused and all(r.status for r in fused), f"no fused row at all:\n{res}"
    eager = res.torch_eager
    assert eager is not None and eager.right_ms is not None, f"torch's eager sequence did not run right:\n{res}"
    tol = max(TOL[dtype], ERR_FACTOR * eager.measured.rel_err)
    bad = [f"{r.name}: rel err {r.measured.rel_err} ({r.measured.error or 'ran'})" for r in fused
           if r.ok and r.measured is not None and not (r.measured.rel_err is not None and r.measured.rel_err <= tol)]
    assert not bad, f"fused configurations whose output is not conv + {epi} (tol {tol:.1e}):\n" + "\n".join(bad)
    if (layer, epi) in MUST_FUSE:
        assert res.best is not None, f"no fused configuration ran for {layer} + {epi}:\n{res}"
        assert all(r.build_ms is not None for r in fused if r.ok)


def test_an_epilogue_with_no_graph_form_is_one_row_and_torch_still_runs(monkeypatch):
    monkeypatch.setitem(ep.NOT_IN_GRAPH, "hardswish", "hardswish has no graph form (a stand-in reason)")
    module, shape, dtype, fmt = LAYERS["2d"]
    res = cudnn_algos.find_fused(module, shape, "bn,hardswish", dtype=dtype, memory_format=fmt, repeats=2, warmup=1,
                                 unfused=False)
    (row,) = res.of_kind("fused")
    assert row.status == "NOT_SUPPORTED" and row.stage == "graph" and "hardswish" in row.note
    assert res.torch_eager.right_ms is not None and res.best is None


def test_fused_beside_unfused_and_eager_in_one_session():
    module, shape, dtype, fmt = LAYERS["2d"]
    res = cudnn_algos.find_engines(module, shape, dtype=dtype, memory_format=fmt, epilogue=("bn", "add", "relu"),
                                   measure=True, repeats=3, heuristics=("instant", "a"))
    assert isinstance(res, cudnn_algos.FusedSearchResult)
    assert res.best is not None and res.best_unfused is not None and res.torch_eager.right_ms is not None
    assert res.speedup("torch") is not None and res.speedup("unfused") is not None
    # the unfused sequences ran their convolution's kernel and then torch's kernels for the ops
    assert len(res.best_unfused.measured.kernels) >= 2
    text = str(res)
    assert "fused best:" in text and "torch eager" in text


def test_a_fused_plan_matches_torchs_eval_mode_modules():
    """conv -> BatchNorm (eval) -> add -> ReLU in torch's own modules, fp16 channels-last, against the best fused
    plan run with the folded BatchNorm's factors as its operands."""
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(64, 64, 3, padding=1, bias=False)
    bn = torch.nn.BatchNorm2d(64)
    with torch.no_grad():
        bn.running_mean.normal_()
        bn.running_var.uniform_(0.5, 2.0)
        bn.weight.uniform_(0.5, 1.5)
        bn.bias.normal_()
    conv, bn = conv.cuda().half().to(memory_format=CL).eval(), bn.cuda().half().eval()
    x = torch.randn(8, 64, 28, 28, device="cuda", dtype=torch.float16).contiguous(memory_format=CL)
    res_in = torch.randn(8, 64, 28, 28, device="cuda", dtype=torch.float16).contiguous(memory_format=CL)
    with torch.no_grad():
        want = torch.relu(bn(conv(x)) + res_in)
        ref = torch.relu(torch.nn.functional.batch_norm(
            torch.nn.functional.conv2d(x.double(), conv.weight.double(), None, 1, 1), bn.running_mean.double(),
            bn.running_var.double(), bn.weight.double(), bn.bias.double(), False, 0.0, bn.eps) + res_in.double())
    res = cudnn_algos.find_fused(conv, (8, 64, 28, 28), "bn,add,relu", dtype=torch.float16, memory_format=CL,
                                 heuristics=("instant",), measure=False)
    built = [r for r in res.of_kind("fused") if r.ok]
    assert built, f"no fused plan built:\n{res}"
    ops = [{"mean": bn.running_mean, "var": bn.running_var, "weight": bn.weight, "bias": bn.bias}, {"residual": res_in},
           {}]
    operands = ep.graph_operands(("bn", "add", "relu"), ops, tuple(want.shape), torch.float16, CL)
    y = torch.full_like(want, float("nan"))
    built[0].plan.execute(x, conv.weight, y, operands)
    torch.cuda.synchronize()
    assert torch.isfinite(y).all()
    assert rel_err(y, ref) <= max(TOL[torch.float16], ERR_FACTOR * rel_err(want, ref))
    assert len(operands) == 3  # bn's scale and shift, the residual
    with pytest.raises(ValueError, match="epilogue takes 3 tensors, got 2"):
        built[0].plan.execute(x, conv.weight, y, operands[:2])


def test_profile_fusion_finds_and_searches_a_residual_blocks_chains():
    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.c1, self.b1 = torch.nn.Conv2d(64, 64, 3, padding=1, bias=False), torch.nn.BatchNorm2d(64)
            self.c2, self.b2 = torch.nn.Conv2d(64, 64, 3, padding=1, bias=False), torch.nn.BatchNorm2d(64)

        def forward(self, x):
            return torch.relu(self.b2(self.c2(torch.relu(self.b1(self.c1(x))))) + x)

    m = Block().cuda().half().to(memory_format=CL).train()
    x = torch.randn(8, 64, 28, 28, device="cuda", dtype=torch.float16).contiguous(memory_format=CL)
    rep = cudnn_algos.profile(m, x, fusion=True, progress=False)
    assert m.training and isinstance(rep, cudnn_algos.results.FusionReport)
    assert [(c.conv, c.ops) for c in rep.chains] == [("c1", ("bn", "relu")), ("c2", ("bn", "add", "relu"))]
    assert all(c.eager_ms and c.unfused_ms for c in rep.chains), str(rep)
    assert any(c.fused for c in rep.chains), f"no chain fused:\n{rep}"
    assert rep.totals()["chains"] == 2 and "sums over 2 chains" in " ".join(str(rep).split())


def test_the_cli_searches_a_fused_graph():
    from conftest import run_cli

    r = run_cli("engines", "--conv", "Conv2d(64, 64, 3, padding=1)", "--input", "8,64,28,28", "--dtype", "float16",
                "--channels-last", "--epilogue", "bn,relu", "--measure", "--repeats", "2", "--heuristics", "instant")
    assert r.returncode == 0, r.stderr
    assert "+ bn,relu" in r.stdout and "torch eager" in r.stdout


def test_the_cli_profiles_a_models_fused_chains_and_tunes_them(tmp_path):
    """profile --fusion and tune --fuse on a model file (a conv-bn-relu block and a residual one)."""
    from conftest import run_cli

    src = tmp_path / "blk.py"
    src.write_text("import torch\n"
                   "nn = torch.nn\n"
                   "class B(nn.Module):\n"
                   "    def __init__(self):\n"
                   "        super().__init__()\n"
                   "        self.c1, self.b1 = nn.Conv2d(64, 64, 3, padding=1, bias=False), nn.BatchNorm2d(64)\n"
                   "        self.c2, self.b2 = nn.Conv2d(64, 64, 3, padding=1, bias=False), nn.BatchNorm2d(64)\n"
                   "    def forward(self, x):\n"
                   "        return torch.relu(self.b2(self.c2(torch.relu(self.b1(self.c1(x))))) + x)\n"
                   "def make():\n"
                   "    return B()\n")
    common = (f"{src}:make", "--input", "8,64,28,28", "--dtype", "float16", "--channels-last")
    r = run_cli("profile", *common, "--fusion", "--json", str(tmp_path / "f.json"), "--no-progress")
    assert r.returncode == 0, r.stderr
    assert "sums over 2 chains" in " ".join(r.stdout.split()) and (tmp_path / "f.json").exists()
    r = run_cli("tune", *common, "--fuse", "--db", str(tmp_path / "t.sqlite"))
    assert r.returncode == 0, r.stderr
    assert "fused tuning into" in r.stdout and "2 winners stored" in r.stdout, r.stdout  # (bn,relu), (bn,add,relu)


@pytest.mark.parametrize("model_name", ["resnet18", "mobilenet_v3_small", "efficientnet_b0", "regnet_y_400mf"])
def test_apply_fuse_runs_fused_plans_and_matches_the_eval_model(model_name):
    tv = pytest.importorskip("torchvision")
    torch.manual_seed(0)
    model = getattr(tv.models, model_name)(num_classes=10).cuda().half().to(memory_format=CL).eval()
    x = torch.randn(4, 3, 96, 96, device="cuda", dtype=torch.float16).contiguous(memory_format=CL)
    with torch.no_grad():
        want = model(x)
        ref = model.double()(x.double())
    model.half()
    h = cudnn_algos.apply(model, fuse=True)
    with torch.no_grad():
        got = h.model(x)
    counts = h.counts()
    fused = sum(c.get("fused", 0) for c in counts.values())
    assert fused > 0, h.summary()
    assert torch.isfinite(got).all()
    assert rel_err(got, ref) <= max(5 * TOL[torch.float16], ERR_FACTOR * rel_err(want, ref)), h.summary()


def test_apply_fuse_runs_1d_transposed_and_composed_chains_and_matches_the_eval_model():
    """A 1-d chain (lifted to 2-d, as cuDNN is given it), 2-d chains ending in hardswish and hardsigmoid (composed
    graphs) and a transposed one (cuDNN's backward data), the 2-d ones channels_last: the composed chains run fused
    (cuDNN builds their pointwise DAG), every chain either ran fused or says why not, and the output is the eval
    model's. (The 1-d chain is NCW, as torch keeps a 3-d tensor; cuDNN 9.19's fused engines built no plan for it on
    an H100, so it runs torch's ops and says NOT_SUPPORTED.)"""

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.c1, self.b1 = torch.nn.Conv1d(64, 64, 5, padding=2, bias=False), torch.nn.BatchNorm1d(64)
            self.c2, self.b2 = torch.nn.Conv2d(64, 64, 3, padding=1, bias=False), torch.nn.BatchNorm2d(64)
            self.c3 = torch.nn.Conv2d(64, 64, 1)
            self.up, self.b4 = torch.nn.ConvTranspose2d(64, 32, 4, stride=2, padding=1), torch.nn.BatchNorm2d(32)

        def forward(self, x):
            a = torch.relu(self.b1(self.c1(x)) + x)  # (N, 64, 256)
            a = a.reshape(-1, 64, 16, 16).contiguous(memory_format=torch.channels_last)  # cuDNN fuses NHWC fp16
            b = torch.nn.functional.hardswish(self.b2(self.c2(a)))
            return torch.relu(self.b4(self.up(torch.nn.functional.hardsigmoid(self.c3(b)))))

    torch.manual_seed(0)
    model = Net().cuda().eval()
    with torch.no_grad():
        for bn in (model.b1, model.b2, model.b4):
            bn.running_mean.normal_()
            bn.running_var.uniform_(0.5, 2.0)
    x = torch.randn(4, 64, 256, device="cuda", dtype=torch.float16)
    with torch.no_grad():
        ref = model.double()(x.double())
        model.half().to(memory_format=torch.channels_last)
        want = model(x)
    h = cudnn_algos.apply(model, fuse=True)
    with torch.no_grad():
        got = h.model(x)
    counts = h.counts()
    assert len(h.chains) == 4 and not h.skipped, h.summary()
    by_conv = {m.chain.conv: counts[name] for name, m in h.chains.items()}
    assert by_conv["c2"].get("fused") == 1 and by_conv["c3"].get("fused") == 1, h.summary()  # the composed graphs
    assert all(sum(c.values()) == 1 for c in by_conv.values()), h.summary()  # one call each: fused, or torch's and why
    assert torch.isfinite(got).all()
    assert rel_err(got, ref) <= max(5 * TOL[torch.float16], ERR_FACTOR * rel_err(want, ref)), h.summary()


def test_tune_fuse_stores_winners_that_apply_fuse_builds(tmp_path):
    tv = pytest.importorskip("torchvision")
    from cudnn_algos.tuning.fused_tune import stored_fused

    torch.manual_seed(0)
    model = tv.models.resnet18(num_classes=10).cuda().half().to(memory_format=CL).eval()
    x = torch.randn(8, 3, 64, 64, device="cuda", dtype=torch.float16).contiguous(memory_format=CL)
    db = tmp_path / "t.sqlite"
    r = cudnn_algos.tune(model, x, db, fuse=True)
    assert r.stored >= 5 and r.stored + r.kept <= 20, r.summary()  # distinct chains of resnet18 at this input
    found = stored_fused(db)
    stored = found.winners
    assert len(stored) == r.stored and all(w.source == "fused" for w in stored.values())
    # Note [serialized plans]: each fused winner's plan is kept beside the database
    assert all(found.plan_json(k) for k, w in stored.items() if not w.is_torch), sorted(found.plans.iterdir())
    again = cudnn_algos.tune(model, x, db, fuse=True)
    assert again.stored == 0 and again.kept == r.stored + r.kept  # nothing searched twice (kept: per chain)
    h = cudnn_algos.apply(model, db, fuse=True)
    with torch.no_grad():
        want, got = model(x), h.model(x)
    assert rel_err(got, want) <= 5 * TOL[torch.float16], h.summary()
    fused = sum(c.get("fused", 0) for c in h.counts().values())
    tuned_torch = sum(w.is_torch for w in stored.values())
    assert fused >= len(h.chains) - tuned_torch - 3, h.summary()  # stored fused winners run fused


def test_a_serialized_fused_plan_finalizes_again_and_computes_the_same_output():
    """Note [serialized plans]: a built fused plan's JSON, finalized again with this handle, is a plan that writes the
    same output as the one it came from (the kernels are the same)."""
    from cudnn_algos import backend
    from cudnn_algos.problem import make_problem

    module, shape, dtype, fmt = LAYERS["2d"]
    res = cudnn_algos.find_fused(module, shape, "bias,relu", dtype=dtype, memory_format=fmt, heuristics=("instant",),
                                 measure=False)
    built = [r for r in res.of_kind("fused") if r.ok]
    assert built, str(res)
    data = backend.serialize_plan(built[0].plan)
    assert len(data) > 100, "cuDNN gave no JSON for a built plan"
    p = make_problem(module, shape, dtype, fmt)
    again = backend.plan_from_json("forward", backend.conv_problem(p), ("bias", "relu"), data)
    assert again.status == "SUCCESS", f"{again.status} at {again.stage}"
    x = torch.randn(shape, device="cuda", dtype=dtype).contiguous(memory_format=fmt)
    w = torch.randn(64, 64, 3, 3, device="cuda", dtype=dtype).contiguous(memory_format=fmt)
    b = torch.randn(1, 64, 1, 1, device="cuda", dtype=dtype)
    y1, y2 = (torch.full((8, 64, 28, 28), float("nan"), device="cuda", dtype=dtype).contiguous(memory_format=fmt)
              for _ in range(2))
    built[0].plan.execute(x, w, y1, [b])
    again.execute(x, w, y2, [b])
    torch.cuda.synchronize()
    assert torch.isfinite(y1).all() and torch.equal(y1, y2)
    bad = backend.plan_from_json("forward", backend.conv_problem(p), ("bias", "relu"), b'{"not": "a plan"}')
    assert bad.status != "SUCCESS" and bad.stage == "plan"
