"""GPU (H200): tune() fills a database and apply() runs its winners through torch.ops.cudnn_algos.conv (and
conv_transpose): forward and gradients against torch itself for 1-D, 2-D (grouped, dilated, strided, 1x1) and 3-D
layers, plain and transposed, in fp32 NCHW and fp16 channels_last; under autocast, torch.compile and CUDA-graph
capture; fallback (counted) for what the database lacks and when cudnn.deterministic changes the key; undo restores
the model."""
import pytest
import torch

import cudnn_algos
from reference import rel_err

pytestmark = pytest.mark.gpu

FAST = dict(repeats=3, screen=2, refine=1, refine_max=8, progress=False)
TOL = {torch.float32: 2e-3, torch.float16: 2e-2}
TF32_TOL = 3e-2  # fp32 with allow_tf32 (torch's default for cuDNN): winners may run TF32 (10-bit mantissa); the
                 # input gradient after three layers, of values ~1e-6, showed 1.4e-2 against float64


def _net2d():
    return torch.nn.Sequential(torch.nn.Conv2d(8, 32, 3, padding=1), torch.nn.ReLU(),
                               torch.nn.Conv2d(32, 32, 3, padding=2, dilation=2, groups=4, bias=False),
                               torch.nn.ReLU(), torch.nn.Conv2d(32, 16, 1, stride=2))


def _net1d():
    return torch.nn.Sequential(torch.nn.Conv1d(16, 32, 5, stride=2, padding=2), torch.nn.ReLU(),
                               torch.nn.Conv1d(32, 32, 3, padding=1, groups=32))


def _net3d():
    return torch.nn.Sequential(torch.nn.Conv3d(4, 16, 3, padding=1), torch.nn.ReLU(),
                               torch.nn.Conv3d(16, 8, 1, bias=False))


def _net2d_t():
    return torch.nn.Sequential(torch.nn.ConvTranspose2d(8, 16, 3, stride=2, padding=1, output_padding=1),
                               torch.nn.ReLU(), torch.nn.ConvTranspose2d(16, 8, 2, stride=2, groups=2, bias=False))


def _net1d_t():
    return torch.nn.Sequential(torch.nn.ConvTranspose1d(16, 8, 4, stride=2, padding=1, dilation=2))


def _net3d_t():
    return torch.nn.Sequential(torch.nn.ConvTranspose3d(4, 8, 3, stride=2, padding=1, output_padding=1))


CASES = {
    "2d-fp32": (_net2d, (4, 8, 16, 16), torch.float32, None),
    "2d-fp16-nhwc": (_net2d, (4, 8, 16, 16), torch.float16, torch.channels_last),
    "1d-fp32": (_net1d, (4, 16, 64), torch.float32, None),
    "3d-fp16": (_net3d, (2, 4, 8, 8, 8), torch.float16, None),
    "2d-fp32-no-tf32": (_net2d, (4, 8, 16, 16), torch.float32, None),
    "2d-transposed-fp16-nhwc": (_net2d_t, (4, 8, 8, 8), torch.float16, torch.channels_last),
    "1d-transposed-fp32": (_net1d_t, (4, 16, 32), torch.float32, None),
    "3d-transposed-fp16": (_net3d_t, (2, 4, 4, 4, 4), torch.float16, None),
}


def _run(model, x):
    x = x.detach().requires_grad_(True)
    model.zero_grad()
    out = model(x)
    out.float().pow(2).mean().backward()
    return out.detach(), [x.grad] + [p.grad for p in model.parameters()]


def _build(case):
    make, shape, dtype, fmt = CASES[case]
    torch.manual_seed(0)
    model = make().cuda().to(dtype)
    x = torch.randn(shape, device="cuda", dtype=dtype)
    if fmt is not None:
        model, x = model.to(memory_format=fmt), x.contiguous(memory_format=fmt)
    return model, x, dtype


@pytest.fixture
def tf32_as_in(request):
    old = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = "no-tf32" not in request.node.name
    yield torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = old


