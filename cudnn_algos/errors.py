"""The package's exception types. Importing this module needs neither a GPU, nor the extension, nor torch:
``CudnnOutOfMemoryError`` (also a torch.OutOfMemoryError) is made at its first use, when torch is loaded."""
from __future__ import annotations

from typing import Any


class CudnnError(RuntimeError):
    """A cuDNN call failed as a whole (not one algorithm of a search: those are rows with a status).

    ``status`` is cuDNN's status name, e.g. ``"CUDNN_STATUS_BAD_PARAM"``; ``code`` its number.
    """

    def __init__(self, message: str, status: str = "", code: int = -1):
        super().__init__(message)
        self.status = status
        self.code = code

    def __reduce__(self):
        return (type(self), (str(self), self.status, self.code))


# the status that means "no device memory" (cuDNN 9's 4004; ALLOC_FAILED is now a name of the host-memory one)
_DEVICE_OOM = ("CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED",)


def cudnn_error(message: str, status: str = "", code: int = -1) -> CudnnError:
    """The exception for a failed cuDNN call (the extension raises what this returns)."""
    cls = _oom_class() if status in _DEVICE_OOM else CudnnError
    return cls(message, status, code)


def _oom_class() -> type:
    """CudnnOutOfMemoryError, made once: a CudnnError that is also a torch.OutOfMemoryError, so that it subclasses
    torch's class without this module importing torch."""
    cls = globals().get("CudnnOutOfMemoryError")
    if cls is None:
        import torch

        class CudnnOutOfMemoryError(CudnnError, torch.OutOfMemoryError):
            """cuDNN could not allocate device memory for a call it allocates for itself (``find`` in mode "find":
            cuDNN's own search allocates its operands and workspaces). Both a :class:`CudnnError` with the status
            and a ``torch.OutOfMemoryError``, so code that frees memory and retries on torch's out-of-memory error
            catches it."""

        CudnnOutOfMemoryError.__module__ = __name__
        CudnnOutOfMemoryError.__qualname__ = "CudnnOutOfMemoryError"
        cls = globals()["CudnnOutOfMemoryError"] = CudnnOutOfMemoryError
    return cls


def __getattr__(name: str) -> Any:
    if name == "CudnnOutOfMemoryError":
        return _oom_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class CudaError(RuntimeError):
    """A CUDA runtime call failed; ``error`` is CUDA's error name, e.g. ``"cudaErrorInvalidDevice"``."""

    def __init__(self, message: str, error: str = ""):
        super().__init__(message)
        self.error = error


# what CUDA says when a kernel faulted: the error stays with the process's CUDA context for its life (Note [a lost
# context]); matched in the message, as torch raises these as AcceleratorError/RuntimeError text
_STICKY = ("illegal memory access", "cudaErrorIllegalAddress", "unspecified launch failure", "cudaErrorLaunchFailure",
           "misaligned address", "cudaErrorMisalignedAddress", "illegal instruction", "cudaErrorIllegalInstruction",
           "hardware stack error", "device-side assert", "uncorrectable ECC")


def is_context_lost(e: BaseException) -> bool:
    """Whether `e` is CUDA reporting a faulted kernel (an illegal address, a launch failure, ...): after it, every
    GPU call of this process fails the same way."""
    return isinstance(e, CudaContextLost) or any(s in str(e) for s in _STICKY)


class CudaContextLost(CudaError):
    """A kernel faulted (an illegal memory access, a launch failure) and the process's CUDA context is lost: CUDA
    keeps the error for the life of the process, so no more GPU work can run in it; a fresh process can.

    Note [a lost context]: CUDA reports a fault at the next call that synchronizes, so ``culprit`` (what was
    running when it was reported: a problem, direction and configuration) is that call or the one before it. A
    search raises this instead of turning every later candidate into a failed row; a profile stops with it, a sweep
    stores the task as failed with it and restarts the worker."""

    def __init__(self, message: str, error: str = "", culprit: str = ""):
        super().__init__(message, error)
        self.culprit = culprit

    def __reduce__(self):
        return (type(self), (str(self), self.error, self.culprit))

    @classmethod
    def after(cls, culprit: str, e: BaseException) -> "CudaContextLost":
        first = str(e).strip().splitlines()[0][:200] if str(e).strip() else type(e).__name__
        return cls(f"the CUDA context is lost ({type(e).__name__}: {first}) while running {culprit}: a kernel "
                   "faulted (CUDA reports a fault at the next synchronizing call: this one or the one before); "
                   "this process can run no more GPU work, a fresh one can", "context lost", culprit)


class CudaUnavailableError(RuntimeError):
    """No usable CUDA GPU: says what was looked for and what was found."""


class ExtensionUnavailableError(ImportError):
    """The C++ extension cudnn_algos._C is neither built nor buildable here; the message says why."""


class _AboutAFile:
    """An error about one file: ``path`` names it, ``reason`` says what was wrong; the message is
    ``<what><path>: <reason>``."""

    _what = ""

    def __init__(self, path: str, reason: str):
        super().__init__(f"{self._what}{path}: {reason}")
        self.path, self.reason = str(path), reason

    def __reduce__(self):
        return (type(self), (self.path, self.reason))


class ResultFileError(_AboutAFile, ValueError):
    """A saved result or results store that cannot be read: damaged (cut short, not JSON, a bad gzip stream),
    foreign (another program's file, another schema) or refused (it would inflate past the stated limit)."""


class TuningDBError(_AboutAFile, RuntimeError):
    """The tuning database at ``path`` cannot be used as asked; the message says why and what to do. Nothing
    stored is lost when this is raised: a file that is not ours is never written, moved or deleted."""

    _what = "tuning database "


class TuningDBUnavailable(TuningDBError):
    """The path cannot hold a database: a directory, a path with no file name, no permission, no file
    descriptors left."""


class TuningDBLocked(TuningDBError):
    """Another connection held the database locked for longer than the timeout."""


class TuningDBReadOnly(TuningDBError):
    """A write (put, clear, import, reselect) to a database opened read-only (the file or its directory is not
    writable); reads work."""


class TuningDBForeign(TuningDBError):
    """An SQLite database that is not a cudnn_algos tuning database (another program's), or one of another schema
    version: refused, never written."""


class TuningDBDamaged(TuningDBError):
    """The database's pages are damaged (SQLite: "database disk image is malformed"). Opening it again moves it
    aside (with its -wal and -shm files) and starts a fresh one."""
