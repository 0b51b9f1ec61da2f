"""Files the package writes and reads: atomic writes (a temporary file, then a rename), bounded reading of JSON
that may be gzip-compressed, and the check that no output is written over an input."""
from __future__ import annotations

import errno
import gzip
import io
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from .errors import ResultFileError

MAX_INFLATED = 2 << 30  # bytes a compressed result may inflate to: 2 GiB
MAX_RATIO = 100  # ... and at most this many times its compressed size
GZIP_MAGIC = b"\x1f\x8b"


def atomic_write(path: str | os.PathLike, data: str | bytes) -> None:
    """Writes `data` to a temporary file beside `path`, flushes it to disk and renames it over `path`: a reader
    (or a crash) sees the old file or the new one, never half of one. A .gz path is gzip-compressed."""
    path = Path(path)
    raw = data.encode() if isinstance(data, str) else data
    if path.suffix == ".gz":
        raw = gzip.compress(raw, mtime=0)
    try:
        mode = os.stat(path).st_mode & 0o7777  # the file it replaces keeps its permissions
    except OSError:
        mode = 0o666 & ~_umask()  # a new one gets what open() would give it (mkstemp's is 0600)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=str(path.parent or "."))
    except FileNotFoundError:  # named for the caller's path, not the hidden temporary file's
        raise FileNotFoundError(errno.ENOENT, f"the directory {path.parent} does not exist", str(path)) from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
            f.flush()
            os.fchmod(f.fileno(), mode)
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _umask() -> int:
    """The process's umask: read from /proc where there is one (setting it to read it, the fallback, changes it for
    every thread for a moment)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def read_text(path: str | os.PathLike, limit: int | None = None) -> str:
    """The text of a file, gunzipped when it is gzip (by its first bytes, whatever its name), refusing to inflate
    past min(MAX_INFLATED, MAX_RATIO x its size) bytes. ResultFileError names the file and what was wrong."""
    p = str(path)
    if os.path.isdir(p):
        raise ResultFileError(p, "is a directory, not a saved result")
    try:
        with open(p, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        raise  # the caller says "no such file" its own way
    except OSError as e:
        raise ResultFileError(p, f"cannot be read: {e.strerror or e}") from None
    if raw[:2] == GZIP_MAGIC:
        cap = limit if limit is not None else min(MAX_INFLATED, max(MAX_RATIO * len(raw), 1 << 20))
        out = io.BytesIO()
        try:
            with gzip.GzipFile(fileobj=io.BytesIO(raw)) as g:
                while True:
                    chunk = g.read(1 << 20)
                    if not chunk:
                        break
                    out.write(chunk)
                    if out.tell() > cap:
                        raise ResultFileError(p, f"inflates past {cap:,} bytes ({len(raw):,} compressed): refused "
                                                 f"(at most {MAX_RATIO}x the file and {MAX_INFLATED >> 30} GiB)")
        except ResultFileError:
            raise
        except (EOFError, gzip.BadGzipFile, OSError, ValueError) as e:
            raise ResultFileError(p, f"is a damaged gzip stream ({type(e).__name__}: {e}); cut short by a copy "
                                     "or a kill?") from None
        raw = out.getvalue()  # (a file named .gz that is not gzip is read as it is)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ResultFileError(p, f"is not UTF-8 text (byte {e.start}): not a saved result") from None


def read_json_object(path: str | os.PathLike) -> dict[str, Any]:
    """A JSON object from a file (see read_text); ResultFileError when it is not one."""
    text = read_text(path)
    try:
        d = json.loads(text)
    except RecursionError:
        raise ResultFileError(str(path), "is nested too deeply to be a saved result") from None
    except ValueError as e:
        raise ResultFileError(str(path), f"is not JSON ({e}); cut short?") from None
    if not isinstance(d, dict):
        raise ResultFileError(str(path), f"holds a JSON {type(d).__name__}, not a saved result (an object)")
    return d


def same_file(a: str | os.PathLike, b: str | os.PathLike) -> bool:
    """Whether two paths name one file (the same resolved path, or the same inode where both exist)."""
    pa, pb = Path(a).expanduser(), Path(b).expanduser()
    try:
        if pa.exists() and pb.exists():
            return os.path.samefile(pa, pb)
    except OSError:
        pass
    return pa.resolve() == pb.resolve()


def check_distinct(inputs: dict[str, Any], outputs: dict[str, Any]) -> None:
    """ValueError naming both when an output path is an input path (or an SQLite database's -wal/-shm), or two
    outputs are one file: checked before anything is written."""
    ins = [(k, str(v)) for k, v in inputs.items() if v]
    outs = [(k, str(v)) for k, v in outputs.items() if v]
    for i, (k, v) in enumerate(outs):
        for k2, v2 in ins + outs[:i]:
            for suffix in ("", "-wal", "-shm", "-journal"):
                if same_file(v, v2 + suffix):
                    raise ValueError(f"{k} {v} would be written over {k2} {v2}: give another path")


def writable_dir_of(flag: str, path: Any) -> None:
    """ValueError naming `flag` when `path` cannot be written: its directory is missing or not writable, or the
    path is a directory. Checked before the work that produces it."""
    if not path:
        return
    p = Path(str(path)).expanduser()
    if p.is_dir():
        raise ValueError(f"{flag} {path} is a directory: give a file path")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise ValueError(f"{flag} {path}: the directory {parent} does not exist")
    if not os.access(parent, os.W_OK):
        raise ValueError(f"{flag} {path}: the directory {parent} is not writable")


def writable_dir(flag: str, path: Any) -> None:
    """ValueError naming `flag` when `path` cannot become or be a directory of output files: an existing file, an
    unwritable directory, or no writable ancestor to make it in."""
    if not path:
        return
    p = Path(str(path)).expanduser()
    if p.exists() and not p.is_dir():
        raise ValueError(f"{flag} {path} is a file: give a directory")
    q = p
    while not q.exists() and q != q.parent:
        q = q.parent
    if not os.access(q, os.W_OK):
        raise ValueError(f"{flag} {path}: {q} is not writable")