@pytest.mark.parametrize("case", list(CASES))
def test_applied_winners_match_torch_forward_and_gradients(case, tmp_path, tf32_as_in):
    model, x, dtype = _build(case)
    tol = TF32_TOL if dtype == torch.float32 and tf32_as_in else TOL[dtype]  # no-tf32: stored under tf32=0
    db = tmp_path / "t.sqlite"
    r = cudnn_algos.tune(model, x, db, **FAST)
    n_convs = sum(isinstance(m, torch.nn.modules.conv._ConvNd) for m in model)
    assert not r.failed and r.searched == 3 * n_convs, r  # every layer is a distinct problem here
    again = cudnn_algos.tune(model, x, db, **FAST)
    assert again.searched == 0 and again.already == r.searched  # only what the database lacks is searched
    ref_out, ref_grads = _run(model, x)
    import copy

    m64 = copy.deepcopy(model).double()
    out64, grads64 = _run(m64, x.double())
    with cudnn_algos.apply(model, db) as h:
        h.reset_counts()
        h.time_host(True)
        out, grads = _run(model, x)
        torch.cuda.synchronize()
        stages = h.host_stages()
        h.time_host(False)
        counts = h.counts()
    # the host-stage clock saw every kernel call: one forward and one backward call per layer
    assert stages["forward_calls"] == stages["backward_calls"] == n_convs, stages
    assert stages["us"]["cudnn_execute"] > 0 and stages["us"]["resolve"] > 0, stages
    # against float64: no worse than TOL or 3x torch's own error in the same precision (TF32 in fp32)
    for ours, theirs, exact in zip([out] + grads, [ref_out] + ref_grads, [out64] + grads64):
        ours_err, theirs_err = rel_err(ours, exact), rel_err(theirs, exact)
        assert ours_err <= max(tol, 3 * theirs_err), (ours_err, theirs_err)
    assert counts and all(c["fallback"] == 0 for c in counts), h.summary()
    assert sum(c["pinned"] for c in counts) > 0, h.summary()
    dirs = {c["key"].split(" ")[0] for c in counts}
    assert dirs == {"forward", "backward_data", "backward_filter"}, dirs


def test_autocast_casts_as_torch_does_and_hits_the_fp16_winners(tmp_path):
    torch.manual_seed(0)
    model, x = _net2d().cuda(), torch.randn(4, 8, 16, 16, device="cuda")
    db = tmp_path / "t.sqlite"
    cudnn_algos.tune(model, x, db, dtype=torch.float16, directions=("forward",), **FAST)
    with torch.autocast("cuda", dtype=torch.float16):
        ref = model(x)
    with cudnn_algos.apply(model, db) as h:
        h.reset_counts()
        with torch.autocast("cuda", dtype=torch.float16):
            out = model(x)
        counts = h.counts()
    assert out.dtype == ref.dtype == torch.float16 and rel_err(out, ref) < TOL[torch.float16]
    assert all(c["fallback"] == 0 for c in counts) and sum(c["pinned"] + c["torch_winner"] for c in counts) == 3


def test_torch_compile_and_cuda_graph_capture_run_the_winners(tmp_path):
    model, x, dtype = _build("2d-fp16-nhwc")
    db = tmp_path / "t.sqlite"
    cudnn_algos.tune(model, x, db, directions=("forward",), **FAST)
    with torch.no_grad():
        ref = model(x)
    with cudnn_algos.apply(model, db) as h, torch.no_grad():
        compiled = torch.compile(model)
        torch.testing.assert_close(compiled(x), ref, rtol=2e-2, atol=2e-2)
        static_x = x.clone()
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            model(static_x)  # warm up: plans are built outside the capture
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        h.reset_counts()
        with torch.cuda.graph(g):
            static_out = model(static_x)
        static_x.copy_(torch.randn_like(x))
        g.replay()
        torch.cuda.synchronize()
        torch.testing.assert_close(static_out, model(static_x))  # replayed = eager, on the new input
        assert all(c["fallback"] == 0 for c in h.counts()), h.summary()


def test_what_the_database_lacks_falls_back_to_torch_counted(tmp_path):
    model, x, dtype = _build("2d-fp32")
    db = tmp_path / "t.sqlite"
    ref_out, ref_grads = _run(model, x)
    with cudnn_algos.apply(model, db) as h:  # empty database
        h.reset_counts()
        out, grads = _run(model, x)
        c = h.counts()
    torch.testing.assert_close(out, ref_out)  # torch's own op: the same result
    assert c and all(x["pinned"] == 0 and x["fallback"] > 0 and x["reason"] == "no stored winner" for x in c)
    cudnn_algos.tune(model, x, db, directions=("forward",), **FAST)
    old = torch.backends.cudnn.deterministic
    torch.backends.cudnn.deterministic = True  # another key: the winners tuned without it are not used
    try:
        with cudnn_algos.apply(model, db) as h:
            h.reset_counts()
            with torch.no_grad():
                out = model(x)
            assert all(x["pinned"] == 0 for x in h.counts())
            assert all("deterministic=1" in x["key"] for x in h.counts())
        assert rel_err(out, ref_out) < 5e-3  # torch's op, deterministic (another algorithm: TF32 rounding differs)
    finally:
        torch.backends.cudnn.deterministic = old


