"""CPU: every bad argument of find()/run() raises a typed error naming the argument, before any GPU work.

These run identically with or without a GPU: validation precedes the CUDA check (the last test needs no GPU).
"""
import pytest
import torch

import cudnn_algos
from cudnn_algos import ConvSpec, CudaUnavailableError

CONV = torch.nn.Conv2d(64, 128, 3, padding=1)
SHAPE = (32, 64, 56, 56)


@pytest.mark.parametrize(
    "shape,match",
    [
        ((32, 64, 56), r"input_shape=\(32, 64, 56\) has 3 dims"),
        ((32, 3, 56, 56), "input_shape=.* has 3 channels but the layer expects 64"),
        ((32, 64, 0, 56), "input_shape=.*every dim must be positive"),
        ((32, 64, 1, 1), "input_shape=.*output size would be <= 0"),
    ],
)
def test_bad_input_shape(shape, match):
    conv = torch.nn.Conv2d(64, 128, 3)
    with pytest.raises(ValueError, match=match):
        cudnn_algos.find(conv, shape)


def test_bad_groups():
    with pytest.raises(ValueError, match="groups=3 must divide"):
        cudnn_algos.find(ConvSpec(64, 128, (3, 3), groups=3), SHAPE)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int8, torch.complex64, torch.uint8, torch.float8_e4m3fn])
def test_unsupported_dtype_is_type_error(dtype):
    with pytest.raises(TypeError, match="dtype="):
        cudnn_algos.find(CONV, SHAPE, dtype=dtype)


def test_unknown_dtype_name():
    with pytest.raises(ValueError, match="dtype='float12' is not one of"):
        cudnn_algos.find(CONV, SHAPE, dtype="float12")


@pytest.mark.parametrize(
    "conv,shape,fmt,match",
    [
        (torch.nn.Conv1d(8, 8, 3), (2, 8, 32), "channels_last", "does not fit a 1-d convolution.*valid: contiguous"),
        (CONV, SHAPE, "channels_last_3d", "does not fit a 2-d.*valid: contiguous, channels_last"),
        (torch.nn.Conv3d(8, 8, 3), (2, 8, 4, 8, 8), torch.channels_last, "does not fit a 3-d"),
        (CONV, SHAPE, "nhwc", "memory_format='nhwc' is not one of: contiguous, channels_last, channels_last_3d"),
        (CONV, SHAPE, torch.preserve_format, "is not one of"),
    ],
)
def test_bad_memory_format(conv, shape, fmt, match):
    with pytest.raises(ValueError, match=match):
        cudnn_algos.find(conv, shape, memory_format=fmt)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(direction="sideways"), "direction='sideways' is not one of: forward, backward_data, backward_filter, all"),
        (dict(mode="fast"), "mode='fast' is not one of: find, find_ex, heuristic"),
        (dict(math="tf32"), "math='tf32' is not one of: default, tensor_op, tensor_op_allow_conversion, fma"),
        (dict(workspace_limit=-1), "workspace_limit=-1 must be >= 0"),
        (dict(workspace_limit=2**63), "workspace_limit=9223372036854775808 bytes does not fit"),
        (dict(workspace_limit=2**64), "workspace_limit=18446744073709551616 bytes does not fit"),
        (dict(workspace_limit=10**30), "workspace_limit=1000000000000000000000000000000 bytes does not fit"),
    ],
)
def test_bad_choices(kwargs, match):
    with pytest.raises(ValueError, match=match):
        cudnn_algos.find(CONV, SHAPE, **kwargs)


def test_workspace_limit_type():
    with pytest.raises(TypeError, match="workspace_limit"):
        cudnn_algos.find(CONV, SHAPE, workspace_limit=1.5)


def test_bad_conv_type():
    with pytest.raises(TypeError, match="conv must be"):
        cudnn_algos.find("Conv2d(3, 4, 3)", SHAPE)


def test_bad_device_type():
    with pytest.raises(TypeError, match="device="):
        cudnn_algos.find(CONV, SHAPE, device=1.0)


