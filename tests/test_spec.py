"""CPU: ConvSpec from every module kind, derived shapes against torch's own (on the meta device), validation."""
import pytest
import torch

from cudnn_algos import ConvSpec

pytestmark = pytest.mark.filterwarnings("ignore:Using padding=.same. with even kernel")

MODULES = [
    (torch.nn.Conv1d(80, 256, 5), (4, 80, 1000)),
    (torch.nn.Conv1d(16, 32, 3, stride=2, padding=1, dilation=2, groups=4), (2, 16, 37)),
    (torch.nn.Conv2d(3, 64, 7, stride=2, padding=3), (8, 3, 224, 224)),
    (torch.nn.Conv2d(64, 64, 3, padding=1, groups=64), (2, 64, 15, 17)),
    (torch.nn.Conv2d(64, 64, 5, padding="same"), (2, 64, 20, 21)),
    (torch.nn.Conv2d(64, 64, 4, padding="same", dilation=1), (2, 64, 20, 21)),  # odd total: explicit pad
    (torch.nn.Conv2d(64, 64, 3, padding="valid"), (2, 64, 9, 9)),
    (torch.nn.Conv2d(16, 16, 3, padding=2, padding_mode="reflect"), (2, 16, 12, 12)),
    (torch.nn.Conv2d(16, 16, 3, padding=1, padding_mode="circular"), (2, 16, 12, 12)),
    (torch.nn.Conv2d(16, 16, (3, 5), padding=(1, 2), padding_mode="replicate", stride=(1, 2)), (2, 16, 12, 13)),
    (torch.nn.Conv3d(3, 64, 3, padding=1), (2, 3, 8, 56, 56)),
    (torch.nn.Conv3d(8, 8, (1, 3, 3), stride=(1, 2, 2), padding=(0, 1, 1), groups=2), (1, 8, 4, 9, 9)),
    (torch.nn.ConvTranspose1d(32, 16, 4, stride=2, padding=1), (2, 32, 50)),
    (torch.nn.ConvTranspose2d(64, 32, 4, stride=2, padding=1), (4, 64, 16, 16)),
    (torch.nn.ConvTranspose2d(64, 32, 3, stride=2, padding=1, output_padding=1, groups=2), (4, 64, 7, 9)),
    (torch.nn.ConvTranspose3d(8, 4, 3, stride=2, dilation=2), (1, 8, 3, 4, 5)),
]


