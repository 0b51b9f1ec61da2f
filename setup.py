"""Builds one extension, cudnn_algos._C, against the installed torch and the cuDNN that torch loads.

    pip install --no-build-isolation -e .

Headers and libraries are located by cudnn_algos/_build.py (CUDNN_PATH -> the nvidia-cudnn wheel beside torch ->
CUDA_HOME); no GPU and no nvcc are needed: the extension has only C++ sources.
"""
import importlib.util
import os
import sys
import time
from pathlib import Path

import setuptools
from setuptools import setup

# An editable build without build isolation uses the environment's own setuptools; before 70.1 it needs the separate
# `wheel` package and fails with an opaque metadata error (seen in a fresh Python 3.11 venv: setuptools 65.5).
_st = tuple(int(p) for p in setuptools.__version__.split(".")[:2] if p.isdigit())
if _st < (70, 1) and importlib.util.find_spec("wheel") is None:
    sys.exit(f"cudnn_algos: setuptools {setuptools.__version__} is too old to build here; "
             "run `pip install 'setuptools>=70.1'` first (pip install --no-build-isolation uses this environment's)")
try:
    from torch.utils.cpp_extension import BuildExtension, CppExtension
except ImportError:
    sys.exit("cudnn_algos builds against the torch you run, and none is importable here: install torch first "
             "(pip install torch), then build without isolation: pip install --no-build-isolation -e .")

ROOT = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("_cudnn_algos_build", ROOT / "cudnn_algos" / "_build.py")
_build = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = _build  # dataclasses look their module up there
_spec.loader.exec_module(_build)

cfg = _build.find_build_config()
print(cfg.summary(), flush=True)

ext = CppExtension(
    name="cudnn_algos._C",
    sources=[os.path.relpath(s, ROOT) for s in _build.sources(ROOT)],
    include_dirs=cfg.include_dirs(),
    library_dirs=cfg.library_dirs(),
    libraries=cfg.libraries(),
    runtime_library_dirs=cfg.library_dirs(),
    # -g0: no debug information (Python's own flags ask for -g, which doubles the compile time of units that include
    # torch's headers: 20 s against 12 s for csrc/pinned/ops.cpp); CUDNN_ALGOS_DEBUG_INFO=1 keeps it
    extra_compile_args=["-O2", "-fvisibility=hidden", *([] if os.environ.get("CUDNN_ALGOS_DEBUG_INFO") == "1"
                                                          else ["-g0"]), *cfg.defines()],
)



class BuildAndStamp(BuildExtension.with_options(use_ninja=True)):
    """Builds, then writes scripts/bootstrap.sh's stamp where the module was built into this checkout (an editable
    install), so that `bash scripts/test` after `pip install -e .` does not build it again."""

    def run(self):
        started = time.time()
        super().run()
        built = sorted((ROOT / "cudnn_algos").glob("_C*.so"))
        if len(built) == 1 and built[0].stat().st_mtime >= started - 1:
            stamp = ROOT / _build.STAMP
            stamp.parent.mkdir(exist_ok=True)
            stamp.write_text(f"{_build.sources_digest(ROOT)} {built[0].relative_to(ROOT).as_posix()}\n")


setup(ext_modules=[ext], cmdclass={"build_ext": BuildAndStamp})
