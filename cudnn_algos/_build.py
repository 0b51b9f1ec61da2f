"""Where the extension's headers and libraries come from: shared by setup.py and the JIT fallback in _ext.py.

This module imports only the standard library and torch, so setup.py can load it by file path without
importing the package.

cuDNN is located the way the installed torch finds it at run time:
  1. ``CUDNN_PATH`` (or ``CUDNN_HOME``) if set,
  2. the ``nvidia-cudnn`` wheel beside torch (``site-packages/nvidia/cudnn``), which is what a pip-installed
     torch preloads,
  3. the CUDA toolkit (``CUDA_HOME``/``CUDA_PATH``, else the folder of the real ``nvcc``, else /usr/local/cuda).
CUDA's runtime headers come from the CUDA wheel beside torch (``nvidia/cu*/include`` or
``nvidia/cuda_runtime/include``) when present, else from the toolkit. No version or path is hard-coded.
The extension has no .cu sources, so neither nvcc nor a GPU is needed to build it.
"""
from __future__ import annotations

import glob
import os
import re
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class BuildConfig:
    cudnn_include: str
    cudnn_lib: str
    cudnn_libname: str  # what follows -l, e.g. ":libcudnn.so.9"
    cudnn_source: str  # which rule found it
    cudnn_header_version: int
    cuda_include: str
    cuda_lib: str
    cudart_libname: str
    cuda_source: str
    cupti_include: str
    cupti_lib: str
    cupti_libname: str
    torch_version: str
    extra_cflags: list[str] = field(default_factory=list)

    def summary(self) -> str:
        v = self.cudnn_header_version
        return (
            f"cudnn_algos build: torch {self.torch_version}; cuDNN {v // 10000}.{v % 10000 // 100}.{v % 100} headers "
            f"from {self.cudnn_include} ({self.cudnn_source}), linking {self.cudnn_libname} in {self.cudnn_lib}; "
            f"CUDA headers from {self.cuda_include} ({self.cuda_source}); CUPTI {self.cupti_libname} in "
            f"{self.cupti_lib}"
        )

    def include_dirs(self) -> list[str]:
        # CUPTI's folder last: a wheel's include folder also holds incomplete CUDA runtime headers
        return list(dict.fromkeys([self.cudnn_include, self.cuda_include, self.cupti_include]))

    def library_dirs(self) -> list[str]:
        return list(dict.fromkeys([self.cudnn_lib, self.cuda_lib, self.cupti_lib]))

    def libraries(self) -> list[str]:
        return ["c10_cuda", "torch_cuda", self.cudnn_libname, self.cudart_libname, self.cupti_libname]

    def ldflags(self) -> list[str]:
        """Flags for torch.utils.cpp_extension.load (JIT): -L, -l and an rpath so the loader finds the same libs."""
        flags = []
        for d in self.library_dirs():
            flags += [f"-L{d}", f"-Wl,-rpath,{d}"]
        flags += [f"-l{lib}" for lib in self.libraries()]
        return flags

    def defines(self) -> list[str]:
        # unquoted (shell-quoting differs between setuptools and JIT builds); bindings.cpp stringifies it
        return [f"-DCUDNN_ALGOS_BUILD_TORCH_VERSION_RAW={self.torch_version}", *self.extra_cflags]


class BuildConfigError(RuntimeError):
    pass


def _site_nvidia_dirs() -> list[Path]:
    """The `nvidia` namespace folders beside torch (the wheels torch depends on install there)."""
    import torch

    roots = [Path(torch.__file__).resolve().parent.parent]
    roots += [Path(p) for p in sys.path if p and os.path.isdir(p)]
    out = []
    for r in roots:
        d = r / "nvidia"
        if d.is_dir() and d not in out:
            out.append(d)
    return out