@pytest.mark.parametrize("module,input_shape", MODULES, ids=lambda v: str(v) if isinstance(v, tuple) else None)
def test_spec_shapes_match_torch(module, input_shape):
    spec = ConvSpec.from_module(module)
    sh = spec.shapes(input_shape)
    with torch.device("meta"):
        m = module.to("meta")
        out = m(torch.empty(input_shape, device="meta"))
    assert sh.output_shape == tuple(out.shape)
    assert sh.weight_shape == tuple(module.weight.shape)
    assert sh.input_shape == tuple(input_shape)
    # the cuDNN operands are a consistent cross-correlation: y = conv(x, w)
    s = spec
    eff = [d * (k - 1) + 1 for d, k in zip(s.dilation, s.kernel_size)]
    expect_y = [(L + 2 * p - e) // st + 1 for L, p, e, st in zip(sh.x_shape[2:], sh.padding, eff, s.stride)]
    assert list(sh.y_shape[2:]) == expect_y
    assert sh.x_shape[1] == sh.w_shape[1] * s.groups and sh.y_shape[1] == sh.w_shape[0]
    # round trip through to_module and to_dict
    assert ConvSpec.from_module(spec.to_module(device="meta")) == spec
    assert ConvSpec.from_dict(spec.to_dict()) == spec


def test_transposed_is_the_mirrored_convolution():
    spec = ConvSpec.from_module(torch.nn.ConvTranspose2d(64, 32, 4, stride=2, padding=1))
    sh = spec.shapes((4, 64, 16, 16))
    assert sh.y_shape == (4, 64, 16, 16)  # the layer's input is the mirrored conv's output
    assert sh.x_shape == sh.output_shape == (4, 32, 32, 32)
    assert sh.w_shape == (64, 32, 4, 4)  # (in, out // groups, k, k), as torch stores it


def test_same_padding_with_odd_total_is_explicit_on_the_right():
    spec = ConvSpec(8, 8, (4, 4), padding="same")
    sh = spec.shapes((1, 8, 10, 10))
    assert sh.padding == (1, 1) and sh.pre_pad == ((0, 1), (0, 1)) and sh.has_pre_pad
    assert sh.x_shape == (1, 8, 11, 11) and sh.output_shape == (1, 8, 10, 10)


def test_padding_mode_pads_explicitly():
    sh = ConvSpec(8, 8, (3, 3), padding=2, padding_mode="reflect").shapes((1, 8, 10, 10))
    assert sh.padding == (0, 0) and sh.pre_pad == ((2, 2), (2, 2)) and sh.pre_pad_mode == "reflect"


def test_str_reads_like_torch():
    assert str(ConvSpec(64, 128, (3, 3), padding=1)) == "Conv2d(64, 128, kernel_size=3, padding=1)"
    assert "groups=64" in str(ConvSpec(64, 64, (3, 3), groups=64))


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(in_channels=6, out_channels=8, kernel_size=(3, 3), groups=4), "groups=4 must divide"),
        (dict(in_channels=0, out_channels=8, kernel_size=(3, 3)), "in_channels=0"),
        (dict(in_channels=4, out_channels=8, kernel_size=(0, 3)), "kernel_size"),
        (dict(in_channels=4, out_channels=8, kernel_size=3), "give a tuple"),
        (dict(in_channels=4, out_channels=8, kernel_size=(3, 3), padding="full"), "padding='full'"),
        (dict(in_channels=4, out_channels=8, kernel_size=(3, 3), padding=-1), "padding="),
        (dict(in_channels=4, out_channels=8, kernel_size=(3, 3), padding="same", stride=2), "stride 1"),
        (dict(in_channels=4, out_channels=8, kernel_size=(3, 3), padding_mode="mirror"), "padding_mode"),
        (dict(in_channels=4, out_channels=8, kernel_size=(3, 3), stride=(1, 2, 3)), "stride"),
        (dict(in_channels=4, out_channels=8, kernel_size=(3, 3), output_padding=1), "only to transposed"),
        (dict(in_channels=4, out_channels=8, kernel_size=(3, 3), transposed=True, stride=2, output_padding=2),
         "output_padding"),
        (dict(in_channels=4, out_channels=8, kernel_size=(3, 3, 3, 3)), "1-, 2- and 3-d"),
    ],
)
def test_spec_validation(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ConvSpec(**kwargs)


@pytest.mark.parametrize(
    "shape,match",
    [
        ((8, 64, 56), "has 3 dims but a Conv2d needs 4"),
        ((8, 3, 56, 56), "has 3 channels but the layer expects 64"),
        ((8, 64, 0, 56), "every dim must be positive"),
        ((8, 64, -1, 56), "every dim must be positive"),
        ((8, 64, 2, 2), "output size would be <= 0"),
        ((2**16, 64, 256, 256), "32-bit"),
    ],
)
def test_input_shape_validation(shape, match):
    spec = ConvSpec(64, 128, (5, 5))
    with pytest.raises(ValueError, match="input_shape") as ei:
        spec.shapes(shape)
    assert ei.match(match)


def test_input_shape_type_errors():
    with pytest.raises(TypeError, match="input_shape"):
        ConvSpec(4, 4, (3, 3)).shapes((1, 4, 5.5, 6))
    with pytest.raises(TypeError, match="input_shape"):
        ConvSpec(4, 4, (3, 3)).shapes("1,4,8,8x")


def test_from_module_rejects_non_convs():
    with pytest.raises(TypeError, match="Linear"):
        ConvSpec.from_module(torch.nn.Linear(3, 4))
    with pytest.raises(TypeError, match="conv must be"):
        ConvSpec.coerce(42)


def test_lazy_module_needs_a_first_run():
    with pytest.raises(ValueError, match="uninitialized"):
        ConvSpec.from_module(torch.nn.LazyConv2d(8, 3))


def test_output_padding_below_dilation_but_not_stride_is_refused_naming_it():
    # torch takes output_padding=1 with stride 1 and dilation 2; cuDNN's mirrored convolution cannot express it
    # (the GPU fuzz met it as disagreeing output dims deep in the C++ layer)
    m = torch.nn.ConvTranspose1d(4, 4, 3, stride=1, dilation=2, output_padding=1)
    assert m(torch.randn(2, 4, 6)).shape == (2, 4, 11)  # torch's own verdict
    with pytest.raises(ValueError, match=r"output_padding=\(1,\) is not smaller than stride=\(1,\)"):
        ConvSpec.from_module(m)
    ConvSpec.from_module(torch.nn.ConvTranspose1d(4, 4, 3, stride=2, dilation=2, output_padding=1))  # below stride


def test_a_tensor_padding_with_a_padding_mode_is_a_typed_error_naming_it():
    """A 0-d tensor has no len(): with a padding mode other than zeros, the one-value check used to raise torch's
    'len() of a 0-d tensor'; now padding's own check names it (found by test_properties_cpu's fuzzing)."""
    for padding in (torch.tensor(2.5), torch.tensor([1, 1, 1])):
        with pytest.raises((TypeError, ValueError), match="padding"):
            ConvSpec(4, 4, (3, 3), padding=padding, padding_mode="reflect")
