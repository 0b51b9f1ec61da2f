"""CPU: the corpus of real convolution problems (cudnn_algos.corpus): discovery on the meta device for a few
families with their counts pinned, deduplication across models and families, the round trip of the saved corpus,
and the CLI's corpus command and its usage errors."""
import pytest
from conftest import run_cli

from cudnn_algos.corpus import CONFIGS, Corpus, build_corpus


def test_decoders_family_counts_and_round_trip(tmp_path):
    """The decoders (a UNet and DCGAN's generator, written in the module: no torchvision needed): 12 distinct
    layer problems at batch 1, each at every batch size and configuration asked for."""
    c = build_corpus(["decoders"], batches=(1, 8), progress=False)
    assert c.models == {"decoders": ("unet", "dcgan_generator")} and not c.missing
    assert len(c.problems) == 16 * 2 * len(CONFIGS)
    transposed = {p.spec for p in c.problems if p.spec.transposed}
    assert len(transposed) == 7  # two UNet ups, five DCGAN layers
    assert {p.memory_format for p in c.problems} == {"channels_last", "contiguous"}
    assert {(p.dtype, p.memory_format) for p in c.problems} == {("float16", "channels_last"),
                                                                  ("bfloat16", "channels_last"),
                                                                  ("float32", "contiguous")}
    assert len({p.key for p in c.problems}) == len(c.problems)  # deduplicated
    c.to_json(str(tmp_path / "c.json.gz"))
    assert Corpus.load(str(tmp_path / "c.json.gz")) == c
    assert "problem-directions" in str(c) and "decoders" in str(c)


def test_resnet_family_matches_resnet50s_known_layers():
    """torchvision's ResNet family: ResNet-50's part is its 23 distinct convolutions and 53 calls (the built-in
    table in cudnn_algos.builtin_models), and problems shared by several models are kept once with every source."""
    pytest.importorskip("torchvision")
    from cudnn_algos.builtin_models import resnet50_convs

    c = build_corpus(["torchvision-resnet"], batches=(32,), configs=("fp16-nhwc",), progress=False)
    assert len(c.models["torchvision-resnet"]) == 8 and not c.missing
    assert len(c.problems) == 63
    r50 = [p for p in c.problems if any(s.model == "resnet50" for s in p.sources)]
    assert len(r50) == 23 and sum(s.uses for p in r50 for s in p.sources if s.model == "resnet50") == 53
    assert {(p.spec, p.input_shape) for p in r50} == {(spec, shape) for _, spec, shape, _ in resnet50_convs(32)}
    stem = next(p for p in c.problems if p.spec.in_channels == 3)
    assert {s.model for s in stem.sources} >= {"resnet18", "resnet50", "resnext50_32x4d"}  # one problem, many models


def test_families_are_shared_and_counted():
    pytest.importorskip("torchvision")
    c = build_corpus(["torchvision-resnet", "torchvision-classic"], batches=(8,), configs=("fp32",),
                     models=["resnet50", "densenet121"], progress=False)
    assert c.per_family()["torchvision-resnet"] == 23
    shared = [p for p in c.problems if len(p.families) == 2]  # e.g. the 7x7 stem: one problem, two families
    assert "Conv2d(3, 64, kernel_size=7, stride=2, padding=3)" in [str(p.spec) for p in shared]
    assert all({s.model for s in p.sources} == {"resnet50", "densenet121"} for p in shared)
    assert c.overlap() == {1: len(c.problems) - len(shared), 2: len(shared)}


def test_bad_arguments_name_the_argument():
    with pytest.raises(ValueError, match="families='nope' is not one of"):
        build_corpus(["nope"])
    with pytest.raises(ValueError, match="configs='fp8'"):
        build_corpus(["decoders"], configs=("fp8",))
    with pytest.raises(ValueError, match="models='resnet50' is not a model of decoders"):
        build_corpus(["decoders"], models=["resnet50"])
    with pytest.raises(ValueError, match="batches=0 must be >= 1"):
        build_corpus(["decoders"], batches=(0,))