def test_cpu_device_rejected():
    with pytest.raises(ValueError, match="not a CUDA device"):
        cudnn_algos.find(CONV, SHAPE, device="cpu")


def test_default_math_follows_torch():
    assert cudnn_algos.default_math(torch.float16) == "tensor_op"
    old = torch.backends.cudnn.allow_tf32
    try:
        torch.backends.cudnn.allow_tf32 = True
        assert cudnn_algos.default_math(torch.float32) == "default"
        torch.backends.cudnn.allow_tf32 = False
        assert cudnn_algos.default_math(torch.float32) == "fma"
    finally:
        torch.backends.cudnn.allow_tf32 = old


def test_run_argument_checks():
    w = torch.randn(128, 64, 3, 3)
    with pytest.raises(ValueError, match="needs weight="):
        cudnn_algos.run(CONV, "GEMM", input=torch.randn(SHAPE))
    with pytest.raises(ValueError, match="needs input_shape="):
        cudnn_algos.run(CONV, "GEMM", direction="backward_data", weight=w, grad_output=torch.randn(32, 128, 56, 56))
    with pytest.raises(ValueError, match="weight has shape"):
        cudnn_algos.run(CONV, "GEMM", input=torch.randn(2, 64, 8, 8), weight=torch.randn(128, 64, 5, 5))
    with pytest.raises(ValueError, match="run\\(\\) needs CUDA tensors"):
        cudnn_algos.run(CONV, "GEMM", input=torch.randn(2, 64, 8, 8), weight=w)
    with pytest.raises(TypeError, match="input must be a torch.Tensor"):
        cudnn_algos.run(CONV, "GEMM", input=[1, 2], weight=w)
    # input_shape that disagrees with the input is refused here, before any GPU work (CPU tensors: it comes first)
    with pytest.raises(ValueError, match=r"input_shape=\(2, 64, 9, 9\) disagrees with input.shape=\(2, 64, 8, 8\)"):
        cudnn_algos.run(CONV, "GEMM", input=torch.randn(2, 64, 8, 8), weight=w, input_shape=(2, 64, 9, 9))
    with pytest.raises(TypeError, match="input_shape=5 must be a sequence"):
        cudnn_algos.run(CONV, "GEMM", input=torch.randn(2, 64, 8, 8), weight=w, input_shape=5)
    with pytest.raises(ValueError, match="workspace_limit=.* does not fit"):
        cudnn_algos.run(CONV, "GEMM", input=torch.randn(2, 64, 8, 8), weight=w, workspace_limit=2**63)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU error; a GPU is visible")
def test_no_gpu_is_a_clear_error():
    with pytest.raises(CudaUnavailableError, match="no CUDA GPU is visible") as ei:
        cudnn_algos.find(CONV, SHAPE)
    assert isinstance(ei.value, RuntimeError)


@pytest.mark.parametrize("code,status,oom", [
    (4004, "CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED", True),
    (4003, "CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED", False),
    (3000, "CUDNN_STATUS_NOT_SUPPORTED", False),
])
def test_a_cudnn_device_allocation_failure_is_also_torchs_out_of_memory_error(code, status, oom):
    # on the H200 with 64 MB free, find()'s mode "find" (cuDNN allocates for itself) failed with status 4004: code
    # that frees memory and retries on torch.OutOfMemoryError must catch it, and it still carries cuDNN's status.
    # CPU test: the extension's exception translation, raised through the extension without a GPU
    import pickle

    from cudnn_algos import backend
    with pytest.raises(cudnn_algos.CudnnError) as info:
        backend.load()._raise_cudnn_status(code)
    e = info.value
    assert e.status == status and e.code == code and status in str(e)
    assert isinstance(e, torch.OutOfMemoryError) is oom
    assert isinstance(e, cudnn_algos.CudnnOutOfMemoryError) is oom
    again = pickle.loads(pickle.dumps(e))
    assert type(again) is type(e) and again.status == status


