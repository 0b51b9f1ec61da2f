"""CPU: the fusible chains found on traced models (model/fusion.py, Note [fusible chains]) and the BatchNorm folding
arithmetic against torch in float64. No GPU, no cuDNN: what cuDNN fuses is the fused search's answer."""
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from cudnn_algos.model.fusion import Chain, find_chains, fold_batchnorm


class Block(nn.Module):
    """conv -> bn -> relu, conv -> bn -> (+ x) -> relu: ResNet's basic block."""

    def __init__(self, c=8):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)
        self.conv2, self.bn2 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        out += x
        return self.relu(out)


def by_conv(scan):
    return {c.conv: c for c in scan.chains}


def test_a_residual_block_has_its_two_chains_with_the_add_and_the_relu_after_it():
    scan = find_chains(Block().eval())
    assert scan.error == "" and scan.not_chained == {}
    c1, c2 = by_conv(scan)["conv1"], by_conv(scan)["conv2"]
    assert c1.ops == ("bn", "relu") and c1.fused_ops == ("bias", "relu") and c1.residual == ""
    assert c2.ops == ("bn", "add", "relu") and c2.residual == "x"
    assert c2.nodes[0] == "conv2" and len(c2.nodes) == 4
    assert c2.eager_kernels == 3 and c2.bytes_saved(1000, 2) == 2 * 3 * 1000 * 2


def test_a_batchnorm_in_training_mode_ends_the_chain_and_says_why():
    scan = find_chains(Block().train())
    c1 = by_conv(scan)["conv1"]
    assert c1.ops == () and "training mode" in c1.stop and "bn1" in c1.stop


def test_bias_first_then_activations_from_modules_functions_and_methods():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Conv2d(4, 8, 1)
            self.b = nn.Conv1d(4, 8, 3)
            self.c = nn.Conv3d(4, 8, 1, bias=False)
            self.d = nn.ConvTranspose2d(4, 8, 2, stride=2)
            self.gelu = nn.GELU(approximate="tanh")

        def forward(self, x2, x1, x3):
            a = F.silu(self.a(x2))
            b = self.b(x1).sigmoid()
            c = self.gelu(self.c(x3))
            d = F.hardswish(nn.functional.relu6(self.d(x2)))
            return a, b, c, d

    chains = by_conv(find_chains(M()))
    assert chains["a"].ops == ("bias", "silu")
    assert chains["b"].ops == ("bias", "sigmoid")
    assert chains["c"].ops == ("gelu_tanh",)
    assert chains["d"].ops == ("bias", "relu6", "hardswish") and chains["d"].spec.transposed


def test_a_value_used_twice_a_second_add_and_a_third_activation_end_a_chain():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b, self.c, self.d = (nn.Conv2d(4, 4, 1, bias=False) for _ in range(4))

        def forward(self, x, y):
            a = self.a(x)
            b = torch.relu(self.b(x)) + y + y
            c = torch.tanh(torch.relu(torch.sigmoid(self.c(x))))
            d = self.d(x)
            return torch.relu(a), a, b, c, d + d

    chains = by_conv(find_chains(M()))
    assert chains["a"].ops == () and "used by 2 nodes" in chains["a"].stop
    assert chains["d"].ops == () and "not an epilogue op" in chains["d"].stop  # x + x is no residual
    assert chains["b"].ops == ("relu", "add") and chains["b"].stop == "a second add"
    assert chains["c"].ops == ("sigmoid", "relu") and "activations" in chains["c"].stop


def test_pass_through_nodes_are_stepped_over_in_eval_mode_only():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv, self.drop = nn.Conv2d(4, 4, 1, bias=False), nn.Dropout(0.5)

        def forward(self, x):
            return F.relu(self.drop(self.conv(x)))

    assert by_conv(find_chains(M().eval()))["conv"].ops == ("relu",)
    train = by_conv(find_chains(M().train()))["conv"]
    assert train.ops == () and "drop" in train.stop


def test_an_add_of_a_scalar_or_with_alpha_is_not_a_residual():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Conv2d(4, 4, 1, bias=False), nn.Conv2d(4, 4, 1, bias=False)

        def forward(self, x):
            return self.a(x) + 1.0, torch.add(self.b(x), x, alpha=2)

    chains = by_conv(find_chains(M()))
    assert chains["a"].ops == () and chains["b"].ops == ()


def test_functional_convolutions_and_untraceable_models_are_named_with_why():
    class Functional(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.randn(4, 4, 1, 1))

        def forward(self, x):
            return F.relu(F.conv2d(x, self.w))

    class Branchy(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(4, 4, 1)

        def forward(self, x):
            return self.conv(x) if x.sum() > 0 else x

    f = find_chains(Functional())
    assert f.chains == [] and any("functional convolution" in why for why in f.not_chained.values())
    b = find_chains(Branchy())
    assert b.chains == [] and "could not trace Branchy" in b.error


def test_padding_modes_other_than_zeros_are_not_chained():
    m = nn.Sequential(nn.Conv2d(4, 4, 3, padding=1, padding_mode="reflect"), nn.ReLU())
    scan = find_chains(m)
    assert scan.chains == [] and "reflect" in scan.not_chained["0"]


def test_torchvision_resnet50_chains():
    tv = pytest.importorskip("torchvision")
    scan = find_chains(tv.models.resnet50().eval())
    ops = [c.ops for c in scan.chains]
    assert len(ops) == 53 and ops.count(("bn", "relu")) == 33 and ops.count(("bn", "add", "relu")) == 16
    downsample = by_conv(scan)["layer1.0.downsample.0"]  # its add is layer1.0.conv3's chain's
    assert downsample.ops == ("bn",) and "earlier chain" in downsample.stop


@pytest.mark.parametrize("transposed,groups", [(False, 1), (False, 4), (True, 1), (True, 2)])
@pytest.mark.parametrize("bias", [False, True])
def test_folding_a_batchnorm_matches_torch_in_float64(transposed, groups, bias):
    torch.manual_seed(0)
    conv = (nn.ConvTranspose2d if transposed else nn.Conv2d)(8, 12, 3, padding=1, groups=groups, bias=bias).double()
    bn = nn.BatchNorm2d(12).double().eval()
    with torch.no_grad():
        bn.running_mean.uniform_(-1, 1)
        bn.running_var.uniform_(0.5, 2)
        bn.weight.uniform_(0.5, 1.5)
        bn.bias.uniform_(-1, 1)
    x = torch.randn(2, 8, 7, 7, dtype=torch.float64)
    w, b = fold_batchnorm(conv.weight, conv.bias, bn, transposed=transposed, groups=groups)
    conv_fn = F.conv_transpose2d if transposed else F.conv2d
    folded = conv_fn(x, w, b, padding=1, groups=groups)
    torch.testing.assert_close(folded, bn(conv(x)), rtol=1e-12, atol=1e-12)
    assert w.dtype == conv.weight.dtype


def test_folding_checks_what_it_is_given():
    conv, bn = nn.Conv2d(4, 8, 1), nn.BatchNorm2d(6).eval()
    with pytest.raises(ValueError, match="bn has 6 channels but the convolution has 8"):
        fold_batchnorm(conv.weight, conv.bias, bn)
    with pytest.raises(ValueError, match="track_running_stats=False"):
        fold_batchnorm(conv.weight, conv.bias, nn.BatchNorm2d(8, track_running_stats=False))


def test_a_chain_is_frozen():
    c = find_chains(Block().eval()).chains[0]
    assert isinstance(c, Chain)
    with pytest.raises(AttributeError):
        c.ops = ()