UNSEEN_CASES = ["2d-fp32", "2d-fp16-nhwc", "1d-fp32", "3d-fp16", "2d-transposed-fp16-nhwc"]


@pytest.mark.parametrize("bg", [False, True], ids=["first-call", "background"])
@pytest.mark.parametrize("unseen, k", [("predict", 3), ("measure_top_k", 3), ("measure_top_k", "auto")],
                         ids=["predict", "measure_top_k", "measure_top_k-auto"])
@pytest.mark.parametrize("case", UNSEEN_CASES)
def test_unseen_problems_run_the_selectors_choice_matching_torch(case, unseen, k, bg, tmp_path, tf32_as_in):
    """Nothing tuned: every problem's first call asks the shipped selector (predict: its pick built; measure_top_k: its
    shortlist of k timed, or k="auto"'s), every later call runs that choice; in the background, torch's op runs the
    first calls while threads rank, and the choice runs from the next call after; outputs and gradients match
    torch's."""
    model, x, dtype = _build(case)
    ref_out, ref_grads = _run(model, x)
    tol = TF32_TOL if dtype == torch.float32 and tf32_as_in else TOL[dtype]
    with cudnn_algos.apply(model, tmp_path / "empty.sqlite", unseen=unseen, k=k, background=bg) as h:
        h.reset_counts()
        first, _ = _run(model, x)  # the first calls choose (in the background: torch's op runs them meanwhile)
        if bg:
            assert all(x["fallback"] > 0 and "background" in x["reason"] for x in h.counts()), h.counts()
            assert rel_err(first, ref_out) < tol
            assert h.wait(120)
            h.reset_counts()
        out, grads = _run(model, x)
        if k == "auto":  # Note [runtime-compiled candidates later]: built, then timed at the next call
            assert h.wait(300)
            h.reset_counts()
            out, grads = _run(model, x)
        c, d = h.counts(), h.decisions()
    assert rel_err(out, ref_out) < tol
    for g, r in zip(grads, ref_grads):
        assert rel_err(g, r) < tol
    origin = "predicted" if unseen == "predict" else "measured_top_k"
    assert c and all(x["origin"] == origin and x["fallback"] == 0 and x["pinned"] >= (1 if bg or k == "auto" else 2)
                     for x in c), c
    assert len(d) == len(c) and all(x.origin == origin and x.offered for x in d)
    assert all(x["config"] in dd.offered for x in c for dd in d if dd.key == x["key"])
    if unseen == "measure_top_k":  # the shortlist was timed: the kept one is the fastest that built
        assert all(x.timed_ms and x.timed_ms[0] == min(t for t in x.timed_ms if t is not None) for x in d)
    # kept, the choices are stored winners: a later apply() runs them from the first call, choosing nothing
    assert h.keep() == len(c)
    with cudnn_algos.apply(model, tmp_path / "empty.sqlite") as h2:
        h2.reset_counts()
        out2, _ = _run(model, x)
        c2 = h2.counts()
    assert all(x["origin"] == "stored" and x["pinned"] >= 1 and x["fallback"] == 0 for x in c2), c2
    assert {x["key"]: x["config"] for x in c2} == {x["key"]: x["config"] for x in c}
    assert rel_err(out2, ref_out) < tol


