"""CPU, property-based (hypothesis): a bad argument is a TypeError or ValueError that names it, whatever else is
wrong beside it; the CLI's parsing ends in a usage error (exit 2, one line) or reaches the search, never a
traceback. No GPU: the CLI's search and device check are replaced by a stand-in that only says it was reached."""
import contextlib
import io

import numpy as np
import pytest
import torch

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from cudnn_algos import cli  # noqa: E402
from cudnn_algos.spec import ConvSpec  # noqa: E402

# values a caller might pass by mistake, for any field
ODD = st.sampled_from([None, True, False, 2.5, -1, 0, 2**40, "3", "same", b"x", [], [3, "a"], [[3]], (3, 3, 3, 3),
                       {"a": 1}, np.int64(3), np.float32(1.0), torch.tensor(3), torch.tensor([3, 3]),
                       torch.tensor(2.5), object(), float("nan")])
VALID = {"in_channels": st.sampled_from([4, 8]), "out_channels": st.sampled_from([4, 8]),
         "kernel_size": st.sampled_from([(3,), (3, 3), (1, 3, 3)]), "stride": st.just(1), "padding": st.just(0),
         "dilation": st.just(1), "groups": st.just(1), "transposed": st.just(False), "output_padding": st.just(0),
         "padding_mode": st.just("zeros")}


@st.composite
def spec_args(draw):
    """ConvSpec's fields, some of them (at least one) replaced by an odd value: (kwargs, names replaced)."""
    odd = draw(st.sets(st.sampled_from(sorted(VALID)), min_size=1, max_size=4))
    kw = {k: (draw(ODD) if k in odd else draw(v)) for k, v in VALID.items()}
    return kw, odd


@settings(max_examples=600, deadline=None)
@given(spec_args())
def test_a_bad_convspec_field_is_named_in_its_error(case):
    kw, odd = case
    try:
        ConvSpec(**kw)
    except (TypeError, ValueError) as e:
        msg = str(e)
        named = [k for k in kw if f"{k}=" in msg or f"{k} " in msg]
        assert named, f"{type(e).__name__}: {msg!r} names no argument; odd: {sorted(odd)}"
    # an odd value that is also a valid one (0 padding, a 3 that torch takes as an int) may construct: fine


class _Reached(BaseException):
    """The CLI got past its argument checks to the search (a BaseException: main's last handler turns every
    Exception into one line and exit 1, and must not swallow this one)."""


TOKENS = st.sampled_from([
    "--conv", "--input", "--dtype", "--direction", "--mode", "--math", "--workspace-limit", "--device", "--repeats",
    "--l2", "--measure", "--channels-last", "--heuristics", "--config", "--exhaustive", "--refine", "--screen",
    "--", "--input=--", "--conv=--", "=", "", " ", "Conv2d(8, 8, 3)", "Conv1d(4, 4, 3)", "Conv2d(8, 8", "2,8,16,16",
    "2x8x16x16", "8,8", "-1", "0", "1", "3", str(2**63), "1e3", "float16", "int8", "forward", "all", "find_ex",
    "tensor_op", "cold", "instant,a", "eng0", "eng62{TILE_SIZE=0}", "eng62{NOPE=1}", "\x00", "é", "x" * 300,
])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sampled_from(["find", "engines"]), st.lists(TOKENS, max_size=8))
def test_the_cli_ends_in_a_usage_error_or_reaches_the_search(monkeypatch, command, argv):
    from cudnn_algos import api, engines

    def reached(*a, **k):
        raise _Reached

    monkeypatch.setattr(api, "device_index", lambda d: 0)
    monkeypatch.setattr(engines, "device_index", lambda d: 0)
    monkeypatch.setattr(api, "find", reached)
    monkeypatch.setattr(engines, "find_engines", reached)
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code = cli.main([command, *argv])
        except SystemExit as e:  # argparse's own usage errors
            code = e.code
        except _Reached:
            return
    assert code == 2, (command, argv, code, err.getvalue())
    assert "error:" in err.getvalue() and "Traceback" not in err.getvalue(), (command, argv, err.getvalue())