@pytest.mark.parametrize("model", ["resnet50", None, torch.nn.Conv2d])
def test_a_model_that_is_not_a_module_is_a_type_error_naming_it_before_any_work(model, tmp_path):
    """apply, tune and profile, fused or not: `model` not a torch.nn.Module is a TypeError naming the argument (not
    an AttributeError from deep inside), raised before a database is opened or a GPU is asked for."""
    x = torch.randn(1, 3, 8, 8)
    calls = [lambda: cudnn_algos.apply(model), lambda: cudnn_algos.apply(model, fuse=True),
             lambda: cudnn_algos.tune(model, x, tmp_path / "t.sqlite"),
             lambda: cudnn_algos.tune(model, x, tmp_path / "t.sqlite", fuse=True),
             lambda: cudnn_algos.profile(model, x), lambda: cudnn_algos.profile(model, x, fusion=True)]
    for call in calls:
        with pytest.raises(TypeError, match=f"model must be a torch.nn.Module, not {type(model).__name__}"):
            call()
    assert not (tmp_path / "t.sqlite").exists()


def test_an_example_input_the_model_cannot_run_is_named_in_the_error():
    """profile and tune (fused or not) run the model once on example_input to find its convolutions: where that
    forward pass fails, the error (the model's own type) names the input it was given."""
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.BatchNorm2d(8), torch.nn.ReLU())
    for call in (lambda x: cudnn_algos.profile(model, x), lambda x: cudnn_algos.profile(model, x, fusion=True)):
        with pytest.raises(TypeError, match="example_input=str 'x': the model's forward pass on it failed"):
            call("x")
        with pytest.raises(RuntimeError, match=r"example_input=a torch.float32 tensor of shape \(1, 5, 8, 8\): the "
                                               r"model's forward pass on it failed: .*channels"):
            call(torch.randn(1, 5, 8, 8))


def test_the_fused_paths_take_a_bool_flag_and_name_the_arguments_they_do_not_take(tmp_path):
    """apply(fuse=...), tune(fuse=...), profile(fusion=...): a flag that is not a bool is a TypeError (1 or "yes" no
    longer means "not fused" silently); with it True, an argument only the plain path takes, given other than its
    default, is a ValueError naming it and its value. All before any GPU work or database."""
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU())
    x, db = torch.randn(1, 3, 8, 8), tmp_path / "t.sqlite"
    for call, flag in ((lambda **kw: cudnn_algos.apply(model, **kw), "fuse"),
                       (lambda **kw: cudnn_algos.tune(model, x, db, **kw), "fuse"),
                       (lambda **kw: cudnn_algos.profile(model, x, **kw), "fusion")):
        for bad in (1, "yes", None):
            with pytest.raises(TypeError, match=f"{flag}={bad!r} must be True or False"):
                call(**{flag: bad})
    with pytest.raises(ValueError, match=r"apply\(fuse=True\) does not take: unseen='predict', k=5"):
        cudnn_algos.apply(model, fuse=True, unseen="predict", k=5)
    with pytest.raises(ValueError, match=r"tune\(fuse=True\) does not take: directions=\['forward'\], budget_s=5"):
        cudnn_algos.tune(model, x, db, fuse=True, directions=["forward"], budget_s=5)
    with pytest.raises(ValueError, match=r"profile\(fusion=True\) does not take: repeats=3, legacy=True"):
        cudnn_algos.profile(model, x, fusion=True, repeats=3, legacy=True)
    assert not db.exists()
    h = cudnn_algos.apply(model, fuse=True, db=db)  # the arguments it takes are taken
    assert type(h).__name__ == "Fused"


@pytest.mark.parametrize("db", [42, 1.5, ["t.sqlite"]])
def test_a_database_argument_that_is_not_a_path_is_a_type_error_naming_db(db):
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.BatchNorm2d(8), torch.nn.ReLU()).eval()
    for fuse in (False, True):
        with pytest.raises(TypeError, match=r"db=.* must be a file path \(str or os.PathLike\), a TuningDB or None"):
            cudnn_algos.apply(model, db, fuse=fuse)
