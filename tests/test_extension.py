"""CPU: the extension builds, loads, and agrees with torch about cuDNN; its C++ argument checks raise ValueError.

Calls here never reach a GPU (no handle, no search)."""
import pytest
import torch

from cudnn_algos import _build, backend


@pytest.fixture(scope="module")
def ext():
    return backend.load()


def test_loaded_and_versions_agree_with_torch(ext):
    v = backend.versions()
    assert v.cudnn_runtime == torch.backends.cudnn.version()
    assert v.cudnn_build // 10000 == v.cudnn_runtime // 10000
    assert v.torch_build == torch.__version__
    assert backend.how_loaded() in ("installed", "jit")


def test_build_config_finds_the_cudnn_torch_loads(ext):
    cfg = _build.find_build_config()
    assert cfg.cudnn_header_version == ext.versions().cudnn_build
    from cudnn_algos.problem import loaded_cudnn_library

    lib = loaded_cudnn_library()
    assert lib is not None, "torch should have loaded libcudnn after cudnn.version()"
    if cfg.cudnn_source != "CUDNN_PATH":
        import os

        assert os.path.realpath(os.path.dirname(lib)) == os.path.realpath(cfg.cudnn_lib)


@pytest.mark.parametrize("direction,n", [("forward", 8), ("backward_data", 6), ("backward_filter", 7)])
def test_every_legacy_algorithm_is_named(ext, direction, n):
    names = backend.algo_names(direction)
    assert len(names) == n and len(set(names)) == n


def test_algo_names_for_unknown_direction(ext):
    with pytest.raises(ValueError, match="direction='up' is not one of: forward, backward_data, backward_filter"):
        backend.algo_names("up")


def test_the_bound_enums_name_what_the_package_names():
    """Note [enums across the boundary]: directions, legacy modes, math types, layouts and heuristic lists cross as
    the extension's enums, whose member names are the package's names, in the same order."""
    from cudnn_algos import choices, configs

    ext = backend.load()
    assert list(ext.Direction.__members__) == list(choices.DIRECTIONS)
    assert list(ext.SearchMode.__members__) == list(choices.MODES)
    assert list(ext.MathType.__members__) == list(choices.MATH_TYPES)
    assert list(ext.HeuristicList.__members__) == list(configs.SEARCH_LISTS)
    assert list(ext.Layout.__members__) == ["nchw", "nhwc"]
    with pytest.raises(TypeError):  # a name is not the enum: nothing in the extension parses strings
        ext.algo_names("forward")
    with pytest.raises(ValueError, match="heuristics='c' is not one of: instant, a, b, fallback"):
        backend.engine_search("forward", _problem(ext), heuristics=("a", "c"))
    with pytest.raises(ValueError, match="mode='fast' is not one of: find, find_ex, heuristic"):
        backend.legacy_search("forward", _problem(ext), "fast")


def _problem(ext, **over):
    kw = dict(dtype="float32", layout=ext.Layout.nchw, x=[2, 4, 8, 8], w=[4, 4, 3, 3], y=[2, 4, 6, 6],
              padding=[0, 0], stride=[1, 1], dilation=[1, 1], groups=1, math=ext.MathType.default)
    kw.update(over)
    return ext.ConvProblem(**kw)


def test_problem_checks(ext):
    assert "x=(2,4,8,8)" in _problem(ext).describe()
    with pytest.raises(ValueError, match="dtype='int8' is not one of"):
        _problem(ext, dtype="int8")
    with pytest.raises(TypeError):
        _problem(ext, layout="chwn")
    with pytest.raises(ValueError, match="4 or 5 dims"):
        _problem(ext, x=[2, 4, 8], w=[4, 4, 3], y=[2, 4, 6])
    with pytest.raises(ValueError, match="one entry per spatial dim"):
        _problem(ext, padding=[0])
    with pytest.raises(TypeError):
        _problem(ext, math="tf32")


def test_a_problem_pickles_as_its_arguments(ext):
    import pickle

    p = _problem(ext, layout=ext.Layout.nhwc, math=ext.MathType.tensor_op, dtype="float16")
    q = pickle.loads(pickle.dumps(p))
    assert q.describe() == p.describe() and "nhwc" in q.describe().lower()


@pytest.mark.skipif(__import__("os").environ.get("CUDNN_ALGOS_JIT_TEST") != "1",
                    reason="set CUDNN_ALGOS_JIT_TEST=1 to run (CI does): a second full build of the extension, ~1-2 min")
def test_jit_build_from_source_tree(tmp_path):
    """Without an installed _C, the first use JIT-builds it from every source under csrc/ (a bare checkout)."""
    import os
    import subprocess
    import sys

    env = dict(os.environ, CUDNN_ALGOS_FORCE_JIT="1")
    code = "from cudnn_algos import backend; m = backend.load(); print(backend.how_loaded(), m.versions().cudnn_runtime)"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.split()[-2:] == ["jit", str(torch.backends.cudnn.version())]
    assert "building it from csrc/" in r.stderr and "cudnn_algos: built in" in r.stderr, "the first use says so"


def test_handle_counts_count_only_handles_made(ext):
    # CPU: without a GPU no handle can be made; a failed attempt (cudnnCreate's status, or CUDA's own refusal before
    # it) must not count, or the long-run check of "no new handles" would read a failure as a leak
    if torch.cuda.is_available():
        pytest.skip("CPU test: on a GPU handles are made (tests/test_gpu_find.py counts them across threads)")
    try:
        ext.probe_handle(0)
    except RuntimeError:
        pass
    assert backend.cudnn_handles() == backend.HandleCounts(created=0, pooled=0)


def test_the_extensions_results_are_structs_named_as_the_typed_face_reads_them(ext):
    """Issue 54: every result the extension returns is a bound struct (csrc/bind/*.cpp), not a dict or a positional
    tuple, and backend.py builds its frozen dataclasses from it by field name (backend._as): a field renamed or left
    out on either side fails here, on the CPU, before any GPU run reads it."""
    from dataclasses import fields

    faces = {"AlgoRow": backend.LegacyRow, "SearchOutput": backend.LegacySearch, "CallTiming": backend.CallTiming,
             "EngineSearchOutput": backend.EngineSearchOut, "WindowActivity": backend.WindowActivity,
             "KernelClockStats": backend.KernelClockStats, "PinnedCount": backend.PinnedCount,
             "StageTimes": backend.StageTimes, "Versions": backend.Versions, "HandleCounts": backend.HandleCounts}
    for name, face in faces.items():
        bound = getattr(ext, name)
        assert [f.name for f in fields(face) if not hasattr(bound, f.name)] == [], name
    # the ones that answer without a GPU, through the typed face
    v = backend.versions()
    assert isinstance(v, backend.Versions) and v.cudnn_build > 0 and isinstance(v.torch_build, str)
    assert isinstance(backend.kernel_clock_stats().sessions, int) and backend.cudnn_handles().created >= 0
    backend.pinned_clear()
    backend.pinned_reset_counts()
    assert backend.pinned_counts() == []
    times = backend.pinned_stage_times()
    assert isinstance(times, backend.StageTimes) and isinstance(times.ns, dict) and times.forward_calls >= 0