# Note [one-value tuples] (cudnn_algos/spec.py): the forms torch's modules take for each field, one-value tuples and
# 'same' among them, against the shape torch's own module returns
def _form(draw, values, nd):
    v = draw(st.sampled_from(values))
    kind = draw(st.sampled_from(["int", "one", "all"]))
    return v if kind == "int" else (v,) if kind == "one" else tuple(draw(st.sampled_from(values)) for _ in range(nd))


@st.composite
def torch_layers(draw):
    nd = draw(st.sampled_from([1, 2, 3]))
    groups = draw(st.sampled_from([1, 2]))
    kernel = tuple(draw(st.integers(1, 5)) for _ in range(nd))
    stride = _form(draw, [1, 2], nd)
    dilation = _form(draw, [1, 2, 3], nd)
    padding_mode = draw(st.sampled_from(["zeros", "circular", "reflect", "replicate"]))
    padding = draw(st.sampled_from(["same", "valid", "form"]))
    if padding == "form":
        padding = _form(draw, [0, 1, 2], nd)
    elif padding == "same":
        stride = 1
    size = tuple(draw(st.integers(3, 12)) for _ in range(nd))
    return dict(in_channels=2 * groups, out_channels=2 * groups, kernel_size=kernel, stride=stride, padding=padding,
                dilation=dilation, groups=groups, padding_mode=padding_mode), size


@settings(max_examples=400, deadline=None)
@given(torch_layers())
def test_convspec_takes_torchs_forms_and_gives_its_output_shape_or_refuses(case):
    """Every field in every form torch's modules take: ConvSpec gives torch's output shape, or refuses with a
    ValueError naming the argument; it refuses only what torch refuses or the one-value tuples of Note [one-value
    tuples] (where torch's own output is not what the arguments say)."""
    import warnings

    kw, size = case
    nd = len(kw["kernel_size"])
    shape = (1, kw["in_channels"], *size)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            m = getattr(torch.nn, f"Conv{nd}d")(bias=False, **kw)
            want = tuple(m(torch.randn(shape)).shape)
    except (RuntimeError, ValueError, NotImplementedError):
        want = None
    try:
        got = ConvSpec(**kw).shapes(shape).output_shape
    except ValueError as e:
        named = [k for k in ("padding", "dilation", "input_shape", "stride", "kernel_size") if f"{k}=" in str(e)]
        assert named, str(e)
        one_value = kw["padding_mode"] != "zeros" and nd > 1 and any(
            isinstance(kw[k], tuple) and len(kw[k]) == 1 for k in ("padding", "dilation"))
        assert want is None or one_value, f"torch gives {want}; ConvSpec refused: {e}"
        return
    assert got == want, f"ConvSpec {got}, torch {want}"


@pytest.mark.parametrize("padding", [{1: 0, 2: 0}, {1, 2}, frozenset({0})])
def test_convspec_refuses_a_mapping_or_a_set_as_a_tuple(padding):
    """A dict's keys or a set's members are not paddings (they were taken as (1, 2))."""
    with pytest.raises(TypeError, match=r"padding must be an int or a sequence of 2 ints"):
        ConvSpec(3, 8, (3, 3), padding=padding)


def test_convspec_one_value_tuples_with_explicit_padding_modes():
    """Note [one-value tuples]: torch refuses a one-value padding with circular padding at its forward, and pads one
    dim alone for 'same' with a one-value dilation; both are refused naming the argument. An int, a full tuple,
    zeros padding and 1-d layers are taken as before."""
    with pytest.raises(ValueError, match=r"padding=\(1,\) with padding_mode='circular'"):
        ConvSpec(3, 8, (3, 3), padding=(1,), padding_mode="circular")
    with pytest.raises(ValueError, match=r"dilation=\(2,\) with padding_mode='reflect'"):
        ConvSpec(3, 8, (3, 3, 3), padding="same", dilation=(2,), padding_mode="reflect")
    assert ConvSpec(3, 8, (3, 3, 3), padding="same", dilation=(2,)).shapes((1, 3, 9, 9, 9)).output_shape == \
        (1, 8, 9, 9, 9)
    assert ConvSpec(3, 8, (3, 3), padding=1, padding_mode="circular").padding == (1, 1)
    assert ConvSpec(3, 8, (3,), padding=(1,), padding_mode="circular").padding == (1,)
