"""Builds one extension, cudnn_algos._C, against the installed torch and the cuDNN that torch loads.

    pip install --no-build-isolation -e .

Headers and libraries are located by cudnn_algos/_build.py (CUDNN_PATH -> the nvidia-cudnn wheel beside torch ->
CUDA_HOME); no GPU and no nvcc are needed: the extension has only C++ sources.
"""
import importlib.util
import os
import sys
from pathlib import Path

from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

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
    extra_compile_args=["-O2", "-fvisibility=hidden", *cfg.defines()],
)

setup(ext_modules=[ext], cmdclass={"build_ext": BuildExtension.with_options(use_ninja=True)})
