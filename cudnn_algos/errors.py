"""The package's exception types. Importing this module needs neither a GPU nor the extension."""
from __future__ import annotations


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


class CudaError(RuntimeError):
    """A CUDA runtime call failed; ``error`` is CUDA's error name, e.g. ``"cudaErrorInvalidDevice"``."""

    def __init__(self, message: str, error: str = ""):
        super().__init__(message)
        self.error = error


class CudaUnavailableError(RuntimeError):
    """No usable CUDA GPU: says what was looked for and what was found."""


class ExtensionUnavailableError(ImportError):
    """The C++ extension cudnn_algos._C is neither built nor buildable here; the message says why."""