def test_a_known_configuration_no_list_names_is_built_and_matches_torch(tmp_path):
    """Note [known configurations]: RegNet's grouped 3x3 layer (24 channels per group), fp16 channels_last, batch 1,
    whose fastest configuration in the H200 dataset (eng71 with SPLIT_K_SLC=1, ~5x the best listed one) no
    heuristic list names. A selector knowing it (and, before it, an engine that does not exist) ranks the known
    configurations first here: the nonexistent one is passed over, the known one is built and runs, and the output
    matches torch's."""
    from cudnn_algos.selector import Selector

    known_cfg = "eng71{SPLIT_K_SLC=1,KERNEL_CFG=12}"
    shipped = Selector.shipped(cudnn_algos.backend.environment(0).selector_family())

    class KnownFirst(Selector):  # a subclass ranks in this process (Note [ranking in the helper])
        def rank(self, problem, candidates):
            return sorted(range(len(candidates)), key=lambda i: (bool(candidates[i][2]), i))  # unlisted first

    known = {"forward float16 channels_last": (("eng9999", True), (known_cfg, True))}
    sel = KnownFirst(shipped.vocabulary, shipped.trees, shipped.neighbours, shipped.family, shipped.trained_on,
                     shipped.reach, known, shipped.evidence)
    conv = torch.nn.Conv2d(336, 336, 3, padding=1, groups=14, bias=False).cuda().half()
    conv = conv.to(memory_format=torch.channels_last)
    x = torch.randn(1, 336, 14, 14, device="cuda", dtype=torch.half).to(memory_format=torch.channels_last)
    with torch.no_grad():
        ref = conv(x)
        with cudnn_algos.apply(conv, tmp_path / "empty.sqlite", unseen="predict", selector=sel,
                               background=False) as h:
            h.reset_counts()
            for _ in range(2):
                out = conv(x)
            c, d = h.counts(), h.decisions()
    assert len(c) == 1 and c[0]["config"] == known_cfg and c[0]["fallback"] == 0, c
    # the nonexistent one did not build (passed over, not wrong); the known one was built, checked and answered
    assert d[0].offered[0] == known_cfg and "eng9999" not in d[0].offered and d[0].wrong == (), d[0]
    assert rel_err(out, ref) < TOL[torch.float16]


WRONG_CFG = "eng71{SPLIT_K_SLC=1,KERNEL_CFG=28}"  # built by cuDNN 9.19 for the layer below, its output ~1.4 off


@pytest.mark.parametrize("unseen", ["predict", "measure_top_k"])
def test_a_configuration_whose_output_is_wrong_is_never_run(tmp_path, unseen, tf32_as_in):
    """Note [a wrong output], Note [a candidate's output checked]: the dilated grouped fp32 layer of the 2-D net, for
    which cuDNN 9.19 builds WRONG_CFG (status SUCCESS) whose output is ~1.4 away from float64. find_engines shows
    the row with its error and never calls it the best; a selector ranking it first has it checked and passed over
    by predict, and left out by measure_top_k even where it is timed fastest; the output matches torch's. Where
    this cuDNN computes it right, the test says so and skips."""
    from cudnn_algos.selector import Selector

    conv = torch.nn.Conv2d(32, 32, 3, padding=2, dilation=2, groups=4, bias=False).cuda()
    x = torch.randn(4, 32, 16, 16, device="cuda")
    res = cudnn_algos.find_engines(conv, tuple(x.shape), configs=[WRONG_CFG, "eng0"], measure=True, repeats=3,
                                   warmup=1, compare_torch=False)
    row = next((r for r in res.rows if r.name == WRONG_CFG), None)
    if row is None or not row.ok or not row.wrong:
        pytest.skip(f"cuDNN {cudnn_algos.backend.environment(0).cudnn_runtime}: {WRONG_CFG} for this layer "
                    f"{'computes it right' if row is not None and row.ok else 'does not build'} here")
    assert row.measured.rel_err > 0.5 and res.best is not None and res.best.name != WRONG_CFG
    shipped = Selector.shipped(cudnn_algos.backend.environment(0).selector_family())

    class WrongFirst(Selector):  # a subclass ranks in this process (Note [ranking in the helper])
        def rank(self, problem, candidates):
            return sorted(range(len(candidates)), key=lambda i: (bool(candidates[i][2]), i))  # unlisted first

        def shortlist(self, problem, candidates, k, order=None, predicted=None):
            return self.rank(problem, candidates)[:k]

    known = {"forward float32 contiguous": ((WRONG_CFG, True),)}
    sel = WrongFirst(shipped.vocabulary, shipped.trees, shipped.neighbours, shipped.family, shipped.trained_on,
                     shipped.reach, known, shipped.evidence)
    with torch.no_grad():
        ref = conv(x)
        with cudnn_algos.apply(conv, tmp_path / "empty.sqlite", unseen=unseen, k=3, selector=sel,
                               background=False) as h:
            h.reset_counts()
            for _ in range(2):
                out = conv(x)
            c, d = h.counts(), h.decisions()
    assert len(c) == 1 and c[0]["config"] not in (None, WRONG_CFG) and c[0]["fallback"] == 0, c
    assert d[0].wrong == (WRONG_CFG,) and WRONG_CFG not in d[0].offered, d[0]
    assert rel_err(out, ref) < TF32_TOL


