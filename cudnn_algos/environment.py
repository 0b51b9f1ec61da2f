"""Where a search ran (``Environment``): the GPU and every version a saved result is compared by, and its
``key()``, what a stored result or winner must match to be reused. No torch import: saved results load without it
(``backend.environment(device)`` fills one in for this process)."""
from __future__ import annotations

import functools
import os
from dataclasses import dataclass


@dataclass(frozen=True)
class Environment:
    """Where a search ran, so that a saved result can be compared later."""

    gpu_name: str
    compute_capability: str
    device_index: int
    driver_version: str | None  # the NVIDIA driver release, e.g. "580.159.04", when readable
    cuda_driver_api: int  # cudaDriverGetVersion, e.g. 13000
    cuda_runtime: int
    cudnn_runtime: int  # cudnnGetVersion of the loaded library, e.g. 91900
    cudnn_build: int  # CUDNN_VERSION the extension was compiled against
    cudnn_library: str | None  # path of the libcudnn the process loaded
    torch_version: str
    torch_cuda: str | None
    package_version: str = ""  # cudnn_algos's version
    hostname: str = ""
    git_commit: str = ""  # of the cudnn_algos checkout, when it is one

    def key(self) -> str:
        """What must match for a stored result or winner to be reused: the GPU and every version that can change
        the answer (the tuning database's and the results store's key)."""
        return (f"{self.gpu_name}|sm{self.compute_capability}|driver {self.driver_version or self.cuda_driver_api}"
                f"|cuda {self.cuda_runtime}|cudnn {self.cudnn_runtime}|torch {self.torch_version}")

    def selector_family(self) -> str:
        """The environment family a selector is trained for (selector_family)."""
        return selector_family(self.compute_capability, self.version_str(self.cudnn_runtime))

    @staticmethod
    def version_str(v: int) -> str:
        return f"{v // 10000}.{v % 10000 // 100}.{v % 100}" if v >= 10000 else str(v)


def selector_family(compute_capability: str, cudnn: str) -> str:
    """GPU architecture x cuDNN major.minor, e.g. ("9.0", "9.19.0") -> "sm_90-cudnn-9.19": what a selector is
    trained for (engine ids and their knobs are cuDNN's, their speeds the architecture's), spelled as the dataset's
    directory (data/sm_90-cudnn-9.19) and the shipped model's file name are."""
    return family_name(f"sm_{str(compute_capability).replace('.', '')} cudnn {'.'.join(str(cudnn).split('.')[:2])}")


def family_name(text: str) -> str:
    """An environment family in its one spelling: "sm_90 cudnn 9.19" (how model files before 2026-12-04 wrote it)
    -> "sm_90-cudnn-9.19"."""
    return "-".join(str(text).split())


def driver_release() -> str | None:
    try:
        with open("/proc/driver/nvidia/version") as f:
            for tok in f.read().split():
                if tok.count(".") >= 1 and tok.replace(".", "").isdigit():
                    return tok
    except OSError:
        pass
    try:
        import pynvml  # nvidia-ml-py

        pynvml.nvmlInit()
        v = pynvml.nvmlSystemGetDriverVersion()
        return v.decode() if isinstance(v, bytes) else v
    except Exception:
        return None


def loaded_cudnn_library() -> str | None:
    """Path of the libcudnn.so the process has loaded (from /proc/self/maps), if any."""
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.split()[-1] if line.strip() else ""
                if os.path.basename(path).startswith("libcudnn.so"):
                    return path
    except OSError:
        pass
    return None


@functools.lru_cache(maxsize=None)
def git_commit() -> str:
    """The cudnn_algos checkout's commit (+dirty), or '' when it is not a git checkout."""
    import subprocess

    here = os.path.dirname(os.path.abspath(__file__))
    if not os.path.exists(os.path.join(os.path.dirname(here), ".git")):
        return ""
    try:
        r = subprocess.run(["git", "-C", here, "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5)
        dirty = subprocess.run(["git", "-C", here, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=5).stdout.strip()
        return (r.stdout.strip() + ("+dirty" if dirty else "")) if r.returncode == 0 else ""
    except (OSError, subprocess.SubprocessError):
        return ""


def package_version() -> str:
    from . import __version__

    return __version__