def _cuda_home() -> Path | None:
    for var in ("CUDA_HOME", "CUDA_PATH"):
        v = os.environ.get(var)
        if v and Path(v, "include").is_dir():
            return Path(v)
    nvcc = shutil.which("nvcc")
    if nvcc:
        # nvcc may be a wrapper script (seen: /usr/local/bin/nvcc doing `exec /usr/local/cuda-13.0/bin/nvcc`),
        # so torch's guess (the folder above nvcc) is wrong there; follow links and wrapper scripts instead.
        real = Path(nvcc).resolve()
        try:
            text = real.read_text(errors="ignore")[:4096] if real.stat().st_size < 4096 else ""
        except OSError:
            text = ""
        m = re.search(r"(/\S+)/bin/nvcc", text)
        cand = Path(m.group(1)) if m else real.parent.parent
        if (cand / "include" / "cuda_runtime_api.h").exists():
            return cand
    for cand in (Path("/usr/local/cuda"),):
        if (cand / "include" / "cuda_runtime_api.h").exists():
            return cand
    return None


def _lib_dir_of(home: Path) -> Path:
    for sub in ("lib64", "lib", "lib/x64"):
        if (home / sub).is_dir():
            return home / sub
    return home / "lib"


def _libname(lib_dir: Path, stem: str) -> str | None:
    """`:libX.so.N` for the versioned file (wheels ship no unversioned link), else plain `X`."""
    if (lib_dir / f"lib{stem}.so").exists():
        return stem
    found = sorted(glob.glob(str(lib_dir / f"lib{stem}.so.*")), key=len)
    return f":{Path(found[0]).name}" if found else None


def _header_version(include: Path) -> int:
    text = ""
    for name in ("cudnn_version.h", "cudnn.h"):
        p = include / name
        if p.exists():
            text += p.read_text(errors="ignore")
    vals = {}
    for key in ("CUDNN_MAJOR", "CUDNN_MINOR", "CUDNN_PATCHLEVEL"):
        m = re.search(rf"#define\s+{key}\s+(\d+)", text)
        vals[key] = int(m.group(1)) if m else 0
    return vals["CUDNN_MAJOR"] * 10000 + vals["CUDNN_MINOR"] * 100 + vals["CUDNN_PATCHLEVEL"]


def _find_cudnn(cuda_home: Path | None) -> tuple[Path, Path, str]:
    env = os.environ.get("CUDNN_PATH") or os.environ.get("CUDNN_HOME")
    if env:
        home = Path(env)
        if not (home / "include" / "cudnn.h").exists():
            raise BuildConfigError(f"CUDNN_PATH={env} has no include/cudnn.h")
        return home / "include", _lib_dir_of(home), "CUDNN_PATH"
    for nv in _site_nvidia_dirs():
        home = nv / "cudnn"
        if (home / "include" / "cudnn.h").exists():
            return home / "include", home / "lib", "nvidia-cudnn wheel beside torch"
    if cuda_home and (cuda_home / "include" / "cudnn.h").exists():
        return cuda_home / "include", _lib_dir_of(cuda_home), "CUDA_HOME"
    raise BuildConfigError(
        "cuDNN headers not found: set CUDNN_PATH, or install torch's nvidia-cudnn wheel, or put cudnn.h in CUDA_HOME"
    )


def _complete_cuda_headers(include: Path) -> bool:
    # the CUDA 13 runtime wheel ships cuda_runtime_api.h without the crt/ folder it includes
    return (include / "cuda_runtime_api.h").exists() and (include / "crt" / "host_defines.h").exists()


def _find_cuda(cuda_home: Path | None) -> tuple[Path, Path, str]:
    """(include dir, dir of the libcudart to link, description). The library is the one beside torch when there
    is one (the one torch loads); headers from wherever a complete set is (the toolkit, else a wheel)."""
    lib = None
    for nv in _site_nvidia_dirs():
        for home in sorted(nv.glob("cu[0-9]*")) + [nv / "cuda_runtime"]:
            if _libname(home / "lib", "cudart"):
                lib = lib or (home / "lib")
                if _complete_cuda_headers(home / "include"):
                    return home / "include", home / "lib", f"CUDA wheel beside torch ({home.name})"
    if cuda_home and _complete_cuda_headers(cuda_home / "include"):
        return cuda_home / "include", lib or _lib_dir_of(cuda_home), f"CUDA toolkit {cuda_home}"
    raise BuildConfigError(
        "complete CUDA runtime headers (cuda_runtime_api.h with crt/) not found: set CUDA_HOME to a CUDA toolkit"
    )