def test_runtime_compiled_candidates_are_built_later_timed_at_the_next_call_and_match_torch(tmp_path, monkeypatch):
    """Note [runtime-compiled candidates later]: RegNet's grouped 3x3 layer (fp16 channels_last, batch 32), with a
    selector whose k="auto" shortlist is every candidate: its first two are timed at the first call, the other
    candidates at once too unless they compile at run time; those are built by the later thread and timed beside
    the winner at the next call after wait(), whose fastest then runs. Forward and both backward directions; the
    output and gradients match torch's; what keep() stores is what ran."""
    from cudnn_algos.selector import Selector

    shipped = Selector.shipped(cudnn_algos.backend.environment(0).selector_family())

    class All(Selector):  # a subclass ranks in this process (Note [ranking in the helper])
        def shortlist(self, problem, candidates, k, order=None, predicted=None):
            return list(self.rank(problem, candidates) if order is None else order)

    sel = All(shipped.vocabulary, shipped.trees, shipped.neighbours, shipped.family, shipped.trained_on,
              shipped.reach, shipped.known, shipped.evidence)
    conv = torch.nn.Conv2d(336, 336, 3, padding=1, groups=14, bias=False).cuda().half()
    conv = conv.to(memory_format=torch.channels_last)
    x = torch.randn(32, 336, 14, 14, device="cuda", dtype=torch.half).to(memory_format=torch.channels_last)
    ref_out, ref_grads = _run(conv, x)
    log = tmp_path / "answers.log"  # a line per answer (its first three configurations), to say what ran when
    monkeypatch.setenv("CUDNN_ALGOS_UNSEEN_LOG", str(log))
    with cudnn_algos.apply(conv, tmp_path / "empty.sqlite", unseen="measure_top_k", k="auto", selector=sel,
                           background=False) as h:
        _run(conv, x)  # the first calls: timed at once, the runtime-compiled ones queued
        first = {d.key: d.offered[0] for d in h.decisions()}
        assert h.wait(300)
        h.reset_counts()
        out, grads = _run(conv, x)  # the next calls time them beside the winner
        c, d = h.counts(), h.decisions()
        assert h.keep() == len(c)
    assert all(x.timed_ms for x in d), [(x.key, x.offered[:4]) for x in d]  # every shortlist was timed
    assert sum(x.later for x in d) >= 1, [(x.key, x.offered[:4]) for x in d]  # some were built later
    for dec in d:
        if dec.later:
            assert len(dec.timed_ms) == dec.later + 1 and dec.timed_ms[0] == min(dec.timed_ms)
            assert first[dec.key] in dec.offered[:dec.later + 1]  # the winner so far was timed again beside them
    offered = {dd.key: dd for dd in d}
    assert len(offered) == len(d) == len(c), [x.key for x in d]  # one decision per problem
    wrong = [(x["key"][:20], x["fallback"], x["pinned"], x["reason"], x["config"], offered[x["key"]].offered[:3],
              offered[x["key"]].timed_ms, offered[x["key"]].later, first[x["key"]],
              [ln.split("\t", 1)[1][:30] + ln.split("\t")[3] for ln in log.read_text().splitlines() if x["key"] in ln])
             for x in c if x["fallback"] or not x["pinned"] or x["config"] != offered[x["key"]].offered[0]]
    assert not wrong, "\n".join(map(str, wrong))
    tol = TOL[torch.float16]
    assert rel_err(out, ref_out) < tol and all(rel_err(g, r) < tol for g, r in zip(grads, ref_grads))
    with cudnn_algos.apply(conv, tmp_path / "empty.sqlite") as h2:
        h2.reset_counts()
        _run(conv, x)
        assert {x["key"]: x["config"] for x in h2.counts()} == {x["key"]: x["config"] for x in c}


def test_an_unseen_problem_still_being_chosen_is_asked_once_until_its_answer_is_ready(tmp_path):
    """Note [asked again] (csrc/pinned/registry.cpp): a problem whose answer is pending runs torch's op at every
    call without asking the handler again, even while other problems' answers arrive as it is asked; once its own
    answer is ready (pinned_ask_again with its key) its next call asks again."""
    model, x, _ = _build("2d-fp32")
    asked = []

    def pending(q):
        asked.append(q.key)
        cudnn_algos.backend.pinned_ask_again("another problem's key")  # a background answer readied meanwhile
        return cudnn_algos.backend.MissAnswer(why="pending (test)")

    with cudnn_algos.apply(model, tmp_path / "empty.sqlite") as h:
        cudnn_algos.backend.pinned_set_miss_handler(pending)
        h.reset_counts()
        try:
            with torch.no_grad():
                for _ in range(3):
                    model(x)
            keys = sorted(set(asked))
            assert keys and len(asked) == len(keys), asked  # once per problem, not once per call
            assert all(c["fallback"] == 3 and "pending (test)" in c["reason"] for c in h.counts()), h.counts()
            cudnn_algos.backend.pinned_ask_again(keys[0])
            with torch.no_grad():
                model(x)
            assert asked.count(keys[0]) == 2 and len(asked) == len(keys) + 1, asked
        finally:
            cudnn_algos.backend.pinned_set_miss_handler(None)


