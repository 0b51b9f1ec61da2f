"""CPU: the sampled problem space (cudnn_algos.sampling): a fixed seed gives the same problems everywhere, the draws
cover the ranges the space names (channels not multiples of 8, 1-d/3-d, transposed, grouped and depthwise, dilated,
asymmetric kernels, batch 1-256, the three configurations) within the limits, every problem is one torch runs
(its output shape checked against torch's own on the meta device), held-out ranges and training sets are disjoint,
and the CLI writes a corpus a sweep reads."""
import collections
import math

import pytest
from conftest import run_cli

from cudnn_algos.corpus import Corpus
from cudnn_algos.sampling import LIMITS, is_held_out, sample_corpus, space_lines


def test_a_seed_gives_the_same_problems_and_another_seed_others():
    a, b, c = sample_corpus(300, 7), sample_corpus(300, 7), sample_corpus(300, 8)
    assert a == b and [p.key for p in a.problems] == [p.key for p in b.problems]
    assert len({p.key for p in a.problems} & {p.key for p in c.problems}) < 30
    assert len({p.key for p in a.problems}) == 300  # distinct
    assert [p.key for p in sample_corpus(100, 7).problems] == [p.key for p in a.problems[:100]]  # a prefix


def test_the_draws_cover_the_space_within_its_limits():
    ps = sample_corpus(2000, 1).problems
    n = len(ps)
    share = lambda f: sum(map(f, ps)) / n  # noqa: E731
    assert 0.35 < share(lambda p: p.spec.in_channels % 8 != 0) < 0.65
    assert 0.05 < share(lambda p: p.spec.ndim == 1) < 0.15 and 0.05 < share(lambda p: p.spec.ndim == 3) < 0.15
    assert 0.06 < share(lambda p: p.spec.transposed) < 0.14
    assert share(lambda p: p.spec.groups == p.spec.in_channels > 1) > 0.05
    assert share(lambda p: 1 < p.spec.groups < p.spec.in_channels) > 0.03
    assert share(lambda p: max(p.spec.dilation) > 1) > 0.05 and share(lambda p: max(p.spec.stride) > 2) > 0.03
    assert share(lambda p: p.spec.ndim == 2 and len(set(p.spec.kernel_size)) == 2) > 0.03
    assert {max(p.spec.kernel_size) for p in ps} >= {1, 2, 3, 4, 5, 7, 9, 11}
    batches = [p.input_shape[0] for p in ps]
    assert min(batches) == 1 and max(batches) == 256 and 0.1 < share(lambda p: p.input_shape[0] not in
                                                                   (1, 2, 4, 8, 16, 32, 64, 128, 256)) < 0.6
    chans = [c for p in ps for c in (p.spec.in_channels, p.spec.out_channels)]
    assert min(chans) <= 2 and max(chans) >= 1024
    dtypes = collections.Counter(p.dtype for p in ps)
    assert set(dtypes) == {"float16", "bfloat16", "float32"} and dtypes["bfloat16"] > 0.1 * n
    assert {p.memory_format for p in ps if p.dtype != "float32"} == {"channels_last", "channels_last_3d",
                                                                     "contiguous"}  # 1-d: contiguous
    assert all(p.memory_format == "contiguous" for p in ps if p.dtype == "float32")
    for p in ps:
        s = p.spec.shapes(p.input_shape)
        size = 4 if p.dtype == "float32" else 2
        assert size * sum(math.prod(t) for t in (s.x_shape, s.w_shape, s.y_shape)) <= LIMITS["operand_bytes"]
        assert 2 * math.prod(s.y_shape) * math.prod(s.w_shape[1:]) <= LIMITS["flops"]


def test_every_sampled_problem_is_one_torch_runs_with_the_same_output_shape():
    torch = pytest.importorskip("torch")
    for p in sample_corpus(300, 2).problems:
        s = p.spec
        cls = {(1, False): torch.nn.Conv1d, (2, False): torch.nn.Conv2d, (3, False): torch.nn.Conv3d,
               (1, True): torch.nn.ConvTranspose1d, (2, True): torch.nn.ConvTranspose2d,
               (3, True): torch.nn.ConvTranspose3d}[(s.ndim, s.transposed)]
        kw = {"output_padding": s.output_padding} if s.transposed else {}
        m = cls(s.in_channels, s.out_channels, s.kernel_size, stride=s.stride, padding=s.padding,
                dilation=s.dilation, groups=s.groups, device="meta", **kw)
        y = m(torch.empty(p.input_shape, device="meta"))
        assert tuple(y.shape) == s.shapes(p.input_shape).output_shape, (s, p.input_shape)


def test_held_out_ranges_and_a_training_set_without_them_are_disjoint():
    held = sample_corpus(200, 3, held_out=True)
    train = sample_corpus(1000, 3, exclude_held_out=True)
    assert all(is_held_out(p.spec, p.input_shape) for p in held.problems)
    assert not any(is_held_out(p.spec, p.input_shape) for p in train.problems)
    assert held.models == {"sampled": ("seed3-held-out",)} and train.models == {"sampled": ("seed3",)}
    with pytest.raises(ValueError, match="exclude each other"):
        sample_corpus(10, held_out=True, exclude_held_out=True)
    for bad in (0, -1, 1.5, True):
        with pytest.raises((ValueError, TypeError), match="n="):
            sample_corpus(bad)
    assert any("channels" in line for line in space_lines())


def test_cli_writes_a_sampled_corpus(tmp_path):
    out = tmp_path / "s.json.gz"
    r = run_cli("corpus", "--sample", "50", "--seed", "4", "--json", str(out))
    assert r.returncode == 0 and "50 distinct problems, 150 problem-directions" in r.stdout
    assert Corpus.load(str(out)) == sample_corpus(50, 4)
    for args, msg in ((["--seed", "3"], "--seed goes with --sample"),
                      (["--sample", "5", "--families", "decoders"], "--families with --sample"),
                      (["--sample", "0"], "--sample=0")):
        r = run_cli("corpus", *args)
        assert r.returncode == 2 and msg in r.stderr, (args, r.stderr)
