"""The one progress bar of long jobs (profile, tune): tqdm on stderr when it is installed and wanted, else
nothing; the job's code reads the same either way."""
from __future__ import annotations

import sys
from typing import Any


class Progress:
    """A bar of `total` steps named `desc`; ``update(text)`` advances one step and shows `text` beside it.
    Disabled (``enabled=False``, no steps, or tqdm missing), every method does nothing."""

    def __init__(self, total: int, enabled: bool, desc: str, unit: str = "step"):
        self.bar: Any = None
        if not enabled or total <= 0:
            return
        try:
            from tqdm.auto import tqdm
        except ImportError:
            return
        self.bar = tqdm(total=total, desc=desc, unit=unit, file=sys.stderr)

    def update(self, text: str = "") -> None:
        if self.bar is not None:
            if text:
                self.bar.set_postfix_str(text, refresh=False)
            self.bar.update(1)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
