"""The JSON codec of every result type: ``@register`` names a type by its ``KIND``; ``to_dict``/``encode`` write
dataclasses as JSON-ready data with ``schema`` and ``kind``; ``from_dict``/``load_json`` read any of them back into
equal objects (one decoder per type, worked out once). ``Saved`` gives a result type ``to_dict``/``to_json``."""
from __future__ import annotations

import dataclasses
import functools
import json
import types
import typing
from dataclasses import fields
from typing import Any, Callable

from ..errors import ResultFileError
from ..files import atomic_write, read_json_object

SCHEMA_VERSION = 3

_KINDS: dict[str, type] = {}  # KIND -> result type (register)


def register(cls: type) -> type:
    """Class decorator: `cls` is saved and loaded under its ``KIND`` (one name per type, checked)."""
    kind = cls.KIND
    if _KINDS.get(kind, cls) is not cls:
        raise TypeError(f"result kind {kind!r} is registered twice: {_KINDS[kind].__name__} and {cls.__name__}")
    _KINDS[kind] = cls
    return cls


def encode(v: Any) -> Any:
    """JSON-ready data of a result object (dataclasses as dicts, tuples as lists; live plans left out)."""
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return {f.name: encode(getattr(v, f.name)) for f in fields(v) if f.metadata.get("saved", True)}
    if isinstance(v, (tuple, list)):
        return [encode(x) for x in v]
    if isinstance(v, dict):
        return {str(k): encode(x) for k, x in v.items()}
    return v


def to_dict(obj: Any) -> dict[str, Any]:
    """A result as JSON-ready data, with ``schema`` and ``kind`` so that load_json knows what it holds."""
    return {"schema": SCHEMA_VERSION, "kind": obj.KIND, **encode(obj)}


def decode(tp: Any, v: Any) -> Any:
    """The object of type `tp` that encode() wrote as `v` (keys it does not know are ignored)."""
    return _decoder(tp)(v)


@functools.lru_cache(maxsize=None)
def _decoder(tp: Any) -> Callable[[Any], Any]:
    """decode() for one type, worked out once per type (type hints, origins, field lists) instead of once per
    value: that work was most of loading a large result."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return _decoder(args[0])
        dcs = [a for a in args if dataclasses.is_dataclass(a)]
        if dcs:
            inner = _decoder(dcs[0])
            return lambda v: None if v is None else inner(v) if isinstance(v, dict) else _tuples(v)
        return _tuples  # e.g. ConvSpec's `tuple | int | str` fields
    if dataclasses.is_dataclass(tp):
        return _dataclass_decoder(tp)
    if origin is tuple:
        args = typing.get_args(tp)
        if len(args) == 2 and args[1] is Ellipsis:
            item = _decoder(args[0])
            return lambda v: None if v is None else tuple(item(x) for x in v)
        if args:
            items = [_decoder(a) for a in args]
            return lambda v: None if v is None else tuple(f(x) for f, x in zip(items, v))
        return lambda v: None if v is None else tuple(v)
    if origin is dict:
        value = _decoder(typing.get_args(tp)[1])
        return lambda v: None if v is None else {k: value(x) for k, x in v.items()}
    if tp is float:
        return lambda v: float(v) if isinstance(v, int) and not isinstance(v, bool) else v
    return lambda v: v


def _dataclass_decoder(tp: type) -> Callable[[Any], Any]:
    fields_: list[tuple[str, Callable[[Any], Any]]] = []  # filled at the first call (types may refer to each other)

    def dec(v: Any) -> Any:
        if v is None:
            return None
        if not isinstance(v, dict):
            raise ValueError(f"a {tp.__name__} is a JSON object, not {type(v).__name__}")
        if not fields_:  # one assignment: a second thread racing here computes the same list
            hints = typing.get_type_hints(tp)
            fields_[:] = [(f.name, _decoder(hints[f.name])) for f in fields(tp)
                          if f.init and f.metadata.get("saved", True)]
        return tp(**{name: f(v[name]) for name, f in fields_ if name in v})

    return dec


def _tuples(v: Any) -> Any:
    return tuple(_tuples(x) for x in v) if isinstance(v, list) else v  # (None stays None)


def from_dict(d: dict[str, Any]) -> Any:
    """The result object a to_dict() wrote; ValueError naming the schema when it was written by another version,
    or saying what is wrong when the content is not a result's (a field of the wrong type)."""
    if not isinstance(d, dict):
        raise ValueError(f"a saved result is a JSON object, not {type(d).__name__}")
    schema, kind = d.get("schema"), d.get("kind")
    if "schema" not in d and "traceEvents" in d:
        raise ValueError("this is a Chrome trace (show --trace writes them), not a saved result: open it in Perfetto "
                         "or chrome://tracing")
    if schema != SCHEMA_VERSION or kind not in _KINDS:
        raise ValueError(f"this file holds result schema {schema!r} (kind {kind!r}); this version of cudnn_algos reads "
                         f"schema {SCHEMA_VERSION} ({', '.join(_KINDS)}): re-run the search to compare")
    try:
        return decode(_KINDS[kind], d)
    except (TypeError, AttributeError, KeyError, IndexError, ValueError, RecursionError) as e:
        raise ValueError(f"not a valid saved {kind}: {type(e).__name__}: {str(e)[:200]}") from None


def write_json(d: dict[str, Any], path: str | None = None, **kwargs: Any) -> str:
    """JSON text of `d` (strict: no NaN), also written to `path` when given (gzip-compressed for a .gz path), to a
    temporary file renamed over it (a crash leaves the old file or the new one)."""
    text = json.dumps(d, indent=kwargs.pop("indent", 1), allow_nan=False, **kwargs)
    if path is not None:
        atomic_write(path, text)
    return text


def read_json(source: str) -> dict[str, Any]:
    """A JSON object from a string holding it or from a file path (gzip read by its first bytes, inflation
    bounded: cudnn_algos.files.read_text). ResultFileError names a file that is not one."""
    if source.lstrip().startswith("{"):
        return json.loads(source)
    return read_json_object(source)


def load_json(source: str) -> Any:
    """Reads what any result's ``to_json`` wrote (a JSON string or a file path) back into an equal object.
    ResultFileError (a ValueError) names a file that is damaged, foreign or not a result, and says what was
    wrong."""
    d = read_json(source)
    try:
        return from_dict(d)
    except ValueError as e:
        if source.lstrip().startswith("{"):
            raise
        raise ResultFileError(source, str(e)) from None



class Saved:
    """Saving to JSON (``to_dict``/``to_json``; gzip for a .gz path): what every result type shares. load_json reads
    any of them back."""

    def to_dict(self) -> dict[str, Any]:
        return to_dict(self)

    def to_json(self, path: str | None = None, **kwargs: Any) -> str:
        return write_json(self.to_dict(), path, **kwargs)

    @classmethod
    def load(cls, source: str) -> Any:
        """What load_json reads from `source`, when it is one of these (ValueError naming what it is otherwise)."""
        obj = load_json(source)
        if not isinstance(obj, cls):
            raise ValueError(f"{source!r} holds a {type(obj).__name__}, not a {cls.__name__}")
        return obj
