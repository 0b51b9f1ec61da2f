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
