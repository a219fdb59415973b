"""JSON bytes exactly as the original (JavaScript) tools write them.

AgentUse writes ``JSON.stringify(x, null, 2)`` (two-space indent, no trailing
newline); skilled_crew writes ``JSON.stringify(x)`` (compact). Both print
non-ASCII as-is, integral numbers without ``.0`` and NaN/Infinity as ``null``.

Values JSON has no form for never make a write fail (see docs/formats.md):
a container that contains itself is cut with ``"[Circular]"``, one nested
deeper than :data:`MAX_DEPTH` levels with ``"[Too deep]"``, bytes are decoded
as UTF-8 with replacement, keys that are not strings, numbers, booleans or
null become their ``str()``, other objects their ``str()`` (``repr()``, then
``<TypeName>``, when that raises), lone surrogates are escaped (``\\ud800``).

:func:`loads` reads back everything written here, lone surrogate escapes included.
"""

from __future__ import annotations

import json
import math
from typing import Any

import orjson

__all__ = ["CIRCULAR", "MAX_DEPTH", "TOO_DEEP", "dumps_compact", "dumps_pretty", "js_values",
           "loads", "safe_str"]


CIRCULAR = "[Circular]"
TOO_DEEP = "[Too deep]"
# Containers nested deeper than this are cut (orjson stops at 255 levels, and
# Python's own encoders at its recursion limit).
MAX_DEPTH = 200


def safe_str(value: Any) -> str:
    """``str(value)``; its ``repr()`` when that raises, else ``<TypeName>``. Never raises."""
    try:
        return str(value)
    except Exception:
        pass
    try:
        return repr(value)
    except Exception:
        return f"<{type(value).__name__}>"


def _js_key(key: Any) -> Any:
    """A dict key both encoders accept: str, int, bool and None as they are; floats as
    JavaScript prints them; anything else as its ``str()``."""
    if key is None or isinstance(key, (str, int)):
        return key
    if isinstance(key, float):
        if math.isnan(key):
            return "NaN"
        if math.isinf(key):
            return "Infinity" if key > 0 else "-Infinity"
        return str(int(key)) if key.is_integer() else repr(key)
    return safe_str(key)


def js_values(value: Any, _path: frozenset[int] = frozenset()) -> Any:
    """Return a copy of ``value`` with numbers as JavaScript would print them.

    Integral floats become ints (``1.0`` -> ``1``), non-finite floats become
    ``None``, a container that contains itself is cut at the repeat with the
    string ``"[Circular]"``, one below :data:`MAX_DEPTH` levels with
    ``"[Too deep]"``, and dict keys JSON cannot hold become strings.
    """
    if isinstance(value, float):
        if not math.isfinite(value):
            return None
        return int(value) if value.is_integer() else value
    if isinstance(value, (dict, list, tuple)):
        if id(value) in _path:
            return CIRCULAR
        if len(_path) >= MAX_DEPTH:
            return TOO_DEEP
        inner = _path | {id(value)}
        if isinstance(value, dict):
            return {_js_key(k): js_values(v, inner) for k, v in value.items()}
        return [js_values(v, inner) for v in value]
    return value


def _unknown(value: Any) -> Any:
    """Fallback for objects JSON has no form for: their ``str`` (never raises)."""
    if isinstance(value, (set, frozenset)):
        return js_values(list(value))
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).decode("utf-8", "replace")
    return safe_str(value)


def _dumps(value: Any, option: int, indent: int | None) -> bytes:
    value = js_values(value)
    try:
        return orjson.dumps(value, default=_unknown, option=option)
    except (TypeError, orjson.JSONEncodeError):
        # Lone surrogates or integers beyond 64 bits: the stdlib encoder
        # escapes what orjson refuses, as JSON.stringify does.
        separators = (",", ": ") if indent else (",", ":")
        text = json.dumps(value, default=_unknown, indent=indent, separators=separators,
                          ensure_ascii=True)
        return text.encode("ascii")


def dumps_pretty(value: Any) -> bytes:
    """Two-space indented JSON with no trailing newline (AgentUse files)."""
    return _dumps(value, orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS, 2)


def dumps_compact(value: Any) -> bytes:
    """Compact one-line JSON (JSONL lines and SQLite item rows)."""
    return _dumps(value, orjson.OPT_NON_STR_KEYS, None)


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def loads(data: bytes | str) -> Any:
    """Parse JSON (orjson), falling back to the standard parser for what orjson refuses
    but JSON allows: lone surrogate escapes (``"\\ud800"``, which :func:`dumps_compact`
    writes for a string holding one) and numbers beyond a double. ``NaN`` and
    ``Infinity`` literals stay refused. Raises ValueError."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as error:
        try:
            text = data.decode("utf-8") if isinstance(data, (bytes, bytearray)) else data
            return json.loads(text, parse_constant=_refuse_constant)
        except (ValueError, RecursionError):
            raise error from None
