"""``cudnn_algos.info()``: what the package sees — GPUs, versions, where cuDNN came from, the extension's state."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import torch


@dataclass(frozen=True)
class Info:
    package_version: str
    torch_version: str
    torch_cuda: str | None
    torch_cudnn: int | None  # torch.backends.cudnn.version()
    cudnn_library: str | None  # the libcudnn.so the process loaded
    extension: str  # "installed (<file>)", "jit (<file>)", or "unavailable: <why>"
    extension_versions: dict = field(default_factory=dict)
    build_config: str = ""
    gpus: tuple[str, ...] = ()
    driver_version: str | None = None
    cudnn_handle: str = ""  # status of creating a cuDNN handle on GPU 0 ("SUCCESS" when usable)

    def __str__(self) -> str:
        from .environment import Environment

        v = self.extension_versions
        lines = [
            f"cudnn_algos {self.package_version}",
            f"torch        {self.torch_version} (CUDA {self.torch_cuda}, cuDNN "
            f"{Environment.version_str(self.torch_cudnn) if self.torch_cudnn else 'none'})",
            f"libcudnn     {self.cudnn_library or 'not loaded'}",
            f"extension    {self.extension}",
        ]
        if v:
            lines.append(
                f"             built against cuDNN {Environment.version_str(v['cudnn_build'])} and torch "
                f"{v['torch_build']}; running cuDNN {Environment.version_str(v['cudnn_runtime'])}, CUDA runtime "
                f"{_cuda_version(v['cuda_runtime'])}, driver API {_cuda_version(v['cuda_driver'])}"
            )
        if self.build_config:
            lines.append(f"build        {self.build_config}")
        lines.append(f"driver       {self.driver_version or 'not found'}")
        if self.gpus:
            lines += [f"GPU {i}        {g}" for i, g in enumerate(self.gpus)]
            lines.append(f"cuDNN handle {self.cudnn_handle}")
        else:
            lines.append("GPUs         none visible (torch.cuda.is_available() is False)")
        return "\n".join(_fit(lines))


def info() -> Info:
    """Never raises for a missing GPU or extension: it reports them."""
    from . import __version__, _build, backend
    from .problem import driver_release, loaded_cudnn_library

    cudnn_v = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    try:
        ext = backend.load()
        ext_state = f"{backend.how_loaded()} ({getattr(ext, '__file__', '?')})"
        versions = dataclasses.asdict(backend.versions())
    except Exception as e:  # report, don't raise
        ext, ext_state, versions = None, f"unavailable: {e}", {}
    try:
        build = _build.find_build_config().summary()
    except Exception as e:
        build = f"no build configuration: {e}"
    gpus: tuple[str, ...] = ()
    handle = ""
    if torch.cuda.is_available():
        gpus = tuple(
            f"{p.name} (sm_{p.major}{p.minor}, {p.total_memory / 2**30:.0f} GiB)"
            for p in (torch.cuda.get_device_properties(i) for i in range(torch.cuda.device_count()))
        )
        handle = backend.probe_handle(0) if ext is not None else "extension unavailable"
    return Info(
        package_version=__version__,
        torch_version=torch.__version__,
        torch_cuda=torch.version.cuda,
        torch_cudnn=cudnn_v,
        cudnn_library=loaded_cudnn_library(),
        extension=ext_state,
        extension_versions=versions,
        build_config=build,
        gpus=gpus,
        driver_version=driver_release(),
        cudnn_handle=handle,
    )


def _cuda_version(v: int) -> str:
    """CUDA's integer version (13000) as people write it (13.0); 0 means no driver was found."""
    return f"{v // 1000}.{v % 1000 // 10}" if v else "none (no driver)"


def _fit(lines: list[str], width: int = 120) -> list[str]:
    """Lines of `width` at most: a longer one continues under its value (13 columns in), broken between words and
    after "; " — paths stay whole."""
    import textwrap

    out: list[str] = []
    for line in lines:
        if len(line) <= width:
            out.append(line)
            continue
        head, rest = line[:13], line[13:]
        pieces = rest.split("; ")
        parts = [p + ";" for p in pieces[:-1]] + pieces[-1:]
        first = True
        for part in parts:
            for w in textwrap.wrap(part, width - 13, break_long_words=False, break_on_hyphens=False):
                out.append((head if first else " " * 13) + w)
                first = False
    return out