def test_cli_corpus(tmp_path):
    r = run_cli("corpus", "--families", "decoders", "--batches", "1", "--configs", "fp32", "--no-progress",
                "--json", tmp_path / "c.json")
    assert r.returncode == 0 and "16 distinct problems, 48 problem-directions" in r.stdout, r.stdout + r.stderr
    assert len(Corpus.load(str(tmp_path / "c.json")).problems) == 16
    for args, says in ((("--families", "nope"), "--families='nope' is not one of"),
                       (("--batches", "x"), "--batches 'x' must be comma-separated ints"),
                       (("--configs", "fp8"), "--configs='fp8' is not one of"),
                       (("--json", tmp_path / "no" / "c.json"), "does not exist")):
        r = run_cli("corpus", *args)
        assert r.returncode == 2 and says in r.stderr and "Traceback" not in r.stderr, (args, r.stderr)


def test_a_corpus_at_other_batch_sizes_is_the_discovered_one_without_discovery(tmp_path):
    """Corpus.at_batches: the same layers at other batch sizes are what discovery at those sizes finds (the
    same problems, sources and uses), in the corpus's order; the CLI's --from does it from a file."""
    one = build_corpus(["decoders"], batches=(1,), configs=("fp16-nhwc", "fp32"), progress=False)
    found = build_corpus(["decoders"], batches=(8, 32), configs=("fp16-nhwc", "fp32"), progress=False)
    made = one.at_batches((8, 32))
    assert {p.key: p.sources for p in made.problems} == {p.key: p.sources for p in found.problems}
    assert made.batches == (8, 32) and made.models == one.models and made.configs == one.configs
    assert [p.key for p in made.problems if p.input_shape[0] == 8] == [
        (p.spec, (8, *p.input_shape[1:]), p.dtype, p.memory_format) for p in one.problems]  # in its order
    # a corpus at several sizes gives each layer once per size asked, its sources once
    again = found.at_batches((128,))
    assert len(again.problems) == len(one.problems) and {p.input_shape[0] for p in again.problems} == {128}
    assert [p.sources for p in again.problems] == [p.sources for p in one.problems]
    with pytest.raises(ValueError, match="batches=0 must be >= 1"):
        one.at_batches((0,))
    with pytest.raises(ValueError, match="at least one batch size"):
        one.at_batches(())
    one.to_json(str(tmp_path / "one.json"))
    r = run_cli("corpus", "--from", tmp_path / "one.json", "--batches", "8,32", "--json", tmp_path / "b.json")
    assert r.returncode == 0 and "batches 8,32" in r.stdout, r.stdout + r.stderr
    assert Corpus.load(str(tmp_path / "b.json")) == made
    for args, says in ((("--configs", "fp32"), "--configs with --from"),
                       (("--batches", "0"), "--batches=0 must be >= 1")):
        r = run_cli("corpus", "--from", tmp_path / "one.json", *args)
        assert r.returncode == 2 and says in r.stderr and "Traceback" not in r.stderr, (args, r.stderr)
    r = run_cli("corpus", "--from", tmp_path / "nothing.json")
    assert r.returncode == 2 and "nothing.json" in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_torchaudio_family_reaches_the_conformers_depthwise_convolutions():
    """torchaudio (where installed; the GPU machine has it): wav2vec2's feature extractor and the Conformer both
    discovered on the meta device — the Conformer's depthwise 1-d convolution (kernel 31, one group per channel) is
    in the corpus, nothing of the family missing."""
    pytest.importorskip("torchaudio")
    c = build_corpus(["torchaudio"], batches=(8,), configs=("fp32",), progress=False)
    assert not c.missing, c.missing
    assert set(c.models["torchaudio"]) == {"wav2vec2_base.feature_extractor", "conformer"}
    depthwise = [p for p in c.problems if p.spec.kernel_size == (31,) and p.spec.groups == p.spec.in_channels]
    assert depthwise and all(any(s.model == "conformer" for s in p.sources) for p in depthwise)