def _find_cupti(cuda_home: Path | None, cuda_inc: Path, cuda_lib: Path) -> tuple[Path, Path, str]:
    """(include dir with cupti.h, lib dir, -l name) of CUPTI. The library is the one torch links (libtorch_cuda needs
    libcupti from the nvidia-cuda-cupti wheel beside it), so the kernel clock and torch.profiler share one CUPTI."""
    libs = [cuda_lib] + [home / "lib" for nv in _site_nvidia_dirs() for home in sorted(nv.glob("cu[0-9]*"))
                         + [nv / "cuda_cupti"]]
    if cuda_home:
        libs += [cuda_home / "extras" / "CUPTI" / "lib64", _lib_dir_of(cuda_home)]
    lib = next(((d, n) for d in libs if d.is_dir() for n in [_libname(d, "cupti")] if n), None)
    if lib is None:
        raise BuildConfigError("libcupti not found beside torch (nvidia-cuda-cupti wheel) or in the CUDA toolkit")
    incs = [cuda_inc] + [home / "include" for nv in _site_nvidia_dirs() for home in sorted(nv.glob("cu[0-9]*"))
                         + [nv / "cuda_cupti"]]
    if cuda_home:
        incs += [cuda_home / "include", cuda_home / "extras" / "CUPTI" / "include"]
    inc = next((d for d in incs if (d / "cupti.h").exists()), None)
    if inc is None:
        raise BuildConfigError("cupti.h not found beside torch (nvidia-cuda-cupti wheel) or in the CUDA toolkit")
    return inc, lib[0], lib[1]


def find_build_config() -> BuildConfig:
    import torch

    if torch.version.cuda is None:
        raise BuildConfigError(f"torch {torch.__version__} is a CPU-only build; cudnn_algos needs a CUDA build of torch")
    cuda_home = _cuda_home()
    cudnn_inc, cudnn_lib, cudnn_src = _find_cudnn(cuda_home)
    cudnn_name = _libname(cudnn_lib, "cudnn")
    if cudnn_name is None:
        raise BuildConfigError(f"no libcudnn.so* in {cudnn_lib}")
    cuda_inc, cuda_lib, cuda_src = _find_cuda(cuda_home)
    cudart_name = _libname(cuda_lib, "cudart")
    if cudart_name is None:
        raise BuildConfigError(f"no libcudart.so* in {cuda_lib}")
    cupti_inc, cupti_lib, cupti_name = _find_cupti(cuda_home, cuda_inc, cuda_lib)
    return BuildConfig(
        cudnn_include=str(cudnn_inc),
        cudnn_lib=str(cudnn_lib),
        cudnn_libname=cudnn_name,
        cudnn_source=cudnn_src,
        cudnn_header_version=_header_version(cudnn_inc),
        cuda_include=str(cuda_inc),
        cuda_lib=str(cuda_lib),
        cudart_libname=cudart_name,
        cuda_source=cuda_src,
        cupti_include=str(cupti_inc),
        cupti_lib=str(cupti_lib),
        cupti_libname=cupti_name,
        torch_version=torch.__version__,
    )


def sources(root: Path) -> list[str]:
    return sorted(str(p) for p in (root / "csrc").rglob("*.cpp"))


STAMP = Path("build") / "bootstrap-sources.sha1"  # under the checkout: what the last build here was built from


def sources_digest(root: Path) -> str:
    """A digest of everything a build reads from the checkout (csrc/, this file, setup.py: paths and contents), so
    that scripts/bootstrap.sh rebuilds only when one changed (file times are no guide in a tree copied afresh)."""
    import hashlib

    files = sorted(p for p in (root / "csrc").rglob("*") if p.is_file())
    files += [root / "cudnn_algos" / "_build.py", root / "setup.py"]
    h = hashlib.sha1()
    for p in files:
        h.update(p.relative_to(root).as_posix().encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


if __name__ == "__main__":  # scripts/bootstrap.sh: `python cudnn_algos/_build.py digest`
    if sys.argv[1:] != ["digest"]:
        sys.exit("usage: python cudnn_algos/_build.py digest")
    print(sources_digest(Path(__file__).resolve().parent.parent))