def test_an_unseen_handler_that_fails_leaves_torchs_op_counted_with_the_reason(tmp_path):
    """A selector that raises (here: a stand-in whose rank fails) never reaches the model's call: torch's op runs,
    each problem is a fallback whose reason names the failure, and the model's output is torch's."""
    from cudnn_algos.selector import Selector

    class Broken(Selector):
        def rank(self, *a, **k):
            raise RuntimeError("broken selector")

        def shortlist(self, *a, **k):
            raise RuntimeError("broken selector")

    real = Selector.shipped(cudnn_algos.backend.environment(0).selector_family())
    broken = Broken(real.vocabulary, real.trees, real.neighbours, real.family, real.trained_on,
                    evidence=real.evidence)
    model, x, _ = _build("2d-fp32")
    ref_out, _ = _run(model, x)
    with cudnn_algos.apply(model, tmp_path / "empty.sqlite", unseen="predict", selector=broken,
                           background=False) as h:
        h.reset_counts()
        out, _ = _run(model, x)
        c = h.counts()
    torch.testing.assert_close(out, ref_out)
    assert c and all(x["pinned"] == 0 and x["fallback"] > 0 and "broken selector" in x["reason"] for x in c), c


@pytest.mark.parametrize("case", ["2d-fp16-nhwc", "2d-fp32", "1d-fp32"])
def test_applied_winners_on_misaligned_operands_match_torch(case, tmp_path, tf32_as_in):
    """Note [16-byte operands] (csrc/pinned/ops.cpp): the layer's input, weight and output gradient as views that
    start one element into a larger buffer (dense, not 16-byte aligned): apply()'s forward and both gradients match
    torch's on the same tensors, every call runs the stored winner (none falls back), and nothing crashes."""
    model, x, dtype = _build(case)
    fmt = torch.channels_last if x.dim() == 4 and not x.is_contiguous() else torch.contiguous_format
    tol = TF32_TOL if dtype == torch.float32 and tf32_as_in else TOL[dtype]
    db = tmp_path / "t.sqlite"
    assert not cudnn_algos.tune(model, x, db, **FAST).failed

    def misaligned(t):
        dense = t.detach().contiguous(memory_format=fmt if t.dim() == 4 else torch.contiguous_format)
        buf = torch.empty(t.numel() + 1, dtype=t.dtype, device=t.device)
        v = buf.as_strided(dense.size(), dense.stride(), storage_offset=1)
        v.copy_(dense)
        assert v.data_ptr() % 16
        return v

    def step(m, x_in):
        x_in = x_in.detach().requires_grad_(True)
        m.zero_grad()
        out = m(x_in)
        g = misaligned(torch.randn(out.shape, generator=torch.Generator("cuda").manual_seed(1), device="cuda",
                                   dtype=out.dtype))
        out.backward(g)
        return out.detach(), [x_in.grad] + [p.grad for p in m.parameters()]

    for conv in (mod for mod in model if isinstance(mod, torch.nn.modules.conv._ConvNd)):
        conv.weight = torch.nn.Parameter(misaligned(conv.weight))
    xm = misaligned(x)
    ref_out, ref_grads = step(model, xm)  # torch's op on the same misaligned tensors
    with cudnn_algos.apply(model, db) as h:
        h.reset_counts()
        out, grads = step(model, xm)
        torch.cuda.synchronize()
        counts = h.counts()
    for ours, theirs in zip([out] + grads, [ref_out] + ref_grads):
        assert torch.isfinite(ours).all() and rel_err(ours, theirs) <= tol, rel_err(ours, theirs)
    assert counts and all(c["fallback"] == 0 for c in counts), h.summary()
    assert {c["key"].split(" ")[0] for c in counts if c["pinned"]} == {"forward", "backward_data",
                                                                       "backward_filter"}, h.summary()
